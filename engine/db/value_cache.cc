// Copyright (c) fencedkv authors.

#include "db/value_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <string_view>
#include <vector>

#include "util/sync_point.h"

namespace fencedkv {

// One allocation per entry: the node, its key, then room for its value, so
// finding a key touches the node's own lines only.
struct ValueCache::Node {
  Node* newer;  // the clock list, oldest first
  Node* older;
  uint64_t hash;
  uint32_t key_size;
  uint32_t value_size;
  uint32_t capacity;  // bytes of room for the value
  bool valid;         // false while a write of the key is in flight
  bool referenced;    // read or written since the clock last passed
  bool absent;        // the key has no value (value_size is 0)
  size_t charge;      // what the stripe counts for it

  char* data() { return reinterpret_cast<char*>(this + 1); }
  std::string_view key() { return {data(), key_size}; }
  std::string_view value() { return {data() + key_size, value_size}; }
};

struct ValueCache::Slot {
  uint64_t hash;
  Node* node;  // null: empty
};

struct alignas(64) ValueCache::Stripe {
  Mutex mu;
  uint64_t version GUARDED_BY(mu) = 0;
  uint32_t in_flight GUARDED_BY(mu) = 0;
  // Entries in the index. In the mutex's line with the two above (40 + 8 +
  // 4 + 8 bytes): a write of a key in an empty stripe (a replica nobody
  // reads from) touches no other line.
  size_t count GUARDED_BY(mu) = 0;
  // The index: open addressing with linear probing, at most 3/4 full.
  // A slot holds its node's hash beside the node, so a probe compares
  // hashes in the slot array and touches a node only when its hash matches
  // (a new key touches none), and growing moves slots without reading a
  // node. Empty or a power of two.
  std::vector<Slot> slots GUARDED_BY(mu);
  size_t bytes GUARDED_BY(mu) = 0;
  Node* oldest GUARDED_BY(mu) = nullptr;
  Node* newest GUARDED_BY(mu) = nullptr;
  // slots.data() and slots.size(), for Prefetch outside the lock (a stale
  // pair only prefetches a useless line).
  std::atomic<const Slot*> hint{nullptr};
  std::atomic<size_t> hint_slots{0};
  // bytes, for Usage() without the lock: stored (not added to a shared
  // counter) at every change. A locked add per write on one cache line for
  // all stripes cost about 2% of a SET's CPU, most of it waiting for the
  // write's own stores to the new entry to drain.
  std::atomic<size_t> published{0};
};

namespace {
constexpr size_t kMaxStripes = 1024;
constexpr size_t kStripeShare = 256 << 10;  // fewer stripes below 256 MiB
constexpr size_t kMaxEntry = 64 << 10;

// The node (at most 64 bytes, NewNode checks), its key and value room and
// malloc's overhead (the index's slots are charged as they are allocated).
size_t Charge(size_t key_size, size_t capacity) {
  return 64 + key_size + capacity + 16;
}

// Room for a value a little larger, so a growing one is not reallocated at
// every write.
size_t RoomFor(size_t value_size) { return value_size + value_size / 8 + 16; }

// A hash's home slot among `slots` (a power of two): from the high bits,
// as the low ones chose the stripe.
size_t HomeOf(uint64_t hash, size_t slots) {
  return (hash >> 20) & (slots - 1);
}

constexpr size_t kFirstSlots = 16;
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
      FreeNode(n);
      n = next;
    }
  }
}

ValueCache::Stripe& ValueCache::StripeFor(uint64_t hash) const {
  return stripes_[hash & (num_stripes_ - 1)];
}

uint64_t ValueCache::HashOf(std::string_view key) {
  return std::hash<std::string_view>()(key);
}

ValueCache::Node* ValueCache::Find(Stripe& s, uint64_t hash,
                                   std::string_view key) {
  s.mu.AssertHeld();
  if (s.count == 0) return nullptr;
  const size_t mask = s.slots.size() - 1;
  for (size_t i = HomeOf(hash, s.slots.size());; i = (i + 1) & mask) {
    const Slot& slot = s.slots[i];
    if (slot.node == nullptr) return nullptr;
    if (slot.hash == hash && slot.node->key() == key) return slot.node;
  }
}

ValueCache::Found ValueCache::Lookup(std::string_view key, std::string* value) {
  const uint64_t h = HashOf(key);
  Stripe& s = StripeFor(h);
  MutexLock lock(&s.mu);
  return Take(Find(s, h, key), value);
}

ValueCache::Found ValueCache::Take(Node* n, std::string* value) {
  if (n == nullptr || !n->valid) return Found::kMiss;
  n->referenced = true;
  if (n->absent) return Found::kAbsent;
  const std::string_view v = n->value();
  value->assign(v.data(), v.size());
  return Found::kValue;
}

size_t ValueCache::LookupAll(size_t n, const std::string_view* keys,
                             std::string* values, bool* absent, bool* hit,
                             View* view)
    NO_THREAD_SAFETY_ANALYSIS {  // (a variable set of stripes, in order)
  uint64_t hashes[kMaxLookupAll];
  view->stripes = 0;
  for (size_t i = 0; i < n; ++i) {
    hashes[i] = HashOf(keys[i]);
    const size_t idx = hashes[i] & (num_stripes_ - 1);
    size_t at = 0;
    while (at < view->stripes && view->order[at] < idx) ++at;
    if (at < view->stripes && view->order[at] == idx) continue;
    for (size_t j = view->stripes; j > at; --j) {
      view->order[j] = view->order[j - 1];
    }
    view->order[at] = idx;
    ++view->stripes;
  }
  LockView(*view);
  for (size_t j = 0; j < view->stripes; ++j) {
    view->versions[j] = stripes_[view->order[j]].version;
  }
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    const Found f =
        Take(Find(StripeFor(hashes[i]), hashes[i], keys[i]), &values[i]);
    hit[i] = f != Found::kMiss;
    absent[i] = f == Found::kAbsent;
    if (hit[i]) ++hits;
    // A writer of the other keys must wait here (ValueCacheTest parks one).
    if (i == 0) TEST_SYNC_POINT("ValueCache::LookupAll:AfterFirst");
  }
  UnlockView(*view);
  return hits;
}

bool ValueCache::Unchanged(const View& view) NO_THREAD_SAFETY_ANALYSIS {
  LockView(view);
  bool same = true;
  for (size_t j = 0; j < view.stripes && same; ++j) {
    same = stripes_[view.order[j]].version == view.versions[j];
  }
  UnlockView(view);
  return same;
}

void ValueCache::LockView(const View& view) NO_THREAD_SAFETY_ANALYSIS {
  // Ascending order: a writer or filler holds one stripe at a time.
  for (size_t j = 0; j < view.stripes; ++j) stripes_[view.order[j]].mu.Lock();
}

void ValueCache::UnlockView(const View& view) NO_THREAD_SAFETY_ANALYSIS {
  for (size_t j = view.stripes; j-- > 0;) stripes_[view.order[j]].mu.Unlock();
}

ValueCache::Ticket ValueCache::BeginFill(std::string_view key) {
  Stripe& s = StripeFor(HashOf(key));
  MutexLock lock(&s.mu);
  return Ticket{s.version, s.in_flight == 0};
}

void ValueCache::Fill(std::string_view key, const Ticket& ticket,
                      const std::string_view* value) {
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

void ValueCache::Prefetch(std::string_view key) const {
  const uint64_t h = HashOf(key);
  const Stripe& s = StripeFor(h);
  // The stripe's first line (its mutex, version and count: what BeginWrite
  // changes first), then the slot its index will probe.
  __builtin_prefetch(&s, 1);
  const Slot* slots = s.hint.load(std::memory_order_relaxed);
  const size_t size = s.hint_slots.load(std::memory_order_relaxed);
  // (size 0: the first array's pointer was stored before its size.) The
  // pair may be torn -- an old, smaller or freed array with a newer size --
  // so the address is computed as an integer, never as a pointer into the
  // array: a prefetch of any address is harmless, forming a pointer past an
  // array is not defined.
  if (slots != nullptr && size != 0) {
    const uintptr_t at =
        reinterpret_cast<uintptr_t>(slots) + HomeOf(h, size) * sizeof(Slot);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): only prefetched
    __builtin_prefetch(reinterpret_cast<const void*>(at));
  }
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

void ValueCache::EndWrite(std::string_view key, bool keep,
                          const std::string_view* value) {
  const uint64_t h = HashOf(key);
  Stripe& s = StripeFor(h);
  MutexLock lock(&s.mu);
  ++s.version;
  --s.in_flight;
  Node* n = Find(s, h, key);
  if (!keep) {
    if (n != nullptr) Remove(s, n);
    return;
  }
  // The caller's lock on the key keeps every other writer of it out, so the
  // value it stored (or the absence it left) is the key's latest.
  Put(s, h, key, value, n);
}

void ValueCache::Put(Stripe& s, uint64_t hash, std::string_view key,
                     const std::string_view* stored, Node* n) {
  s.mu.AssertHeld();
  const std::string_view value =
      stored != nullptr ? *stored : std::string_view();
  if (key.size() + value.size() > max_entry_) {
    if (n != nullptr) Remove(s, n);  // (no older copy may stay)
    return;
  }
  if (n != nullptr && value.size() <= n->capacity &&
      n->capacity <= 2 * value.size() + 64) {
    // In place: the common overwrite allocates nothing.
    std::memcpy(n->data() + n->key_size, value.data(), value.size());
    n->value_size = static_cast<uint32_t>(value.size());
  } else {
    Node* m = NewNode(hash, key, value);
    if (n != nullptr) {
      Replace(s, n, m);
    } else {
      Link(s, m);
    }
    n = m;
  }
  n->valid = true;
  n->referenced = true;
  n->absent = stored == nullptr;
  Evict(s);
}

ValueCache::Node* ValueCache::NewNode(uint64_t hash, std::string_view key,
                                      std::string_view value) {
  static_assert(sizeof(Node) <= 64, "Charge counts 64 bytes of node");
  const size_t capacity = RoomFor(value.size());
  Node* n =
      static_cast<Node*>(::operator new(sizeof(Node) + key.size() + capacity));
  n->newer = n->older = nullptr;
  n->hash = hash;
  n->key_size = static_cast<uint32_t>(key.size());
  n->value_size = static_cast<uint32_t>(value.size());
  n->capacity = static_cast<uint32_t>(capacity);
  n->valid = false;
  n->referenced = false;
  n->absent = false;
  n->charge = Charge(key.size(), capacity);
  std::memcpy(n->data(), key.data(), key.size());
  if (!value.empty()) {
    std::memcpy(n->data() + key.size(), value.data(), value.size());
  }
  return n;
}

void ValueCache::FreeNode(Node* n) { ::operator delete(n); }

size_t ValueCache::SlotOf(Stripe& s, const Node* n) {
  s.mu.AssertHeld();
  const size_t mask = s.slots.size() - 1;
  size_t i = HomeOf(n->hash, s.slots.size());
  while (s.slots[i].node != n) i = (i + 1) & mask;
  return i;
}

void ValueCache::Place(std::vector<Slot>* slots, const Slot& slot) {
  const size_t mask = slots->size() - 1;
  size_t i = HomeOf(slot.hash, slots->size());
  while ((*slots)[i].node != nullptr) i = (i + 1) & mask;
  (*slots)[i] = slot;
}

void ValueCache::Resize(Stripe& s, size_t size) {
  s.mu.AssertHeld();
  std::vector<Slot> resized(size, Slot{0, nullptr});
  for (const Slot& slot : s.slots) {
    if (slot.node != nullptr) Place(&resized, slot);
  }
  const size_t before = s.slots.size() * sizeof(Slot);
  s.slots.swap(resized);
  s.hint.store(s.slots.data(), std::memory_order_relaxed);
  s.hint_slots.store(s.slots.size(), std::memory_order_relaxed);
  const size_t after = s.slots.size() * sizeof(Slot);
  s.bytes += after - before;
  s.published.store(s.bytes, std::memory_order_relaxed);
}

void ValueCache::Link(Stripe& s, Node* n) {
  s.mu.AssertHeld();
  // At most 3/4 full: an absent key's probe stays within a line or two.
  if (4 * (s.count + 1) > 3 * s.slots.size()) {
    Resize(s, std::max(kFirstSlots, 2 * s.slots.size()));
  }
  Place(&s.slots, Slot{n->hash, n});
  n->older = s.newest;
  n->newer = nullptr;
  if (s.newest != nullptr) s.newest->newer = n;
  s.newest = n;
  if (s.oldest == nullptr) s.oldest = n;
  ++s.count;
  s.bytes += n->charge;
  s.published.store(s.bytes, std::memory_order_relaxed);
}

void ValueCache::Replace(Stripe& s, Node* old, Node* n) {
  s.mu.AssertHeld();
  s.slots[SlotOf(s, old)].node = n;
  n->older = old->older;
  n->newer = old->newer;
  (n->older != nullptr ? n->older->newer : s.oldest) = n;
  (n->newer != nullptr ? n->newer->older : s.newest) = n;
  s.bytes += n->charge - old->charge;
  s.published.store(s.bytes, std::memory_order_relaxed);
  FreeNode(old);
}

void ValueCache::Remove(Stripe& s, Node* n) {
  s.mu.AssertHeld();
  // Backward-shift deletion: every later slot of the probe run whose home
  // does not lie after the hole moves into it, so no probe ever stops at a
  // hole short of its key (no tombstones).
  const size_t mask = s.slots.size() - 1;
  size_t hole = SlotOf(s, n);
  for (size_t j = (hole + 1) & mask; s.slots[j].node != nullptr;
       j = (j + 1) & mask) {
    const size_t home = HomeOf(s.slots[j].hash, s.slots.size());
    // Stays if its home is in (hole, j], cyclically.
    const bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    s.slots[hole] = s.slots[j];
    hole = j;
  }
  s.slots[hole] = Slot{0, nullptr};
  (n->older != nullptr ? n->older->newer : s.oldest) = n->newer;
  (n->newer != nullptr ? n->newer->older : s.newest) = n->older;
  --s.count;
  s.bytes -= n->charge;
  s.published.store(s.bytes, std::memory_order_relaxed);
  FreeNode(n);
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
  size_t total = 0;
  for (size_t i = 0; i < num_stripes_; ++i) {
    total += stripes_[i].published.load(std::memory_order_relaxed);
  }
  return total;
}
size_t ValueCache::Capacity() const { return capacity_; }

}  // namespace fencedkv
