// Copyright (c) fencedkv authors.
//
// ReadOnlyStore's checksum verification of SST files: a file deleted after
// the view opened (what a running server's compaction does to a
// fencedkv-admin check beside it) is still verified, damage is still found,
// a low descriptor limit is no damage, and without the view's descriptors
// (another Env) files are read by name.

#include "db/read_only_store.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/env.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencedkv/db.h"

#include "util/testutil.h"

namespace fencedkv {
namespace {

namespace fs = std::filesystem;

// A closed store with at least `rounds` SST files.
void BuildStore(const std::string& dir, int rounds = 2) {
  Options o;
  o.create_if_missing = true;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir, &db));
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 2000; ++i) {
      const std::string key =
          "k" + std::to_string(round) + ":" + std::to_string(i);
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), key, std::string(100, 'v'),
                                 static_cast<Token>(1 + i)));
    }
    ASSERT_FENCEDKV_OK(db->Flush());
  }
}

std::vector<std::string> SstFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".sst") out.push_back(e.path().string());
  }
  return out;
}

struct Verified {
  std::vector<std::string> violations;
  size_t files = 0;
  uint64_t bytes = 0;
};

Verified Verify(ReadOnlyStore* store) {
  Verified v;
  store->VerifyTableChecksums(
      [&v](std::string text) { v.violations.push_back(std::move(text)); },
      &v.files, &v.bytes);
  return v;
}

// The defect: DB::VerifyChecksum opens every file again by name, so a file
// a running server deleted after the view opened failed the check as if
// it were damaged ("No such file or directory"). The view's open holds
// every table file open (max_open_files -1), and each is read through
// that descriptor.
TEST(ReadOnlyStoreTest, FilesDeletedAfterTheOpenAreStillVerified) {
  test::TempDir tmp;
  const std::string dir = tmp.Sub("db");
  BuildStore(dir);
  const std::vector<std::string> ssts = SstFiles(dir);
  ASSERT_GE(ssts.size(), 2u);

  std::unique_ptr<ReadOnlyStore> store;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(dir, &store));
  for (const std::string& f : ssts) ASSERT_EQ(0, ::unlink(f.c_str())) << f;

  // What check used before: RocksDB's own verification fails on the view.
  rocksdb::Status by_name = store->db()->VerifyChecksum(rocksdb::ReadOptions());
  EXPECT_NE(std::string::npos, by_name.ToString().find("No such file"))
      << by_name.ToString();

  Verified v = Verify(store.get());
  EXPECT_TRUE(v.violations.empty()) << v.violations[0];
  EXPECT_EQ(ssts.size(), v.files);
  EXPECT_GT(v.bytes, 2 * 2000 * 100u / 10);  // compressed, but not empty
}

// A LOCK that cannot be opened (a read-only file system, no permission; here
// a directory in its place) was reported as held by a running process.
// Only a lock another holder has is Busy; the rest is an IOError naming
// why.
TEST(ReadOnlyStoreTest, OnlyAHeldLockIsBusy) {
  test::TempDir tmp;
  const std::string dir = tmp.Sub("db");
  BuildStore(dir);
  ASSERT_FENCEDKV_OK(CheckNotInUse(dir));
  {
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(Options(), dir, &db));
    Status held = CheckNotInUse(dir);
    EXPECT_TRUE(held.IsBusy()) << held.ToString();
    EXPECT_NE(std::string::npos, held.ToString().find("in use by a running"))
        << held.ToString();
  }
  ASSERT_EQ(0, ::unlink((dir + "/LOCK").c_str()));
  ASSERT_EQ(0, ::mkdir((dir + "/LOCK").c_str(), 0755));
  Status s = CheckNotInUse(dir);
  EXPECT_FALSE(s.IsBusy()) << s.ToString();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("cannot open its LOCK"))
      << s.ToString();
  ASSERT_EQ(0, ::rmdir((dir + "/LOCK").c_str()));
}

TEST(ReadOnlyStoreTest, DamageIsFoundAndNamed) {
  test::TempDir tmp;
  const std::string dir = tmp.Sub("db");
  BuildStore(dir);
  std::unique_ptr<ReadOnlyStore> store;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(dir, &store));
  ASSERT_TRUE(Verify(store.get()).violations.empty());

  // One byte of the first data block, in place (the file the view holds).
  const std::string sst = SstFiles(dir).front();
  const int fd = ::open(sst.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(1, ::pread(fd, &c, 1, 20));
  c = static_cast<char>(c ^ 0x40);
  ASSERT_EQ(1, ::pwrite(fd, &c, 1, 20));
  ::close(fd);

  Verified v = Verify(store.get());
  ASSERT_EQ(1u, v.violations.size());
  EXPECT_EQ(0u, v.violations[0].find("SST file " + sst + ": Corruption"))
      << v.violations[0];
  // RocksDB names the file it read: the descriptor's path is the SST's.
  EXPECT_EQ(std::string::npos, v.violations[0].find("/proc/self/fd"))
      << v.violations[0];
  EXPECT_GE(v.files, 2u);
}

// Verification takes one descriptor at a time beside the view's own: a
// store with more files than half the limit is no damage. (A first version
// kept a copy of every descriptor, and its reads then failed with "Too
// many open files", reported as damage.)
TEST(ReadOnlyStoreTest, ADescriptorLimitJustAboveTheViewsIsEnough) {
  test::TempDir tmp;
  const std::string dir = tmp.Sub("db");
  BuildStore(dir, 8);
  std::unique_ptr<ReadOnlyStore> store;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(dir, &store));
  std::vector<bool> used;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    const size_t fd = std::strtoul(e.path().filename().c_str(), nullptr, 10);
    if (fd >= used.size()) used.resize(fd + 1);
    used[fd] = true;
  }
  // A limit leaving two free descriptor numbers: room for the reader and
  // the listing of /proc/self/fd, not for a copy of every SST file's.
  rlim_t limit = 0;
  for (int free_numbers = 0; free_numbers < 2; ++limit) {
    if (limit >= used.size() || !used[limit]) ++free_numbers;
  }
  ASSERT_GT(SstFiles(dir).size(), 2u);
  struct rlimit saved;
  ASSERT_EQ(0, ::getrlimit(RLIMIT_NOFILE, &saved));
  struct rlimit low = saved;
  low.rlim_cur = limit;
  ASSERT_EQ(0, ::setrlimit(RLIMIT_NOFILE, &low));
  Verified v = Verify(store.get());
  ASSERT_EQ(0, ::setrlimit(RLIMIT_NOFILE, &saved));
  EXPECT_TRUE(v.violations.empty()) << v.violations[0];
}

// Through another Env (a backup opened in place), files are read by name:
// a file deleted after the open is then missing.
TEST(ReadOnlyStoreTest, ThroughAnotherEnvFilesAreReadByName) {
  test::TempDir tmp;
  const std::string dir = tmp.Sub("db");
  BuildStore(dir);
  rocksdb::EnvWrapper env(rocksdb::Env::Default());
  std::unique_ptr<ReadOnlyStore> store;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(dir, &store, &env));
  ASSERT_TRUE(Verify(store.get()).violations.empty());
  const std::string sst = SstFiles(dir).front();
  ASSERT_EQ(0, ::unlink(sst.c_str()));
  Verified v = Verify(store.get());
  ASSERT_EQ(1u, v.violations.size());
  EXPECT_EQ(0u, v.violations[0].find("SST file " + sst + ": IO error"))
      << v.violations[0];
  EXPECT_NE(std::string::npos, v.violations[0].find("No such file"));
}

}  // namespace
}  // namespace fencedkv
