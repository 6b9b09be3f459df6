// Copyright (c) fencedkv authors.
//
// FenceTable: the per-domain locks and the in-memory view of domain max
// tokens.
//
// Locks: domains hash onto a fixed set of stripes, each with a mutex. A
// writer holds the stripes of every domain it touches from its check until
// its RocksDB write has returned, so checks and applies happen in the same
// order per domain: two writers on one domain can never both pass a check
// only one should pass, and a stale write can never land after a newer one.
// Stripes are always locked in ascending index order (no deadlock).
//
// Cache: each stripe keeps an LRU map domain -> max token for its domains.
// What is authoritative is RocksDB; the cache is EXACT for the domains it
// holds (it is only written under the stripe lock, after a successful
// write or an exact read), and a miss falls back to one RocksDB read. Its
// size is bounded by a byte budget, so memory does not grow with the number
// of domains.
//
// Thread safety: every method but StripeOf/LockAll/UnlockAll REQUIRES the
// stripe's mutex.

#ifndef FENCEDKV_ENGINE_DB_FENCE_TABLE_H_
#define FENCEDKV_ENGINE_DB_FENCE_TABLE_H_

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fencedkv/token.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class FenceTable {
 public:
  // `num_stripes` is rounded up to a power of two.
  FenceTable(size_t num_stripes, size_t cache_bytes);
  FenceTable(const FenceTable&) = delete;
  FenceTable& operator=(const FenceTable&) = delete;
  ~FenceTable();

  size_t num_stripes() const { return mask_ + 1; }
  size_t StripeOf(std::string_view domain) const {
    return std::hash<std::string_view>()(domain) & mask_;
  }
  std::mutex& mutex(size_t stripe) { return stripes_[stripe].mu; }

  // Locks / unlocks every stripe (in index order), e.g. to change the floor.
  void LockAll();
  void UnlockAll();

  // REQUIRES: mutex(stripe) held. True and *max set on a hit.
  bool Lookup(size_t stripe, std::string_view domain, Token* max);
  // REQUIRES: mutex(stripe) held. Records the exact max of `domain`.
  void Insert(size_t stripe, std::string_view domain, Token max);
  // REQUIRES: mutex(stripe) held.
  void Erase(size_t stripe, std::string_view domain);

  // Approximate bytes charged by all cached entries (takes every lock).
  size_t ApproximateMemoryUsage();

  // Bytes charged per cached entry beyond the domain's own bytes.
  static constexpr size_t kEntryOverhead = 128;

 private:
  struct Entry {
    std::string domain;
    Token max;
  };
  using List = std::list<Entry>;
  struct alignas(64) Stripe {
    std::mutex mu;
    List lru GUARDED_BY(mu);  // most recently used first
    std::unordered_map<std::string_view, List::iterator> index GUARDED_BY(mu);
    size_t charge GUARDED_BY(mu) = 0;
  };

  static size_t Charge(std::string_view domain) {
    return kEntryOverhead + (domain.size() > 15 ? domain.size() + 1 : 0);
  }

  const size_t mask_;
  const size_t stripe_capacity_;  // bytes per stripe; 0 = no cache
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_FENCE_TABLE_H_
