// Copyright (c) fencedkv authors.
//
// The per-command counters (command_stats.h) and the slow log (slowlog.h):
// buckets, percentiles, error codes, concurrent recording, and the slow
// log's cuts and bounds.

#include "command_stats.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "slowlog.h"

namespace fencedkv {
namespace server {

TEST(CommandStatsTest, BucketsCoverEveryValueWithinAnEighth) {
  size_t last = 0;
  for (uint64_t v : {0ull, 1ull, 15ull, 16ull, 17ull, 100ull, 1000ull,
                     123456ull, 4000000000ull}) {
    const size_t b = CommandStats::Bucket(v);
    ASSERT_LT(b, CommandStats::kBuckets);
    EXPECT_GE(b, last) << v;  // monotonic
    last = b;
    const uint64_t upper = CommandStats::BucketUpperBound(b);
    EXPECT_GT(upper, v) << v;
    // The bucket below ends at or before v.
    if (b > 0) EXPECT_LE(CommandStats::BucketUpperBound(b - 1), v) << v;
    if (v >= 16) {
      EXPECT_LE(static_cast<double>(upper - v), v / 8.0 + 1) << v;
    }
  }
  // Every value maps to a bucket whose bounds hold it.
  for (uint64_t v = 0; v < 70000; v += 7) {
    const size_t b = CommandStats::Bucket(v);
    ASSERT_GT(CommandStats::BucketUpperBound(b), v);
    if (b > 0) ASSERT_LE(CommandStats::BucketUpperBound(b - 1), v);
  }
  EXPECT_EQ(CommandStats::kBuckets - 1, CommandStats::Bucket(~0ull));
}

TEST(CommandStatsTest, CountsAndPercentiles) {
  CommandStats stats(3);
  for (int i = 0; i < 98; ++i) stats.Record(1, 10, false);
  stats.Record(1, 1000, true);
  stats.Record(1, 100000, false);
  stats.Reject(1);
  stats.Reject(2);
  const CommandStats::Totals t = stats.Get(1, true);
  EXPECT_EQ(100u, t.calls);
  EXPECT_EQ(98u * 10 + 1000 + 100000, t.usec);
  EXPECT_EQ(1u, t.rejected);
  EXPECT_EQ(1u, t.failed);
  EXPECT_EQ(10.0, CommandStats::Percentile(t.histogram, 0.50));  // exact
  EXPECT_EQ(10.0, CommandStats::Percentile(t.histogram, 0.98));
  const double p99 = CommandStats::Percentile(t.histogram, 0.99);
  EXPECT_GE(p99, 1000);
  EXPECT_LE(p99, 1000 * 1.125 + 1);
  const double p999 = CommandStats::Percentile(t.histogram, 0.999);
  EXPECT_GE(p999, 100000);
  EXPECT_LE(p999, 100000 * 1.125 + 1);
  EXPECT_EQ(0u, stats.Get(0, false).calls);
  EXPECT_EQ(1u, stats.Get(2, false).rejected);
  EXPECT_EQ(0.0, CommandStats::Percentile(stats.Get(0, true).histogram, 0.5));
  stats.Record(7, 1, false);  // out of range: ignored
  stats.Reset();
  EXPECT_EQ(0u, stats.Get(1, false).calls);
  EXPECT_EQ(0u, stats.Get(2, false).rejected);
}

TEST(CommandStatsTest, ErrorCodes) {
  using CS = CommandStats;
  EXPECT_EQ(CS::kErrStale, CS::ClassifyError("-STALE token 7 < max 8\r\n"));
  EXPECT_EQ(CS::kErrStale, CS::ClassifyError("STALE token"));
  EXPECT_EQ(CS::kErrErr, CS::ClassifyError("-ERR syntax error\r\n"));
  EXPECT_EQ(CS::kErrTokenSkew, CS::ClassifyError("-TOKENSKEW token ..."));
  EXPECT_EQ(CS::kErrNoPerm, CS::ClassifyError("-NOPERM this user"));
  EXPECT_EQ(CS::kErrNoAuth, CS::ClassifyError("-NOAUTH Authentication"));
  EXPECT_EQ(CS::kOtherError, CS::ClassifyError("-WHATEVER x"));
  EXPECT_STREQ("STALE", CS::ErrorCodeName(CS::kErrStale));
  EXPECT_STREQ("OTHER", CS::ErrorCodeName(CS::kOtherError));
  CommandStats stats(1);
  stats.NoteError(CS::kErrStale, true);
  stats.NoteError(CS::kErrStale, false);
  EXPECT_EQ(2u, stats.Errors(CS::kErrStale));
  EXPECT_EQ(1u, stats.WriteErrors(CS::kErrStale));
  EXPECT_EQ(0u, stats.Errors(CS::kErrErr));
}

TEST(CommandStatsTest, ThreadsRecordWithoutLosingCounts) {
  CommandStats stats(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&stats] {
      for (int i = 0; i < 10000; ++i) stats.Record(1, 3, i % 10 == 0);
    });
  }
  for (auto& t : threads) t.join();
  const CommandStats::Totals total = stats.Get(1, true);
  EXPECT_EQ(40000u, total.calls);
  EXPECT_EQ(120000u, total.usec);
  EXPECT_EQ(4000u, total.failed);
  EXPECT_EQ(40000u, total.histogram[3]);
}

TEST(SlowLogTest, ThresholdAndLength) {
  SlowLog log(100, 2);
  EXPECT_FALSE(log.ShouldLog(99));
  EXPECT_TRUE(log.ShouldLog(100));
  std::vector<std::string> words = {"set", "k", "v"};
  auto arg = [&](size_t i) -> std::string_view { return words[i]; };
  log.Add(150, 3, arg, "127.0.0.1:5000", "app");
  log.Add(160, 3, arg, "127.0.0.1:5000", "app");
  log.Add(170, 3, arg, "127.0.0.1:5001", "");
  EXPECT_EQ(2u, log.Len());  // max_len
  std::string out;
  log.Reply(1, &out);  // the newest: id 2
  EXPECT_EQ(0u, out.find("*1\r\n*6\r\n:2\r\n:"));
  EXPECT_NE(std::string::npos,
            out.find(":170\r\n*3\r\n$3\r\nset\r\n$1\r\nk\r\n$1\r\nv\r\n"
                     "$14\r\n127.0.0.1:5001\r\n$0\r\n\r\n"));
  log.Reset();
  EXPECT_EQ(0u, log.Len());
  log.Configure(-1, 2);
  EXPECT_FALSE(log.ShouldLog(1000000));
  log.Configure(0, 2);
  EXPECT_TRUE(log.ShouldLog(0));
}

TEST(SlowLogTest, ArgumentsAreCutAsRedisCutsThem) {
  SlowLog log(0, 10);
  std::vector<std::string> words(40, "x");
  words[1] = std::string(200, 'a');
  log.Add(
      5, words.size(), [&](size_t i) -> std::string_view { return words[i]; },
      "addr", std::string(300, 'n'));
  std::string out;
  log.Reply(-1, &out);
  // 32 arguments, the last counting the 9 left out.
  EXPECT_NE(std::string::npos, out.find("*32\r\n"));
  EXPECT_NE(std::string::npos, out.find("... (9 more arguments)"));
  EXPECT_NE(std::string::npos,
            out.find(std::string(128, 'a') + "... (72 more bytes)"));
  EXPECT_NE(std::string::npos,
            out.find(std::string(128, 'n') + "... (172 more bytes)"));
  EXPECT_EQ(std::string::npos, out.find(std::string(129, 'a')));
}

}  // namespace server
}  // namespace fencedkv
