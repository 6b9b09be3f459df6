// Copyright (c) fencedkv authors.

#include "write_combiner.h"

#include <asio/post.hpp>

namespace fencedkv {
namespace server {

namespace {
// Bounds one group (and so one RocksDB write and its latency).
constexpr size_t kMaxBatchesPerGroup = 4096;
}  // namespace

WriteCombiner::WriteCombiner(DB* db, const WriteOptions& options)
    : db_(db), options_(options) {}

WriteCombiner::~WriteCombiner() { Stop(); }

void WriteCombiner::Submit(asio::io_context* home,
                           std::vector<const WriteBatch*> batches, Done done) {
  if (!options_.sync) {
    // No fsync to share: write here, concurrently with the other loops.
    std::vector<Status> st(batches.size());
    if (stopped_.load(std::memory_order_acquire)) {
      st.assign(st.size(), Status::Shutdown("the server is shutting down"));
    } else {
      db_->WriteGroup(options_, batches.data(), batches.size(), st.data());
      groups_.fetch_add(1, std::memory_order_relaxed);
      batches_.fetch_add(batches.size(), std::memory_order_relaxed);
    }
    done(std::move(st));
    return;
  }
  bool refused = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      refused = true;
    } else {
      queue_.push_back(Job{home, std::move(batches), std::move(done)});
      if (writing_) return;  // the writer takes it
      writing_ = true;
    }
  }
  if (refused) {
    done(std::vector<Status>(batches.size(),
                             Status::Shutdown("the server is shutting down")));
    return;
  }
  Drain(home);
}

void WriteCombiner::Stop() {
  stopped_.store(true, std::memory_order_release);
  std::unique_lock<std::mutex> lock(mu_);
  stop_ = true;
  if (handoff_pending_) {
    // The loop it was handed to may never run it again: write here.
    handoff_pending_ = false;
    lock.unlock();
    Drain(nullptr);
    lock.lock();
  }
  cv_.wait(lock, [&] { return !writing_; });
}

void WriteCombiner::TakeOver(asio::io_context* home) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!handoff_pending_) return;  // Stop() took it over
    handoff_pending_ = false;
  }
  Drain(home);
}

void WriteCombiner::Drain(asio::io_context* home) {
  std::vector<Job> jobs;
  std::vector<const WriteBatch*> ptrs;
  std::vector<Status> statuses;
  while (true) {
    jobs.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      asio::io_context* next = queue_.empty() ? nullptr : queue_.front().home;
      if (next == nullptr || (next != home && home != nullptr && !stop_)) {
        if (next == nullptr) {
          writing_ = false;
          cv_.notify_all();
        } else {
          // The next job is another loop's: hand the role over to it.
          handoff_pending_ = true;
          asio::post(*next, [this, next] { TakeOver(next); });
        }
        return;
      }
      size_t n = 0;
      while (!queue_.empty() &&
             (n == 0 || n + queue_.front().batches.size() <= kMaxBatchesPerGroup)) {
        n += queue_.front().batches.size();
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    ptrs.clear();
    for (const Job& j : jobs) ptrs.insert(ptrs.end(), j.batches.begin(), j.batches.end());
    statuses.assign(ptrs.size(), Status());
    db_->WriteGroup(options_, ptrs.data(), ptrs.size(), statuses.data());
    groups_.fetch_add(1, std::memory_order_relaxed);
    batches_.fetch_add(ptrs.size(), std::memory_order_relaxed);
    size_t at = 0;
    for (Job& j : jobs) {
      const auto first = statuses.begin() + static_cast<long>(at);
      at += j.batches.size();
      j.done(std::vector<Status>(first, first + static_cast<long>(j.batches.size())));
    }
  }
}

}  // namespace server
}  // namespace fencedkv
