// Copyright (c) fencedkv authors.
//
// fenced_bench: a db_bench-style benchmark of fencedkv. Same flag names and
// defaults as RocksDB's db_bench where the flag exists there, the same output
// (header block, "V2" result lines whose field positions tools/benchmark.sh
// parses, --histogram in HistogramStat's layout), and db_bench's benchmark
// names for the same operations -- fenced. --fenced=false runs the same
// workloads on plain RocksDB with the same options: the physical limit.

#ifndef FENCEDKV_TOOLS_FENCED_BENCH_TOOL_H_
#define FENCEDKV_TOOLS_FENCED_BENCH_TOOL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace fencedkv {

// Runs the tool; returns the process exit code.
int FencedBenchTool(int argc, char** argv);

namespace bench {

// One result line in RocksDB's V2 format (db_bench_tool.cc, Stats::Report):
// "%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;%s%s\n"
// where the first %s is " %6.1f MB/s" (bytes > 0) and the second the message
// after a space. benchmark.sh reads $3 (micros/op), $5 (ops/sec) and $11
// (MB/s).
std::string FormatResultLine(std::string_view name, double micros_per_op,
                             int64_t ops_per_sec, double seconds,
                             uint64_t operations, uint64_t bytes,
                             std::string_view message);

// db_bench's --stats_interval line (Stats::FinishedOps), on stderr:
// "<time> ... thread <id>: (<interval ops>,<ops>) ops and (<interval
// rate>,<rate>) ops/second in (<interval secs>,<secs>) seconds\n", where
// <time> is "YYYY/MM/DD-HH:MM:SS " in local time (RocksDB's TimeToString).
std::string FormatIntervalLine(int64_t unix_seconds, int thread_id,
                               uint64_t interval_ops, uint64_t ops,
                               double interval_secs, double secs);

// db_bench's --report_file (ReporterAgent): the header, then one line per
// interval: the seconds since the benchmark started (rounded) and the ops
// finished in that interval.
inline constexpr char kReportHeader[] = "secs_elapsed,interval_qps";
std::string FormatReportLine(uint64_t secs_elapsed, int64_t interval_ops);

// readrandomwriterandom's message, db_bench's format:
// "( reads:R writes:W total:T found:F)".
std::string FormatReadWriteMessage(uint64_t reads, uint64_t writes,
                                   uint64_t total, uint64_t found);

// Whether `name` (without a [X..-W..] suffix) is a benchmark fenced_bench
// runs.
bool IsKnownBenchmark(const std::string& name);

// Parses a --benchmarks entry "name[X3-W1]" (repeat 3 times after 1 warm-up;
// either part optional). Returns false on a malformed suffix.
bool ParseBenchmarkName(const std::string& entry, std::string* name,
                        int* repeat, int* warmup);

}  // namespace bench
}  // namespace fencedkv

#endif  // FENCEDKV_TOOLS_FENCED_BENCH_TOOL_H_
