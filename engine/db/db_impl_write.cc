// Copyright (c) fencedkv authors.
//
// The write path of DBImpl: validation, and WriteOps, the one function every
// mutation goes through, split into its phases (LocateDomains, CheckFences,
// EvaluateConditions, BuildBatch, Commit, Publish). docs/concurrency.md says
// why the result is atomic and race-free.

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rocksdb/write_batch.h>

#include "db/db_impl.h"
#include "db/error_recovery.h"
#include "db/fence_check.h"
#include "db/log_tail.h"
#include "db/rocksdb_options.h"
#include "db/sorted_flush_memtable.h"
#include "db/synced_marker.h"
#include "db/synced_stamp.h"
#include "util/coding.h"
#include "util/sync_point.h"

namespace fencedkv {

namespace {

rocksdb::Slice ToSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

// A validation error of a batch's op i, naming it if the batch has more
// than one (a lone SET reads the same on every path); keeps the code.
Status InBatchOp(size_t i, size_t count, const Status& s) {
  if (count == 1) return s;
  const std::string where = "batch op " + std::to_string(i);
  if (s.IsTokenSkew()) return Status::TokenSkew(where, s.message());
  return Status::InvalidArgument(where, s.message());
}

void RaiseAtomicMax(std::atomic<Token>* target, Token value) {
  Token cur = target->load(std::memory_order_relaxed);
  while (cur < value &&
         !target->compare_exchange_weak(cur, value, std::memory_order_release,
                                        std::memory_order_relaxed)) {
  }
}

// Locks a sorted, de-duplicated list of stripes; unlocks on destruction.
class StripeLocks {
 public:
  // (Which stripes is decided at run time: beyond the analysis.)
  StripeLocks(FenceTable* table,
              const std::vector<size_t>& stripes) NO_THREAD_SAFETY_ANALYSIS
      : table_(table),
        stripes_(stripes) {
    for (size_t s : stripes_) table_->mutex(s).Lock();
  }
  ~StripeLocks() NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) {
      table_->mutex(*it).Unlock();
    }
  }
  StripeLocks(const StripeLocks&) = delete;
  StripeLocks& operator=(const StripeLocks&) = delete;

 private:
  FenceTable* table_;
  const std::vector<size_t>& stripes_;
};

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
  std::vector<size_t> stripes;  // sorted, unique: the locks to take
  // Stripe marks raised by this write: (stripe, new mark), one per stripe.
  std::vector<std::pair<size_t, Token>> raised_marks;
  // Large writes: an open-addressing index (linear probing) over states,
  // by each state's hash: slots hold state indices, kNoState when empty.
  // Reused from write to write, so a group of hundreds of keys allocates
  // nothing per key (a node-based map cost a malloc and a free per key).
  static constexpr uint32_t kNoState = UINT32_MAX;
  std::vector<uint32_t> index;
  bool indexed = false;  // index holds every state
  rocksdb::WriteBatch batch;
  bool sync = false;  // the batch is written with sync (BuildBatch)
  std::string value;  // a data record being encoded
  // kGroup: domain states as they were before the current batch.
  struct Undo {
    uint32_t index;
    Token max;
    bool known, raised;
  };
  std::vector<Undo> undo;
  // kGroup: batches applied, and batches refused as stale.
  uint64_t accepted_groups = 0, rejected_groups = 0;
  bool unfenced = false;

  void Reset() {
    states.clear();
    stripes.clear();
    raised_marks.clear();
    if (indexed) {
      std::fill(index.begin(), index.end(), kNoState);
      indexed = false;
    }
    batch.Clear();
    sync = false;
    undo.clear();
    accepted_groups = rejected_groups = 0;
    unfenced = false;
  }

  uint32_t IndexOf(std::string_view domain, const FenceTable& table) {
    constexpr size_t kLinearScanLimit = 16;
    if (!indexed) {
      for (uint32_t i = 0; i < states.size(); ++i) {
        if (states[i].domain == domain) return i;
      }
      const uint64_t hash = FenceTable::Hash(domain);
      const uint32_t i = Add(domain, hash, table);
      if (states.size() == kLinearScanLimit) Rebuild();
      return i;
    }
    const uint64_t hash = FenceTable::Hash(domain);
    const size_t mask = index.size() - 1;
    size_t at = hash & mask;
    for (; index[at] != kNoState; at = (at + 1) & mask) {
      const DomainState& ds = states[index[at]];
      if (ds.hash == hash && ds.domain == domain) return index[at];
    }
    const uint32_t i = Add(domain, hash, table);
    index[at] = i;
    // At most half full.
    if (2 * states.size() > index.size()) Rebuild();
    return i;
  }

 private:
  uint32_t Add(std::string_view domain, uint64_t hash,
               const FenceTable& table) {
    const auto i = static_cast<uint32_t>(states.size());
    table.Prefetch(hash);
    states.push_back(
        DomainState{domain, hash, table.StripeOf(hash), 0, false, false});
    return i;
  }
  // Indexes every state, in a table at most a quarter full.
  void Rebuild() {
    size_t size = 64;
    while (size < 4 * states.size()) size *= 2;
    if (index.size() < size || index.size() > 4 * size) {
      std::vector<uint32_t>(size, kNoState).swap(index);  // (frees a huge one)
    } else {
      std::fill(index.begin(), index.end(), kNoState);
    }
    const size_t mask = index.size() - 1;
    for (uint32_t i = 0; i < states.size(); ++i) {
      size_t at = states[i].hash & mask;
      while (index[at] != kNoState) at = (at + 1) & mask;
      index[at] = i;
    }
    indexed = true;
  }
};

// ---------------------------------------------------------------------------
// Validation

Status DBImpl::ValidateKey(std::string_view key) const {
  if (key.empty()) return Status::InvalidArgument("empty key");
  if (key.size() > options_.max_key_size) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                   " bytes exceeds max_key_size " +
                                   std::to_string(options_.max_key_size));
  }
  return Status::OK();
}

Status DBImpl::ValidateWriteOp(OpKind kind, std::string_view key,
                               std::string_view value, Token token) const {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  if (value.size() > options_.max_value_size) {
    return Status::InvalidArgument("value of " + std::to_string(value.size()) +
                                   " bytes exceeds max_value_size " +
                                   std::to_string(options_.max_value_size));
  }
  if (token == 0 && (kind == OpKind::kAdvance || !options_.allow_unfenced)) {
    return InvalidTokenZero();
  }
  return CheckTokenSkew(token);
}

Status DBImpl::CheckTokenSkew(Token token) const {
  const uint64_t skew = options_.max_token_skew;
  if (skew == kNoTokenSkewLimit) return Status::OK();
  const Token issued = issued_.load(std::memory_order_acquire);
  const Token ceiling = issued > kMaxToken - skew ? kMaxToken : issued + skew;
  if (token <= ceiling) return Status::OK();
  return Status::TokenSkew(
      "token " + std::to_string(token) + " is more than " +
          std::to_string(skew) + " above the highest token issued (" +
          std::to_string(issued) + ")",
      "a holder can only have a token its lease service issued");
}

void DBImpl::NoteIssuedToken(Token token) { RaiseAtomicMax(&issued_, token); }

Status DBImpl::AppendBatchOps(const WriteBatch& batch, uint32_t group,
                              std::vector<PendingOp>* ops) const {
  const size_t first = ops->size();
  for (size_t i = 0; i < batch.Count(); ++i) {
    const WriteBatch::Op op = batch.Get(i);
    const OpKind kind =
        op.type == WriteBatch::OpType::kPut ? OpKind::kPut : OpKind::kDelete;
    Status s = ValidateWriteOp(kind, op.key, op.value, op.token);
    if (!s.ok()) {
      ops->resize(first);
      return InBatchOp(i, batch.Count(), s);
    }
    ops->push_back(
        PendingOp{kind, op.key, op.value, op.token, op.condition, group});
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// The entry points: each builds a WriteRequest.

Status DBImpl::Put(const WriteOptions& options, std::string_view key,
                   std::string_view value, Token token) {
  Status s = ValidateWriteOp(OpKind::kPut, key, value, token);
  if (!s.ok()) return s;
  PendingOp op{OpKind::kPut, key, value, token};
  return WriteOps({WriteRequest::Kind::kSingle, options.sync, &op, 1});
}

Status DBImpl::Delete(const WriteOptions& options, std::string_view key,
                      Token token) {
  Status s = ValidateWriteOp(OpKind::kDelete, key, {}, token);
  if (!s.ok()) return s;
  PendingOp op{OpKind::kDelete, key, {}, token};
  return WriteOps({WriteRequest::Kind::kSingle, options.sync, &op, 1});
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
  Status s = AppendBatchOps(batch, 0, &ops);
  if (!s.ok()) return s;
  WriteRequest req{WriteRequest::Kind::kBatch, options.sync, ops.data(),
                   ops.size()};
  req.result = result;
  return WriteOps(req);
}

Status DBImpl::AdvanceFence(const WriteOptions& /*options*/,
                            std::string_view key, Token token,
                            Token* max_after) {
  Status s = ValidateWriteOp(OpKind::kAdvance, key, {}, token);
  if (!s.ok()) return s;
  PendingOp op{OpKind::kAdvance, key, {}, token};
  // Always synced, even when it raises nothing (see Commit).
  WriteRequest req{WriteRequest::Kind::kAdvance, /*sync=*/true, &op, 1};
  req.max_after = max_after;
  return WriteOps(req);
}

Status DBImpl::WriteGroup(const WriteOptions& options,
                          const WriteBatch* const* batches, size_t n,
                          Status* statuses) {
  thread_local std::vector<PendingOp> ops;
  ops.clear();
  for (size_t g = 0; g < n; ++g) {
    statuses[g] = Status::OK();
    if (batches[g]->HasConditions()) {
      statuses[g] = Status::InvalidArgument(
          "WriteGroup does not take batches with conditions");
      continue;
    }
    statuses[g] = AppendBatchOps(*batches[g], static_cast<uint32_t>(g), &ops);
  }
  if (ops.empty()) return Status::OK();
  WriteRequest req{WriteRequest::Kind::kGroup, options.sync, ops.data(),
                   ops.size()};
  req.group_statuses = statuses;
  return WriteOps(req);
}

// ---------------------------------------------------------------------------
// WriteOps and its phases

void DBImpl::FailGroups(const WriteRequest& req, const Status& s) {
  if (req.kind != WriteRequest::Kind::kGroup) return;
  for (size_t i = 0; i < req.n; ++i) {
    if (!req.ops[i].skip) req.group_statuses[req.ops[i].group] = s;
  }
}

Status DBImpl::WriteOps(const WriteRequest& req) {
  // A holder paused here (GC, SIGSTOP) has not been checked yet: whatever
  // lands meanwhile is what it will be checked against.
  TEST_SYNC_POINT("DBImpl::Write:BeforeLock");
  thread_local Scratch scratch;
  Scratch& sc = scratch;
  sc.Reset();
  LocateDomains(req, &sc);
  StripeLocks locks(table_.get(), sc.stripes);
  if (following_.load(std::memory_order_acquire)) {
    // (Every op has a domain, so the write holds a stripe lock: SetFollowing
    // either waited for it or set the flag before it was taken.)
    Status s = FollowingStatus();
    FailGroups(req, s);
    return s;
  }
  const Token floor = floor_.load(std::memory_order_acquire);

  Status s = CheckFences(req, floor, &sc);
  StatShard& shard = LocalShard();
  if (req.kind == WriteRequest::Kind::kGroup) {
    shard.rejected.fetch_add(sc.rejected_groups, std::memory_order_relaxed);
  } else if (s.IsStaleToken()) {
    shard.rejected.fetch_add(1, std::memory_order_relaxed);
  }
  if (!s.ok()) return s;
  TEST_SYNC_POINT("DBImpl::Write:AfterCheck");
  if (req.result != nullptr) {
    bool all_hold = true;
    s = EvaluateConditions(req, &all_hold);
    if (!s.ok()) return s;
    if (!all_hold) return Status::OK();  // nothing written, nothing raised
  }
  s = BuildBatch(req, &sc);
  if (s.ok()) {
    // The value cache: each key out before its write becomes visible, its
    // new value in after (value_cache.h); the stripe locks keep every other
    // writer of these keys out meanwhile.
    if (values_ != nullptr) BeginValueWrites(req);
    s = Commit(req, &sc);
    if (values_ != nullptr) EndValueWrites(req, s.ok());
  }
  if (!s.ok()) {
    // Nothing was written and nothing published: the cache is still exact.
    FailGroups(req, s);
    return s;
  }
  Publish(sc);

  if (req.kind == WriteRequest::Kind::kAdvance) {
    if (sc.states[0].raised) {
      shard.advances.fetch_add(1, std::memory_order_relaxed);
    }
    if (req.max_after != nullptr) {
      *req.max_after = ReportedMax(mode_, sc.states[0].max, floor);
    }
  } else {
    shard.accepted.fetch_add(
        req.kind == WriteRequest::Kind::kGroup ? sc.accepted_groups : 1,
        std::memory_order_relaxed);
    if (sc.unfenced) shard.unfenced.fetch_add(1, std::memory_order_relaxed);
  }
  return Status::OK();
}

namespace {
// Per op of the write in hand (this thread's): whether it is its key's last
// (BeginValueWrites sets it, EndValueWrites reads it).
thread_local std::vector<bool> last_of_key;
}  // namespace

bool DBImpl::ChangesValue(const PendingOp& op) {
  // (A skipped op writes nothing; an advance re-stamps a record with its
  // value unchanged.)
  return !op.skip && op.kind != OpKind::kAdvance;
}

void DBImpl::BeginValueWrites(const WriteRequest& req) {
  // Only a key's last op in the write will leave its value: the earlier
  // ones were never visible on their own. Found by sorting the ops' key
  // hashes (ops whose keys only share a hash count as one key: all but the
  // last just drop). Done before any BeginWrite, so nothing can fail
  // between a BeginWrite and its EndWrite; no allocation once warm.
  if (req.n > 1) {
    thread_local std::vector<std::pair<uint64_t, size_t>> order;
    order.clear();
    last_of_key.assign(req.n, false);
    for (size_t i = 0; i < req.n; ++i) {
      const PendingOp& op = req.ops[i];
      if (!ChangesValue(op)) continue;
      order.emplace_back(ValueCache::HashOf(op.key), i);
      // A group's keys are spread over the cache: load their lines
      // together rather than miss on each in turn.
      values_->Prefetch(op.key);
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 0; k < order.size(); ++k) {
      if (k + 1 == order.size() || order[k + 1].first != order[k].first) {
        last_of_key[order[k].second] = true;  // the highest index of its hash
      }
    }
  }
  for (size_t i = 0; i < req.n; ++i) {
    if (ChangesValue(req.ops[i])) values_->BeginWrite(req.ops[i].key);
  }
}

void DBImpl::EndValueWrites(const WriteRequest& req, bool written) {
  // In op order, so a key's last op ends last: while an earlier one drops
  // the key's entry, the last one is still in flight and no fill can put
  // anything back; then the last one stores. (Even if its entry is evicted
  // meanwhile, no earlier op ever stores an older value.)
  for (size_t i = 0; i < req.n; ++i) {
    const PendingOp& op = req.ops[i];
    if (!ChangesValue(op)) continue;
    const bool last = req.n == 1 || last_of_key[i];
    values_->EndWrite(op.key, written && last,
                      op.kind == OpKind::kPut ? &op.value : nullptr);
    TEST_SYNC_POINT("DBImpl::EndValueWrites:Ended");
  }
}

void DBImpl::LocateDomains(const WriteRequest& req, Scratch* sc) {
  for (size_t i = 0; i < req.n; ++i) {
    req.ops[i].domain_index =
        sc->IndexOf(spec_.DomainOf(req.ops[i].key), *table_);
  }
  for (const DomainState& ds : sc->states) sc->stripes.push_back(ds.stripe);
  std::sort(sc->stripes.begin(), sc->stripes.end());
  sc->stripes.erase(std::unique(sc->stripes.begin(), sc->stripes.end()),
                    sc->stripes.end());
}

Status DBImpl::CheckFences(const WriteRequest& req, Token floor, Scratch* sc) {
  const bool group = req.kind == WriteRequest::Kind::kGroup;
  const bool per_key = spec_.is_per_key();
  PendingOp* const ops = req.ops;
  const size_t n = req.n;

  // Makes ds.max exact from RocksDB (one read), and caches it.
  auto read_max = [&](DomainState& ds) -> Status {
    Status s = ReadStoredMax(ds.domain, &ds.max);
    if (!s.ok()) return s;
    table_->Insert(ds.hash, ds.domain, ds.max);
    ds.known = true;
    return Status::OK();
  };
  // Makes ds.max exact: from the cache, else from RocksDB.
  auto ensure_known = [&](DomainState& ds) -> Status {
    if (ds.known) return Status::OK();
    if (!table_->Lookup(ds.hash, ds.domain, &ds.max)) return read_max(ds);
    ds.known = true;
    return Status::OK();
  };
  // Raises ds to `max` (a check passed).
  auto raise = [](DomainState& ds, Token max) {
    if (!ds.known || max > ds.max) {
      ds.max = max;
      ds.raised = true;
    }
    ds.known = true;
  };

  // kGroup: a batch that is refused (or whose max could not be read) is
  // undone from the domain states and skipped; the others go on.
  size_t group_first = 0;
  auto refuse_group = [&](size_t i, Status status) {
    if (status.IsStaleToken()) ++sc->rejected_groups;
    for (auto it = sc->undo.rbegin(); it != sc->undo.rend(); ++it) {
      DomainState& d = sc->states[it->index];
      d.max = it->max;
      d.known = it->known;
      d.raised = it->raised;
    }
    sc->undo.clear();
    const uint32_t g = ops[i].group;
    for (size_t j = group_first; j < n && ops[j].group == g; ++j) {
      ops[j].skip = true;
    }
    req.group_statuses[g] = std::move(status);
  };

  for (size_t i = 0; i < n; ++i) {
    PendingOp& op = ops[i];
    DomainState& ds = sc->states[op.domain_index];
    if (group) {
      if (i == 0 || op.group != ops[i - 1].group) {
        if (i > 0 && !ops[i - 1].skip) ++sc->accepted_groups;
        sc->undo.clear();
        group_first = i;
      }
      if (op.skip) continue;
      sc->undo.push_back(
          Scratch::Undo{op.domain_index, ds.max, ds.known, ds.raised});
    }
    // Every stored max of this stripe is at or below its mark.
    const Token mark = table_->StripeHwm(ds.stripe);
    if (op.kind == OpKind::kAdvance) {
      const Token target = AdvanceTarget(mode_, op.token);
      // Subsumed: the floor already refuses everything this would.
      const bool subsumed =
          target == 0 || SubsumedByFloor(mode_, target, floor);
      if (!subsumed && !ds.known && target > mark) {
        raise(ds, target);  // above every stored max: no read
      } else {
        // The current max decides, and is what the advance reports.
        Status s = ensure_known(ds);
        if (!s.ok()) return s;  // (an advance is never grouped)
        if (!subsumed) raise(ds, target);
      }
      op.record_token = ds.max;
      continue;
    }
    if (op.token == 0) {  // explicitly unfenced (allow_unfenced)
      sc->unfenced = true;
      if (per_key) {  // the record carries the key's max: keep it
        Status s = ensure_known(ds);
        if (!s.ok()) {
          if (!group) return s;
          refuse_group(i, std::move(s));  // this batch fails, others go on
          continue;
        }
      }
      op.record_token = ds.known ? ds.max : 0;
      continue;
    }
    if (!ds.known) {
      if (CheckWrite(mode_, op.token, mark, floor) == Verdict::kAccept) {
        // The token passes the mark, hence every stored max of the stripe,
        // and becomes this domain's max: no lookup, no read.
        raise(ds, op.token);
        op.record_token = op.token;
        continue;
      }
      if (table_->Lookup(ds.hash, ds.domain, &ds.max)) {
        ds.known = true;  // exact
      } else if (CheckWrite(mode_, op.token, table_->MissBound(ds.hash),
                            floor) == Verdict::kAccept) {
        // Not in the cache: the max is at or below the cache's miss bound,
        // which the token passes. No read either.
        raise(ds, op.token);
        op.record_token = op.token;
        continue;
      } else {
        Status s = read_max(ds);  // one RocksDB read
        if (!s.ok()) {
          if (!group) return s;
          refuse_group(i, std::move(s));  // this batch fails, others go on
          continue;
        }
      }
    }
    const Verdict verdict = CheckWrite(mode_, op.token, ds.max, floor);
    if (verdict != Verdict::kAccept) {
      if (group) {
        refuse_group(i, StaleStatus(verdict, op.token, ds.max, floor, ds.domain,
                                    static_cast<int64_t>(i - group_first)));
        continue;
      }
      return StaleStatus(verdict, op.token, ds.max, floor, ds.domain,
                         req.kind == WriteRequest::Kind::kBatch
                             ? static_cast<int64_t>(i)
                             : -1);
    }
    raise(ds, op.token);
    op.record_token = op.token;
  }
  if (group && !ops[n - 1].skip) ++sc->accepted_groups;
  return Status::OK();
}

Status DBImpl::EvaluateConditions(const WriteRequest& req, bool* all_hold) {
  // The state each key has just before each op: RocksDB's, then the effects
  // of earlier ops of this batch.
  std::unordered_map<std::string_view, std::pair<bool, std::string_view>>
      overlay;
  rocksdb::PinnableSlice raw;
  WriteResult* result = req.result;
  *all_hold = true;
  for (size_t i = 0; i < req.n; ++i) {
    const PendingOp& op = req.ops[i];
    if (op.kind == OpKind::kAdvance) continue;
    bool present = false;
    std::string_view value;
    auto it = overlay.find(op.key);
    if (it != overlay.end()) {
      present = it->second.first;
      value = it->second.second;
    } else {
      raw.Reset();
      format::DataRecord rec;
      Status s = ReadDataRecord(rocksdb::ReadOptions(), op.key, &raw, &rec);
      if (s.ok()) {
        present = rec.kind == format::RecordKind::kValue;
        // In `raw` until the next read: copied below only if asked for (a
        // DEL of 1000 keys of 64 KB copied 64 MB to learn which existed).
        value = rec.value;
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

Status DBImpl::BuildBatch(const WriteRequest& req, Scratch* sc) {
  rocksdb::WriteBatch& batch = sc->batch;
  const bool per_key = spec_.is_per_key();
  char header[format::kMaxDataHeaderSize];
  // Every status RocksDB's batch returns is checked: an entry it refuses
  // (e.g. past its 4 GiB limits) must fail the whole write, never be
  // dropped while its max is raised. (Validation caps sizes below those
  // limits, so this is a second line of defence.)
  rocksdb::Status rs;
  // A synced write (asked for, or due by Options::wal_sync_interval_ms)
  // leads with the synced marker (synced_marker.h); it takes no sequence
  // number, so a batch of nothing else counts 0 and is not written
  // (Commit).
  sc->sync = req.sync || sync_due_.load(std::memory_order_acquire);
  if (sc->sync) rs = AddSyncedMarker(&batch);
  for (size_t i = 0; i < req.n && rs.ok(); ++i) {
    const PendingOp& op = req.ops[i];
    if (op.skip) continue;
    const rocksdb::Slice key = ToSlice(op.key);
    // Its bucket loads while the batch is built and written to the WAL.
    if (data_buckets_ != nullptr) data_buckets_->Prefetch(op.key);
    switch (op.kind) {
      case OpKind::kPut: {
        // One contiguous value: RocksDB's SliceParts overload costs more
        // (measured with callgrind) than this copy into a reused buffer.
        const size_t hn = format::EncodeDataHeader(
            header, format::RecordKind::kValue, op.record_token);
        sc->value.assign(header, hn);
        sc->value.append(op.value.data(), op.value.size());
        rs = batch.Put(data_cf_, key, sc->value);
        NoteValueSize(op.key, op.value.size());
        break;
      }
      case OpKind::kDelete:
        if (per_key) {  // keep the key's token: a tombstone with its max
          const size_t hn = format::EncodeDataHeader(
              header, format::RecordKind::kNoValue, op.record_token);
          rs = batch.Put(data_cf_, key, rocksdb::Slice(header, hn));
        } else {
          rs = batch.Delete(data_cf_, key);
        }
        break;
      case OpKind::kAdvance:
        if (per_key && sc->states[op.domain_index].raised) {
          // Re-stamp the key's record with the new max, keeping its value.
          rocksdb::PinnableSlice old;
          format::DataRecord rec{format::RecordKind::kNoValue, 0, {}};
          Status s = ReadDataRecord(rocksdb::ReadOptions(), op.key, &old, &rec);
          if (!s.ok() && !s.IsNotFound()) return s;
          const size_t hn =
              format::EncodeDataHeader(header, rec.kind, op.record_token);
          sc->value.assign(header, hn);
          sc->value.append(rec.value.data(), rec.value.size());
          rs = batch.Put(data_cf_, key, sc->value);
        }
        break;
    }
  }
  // The raised maxima (other domain functions: their own records) and the
  // raised stripe marks, each stripe once, in the same batch.
  for (const DomainState& ds : sc->states) {
    if (!ds.raised || !rs.ok()) continue;
    if (!per_key) {
      rs =
          batch.Put(fence_cf_, ToSlice(ds.domain), format::EncodeToken(ds.max));
    }
    if (ds.max <= table_->StripeHwm(ds.stripe)) continue;
    auto it = std::find_if(sc->raised_marks.begin(), sc->raised_marks.end(),
                           [&](const auto& m) { return m.first == ds.stripe; });
    if (it == sc->raised_marks.end()) {
      sc->raised_marks.emplace_back(ds.stripe, ds.max);
    } else {
      it->second = std::max(it->second, ds.max);
    }
  }
  // A raised mark needs a record only above the store's mark. Every value
  // hwm_ holds is a record of a write that has returned, so that record
  // precedes this batch in the log: any recovered prefix holding this batch
  // holds it too, and Open takes the largest record as every stripe's mark.
  // Below it, raising the stripe's mark in memory (Publish) is enough, and
  // the write carries no extra record (with many holders, whose tokens sit
  // below the newest one, that was one write in seven).
  const Token store_mark = hwm_.load(std::memory_order_acquire);
  for (const auto& [stripe, mark] : sc->raised_marks) {
    if (!rs.ok()) break;
    if (mark <= store_mark) continue;
    rs = batch.Put(meta_cf_,
                   format::HighWaterMarkKey(static_cast<uint32_t>(stripe)),
                   format::EncodeToken(mark));
  }
  TEST_SYNC_POINT_CALLBACK("DBImpl::Write:BuildBatch", &rs);  // may fail it
  if (!rs.ok()) {
    return Status::InvalidArgument("RocksDB refused the write batch",
                                   FromRocksDB(rs).ToString());
  }
  return Status::OK();
}

Status DBImpl::Commit(const WriteRequest& req, Scratch* sc) {
  rocksdb::Status rs;
  if (sc->batch.Count() > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = sc->sync;
    TEST_SYNC_POINT_CALLBACK("DBImpl::Write:RocksDBWrite", &rs);  // may fail it
    if (rs.ok()) rs = recovery_->Write(db_.get(), wo, &sc->batch);
    if (rs.ok() && sc->sync) {
      NoteSynced(sc->batch);
      if (!req.sync) sync_due_.store(false, std::memory_order_release);
    }
  } else if (req.sync && req.kind == WriteRequest::Kind::kAdvance) {
    // The advance raised nothing, but the max it reports may be in a record
    // written without sync: make it durable before saying so.
    TEST_SYNC_POINT_CALLBACK("DBImpl::Write:SyncWAL", &rs);
    if (rs.ok()) rs = SyncWalBarrier();
  }
  return FromRocksDB(rs);
}

void DBImpl::NoteSynced(const rocksdb::WriteBatch& batch) {
  if (batch.Count() == 0) return;
  const uint64_t last = DecodeFixed64(batch.Data().data()) + batch.Count() - 1;
  RaiseAtomicMax(&synced_sequence_, last);
  RaiseAtomicMax(&logged_synced_sequence_, last);
}

void DBImpl::StartWalSyncer() {
  if (options_.wal_sync_interval_ms == 0) return;
  synced_sequence_.store(db_->GetLatestSequenceNumber(),
                         std::memory_order_relaxed);
  wal_syncer_ = std::thread([this] { WalSyncerLoop(); });
}

void DBImpl::StopWalSyncer() {
  if (!wal_syncer_.joinable()) return;
  {
    MutexLock lock(&syncer_mu_);
    syncer_stop_ = true;
  }
  syncer_cv_.notify_all();
  wal_syncer_.join();
}

void DBImpl::WalSyncerLoop() {
  const std::chrono::milliseconds interval(options_.wal_sync_interval_ms);
  for (;;) {
    {
      std::unique_lock<Mutex> lock(syncer_mu_);
      // (True once stopped; the analysis does not follow unique_lock.)
      if (syncer_cv_.wait_for(
              lock, interval,
              [this]() NO_THREAD_SAFETY_ANALYSIS { return syncer_stop_; })) {
        // Closing: what the last writes synced (no write comes now).
        MaybeStampSynced();
        return;
      }
    }
    // Due once a write passed what the last synced write covered: the
    // next write is synced (sync_due_).
    const uint64_t latest = db_->GetLatestSequenceNumber();
    if (latest > synced_sequence_.load(std::memory_order_acquire) &&
        sync_due_.exchange(true, std::memory_order_acq_rel)) {
      // Due since the last tick, and no write took it: the database went
      // quiet with writes unsynced. Sync them with a record of no
      // sequence; not while the recovery of an I/O error runs (a write
      // refused then would fail its Resume; the sync stays due).
      if (recovery_->GetStats().idle) IdleSync();
    }
    MaybeStampSynced();
  }
}

void DBImpl::MaybeStampSynced() {
  // Only the last sequence of a synced write that returned (see
  // logged_synced_sequence_). Not while an I/O error is being recovered:
  // its writes would only add errors.
  const uint64_t synced =
      logged_synced_sequence_.load(std::memory_order_acquire);
  if (synced <= stamped_sequence_.load(std::memory_order_relaxed)) return;
  if (!recovery_->GetStats().idle) return;
  TEST_SYNC_POINT("DBImpl::MaybeStampSynced");
  const Status s = WriteSyncedStamp(stamp_env_, path_, synced);
  if (!s.ok()) {
    rocksdb::Warn(db_->GetDBOptions().info_log,
                  "fencedkv: could not write the synced stamp: %s",
                  s.ToString().c_str());
    return;
  }
  stamped_sequence_.store(synced, std::memory_order_relaxed);
}

void DBImpl::IdleSync() {
  TEST_SYNC_POINT("DBImpl::IdleSync");
  const ErrorRecovery::Unlogged before = recovery_->UnloggedWrites();
  // Published before the write, so in the log before its record: the
  // sync covers it.
  const uint64_t covered = db_->GetLatestSequenceNumber();
  rocksdb::WriteBatch marker;
  rocksdb::Status rs = AddSyncedMarker(&marker);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  // Refused rather than waiting in a write stall (the close waits for this
  // thread); still due, the next tick tries again.
  wo.no_slowdown = true;
  if (rs.ok()) rs = recovery_->Write(db_.get(), wo, &marker);
  if (!rs.ok()) return;
  RaiseAtomicMax(&synced_sequence_, covered);
  // The stamp names only a sequence the log holds (logged_synced_sequence_):
  // not one a sentinel took without the WAL, which no sentinel started or
  // finished meanwhile, and none past the last one's, rules out.
  const ErrorRecovery::Unlogged after = recovery_->UnloggedWrites();
  if (after.started == before.started && after.done == before.started &&
      covered > after.sequence) {
    RaiseAtomicMax(&logged_synced_sequence_, covered);
  }
  idle_syncs_.fetch_add(1, std::memory_order_relaxed);
  // (A write since `covered` is past synced_sequence_: the next tick makes
  // it due again.)
  sync_due_.store(false, std::memory_order_release);
}

rocksdb::Status DBImpl::SyncWalBarrier() {
  // A synced write of a record no reader sees (a deletion of the empty key
  // in the meta column family) syncs every record before it. Not
  // rocksdb::DB::SyncWAL: it runs beside the writers, and when a writer's
  // WAL sync failed just before it, it synced the failed file and tripped
  // RocksDB 7.8's assertion (Debian's build aborts). A write is ordered
  // with the others by RocksDB's write thread, and after a failed one it
  // gets the background error.
  TEST_SYNC_POINT("DBImpl::SyncWalBarrier");
  rocksdb::WriteBatch marker;
  rocksdb::Status rs = AddSyncedMarker(&marker);
  if (rs.ok()) rs = marker.Delete(meta_cf_, rocksdb::Slice());
  rocksdb::WriteOptions wo;
  wo.sync = true;
  // A record of its own: not once the database follows a log (meta_mu_
  // orders this with SetFollowing).
  MutexLock lock(&meta_mu_);
  if (following_.load(std::memory_order_acquire)) {
    return rocksdb::Status::NotSupported(
        "this database follows a primary's log");
  }
  if (rs.ok()) rs = recovery_->Write(db_.get(), wo, &marker);
  if (rs.ok()) NoteSynced(marker);
  return rs;
}

void DBImpl::Publish(const Scratch& sc) {
  // Only now that the maxima are written. The stripes are still locked, so
  // nobody sees a max before its write; and the cache lines were prefetched
  // before the lock, so RocksDB's write hid their misses.
  for (const DomainState& ds : sc.states) {
    if (ds.raised) table_->Insert(ds.hash, ds.domain, ds.max);
  }
  for (const auto& [stripe, mark] : sc.raised_marks) {
    table_->SetStripeHwm(stripe, mark);
    RaiseAtomicMax(&hwm_, mark);
  }
}

// ---------------------------------------------------------------------------
// The floor (a meta-only write)

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
  if (following_.load(std::memory_order_acquire)) {
    table_->UnlockAll();
    return FollowingStatus();
  }
  if (floor < current) {
    s = Status::InvalidArgument("fence floor cannot decrease: it is " +
                                std::to_string(current) + ", asked " +
                                std::to_string(floor));
  } else if (floor > current) {
    rocksdb::WriteBatch batch;
    rocksdb::WriteOptions wo;
    wo.sync = true;  // always synced
    MutexLock meta_lock(&meta_mu_);
    s = FromRocksDB(AddSyncedMarker(&batch));
    if (s.ok()) {
      s = FromRocksDB(batch.Put(meta_cf_, ToSlice(format::kMetaFenceFloor),
                                format::EncodeToken(floor)));
    }
    if (s.ok()) s = FromRocksDB(recovery_->Write(db_.get(), wo, &batch));
    if (s.ok()) NoteSynced(batch);
    if (s.ok()) floor_.store(floor, std::memory_order_release);
  }
  table_->UnlockAll();
  if (s.ok() && floor == current) {
    // An unchanged floor was written synced when it was raised, but the
    // call is a sync point like any always-synced one: every write
    // acknowledged before it is durable when it returns. (Without this, an
    // unsynced write before it could be lost by a power cut while the call
    // after it had returned: PowerLossTest, seed 1.)
    s = FromRocksDB(SyncWalBarrier());
    // (A step-down between the check above and the barrier: as above.)
    if (s.IsNotSupported() && following_.load(std::memory_order_acquire)) {
      s = FollowingStatus();
    }
  }
  return s;
}

Token DBImpl::GetFenceFloor() { return floor_.load(std::memory_order_acquire); }

// ---------------------------------------------------------------------------
// Following a primary's log

Status DBImpl::FollowingStatus() {
  return Status::ReadOnly(
      "this database follows a primary's log: the write was not applied");
}

void DBImpl::SetFollowing(bool following) {
  MutexLock follow(&follow_mu_);
  // Every write of the database's own holds a stripe lock (fenced writes,
  // the floor) or meta_mu_ (meta records) from its check until RocksDB's
  // write returned: with all of them held, none is in between.
  table_->LockAll();
  {
    MutexLock lock(&meta_mu_);
    following_.store(following, std::memory_order_release);
  }
  table_->UnlockAll();
  // From here on only ApplyLogBatch writes, and the tail holds none of
  // its batches.
  if (following && log_tail_ != nullptr) {
    log_tail_->Reset();
  }
  // The recovery's sentinel is the one write of the database's own that
  // holds neither: off, this waits for one being written; on (a promoted
  // replica), it is written at once if every memtable is empty.
  recovery_->SetSentinel(following ? nullptr : meta_cf_);
}

}  // namespace fencedkv
