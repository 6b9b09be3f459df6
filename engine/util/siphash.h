// Copyright (c) fencedkv authors.
//
// SipHash (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012):
// a keyed 64-bit hash. With a secret random key, nobody outside the process
// can choose inputs that collide, so a hash table indexed by it cannot be
// flooded by a client picking keys (a fixed hash, MurmurHash's or
// std::hash's, can: colliding keys are found offline in minutes, and
// MurmurHash2/3 have collisions whatever their seed). The same defence as
// Redis's dict (SipHash-1-2) and Rust's HashMap (SipHash-1-3, which the
// memtable uses). SipHash-2-4 is the paper's reference; its test vectors
// check this code (util/siphash_test.cc).

#ifndef FENCEDKV_UTIL_SIPHASH_H_
#define FENCEDKV_UTIL_SIPHASH_H_

#include <cstddef>
#include <cstdint>

namespace fencedkv {

struct SipKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

// SipHash-c-d of data[0, n) under `key`: c compression rounds per 8-byte
// word, d finalization rounds.
template <int C, int D>
uint64_t SipHash(const SipKey& key, const void* data, size_t n);

inline uint64_t SipHash13(const SipKey& key, const void* data, size_t n) {
  return SipHash<1, 3>(key, data, n);
}
inline uint64_t SipHash24(const SipKey& key, const void* data, size_t n) {
  return SipHash<2, 4>(key, data, n);
}

// A key from the operating system's random source (getrandom), made once
// per process.
const SipKey& ProcessSipKey();

}  // namespace fencedkv

#endif  // FENCEDKV_UTIL_SIPHASH_H_
