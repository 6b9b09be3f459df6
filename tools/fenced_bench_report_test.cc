// Copyright (c) fencedkv authors.
//
// Golden tests of fenced_bench's output format: result lines must parse with
// the exact awk field positions RocksDB's tools/benchmark.sh uses ($3
// micros/op, $5 ops/sec, $11 MB/s, V2 detected by NF >= 10 && $8 ==
// "seconds"), so the format cannot drift unnoticed.

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "fenced_bench_tool.h"

namespace fencedkv {
namespace bench {

namespace {

// Runs `line` through awk the way benchmark.sh does.
std::string Awk(const std::string& line) {
  const std::string cmd =
      "printf '%s' '" + line +
      "' | awk '{ if (NF >= 10 && $8 == \"seconds\") print $3 \"|\" $5 \"|\" "
      "$11; else print \"not V2\" }'";
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(nullptr, p);
  char buf[256] = {0};
  std::string out;
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  pclose(p);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

TEST(FencedBenchReportTest, MatchesDbBenchV2Line) {
  // db_bench 7.8.3's own line for comparison:
  // "fillseq      :       8.663 micros/op 226519 ops/sec 0.177 seconds 40000
  //  operations;   25.1 MB/s"
  const std::string line = FormatResultLine("fillseq", 8.663, 226519, 0.177,
                                            40000, 26312704, "");
  EXPECT_EQ(
      "fillseq      :       8.663 micros/op 226519 ops/sec 0.177 seconds "
      "40000 operations;  141.8 MB/s\n",
      line);
  EXPECT_EQ("8.663|226519|141.8", Awk(line));
}

TEST(FencedBenchReportTest, MessageStaysAfterMBs) {
  const std::string line = FormatResultLine(
      "stalewrite", 1.5, 650000, 1.538, 1000000, 133 * 1000000ull,
      "(accepted:0 rejected:1000000)");
  EXPECT_EQ("1.500|650000|82.5", Awk(line));
  EXPECT_NE(std::string::npos, line.find("MB/s (accepted:0 rejected:1000000)\n"));
  const std::string read = FormatResultLine("readrandom", 0.907, 1067235,
                                            0.005, 5000, 393216,
                                            "(3180 of 5000 found)");
  EXPECT_EQ("0.907|1067235|75.0", Awk(read));
}

TEST(FencedBenchReportTest, LongNamesKeepFieldPositions) {
  const std::string line = FormatResultLine("readwhilewriting", 3.25, 307692,
                                            3.25, 1000000, 1, "");
  EXPECT_EQ("3.250|307692|0.0", Awk(line));
}

TEST(FencedBenchReportTest, ParseBenchmarkName) {
  std::string name;
  int repeat = 0, warmup = 0;
  ASSERT_TRUE(ParseBenchmarkName("fillrandom", &name, &repeat, &warmup));
  EXPECT_EQ("fillrandom", name);
  EXPECT_EQ(1, repeat);
  EXPECT_EQ(0, warmup);
  ASSERT_TRUE(ParseBenchmarkName("overwrite[X3-W1]", &name, &repeat, &warmup));
  EXPECT_EQ("overwrite", name);
  EXPECT_EQ(3, repeat);
  EXPECT_EQ(1, warmup);
  ASSERT_TRUE(ParseBenchmarkName("readrandom[W2]", &name, &repeat, &warmup));
  EXPECT_EQ(1, repeat);
  EXPECT_EQ(2, warmup);
  for (const char* bad : {"", "x[", "x[X]", "x[X0]", "x[Y3]", "[X3]", "x[X3]y",
                          "x]"}) {
    EXPECT_FALSE(ParseBenchmarkName(bad, &name, &repeat, &warmup)) << bad;
  }
}

}  // namespace bench
}  // namespace fencedkv
