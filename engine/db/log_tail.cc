// Copyright (c) fencedkv authors.

#include "db/log_tail.h"

#include <algorithm>
#include <iterator>

#include "util/coding.h"

namespace fencedkv {

LogTail::LogTail(size_t capacity) : capacity_(capacity) {}

void LogTail::AddReader() { readers_.fetch_add(1, std::memory_order_acq_rel); }

void LogTail::RemoveReader() {
  if (readers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    MutexLock lock(&mu_);
    if (readers_.load(std::memory_order_acquire) == 0) {
      entries_.clear();
      bytes_ = 0;
      start_ = 0;
      floor_ = 0;
    }
  }
}

void LogTail::Append(std::string_view batch) {
  // Nobody reads: keep nothing. (A reader created meanwhile starts on the
  // WAL and moves here once the tail holds where it is.)
  if (readers_.load(std::memory_order_acquire) == 0) return;
  if (batch.size() < 12) return;
  const uint64_t first = DecodeFixed64(batch.data());
  const uint64_t count = DecodeFixed32(batch.data() + 8);
  if (count == 0) return;  // took no sequence number
  // The copy outside the lock.
  auto data = std::make_shared<const std::string>(batch);
  MutexLock lock(&mu_);
  if (start_ == 0) {
    if (first <= floor_) return;  // before a Reset's published sequence
    start_ = first;
  }
  if (first < start_) return;  // (evicted past, or before the start)
  // In sequence order; a concurrent writer's Append may come late.
  auto at = entries_.end();
  while (at != entries_.begin() && std::prev(at)->first > first) --at;
  if (at != entries_.begin() && std::prev(at)->first == first) return;
  entries_.insert(at, Entry{first, count, std::move(data)});
  bytes_ += batch.size();
  ++stats_.appended;
  while (bytes_ > capacity_ && entries_.size() > 1) {
    const Entry& oldest = entries_.front();
    start_ = oldest.first + oldest.count;
    bytes_ -= oldest.data->size();
    entries_.pop_front();
  }
  if (waiters_ > 0) cv_.notify_all();
}

void LogTail::Reset(uint64_t published) {
  MutexLock lock(&mu_);
  if (published > floor_) floor_ = published;
  if (start_ == 0 && entries_.empty()) return;
  entries_.clear();
  bytes_ = 0;
  start_ = 0;
  ++stats_.resets;
  if (waiters_ > 0) cv_.notify_all();  // what they wait for is not coming
}

LogTail::Found LogTail::Find(uint64_t sequence, std::chrono::microseconds wait,
                             std::shared_ptr<const std::string>* batch) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  MutexLock lock(&mu_);
  bool waited = false;
  while (true) {
    if (start_ == 0 || sequence < start_) break;
    auto at = std::lower_bound(
        entries_.begin(), entries_.end(), sequence,
        [](const Entry& e, uint64_t s) { return e.first < s; });
    if (at != entries_.end() && at->first == sequence) {
      *batch = at->data;
      ++stats_.found;
      return Found::kBatch;
    }
    if (at != entries_.begin() &&
        std::prev(at)->first + std::prev(at)->count > sequence) {
      break;  // inside a batch: not where one starts
    }
    // Covered, not appended yet: its write is on its way here.
    if (std::chrono::steady_clock::now() >= deadline) return Found::kPending;
    if (!waited) ++stats_.waited;
    waited = true;
    ++waiters_;
    cv_.wait_until(mu_, deadline);
    --waiters_;
  }
  ++stats_.missed;
  return Found::kNotHeld;
}

LogTail::Stats LogTail::GetStats() const {
  MutexLock lock(&mu_);
  Stats st = stats_;
  st.bytes = bytes_;
  st.batches = entries_.size();
  return st;
}

}  // namespace fencedkv
