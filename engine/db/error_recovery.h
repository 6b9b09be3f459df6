// Copyright (c) fencedkv authors.
//
// ErrorRecovery: how a DBImpl gets back to accepting writes after an I/O
// error, without a reopen. DBImpl owns one per database.
//
// What RocksDB 7.8 does alone (db/error_handler.cc, and measured by
// tests/fault_injection_test.cc):
//  - A plain I/O error (EIO) while writing the WAL, a flush's or a
//    compaction's SST, or the MANIFEST is FATAL: every later write fails and
//    DB::Resume() refuses; only closing and reopening the DB helps.
//  - ENOSPC is a HARD error on the write path (a SOFT one in a compaction):
//    writes fail until Resume() succeeds. RocksDB's SstFileManager polls the
//    free space every 5 s and resumes by itself, and meanwhile refuses a
//    manual Resume() (Busy).
//  - An error the FileSystem marks as file-scoped (IOStatus::SetScope) is
//    "retryable": RocksDB never writes that file again, and Resume() flushes
//    the memtables (which hold every acknowledged write) into new files,
//    starts a new WAL (and a new MANIFEST after a MANIFEST error) and goes
//    on. A flush's error is a SOFT one (writes go on; flushes wait), the
//    WAL's a HARD one; a compaction simply retries later.
//
// The policy:
//  1. Every I/O error a write, sync, truncate, close, rename or directory
//     fsync returns is marked file-scoped (a FileSystemWrapper around the
//     Env's FileSystem; errors the FileSystem already scoped, ENOSPC, data
//     loss and IOFenced are left as they are; reads are not touched). That
//     is true of how RocksDB writes: a file that failed is abandoned and its
//     content written again elsewhere. So an EIO is recoverable like ENOSPC.
//  2. RocksDB's own automatic recovery is off (max_bgerror_resume_count = 0,
//     and the listener vetoes the SstFileManager's), so there is one
//     recovery, ours: a background thread, started at the first error, calls
//     DB::Resume() when RocksDB reports a background error
//     (EventListener::OnBackgroundError; 20 ms later, as RocksDB records the
//     error only after telling the listener) or a write fails, and then
//     again at most once per retry interval (default 1 s, RocksDB's
//     bgerror_resume_retry_interval) while it fails. It gives up on a fatal
//     error (corruption, data loss): that one needs a reopen.
//  3. Writers never wait for a recovery, and never spoil one. RocksDB 7.8
//     reports the background error again for every write it refuses, and a
//     report made while a Resume() runs fails that Resume(): under a steady
//     write load no recovery would ever succeed. So the engine's writes go
//     through Write() below, a gate: after a write fails with an I/O error,
//     the gate is closed and every later write fails at once, without
//     reaching RocksDB, with that write's error (an IOError naming the file
//     and the cause), until a Resume() succeeds. Fence checks come before
//     the gate (a stale write is still refused as stale); reads go on.
//     Within one interval of the fault clearing, writes are accepted again.
//     A write that failed was not applied in this process; its WAL record,
//     if complete, may come back only after a crash that happens before the
//     recovery's flush (an unacknowledged write, so allowed).
//  4. RocksDB 7.8 leaves a failed WAL only when Resume() switches memtables,
//     which it does only for a column family whose active memtable holds
//     something. With every memtable empty (just after an open or a flush)
//     it keeps writing to the failed WAL: the next write trips an assertion
//     in Debian's build (the process aborts; a release build fails every
//     write for ever, per its source). So (a) when the DB is attached and
//     whenever a flush leaves every active memtable empty, the recovery
//     thread deletes the empty key (which no meta key is) in the meta
//     column family: a tombstone in the memtable that no reader sees. It
//     goes through the WAL, as a WAL-less write leaves a gap in the log's
//     sequence numbers that log shipping must refuse -- except within 30 s
//     of an I/O error (the flush that ends a Resume(), a fault that may
//     last), when it is written without the WAL so that no WAL fault can
//     fail it (a replica then meets the gap and must sync in full). If the
//     logged sentinel itself meets the first WAL fault, (b) applies. A
//     database following a primary's log writes none (SetSentinel(nullptr);
//     Options::log_replica from the open): its sequence numbers must stay
//     the primary's. And
//     (b) after a WAL error with every active memtable empty anyway (in the
//     moment between such a flush and the sentinel), it does not call
//     Resume(): writes keep failing with the IOError until a reopen.
//  5. RocksDB's own info LOG aborts the process (Debian's build) at the line
//     after one it failed to write, e.g. on a full disk: the engine gives
//     RocksDB an InfoLogger (info_logger.h), which drops such lines instead.
//  6. Not handled: RocksDB 7.8 can orphan a flush request. A flush job that
//     starts after RocksDB stopped drops out but leaves its request queued
//     and no longer scheduled; every later flush of that column family
//     waits on it, Resume()'s included, for ever (seen once in about five
//     full-disk runs: a memtable switched just before the WAL write that
//     filled the disk). Writes keep failing with the IOError, reads go on,
//     and only a reopen (a server restart) brings writes back; Stop()
//     cancels the stuck Resume() so that the close does not hang. The LOG
//     says "fencedkv: Resume() after ..." without a "returned" line.
//
// Thread-safe.

#ifndef FENCEDKV_ENGINE_DB_ERROR_RECOVERY_H_
#define FENCEDKV_ENGINE_DB_ERROR_RECOVERY_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class LogTail;

class ErrorRecovery {
 public:
  // What happened so far (for tests and stats).
  struct Stats {
    uint64_t errors = 0;     // background errors and failed writes noted
    uint64_t attempts = 0;   // DB::Resume() calls
    uint64_t resumed = 0;    // ... that returned OK
    uint64_t gated = 0;      // writes refused while the gate was closed
    uint64_t sentinels = 0;  // sentinel writes (rule 4)
    // No error waits for a recovery, none runs, and the gate is open.
    bool idle = true;
    bool needs_reopen = false;  // rule 4(b): stuck until a reopen
    std::string last_error;     // the last error noted or Resume() returned
  };

  ErrorRecovery();
  // Stops the recovery thread (see Stop).
  ~ErrorRecovery();
  ErrorRecovery(const ErrorRecovery&) = delete;
  ErrorRecovery& operator=(const ErrorRecovery&) = delete;

  // Before rocksdb::DB::Open of the database in `path`: routes
  // options->env's file I/O through the wrapper of rule 1, turns RocksDB's
  // automatic recovery off, adds the listener and the logger of rule 5.
  // This object must outlive every DB opened with *options.
  void Configure(const std::string& path, rocksdb::DBOptions* options);
  // After the DB is open: the DB to resume, all its column families, and
  // the one to write the sentinel of rule 4 in (nullptr: none, ever).
  // Writes the sentinel if no active memtable holds anything (a failure is
  // only noted).
  void Attach(rocksdb::DB* db,
              const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
              rocksdb::ColumnFamilyHandle* sentinel_cf);
  // After Attach: turns the sentinel of rule 4 on, in `sentinel_cf` (and
  // writes it at once if no active memtable holds anything), or off
  // (nullptr): then it returns once no sentinel is being written, and none
  // is written after it (a database that starts following a primary's log,
  // DB::SetFollowing).
  void SetSentinel(rocksdb::ColumnFamilyHandle* sentinel_cf)
      LOCKS_EXCLUDED(sentinel_mu_, mu_);
  // Before the DB is closed: no Resume() is started after this returns (one
  // in progress is waited for). Idempotent.
  void Stop();

  // rocksdb::DB::Write through the gate of rule 3: while the gate is closed,
  // returns the error that closed it without writing; a write that fails
  // with an I/O error closes it and schedules a recovery. Open, it costs
  // one atomic load. Thread-safe, like DB::Write.
  rocksdb::Status Write(rocksdb::DB* db, const rocksdb::WriteOptions& options,
                        rocksdb::WriteBatch* batch);

  // Before the first write: every batch Write writes to the WAL goes to
  // `tail` too (log shipping's copy, db/log_tail.h), and every write that
  // takes sequence numbers without that (a failed one, one without the
  // WAL, the sentinel) resets it. nullptr: none.
  void SetLogTail(LogTail* tail) { tail_ = tail; }

  // DB::SetLogListener: `listener` is called after every write Write made
  // to the WAL, once its batch is in the tail (and after the sentinel's).
  // Replacing or removing it (nullptr) waits for a call in progress: once
  // this returns, the old one is never called again. Thread-safe.
  void SetWriteListener(std::function<void()> listener)
      LOCKS_EXCLUDED(write_listener_mu_);

  // At most one Resume() per `interval` while it fails. Default 1 s.
  void SetRetryInterval(std::chrono::microseconds interval);
  Stats GetStats() const;

  // The sentinels written without the WAL (rule 4): how many were started
  // and how many finished, and the latest sequence published when the last
  // one had finished (at or past the number it took). A caller that needs
  // to know whether a sequence it read is one the log holds reads
  // `started` before it reads the sequence, and after: if `started` and
  // `done` are still that number and the sequence is past `sequence`, no
  // sentinel without the WAL took it. Lock-free.
  struct Unlogged {
    uint64_t started = 0;
    uint64_t done = 0;
    uint64_t sequence = 0;
  };
  Unlogged UnloggedWrites() const;

 private:
  class Listener;
  class FileScopeFS;
  class FileScopeFile;
  class FileScopeDirectory;
  class FileScopeEnv;

  // RocksDB reported `error` (from any thread, RocksDB's mutex released).
  void NoteError(const rocksdb::Status& error) LOCKS_EXCLUDED(mu_);
  // A write through the gate returned `s`: an I/O error closes
  // the gate and schedules a recovery.
  void Failed(const rocksdb::Status& s) LOCKS_EXCLUDED(mu_);
  // The FileSystem created WAL `number` / a write to WAL `number` failed.
  void NoteNewWal(uint64_t number);
  void NoteWalFileError(uint64_t number);
  // A flush finished: maybe every active memtable is empty now.
  void NoteFlush();
  void Run();
  // Before a Resume(): waits (at most 10 s) until no flush or compaction
  // runs. One that fails while Resume() waits for it fails the recovery
  // after the recovery has queued its flush; the flush job then finds no
  // recovery in progress, drops out and leaves its request queued for ever
  // (RocksDB 7.8): the next Resume() would wait on it without end.
  void WaitForBackgroundJobs(rocksdb::DB* db) LOCKS_EXCLUDED(mu_);
  // Rule 4: true if some active memtable holds an entry.
  bool SomeMemtableHoldsData(rocksdb::DB* db) const;
  // Rule 4(a): writes the sentinel if no active memtable holds anything.
  void MaybeWriteSentinel(rocksdb::DB* db) LOCKS_EXCLUDED(sentinel_mu_, mu_);

  // Rule 3: closed by a failed write, opened by a successful Resume().
  std::atomic<bool> closed_{false};
  // Sentinels written without the WAL (UnloggedWrites).
  std::atomic<uint64_t> unlogged_started_{0};
  std::atomic<uint64_t> unlogged_done_{0};
  std::atomic<uint64_t> unlogged_sequence_{0};
  std::shared_ptr<Listener> listener_;
  std::unique_ptr<rocksdb::Env> env_;  // what the DB does its I/O through
  std::shared_ptr<rocksdb::Logger> info_log_;  // RocksDB's LOG

  // Held while a sentinel is written (and when it is turned on or off), so
  // that turning it off waits for one being written.
  Mutex sentinel_mu_ ACQUIRED_BEFORE(mu_);
  rocksdb::ColumnFamilyHandle* sentinel_cf_ GUARDED_BY(sentinel_mu_) = nullptr;
  LogTail* tail_ = nullptr;  // set before the first write
  // SetWriteListener's; the flag spares a write the lock when there is none.
  void CallWriteListener() LOCKS_EXCLUDED(write_listener_mu_);
  std::atomic<bool> has_write_listener_{false};
  Mutex write_listener_mu_;
  std::function<void()> write_listener_ GUARDED_BY(write_listener_mu_);
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  rocksdb::DB* db_ GUARDED_BY(mu_) = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
  // An error was noted that no Resume() has been tried for yet; since when.
  bool pending_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point pending_since_ GUARDED_BY(mu_);
  // When the last error was noted; for kTroubled after it, sentinels are
  // written without the WAL (rule 4).
  std::chrono::steady_clock::time_point last_error_at_ GUARDED_BY(mu_);
  static constexpr std::chrono::seconds kTroubled{30};
  // The newest WAL (the one RocksDB writes), and whether a write to it
  // failed since the last successful Resume().
  uint64_t current_wal_ GUARDED_BY(mu_) = 0;
  bool wal_error_ GUARDED_BY(mu_) = false;
  // A flush finished that no sentinel check has followed yet.
  bool flushed_ GUARDED_BY(mu_) = false;
  // The previous Resume() failed: retry one interval after it.
  bool retrying_ GUARDED_BY(mu_) = false;
  bool attempted_ GUARDED_BY(mu_) = false;
  bool resuming_ GUARDED_BY(mu_) = false;  // a Resume() is running
  std::chrono::steady_clock::time_point last_attempt_ GUARDED_BY(mu_);
  std::chrono::microseconds interval_ GUARDED_BY(mu_){1000000};
  Stats stats_ GUARDED_BY(mu_);
  rocksdb::Status gate_error_ GUARDED_BY(mu_);  // what closed the gate
  std::thread thread_ GUARDED_BY(mu_);          // started at the first error
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_ERROR_RECOVERY_H_
