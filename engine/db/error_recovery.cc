// Copyright (c) fencedkv authors.

#include "db/error_recovery.h"

#include <utility>

#include <pthread.h>
#include <rocksdb/convenience.h>
#include <rocksdb/file_system.h>
#include <rocksdb/listener.h>

#include "db/info_logger.h"
#include "db/log_tail.h"
#include "db/synced_marker.h"
#include "util/sync_point.h"
#include "util/thread_name.h"

namespace fencedkv {

namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

// See Run().
constexpr std::chrono::milliseconds kSettle(20);

// Rule 1 of the header: an I/O error of a write is the file's.
IOStatus FileScoped(IOStatus s) {
  if (s.IsIOError() && !s.IsNoSpace() && !s.IsIOFenced() && !s.GetDataLoss() &&
      !s.GetRetryable() &&
      s.GetScope() == IOStatus::IOErrorScope::kIOErrorScopeFileSystem) {
    s.SetScope(IOStatus::IOErrorScope::kIOErrorScopeFile);
  }
  return s;
}

}  // namespace

// Receives RocksDB's background errors; vetoes RocksDB's own recoveries.
class ErrorRecovery::Listener : public rocksdb::EventListener {
 public:
  explicit Listener(ErrorRecovery* owner) : owner_(owner) {}
  const char* Name() const override { return "FencedkvErrorRecovery"; }

  void OnBackgroundError(rocksdb::BackgroundErrorReason /*reason*/,
                         rocksdb::Status* bg_error) override {
    if (bg_error != nullptr && !bg_error->ok()) owner_->NoteError(*bg_error);
  }
  void OnFlushCompleted(rocksdb::DB* /*db*/,
                        const rocksdb::FlushJobInfo& /*info*/) override {
    owner_->NoteFlush();
  }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                            rocksdb::Status /*bg_error*/,
                            bool* auto_recovery) override {
    *auto_recovery = false;  // the SstFileManager's: ours runs instead
  }

 private:
  ErrorRecovery* const owner_;
};

// A writable file whose write errors are file-scoped. It passes the I/O
// priority on (FSWritableFileWrapper keeps it for itself): the FileSystem
// below may tell a flush's writes from a compaction's by it.
class ErrorRecovery::FileScopeFile
    : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  // `wal_number`: the WAL's number if it is one, else 0.
  FileScopeFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                ErrorRecovery* owner, uint64_t wal_number)
      : FSWritableFileOwnerWrapper(std::move(target)),
        owner_(owner),
        wal_number_(wal_number) {}

  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  IODebugContext* dbg) override {
    return Scoped(target()->Append(data, options, dbg));
  }
  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    return Scoped(target()->Append(data, options, info, dbg));
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& options,
                            IODebugContext* dbg) override {
    return Scoped(target()->PositionedAppend(data, offset, options, dbg));
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    return Scoped(target()->PositionedAppend(data, offset, options, info, dbg));
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options,
                    IODebugContext* dbg) override {
    return Scoped(target()->Truncate(size, options, dbg));
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    return Scoped(target()->Close(options, dbg));
  }
  IOStatus Flush(const IOOptions& options, IODebugContext* dbg) override {
    return Scoped(target()->Flush(options, dbg));
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return Scoped(target()->Sync(options, dbg));
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return Scoped(target()->Fsync(options, dbg));
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options,
                     IODebugContext* dbg) override {
    return Scoped(target()->RangeSync(offset, nbytes, options, dbg));
  }
  IOStatus Allocate(uint64_t offset, uint64_t len, const IOOptions& options,
                    IODebugContext* dbg) override {
    return Scoped(target()->Allocate(offset, len, options, dbg));
  }
  void SetIOPriority(rocksdb::Env::IOPriority pri) override {
    FSWritableFile::SetIOPriority(pri);
    target()->SetIOPriority(pri);
  }
  rocksdb::Env::IOPriority GetIOPriority() override {
    return target()->GetIOPriority();
  }

 private:
  IOStatus Scoped(IOStatus s) {
    if (!s.ok() && wal_number_ != 0) owner_->NoteWalFileError(wal_number_);
    return FileScoped(std::move(s));
  }

  ErrorRecovery* const owner_;
  const uint64_t wal_number_;
};

class ErrorRecovery::FileScopeDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  explicit FileScopeDirectory(std::unique_ptr<rocksdb::FSDirectory> target)
      : FSDirectoryWrapper(std::move(target)) {}
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return FileScoped(FSDirectoryWrapper::Fsync(options, dbg));
  }
  IOStatus FsyncWithDirOptions(
      const IOOptions& options, IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& dir_fsync_options) override {
    return FileScoped(FSDirectoryWrapper::FsyncWithDirOptions(
        options, dbg, dir_fsync_options));
  }
};

class ErrorRecovery::FileScopeFS : public rocksdb::FileSystemWrapper {
 public:
  FileScopeFS(const std::shared_ptr<rocksdb::FileSystem>& target,
              ErrorRecovery* owner)
      : FileSystemWrapper(target), owner_(owner) {}
  const char* Name() const override { return "FencedkvFileScopeFS"; }

  IOStatus NewWritableFile(const std::string& fname,
                           const rocksdb::FileOptions& file_opts,
                           std::unique_ptr<rocksdb::FSWritableFile>* r,
                           IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s = target()->NewWritableFile(fname, file_opts, &file, dbg);
    const uint64_t wal = WalNumber(fname);
    if (s.ok() && wal != 0) owner_->NoteNewWal(wal);
    return Wrap(std::move(s), std::move(file), wal, r);
  }
  IOStatus ReopenWritableFile(const std::string& fname,
                              const rocksdb::FileOptions& file_opts,
                              std::unique_ptr<rocksdb::FSWritableFile>* r,
                              IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s = target()->ReopenWritableFile(fname, file_opts, &file, dbg);
    return Wrap(std::move(s), std::move(file), 0, r);
  }
  IOStatus ReuseWritableFile(const std::string& fname,
                             const std::string& old_fname,
                             const rocksdb::FileOptions& file_opts,
                             std::unique_ptr<rocksdb::FSWritableFile>* r,
                             IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    IOStatus s =
        target()->ReuseWritableFile(fname, old_fname, file_opts, &file, dbg);
    return Wrap(std::move(s), std::move(file), 0, r);
  }
  IOStatus NewDirectory(const std::string& name, const IOOptions& io_opts,
                        std::unique_ptr<rocksdb::FSDirectory>* r,
                        IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    IOStatus s = target()->NewDirectory(name, io_opts, &dir, dbg);
    if (s.ok()) r->reset(new FileScopeDirectory(std::move(dir)));
    return s;
  }
  IOStatus RenameFile(const std::string& src, const std::string& dst,
                      const IOOptions& options, IODebugContext* dbg) override {
    return FileScoped(target()->RenameFile(src, dst, options, dbg));
  }
  IOStatus LinkFile(const std::string& src, const std::string& dst,
                    const IOOptions& options, IODebugContext* dbg) override {
    return FileScoped(target()->LinkFile(src, dst, options, dbg));
  }

 private:
  // A file RocksDB opened for writing, wrapped (`wal`: its WAL number or 0).
  IOStatus Wrap(IOStatus s, std::unique_ptr<rocksdb::FSWritableFile> file,
                uint64_t wal, std::unique_ptr<rocksdb::FSWritableFile>* r) {
    if (s.ok()) r->reset(new FileScopeFile(std::move(file), owner_, wal));
    return FileScoped(std::move(s));
  }

  // "<dir>/000012.log" -> 12; 0 if the name is not a WAL's.
  static uint64_t WalNumber(const std::string& fname) {
    const size_t slash = fname.rfind('/');
    const std::string name =
        slash == std::string::npos ? fname : fname.substr(slash + 1);
    if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".log") != 0) {
      return 0;
    }
    uint64_t n = 0;
    for (size_t i = 0; i + 4 < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') return 0;
      n = n * 10 + static_cast<uint64_t>(name[i] - '0');
    }
    return n;
  }

  ErrorRecovery* const owner_;
};

// The base Env with the file-scoping FileSystem in place of its own: its
// threads and clock are the base's.
class ErrorRecovery::FileScopeEnv : public rocksdb::EnvWrapper {
 public:
  FileScopeEnv(rocksdb::Env* base, ErrorRecovery* owner) : EnvWrapper(base) {
    file_system_ = std::make_shared<FileScopeFS>(base->GetFileSystem(), owner);
    system_clock_ = base->GetSystemClock();
  }
  const char* Name() const override { return "FencedkvFileScopeEnv"; }
};

ErrorRecovery::ErrorRecovery() : listener_(std::make_shared<Listener>(this)) {}

ErrorRecovery::~ErrorRecovery() { Stop(); }

void ErrorRecovery::Configure(const std::string& path,
                              rocksdb::DBOptions* options) {
  if (options->info_log == nullptr) {
    options->info_log = std::make_shared<InfoLogger>(path);  // rule 5
  }
  info_log_ = options->info_log;
  rocksdb::Env* base =
      options->env != nullptr ? options->env : rocksdb::Env::Default();
  env_ = std::make_unique<FileScopeEnv>(base, this);
  options->env = env_.get();
  options->max_bgerror_resume_count = 0;  // rule 2: no RocksDB auto-resume
  // Every write goes through the WAL: a close needs no flush.
  options->avoid_flush_during_shutdown = true;
  options->listeners.push_back(listener_);
}

void ErrorRecovery::Attach(rocksdb::DB* db,
                           const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
                           rocksdb::ColumnFamilyHandle* sentinel_cf) {
  {
    MutexLock lock(&mu_);
    db_ = db;
    cfs_ = cfs;
    cv_.notify_all();  // errors noted while opening are handled now
  }
  SetSentinel(sentinel_cf);
}

void ErrorRecovery::SetSentinel(rocksdb::ColumnFamilyHandle* sentinel_cf) {
  rocksdb::DB* db;
  {
    MutexLock sentinel(&sentinel_mu_);
    sentinel_cf_ = sentinel_cf;
    MutexLock lock(&mu_);
    db = stopped_ ? nullptr : db_;  // (a closing database writes none)
  }
  if (db != nullptr) MaybeWriteSentinel(db);
}

void ErrorRecovery::Stop() {
  std::thread thread;
  rocksdb::DB* stuck = nullptr;
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    if (resuming_) stuck = db_;
    db_ = nullptr;
    thread = std::move(thread_);
    cv_.notify_all();
  }
  // A Resume() can wait for ever for a flush RocksDB 7.8 forgot to schedule
  // (rule 6). The DB is closing anyway: make it stop waiting. (Not under
  // mu_: RocksDB takes its own mutex.)
  if (stuck != nullptr) rocksdb::CancelAllBackgroundWork(stuck);
  if (thread.joinable()) thread.join();
}

rocksdb::Status ErrorRecovery::Write(rocksdb::DB* db,
                                     const rocksdb::WriteOptions& options,
                                     rocksdb::WriteBatch* batch) {
  if (closed_.load(std::memory_order_acquire)) {
    MutexLock lock(&mu_);
    if (closed_.load(std::memory_order_relaxed)) {
      ++stats_.gated;
      return gate_error_;
    }
  }
  if (options.sync && batch->Count() > 0 &&
      !LeadsWithSyncedMarker(batch->Data())) {
    // A synced write built without the marker (the hot paths add it as they
    // build): a copy with it.
    *batch = rocksdb::WriteBatch(WithSyncedMarker(batch->Data()));
  }
  rocksdb::Status s = db->Write(options, batch);
  // (A write that asked not to wait in a stall is refused with Incomplete:
  // not a failure.)
  if (!s.ok() && !(options.no_slowdown && s.IsIncomplete())) Failed(s);
  if (tail_ != nullptr) {
    if (s.ok() && !options.disableWAL) {
      // Log readers get the batch without the marker (synced_marker.h):
      // what is around it, copied only if a reader exists (a copy here
      // cost a synced group's writer 8% of its time).
      const std::string_view data = batch->Data();
      if (LeadsWithSyncedMarker(data)) {
        const AroundMarker around = AroundLeadingSyncedMarker(data);
        tail_->Append(around.header, around.records);
      } else {
        tail_->Append(data);
      }
    } else {
      tail_->Reset();
    }
  }
  if (s.ok() && !options.disableWAL && batch->Count() > 0) CallWriteListener();
  return s;
}

void ErrorRecovery::SetWriteListener(std::function<void()> listener) {
  MutexLock lock(&write_listener_mu_);
  has_write_listener_.store(listener != nullptr, std::memory_order_relaxed);
  write_listener_ = std::move(listener);
}

void ErrorRecovery::CallWriteListener() {
  // (A write that read the flag just before a removal finds none under the
  // lock; one that read it just before a set misses it, as a write before
  // the set would.)
  if (!has_write_listener_.load(std::memory_order_relaxed)) return;
  MutexLock lock(&write_listener_mu_);
  if (write_listener_) write_listener_();
}

void ErrorRecovery::Failed(const rocksdb::Status& s) {
  if (!s.IsIOError() && !s.IsIncomplete()) return;
  {
    MutexLock lock(&mu_);
    if (!closed_.load(std::memory_order_relaxed)) {
      gate_error_ = s;
      closed_.store(true, std::memory_order_release);
    }
  }
  NoteError(s);
}

void ErrorRecovery::NoteNewWal(uint64_t number) {
  MutexLock lock(&mu_);
  if (number > current_wal_) current_wal_ = number;
}

void ErrorRecovery::NoteWalFileError(uint64_t number) {
  MutexLock lock(&mu_);
  // Only the WAL being written matters: RocksDB syncs older ones again
  // during a recovery but never appends to them.
  if (number == current_wal_) wal_error_ = true;
}

void ErrorRecovery::NoteError(const rocksdb::Status& error) {
  MutexLock lock(&mu_);
  if (stopped_) return;
  ++stats_.errors;
  stats_.last_error = error.ToString();
  last_error_at_ = std::chrono::steady_clock::now();
  if (!pending_) pending_since_ = std::chrono::steady_clock::now();
  pending_ = true;
  if (!thread_.joinable()) thread_ = std::thread(&ErrorRecovery::Run, this);
  cv_.notify_all();
}

void ErrorRecovery::NoteFlush() {
  MutexLock lock(&mu_);
  if (stopped_) return;
  flushed_ = true;
  if (!thread_.joinable()) thread_ = std::thread(&ErrorRecovery::Run, this);
  cv_.notify_all();
}

void ErrorRecovery::SetRetryInterval(std::chrono::microseconds interval) {
  MutexLock lock(&mu_);
  interval_ = interval;
  cv_.notify_all();
}

ErrorRecovery::Stats ErrorRecovery::GetStats() const {
  MutexLock lock(&mu_);
  Stats st = stats_;
  st.idle = !pending_ && !retrying_ && !resuming_ &&
            !closed_.load(std::memory_order_relaxed);
  return st;
}

bool ErrorRecovery::SomeMemtableHoldsData(rocksdb::DB* db) const {
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  {
    MutexLock lock(&mu_);
    cfs = cfs_;
  }
  for (rocksdb::ColumnFamilyHandle* cf : cfs) {
    uint64_t entries = 0;
    if (!db->GetIntProperty(cf, "rocksdb.num-entries-active-mem-table",
                            &entries) ||
        entries > 0) {
      return true;  // unknown counts as "holds data"
    }
  }
  return false;
}

void ErrorRecovery::MaybeWriteSentinel(rocksdb::DB* db) {
  MutexLock sentinel(&sentinel_mu_);  // SetSentinel(nullptr) waits for it
  rocksdb::ColumnFamilyHandle* const cf = sentinel_cf_;
  bool troubled;
  {
    MutexLock lock(&mu_);
    troubled = pending_ || retrying_ || resuming_ ||
               (stats_.errors > 0 &&
                std::chrono::steady_clock::now() - last_error_at_ < kTroubled);
  }
  if (cf == nullptr || SomeMemtableHoldsData(db)) return;
  // A deletion of the empty key, which no meta key is: it puts an
  // entry in the memtable and leaves no record a reader sees. Normally
  // through the WAL (unsynced): a write without it takes a sequence number
  // the log does not hold, a gap that log shipping (DB::NewLogReader) must
  // refuse, whereas a replica applies a logged one like any other batch.
  // But while an I/O error is recent (the flush of a Resume(), a fault that
  // may last), without the WAL, so that a WAL fault cannot fail it.
  rocksdb::WriteOptions wo;
  wo.disableWAL = troubled;
  wo.no_slowdown = true;  // never wait in a write stall (a flush may not come)
  if (troubled) unlogged_started_.fetch_add(1, std::memory_order_seq_cst);
  const rocksdb::Status s = db->Delete(wo, cf, rocksdb::Slice());
  if (troubled) {
    // (Read after the write: at or past the number it took.)
    const uint64_t latest = db->GetLatestSequenceNumber();
    uint64_t seen = unlogged_sequence_.load(std::memory_order_seq_cst);
    while (seen < latest && !unlogged_sequence_.compare_exchange_weak(
                                seen, latest, std::memory_order_seq_cst)) {
    }
    unlogged_done_.fetch_add(1, std::memory_order_seq_cst);
  }
  // A sequence number log shipping's tail does not hold.
  if (tail_ != nullptr) tail_->Reset();
  // A logged one is in the WAL, for log readers to find.
  if (s.ok() && !troubled) CallWriteListener();
  MutexLock lock(&mu_);
  ++stats_.sentinels;
  if (!s.ok()) stats_.last_error = s.ToString();
}

ErrorRecovery::Unlogged ErrorRecovery::UnloggedWrites() const {
  Unlogged u;
  u.started = unlogged_started_.load(std::memory_order_seq_cst);
  u.done = unlogged_done_.load(std::memory_order_seq_cst);
  u.sequence = unlogged_sequence_.load(std::memory_order_seq_cst);
  return u;
}

void ErrorRecovery::WaitForBackgroundJobs(rocksdb::DB* db) {
  // While RocksDB is stopped it starts no flush or compaction, so this ends
  // when the running ones do (bounded, to be safe).
  for (int i = 0; i < 1000; ++i) {
    uint64_t flushes = 0, compactions = 0;
    if (!db->GetIntProperty(rocksdb::DB::Properties::kNumRunningFlushes,
                            &flushes) ||
        !db->GetIntProperty(rocksdb::DB::Properties::kNumRunningCompactions,
                            &compactions) ||
        flushes + compactions == 0) {
      return;
    }
    {
      MutexLock lock(&mu_);
      if (stopped_) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ErrorRecovery::Run() {
  // Started from a RocksDB callback, it would carry that thread's name.
  SetThreadName("fencedkv:recov");
  mu_.Lock();
  while (!stopped_) {
    rocksdb::DB* const db = db_;
    if (db == nullptr) {
      cv_.wait(mu_);
      continue;
    }
    if (flushed_) {
      flushed_ = false;
      mu_.Unlock();
      TEST_SYNC_POINT("ErrorRecovery::Run:BeforeSentinel");
      MaybeWriteSentinel(db);  // Stop() waits for it before the DB closes
      mu_.Lock();
      continue;
    }
    if (!pending_ && !retrying_) {
      cv_.wait(mu_);
      continue;
    }
    // RocksDB tells the listener before it records the error: an attempt
    // made at once could find nothing to resume (then a later failed write
    // asks again, but this makes it rare).
    auto when = pending_since_ + kSettle;
    if (attempted_ && when < last_attempt_ + interval_) {
      when = last_attempt_ + interval_;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now < when) {
      cv_.wait_until(mu_, when);
      continue;
    }
    pending_ = false;
    attempted_ = true;
    last_attempt_ = now;
    const bool wal_error = wal_error_;
    resuming_ = true;
    mu_.Unlock();
    rocksdb::Status s;
    if (wal_error && !SomeMemtableHoldsData(db)) {
      // Rule 4(b): Resume() would keep the failed WAL.
      s = rocksdb::Status::Aborted(
          "a WAL write failed while every memtable was empty: RocksDB 7.8 "
          "cannot leave that WAL without a reopen");
    } else {
      WaitForBackgroundJobs(db);
      // In the LOG, so a Resume() that never returns (see Stop) shows.
      rocksdb::Warn(info_log_, "fencedkv: Resume() after: %s",
                    GetStats().last_error.c_str());
      s = db->Resume();  // Stop() waits for it before the DB closes
      rocksdb::Warn(info_log_, "fencedkv: Resume() returned %s",
                    s.ToString().c_str());
      // Resume()'s flush left every memtable empty, and the fault may still
      // be there: the sentinel goes in now, before the gate opens (without
      // the WAL: resuming_ is set). Written only after NoteFlush, with the
      // gate open, a write could come first, fail on the new WAL and leave
      // every memtable empty: rule 4(b), writes refused until a reopen
      // (the fault matrix hit it once under load).
      if (s.ok()) MaybeWriteSentinel(db);
    }
    mu_.Lock();
    resuming_ = false;
    if (s.ok()) {
      ++stats_.attempts;
      ++stats_.resumed;
      retrying_ = false;
      wal_error_ = false;
      closed_.store(false, std::memory_order_release);
    } else if (s.IsAborted()) {
      stats_.needs_reopen = true;
      stats_.last_error = s.ToString();
      retrying_ = false;
    } else {
      ++stats_.attempts;
      stats_.last_error = s.ToString();
      // A fatal error needs a reopen: the gate stays closed.
      retrying_ = !s.IsShutdownInProgress() &&
                  s.severity() < rocksdb::Status::Severity::kFatalError;
    }
  }
  mu_.Unlock();
}

}  // namespace fencedkv
