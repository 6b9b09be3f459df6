// Copyright (c) fencedkv authors.
//
// Races, forced and random.
//  - The paused holder's race, forced with sync points instead of waited for:
//  holder A
//    (token 7) is paused inside the store while holder B (token 8) writes.
//  - A stress test: many threads, few hot domains, racing tokens; at the end
//    every domain's max is the highest accepted token, every key holds its
//    last accepted write, and no write was accepted after a newer token had
//    already been acknowledged on its domain.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "fencedkv/db.h"

#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {

namespace {

// A one-shot event.
class Event {
 public:
  void Notify() {
    std::lock_guard<std::mutex> l(mu_);
    set_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

std::unique_ptr<DB> OpenFresh(const test::TempDir& dir, const char* domain,
                              FenceMode mode = FenceMode::kMonotonic) {
  Options o;
  o.create_if_missing = true;
  o.fence_domain = domain;
  o.fence_mode = mode;
  std::unique_ptr<DB> db;
  Status s = DB::Open(o, dir.path(), &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

// Holder A, parked at a sync point of the write path until released: the
// "paused holder", forced instead of waited for.
class ParkedHolder {
 public:
  explicit ParkedHolder(const char* point) {
    SyncPoint::Get()->SetCallback(point, [this](void*) {
      if (std::this_thread::get_id() == thread_.load()) {
        parked_.Notify();
        release_.Wait();
      }
    });
    SyncPoint::Get()->EnableProcessing();
  }
  ~ParkedHolder() {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }
  // Starts `write` on A's thread and returns once A is parked.
  std::future<Status> Start(std::function<Status()> write) {
    auto f = std::async(std::launch::async, [this, write] {
      thread_ = std::this_thread::get_id();
      return write();
    });
    parked_.Wait();
    return f;
  }
  void Release() { release_.Notify(); }

 private:
  Event parked_, release_;
  std::atomic<std::thread::id> thread_{};
};

}  // namespace

// A is paused after its request reached the store but before it was checked
// (a GC pause, SIGSTOP). B acquires the lease with token 8 and writes. When A
// resumes, its write is checked against B's token: StaleToken, and B's value
// stands.
TEST(FenceRaceTest, PausedHolderIsFencedOutWhenItResumes) {
  for (const char* domain : {"key", "prefix:5"}) {
    SCOPED_TRACE(domain);
    test::TempDir dir;
    auto db = OpenFresh(dir, domain);
    ParkedHolder holder_a("DBImpl::Write:BeforeLock");
    auto a = holder_a.Start(
        [&] { return db->Put(WriteOptions(), "shard:A-key", "from A", 7); });
    // B writes (a key of the same domain under prefix:5) while A is paused.
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "shard:B-key", "from B", 8));
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "shard:A-key", "from B", 8));
    holder_a.Release();
    Status sa = a.get();
    ASSERT_TRUE(sa.IsStaleToken()) << sa.ToString();
    EXPECT_EQ(7u, sa.stale()->offered);
    EXPECT_EQ(8u, sa.stale()->max);
    std::string v;
    ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "shard:A-key", &v));
    EXPECT_EQ("from B", v);
    Token max = 0;
    ASSERT_FENCEDKV_OK(db->GetFence("shard:A-key", &max));
    EXPECT_EQ(8u, max);
  }
}

// A is paused after passing its check, before its RocksDB write. This is the
// window a read-check-then-write store gets wrong. Here the check and the
// write form one critical section per domain: B cannot get in between, so A
// lands first and B's newer write lands after it and stands.
TEST(FenceRaceTest, NoWriteSlipsBetweenCheckAndApply) {
  for (const char* domain : {"key", "prefix:5"}) {
    SCOPED_TRACE(domain);
    test::TempDir dir;
    auto db = OpenFresh(dir, domain);
    ParkedHolder holder_a("DBImpl::Write:AfterCheck");
    auto a = holder_a.Start(
        [&] { return db->Put(WriteOptions(), "shard:k", "from A", 7); });
    std::atomic<bool> b_done{false};
    auto b = std::async(std::launch::async, [&] {
      Status s = db->Put(WriteOptions(), "shard:k", "from B", 8);
      b_done = true;
      return s;
    });
    // B must be held off while A sits between check and apply.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(b_done.load());
    std::string v;
    EXPECT_TRUE(db->Get(ReadOptions(), "shard:k", &v).IsNotFound());
    holder_a.Release();
    ASSERT_FENCEDKV_OK(a.get());
    ASSERT_FENCEDKV_OK(b.get());
    ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "shard:k", &v));
    EXPECT_EQ("from B", v);
    Token max = 0;
    ASSERT_FENCEDKV_OK(db->GetFence("shard:k", &max));
    EXPECT_EQ(8u, max);
    // And the paused holder, now late, is fenced out.
    EXPECT_TRUE(db->Put(WriteOptions(), "shard:k", "late A", 7).IsStaleToken());
  }
}

// The new holder advances the fence while the old holder is paused inside
// the store; the old holder's write must not land afterwards.
TEST(FenceRaceTest, AdvanceFenceWhileOldHolderIsPaused) {
  test::TempDir dir;
  auto db = OpenFresh(dir, "hashtag");
  ParkedHolder holder_a("DBImpl::Write:BeforeLock");
  auto a = holder_a.Start(
      [&] { return db->Put(WriteOptions(), "user:{shard1}:x", "A", 7); });
  Token after = 0;
  ASSERT_FENCEDKV_OK(db->AdvanceFence(WriteOptions(), "{shard1}", 8, &after));
  EXPECT_EQ(8u, after);
  holder_a.Release();
  EXPECT_TRUE(a.get().IsStaleToken());
  std::string v;
  EXPECT_TRUE(db->Get(ReadOptions(), "user:{shard1}:x", &v).IsNotFound());
}

namespace {

struct Event2 {
  bool is_advance;
  std::string key;
  Token token;
  std::string value;
  bool accepted;
  int64_t start_ns, end_ns;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RunStress(const char* domain, FenceMode mode, uint32_t seed) {
  test::TempDir dir;
  auto db = OpenFresh(dir, domain, mode);
  FenceDomainSpec spec;
  ASSERT_FENCEDKV_OK(FenceDomainSpec::Parse(domain, &spec));
  const int kThreads = 8;
  const int kOpsPerThread = 2500;
  std::vector<std::string> keys;
  for (int d = 0; d < 3; ++d) {
    for (int k = 0; k < 4; ++k) {
      keys.push_back("d" + std::to_string(d) + ":k" + std::to_string(k));
    }
  }
  // Unique tokens, handed out in order; a thread "pauses" (yields or sleeps)
  // between taking its token and writing, so older tokens arrive late.
  std::atomic<Token> next_token{1};
  std::vector<std::vector<Event2>> logs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(seed + t);
      auto& log = logs[t];
      log.reserve(kOpsPerThread);
      for (int i = 0; i < kOpsPerThread; ++i) {
        const std::string& key = keys[rng() % keys.size()];
        const Token token = next_token.fetch_add(1);
        const uint32_t pause = rng() % 16;
        if (pause == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        } else if (pause < 4) {
          std::this_thread::yield();
        }
        Event2 e;
        e.key = key;
        e.token = token;
        e.is_advance = rng() % 20 == 0;
        e.value = "t" + std::to_string(t) + "-" + std::to_string(i);
        e.start_ns = NowNs();
        Status s;
        if (e.is_advance) {
          Token after = 0;
          s = db->AdvanceFence(WriteOptions(), key, token, &after);
          ASSERT_TRUE(s.ok()) << s.ToString();
          // An advance to t fences out every token below t: the max is t
          // (strict mode: t - 1, which still admits t).
          ASSERT_GE(after, mode == FenceMode::kStrict ? token - 1 : token);
          e.accepted = true;
        } else {
          s = db->Put(WriteOptions(), key, e.value, token);
          ASSERT_TRUE(s.ok() || s.IsStaleToken()) << s.ToString();
          e.accepted = s.ok();
        }
        e.end_ns = NowNs();
        log.push_back(std::move(e));
      }
    });
  }
  for (auto& th : threads) th.join();

  // Per domain: all events, and per key the last accepted write.
  std::map<std::string, std::vector<const Event2*>> by_domain;
  std::map<std::string, const Event2*> last_put;
  size_t accepted = 0, rejected = 0;
  for (const auto& log : logs) {
    for (const auto& e : log) {
      by_domain[std::string(spec.DomainOf(e.key))].push_back(&e);
      if (e.is_advance) continue;
      (e.accepted ? accepted : rejected)++;
      if (e.accepted) {
        const Event2*& last = last_put[e.key];
        if (last == nullptr || e.token > last->token) last = &e;
      }
    }
  }
  EXPECT_GT(accepted, 1000u);
  EXPECT_GT(rejected, 100u);  // the test must actually race
  EXPECT_EQ(accepted, db->GetFenceStats().accepted_writes);
  EXPECT_EQ(rejected, db->GetFenceStats().rejected_writes);

  size_t violations = 0;
  for (auto& [domain_name, events] : by_domain) {
    Token highest = 0;
    for (const Event2* e : events) {
      if (!e->accepted) continue;
      const bool strict_advance = e->is_advance && mode == FenceMode::kStrict;
      highest = std::max(highest, strict_advance ? e->token - 1 : e->token);
    }
    Token max = 0;
    ASSERT_FENCEDKV_OK(db->GetFence(events.front()->key, &max));
    EXPECT_EQ(highest, max) << "domain " << domain_name;
    // Linearizability of the fence: an accepted write W must not have started
    // after a newer token on its domain had been acknowledged.
    std::vector<const Event2*> acked(events.begin(), events.end());
    std::sort(acked.begin(), acked.end(), [](const Event2* a, const Event2* b) {
      return a->end_ns < b->end_ns;
    });
    for (const Event2* w : events) {
      if (!w->accepted || w->is_advance) continue;
      for (const Event2* o : acked) {
        if (o->end_ns >= w->start_ns) break;
        if (o->accepted && o->token > w->token) {
          ++violations;
          break;
        }
      }
    }
  }
  EXPECT_EQ(0u, violations);
  for (const auto& [key, e] : last_put) {
    std::string v;
    ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), key, &v));
    EXPECT_EQ(e->value, v) << key;
  }
}

}  // namespace

TEST(FenceStressTest, PerKeyDomainsMonotonic) {
  RunStress("key", FenceMode::kMonotonic, 1);
}
TEST(FenceStressTest, SharedDomainsMonotonic) {
  RunStress("prefix:2", FenceMode::kMonotonic, 2);
}
TEST(FenceStressTest, SharedDomainsStrict) {
  RunStress("delimiter::", FenceMode::kStrict, 3);
}

}  // namespace fencedkv
