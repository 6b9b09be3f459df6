// Copyright (c) fencedkv authors.
//
// Every rule of docs/contract.md, looped over domain function x mode x floor
// (LevelDB's ChangeOptions idea). Tokens in these tests are >= 10 and the
// floor, when set, is 5, so the floor never refuses a token here unless a test
// says so.

#include "fencedkv/db.h"

#include <map>
#include <memory>

#include <gtest/gtest.h>
#include <rocksdb/statistics.h>

#include "db/db_impl.h"
#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {

class DBTest : public testing::Test {
 protected:
  struct Config {
    const char* domain;
    FenceMode mode;
    Token floor;
  };

  DBTest() {
    for (const char* d : {"key", "prefix:2", "delimiter::", "hashtag"}) {
      for (FenceMode m : {FenceMode::kMonotonic, FenceMode::kStrict}) {
        for (Token f : {Token{0}, Token{5}}) configs_.push_back({d, m, f});
      }
    }
  }

  // Moves to the next configuration with a fresh database; false when done.
  bool ChangeOptions() {
    if (config_index_ + 1 >= configs_.size()) return false;
    ++config_index_;
    db_.reset();
    dir_ = std::make_unique<test::TempDir>();
    options_ = Options();
    options_.create_if_missing = true;
    options_.fence_domain = config().domain;
    options_.fence_mode = config().mode;
    Reopen();
    if (config().floor > 0) {
      EXPECT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), config().floor));
    }
    return true;
  }

  const Config& config() const { return configs_[config_index_]; }
  bool strict() const { return config().mode == FenceMode::kStrict; }
  std::string ConfigName() const {
    return std::string(config().domain) + "/" + FenceModeName(config().mode) +
           "/floor=" + std::to_string(config().floor);
  }
  // The stale-write string for this mode: "STALE(7<8)" / "STALE(7<=8)".
  std::string Stale(Token offered, Token max) const {
    return "STALE(" + std::to_string(offered) + (strict() ? "<=" : "<") +
           std::to_string(max) + ")";
  }
  // The max an AdvanceFence(t) raises a domain to: t, or t - 1 in strict
  // mode (every token below t refused, t itself still admitted once).
  Token AdvMax(Token t) const { return strict() ? t - 1 : t; }
  std::string Adv(Token t) const { return std::to_string(AdvMax(t)); }
  // What GetFence reports for a domain never written.
  Token FreshMax() const {
    if (config().floor == 0) return 0;
    return strict() ? config().floor - 1 : config().floor;
  }
  bool SameDomain(std::string_view a, std::string_view b) const {
    FenceDomainSpec spec;
    EXPECT_TRUE(FenceDomainSpec::Parse(config().domain, &spec).ok());
    return spec.DomainOf(a) == spec.DomainOf(b);
  }

  void Reopen() {
    db_.reset();
    Status s = DB::Open(options_, dir_->path(), &db_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string Put(std::string_view k, std::string_view v, Token t) {
    return test::StatusString(db_->Put(WriteOptions(), k, v, t));
  }
  std::string Delete(std::string_view k, Token t) {
    return test::StatusString(db_->Delete(WriteOptions(), k, t));
  }
  std::string Get(std::string_view k) {
    std::string value;
    Status s = db_->Get(ReadOptions(), k, &value);
    return s.ok() ? value : test::StatusString(s);
  }
  std::string GetFenced(std::string_view k, Token t, Token* max = nullptr) {
    std::string value;
    Status s = db_->GetFenced(ReadOptions(), k, t, &value, max);
    return s.ok() ? value : test::StatusString(s);
  }
  Token Fence(std::string_view k) {
    Token max = 12345;
    Status s = db_->GetFence(k, &max);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return max;
  }
  std::string Advance(std::string_view k, Token t) {
    Token after = 0;
    Status s = db_->AdvanceFence(WriteOptions(), k, t, &after);
    return s.ok() ? std::to_string(after) : test::StatusString(s);
  }
  std::string Contents() {
    std::string out;
    auto it = db_->NewIterator(ReadOptions());
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      out += std::string(it->key()) + "=" + std::string(it->value()) + ";";
    }
    EXPECT_TRUE(it->status().ok());
    return out;
  }
  DBImpl* impl() { return static_cast<DBImpl*>(db_.get()); }

  std::vector<Config> configs_;
  size_t config_index_ = static_cast<size_t>(-1);
  std::unique_ptr<test::TempDir> dir_;
  Options options_;
  std::unique_ptr<DB> db_;
};

TEST_F(DBTest, PutGetAndFence) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("NOT_FOUND", Get("a:1"));
    ASSERT_EQ(FreshMax(), Fence("a:1"));
    ASSERT_EQ("OK", Put("a:1", "v1", 10));
    ASSERT_EQ("v1", Get("a:1"));
    ASSERT_EQ(10u, Fence("a:1"));
    ASSERT_EQ("OK", Put("a:1", "v2", 11));
    ASSERT_EQ("v2", Get("a:1"));
    ASSERT_EQ(11u, Fence("a:1"));
    ASSERT_EQ("OK", Put("a:1", "", 12));  // an empty value is a value
    ASSERT_EQ("", Get("a:1"));
  }
}

// MayHoldLargeValue, the hint a server reads large values off its event
// loop by: set by a large value's write, or after an open by its first read
// (Get, MultiGet, a fenced read), and never by a value below the bound.
TEST_F(DBTest, LargeValuesAreHintedFromTheirWriteOrFirstRead) {
  ASSERT_TRUE(ChangeOptions());
  const std::string big(DB::kLargeValueBytes, 'x');
  const std::string below(DB::kLargeValueBytes - 16, 'y');
  EXPECT_FALSE(db_->MayHoldLargeValue("big:1"));
  ASSERT_EQ("OK", Put("big:1", big, 1));
  EXPECT_TRUE(db_->MayHoldLargeValue("big:1"));
  ASSERT_EQ("OK", Put("big:2", big, 1));
  ASSERT_EQ("OK", Put("big:3", big, 1));
  ASSERT_EQ("OK", Put("small:1", below, 1));
  ASSERT_EQ(below, Get("small:1"));
  EXPECT_FALSE(db_->MayHoldLargeValue("small:1"));
  EXPECT_FALSE(db_->MayHoldLargeValue("absent:1"));
  ASSERT_FENCEDKV_OK(db_->Flush());

  Reopen();  // the hint is memory only: each key counts from its first read
  for (const char* k : {"big:1", "big:2", "big:3"}) {
    EXPECT_FALSE(db_->MayHoldLargeValue(k)) << k;
  }
  EXPECT_EQ(big, Get("big:1"));
  EXPECT_TRUE(db_->MayHoldLargeValue("big:1"));
  EXPECT_EQ(big, GetFenced("big:2", 1));
  EXPECT_TRUE(db_->MayHoldLargeValue("big:2"));
  std::string values[2];
  Status statuses[2];
  const std::string_view keys[2] = {"small:1", "big:3"};
  db_->MultiGet(ReadOptions(), 2, keys, values, statuses);
  ASSERT_FENCEDKV_OK(statuses[1]);
  EXPECT_TRUE(db_->MayHoldLargeValue("big:3"));
  EXPECT_FALSE(db_->MayHoldLargeValue("small:1"));
}

TEST_F(DBTest, APausedHoldersStaleWriteIsRejectedAndChangesNothing) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "from-A", 7 + 10));  // A, token 17
    ASSERT_EQ("OK", Put("k", "from-B", 8 + 10));  // B, token 18
    ASSERT_EQ(Stale(17, 18), Put("k", "late-A", 17));
    ASSERT_EQ("from-B", Get("k"));
    ASSERT_EQ(18u, Fence("k"));
    ASSERT_EQ(Stale(17, 18), Delete("k", 17));
    ASSERT_EQ("from-B", Get("k"));
  }
}

TEST_F(DBTest, StaleErrorCarriesOfferedMaxAndDomain) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("user:{s1}:x", "v", 20));
    Status s = db_->Put(WriteOptions(), "user:{s1}:x", "w", 19);
    ASSERT_TRUE(s.IsStaleToken());
    EXPECT_EQ(19u, s.stale()->offered);
    EXPECT_EQ(20u, s.stale()->max);
    FenceDomainSpec spec;
    ASSERT_TRUE(FenceDomainSpec::Parse(config().domain, &spec).ok());
    EXPECT_EQ(spec.DomainOf("user:{s1}:x"), s.stale()->domain);
    EXPECT_EQ(-1, s.stale()->batch_index);
  }
}

TEST_F(DBTest, EqualTokenDependsOnMode) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "v1", 10));
    if (strict()) {
      ASSERT_EQ("STALE(10<=10)", Put("k", "v2", 10));
      ASSERT_EQ("v1", Get("k"));
    } else {
      ASSERT_EQ("OK", Put("k", "v2", 10));
      ASSERT_EQ("v2", Get("k"));
    }
    ASSERT_EQ(10u, Fence("k"));
  }
}

TEST_F(DBTest, DeleteKeepsTheMaxSoStaleHoldersCannotResurrect) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "v", 10));
    ASSERT_EQ("OK", Delete("k", 11));
    ASSERT_EQ("NOT_FOUND", Get("k"));
    ASSERT_EQ(11u, Fence("k"));
    ASSERT_EQ(Stale(10, 11), Put("k", "zombie", 10));
    ASSERT_EQ("NOT_FOUND", Get("k"));
    ASSERT_EQ("OK", Delete("never-written", 12));  // deleting nothing is OK
    ASSERT_EQ(12u, Fence("never-written"));
    Reopen();
    ASSERT_EQ(11u, Fence("k"));
    ASSERT_EQ(Stale(10, 11), Put("k", "zombie", 10));
    ASSERT_EQ("OK", Put("k", "back", 12));
    ASSERT_EQ("back", Get("k"));
  }
}

TEST_F(DBTest, MaxNeverDecreasesAcrossReopen) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("a:1", "v", 30));
    ASSERT_EQ("OK", Put("b:1", "v", 10));
    ASSERT_EQ(Adv(30), Advance("c:1", 30));
    Reopen();
    EXPECT_EQ(30u, Fence("a:1"));
    EXPECT_EQ(10u, Fence("b:1"));
    EXPECT_EQ(AdvMax(30), Fence("c:1"));
    EXPECT_EQ(Stale(29, 30), Put("a:1", "x", 29));
    EXPECT_EQ(Stale(29, AdvMax(30)), Put("c:1", "x", 29));
    ASSERT_FENCEDKV_OK(db_->Flush());
    Reopen();
    EXPECT_EQ(30u, Fence("a:1"));
    EXPECT_EQ(Stale(11, 30), Put("a:1", "x", 11));
    EXPECT_EQ("v", Get("a:1"));
  }
}

TEST_F(DBTest, AdvanceFenceRaisesWithoutWritingData) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "old-holder", 10));
    ASSERT_EQ(Adv(20), Advance("k", 20));  // new holder fences the old out
    ASSERT_EQ("old-holder", Get("k"));     // data untouched
    ASSERT_EQ(AdvMax(20), Fence("k"));
    ASSERT_EQ(Stale(10, AdvMax(20)), Put("k", "late", 10));
    ASSERT_EQ(Stale(19, AdvMax(20)), Put("k", "late", 19));  // all below 20
    ASSERT_EQ(Adv(20), Advance("k", 15));  // lower: no change, not an error
    ASSERT_EQ(Adv(20), Advance("k", 20));
    ASSERT_EQ("NOT_FOUND", Get("fresh"));
    ASSERT_EQ(Adv(25), Advance("fresh", 25));
    ASSERT_EQ("NOT_FOUND", Get("fresh"));  // a fence is not a value
    ASSERT_EQ("", Contents().find("fresh=") == std::string::npos ? "" : "x");
    // The hand-over works in both modes: the holder that advanced to 20
    // writes with 20. (Strict mode refused it before advances stopped at
    // t - 1.) Then strict mode wants a fresh token for the next write.
    ASSERT_EQ("OK", Put("k", "new", 20));
    ASSERT_EQ(20u, Fence("k"));
    ASSERT_EQ(strict() ? "STALE(20<=20)" : "OK", Put("k", "again", 20));
    ASSERT_EQ("INVALID", Advance("k", 0));
    Reopen();
    ASSERT_EQ(AdvMax(25), Fence("fresh"));
    ASSERT_EQ(20u, Fence("k"));
    ASSERT_EQ("OK", Put("fresh", "first", 25));
  }
}

TEST_F(DBTest, FencedReads) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    Token max = 0;
    ASSERT_EQ("NOT_FOUND", GetFenced("k", 10, &max));
    ASSERT_EQ(FreshMax(), max);
    ASSERT_EQ("OK", Put("k", "v", 10));
    ASSERT_EQ("v", GetFenced("k", 10, &max));  // the writer may read back
    ASSERT_EQ(10u, max);
    ASSERT_EQ("v", GetFenced("k", 11, &max));
    ASSERT_EQ(Adv(20), Advance("k", 20));
    ASSERT_EQ("STALE(10<" + Adv(20) + ")", GetFenced("k", 10, &max));
    ASSERT_EQ(AdvMax(20), max);
    ASSERT_EQ("INVALID", GetFenced("k", 0));
    ASSERT_EQ(1u, db_->GetFenceStats().rejected_reads);
  }
}

TEST_F(DBTest, KeysOfOneDomainShareOneMax) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    // "ab:{t}:1" and "ab:{t}:2" share a domain under every function but
    // "key"; "zz:9" shares with nobody.
    ASSERT_EQ("OK", Put("ab:{t}:1", "v", 20));
    const bool shared = SameDomain("ab:{t}:1", "ab:{t}:2");
    EXPECT_EQ(std::string(config().domain) != "key", shared);
    if (shared) {
      // The lease protects every key of the domain, even untouched ones.
      ASSERT_EQ(Stale(19, 20), Put("ab:{t}:2", "v", 19));
      ASSERT_EQ(20u, Fence("ab:{t}:2"));
    } else {
      ASSERT_EQ("OK", Put("ab:{t}:2", "v", 19));
    }
    ASSERT_EQ("OK", Put("zz:9", "v", 11));
  }
}

TEST_F(DBTest, WriteBatchIsAllOrNothing) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("x:1", "old", 20));
    WriteBatch batch;
    batch.Put("a:1", "A", 30);
    batch.Put("b:1", "B", 30);
    batch.Delete("c:1", 30);
    batch.Put("x:1", "stale", 19);  // op 3 is stale
    Status s = db_->Write(WriteOptions(), batch);
    ASSERT_TRUE(s.IsStaleToken()) << s.ToString();
    EXPECT_EQ(3, s.stale()->batch_index);
    EXPECT_EQ(19u, s.stale()->offered);
    EXPECT_EQ(20u, s.stale()->max);
    EXPECT_EQ("NOT_FOUND", Get("a:1"));
    EXPECT_EQ("NOT_FOUND", Get("b:1"));
    EXPECT_EQ(FreshMax(), Fence("a:1"));
    EXPECT_EQ(FreshMax(), Fence("c:1"));
    EXPECT_EQ("old", Get("x:1"));
    EXPECT_EQ(1u, db_->GetFenceStats().rejected_writes);

    batch.Clear();
    EXPECT_EQ(0u, batch.Count());
    batch.Put("a:1", "A", 30);
    batch.Put("b:1", "B", 31);
    batch.Delete("x:1", 30);
    ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), batch));
    EXPECT_EQ("A", Get("a:1"));
    EXPECT_EQ("B", Get("b:1"));
    EXPECT_EQ("NOT_FOUND", Get("x:1"));
    EXPECT_EQ(30u, Fence("x:1"));
    EXPECT_EQ(31u, Fence("b:1"));
    ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), WriteBatch()));  // empty
  }
}

TEST_F(DBTest, WriteBatchChecksOpsInOrder) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    WriteBatch batch;
    batch.Put("k", "first", 40);
    batch.Put("k", "second", 39);  // older than op 0: stale
    Status s = db_->Write(WriteOptions(), batch);
    ASSERT_TRUE(s.IsStaleToken());
    EXPECT_EQ(1, s.stale()->batch_index);
    EXPECT_EQ("NOT_FOUND", Get("k"));

    batch.Clear();
    batch.Put("k", "first", 40);
    batch.Put("k", "second", 41);
    ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), batch));
    EXPECT_EQ("second", Get("k"));
    EXPECT_EQ(41u, Fence("k"));

    batch.Clear();
    batch.Put("k", "third", 41);
    batch.Put("k", "fourth", 41);
    s = db_->Write(WriteOptions(), batch);
    if (strict()) {
      ASSERT_TRUE(s.IsStaleToken());
      EXPECT_EQ(0, s.stale()->batch_index);
      EXPECT_EQ("second", Get("k"));
    } else {
      ASSERT_FENCEDKV_OK(s);
      EXPECT_EQ("fourth", Get("k"));
    }
  }
}

TEST_F(DBTest, WriteGroupAppliesEachBatchIndependently) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("x:1", "old", 20));
    WriteBatch b0, b1, b2, b3, b4;
    b0.Put("a:1", "A", 20);
    b1.Put("x:1", "stale", 19);  // refused: x:1 is at 20
    b1.Put("c:1", "C", 30);      // ... and so is the rest of b1
    b2.Put("d:1", "D1", 25);
    b3.Put("d:1", "D0", 24);  // stale after b2, in the same group
    b4.Put("", "bad", 30);    // invalid
    const WriteBatch* batches[] = {&b0, &b1, &b2, &b3, &b4};
    Status statuses[5];
    ASSERT_FENCEDKV_OK(db_->WriteGroup(WriteOptions(), batches, 5, statuses));
    EXPECT_EQ("OK", test::StatusString(statuses[0]));
    EXPECT_EQ(Stale(19, 20), test::StatusString(statuses[1]));
    EXPECT_EQ(0, statuses[1].stale()->batch_index);
    EXPECT_EQ("OK", test::StatusString(statuses[2]));
    EXPECT_EQ(Stale(24, 25), test::StatusString(statuses[3]));
    EXPECT_EQ("INVALID", test::StatusString(statuses[4]));
    EXPECT_EQ("A", Get("a:1"));
    EXPECT_EQ("old", Get("x:1"));
    EXPECT_EQ("NOT_FOUND", Get("c:1"));
    EXPECT_EQ(FreshMax(), Fence("c:1"));  // the refused batch left no fence
    EXPECT_EQ("D1", Get("d:1"));
    EXPECT_EQ(25u, Fence("d:1"));
    EXPECT_EQ(3u, db_->GetFenceStats().accepted_writes);  // x:1 put + b0 + b2
    EXPECT_EQ(2u, db_->GetFenceStats().rejected_writes);
    Reopen();
    EXPECT_EQ("D1", Get("d:1"));
    EXPECT_EQ(20u, Fence("x:1"));
  }
}

TEST_F(DBTest, FloorRejectsLowerTokensEverywhere) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("a:1", "v", 10));
    ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), 50));
    EXPECT_EQ(50u, db_->GetFenceFloor());
    EXPECT_EQ("STALE(49<floor50)", Put("a:1", "v", 49));
    EXPECT_EQ("STALE(49<floor50)", Put("never:1", "v", 49));
    EXPECT_EQ("STALE(49<floor50)", GetFenced("a:1", 49));
    EXPECT_EQ(strict() ? 49u : 50u, Fence("a:1"));
    EXPECT_EQ("OK", Put("a:1", "w", 50));
    EXPECT_EQ(50u, Fence("a:1"));
    Status s = db_->SetFenceFloor(WriteOptions(), 40);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_EQ(50u, db_->GetFenceFloor());
    EXPECT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), 50));
    EXPECT_TRUE(db_->SetFenceFloor(WriteOptions(), 0).IsInvalidArgument());
    Reopen();
    EXPECT_EQ(50u, db_->GetFenceFloor());
    EXPECT_EQ("STALE(49<floor50)", Put("x:9", "v", 49));
  }
}

TEST_F(DBTest, CompactionDropsWhatTheFloorSubsumesAndNothingElse) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    for (int i = 0; i < 20; ++i) {
      const std::string k = "g" + std::to_string(i) + ":k";
      ASSERT_EQ("OK", Put(k, "v", 10 + 2 * i));
      ASSERT_EQ("OK", Delete(k, 11 + 2 * i));  // tombstones, tokens 11..49
    }
    ASSERT_EQ(Adv(100), Advance("adv:1", 100));
    ASSERT_EQ("OK", Put("kept:1", "value", 12));
    const size_t before = impl()->TEST_CountFenceStateRecords();
    EXPECT_GE(before, 10u);
    std::map<std::string, Token> fences_before;
    for (int i = 0; i < 20; ++i) {
      fences_before["g" + std::to_string(i) + ":k"] = 0;
    }
    ASSERT_FENCEDKV_OK(db_->SetFenceFloor(WriteOptions(), 25));
    for (auto& [k, t] : fences_before) t = Fence(k);
    ASSERT_FENCEDKV_OK(db_->Flush());
    ASSERT_FENCEDKV_OK(db_->CompactRange(nullptr, nullptr));
    const size_t after = impl()->TEST_CountFenceStateRecords();
    EXPECT_LT(after, before);
    // Nothing a user can observe changed.
    for (const auto& [k, t] : fences_before) EXPECT_EQ(t, Fence(k)) << k;
    EXPECT_EQ(AdvMax(100), Fence("adv:1"));
    EXPECT_EQ("value", Get("kept:1"));
    EXPECT_EQ("STALE(24<floor25)", Put("g5:k", "v", 24));
    EXPECT_EQ("OK", Put("g5:k", "v", 25));  // its old max (21) is subsumed
  }
}

TEST_F(DBTest, IteratorSeesUserKeysOnly) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("b", "2", 10));
    ASSERT_EQ("OK", Put("a", "1", 10));
    ASSERT_EQ("OK", Put("c", "3", 10));
    ASSERT_EQ("OK", Delete("b", 11));
    ASSERT_EQ(Adv(20), Advance("d", 20));
    ASSERT_EQ("a=1;c=3;", Contents());
    auto it = db_->NewIterator(ReadOptions());
    it->Seek("b");
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ("c", it->key());
    EXPECT_EQ(10u, it->token());
    it->Prev();
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ("a", it->key());
    it->SeekToLast();
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ("c", it->key());
    it->SeekForPrev("bz");
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ("a", it->key());
    it->Next();
    it->Next();
    EXPECT_FALSE(it->Valid());
    EXPECT_FENCEDKV_OK(it->status());
    ReadOptions bounded;
    bounded.iterate_upper_bound = "c";
    auto b = db_->NewIterator(bounded);
    int n = 0;
    for (b->SeekToFirst(); b->Valid(); b->Next()) ++n;
    EXPECT_EQ(1, n);
  }
}

// An iterator says when the database has moved on from what it reads, so a
// holder of long-lived iterators (the server's parked SCAN iterators) can
// let go of flushed memtables: writes alone keep the version, a flush moves
// it, and a new iterator reads the new one.
TEST_F(DBTest, AnIteratorSaysWhenItPinsAnOldVersion) {
  for (const char* memtable : {"skiplist", "hash"}) {
    SCOPED_TRACE(memtable);
    db_.reset();
    dir_ = std::make_unique<test::TempDir>();
    options_ = Options();
    options_.create_if_missing = true;
    options_.memtable = memtable;
    Reopen();
    ASSERT_EQ("OK", Put("a", "1", 1));
    auto it = db_->NewIterator(ReadOptions());
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    EXPECT_FALSE(it->PinsOldVersion());
    ASSERT_EQ("OK", Put("b", "2", 1));  // the same memtable
    EXPECT_FALSE(it->PinsOldVersion());
    ASSERT_FENCEDKV_OK(db_->Flush());
    EXPECT_TRUE(it->PinsOldVersion());
    // It still reads what it read (the flushed memtable is kept for it).
    EXPECT_EQ("a", it->key());
    it->Next();
    EXPECT_FALSE(it->Valid());  // "b" came after it was created
    auto fresh = db_->NewIterator(ReadOptions());
    EXPECT_FALSE(fresh->PinsOldVersion());
    fresh->Seek("b");
    ASSERT_TRUE(fresh->Valid());
    EXPECT_EQ("b", fresh->key());
  }
}

TEST_F(DBTest, BadInputIsRefusedAndChangesNothing) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "v", 10));
    EXPECT_EQ("INVALID", Put("k", "w", 0));
    EXPECT_EQ("INVALID", Delete("k", 0));
    EXPECT_EQ("INVALID", Put("", "w", 11));
    EXPECT_EQ("INVALID", Get(""));
    std::string at_limit(options_.max_key_size, 'x');
    std::string over_limit(options_.max_key_size + 1, 'x');
    EXPECT_EQ("OK", Put(at_limit, "v", 11));
    EXPECT_EQ("INVALID", Put(over_limit, "v", 11));
    EXPECT_EQ("INVALID", Get(over_limit));
    WriteBatch batch;
    batch.Put("good", "v", 11);
    batch.Put("", "v", 11);
    Status s = db_->Write(WriteOptions(), batch);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("batch op 1"));
    EXPECT_EQ("NOT_FOUND", Get("good"));
    EXPECT_EQ("v", Get("k"));
    EXPECT_EQ(10u, Fence("k"));
  }
}

TEST_F(DBTest, ValueSizeLimit) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    options_.max_value_size = 1000;
    Reopen();
    EXPECT_EQ("OK", Put("k", std::string(1000, 'v'), 10));
    EXPECT_EQ("INVALID", Put("k", std::string(1001, 'v'), 11));
    EXPECT_EQ(std::string(1000, 'v'), Get("k"));
    EXPECT_EQ(10u, Fence("k"));
  }
}

TEST_F(DBTest, UnfencedWritesOnlyWhenAllowedAndTheyKeepTheMax) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("INVALID", Put("k", "v", 0));
    options_.allow_unfenced = true;
    Reopen();
    ASSERT_EQ("OK", Put("k", "fenced", 20));
    ASSERT_EQ("OK", Put("k", "unfenced", 0));
    EXPECT_EQ("unfenced", Get("k"));
    EXPECT_EQ(20u, Fence("k"));  // an unfenced write never moves a max
    EXPECT_EQ(Stale(19, 20), Put("k", "v", 19));
    EXPECT_EQ("OK", Delete("k", 0));
    EXPECT_EQ(20u, Fence("k"));
    EXPECT_EQ(2u, db_->GetFenceStats().unfenced_writes);
    EXPECT_EQ("INVALID", Advance("k", 0));  // never for a fence
  }
}

TEST_F(DBTest, StatsAndProperties) {
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "v", 10));
    ASSERT_EQ(Stale(9, 10), Put("k", "v", 9));
    ASSERT_EQ(Adv(12), Advance("k", 12));
    ASSERT_EQ(Adv(12), Advance("k", 12));  // no raise: not counted
    FenceStats st = db_->GetFenceStats();
    EXPECT_EQ(1u, st.accepted_writes);
    EXPECT_EQ(1u, st.rejected_writes);
    EXPECT_EQ(1u, st.advances);
    std::string v;
    ASSERT_TRUE(db_->GetProperty("fencedkv.stats", &v));
    EXPECT_NE(std::string::npos, v.find("rejected_writes: 1\n"));
    EXPECT_TRUE(db_->GetProperty("rocksdb.estimate-num-keys", &v));
    EXPECT_FALSE(db_->GetProperty("nope", &v));
    ASSERT_TRUE(db_->GetProperty(
        "fencedkv.aggregated.rocksdb.cur-size-all-mem-tables", &v));
    EXPECT_GT(std::stoull(v), 0u);
    EXPECT_FALSE(db_->GetProperty("fencedkv.aggregated.rocksdb.nope", &v));
    ASSERT_TRUE(db_->GetProperty("fencedkv.fence-cache-bytes", &v));
    EXPECT_FALSE(db_->GetProperty("fencedkv.tickers", &v));  // not collected
    EXPECT_EQ(std::string(config().domain), db_->GetFenceDomain().ToString());
    EXPECT_EQ(config().mode, db_->GetFenceMode());
  }
}

TEST(DBStatisticsTest, TickersWhenCollected) {
  test::TempDir dir;
  Options o;
  o.create_if_missing = true;
  o.statistics = rocksdb::CreateDBStatistics();
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
  ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k", "v", 1));
  std::string v;
  ASSERT_TRUE(db->GetProperty("fencedkv.tickers", &v));
  EXPECT_NE(std::string::npos, v.find("rocksdb.block.cache.hit "));
  const size_t at = v.find("rocksdb.number.keys.written ");
  ASSERT_NE(std::string::npos, at);
  EXPECT_GE(std::stoull(v.substr(at + 28)), 1u);
}

TEST_F(DBTest, ExactWithoutTheCache) {
  // With no cache every check reads RocksDB: same answers.
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    options_.fence_cache_bytes = 0;
    Reopen();
    ASSERT_EQ("OK", Put("k", "v", 20));
    ASSERT_EQ(Stale(19, 20), Put("k", "v", 19));
    ASSERT_EQ("OK", Put("j", "v", 15));  // below the high-water mark
    ASSERT_EQ(Stale(14, 15), Put("j", "v", 14));
    EXPECT_EQ(0u, impl()->TEST_FenceCacheBytes());
  }
}

TEST_F(DBTest, AFailedWriteRaisesNothing) {
  // The write fails in RocksDB (a test sync point turns it into an I/O
  // error): neither the key's max, the cache nor the high-water mark may
  // remember its token, or later valid holders would be refused.
  while (ChangeOptions()) {
    SCOPED_TRACE(ConfigName());
    ASSERT_EQ("OK", Put("k", "v", 20));
    SyncPoint::Get()->SetCallback("DBImpl::Write:RocksDBWrite", [](void* arg) {
      *static_cast<rocksdb::Status*>(arg) =
          rocksdb::Status::IOError("injected");
    });
    SyncPoint::Get()->EnableProcessing();
    const std::string k_failed = Put("k", "w", 30);  // a known domain
    const std::string j_failed =
        Put("j", "w", 40);  // above the high-water mark
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    EXPECT_EQ("IO_ERROR", k_failed.substr(0, 8));
    EXPECT_EQ("IO_ERROR", j_failed.substr(0, 8));
    EXPECT_EQ(20u, Fence("k"));
    EXPECT_EQ("v", Get("k"));
    ASSERT_EQ("OK", Put("k", "x", 25));
    EXPECT_EQ("x", Get("k"));
    // Below the high-water mark (25), "j" is checked against its own max,
    // which the failed write must not have set to 40.
    ASSERT_EQ("OK", Put("j", "y", SameDomain("j", "k") ? 26 : 22));
    EXPECT_EQ("y", Get("j"));
  }
}

// With a tiny cache (one bucket per stripe) and thousands of domains, entries
// leave the cache all the time, and checks use the stripe marks, the cache,
// its miss bound (what left it) and reads. Every verdict must be the rule's
// against each domain's true max, before and after a reopen. Holders' tokens
// interleave and rise, as behind a lease service.
TEST_F(DBTest, ManyDomainsWithATinyCacheKeepEveryVerdictExact) {
  while (ChangeOptions()) {
    if (config().floor > 0) continue;  // (the floor has its own tests)
    SCOPED_TRACE(ConfigName());
    options_.fence_cache_bytes = 64 << 10;
    Reopen();
    FenceDomainSpec spec;
    ASSERT_FENCEDKV_OK(FenceDomainSpec::Parse(config().domain, &spec));
    std::map<std::string, Token> truth;  // domain -> max
    std::vector<Token> holders(16, 10);
    Token counter = 10;
    uint64_t rng = 99;
    auto next = [&] {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      return rng >> 33;
    };
    for (int step = 0; step < 12000; ++step) {
      if (step == 6000) Reopen();
      const std::string key = "k" + std::to_string(next() % 4000);
      const size_t h = next() % holders.size();
      if (next() % 20 == 0) holders[h] = ++counter;  // a renewal
      // Mostly the holder's token; sometimes one just below it.
      const Token t = holders[h] - (next() % 8 == 0 ? 1 : 0);
      Token& max = truth[std::string(spec.DomainOf(key))];
      const bool accept = strict() ? t > max : t >= max;
      SCOPED_TRACE("step " + std::to_string(step) + " " + key + " token " +
                   std::to_string(t) + " max " + std::to_string(max));
      ASSERT_EQ(accept ? "OK" : Stale(t, max), Put(key, "v", t));
      if (accept) max = t;
    }
  }
}

}  // namespace fencedkv
