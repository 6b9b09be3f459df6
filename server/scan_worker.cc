// Copyright (c) fencedkv authors.

#include "scan_worker.h"

namespace fencedkv {
namespace server {

ScanWorker::ScanWorker() : thread_([this] { Run(); }) {}

ScanWorker::~ScanWorker() { Stop(); }

bool ScanWorker::Submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void ScanWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ScanWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopped, and nothing left to run
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace server
}  // namespace fencedkv
