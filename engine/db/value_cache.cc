// Copyright (c) fencedkv authors.

#include "db/value_cache.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "util/sync_point.h"

namespace fencedkv {

struct ValueCache::Node {
  Node* chain = nullptr;  // the bucket's next
  Node* newer = nullptr;  // the clock list, oldest first
  Node* older = nullptr;
  uint64_t hash = 0;
  bool valid = false;       // false while a write of the key is in flight
  bool referenced = false;  // read or written since the clock last passed
  std::string key;
  std::string value;
  size_t charge = 0;  // what the stripe counts for it
};

struct alignas(64) ValueCache::Stripe {
  Mutex mu;
  uint64_t version GUARDED_BY(mu) = 0;
  uint32_t in_flight GUARDED_BY(mu) = 0;
  std::vector<Node*> buckets GUARDED_BY(mu);  // empty or a power of two
  size_t count GUARDED_BY(mu) = 0;
  size_t bytes GUARDED_BY(mu) = 0;
  Node* oldest GUARDED_BY(mu) = nullptr;
  Node* newest GUARDED_BY(mu) = nullptr;
};

namespace {
constexpr size_t kMaxStripes = 1024;
constexpr size_t kStripeShare = 256 << 10;  // fewer stripes below 256 MiB
constexpr size_t kMaxEntry = 64 << 10;

size_t Charge(const std::string& key, const std::string& value) {
  // The node with its two string headers, and malloc's overhead.
  return key.capacity() + value.capacity() + 160;
}
}  // namespace

ValueCache::ValueCache(size_t capacity) : capacity_(capacity) {
  num_stripes_ = 1;
  while (num_stripes_ < kMaxStripes &&
         num_stripes_ * 2 * kStripeShare <= capacity_) {
    num_stripes_ *= 2;
  }
  stripe_budget_ = capacity_ / num_stripes_;
  max_entry_ = std::min(kMaxEntry, stripe_budget_ / 4);
  stripes_.reset(new Stripe[num_stripes_]);
}

ValueCache::~ValueCache() {
  for (size_t i = 0; i < num_stripes_; ++i) {
    Stripe& s = stripes_[i];
    MutexLock lock(&s.mu);
    for (Node* n = s.oldest; n != nullptr;) {
      Node* next = n->newer;
      delete n;
      n = next;
    }
  }
}

ValueCache::Stripe& ValueCache::StripeFor(uint64_t hash) const {
  return stripes_[hash & (num_stripes_ - 1)];
}

namespace {
uint64_t HashOf(std::string_view key) {
  return std::hash<std::string_view>()(key);
}
}  // namespace

ValueCache::Node* ValueCache::Find(Stripe& s, uint64_t hash,
                                   std::string_view key) {
  s.mu.AssertHeld();
  if (s.buckets.empty()) return nullptr;
  // The bucket from the high bits: the low ones chose the stripe.
  Node* n = s.buckets[(hash >> 20) & (s.buckets.size() - 1)];
  while (n != nullptr && (n->hash != hash || n->key != key)) n = n->chain;
  return n;
}

bool ValueCache::Lookup(std::string_view key, std::string* value) {
  const uint64_t h = HashOf(key);
  Stripe& s = StripeFor(h);
  MutexLock lock(&s.mu);
  Node* n = Find(s, h, key);
  if (n == nullptr || !n->valid) return false;
  value->assign(n->value);
  n->referenced = true;
  return true;
}

ValueCache::Ticket ValueCache::BeginFill(std::string_view key) {
  Stripe& s = StripeFor(HashOf(key));
  MutexLock lock(&s.mu);
  return Ticket{s.version, s.in_flight == 0};
}

void ValueCache::Fill(std::string_view key, const Ticket& ticket,
                      std::string_view value) {
  if (!ticket.valid) return;
  // A reader paused here, between its read and the insert, is the race the
  // ticket exists for (ValueCacheTest parks one).
  TEST_SYNC_POINT("ValueCache::Fill:BeforeLock");
  const uint64_t h = HashOf(key);
  Stripe& s = StripeFor(h);
  MutexLock lock(&s.mu);
  if (s.version != ticket.version) return;  // a write began since
  Put(s, h, key, value, Find(s, h, key));
}

void ValueCache::BeginWrite(std::string_view key) {
  const uint64_t h = HashOf(key);
  Stripe& s = StripeFor(h);
  MutexLock lock(&s.mu);
  ++s.version;
  ++s.in_flight;
  Node* n = Find(s, h, key);
  if (n != nullptr) n->valid = false;
}

void ValueCache::EndWrite(std::string_view key,
                          const std::string_view* stored) {
  const uint64_t h = HashOf(key);
  Stripe& s = StripeFor(h);
  MutexLock lock(&s.mu);
  ++s.version;
  --s.in_flight;
  Node* n = Find(s, h, key);
  if (stored == nullptr) {
    if (n != nullptr && !n->valid) Remove(s, n);
    return;
  }
  // The caller's lock on the key keeps every other writer of it out, so the
  // value it stored is the key's latest.
  Put(s, h, key, *stored, n);
}

void ValueCache::Put(Stripe& s, uint64_t hash, std::string_view key,
                     std::string_view value, Node* n) {
  s.mu.AssertHeld();
  if (key.size() + value.size() > max_entry_) {
    if (n != nullptr) Remove(s, n);  // (no older copy may stay)
    return;
  }
  if (n == nullptr) {
    n = new Node;
    n->hash = hash;
    n->key.assign(key.data(), key.size());
    if (s.buckets.empty()) {
      s.buckets.assign(16, nullptr);
      s.bytes += 16 * sizeof(std::uintptr_t);
      usage_.fetch_add(16 * sizeof(std::uintptr_t), std::memory_order_relaxed);
    }
    if (s.count >= s.buckets.size()) {  // grow: at most one node per bucket
      std::vector<Node*> grown(s.buckets.size() * 2, nullptr);
      for (Node* b : s.buckets) {
        while (b != nullptr) {
          Node* next = b->chain;
          Node*& head = grown[(b->hash >> 20) & (grown.size() - 1)];
          b->chain = head;
          head = b;
          b = next;
        }
      }
      // (Buckets are pointers.)
      const size_t added =
          (grown.size() - s.buckets.size()) * sizeof(std::uintptr_t);
      s.buckets.swap(grown);
      s.bytes += added;
      usage_.fetch_add(added, std::memory_order_relaxed);
    }
    Node*& head = s.buckets[(hash >> 20) & (s.buckets.size() - 1)];
    n->chain = head;
    head = n;
    n->older = s.newest;
    if (s.newest != nullptr) s.newest->newer = n;
    s.newest = n;
    if (s.oldest == nullptr) s.oldest = n;
    ++s.count;
  } else {
    s.bytes -= n->charge;
    usage_.fetch_sub(n->charge, std::memory_order_relaxed);
  }
  // In place: no allocation while the value fits what the entry holds
  // (a large one is not kept for a small one).
  if (n->value.capacity() > 2 * value.size() + 64) std::string().swap(n->value);
  n->value.assign(value.data(), value.size());
  n->valid = true;
  n->referenced = true;
  n->charge = Charge(n->key, n->value);
  s.bytes += n->charge;
  usage_.fetch_add(n->charge, std::memory_order_relaxed);
  Evict(s);
}

void ValueCache::Remove(Stripe& s, Node* n) {
  s.mu.AssertHeld();
  Node** link = &s.buckets[(n->hash >> 20) & (s.buckets.size() - 1)];
  while (*link != n) link = &(*link)->chain;
  *link = n->chain;
  (n->older != nullptr ? n->older->newer : s.oldest) = n->newer;
  (n->newer != nullptr ? n->newer->older : s.newest) = n->older;
  --s.count;
  s.bytes -= n->charge;
  usage_.fetch_sub(n->charge, std::memory_order_relaxed);
  delete n;
}

void ValueCache::Evict(Stripe& s) {
  s.mu.AssertHeld();
  // Clock: the oldest entry goes unless it was used since the clock last
  // passed it (then it gets another round, as the newest). Each pass
  // clears what it skips, so it ends within two rounds.
  while (s.bytes > stripe_budget_ && s.oldest != nullptr) {
    Node* n = s.oldest;
    if (n->referenced && n != s.newest) {
      n->referenced = false;
      s.oldest = n->newer;
      s.oldest->older = nullptr;
      n->older = s.newest;
      n->newer = nullptr;
      s.newest->newer = n;
      s.newest = n;
      continue;
    }
    Remove(s, n);
  }
}

size_t ValueCache::Usage() const {
  return usage_.load(std::memory_order_relaxed);
}
size_t ValueCache::Capacity() const { return capacity_; }

}  // namespace fencedkv
