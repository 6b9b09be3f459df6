// Copyright (c) fencedkv authors.
//
// Golden tests of fenced_bench's output format: result lines must parse with
// the exact awk field positions RocksDB's tools/benchmark.sh uses ($3
// micros/op, $5 ops/sec, $11 MB/s, V2 detected by NF >= 10 && $8 ==
// "seconds"), so the format cannot drift unnoticed.

#include <cstdio>
#include <cstdlib>
#include <ctime>
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
  const std::string line =
      FormatResultLine("fillseq", 8.663, 226519, 0.177, 40000, 26312704, "");
  EXPECT_EQ(
      "fillseq      :       8.663 micros/op 226519 ops/sec 0.177 seconds "
      "40000 operations;  141.8 MB/s\n",
      line);
  EXPECT_EQ("8.663|226519|141.8", Awk(line));
}

TEST(FencedBenchReportTest, MessageStaysAfterMBs) {
  const std::string line =
      FormatResultLine("stalewrite", 1.5, 650000, 1.538, 1000000,
                       133 * 1000000ull, "(accepted:0 rejected:1000000)");
  EXPECT_EQ("1.500|650000|82.5", Awk(line));
  EXPECT_NE(std::string::npos,
            line.find("MB/s (accepted:0 rejected:1000000)\n"));
  const std::string read =
      FormatResultLine("readrandom", 0.907, 1067235, 0.005, 5000, 393216,
                       "(3180 of 5000 found)");
  EXPECT_EQ("0.907|1067235|75.0", Awk(read));
}

TEST(FencedBenchReportTest, LongNamesKeepFieldPositions) {
  const std::string line =
      FormatResultLine("readwhilewriting", 3.25, 307692, 3.25, 1000000, 1, "");
  EXPECT_EQ("3.250|307692|0.0", Awk(line));
}

// The lines below are db_bench 7.8.3's own (Debian's /usr/bin/db_bench,
// --num=20000 --batch_size=4 --duration=2).
TEST(FencedBenchReportTest, NewBenchmarksMatchDbBenchLines) {
  // seekrandom (--seek_nexts=0: no bytes); its message ends with a newline,
  // so an empty line follows.
  EXPECT_EQ(
      "seekrandom   :       7.974 micros/op 125411 ops/sec 2.001 seconds "
      "250999 operations; (250887 of 250999 found)\n\n",
      FormatResultLine("seekrandom", 7.974, 125411, 2.001, 250999, 0,
                       "(250887 of 250999 found)\n"));
  const std::string multi =
      FormatResultLine("multireadrandom", 6.212, 160558, 2.005, 321996,
                       37422000, "(321885 of 321996 found)");
  EXPECT_EQ(
      "multireadrandom :       6.212 micros/op 160558 ops/sec 2.005 seconds "
      "321996 operations;   17.8 MB/s (321885 of 321996 found)\n",
      multi);
  EXPECT_EQ("6.212|160558|17.8", Awk(multi));
  const std::string batch =
      FormatResultLine("fillbatch", 2.333, 404424, 0.049, 20000, 2296705, "");
  EXPECT_EQ(
      "fillbatch    :       2.333 micros/op 404424 ops/sec 0.049 seconds "
      "20000 operations;   44.7 MB/s\n",
      batch);
  EXPECT_EQ("2.333|404424|44.7", Awk(batch));
  EXPECT_EQ("( reads:267300 writes:29699 total:20000 found:267300)",
            FormatReadWriteMessage(267300, 29699, 20000, 267300));
  EXPECT_EQ(
      "readrandomwriterandom :       6.793 micros/op 147203 ops/sec 2.018 "
      "seconds 296999 operations; ( reads:267300 writes:29699 total:20000 "
      "found:267300)\n",
      FormatResultLine("readrandomwriterandom", 6.793, 147203, 2.018, 296999, 0,
                       FormatReadWriteMessage(267300, 29699, 20000, 267300)));
}

TEST(FencedBenchReportTest, IntervalAndReportLinesMatchDbBench) {
  // --stats_interval_seconds, on stderr (local time; here UTC).
  setenv("TZ", "UTC", 1);
  tzset();
  EXPECT_EQ(
      "2026/12/01-03:14:11  ... thread 0: (95000,95000) ops and "
      "(94774.6,94774.6) ops/second in (1.002378,1.002378) seconds\n",
      FormatIntervalLine(1796094851, 0, 95000, 95000, 1.002378, 1.002378));
  EXPECT_EQ(
      "2026/12/01-03:14:13  ... thread 1: (100000,195000) ops and "
      "(99535.1,97062.0) ops/second in (1.004671,2.009025) seconds\n",
      FormatIntervalLine(1796094853, 1, 100000, 195000, 1.004671, 2.009025));
  // --report_file: the header, then secs_elapsed,interval_qps lines.
  EXPECT_STREQ("secs_elapsed,interval_qps", kReportHeader);
  EXPECT_EQ("1,133322\n", FormatReportLine(1, 133322));
  EXPECT_EQ("2,162955\n", FormatReportLine(2, 162955));
}

// The README's table of db_bench benchmarks, and fenced_bench's own.
TEST(FencedBenchReportTest, KnownBenchmarks) {
  for (const char* name :
       {"fillseq", "fillrandom", "fillbatch", "overwrite", "readrandom",
        "multireadrandom", "seekrandom", "readseq", "readrandomwriterandom",
        "deleterandom", "readwhilewriting", "compact", "stats", "stalewrite",
        "advancefence", "fencedread", "fencedbatch", "contended", "verify"}) {
    EXPECT_TRUE(IsKnownBenchmark(name)) << name;
  }
  for (const char* name : {"", "frobnicate", "fillseq[X2]", "Fillseq",
                           "fillsync", "readrandomfast"}) {
    EXPECT_FALSE(IsKnownBenchmark(name)) << name;
  }
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
  for (const char* bad :
       {"", "x[", "x[X]", "x[X0]", "x[Y3]", "[X3]", "x[X3]y", "x]"}) {
    EXPECT_FALSE(ParseBenchmarkName(bad, &name, &repeat, &warmup)) << bad;
  }
}

}  // namespace bench
}  // namespace fencedkv
