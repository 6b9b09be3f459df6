// Copyright (c) fencedkv authors.

#include "util/siphash.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include <sys/random.h>

namespace fencedkv {
namespace {

inline uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct State {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
};

// Little-endian, as the specification reads its words.
inline uint64_t Load64(const unsigned char* p) {
  uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | p[i];
  return w;
}

}  // namespace

template <int C, int D>
uint64_t SipHash(const SipKey& key, const void* data, size_t n) {
  State s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f6dULL,
          key.k0 ^ 0x6c7967656e657261ULL, key.k1 ^ 0x7465646279746573ULL};
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) {
    const uint64_t m = Load64(p + i);
    s.v3 ^= m;
    for (int r = 0; r < C; ++r) s.Round();
    s.v0 ^= m;
  }
  uint64_t last = static_cast<uint64_t>(n & 0xff) << 56;
  for (size_t i = whole; i < n; ++i) {
    last |= static_cast<uint64_t>(p[i]) << (8 * (i - whole));
  }
  s.v3 ^= last;
  for (int r = 0; r < C; ++r) s.Round();
  s.v0 ^= last;
  s.v2 ^= 0xff;
  for (int r = 0; r < D; ++r) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

template uint64_t SipHash<1, 3>(const SipKey&, const void*, size_t);
template uint64_t SipHash<2, 4>(const SipKey&, const void*, size_t);

const SipKey& ProcessSipKey() {
  static const SipKey key = [] {
    SipKey k;
    unsigned char bytes[16];
    size_t got = 0;
    while (got < sizeof(bytes)) {
      const ssize_t r = getrandom(bytes + got, sizeof(bytes) - got, 0);
      if (r > 0) {
        got += static_cast<size_t>(r);
      } else if (r < 0 && errno != EINTR) {
        break;  // (no getrandom: the fallback below)
      }
    }
    if (got < sizeof(bytes)) {
      std::random_device rd;
      std::seed_seq seq{
          rd(), rd(), rd(), rd(),
          static_cast<unsigned>(
              std::chrono::steady_clock::now().time_since_epoch().count())};
      std::mt19937_64 gen(seq);
      k.k0 = gen();
      k.k1 = gen();
      return k;
    }
    std::memcpy(&k.k0, bytes, 8);
    std::memcpy(&k.k1, bytes + 8, 8);
    return k;
  }();
  return key;
}

}  // namespace fencedkv
