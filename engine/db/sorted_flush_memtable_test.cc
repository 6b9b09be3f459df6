// Copyright (c) fencedkv authors.
//
// The hash memtable's sorted iterator (sorted_flush_memtable.h), on a real
// RocksDB: keys that share prefixes, are prefixes of each other, hold 0x00
// and 0xff bytes, with several versions and deletions. Read through an
// iterator over the memtable still being written, over the read-only
// memtable (its flush held back), then from the flushed SST, all against a
// std::map; and iterators raced against a writer and its flushes.

#include "db/sorted_flush_memtable.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>

#include "util/testutil.h"

namespace fencedkv {
namespace {

std::string RandomKey(std::mt19937* rng) {
  static const char* const kPrefixes[] = {"", "key:", "key:0000", "k",
                                          "key:00001234"};
  std::string k = kPrefixes[(*rng)() % 5];
  const size_t extra = (*rng)() % 12;
  for (size_t i = 0; i < extra; ++i) {
    const unsigned r = (*rng)() % 6;
    k.push_back(r == 0   ? '\0'
                : r == 1 ? '\xff'
                         : static_cast<char>('0' + (*rng)() % 4));
  }
  return k;
}

// A RocksDB in `path`/db whose memtable is the rep under test, large enough
// to hold every write; nullptr if it does not open.
std::unique_ptr<rocksdb::DB> OpenWithTheRep(const std::string& path,
                                            bool bytewise,
                                            size_t buckets = 1024) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.prefix_extractor.reset(rocksdb::NewNoopTransform());
  options.memtable_factory = NewSortedFlushHashRepFactory(buckets, bytewise);
  options.allow_concurrent_memtable_write = false;
  options.write_buffer_size = 64 << 20;  // one memtable holds everything
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(options, path + "/db", &raw).ok()) return nullptr;
  return std::unique_ptr<rocksdb::DB>(raw);
}

// Every entry of `db`, read forwards in total order, is the model's.
void ExpectForwardScanMatches(rocksdb::DB* db,
                              const std::map<std::string, std::string>& model) {
  rocksdb::ReadOptions ro;
  ro.total_order_seek = true;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(model.end(), m);
    ASSERT_EQ(m->first, it->key().ToString());
    ASSERT_EQ(m->second, it->value().ToString());
  }
  ASSERT_TRUE(it->status().ok());
  EXPECT_EQ(model.end(), m);
}

class SortedFlushMemtableTest : public ::testing::TestWithParam<bool> {};

TEST_P(SortedFlushMemtableTest, WrittenReadOnlyAndFlushedMemtablesAreInOrder) {
  test::TempDir dir;
  std::unique_ptr<rocksdb::DB> db = OpenWithTheRep(dir.path(), GetParam());
  ASSERT_NE(nullptr, db);

  std::mt19937 rng(7);
  std::map<std::string, std::string> model;
  for (int i = 0; i < 20000; ++i) {
    const std::string k = RandomKey(&rng);
    if (rng() % 5 == 0) {
      ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), k).ok());
      model.erase(k);
    } else {
      const std::string v = "v" + std::to_string(i);
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
      model[k] = v;
    }
  }

  rocksdb::ReadOptions ro;
  ro.total_order_seek = true;
  auto check = [&](const char* stage) {
    SCOPED_TRACE(stage);
    ExpectForwardScanMatches(db.get(), model);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
    // Backwards, and seeks to keys present or not.
    auto r = model.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++r) {
      ASSERT_NE(model.rend(), r);
      ASSERT_EQ(r->first, it->key().ToString());
    }
    EXPECT_EQ(model.rend(), r);
    for (int i = 0; i < 2000; ++i) {
      const std::string target = RandomKey(&rng);
      it->Seek(target);
      auto lb = model.lower_bound(target);
      ASSERT_EQ(lb != model.end(), it->Valid()) << i;
      if (it->Valid()) {
        ASSERT_EQ(lb->first, it->key().ToString());
      }
      it->SeekForPrev(target);
      auto ub = model.upper_bound(target);
      ASSERT_EQ(ub != model.begin(), it->Valid()) << i;
      if (it->Valid()) {
        ASSERT_EQ(std::prev(ub)->first, it->key().ToString());
      }
    }
    for (const auto& kv : model) {
      std::string v;
      ASSERT_TRUE(db->Get(ro, kv.first, &v).ok());
      ASSERT_EQ(kv.second, v);
    }
  };

  // The memtable still being written: each iterator sorts a copy of the
  // list.
  const SortedFlushCounts mutable_before = GetSortedFlushCounts();
  check("memtable still written to");
  EXPECT_LT(mutable_before.snapshot_sorts,
            GetSortedFlushCounts().snapshot_sorts);
  EXPECT_EQ(mutable_before.sorts, GetSortedFlushCounts().sorts);

  // The memtable made read-only (switched out), its flush held back: the
  // iterator reads it through the sorted list.
  ASSERT_TRUE(db->PauseBackgroundWork().ok());
  rocksdb::FlushOptions no_wait;
  no_wait.wait = false;
  ASSERT_TRUE(db->Flush(no_wait).ok());
  uint64_t immutable = 0;
  ASSERT_TRUE(
      db->GetIntProperty("rocksdb.num-immutable-mem-table", &immutable));
  ASSERT_EQ(1u, immutable);
  const SortedFlushCounts before = GetSortedFlushCounts();
  check("read-only memtable");
  // Sorted once, for this iterator and every later one.
  EXPECT_EQ(before.sorts + 1, GetSortedFlushCounts().sorts);
  ASSERT_TRUE(db->ContinueBackgroundWork().ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  ASSERT_TRUE(
      db->GetIntProperty("rocksdb.num-immutable-mem-table", &immutable));
  ASSERT_EQ(0u, immutable);
  check("flushed");
}

INSTANTIATE_TEST_SUITE_P(Bytewise, SortedFlushMemtableTest, ::testing::Bool());

// Gets through the hash index: 16 buckets, so every key shares its bucket
// with about 12 others, one of them written 20,000 times. Every Get answers
// as a std::map model does, at the latest state and at snapshots, and walks
// no key's versions but its own: a Get of the hot key's bucket-mates looks
// at one link per key of the bucket, not at the hot key's 20,000 entries
// (each key's versions are one link of its chain). Before, with each
// version a link of its own, the 200 Gets below looked at about 240,000
// entries.
TEST(SortedFlushMemtableGetTest, GetsSeeSnapshotsAndSkipOtherKeysVersions) {
  test::TempDir dir;
  std::unique_ptr<rocksdb::DB> db =
      OpenWithTheRep(dir.path(), true, /*buckets=*/16);
  ASSERT_NE(nullptr, db);
  const rocksdb::WriteOptions wo;
  std::map<std::string, std::string> model;
  for (int i = 0; i < 200; ++i) {
    const std::string k = "cold:" + std::to_string(i);
    ASSERT_TRUE(db->Put(wo, k, "c" + std::to_string(i)).ok());
    model[k] = "c" + std::to_string(i);
  }
  const rocksdb::Snapshot* early = nullptr;
  const rocksdb::Snapshot* middle = nullptr;
  for (int i = 0; i < 20000; ++i) {
    if (i == 1) early = db->GetSnapshot();
    if (i == 10000) middle = db->GetSnapshot();
    ASSERT_TRUE(db->Put(wo, "hot", "h" + std::to_string(i)).ok());
  }
  model["hot"] = "h19999";
  ASSERT_TRUE(db->Delete(wo, "cold:7").ok());
  model.erase("cold:7");

  std::string v;
  const uint64_t before = GetSortedFlushCounts().get_steps;
  for (int i = 0; i < 200; ++i) {
    const std::string k = "cold:" + std::to_string(i);
    const rocksdb::Status s = db->Get(rocksdb::ReadOptions(), k, &v);
    if (model.count(k) == 0) {
      EXPECT_TRUE(s.IsNotFound()) << k;
    } else {
      ASSERT_TRUE(s.ok()) << k << " " << s.ToString();
      EXPECT_EQ(model[k], v);
    }
  }
  const uint64_t cold_steps = GetSortedFlushCounts().get_steps - before;
  EXPECT_LE(cold_steps, 200u * 40u);  // ~13 links per bucket, not 20,000
  EXPECT_GT(cold_steps, 0u);          // (the index was used)

  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "hot", &v).ok());
  EXPECT_EQ("h19999", v);
  rocksdb::ReadOptions at;
  at.snapshot = early;
  ASSERT_TRUE(db->Get(at, "hot", &v).ok());
  EXPECT_EQ("h0", v);
  EXPECT_TRUE(db->Get(at, "cold:7", &v).ok());  // deleted after it
  EXPECT_EQ("c7", v);
  at.snapshot = middle;
  ASSERT_TRUE(db->Get(at, "hot", &v).ok());
  EXPECT_EQ("h9999", v);
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "absent", &v).IsNotFound());
  db->ReleaseSnapshot(early);
  db->ReleaseSnapshot(middle);

  // The same answers from the flushed table (the sorted list's order).
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  for (const auto& kv : model) {
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), kv.first, &v).ok()) << kv.first;
    EXPECT_EQ(kv.second, v);
  }
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "cold:7", &v).IsNotFound());
}

// Keys that alternate in one bucket (no version adjacent to another of its
// key), overwritten and deleted, read back at every step against a model
// (at the latest state and at a snapshot taken along the way): the chain's
// links, not only its runs. Also with every Get sorting its key's entries
// first (the path taken after an insert out of sequence order).
class SortedFlushMemtableOneBucketTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override { ForceSortedMemtableGetsForTesting(GetParam()); }
  void TearDown() override { ForceSortedMemtableGetsForTesting(false); }
};

TEST_P(SortedFlushMemtableOneBucketTest, InterleavedKeysReadBack) {
  test::TempDir dir;
  std::unique_ptr<rocksdb::DB> db =
      OpenWithTheRep(dir.path(), true, /*buckets=*/1);
  ASSERT_NE(nullptr, db);
  std::mt19937 rng(11);
  std::map<std::string, std::string> model;
  std::map<std::string, std::string> at_snapshot;
  const rocksdb::Snapshot* snapshot = nullptr;
  std::string v;
  for (int i = 0; i < 3000; ++i) {
    if (i == 1500) {
      snapshot = db->GetSnapshot();
      at_snapshot = model;
    }
    const std::string k = "k" + std::to_string(rng() % 20);
    if (rng() % 4 == 0) {
      ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), k).ok());
      model.erase(k);
    } else {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, std::to_string(i)).ok());
      model[k] = std::to_string(i);
    }
    const std::string probe = "k" + std::to_string(rng() % 21);
    const rocksdb::Status s = db->Get(rocksdb::ReadOptions(), probe, &v);
    if (model.count(probe) == 0) {
      ASSERT_TRUE(s.IsNotFound()) << probe << " at " << i;
    } else {
      ASSERT_TRUE(s.ok()) << probe << " at " << i;
      ASSERT_EQ(model[probe], v) << probe << " at " << i;
    }
  }
  rocksdb::ReadOptions at;
  at.snapshot = snapshot;
  for (int k = 0; k < 21; ++k) {
    const std::string key = "k" + std::to_string(k);
    const rocksdb::Status s = db->Get(at, key, &v);
    if (at_snapshot.count(key) == 0) {
      EXPECT_TRUE(s.IsNotFound()) << key;
    } else {
      ASSERT_TRUE(s.ok()) << key;
      EXPECT_EQ(at_snapshot[key], v) << key;
    }
  }
  db->ReleaseSnapshot(snapshot);
}

INSTANTIATE_TEST_SUITE_P(SortedGets, SortedFlushMemtableOneBucketTest,
                         ::testing::Bool());

// Keys alike but for a few outliers (a different first byte, a key that is
// a prefix of the others, a long run of zero bytes): the radix passes split
// them off and still put every key in order, through the flush.
TEST(SortedFlushMemtableOutlierTest, OutliersAndLongSharedRunsStayInOrder) {
  test::TempDir dir;
  std::unique_ptr<rocksdb::DB> db = OpenWithTheRep(dir.path(), true);
  ASSERT_NE(nullptr, db);
  std::mt19937 rng(11);
  std::map<std::string, std::string> model;
  auto put = [&](const std::string& k) {
    const std::string v = "v" + std::to_string(model.size());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
    model[k] = v;
  };
  char buf[64];
  for (int i = 0; i < 30000; ++i) {
    // 20- and 40-byte keys sharing 16 and 36 bytes: several windows deep.
    std::snprintf(buf, sizeof(buf), "tenant:0042:user:%04u",
                  static_cast<unsigned>(rng() % 10000));
    put(buf);
    std::snprintf(buf, sizeof(buf), "tenant:0042:user:0000:session:0000%04u",
                  static_cast<unsigned>(rng() % 10000));
    put(buf);
  }
  for (const std::string& k :
       {std::string("zzz"), std::string(""), std::string("tenant"),
        std::string("tenant:0042:user:"),
        std::string("tenant:0042:user:0000") + std::string(40, '\0'),
        std::string("tenant:0042:user:0000") + std::string(40, '\0') + "x",
        std::string("tenant:0042:user:0000\xff"), std::string("\x01")}) {
    put(k);
    put(k);  // a second version
  }
  ASSERT_TRUE(db->PauseBackgroundWork().ok());
  rocksdb::FlushOptions no_wait;
  no_wait.wait = false;
  ASSERT_TRUE(db->Flush(no_wait).ok());
  const SortedFlushCounts before = GetSortedFlushCounts();
  auto check = [&](const char* stage) {
    SCOPED_TRACE(stage);
    ExpectForwardScanMatches(db.get(), model);
  };
  check("read-only memtable");
  EXPECT_EQ(before.sorts + 1, GetSortedFlushCounts().sorts);
  ASSERT_TRUE(db->ContinueBackgroundWork().ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  check("flushed");
}

// Keys whose 8-byte windows differ in 1, 3 or 5 byte positions (a shared
// prefix, varying bytes, a fixed tail): the radix sort then ends with an
// odd number of passes, its result in the scratch buffer, and copies it
// back; with 2 or 8 positions it ends in place. Several versions per key.
TEST(SortedFlushMemtableRadixTest, AnyNumberOfVaryingBytesSortsInOrder) {
  for (int varying : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE("varying bytes: " + std::to_string(varying));
    test::TempDir dir;
    std::unique_ptr<rocksdb::DB> db = OpenWithTheRep(dir.path(), true);
    ASSERT_NE(nullptr, db);
    std::mt19937 rng(static_cast<unsigned>(17 + varying));
    std::map<std::string, std::string> model;
    for (int i = 0; i < 6000; ++i) {
      std::string k = "prefix:";
      for (int b = 0; b < varying; ++b) {
        k.push_back(static_cast<char>(rng() % (b == 0 ? 40 : 256)));
      }
      k += "tail";
      const std::string v = "v" + std::to_string(i);
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
      model[k] = v;
    }
    ASSERT_GE(6000u - model.size(), varying == 1 ? 5000u : 0u);  // versions
    ASSERT_TRUE(db->PauseBackgroundWork().ok());
    rocksdb::FlushOptions no_wait;
    no_wait.wait = false;
    ASSERT_TRUE(db->Flush(no_wait).ok());
    const SortedFlushCounts before = GetSortedFlushCounts();
    ExpectForwardScanMatches(db.get(), model);  // the read-only memtable
    EXPECT_EQ(before.sorts + 1, GetSortedFlushCounts().sorts);
    ASSERT_TRUE(db->ContinueBackgroundWork().ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    ExpectForwardScanMatches(db.get(), model);  // the flushed table
  }
}

// Iterators opened while a writer inserts and memtables fill, turn
// read-only and flush (a small write buffer): each sees, in order, every
// write acknowledged before it was opened, with its value. Run under TSan
// too (scripts/sanitize.sh thread): a copy of the list races the writer's
// new chunks and the sort that moves the list away.
TEST(SortedFlushMemtableRaceTest, IteratorsRaceAWriterAndItsFlushes) {
  test::TempDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.prefix_extractor.reset(rocksdb::NewNoopTransform());
  options.memtable_factory = NewSortedFlushHashRepFactory(1024, true);
  options.allow_concurrent_memtable_write = false;
  options.write_buffer_size = 256 << 10;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.path() + "/db", &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);

  // Key i sorts apart from its neighbours in time (a hashed prefix).
  auto key = [](uint32_t i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%08x:%u", i * 2654435761u, i);
    return std::string(buf);
  };
  constexpr uint32_t kWrites = 40000;
  std::atomic<uint32_t> acked{0};
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    for (uint32_t i = 0; i < kWrites && !failed.load(); ++i) {
      if (!db->Put(rocksdb::WriteOptions(), key(i), "v" + std::to_string(i))
               .ok()) {
        failed.store(true);
        return;
      }
      acked.store(i + 1, std::memory_order_release);
    }
  });
  const SortedFlushCounts before = GetSortedFlushCounts();
  auto reader = [&](int* passes) {
    rocksdb::ReadOptions ro;
    ro.total_order_seek = true;
    while (acked.load() < kWrites && !failed.load()) {
      const uint32_t seen = acked.load(std::memory_order_acquire);
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
      std::vector<std::string> keys;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string k = it->key().ToString();
        const uint32_t i =
            static_cast<uint32_t>(std::stoul(k.substr(k.find(':') + 1)));
        if (k != key(i) || it->value().ToString() != "v" + std::to_string(i) ||
            (!keys.empty() && !(keys.back() < k))) {
          ADD_FAILURE() << "entry " << k << " after "
                        << (keys.empty() ? "-" : keys.back());
          failed.store(true);
          return;
        }
        keys.push_back(k);
      }
      if (!it->status().ok()) {
        ADD_FAILURE() << it->status().ToString();
        failed.store(true);
        return;
      }
      for (uint32_t i = 0; i < seen; ++i) {
        if (!std::binary_search(keys.begin(), keys.end(), key(i))) {
          ADD_FAILURE() << "acknowledged write " << key(i) << " (of " << seen
                        << ") missing from an iterator opened after it";
          failed.store(true);
          return;
        }
      }
      ++*passes;
    }
  };
  int passes1 = 0, passes2 = 0;
  std::thread r1(reader, &passes1);
  std::thread r2(reader, &passes2);
  writer.join();
  r1.join();
  r2.join();
  ASSERT_FALSE(failed.load());
  EXPECT_GT(passes1 + passes2, 0);
  const SortedFlushCounts after = GetSortedFlushCounts();
  EXPECT_GT(after.snapshot_sorts, before.snapshot_sorts);
  EXPECT_GT(after.sorts, before.sorts);  // memtables flushed meanwhile
}

}  // namespace
}  // namespace fencedkv
