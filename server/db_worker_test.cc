// Copyright (c) fencedkv authors.
//
// The database thread (DbWorker) and the scan thread (ScanWorker) on their
// own, with a real DB: group commit of the writes queued meanwhile, the
// order of reads and writes, each batch's own status, the bound on queued
// reads, and Stop with jobs still queued.

#include "db_worker.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "scan_worker.h"
#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace server {
namespace {

// A gate a job waits at until the test opens it.
class Latch {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What the jobs did, in order (they run on the worker thread).
class Log {
 public:
  void Add(std::string event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
    cv_.notify_all();
  }
  // Waits until `n` events are in; returns them.
  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10),
                 [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

std::string Render(const std::vector<Status>& statuses) {
  std::string out;
  for (const Status& s : statuses) {
    if (!out.empty()) out += ",";
    out += s.ok() ? "OK" : s.ToString();
  }
  return out;
}

class DbWorkerTest : public testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.create_if_missing = true;
    ASSERT_FENCEDKV_OK(DB::Open(o, dir_.path(), &db_));
    SyncPoint::Get()->SetCallback("Server::WriteGroup:Result",
                                  [this](void*) { groups_.fetch_add(1); });
    SyncPoint::Get()->EnableProcessing();
  }
  void TearDown() override {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }

  std::string Get(const std::string& key) {
    std::string v;
    Status s = db_->Get(ReadOptions(), key, &v);
    return s.ok() ? v : s.ToString();
  }

  test::TempDir dir_;
  std::unique_ptr<DB> db_;
  std::atomic<int> groups_{0};
};

WriteBatch Puts(std::vector<std::pair<std::string, std::string>> kvs,
                Token token) {
  WriteBatch b;
  for (const auto& [k, v] : kvs) b.Put(k, v, token);
  return b;
}

// Writes queued while the worker is busy go out as one DB::WriteGroup (one
// RocksDB write, one fsync with --sync), each batch with its own status: a
// stale one is refused, the others apply.
TEST_F(DbWorkerTest, QueuedWritesAreOneGroupEachBatchOnItsOwn) {
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "fenced", "v", 10));
  DbWorker worker(db_.get(), WriteOptions());
  Latch latch;
  std::atomic<bool> holding{false};
  ASSERT_TRUE(worker.TrySubmitRead([&] {
    holding = true;
    latch.Wait();
  }));
  while (!holding) std::this_thread::yield();
  const int groups_before = groups_.load();
  WriteBatch a = Puts({{"a", "1"}}, 5);
  WriteBatch stale = Puts({{"fenced", "late"}}, 9);
  WriteBatch b = Puts({{"b", "2"}, {"c", "3"}}, 5);
  WriteBatch d = Puts({{"d", "4"}}, 5);
  Log log;
  worker.SubmitWrite({&a, &stale}, [&](std::vector<Status> st) {
    log.Add("job1 " + Render(st));
  });
  worker.SubmitWrite(
      {&b}, [&](std::vector<Status> st) { log.Add("job2 " + Render(st)); });
  worker.SubmitWrite(
      {&d}, [&](std::vector<Status> st) { log.Add("job3 " + Render(st)); });
  latch.Open();
  const std::vector<std::string> events = log.WaitFor(3);
  ASSERT_EQ(3u, events.size());
  EXPECT_EQ(
      "job1 OK,Stale token: token 9 < max 10 for domain \"fenced\" (batch "
      "op 0)",
      events[0]);
  EXPECT_EQ("job2 OK", events[1]);
  EXPECT_EQ("job3 OK", events[2]);
  EXPECT_EQ(1, groups_.load() - groups_before) << "one write for three jobs";
  EXPECT_EQ("1", Get("a"));
  EXPECT_EQ("3", Get("c"));
  EXPECT_EQ("v", Get("fenced"));
}

// Jobs run in the order queued: a read queued between two writes sees the
// first and not the second. A read is refused (the caller reads itself)
// once two jobs wait.
TEST_F(DbWorkerTest, ReadsAndWritesKeepTheirOrder) {
  DbWorker worker(db_.get(), WriteOptions());
  Latch latch;
  std::atomic<bool> holding{false};
  ASSERT_TRUE(worker.TrySubmitRead([&] {
    holding = true;
    latch.Wait();
  }));
  while (!holding) std::this_thread::yield();
  WriteBatch w1 = Puts({{"k", "first"}}, 1);
  WriteBatch w2 = Puts({{"k", "second"}}, 2);
  Log log;
  worker.SubmitWrite(
      {&w1}, [&](std::vector<Status> st) { log.Add("w1 " + Render(st)); });
  ASSERT_TRUE(worker.TrySubmitRead([&] { log.Add("read " + Get("k")); }));
  worker.SubmitWrite(
      {&w2}, [&](std::vector<Status> st) { log.Add("w2 " + Render(st)); });
  EXPECT_FALSE(worker.TrySubmitRead([&] { log.Add("refused read ran"); }))
      << "three jobs wait: a read must not queue behind them";
  latch.Open();
  const std::vector<std::string> events = log.WaitFor(3);
  EXPECT_EQ((std::vector<std::string>{"w1 OK", "read first", "w2 OK"}), events);
  EXPECT_EQ("second", Get("k"));
}

// A group that fails as a whole leaves no batch with an OK status, even if
// the engine left their statuses OK (FailUnmarkedBatches).
TEST_F(DbWorkerTest, AFailedGroupFailsEveryBatch) {
  Status statuses[3] = {Status::OK(), Status::Busy("own error"), Status::OK()};
  FailUnmarkedBatches(Status::IOError("disk"), statuses, 3);
  EXPECT_TRUE(statuses[0].IsIOError());
  EXPECT_TRUE(statuses[1].IsBusy()) << "a batch's own error is kept";
  EXPECT_TRUE(statuses[2].IsIOError());
  FailUnmarkedBatches(Status::OK(), statuses, 3);  // nothing to do
  EXPECT_TRUE(statuses[0].IsIOError());

  SyncPoint::Get()->SetCallback("Server::WriteGroup:Result", [](void* arg) {
    *static_cast<Status*>(arg) = Status::IOError("injected group error");
  });
  DbWorker worker(db_.get(), WriteOptions());
  WriteBatch a = Puts({{"a", "1"}}, 1);
  WriteBatch b = Puts({{"b", "1"}}, 1);
  Log log;
  worker.SubmitWrite({&a, &b},
                     [&](std::vector<Status> st) { log.Add(Render(st)); });
  EXPECT_EQ((std::vector<std::string>{
                "IO error: injected group error,IO error: injected group "
                "error"}),
            log.WaitFor(1));
}

// One group takes the queued jobs until it holds 4096 batches: a longer
// queue is written in more than one group.
TEST_F(DbWorkerTest, AGroupIsBounded) {
  DbWorker worker(db_.get(), WriteOptions());
  Latch latch;
  std::atomic<bool> holding{false};
  ASSERT_TRUE(worker.TrySubmitRead([&] {
    holding = true;
    latch.Wait();
  }));
  while (!holding) std::this_thread::yield();
  std::vector<WriteBatch> batches;
  for (int i = 0; i < 6000; ++i) {
    batches.push_back(Puts({{"k" + std::to_string(i), "v"}}, 1));
  }
  const int groups_before = groups_.load();
  Log log;
  for (int j = 0; j < 4; ++j) {
    std::vector<const WriteBatch*> job;
    for (int i = j * 1500; i < (j + 1) * 1500; ++i) job.push_back(&batches[i]);
    worker.SubmitWrite(std::move(job), [&, j](std::vector<Status> st) {
      log.Add("job" + std::to_string(j) + " " + std::to_string(st.size()));
    });
  }
  latch.Open();
  EXPECT_EQ((std::vector<std::string>{"job0 1500", "job1 1500", "job2 1500",
                                      "job3 1500"}),
            log.WaitFor(4));
  // 1500 + 1500 + 1500 reach the bound: the fourth job is a group of its
  // own.
  EXPECT_EQ(2, groups_.load() - groups_before);
  EXPECT_EQ("v", Get("k5999"));
}

// Stop runs the jobs still queued (their writes happen, their callbacks
// run) before it returns; afterwards a write is refused at once, on the
// caller's thread, and a read is not queued.
TEST_F(DbWorkerTest, StopRunsQueuedJobsThenRefuses) {
  DbWorker worker(db_.get(), WriteOptions());
  Latch latch;
  std::atomic<bool> holding{false};
  ASSERT_TRUE(worker.TrySubmitRead([&] {
    holding = true;
    latch.Wait();
  }));
  while (!holding) std::this_thread::yield();
  WriteBatch w1 = Puts({{"q1", "v"}}, 1);
  WriteBatch w2 = Puts({{"q2", "v"}}, 1);
  Log log;
  worker.SubmitWrite(
      {&w1}, [&](std::vector<Status> st) { log.Add("w1 " + Render(st)); });
  worker.SubmitWrite(
      {&w2}, [&](std::vector<Status> st) { log.Add("w2 " + Render(st)); });
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    worker.Stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(stopped.load()) << "Stop returned with jobs still queued";
  latch.Open();
  stopper.join();
  EXPECT_EQ((std::vector<std::string>{"w1 OK", "w2 OK"}), log.WaitFor(2));
  EXPECT_EQ("v", Get("q1"));
  EXPECT_EQ("v", Get("q2"));

  WriteBatch late = Puts({{"late", "v"}}, 1);
  std::thread::id ran_on;
  std::string late_status;
  worker.SubmitWrite({&late}, [&](std::vector<Status> st) {
    ran_on = std::this_thread::get_id();
    late_status = Render(st);
  });
  EXPECT_EQ(std::this_thread::get_id(), ran_on);
  EXPECT_EQ("Shutdown: the server is shutting down", late_status);
  EXPECT_FALSE(worker.TrySubmitRead([] {}));
  EXPECT_EQ("NotFound: ", Get("late").substr(0, 10));
  worker.Stop();  // idempotent
}

// The scan thread runs its jobs one at a time, in order, off the caller's
// thread; Stop runs what is queued; nothing is queued after it.
TEST(ScanWorkerTest, OneAtATimeInOrderAndStopDrains) {
  ScanWorker worker;
  Latch latch;
  std::atomic<int> running{0};
  std::atomic<int> overlap{0};
  Log log;
  const std::thread::id caller = std::this_thread::get_id();
  ASSERT_TRUE(worker.Submit([&] { latch.Wait(); }));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(worker.Submit([&, i] {
      if (running.fetch_add(1) != 0) overlap.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      log.Add(std::to_string(i) +
              (std::this_thread::get_id() == caller ? " on caller" : ""));
      running.fetch_sub(1);
    }));
  }
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    worker.Stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(stopped.load());
  latch.Open();
  stopper.join();
  EXPECT_EQ((std::vector<std::string>{"0", "1", "2", "3", "4"}),
            log.WaitFor(5));
  EXPECT_EQ(0, overlap.load());
  bool ran = false;
  EXPECT_FALSE(worker.Submit([&] { ran = true; }));
  worker.Stop();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
