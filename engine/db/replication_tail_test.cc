// Copyright (c) fencedkv authors.
//
// A LogReader that has caught up keeps reading the log as it grows: every
// batch exactly once and in order, across WAL files (a flush starts a new
// one) and with batches appended between calls, as a primary's shipper
// calls it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fencedkv/db.h"
#include "fencedkv/replication.h"

#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

// Read from the WAL (log_tail_bytes 0) and from memory (the default).
class CaughtUpReaderTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CaughtUpReaderTest, ACaughtUpReaderSeesEveryLaterBatchOnce) {
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.wal_retention_mb = 64;
  o.log_tail_bytes = GetParam();
  std::unique_ptr<DB> primary, replica;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("p"), &primary));
  ASSERT_FENCEDKV_OK(primary->Checkpoint(dir.Sub("r")));
  Options ro;
  ro.log_replica = true;  // it writes nothing of its own
  ASSERT_FENCEDKV_OK(DB::Open(ro, dir.Sub("r"), &replica));
  std::unique_ptr<LogReader> reader;
  ASSERT_FENCEDKV_OK(
      primary->NewLogReader(replica->GetLatestSequenceNumber(), &reader));
  uint64_t seq;
  std::string_view data;
  // Nothing yet, but the recovery sentinel the checkpoint's flush may have
  // added (docs/faults.md): an ordinary batch, shipped like any other.
  size_t sentinels = 0;
  while (reader->Next(&seq, &data)) {
    ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(WriteOptions(), seq, data));
    ++sentinels;
  }
  ASSERT_FENCEDKV_OK(reader->status());
  EXPECT_LE(sentinels, 1u);
  size_t applied = 0, written = 0;
  // Sentinels that flushes may still add (asynchronously): the checkpoint's,
  // if it has not come yet, and one per flush below.
  size_t owed = sentinels == 0 ? 1 : 0;
  for (int round = 0; round < 200; ++round) {
    const int writes = round % 3;  // 0, 1 or 2 batches between calls
    written += writes;
    for (int i = 0; i < writes; ++i) {
      ASSERT_FENCEDKV_OK(primary->Put(WriteOptions(),
                                      "k" + std::to_string(round * 3 + i),
                                      std::string(100, 'v'), 7));
    }
    const bool flush = round % 50 == 49;
    if (flush) ASSERT_FENCEDKV_OK(primary->Flush());  // new WAL (+ sentinel)
    // The primary's sequence before reading: the reader must reach it. A
    // sentinel may land after this read, so equality is checked only below.
    const uint64_t target = primary->GetLatestSequenceNumber();
    size_t got = 0;
    while (reader->Next(&seq, &data)) {
      ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(WriteOptions(), seq, data));
      ++got;
    }
    ASSERT_FENCEDKV_OK(reader->status());
    // A flush may add the sentinel batch, written by the recovery thread
    // after it: in this round or a later one, once per flush at most.
    if (flush) ++owed;
    ASSERT_GE(got, static_cast<size_t>(writes)) << "round " << round;
    const size_t extra = got - static_cast<size_t>(writes);
    EXPECT_LE(extra, owed) << "round " << round;
    owed -= std::min(extra, owed);
    sentinels += extra;
    applied += static_cast<size_t>(writes);
    EXPECT_LE(target, replica->GetLatestSequenceNumber()) << "round " << round;
    EXPECT_LE(replica->GetLatestSequenceNumber(),
              primary->GetLatestSequenceNumber())
        << "round " << round;
  }
  // A sentinel the last flush owes may still be on its way: drain until the
  // replica holds the primary's latest sequence (bounded).
  for (int i = 0; i < 500 && replica->GetLatestSequenceNumber() !=
                                 primary->GetLatestSequenceNumber();
       ++i) {
    while (reader->Next(&seq, &data)) {
      ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(WriteOptions(), seq, data));
      ++sentinels;
    }
    ASSERT_FENCEDKV_OK(reader->status());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(primary->GetLatestSequenceNumber(),
            replica->GetLatestSequenceNumber());
  EXPECT_EQ(written, applied);
  EXPECT_GT(applied, 150u);
  EXPECT_LE(sentinels, 1u + 4u);  // the checkpoint's and four flushes' at most
  std::string a, b;
  ASSERT_TRUE(primary->GetProperty("fencedkv.digest", &a));
  ASSERT_TRUE(replica->GetProperty("fencedkv.digest", &b));
  EXPECT_EQ(a, b);
  // Where the batches came from.
  std::string tail;
  ASSERT_TRUE(primary->GetProperty("fencedkv.log-tail", &tail));
  if (GetParam() == 0) {
    EXPECT_NE(std::string::npos, tail.find("\nfound: 0\n")) << tail;
  } else {
    EXPECT_EQ(std::string::npos, tail.find("\nfound: 0\n")) << tail;
  }
}

INSTANTIATE_TEST_SUITE_P(FromWalAndMemory, CaughtUpReaderTest,
                         ::testing::Values(size_t{0}, size_t{32} << 20),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return info.param == 0 ? "Wal" : "Tail";
                         });

uint64_t StatLine(DB* db, const std::string& name) {
  std::string text;
  EXPECT_TRUE(db->GetProperty("fencedkv.log-tail", &text));
  text.insert(0, "\n");
  const size_t at = text.find("\n" + name + ": ");
  if (at == std::string::npos) {
    ADD_FAILURE() << name << " not in " << text;
    return 0;
  }
  return std::stoull(text.substr(at + name.size() + 3));
}

std::string Digest(DB* db) {
  std::string d;
  EXPECT_TRUE(db->GetProperty("fencedkv.digest", &d));
  return d;
}

// A primary opened with `o`, a replica opened on its checkpoint, and a
// reader of the primary's log from the replica's position.
struct Shipping {
  std::unique_ptr<DB> primary, replica;
  std::unique_ptr<LogReader> reader;
  void Open(const test::TempDir& dir, const Options& o) {
    ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("p"), &primary));
    ASSERT_FENCEDKV_OK(primary->Checkpoint(dir.Sub("r")));
    Options ro;
    ro.log_replica = true;
    ASSERT_FENCEDKV_OK(DB::Open(ro, dir.Sub("r"), &replica));
    ASSERT_FENCEDKV_OK(
        primary->NewLogReader(replica->GetLatestSequenceNumber(), &reader));
  }
  // Every batch the reader has now, applied on the replica: how many.
  size_t Drain() {
    uint64_t seq;
    std::string_view data;
    size_t n = 0;
    while (reader->Next(&seq, &data)) {
      const Status s = replica->ApplyLogBatch(WriteOptions(), seq, data);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) break;
      ++n;
    }
    EXPECT_TRUE(reader->status().ok()) << reader->status().ToString();
    return n;
  }
};

// Writers on several threads (RocksDB merges their batches into shared WAL
// records, and their copies reach the tail in any order) while a shipper
// thread reads and a replica applies: every batch once, in order, and the
// replica ends an exact copy; the batches came from memory.
TEST(ReplicationTailTest, ConcurrentWritersAndAShipperMakeAnExactCopy) {
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.wal_retention_mb = 64;
  o.write_buffer_size = 1 << 20;  // flushes (new WAL files) on the way
  Shipping ship;
  ASSERT_NO_FATAL_FAILURE(ship.Open(dir, o));
  DB* const primary = ship.primary.get();
  DB* const replica = ship.replica.get();
  LogReader* const reader = ship.reader.get();
  std::atomic<bool> writing{true};
  std::atomic<uint64_t> applied{0}, records{0};
  const uint64_t start = replica->GetLatestSequenceNumber();
  std::thread shipper([&] {
    uint64_t seq;
    std::string_view data;
    while (true) {
      const bool last = !writing.load();
      while (reader->Next(&seq, &data)) {
        ASSERT_FENCEDKV_OK(replica->ApplyLogBatch(WriteOptions(), seq, data));
        applied.fetch_add(1);
        records.fetch_add(LogBatchCount(data));
      }
      ASSERT_FENCEDKV_OK(reader->status());
      if (last && replica->GetLatestSequenceNumber() ==
                      primary->GetLatestSequenceNumber()) {
        break;
      }
      if (last) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<std::thread> writers;
  writers.reserve(4);
  const std::string value(200, 'v');
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        const std::string k = "w" + std::to_string(t) + ":" + std::to_string(i);
        if (i % 10 == 9) {
          WriteBatch b;
          b.Put(k + "a", value, 5 + i);
          b.Put(k + "b", value, 5 + i);
          b.Delete("w" + std::to_string(t) + ":" + std::to_string(i - 3),
                   5 + i);
          ASSERT_FENCEDKV_OK(primary->Write(WriteOptions(), b));
        } else {
          ASSERT_FENCEDKV_OK(primary->Put(WriteOptions(), k, value, 5 + i));
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  writing.store(false);
  shipper.join();
  EXPECT_EQ(primary->GetLatestSequenceNumber(),
            replica->GetLatestSequenceNumber());
  EXPECT_EQ(Digest(primary), Digest(replica));
  // Every sequence number once (ApplyLogBatch refuses a gap or a repeat).
  // Not one batch per write: a batch read from the WAL is a whole WAL
  // record, which may hold several writers' batches (a run saw 11,999
  // batches for 12,000 writes).
  EXPECT_EQ(replica->GetLatestSequenceNumber() - start, records.load());
  EXPECT_GE(records.load(), 12000u);
  // Mostly from memory (the flushes' sentinels send it to the WAL now and
  // then), one write a batch there.
  const uint64_t found = StatLine(primary, "found");
  EXPECT_GT(found, 6000u);
  EXPECT_GE(applied.load(), found);
}

// A reader further behind than the tail holds reads the WAL, then moves to
// the tail once it reaches what the tail holds.
TEST(ReplicationTailTest, AReaderBehindTheTailReadsTheWalThenTheTail) {
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.wal_retention_mb = 64;
  o.log_tail_bytes = 16 << 10;  // about 80 of the batches below
  Shipping ship;
  ASSERT_NO_FATAL_FAILURE(ship.Open(dir, o));
  DB* const primary = ship.primary.get();
  DB* const replica = ship.replica.get();
  const std::string value(150, 'v');
  for (int i = 0; i < 2000; ++i) {
    ASSERT_FENCEDKV_OK(
        primary->Put(WriteOptions(), "k" + std::to_string(i), value, 7));
  }
  EXPECT_GE(ship.Drain(), 2000u);
  const uint64_t found = StatLine(primary, "found");
  EXPECT_GT(StatLine(primary, "missed"), 0u);  // the WAL first
  EXPECT_GT(found, 0u);                        // then memory
  EXPECT_LT(found, 200u);
  EXPECT_LE(StatLine(primary, "bytes"), size_t{16} << 10);
  // Caught up: from memory only.
  for (int i = 0; i < 100; ++i) {
    ASSERT_FENCEDKV_OK(
        primary->Put(WriteOptions(), "t" + std::to_string(i), value, 7));
    EXPECT_EQ(1u, ship.Drain());
  }
  EXPECT_GE(StatLine(primary, "found"), found + 100);
  EXPECT_EQ(primary->GetLatestSequenceNumber(),
            replica->GetLatestSequenceNumber());
  EXPECT_EQ(Digest(primary), Digest(replica));
}

// The tail holds each writer's batch; RocksDB may have written several as
// one WAL record. A reader that had the first ones from the tail and then
// reads the WAL (after a reset, or once they left the tail) starts inside
// that record: it gets the record's remaining records as a batch of their
// own. Before, such a position was NotFound (and a replica there needed a
// full copy). Here the record is one multi-record batch, read from the WAL.
TEST(ReplicationTailTest, AReaderInsideAWalRecordGetsTheRestOfIt) {
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.wal_retention_mb = 64;
  o.log_tail_bytes = 0;  // the WAL only
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("p"), &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "before", "x", 3));
  const uint64_t before = db->GetLatestSequenceNumber();
  WriteBatch b;
  b.Put("a", "1", 9);
  b.Put("b", "2", 9);
  b.Put("c", "3", 9);
  ASSERT_FENCEDKV_OK(db->Write(WriteOptions(), b));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "after", "y", 9));
  // The whole batch, read from its start.
  std::string whole;
  uint64_t seq = 0;
  std::string_view view;
  {
    std::unique_ptr<LogReader> from_start;
    ASSERT_FENCEDKV_OK(db->NewLogReader(before, &from_start));
    ASSERT_TRUE(from_start->Next(&seq, &view));
    whole.assign(view.data(), view.size());
  }
  ASSERT_EQ(before + 1, seq);
  const uint32_t count = LogBatchCount(whole);
  ASSERT_GE(count, 3u);
  for (uint32_t skip = 1; skip < count; ++skip) {
    SCOPED_TRACE("skip " + std::to_string(skip));
    std::unique_ptr<LogReader> reader;
    ASSERT_FENCEDKV_OK(db->NewLogReader(before + skip, &reader));
    ASSERT_TRUE(reader->Next(&seq, &view)) << reader->status().ToString();
    EXPECT_EQ(before + 1 + skip, seq);
    const std::string cut(view);
    EXPECT_EQ(count - skip, LogBatchCount(cut));
    // Its records are the whole batch's last ones, byte for byte.
    ASSERT_GT(cut.size(), 12u);
    ASSERT_LT(cut.size(), whole.size());
    EXPECT_EQ(whole.substr(whole.size() - (cut.size() - 12)), cut.substr(12));
    // And the reader goes on after it.
    ASSERT_TRUE(reader->Next(&seq, &view));
    EXPECT_EQ(before + 1 + count, seq);
  }
}

// A batch the tail covers but never gets (RocksDB skips the numbers of a
// failed WAL write; here a sync point drops one write's Append): the
// reader waits 200 ms for it, then restarts the tail and reads the WAL,
// and gets every batch in order.
TEST(ReplicationTailTest, ABatchTheTailNeverGetsIsReadFromTheWal) {
  // One database and a reader (no checkpoint: no flush, so no recovery
  // sentinel lands in the middle).
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.wal_retention_mb = 64;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("p"), &db));
  const uint64_t start_seq = db->GetLatestSequenceNumber();
  std::unique_ptr<LogReader> reader;
  ASSERT_FENCEDKV_OK(db->NewLogReader(start_seq, &reader));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "a", "1", 5));
  SyncPoint::Get()->SetCallback("LogTail::Append:Lose", [](void* arg) {
    *static_cast<bool*>(arg) = true;
  });
  SyncPoint::Get()->EnableProcessing();
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "b", "1", 5));  // lost
  SyncPoint::Get()->DisableProcessing();
  SyncPoint::Get()->ClearAllCallbacks();
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "c", "1", 5));
  // a from memory; then b is "not yet" until the reader gives up on it.
  const auto start = std::chrono::steady_clock::now();
  uint64_t next = start_seq + 1, seq;
  std::string_view data;
  size_t got = 0;
  while (next <= db->GetLatestSequenceNumber() &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    while (reader->Next(&seq, &data)) {
      ASSERT_EQ(next, seq);  // every batch once, in order
      next += LogBatchCount(data);
      ++got;
    }
    ASSERT_FENCEDKV_OK(reader->status());
  }
  EXPECT_EQ(3u, got);
  EXPECT_EQ(db->GetLatestSequenceNumber() + 1, next);
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(200));
  EXPECT_EQ(1u, StatLine(db.get(), "resets"));
  EXPECT_EQ(1u, StatLine(db.get(), "found"));  // a
}

// Reading the tail costs what was appended, not the WAL file's size: a
// reader that opened a new RocksDB iterator per call re-read the current WAL
// file from its start (23 ms per call at 4 MB here, against 24 us).
TEST(ReplicationTailTest, ReadingTheTailDoesNotRereadTheWalFile) {
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.wal_retention_mb = 64;
  o.log_tail_bytes = 0;            // the WAL reader's cost, not memory's
  o.write_buffer_size = 64 << 20;  // one WAL file throughout
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.Sub("p"), &db));
  const std::string value(100, 'v');
  for (int i = 0; i < 30000; ++i) {  // about 4 MB of WAL
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "fill" + std::to_string(i), value, 7));
  }
  std::unique_ptr<LogReader> reader;
  ASSERT_FENCEDKV_OK(db->NewLogReader(db->GetLatestSequenceNumber(), &reader));
  uint64_t seq;
  std::string_view data;
  const int kRounds = 200;
  const auto start = std::chrono::steady_clock::now();
  int got = 0;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_FENCEDKV_OK(
        db->Put(WriteOptions(), "t" + std::to_string(i), value, 7));
    while (reader->Next(&seq, &data)) ++got;
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  EXPECT_EQ(kRounds, got);
  EXPECT_LT(us / kRounds, 3000) << "us per write and tail read";
}

}  // namespace
}  // namespace fencedkv
