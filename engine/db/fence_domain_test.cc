// Copyright (c) fencedkv authors.

#include "fencedkv/fence_domain.h"

#include <gtest/gtest.h>

namespace fencedkv {

namespace {
std::string DomainOf(const char* spec_text, std::string_view key) {
  FenceDomainSpec spec;
  Status s = FenceDomainSpec::Parse(spec_text, &spec);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::string(spec.DomainOf(key));
}
}  // namespace

TEST(FenceDomainTest, Key) {
  EXPECT_EQ("user:{a}:x", DomainOf("key", "user:{a}:x"));
}

TEST(FenceDomainTest, Prefix) {
  EXPECT_EQ("user", DomainOf("prefix:4", "user:1"));
  EXPECT_EQ("us", DomainOf("prefix:4", "us"));  // shorter: whole key
  EXPECT_EQ("u", DomainOf("prefix:1", "user"));
}

TEST(FenceDomainTest, Delimiter) {
  EXPECT_EQ("user", DomainOf("delimiter::", "user:1:name"));
  EXPECT_EQ("plain", DomainOf("delimiter::", "plain"));
  EXPECT_EQ("", DomainOf("delimiter::", ":x"));
  EXPECT_EQ("a", DomainOf("delimiter:/", "a/b"));
}

TEST(FenceDomainTest, HashtagFollowsRedisCluster) {
  EXPECT_EQ("shard7", DomainOf("hashtag", "user:{shard7}:name"));
  EXPECT_EQ("a", DomainOf("hashtag", "{a}{b}"));
  EXPECT_EQ("foo{}{bar}", DomainOf("hashtag", "foo{}{bar}"));  // empty tag
  EXPECT_EQ("{bar", DomainOf("hashtag", "foo{{bar}}zap"));
  EXPECT_EQ("foo{bar", DomainOf("hashtag", "foo{bar"));  // unclosed
  EXPECT_EQ("plain", DomainOf("hashtag", "plain"));
}

TEST(FenceDomainTest, ParseRefusesBadSpecsAndRoundTrips) {
  FenceDomainSpec spec;
  for (const char* bad :
       {"", "keys", "prefix:", "prefix:0", "prefix:-1", "prefix:x",
        "prefix:65537", "delimiter:", "delimiter:ab", "hash", "KEY"}) {
    Status s = FenceDomainSpec::Parse(bad, &spec);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
  }
  EXPECT_TRUE(spec.is_per_key());  // unchanged by the failures
  for (const char* good : {"key", "prefix:1", "prefix:65536",
                           "delimiter::", "delimiter:/", "hashtag"}) {
    ASSERT_TRUE(FenceDomainSpec::Parse(good, &spec).ok()) << good;
    EXPECT_EQ(good, spec.ToString());
  }
  FenceDomainSpec a, b;
  ASSERT_TRUE(FenceDomainSpec::Parse("prefix:3", &a).ok());
  ASSERT_TRUE(FenceDomainSpec::Parse("prefix:4", &b).ok());
  EXPECT_NE(a, b);
}

}  // namespace fencedkv
