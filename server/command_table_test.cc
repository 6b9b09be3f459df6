// Copyright (c) fencedkv authors.
//
// Commands through Dispatch on a real DB and lease service: the exact reply
// bytes a Redis client sees.

#include "command_table.h"

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "repl_commit.h"
#include "util/testutil.h"

namespace fencedkv {
namespace server {

class CommandTest : public testing::Test {
 protected:
  void SetUp() override { Open("key"); }

  void Open(const char* domain, bool allow_unfenced = false,
            const std::string& pass = "",
            const std::string& memtable = "skiplist",
            const std::string& acl_text = "") {
    state_.reset();  // its parked SCAN iterators go before the database
    leases_.reset();
    db_.reset();
    dir_ = std::make_unique<test::TempDir>();
    Options o;
    o.create_if_missing = true;
    o.fence_domain = domain;
    o.allow_unfenced = allow_unfenced;
    o.memtable = memtable;
    ASSERT_FENCEDKV_OK(DB::Open(o, dir_->path(), &db_));
    ASSERT_FENCEDKV_OK(LeaseService::Open(db_.get(), LeaseOptions(), &leases_));
    options_ = ServerOptions();
    options_.allow_unfenced = allow_unfenced;
    options_.requirepass = pass;
    ASSERT_FENCEDKV_OK(Acl::Parse(acl_text, "acl", pass, &options_.acl));
    state_ = std::make_unique<ServerState>();
    state_->db = db_.get();
    state_->leases = leases_.get();
    state_->options = &options_;
    state_->stats = &stats_;
    state_->started = std::chrono::steady_clock::now();
    client_ = ClientState();
    StartSession(*state_, &client_);
  }

  // Runs a command given as words; returns the raw reply.
  std::string Run(std::vector<std::string> words) {
    Args args(words.begin(), words.end());
    std::string out;
    Dispatch(*state_, client_, args, &out);
    return out;
  }

  std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<DB> db_;
  std::unique_ptr<LeaseService> leases_;
  ServerOptions options_;
  ServerStats stats_;
  std::unique_ptr<ServerState> state_;
  ClientState client_;
};

TEST_F(CommandTest, APausedHolderIsFencedOutOverRedisCommands) {
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "from-A", "FENCE", "7"}));
  EXPECT_EQ("$1\r\n8\r\n", Run({"FENCE.ADVANCE", "k", "8"}));
  EXPECT_EQ("+OK\r\n", Run({"set", "k", "from-B", "fence", "8"}));
  EXPECT_EQ("-STALE token 7 < max 8 (domain \"k\")\r\n",
            Run({"SET", "k", "late-A", "FENCE", "7"}));
  EXPECT_EQ("$6\r\nfrom-B\r\n", Run({"GET", "k"}));
  EXPECT_EQ("$1\r\n8\r\n", Run({"FENCE.GET", "k"}));
  EXPECT_EQ("-STALE token 7 < max 8 (domain \"k\")\r\n",
            Run({"GET", "k", "FENCE", "7"}));
  EXPECT_EQ("$6\r\nfrom-B\r\n", Run({"GET", "k", "FENCE", "8"}));
  EXPECT_EQ(1u, db_->GetFenceStats().rejected_writes);
}

TEST_F(CommandTest, UnfencedWritesAreRefusedUnlessAllowed) {
  EXPECT_EQ(
      "-NOFENCE SET needs FENCE <token>: this server refuses unfenced "
      "writes (see --allow_unfenced)\r\n",
      Run({"SET", "k", "v"}));
  EXPECT_EQ(0, Run({"DEL", "k"}).rfind("-NOFENCE", 0));
  EXPECT_EQ(0, Run({"MSET", "a", "1", "b", "2"}).rfind("-NOFENCE", 0));
  EXPECT_EQ("$-1\r\n", Run({"GET", "k"}));
  EXPECT_EQ(3u, stats_.nofence_rejections.load());
  Open("key", /*allow_unfenced=*/true);
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "v"}));
  EXPECT_EQ(1u, stats_.unfenced_writes.load());
  EXPECT_EQ(1u, db_->GetFenceStats().unfenced_writes);
}

TEST_F(CommandTest, InvalidTokens) {
  for (const char* bad : {"0", "-1", "18446744073709551616", "7x", "", "+3"}) {
    EXPECT_EQ(
        0, Run({"SET", "k", "v", "FENCE", bad}).rfind("-ERR invalid token", 0))
        << bad;
    EXPECT_EQ(0,
              Run({"FENCE.ADVANCE", "k", bad}).rfind("-ERR invalid token", 0));
  }
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "v", "FENCE", "18446744073709551615"}));
  EXPECT_EQ("$20\r\n18446744073709551615\r\n", Run({"FENCE.GET", "k"}));
  // One rule everywhere (ParseToken): canonical decimal, no leading zeros.
  EXPECT_EQ(
      "-ERR invalid token '007': a fencing token is a decimal integer "
      "in 1..18446744073709551615 without leading zeros\r\n",
      Run({"SET", "z", "v", "FENCE", "007"}));
  EXPECT_EQ(0, Run({"FENCE.ADVANCE", "z", "00000000000000000009"})
                   .rfind("-ERR invalid token", 0));
  EXPECT_EQ(0, Run({"GET", "z", "FENCE", "01"}).rfind("-ERR invalid token", 0));
}

// A repeated FENCE is refused (which token would the write carry?); NX, XX
// and GET may repeat, as Redis 7 allows them to.
TEST_F(CommandTest, RepeatedSetOptions) {
  EXPECT_EQ("-ERR syntax error: FENCE given more than once\r\n",
            Run({"SET", "k", "v", "FENCE", "1", "FENCE", "2"}));
  EXPECT_EQ("$-1\r\n", Run({"GET", "k"}));
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("-ERR syntax error: FENCE given more than once\r\n",
            Run({"SET", "k", "v", "FENCE", "1", "FENCE", "2"}));
  EXPECT_EQ(0, Run({"EXEC"}).rfind("-EXECABORT", 0));
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "v", "NX", "NX", "FENCE", "1"}));
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "w", "XX", "XX", "FENCE", "1"}));
  EXPECT_EQ("$1\r\nw\r\n", Run({"SET", "k", "x", "GET", "GET", "FENCE", "1"}));
  EXPECT_EQ("-ERR syntax error\r\n",
            Run({"SET", "k", "v", "NX", "XX", "FENCE", "1"}));
}

TEST_F(CommandTest, ArityAndUnknown) {
  EXPECT_EQ("-ERR wrong number of arguments for 'set' command\r\n",
            Run({"SET", "k"}));
  EXPECT_EQ("-ERR wrong number of arguments for 'get' command\r\n",
            Run({"GET"}));
  EXPECT_EQ("-ERR unknown command 'NOPE', with args beginning with: 'a'\r\n",
            Run({"NOPE", "a"}));
  EXPECT_EQ("-ERR syntax error\r\n",
            Run({"SET", "k", "v", "BOGUS", "FENCE", "1"}));
  EXPECT_EQ(
      "-ERR SET option EX is not supported: fencedkv keys do not expire\r\n",
      Run({"SET", "k", "v", "EX", "10", "FENCE", "1"}));
  EXPECT_EQ("-ERR empty key\r\n", Run({"SET", "", "v", "FENCE", "1"}));
}

TEST_F(CommandTest, SetConditionsAndGet) {
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "v1", "NX", "FENCE", "5"}));
  EXPECT_EQ("$-1\r\n", Run({"SET", "k", "v2", "NX", "FENCE", "5"}));
  EXPECT_EQ("$2\r\nv1\r\n", Run({"GET", "k"}));
  EXPECT_EQ("$-1\r\n", Run({"SET", "other", "x", "XX", "FENCE", "5"}));
  EXPECT_EQ("$-1\r\n", Run({"GET", "other"}));
  EXPECT_EQ("$2\r\nv1\r\n", Run({"SET", "k", "v3", "GET", "FENCE", "6"}));
  EXPECT_EQ("$2\r\nv3\r\n", Run({"GET", "k"}));
  // A failed condition changes nothing, not even the fence.
  EXPECT_EQ("$1\r\n6\r\n", Run({"FENCE.GET", "k"}));
  EXPECT_EQ("$-1\r\n", Run({"SET", "k", "v4", "NX", "FENCE", "9"}));
  EXPECT_EQ("$1\r\n6\r\n", Run({"FENCE.GET", "k"}));
  // The fence comes first.
  EXPECT_EQ(0, Run({"SET", "k", "v5", "XX", "FENCE", "5"}).rfind("-STALE", 0));
}

TEST_F(CommandTest, DelMsetExistsMget) {
  EXPECT_EQ("+OK\r\n", Run({"MSET", "a", "1", "b", "2", "FENCE", "3"}));
  EXPECT_EQ("*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n",
            Run({"MGET", "a", "b", "c"}));
  EXPECT_EQ(":3\r\n", Run({"EXISTS", "a", "b", "a", "c"}));
  EXPECT_EQ(":2\r\n", Run({"DEL", "a", "b", "c", "FENCE", "3"}));
  EXPECT_EQ(":0\r\n", Run({"EXISTS", "a", "b"}));
  EXPECT_EQ(0,
            Run({"MSET", "a", "1", "b", "2", "FENCE", "2"}).rfind("-STALE", 0));
  EXPECT_EQ("-ERR wrong number of arguments for 'mset' command\r\n",
            Run({"MSET", "a", "1", "b", "FENCE", "3"}));
  // A key literally named FENCE.
  EXPECT_EQ("+OK\r\n", Run({"SET", "FENCE", "x", "FENCE", "4"}));
  EXPECT_EQ(":1\r\n", Run({"DEL", "FENCE", "FENCE", "4"}));
}

TEST_F(CommandTest, MultiExecIsOneAtomicBatch) {
  EXPECT_EQ("+OK\r\n", Run({"SET", "x", "old", "FENCE", "10"}));
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "a", "1", "FENCE", "10"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "x", "new", "FENCE", "9"}));  // stale
  EXPECT_EQ("-STALE token 9 < max 10 (domain \"x\") at command 2\r\n",
            Run({"EXEC"}));
  EXPECT_EQ("$-1\r\n", Run({"GET", "a"}));  // nothing applied
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "a", "1", "FENCE", "10"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"DEL", "x", "nope", "FENCE", "10"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"PING"}));
  EXPECT_EQ("*3\r\n+OK\r\n:1\r\n+PONG\r\n", Run({"EXEC"}));
  EXPECT_EQ("$1\r\n1\r\n", Run({"GET", "a"}));
  // Refused inside MULTI, and the transaction is then discarded.
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ(0,
            Run({"GET", "a"}).rfind("-ERR get is not allowed inside MULTI", 0));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "b", "2", "FENCE", "10"}));
  EXPECT_EQ("-EXECABORT Transaction discarded because of previous errors.\r\n",
            Run({"EXEC"}));
  EXPECT_EQ("$-1\r\n", Run({"GET", "b"}));
  EXPECT_EQ("-ERR EXEC without MULTI\r\n", Run({"EXEC"}));
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+OK\r\n", Run({"DISCARD"}));
  // A token refused at EXEC (tokens are resolved then) names its command,
  // as a stale one does; it was a bare -ERR invalid token.
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "c", "1", "FENCE", "10"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "d", "1", "FENCE", "0"}));
  const std::string refused = Run({"EXEC"});
  EXPECT_EQ(0, refused.rfind("-ERR invalid token '0'", 0)) << refused;
  EXPECT_NE(std::string::npos,
            refused.find(" at command 2 (nothing was applied)\r\n"))
      << refused;
  EXPECT_EQ("$-1\r\n", Run({"GET", "c"}));
}

class ScanTest : public CommandTest,
                 public testing::WithParamInterface<const char*> {
 protected:
  // SCAN MATCH key:* COUNT 7 from cursor 0 to the end; every key returned,
  // and one cursor replayed mid-way (it must give the same page again).
  std::vector<std::string> ScanAll(
      const std::function<void(int)>& between_pages) {
    std::vector<std::string> keys;
    std::string cursor = "0";
    int calls = 0;
    auto page = [&](const std::string& from, std::string* next) {
      std::string r = Run({"SCAN", from, "MATCH", "key:*", "COUNT", "7"});
      EXPECT_EQ(0u, r.rfind("*2\r\n$", 0)) << r;
      // Parse the reply: cursor bulk, then an array of bulks.
      size_t p = r.find("\r\n", 4) + 2;
      size_t e = r.find("\r\n", p);
      *next = r.substr(p, e - p);
      p = r.find("\r\n", e + 2) + 2;  // past "*N"
      std::vector<std::string> got;
      while (p < r.size()) {
        size_t len_end = r.find("\r\n", p);
        const size_t len = std::stoul(r.substr(p + 1, len_end - p - 1));
        got.push_back(r.substr(len_end + 2, len));
        p = len_end + 2 + len + 2;
      }
      return got;
    };
    do {
      std::string next;
      std::vector<std::string> got = page(cursor, &next);
      if (calls == 2) {  // a client may replay a cursor: same page
        std::string next_again;
        EXPECT_EQ(got, page(cursor, &next_again));
      }
      keys.insert(keys.end(), got.begin(), got.end());
      between_pages(calls);
      cursor = next;
      if (++calls >= 50) break;
    } while (cursor != "0");
    EXPECT_LT(calls, 50);
    return keys;
  }
};

TEST_P(ScanTest, VisitsEveryKeyOnce) {
  Open("key", false, "", GetParam());
  for (int i = 0; i < 57; ++i) {
    Run({"SET", "key:" + std::to_string(i), "v", "FENCE", "1"});
  }
  Run({"SET", "other", "v", "FENCE", "1"});
  Run({"DEL", "key:3", "FENCE", "2"});
  // Writes between pages: keys present throughout must all be returned,
  // each once (Redis' guarantee); the new ones may or may not be.
  int added = 0;
  const std::vector<std::string> keys = ScanAll([&](int call) {
    Run({"SET", "key:new" + std::to_string(call), "v", "FENCE", "3"});
    ++added;
  });
  std::set<std::string> seen;
  for (const auto& k : keys) EXPECT_TRUE(seen.insert(k).second) << k;
  for (int i = 0; i < 57; ++i) {
    const std::string k = "key:" + std::to_string(i);
    EXPECT_EQ(i == 3 ? 0u : 1u, seen.count(k)) << k;
  }
  EXPECT_EQ(0u, seen.count("other"));
  EXPECT_EQ("-ERR invalid cursor\r\n", Run({"SCAN", "424242"}));
  EXPECT_EQ(":" + std::to_string(57 + added) + "\r\n", Run({"DBSIZE"}));
  EXPECT_EQ("*1\r\n$5\r\nkey:0\r\n", Run({"KEYS", "key:0"}));
}

INSTANTIATE_TEST_SUITE_P(Memtables, ScanTest,
                         testing::Values("skiplist", "hash"));

TEST_F(CommandTest, ParkedScanIteratorsAreBoundedAndExpire) {
  Run({"SET", "a", "v", "FENCE", "1"});
  CursorTable::Limits limits;
  limits.parked_ttl = std::chrono::milliseconds(50);
  limits.max_per_owner = 100;
  CursorTable table(limits);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 20; ++i) {
    auto it = db_->NewIterator(ReadOptions());
    it->SeekToFirst();
    ids.push_back(table.Save(7, "a", std::move(it)));
  }
  EXPECT_EQ(16u, table.parked());  // the oldest were released
  std::string key;
  std::unique_ptr<Iterator> it;
  ASSERT_TRUE(table.Load(7, ids.front(), &key, &it));  // released: key only
  EXPECT_EQ("a", key);
  EXPECT_EQ(nullptr, it);
  ASSERT_TRUE(table.Load(7, ids.back(), &key, &it));  // still parked: taken
  ASSERT_NE(nullptr, it);
  EXPECT_EQ("a", std::string(it->key()));
  EXPECT_EQ(15u, table.parked());
  table.DropExpired();  // none is 50 ms old yet
  EXPECT_EQ(15u, table.parked());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  table.DropExpired();
  EXPECT_EQ(0u, table.parked());
  ASSERT_TRUE(table.Load(7, ids[10], &key, &it));  // the cursor itself remains
  EXPECT_EQ(nullptr, it);
}

// A parked iterator goes at the next sweep once the database moved on from
// what it reads (here a flush): it would keep the flushed memtables in
// memory until its ttl. Its cursor stays and resumes from its key.
TEST_F(CommandTest, ParkedScanIteratorsOfAnOldVersionAreReleased) {
  Run({"SET", "a", "v", "FENCE", "1"});
  Run({"SET", "b", "v", "FENCE", "1"});
  CursorTable table;  // parked_ttl 30 s: only the version can release it
  auto it = db_->NewIterator(ReadOptions());
  it->Seek("b");
  const uint64_t id = table.Save(7, "b", std::move(it));
  table.DropExpired();
  EXPECT_EQ(1u, table.parked());
  Run({"SET", "c", "v", "FENCE", "1"});  // a write keeps the version
  table.DropExpired();
  EXPECT_EQ(1u, table.parked());
  ASSERT_FENCEDKV_OK(db_->Flush());
  table.DropExpired();
  EXPECT_EQ(0u, table.parked());
  std::string key;
  std::unique_ptr<Iterator> back;
  ASSERT_TRUE(table.Load(7, id, &key, &back));
  EXPECT_EQ("b", key);
  EXPECT_EQ(nullptr, back);
}

// Cursors belong to their connection, and every bound holds: per
// connection, server-wide count and bytes, age; a closed connection's go.
TEST_F(CommandTest, ScanCursorsAreBounded) {
  CursorTable::Limits limits;
  limits.max_per_owner = 4;
  limits.max_cursors = 10;
  limits.max_bytes = 5 * (1000 + CursorTable::kOverhead);
  limits.idle_ttl = std::chrono::milliseconds(50);
  CursorTable table(limits);
  std::string key;
  std::unique_ptr<Iterator> it;
  const uint64_t a = table.Save(1, "k", nullptr);
  EXPECT_FALSE(table.Load(2, a, &key, &it));  // another connection's
  EXPECT_TRUE(table.Load(1, a, &key, &it));
  for (int i = 0; i < 4; ++i) table.Save(1, "k", nullptr);
  EXPECT_FALSE(table.Load(1, a, &key, &it));  // the owner's oldest went
  EXPECT_EQ(4u, table.size());
  for (uint64_t owner = 2; owner < 10; ++owner) table.Save(owner, "k", nullptr);
  EXPECT_EQ(10u, table.size());  // max_cursors
  for (int i = 0; i < 10; ++i)
    table.Save(100 + i, std::string(1000, 'x'), nullptr);
  EXPECT_LE(table.bytes(), limits.max_bytes);
  EXPECT_EQ(5u, table.size());
  table.DropOwner(105);
  EXPECT_EQ(4u, table.size());
  const uint64_t b = table.Save(200, "k", nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_FALSE(table.Load(200, b, &key, &it));  // expired
  table.DropExpired();
  EXPECT_EQ(0u, table.size());
  EXPECT_EQ(0u, table.bytes());
}

// Another client cannot resume a cursor; a huge COUNT examines at most
// 10000 keys in one call.
TEST_F(CommandTest, ScanIsPrivateAndBoundedPerCall) {
  WriteBatch batch;
  for (int i = 0; i < 12000; ++i) batch.Put("k" + std::to_string(i), "v", 1);
  ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), batch));
  const std::string r = Run({"SCAN", "0", "COUNT", "1000000000"});
  ASSERT_EQ(0u, r.rfind("*2\r\n$", 0));
  const size_t p = r.find("\r\n", 4) + 2;
  const std::string cursor = r.substr(p, r.find("\r\n", p) - p);
  EXPECT_NE("0", cursor);
  EXPECT_NE(std::string::npos, r.find("\r\n*10000\r\n")) << r.substr(0, 60);
  ClientState other;
  other.id = client_.id + 1;
  StartSession(*state_, &other);
  std::string out;
  const std::vector<std::string> words = {"SCAN", cursor};
  Dispatch(*state_, other, Args(words.begin(), words.end()), &out);
  EXPECT_EQ("-ERR invalid cursor\r\n", out);
  EXPECT_EQ(0u, Run({"SCAN", cursor, "COUNT", "5000"})
                    .rfind("*2\r\n$1\r\n0\r\n*2000\r\n", 0));
}

// KEYS does not build a reply past --max_reply_bytes (64 MiB; SCAN pages
// through any number of keys).
TEST_F(CommandTest, KeysReplyIsBounded) {
  const std::string prefix(60 << 10, 'k');
  for (int b = 0; b < 12; ++b) {
    WriteBatch batch;
    for (int i = 0; i < 100; ++i)
      batch.Put(prefix + std::to_string(b * 100 + i), "", 1);
    ASSERT_FENCEDKV_OK(db_->Write(WriteOptions(), batch));
  }
  const std::string r = Run({"KEYS", "*"});
  EXPECT_EQ(0u, r.rfind("-ERR reply of more than 67108864 bytes", 0))
      << r.substr(0, 80);
  EXPECT_EQ(0u, Run({"KEYS", "k*0"}).rfind("*120\r\n", 0));
}

TEST_F(CommandTest, Leases) {
  std::string r = Run({"LEASE.ACQUIRE", "shard1", "A", "10000"});
  EXPECT_EQ(0, r.rfind("*2\r\n$1\r\n1\r\n:", 0)) << r;
  EXPECT_EQ(
      0,
      Run({"LEASE.ACQUIRE", "shard1", "B", "10000"})
          .rfind("-LEASED lease \"shard1\" is held by \"A\" for another", 0));
  EXPECT_EQ(0, Run({"LEASE.ACQUIRE", "shard1", "A", "10000"})
                   .rfind("*2\r\n$1\r\n1\r\n", 0));
  EXPECT_EQ(0, Run({"LEASE.RENEW", "shard1", "A", "1", "20000"})
                   .rfind("*2\r\n$1\r\n1\r\n", 0));
  EXPECT_EQ(
      0,
      Run({"LEASE.RENEW", "shard1", "A", "2", "20000"}).rfind("-LEASELOST", 0));
  r = Run({"LEASE.INFO", "shard1"});
  EXPECT_EQ(
      0,
      r.rfind("*6\r\n$6\r\nholder\r\n$1\r\nA\r\n$5\r\ntoken\r\n$1\r\n1\r\n", 0))
      << r;
  EXPECT_EQ("+OK\r\n", Run({"LEASE.RELEASE", "shard1", "A", "1"}));
  EXPECT_EQ("*-1\r\n", Run({"LEASE.INFO", "shard1"}));
  r = Run({"LEASE.ACQUIRE", "shard1", "B", "10000"});
  EXPECT_EQ(0, r.rfind("*2\r\n$1\r\n2\r\n", 0)) << r;  // a new, higher token
  // A token a client wrote does not move the counter (it would let one
  // client exhaust it for everyone with 2^64-1).
  Run({"SET", "k", "v", "FENCE", "18446744073709551615"});
  EXPECT_EQ(0, Run({"LEASE.ACQUIRE", "other", "C", "1000"})
                   .rfind("*2\r\n$1\r\n3\r\n", 0));
  EXPECT_EQ("-ERR invalid ttl_ms: must be a positive integer\r\n",
            Run({"LEASE.ACQUIRE", "x", "C", "0"}));
  EXPECT_EQ("-ERR value is not an integer or out of range\r\n",
            Run({"LEASE.ACQUIRE", "x", "C", "soon"}));
  // Integers as Redis's string2ll reads them: no leading zero, no "-0",
  // no sign but '-' (tokens refuse "007" too).
  for (const char* bad : {"007", "-0", "+5", "00", "-01", " 5", "5 "}) {
    EXPECT_EQ("-ERR value is not an integer or out of range\r\n",
              Run({"LEASE.ACQUIRE", "x", "C", bad}))
        << bad;
  }
  EXPECT_EQ("-ERR invalid ttl_ms: must be a positive integer\r\n",
            Run({"LEASE.ACQUIRE", "x", "C", "-5"}));
}

// A primary past its etcd lease deadline may already have been replaced:
// it answers no write, fenced read or lease command (a deposed primary's
// GET k FENCE t would confirm a holder the new primary has fenced out),
// while plain reads go on. Before, only the step-down (which the etcd
// thread makes between two calls to etcd, each with its timeout) stopped
// fenced reads, seconds after the deadline.
TEST_F(CommandTest, APrimaryPastItsLeaseDeadlineAnswersOnlyPlainReads) {
  ASSERT_EQ("+OK\r\n", Run({"SET", "k", "v", "FENCE", "5"}));
  std::atomic<int64_t> deadline{ReplNowMs() + 60000};
  client_.lease_deadline = &deadline;
  EXPECT_EQ("$1\r\nv\r\n", Run({"GET", "k", "FENCE", "5"}));
  deadline = ReplNowMs() - 1;
  const std::string lapsed =
      "-READONLY this server's etcd lease may have expired, so it may no "
      "longer be the primary: no write, fenced read or lease command until "
      "it renews the lease or steps down\r\n";
  EXPECT_EQ(lapsed, Run({"GET", "k", "FENCE", "5"}));
  EXPECT_EQ(lapsed, Run({"SET", "k", "w", "FENCE", "6"}));
  EXPECT_EQ(lapsed, Run({"FENCE.GET", "k"}));
  EXPECT_EQ(lapsed, Run({"LEASE.INFO", "shard1"}));
  EXPECT_EQ("$1\r\nv\r\n", Run({"GET", "k"}));
  EXPECT_EQ("+PONG\r\n", Run({"PING"}));
  deadline = 0;  // no lease (manual mode)
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "w", "FENCE", "6"}));
}

TEST_F(CommandTest, FenceDomainFloorAndHashtags) {
  Open("hashtag", false, "", "skiplist", "user op on >pw ~* +@all");
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "op", "pw"}));
  EXPECT_EQ("$6\r\nshard1\r\n", Run({"FENCE.DOMAIN", "user:{shard1}:x"}));
  EXPECT_EQ("$1\r\n8\r\n", Run({"FENCE.ADVANCE", "{shard1}", "8"}));
  EXPECT_EQ("-STALE token 7 < max 8 (domain \"shard1\")\r\n",
            Run({"SET", "user:{shard1}:never-touched", "v", "FENCE", "7"}));
  EXPECT_EQ("$1\r\n0\r\n", Run({"FENCE.FLOOR"}));
  EXPECT_EQ("$2\r\n20\r\n", Run({"FENCE.FLOOR", "20"}));
  EXPECT_EQ(
      0,
      Run({"FENCE.FLOOR", "10"}).rfind("-ERR fence floor cannot decrease", 0));
  EXPECT_EQ("-STALE token 19 < floor 20 (domain \"other\")\r\n",
            Run({"SET", "other", "v", "FENCE", "19"}));
}

// The default user runs everything but @admin; an operator from the ACL
// file raises the floor. Refusals keep MULTI's rule: the transaction is
// then discarded.
TEST_F(CommandTest, AclPermissions) {
  Open("key", false, "", "skiplist",
       "user op on >oppw ~* +@all\n"
       "user ro on >ropw ~* +@read +@connection +@transaction -fence.get\n"
       "user nokeys on >nk +@all -@admin\n");
  EXPECT_EQ("$7\r\ndefault\r\n", Run({"ACL", "WHOAMI"}));
  EXPECT_EQ(
      "-NOPERM this user has no permissions to run the 'fence.floor' "
      "command with an argument\r\n",
      Run({"FENCE.FLOOR", "9"}));
  EXPECT_EQ("$1\r\n0\r\n", Run({"FENCE.FLOOR"}));
  EXPECT_EQ(
      "-NOPERM this user has no permissions to run the 'config' "
      "command\r\n",
      Run({"CONFIG", "GET", "port"}));
  EXPECT_EQ(0, Run({"FENCEDKV.CHECKPOINT", "/tmp/x"}).rfind("-NOPERM", 0));
  EXPECT_EQ(0, Run({"FENCEDKV.BACKUP", "/tmp/x"}).rfind("-NOPERM", 0));
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"SET", "a", "1", "FENCE", "1"}));
  EXPECT_EQ(0, Run({"ACL", "LIST"}).rfind("-NOPERM", 0));
  EXPECT_EQ(
      0,
      Run({"ACL", "WHOAMI"}).rfind("-ERR acl is not allowed inside MULTI", 0));
  EXPECT_EQ(0, Run({"EXEC"}).rfind("-EXECABORT", 0));
  // The operator.
  EXPECT_EQ(0, Run({"AUTH", "op", "nope"}).rfind("-WRONGPASS", 0));
  EXPECT_EQ("$7\r\ndefault\r\n", Run({"ACL", "WHOAMI"}));  // unchanged
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "op", "oppw"}));
  EXPECT_EQ("$2\r\nop\r\n", Run({"ACL", "WHOAMI"}));
  EXPECT_EQ("$1\r\n9\r\n", Run({"FENCE.FLOOR", "9"}));
  EXPECT_EQ(0, Run({"ACL", "USERS"}).rfind("*4\r\n$7\r\ndefault\r\n", 0));
  // Read-only: +@read does not include raising the floor (@write @admin).
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "ro", "ropw"}));
  EXPECT_EQ("$-1\r\n", Run({"GET", "a"}));
  EXPECT_EQ("$1\r\n9\r\n", Run({"FENCE.FLOOR"}));
  EXPECT_EQ(0, Run({"FENCE.FLOOR", "10"}).rfind("-NOPERM", 0));
  EXPECT_EQ(0, Run({"FENCE.GET", "a"}).rfind("-NOPERM", 0));  // -fence.get
  EXPECT_EQ(0, Run({"SET", "a", "1", "FENCE", "9"}).rfind("-NOPERM", 0));
  EXPECT_EQ(0, Run({"LEASE.ACQUIRE", "l", "h", "100"}).rfind("-NOPERM", 0));
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ(0, Run({"SET", "a", "1", "FENCE", "9"}).rfind("-NOPERM", 0));
  EXPECT_EQ(0, Run({"EXEC"}).rfind("-EXECABORT", 0));
  // No keys: no key command, no keyspace scan; leases still (no keys).
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "nokeys", "nk"}));
  EXPECT_EQ(
      "-NOPERM this user has no permissions to access one of the keys "
      "used as arguments\r\n",
      Run({"GET", "a"}));
  EXPECT_EQ(0, Run({"SCAN", "0"})
                   .rfind("-NOPERM this user has no permissions "
                          "to access one of the keys",
                          0));
  EXPECT_EQ(0, Run({"LEASE.ACQUIRE", "l", "h", "100"}).rfind("*2\r\n", 0));
  // COMMAND INFO lists the categories.
  const std::string info = Run({"COMMAND", "INFO", "fence.floor"});
  EXPECT_NE(std::string::npos,
            info.find("*5\r\n+@read\r\n+@write\r\n+@fencing\r\n+@admin"
                      "\r\n+@dangerous"))
      << info;
}

// Every command is in at least one category, and no command but the
// operator's is in @admin for the default user.
TEST_F(CommandTest, EveryCommandHasCategories) {
  for (const auto& c : AllCommands()) {
    EXPECT_NE(0u, c.categories) << c.name;
    const bool admin_only = (c.categories & kCatAdmin) != 0;
    const std::string name = c.name;
    const bool operators =
        name == "config" || name == "shutdown" || name == "slowlog" ||
        name == "replicaof" || name == "slaveof" ||
        (name.rfind("fencedkv.", 0) == 0 && name != "fencedkv.digest");
    EXPECT_EQ(admin_only, operators) << name;
  }
}

TEST_F(CommandTest, AuthAndAdmin) {
  Open("key", false, "s3cret", "skiplist", "user op on >op ~* +@all");
  EXPECT_EQ("-NOAUTH Authentication required.\r\n", Run({"GET", "k"}));
  EXPECT_EQ(
      "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
      Run({"AUTH", "nope"}));
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "s3cret"}));
  EXPECT_EQ("$-1\r\n", Run({"GET", "k"}));
  EXPECT_EQ("+PONG\r\n", Run({"PING"}));
  EXPECT_EQ("$2\r\nhi\r\n", Run({"ECHO", "hi"}));
  EXPECT_EQ("+OK\r\n", Run({"SELECT", "0"}));
  EXPECT_EQ(0, Run({"SELECT", "1"}).rfind("-ERR DB index is out of range", 0));
  EXPECT_EQ("+OK\r\n", Run({"CLIENT", "SETNAME", "worker-1"}));
  EXPECT_EQ("$8\r\nworker-1\r\n", Run({"CLIENT", "GETNAME"}));
  EXPECT_EQ(0, Run({"CONFIG", "GET", "save"}).rfind("-NOPERM", 0));
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "op", "op"}));  // an operator
  EXPECT_EQ("*4\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n",
            Run({"CONFIG", "GET", "save", "appendonly"}));
  const std::string count = Run({"COMMAND", "COUNT"});
  EXPECT_EQ(":" + std::to_string(AllCommands().size()) + "\r\n", count);
  EXPECT_EQ("*0\r\n", Run({"COMMAND", "DOCS"}));
  const std::string info = Run({"INFO", "fencing"});
  EXPECT_NE(std::string::npos, info.find("fence_domain:key"));
  EXPECT_NE(std::string::npos, info.find("rejected_writes:0"));
  EXPECT_EQ(std::string::npos, info.find("# Server"));
  EXPECT_NE(std::string::npos, Run({"INFO"}).find("# Persistence"));
  EXPECT_EQ(0, Run({"FLUSHALL"}).rfind("-ERR flushall is not supported", 0));
  EXPECT_EQ(0, Run({"HELLO", "3"}).rfind("-NOPROTO", 0));
  EXPECT_EQ(0, Run({"HELLO", "2"})
                   .rfind("*14\r\n$6\r\nserver\r\n$8\r\nfencedkv\r\n", 0));
  EXPECT_EQ("+OK\r\n", Run({"QUIT"}));
  EXPECT_TRUE(client_.close_after_reply);
}

// A call of each command that takes keys, and its keys: COMMAND GETKEYS
// says exactly these, COMMAND INFO's positions give them for the fenced
// form, and a user without keys may run none of these commands.
TEST_F(CommandTest, KeyPositionsAndGetKeys) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> calls = {
      {{"GET", "k"}, "*1\r\n$1\r\nk\r\n"},
      {{"GET", "k", "FENCE", "7"}, "*1\r\n$1\r\nk\r\n"},
      {{"SET", "k", "v", "NX", "FENCE", "1"}, "*1\r\n$1\r\nk\r\n"},
      {{"DEL", "a", "b", "FENCE", "1"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
      {{"MSET", "a", "1", "b", "2", "FENCE", "1"},
       "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
      {{"EXISTS", "a", "b"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
      {{"MGET", "a", "b"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
      {{"FENCE.ADVANCE", "k", "1"}, "*1\r\n$1\r\nk\r\n"},
      {{"FENCE.GET", "k"}, "*1\r\n$1\r\nk\r\n"},
      {{"FENCE.DOMAIN", "k"}, "*1\r\n$1\r\nk\r\n"},
      {{"TYPE", "k"}, "*1\r\n$1\r\nk\r\n"},
      {{"STRLEN", "k"}, "*1\r\n$1\r\nk\r\n"},
      {{"MEMORY", "USAGE", "k"}, "*1\r\n$1\r\nk\r\n"},
  };
  std::set<std::string> covered;
  for (const auto& [call, keys] : calls) {
    std::vector<std::string> words = {"COMMAND", "GETKEYS"};
    words.insert(words.end(), call.begin(), call.end());
    EXPECT_EQ(keys, Run(words)) << call[0];
    // The static positions give the same keys for these (fenced) calls.
    const CommandSpec* c = LookupCommand(call[0]);
    ASSERT_NE(nullptr, c);
    covered.insert(c->name);
    const Args args(call.begin(), call.end());
    const int argc = static_cast<int>(args.size());
    const int last = c->keys.last < 0 ? argc + c->keys.last : c->keys.last;
    std::string got =
        "*" + std::to_string((last - c->keys.first) / c->keys.step + 1) +
        "\r\n";
    for (int i = c->keys.first; i <= last; i += c->keys.step) {
      got += "$" + std::to_string(args[i].size()) + "\r\n" +
             std::string(args[i]) + "\r\n";
    }
    EXPECT_EQ(keys, got) << call[0];
  }
  for (const auto& c : AllCommands()) {
    EXPECT_EQ(c.keys.first > 0, covered.count(c.name) == 1)
        << c.name << ": a command with keys needs a call above";
    if (c.flags & kCmdMovableKeys) {
      WriteCommand::Kind kind;
      EXPECT_TRUE(IsWriteCommand(c.name, &kind)) << c.name;
    }
  }
  // The unfenced forms (--allow_unfenced) have keys up to their end.
  EXPECT_EQ("*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            Run({"COMMAND", "GETKEYS", "DEL", "a", "b"}));
  EXPECT_EQ("*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            Run({"COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"}));
  EXPECT_EQ("*1\r\n$5\r\nFENCE\r\n",
            Run({"COMMAND", "GETKEYS", "DEL", "FENCE", "FENCE", "1"}));
  // Redis' errors.
  EXPECT_EQ("-ERR Invalid command specified\r\n",
            Run({"COMMAND", "GETKEYS", "NOPE", "k"}));
  EXPECT_EQ("-ERR The command has no key arguments\r\n",
            Run({"COMMAND", "GETKEYS", "SCAN", "0"}));
  EXPECT_EQ("-ERR The command has no key arguments\r\n",
            Run({"COMMAND", "GETKEYS", "LEASE.INFO", "name"}));
  EXPECT_EQ("-ERR Invalid number of arguments specified for command\r\n",
            Run({"COMMAND", "GETKEYS", "GET"}));
  EXPECT_EQ("-ERR Invalid arguments specified for command\r\n",
            Run({"COMMAND", "GETKEYS", "MSET", "a", "1", "b"}));
  EXPECT_EQ("-ERR wrong number of arguments for 'command|getkeys' command\r\n",
            Run({"COMMAND", "GETKEYS"}));

  // COMMAND INFO: MSET is 1,-3,2 with movablekeys; keyless commands 0,0,0.
  EXPECT_EQ(0u, Run({"COMMAND", "INFO", "mset"})
                    .rfind("*1\r\n*7\r\n$4\r\nmset\r\n:-3\r\n*2\r\n+write\r\n"
                           "+movablekeys\r\n:1\r\n:-3\r\n:2\r\n",
                           0));
  EXPECT_EQ(0u, Run({"COMMAND", "INFO", "get"})
                    .rfind("*1\r\n*7\r\n$3\r\nget\r\n:-2\r\n*1\r\n+readonly"
                           "\r\n:1\r\n:1\r\n:1\r\n",
                           0));
  EXPECT_EQ(0u, Run({"COMMAND", "INFO", "scan"})
                    .rfind("*1\r\n*7\r\n$4\r\nscan\r\n:-2\r\n*1\r\n+readonly"
                           "\r\n:0\r\n:0\r\n:0\r\n",
                           0));

  // A user without keys may run no command with keys; the others, yes.
  Open("key", false, "", "skiplist", "user nokeys on >nk +@all -@admin\n");
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "nokeys", "nk"}));
  for (const auto& [call, keys] : calls) {
    EXPECT_EQ(0u, Run(call).rfind("-NOPERM this user has no permissions to "
                                  "access one of the keys",
                                  0))
        << call[0];
  }
  EXPECT_EQ("+PONG\r\n", Run({"PING"}));
}

// What redis-cli's --bigkeys and --memkeys ask: TYPE, STRLEN, MEMORY USAGE.
TEST_F(CommandTest, TypeStrlenMemoryUsage) {
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "hello", "FENCE", "300"}));
  EXPECT_EQ("+string\r\n", Run({"TYPE", "k"}));
  EXPECT_EQ("+none\r\n", Run({"TYPE", "nope"}));
  EXPECT_EQ(":5\r\n", Run({"STRLEN", "k"}));
  EXPECT_EQ(":0\r\n", Run({"STRLEN", "nope"}));
  // key 1 + 8, value 1 + varint(300) 2 + 5, two 1-byte lengths.
  EXPECT_EQ(":19\r\n", Run({"MEMORY", "USAGE", "k"}));
  EXPECT_EQ(":19\r\n", Run({"memory", "usage", "k", "SAMPLES", "5"}));
  EXPECT_EQ("$-1\r\n", Run({"MEMORY", "USAGE", "nope"}));
  EXPECT_EQ("-ERR syntax error\r\n", Run({"MEMORY", "USAGE", "k", "X"}));
  EXPECT_EQ(0u, Run({"MEMORY", "DOCTOR"}).rfind("-ERR unknown subcommand", 0));
  EXPECT_EQ(0u, Run({"MEMORY", "HELP"}).rfind("*5\r\n", 0));
  // A deleted key keeps its token and is "none".
  EXPECT_EQ(":1\r\n", Run({"DEL", "k", "FENCE", "300"}));
  EXPECT_EQ("+none\r\n", Run({"TYPE", "k"}));
}

TEST_F(CommandTest, LeaseList) {
  EXPECT_EQ("*0\r\n", Run({"LEASE.LIST"}));
  ASSERT_EQ(0u, Run({"LEASE.ACQUIRE", "orders", "A", "60000"}).rfind("*2", 0));
  ASSERT_EQ(0u, Run({"LEASE.ACQUIRE", "billing", "B", "60000"}).rfind("*2", 0));
  const std::string all = Run({"LEASE.LIST"});
  EXPECT_EQ(
      0u, all.rfind("*2\r\n*5\r\n$7\r\nbilling\r\n$1\r\nB\r\n$1\r\n2\r\n:", 0))
      << all;
  EXPECT_NE(std::string::npos,
            all.find("*5\r\n$6\r\norders\r\n$1\r\nA\r\n$1\r\n1\r\n:"));
  EXPECT_EQ(0u, Run({"LEASE.LIST", "o*"}).rfind("*1\r\n*5\r\n$6\r\norders", 0));
  EXPECT_EQ("*0\r\n", Run({"LEASE.LIST", "x*"}));
  EXPECT_EQ(0u, Run({"LEASE.LIST", "a", "b"}).rfind("-ERR wrong number", 0));
  // Bounded by max_reply_bytes.
  options_.max_reply_bytes = 60;
  EXPECT_EQ(0u,
            Run({"LEASE.LIST"}).rfind("-ERR reply of more than 60 bytes", 0));
}

// LEASE.LIST copies the leases 64 at a time (kLeaseListSlice), each slice
// starting after the last name of the one before: around those
// boundaries every lease is listed once, in name order.
TEST_F(CommandTest, LeaseListAcrossItsSlices) {
  int held = 0;
  for (int n : {63, 64, 65, 128, 129, 200}) {
    for (; held < n; ++held) {
      char name[16];
      std::snprintf(name, sizeof(name), "l%04d", held);
      ASSERT_EQ(0u, Run({"LEASE.ACQUIRE", name, "h", "60000"}).rfind("*2", 0));
    }
    const std::string all = Run({"LEASE.LIST"});
    ASSERT_EQ(0u, all.rfind("*" + std::to_string(n) + "\r\n", 0)) << n;
    // The names, in the order listed.
    std::vector<std::string> names;
    for (size_t at = all.find("*5\r\n$5\r\n"); at != std::string::npos;
         at = all.find("*5\r\n$5\r\n", at + 1)) {
      names.push_back(all.substr(at + 8, 5));
    }
    ASSERT_EQ(static_cast<size_t>(n), names.size()) << n;
    for (int i = 0; i < n; ++i) {
      char name[16];
      std::snprintf(name, sizeof(name), "l%04d", i);
      EXPECT_EQ(name, names[static_cast<size_t>(i)]) << n;
    }
    // A pattern that matches one lease in each slice.
    const std::string some = Run({"LEASE.LIST", "l00[0-9]0"});
    // (l0000, l0010, ... l0090: those below n.)
    EXPECT_EQ(0u,
              some.rfind(
                  "*" + std::to_string(std::min(10, (n + 9) / 10)) + "\r\n", 0))
        << n << ": " << some.substr(0, 8);
  }
}

// SHUTDOWN, CLIENT KILL and SLOWLOG are operator commands; SHUTDOWN and
// CLIENT KILL reach the server through ServerState's hooks.
TEST_F(CommandTest, OperatorCommands) {
  Open("key", false, "", "skiplist", "user op on >op ~* +@all\n");
  for (const auto& call : std::vector<std::vector<std::string>>{
           {"SHUTDOWN"}, {"CLIENT", "KILL", "ID", "1"}, {"SLOWLOG", "LEN"}}) {
    EXPECT_EQ(0u, Run(call).rfind("-NOPERM", 0)) << call[0];
  }
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "op", "op"}));
  // Without the hooks (no server around): clear errors.
  EXPECT_EQ(0u, Run({"SHUTDOWN"}).rfind("-ERR SHUTDOWN is not available", 0));
  EXPECT_EQ(0u,
            Run({"CLIENT", "KILL", "ID", "1"}).rfind("-ERR CLIENT KILL", 0));
  int shutdowns = 0;
  state_->request_shutdown = [&shutdowns] {
    ++shutdowns;
    return true;
  };
  std::vector<KillFilter> kills;
  state_->kill_clients = [&kills](const KillFilter& f) {
    kills.push_back(f);
    return size_t{2};
  };
  EXPECT_EQ("-ERR syntax error\r\n", Run({"SHUTDOWN", "SAVE", "NOSAVE"}));
  EXPECT_EQ("-ERR No shutdown in progress.\r\n", Run({"SHUTDOWN", "ABORT"}));
  EXPECT_EQ(0, shutdowns);
  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "v", "FENCE", "1"}));
  std::string v;
  ASSERT_TRUE(db_->GetProperty("rocksdb.num-files-at-level0", &v));
  EXPECT_EQ("0", v);
  EXPECT_EQ("", Run({"SHUTDOWN", "SAVE", "NOW"}));  // no reply, as Redis
  EXPECT_EQ(1, shutdowns);
  EXPECT_TRUE(client_.close_after_reply);
  client_.close_after_reply = false;
  ASSERT_TRUE(db_->GetProperty("rocksdb.num-files-at-level0", &v));
  EXPECT_EQ("1", v);  // SAVE flushed the memtable

  client_.id = 9;
  EXPECT_EQ(":2\r\n", Run({"CLIENT", "KILL", "ID", "5", "USER", "op", "ADDR",
                           "1.2.3.4:5", "SKIPME", "no"}));
  ASSERT_EQ(1u, kills.size());
  EXPECT_EQ(5u, kills[0].id.value());
  EXPECT_EQ("op", kills[0].user.value());
  EXPECT_EQ("1.2.3.4:5", kills[0].addr.value());
  EXPECT_FALSE(kills[0].skipme);
  EXPECT_EQ(9u, kills[0].self);
  EXPECT_EQ("+OK\r\n", Run({"CLIENT", "KILL", "1.2.3.4:5"}));  // old form
  EXPECT_TRUE(kills[1].addr.has_value());
  EXPECT_FALSE(kills[1].id.has_value());
  EXPECT_EQ(":0\r\n", Run({"CLIENT", "KILL", "TYPE", "master"}));
  EXPECT_EQ(2u, kills.size());  // nothing asked for
  EXPECT_EQ("-ERR client-id should be greater than 0\r\n",
            Run({"CLIENT", "KILL", "ID", "0"}));
  EXPECT_EQ("-ERR No such user 'nobody'\r\n",
            Run({"CLIENT", "KILL", "USER", "nobody"}));
  EXPECT_EQ("-ERR syntax error\r\n",
            Run({"CLIENT", "KILL", "ID", "1", "USER"}));
  EXPECT_EQ("-ERR syntax error\r\n",
            Run({"CLIENT", "KILL", "SKIPME", "maybe"}));

  // The slow log is filled by the connections (tests/redis_tools_test.sh);
  // here: its replies.
  EXPECT_EQ(":0\r\n", Run({"SLOWLOG", "LEN"}));
  EXPECT_EQ("*0\r\n", Run({"SLOWLOG", "GET"}));
  EXPECT_EQ("+OK\r\n", Run({"SLOWLOG", "RESET"}));
  EXPECT_EQ(0u, Run({"SLOWLOG", "HELP"}).rfind("*12\r\n", 0));
  EXPECT_EQ(0u, Run({"SLOWLOG", "GET", "-2"}).rfind("-ERR count should be", 0));
  EXPECT_EQ(0u, Run({"SLOWLOG", "NOPE"}).rfind("-ERR unknown subcommand", 0));
  EXPECT_EQ(
      "*4\r\n$23\r\nslowlog-log-slower-than\r\n$5\r\n10000\r\n"
      "$15\r\nslowlog-max-len\r\n$3\r\n128\r\n",
      Run({"CONFIG", "GET", "slowlog*"}));
}

// INFO's sections as Redis 7 names them; commandstats and latencystats only
// when asked for (or "all").
TEST_F(CommandTest, InfoSections) {
  auto sections = [this](std::vector<std::string> words) {
    std::string out = Run(std::move(words)), names;
    for (size_t at = out.find("# "); at != std::string::npos;
         at = out.find("# ", at + 1)) {
      names += out.substr(at + 2, out.find('\r', at) - at - 2) + " ";
    }
    return names;
  };
  EXPECT_EQ(
      "Server Clients Memory Stats Persistence Replication Fencing "
      "Errorstats Keyspace ",
      sections({"INFO"}));
  EXPECT_EQ("Memory Keyspace ", sections({"INFO", "memory", "keyspace"}));
  EXPECT_EQ("Commandstats Latencystats ",
            sections({"INFO", "commandstats", "latencystats"}));
  EXPECT_NE(std::string::npos, sections({"INFO", "all"}).find("Latencystats"));
  const std::string memory = Run({"INFO", "memory"});
  for (const char* field :
       {"used_memory:", "used_memory_human:", "used_memory_rss:",
        "used_memory_rss_human:", "used_memory_peak:",
        "rocksdb_memtables_bytes:", "rocksdb_block_cache_bytes:",
        "rocksdb_table_readers_bytes:", "fence_cache_bytes:",
        "value_cache_bytes:", "value_cache_capacity:"}) {
    EXPECT_NE(std::string::npos, memory.find(std::string("\r\n") + field))
        << field;
  }
  EXPECT_NE(
      std::string::npos,
      Run({"INFO", "replication"}).find("role:master\r\nconnected_slaves:0"));
  // No keys: no db0 line, as Redis.
  EXPECT_EQ(std::string::npos, Run({"INFO", "keyspace"}).find("db0:"));
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ("+OK\r\n",
              Run({"SET", "k" + std::to_string(i), "1", "FENCE", "1"}));
  }
  // RocksDB's estimate: the engine's own tombstone (the I/O-error
  // recovery's sentinel, written at open) counts -1.
  const std::string keyspace = Run({"INFO", "keyspace"});
  const size_t at = keyspace.find("db0:keys=");
  ASSERT_NE(std::string::npos, at) << keyspace;
  const int keys = std::stoi(keyspace.substr(at + 9));
  EXPECT_GE(keys, 18);
  EXPECT_LE(keys, 20);
  EXPECT_NE(std::string::npos, keyspace.find(",expires=0,avg_ttl=0\r\n"));
  // Dispatch records nothing (the connections do); the counters show here.
  state_->command_stats->Record(LookupCommand("set") - AllCommands().data(), 30,
                                false);
  EXPECT_NE(std::string::npos,
            Run({"INFO", "commandstats"})
                .find("cmdstat_set:calls=1,usec=30,usec_per_call=30.00,"
                      "rejected_calls=0,failed_calls=0\r\n"));
  EXPECT_NE(std::string::npos,
            Run({"INFO", "latencystats"})
                .find("latency_percentiles_usec_set:p50=31.000,p99=31.000,"
                      "p99.9=31.000\r\n"))
      << "30 us is in the bucket [30, 32)";
  Open("key", false, "", "skiplist", "user op on >op ~* +@all\n");
  EXPECT_EQ("+OK\r\n", Run({"AUTH", "op", "op"}));
  state_->command_stats->Record(0, 30, false);
  EXPECT_EQ("+OK\r\n", Run({"CONFIG", "RESETSTAT"}));
  EXPECT_EQ(0u, state_->command_stats->Get(0, false).calls);
}

TEST_F(CommandTest, CommandList) {
  const std::string all = Run({"COMMAND", "LIST"});
  EXPECT_EQ(0u,
            all.rfind("*" + std::to_string(AllCommands().size()) + "\r\n", 0));
  EXPECT_NE(std::string::npos, all.find("$13\r\nfence.advance\r\n"));
  EXPECT_EQ(
      "*4\r\n$13\r\nfence.advance\r\n$12\r\nfence.domain\r\n$11\r\nfence."
      "floor\r\n$9\r\nfence.get\r\n",
      Run({"COMMAND", "LIST", "FILTERBY", "PATTERN", "FENCE.*"}));
  EXPECT_EQ(Run({"COMMAND", "LIST", "FILTERBY", "ACLCAT", "lease"}),
            Run({"COMMAND", "LIST", "FILTERBY", "ACLCAT", "@lease"}));
  EXPECT_EQ(0u, Run({"COMMAND", "LIST", "FILTERBY", "ACLCAT", "lease"})
                    .rfind("*5\r\n$13\r\nlease.acquire\r\n", 0));
  EXPECT_EQ("*0\r\n", Run({"COMMAND", "LIST", "FILTERBY", "MODULE", "x"}));
  EXPECT_EQ("-ERR syntax error\r\n", Run({"COMMAND", "LIST", "FILTERBY"}));
}

// What a client controls through its arguments is bounded: the MULTI queue
// counts what it holds (each argument's string, not only its bytes) and
// checks PING's arguments when it is queued; COMMAND INFO's reply is
// checked against max_reply_bytes; client names are at most 1 KiB; HELLO
// checks its options before AUTH; SCAN reads "00" as cursor 0.
TEST_F(CommandTest, ArgumentsCannotGrowWhatTheServerHolds) {
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("-ERR wrong number of arguments for 'ping' command\r\n",
            Run({"PING", "a", "b"}));
  EXPECT_EQ("-EXECABORT Transaction discarded because of previous errors.\r\n",
            Run({"EXEC"}));
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+QUEUED\r\n", Run({"PING", "hi"}));
  EXPECT_EQ("*1\r\n$2\r\nhi\r\n", Run({"EXEC"}));
  // 1000 empty keys count 32 bytes each, and the queue's records too.
  options_.max_multi_bytes = 40000;
  std::vector<std::string> del(1001, "");
  del[0] = "DEL";
  del.push_back("FENCE");
  del.push_back("1");
  EXPECT_EQ("+OK\r\n", Run({"MULTI"}));
  EXPECT_EQ("+QUEUED\r\n", Run(del));
  EXPECT_EQ(0, Run(del).rfind("-ERR MULTI queue limit reached", 0));
  EXPECT_EQ(0, Run({"EXEC"}).rfind("-EXECABORT", 0));
  EXPECT_TRUE(client_.queued.empty());

  options_.max_reply_bytes = 4096;
  std::vector<std::string> info(102, "mset");
  info[0] = "COMMAND";
  info[1] = "INFO";
  EXPECT_EQ(0, Run(info).rfind("-ERR reply of more than 4096 bytes", 0));
  EXPECT_EQ(0,
            Run({"COMMAND", "INFO", "get", "nope"}).rfind("*2\r\n*7\r\n", 0));

  EXPECT_EQ("-ERR Client names are limited to 1024 bytes\r\n",
            Run({"CLIENT", "SETNAME", std::string(1025, 'n')}));
  EXPECT_EQ("+OK\r\n", Run({"CLIENT", "SETNAME", std::string(1024, 'n')}));
  EXPECT_EQ("-ERR Client names are limited to 1024 bytes\r\n",
            Run({"HELLO", "2", "SETNAME", std::string(1025, 'n')}));
  EXPECT_EQ(1024u, client_.name.size());

  EXPECT_EQ("+OK\r\n", Run({"SET", "k", "v", "FENCE", "1"}));
  EXPECT_EQ("*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n", Run({"SCAN", "00"}));
  EXPECT_EQ("-ERR invalid cursor\r\n", Run({"SCAN", "-0"}));
  EXPECT_EQ("-ERR invalid cursor\r\n", Run({"SCAN", ""}));

  Open("key", false, "pw");
  EXPECT_EQ(0,
            Run({"HELLO", "2", "AUTH", "default", "pw", "SETNAME", "bad name"})
                .rfind("-ERR Client names cannot contain spaces", 0));
  EXPECT_FALSE(client_.authed);
  EXPECT_EQ(0, Run({"HELLO", "2", "AUTH", "default", "pw", "BOGUS"})
                   .rfind("-ERR syntax error in HELLO option", 0));
  EXPECT_FALSE(client_.authed);
  EXPECT_EQ(0, Run({"HELLO", "2", "AUTH", "default", "pw", "SETNAME", "ok"})
                   .rfind("*14\r\n", 0));
  EXPECT_TRUE(client_.authed);
  EXPECT_EQ("ok", client_.name);
}

}  // namespace server
}  // namespace fencedkv
