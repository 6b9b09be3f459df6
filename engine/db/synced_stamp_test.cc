// Copyright (c) fencedkv authors.
//
// The synced stamp (db/synced_stamp.h): a store that lost writes it had
// synced (its WAL files deleted) is refused at open instead of opening
// without them and accepting tokens it had fenced out; the read-only view
// (fencedkv-admin check) says so too; a stamp that does not parse is
// refused with a way out; drop_wal_after_damage opens what is left and
// stamps it.

#include "db/synced_stamp.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <rocksdb/env.h>
#include <sys/stat.h>

#include "fencedkv/db.h"

#include "db/read_only_store.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

namespace fs = std::filesystem;

uint64_t StampedSequence(DB* db) {
  std::string v;
  if (!db->GetProperty("fencedkv.wal-sync", &v)) return 0;
  const size_t at = v.find("stamped_sequence: ");
  if (at == std::string::npos) return 0;
  return std::stoull(v.substr(at + 18));
}

class SyncedStampTest : public ::testing::Test {
 protected:
  SyncedStampTest() {
    options_.create_if_missing = true;
    options_.wal_sync_interval_ms = 10;
  }

  // Opens, raises k<i> to token 100 + i with synced writes, waits for the
  // stamp to cover them, closes. Returns the last sequence written.
  uint64_t WriteAndClose(int keys) {
    std::unique_ptr<DB> db;
    EXPECT_FENCEDKV_OK(DB::Open(options_, path(), &db));
    if (db == nullptr) return 0;
    WriteOptions sync;
    sync.sync = true;
    for (int i = 0; i < keys; ++i) {
      EXPECT_FENCEDKV_OK(
          db->Put(sync, "k" + std::to_string(i), "v", Token(100 + i)));
    }
    const uint64_t last = db->GetLatestSequenceNumber();
    for (int i = 0; i < 500 && StampedSequence(db.get()) < last; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(last, StampedSequence(db.get()));
    return last;
  }

  // Deletes the WAL files (NNNNNN.log): what `rm *.log` in the directory
  // does. Returns how many.
  int DeleteLogs() {
    int n = 0;
    for (const auto& e : fs::directory_iterator(path())) {
      if (e.path().extension() == ".log") {
        fs::remove(e.path());
        ++n;
      }
    }
    return n;
  }

  // The newest WAL file (NNNNNN.log) in the directory; empty if none.
  fs::path NewestLog() const {
    fs::path newest;
    for (const auto& e : fs::directory_iterator(path())) {
      if (e.path().extension() == ".log" &&
          (newest.empty() || e.path().filename() > newest.filename())) {
        newest = e.path();
      }
    }
    return newest;
  }

  std::string path() const { return dir_.Sub("db"); }

  test::TempDir dir_;
  Options options_;
};

TEST_F(SyncedStampTest, AStoreMissingItsSyncedLogIsRefused) {
  const uint64_t last = WriteAndClose(20);
  ASSERT_GT(DeleteLogs(), 0);
  std::unique_ptr<DB> db;
  Status s = DB::Open(options_, path(), &db);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos,
            s.ToString().find("up to sequence " + std::to_string(last) +
                              " had been synced"))
      << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("drop_wal_after_damage"))
      << s.ToString();
  // Refused again: nothing was changed by the refusal.
  EXPECT_TRUE(DB::Open(options_, path(), &db).IsCorruption());

  // The read-only view (fencedkv-admin check's "wal" class) says so too.
  std::unique_ptr<ReadOnlyStore> ro;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(path(), &ro));
  EXPECT_TRUE(ro->wal_status().IsCorruption()) << ro->wal_status().ToString();
  ro.reset();
  EXPECT_TRUE(ReadOnlyStore::OpenChecked(path(), &ro).IsCorruption());
}

TEST_F(SyncedStampTest, DroppingWhatIsLostOpensAndStartsTheStampOver) {
  WriteAndClose(20);
  ASSERT_GT(DeleteLogs(), 0);
  Options drop = options_;
  drop.drop_wal_after_damage = true;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(drop, path(), &db));
  // What the operator accepted: the writes are gone, and with them the
  // raised maxima.
  std::string value;
  EXPECT_TRUE(db->Get(ReadOptions(), "k3", &value).IsNotFound());
  // The stamp starts over (the latest sequence may be a record of the
  // open's own, not synced yet).
  bool found = false;
  uint64_t stamped = 1;
  ASSERT_FENCEDKV_OK(
      ReadSyncedStamp(rocksdb::Env::Default(), path(), &found, &stamped));
  EXPECT_TRUE(found);
  EXPECT_EQ(0u, stamped);
  EXPECT_EQ(0u, StampedSequence(db.get()));
  db.reset();
  // The store now is what was left: it opens without the option.
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
  EXPECT_FENCEDKV_OK(db->Put(WriteOptions(), "k3", "again", 1));
}

// What a power cut may do after such an open: lose the records written
// since and never synced (here the newest log file, which holds only the
// open's own record, cut to nothing). The store must still open: the
// stamp named the open's latest sequence before, and refused it.
TEST_F(SyncedStampTest, AfterDroppingAPowerCutLosesNothingTheStampNames) {
  WriteAndClose(20);
  ASSERT_GT(DeleteLogs(), 0);
  Options drop = options_;
  drop.drop_wal_after_damage = true;
  drop.wal_sync_interval_ms = 0;  // no sync of the open's own records
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(drop, path(), &db));
  db.reset();  // (a close syncs nothing)
  const fs::path newest = NewestLog();
  ASSERT_FALSE(newest.empty());
  fs::resize_file(newest, 0);
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
}

// A log file the MANIFEST still counts on, found in archive/ (where a
// primary keeps flushed log files for its replicas): the state a MANIFEST
// that lost its last edit leaves (its flush edit gone, the family still
// names the archived file). RocksDB 7.8 skipped it without a word and the
// store opened without its records; a later log replaying past the stamp
// hid it from the stamp. Here without a stamp (no syncer): this check
// alone.
TEST_F(SyncedStampTest, ALogFileTheManifestNeedsFoundInTheArchiveIsRefused) {
  options_.wal_sync_interval_ms = 0;
  options_.wal_retention_mb = 64;
  {
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
    for (int i = 0; i < 10; ++i) {
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k" + std::to_string(i), "v",
                                 Token(100 + i)));
    }
    ASSERT_FENCEDKV_OK(db->Flush());
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "x", "v", 500));
  }
  const fs::path newest = NewestLog();
  ASSERT_FALSE(newest.empty());
  const fs::path archived = fs::path(path()) / "archive" / newest.filename();
  fs::create_directories(archived.parent_path());
  fs::rename(newest, archived);
  std::unique_ptr<DB> db;
  Status s = DB::Open(options_, path(), &db);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("in archive/"))
      << s.ToString();
  std::unique_ptr<ReadOnlyStore> ro;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(path(), &ro));
  EXPECT_TRUE(ro->wal_status().IsCorruption()) << ro->wal_status().ToString();
  ro.reset();
  // Put back, it opens with everything.
  fs::rename(archived, newest);
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
  EXPECT_TRUE(db->Put(WriteOptions(), "x", "stale", 499).IsStaleToken());
}

TEST_F(SyncedStampTest, AHealthyStoreReopensAndTheStampFollows) {
  uint64_t last = 0;
  for (int round = 0; round < 5; ++round) {
    last = WriteAndClose(10 + round);
  }
  bool found = false;
  uint64_t stamped = 0;
  ASSERT_FENCEDKV_OK(
      ReadSyncedStamp(rocksdb::Env::Default(), path(), &found, &stamped));
  EXPECT_TRUE(found);
  EXPECT_EQ(last, stamped);
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
  // The maxima are there: a stale token is refused.
  EXPECT_TRUE(db->Put(WriteOptions(), "k3", "stale", 99).IsStaleToken());
}

TEST_F(SyncedStampTest, WithoutTheSyncerNoStampIsWritten) {
  options_.wal_sync_interval_ms = 0;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
  WriteOptions sync;
  sync.sync = true;
  ASSERT_FENCEDKV_OK(db->Put(sync, "k", "v", 5));
  db.reset();
  EXPECT_FALSE(fs::exists(path() + "/" + kSyncedStampFile));
}

TEST_F(SyncedStampTest, AStampThatDoesNotParseIsRefusedWithAWayOut) {
  WriteAndClose(3);
  const std::string stamp = path() + "/" + kSyncedStampFile;
  for (const char* bad :
       {"", "fencedkv-synced 1\n", "fencedkv-synced 1\nsequence 12x\n",
        "fencedkv-synced 1\nsequence 012\n",
        "fencedkv-synced 1\nsequence 99999999999999999999\n",
        "fencedkv-synced 2\nsequence 5\n", "fencedkv-synced 1\nsequence 5"}) {
    SCOPED_TRACE(bad);
    {
      std::ofstream out(stamp, std::ios::trunc);
      out << bad;
    }
    std::unique_ptr<DB> db;
    Status s = DB::Open(options_, path(), &db);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("remove it"))
        << s.ToString();
  }
  // Not a regular file (a FIFO would block the read), or too long to be
  // one: refused before reading.
  fs::remove(stamp);
  ASSERT_EQ(0, ::mkfifo(stamp.c_str(), 0600));
  {
    std::unique_ptr<DB> db;
    Status s = DB::Open(options_, path(), &db);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("not a regular file"));
  }
  fs::remove(stamp);
  {
    std::ofstream out(stamp, std::ios::trunc);
    out << "fencedkv-synced 1\nsequence 1\n" << std::string(5000, '#') << "\n";
  }
  {
    std::unique_ptr<DB> db;
    Status s = DB::Open(options_, path(), &db);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("longer than 4096"));
  }
  // Unknown lines are a later version's.
  {
    std::ofstream out(stamp, std::ios::trunc);
    out << "fencedkv-synced 1\nsequence 1\nwritten_by later\n";
  }
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
  db.reset();
  fs::remove(stamp);
  ASSERT_FENCEDKV_OK(DB::Open(options_, path(), &db));
}

}  // namespace
}  // namespace fencedkv
