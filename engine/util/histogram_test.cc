// Copyright (c) fencedkv authors.

#include "util/histogram.h"

#include <gtest/gtest.h>

namespace fencedkv {

TEST(HistogramTest, BucketsMatchRocksDB) {
  const auto& b = Histogram::BucketLimits();
  const std::vector<uint64_t> head = {
      1,   2,   3,   4,   6,   10,  15,   22,   34,   51,   76,
      110, 170, 250, 380, 580, 870, 1300, 1900, 2900, 4400, 6600};
  ASSERT_GE(b.size(), head.size());
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(head[i], b[i]) << i;
}

TEST(HistogramTest, StatsAndLayout) {
  Histogram h;
  for (int i = 0; i < 90; ++i) h.Add(1);
  for (int i = 0; i < 10; ++i) h.Add(5);
  EXPECT_EQ(100u, h.num());
  EXPECT_EQ(1u, h.min());
  EXPECT_EQ(5u, h.max());
  EXPECT_DOUBLE_EQ(1.4, h.Average());
  EXPECT_DOUBLE_EQ(1.2, h.StandardDeviation());
  const std::string s = h.ToString();
  EXPECT_EQ(0u, s.find("Count: 100 Average: 1.4000  StdDev: 1.20\n"
                       "Min: 1  Median: "));
  EXPECT_NE(std::string::npos,
            s.find("[       0,       1 ]       90  90.000%  90.000% "
                   "##################\n"));
  EXPECT_NE(std::string::npos,
            s.find("(       4,       6 ]       10  10.000% 100.000% ##\n"));
  Histogram other;
  other.Add(1000);
  h.Merge(other);
  EXPECT_EQ(101u, h.num());
  EXPECT_EQ(1000u, h.max());
}

}  // namespace fencedkv
