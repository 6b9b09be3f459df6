// Copyright (c) fencedkv authors.

#include "scan_worker.h"

#include "util/thread_name.h"

namespace fencedkv {
namespace server {

ScanWorker::ScanWorker(const char* name)
    : thread_([this, name] {
        SetThreadName(name);
        Run();
      }) {}

ScanWorker::~ScanWorker() { Stop(); }

bool ScanWorker::Submit(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    if (stop_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void ScanWorker::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ScanWorker::Run() {
  mu_.Lock();
  while (true) {
    while (!stop_ && queue_.empty()) cv_.wait(mu_);
    if (queue_.empty()) break;  // stopped, and nothing left to run
    {
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      job();
      // Destroyed here, unlocked: what it holds may be the last reference
      // to a connection, whose destructor submits a job (its parked SCAN
      // iterators' disposal). Under mu_ that deadlocked this thread, and
      // then every loop that queued a scan.
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace server
}  // namespace fencedkv
