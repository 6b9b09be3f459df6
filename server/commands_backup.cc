// Copyright (c) fencedkv authors.
//
// Online copies of the server's database (operator commands, kCmdAdmin):
//   FENCEDKV.CHECKPOINT dir            -> integer: the job id
//   FENCEDKV.BACKUP backup_dir [VERIFY] -> integer: the job id
//   FENCEDKV.JOBSTATUS                 -> [id, n, kind, k, target, t, state,
//                                          running|done|failed, result, text,
//                                          elapsed_ms, n] of the last job,
//                                          or nil if none ran
// A copy takes as long as its files take to copy, so it never runs on an
// event loop (nor on the database thread, whose synced writes and reads
// would wait behind it): the command starts it on a background thread of
// its own and answers at once; clients poll FENCEDKV.JOBSTATUS (as
// `fencedkv-admin --server` does). One job at a time: another one while it
// runs is -BUSY. Paths are on the server's machine and must be absolute.
// StopBackupJobs (before the database closes) stops a running backup at its
// next MiB and waits for the job.

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <sys/stat.h>

#include "acl.h"
#include "command_table.h"
#include "resp_writer.h"
#include "util/mutexlock.h"
#include "util/thread_name.h"

namespace fencedkv {
namespace server {

namespace {

// The one background job slot. Thread-safe.
class BackupJobs {
 public:
  static BackupJobs& Get() {
    static BackupJobs* jobs = new BackupJobs();  // never destroyed
    return *jobs;
  }

  // Starts `work` as job `kind` on `target`; its result line, or an error
  // Status, is what FENCEDKV.JOBSTATUS reports when it ends. False (and
  // *busy describes the running job) if one runs.
  bool Start(const char* kind, std::string target,
             std::function<Status(std::string*)> work, uint64_t* id,
             std::string* busy) LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (stopped_) {
      *busy = "the server is shutting down";
      return false;
    }
    if (job_.state == State::kRunning) {
      *busy = "job " + std::to_string(job_.id) + " (" + job_.kind + " to " +
              job_.target + ") is running";
      return false;
    }
    if (thread_.joinable()) thread_.join();  // finished: returns at once
    job_ = Job{next_id_++,
               kind,
               std::move(target),
               State::kRunning,
               "",
               std::chrono::steady_clock::now(),
               {}};
    *id = job_.id;
    thread_ = std::thread([this, work = std::move(work)] {
      SetThreadName("fencedkv:backup");
      std::string result;
      Status s = work(&result);
      MutexLock lock(&mu_);
      job_.state = s.ok() ? State::kDone : State::kFailed;
      job_.result = s.ok() ? result : s.ToString();
      job_.finished = std::chrono::steady_clock::now();
    });
    return true;
  }

  // Appends the last job's status reply.
  void Reply(std::string* out) LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (job_.id == 0) {
      resp::NullArray(out);
      return;
    }
    static const char* const kStates[] = {"running", "done", "failed"};
    const auto end = job_.state == State::kRunning
                         ? std::chrono::steady_clock::now()
                         : job_.finished;
    resp::ArrayHeader(out, 12);
    resp::Bulk(out, "id");
    resp::UInteger(out, job_.id);
    resp::Bulk(out, "kind");
    resp::Bulk(out, job_.kind);
    resp::Bulk(out, "target");
    resp::Bulk(out, job_.target);
    resp::Bulk(out, "state");
    resp::Bulk(out, kStates[static_cast<int>(job_.state)]);
    resp::Bulk(out, "result");
    resp::Bulk(out, job_.result);
    resp::Bulk(out, "elapsed_ms");
    resp::Integer(out, std::chrono::duration_cast<std::chrono::milliseconds>(
                           end - job_.started)
                           .count());
  }

  bool stopping() const { return stopping_.load(); }

  // Refuses new jobs, asks a running backup to stop, waits for the job.
  void Stop() LOCKS_EXCLUDED(mu_) {
    stopping_.store(true);
    std::thread thread;
    {
      MutexLock lock(&mu_);
      stopped_ = true;
      thread.swap(thread_);
    }
    if (thread.joinable()) thread.join();
  }

 private:
  enum class State { kRunning = 0, kDone = 1, kFailed = 2 };
  struct Job {
    uint64_t id = 0;
    std::string kind;
    std::string target;
    State state = State::kDone;
    std::string result;
    std::chrono::steady_clock::time_point started, finished;
  };

  Mutex mu_;
  Job job_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
};

// The directory argument: absolute (the server's working directory means
// nothing to a client), else an error reply.
bool CheckDirArg(std::string_view dir, std::string* out) {
  if (dir.empty() || dir[0] != '/') {
    resp::Error(out,
                "ERR the directory must be an absolute path on the server's "
                "machine");
    return false;
  }
  return true;
}

void StartJob(const char* kind, std::string target,
              std::function<Status(std::string*)> work, std::string* out) {
  uint64_t id = 0;
  std::string busy;
  if (!BackupJobs::Get().Start(kind, std::move(target), std::move(work), &id,
                               &busy)) {
    resp::Error(out, "BUSY " + busy + "; FENCEDKV.JOBSTATUS shows it");
    return;
  }
  resp::UInteger(out, id);
}

void CmdCheckpoint(ServerState& server, ClientState&, const Args& args,
                   std::string* out) {
  if (!CheckDirArg(args[1], out)) return;
  DB* db = server.db;
  std::string dir(args[1]);
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {  // (the job would fail on it)
    resp::Error(out, "ERR " + EscapeBytes(dir) +
                         " already exists: a "
                         "checkpoint creates its directory");
    return;
  }
  StartJob(
      "checkpoint", dir,
      [db, dir](std::string* result) {
        Status s = db->Checkpoint(dir);
        if (s.ok()) *result = "checkpoint " + dir + " created";
        return s;
      },
      out);
}

void CmdBackup(ServerState& server, ClientState&, const Args& args,
               std::string* out) {
  if (args.size() > 3 ||
      (args.size() == 3 && !EqualsIgnoreCase(args[2], "VERIFY"))) {
    resp::Error(out, "ERR syntax error: FENCEDKV.BACKUP backup_dir [VERIFY]");
    return;
  }
  if (!CheckDirArg(args[1], out)) return;
  DB* db = server.db;
  std::string dir(args[1]);
  BackupOptions options;
  options.verify = args.size() == 3;
  options.should_stop = [] { return BackupJobs::Get().stopping(); };
  StartJob(
      "backup", dir,
      [db, dir, options](std::string* result) {
        BackupInfo info;
        Status s = db->Backup(dir, options, &info);
        if (s.ok()) {
          *result = info.ToString() + (options.verify ? ", verified" : "") +
                    " in " + dir;
        }
        return s;
      },
      out);
}

void CmdJobStatus(ServerState&, ClientState&, const Args&, std::string* out) {
  BackupJobs::Get().Reply(out);
}

}  // namespace

void StopBackupJobs() { BackupJobs::Get().Stop(); }

void AppendBackupCommands(std::vector<CommandSpec>* t) {
  t->push_back({"fencedkv.checkpoint",
                CmdCheckpoint,
                2,
                kCmdAdmin,
                {},
                kCatAdmin | kCatDangerous});
  t->push_back({"fencedkv.backup",
                CmdBackup,
                -2,
                kCmdAdmin,
                {},
                kCatAdmin | kCatDangerous});
  t->push_back(
      {"fencedkv.jobstatus", CmdJobStatus, 1, kCmdAdmin, {}, kCatAdmin});
}

}  // namespace server
}  // namespace fencedkv
