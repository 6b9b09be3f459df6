// Copyright (c) fencedkv authors.
//
// Copies of a database (fencedkv/backup.h): DBImpl::Checkpoint and
// DBImpl::Backup on the open database (RocksDB's Checkpoint and
// BackupEngine), and DB::RestoreFromBackup, which puts the fence floor in
// force in the restored copy before the copy appears at its path.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <system_error>

#include <fcntl.h>
#include <rocksdb/env.h>
#include <rocksdb/utilities/backup_engine.h>
#include <rocksdb/utilities/checkpoint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/backup_lock.h"
#include "db/db_impl.h"
#include "db/fence_format.h"
#include "db/read_only_store.h"
#include "db/rocksdb_options.h"
#include "util/sync_point.h"

namespace fencedkv {

namespace {

namespace fs = std::filesystem;

// `path` made absolute and normal (symlinks of existing parts resolved).
std::string Normalized(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// InvalidArgument if `dir` is the database directory or inside it.
Status CheckOutside(const std::string& db_path, const std::string& dir,
                    const char* what) {
  const std::string db = Normalized(db_path);
  const std::string d = Normalized(dir);
  if (d == db || d.rfind(db + "/", 0) == 0) {
    return Status::InvalidArgument(std::string(what) + " " + dir +
                                   " is inside the database directory " +
                                   db_path);
  }
  return Status::OK();
}

// InvalidArgument unless the directory `path` would be made in exists and
// is a directory: checked before the database is opened (a refused copy
// must leave the store as it was; opening it writes).
Status CheckParentDir(const std::string& path, const char* what) {
  fs::path parent = fs::absolute(fs::path(path)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return Status::InvalidArgument(
        std::string(what) + " " + path,
        "its parent " + parent.string() + " is not an existing directory");
  }
  return Status::OK();
}

}  // namespace

Status CheckCheckpointDir(const std::string& db_path, const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("empty checkpoint directory");
  Status s = CheckOutside(db_path, dir, "checkpoint directory");
  if (!s.ok()) return s;
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return Status::InvalidArgument("checkpoint directory " + dir,
                                   "already exists (it must not)");
  }
  return CheckParentDir(Normalized(dir), "checkpoint directory");
}

Status CheckExportFile(const std::string& db_path, const std::string& file) {
  return CheckOutside(db_path, file, "export file");
}

Status CheckBackupDir(const std::string& db_path,
                      const std::string& backup_dir) {
  if (backup_dir.empty()) {
    return Status::InvalidArgument("empty backup directory");
  }
  Status s = CheckOutside(db_path, backup_dir, "backup directory");
  if (!s.ok()) return s;
  const std::string db = Normalized(db_path);
  const std::string d = Normalized(backup_dir);
  if (d == "/" || db.rfind(d + "/", 0) == 0) {
    return Status::InvalidArgument(
        "backup directory " + backup_dir + " contains the database directory " +
            db_path,
        "a backup directory must be a directory of its own");
  }
  std::error_code ec;
  if (fs::exists(d, ec)) {
    if (!fs::is_directory(d, ec)) {
      return Status::InvalidArgument("backup directory " + backup_dir,
                                     "exists and is not a directory");
    }
  } else {
    s = CheckParentDir(d, "backup directory");
    if (!s.ok()) return s;
  }
  if (fs::exists(fs::path(d) / "CURRENT", ec) ||
      fs::exists(fs::path(d) / "IDENTITY", ec)) {
    return Status::InvalidArgument(
        "backup directory " + backup_dir +
            " is a database directory (it has a CURRENT or IDENTITY file)",
        "a backup directory must be a directory of its own");
  }
  return Status::OK();
}

namespace {

Status FromIO(const rocksdb::IOStatus& s) { return FromRocksDB(s); }

// fsyncs a directory (its entries: renames, new files).
void SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

// What is at a restore's target path.
enum class Target { kMissing, kEmpty, kDatabase };

// Classifies `path`; a database there must be fencedkv's and not in use:
// then *lock holds its LOCK file (so no process opens it until it is moved
// aside).
Status InspectTarget(rocksdb::Env* env, const std::string& path, Target* target,
                     rocksdb::FileLock** lock) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    *target = Target::kMissing;
    return Status::OK();
  }
  if (!fs::is_directory(st)) {
    return Status::InvalidArgument(path, "exists and is not a directory");
  }
  if (fs::is_empty(path, ec)) {
    *target = Target::kEmpty;
    return Status::OK();
  }
  std::vector<std::string> names;
  rocksdb::Status rs =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  const std::set<std::string> have(names.begin(), names.end());
  const std::set<std::string> want = {format::kDataColumnFamily,
                                      format::kFenceColumnFamily,
                                      format::kMetaColumnFamily};
  if (!rs.ok() || have != want) {
    return Status::InvalidArgument(
        "not a fencedkv database: " + path,
        "a restore moves a database it replaces aside, and refuses to touch "
        "anything else: restore to a new or empty directory");
  }
  rs = env->LockFile(path + "/LOCK", lock);
  if (!rs.ok()) {
    return Status::Busy(path +
                            " is in use by a running process (its LOCK "
                            "is held): stop it first",
                        rs.ToString());
  }
  *target = Target::kDatabase;
  return Status::OK();
}

// "<path>.before-restore-<UTC time>", not yet taken.
std::string AsideName(const std::string& path) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  std::string aside = path + ".before-restore-" + stamp;
  std::error_code ec;
  for (int i = 2; fs::exists(aside, ec); ++i) {
    aside = path + ".before-restore-" + stamp + "-" + std::to_string(i);
  }
  return aside;
}

// InvalidArgument unless `floor` is at least the backup's high-water mark,
// lease counter and floor.
Status CheckFloor(Token floor, Token hwm, Token lease_counter,
                  Token old_floor) {
  const std::string why =
      ": tokens up to it were issued before the backup was taken, so the "
      "floor must be at least every token issued since (the old server's "
      "INFO fencing last_lease_token, or etcd's current revision)";
  if (floor < hwm) {
    return Status::InvalidArgument("fence_floor " + std::to_string(floor) +
                                   " is below the backup's high-water mark " +
                                   std::to_string(hwm) + why);
  }
  if (floor < lease_counter) {
    return Status::InvalidArgument("fence_floor " + std::to_string(floor) +
                                   " is below the backup's lease counter " +
                                   std::to_string(lease_counter) + why);
  }
  if (floor < old_floor) {
    return Status::InvalidArgument("fence_floor " + std::to_string(floor) +
                                   " is below the backup's floor " +
                                   std::to_string(old_floor));
  }
  return Status::OK();
}

// Checks `floor` against the backup's marks, read from the backup in place
// (BackupEngine opens it read-only): a refusal writes nothing.
Status CheckFloorAgainstBackup(const rocksdb::BackupEngineReadOnly& engine,
                               uint32_t backup_id,
                               const std::string& backup_dir, Token floor) {
  rocksdb::BackupInfo detail;
  rocksdb::Status rs =
      engine.GetBackupInfo(backup_id, &detail, /*include_file_details=*/true);
  std::unique_ptr<ReadOnlyStore> store;
  Status s = rs.ok() ? ReadOnlyStore::OpenChecked(detail.name_for_open, &store,
                                                  detail.env_for_open.get())
                     : FromRocksDB(rs);
  const std::string which =
      "backup " + std::to_string(backup_id) + " in " + backup_dir;
  if (s.IsCorruption())
    return Status::Corruption(which + " is damaged", s.ToString());
  if (!s.ok()) {
    return Status::InvalidArgument(which + " is not a fencedkv database",
                                   s.ToString());
  }
  const StoreConfig& c = store->config();
  return CheckFloor(floor, c.hwm, c.lease_counter, c.floor);
}

// The floor under which a restored copy refuses every token that the
// database at `path`, which the restore replaces, refused. Its domains'
// maxima go with it, so the floor alone must stand for them: its
// high-water mark bounds them all (format.md), in monotonic mode a domain
// at max m refused every token below m, in strict mode m itself too. Its
// floor stays, and its lease counter (the newest holder's token stays
// accepted, the rule CheckFloor applies to the backup's own counter).
// Read through ReadOnlyStore (format versions 1 and 2, the WAL replayed in
// memory) while the caller holds its LOCK: a refusal writes nothing.
Status CheckFloorAgainstReplaced(const std::string& path, Token floor) {
  std::unique_ptr<ReadOnlyStore> store;
  Status s = ReadOnlyStore::OpenChecked(path, &store);
  if (!s.ok()) {
    return Status::InvalidArgument(
        "cannot read the fence state of the database at " + path +
            ", which this restore would replace",
        s.ToString() +
            "; the floor cannot be checked against it: move it aside "
            "yourself first");
  }
  const StoreConfig& c = store->config();
  const bool strict = c.mode == FenceMode::kStrict;
  // Its records, not only its mark records: with those deleted or damaged
  // (check's "hwm" class) the marks alone said too little, and a floor
  // below tokens the store had refused was taken. Every domain max, data
  // token and lease token it holds, read once (a restore copies a whole
  // backup anyway).
  Token records_max = 0, lease_max = 0;
  {
    auto fence = store->NewIterator(store->fence());
    for (fence->SeekToFirst(); fence->Valid(); fence->Next()) {
      Token max = 0;
      if (format::DecodeToken({fence->value().data(), fence->value().size()},
                              &max)) {
        records_max = std::max(records_max, max);
      }
    }
    auto data = store->NewIterator(store->data());
    for (data->SeekToFirst(); data->Valid(); data->Next()) {
      format::DataRecord record;
      if (format::DecodeDataRecord({data->value().data(), data->value().size()},
                                   &record)) {
        records_max = std::max(records_max, record.token);
      }
    }
    auto meta = store->NewIterator(store->meta());
    const rocksdb::Slice lease_prefix(format::kMetaLeasePrefix.data(),
                                      format::kMetaLeasePrefix.size());
    for (meta->Seek(lease_prefix);
         meta->Valid() && meta->key().starts_with(lease_prefix); meta->Next()) {
      format::LeaseRecord lease;
      if (format::DecodeLeaseRecord(
              {meta->value().data(), meta->value().size()}, &lease)) {
        lease_max = std::max(lease_max, lease.token);
      }
    }
    for (const rocksdb::Iterator* it : {fence.get(), data.get(), meta.get()}) {
      if (!it->status().ok()) {
        return Status::InvalidArgument(
            "cannot read the records of the database at " + path +
                ", which this restore would replace",
            it->status().ToString() +
                "; the floor cannot be checked against it: move it aside "
                "yourself first");
      }
    }
  }
  const Token mark = std::max(c.hwm, records_max);
  const Token leases = std::max(c.lease_counter, lease_max);
  if (strict && mark == kMaxToken) {
    return Status::InvalidArgument(
        "the database at " + path +
        ", which this restore would replace, refused every token (strict "
        "mode, high-water mark " +
        std::to_string(mark) + "): no floor can stand for it");
  }
  const Token needed = std::max({strict ? mark + 1 : mark, leases, c.floor});
  if (floor >= needed) return Status::OK();
  return Status::InvalidArgument(
      "fence_floor " + std::to_string(floor) +
      " would accept again tokens that the database at " + path +
      ", which this restore would replace, refused: its high-water mark " +
      std::to_string(mark) + (strict ? " (strict mode: refused too)" : "") +
      (mark > c.hwm ? " (held by its records; its mark records say only " +
                          std::to_string(c.hwm) + ")"
                    : "") +
      ", lease counter " + std::to_string(leases) + ", floor " +
      std::to_string(c.floor) + "; the floor must be at least " +
      std::to_string(needed));
}

// Whether `name` is a directory name mkdtemp made for a restore to the
// target named `base`: "." + base + ".restoring-" + 6 of mkdtemp's
// characters.
bool IsRestoringName(const std::string& name, const std::string& base) {
  const std::string prefix = "." + base + ".restoring-";
  if (name.size() != prefix.size() + 6 || name.rfind(prefix, 0) != 0) {
    return false;
  }
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

// Removes the directories restores to `parent`/`base` left when they were
// killed (kill -9 leaves the copy it was making). A running restore holds
// an flock on its directory; one that can be locked is dead. REQUIRES: the
// caller holds `parent`'s flock (so no restore is between creating its
// directory and locking it). Returns how many were removed.
size_t RemoveUnfinishedRestores(const std::string& parent,
                                const std::string& base,
                                const std::string& keep) {
  size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsRestoringName(name, base) || it->path() == keep) continue;
    std::error_code ec2;
    if (!fs::is_directory(fs::symlink_status(it->path(), ec2))) continue;
    const int fd = open(it->path().c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        fs::remove_all(it->path(), ec2) != static_cast<uintmax_t>(-1) && !ec2) {
      ++removed;
    }
    close(fd);
  }
  return removed;
}

// The swap of a restored copy into place (SwapIn) is recorded beside the
// target while it runs, in "<parent>/.<base>.restore-swap": the restoring
// directory's name and the device and inode of the database it replaces.
// A restore killed between the exchange and the move aside leaves the
// replaced database under the restoring name, where
// RemoveUnfinishedRestores would take it for a dead copy;
// FinishInterruptedSwap, run first, moves it aside instead.
std::string SwapRecordPath(const std::string& parent, const std::string& base) {
  return parent + "/." + base + ".restore-swap";
}

// Finishes the swap a killed restore to `parent`/`base` left (see above):
// returns where it moved the replaced database ("" if there was none to
// move). *keep: the restoring directory that holds a replaced database it
// could not move (RemoveUnfinishedRestores must leave it). REQUIRES: the
// caller holds `parent`'s flock.
std::string FinishInterruptedSwap(rocksdb::Env* env, const std::string& parent,
                                  const std::string& base, std::string* keep) {
  const std::string record_path = SwapRecordPath(parent, base);
  std::string record;
  if (!rocksdb::ReadFileToString(env, record_path, &record).ok()) return "";
  const size_t nl = record.find('\n');
  unsigned long long dev = 0, ino = 0;  // NOLINT(runtime/int): sscanf's
  if (nl == std::string::npos ||
      std::sscanf(record.c_str() + nl + 1, "%llu %llu", &dev, &ino) != 2 ||
      !IsRestoringName(record.substr(0, nl), base)) {
    return "";  // not one of ours: left as it is
  }
  const std::string held = parent + "/" + record.substr(0, nl);
  struct stat st;
  if (lstat(held.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_dev == dev && st.st_ino == ino) {
    // The replaced database, under the restoring name. (A restore still
    // swapping holds its LOCK until it has moved it.)
    *keep = held;
    rocksdb::FileLock* lock = nullptr;
    if (!env->LockFile(held + "/LOCK", &lock).ok()) return "";
    std::string aside = AsideName(parent + "/" + base);
    const bool moved = std::rename(held.c_str(), aside.c_str()) == 0;
    env->UnlockFile(lock);
    if (!moved) return "";
    keep->clear();
    SyncDirectory(parent);
    std::remove(record_path.c_str());
    return aside;
  }
  // The exchange never happened (the restoring directory is the copy,
  // which RemoveUnfinishedRestores removes; the target is as it was), or
  // the replaced database was moved aside already.
  std::remove(record_path.c_str());
  return "";
}

// Puts the restored copy `tmp` in the place of the database at `target`,
// which goes to `aside`: one atomic exchange (renameat2 RENAME_EXCHANGE),
// so that `target` always holds a database (the old or the fenced copy).
// Before, the old database was renamed aside first: a restore killed
// between the two renames left no database at `target`, and a server
// started there created an empty one that took any token. Where the file
// system cannot exchange, the two renames are all there is.
// *untouched: it failed having moved nothing.
Status SwapIn(const std::string& parent, const std::string& base,
              const std::string& tmp, const std::string& target,
              const std::string& aside, bool* untouched) {
  *untouched = true;
  struct stat st;
  if (stat(target.c_str(), &st) != 0) {
    return Status::IOError("cannot stat " + target, std::strerror(errno));
  }
  const std::string record_path = SwapRecordPath(parent, base);
  const std::string record = fs::path(tmp).filename().string() + "\n" +
                             std::to_string(st.st_dev) + " " +
                             std::to_string(st.st_ino) + "\n";
  // O_EXCL: a record still there is an unfinished swap whose replaced
  // store only it points to (RestoreFromBackup refuses to start then).
  const int fd =
      open(record_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IOError("cannot create " + record_path,
                           std::strerror(errno));
  }
  if (write(fd, record.data(), record.size()) !=
          static_cast<ssize_t>(record.size()) ||
      fsync(fd) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    std::remove(record_path.c_str());
    return Status::IOError("cannot write " + record_path, err);
  }
  close(fd);
  SyncDirectory(parent);
  if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(),
                RENAME_EXCHANGE) == 0) {
    *untouched = false;
    SyncDirectory(parent);
    TEST_SYNC_POINT("RestoreFromBackup:Exchanged");
    if (std::rename(tmp.c_str(), aside.c_str()) != 0) {
      const std::string err = std::strerror(errno);
      // (The record stays: the next restore moves it aside.)
      return Status::IOError("the restored copy is at " + target +
                                 ", but the database it replaced could not be "
                                 "moved from " +
                                 tmp + " to " + aside,
                             err);
    }
  } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
    if (std::rename(target.c_str(), aside.c_str()) != 0) {
      const std::string err = std::strerror(errno);
      std::remove(record_path.c_str());
      return Status::IOError("cannot move " + target + " aside", err);
    }
    *untouched = false;
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
      const std::string err = std::strerror(errno);
      std::remove(record_path.c_str());
      return Status::IOError(
          "cannot rename the restored copy " + tmp + " to " + target,
          err + "; the old database is at " + aside +
              "; the restored copy (floor in force) stays at " + tmp);
    }
  } else {
    const std::string err = std::strerror(errno);
    std::remove(record_path.c_str());
    return Status::IOError("cannot exchange " + tmp + " and " + target, err);
  }
  SyncDirectory(parent);
  std::remove(record_path.c_str());
  return Status::OK();
}

// Puts the floor in force in the restored copy at `dir` (opened by this
// process alone): checks it against the backup's marks, raises the floor
// and the lease counter, drops the lease records. All synced.
Status FenceRestoredCopy(const std::string& dir, Token floor,
                         RestoreResult* result) {
  Options options;
  options.adopt_stored_fence_config = true;
  std::unique_ptr<DB> db;
  Status s = DB::Open(options, dir, &db);
  if (!s.ok()) {
    return Status::InvalidArgument(
        "the backup does not open as a fencedkv database", s.ToString());
  }
  auto* impl = static_cast<DBImpl*>(db.get());
  result->high_water_mark = impl->HighWaterMark();
  s = impl->ReadLeaseCounter(&result->backup_lease_counter);
  if (!s.ok()) return s;
  s = CheckFloor(floor, result->high_water_mark, result->backup_lease_counter,
                 db->GetFenceFloor());
  if (!s.ok()) return s;
  std::vector<std::pair<std::string, std::string>> leases;
  s = impl->ScanMeta(format::kMetaLeasePrefix, &leases);
  for (size_t i = 0; s.ok() && i < leases.size(); ++i) {
    s = impl->DeleteMetaSynced(leases[i].first);
  }
  WriteOptions synced;
  synced.sync = true;
  if (s.ok()) s = db->SetFenceFloor(synced, floor);
  result->lease_counter = std::max(result->backup_lease_counter, floor);
  if (s.ok()) {
    s = impl->PutMetaSynced({{std::string(format::kMetaLeaseCounter),
                              format::EncodeToken(result->lease_counter)}});
  }
  if (!s.ok()) return s;
  result->leases_dropped = leases.size();
  result->fence_floor = db->GetFenceFloor();
  return Status::OK();
}

}  // namespace

constexpr char BackupDirLock::kLockName[];

Status BackupDirLock::Acquire(const std::string& backup_dir, bool exclusive,
                              std::unique_ptr<BackupDirLock>* lock) {
  const std::string file = backup_dir + "/" + kLockName;
  int fd = open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && !exclusive && (errno == EROFS || errno == EACCES)) {
    fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno == EROFS || errno == EACCES || errno == ENOENT)) {
      lock->reset(new BackupDirLock(-1));
      return Status::OK();
    }
  }
  if (fd < 0) {
    return Status::IOError("cannot open the lock file " + file,
                           std::strerror(errno));
  }
  if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return Status::Busy(
          "another fencedkv-admin is using " + backup_dir,
          "its lock " + file +
              " is held (a backup, restore or backups listing, or a "
              "server's FENCEDKV.BACKUP): try again when it is done");
    }
    return Status::IOError("cannot lock " + file, std::strerror(err));
  }
  lock->reset(new BackupDirLock(fd));
  return Status::OK();
}

BackupDirLock::~BackupDirLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

std::string BackupInfo::ToString() const {
  return "backup " + std::to_string(backup_id) + ": " +
         std::to_string(number_files) + " files, " + std::to_string(size) +
         " bytes";
}

Status DBImpl::Checkpoint(const std::string& dir) {
  Status s = CheckCheckpointDir(path_, dir);
  if (!s.ok()) return s;
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status rs = rocksdb::Checkpoint::Create(db_.get(), &raw);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: flush the memtables, so the copy opens without
  // replaying much WAL.
  if (rs.ok()) rs = checkpoint->CreateCheckpoint(dir, 0);
  if (!rs.ok()) return Status::IOError("checkpoint to " + dir, rs.ToString());
  return Status::OK();
}

Status DBImpl::Backup(const std::string& backup_dir,
                      const BackupOptions& options, BackupInfo* info) {
  Status s = CheckBackupDir(path_, backup_dir);
  if (!s.ok()) return s;
  // Created here (BackupEngine would, one level, as here) so that its lock
  // is taken before BackupEngine opens it.
  std::error_code ec;
  fs::create_directory(backup_dir, ec);
  if (ec) {
    return Status::IOError("cannot create backup directory " + backup_dir,
                           ec.message());
  }
  std::unique_ptr<BackupDirLock> dir_lock;
  s = BackupDirLock::Acquire(backup_dir, /*exclusive=*/true, &dir_lock);
  if (!s.ok()) return s;
  rocksdb::BackupEngineOptions engine_options(backup_dir);
  engine_options.callback_trigger_interval_size = 1 << 20;
  rocksdb::BackupEngine* raw = nullptr;
  rocksdb::IOStatus io =
      rocksdb::BackupEngine::Open(engine_options, db_->GetEnv(), &raw);
  std::unique_ptr<rocksdb::BackupEngine> engine(raw);
  if (!io.ok()) {
    return Status::IOError("cannot open backup directory " + backup_dir,
                           io.ToString());
  }
  rocksdb::CreateBackupOptions create;
  create.progress_callback = [&] {
    if (options.should_stop && options.should_stop()) engine->StopBackup();
  };
  if (options.should_stop && options.should_stop()) {
    return Status::Shutdown("backup stopped before it started");
  }
  const std::string metadata =
      "fencedkv format_version=" + std::to_string(format::kFormatVersion) +
      " fence_domain=" + spec_.ToString() +
      " fence_mode=" + FenceModeName(mode_);
  rocksdb::BackupID id = 0;
  io = engine->CreateNewBackupWithMetadata(create, db_.get(), metadata, &id);
  if (io.IsIncomplete()) return Status::Shutdown("backup stopped");
  if (!io.ok()) {
    return Status::IOError("backup to " + backup_dir, io.ToString());
  }
  if (options.verify) {
    io = engine->VerifyBackup(id, /*verify_with_checksum=*/true);
    if (!io.ok()) {
      return Status::Corruption("backup " + std::to_string(id) + " in " +
                                    backup_dir +
                                    " does not match its checksums",
                                io.ToString());
    }
  }
  if (info != nullptr) {
    rocksdb::BackupInfo bi;
    rocksdb::Status rs = engine->GetBackupInfo(id, &bi);
    if (!rs.ok()) return FromRocksDB(rs);
    info->backup_id = bi.backup_id;
    info->timestamp = bi.timestamp;
    info->size = bi.size;
    info->number_files = bi.number_files;
    info->metadata = bi.app_metadata;
  }
  return Status::OK();
}

Status DB::RestoreFromBackup(const std::string& backup_dir_arg,
                             const std::string& path,
                             const RestoreOptions& options,
                             RestoreResult* result) {
  if (options.fence_floor == 0) {
    return Status::InvalidArgument(
        "a restore needs a fence floor (fence_floor)",
        "at least every token issued since the backup was taken: without it "
        "the restored copy would accept again holders that were fenced out "
        "after the backup");
  }
  if (backup_dir_arg.empty() || path.empty()) {
    return Status::InvalidArgument("empty backup directory or database path");
  }
  // Messages name the directory as the caller did.
  const std::string& backup_dir = backup_dir_arg;
  const std::string backup_path = AbsolutePath(backup_dir_arg);
  RestoreResult local;
  if (result == nullptr) result = &local;
  *result = RestoreResult();
  rocksdb::Env* env = rocksdb::Env::Default();
  const std::string target = Normalized(path);
  Status parent_ok = CheckParentDir(target, "restore target");
  if (!parent_ok.ok()) return parent_ok;
  const std::string parent = fs::path(target).parent_path().string();
  std::error_code ec;
  // A symbolic link to nothing looks missing, and its rename would fail
  // only after the whole copy: refused first.
  for (const std::string& p : {path, target}) {
    if (fs::is_symlink(fs::symlink_status(p, ec)) && !fs::exists(p, ec)) {
      return Status::InvalidArgument(
          p, "is a symbolic link to nothing: restore to a real path");
    }
  }
  Target kind;
  rocksdb::FileLock* lock = nullptr;
  Status s = InspectTarget(env, target, &kind, &lock);
  if (!s.ok()) return s;
  // Releases the old database's LOCK on every way out.
  std::unique_ptr<rocksdb::FileLock, std::function<void(rocksdb::FileLock*)>>
      lock_guard(lock, [env](rocksdb::FileLock* l) {
        if (l != nullptr) env->UnlockFile(l);
      });

  // The backup: NotFound before anything is created.
  if (!fs::is_directory(fs::path(backup_path) / "meta", ec)) {
    return Status::NotFound("no backup in " + backup_dir,
                            "it has no BackupEngine meta directory");
  }
  std::unique_ptr<BackupDirLock> dir_lock;
  s = BackupDirLock::Acquire(backup_path, /*exclusive=*/false, &dir_lock);
  if (!s.ok()) return s;
  rocksdb::BackupEngineReadOnly* raw = nullptr;
  rocksdb::IOStatus io = rocksdb::BackupEngineReadOnly::Open(
      rocksdb::BackupEngineOptions(backup_path), env, &raw);
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine(raw);
  if (!io.ok()) {
    return Status::IOError("cannot open backup directory " + backup_dir,
                           io.ToString());
  }
  rocksdb::BackupInfo info;
  rocksdb::Status rs = options.backup_id == 0
                           ? engine->GetLatestBackupInfo(&info)
                           : engine->GetBackupInfo(options.backup_id, &info);
  if (!rs.ok()) {
    std::vector<rocksdb::BackupID> corrupt;
    engine->GetCorruptedBackups(&corrupt);
    std::string detail = rs.ToString();
    if (!corrupt.empty()) {
      detail += "; corrupt backups:";
      for (auto id : corrupt) detail += " " + std::to_string(id);
    }
    return Status::NotFound(options.backup_id == 0
                                ? "no usable backup in " + backup_dir
                                : "no backup " +
                                      std::to_string(options.backup_id) +
                                      " in " + backup_dir,
                            detail);
  }
  if (options.backup_id == 0) {
    // "The latest" is the newest backup: when that one does not load,
    // BackupEngine's latest is an older one, and restoring it silently
    // would hand the operator older data than they asked for.
    std::vector<rocksdb::BackupID> corrupt;
    engine->GetCorruptedBackups(&corrupt);
    rocksdb::BackupID newest = 0;
    for (auto id : corrupt) newest = std::max(newest, id);
    if (newest > info.backup_id) {
      return Status::Corruption(
          "the latest backup in " + backup_dir + ", " + std::to_string(newest) +
              ", is damaged (it does not load)",
          "nothing restored; the latest one that loads is " +
              std::to_string(info.backup_id) +
              ": name it (backup_id) to restore it");
    }
  }
  result->backup_id = info.backup_id;
  if (options.verify) {
    io = engine->VerifyBackup(info.backup_id, /*verify_with_checksum=*/true);
    if (!io.ok()) {
      return Status::Corruption("backup " + std::to_string(info.backup_id) +
                                    " in " + backup_dir +
                                    " does not match its checksums",
                                io.ToString());
    }
  }

  s = CheckFloorAgainstBackup(*engine, info.backup_id, backup_dir,
                              options.fence_floor);
  if (!s.ok()) return s;
  if (kind == Target::kDatabase) {
    s = CheckFloorAgainstReplaced(target, options.fence_floor);
    if (!s.ok()) return s;
  }

  // Restore beside the target; fence there (checking the floor again, on
  // what was restored); then rename into place. The directory is flocked
  // while this restore uses it, so that a later restore to the same target
  // can tell one left by a killed restore (unlocked) and remove it. Both
  // happen under the parent's flock: no restore then sits between making
  // its directory and locking it.
  const std::string base = fs::path(target).filename().string();
  std::string tmp = parent + "/." + base + ".restoring-XXXXXX";
  int tmp_fd = -1;
  {
    const int parent_fd =
        open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    // Without the parent's lock (a file system without flock) nothing is
    // removed: a directory in use could not be told from a dead one.
    // Never waits long: an operator's own lock on that directory (`flock
    // -n DIR cron-job`) would otherwise hang the restore. Without it, the
    // cleanup is skipped.
    bool parent_locked = false;
    for (int i = 0; parent_fd >= 0 && i < 200 && !parent_locked; ++i) {
      parent_locked = flock(parent_fd, LOCK_EX | LOCK_NB) == 0;
      if (!parent_locked) usleep(10000);
    }
    if (parent_locked) {
      std::string keep;
      result->swap_finished = FinishInterruptedSwap(env, parent, base, &keep);
      result->unfinished_removed = RemoveUnfinishedRestores(parent, base, keep);
    }
    // A swap record still there (the cleanup could not run, or could not
    // move the store it points to): a later cleanup must still find it, so
    // no restore overwrites it.
    if (fs::exists(SwapRecordPath(parent, base), ec)) {
      if (parent_fd >= 0) close(parent_fd);
      return Status::Busy(
          "a restore to " + path + " was killed while it swapped its copy in",
          "its record " + SwapRecordPath(parent, base) +
              " names the store it replaced; run the restore again (it "
              "moves that store aside) or, if it still cannot, move the "
              "directory the record names aside by hand and delete the "
              "record");
    }
    const bool made = mkdtemp(tmp.data()) != nullptr;
    const int err = errno;
    bool tmp_locked = false;
    if (made) {
      tmp_fd = open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      tmp_locked = tmp_fd >= 0 && flock(tmp_fd, LOCK_EX | LOCK_NB) == 0;
    }
    if (parent_fd >= 0) close(parent_fd);  // releases its lock
    if (!made) {
      return Status::IOError("cannot create a directory beside " + path,
                             std::strerror(err));
    }
    if (!tmp_locked) {
      // Unlocked, another restore's cleanup could take it for a dead one
      // and delete it under this copy.
      const int lock_err = errno;
      if (tmp_fd >= 0) close(tmp_fd);
      std::error_code ignored;
      fs::remove_all(tmp, ignored);
      return Status::IOError("cannot lock " + tmp, std::strerror(lock_err));
    }
  }
  // Closing it releases the directory's lock, after every way out.
  std::unique_ptr<int, void (*)(int*)> tmp_lock(&tmp_fd, [](int* fd) {
    if (*fd >= 0) close(*fd);
  });
  auto fail = [&tmp](Status st) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return st;
  };
  io = engine->RestoreDBFromBackup(rocksdb::RestoreOptions(), info.backup_id,
                                   tmp, tmp);
  // The engine's copy threads may still be writing into tmp after a failed
  // file (RocksDB stops waiting at the first): destroying it joins them.
  engine.reset();
  if (!io.ok()) {
    return fail(
        io.IsCorruption()
            ? Status::Corruption("backup " + std::to_string(info.backup_id) +
                                     " in " + backup_dir + " is damaged",
                                 io.ToString())
            : FromIO(io));
  }
  s = FenceRestoredCopy(tmp, options.fence_floor, result);
  if (!s.ok()) return fail(s);
  SyncDirectory(tmp);

  if (kind == Target::kDatabase) {
    result->moved_aside = AsideName(target);
    // The old database's LOCK is held through the swap: a restore to the
    // same path meanwhile cannot take the replaced database, under the
    // restoring name, for a dead copy (FinishInterruptedSwap).
    bool untouched = false;
    s = SwapIn(parent, base, tmp, target, result->moved_aside, &untouched);
    lock_guard.reset();
    if (!s.ok() && untouched) {
      result->moved_aside.clear();
      return fail(s);
    }
    return s;
  }
  if (kind == Target::kEmpty) fs::remove(target, ec);
  lock_guard.reset();
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    return Status::IOError(
        "cannot rename the restored copy " + tmp + " to " + target,
        err + "; the restored copy (floor in force) stays at " + tmp);
  }
  SyncDirectory(parent);
  return Status::OK();
}

}  // namespace fencedkv
