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
// Entries live in a RocksDB LRU cache (its capacity bounds the memory,
// metadata included). Keys hash to one of kStripes stripes, each with a
// version and a count of writes in flight. The rules:
//  - A writer calls BeginWrite for each key it writes before the RocksDB
//    write, and EndWrite after it returned (success or not). BeginWrite
//    erases the key and moves the stripe's version; EndWrite moves it again
//    and, given the value now stored, inserts it.
//  - A reader that misses takes a Ticket (BeginFill) before reading
//    RocksDB, and Fill inserts what it read only if the stripe had no write
//    in flight when the ticket was taken and none began since.
// Why no stale value is ever returned: a value is in the cache only if it
// was RocksDB's latest for the key when inserted (a reader's fill passed
// the ticket check under the stripe's lock, so no write of the key became
// visible between its ticket and the insert, and any write that began
// before the ticket had ended, i.e. was visible to its read; a writer
// inserts the value it has just made visible while the caller's own lock on
// the key excludes every other writer of it). Every later write erases it
// under the same lock before that write becomes visible.
//
// Callers must serialize the writes of one key between BeginWrite and
// EndWrite (DBImpl holds the key's fence stripe lock). Thread-safe
// otherwise.

#ifndef FENCEDKV_ENGINE_DB_VALUE_CACHE_H_
#define FENCEDKV_ENGINE_DB_VALUE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace rocksdb {
class Cache;
}

namespace fencedkv {

class ValueCache {
 public:
  // `capacity` > 0: bytes of entries (keys, values and the cache's own
  // metadata). A value whose entry would exceed capacity / 256 is not kept.
  explicit ValueCache(size_t capacity);
  ~ValueCache();
  ValueCache(const ValueCache&) = delete;
  ValueCache& operator=(const ValueCache&) = delete;

  // True, with *value set, if the key's latest value is held.
  bool Lookup(std::string_view key, std::string* value);

  struct Ticket {
    uint64_t version = 0;
    bool valid = false;  // false: a write was in flight; Fill keeps nothing
  };
  // Before reading RocksDB for a key that missed.
  Ticket BeginFill(std::string_view key);
  // After: keeps `value` (what the read returned) if the ticket still holds.
  void Fill(std::string_view key, const Ticket& ticket, std::string_view value);

  // Around a write of `key` (see above). `stored`: the key's value if the
  // write stored one and succeeded, else null (the key stays out).
  void BeginWrite(std::string_view key);
  void EndWrite(std::string_view key, const std::string_view* stored);

  size_t Usage() const;
  size_t Capacity() const;

 private:
  static constexpr size_t kStripes = 1024;  // a power of two
  struct alignas(64) Stripe {
    Mutex mu;
    uint64_t version GUARDED_BY(mu) = 0;
    uint32_t in_flight GUARDED_BY(mu) = 0;
    // False while nothing was ever inserted through this stripe: a write
    // then has nothing to erase (a write-only load pays no cache lookup).
    bool may_hold GUARDED_BY(mu) = false;
  };
  static size_t StripeOf(std::string_view key);
  void Insert(std::string_view key, std::string_view value);

  const size_t max_entry_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_VALUE_CACHE_H_
