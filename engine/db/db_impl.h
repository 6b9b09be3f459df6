// Copyright (c) fencedkv authors.
//
// DBImpl: the RocksDB-backed implementation of fencedkv::DB. It owns the
// rocksdb::DB and its column family handles and is the ONLY code that calls
// rocksdb::DB::Write. Every data or fence mutation (Put, Delete, Write,
// WriteGroup, AdvanceFence) is a WriteRequest that reaches WriteOps()
// (db_impl_write.cc), which writes one rocksdb::WriteBatch holding the data,
// the raised maxima and the raised high-water marks together; the
// metadata-only writes (SetFenceFloor, lease records via PutMetaSynced /
// DeleteMetaSynced) are synced single batches of the meta column family.
//
// Why the check is race-free (docs/concurrency.md has the whole argument): a
// writer locks the FenceTable stripes of all the domains it touches, finds
// the current maxima (the high-water-mark shortcut, else the exact cache,
// else one RocksDB read), decides, writes, and only then records the new
// maxima in the cache and unlocks. Per domain, checks and applies are
// therefore serialized in one order; writers on different stripes run in
// parallel and RocksDB group-commits them.
//
// The high-water mark of a stripe is an upper bound of every stored max of
// the stripe's domains (fence_format.h says how it is persisted). A token
// that passes against it passes against every domain of the stripe, so such
// writes need no lookup at all.

#ifndef FENCEDKV_ENGINE_DB_DB_IMPL_H_
#define FENCEDKV_ENGINE_DB_DB_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/db.h>

#include "fencedkv/db.h"

#include "db/fence_format.h"
#include "db/fence_gc_filter.h"
#include "db/fence_table.h"
#include "db/value_cache.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class ErrorRecovery;
class LogTail;
class MemtableBuckets;

// Whether `dir` may receive a checkpoint of the database at `db_path`: not
// inside it, and not existing. InvalidArgument saying why not.
Status CheckCheckpointDir(const std::string& db_path, const std::string& dir);
// Whether `backup_dir` may be a backup directory of the database at
// `db_path`: not inside it, not containing it (BackupEngine would write
// meta/, private/ and shared_checksum/ among the database's neighbours, and
// a later backup would back up its own backups' parent), not a database
// directory itself (its CURRENT or IDENTITY file). InvalidArgument saying
// why not. DB::Checkpoint and DB::Backup check; fencedkv-admin checks
// before it opens the database (an open rotates its LOG).
Status CheckBackupDir(const std::string& db_path,
                      const std::string& backup_dir);
// An export's output file: not inside the database directory, where
// RocksDB would take a name like 000099.log for a log of its own at the
// next open. InvalidArgument saying so.
Status CheckExportFile(const std::string& db_path, const std::string& file);

class DBImpl final : public DB {
 public:
  DBImpl(const Options& options, const FenceDomainSpec& spec, std::string path);
  ~DBImpl() override;

  // Checks every field of `options` (DB::Open calls it before touching the
  // disk). InvalidArgument naming the field, or OK.
  static Status ValidateOptions(const Options& options);

  // Opens or creates the database (called by DB::Open).
  Status OpenImpl();
  // Starts the WAL syncer (Options::wal_sync_interval_ms), if any; called
  // by DB::Open once the database is open.
  void StartWalSyncer();

  Status Put(const WriteOptions& options, std::string_view key,
             std::string_view value, Token token) override;
  Status Delete(const WriteOptions& options, std::string_view key,
                Token token) override;
  Status Write(const WriteOptions& options, const WriteBatch& batch) override;
  Status Write(const WriteOptions& options, const WriteBatch& batch,
               WriteResult* result) override;
  Status WriteGroup(const WriteOptions& options,
                    const WriteBatch* const* batches, size_t n,
                    Status* statuses) override;
  Status Get(const ReadOptions& options, std::string_view key,
             std::string* value) override;
  void MultiGet(const ReadOptions& options, size_t n,
                const std::string_view* keys, std::string* values,
                Status* statuses) override;
  using DB::GetFenced;
  Status GetFenced(const ReadOptions& options, std::string_view key,
                   Token token, std::string* value, Token* max_token) override;
  Status GetFence(std::string_view key, Token* max_token) override;
  Status AdvanceFence(const WriteOptions& options, std::string_view key,
                      Token token, Token* max_after) override;
  Status SetFenceFloor(const WriteOptions& options, Token floor) override;
  Token GetFenceFloor() override;
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& options) override;
  void NoteIssuedToken(Token token) override;
  Token GetIssuedToken() const override {
    return issued_.load(std::memory_order_acquire);
  }
  FenceDomainSpec GetFenceDomain() const override { return spec_; }
  FenceMode GetFenceMode() const override { return mode_; }
  FenceStats GetFenceStats() const override;
  bool MayHoldLargeValue(std::string_view key) const override;
  bool GetProperty(std::string_view property, std::string* value) override;
  Status Flush() override;
  Status CompactRange(const std::string* begin,
                      const std::string* end) override;
  uint64_t GetLatestSequenceNumber() override;
  Status NewLogReader(uint64_t after_sequence,
                      std::unique_ptr<LogReader>* reader) override;
  void SetLogListener(std::function<void()> listener) override;
  Status ApplyLogBatch(const WriteOptions& options, uint64_t first_sequence,
                       std::string_view data) override;
  Status ReloadFenceState() override;
  void SetFollowing(bool following) override;
  // Copies (db_impl_backup.cc).
  Status Checkpoint(const std::string& dir) override;
  Status Backup(const std::string& backup_dir, const BackupOptions& options,
                BackupInfo* info) override;

  // ---- For the embedded lease service (same process, same write path) ----
  // Reads a meta record; NotFound if absent.
  Status GetMeta(std::string_view key, std::string* value);
  // Writes meta records atomically and synced, serialized with every other
  // meta commit by meta_mu_ (callers hold their own higher-level lock).
  Status PutMetaSynced(
      const std::vector<std::pair<std::string, std::string>>& records)
      LOCKS_EXCLUDED(meta_mu_);
  // Deletes a meta record, synced, serialized like PutMetaSynced.
  Status DeleteMetaSynced(const std::string& key) LOCKS_EXCLUDED(meta_mu_);
  // Puts and deletes meta records in one atomic synced write, serialized
  // like PutMetaSynced.
  Status WriteMetaSynced(
      const std::vector<std::pair<std::string, std::string>>& puts,
      const std::vector<std::string>& deletes) LOCKS_EXCLUDED(meta_mu_);
  // The last lease token issued (the "lease_counter" record): 0 if the
  // store never issued one; Corruption if the record is not 8 bytes.
  Status ReadLeaseCounter(Token* counter);
  // Lists meta records whose key starts with `prefix`.
  Status ScanMeta(std::string_view prefix,
                  std::vector<std::pair<std::string, std::string>>* out);

  // One LeaseService per DB: two would each keep a counter and issue the
  // same tokens. TryClaimLeaseService is false while another holds the
  // claim; the service gives it back when destroyed.
  bool TryClaimLeaseService() { return !lease_service_open_.exchange(true); }
  void ReleaseLeaseService() { lease_service_open_.store(false); }

  // An upper bound of every token ever stored: the largest stripe mark.
  Token HighWaterMark() const { return hwm_.load(std::memory_order_acquire); }

  // ---- Test hooks ----
  // Number of physical fence-state records: fence CF records plus no-value
  // data records (what floor GC may drop).
  size_t TEST_CountFenceStateRecords();
  size_t TEST_FenceCacheBytes() { return table_->ApproximateMemoryUsage(); }
  ErrorRecovery* TEST_error_recovery() { return recovery_.get(); }

 private:
  enum class OpKind : uint8_t { kPut, kDelete, kAdvance };
  // One validated operation of a write request.
  struct PendingOp {
    OpKind kind;
    std::string_view key;
    std::string_view value;
    Token token;  // 0 = unfenced (only with allow_unfenced)
    WriteCondition condition = WriteCondition::kNone;
    uint32_t group = 0;  // kGroup: the batch this op belongs to
    // Filled in by the write path:
    uint32_t domain_index = 0;  // into Scratch::states
    Token record_token = 0;     // the token stored in the data record
    bool skip = false;          // kGroup: its batch was refused
  };

  // What one call of the write path asks for.
  struct WriteRequest {
    enum class Kind : uint8_t {
      kSingle,   // Put / Delete: one op; a stale error has no op index
      kBatch,    // Write: every op or none; a stale error names its op
      kGroup,    // WriteGroup: independent batches (PendingOp::group), each
                 // all or nothing, outcomes in group_statuses
      kAdvance,  // AdvanceFence: one kAdvance op, always synced
    };
    Kind kind;
    bool sync;
    PendingOp* ops;
    size_t n;                          // >= 1
    WriteResult* result = nullptr;     // kBatch: per-op outcomes, conditions
    Status* group_statuses = nullptr;  // kGroup: one per batch, preset OK
    Token* max_after = nullptr;        // kAdvance: the reported max after it
  };
  struct DomainState;
  struct Scratch;

  Status ValidateKey(std::string_view key) const;
  Status ValidateWriteOp(OpKind kind, std::string_view key,
                         std::string_view value, Token token) const;
  // TokenSkew if `token` is past the skew guard's ceiling (0 passes).
  Status CheckTokenSkew(Token token) const;
  static Status FollowingStatus();
  // Validates batch's ops and appends them to *ops as group `group`. On a
  // bad op returns its error (naming the op) and appends nothing.
  Status AppendBatchOps(const WriteBatch& batch, uint32_t group,
                        std::vector<PendingOp>* ops) const;

  // The single write path: locks the stripes of every domain `req` touches,
  // checks, builds one rocksdb::WriteBatch, commits, publishes the new
  // maxima. Its phases, in order, each below:
  Status WriteOps(const WriteRequest& req);
  // The whole request failed before anything was written: each batch of a
  // group still in it gets `s`.
  static void FailGroups(const WriteRequest& req, const Status& s);
  // 1. Which domain each op belongs to, and the sorted, de-duplicated
  //    stripes to lock.
  void LocateDomains(const WriteRequest& req, Scratch* sc);
  // MultiGet with values_ (at most ValueCache::kMaxLookupAll keys, all
  // valid): true if it answered every key, false if they must all be read
  // from RocksDB.
  bool MultiGetThroughCache(const ReadOptions& options,
                            const std::vector<std::string_view>& views,
                            const std::vector<rocksdb::Slice>& slices,
                            const std::vector<size_t>& index,
                            std::string* values, Status* statuses);
  // One key's result of a RocksDB MultiGet: its status, *value if found,
  // and with `fill` (its ticket) what the read found kept in values_.
  Status TakeRead(std::string_view key, const rocksdb::Status& rs,
                  const rocksdb::PinnableSlice& raw,
                  const ValueCache::Ticket* fill, std::string* value);
  // Whether `op` writes its key's value (what the value cache follows).
  static bool ChangesValue(const PendingOp& op);
  // Around Commit, with values_: the value cache's side of each op's key.
  void BeginValueWrites(const WriteRequest& req);
  void EndValueWrites(const WriteRequest& req, bool written);
  // 2. The fence check of every op against its domain's current max (the
  //    rule itself is CheckWrite in fence_check.h). Raises the domain states
  //    and fills each op's record_token. kGroup: a refused batch gets its
  //    status and its ops are skipped; an error reading a max fails that
  //    batch alone. Otherwise returns the first refusal or error.
  //    REQUIRES: the stripes of sc are locked.
  Status CheckFences(const WriteRequest& req, Token floor, Scratch* sc);
  // 3. (kBatch with a result) Conditions and old values, read under the
  //    locks. *all_hold is false if a condition failed.
  Status EvaluateConditions(const WriteRequest& req, bool* all_hold);
  // 4. Encodes the data records, raised domain maxima and raised stripe
  //    marks of the ops not skipped into sc->batch.
  Status BuildBatch(const WriteRequest& req, Scratch* sc);
  // 5. Writes sc->batch (or, for a synced advance that writes nothing,
  //    syncs the WAL so the max it reports is durable).
  Status Commit(const WriteRequest& req, Scratch* sc);
  // Makes every record already in the WAL durable (an always-synced call
  // that wrote nothing): a synced marker record.
  rocksdb::Status SyncWalBarrier();
  // Options::wal_sync_interval_ms: the thread that syncs the log while
  // writes come (StartWalSyncer after the open, StopWalSyncer first at the
  // close).
  void StopWalSyncer();
  void WalSyncerLoop();
  // The syncer's write when a sync stayed due for a whole interval (no
  // write came to carry it): a batch of the synced marker alone, synced.
  // It takes no sequence number (RocksDB counts Puts and Deletes, not
  // LogData), so it is allowed on a replica, whose numbers are its
  // primary's, and after a switchover parts no logs; log readers skip it
  // (LogReaderImpl) and the scan counts it as a synced record
  // (wal_scan.cc).
  void IdleSync();
  // 6. Records the new maxima and marks in memory. REQUIRES: stripes locked.
  void Publish(const Scratch& sc);

  // Reads the stored max of `domain` from RocksDB (0 if none).
  Status ReadStoredMax(std::string_view domain, Token* max);
  // Reads and decodes the data record of `key`: NotFound if absent,
  // Corruption naming the key if it does not decode. record->value points
  // into *raw.
  Status ReadDataRecord(const rocksdb::ReadOptions& ro, std::string_view key,
                        rocksdb::PinnableSlice* raw,
                        format::DataRecord* record);

  // Opening, in order (db_impl_open.cc).
  // What a database's meta column family says about it.
  struct StoredConfig {
    bool has_version = false;  // false: not ours, or creation interrupted
    bool empty = false;        // (when !has_version) no record in any family
    uint32_t version = 0;
    FenceDomainSpec spec;
    FenceMode mode = FenceMode::kMonotonic;
    Token floor = 0;
    Token hwm = 0;
  };
  Status ReadStoredConfig(rocksdb::DB* db,
                          const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
                          StoredConfig* config);
  Status CheckStoredConfig(const StoredConfig& config);
  Status InitializeNewDatabase();
  Status UpgradeFromMergedHwm(Token hwm);
  Status LoadMeta();

  const Options options_;
  const std::string path_;
  // The WAL syncer (Options::wal_sync_interval_ms), and the latest sequence
  // a synced write covered (a sync is due once a write passed it).
  std::thread wal_syncer_;
  Mutex syncer_mu_;
  std::condition_variable_any syncer_cv_;
  bool syncer_stop_ GUARDED_BY(syncer_mu_) = false;
  std::atomic<uint64_t> synced_sequence_{0};
  // A sync is due (the WAL syncer found writes past synced_sequence_):
  // the next write, or on a replica the next applied batch, is written
  // with sync; if none came by the next tick, IdleSync. (Never a record
  // taking a sequence number: after a switchover one would part an old
  // primary's log from the new one's, and a replica's numbers are its
  // primary's.)
  std::atomic<bool> sync_due_{false};
  // Idle syncs written (the "fencedkv.wal-sync" property).
  std::atomic<uint64_t> idle_syncs_{0};
  // The synced stamp (synced_stamp.h): the Env it is written through (the
  // database's own, not the I/O-error recovery's wrapper: a stamp that
  // cannot be written is no database error), the sequence it
  // holds (0: none), and the latest sequence a sync covered that the log
  // holds: a synced batch's last (NoteSynced), or what an idle sync covered
  // unless a sentinel written without the log may have taken it (the
  // I/O-error recovery's, while a fault is recent: a recovery does not
  // reach that number until a flush). Written by the WAL syncer after the
  // open.
  rocksdb::Env* stamp_env_ = nullptr;
  std::atomic<uint64_t> stamped_sequence_{0};
  std::atomic<uint64_t> logged_synced_sequence_{0};
  // On the WAL syncer's thread: stamps synced_sequence_ if it moved.
  void MaybeStampSynced();
  // A synced write of `batch` returned: raises synced_sequence_ to its
  // last sequence (RocksDB set its first in its header).
  void NoteSynced(const rocksdb::WriteBatch& batch);
  // path_'s directory as this process's registry of open databases knows
  // it (db_impl_open.cc: its path and its inode); empty until OpenImpl
  // claimed them. Released after db_ is closed.
  std::vector<std::string> open_keys_;
  // The fence configuration in force: from the options at creation, else
  // the stored one. Set once by OpenImpl before the DB is published.
  FenceDomainSpec spec_;
  FenceMode mode_;

  std::unique_ptr<FenceTable> table_;
  // Null without Options::value_cache_size. Every write of a data record
  // goes through it (WriteOps, ApplyLogBatch).
  std::unique_ptr<ValueCache> values_;
  // MayHoldLargeValue's bits, by hash of the key; NoteValueSize sets one
  // for each value of at least kLargeValueBytes written or read.
  static constexpr size_t kLargeHintBits = size_t{1} << 20;
  static constexpr size_t kLargeHintWords = kLargeHintBits / 64;
  // A key's bit: keyed (SipHash under the process's random key), so that a
  // client cannot pick a small key that shares a large one's bit, to send
  // its reads or a victim's to the long-command thread.
  static size_t LargeHintBit(std::string_view key);
  std::unique_ptr<std::atomic<uint64_t>[]> large_hint_ {
    new std::atomic<uint64_t>[ kLargeHintWords ]()
  };
  std::atomic<bool> any_large_{false};  // a bit of large_hint_ is set
  void NoteValueSize(std::string_view key, size_t size);
  std::atomic<Token> floor_{0};
  std::atomic<Token> hwm_{0};  // the largest stripe mark
  // SetFollowing: set holding every stripe lock and meta_mu_, so a writer
  // that holds one of them sees its latest value.
  std::atomic<bool> following_{false};
  // Held for the whole of SetFollowing: following_ and the recovery's
  // sentinel change together, whatever the callers.
  Mutex follow_mu_ ACQUIRED_BEFORE(meta_mu_);
  std::atomic<Token> issued_{0};  // NoteIssuedToken (the skew guard)
  std::atomic<bool> lease_service_open_{false};
  // Serializes the meta-only commits (the floor, lease records) with each
  // other; the data path never takes it. It guards no member: the records
  // it orders live in RocksDB.
  Mutex meta_mu_;

  std::unique_ptr<FenceGcFilter> data_gc_;
  std::unique_ptr<FenceGcFilter> fence_gc_;
  // The batches written last, for log readers (log_tail.h); null without
  // Options::log_tail_bytes. Every write through recovery_ appends to it or
  // resets it; declared before recovery_ and db_, so it outlives both.
  std::unique_ptr<LogTail> log_tail_;
  // Gets writes going again after an I/O error (error_recovery.h). Stopped
  // before db_ closes; its Env and listener outlive db_.
  std::unique_ptr<ErrorRecovery> recovery_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* data_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* fence_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;
  // With Options::memtable "hash": where the data column family's memtable
  // keeps its buckets, and the factory that owns that (a write loads the
  // buckets of its keys before RocksDB inserts them). Else null.
  std::shared_ptr<rocksdb::MemTableRepFactory> memtable_factory_;
  const MemtableBuckets* data_buckets_ = nullptr;

  // Counters, sharded by thread: each thread bumps its own shard, whose line
  // stays in its core's cache (shards by stripe were random lines the other
  // core had written last). Summed on read.
  struct alignas(64) StatShard {
    std::atomic<uint64_t> accepted{0};
    std::atomic<uint64_t> rejected{0};
    std::atomic<uint64_t> advances{0};
    std::atomic<uint64_t> rejected_reads{0};
    std::atomic<uint64_t> unfenced{0};
  };
  static constexpr size_t kStatShards = 64;  // threads beyond share
  StatShard& LocalShard();
  std::unique_ptr<StatShard[]> stats_;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_DB_IMPL_H_
