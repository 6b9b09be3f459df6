// Copyright (c) fencedkv authors.

#include "sync_gather.h"

#include <gtest/gtest.h>

namespace fencedkv {
namespace server {
namespace {

using std::chrono::microseconds;
using Clock = SyncGather::Clock;

TEST(SyncGatherTest, NothingIsGatheredBeforeAWriteWasTimed) {
  SyncGather g(microseconds(500));
  EXPECT_EQ(g.bound().count(), 0);
  EXPECT_FALSE(g.KeepGathering(10, 64, Clock::now()));
}

TEST(SyncGatherTest, GathersWhileEachPassBringsNewWrites) {
  SyncGather g(microseconds(500));
  g.RecordWrite(microseconds(300));
  const auto t = Clock::now();
  EXPECT_TRUE(g.KeepGathering(3, 64, t));                      // one more pass
  EXPECT_TRUE(g.KeepGathering(10, 64, t + microseconds(20)));  // it brought 7
  EXPECT_TRUE(g.KeepGathering(11, 64, t + microseconds(40)));
  EXPECT_FALSE(g.KeepGathering(11, 64, t + microseconds(60)));  // none: write
  // The next flush starts a new gathering.
  EXPECT_TRUE(g.KeepGathering(1, 64, t + microseconds(400)));
  EXPECT_FALSE(g.KeepGathering(1, 64, t + microseconds(405)));
}

TEST(SyncGatherTest, NeverLongerThanTheRecentWritesTake) {
  SyncGather g(microseconds(500));
  g.RecordWrite(microseconds(100));
  EXPECT_EQ(g.bound(), microseconds(100));
  const auto t = Clock::now();
  EXPECT_TRUE(g.KeepGathering(1, 64, t));
  EXPECT_TRUE(g.KeepGathering(2, 64, t + microseconds(99)));
  EXPECT_FALSE(g.KeepGathering(3, 64, t + microseconds(100)));  // still growing
}

TEST(SyncGatherTest, NeverLongerThanTheCap) {
  SyncGather g(microseconds(50));
  g.RecordWrite(microseconds(5000));  // a slow disk
  EXPECT_EQ(g.bound(), microseconds(50));
  const auto t = Clock::now();
  EXPECT_TRUE(g.KeepGathering(1, 64, t));
  EXPECT_TRUE(g.KeepGathering(2, 64, t + microseconds(49)));
  EXPECT_FALSE(g.KeepGathering(3, 64, t + microseconds(50)));
}

TEST(SyncGatherTest, ACapOfZeroTurnsItOff) {
  SyncGather g(microseconds(0));
  g.RecordWrite(microseconds(300));
  EXPECT_FALSE(g.KeepGathering(1, 64, Clock::now()));
  EXPECT_FALSE(g.KeepGathering(2, 64, Clock::now()));
}

TEST(SyncGatherTest, AGroupAsLargeAsAllowedIsWrittenAtOnce) {
  SyncGather g(microseconds(500));
  g.RecordWrite(microseconds(300));
  const auto t = Clock::now();
  EXPECT_TRUE(g.KeepGathering(63, 64, t));
  EXPECT_FALSE(g.KeepGathering(64, 64, t));
  EXPECT_FALSE(g.KeepGathering(70, 64, t));
  // The loop allows nothing while the database thread is busy.
  EXPECT_FALSE(g.KeepGathering(1, 0, t));
}

TEST(SyncGatherTest, TheBoundFollowsAMovingAverage) {
  SyncGather g(microseconds(100000));
  g.RecordWrite(microseconds(800));
  EXPECT_EQ(g.bound(), microseconds(800));
  // One slow write moves it an eighth of the way.
  g.RecordWrite(microseconds(8800));
  EXPECT_EQ(g.bound(), microseconds(1800));
  // Fast writes bring it down again.
  for (int i = 0; i < 60; ++i) g.RecordWrite(microseconds(200));
  EXPECT_LT(g.bound(), microseconds(210));
  EXPECT_GE(g.bound(), microseconds(200));
  // A negative duration counts as no time: the average moves an eighth of
  // the way to 0, not below it.
  const auto before = g.bound();
  g.RecordWrite(-std::chrono::seconds(1));
  EXPECT_EQ(g.bound(), before - before / 8);
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
