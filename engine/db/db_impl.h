// Copyright (c) fencedkv authors.
//
// DBImpl: the RocksDB-backed implementation of fencedkv::DB. It owns the
// rocksdb::DB and its column family handles and is the ONLY code that calls
// rocksdb::DB::Write. Every data or fence mutation (Put, Delete, Write,
// WriteGroup, AdvanceFence) reaches WriteOps(), which writes one
// rocksdb::WriteBatch holding the data and the new max tokens together; the
// metadata-only writes (SetFenceFloor, lease records via PutMetaSynced /
// DeleteMetaSynced) are synced single batches of the meta column family.
//
// Why the check is race-free: a writer locks the FenceTable stripes of all
// the domains it touches, finds the current maxima (the high-water-mark
// shortcut, else the exact cache, else one RocksDB read), decides, records
// the new maxima in the cache, writes (rolling the cache back if the write
// fails) and only then unlocks. Per domain, checks and applies are
// therefore serialized in one order; writers on different stripes run in
// parallel and RocksDB group-commits them.
//
// The high-water mark (hwm_) is an upper bound of every stored domain max:
// it is raised (persisted with a max() merge in the same batch) whenever a
// write raises a max above it. A token that passes against the hwm passes
// against every domain, so such writes need no read at all.

#ifndef FENCEDKV_ENGINE_DB_DB_IMPL_H_
#define FENCEDKV_ENGINE_DB_DB_IMPL_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <rocksdb/db.h>

#include "db/fence_gc_filter.h"
#include "db/fence_table.h"
#include "fencedkv/db.h"

namespace fencedkv {

class ErrorRecovery;

class DBImpl final : public DB {
 public:
  DBImpl(const Options& options, const FenceDomainSpec& spec,
         std::string path);
  ~DBImpl() override;

  // Opens or creates the database (called by DB::Open).
  Status OpenImpl();

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
  FenceDomainSpec GetFenceDomain() const override { return spec_; }
  FenceMode GetFenceMode() const override { return mode_; }
  FenceStats GetFenceStats() const override;
  bool GetProperty(std::string_view property, std::string* value) override;
  Status Flush() override;
  Status CompactRange(const std::string* begin,
                      const std::string* end) override;

  // ---- For the embedded lease service (same process, same write path) ----
  // Reads a meta record; NotFound if absent.
  Status GetMeta(std::string_view key, std::string* value);
  // Writes meta records atomically and synced, serialized with every other
  // meta commit by meta_mu_ (callers hold their own higher-level lock).
  Status PutMetaSynced(const std::vector<std::pair<std::string, std::string>>&
                           records);
  // Deletes a meta record, synced, serialized like PutMetaSynced.
  Status DeleteMetaSynced(const std::string& key);
  // Lists meta records whose key starts with `prefix`.
  Status ScanMeta(std::string_view prefix,
                  std::vector<std::pair<std::string, std::string>>* out);

  // An upper bound of every token ever stored (see the class comment).
  Token HighWaterMark() const { return hwm_.load(std::memory_order_acquire); }

  // ---- Test hooks ----
  Token TEST_HighWaterMark() const { return hwm_.load(); }
  // Number of physical fence-state records: fence CF records plus no-value
  // data records (what floor GC may drop).
  size_t TEST_CountFenceStateRecords();
  size_t TEST_FenceCacheBytes() { return table_->ApproximateMemoryUsage(); }
  ErrorRecovery* TEST_error_recovery() { return recovery_.get(); }

 private:
  enum class OpKind : uint8_t { kPut, kDelete, kAdvance };
  struct PendingOp {
    OpKind kind;
    std::string_view key;
    std::string_view value;
    Token token;             // 0 = unfenced (only with allow_unfenced)
    uint32_t domain_index;   // into the scratch domain states
    Token record_token;      // the token stored in the data record
    WriteCondition condition = WriteCondition::kNone;
    uint32_t group = 0;  // WriteGroup: the batch this op belongs to
    bool skip = false;   // its batch was refused: not written
  };
  struct DomainState;
  struct Scratch;

  Status ValidateKey(std::string_view key) const;
  Status ValidateWriteOp(OpKind kind, std::string_view key,
                         std::string_view value, Token token) const;
  // The single write path. `ops` are validated. Locks, checks, builds one
  // rocksdb::WriteBatch, commits, updates the cache.
  // `is_batch`: stale errors carry the op's index (DB::Write). `result`
  // (optional) receives per-op outcomes; conditions need it. With
  // `group_statuses` (WriteGroup), ops carry their batch in op.group, the
  // batches are checked independently in order, a refused batch gets its
  // status there and is skipped, and the others commit together.
  Status WriteOps(const WriteOptions& options, PendingOp* ops, size_t n,
                  bool is_batch, Token* max_after, WriteResult* result,
                  Status* group_statuses = nullptr);
  // Evaluates conditions and fills *result, reading each key's state under
  // the held locks. Returns false if a condition failed.
  Status EvaluateConditions(const PendingOp* ops, size_t n,
                            WriteResult* result, bool* all_hold);
  // Reads the stored max of `domain` from RocksDB (0 if none).
  Status ReadStoredMax(std::string_view domain, Token* max);
  // Reads the raw data record of `key`; NotFound if absent.
  Status ReadDataRecord(const rocksdb::ReadOptions& ro, std::string_view key,
                        rocksdb::PinnableSlice* raw);

  Status InitializeNewDatabase();
  Status LoadMeta();

  const Options options_;
  const std::string path_;
  // The fence configuration in force: from the options at creation, else
  // the stored one. Set once by OpenImpl before the DB is published.
  FenceDomainSpec spec_;
  FenceMode mode_;

  std::unique_ptr<FenceTable> table_;
  std::atomic<Token> floor_{0};
  std::atomic<Token> hwm_{0};
  std::mutex meta_mu_;  // serializes meta-only commits (floor, leases)

  std::unique_ptr<FenceGcFilter> data_gc_;
  std::unique_ptr<FenceGcFilter> fence_gc_;
  // Gets writes going again after an I/O error (error_recovery.h). Stopped
  // before db_ closes; its Env and listener outlive db_.
  std::unique_ptr<ErrorRecovery> recovery_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* data_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* fence_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;

  // Counters, sharded by thread: each thread bumps its own shard, whose line
  // stays in its core's cache. (Shards by stripe were random lines that the
  // other core had written last: at 2 writer threads the `lock add` was half
  // of WriteOps' own time.) Summed on read.
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
