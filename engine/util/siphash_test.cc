// Copyright (c) fencedkv authors.

#include "util/siphash.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace fencedkv {
namespace {

// The reference vectors of SipHash-2-4 (the paper's appendix, and the
// reference implementation's vectors.h): key 00 01 .. 0f, message
// 00 01 .. (n-1); those of n = 0, 1, 7, 8, 9 and 15 (the paper's example).
TEST(SipHashTest, MatchesTheReferenceVectors) {
  SipKey key;
  unsigned char k[16];
  for (int i = 0; i < 16; ++i) k[i] = static_cast<unsigned char>(i);
  for (int i = 7; i >= 0; --i) key.k0 = (key.k0 << 8) | k[i];
  for (int i = 15; i >= 8; --i) key.k1 = (key.k1 << 8) | k[i];
  unsigned char msg[64];
  for (int i = 0; i < 64; ++i) msg[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(0x726fdb47dd0e0e31ULL, SipHash24(key, msg, 0));
  EXPECT_EQ(0x74f839c593dc67fdULL, SipHash24(key, msg, 1));
  EXPECT_EQ(0xab0200f58b01d137ULL, SipHash24(key, msg, 7));
  EXPECT_EQ(0x93f5f5799a932462ULL, SipHash24(key, msg, 8));
  EXPECT_EQ(0x9e0082df0ba9e4b0ULL, SipHash24(key, msg, 9));
  EXPECT_EQ(0xa129ca6149be45e5ULL, SipHash24(key, msg, 15));
}

TEST(SipHashTest, TheKeyChangesTheHash) {
  const SipKey& process = ProcessSipKey();
  EXPECT_EQ(&process, &ProcessSipKey());  // one per process
  EXPECT_FALSE(process.k0 == 0 && process.k1 == 0);
  SipKey other = process;
  other.k1 ^= 1;
  const char data[] = "key:000000123456";
  EXPECT_NE(SipHash13(process, data, 16), SipHash13(other, data, 16));
  // Distinct short inputs, distinct hashes (a 64-bit hash: no collision
  // among a few thousand).
  std::set<uint64_t> seen;
  for (int i = 0; i < 5000; ++i) {
    const std::string s = "key:" + std::to_string(i);
    seen.insert(SipHash13(process, s.data(), s.size()));
  }
  EXPECT_EQ(5000u, seen.size());
}

}  // namespace
}  // namespace fencedkv
