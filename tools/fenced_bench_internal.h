// Copyright (c) fencedkv authors.
//
// Internals of fenced_bench shared by fenced_bench_tool.cc (flags, driver,
// report) and fenced_bench_workloads.cc (the workload bodies).

#ifndef FENCEDKV_TOOLS_FENCED_BENCH_INTERNAL_H_
#define FENCEDKV_TOOLS_FENCED_BENCH_INTERNAL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>

#include "bench_store.h"
#include "util/histogram.h"

DECLARE_string(benchmarks);
DECLARE_int64(num);
DECLARE_int64(reads);
DECLARE_int64(writes);
DECLARE_int64(deletes);
DECLARE_int32(threads);
DECLARE_int32(duration);
DECLARE_int32(key_size);
DECLARE_int32(value_size);
DECLARE_double(compression_ratio);
DECLARE_int32(batch_size);
DECLARE_int64(seed);
DECLARE_string(db);
DECLARE_bool(use_existing_db);
DECLARE_bool(histogram);
DECLARE_bool(sync);
DECLARE_bool(disable_wal);
DECLARE_bool(progress_reports);
DECLARE_int64(cache_size);
DECLARE_int32(bloom_bits);
DECLARE_string(compression_type);
DECLARE_int64(write_buffer_size);
DECLARE_int32(open_files);
DECLARE_int32(max_background_jobs);
DECLARE_int32(level0_file_num_compaction_trigger);
DECLARE_bool(statistics);
DECLARE_int64(stats_interval);
DECLARE_int64(stats_interval_seconds);
DECLARE_int64(report_interval_seconds);
DECLARE_string(report_file);
DECLARE_int32(readwritepercent);
DECLARE_int32(seek_nexts);
DECLARE_bool(fenced);
DECLARE_string(fence_domain);
DECLARE_string(fence_mode);
DECLARE_uint64(fence_floor);
DECLARE_int32(stale_write_percent);
DECLARE_int32(token_holders);
DECLARE_int32(token_renew_every);
DECLARE_int64(fence_cache_bytes);

namespace fencedkv {
namespace bench {

enum class OpType { kRead, kWrite, kDelete, kSeek, kOther };

inline uint64_t NowMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// db_bench's ReporterAgent: while a benchmark runs, a thread writes
// "secs_elapsed,interval_qps" lines to a CSV file every interval: the
// seconds since the start (rounded) and the ops all threads finished in
// that interval. Thread-safe.
class ReporterAgent {
 public:
  // Truncates `path` and writes the header line; ok() says whether it could.
  ReporterAgent(const std::string& path, uint64_t interval_secs);
  // Stops the thread (at most one more line is written) and closes the file.
  ~ReporterAgent();
  bool ok() const { return file_ != nullptr; }
  void ReportFinishedOps(int64_t n) {
    total_ops_done_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  void SleepAndReport();

  std::FILE* file_;
  const uint64_t interval_secs_;
  std::atomic<int64_t> total_ops_done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

// Per-thread measurements, merged at the end (db_bench's Stats). Not
// thread-safe: each thread has its own; the driver merges after the join.
class Stats {
 public:
  Stats() { Start(-1); }
  void Start(int id);
  // Every finished op is also counted there (--report_interval_seconds).
  void SetReporterAgent(ReporterAgent* agent) { reporter_ = agent; }
  void Stop() { finish_ = NowMicros(); }
  void Merge(const Stats& other);
  // Records n finished ops of `type` (latency measured since the last call
  // when --histogram is on) and prints progress on stderr: "... finished N
  // ops", or with --stats_interval[_seconds] db_bench's per-thread interval
  // lines.
  void FinishedOps(int64_t n, OpType type);
  void AddBytes(int64_t n) { bytes_ += n; }
  void AddMessage(const std::string& msg) { message_ = msg; }
  void SetExcludeFromMerge() { exclude_from_merge_ = true; }
  void ResetLastOpTime() { last_op_finish_ = NowMicros(); }
  // Prints the V2 result line (and histograms) to stdout.
  void Report(const std::string& name) const;

  uint64_t done() const { return done_; }
  double ops_per_sec() const;
  double mb_per_sec() const;

 private:
  int id_ = -1;
  uint64_t start_ = 0;
  uint64_t finish_ = 0;
  double seconds_ = 0;  // sum of per-thread elapsed time
  uint64_t done_ = 0;
  uint64_t last_report_done_ = 0;
  uint64_t next_report_ = 100;
  uint64_t bytes_ = 0;
  uint64_t last_op_finish_ = 0;
  uint64_t last_report_finish_ = 0;  // --stats_interval: last line's time
  ReporterAgent* reporter_ = nullptr;
  bool exclude_from_merge_ = false;
  std::string message_;
  Histogram hist_[5];  // by OpType
};

// Tracks, per key index, what the benchmark knows was accepted, so `verify`
// can check the store independently. Enabled only when `verify` is listed.
struct Tracker {
  explicit Tracker(uint64_t n) : max(n), put(n), del(n) {}
  static void RaiseTo(std::atomic<Token>& a, Token t) {
    Token cur = a.load(std::memory_order_relaxed);
    while (cur < t && !a.compare_exchange_weak(cur, t)) {
    }
  }
  // The max the store should hold: the highest token accepted, or advanced
  // to (t - 1 for a strict AdvanceFence(t)).
  std::vector<std::atomic<Token>> max;
  std::vector<std::atomic<Token>> put;  // highest token of an accepted put
  std::vector<std::atomic<Token>> del;  // highest token of an accepted delete
};

struct SharedState {
  std::mutex mu;
  std::condition_variable cv;
  int total = 0;
  int initialized = 0;
  bool start = false;
  int done = 0;
  std::atomic<int> readers_done{0};  // readwhilewriting: writer stops after
};

struct ThreadState {
  int tid;
  uint64_t rng_state;
  Stats stats;
  SharedState* shared;
  std::string value_buf;  // per-thread scratch value (token embedding)
  // Outcomes, summed after the run into the result line's message.
  uint64_t accepted = 0;
  uint64_t rejected = 0;
  uint64_t found = 0;
  uint64_t lookups = 0;

  uint64_t Next() {  // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t Uniform(uint64_t n) { return n == 0 ? 0 : Next() % n; }
};

// Compressible random values (db_bench's RandomGenerator).
class ValueGenerator {
 public:
  ValueGenerator(double compression_ratio, uint32_t seed, size_t value_size);
  std::string_view Generate(size_t len);

 private:
  std::string data_;
  std::atomic<size_t> pos_{0};
};

class Benchmark {
 public:
  using Method = void (Benchmark::*)(ThreadState*);
  // What the result line's message reports (summed over threads):
  //  kNone: nothing, or (accepted:N rejected:M) when a write was refused;
  //  kAcceptReject: (accepted:N rejected:M);
  //  kFound: (F of N found[, S stale]);
  //  kReadWrite: readrandomwriterandom's ( reads:R writes:W total:T found:F).
  enum class Message { kNone, kAcceptReject, kFound, kReadWrite };
  // One entry of the benchmark table.
  struct Info {
    const char* name;
    Method method;
    bool fresh_db;      // destroys and recreates the database first
    bool fenced_only;   // "not applicable" with --fenced=false
    bool extra_writer;  // one more thread, which writes (not reported)
    bool one_thread;    // ignores --threads
    Message message;
  };
  // The table entry of a benchmark name (without [X..-W..]), or nullptr.
  static const Info* Find(const std::string& name);

  Benchmark();
  ~Benchmark();
  // Runs every benchmark in --benchmarks; returns the exit code. An unknown
  // benchmark is refused before anything runs.
  int Run();

  // One entry of --benchmarks, resolved.
  struct Planned {
    std::string name;
    int repeat, warmup;
    const Info* info;
  };
  // Tokens that a run the length of a --duration, or readwhilewriting's
  // writer (which writes until the readers finish), may take: they have no
  // bound, so TokensNeeded keeps this many for them (2^40: 30 hours at 10
  // million tokens a second).
  static constexpr uint64_t kOpenEndedTokens = uint64_t{1} << 40;
  // The most tokens above the floor that `plan` may take (saturating at
  // 2^64-1); *open_ended: some of them are kOpenEndedTokens. Each Open of
  // the store takes one (the new holder's epoch), each lease renewal and
  // AdvanceFence one, and in strict mode each write one; the highest token
  // then is the floor plus this (strict mode: plus this less one).
  uint64_t TokensNeeded(const std::vector<Planned>& plan,
                        bool* open_ended) const;

 private:
  bool Open(std::string* error);
  void Close() { store_.reset(); }
  void PrintHeader() const;
  Stats RunBenchmark(int n, const std::string& name, Method method,
                     bool extra_writer, Message message);
  static void ThreadBody(Benchmark* bm, ThreadState* thread, Method method);

  // Keys are --key_size decimal digits, zero padded.
  std::string Key(uint64_t i) const;
  // The value for a write with `token`: the generator's bytes with the token
  // in the first 8 when verification is on.
  std::string_view Value(ThreadState* thread, Token token);
  Token WriteToken();     // the token the current holder writes with
  Token StaleToken();     // older than every token written this run
  Token NewLeaseToken();  // a new holder's token: above all issued so far
  // The token of a write of `key` (--token_holders): one holder's token
  // (WriteToken() with one holder or in strict mode). Now and then that
  // holder renews its lease and takes a new token (--token_renew_every).
  Token HolderToken(ThreadState* thread, std::string_view key);
  // Gives every holder its first token (once; before threads start).
  void InitHolders();
  // Counts a write outcome; an error ends the run (exit code 1).
  bool CountWrite(ThreadState* thread, Outcome o, const char* what);
  bool Fatal(Outcome o, const char* what);
  void Track(uint64_t key_index, Token token, bool is_delete, bool advance);

  // One Put of key `idx` with `token`: counted, tracked for verify, bytes
  // (unless !add_bytes) and op recorded. False after a store error (the run
  // then ends).
  bool PutOne(ThreadState* thread, uint64_t idx, Token token,
              bool add_bytes = true);

  // Workloads (fenced_bench_workloads.cc).
  void DoWrite(ThreadState* thread, bool sequential, int batch);
  void FillSeq(ThreadState* thread) { DoWrite(thread, true, batch_size_); }
  void FillRandom(ThreadState* thread) { DoWrite(thread, false, batch_size_); }
  void FencedBatch(ThreadState* thread) { DoWrite(thread, false, batch_size_); }
  // db_bench's fillbatch: sequential keys, 1000 per atomic batch.
  void FillBatch(ThreadState* thread) { DoWrite(thread, true, 1000); }
  void ReadRandom(ThreadState* thread);
  void SeekRandom(ThreadState* thread);
  void MultiReadRandom(ThreadState* thread);
  void ReadRandomWriteRandom(ThreadState* thread);
  void FencedRead(ThreadState* thread);
  void ReadSeq(ThreadState* thread);
  void DeleteRandom(ThreadState* thread);
  void ReadWhileWriting(ThreadState* thread);
  void StaleWrite(ThreadState* thread);
  void AdvanceFence(ThreadState* thread);
  void Contended(ThreadState* thread);
  void Compact(ThreadState* thread);
  void PrintStats(ThreadState* thread);
  void Verify(ThreadState* thread);

  StoreOptions store_options_;
  std::string db_path_;
  std::unique_ptr<BenchStore> store_;
  std::unique_ptr<ValueGenerator> values_;
  std::unique_ptr<Tracker> tracker_;
  bool strict_ = false;
  int64_t num_;
  int64_t reads_;
  int64_t writes_;
  int64_t deletes_;
  int batch_size_;
  FenceDomainSpec spec_;         // --fence_domain: which holder owns a key
  std::atomic<Token> epoch_{1};  // the current holder's token
  std::atomic<Token> strict_counter_{1};  // strict mode: one token per write
  // Lease holders: a write of a domain takes its holder's token (holders_ of
  // them; contended_holders_ in contended). Tokens only rise.
  size_t holders_;
  size_t contended_holders_;
  std::vector<std::atomic<Token>> holder_tokens_;
  Token first_holder_token_ = 0;  // 0 until InitHolders
  std::atomic<Token> lease_counter_{1};
  int exit_code_ = 0;
};

}  // namespace bench
}  // namespace fencedkv

#endif  // FENCEDKV_TOOLS_FENCED_BENCH_INTERNAL_H_
