// Copyright (c) fencedkv authors.
//
// The embedded lease service on a real database: tokens strictly increase
// across reopens, one service per database, and the token skew guard
// (Options::max_token_skew) that refuses tokens no lease ever carried.

#include "fencedkv/lease.h"

#include <gtest/gtest.h>

#include "fencedkv/db.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

class LeaseServiceTest : public testing::Test {
 protected:
  void Open(Options options = Options()) {
    options.create_if_missing = true;
    leases_.reset();
    db_.reset();
    ASSERT_FENCEDKV_OK(DB::Open(options, dir_.Sub("db"), &db_));
    ASSERT_FENCEDKV_OK(LeaseService::Open(db_.get(), LeaseOptions(), &leases_));
  }

  Token Acquire(const std::string& name, const std::string& holder) {
    LeaseGrant g;
    Status s = leases_->Acquire(name, holder, 60000, &g);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return g.token;
  }

  test::TempDir dir_;
  std::unique_ptr<DB> db_;
  std::unique_ptr<LeaseService> leases_;
};

TEST_F(LeaseServiceTest, TokensStrictlyIncreaseAcrossReopens) {
  Open();
  const Token a = Acquire("orders", "A");
  ASSERT_FENCEDKV_OK(leases_->Release("orders", "A", a));
  const Token b = Acquire("orders", "B");
  EXPECT_LT(a, b);
  Open();
  const Token c = Acquire("billing", "C");
  EXPECT_LT(b, c);
}

// Two services on one database would each keep their own counter and grant
// the same token to two holders: the second Open is refused while the first
// exists, and allowed once it is gone.
TEST_F(LeaseServiceTest, ASecondServiceOnTheSameDatabaseIsRefused) {
  Open();
  std::unique_ptr<LeaseService> second;
  Status s = LeaseService::Open(db_.get(), LeaseOptions(), &second);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(nullptr, second);
  const Token a = Acquire("orders", "A");
  leases_.reset();
  ASSERT_FENCEDKV_OK(LeaseService::Open(db_.get(), LeaseOptions(), &second));
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(second->Acquire("billing", "B", 60000, &g));
  EXPECT_LT(a, g.token);
}

TEST_F(LeaseServiceTest, SkewGuardRefusesTokensNoLeaseCarried) {
  Options o;
  o.max_token_skew = 5;
  Open(o);
  EXPECT_EQ(0u, db_->GetIssuedToken());
  // Nothing issued yet: tokens 1..5 pass, 6 does not.
  EXPECT_EQ("OK", test::StatusString(db_->Put(WriteOptions(), "k", "v", 5)));
  Status s = db_->Put(WriteOptions(), "k", "v", 6);
  EXPECT_TRUE(s.IsTokenSkew()) << s.ToString();
  const Token t = Acquire("orders", "A");
  EXPECT_EQ(t, db_->GetIssuedToken());
  EXPECT_EQ("OK",
            test::StatusString(db_->Put(WriteOptions(), "k", "v", t + 5)));
  EXPECT_EQ("TOKEN_SKEW",
            test::StatusString(db_->Put(WriteOptions(), "k2", "v", t + 6)));
  EXPECT_EQ("TOKEN_SKEW",
            test::StatusString(db_->Delete(WriteOptions(), "k", kMaxToken)));
  EXPECT_EQ("TOKEN_SKEW", test::StatusString(db_->AdvanceFence(
                              WriteOptions(), "k", kMaxToken, nullptr)));
  WriteBatch batch;
  batch.Put("a", "1", t);
  batch.Put("b", "2", kMaxToken);
  EXPECT_EQ("TOKEN_SKEW", test::StatusString(db_->Write(WriteOptions(), batch)));
  // A refused write changed nothing.
  std::string v;
  EXPECT_EQ("NOT_FOUND", test::StatusString(db_->Get(ReadOptions(), "a", &v)));
  Token max = 0;
  ASSERT_FENCEDKV_OK(db_->GetFence("k", &max));
  EXPECT_EQ(t + 5, max);
  // The ceiling survives a reopen: the service reports its counter.
  Open(o);
  EXPECT_EQ(t, db_->GetIssuedToken());
  EXPECT_EQ("TOKEN_SKEW",
            test::StatusString(db_->Put(WriteOptions(), "k3", "v", t + 6)));
}

TEST_F(LeaseServiceTest, SkewGuardIsOffByDefault) {
  Open();
  EXPECT_EQ("OK", test::StatusString(
                      db_->Put(WriteOptions(), "k", "v", kMaxToken - 1)));
}

}  // namespace
}  // namespace fencedkv
