// Copyright (c) fencedkv authors.
//
// The lock of a backup directory. RocksDB's BackupEngine is not safe across
// processes: two backups written into one directory at the same time both
// report success while one of them is lost, and a reader beside a writer
// may see files half written. So every fencedkv user of a backup directory
// holds an advisory lock (flock) on its file kLockName while it works:
//  - exclusive to write a backup: DBImpl::Backup (fencedkv-admin backup,
//    offline, and the server's FENCEDKV.BACKUP);
//  - shared to read one: DB::RestoreFromBackup and fencedkv-admin backups.
// A second user fails at once (Busy) rather than waiting: a backup can take
// minutes, and an operator or a script should learn at once that it
// collided, not hang. The file is empty and stays; BackupEngine only
// touches its own meta/, private/, shared/ and shared_checksum/, and a
// process that dies drops its lock with its descriptor.
//
// flock locks belong to an open file, so two threads of one process that
// each take the lock exclude each other too. A BackupDirLock itself is not
// thread-safe.

#ifndef FENCEDKV_ENGINE_DB_BACKUP_LOCK_H_
#define FENCEDKV_ENGINE_DB_BACKUP_LOCK_H_

#include <memory>
#include <string>

#include "fencedkv/status.h"

namespace fencedkv {

class BackupDirLock {
 public:
  // The lock file's name inside the backup directory.
  static constexpr char kLockName[] = "FENCEDKV_LOCK";

  // Locks `backup_dir`, which must exist, creating its lock file if
  // missing. Busy ("another fencedkv-admin is using DIR") if a conflicting
  // lock is held; IOError if the file cannot be made or locked. A shared
  // lock where the lock file cannot be made (a read-only mount, another
  // user's directory that has none) is granted without it (*lock holds
  // nothing): nobody writes a backup on a read-only mount, and a directory
  // without the file was last written by a build that took no lock.
  static Status Acquire(const std::string& backup_dir, bool exclusive,
                        std::unique_ptr<BackupDirLock>* lock);

  // Releases the lock.
  ~BackupDirLock();
  BackupDirLock(const BackupDirLock&) = delete;
  BackupDirLock& operator=(const BackupDirLock&) = delete;

 private:
  explicit BackupDirLock(int fd) : fd_(fd) {}
  int fd_;  // -1: not locked (see Acquire)
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_BACKUP_LOCK_H_
