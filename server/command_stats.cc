// Copyright (c) fencedkv authors.

#include "command_stats.h"

#include <cstdlib>
#include <new>

namespace fencedkv {
namespace server {

namespace {

constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

struct CodeName {
  std::string_view word;
  CommandStats::ErrorCode code;
};
constexpr CodeName kCodes[] = {
    {"ERR", CommandStats::kErrErr},
    {"STALE", CommandStats::kErrStale},
    {"NOFENCE", CommandStats::kErrNoFence},
    {"TOKENSKEW", CommandStats::kErrTokenSkew},
    {"NOAUTH", CommandStats::kErrNoAuth},
    {"NOPERM", CommandStats::kErrNoPerm},
    {"WRONGPASS", CommandStats::kErrWrongPass},
    {"LEASED", CommandStats::kErrLeased},
    {"LEASELOST", CommandStats::kErrLeaseLost},
    {"BUSY", CommandStats::kErrBusy},
    {"EXECABORT", CommandStats::kErrExecAbort},
    {"SHUTDOWN", CommandStats::kErrShutdown},
    {"NOPROTO", CommandStats::kErrNoProto},
};

}  // namespace

const char* CommandStats::ErrorCodeName(ErrorCode code) {
  for (const CodeName& c : kCodes) {
    if (c.code == code) return c.word.data();
  }
  return "OTHER";
}

CommandStats::ErrorCode CommandStats::ClassifyError(std::string_view line) {
  if (!line.empty() && line[0] == '-') line.remove_prefix(1);
  size_t end = 0;
  while (end < line.size() && line[end] != ' ' && line[end] != '\r') ++end;
  const std::string_view word = line.substr(0, end);
  for (const CodeName& c : kCodes) {
    if (c.word == word) return c.code;
  }
  return kOtherError;
}

CommandStats::CommandStats(size_t commands) : commands_(commands) {
  // calloc: zeroed pages the kernel maps only when first touched (an
  // atomic of all-zero bytes is a 0).
  void* p =
      std::calloc(kShards * (commands_ == 0 ? 1 : commands_), sizeof(Counters));
  if (p == nullptr) throw std::bad_alloc();
  counters_ = static_cast<Counters*>(p);
  for (ErrorCounters& e : errors_) {
    for (size_t i = 0; i < kNumErrorCodes; ++i) {
      e.all[i].store(0, kRelaxed);
      e.writes[i].store(0, kRelaxed);
    }
  }
}

CommandStats::~CommandStats() { std::free(counters_); }

size_t CommandStats::LocalShard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard = next.fetch_add(1) % kShards;
  return shard;
}

size_t CommandStats::Bucket(uint64_t usec) {
  if (usec < kExactBuckets) return static_cast<size_t>(usec);
  const int e = 63 - __builtin_clzll(usec);  // 4 .. 63
  if (e >= 32) return kBuckets - 1;
  const size_t sub = static_cast<size_t>(usec >> (e - 3)) & (kSubBuckets - 1);
  return kExactBuckets + static_cast<size_t>(e - 4) * kSubBuckets + sub;
}

uint64_t CommandStats::BucketUpperBound(size_t bucket) {
  if (bucket < kExactBuckets) return bucket + 1;
  if (bucket >= kBuckets - 1) return uint64_t{1} << 32;
  const size_t i = bucket - kExactBuckets;
  const int e = static_cast<int>(i / kSubBuckets) + 4;
  const uint64_t sub = i % kSubBuckets;
  return (uint64_t{1} << e) + ((sub + 1) << (e - 3));
}

void CommandStats::Record(size_t command, uint64_t usec, bool failed) {
  if (command >= commands_) return;
  Counters& c = At(LocalShard(), command);
  c.calls.fetch_add(1, kRelaxed);
  c.usec.fetch_add(usec, kRelaxed);
  if (failed) c.failed.fetch_add(1, kRelaxed);
  c.histogram[Bucket(usec)].fetch_add(1, kRelaxed);
}

void CommandStats::Reject(size_t command) {
  if (command >= commands_) return;
  At(LocalShard(), command).rejected.fetch_add(1, kRelaxed);
}

void CommandStats::NoteError(ErrorCode code, bool write) {
  ErrorCounters& e = errors_[LocalShard()];
  e.all[code].fetch_add(1, kRelaxed);
  if (write) e.writes[code].fetch_add(1, kRelaxed);
}

CommandStats::Totals CommandStats::Get(size_t command,
                                       bool with_histogram) const {
  Totals t;
  if (command >= commands_) return t;
  if (with_histogram) t.histogram.assign(kBuckets, 0);
  for (size_t s = 0; s < kShards; ++s) {
    const Counters& c = At(s, command);
    t.calls += c.calls.load(kRelaxed);
    t.usec += c.usec.load(kRelaxed);
    t.rejected += c.rejected.load(kRelaxed);
    t.failed += c.failed.load(kRelaxed);
    if (with_histogram && c.calls.load(kRelaxed) > 0) {
      for (size_t b = 0; b < kBuckets; ++b) {
        t.histogram[b] += c.histogram[b].load(kRelaxed);
      }
    }
  }
  return t;
}

uint64_t CommandStats::Errors(ErrorCode code) const {
  uint64_t n = 0;
  for (const ErrorCounters& e : errors_) n += e.all[code].load(kRelaxed);
  return n;
}

uint64_t CommandStats::WriteErrors(ErrorCode code) const {
  uint64_t n = 0;
  for (const ErrorCounters& e : errors_) n += e.writes[code].load(kRelaxed);
  return n;
}

double CommandStats::Percentile(const std::vector<uint64_t>& histogram,
                                double p) {
  uint64_t total = 0;
  for (uint64_t n : histogram) total += n;
  if (total == 0) return 0;
  // The rank of the p-th value (1-based), as HdrHistogram counts it.
  uint64_t rank = static_cast<uint64_t>(p * static_cast<double>(total) + 0.5);
  if (rank < 1) rank = 1;
  if (rank > total) rank = total;
  uint64_t seen = 0;
  for (size_t b = 0; b < histogram.size(); ++b) {
    seen += histogram[b];
    if (seen >= rank) return static_cast<double>(BucketUpperBound(b) - 1);
  }
  return static_cast<double>(BucketUpperBound(histogram.size() - 1) - 1);
}

void CommandStats::Reset() {
  for (size_t i = 0; i < kShards * commands_; ++i) {
    Counters& c = counters_[i];
    if (c.calls.load(kRelaxed) == 0 && c.rejected.load(kRelaxed) == 0) {
      continue;  // never touched: leave its pages alone
    }
    c.calls.store(0, kRelaxed);
    c.usec.store(0, kRelaxed);
    c.rejected.store(0, kRelaxed);
    c.failed.store(0, kRelaxed);
    for (auto& h : c.histogram) h.store(0, kRelaxed);
  }
  for (ErrorCounters& e : errors_) {
    for (size_t i = 0; i < kNumErrorCodes; ++i) {
      e.all[i].store(0, kRelaxed);
      e.writes[i].store(0, kRelaxed);
    }
  }
}

}  // namespace server
}  // namespace fencedkv
