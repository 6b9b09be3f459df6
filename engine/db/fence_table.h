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
// Cache: a fixed array of 64-byte buckets (one cache line each). A bucket
// holds either two short entries (domain up to 23 bytes inline + max token)
// or one long entry (domain up to 55 bytes). What is authoritative is
// RocksDB; the cache is EXACT for the domains it holds: an entry matches only
// on the full domain bytes (never on a hash, which crafted keys could
// collide), and entries are only written under the stripe lock after a
// successful write or an exact read. A miss falls back to one RocksDB read.
// Every bucket belongs to one stripe, so the stripe's mutex guards it.
//
// Miss bound: a miss still bounds the domain's max. Every domain that is not
// in the cache has a stored max at or below MissBound(): the largest mark at
// open for a bucket that has never lost an entry (a domain written since then
// went into its bucket), else its stripe's bound, raised with every entry a
// bucket of the stripe evicts and every max it could not hold. So a writer
// whose token passes the bound needs no RocksDB read, as long as the cache
// holds its working set. The
// array is sized by the byte budget and mapped lazily (made resident at
// construction with `prefault`), so memory never exceeds the budget
// whatever the number of domains, and the write path never allocates.
//
// Thread safety: Lookup, MissBound and Insert REQUIRE the mutex of the hash's
// stripe; Hash, StripeOf and Prefetch need no lock.

#ifndef FENCEDKV_ENGINE_DB_FENCE_TABLE_H_
#define FENCEDKV_ENGINE_DB_FENCE_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "fencedkv/token.h"

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class FenceTable {
 public:
  // `num_stripes` is rounded up to a power of two. With `prefault`, every
  // page of the buckets is made resident now (and kept so by Reset), so no
  // write pays the page faults of its first touch (Options::
  // prefault_fence_cache).
  FenceTable(size_t num_stripes, size_t cache_bytes, bool prefault = false);
  FenceTable(const FenceTable&) = delete;
  FenceTable& operator=(const FenceTable&) = delete;
  ~FenceTable();

  // Domains longer than this are never cached (their checks below the
  // high-water mark read RocksDB).
  static constexpr size_t kMaxShortDomain = 23;
  static constexpr size_t kMaxCachedDomain = 55;

  static uint64_t Hash(std::string_view domain);
  size_t num_stripes() const { return stripe_mask_ + 1; }
  size_t StripeOf(uint64_t hash) const { return hash & stripe_mask_; }
  Mutex& mutex(size_t stripe) { return stripes_[stripe].mu; }

  // Locks / unlocks every stripe (in index order), e.g. to change the floor.
  void LockAll();
  void UnlockAll();

  // Starts loading hash's set into the CPU cache (no lock needed: it only
  // hints the hardware), so the miss overlaps the check and RocksDB's write,
  // after which the writer records its new max.
  void Prefetch(uint64_t hash) const;

  // REQUIRES: mutex(StripeOf(hash)) held. True and *max set on a hit.
  bool Lookup(uint64_t hash, std::string_view domain, Token* max);
  // REQUIRES: mutex(StripeOf(hash)) held. An upper bound of the stored max of
  // every domain with this hash that Lookup misses.
  Token MissBound(uint64_t hash) const;
  // REQUIRES: mutex(StripeOf(hash)) held. Records the exact max of `domain`
  // (replacing its entry, or evicting another of its bucket, whose max then
  // raises the miss bound; a max the cache cannot hold raises it too). A
  // writer calls it only after its RocksDB write succeeded, so the cache
  // never holds a max that is not durable, and a failed write leaves nothing
  // to undo. Every domain whose stored max changes must be recorded here.
  void Insert(uint64_t hash, std::string_view domain, Token max);

  // The stripe's high-water mark: an upper bound of the stored max of every
  // domain in the stripe (see fence_format.h). REQUIRES: mutex(stripe) held.
  Token StripeHwm(size_t stripe) const;
  // REQUIRES: mutex(stripe) held; only ever raises it.
  void SetStripeHwm(size_t stripe, Token hwm);
  // Sets every stripe's mark and the miss bounds, at open, before any
  // writer runs and while the cache is empty.
  void InitHwm(Token hwm);
  // Forgets every cached max and sets every stripe's mark and the miss
  // bounds to `hwm`.
  // REQUIRES: every stripe locked (LockAll).
  void Reset(Token hwm);

  // Bytes of entries in use (takes no lock: INFO memory must not wait for
  // the stripes a long write holds; a moment later it may be other).
  size_t ApproximateMemoryUsage();
  // Bytes reserved for buckets (the budget rounded down to whole buckets).
  size_t capacity_bytes() const;

 private:
  // A bucket is one cache line. Byte 8 of each 32-byte half is a tag:
  // 0 = empty, 1..24 = short entry of len tag-1, 25..56 = long entry of len
  // tag-1 that spans the whole bucket (then the second half is key bytes).
  // The first half's tag also carries kEvictedBit: the bucket has lost an
  // entry (or could not take a max) since open.
  struct Entry {
    Token max;
    uint8_t tag;
    char domain[kMaxShortDomain];
  };
  static_assert(sizeof(Entry) == 32, "two short entries per cache line");
  struct alignas(64) Bucket {
    Entry half[2];
  };
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
  static constexpr uint8_t kLongTag = kMaxShortDomain + 2;  // first long tag
  static constexpr uint8_t kEvictedBit = 0x80;
  static constexpr uint8_t kTagMask = 0x7f;
  static uint8_t TagOf(const Entry& e) { return e.tag & kTagMask; }

  struct alignas(64) Stripe {
    Mutex mu;
    uint32_t clock GUARDED_BY(mu) = 0;  // round-robin victim choice
    // Written under mu, read without it (ApproximateMemoryUsage: INFO
    // memory must not wait for the stripes a long write holds).
    std::atomic<size_t> used_bytes{0};
    Token hwm GUARDED_BY(mu) = 0;         // StripeHwm
    Token miss_bound GUARDED_BY(mu) = 0;  // MissBound of evicted buckets
  };

  // An entry leaves the cache (or a max cannot enter it): the stripe's miss
  // bound covers it from now on, and bucket b (if any) is marked.
  static void Forget(Stripe* stripe, Bucket* b, Token max);
  // used_bytes += delta (mod 2^64), by the stripe's lock holder: a plain
  // load and store, no atomic read-modify-write.
  static void AddUsed(Stripe* stripe, size_t delta) {
    stripe->used_bytes.store(
        stripe->used_bytes.load(std::memory_order_relaxed) + delta,
        std::memory_order_relaxed);
  }

  Bucket* BucketOf(uint64_t hash) const;
  // The entry holding `domain` in bucket b, or nullptr.
  static Entry* Find(Bucket* b, std::string_view domain);
  static char* DomainBytes(Entry* e);

  const size_t stripe_mask_;
  std::unique_ptr<Stripe[]> stripes_;
  size_t buckets_per_stripe_ = 0;  // 0 = no cache
  Bucket* buckets_ = nullptr;      // mmap'ed, zero-filled (lazily or not)
  size_t buckets_bytes_ = 0;
  const bool prefault_;
  // With prefault_: an Insert since the last Reset (else Reset has nothing
  // to zero: a replica promoted skips 64 MiB of memset).
  std::atomic<bool> dirty_{false};
  Token open_bound_ = 0;  // InitHwm's mark: MissBound of unmarked buckets
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_FENCE_TABLE_H_
