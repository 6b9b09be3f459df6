// Copyright (c) fencedkv authors.

#include "util/fault_injection_fs.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace fencedkv {
namespace test {

namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

enum class FileKind { kWal, kTable, kManifest, kOther };

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

FileKind KindOf(const std::string& path) {
  const std::string name = BaseName(path);
  if (EndsWith(name, ".log")) return FileKind::kWal;
  if (EndsWith(name, ".sst")) return FileKind::kTable;
  if (name.rfind("MANIFEST-", 0) == 0) return FileKind::kManifest;
  return FileKind::kOther;
}

// Files up to this size that a create or rename replaces are kept, so a
// power loss before the directory is synced can put them back (CURRENT).
constexpr uint64_t kMaxKeptContents = 4096;

}  // namespace

const char* FaultPointName(FaultPoint point) {
  switch (point) {
    case FaultPoint::kWalAppend:
      return "wal_append";
    case FaultPoint::kWalSync:
      return "wal_sync";
    case FaultPoint::kFlushWrite:
      return "flush_write";
    case FaultPoint::kCompactionWrite:
      return "compaction_write";
    case FaultPoint::kManifestWrite:
      return "manifest_write";
    case FaultPoint::kCurrentRename:
      return "current_rename";
  }
  return "unknown";
}

const char* FaultErrorName(FaultError error) {
  return error == FaultError::kEIO ? "EIO" : "ENOSPC";
}

// A writable file: checks faults, buffers unsynced data (if asked) and
// tells the FileSystem how much of it is durable.
class FaultInjectionFS::File : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  File(FaultInjectionFS* fs, std::string path,
       std::unique_ptr<rocksdb::FSWritableFile> target, uint64_t size)
      : FSWritableFileOwnerWrapper(std::move(target)),
        fs_(fs),
        path_(std::move(path)),
        kind_(KindOf(path_)) {
    state_.durable = state_.on_disk = size;
    state_.open = true;
    fs_->Publish(path_, state_);
  }
  ~File() override {
    MutexLock lock(&mu_);
    if (state_.open) {
      // Destroyed without Close: like a process that exits, the buffered
      // data is lost (RocksDB closes every file it wrote).
      buffer_.clear();
      state_.buffered = 0;
      state_.open = false;
      fs_->Publish(path_, state_);
    }
  }

  IOStatus Append(const Slice& data, const IOOptions& options,
                  IODebugContext* dbg) override {
    MutexLock lock(&mu_);
    FaultPoint point;
    IOStatus s =
        fs_->Check(WritePoint(&point), "While appending to file", path_);
    if (!s.ok()) return s;
    if (fs_->buffer_unsynced_) {
      buffer_.append(data.data(), data.size());
      state_.buffered = buffer_.size();
    } else {
      s = target()->Append(data, options, dbg);
      if (!s.ok()) return s;
      state_.on_disk += data.size();
    }
    fs_->Publish(path_, state_);
    return IOStatus::OK();
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& /*info*/,
                  IODebugContext* dbg) override {
    return Append(data, options, dbg);
  }
  // Only used with direct I/O, which the tests do not turn on.
  IOStatus PositionedAppend(const Slice&, uint64_t, const IOOptions&,
                            IODebugContext*) override {
    return IOStatus::NotSupported("PositionedAppend under FaultInjectionFS");
  }
  IOStatus PositionedAppend(const Slice&, uint64_t, const IOOptions&,
                            const rocksdb::DataVerificationInfo&,
                            IODebugContext*) override {
    return IOStatus::NotSupported("PositionedAppend under FaultInjectionFS");
  }

  IOStatus Flush(const IOOptions& options, IODebugContext* dbg) override {
    MutexLock lock(&mu_);
    if (fs_->buffer_unsynced_) return IOStatus::OK();  // stays in memory
    return target()->Flush(options, dbg);
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return SyncImpl(options, dbg, /*fsync=*/false);
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return SyncImpl(options, dbg, /*fsync=*/true);
  }
  // RocksDB's SyncWAL syncs while another thread appends.
  bool IsSyncThreadSafe() const override { return true; }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options,
                     IODebugContext* dbg) override {
    MutexLock lock(&mu_);
    // sync_file_range starts writeback and promises nothing: the data
    // reaches the file, it does not become durable.
    if (offset + nbytes < state_.on_disk + state_.buffered) {
      return IOStatus::OK();
    }
    IOStatus s = fs_->Check(nullptr, "While sync_file_range", path_);
    if (s.ok()) s = WriteThrough(options, dbg);
    return s;
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options,
                    IODebugContext* dbg) override {
    MutexLock lock(&mu_);
    IOStatus s = fs_->Check(nullptr, "While truncating file", path_);
    if (s.ok()) s = WriteThrough(options, dbg);
    if (s.ok()) s = target()->Truncate(size, options, dbg);
    if (!s.ok()) return s;
    state_.on_disk = size;
    state_.durable = std::min(state_.durable, size);
    fs_->Publish(path_, state_);
    return s;
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    MutexLock lock(&mu_);
    IOStatus s = fs_->Check(nullptr, "While closing file", path_);
    if (s.ok()) {
      s = WriteThrough(options, dbg);
    } else {
      buffer_.clear();  // the power is off: it never reaches the disk
      state_.buffered = 0;
    }
    IOStatus c = target()->Close(options, dbg);
    if (s.ok()) s = c;
    state_.open = false;
    fs_->Publish(path_, state_);
    return s;
  }
  uint64_t GetFileSize(const IOOptions& /*options*/,
                       IODebugContext* /*dbg*/) override {
    MutexLock lock(&mu_);
    return state_.on_disk + state_.buffered;
  }

 private:
  // The point a data write to this file hits; nullptr if none.
  const FaultPoint* WritePoint(FaultPoint* point) {
    switch (kind_) {
      case FileKind::kWal:
        *point = FaultPoint::kWalAppend;
        break;
      case FileKind::kTable:
        *point = TablePoint();
        break;
      case FileKind::kManifest:
        *point = FaultPoint::kManifestWrite;
        break;
      case FileKind::kOther:
        return nullptr;
    }
    return point;
  }
  const FaultPoint* SyncPoint(FaultPoint* point) {
    if (kind_ == FileKind::kWal) {
      *point = FaultPoint::kWalSync;
      return point;
    }
    return WritePoint(point);
  }
  FaultPoint TablePoint() {
    // See the header: compactions write at IO_LOW.
    return GetIOPriority() == rocksdb::Env::IO_LOW
               ? FaultPoint::kCompactionWrite
               : FaultPoint::kFlushWrite;
  }

  IOStatus WriteThrough(const IOOptions& options, IODebugContext* dbg)
      EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (buffer_.empty()) return IOStatus::OK();
    IOStatus s = target()->Append(buffer_, options, dbg);
    if (s.ok()) s = target()->Flush(options, dbg);
    if (!s.ok()) return s;
    state_.on_disk += buffer_.size();
    buffer_.clear();
    state_.buffered = 0;
    fs_->Publish(path_, state_);
    return s;
  }

  IOStatus SyncImpl(const IOOptions& options, IODebugContext* dbg, bool fsync) {
    MutexLock lock(&mu_);
    FaultPoint point;
    IOStatus s = fs_->Check(SyncPoint(&point),
                            fsync ? "While fsync" : "While fdatasync", path_);
    if (s.ok()) s = WriteThrough(options, dbg);
    if (s.ok()) {
      s = fsync ? target()->Fsync(options, dbg) : target()->Sync(options, dbg);
    }
    if (!s.ok()) return s;
    state_.durable = state_.on_disk;
    fs_->Publish(path_, state_);
    return s;
  }

  FaultInjectionFS* const fs_;
  const std::string path_;
  const FileKind kind_;
  Mutex mu_;  // Sync may run beside Append
  // Appended, not yet written to the real file.
  std::string buffer_ GUARDED_BY(mu_);
  FileState state_ GUARDED_BY(mu_);  // this object's view; published to fs_
};

// A directory: its fsync makes the entries created in it durable.
class FaultInjectionFS::Directory : public rocksdb::FSDirectoryWrapper {
 public:
  Directory(FaultInjectionFS* fs, std::string dir,
            std::unique_ptr<rocksdb::FSDirectory> target)
      : FSDirectoryWrapper(std::move(target)), fs_(fs), dir_(std::move(dir)) {}

  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(nullptr, "While fsync dir", dir_);
    if (s.ok()) s = FSDirectoryWrapper::Fsync(options, dbg);
    if (s.ok()) fs_->DirectorySynced(dir_);
    return s;
  }
  IOStatus FsyncWithDirOptions(
      const IOOptions& options, IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& dir_fsync_options) override {
    IOStatus s = fs_->Check(nullptr, "While fsync dir", dir_);
    if (s.ok()) {
      s = FSDirectoryWrapper::FsyncWithDirOptions(options, dbg,
                                                  dir_fsync_options);
    }
    if (s.ok()) fs_->DirectorySynced(dir_);
    return s;
  }

 private:
  FaultInjectionFS* const fs_;
  const std::string dir_;
};

FaultInjectionFS::FaultInjectionFS(
    const std::shared_ptr<rocksdb::FileSystem>& base, bool buffer_unsynced)
    : FileSystemWrapper(base), buffer_unsynced_(buffer_unsynced) {}

FaultInjectionFS::~FaultInjectionFS() = default;

namespace {

// The default clock with shorter sleeps (see NewEnv).
class CappedSleepClock : public rocksdb::SystemClockWrapper {
 public:
  CappedSleepClock(const std::shared_ptr<rocksdb::SystemClock>& target,
                   int max_micros)
      : SystemClockWrapper(target), max_micros_(max_micros) {}
  const char* Name() const override { return "CappedSleepClock"; }
  void SleepForMicroseconds(int micros) override {
    SystemClockWrapper::SleepForMicroseconds(std::min(micros, max_micros_));
  }

 private:
  const int max_micros_;
};

// A composite Env (file I/O through the FileSystem) with that clock.
class FaultEnv : public rocksdb::EnvWrapper {
 public:
  FaultEnv(std::unique_ptr<rocksdb::Env> composite,
           std::shared_ptr<rocksdb::SystemClock> clock)
      : EnvWrapper(std::move(composite)) {
    file_system_ = target()->GetFileSystem();
    system_clock_ = std::move(clock);
  }
  const char* Name() const override { return "FaultEnv"; }
};

}  // namespace

std::unique_ptr<rocksdb::Env> FaultInjectionFS::NewEnv(
    const std::shared_ptr<FaultInjectionFS>& fs, int max_sleep_micros) {
  std::unique_ptr<rocksdb::Env> composite = rocksdb::NewCompositeEnv(fs);
  auto clock = std::make_shared<CappedSleepClock>(composite->GetSystemClock(),
                                                  max_sleep_micros);
  return std::make_unique<FaultEnv>(std::move(composite), std::move(clock));
}

void FaultInjectionFS::InjectFault(FaultPoint point, FaultError error,
                                   uint64_t ok_calls) {
  MutexLock lock(&mu_);
  Fault& f = faults_[static_cast<int>(point)];
  f.armed = true;
  f.error = error;
  f.ok_calls = ok_calls;
}

void FaultInjectionFS::ClearFaults() {
  MutexLock lock(&mu_);
  for (Fault& f : faults_) f.armed = false;
}

uint64_t FaultInjectionFS::calls(FaultPoint point) const {
  MutexLock lock(&mu_);
  return faults_[static_cast<int>(point)].calls;
}

uint64_t FaultInjectionFS::failures(FaultPoint point) const {
  MutexLock lock(&mu_);
  return faults_[static_cast<int>(point)].failures;
}

IOStatus FaultInjectionFS::Check(const FaultPoint* point,
                                 const std::string& context,
                                 const std::string& path) {
  MutexLock lock(&mu_);
  if (!powered_) {
    return IOStatus::IOError(context + ": " + path, "power is off (injected)");
  }
  if (point == nullptr) return IOStatus::OK();
  Fault& f = faults_[static_cast<int>(*point)];
  ++f.calls;
  if (!f.armed) return IOStatus::OK();
  if (f.ok_calls > 0) {
    --f.ok_calls;
    return IOStatus::OK();
  }
  ++f.failures;
  const std::string where = context + ": " + path;
  if (f.error == FaultError::kNoSpace) {
    return IOStatus::NoSpace(where, "No space left on device (injected)");
  }
  return IOStatus::IOError(where, "Input/output error (injected)");
}

void FaultInjectionFS::Publish(const std::string& path,
                               const FileState& state) {
  MutexLock lock(&mu_);
  files_[path] = state;
}

void FaultInjectionFS::NoteCreated(const std::string& path) {
  auto& entries = unsynced_entries_[DirName(path)];
  const std::string name = BaseName(path);
  if (entries.count(name) != 0) return;  // keep what the durable entry was
  std::shared_ptr<std::string> previous;
  uint64_t size = 0;
  if (target()->FileExists(path, IOOptions(), nullptr).ok() &&
      target()->GetFileSize(path, IOOptions(), &size, nullptr).ok() &&
      size <= kMaxKeptContents) {
    previous = std::make_shared<std::string>();
    if (!rocksdb::ReadFileToString(target(), path, previous.get()).ok()) {
      previous.reset();
    }
  }
  entries[name] = std::move(previous);
}

void FaultInjectionFS::DirectorySynced(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  MutexLock lock(&mu_);
  unsynced_entries_.erase(d);
}

void FaultInjectionFS::PowerOff() {
  MutexLock lock(&mu_);
  powered_ = false;
}

bool FaultInjectionFS::powered() const {
  MutexLock lock(&mu_);
  return powered_;
}

uint64_t FaultInjectionFS::UnsyncedBytes() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [path, st] : files_) {
    n += st.on_disk + st.buffered - st.durable;
  }
  return n;
}

IOStatus FaultInjectionFS::DropUnsyncedData() {
  std::map<std::string, FileState> files;
  std::map<std::string, std::map<std::string, std::shared_ptr<std::string>>>
      entries;
  {
    MutexLock lock(&mu_);
    for (const auto& [path, st] : files_) {
      if (st.open) {
        return IOStatus::IOError("DropUnsyncedData: still open", path);
      }
    }
    files = files_;
    entries = unsynced_entries_;
  }
  // Unsynced data first; then the directory entries, which may delete or
  // replace the same files.
  for (auto& [path, st] : files) {
    if (st.on_disk > st.durable &&
        target()->FileExists(path, IOOptions(), nullptr).ok()) {
      IOStatus s = target()->Truncate(path, st.durable, IOOptions(), nullptr);
      if (!s.ok()) return s;
    }
    st.on_disk = st.durable;
  }
  for (const auto& [dir, names] : entries) {
    for (const auto& [name, previous] : names) {
      std::string path = dir;
      path.append("/").append(name);
      IOStatus s;
      if (previous == nullptr) {
        s = target()->DeleteFile(path, IOOptions(), nullptr);
        if (s.IsNotFound() || s.IsPathNotFound()) s = IOStatus::OK();
        files.erase(path);
      } else {
        s = rocksdb::WriteStringToFile(target(), *previous, path, true);
        files[path] = FileState{previous->size(), previous->size(), 0, false};
      }
      if (!s.ok()) return s;
    }
  }
  MutexLock lock(&mu_);
  files_ = std::move(files);
  unsynced_entries_.clear();
  powered_ = true;
  return IOStatus::OK();
}

// ---- rocksdb::FileSystem ----

IOStatus FaultInjectionFS::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  IOStatus s = Check(nullptr, "While open a file for appending", fname);
  if (!s.ok()) return s;
  {
    MutexLock lock(&mu_);
    NoteCreated(fname);
  }
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = target()->NewWritableFile(fname, file_opts, &file, dbg);
  if (!s.ok()) return s;
  r->reset(new File(this, fname, std::move(file), 0));
  return s;
}

IOStatus FaultInjectionFS::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  IOStatus s = Check(nullptr, "While open a file for appending", fname);
  if (!s.ok()) return s;
  uint64_t size = 0;
  if (!target()->GetFileSize(fname, IOOptions(), &size, dbg).ok()) {
    MutexLock lock(&mu_);
    NoteCreated(fname);
  }
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = target()->ReopenWritableFile(fname, file_opts, &file, dbg);
  if (!s.ok()) return s;
  r->reset(new File(this, fname, std::move(file), size));
  return s;
}

IOStatus FaultInjectionFS::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname,
    const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  // FileSystem's own, not the wrapper's (which would pass it to the target
  // unseen): a rename, then a new file, both through this class.
  // NOLINTNEXTLINE(bugprone-parent-virtual-call)
  return rocksdb::FileSystem::ReuseWritableFile(fname, old_fname, file_opts, r,
                                                dbg);
}

IOStatus FaultInjectionFS::NewDirectory(
    const std::string& name, const IOOptions& io_opts,
    std::unique_ptr<rocksdb::FSDirectory>* r, IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSDirectory> dir;
  IOStatus s = target()->NewDirectory(name, io_opts, &dir, dbg);
  if (!s.ok()) return s;
  r->reset(new Directory(this, name, std::move(dir)));
  return s;
}

IOStatus FaultInjectionFS::RenameFile(const std::string& src,
                                      const std::string& dst,
                                      const IOOptions& options,
                                      IODebugContext* dbg) {
  const FaultPoint current = FaultPoint::kCurrentRename;
  IOStatus s = Check(BaseName(dst) == "CURRENT" ? &current : nullptr,
                     "While renaming a file to " + dst, src);
  if (!s.ok()) return s;
  MutexLock lock(&mu_);
  NoteCreated(dst);  // before the rename: it keeps what dst was
  s = target()->RenameFile(src, dst, options, dbg);
  if (!s.ok()) return s;
  auto it = files_.find(src);
  if (it != files_.end()) {
    files_[dst] = it->second;
    files_.erase(src);
  }
  auto dir = unsynced_entries_.find(DirName(src));
  if (dir != unsynced_entries_.end()) dir->second.erase(BaseName(src));
  return s;
}

IOStatus FaultInjectionFS::LinkFile(const std::string& src,
                                    const std::string& dst,
                                    const IOOptions& options,
                                    IODebugContext* dbg) {
  IOStatus s = Check(nullptr, "While link a file to " + dst, src);
  if (!s.ok()) return s;
  MutexLock lock(&mu_);
  NoteCreated(dst);
  s = target()->LinkFile(src, dst, options, dbg);
  auto it = files_.find(src);
  if (s.ok() && it != files_.end()) files_[dst] = it->second;
  return s;
}

IOStatus FaultInjectionFS::DeleteFile(const std::string& fname,
                                      const IOOptions& options,
                                      IODebugContext* dbg) {
  IOStatus s = Check(nullptr, "While unlink() file", fname);
  if (!s.ok()) return s;
  s = target()->DeleteFile(fname, options, dbg);
  if (s.ok()) {
    MutexLock lock(&mu_);
    files_.erase(fname);
    auto dir = unsynced_entries_.find(DirName(fname));
    if (dir != unsynced_entries_.end()) dir->second.erase(BaseName(fname));
  }
  return s;
}

IOStatus FaultInjectionFS::GetFileSize(const std::string& fname,
                                       const IOOptions& options, uint64_t* size,
                                       IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    auto it = files_.find(fname);
    if (it != files_.end() && it->second.open) {
      *size = it->second.on_disk + it->second.buffered;
      return IOStatus::OK();
    }
  }
  return target()->GetFileSize(fname, options, size, dbg);
}

IOStatus FaultInjectionFS::GetFreeSpace(const std::string& path,
                                        const IOOptions& options,
                                        uint64_t* diskfree,
                                        IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    for (const Fault& f : faults_) {
      if (f.armed && f.ok_calls == 0 && f.error == FaultError::kNoSpace) {
        *diskfree = 0;
        return IOStatus::OK();
      }
    }
  }
  return target()->GetFreeSpace(path, options, diskfree, dbg);
}

}  // namespace test
}  // namespace fencedkv
