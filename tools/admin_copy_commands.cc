// Copyright (c) fencedkv authors.
//
// Copies: checkpoint, backup, backups, restore.
//  - checkpoint / backup offline: the directory must not be in use; it is
//    opened with fencedkv's DB::Open (so a format version 1 store is
//    upgraded, and the WAL is replayed by fencedkv's own open) and copied
//    with DB::Checkpoint / DB::Backup.
//  - checkpoint / backup --server: the running server copies itself
//    (FENCEDKV.CHECKPOINT / FENCEDKV.BACKUP, a background job on the
//    server); this tool polls FENCEDKV.JOBSTATUS until the job ends.
//  - restore: DB::RestoreFromBackup, which puts --fence_floor in force in
//    the restored copy before it appears at --db.

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <thread>

#include <rocksdb/env.h>
#include <rocksdb/utilities/backup_engine.h>

#include "fencedkv/db.h"

#include "admin_tool.h"
#include "db/backup_lock.h"
#include "db/db_impl.h"
#include "db/read_only_store.h"
#include "resp_client.h"

namespace fencedkv {
namespace admin {

namespace {

namespace fs = std::filesystem;
using tools::Reply;
using tools::RespClient;

// Opens --db with fencedkv's DB::Open for an offline copy, after checking
// that no running process holds it (whose open would otherwise be refused
// only after RocksDB had rotated its LOG file).
Status OpenOffline(std::unique_ptr<DB>* db) {
  Status s = CheckNotInUse(
      FLAGS_db, "stop it first, or copy it online with --server=HOST:PORT");
  if (!s.ok()) return s;
  Options options;
  options.adopt_stored_fence_config = true;
  return DB::Open(options, FLAGS_db, db);
}

// A reply field of FENCEDKV.JOBSTATUS's flat [name, value, ...] array.
std::string Field(const Reply& r, const std::string& name) {
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str == name) {
      const Reply& v = r.elements[i + 1];
      return v.type == Reply::kInteger && v.str.empty()
                 ? std::to_string(v.integer)
                 : v.str;
    }
  }
  return "";
}

// Starts `command` on --server and waits for its job to end; prints the
// job's result line.
ExecResult RunServerJob(const std::vector<std::string>& command, FILE* out) {
  RespClient client;
  std::string error;
  Reply r;
  if (!client.Connect(FLAGS_server, 5000, &error)) {
    return ExecResult::Error(error);
  }
  // The password from --password, else REDISCLI_AUTH (as redis-cli; out of
  // ps).
  std::string password = FLAGS_password;
  const char* env = std::getenv("REDISCLI_AUTH");
  if (password.empty() && env != nullptr) password = env;
  if (!password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!FLAGS_user.empty()) auth.push_back(FLAGS_user);
    auth.push_back(password);
    if (!client.Call(auth, &r, &error)) return ExecResult::Error(error);
    if (r.type == Reply::kError) return ExecResult::Error("AUTH: " + r.str);
  }
  if (!client.Call(command, &r, &error)) return ExecResult::Error(error);
  if (r.type == Reply::kError) {
    return ExecResult::Error(command[0] + ": " + r.str);
  }
  if (r.type != Reply::kInteger) {
    return ExecResult::Error(command[0] + ": unexpected reply \"" +
                             EscapeBytes(r.str) + "\" (not a job id)");
  }
  const std::string id = std::to_string(r.integer);
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(FLAGS_timeout_ms);
  while (true) {
    if (!client.Call({"FENCEDKV.JOBSTATUS"}, &r, &error)) {
      return ExecResult::Error(error);
    }
    if (r.type != Reply::kArray || Field(r, "id") != id) {
      return ExecResult::Error("FENCEDKV.JOBSTATUS does not show job " + id);
    }
    const std::string state = Field(r, "state");
    if (state == "done") {
      Print(out, Field(r, "result") + " (on " + FLAGS_server + ", " +
                     Field(r, "elapsed_ms") + " ms)\n");
      return ExecResult::Ok();
    }
    if (state != "running") {
      return ExecResult::Error("the server's job failed: " +
                               Field(r, "result"));
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return ExecResult::Error("job " + id + " still running after " +
                               std::to_string(FLAGS_timeout_ms) +
                               " ms (--timeout_ms); FENCEDKV.JOBSTATUS "
                               "shows when it ends");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// checkpoint and backup: offline on --db, or on --server.
class CopyCommand : public AdminCommand {
 public:
  std::vector<const char*> Flags() const override {
    std::vector<const char*> flags = {"server", "user", "password",
                                      "timeout_ms"};
    for (const char* f : CopyFlags()) flags.push_back(f);
    return flags;
  }
  bool NeedsDb() const override { return FLAGS_server.empty(); }
  ExecResult DoCommand(const std::vector<std::string>& args, FILE* out) final {
    ExecResult r = ExpectArgs(args, NumArgs(), ArgsUsage());
    if (r.code == kExitOk) r = CheckFlags();
    if (r.code != kExitOk) return r;
    if (!FLAGS_server.empty()) return RunServerJob(ServerCommand(args), out);
    // The destination first: a refused one leaves the store untouched (an
    // open rotates its LOG).
    Status s = CheckDestination(args);
    if (!s.ok()) return ExecResult::FromStatus(s);
    std::unique_ptr<DB> db;
    s = OpenOffline(&db);
    std::string result;
    if (s.ok()) s = Copy(db.get(), args, &result);
    if (!s.ok()) return ExecResult::FromStatus(s);
    Print(out, result + "\n");
    return ExecResult::Ok();
  }

 protected:
  virtual std::vector<const char*> CopyFlags() const { return {}; }
  virtual size_t NumArgs() const { return 0; }
  virtual const char* ArgsUsage() const { return "no argument"; }
  virtual ExecResult CheckFlags() const { return ExecResult::Ok(); }
  // Whether the offline copy's destination can take it (checked again by
  // the copy itself).
  virtual Status CheckDestination(
      const std::vector<std::string>& args) const = 0;
  // The FENCEDKV.* command that makes the server copy itself.
  virtual std::vector<std::string> ServerCommand(
      const std::vector<std::string>& args) const = 0;
  // The copy, offline; *result is the line to print (the same line the
  // server's job reports).
  virtual Status Copy(DB* db, const std::vector<std::string>& args,
                      std::string* result) const = 0;
};

class CheckpointCommand : public CopyCommand {
 public:
  const char* Name() const override { return "checkpoint"; }
  bool Changes() const override { return true; }
  void Help(std::string* out) const override {
    *out +=
        "  checkpoint DIR [--server=HOST:PORT]\n"
        "      an openable copy of the store in DIR (must not exist): "
        "RocksDB's Checkpoint,\n      hard links. Offline on --db (not in "
        "use), or online: the server writes DIR\n";
  }

 protected:
  size_t NumArgs() const override { return 1; }
  const char* ArgsUsage() const override { return "DIR"; }
  Status CheckDestination(const std::vector<std::string>& args) const override {
    return CheckCheckpointDir(FLAGS_db, args[0]);
  }
  std::vector<std::string> ServerCommand(
      const std::vector<std::string>& args) const override {
    return {"FENCEDKV.CHECKPOINT", args[0]};
  }
  Status Copy(DB* db, const std::vector<std::string>& args,
              std::string* result) const override {
    *result = "checkpoint " + args[0] + " created";
    return db->Checkpoint(args[0]);
  }
};

class BackupCommand : public CopyCommand {
 public:
  const char* Name() const override { return "backup"; }
  bool Changes() const override { return true; }
  void Help(std::string* out) const override {
    *out +=
        "  backup --backup_dir=D [--verify] [--server=HOST:PORT]\n"
        "      add a backup of the store to D (RocksDB's BackupEngine: "
        "incremental,\n      checksummed; --verify re-reads it). Offline on "
        "--db (not in use), or online.\n      D is a directory of its own: "
        "not a database, not one holding --db\n";
  }

 protected:
  std::vector<const char*> CopyFlags() const override {
    return {"backup_dir", "verify"};
  }
  const char* ArgsUsage() const override {
    return "no argument (the flag --backup_dir)";
  }
  ExecResult CheckFlags() const override {
    if (!FLAGS_backup_dir.empty()) return ExecResult::Ok();
    return ExecResult::Error("--backup_dir=D is required");
  }
  Status CheckDestination(const std::vector<std::string>&) const override {
    return CheckBackupDir(FLAGS_db, FLAGS_backup_dir);
  }
  std::vector<std::string> ServerCommand(
      const std::vector<std::string>&) const override {
    std::vector<std::string> command = {"FENCEDKV.BACKUP", FLAGS_backup_dir};
    if (FLAGS_verify) command.push_back("VERIFY");
    return command;
  }
  Status Copy(DB* db, const std::vector<std::string>&,
              std::string* result) const override {
    BackupOptions options;
    options.verify = FLAGS_verify;
    BackupInfo info;
    Status s = db->Backup(FLAGS_backup_dir, options, &info);
    *result = info.ToString() + (FLAGS_verify ? ", verified" : "") + " in " +
              FLAGS_backup_dir;
    return s;
  }
};

class BackupsCommand : public AdminCommand {
 public:
  const char* Name() const override { return "backups"; }
  void Help(std::string* out) const override {
    *out +=
        "  backups --backup_dir=D [--verify]\n"
        "      list the backups in D (id, UTC time, files, bytes, what "
        "fencedkv recorded);\n      --verify checks every file's checksum "
        "(exit 2 if one does not match)\n";
  }
  std::vector<const char*> Flags() const override {
    return {"backup_dir", "verify"};
  }
  bool NeedsDb() const override { return false; }
  ExecResult DoCommand(const std::vector<std::string>& args,
                       FILE* out) override {
    ExecResult r = ExpectArgs(args, 0, "no argument (the flag --backup_dir)");
    if (r.code != kExitOk) return r;
    if (FLAGS_backup_dir.empty()) {
      return ExecResult::Error("--backup_dir=D is required");
    }
    std::error_code ec;
    if (!fs::is_directory(fs::path(FLAGS_backup_dir) / "meta", ec)) {
      return ExecResult::Error("no backup in " + FLAGS_backup_dir +
                               " (it has no BackupEngine meta directory)");
    }
    // Not beside a backup being written (backup_lock.h).
    std::unique_ptr<BackupDirLock> lock;
    Status s =
        BackupDirLock::Acquire(FLAGS_backup_dir, /*exclusive=*/false, &lock);
    if (!s.ok()) return ExecResult::FromStatus(s);
    rocksdb::BackupEngineReadOnly* raw = nullptr;
    rocksdb::IOStatus io = rocksdb::BackupEngineReadOnly::Open(
        rocksdb::BackupEngineOptions(FLAGS_backup_dir), rocksdb::Env::Default(),
        &raw);
    std::unique_ptr<rocksdb::BackupEngineReadOnly> engine(raw);
    if (!io.ok()) return ExecResult::Error(io.ToString());
    std::vector<rocksdb::BackupInfo> infos;
    engine->GetBackupInfo(&infos);
    std::vector<rocksdb::BackupID> corrupt;
    engine->GetCorruptedBackups(&corrupt);
    if (infos.empty() && corrupt.empty()) {
      return ExecResult::Error("no backup in " + FLAGS_backup_dir +
                               " (its meta directory lists none)");
    }
    size_t bad = corrupt.size();
    for (const auto& bi : infos) {
      const std::time_t t = static_cast<std::time_t>(bi.timestamp);
      std::tm tm{};
      gmtime_r(&t, &tm);
      char stamp[32];
      std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
      std::string line = "backup " + std::to_string(bi.backup_id) + " " +
                         stamp + " " + std::to_string(bi.number_files) +
                         " files " + std::to_string(bi.size) + " bytes \"" +
                         EscapeBytes(bi.app_metadata) + "\"";
      if (FLAGS_verify) {
        io = engine->VerifyBackup(bi.backup_id, /*verify_with_checksum=*/true);
        line += io.ok() ? " verified" : " CORRUPT: " + io.ToString();
        if (!io.ok()) ++bad;
      }
      Print(out, line + "\n");
    }
    for (auto id : corrupt) {
      Print(out, "backup " + std::to_string(id) +
                     " CORRUPT: it does not load (its meta file, or a file "
                     "it lists, is missing, damaged or of the wrong size)\n");
    }
    if (bad > 0) {
      return {kExitDamaged, std::to_string(bad) + " corrupt backup(s) in " +
                                FLAGS_backup_dir};
    }
    return ExecResult::Ok();
  }
};

class RestoreCommand : public AdminCommand {
 public:
  const char* Name() const override { return "restore"; }
  bool Changes() const override { return true; }
  void Help(std::string* out) const override {
    *out +=
        "  restore --backup_dir=D --db=DIR --fence_floor=N [--backup_id=ID] "
        "[--verify]\n"
        "      restore a backup (default the latest) to DIR, fencing-safe "
        "(below). A store at\n      DIR (not in use) is moved aside to "
        "DIR.before-restore-<time>, never deleted;\n      what a killed "
        "restore to DIR left (.DIR.restoring-XXXXXX) is removed\n";
  }
  std::vector<const char*> Flags() const override {
    return {"backup_dir", "backup_id", "fence_floor", "verify"};
  }
  ExecResult DoCommand(const std::vector<std::string>& args,
                       FILE* out) override {
    ExecResult r = ExpectArgs(args, 0, "no argument (flags only)");
    if (r.code != kExitOk) return r;
    if (FLAGS_backup_dir.empty()) {
      return ExecResult::Error("--backup_dir=D is required");
    }
    if (FLAGS_fence_floor.empty()) {
      return ExecResult::Error(
          "--fence_floor=N is required: N must be at least every token "
          "issued since the backup was taken, or the restored store would "
          "accept again holders fenced out after it (see --help for where "
          "to find N); nothing was written");
    }
    RestoreOptions options;
    if (!ParseToken(FLAGS_fence_floor, &options.fence_floor)) {
      return ExecResult::Error(
          "invalid --fence_floor '" + EscapeBytes(FLAGS_fence_floor) +
          "': a token is a decimal integer in 1.." + std::to_string(kMaxToken));
    }
    if (FLAGS_backup_id < 0 || FLAGS_backup_id > UINT32_MAX) {
      return ExecResult::Error("invalid --backup_id " +
                               std::to_string(FLAGS_backup_id));
    }
    options.backup_id = static_cast<uint32_t>(FLAGS_backup_id);
    options.verify = FLAGS_verify;
    RestoreResult result;
    Status s =
        DB::RestoreFromBackup(FLAGS_backup_dir, FLAGS_db, options, &result);
    if (!s.ok()) return ExecResult::FromStatus(s);
    std::string text =
        "restored backup " + std::to_string(result.backup_id) + " of " +
        FLAGS_backup_dir + " to " + FLAGS_db + "\n" +
        "backup: high_water_mark " + std::to_string(result.high_water_mark) +
        ", lease_counter " + std::to_string(result.backup_lease_counter) +
        "\n" + "now: fence_floor " + std::to_string(result.fence_floor) +
        ", lease_counter " + std::to_string(result.lease_counter) + ", " +
        std::to_string(result.leases_dropped) + " lease record(s) dropped\n";
    if (!result.swap_finished.empty()) {
      text += "finished the swap of a killed restore of " + FLAGS_db +
              ": the database it replaced is at " + result.swap_finished + "\n";
    }
    if (result.unfinished_removed > 0) {
      text += "removed " + std::to_string(result.unfinished_removed) +
              " unfinished restore(s) of " + FLAGS_db +
              " (left by a killed restore)\n";
    }
    if (!result.moved_aside.empty()) {
      text += "the database that was at " + FLAGS_db + " is now at " +
              result.moved_aside + "\n";
    }
    Print(out, text);
    return ExecResult::Ok();
  }
};

}  // namespace

void AppendCopyCommands(std::vector<CommandFactory>* table) {
  table->push_back(MakeCommand<CheckpointCommand>);
  table->push_back(MakeCommand<BackupCommand>);
  table->push_back(MakeCommand<BackupsCommand>);
  table->push_back(MakeCommand<RestoreCommand>);
}

}  // namespace admin
}  // namespace fencedkv
