// Copyright (c) fencedkv authors.
//
// Copies on the embedded API (fencedkv/backup.h): checkpoints and backups
// of a database being written, a backup stopped midway, and the
// fencing-safe restore's refusals and guarantees.

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <rocksdb/env.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "db/db_impl.h"
#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

namespace fs = std::filesystem;

Options Create() {
  Options o;
  o.create_if_missing = true;
  o.fence_domain = "prefix:2";
  return o;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Copies taken while a writer runs open as consistent databases: every
// value is there with its domain's max, and the high-water mark covers it.
TEST(DBBackupTest, CopiesOfADatabaseBeingWritten) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(Create(), dir.Sub("db"), &db));
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (Token t = 1; !stop.load(); ++t) {
      const std::string key =
          "k" + std::to_string(t % 7) + ":" + std::to_string(t);
      ASSERT_FENCEDKV_OK(
          db->Put(WriteOptions(), key, std::string(100, 'v'), t));
      written.fetch_add(1);
    }
  });
  while (written.load() < 2000) std::this_thread::yield();
  BackupInfo info;
  ASSERT_FENCEDKV_OK(db->Checkpoint(dir.Sub("cp")));
  ASSERT_FENCEDKV_OK(db->Backup(dir.Sub("bk"), BackupOptions(), &info));
  EXPECT_EQ(1u, info.backup_id);
  EXPECT_NE(std::string::npos, info.metadata.find("fence_domain=prefix:2"));
  stop = true;
  writer.join();
  // A second backup shares the first one's files: it is incremental.
  BackupOptions verify;
  verify.verify = true;
  BackupInfo second;
  ASSERT_FENCEDKV_OK(db->Flush());
  ASSERT_FENCEDKV_OK(db->Backup(dir.Sub("bk"), verify, &second));
  EXPECT_EQ(2u, second.backup_id);

  EXPECT_TRUE(db->Checkpoint(dir.Sub("cp")).IsInvalidArgument());  // exists
  EXPECT_TRUE(db->Checkpoint(dir.Sub("db/inside")).IsInvalidArgument());
  EXPECT_TRUE(db->Backup(dir.Sub("db/bk"), BackupOptions(), nullptr)
                  .IsInvalidArgument());
  db.reset();

  RestoreOptions ro;
  ro.fence_floor = 1000000;
  ro.backup_id = 1;
  ASSERT_FENCEDKV_OK(
      DB::RestoreFromBackup(dir.Sub("bk"), dir.Sub("restored"), ro, nullptr));
  for (const char* copy : {"cp", "restored"}) {
    SCOPED_TRACE(copy);
    Options o = Create();
    o.create_if_missing = false;
    ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub(copy), &db));
    const Token hwm = static_cast<DBImpl*>(db.get())->HighWaterMark();
    size_t n = 0;
    auto it = db->NewIterator(ReadOptions());
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
      Token max = 0;
      ASSERT_FENCEDKV_OK(db->GetFence(it->key(), &max));
      EXPECT_LE(it->token(), hwm);
      EXPECT_LE(it->token(), max);
    }
    ASSERT_FENCEDKV_OK(it->status());
    EXPECT_GE(n, 2000u);
    it.reset();
    db.reset();
  }
}

TEST(DBBackupTest, ABackupCanBeStopped) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(Create(), dir.Sub("db"), &db));
  uint64_t x = 42;
  for (Token t = 1; t <= 3000; ++t) {  // 3 MB that does not compress
    std::string value(1000, ' ');
    for (char& c : value) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      c = static_cast<char>(x >> 56);
    }
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "k" + std::to_string(t), value, t));
  }
  ASSERT_FENCEDKV_OK(db->Flush());
  BackupOptions options;
  int polls = 0;
  options.should_stop = [&polls] { return ++polls > 1; };  // after starting
  Status s = db->Backup(dir.Sub("bk"), options, nullptr);
  EXPECT_TRUE(s.IsShutdown()) << s.ToString();
  EXPECT_GT(polls, 1);
  db.reset();
  RestoreOptions ro;
  ro.fence_floor = 5000;
  s = DB::RestoreFromBackup(dir.Sub("bk"), dir.Sub("r"), ro, nullptr);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();  // no backup was recorded
  EXPECT_FALSE(fs::exists(dir.Sub("r")));
}

// Runs `body` in a child process; its exit code (-1 if it did not exit).
// The children use RocksDB, the parent only after they ended: a fork never
// copies a process whose RocksDB threads exist.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A restore killed while it swaps its copy in: the path always holds a
// database. Before, the old database was renamed aside and then the copy
// renamed in; killed between the two, the path held nothing, and a server
// started there created an empty store that took token 1. Now the two are
// exchanged in one step; killed before the old one is moved aside, the
// next restore to the path moves it aside (a dead copy's name, which the
// cleanup would otherwise have deleted).
TEST(DBBackupTest, ARestoreKilledWhileItSwapsLeavesADatabaseInPlace) {
  test::TempDir dir;
  const std::string db_path = dir.Sub("db"), bk = dir.Sub("bk");
  ASSERT_EQ(0, InChild([&] {
              std::unique_ptr<DB> db;
              if (!DB::Open(Create(), db_path, &db).ok() ||
                  !db->Put(WriteOptions(), "aa", "old", 120).ok() ||
                  !db->Backup(bk, BackupOptions(), nullptr).ok() ||
                  !db->Put(WriteOptions(), "aa", "newer", 200).ok()) {
                return 1;
              }
              return 0;
            }));
  RestoreOptions ro;
  ro.fence_floor = 300;
  ASSERT_EQ(7, InChild([&] {
              SyncPoint::Get()->SetCallback("RestoreFromBackup:Exchanged",
                                            [](void*) { _exit(7); });
              SyncPoint::Get()->EnableProcessing();
              RestoreResult r;
              DB::RestoreFromBackup(bk, db_path, ro, &r);
              return 1;  // not killed
            }));
  {
    // The path holds the fenced copy.
    Options o;
    o.fence_domain = "prefix:2";
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(o, db_path, &db));
    EXPECT_EQ(300u, db->GetFenceFloor());
    Status s = db->Put(WriteOptions(), "aa", "stale", 1);
    EXPECT_TRUE(s.IsStaleToken()) << s.ToString();
  }
  RestoreResult result;
  ASSERT_FENCEDKV_OK(DB::RestoreFromBackup(bk, db_path, ro, &result));
  ASSERT_FALSE(result.swap_finished.empty());
  EXPECT_EQ(0u, result.unfinished_removed);
  std::unique_ptr<DB> old;
  Options o;
  o.fence_domain = "prefix:2";
  ASSERT_FENCEDKV_OK(DB::Open(o, result.swap_finished, &old));
  std::string v;
  ASSERT_FENCEDKV_OK(old->Get(ReadOptions(), "aa", &v));
  EXPECT_EQ("newer", v);
}

// A swap record whose replaced store the cleanup cannot move (here: its
// LOCK is held) stays, and no restore may overwrite it: before, the next
// restore truncated it, finished, and removed it, and the restore after
// that deleted the replaced store as a dead copy (a review of the fix
// above). Now restores refuse (Busy) until the store can be moved aside.
TEST(DBBackupTest, AnUnfinishedSwapIsNeverForgotten) {
  test::TempDir dir;
  const std::string db_path = dir.Sub("db"), bk = dir.Sub("bk");
  const std::string held = dir.Sub(".db.restoring-AbC123");
  {
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(Create(), db_path, &db));
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "aa", "v", 10));
    ASSERT_FENCEDKV_OK(db->Backup(bk, BackupOptions(), nullptr));
    std::unique_ptr<DB> old;
    ASSERT_FENCEDKV_OK(DB::Open(Create(), held, &old));
    ASSERT_FENCEDKV_OK(old->Put(WriteOptions(), "aa", "replaced", 50));
  }
  // What a restore killed after its exchange leaves: the record names the
  // replaced store, under the restoring name.
  struct stat st;
  ASSERT_EQ(0, stat(held.c_str(), &st));
  std::ofstream(dir.Sub(".db.restore-swap"))
      << ".db.restoring-AbC123\n"
      << st.st_dev << " " << st.st_ino << "\n";
  RestoreOptions ro;
  ro.fence_floor = 100;
  RestoreResult result;
  {
    rocksdb::FileLock* lock = nullptr;
    ASSERT_TRUE(rocksdb::Env::Default()->LockFile(held + "/LOCK", &lock).ok());
    for (int i = 0; i < 2; ++i) {
      Status s = DB::RestoreFromBackup(bk, db_path, ro, &result);
      EXPECT_TRUE(s.IsBusy()) << s.ToString();
      EXPECT_TRUE(fs::exists(dir.Sub(".db.restore-swap")));
      EXPECT_TRUE(fs::exists(held + "/CURRENT"));
    }
    rocksdb::Env::Default()->UnlockFile(lock);
  }
  ASSERT_FENCEDKV_OK(DB::RestoreFromBackup(bk, db_path, ro, &result));
  ASSERT_FALSE(result.swap_finished.empty());
  EXPECT_FALSE(fs::exists(held));
  EXPECT_FALSE(fs::exists(dir.Sub(".db.restore-swap")));
  std::unique_ptr<DB> old;
  ASSERT_FENCEDKV_OK(DB::Open(Create(), result.swap_finished, &old));
  std::string v;
  ASSERT_FENCEDKV_OK(old->Get(ReadOptions(), "aa", &v));
  EXPECT_EQ("replaced", v);
}

TEST(DBBackupTest, RestoreRefusesWithoutAGoodFloorAndWritesNothing) {
  test::TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(Create(), dir.Sub("db"), &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "aa", "v", 40));
  // The lease counter follows the floor, not the tokens clients wrote.
  ASSERT_FENCEDKV_OK(db->SetFenceFloor(WriteOptions(), 40));
  std::unique_ptr<LeaseService> leases;
  ASSERT_FENCEDKV_OK(LeaseService::Open(db.get(), LeaseOptions(), &leases));
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(leases->Acquire("l", "A", 60000, &g));
  EXPECT_EQ(41u, g.token);
  ASSERT_FENCEDKV_OK(db->Backup(dir.Sub("bk"), BackupOptions(), nullptr));
  leases.reset();

  const auto before = Entries(dir.path());
  RestoreOptions ro;
  RestoreResult result;
  for (Token floor :
       {Token{0}, Token{39}, Token{40}}) {  // 0: none; hwm 40; counter 41
    ro.fence_floor = floor;
    Status s = DB::RestoreFromBackup(dir.Sub("bk"), dir.Sub("r"), ro, &result);
    EXPECT_TRUE(s.IsInvalidArgument()) << floor << ": " << s.ToString();
    EXPECT_EQ(before, Entries(dir.path())) << floor;
  }
  ro.fence_floor = 50;
  Status s;
  // Into a directory that does not exist: refused, as a checkpoint's or a
  // backup's destination is, with the same words.
  s = DB::RestoreFromBackup(dir.Sub("bk"), dir.Sub("no/such/r"), ro, &result);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(std::string::npos,
            s.ToString().find("is not an existing directory"))
      << s.ToString();
  EXPECT_EQ(before, Entries(dir.path()));
  // Over the database a process holds open: Busy, untouched.
  s = DB::RestoreFromBackup(dir.Sub("bk"), dir.Sub("db"), ro, &result);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(before, Entries(dir.path()));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "aa", "after", 45));
  db.reset();
  // Over it once closed: moved aside, the copy fenced.
  ASSERT_FENCEDKV_OK(
      DB::RestoreFromBackup(dir.Sub("bk"), dir.Sub("db"), ro, &result));
  EXPECT_EQ(1u, result.backup_id);
  EXPECT_EQ(40u, result.high_water_mark);
  EXPECT_EQ(41u, result.backup_lease_counter);
  EXPECT_EQ(50u, result.fence_floor);
  EXPECT_EQ(50u, result.lease_counter);
  EXPECT_EQ(1u, result.leases_dropped);
  ASSERT_FALSE(result.moved_aside.empty());
  Options o = Create();
  ASSERT_FENCEDKV_OK(DB::Open(o, result.moved_aside, &db));
  std::string v;
  ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "aa", &v));
  EXPECT_EQ("after", v);  // the replaced database, kept
  db.reset();
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("db"), &db));
  ASSERT_FENCEDKV_OK(db->Get(ReadOptions(), "aa", &v));
  EXPECT_EQ("v", v);
  EXPECT_EQ(50u, db->GetFenceFloor());
  EXPECT_TRUE(db->Put(WriteOptions(), "ab", "x", 49).IsStaleToken());
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "ab", "x", 50));
  ASSERT_FENCEDKV_OK(LeaseService::Open(db.get(), LeaseOptions(), &leases));
  ASSERT_FENCEDKV_OK(leases->Acquire("l", "B", 60000, &g));  // A's is gone
  EXPECT_EQ(51u, g.token);
}

}  // namespace
}  // namespace fencedkv
