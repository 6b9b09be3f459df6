// Copyright (c) fencedkv authors.
//
// ReadOnlyStore: the raw records of a fencedkv directory, read through
// RocksDB's OpenForReadOnly (no LOCK taken, nothing written: safe beside a
// running server, which it does not disturb; it sees the files and WAL as
// they were when it opened). Records are decoded with fence_format.h, the
// one definition of the format. Used by fencedkv-admin and, on a backup in
// place, by DB::RestoreFromBackup.
//
// Not thread-safe.

#ifndef FENCEDKV_ENGINE_DB_READ_ONLY_STORE_H_
#define FENCEDKV_ENGINE_DB_READ_ONLY_STORE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/db.h>

#include "fencedkv/fence_domain.h"
#include "fencedkv/options.h"
#include "fencedkv/status.h"
#include "fencedkv/token.h"

#include "db/fence_format.h"

namespace fencedkv {

// What the meta column family says.
struct StoreConfig {
  uint32_t format_version = 0;
  FenceDomainSpec spec;
  FenceMode mode = FenceMode::kMonotonic;
  Token floor = 0;
  Token hwm = 0;  // the largest "hwm/XXXX" record (v1: "hwm")
  size_t hwm_records = 0;
  bool has_lease_counter = false;
  Token lease_counter = 0;
};

class ReadOnlyStore {
 public:
  // Opens `path` read-only, through `env` (nullptr: the default Env; a
  // backup is opened in place through BackupInfo::env_for_open).
  // InvalidArgument if it is missing or not a fencedkv database (no RocksDB
  // CURRENT file, other column families); Corruption from RocksDB (e.g. a
  // damaged SST footer).
  static Status Open(const std::string& path,
                     std::unique_ptr<ReadOnlyStore>* store,
                     rocksdb::Env* env = nullptr);
  // Open, then no WAL damage (wal_status) and ReadConfig without a single
  // problem: what most readers use.
  static Status OpenChecked(const std::string& path,
                            std::unique_ptr<ReadOnlyStore>* store,
                            rocksdb::Env* env = nullptr);
  ~ReadOnlyStore();
  ReadOnlyStore(const ReadOnlyStore&) = delete;
  ReadOnlyStore& operator=(const ReadOnlyStore&) = delete;

  // Reads the meta records into config(). Each missing or malformed
  // required record is one line in *problems (which may be null). Returns
  // Corruption naming the first problem, or a read error.
  Status ReadConfig(std::vector<std::string>* problems);
  const StoreConfig& config() const { return config_; }

  // Corruption if the WAL holds intact writes past where the open's
  // recovery stopped at damage (wal_scan.h), or if the store recovered to
  // a sequence below what its synced stamp says was synced (a log file
  // gone: synced_stamp.h): this view lacks them.
  const Status& wal_status() const { return wal_status_; }

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* data() const { return handles_[0]; }
  rocksdb::ColumnFamilyHandle* fence() const { return handles_[1]; }
  rocksdb::ColumnFamilyHandle* meta() const { return handles_[2]; }
  const std::string& path() const { return path_; }

  // RocksDB's block checksums (data, index, filter and meta blocks) of
  // every live SST file. Each is read through the descriptor this view's
  // open holds (it opens every table file), so a file a running server
  // deleted since -- a compaction's input -- is still verified (RocksDB's
  // DB::VerifyChecksum opens each file again by name and failed on it).
  // Read by name if no such descriptor is found (no /proc) or the view was
  // opened through another Env. Calls violation(text) once per file that
  // cannot be read or is damaged; *files and *bytes count what was read.
  // One file is open at a time beside the view's own descriptors. Stops
  // before the next file once `stop` (if given) returns true.
  void VerifyTableChecksums(const std::function<void(std::string)>& violation,
                            size_t* files, uint64_t* bytes,
                            const std::function<bool()>& stop = nullptr) const;

  // An iterator over `cf` in total order, checksums verified, not filling
  // the block cache.
  std::unique_ptr<rocksdb::Iterator> NewIterator(
      rocksdb::ColumnFamilyHandle* cf) const;
  // The stored max of `domain` (0 if none): its key's data record with the
  // "key" domain function, else its "fence" record. Corruption names a
  // record that does not decode. REQUIRES: ReadConfig was called.
  Status StoredMax(std::string_view domain, Token* max) const;
  // Calls fn(name, lease) for every "lease/" record, in name order.
  // Corruption names a record that does not decode.
  Status ForEachLease(
      const std::function<void(std::string_view name,
                               const format::LeaseRecord& lease)>& fn) const;

 private:
  ReadOnlyStore() = default;
  std::string path_;
  rocksdb::Env* env_ = nullptr;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  Status wal_status_;
  StoreConfig config_;
};

// A RocksDB status as a fencedkv one, naming what was being read.
Status ReadError(std::string_view what, const rocksdb::Status& s);

// `path` made absolute against the current directory, lexically (symlinks
// kept, no trailing '/'); as given if there is no current directory. A
// relative backup directory misled BackupEngine's in-place open
// (BackupInfo::name_for_open came out as "bkb/private/1", which did not
// open): the restore and fencedkv-admin use it.
std::string AbsolutePath(const std::string& path);

// Whether `dir` is held open by a running process: Busy naming it and
// giving `advice` if its RocksDB LOCK file is locked, IOError if the LOCK
// cannot be opened (a read-only file system, no permission), OK otherwise
// (also when it has none). The lock is probed and released at once; nothing is
// created. (A read-write open of a held directory fails too, but RocksDB
// first renames the running process's LOG file: probe before opening.)
Status CheckNotInUse(const std::string& dir,
                     std::string_view advice = "stop it first");
// Takes `dir`'s RocksDB LOCK and keeps it in *lock, for a change no server
// may start on halfway (release it with rocksdb::Env::Default()->
// UnlockFile): Busy or IOError as CheckNotInUse if a running process holds
// it or it cannot be opened, NotFound if `dir` has none (none is made: one made
// by another user could keep the server out of its directory).
Status LockStore(const std::string& dir, std::string_view advice,
                 rocksdb::FileLock** lock);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_READ_ONLY_STORE_H_
