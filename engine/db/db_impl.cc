// Copyright (c) fencedkv authors.
//
// DBImpl's reads, meta records and administration. Opening is in
// db_impl_open.cc, the write path in db_impl_write.cc.

#include "db/db_impl.h"

#include <algorithm>
#include <cstdio>

#include <rocksdb/slice.h>
#include <rocksdb/statistics.h>

#include "db/db_iter.h"
#include "db/error_recovery.h"
#include "db/fence_check.h"
#include "db/fence_format.h"
#include "db/log_tail.h"
#include "db/rocksdb_options.h"
#include "util/siphash.h"

namespace fencedkv {

namespace {

rocksdb::Slice ToSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

rocksdb::ReadOptions ToRocks(const ReadOptions& options) {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = options.verify_checksums;
  ro.fill_cache = options.fill_cache;
  return ro;
}

}  // namespace

// ---------------------------------------------------------------------------
// Reads

Status DBImpl::ReadDataRecord(const rocksdb::ReadOptions& ro,
                              std::string_view key, rocksdb::PinnableSlice* raw,
                              format::DataRecord* record) {
  rocksdb::Status rs = db_->Get(ro, data_cf_, ToSlice(key), raw);
  if (rs.IsNotFound()) return Status::NotFound(std::string_view());
  if (!rs.ok()) return FromRocksDB(rs);
  NoteValueSize(key, raw->size());
  return format::DecodeDataRecordOf(key, {raw->data(), raw->size()}, record);
}

Status DBImpl::ReadStoredMax(std::string_view domain, Token* max) {
  rocksdb::PinnableSlice raw;
  if (spec_.is_per_key()) {
    format::DataRecord rec;
    Status s = ReadDataRecord(rocksdb::ReadOptions(), domain, &raw, &rec);
    if (s.IsNotFound()) {
      *max = 0;
      return Status::OK();
    }
    if (!s.ok()) return s;
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
    return Status::Corruption(
        "bad fence record for domain \"" + EscapeBytes(domain) + "\"",
        "not 8 bytes: not written by fencedkv, or damaged");
  }
  return Status::OK();
}

Status DBImpl::Get(const ReadOptions& options, std::string_view key,
                   std::string* value) {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  ValueCache::Ticket ticket;
  if (values_ != nullptr) {
    switch (values_->Lookup(key, value)) {
      case ValueCache::Found::kValue:
        return Status::OK();
      case ValueCache::Found::kAbsent:
        return Status::NotFound(std::string_view());
      case ValueCache::Found::kMiss:
        ticket = values_->BeginFill(key);
        break;
    }
  }
  const bool fill = values_ != nullptr && options.fill_cache;
  rocksdb::PinnableSlice raw;
  const rocksdb::Status rs =
      db_->Get(ToRocks(options), data_cf_, ToSlice(key), &raw);
  return TakeRead(key, rs, raw, fill ? &ticket : nullptr, value);
}

void DBImpl::MultiGet(const ReadOptions& options, size_t n,
                      const std::string_view* keys, std::string* values,
                      Status* statuses) {
  thread_local std::vector<rocksdb::Slice> slices;
  thread_local std::vector<size_t> index;  // slices[j] is keys[index[j]]
  thread_local std::vector<std::string_view> valid;      // valid[j]: slices[j]
  thread_local std::vector<ValueCache::Ticket> tickets;  // likewise
  slices.clear();
  index.clear();
  valid.clear();
  tickets.clear();
  for (size_t i = 0; i < n; ++i) {
    statuses[i] = ValidateKey(keys[i]);
    if (!statuses[i].ok()) continue;
    slices.push_back(ToSlice(keys[i]));
    index.push_back(i);
    valid.push_back(keys[i]);
  }
  if (slices.empty()) return;
  const size_t m = slices.size();
  if (values_ != nullptr && m <= ValueCache::kMaxLookupAll) {
    if (MultiGetThroughCache(options, valid, slices, index, values, statuses)) {
      return;
    }
  }
  if (values_ != nullptr) {
    for (std::string_view key : valid) {
      tickets.push_back(values_->BeginFill(key));
    }
  }
  const bool fill = values_ != nullptr && options.fill_cache;
  std::vector<rocksdb::PinnableSlice> raw(m);
  std::vector<rocksdb::Status> rs(m);
  db_->MultiGet(ToRocks(options), data_cf_, m, slices.data(), raw.data(),
                rs.data());
  for (size_t j = 0; j < m; ++j) {
    const size_t i = index[j];
    statuses[i] = TakeRead(keys[i], rs[j], raw[j], fill ? &tickets[j] : nullptr,
                           &values[i]);
  }
}

size_t DBImpl::LargeHintBit(std::string_view key) {
  return SipHash13(ProcessSipKey(), key.data(), key.size()) &
         (kLargeHintBits - 1);
}

bool DBImpl::MayHoldLargeValue(std::string_view key) const {
  // (No hash at all until the first large value: asked of every GET.)
  if (!any_large_.load(std::memory_order_relaxed)) return false;
  const size_t bit = LargeHintBit(key);
  return (large_hint_[bit / 64].load(std::memory_order_relaxed) >> (bit % 64)) &
         1;
}

void DBImpl::NoteValueSize(std::string_view key, size_t size) {
  if (size < kLargeValueBytes) return;
  const size_t bit = LargeHintBit(key);
  large_hint_[bit / 64].fetch_or(uint64_t{1} << (bit % 64),
                                 std::memory_order_relaxed);
  any_large_.store(true, std::memory_order_relaxed);
}

Status DBImpl::TakeRead(std::string_view key, const rocksdb::Status& rs,
                        const rocksdb::PinnableSlice& raw,
                        const ValueCache::Ticket* fill, std::string* value) {
  if (rs.IsNotFound()) {
    if (fill != nullptr) values_->Fill(key, *fill, nullptr);
    return Status::NotFound(std::string_view());
  }
  if (!rs.ok()) return FromRocksDB(rs);
  format::DataRecord rec;
  Status s = format::DecodeDataRecordOf(key, {raw.data(), raw.size()}, &rec);
  if (!s.ok()) return s;
  if (rec.kind == format::RecordKind::kNoValue) {
    if (fill != nullptr) values_->Fill(key, *fill, nullptr);
    return Status::NotFound(std::string_view());
  }
  NoteValueSize(key, rec.value.size());
  value->assign(rec.value.data(), rec.value.size());
  if (fill != nullptr) values_->Fill(key, *fill, &rec.value);
  return Status::OK();
}

bool DBImpl::MultiGetThroughCache(const ReadOptions& options,
                                  const std::vector<std::string_view>& views,
                                  const std::vector<rocksdb::Slice>& slices,
                                  const std::vector<size_t>& index,
                                  std::string* values, Status* statuses) {
  // The valid keys: views[j] and slices[j] are MultiGet's keys[index[j]].
  // The answers must be one view, as one RocksDB MultiGet's are: the hits
  // are taken at one instant (LookupAll holds every key's stripe), the
  // misses read from RocksDB, and the two go together only if no write of
  // those stripes began or ended in between (Unchanged). Otherwise false:
  // the caller reads every key from RocksDB.
  thread_local std::vector<std::string> got;
  thread_local std::vector<rocksdb::Slice> miss_slices;
  thread_local std::vector<size_t> miss_at;  // into the valid keys
  thread_local std::vector<ValueCache::Ticket> miss_tickets;
  const size_t m = slices.size();
  if (got.size() < m) got.resize(m);
  bool absent[ValueCache::kMaxLookupAll];
  bool hit[ValueCache::kMaxLookupAll];
  ValueCache::View view;
  const size_t hits =
      values_->LookupAll(m, views.data(), got.data(), absent, hit, &view);
  if (hits == 0) return false;  // (one RocksDB MultiGet is one view)
  miss_slices.clear();
  miss_at.clear();
  miss_tickets.clear();
  for (size_t j = 0; j < m; ++j) {
    if (hit[j]) continue;
    miss_slices.push_back(slices[j]);
    miss_at.push_back(j);
    miss_tickets.push_back(values_->BeginFill(views[j]));
  }
  std::vector<rocksdb::PinnableSlice> raw(miss_slices.size());
  std::vector<rocksdb::Status> rs(miss_slices.size());
  if (!miss_slices.empty()) {
    db_->MultiGet(ToRocks(options), data_cf_, miss_slices.size(),
                  miss_slices.data(), raw.data(), rs.data());
    if (!values_->Unchanged(view)) return false;
  }
  const bool fill = options.fill_cache;
  for (size_t j = 0; j < m; ++j) {
    if (!hit[j]) continue;
    if (absent[j]) {
      statuses[index[j]] = Status::NotFound(std::string_view());
    } else {
      values[index[j]].swap(got[j]);
    }
  }
  for (size_t k = 0; k < miss_slices.size(); ++k) {
    const size_t i = index[miss_at[k]];
    statuses[i] = TakeRead(views[miss_at[k]], rs[k], raw[k],
                           fill ? &miss_tickets[k] : nullptr, &values[i]);
  }
  return true;
}

Status DBImpl::GetFenced(const ReadOptions& options, std::string_view key,
                         Token token, std::string* value, Token* max_token) {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  if (token == 0) {
    return InvalidTokenZero();
  }
  rocksdb::ReadOptions ro = ToRocks(options);
  // The domain max and the value must come from one snapshot (released
  // when this returns).
  std::unique_ptr<rocksdb::ManagedSnapshot> snapshot;
  Token stored = 0;
  if (!spec_.is_per_key()) {
    snapshot = std::make_unique<rocksdb::ManagedSnapshot>(db_.get());
    ro.snapshot = snapshot->snapshot();
    rocksdb::PinnableSlice raw_max;
    rocksdb::Status rs =
        db_->Get(ro, fence_cf_, ToSlice(spec_.DomainOf(key)), &raw_max);
    if (rs.ok()) {
      if (!format::DecodeToken({raw_max.data(), raw_max.size()}, &stored)) {
        return Status::Corruption("bad fence record for domain \"" +
                                  EscapeBytes(spec_.DomainOf(key)) + "\"");
      }
    } else if (!rs.IsNotFound()) {
      return FromRocksDB(rs);
    }
  }
  rocksdb::PinnableSlice raw;
  format::DataRecord rec{format::RecordKind::kNoValue, 0, {}};
  s = ReadDataRecord(ro, key, &raw, &rec);
  if (!s.ok() && !s.IsNotFound()) return s;
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

Status DBImpl::ReadLeaseCounter(Token* counter) {
  std::string raw;
  Status s = GetMeta(format::kMetaLeaseCounter, &raw);
  if (s.IsNotFound()) {
    *counter = 0;
    return Status::OK();
  }
  if (!s.ok()) return s;
  if (!format::DecodeToken(raw, counter)) {
    return Status::Corruption("bad lease_counter record in " + path_ + " (" +
                              std::to_string(raw.size()) + " bytes, not 8)");
  }
  return Status::OK();
}

Status DBImpl::PutMetaSynced(
    const std::vector<std::pair<std::string, std::string>>& records) {
  return WriteMetaSynced(records, {});
}

Status DBImpl::DeleteMetaSynced(const std::string& key) {
  return WriteMetaSynced({}, {key});
}

Status DBImpl::WriteMetaSynced(
    const std::vector<std::pair<std::string, std::string>>& puts,
    const std::vector<std::string>& deletes) {
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : puts) {
    rocksdb::Status rs = batch.Put(meta_cf_, key, value);
    if (!rs.ok()) return FromRocksDB(rs);
  }
  for (const auto& key : deletes) {
    rocksdb::Status rs = batch.Delete(meta_cf_, key);
    if (!rs.ok()) return FromRocksDB(rs);
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  MutexLock lock(&meta_mu_);
  if (following_.load(std::memory_order_acquire)) return FollowingStatus();
  const rocksdb::Status rs = recovery_->Write(db_.get(), wo, &batch);
  if (rs.ok()) NoteSynced(batch);
  return FromRocksDB(rs);
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
  if (property == "fencedkv.digest") {
    // FNV-1a over every record (family, key, value, in key order), lengths
    // included so that no two record sets hash alike by concatenation.
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const void* p, size_t n) {
      const auto* b = static_cast<const unsigned char*>(p);
      for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    };
    for (auto* cf : {data_cf_, fence_cf_, meta_cf_}) {
      const uint32_t id = cf->GetID();
      std::unique_ptr<rocksdb::Iterator> it(
          db_->NewIterator(IteratorReadOptions(), cf));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const uint64_t lens[2] = {it->key().size(), it->value().size()};
        mix(&id, sizeof(id));
        mix(lens, sizeof(lens));
        mix(it->key().data(), it->key().size());
        mix(it->value().data(), it->value().size());
      }
      if (!it->status().ok()) return false;
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(h));
    *value = hex;
    return true;
  }
  if (property == "fencedkv.high-water-mark") {
    *value = std::to_string(HighWaterMark());
    return true;
  }
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
  if (property == "fencedkv.log-tail") {
    LogTail::Stats st;
    if (log_tail_ != nullptr) st = log_tail_->GetStats();
    *value = "bytes: " + std::to_string(st.bytes) +
             "\nbatches: " + std::to_string(st.batches) +
             "\ncapacity: " + std::to_string(options_.log_tail_bytes) +
             "\nappended: " + std::to_string(st.appended) +
             "\nresets: " + std::to_string(st.resets) +
             "\nfound: " + std::to_string(st.found) +
             "\nmissed: " + std::to_string(st.missed) +
             "\nwaited: " + std::to_string(st.waited) + "\n";
    return true;
  }
  if (property == "fencedkv.wal-sync") {
    *value = "interval_ms: " + std::to_string(options_.wal_sync_interval_ms) +
             "\nsynced_sequence: " +
             std::to_string(synced_sequence_.load(std::memory_order_acquire)) +
             "\nidle_syncs: " +
             std::to_string(idle_syncs_.load(std::memory_order_relaxed)) +
             "\nstamped_sequence: " +
             std::to_string(stamped_sequence_.load(std::memory_order_relaxed)) +
             "\n";
    return true;
  }
  if (property == "fencedkv.value-cache-bytes") {
    *value = std::to_string(values_ == nullptr ? 0 : values_->Usage());
    return true;
  }
  if (property == "fencedkv.value-cache-capacity") {
    *value = std::to_string(values_ == nullptr ? 0 : values_->Capacity());
    return true;
  }
  if (property == "fencedkv.fence-cache-capacity") {
    *value = std::to_string(table_->capacity_bytes());
    return true;
  }
  if (property == "fencedkv.fence-cache-bytes") {
    *value = std::to_string(table_->ApproximateMemoryUsage());
    return true;
  }
  if (property == "fencedkv.tickers") {
    // Every RocksDB ticker, "name value" per line; false without
    // Options::statistics.
    const rocksdb::Statistics* stats = db_->GetDBOptions().statistics.get();
    if (stats == nullptr) return false;
    value->clear();
    for (const auto& [ticker, name] : rocksdb::TickersNameMap) {
      *value +=
          name + " " + std::to_string(stats->getTickerCount(ticker)) + "\n";
    }
    return true;
  }
  static constexpr std::string_view kAggregated = "fencedkv.aggregated.";
  if (property.substr(0, kAggregated.size()) == kAggregated) {
    // An integer RocksDB property summed over every column family.
    uint64_t n = 0;
    if (!db_->GetAggregatedIntProperty(
            ToSlice(property.substr(kAggregated.size())), &n)) {
      return false;
    }
    *value = std::to_string(n);
    return true;
  }
  if (property.substr(0, 8) == "rocksdb.") {
    return db_->GetProperty(data_cf_, ToSlice(property), value);
  }
  return false;
}

Status DBImpl::Flush() {
  return FromRocksDB(
      db_->Flush(rocksdb::FlushOptions(), {data_cf_, fence_cf_, meta_cf_}));
}

Status DBImpl::CompactRange(const std::string* begin, const std::string* end) {
  rocksdb::Slice b, e;
  if (begin != nullptr) b = *begin;
  if (end != nullptr) e = *end;
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  rocksdb::Status rs = db_->CompactRange(cro, data_cf_, begin ? &b : nullptr,
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
