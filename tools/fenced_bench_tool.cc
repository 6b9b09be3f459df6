// Copyright (c) fencedkv authors.
//
// fenced_bench: flags, header, driver and report. The workload bodies are in
// fenced_bench_workloads.cc.

#include "fenced_bench_tool.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include <rocksdb/statistics.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fencedkv/version.h"

#include "fenced_bench_internal.h"
#include "util/help_flags.h"

// ---- db_bench's flags, same names and defaults -----------------------------
DEFINE_string(benchmarks,
              "fillseq,fillrandom,overwrite,readrandom,fencedread,stalewrite,"
              "verify",
              "Comma-separated list of benchmarks to run in order; an unknown "
              "one is refused before anything runs. A suffix [X3-W1] repeats "
              "a benchmark 3 times after 1 warm-up run and prints AVG and "
              "MEDIAN lines.\n"
              "db_bench names, fenced: fillseq, fillrandom, overwrite, "
              "fillbatch (1000 sequential keys per atomic batch), readrandom, "
              "multireadrandom (MultiGet of --batch_size keys), seekrandom "
              "(an iterator per Seek, then --seek_nexts Next()), readseq, "
              "readrandomwriterandom (--readwritepercent reads), "
              "deleterandom, readwhilewriting, compact, stats.\n"
              "fencedkv only: stalewrite (every write one token below the "
              "current one: the rejection path; run it after fillseq, since "
              "a key never written accepts any token, and a key written "
              "with --stale_write_percent's token accepts it again), "
              "advancefence (AdvanceFence, synced), "
              "fencedread (GetFenced), fencedbatch (--batch_size ops over "
              "several domains per atomic Write), contended (--token_holders "
              "holders race on 8 domains), verify (checks every domain's max "
              "and that no stale write was applied; prints FenceVerify "
              "Success.)");
DEFINE_int64(num, 1000000, "Number of key/values to place in database");
DEFINE_int64(reads, -1, "Number of read operations to do. -1 means --num");
DEFINE_int64(writes, -1, "Number of write operations to do. -1 means --num");
DEFINE_int64(deletes, -1, "Number of delete operations to do. -1 means --num");
DEFINE_int32(threads, 1, "Number of concurrent threads to run (1..1024)");
DEFINE_int32(duration, 0,
             "Time in seconds for the random-ops tests to run. When 0 then "
             "num & reads determine the test duration");
DEFINE_int32(key_size, 16, "size of each key (decimal digits, zero padded)");
DEFINE_int32(value_size, 100,
             "Size of each value: 0..67108864 (64 MiB, "
             "fencedkv::Options::max_value_size's default)");
DEFINE_double(compression_ratio, 0.5,
              "Arrange to generate values that shrink to this fraction of "
              "their original size after compression");
DEFINE_int32(batch_size, 1, "Batch size (keys per atomic Write)");
DEFINE_int64(seed, 0,
             "Seed base for random number generators. When 0 it is derived "
             "from the current time and printed");
DEFINE_string(db, "",
              "Use the db with the following name. Empty means "
              "$TEST_TMPDIR (or /tmp)/fencedkvtest-<uid>/dbbench. Unless "
              "--use_existing_db, it must be missing, empty, a fencedkv "
              "database or a raw one fenced_bench made (--fenced=false): the "
              "fill benchmarks destroy it. Anything else is refused, "
              "untouched");
DEFINE_bool(use_existing_db, false,
            "If true, do not destroy the existing database; a missing one is "
            "refused (nothing is created). If you set this flag and also "
            "specify a benchmark that wants a fresh database, that benchmark "
            "is skipped.");
DEFINE_bool(histogram, false, "Print histogram of operation timings");
DEFINE_bool(sync, false, "Sync all writes to disk");
DEFINE_bool(disable_wal, false,
            "REFUSED by fenced_bench: the WAL is always on for fenced state "
            "(a lost fence record would re-admit a fenced-out holder)");
DEFINE_bool(progress_reports, true,
            "If true, db_bench-style '... finished N ops' progress goes to "
            "stderr");
DEFINE_int64(cache_size, 32 << 20,
             "Number of bytes to use as a cache of "
             "uncompressed data (block cache)");
DEFINE_int32(bloom_bits, -1,
             "Bloom filter bits per key. Negative means use "
             "fencedkv's default (10)");
DEFINE_string(compression_type, "snappy",
              "Algorithm to use to compress the database: none, snappy, zlib, "
              "bzip2, lz4, lz4hc, zstd");
DEFINE_string(memtablerep, "skip_list",
              "The memtable: skip_list (RocksDB's default) or hash_linkedlist "
              "(fencedkv's hash memtable, db_bench's name for a hash one: "
              "faster point writes, scans sort the memtable first)");
DEFINE_int64(write_buffer_size, fencedkv::Options().write_buffer_size,
             "Number of bytes to buffer in memtable before compacting: "
             "65536..68719476736 (64 KiB..64 GiB, as fencedkv::Options "
             "allows)");
DEFINE_int32(open_files, fencedkv::Options().max_open_files,
             "Maximum number of files to keep open at the same time (use "
             "default if == 0)");
DEFINE_int32(max_background_jobs, fencedkv::Options().max_background_jobs,
             "The maximum number of concurrent background jobs that can occur "
             "in parallel (1..256, as fencedkv::Options allows)");
DEFINE_int32(level0_file_num_compaction_trigger,
             fencedkv::Options().level0_file_num_compaction_trigger,
             "Number of files in level-0 when compactions start.");
DEFINE_bool(statistics, false,
            "Database statistics: RocksDB's tickers and histograms, printed "
            "after the last benchmark (STATISTICS:)");
DEFINE_int64(stats_interval, 0,
             "Stats are reported every N operations when this is greater than "
             "zero. When 0 the interval grows over time.");
DEFINE_int64(stats_interval_seconds, 0,
             "Report stats every N seconds. This overrides stats_interval when "
             "both are > 0.");
DEFINE_int64(report_interval_seconds, 0,
             "If greater than zero, it will write simple stats in CSV format "
             "to --report_file every N seconds (secs_elapsed,interval_qps; "
             "each run of a benchmark rewrites the file, as db_bench does)");
DEFINE_string(report_file, "report.csv",
              "Filename where some simple stats are reported to (if "
              "--report_interval_seconds is bigger than 0)");
DEFINE_int32(readwritepercent, 90,
             "Ratio of reads to reads/writes (expressed as percentage) for the "
             "ReadRandomWriteRandom workload. The default value 90 means 90% "
             "operations out of all reads and writes operations are reads. In "
             "other words, 9 gets for every 1 put.");
DEFINE_int32(seek_nexts, 0,
             "How many times to call Next() after Seek() in seekrandom");

// ---- fencedkv flags (names that cannot collide with db_bench's) ------------
DEFINE_bool(fenced, true,
            "If false, run the same workloads on plain RocksDB with the same "
            "options: no fence records, no checks (the physical limit). "
            "Fenced-only benchmarks then report 'not applicable'");
DEFINE_string(fence_domain, "key",
              "Fence domain function at creation: key | prefix:N | "
              "delimiter:C | hashtag. Keys are --key_size decimal digits, so "
              "prefix:N puts 10^(key_size-N) keys in a domain");
DEFINE_string(fence_mode, "monotonic",
              "Acceptance rule: monotonic (token >= max; every write of a "
              "run uses the holder's token) or strict (token > max; each write "
              "takes a fresh token)");
DEFINE_uint64(fence_floor, 0,
              "If > 0, SetFenceFloor to this at open; tokens "
              "start above it. It must leave room below 2^64-1 for every "
              "token the run may take (one per open, per lease renewal and "
              "advance, and in strict mode per write; 2^40 kept for "
              "--duration or readwhilewriting): else it is refused before "
              "anything runs");
DEFINE_int32(stale_write_percent, 0,
             "Percent of writes in fill/overwrite benchmarks sent with a "
             "stale (older) token; the result line then reports "
             "(accepted:N rejected:M)");
DEFINE_int32(token_holders, 0,
             "Lease holders writing at once. Each fence domain belongs to one "
             "holder, and every write (fillseq, fillrandom, overwrite, "
             "fillbatch, fencedbatch, deleterandom, readrandomwriterandom, "
             "readwhilewriting's writer) carries its domain's holder's token. "
             "Holders renew (--token_renew_every), each time taking a new "
             "token from one shared counter, so their tokens rise and "
             "interleave and most writes are below the store's high-water "
             "mark: the check needs a lookup. contended: holders racing on 8 "
             "domains. 0 = 1 holder (4 in contended). Strict mode: every "
             "write takes a fresh token whatever this is");
DEFINE_int32(token_renew_every, 1000,
             "With --token_holders > 1: a holder renews its lease (a new, "
             "highest token) after this many of its writes on average; 0 = "
             "never");
DEFINE_int64(fence_cache_bytes, fencedkv::Options().fence_cache_bytes,
             "Memory budget of the in-memory view of domain max tokens; "
             "bounds memory whatever the number of domains");
DEFINE_bool(fence_cache_prefault, true,
            "Make the fence view's --fence_cache_bytes resident when the "
            "store opens, as fencedkv-server does by default "
            "(--fence_cache_prefault): the open zeroes them, not the first "
            "writes. false: the embedded library's default, pages faulted in "
            "as writes touch them");
DEFINE_bool(cpu_time, false,
            "After each result line, print to stderr the CPU time the process "
            "(every thread, RocksDB's background work included) spent in the "
            "run and ops per CPU-second: a figure that, unlike ops/sec, holds "
            "on a machine shared with other loads");

namespace {

bool ValidatePositive64(const char* flag, int64_t v) {
  if (v > 0) return true;
  std::fprintf(stderr, "Invalid value for --%s: %" PRId64 " (must be > 0)\n",
               flag, v);
  return false;
}
bool ValidatePositive32(const char* flag, int32_t v) {
  if (v > 0) return true;
  std::fprintf(stderr, "Invalid value for --%s: %d (must be > 0)\n", flag, v);
  return false;
}
// More threads than a process can start ended in an uncaught
// std::system_error (abort) when the benchmark started them.
constexpr int32_t kMaxThreads = 1024;
bool ValidateThreads(const char* flag, int32_t v) {
  return fencedkv::FlagInRange(flag, v, 1, kMaxThreads);
}
// What fencedkv::Options accepts (a larger one ran for seconds, grew to
// 1.9 GB, then failed with "exceeds max_key_size").
bool ValidateKeySize(const char* flag, int32_t v) {
  return fencedkv::FlagInRange(
      flag, v, 1, static_cast<int64_t>(fencedkv::Options().max_key_size));
}
// -1 means --num (db_bench's); other negatives were taken as -1 silently.
bool ValidateCountOrDefault(const char* flag, int64_t v) {
  if (v >= -1) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: %" PRId64
               " (must be >= 0, or -1 for "
               "--num)\n",
               flag, v);
  return false;
}
bool ValidateBenchmarks(const char* flag, const std::string& v) {
  if (v.find_first_not_of(", ") != std::string::npos) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" names no benchmark (it ran "
               "nothing and exited 0)\n",
               flag, v.c_str());
  return false;
}
// A value the store takes: fencedkv::Options' default max_value_size
// (2147483647 took 97 s and 14 GB for one write).
bool ValidateValueSize(const char* flag, int32_t v) {
  return fencedkv::FlagInRange(
      flag, v, 0, static_cast<int64_t>(fencedkv::Options().max_value_size));
}
// What fencedkv::Options accepts (-1 became 2^64-1 bytes: 600 MB of
// memtable for ten writes).
constexpr int64_t kMinWriteBufferSize = int64_t{64} << 10;
constexpr int64_t kMaxWriteBufferSize = int64_t{64} << 30;
bool ValidateWriteBufferSize(const char* flag, int64_t v) {
  return fencedkv::FlagInRange(flag, v, kMinWriteBufferSize,
                               kMaxWriteBufferSize);
}
// Each is a RocksDB background thread; fencedkv::Options refuses more.
constexpr int32_t kMaxBackgroundJobs = 256;
bool ValidateBackgroundJobs(const char* flag, int32_t v) {
  return fencedkv::FlagInRange(flag, v, 1, kMaxBackgroundJobs);
}
bool ValidateNonNegative32(const char* flag, int32_t v) {
  if (v >= 0) return true;
  std::fprintf(stderr, "Invalid value for --%s: %d (must be >= 0)\n", flag, v);
  return false;
}
bool ValidateNonNegative64(const char* flag, int64_t v) {
  if (v >= 0) return true;
  std::fprintf(stderr, "Invalid value for --%s: %" PRId64 " (must be >= 0)\n",
               flag, v);
  return false;
}
bool ValidatePercent(const char* flag, int32_t v) {
  if (v >= 0 && v <= 100) return true;
  std::fprintf(stderr, "Invalid value for --%s: %d (must be 0..100)\n", flag,
               v);
  return false;
}
bool ValidateRatio(const char* flag, double v) {
  if (v > 0 && v <= 1) return true;
  std::fprintf(stderr, "Invalid value for --%s: %g (must be in (0, 1])\n", flag,
               v);
  return false;
}
bool ValidateDisableWal(const char* flag, bool v) {
  if (!v) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: true. fenced_bench refuses to disable "
               "the WAL: the WAL is always on for fenced state (SPEC, "
               "Durability).\n",
               flag);
  return false;
}
bool ValidateFenceDomain(const char* flag, const std::string& v) {
  fencedkv::FenceDomainSpec spec;
  fencedkv::Status s = fencedkv::FenceDomainSpec::Parse(v, &spec);
  if (s.ok()) return true;
  std::fprintf(stderr, "Invalid value for --%s: %s\n", flag,
               s.ToString().c_str());
  return false;
}
bool ValidateFenceMode(const char* flag, const std::string& v) {
  fencedkv::FenceMode mode;
  if (fencedkv::ParseFenceMode(v, &mode)) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" (expected monotonic or "
               "strict)\n",
               flag, v.c_str());
  return false;
}

bool ValidateCompression(const char* flag, const std::string& v) {
  for (const char* ok :
       {"none", "snappy", "zlib", "bzip2", "lz4", "lz4hc", "zstd"}) {
    if (v == ok) return true;
  }
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" (expected none, snappy, zlib, "
               "bzip2, lz4, lz4hc or zstd)\n",
               flag, v.c_str());
  return false;
}

bool ValidateMemtablerep(const char* flag, const std::string& v) {
  if (v == "skip_list" || v == "hash_linkedlist") return true;
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" (expected skip_list or "
               "hash_linkedlist)\n",
               flag, v.c_str());
  return false;
}

const bool kRegistered = [] {
  gflags::RegisterFlagValidator(&FLAGS_num, &ValidatePositive64);
  gflags::RegisterFlagValidator(&FLAGS_threads, &ValidateThreads);
  gflags::RegisterFlagValidator(&FLAGS_key_size, &ValidateKeySize);
  for (const int64_t* counts : {&FLAGS_reads, &FLAGS_writes, &FLAGS_deletes}) {
    gflags::RegisterFlagValidator(counts, &ValidateCountOrDefault);
  }
  gflags::RegisterFlagValidator(&FLAGS_benchmarks, &ValidateBenchmarks);
  gflags::RegisterFlagValidator(&FLAGS_value_size, &ValidateValueSize);
  gflags::RegisterFlagValidator(&FLAGS_write_buffer_size,
                                &ValidateWriteBufferSize);
  gflags::RegisterFlagValidator(&FLAGS_batch_size, &ValidatePositive32);
  gflags::RegisterFlagValidator(&FLAGS_duration, &ValidateNonNegative32);
  gflags::RegisterFlagValidator(&FLAGS_token_holders, &ValidateNonNegative32);
  gflags::RegisterFlagValidator(&FLAGS_token_renew_every,
                                &ValidateNonNegative32);
  gflags::RegisterFlagValidator(&FLAGS_max_background_jobs,
                                &ValidateBackgroundJobs);
  gflags::RegisterFlagValidator(&FLAGS_level0_file_num_compaction_trigger,
                                &ValidatePositive32);
  gflags::RegisterFlagValidator(&FLAGS_fence_cache_bytes,
                                &ValidateNonNegative64);
  gflags::RegisterFlagValidator(&FLAGS_stats_interval, &ValidateNonNegative64);
  gflags::RegisterFlagValidator(&FLAGS_stats_interval_seconds,
                                &ValidateNonNegative64);
  gflags::RegisterFlagValidator(&FLAGS_report_interval_seconds,
                                &ValidateNonNegative64);
  gflags::RegisterFlagValidator(&FLAGS_readwritepercent, &ValidatePercent);
  gflags::RegisterFlagValidator(&FLAGS_seek_nexts, &ValidateNonNegative32);
  gflags::RegisterFlagValidator(&FLAGS_stale_write_percent, &ValidatePercent);
  gflags::RegisterFlagValidator(&FLAGS_compression_ratio, &ValidateRatio);
  gflags::RegisterFlagValidator(&FLAGS_disable_wal, &ValidateDisableWal);
  gflags::RegisterFlagValidator(&FLAGS_fence_domain, &ValidateFenceDomain);
  gflags::RegisterFlagValidator(&FLAGS_fence_mode, &ValidateFenceMode);
  gflags::RegisterFlagValidator(&FLAGS_compression_type, &ValidateCompression);
  gflags::RegisterFlagValidator(&FLAGS_memtablerep, &ValidateMemtablerep);
  return true;
}();

}  // namespace

namespace fencedkv {
namespace bench {

std::string FormatResultLine(std::string_view name, double micros_per_op,
                             int64_t ops_per_sec, double seconds,
                             uint64_t operations, uint64_t bytes,
                             std::string_view message) {
  std::string extra;
  if (bytes > 0) {
    char rate[100];
    std::snprintf(rate, sizeof(rate), "%6.1f MB/s",
                  (static_cast<double>(bytes) / 1048576.0) / seconds);
    extra = rate;
  }
  if (!message.empty()) {
    if (!extra.empty()) extra.push_back(' ');
    extra.append(message);
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%-12.*s : %11.3f micros/op %ld ops/sec %.3f seconds %" PRIu64
                " operations;%s%s\n",
                static_cast<int>(name.size()), name.data(), micros_per_op,
                static_cast<long>(ops_per_sec), seconds, operations,
                extra.empty() ? "" : " ", extra.c_str());
  return buf;
}

bool ParseBenchmarkName(const std::string& entry, std::string* name,
                        int* repeat, int* warmup) {
  *repeat = 1;
  *warmup = 0;
  const size_t open = entry.find('[');
  if (open == std::string::npos) {
    *name = entry;
    return !entry.empty() && entry.find(']') == std::string::npos;
  }
  if (entry.back() != ']' || open == 0) return false;
  *name = entry.substr(0, open);
  std::string args = entry.substr(open + 1, entry.size() - open - 2);
  size_t pos = 0;
  while (pos < args.size()) {
    size_t end = args.find('-', pos);
    if (end == std::string::npos) end = args.size();
    const std::string part = args.substr(pos, end - pos);
    if (part.size() < 2 || (part[0] != 'X' && part[0] != 'W')) return false;
    char* stop = nullptr;
    const long v = std::strtol(part.c_str() + 1, &stop, 10);
    if (*stop != '\0' || v < 0 || v > 1000000) return false;
    if (part[0] == 'X') {
      if (v < 1) return false;
      *repeat = static_cast<int>(v);
    } else {
      *warmup = static_cast<int>(v);
    }
    pos = end + 1;
  }
  return true;
}

std::string FormatIntervalLine(int64_t unix_seconds, int thread_id,
                               uint64_t interval_ops, uint64_t ops,
                               double interval_secs, double secs) {
  const time_t seconds = static_cast<time_t>(unix_seconds);
  struct tm t;
  localtime_r(&seconds, &t);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%04d/%02d/%02d-%02d:%02d:%02d  ... thread %d: (%" PRIu64
                ",%" PRIu64
                ") ops and (%.1f,%.1f) ops/second in (%.6f,%.6f) seconds\n",
                t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min,
                t.tm_sec, thread_id, interval_ops, ops,
                static_cast<double>(interval_ops) / interval_secs,
                static_cast<double>(ops) / secs, interval_secs, secs);
  return buf;
}

std::string FormatReportLine(uint64_t secs_elapsed, int64_t interval_ops) {
  return std::to_string(secs_elapsed) + "," + std::to_string(interval_ops) +
         "\n";
}

std::string FormatReadWriteMessage(uint64_t reads, uint64_t writes,
                                   uint64_t total, uint64_t found) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "( reads:%" PRIu64 " writes:%" PRIu64 " total:%" PRIu64
                " found:%" PRIu64 ")",
                reads, writes, total, found);
  return buf;
}

bool IsKnownBenchmark(const std::string& name) {
  return Benchmark::Find(name) != nullptr;
}

// ---- ReporterAgent
// ------------------------------------------------------------

ReporterAgent::ReporterAgent(const std::string& path, uint64_t interval_secs)
    : file_(std::fopen(path.c_str(), "w")), interval_secs_(interval_secs) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "%s\n", kReportHeader);
  std::fflush(file_);
  thread_ = std::thread(&ReporterAgent::SleepAndReport, this);
}

ReporterAgent::~ReporterAgent() {
  if (file_ == nullptr) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::fclose(file_);
}

void ReporterAgent::SleepAndReport() {
  const uint64_t started = NowMicros();
  int64_t last_report = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (cv_.wait_for(l, std::chrono::seconds(interval_secs_),
                       [&] { return stop_; })) {
        break;
      }
    }
    const int64_t done = total_ops_done_.load(std::memory_order_relaxed);
    const uint64_t secs_elapsed = (NowMicros() - started + 500000) / 1000000;
    const std::string line = FormatReportLine(secs_elapsed, done - last_report);
    if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0) {
      std::fprintf(stderr,
                   "Can't write to report file (%s), stopping the reporting\n",
                   std::strerror(errno));
      break;
    }
    last_report = done;
  }
}

// ---- Stats ------------------------------------------------------------------

void Stats::Start(int id) {
  id_ = id;
  next_report_ =
      FLAGS_stats_interval ? static_cast<uint64_t>(FLAGS_stats_interval) : 100;
  last_report_done_ = 0;
  done_ = 0;
  bytes_ = 0;
  seconds_ = 0;
  start_ = NowMicros();
  last_op_finish_ = start_;
  last_report_finish_ = start_;
  finish_ = start_;
  message_.clear();
  for (auto& h : hist_) h.Clear();
}

void Stats::Merge(const Stats& other) {
  if (other.exclude_from_merge_) return;
  for (int i = 0; i < 5; ++i) hist_[i].Merge(other.hist_[i]);
  done_ += other.done_;
  bytes_ += other.bytes_;
  seconds_ += other.seconds_;
  start_ = std::min(start_, other.start_);
  finish_ = std::max(finish_, other.finish_);
  if (message_.empty()) message_ = other.message_;
}

void Stats::FinishedOps(int64_t n, OpType type) {
  if (reporter_ != nullptr) reporter_->ReportFinishedOps(n);
  if (FLAGS_histogram) {
    const uint64_t now = NowMicros();
    hist_[static_cast<int>(type)].Add(now - last_op_finish_);
    last_op_finish_ = now;
  }
  done_ += static_cast<uint64_t>(n);
  if (!FLAGS_progress_reports || done_ < next_report_) return;
  if (FLAGS_stats_interval == 0) {
    if (next_report_ < 1000) {
      next_report_ += 100;
    } else if (next_report_ < 5000) {
      next_report_ += 500;
    } else if (next_report_ < 10000) {
      next_report_ += 1000;
    } else if (next_report_ < 50000) {
      next_report_ += 5000;
    } else if (next_report_ < 100000) {
      next_report_ += 10000;
    } else if (next_report_ < 500000) {
      next_report_ += 50000;
    } else {
      next_report_ += 100000;
    }
    std::fprintf(stderr, "... finished %" PRIu64 " ops%30s\r", done_, "");
    return;
  }
  // db_bench: every --stats_interval ops, or, with --stats_interval_seconds,
  // the clock is looked at every --stats_interval ops (1000).
  const uint64_t now = NowMicros();
  const uint64_t since_last = now - last_report_finish_;
  next_report_ += static_cast<uint64_t>(FLAGS_stats_interval);
  if (FLAGS_stats_interval_seconds > 0 &&
      since_last <
          static_cast<uint64_t>(FLAGS_stats_interval_seconds) * 1000000) {
    return;
  }
  const int64_t wall = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  const std::string line =
      FormatIntervalLine(wall, id_, done_ - last_report_done_, done_,
                         static_cast<double>(since_last) / 1e6,
                         static_cast<double>(now - start_) / 1e6);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  last_report_finish_ = now;
  last_report_done_ = done_;
}

double Stats::ops_per_sec() const {
  const double elapsed = static_cast<double>(finish_ - start_) * 1e-6;
  return elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
}

double Stats::mb_per_sec() const {
  const double elapsed = static_cast<double>(finish_ - start_) * 1e-6;
  return elapsed > 0 ? (static_cast<double>(bytes_) / 1048576.0) / elapsed : 0;
}

void Stats::Report(const std::string& name) const {
  // Pretend at least one op was done, as db_bench does.
  const uint64_t done = done_ < 1 ? 1 : done_;
  double elapsed = static_cast<double>(finish_ - start_) * 1e-6;
  if (elapsed <= 0) elapsed = 1e-6;
  const double seconds = seconds_ > 0 ? seconds_ : elapsed;
  const std::string line = FormatResultLine(
      name, seconds * 1e6 / static_cast<double>(done),
      static_cast<int64_t>(static_cast<double>(done) / elapsed), elapsed, done_,
      bytes_, message_);
  std::fputs(line.c_str(), stdout);
  if (FLAGS_histogram) {
    static const char* kNames[] = {"read", "write", "delete", "seek", "other"};
    for (int i = 0; i < 5; ++i) {
      if (hist_[i].num() == 0) continue;
      std::fprintf(stdout, "Microseconds per %s:\n%s\n", kNames[i],
                   hist_[i].ToString().c_str());
    }
  }
  std::fflush(stdout);
}

// ---- Values -----------------------------------------------------------------

ValueGenerator::ValueGenerator(double compression_ratio, uint32_t seed,
                               size_t value_size) {
  // 1 MiB (or enough for a few values) of data that compresses to
  // compression_ratio: random bytes of length ratio*100 repeated to 100.
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const size_t target = std::max<size_t>(1 << 20, value_size * 4);
  while (data_.size() < target) {
    const size_t raw_len =
        std::max<size_t>(1, static_cast<size_t>(100 * compression_ratio));
    std::string piece;
    for (size_t i = 0; i < raw_len; ++i) {
      piece.push_back(static_cast<char>(' ' + next() % 95));
    }
    while (piece.size() < 100) piece.append(piece, 0, 100 - piece.size());
    data_.append(piece);
  }
}

std::string_view ValueGenerator::Generate(size_t len) {
  size_t pos =
      pos_.fetch_add(len, std::memory_order_relaxed) % (data_.size() - len);
  return std::string_view(data_).substr(pos, len);
}

// ---- Benchmark ------------------------------------------------------------

Benchmark::Benchmark()
    : num_(FLAGS_num),
      reads_(FLAGS_reads < 0 ? FLAGS_num : FLAGS_reads),
      writes_(FLAGS_writes < 0 ? FLAGS_num : FLAGS_writes),
      deletes_(FLAGS_deletes < 0 ? FLAGS_num : FLAGS_deletes),
      batch_size_(FLAGS_batch_size),
      holders_(FLAGS_token_holders == 0 ? 1 : FLAGS_token_holders),
      contended_holders_(FLAGS_token_holders == 0 ? 4 : FLAGS_token_holders),
      holder_tokens_(std::max(holders_, contended_holders_)) {
  FenceDomainSpec::Parse(FLAGS_fence_domain, &spec_);  // validated
  Options& o = store_options_.options;
  o.create_if_missing = !FLAGS_use_existing_db;
  o.fence_domain = FLAGS_fence_domain;
  ParseFenceMode(FLAGS_fence_mode, &o.fence_mode);
  strict_ = o.fence_mode == FenceMode::kStrict;
  o.block_cache_size =
      static_cast<size_t>(std::max<int64_t>(0, FLAGS_cache_size));
  if (FLAGS_bloom_bits >= 0) o.bloom_bits_per_key = FLAGS_bloom_bits;
  o.compression = FLAGS_compression_type;
  o.memtable = FLAGS_memtablerep == "hash_linkedlist" ? "hash" : "skiplist";
  o.write_buffer_size = static_cast<size_t>(FLAGS_write_buffer_size);
  if (FLAGS_open_files != 0) o.max_open_files = FLAGS_open_files;
  o.max_background_jobs = FLAGS_max_background_jobs;
  o.level0_file_num_compaction_trigger =
      FLAGS_level0_file_num_compaction_trigger;
  if (FLAGS_statistics) o.statistics = rocksdb::CreateDBStatistics();
  o.fence_cache_bytes =
      static_cast<size_t>(std::max<int64_t>(0, FLAGS_fence_cache_bytes));
  o.prefault_fence_cache = FLAGS_fence_cache_prefault;
  store_options_.sync = FLAGS_sync;
  store_options_.fence_floor = FLAGS_fence_floor;
  db_path_ = FLAGS_db;
  if (db_path_.empty()) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    db_path_ = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") +
               "/fencedkvtest-" + std::to_string(geteuid()) + "/dbbench";
  }
  values_ = std::make_unique<ValueGenerator>(
      FLAGS_compression_ratio, static_cast<uint32_t>(FLAGS_seed),
      static_cast<size_t>(FLAGS_value_size));
}

Benchmark::~Benchmark() = default;

bool Benchmark::Open(std::string* error) {
  if (!FLAGS_use_existing_db) {
    std::error_code ec;
    std::filesystem::create_directories(
        std::filesystem::path(db_path_).parent_path(), ec);
  }
  store_ = FLAGS_fenced ? OpenFencedStore(store_options_, db_path_, error)
                        : OpenRawStore(store_options_, db_path_, error);
  if (store_ == nullptr) return false;
  // Tokens continue above whatever the database holds: a new holder.
  const Token base = std::max<Token>(
      {store_->HighWaterMark(), FLAGS_fence_floor, epoch_.load()});
  epoch_ = base + 1;
  strict_counter_ = base + 1;
  lease_counter_ = base + 1;
  return true;
}

std::string Benchmark::Key(uint64_t i) const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020" PRIu64, i);
  const size_t width = static_cast<size_t>(FLAGS_key_size);
  if (width <= 20) return std::string(buf + 20 - width, width);
  return std::string(width - 20, '0') + buf;
}

void Benchmark::PrintHeader() const {
  const double raw =
      static_cast<double>(FLAGS_key_size + FLAGS_value_size) * num_;
  const double file =
      (FLAGS_key_size + FLAGS_value_size * FLAGS_compression_ratio) * num_;
  std::printf("Keys:       %d bytes each (+ 0 bytes user-defined timestamp)\n",
              FLAGS_key_size);
  std::printf("Values:     %d bytes each (%d bytes after compression)\n",
              FLAGS_value_size,
              static_cast<int>(
                  std::lround(FLAGS_value_size * FLAGS_compression_ratio)));
  std::printf("Entries:    %" PRId64 "\n", num_);
  std::printf("Prefix:    0 bytes\n");
  std::printf("Keys per prefix:    0\n");
  std::printf("RawSize:    %.1f MB (estimated)\n", raw / 1048576.0);
  std::printf("FileSize:   %.1f MB (estimated)\n", file / 1048576.0);
  std::printf("Write rate: 0 bytes/second\n");
  std::printf("Read rate: 0 ops/second\n");
  // db_bench prints RocksDB's CompressionTypeToString names.
  static const std::pair<const char*, const char*> kCompressionNames[] = {
      {"none", "NoCompression"}, {"snappy", "Snappy"}, {"zlib", "Zlib"},
      {"bzip2", "BZip2"},        {"lz4", "LZ4"},       {"lz4hc", "LZ4HC"},
      {"zstd", "ZSTD"}};
  const char* compression = FLAGS_compression_type.c_str();
  for (const auto& [flag, shown] : kCompressionNames) {
    if (FLAGS_compression_type == flag) compression = shown;
  }
  std::printf("Compression: %s\n", compression);
  std::printf("Compression sampling rate: 0\n");
  std::printf("Memtablerep: %s\n", FLAGS_memtablerep == "hash_linkedlist"
                                       ? "FencedkvSortedFlushHashRep"
                                       : "SkipListFactory");
  std::printf("Perf Level: 1\n");
  std::printf("Fenced:     %s\n",
              FLAGS_fenced ? "true" : "false (raw RocksDB)");
  if (FLAGS_fenced) {
    std::printf("Fence domain: %s\n", FLAGS_fence_domain.c_str());
    std::printf("Fence mode: %s\n", FLAGS_fence_mode.c_str());
    std::printf("Fence floor: %" PRIu64 "\n",
                static_cast<uint64_t>(FLAGS_fence_floor));
    std::printf("Fence cache: %.1f MB budget\n",
                static_cast<double>(store_options_.options.fence_cache_bytes) /
                    1048576.0);
  }
  std::printf("------------------------------------------------\n");
  std::fflush(stdout);
}

// User + system CPU seconds of the whole process so far.
double ProcessCpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

void PrintEnvironment() {
  std::fprintf(stderr, "fencedkv:   version %s (RocksDB %s)\n",
               FENCEDKV_VERSION_STRING, RocksDBVersion());
  const time_t now = time(nullptr);
  char date[64];
  ctime_r(&now, date);
  std::fprintf(stderr, "Date:       %s", date);  // ctime_r ends with \n
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model, cache;
  int count = 0;
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string val =
        colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name") {
      ++count;
      model = val;
    } else if (key == "cache size") {
      cache = val;
    }
  }
  if (count > 0) {
    std::fprintf(stderr, "CPU:        %d * %s\n", count, model.c_str());
    std::fprintf(stderr, "CPUCache:   %s\n", cache.c_str());
  }
}

void Benchmark::ThreadBody(Benchmark* bm, ThreadState* thread, Method method) {
  SharedState* shared = thread->shared;
  {
    std::unique_lock<std::mutex> l(shared->mu);
    shared->initialized++;
    if (shared->initialized >= shared->total) shared->cv.notify_all();
    shared->cv.wait(l, [&] { return shared->start; });
  }
  thread->stats.Start(thread->tid);
  (bm->*method)(thread);
  thread->stats.Stop();
  {
    std::lock_guard<std::mutex> l(shared->mu);
    shared->done++;
    if (shared->done >= shared->total) shared->cv.notify_all();
  }
}

Stats Benchmark::RunBenchmark(int n, const std::string& name, Method method,
                              bool extra_writer, Message message) {
  SharedState shared;
  const int total = n + (extra_writer ? 1 : 0);
  shared.total = total;
  // As db_bench: each run writes the report file anew.
  std::unique_ptr<ReporterAgent> reporter;
  if (FLAGS_report_interval_seconds > 0) {
    reporter = std::make_unique<ReporterAgent>(
        FLAGS_report_file,
        static_cast<uint64_t>(FLAGS_report_interval_seconds));
    if (!reporter->ok()) {
      std::fprintf(stderr, "Can't open %s: %s\n", FLAGS_report_file.c_str(),
                   std::strerror(errno));
      reporter.reset();
    }
  }
  std::vector<std::unique_ptr<ThreadState>> states;
  const uint64_t seed = static_cast<uint64_t>(FLAGS_seed);
  for (int i = 0; i < total; ++i) {
    auto ts = std::make_unique<ThreadState>();
    ts->tid = i;
    ts->rng_state = seed * 1000003ull + static_cast<uint64_t>(i) * 7919ull +
                    std::hash<std::string>()(name);
    ts->shared = &shared;
    ts->stats.SetReporterAgent(reporter.get());
    states.push_back(std::move(ts));
  }
  const double cpu_before = ProcessCpuSeconds();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {
    threads.emplace_back(&Benchmark::ThreadBody, this, states[i].get(), method);
  }
  {
    std::unique_lock<std::mutex> l(shared.mu);
    shared.cv.wait(l, [&] { return shared.initialized >= total; });
    shared.start = true;
    shared.cv.notify_all();
  }
  for (auto& t : threads) t.join();
  reporter.reset();
  if (FLAGS_progress_reports && FLAGS_stats_interval == 0) {
    std::fprintf(stderr, "%60s\r", "");  // clears the last "... finished"
  }
  // Merge into the first reported thread (readwhilewriting's writer, thread
  // 0, is excluded from the report).
  const int base = extra_writer ? 1 : 0;
  Stats merged = states[base]->stats;
  for (int i = 0; i < total; ++i) {
    if (i != base) merged.Merge(states[i]->stats);
  }
  uint64_t accepted = 0, rejected = 0, found = 0, lookups = 0;
  for (const auto& ts : states) {
    accepted += ts->accepted;
    rejected += ts->rejected;
    found += ts->found;
    lookups += ts->lookups;
  }
  if (message == Message::kReadWrite) {
    // db_bench's total is the ops each thread was asked for.
    const int64_t per_thread =
        (FLAGS_writes < 0 && FLAGS_reads < 0)
            ? num_
            : std::max<int64_t>(FLAGS_writes, FLAGS_reads);
    std::string m = FormatReadWriteMessage(
        lookups, accepted + rejected,
        static_cast<uint64_t>(per_thread) * static_cast<uint64_t>(n), found);
    if (rejected > 0) {
      m += " (accepted:" + std::to_string(accepted) +
           " rejected:" + std::to_string(rejected) + ")";
    }
    merged.AddMessage(m);
  } else if (message == Message::kAcceptReject ||
             (message == Message::kNone && rejected > 0)) {
    merged.AddMessage("(accepted:" + std::to_string(accepted) +
                      " rejected:" + std::to_string(rejected) + ")");
  } else if (message == Message::kFound) {
    std::string m = "(" + std::to_string(found) + " of " +
                    std::to_string(lookups) + " found";
    if (rejected > 0) m += ", " + std::to_string(rejected) + " stale";
    m += ")";
    // db_bench's seekrandom message ends with a newline: a blank line follows.
    if (method == &Benchmark::SeekRandom) m += "\n";
    merged.AddMessage(m);
  }
  merged.Report(name);
  if (FLAGS_cpu_time) {
    const double cpu = ProcessCpuSeconds() - cpu_before;
    std::fprintf(stderr, "%-12s : cpu %.3f seconds, %.0f ops per cpu-second\n",
                 name.c_str(), cpu,
                 cpu > 0 ? static_cast<double>(merged.done()) / cpu : 0.0);
  }
  return merged;
}

const Benchmark::Info* Benchmark::Find(const std::string& name) {
  using B = Benchmark;
  constexpr Message kNone = Message::kNone;
  constexpr Message kFound = Message::kFound;
  constexpr Message kAcceptReject = Message::kAcceptReject;
  //   name, method, fresh_db, fenced_only, extra_writer, one_thread, message
  static const Info kTable[] = {
      {"fillseq", &B::FillSeq, true, false, false, false, kNone},
      {"fillrandom", &B::FillRandom, true, false, false, false, kNone},
      {"fillbatch", &B::FillBatch, true, false, false, false, kNone},
      {"overwrite", &B::FillRandom, false, false, false, false, kNone},
      {"fencedbatch", &B::FencedBatch, false, false, false, false, kNone},
      {"readrandom", &B::ReadRandom, false, false, false, false, kFound},
      {"multireadrandom", &B::MultiReadRandom, false, false, false, false,
       kFound},
      {"seekrandom", &B::SeekRandom, false, false, false, false, kFound},
      {"fencedread", &B::FencedRead, false, false, false, false, kFound},
      {"readseq", &B::ReadSeq, false, false, false, false, kNone},
      {"readrandomwriterandom", &B::ReadRandomWriteRandom, false, false, false,
       false, Message::kReadWrite},
      {"deleterandom", &B::DeleteRandom, false, false, false, false, kNone},
      {"readwhilewriting", &B::ReadWhileWriting, false, false, true, false,
       kFound},
      {"stalewrite", &B::StaleWrite, false, true, false, false, kAcceptReject},
      {"advancefence", &B::AdvanceFence, false, true, false, false, kNone},
      {"contended", &B::Contended, false, true, false, false, kAcceptReject},
      {"compact", &B::Compact, false, false, false, true, kNone},
      {"stats", &B::PrintStats, false, false, false, true, kNone},
      {"verify", &B::Verify, false, true, false, true, kNone},
  };
  for (const Info& info : kTable) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  return a > max - b ? max : a + b;
}
uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  return b != 0 && a > max / b ? max : a * b;
}

}  // namespace

uint64_t Benchmark::TokensNeeded(const std::vector<Planned>& plan,
                                 bool* open_ended) const {
  *open_ended = false;
  // Writes take a token each in strict mode, or when holders renew (at
  // most once a write).
  const bool write_takes =
      strict_ || (holders_ > 1 && FLAGS_token_renew_every > 0);
  const bool timed = FLAGS_duration > 0;
  const uint64_t writes = static_cast<uint64_t>(writes_);
  uint64_t need = 0;
  bool open = false;  // as Run: a fresh benchmark reopens the store
  bool holders = false;
  for (const Planned& p : plan) {
    const Info& info = *p.info;
    if (info.fresh_db && FLAGS_use_existing_db) continue;  // skipped
    if (info.fresh_db || !open) need = SaturatingAdd(need, 1);
    open = true;
    if (info.fenced_only && !FLAGS_fenced) continue;
    const Method m = info.method;
    if (m == &Benchmark::Contended || (holders_ > 1 && !strict_)) {
      holders = true;  // InitHolders
    }
    // Per thread and run: the ops that may take a token, and whether
    // --duration (or the readers) decides how many there are.
    uint64_t ops = 0;
    bool unbounded = false;
    if (m == &Benchmark::FillSeq || m == &Benchmark::FillBatch) {
      ops = write_takes ? writes : 0;
    } else if (m == &Benchmark::FillRandom || m == &Benchmark::FencedBatch) {
      ops = write_takes ? writes : 0;
      unbounded = write_takes && timed;
    } else if (m == &Benchmark::DeleteRandom) {
      ops = write_takes ? static_cast<uint64_t>(deletes_) : 0;
      unbounded = write_takes && timed;
    } else if (m == &Benchmark::ReadRandomWriteRandom) {
      ops = !write_takes ? 0
            : (FLAGS_writes < 0 && FLAGS_reads < 0)
                ? static_cast<uint64_t>(num_)
                : static_cast<uint64_t>(
                      std::max<int64_t>(FLAGS_writes, FLAGS_reads));
      unbounded = write_takes && timed;
    } else if (m == &Benchmark::ReadWhileWriting) {
      unbounded = write_takes;
    } else if (m == &Benchmark::AdvanceFence || m == &Benchmark::Contended) {
      ops = writes;  // a new lease per op at most
      unbounded = timed;
    }
    if (unbounded) {
      *open_ended = true;
      continue;
    }
    const uint64_t threads =
        info.one_thread ? 1 : static_cast<uint64_t>(FLAGS_threads);
    const uint64_t runs =
        static_cast<uint64_t>(p.repeat) + static_cast<uint64_t>(p.warmup);
    need =
        SaturatingAdd(need, SaturatingMul(SaturatingMul(ops, threads), runs));
  }
  if (holders) need = SaturatingAdd(need, holder_tokens_.size());
  if (*open_ended) need = SaturatingAdd(need, kOpenEndedTokens);
  return need;
}

int Benchmark::Run() {
  std::string error;
  // Every entry is resolved before anything runs or is created.
  std::vector<Planned> plan;
  bool tracking = false;
  {
    const std::string& list = FLAGS_benchmarks;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      if (comma > pos) {
        const std::string entry = list.substr(pos, comma - pos);
        Planned p;
        if (!ParseBenchmarkName(entry, &p.name, &p.repeat, &p.warmup) ||
            (p.info = Find(p.name)) == nullptr) {
          std::fprintf(stderr, "unknown benchmark '%s'\n", entry.c_str());
          return 1;
        }
        if (p.name == "verify") tracking = true;
        plan.push_back(std::move(p));
      }
      pos = comma + 1;
    }
  }
  if (FLAGS_fenced) {
    // Tokens end at 2^64-1: a floor too close to it wrapped them to 0
    // ("invalid token 0") halfway through the run.
    bool open_ended = false;
    const uint64_t need = TokensNeeded(plan, &open_ended);
    const uint64_t highest = std::numeric_limits<uint64_t>::max() - need;
    if (FLAGS_fence_floor > highest) {
      std::fprintf(stderr,
                   "Invalid value for --fence_floor: %" PRIu64
                   " (this run may take up to %" PRIu64
                   " tokens above the floor%s, and a token is at most "
                   "2^64-1: the floor can be at most %" PRIu64 ")\n",
                   static_cast<uint64_t>(FLAGS_fence_floor), need,
                   open_ended ? ", 2^40 of them kept for --duration or "
                                "readwhilewriting, whose writes have no bound"
                              : "",
                   highest);
      return 1;
    }
  }
  if (!FLAGS_use_existing_db && !MayReplace(db_path_, &error)) {
    std::fprintf(stderr,
                 "fenced_bench: refusing --db %s: %s\n"
                 "fenced_bench destroys only a fencedkv database or one it "
                 "made with --fenced=false; give a new or empty directory. "
                 "Nothing was changed.\n",
                 db_path_.c_str(), error.c_str());
    return 1;
  }
  if (FLAGS_use_existing_db && !StoreExists(db_path_)) {
    // As db_bench (create_if_missing is false): nothing is created.
    std::fprintf(stderr, "fenced_bench: --use_existing_db: no database at %s\n",
                 db_path_.c_str());
    return 1;
  }
  if (FLAGS_report_interval_seconds > 0) {
    // An unwritable path is refused now, before anything runs; opened for
    // appending, so that the check changes nothing (each benchmark's
    // reporter writes the file anew, as db_bench's does).
    std::FILE* f = std::fopen(FLAGS_report_file.c_str(), "a");
    if (f == nullptr) {
      std::fprintf(stderr, "Can't open %s: %s\n", FLAGS_report_file.c_str(),
                   std::strerror(errno));
      return 1;
    }
    std::fclose(f);
  }
  PrintHeader();
  if (tracking)
    tracker_ = std::make_unique<Tracker>(static_cast<uint64_t>(num_));

  for (const Planned& p : plan) {
    const std::string& name = p.name;
    const int repeat = p.repeat, warmup = p.warmup;
    const Method method = p.info->method;
    const bool fresh_db = p.info->fresh_db;
    const bool fenced_only = p.info->fenced_only;
    const bool extra_writer = p.info->extra_writer;
    const int threads = p.info->one_thread ? 1 : FLAGS_threads;
    Message message = p.info->message;
    if (message == Message::kNone && FLAGS_stale_write_percent > 0) {
      message = Message::kAcceptReject;
    }
    if (fresh_db) {
      if (FLAGS_use_existing_db) {
        std::fprintf(stdout, "%-12s : skipped (--use_existing_db is true)\n",
                     name.c_str());
        continue;
      }
      Close();
      if (!DestroyStore(db_path_, &error)) {
        std::fprintf(stderr, "cannot destroy %s: %s\n", db_path_.c_str(),
                     error.c_str());
        return 1;
      }
      if (tracker_)
        tracker_ = std::make_unique<Tracker>(static_cast<uint64_t>(num_));
    }
    if (store_ == nullptr && !Open(&error)) {
      std::fprintf(stderr, "open %s: %s\n", db_path_.c_str(), error.c_str());
      return 1;
    }
    if (fenced_only && !FLAGS_fenced) {
      std::fprintf(stdout, "%-12s : not applicable with --fenced=false\n",
                   name.c_str());
      continue;
    }
    if (p.info->method == &Benchmark::Contended || (holders_ > 1 && !strict_)) {
      InitHolders();
    }
    if (method == &Benchmark::MultiReadRandom) {  // as db_bench
      std::fprintf(stderr, "entries_per_batch = %d\n", batch_size_);
    }
    std::fprintf(stdout, "DB path: [%s]\n", db_path_.c_str());
    if (warmup > 0)
      std::printf("Warming up benchmark by running %d times\n", warmup);
    for (int i = 0; i < warmup; ++i) {
      RunBenchmark(threads, name, method, extra_writer, message);
    }
    if (repeat > 1) std::printf("Running benchmark for %d times\n", repeat);
    std::vector<double> ops, mbs;
    for (int i = 0; i < repeat; ++i) {
      Stats s = RunBenchmark(threads, name, method, extra_writer, message);
      ops.push_back(s.ops_per_sec());
      mbs.push_back(s.mb_per_sec());
    }
    if (repeat > 1) {
      // db_bench's CombinedStats::Report.
      auto avg = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return s / static_cast<double>(v.size());
      };
      auto sd = [&](const std::vector<double>& v) {
        const double m = avg(v);
        double s = 0;
        for (double x : v) s += (x - m) * (x - m);
        return std::sqrt(s / static_cast<double>(v.size() - 1));
      };
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const size_t n = v.size();
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
      };
      std::printf(
          "%s [AVG %d runs] : %d (\xC2\xB1 %d) ops/sec; %6.1f (\xC2\xB1 %.1f) "
          "MB/sec\n",
          name.c_str(), repeat, static_cast<int>(avg(ops)),
          static_cast<int>(sd(ops)), avg(mbs), sd(mbs));
      std::printf("%s [MEDIAN %d runs] : %d ops/sec; %6.1f MB/sec\n",
                  name.c_str(), repeat, static_cast<int>(median(ops)),
                  median(mbs));
    }
    if (exit_code_ != 0) break;
  }
  if (FLAGS_statistics) {  // as db_bench, after the last benchmark
    std::fprintf(stdout, "STATISTICS:\n%s\n",
                 store_options_.options.statistics->ToString().c_str());
  }
  // The memory figure: peak RSS against the fence cache budget.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      const double kb = std::strtod(line.c_str() + 6, nullptr);
      std::printf("Peak RSS:   %.1f MB (VmHWM)", kb / 1024.0);
      if (FLAGS_fenced && store_ != nullptr) {
        const std::string st = store_->Property("fencedkv.stats");
        const size_t p = st.find("fence_cache_bytes: ");
        const double used = p == std::string::npos
                                ? 0
                                : std::strtod(st.c_str() + p + 19, nullptr);
        std::printf(
            "; fence cache %.1f MB used of %.1f MB budget", used / 1048576.0,
            static_cast<double>(store_options_.options.fence_cache_bytes) /
                1048576.0);
      }
      std::printf("\n");
    }
  }
  Close();
  return exit_code_;
}

}  // namespace bench

int FencedBenchTool(int argc, char** argv) {
  gflags::SetUsageMessage(
      "fenced_bench: db_bench-style benchmark of fencedkv.\n"
      "  fenced_bench --benchmarks=fillrandom,readrandom --num=1000000\n"
      "  fenced_bench --fenced=false ...   (the same workloads on raw "
      "RocksDB)");
  gflags::SetVersionString(FENCEDKV_VERSION_STRING);
  NarrowHelpToModule(argc, argv, "fenced_bench_tool");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) {
    std::fprintf(stderr,
                 "fenced_bench: unexpected argument '%s' (see --help)\n",
                 argv[1]);
    return 1;
  }
  if (FLAGS_stats_interval_seconds > 0) {
    // As db_bench: the clock is looked at every 1000 ops.
    FLAGS_stats_interval = 1000;
  }
  if (FLAGS_seed == 0) {
    FLAGS_seed = static_cast<int64_t>(bench::NowMicros());
    std::printf("Set seed to %" PRId64 " because --seed was 0\n", FLAGS_seed);
  }
  if (FLAGS_key_size < 20 &&
      static_cast<double>(FLAGS_num) > std::pow(10.0, FLAGS_key_size)) {
    std::fprintf(stderr,
                 "Invalid value for --key_size: %d digits cannot hold %" PRId64
                 " distinct keys\n",
                 FLAGS_key_size, FLAGS_num);
    return 1;
  }
  bench::PrintEnvironment();
  bench::Benchmark benchmark;
  return benchmark.Run();
}

}  // namespace fencedkv
