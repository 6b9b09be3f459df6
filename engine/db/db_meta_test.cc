// Copyright (c) fencedkv authors.
//
// Opening: creation, reopen with another domain function or mode, and
// directories that are not fencedkv databases. Each refusal is a clear
// Status and changes nothing.

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "fencedkv/db.h"
#include "util/testutil.h"

namespace fencedkv {

namespace {

namespace fs = std::filesystem;

// Every file below `dir` with its size and modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> Snapshot(
    const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      out[e.path().string()] = {e.file_size(), e.last_write_time()};
    }
  }
  return out;
}

Options CreateOptions(const char* domain = "key",
                      FenceMode mode = FenceMode::kMonotonic) {
  Options o;
  o.create_if_missing = true;
  o.fence_domain = domain;
  o.fence_mode = mode;
  return o;
}

}  // namespace

TEST(DBMetaTest, CreateThenReopenWithSameConfig) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions("prefix:3"), dir.Sub("db"), &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "abc1", "v", 5));
  db.reset();
  Options o = CreateOptions("prefix:3");
  o.create_if_missing = false;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("db"), &db));
  Token t = 0;
  ASSERT_FENCEDKV_OK(db->GetFence("abc2", &t));
  EXPECT_EQ(5u, t);
}

TEST(DBMetaTest, ReopenWithAnotherDomainFunctionIsRefused) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions("hashtag"), dir.path(), &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "{s}:a", "v", 5));
  db.reset();
  for (const char* other : {"key", "prefix:3", "delimiter::"}) {
    Status s = DB::Open(CreateOptions(other), dir.path(), &db);
    ASSERT_TRUE(s.IsInvalidArgument()) << other;
    EXPECT_NE(std::string::npos, s.ToString().find("fence domain mismatch"))
        << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("\"hashtag\""));
    EXPECT_EQ(nullptr, db);
  }
  // Still intact with the right function.
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions("hashtag"), dir.path(), &db));
  Token t = 0;
  ASSERT_FENCEDKV_OK(db->GetFence("{s}:b", &t));
  EXPECT_EQ(5u, t);
}

TEST(DBMetaTest, ReopenWithAnotherModeIsRefused) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(
      DB::Open(CreateOptions("key", FenceMode::kStrict), dir.path(), &db));
  db.reset();
  Status s = DB::Open(CreateOptions("key", FenceMode::kMonotonic), dir.path(),
                      &db);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(std::string::npos, s.ToString().find("fence mode mismatch"));
}

TEST(DBMetaTest, AdoptStoredConfig) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(
      DB::Open(CreateOptions("delimiter:/", FenceMode::kStrict), dir.path(),
               &db));
  db.reset();
  Options o = CreateOptions();  // "key", monotonic
  o.adopt_stored_fence_config = true;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
  EXPECT_EQ("delimiter:/", db->GetFenceDomain().ToString());
  EXPECT_EQ(FenceMode::kStrict, db->GetFenceMode());
}

TEST(DBMetaTest, MissingDatabaseWithoutCreateIfMissing) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  Options o;
  Status s = DB::Open(o, dir.Sub("nope"), &db);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(std::string::npos, s.ToString().find("create_if_missing"));
  EXPECT_FALSE(fs::exists(dir.Sub("nope")));
  // An empty directory counts as missing: refused, and left empty.
  s = DB::Open(o, dir.path(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(DBMetaTest, ErrorIfExists) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), dir.path(), &db));
  db.reset();
  Options o = CreateOptions();
  o.error_if_exists = true;
  EXPECT_TRUE(DB::Open(o, dir.path(), &db).IsInvalidArgument());
}

TEST(DBMetaTest, MemtableIsChecked_AndCanChangeBetweenOpens) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  Options o = CreateOptions();
  o.memtable = "hashtable";
  Status s = DB::Open(o, dir.path(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("skiplist | hash"));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // Not persisted: a database written with one memtable opens with the other
  // (what is still in the WAL is replayed into it), and scans see every key.
  auto count = [&db] {
    size_t n = 0;
    auto it = db->NewIterator(ReadOptions());
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    EXPECT_TRUE(it->status().ok());
    return n;
  };
  const char* const memtables[] = {"hash", "skiplist", "hash"};
  for (size_t i = 0; i < 3; ++i) {
    o.memtable = memtables[i];
    ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
    EXPECT_EQ(i, count()) << memtables[i];
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k" + std::to_string(i), "v", 1));
    EXPECT_EQ(i + 1, count()) << memtables[i];
    db.reset();
  }
}

TEST(DBMetaTest, OrdinaryRocksDBDatabaseIsRefusedUntouched) {
  test::TempDir dir;
  {
    rocksdb::Options ro;
    ro.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(ro, dir.path(), &raw).ok());
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "user", "data").ok());
    delete raw;
  }
  const auto before = Snapshot(dir.path());
  std::unique_ptr<DB> db;
  Status s = DB::Open(CreateOptions(), dir.path(), &db);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("not a fencedkv database"));
  EXPECT_EQ(before, Snapshot(dir.path()));
}

TEST(DBMetaTest, DirectoryOfOtherFilesIsRefusedUntouched) {
  test::TempDir dir;
  std::ofstream(dir.Sub("notes.txt")) << "precious";
  const auto before = Snapshot(dir.path());
  std::unique_ptr<DB> db;
  Status s = DB::Open(CreateOptions(), dir.path(), &db);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("not a fencedkv database"));
  EXPECT_EQ(before, Snapshot(dir.path()));
}

TEST(DBMetaTest, GarbageCurrentFileIsRefusedUntouched) {
  test::TempDir dir;
  std::ofstream(dir.Sub("CURRENT")) << "\x01\x02garbage";
  std::ofstream(dir.Sub("MANIFEST-000001")) << "not a manifest";
  const auto before = Snapshot(dir.path());
  std::unique_ptr<DB> db;
  Status s = DB::Open(CreateOptions(), dir.path(), &db);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.ToString().find("not a fencedkv database"))
      << s.ToString();
  EXPECT_EQ(before, Snapshot(dir.path()));
}

TEST(DBMetaTest, PathThatIsAFileIsRefused) {
  test::TempDir dir;
  std::ofstream(dir.Sub("file")) << "x";
  std::unique_ptr<DB> db;
  Status s = DB::Open(CreateOptions(), dir.Sub("file"), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(DBMetaTest, BadOptionsAreRefused) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  EXPECT_TRUE(DB::Open(CreateOptions("prefix:0"), dir.path(), &db)
                  .IsInvalidArgument());
  Options o = CreateOptions();
  o.compression = "lzma9000";
  EXPECT_TRUE(DB::Open(o, dir.path(), &db).IsInvalidArgument());
  EXPECT_TRUE(fs::is_empty(dir.path()));
  EXPECT_TRUE(DB::Open(CreateOptions(), "", &db).IsInvalidArgument());
}

TEST(DBMetaTest, SecondOpenWhileOpenIsBusy) {
  test::TempDir dir;
  std::unique_ptr<DB> db, db2;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), dir.path(), &db));
  Status s = DB::Open(CreateOptions(), dir.path(), &db2);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsBusy() || s.IsIOError()) << s.ToString();
}

}  // namespace fencedkv
