// Copyright (c) fencedkv authors.

#include "write_combiner.h"

#include <algorithm>

namespace fencedkv {
namespace server {

namespace {
// Bounds one group (and so one RocksDB write and its latency).
constexpr size_t kMaxBatchesPerGroup = 4096;
}  // namespace

WriteCombiner::WriteCombiner(DB* db, const WriteOptions& options,
                             int max_writers)
    : db_(db), options_(options), max_writers_(std::max(1, max_writers)) {}

WriteCombiner::~WriteCombiner() { Stop(); }

void WriteCombiner::Submit(std::vector<WriteBatch> batches, Done done) {
  const size_t n = batches.size();
  bool stopped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped = stop_;
    if (!stopped) {
      queue_.push_back(Job{std::move(batches), std::move(done)});
      if (writers_ >= max_writers_) return;  // a writer will take it
      ++writers_;
    }
  }
  if (stopped) {
    done(std::vector<Status>(n, Status::Shutdown("the server is shutting down")));
    return;
  }
  Drain();
}

void WriteCombiner::Stop() {
  std::unique_lock<std::mutex> lock(mu_);
  stop_ = true;
  cv_.wait(lock, [&] { return writers_ == 0; });
}

void WriteCombiner::Drain() {
  std::vector<Job> jobs;
  std::vector<const WriteBatch*> ptrs;
  std::vector<Status> statuses;
  while (true) {
    jobs.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) {
        --writers_;
        cv_.notify_all();
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
    for (const Job& j : jobs) {
      for (const WriteBatch& b : j.batches) ptrs.push_back(&b);
    }
    statuses.assign(ptrs.size(), Status());
    db_->WriteGroup(options_, ptrs.data(), ptrs.size(), statuses.data());
    groups_.fetch_add(1, std::memory_order_relaxed);
    batches_.fetch_add(ptrs.size(), std::memory_order_relaxed);
    size_t at = 0;
    for (Job& j : jobs) {
      std::vector<Status> mine(statuses.begin() + static_cast<long>(at),
                               statuses.begin() + static_cast<long>(at + j.batches.size()));
      at += j.batches.size();
      j.done(std::move(mine));
    }
  }
}

}  // namespace server
}  // namespace fencedkv
