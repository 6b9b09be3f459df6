// Copyright (c) fencedkv authors.
//
// fencedkv-server as a real process on 127.0.0.1 (a free port), talked to
// over real sockets in RESP: pipelining, many clients, protocol abuse,
// limits, graceful shutdown, crash durability with --sync, and leases across
// kill -9.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_test_util.h"
#include "util/testutil.h"

#ifndef FENCEDKV_SERVER_BIN
#error "FENCEDKV_SERVER_BIN must name the fencedkv-server binary"
#endif

namespace fencedkv {
namespace {

// The server as a child process and a raw RESP client
// (tests/server_test_util.h).
class ServerProcess : public test::ServerProcess {
 public:
  ServerProcess() : test::ServerProcess(FENCEDKV_SERVER_BIN) {}
};
using Client = test::RespTestClient;

class ServerE2ETest : public testing::Test {
 protected:
  bool StartServer(std::vector<std::string> flags = {}) {
    flags.push_back("--db=" + dir_.Sub("data"));
    return server_.Start(dir_.path(), flags);
  }
  void PipelinedReadsAndWrites(const std::string& flag);
  test::TempDir dir_;
  ServerProcess server_;
};

TEST_F(ServerE2ETest, PipelinedCommandsAnswerInOrder) {
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  ASSERT_TRUE(c.connected());
  std::string batch;
  for (int i = 0; i < 1000; ++i) {
    batch += Client::Encode({"SET", "k" + std::to_string(i),
                             "v" + std::to_string(i), "FENCE", "5"});
  }
  batch += Client::Encode({"SET", "k1", "stale", "FENCE", "4"});
  batch += Client::Encode({"GET", "k999"});
  c.SendRaw(batch);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ("+OK", c.Read()) << i;
  EXPECT_EQ("-STALE token 4 < max 5 (domain \"k1\")", c.Read());
  EXPECT_EQ("$v999", c.Read());
  EXPECT_EQ(0, server_.Stop());
}

// Pipelined GETs are answered together (one MultiGet) and writes are
// grouped: neither may reorder replies, and each read sees exactly the
// writes sent before it.
TEST_F(ServerE2ETest, PipelinedReadsAndWritesSeeTheirOrder) {
  // Writes on the loop or (--sync) on the database thread; one loop or two.
  for (const char* flag : {"--io_threads=1", "--sync", "--io_threads=2"}) {
    SCOPED_TRACE(flag);
    PipelinedReadsAndWrites(flag);
    if (HasFatalFailure()) return;
  }
}

void ServerE2ETest::PipelinedReadsAndWrites(const std::string& flag) {
  test::TempDir dir;
  ServerProcess server;
  ASSERT_TRUE(server.Start(dir.path(), {"--db=" + dir.Sub("data"), flag}));
  Client c(server.port());
  ASSERT_TRUE(c.connected());
  std::string batch;
  std::vector<std::string> want;
  for (int round = 1; round <= 40; ++round) {
    const std::string v = "r" + std::to_string(round);
    for (int i = 0; i < round % 5; ++i) {  // 0..4 GETs before the write
      batch += Client::Encode({"GET", "shared"});
      want.push_back(round == 1 ? "$nil" : "$r" + std::to_string(round - 1));
    }
    batch +=
        Client::Encode({"SET", "shared", v, "FENCE", std::to_string(round)});
    want.push_back("+OK");
    // Iterating commands run on the database thread when it has room: their
    // replies must still come in order, and see the write before them.
    batch += Client::Encode({"DBSIZE"});
    want.push_back(":1");
    for (int i = 0; i < 20; ++i) {  // more than one MultiGet's worth
      batch += Client::Encode({"GET", i % 2 ? "shared" : "absent"});
      want.push_back(i % 2 ? "$" + v : "$nil");
    }
    batch += Client::Encode({"SCAN", "0"});
    want.push_back("*[$0,*[$shared]]");
    batch += Client::Encode({"GET", "shared", "extra"});  // not a plain GET
    want.push_back("-ERR syntax error");
  }
  c.SendRaw(batch);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], c.Read()) << i;
  EXPECT_EQ(0, server.Stop());
}

TEST_F(ServerE2ETest, ManyConcurrentClients) {
  ASSERT_TRUE(StartServer());
  const int kClients = 16, kOps = 200;
  std::vector<std::thread> threads;
  threads.reserve(kClients);
  std::atomic<int> ok{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      Client c(server_.port());
      for (int i = 0; i < kOps; ++i) {
        if (c.Call({"SET", "c" + std::to_string(t) + ":" + std::to_string(i),
                    "v", "FENCE", "1"}) == "+OK") {
          ok++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(kClients * kOps, ok.load());
  Client c(server_.port());
  EXPECT_EQ(":" + std::to_string(kClients * kOps), c.Call({"DBSIZE"}));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, MalformedRequestClosesOnlyThatConnection) {
  ASSERT_TRUE(StartServer());
  Client good(server_.port());
  ASSERT_EQ("+OK", good.Call({"SET", "k", "v", "FENCE", "1"}));
  Client bad(server_.port());
  bad.SendRaw("*1\r\n$-5\r\n");
  EXPECT_EQ("-ERR Protocol error: invalid bulk length", bad.Read());
  EXPECT_EQ("EOF", bad.Read());
  Client bad2(server_.port());
  bad2.SendRaw("*2\r\n+PING\r\n");
  EXPECT_EQ("-ERR Protocol error: expected '$', got '+'", bad2.Read());
  EXPECT_EQ("EOF", bad2.Read());
  EXPECT_EQ("$v", good.Call({"GET", "k"}));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, OversizedRequestIsRefused) {
  ASSERT_TRUE(StartServer({"--max_request_bytes=4096"}));
  Client c(server_.port());
  ASSERT_EQ("+OK", c.Call({"SET", "k", std::string(3000, 'x'), "FENCE", "1"}));
  c.Send({"SET", "k", std::string(10000, 'y'), "FENCE", "2"});
  EXPECT_EQ(0u, c.Read().rfind("-ERR Protocol error: invalid bulk length", 0));
  EXPECT_EQ("EOF", c.Read());
  Client d(server_.port());
  EXPECT_EQ("$" + std::string(3000, 'x'), d.Call({"GET", "k"}));
  EXPECT_EQ("$1", d.Call({"FENCE.GET", "k"}));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, MaxClientsIsEnforced) {
  ASSERT_TRUE(StartServer({"--maxclients=2"}));
  Client a(server_.port()), b(server_.port());
  ASSERT_EQ("+PONG", a.Call({"PING"}));
  ASSERT_EQ("+PONG", b.Call({"PING"}));
  Client c(server_.port());
  EXPECT_EQ("-ERR max number of clients reached", c.Read());
  EXPECT_EQ("+PONG", a.Call({"PING"}));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, SigtermShutsDownCleanlyAndDataSurvives) {
  ASSERT_TRUE(StartServer());
  {
    Client c(server_.port());
    ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "9"}));
    ASSERT_EQ("$12", c.Call({"FENCE.ADVANCE", "k", "12"}));
  }
  EXPECT_EQ(0, server_.Stop());
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  EXPECT_EQ("$v", c.Call({"GET", "k"}));
  EXPECT_EQ("$12", c.Call({"FENCE.GET", "k"}));
  EXPECT_EQ(0u, c.Call({"SET", "k", "w", "FENCE", "11"}).rfind("-STALE", 0));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, SyncWritesSurviveKill9) {
  ASSERT_TRUE(StartServer({"--sync"}));
  {
    Client c(server_.port());
    for (int i = 0; i < 200; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "k" + std::to_string(i), "v" + std::to_string(i),
                        "FENCE", std::to_string(100 + i)}));
    }
  }
  server_.Kill9();
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ("$v" + std::to_string(i),
              c.Call({"GET", "k" + std::to_string(i)}));
    ASSERT_EQ("$" + std::to_string(100 + i),
              c.Call({"FENCE.GET", "k" + std::to_string(i)}));
  }
  EXPECT_EQ(0, server_.Stop());
}

// --wal_sync_interval_ms without --sync: a server that went quiet syncs
// its log within two intervals, without a write to carry the sync
// (INFO persistence says so; the engine's PowerLossIntervalTest cuts the
// power). Before, its last writes waited for the OS's write-back.
TEST_F(ServerE2ETest, AQuietServerSyncsItsLog) {
  ASSERT_TRUE(StartServer({"--wal_sync_interval_ms=50"}));
  Client c(server_.port());
  auto field = [&](const std::string& name) -> uint64_t {
    const std::string info = c.Call({"INFO", "persistence"});
    const size_t at = info.find(name + ":");
    return at == std::string::npos
               ? UINT64_MAX
               : std::stoull(info.substr(at + name.size() + 1));
  };
  EXPECT_EQ(50u, field("wal_interval_ms"));
  for (int round = 1; round <= 2; ++round) {
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ("+OK", c.Call({"SET", "k" + std::to_string(i), "v", "FENCE",
                               std::to_string(round)}));
    }
    const uint64_t written = field("wal_latest_sequence");
    ASSERT_NE(UINT64_MAX, written);
    uint64_t synced = 0;
    for (int i = 0;
         i < 200 && (synced = field("wal_synced_sequence")) < written; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GE(synced, written) << "round " << round;
  }
  EXPECT_GE(field("wal_idle_syncs"), 1u);
  EXPECT_EQ(0, server_.Stop());
}

// `rm *.log` in the data directory (RocksDB's write-ahead log files are
// NNNNNN.log) after a kill -9: RocksDB 7.8 opened the store without the
// deleted writes, and the server then accepted a token below a max it had
// acknowledged. The synced stamp makes the start fail, naming the lost
// sequences; --drop_wal_after_damage starts it with what is left.
TEST_F(ServerE2ETest, AServerWhoseLogFilesWereDeletedDoesNotStart) {
  ASSERT_TRUE(StartServer({"--wal_sync_interval_ms=20"}));
  {
    Client c(server_.port());
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ("+OK", c.Call({"SET", "k" + std::to_string(i), "v", "FENCE",
                               std::to_string(100 + i)}));
    }
    auto field = [&](const std::string& name) -> uint64_t {
      const std::string info = c.Call({"INFO", "persistence"});
      const size_t at = info.find(name + ":");
      return at == std::string::npos
                 ? 0
                 : std::stoull(info.substr(at + name.size() + 1));
    };
    const uint64_t written = field("wal_latest_sequence");
    ASSERT_GT(written, 0u);
    uint64_t stamped = 0;
    for (int i = 0;
         i < 300 && (stamped = field("wal_stamped_sequence")) < written; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GE(stamped, written);
  }
  server_.Kill9();
  int deleted = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Sub("data"))) {
    if (e.path().extension() == ".log") {
      std::filesystem::remove(e.path());
      ++deleted;
    }
  }
  ASSERT_GT(deleted, 0);
  ASSERT_FALSE(StartServer({"--wal_sync_interval_ms=20"}));
  EXPECT_NE(std::string::npos, server_.Log().find("had been synced"))
      << server_.Log();
  // The operator's word: it starts with what is left (the maxima went with
  // the writes), and the next start needs no word.
  ASSERT_TRUE(
      StartServer({"--wal_sync_interval_ms=20", "--drop_wal_after_damage"}));
  EXPECT_EQ(0, server_.Stop());
  ASSERT_TRUE(StartServer({"--wal_sync_interval_ms=20"}));
  Client c(server_.port());
  EXPECT_EQ("$nil", c.Call({"GET", "k5"}));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, LeaseTokensStayIncreasingAcrossKill9) {
  ASSERT_TRUE(StartServer());
  std::string first;
  {
    Client c(server_.port());
    first = c.Call({"LEASE.ACQUIRE", "a", "holder-1", "60000"});
    ASSERT_EQ(0u, first.rfind("*[$1,:", 0)) << first;
  }
  server_.Kill9();
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  // The held lease is honoured: same holder, same token; others are refused.
  EXPECT_EQ(
      0u,
      c.Call({"LEASE.ACQUIRE", "a", "holder-2", "60000"}).rfind("-LEASED", 0));
  const std::string info = c.Call({"LEASE.INFO", "a"});
  EXPECT_EQ(0u, info.rfind("*[$holder,$holder-1,$token,$1,", 0)) << info;
  // A new grant gets a strictly greater token.
  const std::string second =
      c.Call({"LEASE.ACQUIRE", "b", "holder-3", "60000"});
  EXPECT_EQ(0u, second.rfind("*[$2,", 0)) << second;
  EXPECT_EQ(0, server_.Stop());
}

// --max_token_skew: with the built-in lease service, a token more than S
// above the last token it granted is refused, on every write path (grouped
// SET, SET with options, MSET, DEL, MULTI, FENCE.ADVANCE), and the ceiling
// is the persisted counter again after kill -9.
TEST_F(ServerE2ETest, TokenSkewGuard) {
  ASSERT_TRUE(StartServer({"--max_token_skew=10"}));
  {
    Client c(server_.port());
    EXPECT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "10"}));
    // The same line from the grouped path and from SET with options.
    const std::string refused =
        "-TOKENSKEW token 11 is more than 10 above the highest token issued "
        "(0): a holder can only have a token its lease service issued";
    EXPECT_EQ(refused, c.Call({"SET", "k", "v", "FENCE", "11"}));
    EXPECT_EQ(refused, c.Call({"SET", "k", "v", "XX", "FENCE", "11"}));
    EXPECT_EQ(0u, c.Call({"FENCE.ADVANCE", "k", "18446744073709551615"})
                      .rfind("-TOKENSKEW", 0));
    EXPECT_EQ("$10", c.Call({"FENCE.GET", "k"}));  // nothing changed
    EXPECT_EQ(0u,
              c.Call({"LEASE.ACQUIRE", "a", "h", "60000"}).rfind("*[$1,", 0));
    EXPECT_EQ("+OK", c.Call({"MSET", "a", "1", "b", "2", "FENCE", "11"}));
    EXPECT_EQ(0u,
              c.Call({"MSET", "a", "1", "FENCE", "12"}).rfind("-TOKENSKEW", 0));
    EXPECT_EQ(
        0u,
        c.Call({"SET", "a", "1", "GET", "FENCE", "12"}).rfind("-TOKENSKEW", 0));
    EXPECT_EQ(0u, c.Call({"DEL", "a", "FENCE", "12"}).rfind("-TOKENSKEW", 0));
    EXPECT_EQ("+OK", c.Call({"MULTI"}));
    EXPECT_EQ("+QUEUED", c.Call({"SET", "x", "1", "FENCE", "12"}));
    EXPECT_EQ(0u, c.Call({"EXEC"}).rfind("-TOKENSKEW", 0));
    EXPECT_EQ("$nil", c.Call({"GET", "x"}));
  }
  server_.Kill9();
  ASSERT_TRUE(StartServer({"--max_token_skew=10"}));
  Client c(server_.port());
  EXPECT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "11"}));
  EXPECT_EQ(0u,
            c.Call({"SET", "k", "v", "FENCE", "12"}).rfind("-TOKENSKEW", 0));
  EXPECT_EQ(0, server_.Stop());
  // Off by default.
  ASSERT_TRUE(StartServer());
  Client d(server_.port());
  EXPECT_EQ("+OK", d.Call({"SET", "k", "v", "FENCE", "18446744073709551615"}));
  EXPECT_EQ(0, server_.Stop());
}

// The fast paths (pipelined GETs read together, SET/MSET grouped) check
// the same permissions as every other command.
TEST_F(ServerE2ETest, AclHoldsOnTheFastPaths) {
  const std::string file = dir_.Sub("users.acl");
  std::ofstream(file) << "user reader on >r ~* +@read +@connection\n"
                         "user writer on >w ~* +set +mset +auth\n";
  ASSERT_TRUE(StartServer({"--aclfile=" + file}));
  Client c(server_.port());
  ASSERT_EQ("+OK", c.Call({"AUTH", "reader", "r"}));
  std::string batch;
  for (int i = 0; i < 8; ++i) {
    batch +=
        Client::Encode({"SET", "k" + std::to_string(i), "v", "FENCE", "1"});
  }
  batch += Client::Encode({"MSET", "a", "1", "b", "2", "FENCE", "1"});
  c.SendRaw(batch);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ("-NOPERM this user has no permissions to run the 'set' command",
              c.Read())
        << i;
  }
  EXPECT_EQ("-NOPERM this user has no permissions to run the 'mset' command",
            c.Read());
  EXPECT_EQ(":0", c.Call({"EXISTS", "k0", "a"}));
  Client w(server_.port());
  ASSERT_EQ("+OK", w.Call({"AUTH", "writer", "w"}));
  ASSERT_EQ("+OK", w.Call({"SET", "k", "v", "FENCE", "1"}));
  batch.clear();
  for (int i = 0; i < 20; ++i) batch += Client::Encode({"GET", "k"});
  w.SendRaw(batch);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ("-NOPERM this user has no permissions to run the 'get' command",
              w.Read())
        << i;
  }
  EXPECT_EQ("-NOPERM this user has no permissions to run the 'scan' command",
            w.Call({"SCAN", "0"}));
  EXPECT_EQ(0, server_.Stop());
}

// Expired leases are reclaimed (INFO's count drops without anyone asking),
// and the number on record is bounded: past --max_leases a new name takes
// an expired lease's place, or gets -BUSY if all are held.
TEST_F(ServerE2ETest, LeasesAreReclaimedAndBounded) {
  ASSERT_TRUE(StartServer({"--max_leases=20"}));
  Client c(server_.port());
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(0u,
              c.Call({"LEASE.ACQUIRE", "short" + std::to_string(i), "h", "1"})
                  .rfind("*[", 0));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // At the limit, but expired: a new name reclaims one's place.
  ASSERT_EQ(0u,
            c.Call({"LEASE.ACQUIRE", "long0", "h", "60000"}).rfind("*[", 0));
  std::string held;
  for (int i = 0; i < 100; ++i) {  // the reclaimer runs every second
    const std::string info = c.Call({"INFO", "fencing"});
    held = info.substr(info.find("leases_held:"));
    held = held.substr(0, held.find('\r'));
    if (held == "leases_held:1") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ("leases_held:1", held);
  for (int i = 1; i < 20; ++i) {
    ASSERT_EQ(
        0u, c.Call({"LEASE.ACQUIRE", "long" + std::to_string(i), "h", "60000"})
                .rfind("*[", 0));
  }
  EXPECT_EQ(
      "-BUSY too many leases: 20 held (max_leases); release some or wait "
      "for one to expire",
      c.Call({"LEASE.ACQUIRE", "one-more", "h", "60000"}));
  // A held name is renewed, not counted twice.
  EXPECT_EQ(0u,
            c.Call({"LEASE.ACQUIRE", "long0", "h", "60000"}).rfind("*[", 0));
  EXPECT_EQ(0, server_.Stop());
}

// The server's resident memory, in KiB.
long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// SCAN cursors are bounded (count, bytes, per connection), belong to the
// connection that got them, and go with it. 10,000 SCAN 0 MATCH nomatch
// COUNT 1 over 60 KiB keys once held 630 MB for good.
TEST_F(ServerE2ETest, ScanCursorsAreBoundedAndPrivate) {
  // Cheap new iterators; no heap touched at start (its growth is measured).
  ASSERT_TRUE(StartServer({"--memtable=skiplist", "--malloc_prefault_mb=0"}));
  Client a(server_.port());
  const std::string big(60 << 10, 'k');
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ("+OK",
              a.Call({"SET", big + std::to_string(i), "v", "FENCE", "1"}));
  }
  const long before = RssKiB(server_.pid());
  std::string cursor;
  for (int round = 0; round < 10; ++round) {
    std::string batch;
    for (int i = 0; i < 1000; ++i) {
      batch += Client::Encode({"SCAN", "0", "MATCH", "nomatch", "COUNT", "1"});
    }
    a.SendRaw(batch);
    for (int i = 0; i < 1000; ++i) {
      const std::string r = a.Read();
      ASSERT_EQ("*[$", r.substr(0, 3));
      cursor = r.substr(3, r.find(',') - 3);
    }
  }
  const long grown_mib = (RssKiB(server_.pid()) - before) / 1024;
  EXPECT_LT(grown_mib, 100) << "RSS grew by " << grown_mib << " MiB";
  // Another connection cannot resume it; its owner can.
  Client b(server_.port());
  EXPECT_EQ("-ERR invalid cursor", b.Call({"SCAN", cursor}).substr(0, 40));
  EXPECT_EQ("*[$", a.Call({"SCAN", cursor}).substr(0, 3));
  std::string info = b.Call({"INFO", "stats"});
  EXPECT_NE(std::string::npos, info.find("scan_cursors:16\r\n")) << info;
  a.Call({"QUIT"});
  for (int i = 0; i < 100; ++i) {  // the connection's cursors go with it
    info = b.Call({"INFO", "stats"});
    if (info.find("scan_cursors:0\r\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(std::string::npos, info.find("scan_cursors:0\r\n")) << info;
  EXPECT_NE(std::string::npos, info.find("scan_cursor_bytes:0\r\n")) << info;
  EXPECT_EQ(0, server_.Stop());
}

// A parked SCAN iterator is released at the next sweep (every 5 s) once a
// flush moved the database on from what it reads, not after its 30 s: it
// kept the flushed memtables alive. The cursor goes on from its key and
// every key is returned.
TEST_F(ServerE2ETest, AParkedScanIteratorLetsGoOfFlushedMemtables) {
  ASSERT_TRUE(StartServer({"--write_buffer_size=65536"}));
  Client c(server_.port());
  char key[16];
  for (int i = 0; i < 100; ++i) {
    std::snprintf(key, sizeof(key), "k:%03d", i);
    ASSERT_EQ("+OK", c.Call({"SET", key, "v", "FENCE", "1"}));
  }
  std::set<std::string> seen;
  auto take = [&seen](const std::string& reply) {
    // "*[$<cursor>,*[$k:001,$k:002,...]]"
    EXPECT_EQ("*[$", reply.substr(0, 3)) << reply;
    size_t at = reply.find(",*[");
    while ((at = reply.find("$k:", at)) != std::string::npos) {
      seen.insert(reply.substr(at + 1, 5));
      at += 6;
    }
    return reply.substr(3, reply.find(',') - 3);
  };
  std::string cursor =
      take(c.Call({"SCAN", "0", "MATCH", "k:*", "COUNT", "10"}));
  ASSERT_NE("0", cursor);
  auto parked = [&c] {
    const std::string info = c.Call({"INFO", "stats"});
    const size_t at = info.find("scan_parked_iterators:");
    return at == std::string::npos ? std::string("none")
                                   : info.substr(at + 22, 1);
  };
  EXPECT_EQ("1", parked());
  // Over a 64 KiB memtable: it is switched out and flushed.
  const std::string value(1000, 'x');
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ("+OK",
              c.Call({"SET", "z:" + std::to_string(i), value, "FENCE", "1"}));
  }
  std::string now = parked();
  for (int i = 0; i < 90 && now != "0"; ++i) {  // a sweep, every 5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = parked();
  }
  EXPECT_EQ("0", now) << "the parked iterator was kept after the flush";
  for (int i = 0; i < 100 && cursor != "0"; ++i) {
    const std::string r =
        c.Call({"SCAN", cursor, "MATCH", "k:*", "COUNT", "1000"});
    ASSERT_EQ("*[$", r.substr(0, 3)) << r;
    cursor = take(r);
  }
  EXPECT_EQ("0", cursor);
  EXPECT_EQ(100u, seen.size());
  EXPECT_EQ(0, server_.Stop());
}

// KEYS, SCAN and DBSIZE run on the scan thread, never on an io loop: while
// four clients loop over KEYS on 100k keys, another client's PING is not
// held up by them (it used to wait for whole KEYS calls).
// Parked SCAN iterators pin the data blocks they stand on: with large
// values, one block per sorted run of that value's size, charged to the
// block cache past its capacity. Before, 16 SCAN 0 COUNT 1 over three
// 60 MiB versions of a key held 2-3 GB (a client's 16 cursors, every 30 s).
// An iterator is now parked only while the pinned blocks stay within
// 64 MiB (INFO memory rocksdb_block_cache_pinned_bytes), and a cursor
// without one still goes on from its key.
TEST_F(ServerE2ETest, ParkedScanIteratorsKeepBoundedBlocks) {
  // A block cache too small for the values: the iterators copy them.
  ASSERT_TRUE(
      StartServer({"--write_buffer_size=65536", "--block_cache_size=1048576"}));
  Client c(server_.port());
  for (const char* k : {"a", "b", "c"}) {
    ASSERT_EQ("+OK", c.Call({"SET", k, "v", "FENCE", "1"}));
  }
  // Three versions of a 12 MiB value, each flushed into a table file of
  // its own (the memtable is 64 KiB).
  const std::string big(12 << 20, 'x');
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ("+OK", c.Call({"SET", "m", big, "FENCE", "1"}));
  }
  auto field = [&c](const std::string& section, const std::string& name) {
    const std::string info = c.Call({"INFO", section});
    const size_t at = info.find(name + ":");
    if (at == std::string::npos) return int64_t{-2};
    return static_cast<int64_t>(
        std::strtoll(info.c_str() + at + name.size() + 1, nullptr, 10));
  };
  std::vector<std::unique_ptr<Client>> scanners;
  std::vector<std::string> cursors;
  int64_t most = 0;
  for (int i = 0; i < 16; ++i) {
    scanners.push_back(std::make_unique<Client>(server_.port()));
    const std::string r = scanners.back()->Call({"SCAN", "0", "COUNT", "1"});
    ASSERT_EQ("*[$", r.substr(0, 3)) << r;
    cursors.push_back(r.substr(3, r.find(',') - 3));
    ASSERT_NE("0", cursors.back());
    most = std::max(most, field("memory", "rocksdb_block_cache_pinned_bytes"));
  }
  const int64_t parked = field("stats", "scan_parked_iterators");
  EXPECT_LE(most, int64_t{64 + 2 * 12} << 20)
      << "blocks pinned, " << parked << " iterators parked";
  EXPECT_GE(parked, 1);
  EXPECT_LT(parked, 16) << "most " << most;
  // Every cursor, parked or not, goes on to the end: b, c and m.
  for (int i = 0; i < 16; ++i) {
    const std::string r =
        scanners[i]->Call({"SCAN", cursors[i], "COUNT", "100"});
    EXPECT_EQ("*[$0,*[$b,$c,$m]]", r.substr(0, 17)) << r.substr(0, 80);
  }
  EXPECT_EQ(0, server_.Stop());
  // Without a block cache RocksDB charges no pins: none can be counted, so
  // no iterator is parked (before, all 16 were, holding 330 MB).
  ASSERT_TRUE(
      StartServer({"--write_buffer_size=65536", "--block_cache_size=0"}));
  std::vector<std::unique_ptr<Client>> uncounted;
  for (int i = 0; i < 4; ++i) {
    uncounted.push_back(std::make_unique<Client>(server_.port()));
    const std::string r = uncounted.back()->Call({"SCAN", "0", "COUNT", "1"});
    ASSERT_EQ("*[$", r.substr(0, 3)) << r;
  }
  const std::string stats = uncounted[0]->Call({"INFO", "stats"});
  EXPECT_NE(std::string::npos, stats.find("scan_parked_iterators:0\r\n"))
      << stats;
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, KeysDoNotStallOtherClients) {
  ASSERT_TRUE(StartServer({"--io_threads=1"}));
  {
    Client c(server_.port());
    std::string batch;
    for (int b = 0; b < 100; ++b) {
      std::vector<std::string> words = {"MSET"};
      for (int i = 0; i < 1000; ++i) {
        words.push_back("key:" + std::to_string(b * 1000 + i));
        words.push_back("v");
      }
      words.push_back("FENCE");
      words.push_back("1");
      batch += Client::Encode(words);
    }
    c.SendRaw(batch);
    for (int b = 0; b < 100; ++b) ASSERT_EQ("+OK", c.Read());
  }
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  Client probe(server_.port());
  auto t0 = Clock::now();
  ASSERT_EQ("*[]", probe.Call({"KEYS", "nomatch*"}));
  const auto keys_ms = ms(Clock::now() - t0);
  std::atomic<bool> done{false};
  std::vector<std::thread> loops;
  loops.reserve(4);
  for (int i = 0; i < 4; ++i) {
    loops.emplace_back([&] {
      Client c(server_.port());
      while (!done) c.Call({"KEYS", "nomatch*"});
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  long worst = 0;
  for (auto end = Clock::now() + std::chrono::seconds(2); Clock::now() < end;) {
    t0 = Clock::now();
    ASSERT_EQ("+PONG", probe.Call({"PING"}));
    worst = std::max<long>(worst, ms(Clock::now() - t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  done = true;
  for (auto& t : loops) t.join();
  std::printf(
      "one KEYS over 100k keys: %ld ms; worst PING beside 4 KEYS loops: %ld "
      "ms\n",
      static_cast<long>(keys_ms), worst);
  // On the loop, KEYS stalled PINGs for 0.6-2.9 s; beside it, a few ms
  // (once 59 ms while the rest of the suite ran beside this test).
  EXPECT_LT(worst, std::max<long>(100, keys_ms / 2));
  EXPECT_EQ(0, server_.Stop());
}

// A pattern whose match would cost O(pattern x key) is refused, fast: one
// KEYS with a 16 KB pattern on a 64 KiB key took 3 s.
TEST_F(ServerE2ETest, CostlyPatternsAreRefused) {
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  ASSERT_EQ("+OK",
            c.Call({"SET", std::string(64 << 10, 'a'), "v", "FENCE", "1"}));
  const std::string pattern = "*" + std::string(16 << 10, 'a') + "b*";
  const std::string refused =
      "-ERR pattern too complex: matching it against one key took more than "
      "32 steps per byte (a long literal between two '*'?)";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(refused, c.Call({"KEYS", pattern}));
  EXPECT_EQ(refused, c.Call({"SCAN", "0", "MATCH", pattern}));
  // (The old matcher took 4.4 s per call; the bound leaves room for
  // sanitizer builds.)
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ("*[]", c.Call({"KEYS", "*" + std::string(16 << 10, 'a') + "b"}));
  EXPECT_EQ(65536u + 4, c.Call({"KEYS", "*a"}).size());  // "*[$" key "]"
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, RequirePass) {
  ASSERT_TRUE(StartServer({"--requirepass=s3cret"}));
  Client c(server_.port());
  EXPECT_EQ("-NOAUTH Authentication required.", c.Call({"GET", "k"}));
  EXPECT_EQ(0u, c.Call({"AUTH", "wrong"}).rfind("-WRONGPASS", 0));
  EXPECT_EQ("+OK", c.Call({"AUTH", "s3cret"}));
  EXPECT_EQ("$nil", c.Call({"GET", "k"}));
  EXPECT_EQ(0, server_.Stop());
}

// The password need not be on the command line (where `ps` shows it): from
// a file, or from the environment. /proc/PID/cmdline must not hold it.
TEST_F(ServerE2ETest, RequirePassFromFileOrEnvironment) {
  const std::string file = dir_.Sub("pass");
  std::ofstream(file) << "from-file\n";
  ASSERT_TRUE(StartServer({"--requirepass_file=" + file}));
  {
    std::ifstream in("/proc/" + std::to_string(server_.pid()) + "/cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    EXPECT_EQ(std::string::npos, cmdline.find("from-file")) << cmdline;
    Client c(server_.port());
    EXPECT_EQ("-NOAUTH Authentication required.", c.Call({"GET", "k"}));
    EXPECT_EQ(0u, c.Call({"AUTH", "from-file\n"}).rfind("-WRONGPASS", 0));
    EXPECT_EQ("+OK", c.Call({"AUTH", "from-file"}));  // without the newline
  }
  EXPECT_EQ(0, server_.Stop());
  setenv("FENCEDKV_REQUIREPASS", "from-env", 1);
  const bool started = StartServer();
  unsetenv("FENCEDKV_REQUIREPASS");
  ASSERT_TRUE(started);
  {
    Client c(server_.port());
    EXPECT_EQ("-NOAUTH Authentication required.", c.Call({"GET", "k"}));
    EXPECT_EQ("+OK", c.Call({"AUTH", "from-env"}));
  }
  EXPECT_EQ(0, server_.Stop());
  // Two sources at once are refused: which one would hold?
  EXPECT_FALSE(StartServer({"--requirepass=a", "--requirepass_file=" + file}));
}

TEST_F(ServerE2ETest, PrometheusMetrics) {
  // A free port for the exporter (released just before the server takes it).
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  socklen_t len = sizeof(addr);
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  const int metrics_port = ntohs(addr.sin_port);
  close(probe);
  ASSERT_TRUE(StartServer({"--metrics_port=" + std::to_string(metrics_port)}));
  Client c(server_.port());
  ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "5"}));
  ASSERT_EQ(0u, c.Call({"SET", "k", "v", "FENCE", "4"}).rfind("-STALE", 0));
  Client http(metrics_port);
  http.SendRaw("GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
  const std::string body = http.ReadAll();
  EXPECT_NE(std::string::npos, body.find("fencedkv_writes_rejected_total 1"))
      << body;
  EXPECT_NE(std::string::npos, body.find("fencedkv_writes_accepted_total 1"));
  // Per command (the SETs went through the grouped path, the refused one
  // too), errors by code, refused writes by reason.
  ASSERT_EQ(0u, c.Call({"SET", "k", "v"}).rfind("-NOFENCE", 0));
  ASSERT_EQ("$v", c.Call({"GET", "k"}));
  Client http2(metrics_port);
  http2.SendRaw("GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
  const std::string m = http2.ReadAll();
  for (const char* line : {
           "fencedkv_command_calls_total{cmd=\"set\"} 3\n",
           "fencedkv_command_failed_calls_total{cmd=\"set\"} 2\n",
           "fencedkv_command_calls_total{cmd=\"get\"} 1\n",
           "fencedkv_command_duration_seconds_count{cmd=\"set\"} 3\n",
           // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): one line
           "fencedkv_command_duration_seconds_bucket{cmd=\"set\",le=\"+Inf\"} "
           "3\n",
           "fencedkv_errors_total{code=\"STALE\"} 1\n",
           "fencedkv_rejected_writes_total{reason=\"stale\"} 1\n",
           "fencedkv_rejected_writes_total{reason=\"nofence\"} 1\n",
           "fencedkv_rejected_writes_total{reason=\"tokenskew\"} 0\n",
           "fencedkv_rocksdb_write_stopped 0\n",
           "fencedkv_rocksdb_write_stalls_total 0\n",
           "fencedkv_rocksdb_pending_compaction_bytes 0\n",
           "fencedkv_rocksdb_block_cache_capacity_bytes 268435456\n",
       }) {
    EXPECT_NE(std::string::npos, m.find(line)) << line << "\n" << m;
  }
  // Figures that depend on the machine: present, and sane.
  auto value = [&m](const std::string& name) {
    const size_t at = m.find("\n" + name + " ");
    return at == std::string::npos
               ? -1.0
               : std::strtod(m.c_str() + at + name.size() + 2, nullptr);
  };
  EXPECT_GT(value("fencedkv_rocksdb_memtable_bytes"), 0);
  EXPECT_GE(value("fencedkv_rocksdb_block_cache_usage_bytes"), 0);
  EXPECT_GE(value("fencedkv_rocksdb_block_cache_hits_total"), 0);
  EXPECT_GE(value("fencedkv_rocksdb_block_cache_misses_total"), 0);
  EXPECT_GT(value("fencedkv_memory_used_bytes"), 0);
  EXPECT_GT(value("fencedkv_memory_rss_bytes"), 0);
  EXPECT_EQ(0, server_.Stop());
}

// Run through /proc/self/exe again (--malloc_hugepages is on by default),
// the process was called "exe": `pkill fencedkv-server` missed it and top
// showed "exe". Every thread of its own carries a role in its name.
TEST_F(ServerE2ETest, TheProcessAndItsThreadsAreNamed) {
  ASSERT_TRUE(StartServer({"--malloc_hugepages=true"}));
  // The port listens before the io threads run (and name themselves): a
  // reply proves io0 has started.
  Client c(server_.port());
  ASSERT_EQ("+PONG", c.Call({"PING"}));
  const std::string proc = "/proc/" + std::to_string(server_.pid());
  auto read_name = [](const std::string& path) {
    std::ifstream in(path);
    std::string name;
    std::getline(in, name);
    return name;
  };
  EXPECT_EQ("fencedkv-server", read_name(proc + "/comm"));
  std::vector<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task")) {
    names.push_back(read_name(task.path().string() + "/comm"));
  }
  auto has = [&names](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string all;
  for (const std::string& name : names) all += name + " ";
  for (const char* want : {"fencedkv:io0", "fencedkv:db", "fencedkv:scan",
                           "fencedkv:isr", "rocksdb:low"}) {
    EXPECT_TRUE(has(want)) << want << " is not among " << all;
  }
  EXPECT_FALSE(has("exe")) << all;
  EXPECT_EQ(0, server_.Stop());
}

// SETs key:<first>..key:<first+n-1> to 1,000-byte values, FENCE 1, 500 to
// a pipeline: "+OK", or the first other reply.
std::string SetKiBValues(Client* c, int first, int n) {
  const std::string value(1000, 'v');
  constexpr int kPipeline = 500;
  for (int at = first; at < first + n; at += kPipeline) {
    std::string batch;
    for (int i = at; i < at + kPipeline; ++i) {
      batch += Client::Encode(
          {"SET", "key:" + std::to_string(i), value, "FENCE", "1"});
    }
    c->SendRaw(batch);
    for (int i = 0; i < kPipeline; ++i) {
      std::string reply = c->Read();
      if (reply != "+OK") return reply;
    }
  }
  return "+OK";
}

// --malloc_hugepages promised huge pages for the heap, but glibc gives a
// thread's own heap (arena) huge pages only for the part it maps first: the
// value cache and memtable entries a writing thread adds grew in 4 KiB
// pages, one page fault each on first touch (on this VM a fault costs
// microseconds: about a fifth of the database thread's CPU at -P 16). 48 MiB
// of new values took over 20,000 minor faults; on one heap with huge pages,
// a few hundred.
TEST_F(ServerE2ETest, AGrowingHeapTakesHugePagesNotAFaultPerPage) {
  {
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(thp, modes);
    if (modes.empty() || modes.find("[never]") != std::string::npos) {
      GTEST_SKIP() << "transparent huge pages are off on this machine";
    }
  }
  // (No heap touched at start: that would hide the faults measured.)
  ASSERT_TRUE(
      StartServer({"--malloc_hugepages=true", "--malloc_prefault_mb=0"}));
  Client c(server_.port());
  ASSERT_EQ("+PONG", c.Call({"PING"}));
  // A first round grows what every write needs once (buffers, the first
  // memtable blocks); the second is measured.
  auto write = [&](int first, int n) { return SetKiBValues(&c, first, n); };
  ASSERT_EQ("+OK", write(0, 5000));
  const long long before = server_.MinorFaults();
  ASSERT_GE(before, 0);
  constexpr int kWrites = 48000;  // 48 MiB of values
  ASSERT_EQ("+OK", write(5000, kWrites));
  const long long faults = server_.MinorFaults() - before;
  // The values alone are 12,000 pages of 4 KiB; the cache and the memtable
  // each hold a copy.
  std::printf("minor page faults for %d SETs of 1 KiB: %lld\n", kWrites,
              faults);
  EXPECT_LT(faults, 3000) << "minor page faults for " << kWrites
                          << " SETs of 1 KiB";
  EXPECT_EQ(0, server_.Stop());
}

// --malloc_prefault_mb: the heap the value cache and memtable grow into is
// touched at start, so writes of new keys take no page faults (in a
// virtual machine a page's first touch is what costs: server_flags.cc).
// The same writes on a server started without it are the control.
TEST_F(ServerE2ETest, APrefaultedHeapTakesNoPageFaultsAsWritesGrowIt) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator has no heap to prefault";
#endif
  auto faults_for = [&](const std::string& prefault) -> long long {
    test::TempDir dir;
    ServerProcess server;
    if (!server.Start(dir.path(), {"--db=" + dir.Sub("data"), prefault})) {
      ADD_FAILURE() << "the server did not start with " << prefault;
      return -1;
    }
    Client c(server.port());
    EXPECT_EQ("+PONG", c.Call({"PING"}));
    auto write = [&](int first, int n) { return SetKiBValues(&c, first, n); };
    EXPECT_EQ("+OK", write(0, 5000));  // buffers every write needs once
    const long long before = server.MinorFaults();
    // 48 MiB of values, kept twice (value cache and memtable): about 110
    // MiB of new heap, inside the 128 MiB touched at start.
    constexpr int kWrites = 48000;
    EXPECT_EQ("+OK", write(5000, kWrites));
    const long long faults = server.MinorFaults() - before;
    std::printf("%s: minor page faults for %d SETs of 1 KiB: %lld\n",
                prefault.c_str(), kWrites, faults);
    EXPECT_EQ(0, server.Stop());
    return before < 0 ? -1 : faults;
  };
  const long long cold = faults_for("--malloc_prefault_mb=0");
  // (Explicit: the default is smaller where memory is scarce.)
  const long long warm = faults_for("--malloc_prefault_mb=128");
  ASSERT_GE(cold, 0);
  ASSERT_GE(warm, 0);
  // Without: a fault per new page (per 2 MiB with huge pages: ~55).
  EXPECT_GE(cold, 25) << "the control took too few faults to compare";
  EXPECT_LE(warm * 5, cold) << "prefaulted: " << warm << ", not: " << cold;
}

// --write_buffer_size's default follows --memtable (server_flags.cc): a hash
// memtable's insert costs the same at any size, so it gets 64 MiB and less
// compaction; a skiplist keeps 8 MiB. Only the skiplist gets a memtable
// bloom filter (rocksdb_options.cc): on the hash one a probe of the filter
// costs what a probe of the bucket does. RocksDB's OPTIONS file says what
// the database was opened with.
TEST_F(ServerE2ETest, TheMemtableSizeFollowsTheMemtableKind) {
  struct Case {
    std::vector<std::string> flags;
    std::string want;
    std::string bloom;  // memtable_prefix_bloom_size_ratio
  };
  const std::vector<Case> cases = {
      {{}, "67108864", "0.000000"},
      {{"--memtable=skiplist"}, "8388608", "0.020000"},
      {{"--write_buffer_size=1048576"}, "1048576", "0.000000"},
      {{"--memtable=skiplist", "--write_buffer_size=33554432"},
       "33554432",
       "0.020000"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string db = dir_.Sub("db" + std::to_string(n++));
    std::vector<std::string> flags = c.flags;
    flags.push_back("--db=" + db);
    ASSERT_TRUE(server_.Start(dir_.path(), flags));
    Client client(server_.port());
    ASSERT_EQ("+OK", client.Call({"SET", "k", "v", "FENCE", "1"}));
    ASSERT_EQ(0, server_.Stop());
    // The newest OPTIONS file; its default column family's section.
    std::string newest;
    for (const auto& f : std::filesystem::directory_iterator(db)) {
      const std::string name = f.path().filename().string();
      if (name.rfind("OPTIONS-", 0) == 0 && name > newest) newest = name;
    }
    ASSERT_FALSE(newest.empty()) << db;
    std::ifstream in(std::filesystem::path(db) / newest);
    std::string line, value, bloom;
    bool in_default = false;
    while (std::getline(in, line)) {
      if (!line.empty() && line[0] == '[') {
        in_default = line == "[CFOptions \"default\"]";
      }
      const std::string key = "  write_buffer_size=";
      const std::string bloom_key = "  memtable_prefix_bloom_size_ratio=";
      if (in_default && line.rfind(key, 0) == 0)
        value = line.substr(key.size());
      if (in_default && line.rfind(bloom_key, 0) == 0)
        bloom = line.substr(bloom_key.size());
    }
    EXPECT_EQ(c.want, value) << testing::PrintToString(c.flags);
    EXPECT_EQ(c.bloom, bloom) << testing::PrintToString(c.flags);
  }
  // 0 is the default; anything else below 64 KiB is refused.
  EXPECT_FALSE(server_.Start(
      dir_.path(), {"--db=" + dir_.Sub("bad"), "--write_buffer_size=1000"}));
}

}  // namespace
}  // namespace fencedkv
