// Copyright (c) fencedkv authors.
//
// The fence cache is exact: it answers only for domains it holds, with the
// value last recorded, for short (two per bucket) and long (one per bucket)
// domains alike, and stays within its budget.

#include "db/fence_table.h"

#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace fencedkv {

namespace {
Token LookupOr(FenceTable& t, const std::string& d, Token missing) {
  const uint64_t h = FenceTable::Hash(d);
  MutexLock l(&t.mutex(t.StripeOf(h)));
  Token m = 0;
  return t.Lookup(h, d, &m) ? m : missing;
}
void Put(FenceTable& t, const std::string& d, Token max) {
  const uint64_t h = FenceTable::Hash(d);
  MutexLock l(&t.mutex(t.StripeOf(h)));
  t.Insert(h, d, max);
}
}  // namespace

TEST(FenceTableTest, HitsAreExactAndMissesAreMisses) {
  FenceTable t(4, 64 << 10);  // small: forces evictions
  std::map<std::string, Token> truth;
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const size_t len = rng() % (FenceTable::kMaxCachedDomain + 1);
    std::string d(len, 'a');
    for (char& c : d) c = static_cast<char>('a' + rng() % 3);  // many near-twins
    const Token max = rng() % 1000 + 1;
    Put(t, d, max);
    truth[d] = max;
    // Whatever the cache says, it is the last value recorded for d.
    const std::string probe = truth.begin()->first;
    const Token got = LookupOr(t, probe, 0);
    if (got != 0) {
      EXPECT_EQ(truth[probe], got) << probe;
    }
  }
  size_t hits = 0;
  for (const auto& [d, max] : truth) {
    const Token got = LookupOr(t, d, 0);
    if (got != 0) {
      ++hits;
      EXPECT_EQ(max, got) << "domain of " << d.size() << " bytes";
    }
  }
  EXPECT_GT(hits, 0u);
  EXPECT_LE(t.ApproximateMemoryUsage(), t.capacity_bytes());
}

TEST(FenceTableTest, LongAndShortDomainsShareBuckets) {
  FenceTable t(1, 64);  // one bucket: every domain collides
  const std::string shorter = "short";
  const std::string longer(40, 'L');
  Put(t, shorter, 5);
  Put(t, "other", 6);
  EXPECT_EQ(5u, LookupOr(t, shorter, 0));
  EXPECT_EQ(6u, LookupOr(t, "other", 0));
  EXPECT_EQ(128u / 2, t.ApproximateMemoryUsage());
  Put(t, longer, 7);  // takes the whole bucket
  EXPECT_EQ(7u, LookupOr(t, longer, 0));
  EXPECT_EQ(0u, LookupOr(t, shorter, 0));
  EXPECT_EQ(0u, LookupOr(t, "other", 0));
  EXPECT_EQ(64u, t.ApproximateMemoryUsage());
  Put(t, shorter, 8);  // replaces the long one
  EXPECT_EQ(8u, LookupOr(t, shorter, 0));
  EXPECT_EQ(0u, LookupOr(t, longer, 0));
  EXPECT_EQ(32u, t.ApproximateMemoryUsage());
  // A domain sharing the long one's first 23 bytes is a different domain.
  Put(t, longer, 9);
  EXPECT_EQ(0u, LookupOr(t, std::string(41, 'L'), 0));
  EXPECT_EQ(0u, LookupOr(t, std::string(39, 'L'), 0));
  // Too long to cache: never a hit.
  Put(t, std::string(FenceTable::kMaxCachedDomain + 1, 'x'), 3);
  EXPECT_EQ(0u, LookupOr(t, std::string(FenceTable::kMaxCachedDomain + 1, 'x'), 0));
  EXPECT_EQ(9u, LookupOr(t, longer, 0));
}

TEST(FenceTableTest, EvictionKeepsTheAccountingExact) {
  FenceTable t(1, 64);  // one bucket: two short entries or one long one
  Put(t, "a", 1);
  Put(t, "b", 2);
  EXPECT_EQ(64u, t.ApproximateMemoryUsage());
  Put(t, "b", 7);  // its own entry: replaced in place
  EXPECT_EQ(7u, LookupOr(t, "b", 0));
  EXPECT_EQ(64u, t.ApproximateMemoryUsage());
  Put(t, "c", 3);  // bucket full: evicts exactly one of "a" and "b"
  EXPECT_EQ(3u, LookupOr(t, "c", 0));
  const bool a_left = LookupOr(t, "a", 0) == 1;
  const bool b_left = LookupOr(t, "b", 0) == 7;
  EXPECT_NE(a_left, b_left);
  EXPECT_EQ(64u, t.ApproximateMemoryUsage());
  // A long entry evicts both short ones; a short one then frees half[1].
  const std::string long_domain(40, 'L');
  Put(t, long_domain, 9);
  EXPECT_EQ(9u, LookupOr(t, long_domain, 0));
  EXPECT_EQ(0u, LookupOr(t, "c", 0));
  EXPECT_EQ(64u, t.ApproximateMemoryUsage());
  Put(t, "d", 4);
  EXPECT_EQ(0u, LookupOr(t, long_domain, 0));
  EXPECT_EQ(4u, LookupOr(t, "d", 0));
  EXPECT_EQ(32u, t.ApproximateMemoryUsage());
}

TEST(FenceTableTest, ZeroBudgetMeansNoCache) {
  FenceTable t(1024, 0);
  Put(t, "a", 1);
  EXPECT_EQ(0u, LookupOr(t, "a", 0));
  EXPECT_EQ(0u, t.capacity_bytes());
}

}  // namespace fencedkv
