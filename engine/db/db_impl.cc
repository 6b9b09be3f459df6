// Copyright (c) fencedkv authors.

#include "db/db_impl.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <unordered_map>

#include <rocksdb/slice.h>
#include <rocksdb/write_batch.h>

#include "db/db_iter.h"
#include "db/error_recovery.h"
#include "db/fence_check.h"
#include "db/fence_format.h"
#include "db/rocksdb_options.h"
#include "util/coding.h"
#include "util/sync_point.h"

namespace fencedkv {

namespace {

constexpr size_t kNumStripes = 1024;

rocksdb::Slice ToSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

rocksdb::ReadOptions ToRocks(const ReadOptions& options) {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = options.verify_checksums;
  ro.fill_cache = options.fill_cache;
  return ro;
}

// Locks a sorted, de-duplicated list of stripes; unlocks on destruction.
class StripeLocks {
 public:
  StripeLocks(FenceTable* table, const std::vector<size_t>& stripes)
      : table_(table), stripes_(stripes) {
    for (size_t s : stripes_) table_->mutex(s).lock();
  }
  ~StripeLocks() {
    for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) {
      table_->mutex(*it).unlock();
    }
  }

 private:
  FenceTable* table_;
  const std::vector<size_t>& stripes_;
};

void RaiseAtomicMax(std::atomic<Token>* target, Token value) {
  Token cur = target->load(std::memory_order_relaxed);
  while (cur < value && !target->compare_exchange_weak(
                            cur, value, std::memory_order_release,
                            std::memory_order_relaxed)) {
  }
}

}  // namespace

// The fence state of one domain during a write.
struct DBImpl::DomainState {
  std::string_view domain;
  uint64_t hash;
  size_t stripe;
  Token max;    // valid iff known
  bool known;   // max is the domain's exact current max
  bool raised;  // the write raises the domain's max (persist a record)
};

// Per-thread scratch space so the write path does not allocate in steady
// state. Not reentrant (the write path never recurses).
struct DBImpl::Scratch {
  std::vector<DomainState> states;
  std::vector<size_t> stripes;
  std::vector<PendingOp> ops;
  std::unordered_map<std::string_view, uint32_t> index;  // large batches
  rocksdb::WriteBatch batch;
  std::string value;  // a data record being encoded
  // WriteGroup: domain states as they were before the current batch.
  struct Undo {
    uint32_t index;
    Token max;
    bool known, raised;
  };
  std::vector<Undo> undo;

  void Reset() {
    states.clear();
    stripes.clear();
    index.clear();
    batch.Clear();
  }

  uint32_t IndexOf(std::string_view domain, const FenceTable& table) {
    constexpr size_t kLinearScanLimit = 16;
    if (states.size() < kLinearScanLimit) {
      for (uint32_t i = 0; i < states.size(); ++i) {
        if (states[i].domain == domain) return i;
      }
      if (states.size() + 1 == kLinearScanLimit) {
        for (uint32_t i = 0; i < states.size(); ++i) {
          index.emplace(states[i].domain, i);
        }
      }
    } else {
      auto it = index.find(domain);
      if (it != index.end()) return it->second;
    }
    const auto i = static_cast<uint32_t>(states.size());
    const uint64_t hash = FenceTable::Hash(domain);
    table.Prefetch(hash);
    states.push_back(
        DomainState{domain, hash, table.StripeOf(hash), 0, false, false});
    if (!index.empty() || states.size() == kLinearScanLimit) {
      index.emplace(domain, i);
    }
    return i;
  }
};

DBImpl::DBImpl(const Options& options, const FenceDomainSpec& spec,
               std::string path)
    : options_(options),
      path_(std::move(path)),
      spec_(spec),
      mode_(options.fence_mode),
      table_(new FenceTable(kNumStripes, options.fence_cache_bytes)),
      data_gc_(new FenceGcFilter(&floor_,
                                 FenceGcFilter::Target::kDataRecords)),
      fence_gc_(new FenceGcFilter(&floor_,
                                  FenceGcFilter::Target::kFenceRecords)),
      recovery_(new ErrorRecovery),
      stats_(new StatShard[kStatShards]) {}

DBImpl::~DBImpl() {
  recovery_->Stop();  // no Resume() on a closing DB
  if (db_ != nullptr) {
    for (auto* cf : {data_cf_, fence_cf_, meta_cf_}) {
      if (cf != nullptr) db_->DestroyColumnFamilyHandle(cf);
    }
    db_->Close();
    db_.reset();
  }
}

Status DB::Open(const Options& options, const std::string& path,
                std::unique_ptr<DB>* db) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  FenceDomainSpec spec;
  Status s = FenceDomainSpec::Parse(options.fence_domain, &spec);
  if (!s.ok()) return s;
  if (options.max_key_size == 0) {
    return Status::InvalidArgument("max_key_size must be at least 1");
  }
  auto impl = std::make_unique<DBImpl>(options, spec, path);
  s = impl->OpenImpl();
  if (s.ok()) *db = std::move(impl);
  return s;
}

DB::~DB() = default;

Status DBImpl::OpenImpl() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(path_, ec);
  bool has_current = false;
  if (exists) {
    if (!fs::is_directory(path_, ec)) {
      return Status::InvalidArgument(path_, "exists and is not a directory");
    }
    has_current = fs::exists(fs::path(path_) / "CURRENT", ec);
    const bool empty = fs::is_empty(path_, ec);
    if (ec) return Status::IOError(path_, ec.message());
    if (!has_current && !empty) {
      return Status::InvalidArgument(
          "not a fencedkv database: " + path_,
          "the directory has files but no RocksDB CURRENT file");
    }
  }
  if (has_current && options_.error_if_exists) {
    return Status::InvalidArgument(path_,
                                   "database exists (error_if_exists is true)");
  }
  if (!has_current && !options_.create_if_missing) {
    return Status::InvalidArgument(
        path_, "database does not exist (create_if_missing is false)");
  }

  rocksdb::DBOptions db_options;
  rocksdb::ColumnFamilyOptions data_options;
  Status s = BuildRocksDBOptions(options_, &db_options, &data_options);
  if (!s.ok()) return s;
  recovery_->Configure(path_, &db_options);

  if (has_current) {
    // Refuse anything that is not ours before RocksDB touches it.
    std::vector<std::string> names;
    rocksdb::Status rs =
        rocksdb::DB::ListColumnFamilies(db_options, path_, &names);
    if (!rs.ok()) {
      return Status::InvalidArgument(
          "not a fencedkv database: " + path_,
          "cannot read its column families (" + rs.ToString() + ")");
    }
    std::set<std::string> have(names.begin(), names.end());
    const std::set<std::string> want = {format::kDataColumnFamily,
                                        format::kFenceColumnFamily,
                                        format::kMetaColumnFamily};
    if (have != want) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return Status::InvalidArgument(
          "not a fencedkv database: " + path_,
          "its column families are [" + list +
              "], expected [default, fence, meta]");
    }
  }

  db_options.create_if_missing = !has_current;
  db_options.create_missing_column_families = !has_current;
  data_options.compaction_filter = data_gc_.get();
  rocksdb::ColumnFamilyOptions fence_options = data_options;
  fence_options.compaction_filter = fence_gc_.get();
  rocksdb::ColumnFamilyOptions meta_options;
  meta_options.merge_operator = NewMaxTokenMergeOperator();

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {format::kDataColumnFamily, data_options},
      {format::kFenceColumnFamily, fence_options},
      {format::kMetaColumnFamily, meta_options}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status rs =
      rocksdb::DB::Open(db_options, path_, descriptors, &handles, &raw);
  if (!rs.ok()) return FromRocksDB(rs);
  db_.reset(raw);
  data_cf_ = handles[0];
  fence_cf_ = handles[1];
  meta_cf_ = handles[2];
  recovery_->Attach(db_.get(), handles, data_cf_);

  return has_current ? LoadMeta() : InitializeNewDatabase();
}

Status DBImpl::InitializeNewDatabase() {
  rocksdb::WriteBatch batch;
  char version[4];
  EncodeFixed32(version, format::kFormatVersion);
  const char mode = static_cast<char>(mode_);
  batch.Put(meta_cf_, ToSlice(format::kMetaFormatVersion),
            rocksdb::Slice(version, 4));
  batch.Put(meta_cf_, ToSlice(format::kMetaFenceDomain), spec_.ToString());
  batch.Put(meta_cf_, ToSlice(format::kMetaFenceMode), rocksdb::Slice(&mode, 1));
  batch.Put(meta_cf_, ToSlice(format::kMetaFenceFloor), format::EncodeToken(0));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  data_gc_->SetMode(mode_);
  fence_gc_->SetMode(mode_);
  return FromRocksDB(db_->Write(wo, &batch));
}

Status DBImpl::LoadMeta() {
  std::string raw;
  Status s = GetMeta(format::kMetaFormatVersion, &raw);
  if (s.IsNotFound()) {
    // Either not ours, or a creation interrupted before its first (synced)
    // metadata write. Only a completely empty database is the latter.
    bool empty = true;
    for (auto* cf : {data_cf_, fence_cf_, meta_cf_}) {
      std::unique_ptr<rocksdb::Iterator> it(
          db_->NewIterator(IteratorReadOptions(), cf));
      it->SeekToFirst();
      if (it->Valid() || !it->status().ok()) empty = false;
    }
    if (empty && options_.create_if_missing) return InitializeNewDatabase();
    return Status::InvalidArgument(
        "not a fencedkv database: " + path_,
        empty ? "its creation was interrupted; open it with create_if_missing "
                "to finish"
              : "it has no format_version record");
  }
  if (!s.ok()) return s;
  if (raw.size() != 4) return Status::Corruption("bad format_version record");
  const uint32_t version = DecodeFixed32(raw.data());
  if (version != format::kFormatVersion) {
    return Status::NotSupported(
        "database format version " + std::to_string(version),
        "this build reads version " + std::to_string(format::kFormatVersion));
  }

  s = GetMeta(format::kMetaFenceDomain, &raw);
  if (!s.ok()) return Status::Corruption("missing fence_domain record", s.ToString());
  FenceDomainSpec stored_spec;
  if (!FenceDomainSpec::Parse(raw, &stored_spec).ok()) {
    return Status::Corruption("bad fence_domain record", EscapeBytes(raw));
  }
  s = GetMeta(format::kMetaFenceMode, &raw);
  if (!s.ok()) return Status::Corruption("missing fence_mode record", s.ToString());
  if (raw.size() != 1 || static_cast<uint8_t>(raw[0]) > 1) {
    return Status::Corruption("bad fence_mode record");
  }
  const auto stored_mode = static_cast<FenceMode>(raw[0]);

  if (!options_.adopt_stored_fence_config) {
    if (stored_spec != spec_) {
      return Status::InvalidArgument(
          "fence domain mismatch: the database at " + path_ +
              " was created with fence_domain \"" + stored_spec.ToString() +
              "\" but the options ask for \"" + spec_.ToString() + "\"",
          "reopening with another domain function would silently break "
          "every fence");
    }
    if (stored_mode != mode_) {
      return Status::InvalidArgument(
          "fence mode mismatch: the database at " + path_ +
              " was created with fence_mode \"" + FenceModeName(stored_mode) +
              "\" but the options ask for \"" + FenceModeName(mode_) + "\"",
          "the acceptance rule is fixed at creation");
    }
  }
  spec_ = stored_spec;
  mode_ = stored_mode;
  data_gc_->SetMode(mode_);
  fence_gc_->SetMode(mode_);

  Token floor = 0;
  s = GetMeta(format::kMetaFenceFloor, &raw);
  if (!s.ok() || !format::DecodeToken(raw, &floor)) {
    return Status::Corruption("missing or bad fence_floor record");
  }
  Token hwm = 0;
  s = GetMeta(format::kMetaHighWaterMark, &raw);
  if (s.ok()) {
    if (!format::DecodeToken(raw, &hwm)) {
      return Status::Corruption("bad hwm record");
    }
  } else if (!s.IsNotFound()) {
    return s;
  }
  hwm_.store(hwm, std::memory_order_release);
  floor_.store(floor, std::memory_order_release);
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Validation

Status DBImpl::ValidateKey(std::string_view key) const {
  if (key.empty()) return Status::InvalidArgument("empty key");
  if (key.size() > options_.max_key_size) {
    return Status::InvalidArgument(
        "key of " + std::to_string(key.size()) + " bytes exceeds max_key_size " +
        std::to_string(options_.max_key_size));
  }
  return Status::OK();
}

Status DBImpl::ValidateWriteOp(OpKind kind, std::string_view key,
                               std::string_view value, Token token) const {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  if (value.size() > options_.max_value_size) {
    return Status::InvalidArgument(
        "value of " + std::to_string(value.size()) +
        " bytes exceeds max_value_size " +
        std::to_string(options_.max_value_size));
  }
  if (token == 0 && (kind == OpKind::kAdvance || !options_.allow_unfenced)) {
    return Status::InvalidArgument(
        "invalid token 0: a fencing token is an integer in [1, 2^64-1]");
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// The write path

Status DBImpl::Put(const WriteOptions& options, std::string_view key,
                   std::string_view value, Token token) {
  Status s = ValidateWriteOp(OpKind::kPut, key, value, token);
  if (!s.ok()) return s;
  PendingOp op{OpKind::kPut, key, value, token, 0, 0};
  return WriteOps(options, &op, 1, /*is_batch=*/false, nullptr, nullptr);
}

Status DBImpl::Delete(const WriteOptions& options, std::string_view key,
                      Token token) {
  Status s = ValidateWriteOp(OpKind::kDelete, key, {}, token);
  if (!s.ok()) return s;
  PendingOp op{OpKind::kDelete, key, {}, token, 0, 0};
  return WriteOps(options, &op, 1, /*is_batch=*/false, nullptr, nullptr);
}

Status DBImpl::Write(const WriteOptions& options, const WriteBatch& batch) {
  if (batch.HasConditions()) {
    return Status::InvalidArgument(
        "a batch with conditions needs DB::Write(options, batch, result)");
  }
  return Write(options, batch, nullptr);
}

Status DBImpl::Write(const WriteOptions& options, const WriteBatch& batch,
                     WriteResult* result) {
  if (result != nullptr) {
    result->applied = true;
    result->failed_index = -1;
    result->existed.assign(batch.Count(), false);
    result->old_values.assign(result->want_old_values ? batch.Count() : 0,
                              std::string());
  }
  if (batch.Count() == 0) return Status::OK();
  thread_local std::vector<PendingOp> ops;
  ops.clear();
  for (size_t i = 0; i < batch.Count(); ++i) {
    const WriteBatch::Op op = batch.Get(i);
    const OpKind kind = op.type == WriteBatch::OpType::kPut ? OpKind::kPut
                                                            : OpKind::kDelete;
    Status s = ValidateWriteOp(kind, op.key, op.value, op.token);
    if (!s.ok()) {
      return Status::InvalidArgument("batch op " + std::to_string(i),
                                     s.message());
    }
    ops.push_back(
        PendingOp{kind, op.key, op.value, op.token, 0, 0, op.condition});
  }
  return WriteOps(options, ops.data(), ops.size(), /*is_batch=*/true,
                  nullptr, result);
}

Status DBImpl::AdvanceFence(const WriteOptions& options, std::string_view key,
                            Token token, Token* max_after) {
  Status s = ValidateWriteOp(OpKind::kAdvance, key, {}, token);
  if (!s.ok()) return s;
  WriteOptions synced = options;
  synced.sync = true;  // SPEC: fence-only operations are always synced
  PendingOp op{OpKind::kAdvance, key, {}, token, 0, 0};
  return WriteOps(synced, &op, 1, /*is_batch=*/false, max_after, nullptr);
}

Status DBImpl::WriteGroup(const WriteOptions& options,
                          const WriteBatch* const* batches, size_t n,
                          Status* statuses) {
  thread_local std::vector<PendingOp> ops;
  ops.clear();
  for (size_t g = 0; g < n; ++g) {
    statuses[g] = Status::OK();
    const WriteBatch& batch = *batches[g];
    if (batch.HasConditions()) {
      statuses[g] = Status::InvalidArgument(
          "WriteGroup does not take batches with conditions");
      continue;
    }
    const size_t first = ops.size();
    for (size_t i = 0; i < batch.Count() && statuses[g].ok(); ++i) {
      const WriteBatch::Op op = batch.Get(i);
      const OpKind kind = op.type == WriteBatch::OpType::kPut ? OpKind::kPut
                                                              : OpKind::kDelete;
      Status s = ValidateWriteOp(kind, op.key, op.value, op.token);
      if (!s.ok()) {
        statuses[g] = Status::InvalidArgument("batch op " + std::to_string(i),
                                              s.message());
        ops.resize(first);
        break;
      }
      PendingOp p{kind, op.key, op.value, op.token, 0, 0};
      p.group = static_cast<uint32_t>(g);
      ops.push_back(p);
    }
  }
  if (ops.empty()) return Status::OK();
  return WriteOps(options, ops.data(), ops.size(), /*is_batch=*/true, nullptr,
                  nullptr, statuses);
}

Status DBImpl::WriteOps(const WriteOptions& options, PendingOp* ops, size_t n,
                        bool is_batch, Token* max_after, WriteResult* result,
                        Status* group_statuses) {
  // A holder paused here (GC, SIGSTOP) has not been checked yet: whatever
  // lands meanwhile is what it will be checked against.
  TEST_SYNC_POINT("DBImpl::Write:BeforeLock");
  thread_local Scratch scratch;
  Scratch& sc = scratch;
  sc.Reset();
  for (size_t i = 0; i < n; ++i) {
    ops[i].domain_index = sc.IndexOf(spec_.DomainOf(ops[i].key), *table_);
  }
  for (const DomainState& ds : sc.states) sc.stripes.push_back(ds.stripe);
  std::sort(sc.stripes.begin(), sc.stripes.end());
  sc.stripes.erase(std::unique(sc.stripes.begin(), sc.stripes.end()),
                   sc.stripes.end());

  StripeLocks locks(table_.get(), sc.stripes);
  const Token floor = floor_.load(std::memory_order_acquire);
  const Token hwm = hwm_.load(std::memory_order_acquire);
  const bool per_key = spec_.is_per_key();

  // Makes ds.max exact: from the cache, else from RocksDB.
  auto ensure_known = [&](DomainState& ds) -> Status {
    if (ds.known) return Status::OK();
    if (!table_->Lookup(ds.hash, ds.domain, &ds.max)) {
      Status s = ReadStoredMax(ds.domain, &ds.max);
      if (!s.ok()) return s;
      table_->Insert(ds.hash, ds.domain, ds.max);
    }
    ds.known = true;
    return Status::OK();
  };

  // WriteGroup: an undo log of domain states, so a refused batch leaves no
  // trace in them; `group_first` is the first op of the current batch.
  std::vector<Scratch::Undo>& undo = sc.undo;
  undo.clear();
  size_t group_first = 0;
  uint64_t accepted_groups = 0, rejected_groups = 0;
  auto refuse_group = [&](size_t i, Status status) {
    // Undo this batch's effects and skip its ops.
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      DomainState& d = sc.states[it->index];
      d.max = it->max;
      d.known = it->known;
      d.raised = it->raised;
    }
    undo.clear();
    const uint32_t g = ops[i].group;
    for (size_t j = group_first; j < n && ops[j].group == g; ++j) ops[j].skip = true;
    group_statuses[g] = std::move(status);
    ++rejected_groups;
  };

  bool unfenced = false;
  for (size_t i = 0; i < n; ++i) {
    PendingOp& op = ops[i];
    DomainState& ds = sc.states[op.domain_index];
    if (group_statuses != nullptr) {
      if (i == 0 || op.group != ops[i - 1].group) {
        if (i > 0 && !ops[i - 1].skip) ++accepted_groups;
        undo.clear();
        group_first = i;
      }
      if (op.skip) continue;
      undo.push_back(Scratch::Undo{op.domain_index, ds.max, ds.known, ds.raised});
    }
    if (op.kind == OpKind::kAdvance) {
      if (SubsumedByFloor(mode_, op.token, floor)) {
        // The floor already refuses everything this advance would.
      } else if (!ds.known && op.token > hwm) {
        ds.max = op.token;  // every stored max is <= hwm < token
        ds.known = ds.raised = true;
      } else {
        Status s = ensure_known(ds);
        if (!s.ok()) return s;
        if (op.token > ds.max) {
          ds.max = op.token;
          ds.raised = true;
        }
      }
      op.record_token = ds.max;
      continue;
    }
    if (op.token == 0) {  // explicitly unfenced (allow_unfenced)
      unfenced = true;
      if (per_key) {  // the record carries the key's max: keep it
        Status s = ensure_known(ds);
        if (!s.ok()) return s;
      }
      op.record_token = ds.known ? ds.max : 0;
      continue;
    }
    if (!ds.known) {
      if (CheckWrite(mode_, op.token, hwm, floor) == Verdict::kAccept) {
        // Every stored max is <= hwm, so the token passes any of them and
        // becomes this domain's max: no lookup, no read.
        ds.max = op.token;
        ds.known = ds.raised = true;
        op.record_token = op.token;
        continue;
      }
      Status s = ensure_known(ds);  // the cache, else one RocksDB read
      if (!s.ok()) return s;
    }
    const Verdict verdict = CheckWrite(mode_, op.token, ds.max, floor);
    if (verdict != Verdict::kAccept) {
      if (group_statuses != nullptr) {
        refuse_group(i, StaleStatus(verdict, op.token, ds.max, floor, ds.domain,
                                    static_cast<int64_t>(i - group_first)));
        continue;
      }
      LocalShard().rejected.fetch_add(1, std::memory_order_relaxed);
      return StaleStatus(verdict, op.token, ds.max, floor, ds.domain,
                         is_batch ? static_cast<int64_t>(i) : -1);
    }
    if (op.token > ds.max) {
      ds.max = op.token;
      ds.raised = true;
    }
    op.record_token = op.token;
  }
  if (group_statuses != nullptr) {
    if (!ops[n - 1].skip) ++accepted_groups;
    LocalShard().rejected.fetch_add(rejected_groups, std::memory_order_relaxed);
  }
  TEST_SYNC_POINT("DBImpl::Write:AfterCheck");
  if (result != nullptr) {
    // Every token passed; now the conditions, against the exact current
    // state (the locks keep it still).
    bool all_hold = true;
    Status s = EvaluateConditions(ops, n, result, &all_hold);
    if (!s.ok()) return s;
    if (!all_hold) return Status::OK();  // nothing written, nothing raised
  }

  // Build the one atomic batch: data + raised maxima + high-water mark.
  rocksdb::WriteBatch& batch = sc.batch;
  char header[format::kMaxDataHeaderSize];
  for (size_t i = 0; i < n; ++i) {
    const PendingOp& op = ops[i];
    if (op.skip) continue;
    const rocksdb::Slice key = ToSlice(op.key);
    switch (op.kind) {
      case OpKind::kPut: {
        // One contiguous value: RocksDB's SliceParts overload costs more
        // (measured with callgrind) than this copy into a reused buffer.
        const size_t hn = format::EncodeDataHeader(
            header, format::RecordKind::kValue, op.record_token);
        sc.value.assign(header, hn);
        sc.value.append(op.value.data(), op.value.size());
        batch.Put(data_cf_, key, sc.value);
        break;
      }
      case OpKind::kDelete:
        if (per_key) {  // keep the key's token: a tombstone with its max
          const size_t hn = format::EncodeDataHeader(
              header, format::RecordKind::kNoValue, op.record_token);
          batch.Put(data_cf_, key, rocksdb::Slice(header, hn));
        } else {
          batch.Delete(data_cf_, key);
        }
        break;
      case OpKind::kAdvance:
        if (per_key && sc.states[op.domain_index].raised) {
          // Re-stamp the key's record with the new max, keeping its value.
          rocksdb::PinnableSlice old;
          Status s = ReadDataRecord(rocksdb::ReadOptions(), op.key, &old);
          format::DataRecord rec{format::RecordKind::kNoValue, 0, {}};
          if (s.ok()) {
            if (!format::DecodeDataRecord({old.data(), old.size()}, &rec)) {
              return Status::Corruption("bad data record for key",
                                        EscapeBytes(op.key));
            }
          } else if (!s.IsNotFound()) {
            return s;
          }
          const size_t hn =
              format::EncodeDataHeader(header, rec.kind, op.record_token);
          sc.value.assign(header, hn);
          sc.value.append(rec.value.data(), rec.value.size());
          batch.Put(data_cf_, key, sc.value);
        }
        break;
    }
  }
  Token new_hwm = hwm;
  for (const DomainState& ds : sc.states) {
    if (!ds.raised) continue;
    if (!per_key) {
      batch.Put(fence_cf_, ToSlice(ds.domain), format::EncodeToken(ds.max));
    }
    new_hwm = std::max(new_hwm, ds.max);
  }
  if (new_hwm > hwm) {
    batch.Merge(meta_cf_, ToSlice(format::kMetaHighWaterMark),
                format::EncodeToken(new_hwm));
  }

  const bool is_advance = n == 1 && ops[0].kind == OpKind::kAdvance;
  if (batch.Count() > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    rocksdb::Status rs;
    TEST_SYNC_POINT_CALLBACK("DBImpl::Write:RocksDBWrite", &rs);  // may fail it
    if (rs.ok()) rs = recovery_->Write(db_.get(), wo, &batch);
    if (!rs.ok()) {
      const Status failed = FromRocksDB(rs);
      if (group_statuses != nullptr) {
        for (size_t i = 0; i < n; ++i) {
          if (!ops[i].skip) group_statuses[ops[i].group] = failed;
        }
      }
      return failed;  // the cache was not touched: still exact
    }
    // Record the new maxima only now that they are durable. The stripes are
    // still locked, so nobody sees a max before its write; and the lines were
    // prefetched before the lock, so RocksDB's write hid their misses.
    for (const DomainState& ds : sc.states) {
      if (ds.raised) table_->Insert(ds.hash, ds.domain, ds.max);
    }
    RaiseAtomicMax(&hwm_, new_hwm);
  }
  StatShard& shard = LocalShard();
  if (is_advance) {
    if (sc.states[0].raised) {
      shard.advances.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    shard.accepted.fetch_add(group_statuses != nullptr ? accepted_groups : 1,
                             std::memory_order_relaxed);
    if (unfenced) shard.unfenced.fetch_add(1, std::memory_order_relaxed);
  }
  if (max_after != nullptr) {
    DomainState& ds = sc.states[0];
    if (!ds.known) {
      Status s = ensure_known(ds);
      if (!s.ok()) return s;
    }
    *max_after = ReportedMax(mode_, ds.max, floor);
  }
  return Status::OK();
}

Status DBImpl::EvaluateConditions(const PendingOp* ops, size_t n,
                                  WriteResult* result, bool* all_hold) {
  // The state each key has just before each op: RocksDB's, then the effects
  // of earlier ops of this batch.
  std::unordered_map<std::string_view, std::pair<bool, std::string_view>>
      overlay;
  std::string storage_value;
  rocksdb::PinnableSlice raw;
  *all_hold = true;
  for (size_t i = 0; i < n; ++i) {
    const PendingOp& op = ops[i];
    if (op.kind == OpKind::kAdvance) continue;
    bool present = false;
    std::string_view value;
    auto it = overlay.find(op.key);
    if (it != overlay.end()) {
      present = it->second.first;
      value = it->second.second;
    } else {
      raw.Reset();
      Status s = ReadDataRecord(rocksdb::ReadOptions(), op.key, &raw);
      if (s.ok()) {
        format::DataRecord rec;
        if (!format::DecodeDataRecord({raw.data(), raw.size()}, &rec)) {
          return Status::Corruption("bad data record for key",
                                    EscapeBytes(op.key));
        }
        present = rec.kind == format::RecordKind::kValue;
        storage_value.assign(rec.value.data(), rec.value.size());
        value = storage_value;
      } else if (!s.IsNotFound()) {
        return s;
      }
    }
    result->existed[i] = present;
    if (result->want_old_values && present) {
      result->old_values[i].assign(value.data(), value.size());
    }
    if ((op.condition == WriteCondition::kIfAbsent && present) ||
        (op.condition == WriteCondition::kIfPresent && !present)) {
      result->applied = false;
      result->failed_index = static_cast<int64_t>(i);
      *all_hold = false;
      return Status::OK();
    }
    overlay[op.key] = {op.kind == OpKind::kPut, op.value};
  }
  return Status::OK();
}

Status DBImpl::SetFenceFloor(const WriteOptions& /*options*/, Token floor) {
  if (floor == 0) {
    return Status::InvalidArgument(
        "invalid fence floor 0: a floor is a token in [1, 2^64-1]");
  }
  // Holding every stripe excludes all writers: none can pass a check against
  // the old floor and land after the new floor is acknowledged.
  table_->LockAll();
  const Token current = floor_.load(std::memory_order_acquire);
  Status s;
  if (floor < current) {
    s = Status::InvalidArgument("fence floor cannot decrease: it is " +
                                std::to_string(current) + ", asked " +
                                std::to_string(floor));
  } else if (floor > current) {
    rocksdb::WriteBatch batch;
    batch.Put(meta_cf_, ToSlice(format::kMetaFenceFloor),
              format::EncodeToken(floor));
    rocksdb::WriteOptions wo;
    wo.sync = true;  // always synced
    std::lock_guard<std::mutex> meta_lock(meta_mu_);
    s = FromRocksDB(recovery_->Write(db_.get(), wo, &batch));
    if (s.ok()) floor_.store(floor, std::memory_order_release);
  }
  table_->UnlockAll();
  return s;
}

Token DBImpl::GetFenceFloor() { return floor_.load(std::memory_order_acquire); }

// ---------------------------------------------------------------------------
// Reads

Status DBImpl::ReadDataRecord(const rocksdb::ReadOptions& ro,
                              std::string_view key,
                              rocksdb::PinnableSlice* raw) {
  rocksdb::Status rs = db_->Get(ro, data_cf_, ToSlice(key), raw);
  if (rs.IsNotFound()) return Status::NotFound(std::string_view());
  return FromRocksDB(rs);
}

Status DBImpl::ReadStoredMax(std::string_view domain, Token* max) {
  rocksdb::PinnableSlice raw;
  if (spec_.is_per_key()) {
    Status s = ReadDataRecord(rocksdb::ReadOptions(), domain, &raw);
    if (s.IsNotFound()) {
      *max = 0;
      return Status::OK();
    }
    if (!s.ok()) return s;
    format::DataRecord rec;
    if (!format::DecodeDataRecord({raw.data(), raw.size()}, &rec)) {
      return Status::Corruption("bad data record for key", EscapeBytes(domain));
    }
    *max = rec.token;
    return Status::OK();
  }
  rocksdb::Status rs =
      db_->Get(rocksdb::ReadOptions(), fence_cf_, ToSlice(domain), &raw);
  if (rs.IsNotFound()) {
    *max = 0;
    return Status::OK();
  }
  if (!rs.ok()) return FromRocksDB(rs);
  if (!format::DecodeToken({raw.data(), raw.size()}, max)) {
    return Status::Corruption("bad fence record for domain",
                              EscapeBytes(domain));
  }
  return Status::OK();
}

Status DBImpl::Get(const ReadOptions& options, std::string_view key,
                   std::string* value) {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  rocksdb::PinnableSlice raw;
  s = ReadDataRecord(ToRocks(options), key, &raw);
  if (!s.ok()) return s;
  format::DataRecord rec;
  if (!format::DecodeDataRecord({raw.data(), raw.size()}, &rec)) {
    return Status::Corruption("bad data record for key", EscapeBytes(key));
  }
  if (rec.kind == format::RecordKind::kNoValue) {
    return Status::NotFound(std::string_view());
  }
  value->assign(rec.value.data(), rec.value.size());
  return Status::OK();
}

void DBImpl::MultiGet(const ReadOptions& options, size_t n,
                      const std::string_view* keys, std::string* values,
                      Status* statuses) {
  thread_local std::vector<rocksdb::Slice> slices;
  thread_local std::vector<size_t> index;  // slices[j] is keys[index[j]]
  slices.clear();
  index.clear();
  for (size_t i = 0; i < n; ++i) {
    statuses[i] = ValidateKey(keys[i]);
    if (!statuses[i].ok()) continue;
    slices.push_back(ToSlice(keys[i]));
    index.push_back(i);
  }
  if (slices.empty()) return;
  std::vector<rocksdb::PinnableSlice> raw(slices.size());
  std::vector<rocksdb::Status> rs(slices.size());
  db_->MultiGet(ToRocks(options), data_cf_, slices.size(), slices.data(),
                raw.data(), rs.data());
  for (size_t j = 0; j < slices.size(); ++j) {
    const size_t i = index[j];
    if (rs[j].IsNotFound()) {
      statuses[i] = Status::NotFound(std::string_view());
      continue;
    }
    if (!rs[j].ok()) {
      statuses[i] = FromRocksDB(rs[j]);
      continue;
    }
    format::DataRecord rec;
    if (!format::DecodeDataRecord({raw[j].data(), raw[j].size()}, &rec)) {
      statuses[i] = Status::Corruption("bad data record for key",
                                       EscapeBytes(keys[i]));
    } else if (rec.kind == format::RecordKind::kNoValue) {
      statuses[i] = Status::NotFound(std::string_view());
    } else {
      values[i].assign(rec.value.data(), rec.value.size());
    }
  }
}

Status DBImpl::GetFenced(const ReadOptions& options, std::string_view key,
                         Token token, std::string* value, Token* max_token) {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  if (token == 0) {
    return Status::InvalidArgument(
        "invalid token 0: a fencing token is an integer in [1, 2^64-1]");
  }
  rocksdb::ReadOptions ro = ToRocks(options);
  const rocksdb::Snapshot* snapshot = nullptr;
  Token stored = 0;
  if (!spec_.is_per_key()) {
    // The domain max and the value must come from one snapshot.
    snapshot = db_->GetSnapshot();
    ro.snapshot = snapshot;
    rocksdb::PinnableSlice raw_max;
    rocksdb::Status rs =
        db_->Get(ro, fence_cf_, ToSlice(spec_.DomainOf(key)), &raw_max);
    if (rs.ok()) {
      if (!format::DecodeToken({raw_max.data(), raw_max.size()}, &stored)) {
        s = Status::Corruption("bad fence record");
      }
    } else if (!rs.IsNotFound()) {
      s = FromRocksDB(rs);
    }
  }
  rocksdb::PinnableSlice raw;
  format::DataRecord rec{format::RecordKind::kNoValue, 0, {}};
  if (s.ok()) {
    s = ReadDataRecord(ro, key, &raw);
    if (s.ok()) {
      if (!format::DecodeDataRecord({raw.data(), raw.size()}, &rec)) {
        s = Status::Corruption("bad data record for key", EscapeBytes(key));
      }
    } else if (s.IsNotFound()) {
      s = Status::OK();
    }
  }
  if (snapshot != nullptr) db_->ReleaseSnapshot(snapshot);
  if (!s.ok()) return s;
  if (spec_.is_per_key()) stored = rec.token;

  const Token floor = floor_.load(std::memory_order_acquire);
  if (max_token != nullptr) *max_token = ReportedMax(mode_, stored, floor);
  const Verdict verdict = CheckRead(token, stored, floor);
  if (verdict != Verdict::kAccept) {
    LocalShard().rejected_reads.fetch_add(1, std::memory_order_relaxed);
    return StaleStatus(verdict, token, stored, floor, spec_.DomainOf(key), -1);
  }
  if (rec.kind == format::RecordKind::kNoValue) {
    return Status::NotFound(std::string_view());
  }
  value->assign(rec.value.data(), rec.value.size());
  return Status::OK();
}

Status DBImpl::GetFence(std::string_view key, Token* max_token) {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  Token stored = 0;
  s = ReadStoredMax(spec_.DomainOf(key), &stored);
  if (!s.ok()) return s;
  *max_token =
      ReportedMax(mode_, stored, floor_.load(std::memory_order_acquire));
  return Status::OK();
}

std::unique_ptr<Iterator> DBImpl::NewIterator(const ReadOptions& options) {
  return NewDBIterator(db_.get(), data_cf_, options);
}

// ---------------------------------------------------------------------------
// Meta records (lease service)

Status DBImpl::GetMeta(std::string_view key, std::string* value) {
  rocksdb::Status rs =
      db_->Get(rocksdb::ReadOptions(), meta_cf_, ToSlice(key), value);
  if (rs.IsNotFound()) return Status::NotFound(std::string_view());
  return FromRocksDB(rs);
}

Status DBImpl::PutMetaSynced(
    const std::vector<std::pair<std::string, std::string>>& records) {
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : records) {
    batch.Put(meta_cf_, key, value);
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  std::lock_guard<std::mutex> lock(meta_mu_);
  return FromRocksDB(recovery_->Write(db_.get(), wo, &batch));
}

Status DBImpl::DeleteMetaSynced(const std::string& key) {
  rocksdb::WriteBatch batch;
  batch.Delete(meta_cf_, key);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  std::lock_guard<std::mutex> lock(meta_mu_);
  return FromRocksDB(recovery_->Write(db_.get(), wo, &batch));
}

Status DBImpl::ScanMeta(std::string_view prefix,
                        std::vector<std::pair<std::string, std::string>>* out) {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), meta_cf_));
  for (it->Seek(ToSlice(prefix));
       it->Valid() && it->key().starts_with(ToSlice(prefix)); it->Next()) {
    out->emplace_back(it->key().ToString(), it->value().ToString());
  }
  return FromRocksDB(it->status());
}

// ---------------------------------------------------------------------------
// Admin

DBImpl::StatShard& DBImpl::LocalShard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t index =
      next.fetch_add(1, std::memory_order_relaxed) % kStatShards;
  return stats_[index];
}

FenceStats DBImpl::GetFenceStats() const {
  FenceStats st;
  for (size_t i = 0; i < kStatShards; ++i) {
    const StatShard& sh = stats_[i];
    st.accepted_writes += sh.accepted.load(std::memory_order_relaxed);
    st.rejected_writes += sh.rejected.load(std::memory_order_relaxed);
    st.advances += sh.advances.load(std::memory_order_relaxed);
    st.rejected_reads += sh.rejected_reads.load(std::memory_order_relaxed);
    st.unfenced_writes += sh.unfenced.load(std::memory_order_relaxed);
  }
  return st;
}

bool DBImpl::GetProperty(std::string_view property, std::string* value) {
  if (property == "fencedkv.stats") {
    const FenceStats st = GetFenceStats();
    *value = "accepted_writes: " + std::to_string(st.accepted_writes) +
             "\nrejected_writes: " + std::to_string(st.rejected_writes) +
             "\nadvances: " + std::to_string(st.advances) +
             "\nrejected_reads: " + std::to_string(st.rejected_reads) +
             "\nunfenced_writes: " + std::to_string(st.unfenced_writes) +
             "\nfence_floor: " + std::to_string(GetFenceFloor()) +
             "\nhigh_water_mark: " + std::to_string(hwm_.load()) +
             "\nfence_cache_bytes: " +
             std::to_string(table_->ApproximateMemoryUsage()) + "\n";
    return true;
  }
  if (property.substr(0, 8) == "rocksdb.") {
    return db_->GetProperty(data_cf_, ToSlice(property), value);
  }
  return false;
}

Status DBImpl::Flush() {
  return FromRocksDB(db_->Flush(rocksdb::FlushOptions(),
                                {data_cf_, fence_cf_, meta_cf_}));
}

Status DBImpl::CompactRange(const std::string* begin, const std::string* end) {
  rocksdb::Slice b, e;
  if (begin != nullptr) b = *begin;
  if (end != nullptr) e = *end;
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  rocksdb::Status rs = db_->CompactRange(cro, data_cf_,
                                         begin ? &b : nullptr,
                                         end ? &e : nullptr);
  if (rs.ok()) rs = db_->CompactRange(cro, fence_cf_, nullptr, nullptr);
  return FromRocksDB(rs);
}

size_t DBImpl::TEST_CountFenceStateRecords() {
  size_t count = 0;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(IteratorReadOptions(), fence_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++count;
  it.reset(db_->NewIterator(IteratorReadOptions(), data_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!it->value().empty() &&
        it->value()[0] == static_cast<char>(format::RecordKind::kNoValue)) {
      ++count;
    }
  }
  return count;
}

}  // namespace fencedkv
