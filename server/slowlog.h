// Copyright (c) fencedkv authors.
//
// The slow log (SLOWLOG GET / LEN / RESET), as Redis keeps it: the last
// max_len commands that ran for at least log_slower_than microseconds, each
// with an id, the unix time it ended, its duration, its arguments and the
// client's address and name.
//
// Bounded as Redis bounds it: at most 32 arguments per entry (the 32nd then
// says "... (N more arguments)"), each cut to 128 bytes ("... (N more
// bytes)"); the client's name is cut to 128 bytes too. So an entry holds at
// most about 5.5 KiB, and the log max_len of them (704 KiB at the default
// 128).
//
// Thread-safe: ShouldLog is a relaxed read; Add and the readers take a
// mutex (only slow commands reach it).

#ifndef FENCEDKV_SERVER_SLOWLOG_H_
#define FENCEDKV_SERVER_SLOWLOG_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

class SlowLog {
 public:
  static constexpr size_t kMaxArgs = 32;
  static constexpr size_t kMaxString = 128;

  // log_slower_than: us; negative disables the log, 0 logs every command.
  SlowLog(int64_t log_slower_than = 10000, size_t max_len = 128)
      : slower_than_(log_slower_than), max_len_(max_len) {}

  void Configure(int64_t log_slower_than, size_t max_len) LOCKS_EXCLUDED(mu_);

  bool ShouldLog(uint64_t usec) const {
    const int64_t t = slower_than_.load(std::memory_order_relaxed);
    return t >= 0 && usec >= static_cast<uint64_t>(t);
  }

  // Logs a command of `argc` arguments (arg(i) gives the i-th; only the
  // first kMaxArgs are asked for) that ran for `usec`.
  void Add(uint64_t usec, size_t argc,
           const std::function<std::string_view(size_t)>& arg,
           std::string_view addr, std::string_view name) LOCKS_EXCLUDED(mu_);

  // SLOWLOG GET's reply for the newest n entries (n < 0: all).
  void Reply(int64_t n, std::string* out) const LOCKS_EXCLUDED(mu_);
  size_t Len() const LOCKS_EXCLUDED(mu_);
  void Reset() LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    uint64_t id;
    int64_t time;  // unix seconds
    uint64_t usec;
    std::vector<std::string> argv;
    std::string addr;
    std::string name;
  };

  std::atomic<int64_t> slower_than_;
  mutable Mutex mu_;
  size_t max_len_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
  std::deque<Entry> entries_ GUARDED_BY(mu_);  // newest first
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SLOWLOG_H_
