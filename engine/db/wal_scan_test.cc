// Copyright (c) fencedkv authors.
//
// Damage in the write-ahead log: RocksDB's point-in-time recovery stops at
// the first damaged record and drops everything after it without an error.
// A tail torn by a crash must still open; intact writes after damage must
// not be dropped silently (wal_scan.h).

#include "db/wal_scan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/env.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencedkv/db.h"
#include "fencedkv/replication.h"

#include "db/read_only_store.h"
#include "db/synced_marker.h"
#include "util/coding.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

constexpr int kKeys = 3000;

class WalScanTest : public testing::Test {
 protected:
  WalScanTest() {
    options_.create_if_missing = true;
    // Everything stays in the memtable and its WAL until the close.
    options_.write_buffer_size = 64 << 20;
  }

  // kKeys values (key i at token i + 1), then "k5" advanced to 90000;
  // closed without a flush, so the newest WAL file holds all of it.
  void Fill() {
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k" + std::to_string(i),
                                 std::string(100, 'v'), Token(i + 1)));
    }
    Token after = 0;
    ASSERT_FENCEDKV_OK(db->AdvanceFence(WriteOptions(), "k5", 90000, &after));
    last_sequence_ = db->GetLatestSequenceNumber();
    db.reset();
    log_ = NewestLog();
    ASSERT_FALSE(log_.empty());
    ASSERT_GT(Size(log_), 100u << 10) << log_;
  }

  // A database at `dir` with options o, and a replica of it at `copy` (a
  // checkpoint opened as Options::log_replica).
  static void OpenWithReplica(const Options& o, const std::string& dir,
                              const std::string& copy, std::unique_ptr<DB>* db,
                              std::unique_ptr<DB>* replica) {
    ASSERT_FENCEDKV_OK(DB::Open(o, dir, db));
    ASSERT_FENCEDKV_OK((*db)->Checkpoint(copy));
    Options ro = o;
    ro.log_replica = true;
    ASSERT_FENCEDKV_OK(DB::Open(ro, copy, replica));
  }
  // log_'s bytes (one block at most) and its fragments' offsets.
  void ReadSmallLog(std::string* bytes, std::vector<size_t>* at) {
    ASSERT_TRUE(
        rocksdb::ReadFileToString(rocksdb::Env::Default(), log_, bytes).ok());
    ASSERT_LT(bytes->size(), 32768u);
    const std::string& b = *bytes;
    for (size_t pos = 0; pos + 7 <= b.size();) {
      at->push_back(pos);
      pos += 7 + (static_cast<unsigned char>(b[pos + 4]) |
                  (static_cast<size_t>(static_cast<unsigned char>(b[pos + 5]))
                   << 8));
    }
  }
  std::string NewestLog() { return NewestLogIn(dir_.path()); }
  // The names of the *.log files in `dir`.
  static std::vector<std::string> LogsIn(const std::string& dir) {
    std::vector<std::string> children, logs;
    EXPECT_TRUE(rocksdb::Env::Default()->GetChildren(dir, &children).ok());
    for (const auto& c : children) {
      if (c.size() > 4 && c.compare(c.size() - 4, 4, ".log") == 0) {
        logs.push_back(c);
      }
    }
    return logs;
  }
  static std::string NewestLogIn(const std::string& dir) {
    const std::vector<std::string> logs = LogsIn(dir);
    if (logs.empty()) return "";
    return dir + "/" + *std::max_element(logs.begin(), logs.end());
  }
  // The small log in dir_, then a's (synced) advance to 100; log_ set.
  void WriteSmallLogThenAdvance() {
    {
      std::unique_ptr<DB> db;
      ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
      WriteSmallLog(db.get());
      Token after = 0;
      ASSERT_FENCEDKV_OK(db->AdvanceFence(WriteOptions(), "a", 100, &after));
    }
    log_ = NewestLog();
  }
  // A small log: "a" at token 5, then twenty unsynced writes.
  static void WriteSmallLog(DB* db) {
    ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "a", "v", 5));
    for (int i = 0; i < 20; ++i) {
      ASSERT_FENCEDKV_OK(
          db->Put(WriteOptions(), "b" + std::to_string(i), "w", 1));
    }
  }
  static uint64_t Size(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  static void Flip(const std::string& path, uint64_t offset) {
    FILE* f = fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fseek(f, static_cast<long>(offset), SEEK_SET), 0);
    int c = fgetc(f);
    ASSERT_NE(c, EOF);
    ASSERT_EQ(fseek(f, static_cast<long>(offset), SEEK_SET), 0);
    fputc(c ^ 0xff, f);
    fclose(f);
  }

  Token FenceOf(DB* db, const std::string& key) {
    Token max = 0;
    EXPECT_FENCEDKV_OK(db->GetFence(key, &max));
    return max;
  }

  test::TempDir dir_;
  Options options_;
  uint64_t last_sequence_ = 0;
  std::string log_;
};

TEST_F(WalScanTest, AnIntactLogIsReadWholeAndOpens) {
  Fill();
  WalScan scan;
  ASSERT_FENCEDKV_OK(
      ScanWal(rocksdb::Env::Default(), dir_.path(), UINT64_MAX, &scan));
  EXPECT_EQ(scan.damaged_blocks, 0u);
  EXPECT_GE(scan.records, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(scan.last_sequence, last_sequence_);
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
  EXPECT_GE(db->GetLatestSequenceNumber(), last_sequence_);
  EXPECT_EQ(FenceOf(db.get(), "k5"), 90000u);
}

// The defect: one flipped byte in the middle of the newest WAL file, and the
// open recovered only the writes before it -- k5's max fell from 90000 to 6
// and a token it had fenced out was accepted again -- without an error.
TEST_F(WalScanTest, AFlipInTheMiddleOfTheLogRefusesTheOpenAndChangesNothing) {
  Fill();
  const uint64_t size = Size(log_);
  Flip(log_, size / 2);

  std::unique_ptr<DB> db;
  Status s = DB::Open(options_, dir_.path(), &db);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("intact write batch"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("checksum mismatch"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("drop_wal_after_damage"), std::string::npos)
      << s.ToString();
  // Nothing was written: the log is still there, as it was.
  EXPECT_EQ(Size(log_), size);
  EXPECT_EQ(NewestLog(), log_);

  // The admin tool's read-only view says so too.
  std::unique_ptr<ReadOnlyStore> store;
  ASSERT_FENCEDKV_OK(ReadOnlyStore::Open(dir_.path(), &store));
  EXPECT_TRUE(store->wal_status().IsCorruption())
      << store->wal_status().ToString();
  store.reset();
  s = ReadOnlyStore::OpenChecked(dir_.path(), &store);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();

  // Only on request does the open drop them (and k5's raise with them).
  Options drop = options_;
  drop.drop_wal_after_damage = true;
  ASSERT_FENCEDKV_OK(DB::Open(drop, dir_.path(), &db));
  EXPECT_LT(db->GetLatestSequenceNumber(), last_sequence_);
  EXPECT_LT(FenceOf(db.get(), "k5"), 90000u);
  db.reset();
  // Once dropped (flushed past), the store opens without the option.
  ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
}

TEST_F(WalScanTest, DamageInTheLastRecordOnlyIsATornTailAndOpens) {
  Fill();
  // The last record (the advance) flipped: nothing intact after it.
  Flip(log_, Size(log_) - 3);
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
  EXPECT_EQ(FenceOf(db.get(), "k5"), 6u);  // the advance is lost, no more
  std::string value;
  ASSERT_FENCEDKV_OK(
      db->Get(ReadOptions(), "k" + std::to_string(kKeys - 1), &value));
}

TEST_F(WalScanTest, ACutTailOpens) {
  Fill();
  ASSERT_EQ(truncate(log_.c_str(), static_cast<off_t>(Size(log_) - 10)), 0);
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
  EXPECT_EQ(FenceOf(db.get(), "k5"), 6u);
  std::string value;
  ASSERT_FENCEDKV_OK(
      db->Get(ReadOptions(), "k" + std::to_string(kKeys - 1), &value));
}

TEST_F(WalScanTest, GarbageAfterTheLastRecordOpens) {
  Fill();
  // Bytes after the last record, as a write torn mid-block may leave.
  FILE* f = fopen(log_.c_str(), "ab");
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 5000; ++i) fputc((i * 131 + 7) & 0xff, f);
  fclose(f);
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
  EXPECT_EQ(FenceOf(db.get(), "k5"), 90000u);
}

// A page of zeros where a block's first record starts (a lost or zeroed
// write): RocksDB skips the block without a word and replays the blocks
// after it, so the open recovered past the hole and a count of what it
// recovered could not tell. The scan sees intact records after the zeros,
// and the open is refused. With only unsynced writes after the zeros it
// may be what a power cut leaves (a later page written before an earlier
// one), and the error says so and how to open without them; with a synced
// write after them it cannot be (the sync put everything before it on
// disk), and the error says to restore.
class WalScanHoleTest : public WalScanTest,
                        public testing::WithParamInterface<bool> {};

TEST_P(WalScanHoleTest, AZeroedPageMidLogRefusesTheOpenSayingWhatItMayBe) {
  const bool synced_after = GetParam();
  auto key = [](int i) { return "k" + std::to_string(i * 7919 % 100003); };
  constexpr int kWrites = 20000;
  {
    // Keys of varying length, so that some block starts with a whole
    // record (most start with the rest of one begun in the block before).
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
    for (int i = 0; i < kWrites; ++i) {
      ASSERT_FENCEDKV_OK(
          db->Put(WriteOptions(), key(i), std::string(90 + i % 13, 'v'), 1));
    }
    if (synced_after) {
      WriteOptions sync;
      sync.sync = true;
      ASSERT_FENCEDKV_OK(db->Put(sync, "synced", "s", 1));
    }
  }
  log_ = NewestLog();
  const uint64_t size = Size(log_);
  // Two blocks after the first that start with a whole record (full or
  // first): every block from the one to the other zeroed. RocksDB skips
  // the zero blocks and replays from the second on, without a word.
  std::vector<uint64_t> whole;
  {
    FILE* f = fopen(log_.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    for (uint64_t b = 32768; b + 32768 < size && whole.size() < 2; b += 32768) {
      ASSERT_EQ(fseek(f, static_cast<long>(b + 6), SEEK_SET), 0);
      const int type = fgetc(f);
      if (type == 1 || type == 2) whole.push_back(b);
    }
    fclose(f);
  }
  ASSERT_EQ(whole.size(), 2u);
  {
    FILE* f = fopen(log_.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fseek(f, static_cast<long>(whole[0]), SEEK_SET), 0);
    for (uint64_t i = whole[0]; i < whole[1]; ++i) fputc(0, f);
    fclose(f);
  }
  std::unique_ptr<DB> db;
  Status s = DB::Open(options_, dir_.path(), &db);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("has a hole"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("drop_wal_after_damage"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.ToString().find("what a power cut leaves") != std::string::npos,
            !synced_after)
      << s.ToString();
  EXPECT_EQ(Size(log_), size);  // nothing written
}

INSTANTIATE_TEST_SUITE_P(SyncedAfterOrNot, WalScanHoleTest, testing::Bool());

// Options::wal_sync_interval_ms: the first write after each interval is
// synced, and a database that went quiet syncs with a record of its own
// (here, during the sleep), so damage older than the interval is followed
// by a synced record, and the error does not offer it as a power cut's
// doing.
TEST_F(WalScanTest, TheIntervalSyncLeavesOnlyItsLastIntervalUnsynced) {
  for (uint32_t interval : {0u, 20u}) {
    SCOPED_TRACE("wal_sync_interval_ms=" + std::to_string(interval));
    test::TempDir dir;
    Options o = options_;
    o.wal_sync_interval_ms = interval;
    {
      std::unique_ptr<DB> db;
      ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
      WriteSmallLog(db.get());
      // Long enough for the syncer's tick; the next write is then synced.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "c", "w", 1));
    }
    const std::string log = NewestLogIn(dir.path());
    ASSERT_FALSE(log.empty());
    const uint64_t size = Size(log);
    ASSERT_LT(size, 32768u);
    // One byte of an early record: "a"'s or one after it.
    Flip(log, 200);
    std::unique_ptr<DB> db;
    Status s = DB::Open(o, dir.path(), &db);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_EQ(s.ToString().find("what a power cut leaves") != std::string::npos,
              interval == 0)
        << s.ToString();
    EXPECT_EQ(Size(log), size);
  }
}

// A flipped length byte in the log's last block made the header's
// fragment run past the end of the file, which the scan took for a torn
// write and skipped the rest of the block: a synced advance after it was
// dropped without a word (a's max back at 5; an adversarial review). A
// synced record after such damage now refuses the open.
TEST_F(WalScanTest, ABadLengthBeforeASyncedRecordInTheLastBlockRefuses) {
  WriteSmallLogThenAdvance();
  // The fragments: the last is the advance, the one before it an unsynced
  // write.
  std::string bytes;
  std::vector<size_t> at;
  ReadSmallLog(&bytes, &at);
  ASSERT_GE(at.size(), 3u);
  Flip(log_, at[at.size() - 2] + 5);  // its length's high byte
  std::unique_ptr<DB> db;
  Status s = DB::Open(options_, dir_.path(), &db);
  ASSERT_TRUE(s.IsCorruption())
      << s.ToString() << " (a's max after the open: "
      << (db != nullptr ? FenceOf(db.get(), "a") : 0) << ")";
}

// A primary's log readers get its batches without the synced marker (a
// replica of any build takes them as it always did), from the memory tail
// and from the WAL alike, though the WAL holds it.
TEST_F(WalScanTest, LogReadersGetBatchesWithoutTheSyncedMarker) {
  for (size_t tail : {size_t{1} << 20, size_t{0}}) {
    SCOPED_TRACE(tail > 0 ? "from the tail" : "from the WAL");
    test::TempDir dir;
    Options o = options_;
    o.log_tail_bytes = tail;
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
    // A replica (a copy of the primary as it is now) applying them with
    // sync adds its own markers.
    test::TempDir replica_dir;
    ASSERT_FENCEDKV_OK(db->Checkpoint(replica_dir.Sub("copy")));
    Options ro = o;
    ro.log_replica = true;
    std::unique_ptr<DB> replica;
    ASSERT_FENCEDKV_OK(DB::Open(ro, replica_dir.Sub("copy"), &replica));
    // (The checkpoint's own record comes after the copy's last.)
    const uint64_t start = replica->GetLatestSequenceNumber();
    std::unique_ptr<LogReader> reader;
    ASSERT_FENCEDKV_OK(db->NewLogReader(start, &reader));
    WriteOptions sync;
    sync.sync = true;
    for (int i = 0; i < 10; ++i) {
      ASSERT_FENCEDKV_OK(db->Put(sync, "s" + std::to_string(i), "v", 1));
    }
    Token after = 0;
    ASSERT_FENCEDKV_OK(db->AdvanceFence(WriteOptions(), "s0", 50, &after));
    uint64_t first = 0;
    std::string_view data;
    int batches = 0;
    while (reader->Next(&first, &data)) {
      ++batches;
      EXPECT_EQ(data.find(kSyncedMarker), std::string_view::npos) << batches;
      ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(sync, first, data));
    }
    EXPECT_FENCEDKV_OK(reader->status());
    EXPECT_GE(batches, 11);
    std::string a, b;
    ASSERT_TRUE(db->GetProperty("fencedkv.digest", &a));
    ASSERT_TRUE(replica->GetProperty("fencedkv.digest", &b));
    EXPECT_EQ(a, b);
    // Both WALs have them.
    for (const std::string& d : {dir.path(), replica_dir.Sub("copy")}) {
      size_t markers = 0;
      for (const auto& c : LogsIn(d)) {
        std::string path = d, wal;
        path.append("/").append(c);
        ASSERT_TRUE(
            rocksdb::ReadFileToString(rocksdb::Env::Default(), path, &wal)
                .ok());
        for (size_t at = wal.find(kSyncedMarker); at != std::string::npos;
             at = wal.find(kSyncedMarker, at + 1)) {
          ++markers;
        }
      }
      EXPECT_GE(markers, 11u) << d;
    }
  }
}

// The batches a small log's bytes hold that a synced write made: a marker
// right after a batch header (12 bytes) and its record's type and length
// (2), in a batch of at least one entry (an idle sync has none).
size_t SyncedBatchesIn(const std::string& wal) {
  size_t n = 0;
  for (size_t at = wal.find(kSyncedMarker); at != std::string::npos;
       at = wal.find(kSyncedMarker, at + 1)) {
    if (at >= 14 && DecodeFixed32(wal.data() + at - 14 + 8) > 0) ++n;
  }
  return n;
}

// While writes come, the WAL syncer has the next write after each tick
// synced (on a replica, the next batch it applies: a replica writes no
// record of its own while batches come); the idle sync is only for a
// database that went quiet.
TEST_F(WalScanTest, WhileWritesComeTheNextWriteAfterEachTickIsSynced) {
  for (uint32_t interval : {0u, 20u}) {
    SCOPED_TRACE("wal_sync_interval_ms=" + std::to_string(interval));
    test::TempDir dir, copy_dir;
    const std::string copy = copy_dir.Sub("copy");
    Options o = options_;
    o.wal_sync_interval_ms = interval;
    std::unique_ptr<DB> db, replica;
    OpenWithReplica(o, dir.path(), copy, &db, &replica);
    std::unique_ptr<LogReader> reader;
    ASSERT_FENCEDKV_OK(
        db->NewLogReader(replica->GetLatestSequenceNumber(), &reader));
    // A write a millisecond, each applied at once, for a few intervals.
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
    for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
      ASSERT_FENCEDKV_OK(
          db->Put(WriteOptions(), "k" + std::to_string(i % 50), "v", 1));
      uint64_t first = 0;
      std::string_view data;
      while (reader->Next(&first, &data)) {
        ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(WriteOptions(), first, data));
      }
      ASSERT_FENCEDKV_OK(reader->status());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (const std::string& d : {dir.path(), copy}) {
      std::string wal;
      ASSERT_TRUE(rocksdb::ReadFileToString(rocksdb::Env::Default(),
                                            NewestLogIn(d), &wal)
                      .ok());
      ASSERT_LT(wal.size(), 32768u) << d;  // one block: no fragment headers
      EXPECT_EQ(SyncedBatchesIn(wal) > 0, interval > 0) << d;
    }
    std::string a, b;
    ASSERT_TRUE(db->GetProperty("fencedkv.digest", &a));
    ASSERT_TRUE(replica->GetProperty("fencedkv.digest", &b));
    EXPECT_EQ(a, b);
  }
}

// Waits (at most 5 s) until db's WAL syncer has written more than `than`
// idle syncs; returns how many it has.
uint64_t WaitForIdleSyncs(DB* db, uint64_t than, int tries = 500) {
  uint64_t n = 0;
  for (int i = 0; i < tries; ++i) {
    n = test::PropertyNumber(db, "fencedkv.wal-sync", "idle_syncs");
    if (n > than) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return n;
}

// A database that goes quiet with writes unsynced: the syncer writes a
// record of the synced marker alone, which takes no sequence number. Log
// readers reading the WAL skip it (a replica refused such a batch: "not a
// log batch"), and the open's scan counts no sequence for it (it claimed
// one past the last, and the open refused the store: "intact write
// batch(es) past sequence").
TEST_F(WalScanTest, AnIdleSyncShipsNothingAndReopens) {
  test::TempDir dir, copy_dir;
  const std::string copy = copy_dir.Sub("copy");
  Options o = options_;
  o.log_tail_bytes = 0;  // readers read the WAL
  o.wal_sync_interval_ms = 20;
  std::unique_ptr<DB> db, replica;
  OpenWithReplica(o, dir.path(), copy, &db, &replica);
  const uint64_t start = replica->GetLatestSequenceNumber();
  std::unique_ptr<LogReader> reader;
  ASSERT_FENCEDKV_OK(db->NewLogReader(start, &reader));
  uint64_t idle = 0, replica_idle = 0;
  int batches = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (int i = 0; i < 5; ++i) {
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k" + std::to_string(i),
                                 "v" + std::to_string(round),
                                 Token(round + 1)));
    }
    uint64_t first = 0;
    std::string_view data;
    while (reader->Next(&first, &data)) {
      ++batches;
      ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(WriteOptions(), first, data));
    }
    ASSERT_FENCEDKV_OK(reader->status());
    // Both go quiet: each writes an idle sync into its own WAL (unless a
    // tick made the round's last write a synced one: rare).
    idle = WaitForIdleSyncs(db.get(), idle);
    replica_idle = WaitForIdleSyncs(replica.get(), replica_idle);
  }
  EXPECT_GE(batches, 15);  // (and the checkpoint's record)
  // So at least one was read past by the reader above.
  EXPECT_GE(idle, 2u);
  EXPECT_GE(replica_idle, 2u);
  // A new reader from the start seeks past them too.
  std::unique_ptr<LogReader> again;
  ASSERT_FENCEDKV_OK(db->NewLogReader(start, &again));
  uint64_t first = 0, next = 0;
  std::string_view data;
  while (again->Next(&first, &data)) {
    if (next != 0) {
      EXPECT_EQ(first, next);
    }
    next = first + DecodeFixed32(data.data() + 8);
  }
  EXPECT_FENCEDKV_OK(again->status());
  EXPECT_EQ(next, db->GetLatestSequenceNumber() + 1);
  std::string a, b;
  ASSERT_TRUE(db->GetProperty("fencedkv.digest", &a));
  ASSERT_TRUE(replica->GetProperty("fencedkv.digest", &b));
  EXPECT_EQ(a, b);
  const uint64_t sequence = db->GetLatestSequenceNumber();
  // Closed with an idle sync the last record of each log.
  again.reset();
  reader.reset();
  db.reset();
  replica.reset();
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
  EXPECT_GE(db->GetLatestSequenceNumber(), sequence);  // (and the open's)
  Options ro = o;
  ro.log_replica = true;
  ASSERT_FENCEDKV_OK(DB::Open(ro, copy, &replica));
  EXPECT_EQ(replica->GetLatestSequenceNumber(), sequence);
  ASSERT_TRUE(replica->GetProperty("fencedkv.digest", &b));
  EXPECT_EQ(a, b);
}

// Damage in the last write before an idle sync: the sync put that write
// on disk, so the damage is no torn write, and opening would drop an
// acknowledged write. The idle sync takes no sequence number, so only its
// place right after the damage tells the open it missed something.
TEST_F(WalScanTest, DamageRightBeforeAnIdleSyncRefusesTheOpen) {
  Options o = options_;
  o.wal_sync_interval_ms = 20;
  std::string bytes;
  std::vector<size_t> at;
  for (int attempt = 0;; ++attempt) {
    {
      std::unique_ptr<DB> db;
      ASSERT_FENCEDKV_OK(DB::Open(o, dir_.path(), &db));
      WriteSmallLog(db.get());
      WaitForIdleSyncs(db.get(), 0, 100);
    }
    log_ = NewestLog();
    bytes.clear();
    at.clear();
    ReadSmallLog(&bytes, &at);
    ASSERT_GE(at.size(), 3u);
    // The last fragment is the idle sync: a batch of no entry. On a loaded
    // machine the syncer's ticks may fall between those writes: the last
    // one took a due sync (nothing left for an idle sync), or an idle sync
    // came while the writer was descheduled, before its last writes (2
    // runs in 20 beside two busy loops). Then again, from scratch.
    if (DecodeFixed32(bytes.data() + at.back() + 7 + 8) == 0u) break;
    ASSERT_LT(attempt, 10);
    std::filesystem::remove_all(dir_.path());
  }
  Flip(log_, at[at.size() - 2] + 7 + 13);  // a byte of the last write
  std::unique_ptr<DB> db;
  Status s = DB::Open(o, dir_.path(), &db);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.ToString().find("what a power cut leaves"), std::string::npos)
      << s.ToString();
}

// Damage inside the log's last 32 KiB block: the scan skipped the rest of
// the block at the damage, as RocksDB's recovery does, so the intact
// records after it in the same block went uncounted, and a store whose
// whole log fits in one block opened with its newest writes silently
// dropped: "a"'s max fell from 100 to 5 and a token it had fenced out was
// accepted (an adversarial review). The scan now looks for the next intact
// fragment in the block after damage.
class WalScanSmallLogTest : public WalScanTest,
                            public testing::WithParamInterface<int> {};

TEST_P(WalScanSmallLogTest, DamageInTheLastBlockRefusesTheOpen) {
  WriteSmallLogThenAdvance();
  const uint64_t size = Size(log_);
  ASSERT_LT(size, 32768u);
  ASSERT_GT(size, 500u);
  if (GetParam() == 0) {
    Flip(log_, 200);  // one byte of an early record
  } else if (GetParam() == 2) {
    Flip(log_, 6);  // the first fragment's type: 1 becomes 254
  } else {
    // A range zeroed mid-block: RocksDB skips the block's rest from the
    // zeros, and the writes after them with it.
    FILE* f = fopen(log_.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fseek(f, 150, SEEK_SET), 0);
    for (int i = 150; i < 400; ++i) fputc(0, f);
    fclose(f);
  }
  WalScan scan;
  ASSERT_FENCEDKV_OK(
      ScanWal(rocksdb::Env::Default(), dir_.path(), UINT64_MAX, &scan));
  EXPECT_GE(scan.damaged_blocks, 1u);
  std::unique_ptr<DB> db;
  Status s = DB::Open(options_, dir_.path(), &db);
  ASSERT_TRUE(s.IsCorruption())
      << s.ToString() << " (a's max after the open: "
      << (db != nullptr ? FenceOf(db.get(), "a") : 0) << ")";
  EXPECT_EQ(Size(log_), size);  // nothing written
  // The operator's way out still opens it, without the lost writes.
  db.reset();
  Options drop = options_;
  drop.drop_wal_after_damage = true;
  ASSERT_FENCEDKV_OK(DB::Open(drop, dir_.path(), &db));
}

INSTANTIATE_TEST_SUITE_P(FlipOrZeros, WalScanSmallLogTest,
                         testing::Values(0, 1, 2));

// Zeros after the last record (preallocated space a crash left) are a tail.
TEST_F(WalScanTest, ZerosAfterTheLastRecordOpen) {
  Fill();
  FILE* f = fopen(log_.c_str(), "ab");
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 40000; ++i) fputc(0, f);
  fclose(f);
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options_, dir_.path(), &db));
  EXPECT_EQ(FenceOf(db.get(), "k5"), 90000u);
}

TEST_F(WalScanTest, TheScanReportsWhatAnOpenWouldDrop) {
  Fill();
  Flip(log_, Size(log_) / 2);
  WalScan scan;
  ASSERT_FENCEDKV_OK(
      ScanWal(rocksdb::Env::Default(), dir_.path(), 1000, &scan));
  EXPECT_GE(scan.damaged_blocks, 1u);
  EXPECT_EQ(scan.last_sequence, last_sequence_);
  EXPECT_EQ(scan.beyond_last, last_sequence_);
  EXPECT_GT(scan.beyond_records, 0u);
  // With the damage far after sequence 1000, the first batch past it comes
  // before the damage.
  EXPECT_TRUE(scan.damage_file.empty());
  Status s = CheckWalRecovery(rocksdb::Env::Default(), dir_.path(), scan,
                              last_sequence_);
  EXPECT_FENCEDKV_OK(s);
}

}  // namespace
}  // namespace fencedkv
