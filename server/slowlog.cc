// Copyright (c) fencedkv authors.

#include "slowlog.h"

#include <chrono>

#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {

// Redis' cut of a long string: its first kMaxString bytes, then
// "... (N more bytes)".
std::string Cut(std::string_view s) {
  if (s.size() <= SlowLog::kMaxString) return std::string(s);
  return std::string(s.substr(0, SlowLog::kMaxString)) + "... (" +
         std::to_string(s.size() - SlowLog::kMaxString) + " more bytes)";
}

}  // namespace

void SlowLog::Configure(int64_t log_slower_than, size_t max_len) {
  slower_than_.store(log_slower_than, std::memory_order_relaxed);
  MutexLock lock(&mu_);
  max_len_ = max_len;
  while (entries_.size() > max_len_) entries_.pop_back();
}

void SlowLog::Add(uint64_t usec, size_t argc,
                  const std::function<std::string_view(size_t)>& arg,
                  std::string_view addr, std::string_view name) {
  Entry e;
  e.usec = usec;
  e.time = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  // As Redis: at most kMaxArgs, the last of them then counting the rest.
  const size_t kept = argc > kMaxArgs ? kMaxArgs : argc;
  e.argv.reserve(kept);
  for (size_t i = 0; i < kept; ++i) {
    if (i == kMaxArgs - 1 && argc > kMaxArgs) {
      e.argv.push_back("... (" + std::to_string(argc - kMaxArgs + 1) +
                       " more arguments)");
    } else {
      e.argv.push_back(Cut(arg(i)));
    }
  }
  e.addr = std::string(addr);
  e.name = Cut(name);
  MutexLock lock(&mu_);
  if (max_len_ == 0) return;
  e.id = next_id_++;
  entries_.push_front(std::move(e));
  while (entries_.size() > max_len_) entries_.pop_back();
}

void SlowLog::Reply(int64_t n, std::string* out) const {
  MutexLock lock(&mu_);
  const size_t count = n < 0 || static_cast<size_t>(n) > entries_.size()
                           ? entries_.size()
                           : static_cast<size_t>(n);
  resp::ArrayHeader(out, count);
  for (size_t i = 0; i < count; ++i) {
    const Entry& e = entries_[i];
    resp::ArrayHeader(out, 6);
    resp::UInteger(out, e.id);
    resp::Integer(out, e.time);
    resp::UInteger(out, e.usec);
    resp::ArrayHeader(out, e.argv.size());
    for (const auto& a : e.argv) resp::Bulk(out, a);
    resp::Bulk(out, e.addr);
    resp::Bulk(out, e.name);
  }
}

size_t SlowLog::Len() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

void SlowLog::Reset() {
  MutexLock lock(&mu_);
  entries_.clear();
}

}  // namespace server
}  // namespace fencedkv
