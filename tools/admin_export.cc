// Copyright (c) fencedkv authors.
//
// export / import: a portable form of a store that round-trips keys,
// values, tokens, domain maxima and the floor. It is a stream of Redis
// commands (RESP arrays), so `redis-cli --pipe` replays it into any
// fencedkv-server, and `fencedkv-admin import` applies it offline:
//
//   ECHO "fencedkv-export 1 fence_mode=<mode> fence_domain=<spec>"
//   SET key value FENCE token      every value, in token order (a domain
//                                  refuses a token below its max, so the
//                                  order matters); SET key value (no FENCE)
//                                  for an unfenced value with no token
//   FENCE.ADVANCE key token        every domain max the values do not
//                                  reach: deleted keys that keep a token,
//                                  advances (strict mode: token + 1, which
//                                  stores token)
//   FENCE.FLOOR floor              last (values below it stay acceptable
//                                  while they are replayed), if non-zero
//   ECHO "fencedkv-export end sets=N advances=M floor=F lease_counter=C"
//
// Leases are not exported (they are live claims), but the lease counter is
// (in the end marker): import raises the target's to it, so that its lease
// service issues tokens above every one the source's issued (a stream
// without it, from an older export, raises nothing). `redis-cli --pipe`
// cannot set a server's counter: see the README. The target must use the
// same domain function and mode (the header says which; import creates a
// missing database with them and refuses a mismatch).
//
// Memory: with the "key" domain function export streams; with the others
// it first sorts (token, key) pairs of every value, so it holds all keys.
// import reads its whole input (a file is mapped, stdin is read into
// memory), checks all of it, then applies it: a malformed stream changes
// nothing.

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>

#include <fcntl.h>
#include <rocksdb/env.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencedkv/db.h"

#include "admin_tool.h"
#include "db/db_impl.h"
#include "db/fence_format.h"
#include "db/read_only_store.h"
#include "resp_parser.h"

namespace fencedkv {
namespace admin {

namespace {

namespace fs = std::filesystem;

constexpr char kHeader[] = "fencedkv-export 1 ";
constexpr char kTrailer[] = "fencedkv-export end ";

void AppendCommand(std::string* out,
                   std::initializer_list<std::string_view> args) {
  *out += "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    *out += "$" + std::to_string(a.size()) + "\r\n";
    out->append(a.data(), a.size());
    *out += "\r\n";
  }
}

// A key whose domain is `domain`, to name the domain in FENCE.ADVANCE:
// the domain itself, "{domain}" (hashtag) or domain + delimiter.
bool KeyForDomain(const FenceDomainSpec& spec, const std::string& domain,
                  std::string* key) {
  std::vector<std::string> candidates = {domain, "{" + domain + "}"};
  if (spec.kind() == FenceDomainSpec::Kind::kDelimiter) {
    candidates.push_back(domain + spec.ToString().back());
  }
  for (const auto& c : candidates) {
    if (!c.empty() && spec.DomainOf(c) == domain) {
      *key = c;
      return true;
    }
  }
  return false;
}

class ExportCommand : public AdminCommand {
 public:
  const char* Name() const override { return "export"; }
  void Help(std::string* out) const override {
    *out +=
        "  export [--output=FILE]\n"
        "      the store as Redis commands (SET k v FENCE t in token order, "
        "FENCE.ADVANCE,\n      FENCE.FLOOR): replay with redis-cli --pipe "
        "into a fencedkv-server created with\n      the same --fence_domain "
        "and --fence_mode, or with import;\n      --output: a new file, not "
        "inside --db (default: stdout)\n";
  }
  std::vector<const char*> Flags() const override { return {"output"}; }
  ExecResult DoCommand(const std::vector<std::string>& args,
                       FILE* out) override {
    ExecResult r = ExpectArgs(args, 0, "no argument");
    if (r.code != kExitOk) return r;
    if (FLAGS_output != "-") {
      Status s = CheckExportFile(FLAGS_db, FLAGS_output);
      if (!s.ok()) return ExecResult::FromStatus(s);
    }
    std::unique_ptr<ReadOnlyStore> store;
    Status s = OpenFreshView(&store);
    if (!s.ok()) return ExecResult::FromStatus(s);
    FILE* file = out;
    if (FLAGS_output != "-") {
      // Never overwrite: O_EXCL.
      const int fd = open(FLAGS_output.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        return ExecResult::Error("cannot create " + FLAGS_output + ": " +
                                 std::strerror(errno));
      }
      file = fdopen(fd, "w");
    }
    r = Export(*store, file);
    if (file != out && std::fclose(file) != 0 && r.code == kExitOk) {
      r = ExecResult::Error("writing " + FLAGS_output + ": " +
                            std::strerror(errno));
    }
    if (r.code != kExitOk && file != out) std::remove(FLAGS_output.c_str());
    return r;
  }

 private:
  ExecResult Export(const ReadOnlyStore& store, FILE* file) {
    const StoreConfig& c = store.config();
    std::string buf;
    AppendCommand(&buf, {"ECHO", std::string(kHeader) +
                                     "fence_mode=" + FenceModeName(c.mode) +
                                     " fence_domain=" + c.spec.ToString()});
    uint64_t sets = 0, advances = 0;
    int write_errno = 0;  // the first write that failed: the rest is moot
    auto flush = [&](bool force) {
      if (force || buf.size() > (1 << 20)) {
        if (write_errno == 0 && !Print(file, buf)) {
          write_errno = errno != 0 ? errno : EIO;
        }
        buf.clear();
      }
    };
    // The token FENCE.ADVANCE needs to store `max` in this mode.
    auto advance_token = [&c](Token max, Token* token) {
      if (c.mode == FenceMode::kStrict) {
        if (max == kMaxToken) return false;
        *token = max + 1;
      } else {
        *token = max;
      }
      return true;
    };
    auto set = [&](std::string_view key, std::string_view value, Token token) {
      if (token == 0) {
        AppendCommand(&buf, {"SET", key, value});
      } else {
        AppendCommand(&buf,
                      {"SET", key, value, "FENCE", std::to_string(token)});
      }
      ++sets;
      flush(false);
    };
    auto data = store.NewIterator(store.data());
    std::vector<std::pair<Token, std::string>> order;  // non-key domains
    for (data->SeekToFirst(); data->Valid() && write_errno == 0; data->Next()) {
      const std::string_view key(data->key().data(), data->key().size());
      format::DataRecord rec;
      Status s = format::DecodeDataRecordOf(
          key, {data->value().data(), data->value().size()}, &rec);
      if (!s.ok()) return ExecResult::FromStatus(s);
      if (!c.spec.is_per_key()) {
        if (rec.kind == format::RecordKind::kValue) {
          order.emplace_back(rec.token, std::string(key));
        }
        continue;
      }
      // "key": each key is its own domain, any order will do.
      if (rec.kind == format::RecordKind::kValue) {
        set(key, rec.value, rec.token);
      } else {
        Token t = 0;
        if (!advance_token(rec.token, &t)) {
          return ExecResult::Error("key \"" + EscapeBytes(key) +
                                   "\": a strict max of 2^64-1 cannot be "
                                   "replayed with FENCE.ADVANCE");
        }
        AppendCommand(&buf, {"FENCE.ADVANCE", key, std::to_string(t)});
        ++advances;
      }
    }
    if (!data->status().ok()) {
      return ExecResult::FromStatus(ReadError("the data", data->status()));
    }
    std::sort(order.begin(), order.end());
    for (const auto& [token, key] : order) {
      if (write_errno != 0) break;
      std::string raw;
      rocksdb::Status rs =
          store.db()->Get(rocksdb::ReadOptions(), store.data(), key, &raw);
      format::DataRecord rec;
      if (!rs.ok()) return ExecResult::FromStatus(ReadError("a value", rs));
      Status s = format::DecodeDataRecordOf(key, raw, &rec);
      if (!s.ok()) return ExecResult::FromStatus(s);
      set(key, rec.value, token);
    }
    auto fence = store.NewIterator(store.fence());
    for (fence->SeekToFirst(); fence->Valid() && write_errno == 0;
         fence->Next()) {
      const std::string domain = fence->key().ToString();
      Token max = 0, t = 0;
      std::string key;
      if (!format::DecodeToken({fence->value().data(), fence->value().size()},
                               &max)) {
        return ExecResult::Error("bad fence record \"" + EscapeBytes(domain) +
                                 "\"");
      }
      if (!KeyForDomain(c.spec, domain, &key) || !advance_token(max, &t)) {
        return ExecResult::Error("domain \"" + EscapeBytes(domain) +
                                 "\" (max " + std::to_string(max) +
                                 ") cannot be replayed with FENCE.ADVANCE");
      }
      AppendCommand(&buf, {"FENCE.ADVANCE", key, std::to_string(t)});
      ++advances;
      flush(false);
    }
    if (!fence->status().ok()) {
      return ExecResult::FromStatus(ReadError("the fences", fence->status()));
    }
    if (c.floor > 0)
      AppendCommand(&buf, {"FENCE.FLOOR", std::to_string(c.floor)});
    const std::string summary =
        "sets=" + std::to_string(sets) +
        " advances=" + std::to_string(advances) +
        " floor=" + std::to_string(c.floor) +
        " lease_counter=" + std::to_string(c.lease_counter);
    AppendCommand(&buf, {"ECHO", std::string(kTrailer) + summary});
    flush(true);
    if (write_errno == 0 && std::fflush(file) != 0) {
      write_errno = errno != 0 ? errno : EIO;
    }
    if (write_errno != 0) {
      return ExecResult::Error(
          "writing " + (FLAGS_output == "-" ? "to stdout" : FLAGS_output) +
          ": " + std::strerror(write_errno) + ": the export is incomplete");
    }
    std::fprintf(stderr, "fencedkv-admin export: %s\n", summary.c_str());
    return ExecResult::Ok();
  }
};

// The whole input of import: a file mapped read-only, or stdin read.
class Input {
 public:
  ~Input() {
    if (map_ != nullptr) munmap(map_, size_);
  }
  Status Open(const std::string& path) {
    if (path == "-") {
      char chunk[1 << 16];
      size_t n;
      while ((n = std::fread(chunk, 1, sizeof(chunk), stdin)) > 0) {
        copy_.append(chunk, n);
      }
      if (std::ferror(stdin)) return Status::IOError("reading stdin");
      data_ = copy_;
      return Status::OK();
    }
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return Status::IOError("cannot open " + path, std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return Status::InvalidArgument(path, "is not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      map_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map_ == MAP_FAILED) {
        map_ = nullptr;
        close(fd);
        return Status::IOError("cannot map " + path, std::strerror(errno));
      }
      data_ = std::string_view(static_cast<const char*>(map_), size_);
    }
    close(fd);
    return Status::OK();
  }
  std::string_view data() const { return data_; }

 private:
  std::string copy_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::string_view data_;
};

// One parsed command of the stream.
struct Command {
  enum Kind { kSet, kAdvance, kFloor } kind;
  std::string_view key, value;
  Token token = 0;
};

class ImportCommand : public AdminCommand {
 public:
  const char* Name() const override { return "import"; }
  bool Changes() const override { return true; }
  void Help(std::string* out) const override {
    *out +=
        "  import [--input=FILE]\n"
        "      apply an export stream to --db offline (created with the\n"
        "      stream's domain function and mode if missing; refused if in\n"
        "      use). The whole stream is parsed first. A value older than the\n"
        "      store's token for its key (one without a token: than any), or\n"
        "      one the store refuses, is skipped and the rest applied: exit 4\n"
        "      (also if an error stops it midway); exit 1 if an error stopped\n"
        "      it before anything was applied (a store it created is removed\n"
        "      again)\n";
  }
  std::vector<const char*> Flags() const override { return {"input"}; }
  ExecResult DoCommand(const std::vector<std::string>& args,
                       FILE* out) override {
    ExecResult r = ExpectArgs(args, 0, "no argument");
    if (r.code != kExitOk) return r;
    Input input;
    Status s = input.Open(FLAGS_input);
    if (!s.ok()) return ExecResult::FromStatus(s);
    std::string domain, mode, error;
    std::vector<Command> commands;
    Token lease_counter = 0;
    std::deque<std::string> inline_args;  // what `commands` views, if not input
    if (!Parse(input.data(), &domain, &mode, &commands, &inline_args,
               &lease_counter, &error)) {
      return ExecResult::Error("not a valid export stream (" + error +
                               "); nothing was written");
    }
    Options options;
    options.create_if_missing = true;
    options.allow_unfenced = true;  // SET without FENCE: an unfenced value
    options.fence_domain = domain;
    if (!ParseFenceMode(mode, &options.fence_mode)) {
      return ExecResult::Error("bad fence_mode \"" + mode + "\" in the header");
    }
    s = CheckNotInUse(FLAGS_db);
    // A store this import creates (no directory, or an empty one) is
    // removed again if nothing could be applied: exit 1 says nothing was
    // changed.
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(FLAGS_db, ec);
    const bool new_dir = st.type() == fs::file_type::not_found;
    const bool creates = new_dir || (!ec && fs::is_directory(st) &&
                                     fs::is_empty(FLAGS_db, ec) && !ec);
    // (Opened so, it is this import's: one made meanwhile by another
    // process fails the open, and is never removed here.)
    options.error_if_exists = creates;
    std::unique_ptr<DB> db;
    if (!s.ok()) return ExecResult::FromStatus(s);
    s = DB::Open(options, FLAGS_db, &db);
    if (s.ok()) {
      r = Apply(db.get(), commands, lease_counter, creates, out);
    } else {
      r = ExecResult::FromStatus(s);
      // An open that failed while it created the store (a full disk) may
      // have left files (LOCK, LOG); one that found a store another
      // process made meanwhile (CURRENT) removes nothing.
      std::error_code e;
      if (fs::exists(FLAGS_db + "/CURRENT", e) || e) return r;
    }
    if (r.code == kExitError && creates) {
      db.reset();
      r.message += RemoveBegunStore(new_dir, s.ok());
    }
    return r;
  }

 private:
  // Removes the store this import began at --db (the directory if it made
  // it, else what it put in it), holding the store's LOCK so that nothing
  // another process opened meanwhile is touched: if it cannot be locked,
  // nothing is removed. Returns what to add to the error.
  // (`opened`: the import's open succeeded; else a store it cannot lock is
  // another process's, and nothing is said.)
  static std::string RemoveBegunStore(bool new_dir, bool opened) {
    namespace fs = std::filesystem;
    rocksdb::Env* env = rocksdb::Env::Default();
    const std::string lock_path = FLAGS_db + "/LOCK";
    rocksdb::FileLock* lock = nullptr;
    if (!env->LockFile(lock_path, &lock).ok()) {
      return opened ? "; the store it began at " + FLAGS_db +
                          " is left (it could not be locked: in use?)"
                    : "";
    }
    std::string left;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(FLAGS_db, ec)) {
      if (e.path() == lock_path) continue;
      std::error_code e2;
      fs::remove_all(e.path(), e2);
      if (e2 && left.empty()) left = e2.message();
    }
    if (ec && left.empty()) left = ec.message();
    env->UnlockFile(lock);
    // (The LOCK last, and the directory only if nothing came into it.)
    if (left.empty()) {
      fs::remove(lock_path, ec);
      if (new_dir) fs::remove(FLAGS_db, ec);
    }
    return left.empty()
               ? "; nothing was written (the store it began was "
                 "removed)"
               : "; the store it began, empty, could not be removed: " + left;
  }

  // The commands view `in`, or `inline_args` for an inline command's
  // words (the parser keeps those only until its next Parse).
  static bool Parse(std::string_view in, std::string* domain, std::string* mode,
                    std::vector<Command>* commands,
                    std::deque<std::string>* inline_args, Token* lease_counter,
                    std::string* error) {
    server::RespParser::Limits limits;
    limits.max_request_bytes = size_t{4} << 30;
    server::RespParser parser(limits);
    std::vector<std::string_view> args;
    bool header = false, trailer = false;
    size_t index = 0;
    while (!in.empty()) {
      size_t consumed = 0;
      const auto result = parser.Parse(in.data(), in.size(), &args, &consumed);
      if (result == server::RespParser::Result::kError) {
        *error = "command " + std::to_string(index + 1) + ": " + parser.error();
        return false;
      }
      if (result == server::RespParser::Result::kNeedMore) {
        *error = "truncated in command " + std::to_string(index + 1);
        return false;
      }
      const std::less<const char*> before;
      for (std::string_view& arg : args) {
        if (before(arg.data(), in.data()) ||
            before(in.data() + consumed, arg.data() + arg.size())) {
          arg = inline_args->emplace_back(arg);
        }
      }
      in.remove_prefix(consumed);
      ++index;
      if (args.empty()) continue;
      const std::string where = "command " + std::to_string(index);
      if (trailer) {
        *error = where + " follows the end marker";
        return false;
      }
      const std::string_view name = args[0];
      Command c{};
      if (!header) {
        const std::string_view text = args.size() == 2 ? args[1] : "";
        const size_t d = text.find(" fence_domain=");
        if (name != "ECHO" || text.rfind(kHeader, 0) != 0 ||
            text.find("fence_mode=") != std::strlen(kHeader) ||
            d == std::string_view::npos) {
          *error = "no fencedkv-export header";
          return false;
        }
        const size_t m = std::strlen(kHeader) + std::strlen("fence_mode=");
        mode->assign(text.substr(m, d - m));
        domain->assign(text.substr(d + std::strlen(" fence_domain=")));
        header = true;
        continue;
      }
      if (name == "ECHO" && args.size() == 2 &&
          args[1].rfind(kTrailer, 0) == 0) {
        trailer = true;
        const std::string_view text = args[1];
        const size_t at = text.find(" lease_counter=");
        if (at != std::string_view::npos &&
            !ParseTokenOrZero(text.substr(at + 15), lease_counter)) {
          *error = where + ": bad lease_counter in the end marker";
          return false;
        }
        continue;
      }
      bool ok = false;
      if (name == "SET" && (args.size() == 3 || args.size() == 5)) {
        c = {Command::kSet, args[1], args[2], 0};
        ok = args.size() == 3 ||
             (args[3] == "FENCE" && ParseToken(args[4], &c.token));
      } else if (name == "FENCE.ADVANCE" && args.size() == 3) {
        c = {Command::kAdvance, args[1], {}, 0};
        ok = ParseToken(args[2], &c.token);
      } else if (name == "FENCE.FLOOR" && args.size() == 2) {
        c = {Command::kFloor, {}, {}, 0};
        ok = ParseToken(args[1], &c.token);
      }
      if (!ok) {
        *error = where +
                 " is not SET k v [FENCE t], FENCE.ADVANCE k t or "
                 "FENCE.FLOOR t: \"" +
                 EscapeBytes(name.substr(0, 32)) + "\"";
        return false;
      }
      commands->push_back(c);
    }
    if (!header) {
      *error = "empty input";
      return false;
    }
    if (!trailer) {
      *error = "no end marker: the stream is truncated";
      return false;
    }
    return true;
  }

  // Raises the target's lease counter to at least `counter` (synced; no
  // lease service is open on it: import holds the database alone).
  // *raised: it was below and written.
  static Status RaiseLeaseCounter(DB* db, Token counter, bool* raised) {
    auto* impl = static_cast<DBImpl*>(db);
    Token current = 0;
    Status s = impl->ReadLeaseCounter(&current);
    if (!s.ok()) return s;
    if (current >= counter) return Status::OK();
    s = impl->PutMetaSynced({{std::string(format::kMetaLeaseCounter),
                              format::EncodeToken(counter)}});
    *raised = s.ok();
    return s;
  }

  // A token, or 0 (a source that never granted a lease).
  static bool ParseTokenOrZero(std::string_view text, Token* token) {
    if (text == "0") {
      *token = 0;
      return true;
    }
    return ParseToken(text, token);
  }

  // `created`: the store is new (the caller removes it again on exit 1).
  ExecResult Apply(DB* db, const std::vector<Command>& commands,
                   Token lease_counter, bool created, FILE* out) {
    uint64_t sets = 0, advances = 0, floors = 0, stale = 0, failed = 0;
    Status first_stale, first_failure;
    std::vector<WriteBatch> batches;
    std::vector<const WriteBatch*> ptrs;
    std::vector<Status> statuses;
    // Values go in groups of independent one-op batches: each stands alone.
    auto write_group = [&]() -> Status {
      if (batches.empty()) return Status::OK();
      ptrs.clear();
      for (const auto& b : batches) ptrs.push_back(&b);
      statuses.assign(batches.size(), Status());
      Status s = db->WriteGroup(WriteOptions(), ptrs.data(), ptrs.size(),
                                statuses.data());
      if (!s.ok()) return s;
      for (const Status& st : statuses) {
        if (st.ok()) {
          ++sets;
        } else if (st.IsStaleToken()) {
          if (stale++ == 0) first_stale = st;
        } else if (failed++ == 0) {
          first_failure = st;
        }
      }
      batches.clear();
      return Status::OK();
    };
    // The lease counter first: values carrying the source's tokens may land
    // before an error stops the import, and a lease service on the target
    // must then still issue above them.
    std::string step = "raising the lease counter";
    Status s;
    bool raised = false;
    if (lease_counter > 0) s = RaiseLeaseCounter(db, lease_counter, &raised);
    if (s.ok()) step = "applying the stream";
    // Whether the group being built holds a fenced value (which may raise a
    // domain an unfenced value is checked against).
    bool group_fenced = false;
    // A command the store refuses for itself (a key over max_key_size):
    // counted, and the import goes on.
    auto failed_alone = [&](const Status& st) {
      if (!st.IsInvalidArgument()) return false;
      if (failed++ == 0) first_failure = st;
      return true;
    };
    for (const Command& c : commands) {
      if (!s.ok()) break;
      if (c.kind == Command::kSet) {
        if (c.token == 0) {
          // A value without a token (its source allowed unfenced writes)
          // is older than any token: it lands only where no token was
          // accepted for its domain (no max, no tombstone, no floor).
          // Written unchecked, it would undo fenced writes and deletes.
          if (group_fenced) {
            s = write_group();
            group_fenced = false;
            if (!s.ok()) break;
          }
          Token max = 0;
          s = db->GetFence(c.key, &max);
          if (failed_alone(s)) {
            s = Status::OK();
            continue;
          }
          if (!s.ok()) break;
          if (max > 0) {
            if (stale++ == 0) {
              first_stale =
                  Status::StaleToken({0, max, EscapeBytes(c.key.substr(0, 64)),
                                      StaleReason::kBelowMax, -1});
            }
            continue;
          }
        } else {
          group_fenced = true;
        }
        batches.emplace_back();
        batches.back().Put(c.key, c.value, c.token);
        if (batches.size() >= 1000) {
          s = write_group();
          group_fenced = false;
        }
      } else {
        s = write_group();
        WriteOptions synced;
        synced.sync = true;
        if (s.ok() && c.kind == Command::kAdvance) {
          s = db->AdvanceFence(synced, c.key, c.token, nullptr);
          if (s.ok()) {
            ++advances;
          } else if (failed_alone(s)) {
            s = Status::OK();
          }
        } else if (s.ok() && c.token > db->GetFenceFloor()) {
          // (A floor at or below the target's own is there already.)
          s = db->SetFenceFloor(synced, c.token);
          if (s.ok()) ++floors;
        }
      }
    }
    if (s.ok()) s = write_group();
    if (s.ok()) step = "flushing";
    if (s.ok()) s = db->Flush();
    const std::string counts = std::to_string(sets) + " values, " +
                               std::to_string(advances) + " advances, " +
                               std::to_string(floors) + " floors";
    // Stale and failed values, if any.
    std::string what;
    if (!s.ok()) {
      // Exit 1 says nothing was changed: true only if nothing was applied
      // (a raised lease counter is a change, unless the store is new and
      // goes again).
      if (sets + advances + floors == 0 && (created || !raised)) {
        return ExecResult::FromStatus(s);
      }
      what = "stopped by an error while " + step + " (" + counts +
             " applied, kept in " + FLAGS_db +
             (raised ? ", the lease counter raised to " +
                           std::to_string(lease_counter)
                     : "") +
             "): " + s.ToString();
    } else {
      Print(out, "imported " + counts + " (floor now " +
                     std::to_string(db->GetFenceFloor()) + ") into " +
                     FLAGS_db + "\n");
    }
    if (stale + failed > 0 || !what.empty()) {
      // The rest is in: not exit 1, which says nothing was changed.
      if (what.empty() && sets + advances + floors == 0 && !raised) {
        what = "nothing was applied";  // (the store is as it was)
      }
      if (stale > 0) {
        if (!what.empty()) what += "; ";
        what += std::to_string(stale) +
                " value(s) refused as stale by the store's fences (tokens "
                "it had accepted for their keys, or its floor), the first: " +
                first_stale.ToString();
      }
      if (failed > 0) {
        if (!what.empty()) what += "; ";
        what += std::to_string(failed) +
                " value(s) failed, the first: " + first_failure.ToString();
      }
      return {kExitPartial, what};
    }
    return ExecResult::Ok();
  }
};

}  // namespace

void AppendExportCommands(std::vector<CommandFactory>* table) {
  table->push_back(MakeCommand<ExportCommand>);
  table->push_back(MakeCommand<ImportCommand>);
}

}  // namespace admin
}  // namespace fencedkv
