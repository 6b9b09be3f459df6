// Copyright (c) fencedkv authors.
//
// fencedkv-admin: inspect, check, back up and restore a fencedkv store, the
// way RocksDB's ldb does for RocksDB. One AdminCommand subclass per verb
// (ldb's LDBCommand: Name / Help / DoCommand), registered in a table that
// RunAdminTool dispatches on.
//
// Where each verb reads or writes:
//  - read-only verbs (scan, get, dump, fence get/list, leases, stats, check,
//    export) open the directory with RocksDB's OpenForReadOnly through
//    ReadOnlyStore (admin_store.h): no lock is taken and nothing is
//    written, so they work on a directory a running server holds open (they
//    see what was on disk when they opened it);
//  - checkpoint and backup run on a database opened with fencedkv's own
//    DB::Open (offline), or on a running server (--server: the
//    FENCEDKV.CHECKPOINT / FENCEDKV.BACKUP commands);
//  - restore and import write: they refuse a directory a running process
//    holds (its RocksDB LOCK), before changing anything.
//
// Not thread-safe: a command runs once, on the main thread.

#ifndef FENCEDKV_TOOLS_ADMIN_TOOL_H_
#define FENCEDKV_TOOLS_ADMIN_TOOL_H_

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gflags/gflags.h>

#include "fencedkv/status.h"

// The flags (admin_tool.cc), ldb's spellings where ldb has them.
DECLARE_string(db);
DECLARE_bool(hex);
DECLARE_string(from);
DECLARE_string(to);
DECLARE_int64(limit);
DECLARE_int64(max_keys);
DECLARE_string(prefix);
DECLARE_string(server);
DECLARE_string(user);
DECLARE_string(password);
DECLARE_string(backup_dir);
DECLARE_int64(backup_id);
DECLARE_string(fence_floor);
DECLARE_bool(verify);
DECLARE_string(output);
DECLARE_string(input);
DECLARE_int64(timeout_ms);
DECLARE_string(set_node_id);
DECLARE_bool(leave_shard);

namespace fencedkv {

class ReadOnlyStore;

namespace admin {

// Exit codes (documented in --help and the README).
constexpr int kExitOk = 0;
constexpr int kExitError = 1;     // bad flags, cannot open, refused, I/O
constexpr int kExitDamaged = 2;   // check / backups --verify found damage
constexpr int kExitNotFound = 3;  // get: no such key
// import: not all of the stream was applied (values older than the store's
// tokens refused, values that failed, or an error midway); what was applied
// stays, and the message says how much (or "nothing was applied").
constexpr int kExitPartial = 4;

// What a verb's DoCommand produced: an exit code and, unless kExitOk, the
// message printed to stderr.
struct ExecResult {
  int code = kExitOk;
  std::string message;
  static ExecResult Ok() { return ExecResult(); }
  static ExecResult Error(std::string msg) {
    return {kExitError, std::move(msg)};
  }
  static ExecResult FromStatus(const Status& s) {
    return s.ok() ? Ok() : Error(s.ToString());
  }
};

class AdminCommand {
 public:
  virtual ~AdminCommand() = default;
  // The verb as typed: "scan", "fence get".
  virtual const char* Name() const = 0;
  // One usage line and a short description, for --help.
  virtual void Help(std::string* out) const = 0;
  // The flags this verb reads (beyond --db); any other flag given on the
  // command line is an error.
  virtual std::vector<const char*> Flags() const { return {}; }
  // Whether the verb needs --db (all but the --server forms do).
  virtual bool NeedsDb() const { return true; }
  // Whether the verb changes something (a store, a backup directory, a
  // copy) before it reports: its report is then kept in memory and, if
  // stdout cannot take it, written to stderr, and its exit code stands
  // (exit 1 says nothing was changed).
  virtual bool Changes() const { return false; }
  // Runs the verb with its positional arguments (after the verb's words);
  // output goes to `out`.
  virtual ExecResult DoCommand(const std::vector<std::string>& args,
                               FILE* out) = 0;
};

// A verb that only reads --db: DoCommand checks the number of arguments,
// opens the directory with ReadOnlyStore::OpenChecked (no lock, nothing
// written; its meta records must be valid) and calls Read.
class ReadCommand : public AdminCommand {
 public:
  ExecResult DoCommand(const std::vector<std::string>& args, FILE* out) final;

 protected:
  // How many positional arguments the verb takes, and their name in an
  // error ("KEY").
  virtual size_t NumArgs() const { return 0; }
  virtual const char* ArgsUsage() const { return "no argument"; }
  virtual ExecResult Read(const ReadOnlyStore& store,
                          const std::vector<std::string>& args, FILE* out) = 0;
};

// The registered verbs, in --help order (each *_commands.cc appends its
// own).
using CommandFactory = std::unique_ptr<AdminCommand> (*)();
template <typename T>
std::unique_ptr<AdminCommand> MakeCommand() {
  return std::make_unique<T>();
}
void AppendReadCommands(std::vector<CommandFactory>* table);
void AppendCheckCommand(std::vector<CommandFactory>* table);
void AppendCopyCommands(std::vector<CommandFactory>* table);
void AppendExportCommands(std::vector<CommandFactory>* table);
void AppendReplicationCommand(std::vector<CommandFactory>* table);

// Parses flags, finds the verb, runs it: the whole of main().
int RunAdminTool(int argc, char** argv);

// ---- Helpers shared by the verbs ----

// Keys and values in output: --hex gives "0x" + upper-case hex, else
// EscapeBytes (printable ASCII as is; \", \\ and \xNN for the rest).
std::string FormatBytes(std::string_view bytes);
// The same, inside double quotes unless --hex: dump's and fence's form.
std::string QuoteBytes(std::string_view bytes);
// A key argument: with --hex, "0x..." or plain hex digits, else as is.
// False (and *error) for bad hex.
bool ParseKeyArg(const std::string& text, std::string* key, std::string* error);
// Writes all of `s` to `out`.
// False if not all of it was written (errno says why; the error sticks to
// `out`: main checks ferror(stdout) before it exits 0).
bool Print(FILE* out, std::string_view s);
// How many times a reading verb opens a fresh view of a store in use when
// the running server deleted a file under the last one (a flush or a
// compaction), and whether `error` (a failure's text) says so: a file gone
// ("No such file") while another process holds the store (--db).
constexpr int kFreshViewAttempts = 5;
bool VanishedUnderRunningServer(const std::string& error);
// Before another attempt: a short pause, longer each time (10 ms, 20 ms,
// ...), so that the attempts span a flush or compaction in progress.
void PauseBeforeAttempt(int attempt);
// ReadOnlyStore::OpenChecked of --db, retried as above.
Status OpenFreshView(std::unique_ptr<ReadOnlyStore>* store);
// OK if there are exactly n positional arguments, else an error naming
// what was expected (`usage`).
ExecResult ExpectArgs(const std::vector<std::string>& args, size_t n,
                      const char* usage);
// --limit, else --max_keys, else -1 (no limit).
int64_t KeyLimit();

}  // namespace admin
}  // namespace fencedkv

#endif  // FENCEDKV_TOOLS_ADMIN_TOOL_H_
