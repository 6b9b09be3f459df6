// Copyright (c) fencedkv authors.
//
// ValueCache: the latest value of recently read or written keys, in memory,
// so a point read of a hot key skips RocksDB's memtable, filter, index and
// block lookups (Options::value_cache_size; docs/concurrency.md, "Why the
// value cache never answers an old value"). It holds values only (never a key's
// max token: every fenced read and every fence check still reads RocksDB or the
// fence table), and it never answers with a value older than RocksDB's latest
// visible one.
//
// Keys hash to one of up to 1024 stripes. Each stripe has a mutex, its
// share of the capacity, an open-addressing hash index of its entries, a clock
// list for eviction, a version and a count of writes in flight. The rules:
//  - A writer calls BeginWrite for each key it writes before the RocksDB
//    write, and EndWrite after it returned (success or not). BeginWrite
//    marks the key's entry invalid (a reader then misses) and moves the
//    stripe's version; EndWrite moves it again and, given the value now
//    stored, writes it into the entry in place (no allocation when it
//    fits), else drops the entry.
//  - A reader that misses takes a Ticket (BeginFill) before reading
//    RocksDB, and Fill inserts what it read only if the stripe had no write
//    in flight when the ticket was taken and none began since.
// Why no stale value is ever returned: a valid entry holds RocksDB's
// latest value for the key (a reader's fill passed the ticket check under
// the stripe's lock, so no write of the key became visible between its
// ticket and the insert, and any write that began before the ticket had
// ended, i.e. was visible to its read; a writer stores the value it has
// just made visible while the caller's own lock on the key excludes every
// other writer of it). Every later write invalidates it under the same lock
// before that write becomes visible.
//
// Callers must serialize the writes of one key between BeginWrite and
// EndWrite (DBImpl holds the key's fence stripe lock). Thread-safe
// otherwise.

#ifndef FENCEDKV_ENGINE_DB_VALUE_CACHE_H_
#define FENCEDKV_ENGINE_DB_VALUE_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class ValueCache {
 public:
  // `capacity` > 0: bytes of entries (keys, values and the cache's own
  // metadata), split evenly between the stripes. An entry over 64 KiB, or
  // over a quarter of its stripe's share, is not kept.
  explicit ValueCache(size_t capacity);
  ~ValueCache();
  ValueCache(const ValueCache&) = delete;
  ValueCache& operator=(const ValueCache&) = delete;

  // What a lookup found: nothing to go by (read RocksDB), the key's latest
  // value (then *value is set), or that the key has no value.
  enum class Found { kMiss, kValue, kAbsent };
  Found Lookup(std::string_view key, std::string* value);
  // The n keys at one instant (n <= kMaxLookupAll): for each key whose
  // entry is valid, hit[i] and values[i] or absent[i]; returns how many. It
  // holds all the keys' stripes while it looks, and records their versions
  // in *view for Unchanged.
  static constexpr size_t kMaxLookupAll = 64;
  struct View {
    size_t stripes = 0;
    size_t order[kMaxLookupAll];  // distinct stripe indices, ascending
    uint64_t versions[kMaxLookupAll];
  };
  size_t LookupAll(size_t n, const std::string_view* keys, std::string* values,
                   bool* absent, bool* hit, View* view);
  // True if no write of the view's stripes began or ended since LookupAll:
  // then its hits still held when a RocksDB read made in between read the
  // misses, and together they are one view, as one RocksDB MultiGet's are.
  bool Unchanged(const View& view);

  struct Ticket {
    uint64_t version = 0;
    bool valid = false;  // false: a write was in flight; Fill keeps nothing
  };
  // Before reading RocksDB for a key that missed.
  Ticket BeginFill(std::string_view key);
  // After: keeps what the read returned (`value`, or null if the key has
  // no value) if the ticket still holds.
  void Fill(std::string_view key, const Ticket& ticket,
            const std::string_view* value);

  // Around a write of `key` (see above). EndWrite with `keep` (the write
  // succeeded and this op is the key's last in it): the entry (created if
  // missing) holds `value`, or the key's absence if null (a delete).
  // Without (the write failed, a later op of the same write wrote the key,
  // or the caller leaves the value to the next read): the key's entry is
  // dropped.
  void BeginWrite(std::string_view key);
  void EndWrite(std::string_view key, bool keep, const std::string_view* value);
  // Loads the line BeginWrite and EndWrite of `key` will look at first (a
  // writer of many keys prefetches them all before taking its locks).
  void Prefetch(std::string_view key) const;

  size_t Usage() const;
  size_t Capacity() const;

  // The hash every entry is found by.
  static uint64_t HashOf(std::string_view key);

 private:
  struct Node;
  struct Slot;
  struct Stripe;
  Stripe& StripeFor(uint64_t hash) const;
  // With the stripe's mutex held.
  static Node* Find(Stripe& s, uint64_t hash, std::string_view key);
  // A found node as a lookup's answer (sets *value for a value).
  static Found Take(Node* node, std::string* value);
  // All of a view's stripes, in ascending order.
  void LockView(const View& view);
  void UnlockView(const View& view);
  // value null: the key has no value. An entry too big to keep is not
  // kept, and `node` is dropped.
  void Put(Stripe& s, uint64_t hash, std::string_view key,
           const std::string_view* value, Node* node);
  void Remove(Stripe& s, Node* node);
  void Link(Stripe& s, Node* node);
  void Replace(Stripe& s, Node* old, Node* node);
  // The slot that holds `n` (it must be in the index).
  static size_t SlotOf(Stripe& s, const Node* n);
  // Puts `slot` in the first empty slot of its probe run (there is one).
  static void Place(std::vector<Slot>* slots, const Slot& slot);
  // Rebuilds the index with `size` slots (a power of two, room for all).
  void Resize(Stripe& s, size_t size);
  static Node* NewNode(uint64_t hash, std::string_view key,
                       std::string_view value);
  static void FreeNode(Node* node);
  void Evict(Stripe& s);

  const size_t capacity_;
  size_t num_stripes_;  // a power of two
  size_t stripe_budget_;
  size_t max_entry_;
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_VALUE_CACHE_H_
