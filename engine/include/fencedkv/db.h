// Copyright (c) fencedkv authors.
//
// fencedkv: a fenced key-value store on RocksDB.
//
// Every mutation carries a fencing token. The store keeps, per fence domain,
// the highest token it has accepted (max_token) and refuses any write older
// than it. The check and the raise of max_token are applied in the same
// atomic RocksDB write as the data: no reader, crash or concurrent writer can
// observe one without the other, and max_token never decreases (not after a
// delete, a restart or a crash).
//
// Thread safety: a DB is safe for concurrent access from multiple threads
// without any external synchronization. Two writers racing on one domain can
// never both pass a check that only one of them should pass.
//
// Typical use:
//   fencedkv::Options options;
//   options.create_if_missing = true;
//   std::unique_ptr<fencedkv::DB> db;
//   fencedkv::Status s = fencedkv::DB::Open(options, "/tmp/db", &db);
//   s = db->Put(fencedkv::WriteOptions(), "k", "v", /*token=*/7);
//   if (s.IsStaleToken()) { /* a newer holder has written: stop */ }

#ifndef FENCEDKV_INCLUDE_FENCEDKV_DB_H_
#define FENCEDKV_INCLUDE_FENCEDKV_DB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/backup.h"
#include "fencedkv/fence_domain.h"
#include "fencedkv/iterator.h"
#include "fencedkv/options.h"
#include "fencedkv/replication.h"
#include "fencedkv/status.h"
#include "fencedkv/token.h"
#include "fencedkv/version.h"
#include "fencedkv/write_batch.h"

namespace fencedkv {

// Counters since Open (not persisted).
struct FenceStats {
  uint64_t accepted_writes = 0;  // Put/Delete/Write calls that applied
  uint64_t rejected_writes = 0;  // Put/Delete/Write calls refused as stale
  uint64_t advances = 0;         // AdvanceFence calls that raised a max
  uint64_t rejected_reads = 0;   // GetFenced calls refused as stale
  uint64_t unfenced_writes = 0;  // writes with token 0 (allow_unfenced)
};

// Per-operation outcomes of DB::Write, for callers that need them (Redis
// SET NX / XX / GET, DEL's count of deleted keys).
struct WriteResult {
  // Input: also return each key's value before its op.
  bool want_old_values = false;

  // False if an op's condition failed: then nothing was written (no data, no
  // token) and failed_index names the first such op. Fence checks come
  // first: a stale token is a StaleToken status whatever the conditions.
  bool applied = true;
  int64_t failed_index = -1;
  // existed[i]: op i's key had a value just before op i (earlier ops of the
  // same batch count).
  std::vector<bool> existed;
  // old_values[i]: that value ("" when !existed[i]); only if want_old_values.
  std::vector<std::string> old_values;
};

class DB {
 public:
  // Opens the database at `path`.
  //
  // On success stores the database in *db and returns OK. On failure *db is
  // left unchanged and nothing on disk was modified. Errors:
  //  - InvalidArgument: bad options; the database is missing and
  //    create_if_missing is false; it exists and error_if_exists is true;
  //    the directory is not a fencedkv database (an ordinary RocksDB database,
  //    a non-empty directory of other files); the stored fence domain or mode
  //    differs from the options'.
  //  - Busy / IOError: another process has it open, or this one under any
  //    path (another spelling, a symlink, a bind mount), or I/O failed.
  //  - Corruption: the files are damaged.
  static Status Open(const Options& options, const std::string& path,
                     std::unique_ptr<DB>* db);

  DB() = default;
  DB(const DB&) = delete;
  DB& operator=(const DB&) = delete;
  // Closes the database; pending writes are already in the WAL.
  virtual ~DB();

  // Stores value for key if `token` is acceptable for the key's domain, and
  // raises the domain's max to `token`, in one atomic write.
  // Returns:
  //  - OK: applied.
  //  - StaleToken: token is below the domain's max (monotonic), not above it
  //    (strict) or below the floor. Nothing was changed. stale() carries the
  //    offered token, the current max and the domain.
  //  - InvalidArgument: token 0 (unless allow_unfenced), an empty key, a key
  //    or value over the size limits. Nothing was changed.
  //  - IOError: the write failed; nothing was acknowledged.
  virtual Status Put(const WriteOptions& options, std::string_view key,
                     std::string_view value, Token token) = 0;

  // Removes key if `token` is acceptable, with the same rules and results as
  // Put. The domain's max token is kept (and raised to `token`), so a stale
  // holder cannot resurrect a deleted key. Deleting a missing key is OK.
  virtual Status Delete(const WriteOptions& options, std::string_view key,
                        Token token) = 0;

  // Applies every operation of `batch` or none. StaleToken names the first
  // stale op (stale()->batch_index). An empty batch is OK and writes nothing.
  // A batch with conditions (WriteCondition) needs the overload below.
  virtual Status Write(const WriteOptions& options,
                       const WriteBatch& batch) = 0;

  // Write, also reporting per-op outcomes in *result (see WriteResult). A
  // failed condition is OK with result->applied == false. Reading the keys'
  // previous state costs one read per op, under the same locks as the write,
  // so the outcome is exact.
  virtual Status Write(const WriteOptions& options, const WriteBatch& batch,
                       WriteResult* result) = 0;

  // Applies n independent batches in one RocksDB write: each batch is all or
  // nothing on its own, checked as if the batches were written one after
  // another in order, and statuses[i] receives what Write would have
  // returned for batches[i] (OK, StaleToken, InvalidArgument). All accepted
  // batches are committed together: one WAL record, one fsync with sync.
  // This is the group-commit entry point for servers that collect writes
  // from many clients. Batches with conditions are InvalidArgument. Returns
  // OK unless the shared write itself failed; then every batch that had
  // passed its checks gets that error too and nothing was applied.
  virtual Status WriteGroup(const WriteOptions& options,
                            const WriteBatch* const* batches, size_t n,
                            Status* statuses) = 0;

  // Plain read. OK with *value set; NotFound if the key has no value (then
  // *value is left unchanged); InvalidArgument for an invalid key.
  virtual Status Get(const ReadOptions& options, std::string_view key,
                     std::string* value) = 0;

  // n plain reads at once: statuses[i] and values[i] are what Get(keys[i])
  // would give (values[i] is left unchanged unless OK). Faster than n Gets:
  // RocksDB's batched MultiGet probes filters and indexes for all the keys in
  // one pass. All n come from one consistent view of the database.
  virtual void MultiGet(const ReadOptions& options, size_t n,
                        const std::string_view* keys, std::string* values,
                        Status* statuses) = 0;

  // Fenced read: a stale holder must not act on what it reads.
  // Returns StaleToken if `token` is below the domain's max or the floor
  // (whatever the mode: the holder that wrote with token t may read with t),
  // and then *value is left unchanged. Otherwise OK with *value set, or
  // NotFound. If max_token is non-null it receives the domain's max, read
  // from the same snapshot as the value, in every case but InvalidArgument.
  virtual Status GetFenced(const ReadOptions& options, std::string_view key,
                           Token token, std::string* value,
                           Token* max_token) = 0;
  Status GetFenced(const ReadOptions& options, std::string_view key,
                   Token token, std::string* value) {
    return GetFenced(options, key, token, value, nullptr);
  }

  // The current max token of key's domain, 0 if none. With a fence floor F
  // this is the EFFECTIVE max, the one number that tells with the mode's rule
  // which tokens the domain accepts: max(stored, F) in monotonic mode (accept
  // t >= it), max(stored, F - 1) in strict mode (accept t > it). Compaction
  // may drop the records F subsumes at any time; results never depend on
  // when it does.
  virtual Status GetFence(std::string_view key, Token* max_token) = 0;

  // Raises the max token of key's domain to `token` without writing data.
  // A new holder calls it right after acquiring its lease so the old holder
  // is fenced out before the new one writes. A token at or below the current
  // max (or below the floor) changes nothing; it is not an error. *max_after
  // (if non-null) receives the domain's effective max after the call (as
  // GetFence reports it). Always synced. InvalidArgument for token 0 or a
  // bad key.
  virtual Status AdvanceFence(const WriteOptions& options, std::string_view key,
                              Token token, Token* max_after) = 0;

  // Raises the global fence floor: every token below it is then rejected in
  // every domain, and domain records it subsumes may be garbage-collected by
  // compaction. The floor never decreases: a lower floor is InvalidArgument,
  // the same floor is OK. Always synced. Persisted.
  virtual Status SetFenceFloor(const WriteOptions& options, Token floor) = 0;
  // The current floor, 0 if none.
  virtual Token GetFenceFloor() = 0;

  // A new iterator over user keys. The result is never null; check status().
  // The iterator must be destroyed before the DB.
  virtual std::unique_ptr<Iterator> NewIterator(const ReadOptions& options) = 0;

  // The token skew guard's reference point (Options::max_token_skew): the
  // highest token the token source has issued. Only rises; a lower value is
  // ignored. The embedded lease service calls it for every grant and when it
  // opens; a server taking tokens from etcd calls it with etcd's revision.
  // Not persisted (the lease service re-reports its counter on open).
  virtual void NoteIssuedToken(Token token) = 0;
  virtual Token GetIssuedToken() const = 0;

  // The fence configuration in force (the stored one).
  virtual FenceDomainSpec GetFenceDomain() const = 0;
  virtual FenceMode GetFenceMode() const = 0;

  virtual FenceStats GetFenceStats() const = 0;

  // A hint for a server, which reads such keys off its event loops (a read
  // of a large value copies it: about 10 ms per MiB): true for every key at
  // which this DB wrote or read a value of at least kLargeValueBytes since
  // it was opened, and for some others: one bit per key hash (2^20 bits,
  // keyed by a secret per-process key), never cleared until the DB is
  // closed, so with N keys that ever held such a value a fraction of about
  // N / 2^20 of the other keys answers true too. A large value written
  // before the open, or applied from a primary's log, counts from its first
  // read. Thread-safe, lock-free.
  static constexpr size_t kLargeValueBytes = size_t{1} << 20;
  virtual bool MayHoldLargeValue(std::string_view key) const = 0;

  // "fencedkv.stats" (the FenceStats and floor, one "name: value" per line),
  // "fencedkv.high-water-mark" (a bound of every token stored, in decimal),
  // "fencedkv.digest" (16 hex digits hashing every record of every column
  // family: two databases with the same records have the same digest; it
  // reads everything),
  // "fencedkv.fence-cache-bytes" (the fence cache's memory),
  // "fencedkv.value-cache-bytes" / "fencedkv.value-cache-capacity" (the
  // value cache's memory and budget, Options::value_cache_size; 0 if off),
  // "fencedkv.log-tail" (the batches log readers take from memory,
  // Options::log_tail_bytes: held bytes and batches, capacity, and counts
  // of batches appended, resets, reads answered from it, reads sent to the
  // WAL, reads that waited; "name: value" per line),
  // "fencedkv.wal-sync" (Options::wal_sync_interval_ms, the newest
  // sequence a synced write is known to cover, and how many idle syncs the
  // syncer wrote; "name: value" per line),
  // "fencedkv.tickers" (every RocksDB statistics ticker, "name value" per
  // line; only with Options::statistics),
  // "fencedkv.aggregated.<rocksdb int property>" (summed over every column
  // family, e.g. "fencedkv.aggregated.rocksdb.cur-size-all-mem-tables"),
  // or any RocksDB property ("rocksdb.stats", "rocksdb.estimate-num-keys",
  // ...) of the data. Returns false for an unknown property.
  virtual bool GetProperty(std::string_view property, std::string* value) = 0;

  // Flushes memtables to SST files.
  virtual Status Flush() = 0;
  // Compacts user keys in [begin, end]; nullptr means unbounded. Also
  // compacts the fence records, which drops those the floor subsumes.
  virtual Status CompactRange(const std::string* begin,
                              const std::string* end) = 0;

  // ---- Copies (fencedkv/backup.h). Safe while other threads read and
  // write; writes go on during the copy. ----

  // Creates an openable copy of the database in `dir`, which must not exist
  // (RocksDB's Checkpoint: SST files are hard-linked when `dir` is on the
  // same file system, the memtables are flushed first). InvalidArgument if
  // `dir` exists or is inside the database directory; IOError otherwise.
  virtual Status Checkpoint(const std::string& dir) = 0;

  // Adds a backup of the database to `backup_dir` (created if missing) with
  // RocksDB's BackupEngine: files already backed up there are shared, not
  // copied again, and every file is checksummed. On success *info (if
  // non-null) describes the new backup. Only one backup at a time may write
  // into a backup directory: it holds the directory's lock, and Busy
  // refuses a second (or a restore or listing) at once. InvalidArgument if
  // `backup_dir` is inside the database directory, contains it, or is a
  // database directory itself; Shutdown if options.should_stop stopped it.
  virtual Status Backup(const std::string& backup_dir,
                        const BackupOptions& options, BackupInfo* info) = 0;

  // Restores a backup from `backup_dir` to `path` so that no holder fenced
  // out after the backup is accepted again (backup.h):
  //  1. the backup is restored into a new directory beside `path`;
  //  2. there, with the database opened by this process alone, the floor is
  //     raised to options.fence_floor, the lease counter to at least it, and
  //     every lease record is dropped (the leases are no longer known to be
  //     held): all synced;
  //  3. only then is it renamed to `path`. A database already at `path` is
  //     exchanged with the copy in one step (`path` always holds a
  //     database), then moved aside (result->moved_aside), never deleted.
  // Directories left beside `path` by restores to it that were killed are
  // removed first (result->unfinished_removed).
  // Errors, each leaving `path` and `backup_dir` as they were:
  //  - InvalidArgument: fence_floor is 0, or below the backup's high-water
  //    mark, lease counter or floor, or below those of the database at
  //    `path` (strict mode: at or below its mark), whose refused tokens it
  //    must keep refused; `path` is a file, a symbolic link to nothing, or
  //    a directory that is not a fencedkv database.
  //  - NotFound: no backup (with that id) in backup_dir.
  //  - Busy: `path` is in use by a running process; another user holds
  //    backup_dir's lock (a backup being written: backup_lock.h).
  //  - Corruption: the backup's files do not match their checksums.
  static Status RestoreFromBackup(const std::string& backup_dir,
                                  const std::string& path,
                                  const RestoreOptions& options,
                                  RestoreResult* result);

  // ---- Log shipping (fencedkv/replication.h) ----

  // The sequence number of the last record written; 0 if none.
  virtual uint64_t GetLatestSequenceNumber() = 0;

  // A reader of the committed batches that follow `after_sequence` (the
  // first one it returns starts at after_sequence + 1). The log is kept for
  // Options::wal_retention_seconds / wal_retention_mb; a position it no
  // longer holds makes the reader fail with NotFound.
  virtual Status NewLogReader(uint64_t after_sequence,
                              std::unique_ptr<LogReader>* reader) = 0;

  // Called after every write of this database's own that a log reader can
  // read next (it is in the log), on the writing thread, so that a reader
  // waiting for the next batch need not poll. It must be quick and must not
  // call into this database but for GetLatestSequenceNumber(). Replaces the
  // last one; nullptr removes it. When this returns, the listener it
  // replaced is neither running nor ever called again. (Not called for
  // ApplyLogBatch's writes.)
  virtual void SetLogListener(std::function<void()> listener) = 0;

  // Replica: applies one batch of a primary's log, verbatim (it passed the
  // primary's fence checks; none is made here). `first_sequence` must be
  // GetLatestSequenceNumber() + 1, else InvalidArgument (a gap or a repeat)
  // and nothing is applied. The caller must be the only writer: see
  // SetFollowing. NotSupported on a database opened with
  // Options::pipelined_write and without Options::log_replica (that path
  // numbers a failed write anyway: a full disk would leave a gap).
  virtual Status ApplyLogBatch(const WriteOptions& options,
                               uint64_t first_sequence,
                               std::string_view data) = 0;

  // Before a database that applied log batches accepts fenced writes of its
  // own (a promoted replica): re-reads the floor and high-water marks and
  // empties the fence cache, holding every stripe lock.
  virtual Status ReloadFenceState() = 0;

  // Replica: while `following`, every write of the database's own (Put,
  // Delete, Write, WriteGroup, AdvanceFence, SetFenceFloor, the lease
  // service's records) fails with ReadOnly and writes nothing; only
  // ApplyLogBatch writes. Turning it on waits for the writes already past
  // their check, so when it returns the log ends where it will stay until
  // the next ApplyLogBatch: a replica reads its position after this, and no
  // write of its own can land behind it (a write of a deposed primary
  // still queued would take sequence numbers of the new primary's log).
  // Following also stops the I/O-error recovery's empty-memtable sentinel
  // (docs/faults.md; one being written is waited for), and turning it off
  // writes that sentinel at once if every memtable is empty. Off at open,
  // unless Options::log_replica (which a replica must be opened with, or
  // the open's sentinel takes a sequence number of its own).
  virtual void SetFollowing(bool following) = 0;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_DB_H_
