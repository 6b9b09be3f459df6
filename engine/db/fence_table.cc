// Copyright (c) fencedkv authors.

#include "db/fence_table.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>

#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it
#endif

namespace fencedkv {

namespace {
size_t RoundUpPow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
}  // namespace

FenceTable::FenceTable(size_t num_stripes, size_t cache_bytes, bool prefault)
    : stripe_mask_(RoundUpPow2(num_stripes == 0 ? 1 : num_stripes) - 1),
      stripes_(new Stripe[stripe_mask_ + 1]),
      prefault_(prefault) {
  buckets_per_stripe_ = cache_bytes / sizeof(Bucket) / (stripe_mask_ + 1);
  if (buckets_per_stripe_ == 0) return;
  buckets_bytes_ = buckets_per_stripe_ * (stripe_mask_ + 1) * sizeof(Bucket);
  void* p = mmap(nullptr, buckets_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {  // run without a cache rather than fail
    buckets_per_stripe_ = 0;
    buckets_bytes_ = 0;
    return;
  }
  // Every write touches one random bucket: with 4 KiB pages nearly each
  // touch is also a TLB miss (a page walk). Ask for transparent huge pages
  // (honoured when THP is in "madvise" or "always" mode; harmless otherwise).
  madvise(p, buckets_bytes_, MADV_HUGEPAGE);
  buckets_ = static_cast<Bucket*>(p);
  // Writes touch random buckets, so the first ones after an open each fault
  // in a new page (a huge page: 2 MiB zeroed inside the write). On the
  // 2-core test VM, where a first touch also faults in the host, the 64 MiB
  // cost the io thread about 0.2 s of its first writes; now the open pays.
  if (prefault_) {
    if (madvise(p, buckets_bytes_, MADV_POPULATE_WRITE) != 0 &&
        errno == EINVAL) {
      // Before Linux 5.14: one write per page does the same. (Any other
      // error, ENOMEM under a memory limit say: the pages come as used.)
      auto* bytes = static_cast<volatile char*>(p);
      for (size_t i = 0; i < buckets_bytes_; i += 4096) bytes[i] = 0;
    }
  }
}

FenceTable::~FenceTable() {
  if (buckets_ != nullptr) munmap(buckets_, buckets_bytes_);
}

uint64_t FenceTable::Hash(std::string_view domain) {
  // std::hash's low and high bits are not independent enough for both the
  // stripe (low bits) and the bucket (high bits): mix with murmur3's
  // finalizer.
  uint64_t h = std::hash<std::string_view>()(domain);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

void FenceTable::LockAll() NO_THREAD_SAFETY_ANALYSIS {
  for (size_t i = 0; i <= stripe_mask_; ++i) stripes_[i].mu.Lock();
}

void FenceTable::UnlockAll() NO_THREAD_SAFETY_ANALYSIS {
  for (size_t i = stripe_mask_ + 1; i-- > 0;) stripes_[i].mu.Unlock();
}

FenceTable::Bucket* FenceTable::BucketOf(uint64_t hash) const {
  // The bucket's stripe is the hash's stripe, so its lock guards it; the
  // bucket within the stripe comes from other hash bits.
  const size_t stripe = StripeOf(hash);
  const size_t b = (hash >> 32) % buckets_per_stripe_;
  return buckets_ + stripe * buckets_per_stripe_ + b;
}

void FenceTable::Prefetch(uint64_t hash) const {
  if (buckets_ != nullptr) __builtin_prefetch(BucketOf(hash), 1, 3);
}

// The domain bytes of an entry, addressed through the bucket's storage: a
// long entry's bytes run on into the second half of its bucket.
char* FenceTable::DomainBytes(Entry* e) {
  return reinterpret_cast<char*>(e) + offsetof(Entry, domain);
}

FenceTable::Entry* FenceTable::Find(Bucket* b, std::string_view domain) {
  const auto tag = static_cast<uint8_t>(domain.size() + 1);
  Entry& first = b->half[0];
  if (domain.size() > kMaxShortDomain) {
    // A long entry starts at half[0] and runs into half[1].
    if (TagOf(first) == tag &&
        std::memcmp(DomainBytes(&first), domain.data(), domain.size()) == 0) {
      return &first;
    }
    return nullptr;
  }
  if (TagOf(first) >= kLongTag) return nullptr;  // the bucket holds a long one
  for (Entry& e : b->half) {
    if (TagOf(e) == tag &&
        std::memcmp(DomainBytes(&e), domain.data(), domain.size()) == 0) {
      return &e;
    }
  }
  return nullptr;
}

bool FenceTable::Lookup(uint64_t hash, std::string_view domain, Token* max) {
  if (buckets_ == nullptr || domain.size() > kMaxCachedDomain) return false;
  const Entry* e = Find(BucketOf(hash), domain);
  if (e == nullptr) return false;
  *max = e->max;
  return true;
}

// (Under the stripe's lock, which the analysis cannot name here.)
void FenceTable::Forget(Stripe* stripe, Bucket* b,
                        Token max) NO_THREAD_SAFETY_ANALYSIS {
  if (max > stripe->miss_bound) stripe->miss_bound = max;
  if (b != nullptr) b->half[0].tag |= kEvictedBit;
}

Token FenceTable::MissBound(uint64_t hash) const NO_THREAD_SAFETY_ANALYSIS {
  const Stripe& stripe = stripes_[StripeOf(hash)];
  if (buckets_ == nullptr) return stripe.miss_bound;
  const Bucket* b = BucketOf(hash);
  return (b->half[0].tag & kEvictedBit) ? stripe.miss_bound : open_bound_;
}

void FenceTable::Insert(uint64_t hash, std::string_view domain,
                        Token max) NO_THREAD_SAFETY_ANALYSIS {
  Stripe& stripe = stripes_[StripeOf(hash)];
  if (buckets_ == nullptr) {
    Forget(&stripe, nullptr, max);
    return;
  }
  // Read first: after the first insert the flag's line stays shared.
  if (!dirty_.load(std::memory_order_relaxed)) {
    dirty_.store(true, std::memory_order_relaxed);
  }
  Bucket* b = BucketOf(hash);
  if (domain.size() > kMaxCachedDomain) {
    Forget(&stripe, b, max);
    return;
  }
  Entry* e = Find(b, domain);
  if (e != nullptr) {
    e->max = max;
    return;
  }
  Entry* h0 = &b->half[0];
  Entry* h1 = &b->half[1];
  const bool long_resident = TagOf(*h0) >= kLongTag;
  const size_t in_use = long_resident ? sizeof(Bucket)
                                      : (TagOf(*h0) ? sizeof(Entry) : 0) +
                                            (TagOf(*h1) ? sizeof(Entry) : 0);
  if (domain.size() > kMaxShortDomain || long_resident) {
    // A long entry takes the whole bucket (its bytes run on into half[1]);
    // a short one replacing a long one leaves half[1] free.
    if (long_resident) {
      Forget(&stripe, b, h0->max);
    } else {
      if (TagOf(*h0) != 0) Forget(&stripe, b, h0->max);
      if (TagOf(*h1) != 0) Forget(&stripe, b, h1->max);
    }
    const uint8_t mark = h0->tag & kEvictedBit;
    std::memset(static_cast<void*>(b), 0, sizeof(Bucket));
    h0->tag = mark;
    e = h0;
    AddUsed(&stripe,
            (domain.size() > kMaxShortDomain ? sizeof(Bucket) : sizeof(Entry)) -
                in_use);
  } else {
    if (TagOf(*h0) == 0) {
      e = h0;
    } else if (TagOf(*h1) == 0) {
      e = h1;
    } else {
      e = (stripe.clock++ & 1) ? h1 : h0;  // evict one of the two
      Forget(&stripe, b, e->max);
      AddUsed(&stripe, 0 - sizeof(Entry));
    }
    AddUsed(&stripe, sizeof(Entry));
  }
  const uint8_t keep = e == h0 ? (h0->tag & kEvictedBit) : 0;
  e->tag = static_cast<uint8_t>(domain.size() + 1) | keep;
  std::memcpy(DomainBytes(e), domain.data(), domain.size());
  e->max = max;
}

size_t FenceTable::ApproximateMemoryUsage() {
  size_t used = 0;
  for (size_t i = 0; i <= stripe_mask_; ++i) {
    used += stripes_[i].used_bytes.load(std::memory_order_relaxed);
  }
  return used;
}

size_t FenceTable::capacity_bytes() const { return buckets_bytes_; }

// The stripe is chosen at run time: callers hold its lock (REQUIRES above),
// which the analysis cannot name.
Token FenceTable::StripeHwm(size_t stripe) const NO_THREAD_SAFETY_ANALYSIS {
  return stripes_[stripe].hwm;
}

void FenceTable::SetStripeHwm(size_t stripe,
                              Token hwm) NO_THREAD_SAFETY_ANALYSIS {
  if (hwm > stripes_[stripe].hwm) stripes_[stripe].hwm = hwm;
}

void FenceTable::Reset(Token hwm) NO_THREAD_SAFETY_ANALYSIS {
  if (buckets_ != nullptr) {
    // Anonymous private pages read as zeros again once dropped: an empty
    // cache, without touching (and allocating) every page. Prefaulted pages
    // stay: zeroed in place (64 MiB in milliseconds once resident).
    if (prefault_) {
      if (dirty_.exchange(false, std::memory_order_relaxed)) {
        std::memset(static_cast<void*>(buckets_), 0, buckets_bytes_);
      }
    } else if (madvise(buckets_, buckets_bytes_, MADV_DONTNEED) != 0) {
      std::memset(static_cast<void*>(buckets_), 0, buckets_bytes_);
    }
  }
  for (size_t i = 0; i <= stripe_mask_; ++i) {
    stripes_[i].used_bytes.store(0, std::memory_order_relaxed);
    stripes_[i].hwm = hwm;
    stripes_[i].miss_bound = hwm;
  }
  open_bound_ = hwm;  // the buckets' evicted bits were dropped with them
}

void FenceTable::InitHwm(Token hwm) {
  for (size_t i = 0; i <= stripe_mask_; ++i) {
    MutexLock lock(&stripes_[i].mu);
    stripes_[i].hwm = hwm;
    stripes_[i].miss_bound = hwm;
  }
  open_bound_ = hwm;  // (before any writer runs)
}

}  // namespace fencedkv
