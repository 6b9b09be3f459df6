// Copyright (c) fencedkv authors.
//
// The write path when something fails: a read the fence check needs (a
// damaged SST), an entry RocksDB refuses, the RocksDB write itself. A write
// that did not happen is never reported OK, and raises nothing.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <rocksdb/status.h>

#include "fencedkv/db.h"

#include "db/db_impl.h"
#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

namespace fs = std::filesystem;

// Overwrites the first two thirds of the largest SST file of `dir` (its
// data blocks; the index and footer at the end stay intact) with garbage:
// reading those blocks then fails their checksum.
void DamageLargestSst(const std::string& dir) {
  fs::path largest;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".sst" && e.file_size() > size) {
      size = e.file_size();
      largest = e.path();
    }
  }
  ASSERT_GT(size, 3000u) << "no SST to damage in " << dir;
  std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(64);
  std::string garbage(size * 2 / 3 - 64, '\0');
  uint32_t x = 12345;
  for (char& c : garbage) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 16);
  }
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

class WriteErrorsTest : public testing::Test {
 protected:
  void Open(const char* domain) {
    db_.reset();
    Options o;
    o.create_if_missing = true;
    o.fence_domain = domain;
    o.block_cache_size = 0;  // every read goes to the file
    ASSERT_FENCEDKV_OK(DB::Open(o, dir_->path(), &db_));
  }
  ~WriteErrorsTest() override {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }
  Token Fence(std::string_view key) {
    Token t = 12345;
    EXPECT_FENCEDKV_OK(db_->GetFence(key, &t));
    return t;
  }

  std::unique_ptr<test::TempDir> dir_ = std::make_unique<test::TempDir>();
  std::unique_ptr<DB> db_;
};

// Before: a failed read left every batch's status OK (the server answered
// +OK for writes that were never applied). Now the batch whose check needed
// the read gets the error; batches that needed no read still apply.
TEST_F(WriteErrorsTest, AFailedFenceReadFailsItsBatchInAGroup) {
  // (The key domain: its maxima live in the data records, which the damage
  // hits; other domain functions read the small fence family.)
  for (const char* domain : {"key"}) {
    SCOPED_TRACE(domain);
    db_.reset();
    dir_ = std::make_unique<test::TempDir>();
    Open(domain);
    for (int i = 0; i < 2000; ++i) {
      char key[16];
      std::snprintf(key, sizeof(key), "k%05d", i);
      ASSERT_FENCEDKV_OK(
          db_->Put(WriteOptions(), key, std::string(100, 'v'), 1000 + i));
    }
    ASSERT_FENCEDKV_OK(db_->Flush());
    db_.reset();
    DamageLargestSst(dir_->path());
    Open(domain);  // a cold fence cache: checks below the mark read the SST

    WriteBatch stale_a, fresh, stale_b;
    stale_a.Put("k00100", "x", 10);  // below the mark: needs its max
    fresh.Put("new", "y", 99999);    // above the mark: needs no read
    stale_b.Put("k00900", "z", 10);
    const WriteBatch* batches[] = {&stale_a, &fresh, &stale_b};
    Status statuses[3];
    Status s = db_->WriteGroup(WriteOptions(), batches, 3, statuses);
    EXPECT_FENCEDKV_OK(s);
    EXPECT_TRUE(statuses[0].IsCorruption() || statuses[0].IsIOError())
        << statuses[0].ToString();
    EXPECT_FENCEDKV_OK(statuses[1]);
    EXPECT_TRUE(statuses[2].IsCorruption() || statuses[2].IsIOError())
        << statuses[2].ToString();
    std::string v;
    ASSERT_FENCEDKV_OK(db_->Get(ReadOptions(), "new", &v));
    EXPECT_EQ("y", v);
    // Alone, the same write reports the error too.
    s = db_->Put(WriteOptions(), "k00100", "x", 10);
    EXPECT_TRUE(s.IsCorruption() || s.IsIOError()) << s.ToString();
    db_.reset();
  }
}

// An entry RocksDB's batch refuses (e.g. past its size limits) fails the
// whole write: before, it was dropped while the domain's max, the
// high-water mark and the cache were raised (Put said OK, Get NotFound).
TEST_F(WriteErrorsTest, AnEntryRocksDBRefusesFailsTheWholeWrite) {
  Open("prefix:2");
  SyncPoint::Get()->SetCallback("DBImpl::Write:BuildBatch", [](void* arg) {
    *static_cast<rocksdb::Status*>(arg) =
        rocksdb::Status::InvalidArgument("value is too large");
  });
  SyncPoint::Get()->EnableProcessing();
  Status s = db_->Put(WriteOptions(), "ab1", "v", 7);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  WriteBatch a, b;
  a.Put("ab2", "v", 8);
  b.Put("cd1", "v", 9);
  const WriteBatch* batches[] = {&a, &b};
  Status statuses[2];
  s = db_->WriteGroup(WriteOptions(), batches, 2, statuses);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(statuses[0].IsInvalidArgument()) << statuses[0].ToString();
  EXPECT_TRUE(statuses[1].IsInvalidArgument()) << statuses[1].ToString();
  SyncPoint::Get()->DisableProcessing();
  std::string v;
  EXPECT_TRUE(db_->Get(ReadOptions(), "ab1", &v).IsNotFound());
  EXPECT_EQ(0u, Fence("ab1"));
  EXPECT_EQ(0u, Fence("cd1"));
  EXPECT_EQ(0u, static_cast<DBImpl*>(db_.get())->HighWaterMark());
  // The cache was not raised either: a lower token still passes.
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "ab1", "v", 1));
  Open("prefix:2");
  EXPECT_EQ(1u, Fence("ab1"));
}

// The RocksDB write fails: every batch of the group gets its error.
TEST_F(WriteErrorsTest, AFailedRocksDBWriteFailsEveryBatchOfTheGroup) {
  Open("key");
  SyncPoint::Get()->SetCallback("DBImpl::Write:RocksDBWrite", [](void* arg) {
    *static_cast<rocksdb::Status*>(arg) = rocksdb::Status::IOError("injected");
  });
  SyncPoint::Get()->EnableProcessing();
  WriteBatch a, stale, b;
  a.Put("a", "v", 8);
  stale.Put("s", "v", 0);  // invalid: refused on its own before the write
  b.Put("b", "v", 9);
  const WriteBatch* batches[] = {&a, &stale, &b};
  Status statuses[3];
  Status s = db_->WriteGroup(WriteOptions(), batches, 3, statuses);
  SyncPoint::Get()->DisableProcessing();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(statuses[0].IsIOError()) << statuses[0].ToString();
  EXPECT_TRUE(statuses[1].IsInvalidArgument()) << statuses[1].ToString();
  EXPECT_TRUE(statuses[2].IsIOError()) << statuses[2].ToString();
  EXPECT_EQ(0u, Fence("a"));
  EXPECT_EQ(0u, Fence("b"));
}

}  // namespace
}  // namespace fencedkv
