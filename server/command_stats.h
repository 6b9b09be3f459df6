// Copyright (c) fencedkv authors.
//
// Per-command counters for INFO commandstats / latencystats / errorstats
// and /metrics: calls, time, rejected and failed calls, a latency histogram
// per command, and error replies by their code (STALE, NOAUTH, ...).
//
// The hot path bumps relaxed atomics in the recording thread's shard (no
// lock, no shared cache line between io threads); readers sum the shards.
// A reader's totals are not a snapshot across counters (a call may show in
// `calls` before its `usec`).
//
// Memory: kShards x commands x (kBuckets + 4) x 8 bytes, about 0.7 MiB for
// the server's table, allocated zeroed at start (pages are touched only by
// the shards and buckets that get used).
//
// Thread-safe.

#ifndef FENCEDKV_SERVER_COMMAND_STATS_H_
#define FENCEDKV_SERVER_COMMAND_STATS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace fencedkv {
namespace server {

class CommandStats {
 public:
  static constexpr size_t kShards = 8;
  // The latency histogram (microseconds): one bucket per value below 16,
  // then 8 buckets per power of two (each at most 12.5% wide) up to 2^32
  // us (71 minutes); longer calls go in the last bucket.
  static constexpr size_t kExactBuckets = 16;
  static constexpr size_t kSubBuckets = 8;
  static constexpr size_t kBuckets = kExactBuckets + (32 - 4) * kSubBuckets + 1;

  // The error codes counted apart (the first word of the error line); any
  // other goes under "ERR" if it starts so, else kOtherError.
  enum ErrorCode : uint8_t {
    kErrErr,
    kErrStale,
    kErrNoFence,
    kErrTokenSkew,
    kErrNoAuth,
    kErrNoPerm,
    kErrWrongPass,
    kErrLeased,
    kErrLeaseLost,
    kErrBusy,
    kErrExecAbort,
    kErrShutdown,
    kErrNoProto,
    kOtherError,
    kNumErrorCodes,
  };
  // The code's name as Redis' errorstats prints it ("STALE"); "OTHER" for
  // kOtherError.
  static const char* ErrorCodeName(ErrorCode code);
  // The code of an error line ("STALE token 7 < ..." or "-STALE ...").
  static ErrorCode ClassifyError(std::string_view line);

  // Counters for `commands` commands (indexes into AllCommands()).
  explicit CommandStats(size_t commands);
  ~CommandStats();
  CommandStats(const CommandStats&) = delete;
  CommandStats& operator=(const CommandStats&) = delete;

  size_t commands() const { return commands_; }

  // A call of `command` that ran for `usec`; `failed` if it answered an
  // error.
  void Record(size_t command, uint64_t usec, bool failed);
  // A call refused before it ran (ACL, arity, login): Redis'
  // rejected_calls.
  void Reject(size_t command);
  // An error reply; `write`: the command was a write (a refused write, by
  // reason, for /metrics).
  void NoteError(ErrorCode code, bool write);

  struct Totals {
    uint64_t calls = 0;
    uint64_t usec = 0;
    uint64_t rejected = 0;
    uint64_t failed = 0;
    std::vector<uint64_t> histogram;  // kBuckets counts, if asked for
  };
  Totals Get(size_t command, bool with_histogram) const;
  // Errors of `code` (all commands), and those of write commands.
  uint64_t Errors(ErrorCode code) const;
  uint64_t WriteErrors(ErrorCode code) const;

  // The p-th quantile (p in 0..1) of the calls in `histogram`, in us: the
  // largest value of the bucket holding it (exact below 16 us, at most
  // 12.5% above the true value beyond). 0 if empty.
  static double Percentile(const std::vector<uint64_t>& histogram, double p);
  // The bucket of a latency, and a bucket's upper bound (us, exclusive).
  static size_t Bucket(uint64_t usec);
  static uint64_t BucketUpperBound(size_t bucket);

  // CONFIG RESETSTAT: every counter back to 0 (calls recorded meanwhile
  // may be half kept).
  void Reset();

 private:
  struct Counters {
    std::atomic<uint64_t> calls;
    std::atomic<uint64_t> usec;
    std::atomic<uint64_t> rejected;
    std::atomic<uint64_t> failed;
    std::atomic<uint64_t> histogram[kBuckets];
  };
  struct alignas(64) ErrorCounters {
    std::atomic<uint64_t> all[kNumErrorCodes];
    std::atomic<uint64_t> writes[kNumErrorCodes];
  };
  Counters& At(size_t shard, size_t command) const {
    return counters_[shard * commands_ + command];
  }
  static size_t LocalShard();

  const size_t commands_;
  Counters* counters_;  // kShards x commands_, calloc'ed
  ErrorCounters errors_[kShards];
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_COMMAND_STATS_H_
