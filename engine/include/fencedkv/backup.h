// Copyright (c) fencedkv authors.
//
// Copies of a database: checkpoints (DB::Checkpoint), backups
// (DB::Backup, RocksDB's BackupEngine: incremental, checksummed) and the
// fencing-safe restore (DB::RestoreFromBackup).
//
// Why a restore needs a fence floor: a backup carries old maxima and an old
// lease counter. Restored as it is, it would accept again a holder that was
// fenced out after the backup was taken, and its lease service would issue
// tokens it had already issued. RestoreFromBackup therefore takes a floor N
// (at least every token issued since the backup) and puts it in force, with
// the lease counter raised to N, before the restored copy appears at its
// path.
//
// Plain structs; not thread-safe themselves.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_BACKUP_H_
#define FENCEDKV_INCLUDE_FENCEDKV_BACKUP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "fencedkv/token.h"

namespace fencedkv {

struct BackupOptions {
  // After creating the backup, re-read every file of it and compare it
  // with its checksum. Default: false (sizes are checked).
  bool verify = false;
  // If set, polled while files are copied (about every MiB); returning true
  // stops the backup: Backup returns Shutdown and no new backup is
  // recorded (the next Backup into the directory cleans up what was
  // copied).
  std::function<bool()> should_stop;
};

// A backup in a backup directory.
struct BackupInfo {
  uint32_t backup_id = 0;
  int64_t timestamp = 0;      // seconds since the epoch
  uint64_t size = 0;          // bytes of the files the backup references
  uint32_t number_files = 0;  // some may be shared with other backups
  std::string metadata;       // what fencedkv recorded (configuration)

  // "backup 3: 12 files, 40960 bytes".
  std::string ToString() const;
};

struct RestoreOptions {
  // Required (0 is InvalidArgument): every token below it is refused by the
  // restored database, and its lease service's next token is above it. It
  // must be at least every token that may have been issued since the backup
  // was taken, and it may not be below the backup's own high-water mark,
  // lease counter or floor. When the restore replaces a database, it may
  // not be below that database's floor, lease counter or high-water mark
  // either (strict mode: it must be above the mark, which that database
  // refused too): the floor stands for the maxima that go with it.
  Token fence_floor = 0;
  // The backup to restore; 0 = the latest (Corruption if the newest backup
  // does not load: an older one is restored only by its id).
  uint32_t backup_id = 0;
  // Verify every file of the backup against its checksum first. (Restore
  // checks each copied file's checksum anyway.)
  bool verify = false;
};

struct RestoreResult {
  uint32_t backup_id = 0;
  Token high_water_mark = 0;       // the backup's
  Token backup_lease_counter = 0;  // the backup's
  Token fence_floor = 0;           // in force now
  Token lease_counter = 0;         // in force now
  size_t leases_dropped = 0;       // lease records removed (all of them)
  // If the path held a database, where it was moved ("" otherwise).
  std::string moved_aside;
  // Directories that restores to the same path, killed halfway, had left
  // beside it (".NAME.restoring-XXXXXX"), removed before this one began.
  size_t unfinished_removed = 0;
  // A restore to the same path killed while it swapped its copy in had
  // left the database it replaced under its restoring name: moved here
  // ("<path>.before-restore-<time>") before this one began ("" if none).
  std::string swap_finished;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_BACKUP_H_
