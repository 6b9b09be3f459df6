// Copyright (c) fencedkv authors.
//
// The replication state file, the epochs' text form, the sync decision
// (Kafka's leader-epoch truncation) and the stream's frame reader.

#include "repl_state.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "repl_stream.h"
#include "replication.h"
#include "util/testutil.h"

namespace fencedkv {
namespace server {
namespace {

// History ids (32 lowercase hex digits, as NewHistoryId makes them).
const std::string kH0 = std::string(31, '0') + "a";
const std::string kH1 = std::string(31, '0') + "b";

TEST(ReplStateTest, StoreAndLoadRoundTrip) {
  test::TempDir dir;
  ReplState empty;
  ASSERT_TRUE(ReplState::Load(dir.path(), &empty).ok());  // no file yet
  EXPECT_EQ(0u, empty.max_epoch);
  EXPECT_TRUE(empty.history.empty());
  ReplState s;
  s.history = NewHistoryId();
  s.max_epoch = 7;
  s.log_epoch = 6;
  s.epochs = {{5, 1200, ""}, {6, 4410, NewPromotionId()}, {7, 9053, ""}};
  s.follow = "127.0.0.1:7001";
  ASSERT_TRUE(s.Store(dir.path()).ok());
  ReplState t;
  ASSERT_TRUE(ReplState::Load(dir.path(), &t).ok());
  EXPECT_EQ("127.0.0.1:7001", t.follow);
  EXPECT_EQ(s.history, t.history);
  EXPECT_EQ(32u, t.history.size());
  EXPECT_EQ(7u, t.max_epoch);
  EXPECT_EQ(6u, t.log_epoch);
  EXPECT_EQ(s.epochs, t.epochs);
  EXPECT_EQ("", t.shard);
  // The etcd shard it is a member of; a line only when set, so a state
  // without one reads the same in every version.
  s.shard = "s1";
  ASSERT_TRUE(s.Store(dir.path()).ok());
  ASSERT_TRUE(ReplState::Load(dir.path(), &t).ok());
  EXPECT_EQ("s1", t.shard);
  s.shard = "a\nmax_epoch 0";
  EXPECT_TRUE(s.Store(dir.path()).IsInvalidArgument());
  s.shard = "-";
  EXPECT_TRUE(s.Store(dir.path()).IsInvalidArgument());
  ASSERT_TRUE(ReplState::Load(dir.path(), &t).ok());
  EXPECT_EQ("s1", t.shard);
}

TEST(ReplStateTest, ACorruptFileIsRefused) {
  test::TempDir dir;
  std::ofstream(dir.Sub(ReplState::kFileName)) << "something else\n";
  ReplState s;
  EXPECT_TRUE(ReplState::Load(dir.path(), &s).IsCorruption());
  std::ofstream(dir.Sub(ReplState::kFileName))
      << "fencedkv-replication 1\nmax_epoch 1\nlog_epoch 2\n";
  EXPECT_TRUE(ReplState::Load(dir.path(), &s).IsCorruption());  // log > max
  std::ofstream(dir.Sub(ReplState::kFileName))
      << "fencedkv-replication 1\nmax_epoch 1\nlog_epoch 1\nfollow nohost\n";
  EXPECT_TRUE(ReplState::Load(dir.path(), &s).IsCorruption());
  std::ofstream(dir.Sub(ReplState::kFileName))
      << "fencedkv-replication 1\nmax_epoch 1\nlog_epoch 1\nfollow -\n";
  ASSERT_TRUE(ReplState::Load(dir.path(), &s).ok());
  EXPECT_EQ("", s.follow);
}

// A node id is made once and then kept; anything else in its file is
// refused rather than replaced (it would make this server another node).
// The files are replaced through NAME.tmp. A symlink planted there sent
// the write to its target (which got the id) and left NODE_ID a symlink;
// a failed rename left the .tmp behind (an adversarial review).
TEST(ReplStateTest, ReplacingAFileNeverFollowsASymlinkAtItsTemporary) {
  test::TempDir dir;
  const std::string target = dir.Sub("elsewhere");
  std::ofstream(target) << "keep\n";
  std::filesystem::create_symlink(target, dir.Sub("NODE_ID.tmp"));
  const std::string id(32, 'e');
  ASSERT_FENCEDKV_OK(StoreNodeId(dir.path(), id));
  std::string text;
  std::getline(std::ifstream(target), text);
  EXPECT_EQ("keep", text);
  EXPECT_FALSE(std::filesystem::is_symlink(dir.Sub("NODE_ID")));
  std::string read;
  ASSERT_FENCEDKV_OK(ReadNodeId(dir.path(), &read));
  EXPECT_EQ(id, read);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("NODE_ID.tmp")));
  // A rename that fails (NODE_ID a non-empty directory) leaves no .tmp.
  std::filesystem::remove(dir.Sub("NODE_ID"));
  std::filesystem::create_directories(dir.Sub("NODE_ID/x"));
  EXPECT_FALSE(StoreNodeId(dir.path(), id).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("NODE_ID.tmp")));
}

TEST(ReplStateTest, TheNodeIdIsMadeOnceAndKept) {
  test::TempDir dir;
  std::string first, again;
  ASSERT_FENCEDKV_OK(LoadOrCreateNodeId(dir.path(), &first));
  EXPECT_EQ(32u, first.size());
  ASSERT_FENCEDKV_OK(LoadOrCreateNodeId(dir.path(), &again));
  EXPECT_EQ(first, again);
  test::TempDir other;
  ASSERT_FENCEDKV_OK(LoadOrCreateNodeId(other.path(), &again));
  EXPECT_NE(first, again);
  std::ofstream(dir.path() + "/" + kNodeIdFile) << "not an id\n";
  EXPECT_TRUE(LoadOrCreateNodeId(dir.path(), &again).IsCorruption());
  // An empty file is damage, not an I/O error (it said "cannot read").
  std::ofstream(dir.path() + "/" + kNodeIdFile, std::ios::trunc).flush();
  const Status empty = LoadOrCreateNodeId(dir.path(), &again);
  EXPECT_TRUE(empty.IsCorruption()) << empty.ToString();
  EXPECT_NE(std::string::npos, empty.ToString().find("is empty"))
      << empty.ToString();

  MemberRecord m, back;
  m.epoch = 3;
  m.seq = 9;
  m.role = "replica";
  m.node = first;
  ASSERT_TRUE(MemberRecord::Parse(m.ToJson(), &back));
  EXPECT_EQ(first, back.node);
  // A record of an older build has no node.
  ASSERT_TRUE(
      MemberRecord::Parse(R"({"epoch":1,"seq":2,"role":"primary"})", &back));
  EXPECT_EQ("", back.node);
}

// A full copy replaces the database directory; the node id stays with the
// server (else its restart on the copy would be another node to etcd, and
// its own member key, left under its old lease, another server's).
TEST(ReplStateTest, AFullCopyKeepsTheNodeId) {
  test::TempDir dir;
  const std::string db = dir.Sub("db");
  std::filesystem::create_directories(db);
  std::string id;
  ASSERT_FENCEDKV_OK(LoadOrCreateNodeId(db, &id));
  std::ofstream(db + "/old") << "the replaced data";
  // The copy must open as a fencedkv database to be swapped in.
  const std::string ready = Replication::FullSyncDir(db);
  {
    Options options;
    options.create_if_missing = true;
    std::unique_ptr<DB> copy;
    ASSERT_FENCEDKV_OK(DB::Open(options, ready, &copy));
  }
  ASSERT_FENCEDKV_OK(Replication::AdoptFullSync(db));
  EXPECT_TRUE(std::filesystem::exists(db + "/CURRENT"));
  EXPECT_FALSE(std::filesystem::exists(db + "/old"));
  EXPECT_FALSE(std::filesystem::exists(Replication::ReplacedDir(db)));
  std::string after;
  ASSERT_FENCEDKV_OK(LoadOrCreateNodeId(db, &after));
  EXPECT_EQ(id, after);
}

// Manual mode: a full copy needs the operator's word only where it would
// discard what the replica holds and the primary does not.
TEST(ReplStateTest, ACopyDiscardsOnlyWhatThePrimaryDoesNotHold) {
  ReplState mine;
  mine.history = std::string(32, 'a');
  mine.max_epoch = 1;
  mine.log_epoch = 1;
  AppendEpoch(&mine.epochs, 1, 0, "0123456789abcdef");
  std::string why;
  EXPECT_TRUE(
      CopyWouldDiscard(mine, 10, std::string(32, 'b'), mine.epochs, 100, &why));
  EXPECT_NE(std::string::npos, why.find("history")) << why;
  // Behind the primary's log (which no longer has its next batch): no.
  EXPECT_FALSE(
      CopyWouldDiscard(mine, 10, mine.history, mine.epochs, 100, &why));
  // Ahead of it, or of another promotion: yes.
  EXPECT_TRUE(
      CopyWouldDiscard(mine, 200, mine.history, mine.epochs, 100, &why));
  EpochList other;
  AppendEpoch(&other, 1, 0, "fedcba9876543210");
  EXPECT_TRUE(CopyWouldDiscard(mine, 10, mine.history, other, 100, &why));
  // A replica of no history yet has nothing to keep.
  EXPECT_FALSE(
      CopyWouldDiscard(ReplState(), 0, mine.history, mine.epochs, 5, &why));
}

// A ready copy that does not open as a database is dropped and the
// database kept. Before, it was swapped in and the old database deleted:
// the server could then not start.
TEST(ReplStateTest, ACopyThatDoesNotOpenIsNotSwappedIn) {
  test::TempDir dir;
  const std::string db = dir.Sub("db");
  std::filesystem::create_directories(db);
  std::ofstream(db + "/old") << "the data";
  const std::string ready = Replication::FullSyncDir(db);
  std::filesystem::create_directories(ready);
  std::ofstream(ready + "/CURRENT") << "MANIFEST-999\n";
  ASSERT_FENCEDKV_OK(Replication::AdoptFullSync(db));
  EXPECT_TRUE(std::filesystem::exists(db + "/old"));
  EXPECT_FALSE(std::filesystem::exists(ready));
  EXPECT_FALSE(std::filesystem::exists(Replication::ReplacedDir(db)));
}

// The record names its ISR members' node ids; a record of an older build
// names none and matches any node; a malformed entry is refused.
TEST(ReplStateTest, TheShardRecordKeepsEachMembersNode) {
  const std::string a(32, 'a'), b(32, 'b');
  ShardRecord r;
  r.epoch = 3;
  r.primary = "127.0.0.1:1";
  r.isr = {"127.0.0.1:1", "127.0.0.1:2"};
  r.nodes = {{"127.0.0.1:1", a}, {"127.0.0.1:2", b}};
  ShardRecord back;
  ASSERT_FENCEDKV_OK(ShardRecord::Parse(r.ToJson(), &back));
  EXPECT_EQ(r.nodes, back.nodes);
  EXPECT_TRUE(back.NodeMatches("127.0.0.1:2", b));
  EXPECT_FALSE(back.NodeMatches("127.0.0.1:2", a));
  EXPECT_TRUE(back.NodeMatches("127.0.0.1:3", a));  // not named
  ShardRecord old;
  ASSERT_FENCEDKV_OK(ShardRecord::Parse(
      R"({"epoch":2,"primary":"127.0.0.1:1","isr":["127.0.0.1:1"]})", &old));
  EXPECT_TRUE(old.nodes.empty());
  EXPECT_TRUE(old.NodeMatches("127.0.0.1:1", a));
  for (const char* bad : {R"("nodes":[])", R"("nodes":{"127.0.0.1:1":7})",
                          R"("nodes":{"127.0.0.1:1":"not a node"})"}) {
    ShardRecord x;
    EXPECT_FALSE(
        ShardRecord::Parse(std::string(R"({"epoch":2,"primary":"h:1",)") +
                               R"("isr":["h:1"],)" + bad + "}",
                           &x)
            .ok())
        << bad;
  }
}

TEST(ReplStateTest, EpochsParseOnlyIncreasing) {
  EpochList l;
  EXPECT_TRUE(ParseEpochs("1:0,2:10", &l));
  EXPECT_EQ("1:0,2:10", FormatEpochs(l));
  EXPECT_TRUE(ParseEpochs("-", &l));
  EXPECT_TRUE(l.empty());
  EXPECT_FALSE(ParseEpochs("2:10,1:0", &l));
  EXPECT_FALSE(ParseEpochs("1:x", &l));
  EXPECT_FALSE(ParseEpochs("1", &l));
  for (uint64_t e = 1; e <= kMaxEpochs + 5; ++e) AppendEpoch(&l, e, e * 10, "");
  EXPECT_EQ(kMaxEpochs, l.size());
  EXPECT_EQ(6u, l.front().epoch);  // the oldest went
}

// A manual-mode promotion's id rides with its epoch: "epoch:start:id".
TEST(ReplStateTest, EpochsCarryPromotionIds) {
  EpochList l;
  ASSERT_TRUE(ParseEpochs("1:0,2:10:0123456789abcdef", &l));
  ASSERT_EQ(2u, l.size());
  EXPECT_EQ("", l[0].id);
  EXPECT_EQ("0123456789abcdef", l[1].id);
  EXPECT_EQ("1:0,2:10:0123456789abcdef", FormatEpochs(l));
  EXPECT_EQ("0123456789abcdef", PromotionIdOf(l, 2));
  EXPECT_EQ("", PromotionIdOf(l, 1));
  EXPECT_EQ("", PromotionIdOf(l, 3));
  for (const char* bad : {"1:0:", "1:0:0123456789ABCDEF", "1:0:0123",
                          "1:0:0123456789abcdef0", "1:0:0123456789abcdeg",
                          "1::0123456789abcdef", "1:0:0123456789abcdef:"}) {
    EXPECT_FALSE(ParseEpochs(bad, &l)) << bad;
  }
  const std::string id = NewPromotionId();
  EXPECT_TRUE(IsPromotionId(id)) << id;
  EXPECT_NE(id, NewPromotionId());
}

TEST(ReplStateTest, DecideSyncTruncatesWhatNoLaterPrimaryHad) {
  const EpochList epochs = {{1, 0, ""}, {2, 100, ""}, {3, 250, ""}};
  // The current epoch, at or behind the primary: continue.
  EXPECT_FALSE(DecideSync(epochs, 300, 3, 260, nullptr).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 3, 300, nullptr).full_sync);
  // Epoch 2's replica up to where epoch 3 began: its log is a prefix.
  EXPECT_FALSE(DecideSync(epochs, 300, 2, 250, nullptr).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 1, 90, nullptr).full_sync);
  // Past where the next epoch began: a deposed primary's tail.
  EXPECT_TRUE(DecideSync(epochs, 300, 2, 251, nullptr).full_sync);
  EXPECT_TRUE(DecideSync(epochs, 300, 1, 101, nullptr).full_sync);
  // Ahead of the primary, never replicated, an epoch it does not know.
  EXPECT_TRUE(DecideSync(epochs, 300, 3, 301, nullptr).full_sync);
  EXPECT_TRUE(DecideSync(epochs, 300, 0, 0, nullptr).full_sync);
  EXPECT_TRUE(DecideSync(epochs, 300, 9, 10, nullptr).full_sync);
}

// Two promotions took one number apart (manual mode): a replica of the
// other gets a full copy, wherever its log ends, also when only one side
// has an id (an older build's promotion against this build's). Its own
// promotion continues; so does any replica when ids are not compared
// (etcd mode, a replica of an older build: null).
TEST(ReplStateTest, DecideSyncCopiesAnotherPromotionOfTheSameNumber) {
  const std::string mine = "00000000000000aa", other = "00000000000000bb", none;
  const EpochList epochs = {{1, 0, ""}, {2, 100, mine}, {3, 250, ""}};
  EXPECT_TRUE(DecideSync(epochs, 300, 2, 100, &other).full_sync);
  EXPECT_TRUE(DecideSync(epochs, 300, 2, 120, &other).full_sync);
  EXPECT_NE(
      std::string::npos,
      DecideSync(epochs, 300, 2, 120, &other).reason.find("another promotion"));
  EXPECT_TRUE(DecideSync(epochs, 300, 2, 120, &none).full_sync);
  EXPECT_TRUE(DecideSync(epochs, 300, 3, 260, &other).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 2, 120, &mine).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 3, 260, &none).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 1, 90, &none).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 2, 120, nullptr).full_sync);
  EXPECT_FALSE(DecideSync(epochs, 300, 3, 260, nullptr).full_sync);
  // The current epoch too.
  const EpochList now = {{1, 0, ""}, {2, 100, mine}};
  EXPECT_TRUE(DecideSync(now, 300, 2, 150, &other).full_sync);
  EXPECT_FALSE(DecideSync(now, 300, 2, 150, &mine).full_sync);
  EpochList stripped = now;
  ClearPromotionIds(&stripped);
  EXPECT_EQ("1:0,2:100", FormatEpochs(stripped));
}

// A replica never lowers its highest epoch seen in etcd mode, where the
// record numbers epochs across histories: a full copy of another history
// (a fresh replica's empty one, say) from a primary of a lower epoch is a
// deposed primary's, and is refused. Before the fix the other history's
// epoch replaced the maximum (8 -> 7) and the stream was taken.
TEST(ReplStateTest, AReplicaNeverLowersItsMaxEpochInEtcdMode) {
  ReplState mine;
  mine.history = "";  // a fresh replica: it saw epoch 8 in etcd's record
  mine.max_epoch = 8;
  const EpochList epochs = {{6, 100, ""}, {7, 200, ""}};
  ReplState next;
  std::string why;
  EXPECT_FALSE(AdoptPrimaryState(mine, kH1, 7, epochs, /*shard_epochs=*/true,
                                 &next, &why))
      << "max_epoch " << next.max_epoch;
  EXPECT_NE(std::string::npos, why.find("epoch 8")) << why;
  mine.history = kH0;  // another history
  EXPECT_FALSE(AdoptPrimaryState(mine, kH1, 7, epochs, true, &next, &why));
  // The same history: refused as before.
  mine.history = kH1;
  EXPECT_FALSE(AdoptPrimaryState(mine, kH1, 7, epochs, true, &next, &why));
  // A higher or equal epoch of another history: taken, the max never lower.
  mine.history = kH0;
  ASSERT_TRUE(AdoptPrimaryState(mine, kH1, 8, epochs, true, &next, &why));
  EXPECT_EQ(8u, next.max_epoch);
  EXPECT_EQ(8u, next.log_epoch);
  EXPECT_EQ(kH1, next.history);
  ASSERT_TRUE(AdoptPrimaryState(mine, kH1, 9, epochs, true, &next, &why));
  EXPECT_EQ(9u, next.max_epoch);
  // Manual mode: each history numbers its own epochs (a new primary's
  // first is 1), so another history's primary is taken with its epoch.
  ASSERT_TRUE(AdoptPrimaryState(mine, kH1, 1, {{1, 0, ""}},
                                /*shard_epochs=*/false, &next, &why));
  EXPECT_EQ(1u, next.max_epoch);
  // ... but never a lower epoch of its own history.
  mine.history = kH1;
  EXPECT_FALSE(AdoptPrimaryState(mine, kH1, 7, epochs, false, &next, &why));
  ASSERT_TRUE(AdoptPrimaryState(mine, kH1, 9, epochs, false, &next, &why));
  EXPECT_EQ(9u, next.max_epoch);
}

// A primary's answer is checked before anything of it is kept: an epoch
// of 0 ("never replicated") or past the last valid one (2^64-2, so that a
// promotion's epoch + 1 cannot wrap), and a history that is not a history
// id. (A hostile primary answered +CONTINUE 18446744073709551615: the
// replica took it, its REPLICAOF NO ONE wrapped to epoch 0, and no replica
// could sync from it again; a history with newlines put a forged
// "role:master" line into the replica's INFO and REPLICATION file.)
TEST(ReplStateTest, AHostilePrimarysEpochAndHistoryAreRefused) {
  ReplState mine;
  ReplState next;
  std::string why;
  for (bool shard : {false, true}) {
    EXPECT_FALSE(
        AdoptPrimaryState(mine, kH1, UINT64_MAX, {}, shard, &next, &why));
    EXPECT_NE(std::string::npos, why.find("epoch")) << why;
    EXPECT_FALSE(AdoptPrimaryState(mine, kH1, 0, {}, shard, &next, &why));
    // At kMaxEpoch its promotion would have no epoch left (a replica that
    // took it could never be promoted): refused too.
    EXPECT_FALSE(
        AdoptPrimaryState(mine, kH1, kMaxEpoch, {}, shard, &next, &why));
    EXPECT_TRUE(
        AdoptPrimaryState(mine, kH1, kMaxEpoch - 1, {}, shard, &next, &why))
        << why;
    for (const std::string& bad :
         {std::string("zz\nrole:master\nrepl_epoch:999"), std::string("h1"),
          std::string(), kH1 + "\r", kH1.substr(1), kH1 + "0",
          std::string(32, 'A')}) {
      EXPECT_FALSE(AdoptPrimaryState(mine, bad, 3, {}, shard, &next, &why))
          << bad;
      EXPECT_NE(std::string::npos, why.find("history")) << why;
    }
  }
  EXPECT_TRUE(IsHistoryId(NewHistoryId()));
  // etcd mode: a shard record's history is checked the same way.
  ShardRecord r;
  const std::string record = R"({"epoch":3,"primary":"127.0.0.1:1","isr":[],)";
  EXPECT_TRUE(
      ShardRecord::Parse(record + R"("history":")" + kH1 + R"("})", &r).ok());
  EXPECT_FALSE(ShardRecord::Parse(record + R"("history":"zz
role:master"})",
                                  &r)
                   .ok());
}

// The handshake takes the stream with a snapshot of the state; meanwhile
// the etcd thread may see (and persist) a higher epoch. What the replica
// stores must keep it, and a stream now below it is refused. (Before,
// ReplicaSession stored its snapshot-based state over the etcd thread's:
// the persisted max_epoch went from 6 back to 5, and the replica kept
// applying the deposed primary's stream.)
TEST(ReplStateTest, TheHandshakeKeepsAnEpochSeenMeanwhile) {
  ReplState snapshot;
  snapshot.history = kH1;
  snapshot.max_epoch = 5;
  ReplState next;
  std::string why;
  ASSERT_TRUE(
      AdoptPrimaryState(snapshot, kH1, 5, {{5, 10, ""}}, true, &next, &why));
  ReplState now = snapshot;
  now.max_epoch = 6;  // SeeEpoch(6) during the round trip
  ReplState kept = next;
  EXPECT_FALSE(KeepSeenEpoch(now, 5, /*shard_epochs=*/true, &kept, &why));
  EXPECT_NE(std::string::npos, why.find("epoch 6")) << why;
  // A stream of the newest epoch: taken, with the epoch seen kept.
  ASSERT_TRUE(
      AdoptPrimaryState(snapshot, kH1, 6, {{6, 10, ""}}, true, &next, &why));
  now.max_epoch = 7;  // ... and an even newer one seen meanwhile
  kept = next;
  EXPECT_FALSE(KeepSeenEpoch(now, 6, true, &kept, &why));
  now.max_epoch = 6;
  kept = next;
  ASSERT_TRUE(KeepSeenEpoch(now, 6, true, &kept, &why)) << why;
  EXPECT_EQ(6u, kept.max_epoch);
  EXPECT_EQ(6u, kept.log_epoch);
  // Manual mode: only the replica thread changes the state; nothing merged.
  now.max_epoch = 9;
  kept = next;
  ASSERT_TRUE(KeepSeenEpoch(now, 6, /*shard_epochs=*/false, &kept, &why));
  EXPECT_EQ(next.max_epoch, kept.max_epoch);
}

TEST(ReplStreamTest, FramesSplitAnywhereAndBadInputIsAnError) {
  std::string wire;
  AppendFrame(&wire, {"FENCEDKV.LOG", "1", "42", std::string("a\0b\r\n", 5)});
  AppendFrame(&wire, {"FENCEDKV.ACK", "42"});
  FrameReader r(1 << 20);
  std::vector<std::string_view> words;
  size_t frames = 0;
  for (char c : wire) {  // one byte at a time
    r.buffer()->push_back(c);
    while (r.Next(&words)) {
      ++frames;
      if (frames == 1) {
        ASSERT_EQ(4u, words.size());
        EXPECT_EQ(std::string("a\0b\r\n", 5), std::string(words[3]));
      } else {
        EXPECT_EQ("42", std::string(words[1]));
      }
    }
  }
  EXPECT_EQ(2u, frames);
  EXPECT_TRUE(r.error().empty());
  FrameReader bad(1 << 20);
  bad.buffer()->append("HTTP/1.1 400 Bad Request\r\n");
  EXPECT_FALSE(bad.Next(&words));
  EXPECT_FALSE(bad.error().empty());
  FrameReader big(64);
  AppendFrame(big.buffer(), {"FENCEDKV.ACK", std::string(100, 'x')});
  EXPECT_FALSE(big.Next(&words));
  EXPECT_FALSE(big.error().empty());  // over the frame limit
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
