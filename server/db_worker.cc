// Copyright (c) fencedkv authors.

#include "db_worker.h"

#include <chrono>

#include "util/sync_point.h"
#include "util/thread_name.h"

namespace fencedkv {
namespace server {

namespace {
// Bounds one group (and so one RocksDB write and its latency).
constexpr size_t kMaxBatchesPerGroup = 4096;
// Jobs waiting at most for a read to be queued: enough that the worker never
// waits for the loop, few enough that the loop reads for itself when the
// worker is behind.
constexpr size_t kMaxQueuedReads = 2;
}  // namespace

void FailUnmarkedBatches(const Status& group, Status* statuses, size_t n) {
  if (group.ok()) return;
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].ok()) statuses[i] = group;
  }
}

void WriteGroupsBounded(DB* db, const WriteOptions& options,
                        const WriteBatch* const* batches, size_t n,
                        Status* statuses) {
  size_t first = 0;
  while (first < n) {
    size_t last = first;
    size_t bytes = 0;
    while (last < n && (last == first || bytes < kMaxGroupBytes)) {
      bytes += batches[last]->ApproximateSize();
      ++last;
    }
    Status s = db->WriteGroup(options, batches + first, last - first,
                              statuses + first);
    TEST_SYNC_POINT_CALLBACK("Server::WriteGroup:Result", &s);
    FailUnmarkedBatches(s, statuses + first, last - first);
    first = last;
  }
}

DbWorker::DbWorker(DB* db, const WriteOptions& options)
    : db_(db), options_(options), thread_([this] {
        SetThreadName("fencedkv:db");
        Run();
      }) {}

DbWorker::~DbWorker() { Stop(); }

void DbWorker::SubmitWrite(std::vector<const WriteBatch*> batches,
                           WriteDone done) {
  const size_t n = batches.size();
  {
    MutexLock lock(&mu_);
    if (!stop_) {
      const bool was_empty = queue_.empty();
      queue_.push_back(Job{std::move(batches), std::move(done), nullptr});
      if (was_empty) cv_.notify_one();
      return;
    }
  }
  done(std::vector<Status>(n, Status::Shutdown("the server is shutting down")));
}

bool DbWorker::TrySubmitRead(std::function<void()> read) {
  MutexLock lock(&mu_);
  if (stop_ || queue_.size() >= kMaxQueuedReads) return false;
  queue_.push_back(Job{{}, nullptr, std::move(read)});
  cv_.notify_one();
  return true;
}

bool DbWorker::Idle() {
  MutexLock lock(&mu_);
  return !running_ && queue_.empty();
}

void DbWorker::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void DbWorker::Run() {
  std::vector<Job> jobs;
  while (true) {
    jobs.clear();
    {
      MutexLock lock(&mu_);
      running_ = false;
      while (!stop_ && queue_.empty()) cv_.wait(mu_);
      if (queue_.empty()) return;  // stopped, and nothing left to run
      // Everything queued, in order, within the group bound.
      size_t n = 0;
      while (!queue_.empty() && n < kMaxBatchesPerGroup) {
        n += queue_.front().read ? 1 : queue_.front().batches.size();
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      running_ = true;
    }
    size_t i = 0;
    while (i < jobs.size()) {
      if (jobs[i].read) {
        jobs[i].read();
        ++i;
        continue;
      }
      size_t j = i;
      while (j < jobs.size() && !jobs[j].read) ++j;
      WriteJobs(&jobs, i, j);
      i = j;
    }
  }
}

void DbWorker::WriteJobs(std::vector<Job>* jobs, size_t first, size_t last) {
  ptrs_.clear();
  for (size_t k = first; k < last; ++k) {
    const auto& b = (*jobs)[k].batches;
    ptrs_.insert(ptrs_.end(), b.begin(), b.end());
  }
  statuses_.assign(ptrs_.size(), Status());
  const auto began = std::chrono::steady_clock::now();
  WriteGroupsBounded(db_, options_, ptrs_.data(), ptrs_.size(),
                     statuses_.data());
  last_write_nanos_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - began)
                              .count(),
                          std::memory_order_relaxed);
  size_t at = 0;
  for (size_t k = first; k < last; ++k) {
    Job& job = (*jobs)[k];
    const auto begin = statuses_.begin() + static_cast<long>(at);
    at += job.batches.size();
    job.done(std::vector<Status>(
        begin, begin + static_cast<long>(job.batches.size())));
  }
}

}  // namespace server
}  // namespace fencedkv
