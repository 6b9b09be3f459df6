// Copyright (c) fencedkv authors.

#include "scan_worker.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

namespace fencedkv {
namespace server {
namespace {

using std::chrono::seconds;

TEST(ScanWorkerTest, RunsJobsInOrder) {
  ScanWorker worker;
  std::promise<void> done;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(worker.Submit([&order, i] { order.push_back(i); }));
  }
  ASSERT_TRUE(worker.Submit([&done] { done.set_value(); }));
  ASSERT_EQ(done.get_future().wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

// What a job holds may be the last reference to something whose destructor
// queues a job of its own: a connection that closed while its SCAN ran
// (QUIT, a failed write) dies on the scan thread, and disposes of its
// parked iterators there by submitting. Destroyed with the worker's lock
// held, it deadlocked the scan thread, and then every io loop that queued
// a SCAN, KEYS or DBSIZE (found by an adversarial client: SCAN 0 COUNT 1,
// then DBSIZE and QUIT in one write).
struct SubmitsWhenDestroyed {
  SubmitsWhenDestroyed(ScanWorker* w, std::promise<void>* p)
      : worker(w), submitted(p) {}
  SubmitsWhenDestroyed(const SubmitsWhenDestroyed&) = delete;
  SubmitsWhenDestroyed& operator=(const SubmitsWhenDestroyed&) = delete;
  ScanWorker* worker;
  std::promise<void>* submitted;
  ~SubmitsWhenDestroyed() {
    worker->Submit([p = submitted] { p->set_value(); });
  }
};

TEST(ScanWorkerTest, AJobsStateMaySubmitWhenItIsDestroyed) {
  // A deadlock cannot be undone: past the deadline the process leaves
  // rather than hang until ctest's timeout.
  std::promise<void> finished;
  std::thread watchdog([f = finished.get_future()]() mutable {
    if (f.wait_for(seconds(20)) != std::future_status::ready) {
      std::fprintf(stderr,
                   "ScanWorkerTest: the scan thread deadlocked destroying a "
                   "job whose state submits a job\n");
      std::_Exit(1);
    }
  });
  {
    ScanWorker worker;
    std::promise<void> ran, submitted;
    auto state = std::make_shared<SubmitsWhenDestroyed>(&worker, &submitted);
    ASSERT_TRUE(
        worker.Submit([s = std::move(state), &ran] { ran.set_value(); }));
    ASSERT_EQ(ran.get_future().wait_for(seconds(10)),
              std::future_status::ready);
    // The job's state went with the job, and its own job ran.
    ASSERT_EQ(submitted.get_future().wait_for(seconds(10)),
              std::future_status::ready);
    // The worker still takes jobs.
    std::promise<void> later;
    ASSERT_TRUE(worker.Submit([&later] { later.set_value(); }));
    ASSERT_EQ(later.get_future().wait_for(seconds(10)),
              std::future_status::ready);
  }
  finished.set_value();
  watchdog.join();
}

TEST(ScanWorkerTest, RefusesJobsOnceStopped) {
  ScanWorker worker;
  worker.Stop();
  EXPECT_FALSE(worker.Submit([] {}));
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
