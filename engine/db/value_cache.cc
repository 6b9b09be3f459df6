// Copyright (c) fencedkv authors.

#include "db/value_cache.h"

#include <cstring>
#include <functional>

#include <rocksdb/cache.h>

#include "util/sync_point.h"

namespace fencedkv {

namespace {
// An entry's value: its size, then its bytes, in one allocation.
char* NewEntry(std::string_view value) {
  const uint64_t n = value.size();
  char* e = new char[sizeof(n) + value.size()];
  std::memcpy(e, &n, sizeof(n));
  if (!value.empty()) std::memcpy(e + sizeof(n), value.data(), value.size());
  return e;
}
std::string_view EntryValue(const void* e) {
  uint64_t n;
  std::memcpy(&n, e, sizeof(n));
  return {static_cast<const char*>(e) + sizeof(n), static_cast<size_t>(n)};
}
void DeleteEntry(const rocksdb::Slice& /*key*/, void* e) {
  delete[] static_cast<char*>(e);
}
rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace

ValueCache::ValueCache(size_t capacity)
    : max_entry_(capacity / 256),
      // No priority pools: one LRU order. Not strict: an insert over the
      // capacity evicts the least recently used entries first.
      cache_(rocksdb::NewLRUCache(capacity, -1, false, 0.0)),
      stripes_(new Stripe[kStripes]) {}

ValueCache::~ValueCache() = default;

size_t ValueCache::StripeOf(std::string_view key) {
  return std::hash<std::string_view>()(key) & (kStripes - 1);
}

bool ValueCache::Lookup(std::string_view key, std::string* value) {
  rocksdb::Cache::Handle* h = cache_->Lookup(ToSlice(key));
  if (h == nullptr) return false;
  const std::string_view v = EntryValue(cache_->Value(h));
  value->assign(v.data(), v.size());
  cache_->Release(h);
  return true;
}

ValueCache::Ticket ValueCache::BeginFill(std::string_view key) {
  Stripe& s = stripes_[StripeOf(key)];
  MutexLock lock(&s.mu);
  return Ticket{s.version, s.in_flight == 0};
}

void ValueCache::Fill(std::string_view key, const Ticket& ticket,
                      std::string_view value) {
  if (!ticket.valid) return;
  // A reader paused here, between its read and the insert, is the race the
  // ticket exists for (ValueCacheTest parks one).
  TEST_SYNC_POINT("ValueCache::Fill:BeforeLock");
  Stripe& s = stripes_[StripeOf(key)];
  MutexLock lock(&s.mu);
  if (s.version != ticket.version) return;  // a write began since
  Insert(key, value);
  s.may_hold = true;
}

void ValueCache::BeginWrite(std::string_view key) {
  Stripe& s = stripes_[StripeOf(key)];
  MutexLock lock(&s.mu);
  ++s.version;
  ++s.in_flight;
  if (s.may_hold) cache_->Erase(ToSlice(key));
}

void ValueCache::EndWrite(std::string_view key,
                          const std::string_view* stored) {
  Stripe& s = stripes_[StripeOf(key)];
  MutexLock lock(&s.mu);
  ++s.version;
  --s.in_flight;
  if (stored == nullptr) return;
  // The caller's lock on the key keeps every other writer of it out, so the
  // value it stored is the key's latest.
  Insert(key, *stored);
  s.may_hold = true;
}

void ValueCache::Insert(std::string_view key, std::string_view value) {
  const size_t charge = sizeof(uint64_t) + value.size() + key.size();
  if (charge > max_entry_) {
    cache_->Erase(ToSlice(key));  // (no older copy may stay)
    return;
  }
  // Not strict, so it cannot fail for want of room; on any failure the
  // cache frees the entry, and the key is not held.
  if (!cache_->Insert(ToSlice(key), NewEntry(value), charge, &DeleteEntry)
           .ok()) {
    cache_->Erase(ToSlice(key));
  }
}

size_t ValueCache::Usage() const { return cache_->GetUsage(); }
size_t ValueCache::Capacity() const { return cache_->GetCapacity(); }

}  // namespace fencedkv
