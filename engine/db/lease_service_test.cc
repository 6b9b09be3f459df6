// Copyright (c) fencedkv authors.
//
// The embedded lease service on a real database: tokens strictly increase
// across reopens, one service per database, and the token skew guard
// (Options::max_token_skew) that refuses tokens no lease ever carried.

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "db/db_impl.h"
#include "db/fence_format.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

class LeaseServiceTest : public testing::Test {
 protected:
  void Open(Options options = Options(),
            const LeaseOptions& lease_options = {}) {
    options.create_if_missing = true;
    leases_.reset();
    db_.reset();
    ASSERT_FENCEDKV_OK(DB::Open(options, dir_.Sub("db"), &db_));
    ASSERT_FENCEDKV_OK(LeaseService::Open(db_.get(), lease_options, &leases_));
  }

  // A lease service on a fake clock (ms), with no background reclaiming.
  void OpenWithClock(LeaseOptions lo = {}) {
    lo.now_ms = [this] { return now_.load(); };
    lo.reclaim_interval_ms = 0;
    Open(Options(), lo);
  }

  // Lease records on disk.
  size_t StoredLeases() {
    std::vector<std::pair<std::string, std::string>> records;
    EXPECT_TRUE(
        static_cast<DBImpl*>(db_.get())->ScanMeta("lease/", &records).ok());
    return records.size();
  }

  std::atomic<int64_t> now_{1000000};

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

// A lease record above the lease counter (damaged or altered meta records)
// would have the service grant that token again: the service refuses to
// open. Before, it opened and granted token 1 to another holder while
// "orders" held token 1.
TEST_F(LeaseServiceTest, ALeaseAboveTheCounterRefusesTheService) {
  Open();
  const Token a = Acquire("orders", "A");
  ASSERT_EQ(a, 1u);
  auto* impl = static_cast<DBImpl*>(db_.get());
  ASSERT_FENCEDKV_OK(
      impl->PutMetaSynced({{"lease_counter", format::EncodeToken(0)}}));
  leases_.reset();
  Status s = LeaseService::Open(db_.get(), LeaseOptions(), &leases_);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("above the lease_counter 0"), std::string::npos)
      << s.ToString();
}

// Options that cannot work are refused at Open. Before, max_ttl_ms =
// INT64_MAX was accepted and an Acquire at that TTL overflowed its expiry:
// OK with a negative expiry, and another holder got the lease at once.
TEST_F(LeaseServiceTest, OptionsThatCannotWorkAreRefused) {
  Open();
  leases_.reset();
  struct Case {
    const char* what;
    std::function<void(LeaseOptions*)> set;
  };
  for (const Case& c : std::vector<Case>{
           {"max_ttl_ms", [](LeaseOptions* o) { o->max_ttl_ms = INT64_MAX; }},
           {"max_ttl_ms",
            [](LeaseOptions* o) { o->max_ttl_ms = kMaxLeaseTtlLimitMs + 1; }},
           {"min_ttl_ms",
            [](LeaseOptions* o) {
              o->min_ttl_ms = 1000;
              o->max_ttl_ms = 10;
            }},
           {"min_ttl_ms", [](LeaseOptions* o) { o->min_ttl_ms = 0; }},
           {"max_name_bytes", [](LeaseOptions* o) { o->max_name_bytes = 0; }},
           {"max_holder_bytes",
            [](LeaseOptions* o) { o->max_holder_bytes = 0; }},
           {"max_leases", [](LeaseOptions* o) { o->max_leases = 0; }},
           {"reclaim_interval_ms",
            [](LeaseOptions* o) { o->reclaim_interval_ms = -1; }},
           {"reclaim_batch", [](LeaseOptions* o) { o->reclaim_batch = 0; }}}) {
    LeaseOptions o;
    c.set(&o);
    std::unique_ptr<LeaseService> service;
    Status s = LeaseService::Open(db_.get(), o, &service);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.what << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find(c.what)) << s.ToString();
  }
  // The longest allowed TTL works: the lease is held, not expired.
  LeaseOptions o;
  o.max_ttl_ms = kMaxLeaseTtlLimitMs;
  ASSERT_FENCEDKV_OK(LeaseService::Open(db_.get(), o, &leases_));
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(leases_->Acquire("x", "A", kMaxLeaseTtlLimitMs, &g));
  EXPECT_GT(g.expires_at_ms, 0);
  EXPECT_TRUE(leases_->Acquire("x", "B", 1000, &g).IsLeaseHeld());
}

// A counter record that is not 8 bytes is damage: the service refuses to
// open (it cannot know which tokens it issued), naming the record.
TEST_F(LeaseServiceTest, AMalformedCounterRefusesTheService) {
  Open();
  ASSERT_EQ(Acquire("orders", "A"), 1u);
  auto* impl = static_cast<DBImpl*>(db_.get());
  ASSERT_FENCEDKV_OK(impl->PutMetaSynced({{"lease_counter", "abc"}}));
  leases_.reset();
  Status s = LeaseService::Open(db_.get(), LeaseOptions(), &leases_);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("bad lease_counter record"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("3 bytes, not 8"), std::string::npos)
      << s.ToString();
}

// Two services on one database would each keep their own counter and grant
// the same token to two holders: the second Open is refused while the first
// exists, and allowed once it is gone.
TEST_F(LeaseServiceTest, ListShowsHeldLeasesInNameOrderFromACursor) {
  OpenWithClock();
  const Token b = Acquire("b", "B");
  const Token a = Acquire("a", "A");
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(leases_->Acquire("c", "C", 10, &g));
  auto list = [this](std::string_view after, size_t max) {
    std::vector<std::string> seen;
    leases_->List(after, [&](const LeaseGrant& l) {
      seen.push_back(l.name + "/" + l.holder + "/" + std::to_string(l.token));
      return seen.size() < max;
    });
    return seen;
  };
  const std::string ta = std::to_string(a), tb = std::to_string(b),
                    tc = std::to_string(g.token);
  EXPECT_EQ((std::vector<std::string>{"a/A/" + ta, "b/B/" + tb, "c/C/" + tc}),
            list("", 10));
  EXPECT_EQ((std::vector<std::string>{"a/A/" + ta}), list("", 1));
  EXPECT_EQ((std::vector<std::string>{"b/B/" + tb, "c/C/" + tc}),
            list("a", 10));
  now_ += 11;  // c expired: no longer listed (not yet reclaimed)
  EXPECT_EQ((std::vector<std::string>{"b/B/" + tb}), list("a", 10));
}

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

// The counter moves only with grants and the floor (an operator's action):
// a token some client wrote -- 2^64-1 in one domain -- must not exhaust it
// for every other lease, and does not survive a reopen into it either.
TEST_F(LeaseServiceTest, ClientTokensDoNotMoveTheCounter) {
  Open();
  const Token a = Acquire("orders", "A");
  ASSERT_FENCEDKV_OK(db_->Put(WriteOptions(), "k", "v", kMaxToken));
  ASSERT_FENCEDKV_OK(
      db_->AdvanceFence(WriteOptions(), "k2", kMaxToken, nullptr));
  const Token b = Acquire("billing", "B");
  EXPECT_EQ(a + 1, b);
  Open();
  EXPECT_EQ(b + 1, Acquire("shipping", "C"));
  // Raising the floor moves it: a grant is always at or above the floor.
  ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), 1000));
  EXPECT_EQ(1001u, Acquire("invoices", "D"));
  EXPECT_EQ(1002u, Acquire("refunds", "E"));
  // A floor one below the top: one grant more, then the counter is spent
  // (the message said the floor was 2^64-1; it was the last token).
  ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), kMaxToken - 1));
  EXPECT_EQ(kMaxToken, Acquire("last", "F"));
  LeaseGrant g;
  Status s = leases_->Acquire("none", "G", 1000, &g);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(std::string::npos,
            s.ToString().find("the last token issued or the fence floor"))
      << s.ToString();
}

// Expired leases are reclaimed from memory and disk, a bounded number per
// pass; a reclaimed name gets a new token, never an old one again.
TEST_F(LeaseServiceTest, ExpiredLeasesAreReclaimed) {
  OpenWithClock();
  LeaseGrant g;
  for (int i = 0; i < 300; ++i) {
    ASSERT_FENCEDKV_OK(leases_->Acquire("l" + std::to_string(i), "h", 1, &g));
  }
  ASSERT_FENCEDKV_OK(leases_->Acquire("long", "h", 60000, &g));
  const Token last = g.token;
  EXPECT_EQ(301u, leases_->GetStats().held);
  now_ += 2;  // all but "long" expired
  size_t reclaimed = 0;
  ASSERT_FENCEDKV_OK(leases_->ReclaimExpired(100, &reclaimed));
  EXPECT_EQ(100u, reclaimed);
  EXPECT_EQ(201u, leases_->GetStats().held);
  ASSERT_FENCEDKV_OK(leases_->ReclaimExpired(1000, &reclaimed));
  EXPECT_EQ(200u, reclaimed);
  ASSERT_FENCEDKV_OK(leases_->ReclaimExpired(1000, &reclaimed));
  EXPECT_EQ(0u, reclaimed);
  EXPECT_EQ(1u, leases_->GetStats().held);
  EXPECT_EQ(300u, leases_->GetStats().reclaimed);
  // Gone from disk too; the held one stays.
  EXPECT_EQ(1u, StoredLeases());
  OpenWithClock();
  ASSERT_FENCEDKV_OK(leases_->Inspect("long", &g));
  ASSERT_FENCEDKV_OK(leases_->Acquire("l0", "h2", 1000, &g));
  EXPECT_EQ(last + 1, g.token);  // the counter is kept apart
}

// An expired lease is held by nobody: a renewal or release that does not
// match its last grant must not be told that lease is "held by" its old
// holder.
TEST_F(LeaseServiceTest, AnExpiredLeaseIsNotCalledHeld) {
  OpenWithClock();
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(leases_->Acquire("l", "A", 100, &g));
  const Token t = g.token;
  now_ += 150;
  const std::string renew_b = leases_->Renew("l", "B", t, 100, &g).ToString();
  EXPECT_EQ(std::string::npos, renew_b.find("is held by")) << renew_b;
  EXPECT_NE(std::string::npos, renew_b.find("expired 50 ms ago")) << renew_b;
  const std::string renew_a =
      leases_->Renew("l", "A", t + 1, 100, &g).ToString();
  EXPECT_EQ(std::string::npos, renew_a.find("is held by")) << renew_a;
  const std::string release_b = leases_->Release("l", "B", t).ToString();
  EXPECT_EQ(std::string::npos, release_b.find("is held by")) << release_b;
  EXPECT_NE(std::string::npos, release_b.find("was held by \"A\""))
      << release_b;
  // The holder itself: expired, not refused for a mismatch.
  const std::string renew_own = leases_->Renew("l", "A", t, 100, &g).ToString();
  EXPECT_NE(std::string::npos, renew_own.find("expired 50 ms ago"))
      << renew_own;
  // Still held: the holder is named.
  ASSERT_FENCEDKV_OK(leases_->Acquire("m", "A", 100, &g));
  const std::string held =
      leases_->Renew("m", "B", g.token, 100, &g).ToString();
  EXPECT_NE(std::string::npos, held.find("is held by \"A\"")) << held;
}

// A floor raised above a held lease's token (FENCE.FLOOR, an operator's
// action) ends that lease: every write with its token is refused, so it
// must neither be renewed nor keep others out. Before, its holder renewed
// it forever while each of its writes was STALE, and another holder's
// LEASE.ACQUIRE got LEASED.
TEST_F(LeaseServiceTest, AFloorAboveALeasesTokenEndsTheLease) {
  OpenWithClock();
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(leases_->Acquire("l", "A", 60000, &g));
  const Token t = g.token;
  ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), t + 10));
  Status s = leases_->Renew("l", "A", t, 60000, &g);
  EXPECT_TRUE(s.IsLeaseLost()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("below the fence floor"))
      << s.ToString();
  EXPECT_TRUE(leases_->Inspect("l", &g).IsNotFound());
  ASSERT_FENCEDKV_OK(leases_->Acquire("l", "B", 60000, &g));
  EXPECT_EQ("B", g.holder);
  EXPECT_EQ(t + 11, g.token);  // above the floor
  // A's own acquire is a new grant too, never its old token.
  ASSERT_FENCEDKV_OK(leases_->Acquire("m", "A", 60000, &g));
  const Token m = g.token;
  ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), m + 1));
  ASSERT_FENCEDKV_OK(leases_->Acquire("m", "A", 60000, &g));
  EXPECT_GT(g.token, m + 1);
  // A floor at the token: that token is still accepted (in every mode).
  ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), g.token));
  EXPECT_FENCEDKV_OK(leases_->Renew("m", "A", g.token, 60000, &g));
  // Another holder is not told such a lease "is held".
  const std::string other = leases_->Release("l", "Z", t).ToString();
  EXPECT_EQ(std::string::npos, other.find("is held")) << other;
}

// The background thread reclaims without being asked.
TEST_F(LeaseServiceTest, ReclaimingRunsInTheBackground) {
  LeaseOptions lo;
  lo.reclaim_interval_ms = 10;
  Open(Options(), lo);
  LeaseGrant g;
  for (int i = 0; i < 200; ++i) {
    ASSERT_FENCEDKV_OK(leases_->Acquire("l" + std::to_string(i), "h", 1, &g));
  }
  for (int i = 0; i < 300 && StoredLeases() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(0u, StoredLeases());
  EXPECT_EQ(0u, leases_->GetStats().held);
}

// At most max_leases on record: a new name past it first reclaims expired
// leases, and is refused (Busy) only if all are held.
TEST_F(LeaseServiceTest, TheNumberOfLeasesIsBounded) {
  LeaseOptions lo;
  lo.max_leases = 3;
  OpenWithClock(lo);
  LeaseGrant g;
  ASSERT_FENCEDKV_OK(leases_->Acquire("a", "h", 10, &g));
  ASSERT_FENCEDKV_OK(leases_->Acquire("b", "h", 60000, &g));
  ASSERT_FENCEDKV_OK(leases_->Acquire("c", "h", 60000, &g));
  Status s = leases_->Acquire("d", "h", 60000, &g);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(
      "Busy: too many leases: 3 held (max_leases); release some or "
      "wait for one to expire",
      s.ToString());
  ASSERT_FENCEDKV_OK(leases_->Acquire("a", "h", 10, &g));  // a held name
  now_ += 11;  // "a" expires: its place is taken back
  ASSERT_FENCEDKV_OK(leases_->Acquire("d", "h", 60000, &g));
  EXPECT_EQ(3u, leases_->GetStats().held);
  EXPECT_EQ(3u, StoredLeases());  // "a" is gone from disk as well
  // Leases a floor raised above their tokens ended take no place either
  // (before, they kept theirs until their TTL: BUSY for everyone else).
  EXPECT_TRUE(leases_->Acquire("e", "h", 60000, &g).IsBusy());
  ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), g.token + 1));
  for (const char* n : {"e", "f", "g"}) {
    ASSERT_FENCEDKV_OK(leases_->Acquire(n, "h", 60000, &g));
  }
  EXPECT_TRUE(leases_->Acquire("i", "h", 60000, &g).IsBusy());
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
  EXPECT_EQ("TOKEN_SKEW",
            test::StatusString(db_->Write(WriteOptions(), batch)));
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
