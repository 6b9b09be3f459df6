// Copyright (c) fencedkv authors.
//
// The value cache (Options::value_cache_size, db/value_cache.h) against a
// real RocksDB: every interleaving of a read's fill with a write that the
// cache's rules exist for, forced with sync points, and a randomized race
// of readers and writers. The rule under test: a read never returns a value
// older than RocksDB's latest visible one.

#include "db/value_cache.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/status.h>

#include "fencedkv/db.h"

#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

class ValueCacheTest : public testing::Test {
 protected:
  void TearDown() override {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }
  Options CacheOptions(size_t bytes = 4 << 20) {
    Options o;
    o.create_if_missing = true;
    o.value_cache_size = bytes;
    o.wal_retention_mb = 64;
    return o;
  }
  void Open(const Options& o) {
    db_.reset();
    ASSERT_FENCEDKV_OK(DB::Open(o, path_, &db_));
  }
  std::string Get(std::string_view key) {
    std::string v;
    Status s = db_->Get(ReadOptions(), key, &v);
    return s.ok() ? v : test::StatusString(s);
  }
  std::string MultiGetOne(std::string_view key) {
    std::string v;
    Status s;
    db_->MultiGet(ReadOptions(), 1, &key, &v, &s);
    return s.ok() ? v : test::StatusString(s);
  }
  uint64_t CacheBytes() {
    std::string v;
    EXPECT_TRUE(db_->GetProperty("fencedkv.value-cache-bytes", &v));
    return std::stoull(v);
  }
  // Parks the first thread reaching `point` until Release().
  void ParkAt(const char* point) {
    SyncPoint::Get()->SetCallback(point, [this](void*) {
      if (armed_.exchange(false)) {
        parked_.set_value();
        release_.wait();
      }
    });
    SyncPoint::Get()->EnableProcessing();
  }
  void WaitParked() { parked_.get_future().wait(); }
  void Release() { release_promise_.set_value(); }

  test::TempDir dir_;
  std::string path_ = dir_.path() + "/db";
  std::unique_ptr<DB> db_;
  std::atomic<bool> armed_{true};
  std::promise<void> parked_;
  std::promise<void> release_promise_;
  std::shared_future<void> release_ = release_promise_.get_future().share();
};

TEST_F(ValueCacheTest, ReadsAndWritesGoThroughIt) {
  Open(CacheOptions());
  EXPECT_EQ(0u, CacheBytes());
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v1", 1));
  EXPECT_GT(CacheBytes(), 0u);  // the write left its value
  EXPECT_EQ("v1", Get("k"));
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v2", 2));
  EXPECT_EQ("v2", Get("k"));
  EXPECT_EQ("v2", MultiGetOne("k"));
  ASSERT_FENCEDKV_OK(db_->Delete(WriteOptions(), "k", 3));
  EXPECT_EQ("NOT_FOUND", Get("k"));
  EXPECT_EQ("NOT_FOUND", MultiGetOne("k"));
  // A stale write changes nothing, in the cache either.
  EXPECT_TRUE(db_->Put(WriteOptions(), "k", "old", 2).IsStaleToken());
  EXPECT_EQ("NOT_FOUND", Get("k"));
  // Filled by reads after a reopen (an empty cache).
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "r", "x", 4));
  Open(CacheOptions());
  EXPECT_EQ(0u, CacheBytes());
  EXPECT_EQ("x", Get("r"));
  EXPECT_GT(CacheBytes(), 0u);
  std::string off;
  ASSERT_TRUE(db_->GetProperty("fencedkv.value-cache-capacity", &off));
  EXPECT_EQ(std::to_string(4 << 20), off);
}

// A key with no value is remembered too, and a write replaces that.
TEST_F(ValueCacheTest, AKeyWithNoValueIsRememberedUntilWritten) {
  Open(CacheOptions());
  EXPECT_EQ("NOT_FOUND", Get("none"));
  EXPECT_GT(CacheBytes(), 0u);  // its absence is held
  EXPECT_EQ("NOT_FOUND", Get("none"));
  EXPECT_EQ("NOT_FOUND", MultiGetOne("none"));
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "none", "now", 1));
  EXPECT_EQ("now", Get("none"));
  ASSERT_FENCEDKV_OK(db_->Delete(WriteOptions(), "none", 2));
  EXPECT_EQ("NOT_FOUND", MultiGetOne("none"));
  EXPECT_EQ("NOT_FOUND", Get("none"));
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "none", "again", 3));
  EXPECT_EQ("again", MultiGetOne("none"));
}

// A MultiGet's answers are one view: a batch writing a and b together is
// never seen half applied, from the cache or around it.
TEST_F(ValueCacheTest, AMultiGetNeverSeesABatchHalfApplied) {
  Open(CacheOptions());
  const std::vector<std::string> keys = {"a", "b", "c", "d"};
  auto write_all = [&](int n, Token t) {
    WriteBatch b;
    for (const auto& k : keys) b.Put(k, std::to_string(n), t);
    return db_->Write(WriteOptions(), b);
  };
  ASSERT_FENCEDKV_OK(write_all(0, 1));
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, reads{0};
  std::thread reader([&] {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::vector<std::string> values(keys.size());
    std::vector<Status> statuses(keys.size());
    while (!done.load()) {
      db_->MultiGet(ReadOptions(), views.size(), views.data(), values.data(),
                    statuses.data());
      reads.fetch_add(1);
      for (size_t i = 1; i < keys.size(); ++i) {
        if (!statuses[i].ok() || values[i] != values[0]) torn.fetch_add(1);
      }
    }
  });
  // Some rounds with a cold cache too: a reopen is not possible under a
  // reader, so every tenth round also reads one key alone (a fill).
  for (int n = 1; n <= 3000; ++n) {
    ASSERT_FENCEDKV_OK(write_all(n, 1));
    if (n % 10 == 0) Get("c");
  }
  done = true;
  reader.join();
  EXPECT_EQ(0, torn.load()) << "of " << reads.load() << " MultiGets";
  EXPECT_GT(reads.load(), 10);
}

// The same, forced: a MultiGet parked after its first key while a batch
// of both keys is written. The batch waits for it (the lookup holds both
// keys' stripes), so the MultiGet answers the old pair.
TEST_F(ValueCacheTest, ABatchWaitsForAMultiGetBetweenItsKeys) {
  Open(CacheOptions());
  WriteBatch first;
  first.Put("a", "old", 1);
  first.Put("b", "old", 1);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), first));
  ParkAt("ValueCache::LookupAll:AfterFirst");
  auto reader = std::async(std::launch::async, [&] {
    std::string_view keys[2] = {"a", "b"};
    std::string values[2];
    Status statuses[2];
    db_->MultiGet(ReadOptions(), 2, keys, values, statuses);
    return values[0] + "," + values[1];
  });
  WaitParked();
  auto writer = std::async(std::launch::async, [&] {
    WriteBatch second;
    second.Put("a", "new", 2);
    second.Put("b", "new", 2);
    return db_->Write(WriteOptions(), second);
  });
  EXPECT_EQ(std::future_status::timeout,
            writer.wait_for(std::chrono::milliseconds(200)));
  Release();
  EXPECT_EQ("old,old", reader.get());
  ASSERT_FENCEDKV_OK(writer.get());
  EXPECT_EQ("new", Get("a"));
  EXPECT_EQ("new", MultiGetOne("b"));
}

// A reader that missed and read v1, paused before its fill while a write of
// v2 returns: its fill must keep nothing (it would answer v1 for ever).
TEST_F(ValueCacheTest, AFillAfterAWriteThatEndedKeepsNothing) {
  for (bool multi : {false, true}) {
    SCOPED_TRACE(multi ? "MultiGet" : "Get");
    armed_ = true;
    parked_ = std::promise<void>();
    release_promise_ = std::promise<void>();
    release_ = release_promise_.get_future().share();
    Open(CacheOptions());
    const Token t = multi ? 10 : 1;
    ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v1", t));
    Open(CacheOptions());  // "k" is only in RocksDB now
    ParkAt("ValueCache::Fill:BeforeLock");
    auto reader = std::async(std::launch::async, [&] {
      return multi ? MultiGetOne("k") : Get("k");
    });
    WaitParked();
    ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v2", t + 1));
    Release();
    EXPECT_EQ("v1", reader.get());  // it read before the write: fine
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    EXPECT_EQ("v2", Get("k"));
    EXPECT_EQ("v2", MultiGetOne("k"));
  }
}

// A reader that missed while a delete was in flight (out of the cache, not
// yet in RocksDB) reads the old value; it must not put it back, or the
// delete would be undone in the cache once it lands.
TEST_F(ValueCacheTest, AReadDuringADeleteDoesNotBringTheValueBack) {
  Open(CacheOptions());
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v1", 1));
  ParkAt("DBImpl::Write:RocksDBWrite");
  auto deleter = std::async(
      std::launch::async, [&] { return db_->Delete(WriteOptions(), "k", 2); });
  WaitParked();
  EXPECT_EQ("v1", Get("k"));  // not visible yet: the old value is right
  Release();
  ASSERT_FENCEDKV_OK(deleter.get());
  EXPECT_EQ("NOT_FOUND", Get("k"));
  EXPECT_EQ("NOT_FOUND", MultiGetOne("k"));
}

// A batch writing one key twice: only the last value was ever visible.
TEST_F(ValueCacheTest, TheLastOpOfABatchOnAKeyWins) {
  Open(CacheOptions());
  WriteBatch b;
  b.Put("k", "first", 1);
  b.Put("j", "other", 1);
  b.Put("k", "second", 1);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), b));
  EXPECT_EQ("second", Get("k"));
  WriteBatch d;
  d.Put("k", "third", 2);
  d.Delete("k", 2);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), d));
  EXPECT_EQ("NOT_FOUND", Get("k"));
  // Batches of one group: each refused or accepted on its own.
  WriteBatch g1, g2, g3;
  g1.Put("k", "g1", 3);
  g2.Put("k", "refused", 1);  // stale: below 3
  g3.Put("j", "g3", 4);
  const WriteBatch* batches[] = {&g1, &g2, &g3};
  Status statuses[3];
  ASSERT_FENCEDKV_OK(db_->WriteGroup(WriteOptions(), batches, 3, statuses));
  EXPECT_TRUE(statuses[1].IsStaleToken());
  EXPECT_EQ("g1", Get("k"));
  EXPECT_EQ("g3", Get("j"));
  // Two accepted batches of one group on one key: the later one's value.
  WriteBatch g4, g5;
  g4.Put("k", "early", 5);
  g5.Put("k", "late", 5);
  const WriteBatch* pair[] = {&g4, &g5};
  ASSERT_FENCEDKV_OK(db_->WriteGroup(WriteOptions(), pair, 2, statuses));
  EXPECT_EQ("late", Get("k"));
  // A last value too big to keep still ends the key: the earlier, smaller
  // one must not take its place.
  const std::string big(70 << 10, 'b');
  WriteBatch o;
  o.Put("k", "small", 6);
  o.Put("k", big, 6);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), o));
  // (EXPECT_TRUE: a failure would print 70 KB.)
  EXPECT_TRUE(Get("k") == big) << Get("k").substr(0, 16);
  EXPECT_TRUE(Get("k") == big);  // and after the miss filled the entry
}

// A reader between the ends of one batch's ops on a key: the batch is
// visible in RocksDB, so the earlier op's value must not be answered (only
// the key's last op stores; the earlier one drops the entry).
TEST_F(ValueCacheTest, AReadBetweenABatchsOpsSeesItsLastValue) {
  Open(CacheOptions());
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "orig", 1));
  ASSERT_EQ("orig", Get("k"));
  ParkAt("DBImpl::EndValueWrites:Ended");  // after the first op's end
  std::thread writer([&] {
    WriteBatch b;
    b.Put("k", "a", 2);
    b.Put("j", "x", 2);
    b.Put("k", "c", 2);
    EXPECT_FENCEDKV_OK(db_->Write(WriteOptions(), b));
  });
  WaitParked();
  EXPECT_EQ("c", Get("k"));
  EXPECT_EQ("c", MultiGetOne("k"));
  Release();
  writer.join();
  EXPECT_EQ("c", Get("k"));
}

// An entry evicted between the ops of one batch: the batch's earlier op
// on the key must not put its older value in the place of the last one's.
// One stripe of 4 KiB (charges: 90 bytes plus the value and an eighth of
// it, plus 16, for 2-byte keys). Found by review: with each op's end
// stamped on the entry, the eviction took the stamp with it and the
// earlier op stored "a" (RocksDB has "c"); the marker a too-big last value
// left was evicted at once and written after it was freed.
TEST_F(ValueCacheTest, AnEvictionBetweenABatchsOpsBringsNoOlderValueBack) {
  Open(CacheOptions(4096));
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k1", "old", 1));
  for (int i = 0; i < 4; ++i) {  // 4 x 781 bytes, all used since the clock
    ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "f" + std::to_string(i),
                                std::string(600, 'f'), 1));
  }
  // k2's new entry (893 bytes) takes the stripe over its budget: the clock
  // passes every entry once, then drops k1 (the oldest) and f0.
  WriteBatch b;
  b.Put("k1", "a", 2);
  b.Put("k2", std::string(700, 'v'), 2);
  b.Put("k1", "c", 2);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), b));
  EXPECT_EQ("c", Get("k1"));
  EXPECT_EQ("c", MultiGetOne("k1"));

  // A last value too big for a quarter of the stripe, beside four entries
  // that leave less room than one more small one.
  Open(CacheOptions(4096));
  for (int i = 0; i < 4; ++i) {  // 4 x 979 bytes
    ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "x" + std::to_string(i),
                                std::string(776, 'x'), 1));
  }
  const std::string big(900, 'b');
  WriteBatch o;
  o.Put("kk", "small", 2);
  o.Put("kk", big, 2);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), o));
  EXPECT_TRUE(Get("kk") == big) << Get("kk").substr(0, 16);
  EXPECT_LE(CacheBytes(), 4096u);
}

// A write RocksDB failed leaves the old value (and its own is nowhere).
TEST_F(ValueCacheTest, AFailedWriteLeavesTheOldValue) {
  Open(CacheOptions());
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v1", 1));
  SyncPoint::Get()->SetCallback("DBImpl::Write:RocksDBWrite", [](void* arg) {
    *static_cast<rocksdb::Status*>(arg) = rocksdb::Status::IOError("injected");
  });
  SyncPoint::Get()->EnableProcessing();
  EXPECT_TRUE(db_->Put(WriteOptions(), "k", "lost", 2).IsIOError());
  SyncPoint::Get()->DisableProcessing();
  SyncPoint::Get()->ClearAllCallbacks();
  EXPECT_EQ("v1", Get("k"));
}

// The memory bound: entries past the capacity are evicted, and an entry
// over 64 KiB is never kept.
TEST_F(ValueCacheTest, ItStaysWithinItsCapacity) {
  const size_t cap = 1 << 20;
  Open(CacheOptions(cap));
  const std::string value(1000, 'v');
  for (int i = 0; i < 4000; ++i) {  // 4 MB of values
    ASSERT_FENCEDKV_OK(
        db_->Put(WriteOptions(), "key" + std::to_string(i), value, 1));
  }
  EXPECT_LE(CacheBytes(), cap);
  EXPECT_GT(CacheBytes(), cap / 2);
  for (int i = 0; i < 4000; i += 97) {
    EXPECT_EQ(value, Get("key" + std::to_string(i)));
  }
  Open(CacheOptions(cap));
  const std::string big(64 << 10, 'b');  // with its key, just over
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "big", big, 2));
  EXPECT_EQ(big, Get("big"));
  EXPECT_EQ(0u, CacheBytes());
  // A small value of the key later is kept, a big one again drops it.
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "big", "small", 3));
  const uint64_t one_entry = CacheBytes();
  EXPECT_GT(one_entry, 160u);
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "big", big, 4));
  EXPECT_EQ(big, Get("big"));
  // What stays is the stripe's (empty) index: 16 slots of a hash and a
  // pointer.
  EXPECT_EQ(16 * (sizeof(uint64_t) + sizeof(void*)), CacheBytes());
}

// The index itself (open addressing, linear probing, backward-shift
// removal) against a model: thousands of keys in one stripe, so probe runs
// are long, wrap around the end of the slot array and are cut by removals
// and replacements (a value that outgrows its room gets a new node) as the
// index grows. With room for every key nothing may ever be missing; with
// too little, a lookup may miss but never answer anything but the latest.
TEST(ValueCacheIndexTest, EveryEntryIsFoundThroughGrowthAndRemovals) {
  for (const bool roomy : {true, false}) {
    SCOPED_TRACE(roomy ? "roomy" : "evicting");
    // Under 512 KiB: one stripe.
    ValueCache cache(roomy ? (510 << 10) : (100 << 10));
    constexpr int kKeys = 2500;
    std::map<std::string, std::optional<std::string>> model;  // nullopt: absent
    std::mt19937 rng(7);
    auto key = [](uint32_t k) { return "key" + std::to_string(k); };
    size_t hits = 0;
    for (int step = 0; step < 200000; ++step) {
      const std::string k = key(rng() % kKeys);
      const uint32_t op = rng() % 10;
      if (op < 4) {  // a put; sometimes a value that outgrows its node
        const std::string v(1 + rng() % (op == 0 ? 60 : 8), 'a' + step % 26);
        cache.BeginWrite(k);
        const std::string_view sv = v;
        cache.EndWrite(k, true, &sv);
        model[k] = v;
      } else if (op == 4) {  // a delete: the key's absence is kept
        cache.BeginWrite(k);
        cache.EndWrite(k, true, nullptr);
        model[k] = std::nullopt;
      } else if (op == 5) {  // a write that leaves its value to the next read
        cache.BeginWrite(k);
        cache.EndWrite(k, false, nullptr);
        model.erase(k);
      } else {
        std::string v;
        const ValueCache::Found f = cache.Lookup(k, &v);
        const auto it = model.find(k);
        if (f == ValueCache::Found::kMiss) {
          ASSERT_TRUE(!roomy || it == model.end()) << k << " lost at " << step;
          continue;
        }
        ASSERT_NE(it, model.end()) << k << " found but dropped, at " << step;
        ++hits;
        if (f == ValueCache::Found::kAbsent) {
          ASSERT_FALSE(it->second.has_value()) << k << " at " << step;
        } else {
          ASSERT_TRUE(it->second.has_value()) << k << " at " << step;
          ASSERT_EQ(*it->second, v) << k << " at " << step;
        }
      }
    }
    EXPECT_GT(hits, 10000u);
    EXPECT_LE(cache.Usage(), cache.Capacity());
    // Every key dropped: only the (empty) slot array is left.
    for (int i = 0; i < kKeys; ++i) {
      cache.BeginWrite(key(i));
      cache.EndWrite(key(i), false, nullptr);
    }
    std::string v;
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_EQ(ValueCache::Found::kMiss, cache.Lookup(key(i), &v));
    }
    EXPECT_LE(cache.Usage(), size_t{4096} * 16);
    EXPECT_EQ(0u, cache.Usage() % 16);
  }
}

// A replica's applied batches go through it too: a value read before a
// batch is not answered after it.
TEST_F(ValueCacheTest, AReplicasAppliedBatchesReplaceWhatItRead) {
  test::TempDir primary_dir;
  std::unique_ptr<DB> primary;
  Options po = CacheOptions();
  ASSERT_FENCEDKV_OK(DB::Open(po, primary_dir.path(), &primary));
  ASSERT_FENCEDKV_OK(primary->Put(WriteOptions(), "k", "v1", 1));
  ASSERT_FENCEDKV_OK(primary->Put(WriteOptions(), "gone", "x", 1));
  ASSERT_FENCEDKV_OK(primary->Checkpoint(dir_.path() + "/r"));
  std::unique_ptr<DB> replica;
  Options ro = CacheOptions();
  ro.log_replica = true;
  ASSERT_FENCEDKV_OK(DB::Open(ro, dir_.path() + "/r", &replica));
  std::string v;
  ASSERT_FENCEDKV_OK(replica->Get(ReadOptions(), "k", &v));  // filled
  EXPECT_EQ("v1", v);
  ASSERT_FENCEDKV_OK(replica->Get(ReadOptions(), "gone", &v));
  ASSERT_FENCEDKV_OK(primary->Put(WriteOptions(), "k", "v2", 2));
  ASSERT_FENCEDKV_OK(primary->Delete(WriteOptions(), "gone", 2));
  EXPECT_GE(test::CatchUp(primary.get(), replica.get()), 2u);  // (and
  // perhaps the recovery sentinel after a flush)
  ASSERT_FENCEDKV_OK(replica->Get(ReadOptions(), "k", &v));
  EXPECT_EQ("v2", v);
  EXPECT_TRUE(replica->Get(ReadOptions(), "gone", &v).IsNotFound());
}

// Writers raise each key's value (a counter) while readers read: no reader
// may ever see a key's counter go down, and once the writers are done
// every read gives the last value. Small caches evict all the time.
TEST_F(ValueCacheTest, ReadersNeverSeeAValueGoBackUnderRacingWriters) {
  for (size_t cap : {size_t{64} << 10, size_t{8} << 20}) {
    SCOPED_TRACE("capacity " + std::to_string(cap));
    db_.reset();
    path_ = dir_.path() + "/race" + std::to_string(cap);
    Open(CacheOptions(cap));
    constexpr int kKeys = 64;
    constexpr int kWriters = 2;
    constexpr int kReaders = 2;
    constexpr int kRounds = 3000;
    auto key = [](int k) { return "k" + std::to_string(k); };
    auto value = [](int n) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%010d", n);
      return std::string(buf) + std::string(200, 'p');
    };
    std::atomic<bool> done{false};
    std::atomic<int> violations{0};
    std::vector<std::thread> threads;
    threads.reserve(kWriters + kReaders);
    // Writer w owns keys k with k % kWriters == w, so each key's counter
    // only rises; batches write several keys, sometimes one twice.
    for (int w = 0; w < kWriters; ++w) {
      threads.emplace_back([&, w] {
        std::mt19937 rng(static_cast<uint32_t>(w + 1));
        for (int n = 1; n <= kRounds; ++n) {
          const int k =
              static_cast<int>(rng() % (kKeys / kWriters)) * kWriters + w;
          if (n % 5 == 0) {
            WriteBatch b;
            b.Put(key(k), value(n - 1), 1);
            b.Put(key(k), value(n), 1);
            const int k2 = (k + kWriters) % kKeys;
            b.Put(key(k2), value(n), 1);
            ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), b));
          } else {
            ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), key(k), value(n), 1));
          }
        }
      });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([&, r] {
        std::vector<std::string> seen(kKeys, "");
        std::mt19937 rng(static_cast<uint32_t>(100 + r));
        while (!done.load()) {
          const int k = static_cast<int>(rng() % kKeys);
          std::string v;
          Status s;
          if (rng() % 2 == 0) {
            s = db_->Get(ReadOptions(), key(k), &v);
          } else {
            const std::string kk = key(k);
            std::string_view view = kk;
            db_->MultiGet(ReadOptions(), 1, &view, &v, &s);
          }
          if (s.IsNotFound()) {
            if (!seen[k].empty()) violations.fetch_add(1);
            continue;
          }
          if (!s.ok()) {
            violations.fetch_add(1);
            continue;
          }
          // Fixed-width counters compare as strings.
          if (v < seen[k]) violations.fetch_add(1);
          seen[k] = v;
        }
      });
    }
    for (int w = 0; w < kWriters; ++w) threads[w].join();
    done = true;
    for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
    EXPECT_EQ(0, violations.load());
    // The last word: what RocksDB holds, read by an iterator (no cache).
    auto it = db_->NewIterator(ReadOptions());
    int checked = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      EXPECT_EQ(std::string(it->value()), Get(std::string(it->key())));
      ++checked;
    }
    EXPECT_EQ(kKeys, checked);
  }
}

}  // namespace
}  // namespace fencedkv
