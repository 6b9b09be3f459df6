// Copyright (c) fencedkv authors.

#include "db/log_tail.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "util/coding.h"
#include "util/sync_point.h"

namespace fencedkv {

LogTail::LogTail(size_t capacity, std::function<uint64_t()> published)
    : capacity_(capacity), published_(std::move(published)) {}

void LogTail::AddReader() {
  MutexLock lock(&mu_);
  // A write that found no reader skipped its Append after it published its
  // numbers and before this lock: they are at or below what is published
  // now, and the tail starts past them.
  if (readers_++ == 0) RestartLocked();
}

void LogTail::RemoveReader() {
  MutexLock lock(&mu_);
  if (--readers_ == 0) RestartLocked();
}

void LogTail::Reset() {
  MutexLock lock(&mu_);
  if (start_ != 0 || !entries_.empty()) ++stats_.resets;
  RestartLocked();
}

void LogTail::RestartLocked() {
  // Read under the lock: every write whose Append has not yet made its
  // final decision (below) decides after this, and every such write
  // published its numbers before its Append began, so a write skipped
  // because of this restart is at or below the new floor.
  const uint64_t published = published_();
  if (published > floor_) floor_ = published;
  entries_.clear();
  bytes_ = 0;
  start_ = 0;
  ++generation_;
  if (waiters_ > 0) cv_.notify_all();  // what they wait for is not coming
}

void LogTail::Append(std::string_view head, std::string_view rest) {
  if (head.size() < 12) return;
  const uint64_t first = DecodeFixed64(head.data());
  const uint64_t count = DecodeFixed32(head.data() + 8);
  if (count == 0) return;  // took no sequence number
  bool lost = false;       // tests: a write path that forgot its Append
  TEST_SYNC_POINT_CALLBACK("LogTail::Append:Lose", &lost);
  if (lost) return;
  uint64_t generation;
  {
    // Nobody reads: keep nothing. (A reader added later starts the tail
    // past what is published then.)
    MutexLock lock(&mu_);
    if (readers_ == 0) return;
    generation = generation_;
  }
  // The copy outside the lock.
  std::string joined;
  joined.reserve(head.size() + rest.size());
  joined.append(head).append(rest);
  auto data = std::make_shared<const std::string>(std::move(joined));
  TEST_SYNC_POINT("LogTail::Append:Copied");
  MutexLock lock(&mu_);
  // Restarted meanwhile (a reset, the last reader gone): this batch was
  // published before, so it is at or below the new floor.
  if (generation != generation_) return;
  if (start_ == 0) {
    if (first <= floor_) return;
    start_ = first;
  }
  if (first < start_) return;  // (evicted past, or before the start)
  // In sequence order; a concurrent writer's Append may come late.
  auto at = entries_.end();
  while (at != entries_.begin() && std::prev(at)->first > first) --at;
  if (at != entries_.begin() && std::prev(at)->first == first) return;
  entries_.insert(at, Entry{first, count, std::move(data)});
  bytes_ += head.size() + rest.size() + kEntryOverhead;
  ++stats_.appended;
  while (bytes_ > capacity_ && entries_.size() > 1) {
    const Entry& oldest = entries_.front();
    start_ = oldest.first + oldest.count;
    bytes_ -= oldest.data->size() + kEntryOverhead;
    entries_.pop_front();
  }
  if (waiters_ > 0) cv_.notify_all();
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
