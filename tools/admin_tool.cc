// Copyright (c) fencedkv authors.

#include "admin_tool.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "fencedkv/version.h"

#include "db/read_only_store.h"
#include "util/help_flags.h"

DEFINE_string(db, "", "The database directory");
DEFINE_bool(hex, false,
            "Keys and values in hex (0x...), in output and in KEY arguments");
DEFINE_string(from, "",
              "scan/dump: the first key (inclusive; in hex with --hex)");
DEFINE_string(to, "",
              "scan/dump: the key to stop at (exclusive; in hex with --hex)");
DEFINE_int64(limit, -1,
             "scan/dump/fence list: at most this many lines; -1 = all "
             "(other negatives are refused)");
DEFINE_int64(max_keys, -1, "Same as --limit (ldb's spelling)");
DEFINE_string(prefix, "",
              "fence list: only domains starting with this (in hex with "
              "--hex)");
DEFINE_string(server, "",
              "checkpoint/backup: host:port of a running fencedkv-server to "
              "copy online (the paths are on the server's machine; the "
              "server copies its own database, so --db is refused with it)");
DEFINE_string(user, "", "With --server: AUTH user (ACL), with --password");
DEFINE_string(password, "",
              "With --server: AUTH password (visible in ps: prefer the "
              "REDISCLI_AUTH environment variable, as redis-cli)");
DEFINE_string(backup_dir, "",
              "backup/backups/restore: the backup directory (a directory of "
              "its own; one fencedkv-admin at a time, see --help)");
DEFINE_int64(backup_id, 0,
             "restore: the backup to restore; 0 = the latest (refused if "
             "that one is damaged)");
DEFINE_string(fence_floor, "",
              "restore: the fence floor N put in force in the restored copy "
              "(required; see --help)");
DEFINE_bool(verify, false,
            "backup/backups/restore: check every backup file against its "
            "checksum");
DEFINE_string(output, "-", "export: the file to write; - = stdout");
DEFINE_string(input, "-", "import: the file to read; - = stdin");
DEFINE_string(set_node_id, "",
              "replication: the node id (32 lowercase hex digits) to put in "
              "the stopped server's NODE_ID");
DEFINE_bool(leave_shard, false,
            "replication: take the stopped server's database out of its "
            "etcd shard (it may then start without --shard)");
DEFINE_int64(timeout_ms, 3600 * 1000,
             "With --server: how long to wait for the server's checkpoint or "
             "backup to finish (> 0; when it runs out, exit 1 and the job "
             "goes on on the server)");

namespace {

// Flag values no verb can use, refused while flags are parsed (gflags then
// exits 1), before anything runs.
bool ValidateTimeout(const char* flag, int64_t v) {
  if (v > 0) return true;
  std::fprintf(stderr, "Invalid value for --%s: %lld (must be above 0)\n", flag,
               static_cast<long long>(v));
  return false;
}
bool ValidateLimit(const char* flag, int64_t v) {
  if (v >= -1) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: %lld (-1 = all, else 0 or more)\n",
               flag, static_cast<long long>(v));
  return false;
}
const bool kValidatorsRegistered = [] {
  gflags::RegisterFlagValidator(&FLAGS_timeout_ms, &ValidateTimeout);
  gflags::RegisterFlagValidator(&FLAGS_limit, &ValidateLimit);
  gflags::RegisterFlagValidator(&FLAGS_max_keys, &ValidateLimit);
  return true;
}();

}  // namespace

namespace fencedkv {
namespace admin {

namespace {

// Every flag defined above (the ones a verb may or may not accept).
const char* const kAllFlags[] = {
    "hex",    "from",   "to",       "limit",      "max_keys",    "prefix",
    "server", "user",   "password", "backup_dir", "backup_id",   "fence_floor",
    "verify", "output", "input",    "timeout_ms", "set_node_id", "leave_shard"};

const char kUsageHead[] =
    "fencedkv-admin: inspect, check, back up and restore a fencedkv store "
    "(like RocksDB's ldb)\n"
    "usage: fencedkv-admin --db=DIR VERB [ARGS] [--flags]   (flags may come "
    "anywhere; put -- before a KEY that starts with -)\n\n"
    "Read-only verbs open DIR with RocksDB's OpenForReadOnly: no lock, "
    "nothing written, so they\nwork on a directory a running server holds "
    "open (they see it as it was when they opened it).\n\n";

const char kUsageTail[] =
    "\nOutput: keys and values are escaped (printable ASCII as is; \\\", \\\\ "
    "and \\xNN for other bytes),\nor 0x-hex with --hex.\n\n"
    "Restore and the fence floor: restore refuses to run without "
    "--fence_floor=N, where N is at\nleast every token that may have been "
    "issued since the backup was taken:\n"
    "  - built-in lease service, old server alive: INFO fencing's "
    "last_lease_token and\n    high_water_mark, the largest; old "
    "directory still readable: `fencedkv-admin stats --db=OLD`\n    "
    "(lease_counter, high_water_mark); take the largest;\n"
    "  - tokens from etcd: etcd's current revision (etcdctl endpoint status "
    "-w json: revision).\n"
    "N below the backup's own high-water mark or lease counter is refused, "
    "and so is N below\nthe marks of a store at --db that the restore "
    "replaces (its high-water mark, lease counter\nand floor; strict mode: "
    "N above its mark): the error names the floor needed. The restored\n"
    "store refuses every token below N, its lease service's next token is "
    "above N, and its lease\nrecords are dropped (holders acquire again). "
    "The copy is fenced before it appears at --db.\n\n"
    "Backup directories: backup, backups and restore lock D "
    "(D/FENCEDKV_LOCK, a backup exclusively)\nand fail at once with "
    "\"another fencedkv-admin is using D\" if another one holds it\n"
    "(RocksDB's BackupEngine is not safe across processes): run it again "
    "when that one is done.\n\n"
    "Exit codes: 0 ok; 1 error (bad flags, cannot open, refused: nothing was "
    "changed; with --server,\na --timeout_ms that ran out: the server's job "
    "goes on); 2 damage found (check, backups --verify); 3 get: key not "
    "found;\n4 import: not all of the stream was applied (values older "
    "than the store's tokens\nrefused, values that failed, or an error "
    "midway: the message says which, and how much\nwas applied).\n";

std::vector<std::unique_ptr<AdminCommand>> AllCommands() {
  std::vector<CommandFactory> factories;
  AppendReadCommands(&factories);
  AppendCheckCommand(&factories);
  AppendCopyCommands(&factories);
  AppendExportCommands(&factories);
  AppendReplicationCommand(&factories);
  std::vector<std::unique_ptr<AdminCommand>> commands;
  commands.reserve(factories.size());
  for (CommandFactory f : factories) commands.push_back(f());
  return commands;
}

// The usage message --help prints before the flags: the verbs and their
// help, the floor rule, the exit codes.
std::string Usage(const std::vector<std::unique_ptr<AdminCommand>>& commands) {
  std::string text = kUsageHead;
  text += "Verbs:\n";
  for (const auto& c : commands) c->Help(&text);
  text += kUsageTail;
  return text;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool Print(FILE* out, std::string_view s) {
  return std::fwrite(s.data(), 1, s.size(), out) == s.size();
}

ExecResult ExpectArgs(const std::vector<std::string>& args, size_t n,
                      const char* usage) {
  if (args.size() == n) return ExecResult::Ok();
  return ExecResult::Error("expected " + std::string(usage) + ", got " +
                           std::to_string(args.size()) + " argument(s)");
}

bool VanishedUnderRunningServer(const std::string& error) {
  return error.find("No such file") != std::string::npos &&
         !CheckNotInUse(FLAGS_db, "").ok();
}

ExecResult ReadCommand::DoCommand(const std::vector<std::string>& args,
                                  FILE* out) {
  ExecResult r = ExpectArgs(args, NumArgs(), ArgsUsage());
  if (r.code != kExitOk) return r;
  std::unique_ptr<ReadOnlyStore> store;
  Status s = OpenFreshView(&store);
  if (!s.ok()) return ExecResult::FromStatus(s);
  return Read(*store, args, out);
}

void PauseBeforeAttempt(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
}

Status OpenFreshView(std::unique_ptr<ReadOnlyStore>* store) {
  // A running server may delete a file (after a flush or a compaction)
  // between the read-only open's listing and its read of it: retried.
  Status s;
  for (int attempt = 1;; ++attempt) {
    s = ReadOnlyStore::OpenChecked(FLAGS_db, store);
    if (s.ok() || attempt == kFreshViewAttempts ||
        !VanishedUnderRunningServer(s.ToString())) {
      return s;
    }
    PauseBeforeAttempt(attempt);
  }
}

int64_t KeyLimit() { return FLAGS_limit >= 0 ? FLAGS_limit : FLAGS_max_keys; }

std::string FormatBytes(std::string_view bytes) {
  if (!FLAGS_hex) return EscapeBytes(bytes);
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "0x";
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

std::string QuoteBytes(std::string_view bytes) {
  return FLAGS_hex ? FormatBytes(bytes) : "\"" + EscapeBytes(bytes) + "\"";
}

bool ParseKeyArg(const std::string& text, std::string* key,
                 std::string* error) {
  if (!FLAGS_hex) {
    *key = text;
    return true;
  }
  std::string_view hex(text);
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) {
    hex.remove_prefix(2);
  }
  key->clear();
  if (hex.size() % 2 != 0) {
    *error = "invalid hex key \"" + text + "\": odd number of digits";
    return false;
  }
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      *error = "invalid hex key \"" + text + "\"";
      return false;
    }
    key->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

namespace {

// Splits the command line at its first "--" that is not a flag's value:
// gflags stops at "--" but leaves what follows it in front of the
// arguments it moved behind the flags, so `get -- -dash` came out as
// "-dash get". Returns the words before it (argv[0] first, for gflags) and
// puts the ones after it in *rest.
std::vector<char*> SplitAtDoubleDash(int argc, char** argv,
                                     std::vector<std::string>* rest) {
  std::vector<char*> head = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      rest->assign(argv + i + 1, argv + argc);
      break;
    }
    head.push_back(argv[i]);
    // "--flag value" (no '='): the value is the next word, even "--".
    if (arg.size() > 1 && arg[0] == '-' && arg.find('=') == std::string::npos) {
      const std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
      gflags::CommandLineFlagInfo info;
      if (gflags::GetCommandLineFlagInfo(name.c_str(), &info) &&
          info.type != "bool" && i + 1 < argc) {
        head.push_back(argv[++i]);
      }
    }
  }
  return head;
}

}  // namespace

int RunAdminTool(int argc, char** argv) {
  const auto commands = AllCommands();
  static const std::string usage = Usage(commands);  // outlives parsing
  gflags::SetUsageMessage(usage);
  gflags::SetVersionString(FENCEDKV_VERSION_STRING);
  NarrowHelpToModule(argc, argv, "admin_tool.cc");  // --help: exits 0
  std::vector<std::string> rest;
  std::vector<char*> head = SplitAtDoubleDash(argc, argv, &rest);
  int head_argc = static_cast<int>(head.size());
  char** head_argv = head.data();
  gflags::ParseCommandLineFlags(&head_argc, &head_argv, true);
  std::vector<std::string> args(head_argv + 1, head_argv + head_argc);
  args.insert(args.end(), rest.begin(), rest.end());
  if (args.empty()) {
    std::fprintf(stderr, "fencedkv-admin: no verb given (see --help)\n");
    return kExitError;
  }
  AdminCommand* command = nullptr;
  size_t words = 0;
  for (const auto& c : commands) {
    const std::string name = c->Name();
    const size_t space = name.find(' ');
    if (space == std::string::npos) {
      if (args[0] == name) command = c.get(), words = 1;
    } else if (args.size() >= 2 && args[0] == name.substr(0, space) &&
               args[1] == name.substr(space + 1)) {
      command = c.get(), words = 2;
    }
    if (command != nullptr) break;
  }
  if (command == nullptr) {
    std::string verb = args[0];
    if (verb == "fence" && args.size() >= 2) verb += " " + args[1];
    std::fprintf(stderr, "fencedkv-admin: unknown verb '%s' (see --help)\n",
                 EscapeBytes(verb).c_str());
    return kExitError;
  }
  const std::vector<const char*> accepted = command->Flags();
  const std::set<std::string> ok(accepted.begin(), accepted.end());
  for (const char* flag : kAllFlags) {
    if (ok.count(flag) == 0 &&
        !gflags::GetCommandLineFlagInfoOrDie(flag).is_default) {
      std::fprintf(stderr, "fencedkv-admin: --%s does not apply to '%s'\n",
                   flag, command->Name());
      return kExitError;
    }
  }
  if (!FLAGS_server.empty() && !FLAGS_db.empty()) {
    std::fprintf(stderr,
                 "fencedkv-admin %s: --db does not apply with --server (the "
                 "server copies its own database)\n",
                 command->Name());
    return kExitError;
  }
  if (command->NeedsDb() && FLAGS_db.empty()) {
    std::fprintf(stderr, "fencedkv-admin %s: --db=DIR is required\n",
                 command->Name());
    return kExitError;
  }
  // With --server the paths are the server's (it refuses relative ones).
  if (FLAGS_server.empty()) {
    // Once, so that every verb (and BackupEngine below it) sees the same
    // directories.
    if (!FLAGS_db.empty()) FLAGS_db = AbsolutePath(FLAGS_db);
    if (!FLAGS_backup_dir.empty())
      FLAGS_backup_dir = AbsolutePath(FLAGS_backup_dir);
  }
  args.erase(args.begin(), args.begin() + static_cast<long>(words));
  ExecResult r;
  if (command->Changes()) {
    char* report = nullptr;
    size_t report_size = 0;
    FILE* mem = open_memstream(&report, &report_size);
    r = command->DoCommand(args, mem != nullptr ? mem : stdout);
    if (mem != nullptr) {
      std::fclose(mem);
      const bool written =
          std::fwrite(report, 1, report_size, stdout) == report_size &&
          std::fflush(stdout) == 0 && !std::ferror(stdout);
      if (!written) {
        // What it did is said anyway; its exit code stands.
        std::fprintf(stderr,
                     "fencedkv-admin %s: writing to stdout failed (%s); its "
                     "report:\n",
                     command->Name(), std::strerror(errno ? errno : EIO));
        std::fwrite(report, 1, report_size, stderr);
      }
      std::free(report);
    }
  } else {
    r = command->DoCommand(args, stdout);
    // Output that did not all reach stdout (a full disk, /dev/full, a
    // closed pipe) is not a success: a truncated dump or export read as
    // complete. (It changed nothing: exit 1.)
    if ((std::fflush(stdout) != 0 || std::ferror(stdout)) &&
        r.code == kExitOk) {
      r = ExecResult::Error(std::string("writing to stdout: ") +
                            std::strerror(errno ? errno : EIO) +
                            ": the output is incomplete");
    }
  }
  if (r.code != kExitOk && !r.message.empty()) {
    std::fprintf(stderr, "fencedkv-admin %s: %s\n", command->Name(),
                 r.message.c_str());
  }
  return r.code;
}

}  // namespace admin
}  // namespace fencedkv
