// Copyright (c) fencedkv authors.
//
// The acceptance rule, table-driven, and the one token parser.

#include "db/fence_check.h"

#include <gtest/gtest.h>

#include "fencedkv/token.h"

namespace fencedkv {

namespace {
constexpr Token kMax = kMaxToken;
const FenceMode M = FenceMode::kMonotonic;
const FenceMode S = FenceMode::kStrict;
}  // namespace

TEST(FenceCheckTest, AcceptanceTable) {
  struct Row {
    FenceMode mode;
    Token offered, max, floor;
    Verdict want;
  } rows[] = {
      // Fresh domain (max 0): any valid token passes in both modes.
      {M, 1, 0, 0, Verdict::kAccept},
      {S, 1, 0, 0, Verdict::kAccept},
      {M, kMax, 0, 0, Verdict::kAccept},
      {S, kMax, 0, 0, Verdict::kAccept},
      // The paused holder: A holds 7, B wrote 8.
      {M, 7, 8, 0, Verdict::kBelowMax},
      {S, 7, 8, 0, Verdict::kNotAboveMax},
      {M, 8, 8, 0, Verdict::kAccept},       // monotonic: same lease, again
      {S, 8, 8, 0, Verdict::kNotAboveMax},  // strict: equal is refused
      {M, 9, 8, 0, Verdict::kAccept},
      {S, 9, 8, 0, Verdict::kAccept},
      // Extremes.
      {M, kMax, kMax, 0, Verdict::kAccept},
      {S, kMax, kMax, 0, Verdict::kNotAboveMax},
      {M, kMax - 1, kMax, 0, Verdict::kBelowMax},
      {M, 1, kMax, 0, Verdict::kBelowMax},
      {S, 1, 1, 0, Verdict::kNotAboveMax},
      // The floor is checked first, in both modes.
      {M, 4, 0, 5, Verdict::kBelowFloor},
      {S, 4, 0, 5, Verdict::kBelowFloor},
      {M, 5, 0, 5, Verdict::kAccept},
      {S, 5, 0, 5, Verdict::kAccept},
      {M, 4, 9, 5, Verdict::kBelowFloor},
      {M, 6, 9, 5, Verdict::kBelowMax},
      {S, 9, 9, 5, Verdict::kNotAboveMax},
      {M, kMax, 0, kMax, Verdict::kAccept},
      {M, kMax - 1, 0, kMax, Verdict::kBelowFloor},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(r.want, CheckWrite(r.mode, r.offered, r.max, r.floor))
        << FenceModeName(r.mode) << " offered=" << r.offered << " max=" << r.max
        << " floor=" << r.floor;
  }
}

TEST(FenceCheckTest, ReadsUseTheMonotonicRuleInBothModes) {
  EXPECT_EQ(Verdict::kAccept, CheckRead(8, 8, 0));
  EXPECT_EQ(Verdict::kBelowMax, CheckRead(7, 8, 0));
  EXPECT_EQ(Verdict::kBelowFloor, CheckRead(7, 0, 8));
}

TEST(FenceCheckTest, FloorSubsumesAndReportedMax) {
  EXPECT_FALSE(SubsumedByFloor(M, 3, 0));
  EXPECT_TRUE(SubsumedByFloor(M, 3, 5));
  EXPECT_TRUE(SubsumedByFloor(M, 5, 5));
  EXPECT_FALSE(SubsumedByFloor(M, 6, 5));
  EXPECT_TRUE(SubsumedByFloor(S, 4, 5));
  EXPECT_FALSE(SubsumedByFloor(S, 5, 5));  // strict still refuses 5 there
  EXPECT_EQ(7u, ReportedMax(M, 7, 0));
  EXPECT_EQ(5u, ReportedMax(M, 3, 5));
  EXPECT_EQ(9u, ReportedMax(M, 9, 5));
  EXPECT_EQ(4u, ReportedMax(S, 3, 5));
  EXPECT_EQ(5u, ReportedMax(S, 5, 5));
  // The reported max alone predicts the verdict, and dropping a subsumed
  // record (stored -> 0) never changes it.
  for (FenceMode mode : {M, S}) {
    for (Token floor : {0, 1, 5, 10}) {
      for (Token stored : {0, 1, 4, 5, 6, 10, 12}) {
        const Token reported = ReportedMax(mode, stored, floor);
        if (SubsumedByFloor(mode, stored, floor)) {
          EXPECT_EQ(reported, ReportedMax(mode, 0, floor));
        }
        for (Token t = 1; t <= 13; ++t) {
          const bool accept =
              CheckWrite(mode, t, stored, floor) == Verdict::kAccept;
          const bool by_reported = mode == S ? t > reported : t >= reported;
          EXPECT_EQ(accept, by_reported)
              << FenceModeName(mode) << " t=" << t << " stored=" << stored
              << " floor=" << floor;
        }
      }
    }
  }
}

TEST(FenceCheckTest, StaleStatusCarriesDetails) {
  Status s = StaleStatus(Verdict::kBelowMax, 7, 8, 0, "k", -1);
  ASSERT_TRUE(s.IsStaleToken());
  EXPECT_EQ(7u, s.stale()->offered);
  EXPECT_EQ(8u, s.stale()->max);
  EXPECT_EQ("k", s.stale()->domain);
  EXPECT_EQ("Stale token: token 7 < max 8 for domain \"k\"", s.ToString());
  s = StaleStatus(Verdict::kNotAboveMax, 8, 8, 0, "a\"b\x01", 3);
  EXPECT_EQ("token 8 <= max 8 for domain \"a\\\"b\\x01\" (batch op 3)",
            s.message());
  EXPECT_EQ(3, s.stale()->batch_index);
  s = StaleStatus(Verdict::kBelowFloor, 3, 0, 5, "k", -1);
  EXPECT_EQ(StaleReason::kBelowFloor, s.stale()->reason);
  EXPECT_EQ(5u, s.stale()->max);
  EXPECT_EQ("token 3 < floor 5 for domain \"k\"", s.message());
}

TEST(TokenTest, ParseToken) {
  Token t = 99;
  EXPECT_TRUE(ParseToken("1", &t));
  EXPECT_EQ(1u, t);
  EXPECT_TRUE(ParseToken("18446744073709551615", &t));
  EXPECT_EQ(kMaxToken, t);
  t = 99;
  // One rule: a token is written in canonical decimal, without leading
  // zeros (as Redis reads integers), whatever its length.
  for (const char* bad :
       {"", "0", "00", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "abc",
        "18446744073709551616", "99999999999999999999", "123456789012345678901",
        "007", "01", "00000000000000000001", "000000000000000000001",
        "018446744073709551615"}) {
    EXPECT_FALSE(ParseToken(bad, &t)) << bad;
    EXPECT_EQ(99u, t) << bad;
  }
}

}  // namespace fencedkv
