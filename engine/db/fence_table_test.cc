// Copyright (c) fencedkv authors.
//
// The fence cache is exact: it answers only for domains it holds, with the
// value last recorded, for short (two per bucket) and long (one per bucket)
// domains alike, and stays within its budget.

#include "db/fence_table.h"

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

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
// This process's resident memory, in bytes.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
Token MissBound(FenceTable& t, const std::string& d) {
  const uint64_t h = FenceTable::Hash(d);
  MutexLock l(&t.mutex(t.StripeOf(h)));
  return t.MissBound(h);
}
}  // namespace

// A cache the machine cannot map leaves the table without one, and says so
// through capacity_bytes() (the server warns: before, a --fence_cache_bytes of
// 1 TiB ran silently with no cache).
TEST(FenceTableTest, ACacheThatCannotBeMappedHasNoCapacity) {
  FenceTable big(4, size_t{1} << 50, /*prefault=*/false);  // 1 PiB
  EXPECT_EQ(0u, big.capacity_bytes());
  FenceTable small(4, 64 << 10, /*prefault=*/false);
  EXPECT_GT(small.capacity_bytes(), 0u);
  EXPECT_LE(small.capacity_bytes(), size_t{64} << 10);
}

TEST(FenceTableTest, HitsAreExactAndMissesAreMisses) {
  FenceTable t(4, 64 << 10);  // small: forces evictions
  std::map<std::string, Token> truth;
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const size_t len = rng() % (FenceTable::kMaxCachedDomain + 1);
    std::string d(len, 'a');
    for (char& c : d)
      c = static_cast<char>('a' + rng() % 3);  // many near-twins
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
  EXPECT_EQ(0u,
            LookupOr(t, std::string(FenceTable::kMaxCachedDomain + 1, 'x'), 0));
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
  // Read without the stripes' locks: a long write holds them all, and
  // INFO memory (on an io loop) waited for it.
  t.LockAll();
  size_t seen = 0;
  std::thread reader([&] { seen = t.ApproximateMemoryUsage(); });
  reader.join();
  t.UnlockAll();
  EXPECT_EQ(32u, seen);
}

// The miss bound: every domain the cache does not hold has its max at or
// below it (the write path then needs no read for a token that passes it).
// Checked against the truth after every insert, with many evictions, long
// and uncacheable domains, and a mark set at open.
TEST(FenceTableTest, EveryMissIsBoundedByTheMissBound) {
  for (const Token open_mark : {Token{0}, Token{500}}) {
    for (size_t budget : {size_t{0}, size_t{64}, size_t{64} << 10}) {
      SCOPED_TRACE("open mark " + std::to_string(open_mark) + ", budget " +
                   std::to_string(budget));
      FenceTable t(4, budget);
      t.InitHwm(open_mark);
      std::map<std::string, Token> truth;  // domains inserted since open
      std::mt19937 rng(7);
      for (int i = 0; i < 5000; ++i) {
        const size_t len = 1 + rng() % (FenceTable::kMaxCachedDomain + 8);
        std::string d(len, 'a');
        for (char& c : d) c = static_cast<char>('a' + rng() % 3);
        Token& max = truth[d];
        max += 1 + rng() % 7;  // a max only rises
        Put(t, d, max);
        if (i % 50 != 0) continue;
        for (const auto& [domain, m] : truth) {
          Token got = 0;
          const uint64_t h = FenceTable::Hash(domain);
          MutexLock l(&t.mutex(t.StripeOf(h)));
          if (t.Lookup(h, domain, &got)) {
            ASSERT_EQ(m, got) << domain;
          } else {
            ASSERT_LE(m, t.MissBound(h)) << domain;
          }
        }
      }
      // A domain never inserted (stored before open, or never) is bounded
      // by the mark at open.
      EXPECT_GE(MissBound(t, "never inserted"), open_mark);
    }
  }
}

// Without an eviction the bound stays at the mark at open, so in a fresh
// store a first write of any domain below the store's mark needs no read;
// an eviction raises it to what left.
TEST(FenceTableTest, TheMissBoundRisesOnlyWithWhatLeavesTheCache) {
  FenceTable t(1, 64);  // one bucket: two short entries or one long one
  Put(t, "a", 10);
  Put(t, "b", 20);
  EXPECT_EQ(0u, MissBound(t, "c"));
  Put(t, "b", 30);  // its own entry: nothing leaves
  EXPECT_EQ(0u, MissBound(t, "c"));
  Put(t, "c", 5);  // evicts "a" (10) or "b" (30)
  const Token bound = MissBound(t, "x");
  EXPECT_TRUE(bound == 10 || bound == 30) << bound;
  Put(t, std::string(40, 'L'), 7);  // a long one evicts both others
  EXPECT_EQ(30u, MissBound(t, "x"));
  // Too long to cache: its max raises the bound.
  Put(t, std::string(FenceTable::kMaxCachedDomain + 1, 'x'), 99);
  EXPECT_EQ(99u, MissBound(t, "x"));
  EXPECT_EQ(7u, LookupOr(t, std::string(40, 'L'), 0));  // still held
}

// Options::prefault_fence_cache: the buckets are resident from the start
// and stay so through a Reset, which still empties them; without it, memory
// is taken as writes touch it and a Reset gives it back.
TEST(FenceTableTest, PrefaultMakesTheBucketsResidentAndResetKeepsThem) {
  constexpr size_t kBytes = 32 << 20;
  const size_t base = ResidentBytes();
  {
    FenceTable lazy(4, kBytes, /*prefault=*/false);
    EXPECT_LT(ResidentBytes(), base + kBytes / 4);
  }
  const size_t before = ResidentBytes();
  FenceTable t(4, kBytes, /*prefault=*/true);
  const size_t resident = ResidentBytes();
  EXPECT_GE(resident, before + kBytes * 9 / 10)
      << "resident before " << before << ", after " << resident;
  for (int i = 0; i < 1000; ++i) Put(t, "d" + std::to_string(i), 7);
  ASSERT_EQ(7u, LookupOr(t, "d1", 0));
  t.Reset(3);
  EXPECT_EQ(0u, LookupOr(t, "d1", 0));  // emptied
  EXPECT_EQ(0u, t.ApproximateMemoryUsage());
  EXPECT_GE(ResidentBytes(), before + kBytes * 9 / 10);  // still resident
  Put(t, "d1", 9);
  EXPECT_EQ(9u, LookupOr(t, "d1", 0));
}

TEST(FenceTableTest, ZeroBudgetMeansNoCache) {
  FenceTable t(1024, 0);
  Put(t, "a", 1);
  EXPECT_EQ(0u, LookupOr(t, "a", 0));
  EXPECT_EQ(0u, t.capacity_bytes());
}

}  // namespace fencedkv
