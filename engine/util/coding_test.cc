// Copyright (c) fencedkv authors.

#include "util/coding.h"

#include <gtest/gtest.h>

namespace fencedkv {

TEST(CodingTest, Fixed64RoundTripAndLittleEndian) {
  for (uint64_t v :
       {0ull, 1ull, 255ull, 256ull, 0x0102030405060708ull, ~0ull}) {
    std::string s;
    PutFixed64(&s, v);
    ASSERT_EQ(8u, s.size());
    EXPECT_EQ(v, DecodeFixed64(s.data()));
    std::string_view in(s);
    uint64_t out = 0;
    ASSERT_TRUE(GetFixed64(&in, &out));
    EXPECT_EQ(v, out);
    EXPECT_TRUE(in.empty());
  }
  std::string s;
  PutFixed64(&s, 0x0102030405060708ull);
  EXPECT_EQ(std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8), s);
}

TEST(CodingTest, GetFixed64RefusesShortInput) {
  std::string_view in("1234567", 7);
  uint64_t out = 42;
  EXPECT_FALSE(GetFixed64(&in, &out));
  EXPECT_EQ(42u, out);
  EXPECT_EQ(7u, in.size());
}

TEST(CodingTest, Fixed32RoundTrip) {
  char buf[4];
  for (uint32_t v : {0u, 1u, 0xdeadbeefu, ~0u}) {
    EncodeFixed32(buf, v);
    EXPECT_EQ(v, DecodeFixed32(buf));
  }
}

}  // namespace fencedkv
