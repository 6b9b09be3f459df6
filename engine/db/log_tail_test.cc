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

LogTail::Found Find(LogTail* tail, uint64_t seq, std::string* got,
                    microseconds wait = microseconds(0)) {
  std::shared_ptr<const std::string> batch;
  const LogTail::Found f = tail->Find(seq, wait, &batch);
  if (f == LogTail::Found::kBatch) *got = *batch;
  return f;
}

TEST(LogTailTest, KeepsNothingWhileNobodyReads) {
  LogTail tail(1 << 20);
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

TEST(LogTailTest, AnswersOnlyWhereABatchStarts) {
  LogTail tail(1 << 20);
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
  LogTail tail(1 << 20);
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
  LogTail tail(1 << 20);
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
  LogTail tail(1 << 20);
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
  tail.Reset(/*published=*/6);
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
  LogTail tail(3 * one.size());
  tail.AddReader();
  for (uint64_t first = 1; first <= 91; first += 10)
    tail.Append(Batch(first, 10));
  const LogTail::Stats st = tail.GetStats();
  EXPECT_EQ(3u, st.batches);
  EXPECT_EQ(3 * one.size(), st.bytes);
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

}  // namespace
}  // namespace fencedkv
