// Copyright (c) fencedkv authors.
//
// Test-only: a rocksdb::FileSystem wrapper that injects I/O errors and
// simulates power loss (the idea of RocksDB's FaultInjectionTestFS and
// LevelDB's SpecialEnv). A test gives it to the engine through
// fencedkv::Options::env:
//
//   auto fs = std::make_shared<test::FaultInjectionFS>();
//   std::unique_ptr<rocksdb::Env> env = test::FaultInjectionFS::NewEnv(fs);
//   options.env = env.get();                  // must outlive the DB
//   ... DB::Open(options, path, &db) ...
//   fs->InjectFault(test::FaultPoint::kWalSync, test::FaultError::kEIO);
//   ... writes fail with IOError ...
//   fs->ClearFaults();
//
// Errors. A fault is armed per FaultPoint (the kind of file and the call,
// below). It lets `ok_calls` more calls at that point succeed, then fails
// every later one with the chosen error, as RocksDB's PosixFileSystem
// reports it: EIO as IOStatus::IOError, ENOSPC as IOStatus::NoSpace, with
// "(injected)" in the message. It lasts until ClearFaults(). While a
// kNoSpace fault fails calls, GetFreeSpace reports 0 bytes free.
//
// Power loss. With buffering on (the default), data appended to a file is
// kept in memory and reaches the real file only on Sync/Fsync, a RangeSync
// that reaches the end of the data, Truncate or Close; only Sync/Fsync make
// it durable (RangeSync is sync_file_range: it starts writeback, it
// promises nothing). So a process killed with SIGKILL loses exactly what it
// had not synced (or closed): that is how crash tests turn kill -9 into a
// power cut. In one process,
// PowerOff() stops every later write from reaching the disk; after the DB
// is closed, DropUnsyncedData() truncates every file written through this
// FileSystem to its last synced size, deletes the files whose creation no
// directory fsync made durable, and puts back what an unsynced rename
// replaced (if it was under 4 KiB, as CURRENT is); then power is on again.
// (Deleting and renaming are otherwise taken as durable at once, and data
// written at Close survives a SIGKILL as if the kernel had written it back:
// RocksDB syncs every SST and MANIFEST before closing it.)
//
// Which SST a call writes: a compaction's files are written at
// Env::IO_LOW priority, a flush's (and recovery's) at IO_HIGH; under a
// write stall both use IO_USER, which counts as a flush here.
//
// Thread-safe: RocksDB calls it from many threads. A file it opens may be
// synced while another thread appends to it (as RocksDB's SyncWAL does).

#ifndef FENCEDKV_ENGINE_UTIL_FAULT_INJECTION_FS_H_
#define FENCEDKV_ENGINE_UTIL_FAULT_INJECTION_FS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/system_clock.h>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace test {

// Where a fault can be injected.
enum class FaultPoint : uint8_t {
  kWalAppend = 0,    // Append to a WAL file (*.log)
  kWalSync,          // Sync/Fsync (or RangeSync to the end) of a WAL file
  kFlushWrite,       // Append/Sync of an SST a flush (or recovery) writes
  kCompactionWrite,  // Append/Sync of an SST a compaction writes
  kManifestWrite,    // Append/Sync of a MANIFEST file
  kCurrentRename,    // the rename that installs a new CURRENT file
};
constexpr int kNumFaultPoints = 6;
const char* FaultPointName(FaultPoint point);

enum class FaultError : uint8_t {
  kEIO = 0,  // IOStatus::IOError ("Input/output error")
  kNoSpace,  // IOStatus::NoSpace ("No space left on device")
};
const char* FaultErrorName(FaultError error);

class FaultInjectionFS : public rocksdb::FileSystemWrapper {
 public:
  // `buffer_unsynced`: keep appended data in memory until it is synced (see
  // the file comment); false writes it through at once (errors only).
  explicit FaultInjectionFS(const std::shared_ptr<rocksdb::FileSystem>& base =
                                rocksdb::FileSystem::Default(),
                            bool buffer_unsynced = true);
  ~FaultInjectionFS() override;

  // An Env that does its file I/O through `fs` and everything else
  // (threads, clock) through Env::Default(), except that a sleep of RocksDB's
  // lasts at most `max_sleep_micros` (a background thread sleeps 1 s after
  // each failed flush or compaction: tests need not wait for it). Keep it
  // alive longer than any DB that uses it.
  static std::unique_ptr<rocksdb::Env> NewEnv(
      const std::shared_ptr<FaultInjectionFS>& fs,
      int max_sleep_micros = 20000);

  static const char* kClassName() { return "FaultInjectionFS"; }
  const char* Name() const override { return kClassName(); }

  // ---- Errors ----
  // Arms a fault at `point` (replacing one armed there): `ok_calls` more
  // calls succeed, then every call fails with `error` until ClearFaults().
  void InjectFault(FaultPoint point, FaultError error, uint64_t ok_calls = 0);
  // Disarms every fault.
  void ClearFaults();
  // Calls made at `point` since construction, and how many of them failed.
  uint64_t calls(FaultPoint point) const;
  uint64_t failures(FaultPoint point) const;

  // ---- Power loss ----
  // From now on nothing written reaches the disk: every write, sync,
  // create, rename or delete fails with IOError("power is off"), and Close
  // discards what was buffered.
  void PowerOff();
  // Power loss: see the file comment. Call it only when no file written
  // through this FileSystem is open (the DB is closed). Powers on again.
  rocksdb::IOStatus DropUnsyncedData();
  bool powered() const;
  // Bytes appended but not yet synced, over all files (for tests).
  uint64_t UnsyncedBytes() const;

  // ---- rocksdb::FileSystem ----
  rocksdb::IOStatus NewWritableFile(const std::string& fname,
                                    const rocksdb::FileOptions& file_opts,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& fname, const rocksdb::FileOptions& file_opts,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& fname, const std::string& old_fname,
      const rocksdb::FileOptions& file_opts,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name,
                                 const rocksdb::IOOptions& io_opts,
                                 std::unique_ptr<rocksdb::FSDirectory>* r,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& dst,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& dst,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFileSize(const std::string& fname,
                                const rocksdb::IOOptions& options,
                                uint64_t* size,
                                rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFreeSpace(const std::string& path,
                                 const rocksdb::IOOptions& options,
                                 uint64_t* diskfree,
                                 rocksdb::IODebugContext* dbg) override;

 private:
  class File;
  class Directory;
  friend class File;
  friend class Directory;

  // What the FileSystem knows of a file it wrote.
  struct FileState {
    uint64_t durable = 0;   // bytes that survive a power loss (synced)
    uint64_t on_disk = 0;   // bytes written to the real file
    uint64_t buffered = 0;  // bytes appended, kept in memory
    bool open = false;
  };
  struct Fault {
    bool armed = false;
    FaultError error = FaultError::kEIO;
    uint64_t ok_calls = 0;
    uint64_t calls = 0;
    uint64_t failures = 0;
  };

  // Counts a call at `point` (none if nullptr); returns IOError if the
  // power is off, the injected error if the point's fault fires, else OK.
  // `context` and `path` make the message, as PosixFileSystem's do.
  rocksdb::IOStatus Check(const FaultPoint* point, const std::string& context,
                          const std::string& path);
  // Records what a file object knows of its file.
  void Publish(const std::string& path, const FileState& state);
  // Records that `path` was (re)created: it is lost on power loss until
  // its directory is synced; what it replaced comes back then.
  void NoteCreated(const std::string& path) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DirectorySynced(const std::string& dir);

  const bool buffer_unsynced_;
  mutable Mutex mu_;
  bool powered_ GUARDED_BY(mu_) = true;
  Fault faults_[kNumFaultPoints] GUARDED_BY(mu_);
  std::map<std::string, FileState> files_ GUARDED_BY(mu_);
  // Per directory: entries created or replaced since its last fsync, with
  // what they replaced (nullptr: nothing).
  std::map<std::string, std::map<std::string, std::shared_ptr<std::string>>>
      unsynced_entries_ GUARDED_BY(mu_);
};

}  // namespace test
}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_FAULT_INJECTION_FS_H_
