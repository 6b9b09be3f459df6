// Copyright (c) fencedkv authors.
//
// LogTail on its own: what it holds, in what order, what it waits for and
// what sends a reader to the WAL (db/log_tail.h). The database around it is
// tested in replication_tail_test.cc.

#include "db/log_tail.h"

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "util/coding.h"
#include "util/sync_point.h"

namespace fencedkv {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A batch as RocksDB writes one: sequence:fixed64 count:fixed32, then
// `count` records (their bytes do not matter to the tail).
std::string Batch(uint64_t first, uint32_t count, size_t record_bytes = 10) {
  std::string b(12, '\0');
  EncodeFixed64(&b[0], first);
  EncodeFixed32(&b[8], count);
  b.append(count * record_bytes, 'r');
  return b;
}

// The published sequence the tests' tails read (the database's latest).
uint64_t published = 0;
uint64_t Published() { return published; }

LogTail::Found Find(LogTail* tail, uint64_t seq, std::string* got,
                    microseconds wait = microseconds(0)) {
  std::shared_ptr<const std::string> batch;
  const LogTail::Found f = tail->Find(seq, wait, &batch);
  if (f == LogTail::Found::kBatch) *got = *batch;
  return f;
}

TEST(LogTailTest, KeepsNothingWhileNobodyReads) {
  LogTail tail(1 << 20, Published);
  tail.Append(Batch(1, 3));
  std::string got;
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 1, &got));
  EXPECT_EQ(0u, tail.GetStats().appended);
  tail.AddReader();
  tail.Append(Batch(4, 2));
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 4, &got));
  EXPECT_EQ(Batch(4, 2), got);
  // The last reader gone, it lets go of what it held.
  tail.RemoveReader();
  EXPECT_EQ(0u, tail.GetStats().bytes);
  tail.AddReader();
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 4, &got));
}

TEST(LogTailTest, KeepsABatchGivenInTwoPiecesAsOne) {
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  const std::string b = Batch(7, 3);
  tail.Append(std::string_view(b).substr(0, 12),
              std::string_view(b).substr(12));
  std::string got;
  ASSERT_EQ(LogTail::Found::kBatch, Find(&tail, 7, &got));
  EXPECT_EQ(b, got);
  EXPECT_EQ(b.size() + LogTail::kEntryOverhead, tail.GetStats().bytes);
}

TEST(LogTailTest, AnswersOnlyWhereABatchStarts) {
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  tail.Append(Batch(10, 5));  // 10..14
  tail.Append(Batch(15, 1));  // 15
  std::string got;
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 10, &got));
  EXPECT_EQ(Batch(10, 5), got);
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 15, &got));
  EXPECT_EQ(Batch(15, 1), got);
  // Before its first batch, and inside one: the WAL's business.
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 9, &got));
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 12, &got));
  // After its last: covered, not written yet.
  EXPECT_EQ(LogTail::Found::kPending, Find(&tail, 16, &got));
  // A batch that took no sequence number is not one.
  tail.Append(Batch(16, 0));
  EXPECT_EQ(LogTail::Found::kPending, Find(&tail, 16, &got));
  EXPECT_EQ(2u, tail.GetStats().batches);
}

TEST(LogTailTest, ALateAppendFillsItsPlace) {
  // Two writers: the second one's batch (numbers 6..8) comes before the
  // first one's (1..5) is appended.
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  tail.Append(Batch(1, 2));  // 1..2: the start
  tail.Append(Batch(6, 3));
  std::string got;
  EXPECT_EQ(LogTail::Found::kPending, Find(&tail, 3, &got));
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 6, &got));
  tail.Append(Batch(3, 3));  // 3..5, late
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 3, &got));
  EXPECT_EQ(Batch(3, 3), got);
  // In order from the start, as a reader walks it.
  uint64_t next = 1;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(LogTail::Found::kBatch, Find(&tail, next, &got)) << next;
    next += DecodeFixed32(got.data() + 8);
  }
  EXPECT_EQ(9u, next);
  // Appended twice (cannot happen): the first copy stays.
  tail.Append(Batch(6, 3, 99));
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 6, &got));
  EXPECT_EQ(Batch(6, 3), got);
}

TEST(LogTailTest, AReaderWaitsForABatchOnItsWay) {
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  tail.Append(Batch(1, 1));
  std::thread writer([&tail] {
    std::this_thread::sleep_for(milliseconds(50));
    tail.Append(Batch(2, 4));
  });
  std::string got;
  EXPECT_EQ(LogTail::Found::kBatch,
            Find(&tail, 2, &got, std::chrono::seconds(30)));
  EXPECT_EQ(Batch(2, 4), got);
  writer.join();
  EXPECT_EQ(1u, tail.GetStats().waited);
  // Not for ever: a batch that does not come is pending after the wait.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(LogTail::Found::kPending, Find(&tail, 6, &got, milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(20));
}

TEST(LogTailTest, AResetSendsReadersToTheWalAndRestartsPastItsNumbers) {
  published = 0;
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  tail.Append(Batch(1, 2));
  tail.Append(Batch(3, 2));
  // A write took 5 and is not here (a failed one, or one without the WAL);
  // a concurrent writer's 6 was published before the reset and comes
  // after it.
  std::thread waiter([&tail] {
    std::string got;
    // Woken by the reset: 5 will never come, the WAL has it.
    EXPECT_EQ(LogTail::Found::kNotHeld,
              Find(&tail, 5, &got, std::chrono::seconds(30)));
  });
  std::this_thread::sleep_for(milliseconds(20));
  published = 6;
  tail.Reset();
  published = 0;
  waiter.join();
  std::string got;
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 1, &got));
  tail.Append(Batch(6, 1));  // at or before the published 6: not a start
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 6, &got));
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 7, &got));
  tail.Append(Batch(7, 2));  // past it: starts the tail again
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 7, &got));
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 6, &got));
  EXPECT_EQ(1u, tail.GetStats().resets);
}

TEST(LogTailTest, KeepsTheNewestWithinItsCapacity) {
  const std::string one = Batch(1, 10);
  const size_t each = one.size() + LogTail::kEntryOverhead;
  LogTail tail(3 * each, Published);
  tail.AddReader();
  for (uint64_t first = 1; first <= 91; first += 10)
    tail.Append(Batch(first, 10));
  const LogTail::Stats st = tail.GetStats();
  EXPECT_EQ(3u, st.batches);
  EXPECT_EQ(3 * each, st.bytes);
  std::string got;
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 61, &got));  // evicted
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 71, &got));
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 91, &got));
  // A late batch from before the start is not kept.
  tail.Append(Batch(61, 10));
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 61, &got));
  // One batch larger than the whole capacity is kept alone.
  tail.Append(Batch(101, 50));
  EXPECT_EQ(1u, tail.GetStats().batches);
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 101, &got));
  // A reader's copy outlives its eviction.
  std::shared_ptr<const std::string> held;
  ASSERT_EQ(LogTail::Found::kBatch, tail.Find(101, microseconds(0), &held));
  tail.Append(Batch(151, 50));
  EXPECT_EQ(Batch(101, 50), *held);
}

// A write that copied its batch while the last reader went away keeps
// nothing, and a reader added later starts the tail past what was
// published when it came. Before (review of the first version), such a
// write started the tail with no reader left; later writes, finding no
// reader, skipped theirs; and a reader added an hour later found every
// batch since "covered but not there": 200 ms of waiting per batch.
TEST(LogTailTest, AWriteRacingTheLastReadersExitKeepsNothing) {
  published = 10;
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  SyncPoint::Get()->SetCallback("LogTail::Append:Copied",
                                [&tail](void*) { tail.RemoveReader(); });
  SyncPoint::Get()->EnableProcessing();
  tail.Append(Batch(11, 1));
  SyncPoint::Get()->DisableProcessing();
  SyncPoint::Get()->ClearAllCallbacks();
  EXPECT_EQ(0u, tail.GetStats().batches);
  tail.Append(Batch(12, 1));  // no reader: skipped
  published = 12;
  tail.AddReader();
  tail.Append(Batch(13, 2));
  std::string got;
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 12, &got));  // the WAL
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 13, &got));
  EXPECT_EQ(1u, tail.GetStats().batches);
  published = 0;
}

// The first reader starts the tail past what is published when it comes:
// a write that published before it and finds it when it appends is not
// the start (its numbers may follow one that found no reader).
TEST(LogTailTest, TheFirstReaderStartsThePublishedSequence) {
  published = 20;
  LogTail tail(1 << 20, Published);
  tail.AddReader();
  tail.Append(Batch(19, 2));  // published before the reader: skipped
  std::string got;
  EXPECT_EQ(LogTail::Found::kNotHeld, Find(&tail, 19, &got));
  tail.Append(Batch(21, 1));
  EXPECT_EQ(LogTail::Found::kBatch, Find(&tail, 21, &got));
  published = 0;
}

}  // namespace
}  // namespace fencedkv
