// Copyright (c) fencedkv authors.
//
// Opening: creation, reopen with another domain function or mode, and
// directories that are not fencedkv databases. Each refusal is a clear
// Status and changes nothing.

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/statistics.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fencedkv/db.h"

#include "db/db_impl.h"
#include "db/fence_format.h"
#include "db/fence_table.h"
#include "util/coding.h"
#include "util/testutil.h"

#ifndef FENCEDKV_TESTDATA_DIR
#error "FENCEDKV_TESTDATA_DIR must name engine/db/testdata"
#endif

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

// Opens `dir` with plain RocksDB (all three families) to look at or damage
// the raw records. (With format version 1's merge operator on the meta
// family: without it, RocksDB's recovery stops replaying the WAL at the
// first merge record and silently drops the rest.)
struct RawDB {
  explicit RawDB(const std::string& dir) {
    rocksdb::DBOptions o;
    rocksdb::ColumnFamilyOptions meta;
    meta.merge_operator = NewMaxTokenMergeOperator();
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {"default", {}}, {"fence", {}}, {"meta", meta}};
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, dir, cfs, &handles, &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db.reset(raw);
  }
  ~RawDB() {
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  }
  std::string Meta(const std::string& key) {
    std::string v;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), handles[2], key, &v);
    return s.ok() ? v : "<" + s.ToString() + ">";
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::unique_ptr<rocksdb::DB> db;
};

// Runs a shell command; its exit status.
int Shell(const std::string& cmd) { return std::system(cmd.c_str()); }

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
  Status s =
      DB::Open(CreateOptions("key", FenceMode::kMonotonic), dir.path(), &db);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(std::string::npos, s.ToString().find("fence mode mismatch"));
}

TEST(DBMetaTest, AdoptStoredConfig) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions("delimiter:/", FenceMode::kStrict),
                              dir.path(), &db));
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
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "k" + std::to_string(i), "v", 1));
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

// What a creation that failed before CURRENT leaves (IDENTITY, LOG,
// MANIFEST-000001, a .dbtmp) is created over; the same with a table file
// (data, without the CURRENT that names it) is refused untouched.
TEST(DBMetaTest, AnInterruptedCreationIsCreatedAgainButDataIsNot) {
  for (bool with_data : {false, true}) {
    SCOPED_TRACE(with_data ? "with a table file" : "creation files only");
    test::TempDir dir;
    std::ofstream(dir.Sub("IDENTITY")) << "id";
    std::ofstream(dir.Sub("LOG")) << "log";
    std::ofstream(dir.Sub("MANIFEST-000001")) << "partial";
    std::ofstream(dir.Sub("000001.dbtmp")) << "MANIFEST-000001";
    if (with_data) std::ofstream(dir.Sub("000004.sst")) << "table";
    const auto before = Snapshot(dir.path());
    std::unique_ptr<DB> db;
    Status s = DB::Open(CreateOptions(), dir.path(), &db);
    if (with_data) {
      ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
      EXPECT_EQ(before, Snapshot(dir.path()));
    } else {
      ASSERT_FENCEDKV_OK(s);
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k", "v", 1));
    }
  }
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

// A fencedkv store that lost its CURRENT file is damage, as fencedkv-admin
// check says, not "not a fencedkv database" (which it said before), and is
// left untouched.
TEST(DBMetaTest, AStoreWithoutItsCurrentFileIsCalledDamaged) {
  test::TempDir dir;
  {
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), dir.path(), &db));
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k", "v", 5));
  }
  std::filesystem::remove(dir.Sub("CURRENT"));
  const auto before = Snapshot(dir.path());
  std::unique_ptr<DB> db;
  Status s = DB::Open(CreateOptions(), dir.path(), &db);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("damaged fencedkv database"))
      << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("no RocksDB CURRENT file"))
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
  EXPECT_TRUE(
      DB::Open(CreateOptions("prefix:0"), dir.path(), &db).IsInvalidArgument());
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
  const auto before = Snapshot(dir.path());
  Status s = DB::Open(CreateOptions(), dir.path(), &db2);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  // Nothing touched: RocksDB used to rotate the holder's LOG first. The
  // holder's own background work may still append to its LOG (seen once on
  // a loaded machine): that file may only have grown, and no LOG.old.*
  // may appear.
  auto after = Snapshot(dir.path());
  const std::string log = dir.path() + "/LOG";
  ASSERT_EQ(1u, before.count(log));
  ASSERT_EQ(1u, after.count(log));
  EXPECT_GE(after.at(log).first, before.at(log).first) << "the LOG was rotated";
  auto drop_log = [&log](decltype(after) m) {
    m.erase(log);
    return m;
  };
  EXPECT_EQ(drop_log(before), drop_log(after));
}

// RocksDB's in-process lock table is keyed by the path string as given:
// the same directory opened as "db/", "./db" or through a symlink was a
// second DB on it, and the two wrote over each other's MANIFEST (the next
// open: "Corruption: Corrupt or unsupported format_version"), kept two
// fence views (a fenced-out write accepted) and two lease counters.
TEST(DBMetaTest, SecondOpenUnderAnotherSpellingIsBusy) {
  test::TempDir dir;
  const std::string path = dir.Sub("db");
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), path, &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k", "v", 10));
  fs::create_directory_symlink(path, dir.Sub("link"));
  const std::string parent = fs::path(path).parent_path().string();
  for (const std::string& other :
       {path + "/", path + "//", parent + "/./db", parent + "/x/../db",
        dir.Sub("link"), dir.Sub("link") + "/"}) {
    SCOPED_TRACE(other);
    std::unique_ptr<DB> db2;
    Status s = DB::Open(CreateOptions(), other, &db2);
    EXPECT_TRUE(s.IsBusy()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("already open in this"))
        << s.ToString();
  }
  EXPECT_TRUE(db->Put(WriteOptions(), "k", "stale", 5).IsStaleToken());
  ASSERT_FENCEDKV_OK(db->Flush());
  db.reset();
  // Nothing was damaged, and once closed it opens under any spelling.
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), dir.Sub("link") + "/", &db));
  std::string v;
  ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "k", &v));
  EXPECT_EQ("v", v);
  db.reset();
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), path, &db));
}

// A bind mount of the directory is another path no spelling rule sees
// through: the second open was a second DB on the same files (RocksDB's
// lock is per path in a process). The registry keys a directory by its
// inode too.
TEST(DBMetaTest, SecondOpenThroughABindMountIsBusy) {
  if (geteuid() != 0) GTEST_SKIP() << "a bind mount needs root";
  test::TempDir dir;
  const std::string path = dir.Sub("db"), mnt = dir.Sub("mnt");
  fs::create_directory(path);
  fs::create_directory(mnt);
  if (mount(path.c_str(), mnt.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    GTEST_SKIP() << "cannot bind-mount here: " << std::strerror(errno);
  }
  test::ScopedUnmount unmount{mnt};  // (after every DB below is closed)
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), path, &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k", "v", 10));
  std::unique_ptr<DB> db2;
  Status s = DB::Open(CreateOptions(), mnt, &db2);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  db2.reset();
  EXPECT_TRUE(db->Put(WriteOptions(), "k", "stale", 5).IsStaleToken());
  db.reset();
  // Closed, it opens through the mount.
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), mnt, &db));
  std::string v;
  ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "k", &v));
  EXPECT_EQ("v", v);
  db.reset();
  // One created by an open is claimed by its inode too, and released.
  const std::string fresh = dir.Sub("fresh"), mnt2 = dir.Sub("mnt2");
  fs::create_directory(mnt2);
  std::unique_ptr<DB> created;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), fresh, &created));
  ASSERT_EQ(0, mount(fresh.c_str(), mnt2.c_str(), nullptr, MS_BIND, nullptr))
      << std::strerror(errno);
  test::ScopedUnmount unmount2{mnt2};
  s = DB::Open(CreateOptions(), mnt2, &db2);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  created.reset();
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), mnt2, &db2));
  db2.reset();
}

// A refused reopen must not touch the directory: before, RocksDB had
// already replayed and flushed the WAL (a new SST, MANIFEST and OPTIONS,
// the old WAL deleted) when the stored configuration was compared.
TEST(DBMetaTest, ARefusedReopenLeavesTheDirectoryUntouched) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions("hashtag"), dir.path(), &db));
  for (int i = 0; i < 50; ++i) {
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "{s}:" + std::to_string(i), "v", 5 + i));
  }
  db.reset();  // closed with everything still in the WAL
  const auto before = Snapshot(dir.path());
  Status s = DB::Open(CreateOptions("key"), dir.path(), &db);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(before, Snapshot(dir.path()));
  s = DB::Open(CreateOptions("hashtag", FenceMode::kStrict), dir.path(), &db);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(before, Snapshot(dir.path()));
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions("hashtag"), dir.path(), &db));
  Token t = 0;
  ASSERT_FENCEDKV_OK(db->GetFence("{s}:x", &t));
  EXPECT_EQ(54u, t);
}

// Every option is checked before anything is created: a fence_mode outside
// the enum used to be stored, and every later Open failed with Corruption.
TEST(DBMetaTest, InvalidOptionsAreRefusedBeforeAnythingIsWritten) {
  test::TempDir dir;
  std::vector<std::pair<const char*, Options>> cases;
  Options o = CreateOptions();
  o.fence_mode = static_cast<FenceMode>(7);
  cases.emplace_back("fence_mode", o);
  o = CreateOptions();
  o.max_key_size = 0;
  cases.emplace_back("max_key_size", o);
  o = CreateOptions();
  o.max_key_size = kMaxKeySizeLimit + 1;
  cases.emplace_back("max_key_size", o);
  o = CreateOptions();
  o.max_value_size = kMaxValueSizeLimit + 1;
  cases.emplace_back("max_value_size", o);
  o = CreateOptions();
  o.write_buffer_size = 1000;
  cases.emplace_back("write_buffer_size", o);
  o = CreateOptions();
  o.write_buffer_size = SIZE_MAX;  // (the hash memtable sized its buckets
  cases.emplace_back("write_buffer_size", o);  // from it: 600 MB and more)
  o = CreateOptions();
  o.max_background_jobs = 0;
  cases.emplace_back("max_background_jobs", o);
  o = CreateOptions();
  o.max_background_jobs = 100000;  // (thread creation failed: an abort)
  cases.emplace_back("max_background_jobs", o);
  o = CreateOptions();
  o.level0_file_num_compaction_trigger = 0;
  cases.emplace_back("level0_file_num_compaction_trigger", o);
  o = CreateOptions();
  o.max_open_files = 0;
  cases.emplace_back("max_open_files", o);
  for (const auto& [field, options] : cases) {
    std::unique_ptr<DB> db;
    Status s = DB::Open(options, dir.Sub("db"), &db);
    EXPECT_TRUE(s.IsInvalidArgument()) << field << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find(field)) << s.ToString();
    EXPECT_FALSE(fs::exists(dir.Sub("db"))) << field;
  }
  // The largest limits RocksDB can store are accepted.
  o = CreateOptions();
  o.max_key_size = kMaxKeySizeLimit;
  o.max_value_size = kMaxValueSizeLimit;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("db"), &db));
}

// The RocksDB tuning fenced_bench passes through (db_bench's --statistics
// and --level0_file_num_compaction_trigger) reaches RocksDB.
TEST(DBMetaTest, StatisticsAndLevel0TriggerReachRocksDB) {
  test::TempDir dir;
  Options o = CreateOptions();
  o.statistics = rocksdb::CreateDBStatistics();
  o.level0_file_num_compaction_trigger = 7;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k", "v", 3));
  std::string v;
  ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "k", &v));
  EXPECT_GE(o.statistics->getTickerCount(rocksdb::NUMBER_KEYS_WRITTEN), 1u);
  EXPECT_GE(o.statistics->getTickerCount(rocksdb::NUMBER_KEYS_READ), 1u);
  db.reset();
  // RocksDB writes the options it runs with to OPTIONS-<n>; each column
  // family has its section. The data and fence families take the trigger.
  std::string latest;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("OPTIONS-", 0) == 0 && name > latest) latest = name;
  }
  ASSERT_FALSE(latest.empty());
  std::ifstream in(dir.path() + "/" + latest);
  std::string line;
  int with_trigger = 0;
  while (std::getline(in, line)) {
    if (line.find("level0_file_num_compaction_trigger=7") !=
        std::string::npos) {
      ++with_trigger;
    }
  }
  EXPECT_EQ(2, with_trigger);
}

// The stripe of `domain` in DBImpl's lock table (1024 stripes).
size_t StripeOfDomain(std::string_view domain) {
  return FenceTable::Hash(domain) & 1023;
}

// A write whose max stays at or below the store's mark (the largest mark
// record) raises its stripe's mark in memory only: the record of the
// store's mark was written before it and bounds it after any crash. Only a
// max above the store's mark writes a record. (Many lease holders write
// below the newest one: a record each time was one write in seven.)
TEST(DBMetaTest, AMaxBelowTheStoreMarkWritesNoMarkRecord) {
  for (const char* domain : {"key", "prefix:1"}) {
    SCOPED_TRACE(domain);
    test::TempDir dir;
    Options o = CreateOptions(domain);
    o.statistics = rocksdb::CreateDBStatistics();
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
    auto written = [&] {
      return o.statistics->getTickerCount(rocksdb::NUMBER_KEYS_WRITTEN);
    };
    // Three keys (domains) in three different stripes.
    std::vector<std::string> keys = {"a"};
    for (char c = 'b'; keys.size() < 3 && c <= 'z'; ++c) {
      const std::string k(1, c);
      bool fresh = true;
      for (const auto& other : keys) {
        if (StripeOfDomain(k) == StripeOfDomain(other)) fresh = false;
      }
      if (fresh) keys.push_back(k);
    }
    ASSERT_EQ(3u, keys.size());
    // With "prefix:1" a max is its own fence record: one more record.
    const uint64_t data = std::string(domain) == "key" ? 1 : 2;
    uint64_t before = written();
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), keys[0], "v", 100));
    EXPECT_EQ(data + 1, written() - before);  // above the store's mark (0)
    before = written();
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), keys[1], "v", 50));
    EXPECT_EQ(data, written() - before);  // below it: no mark record
    before = written();
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), keys[2], "v", 150));
    EXPECT_EQ(data + 1, written() - before);
    // The in-memory marks still decide right, before and after a reopen
    // (which gives every stripe the largest record: 150).
    for (int reopen = 0; reopen < 2; ++reopen) {
      SCOPED_TRACE(reopen);
      EXPECT_EQ("STALE(49<50)",
                test::StatusString(db->Put(WriteOptions(), keys[1], "x", 49)));
      EXPECT_EQ("STALE(99<100)",
                test::StatusString(db->Put(WriteOptions(), keys[0], "x", 99)));
      EXPECT_EQ(150u, static_cast<DBImpl*>(db.get())->HighWaterMark());
      db.reset();
      Options again = CreateOptions(domain);
      again.create_if_missing = false;
      ASSERT_FENCEDKV_OK(DB::Open(again, dir.path(), &db));
    }
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), keys[1], "y", 50));
  }
}

// Behind many holders most writes are below their stripe's mark. The first
// write of a domain then needs no RocksDB read while the cache has never
// lost an entry of its bucket: the domain's max can only be the one the
// store had at open. After a reopen (every stored max unknown) it reads.
TEST(DBMetaTest, AFirstWriteBelowTheMarkNeedsNoReadInAFreshStore) {
  test::TempDir dir;
  Options o = CreateOptions();
  o.statistics = rocksdb::CreateDBStatistics();
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
  auto reads = [&] {
    return o.statistics->getTickerCount(rocksdb::NUMBER_KEYS_READ);
  };
  // The newest holder (100) writes into (nearly) every stripe.
  for (int i = 0; i < 6000; ++i) {
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "new" + std::to_string(i), "v", 100));
  }
  // An older holder (50) writes domains never written.
  uint64_t before = reads();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "old" + std::to_string(i), "v", 50));
  }
  EXPECT_LE(reads() - before, 5u);  // was one read per write
  // Its checks stay exact: below a domain's max is refused.
  EXPECT_TRUE(db->Put(WriteOptions(), "new7", "x", 50).IsStaleToken());
  EXPECT_TRUE(db->Put(WriteOptions(), "old7", "x", 49).IsStaleToken());
  db.reset();
  Options again = CreateOptions();
  again.create_if_missing = false;
  again.statistics = o.statistics;
  ASSERT_FENCEDKV_OK(DB::Open(again, dir.path(), &db));
  before = reads();
  for (int i = 0; i < 100; ++i) {
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "older" + std::to_string(i), "v", 50));
  }
  EXPECT_EQ(100u, reads() - before);
  EXPECT_TRUE(db->Put(WriteOptions(), "old7", "x", 49).IsStaleToken());
  EXPECT_TRUE(db->Put(WriteOptions(), "new8", "x", 99).IsStaleToken());
}

// A crash leaves a prefix of the log. Whatever the prefix, the largest mark
// record recovered bounds every recovered max, so no write passes the
// mark's shortcut below a domain's max. Checked at many cut points of the
// log of a run where 16 holders' tokens interleave (most maxima are below
// the store's mark and write no mark record of their own).
TEST(DBMetaTest, EveryLogPrefixRecoversAMarkAboveEveryMax) {
  for (const char* domain : {"key", "prefix:2"}) {
    SCOPED_TRACE(domain);
    test::TempDir dir;
    const std::string path = dir.Sub("db");
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(domain), path, &db));
    std::vector<std::string> keys;
    keys.reserve(300);
    for (int i = 0; i < 300; ++i) keys.push_back("k" + std::to_string(i));
    std::vector<Token> holder(16);
    Token counter = 0;
    for (auto& t : holder) t = ++counter;
    uint64_t rng = 42;
    auto next = [&] {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      return rng >> 33;
    };
    for (int i = 0; i < 2000; ++i) {
      const std::string& key = keys[next() % keys.size()];
      const size_t h = std::hash<std::string>()(key.substr(0, 2)) % 16;
      if (next() % 50 == 0) holder[h] = ++counter;  // a renewal
      Status s = db->Put(WriteOptions(), key, "v", holder[h]);
      ASSERT_TRUE(s.ok() || s.IsStaleToken()) << s.ToString();
    }
    db.reset();  // (no flush on close: everything is in the log)
    std::string log;
    for (const auto& e : fs::directory_iterator(path)) {
      if (e.path().extension() == ".log") log = e.path().filename().string();
    }
    ASSERT_FALSE(log.empty());
    const uintmax_t size = fs::file_size(fs::path(path) / log);
    uint64_t first_sum = 0, last_sum = 0;  // of the recovered maxima
    constexpr int kCuts = 25;
    for (int c = 1; c <= kCuts; ++c) {
      const uintmax_t cut = size * c / kCuts;
      SCOPED_TRACE("cut at " + std::to_string(cut) + " of " +
                   std::to_string(size));
      const std::string copy = dir.Sub("cut");
      fs::remove_all(copy);
      fs::copy(path, copy);
      fs::resize_file(fs::path(copy) / log, cut);
      Options o = CreateOptions(domain);
      o.create_if_missing = false;
      std::unique_ptr<DB> cdb;
      ASSERT_FENCEDKV_OK(DB::Open(o, copy, &cdb));
      const Token mark = static_cast<DBImpl*>(cdb.get())->HighWaterMark();
      uint64_t sum = 0;
      for (const auto& key : keys) {
        Token max = 0;
        ASSERT_FENCEDKV_OK(cdb->GetFence(key, &max));
        if (max == 0) continue;
        sum += max;
        ASSERT_LE(max, mark) << key;
        if (max > 1) {
          EXPECT_TRUE(
              cdb->Put(WriteOptions(), key, "stale", max - 1).IsStaleToken())
              << key << " max " << max;
        }
      }
      if (c == 1) first_sum = sum;
      last_sum = sum;
    }
    EXPECT_LT(first_sum, last_sum);  // the cuts did lose writes
  }
}

// A value over max_value_size is refused before it is copied anywhere, and
// nothing is raised. (The value is an untouched mapping: no memory used.)
TEST(DBMetaTest, AnOversizedValueIsRefusedAndRaisesNothing) {
  test::TempDir dir;
  Options o = CreateOptions();
  o.max_value_size = kMaxValueSizeLimit;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
  const size_t n = kMaxValueSizeLimit + 1;
  void* p = mmap(nullptr, n, PROT_READ,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(MAP_FAILED, p);
  const std::string_view huge(static_cast<const char*>(p), n);
  Status s = db->Put(WriteOptions(), "k", huge, 7);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  WriteBatch batch;  // (copies; so a small one, against a small limit)
  munmap(p, n);
  Token t = 1;
  ASSERT_FENCEDKV_OK(db->GetFence("k", &t));
  EXPECT_EQ(0u, t);
  EXPECT_EQ(0u, static_cast<DBImpl*>(db.get())->HighWaterMark());
}

// Format version 1 kept the high-water mark as merge operands; such a
// database opens, keeps every value and max, and is rewritten to version 2
// (plain records only) so RocksDB's tools can work on it afterwards.
TEST(DBMetaTest, FormatVersion1IsUpgradedInPlace) {
  test::TempDir dir;
  ASSERT_EQ(0, Shell("tar xzf " FENCEDKV_TESTDATA_DIR "/format_v1.tar.gz -C " +
                     dir.path()));
  struct Case {
    const char* name;
    const char* domain;
    FenceMode mode;
  };
  for (const Case& c : {Case{"v1_key", "key", FenceMode::kMonotonic},
                        Case{"v1_prefix", "prefix:2", FenceMode::kStrict}}) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.Sub(c.name);
    {
      RawDB raw(path);  // (without the merge operator: operands unread)
      std::string v = raw.Meta(std::string(format::kMetaFormatVersion));
      ASSERT_EQ(4u, v.size());
      ASSERT_EQ(1u, DecodeFixed32(v.data()));
    }
    std::unique_ptr<DB> db;
    Options o = CreateOptions(c.domain, c.mode);
    o.create_if_missing = false;
    ASSERT_FENCEDKV_OK(DB::Open(o, path, &db));
    std::string v;
    ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "k1", &v));
    EXPECT_EQ("value1", v);
    ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "k25", &v));
    EXPECT_EQ("value25", v);
    EXPECT_TRUE(db->Get(ReadOptions(), "k5", &v).IsNotFound());
    EXPECT_EQ(3u, db->GetFenceFloor());
    EXPECT_EQ(51u, static_cast<DBImpl*>(db.get())->HighWaterMark());
    Token t = 0;
    ASSERT_FENCEDKV_OK(db->GetFence("adv", &t));
    EXPECT_EQ(40u, t);
    ASSERT_FENCEDKV_OK(db->GetFence("bb", &t));
    EXPECT_EQ(51u, t);
    if (c.mode == FenceMode::kMonotonic) {
      ASSERT_FENCEDKV_OK(db->GetFence("k5", &t));
      EXPECT_EQ(31u, t);
      EXPECT_TRUE(db->Put(WriteOptions(), "k25", "x", 44).IsStaleToken());
    } else {
      ASSERT_FENCEDKV_OK(db->GetFence("k1z", &t));  // k10..k19 share "k1"
      EXPECT_EQ(29u, t);
      EXPECT_TRUE(db->Put(WriteOptions(), "k1z", "x", 29).IsStaleToken());
    }
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k25", "new", 52));
    db.reset();
    RawDB raw(path);
    v = raw.Meta(std::string(format::kMetaFormatVersion));
    ASSERT_EQ(4u, v.size());
    EXPECT_EQ(format::kFormatVersion, DecodeFixed32(v.data()));
    EXPECT_EQ("<NotFound: >",
              raw.Meta(std::string(format::kMetaLegacyHighWaterMark)));
  }
}

// RocksDB's own ldb may write to and compact a fencedkv directory: it must
// still open with every max intact (version 1's merge records made it
// refuse with "Could not perform merge"). A record ldb wrote in the data
// family is reported, naming its key, when read.
TEST(DBMetaTest, RocksDBToolsCanWriteAndCompactTheDirectory) {
  if (Shell("command -v ldb >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "RocksDB's ldb is not installed (Debian: rocksdb-tools)";
  }
  for (const char* domain : {"key", "prefix:2"}) {
    SCOPED_TRACE(domain);
    test::TempDir dir;
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(domain), dir.path(), &db));
    for (int i = 0; i < 30; ++i) {
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k" + std::to_string(i),
                                 "v" + std::to_string(i), 100 + i));
    }
    ASSERT_FENCEDKV_OK(db->AdvanceFence(WriteOptions(), "adv", 500, nullptr));
    db.reset();
    const std::string ldb = "ldb --db=" + dir.path() + " ";
    ASSERT_EQ(0, Shell(ldb + "put foo bar >/dev/null"));
    ASSERT_EQ(0, Shell(ldb + "compact >/dev/null"));
    ASSERT_EQ(0, Shell(ldb + "--column_family=meta compact >/dev/null"));
    ASSERT_EQ(0, Shell(ldb + "--column_family=fence compact >/dev/null"));
    ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(domain), dir.path(), &db));
    Token t = 0;
    ASSERT_FENCEDKV_OK(db->GetFence("k29", &t));
    EXPECT_EQ(129u, t);
    ASSERT_FENCEDKV_OK(db->GetFence("adv", &t));
    EXPECT_EQ(500u, t);
    EXPECT_EQ(500u, static_cast<DBImpl*>(db.get())->HighWaterMark());
    EXPECT_TRUE(db->Put(WriteOptions(), "k29", "x", 128).IsStaleToken());
    std::string v;
    ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "k7", &v));
    EXPECT_EQ("v7", v);
    Status s = db->Get(ReadOptions(), "foo", &v);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("\"foo\"")) << s.ToString();
  }
}

// An open that fails on a meta record names the record.
TEST(DBMetaTest, AMissingOrBadMetaRecordIsNamed) {
  for (const char* record : {"fence_mode", "fence_floor", "fence_domain"}) {
    test::TempDir dir;
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), dir.path(), &db));
    db.reset();
    {
      RawDB raw(dir.path());
      ASSERT_TRUE(
          raw.db->Delete(rocksdb::WriteOptions(), raw.handles[2], record).ok());
    }
    Status s = DB::Open(CreateOptions(), dir.path(), &db);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find(record)) << s.ToString();
  }
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(CreateOptions(), dir.path(), &db));
  db.reset();
  {
    RawDB raw(dir.path());
    ASSERT_TRUE(
        raw.db
            ->Put(rocksdb::WriteOptions(), raw.handles[2], "hwm/0007", "short")
            .ok());
  }
  Status s = DB::Open(CreateOptions(), dir.path(), &db);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("hwm/0007")) << s.ToString();
}

}  // namespace fencedkv
