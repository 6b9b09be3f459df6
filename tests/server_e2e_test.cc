// Copyright (c) fencedkv authors.
//
// fencedkv-server as a real process on 127.0.0.1 (a free port), talked to
// over real sockets in RESP: pipelining, many clients, protocol abuse,
// limits, graceful shutdown, crash durability with --sync, and leases across
// kill -9.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

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
    batch += Client::Encode({"SET", "k" + std::to_string(i), "v" + std::to_string(i),
                             "FENCE", "5"});
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
    batch += Client::Encode({"SET", "shared", v, "FENCE", std::to_string(round)});
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
  std::atomic<int> ok{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      Client c(server_.port());
      for (int i = 0; i < kOps; ++i) {
        if (c.Call({"SET", "c" + std::to_string(t) + ":" + std::to_string(i), "v",
                    "FENCE", "1"}) == "+OK") {
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
  EXPECT_EQ(":1", d.Call({"FENCE.GET", "k"}));
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
    ASSERT_EQ(":12", c.Call({"FENCE.ADVANCE", "k", "12"}));
  }
  EXPECT_EQ(0, server_.Stop());
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  EXPECT_EQ("$v", c.Call({"GET", "k"}));
  EXPECT_EQ(":12", c.Call({"FENCE.GET", "k"}));
  EXPECT_EQ(0u, c.Call({"SET", "k", "w", "FENCE", "11"}).rfind("-STALE", 0));
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, SyncWritesSurviveKill9) {
  ASSERT_TRUE(StartServer({"--sync"}));
  {
    Client c(server_.port());
    for (int i = 0; i < 200; ++i) {
      ASSERT_EQ("+OK", c.Call({"SET", "k" + std::to_string(i), "v" + std::to_string(i),
                               "FENCE", std::to_string(100 + i)}));
    }
  }
  server_.Kill9();
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ("$v" + std::to_string(i), c.Call({"GET", "k" + std::to_string(i)}));
    ASSERT_EQ(":" + std::to_string(100 + i), c.Call({"FENCE.GET", "k" + std::to_string(i)}));
  }
  EXPECT_EQ(0, server_.Stop());
}

TEST_F(ServerE2ETest, LeaseTokensStayIncreasingAcrossKill9) {
  ASSERT_TRUE(StartServer());
  std::string first;
  {
    Client c(server_.port());
    first = c.Call({"LEASE.ACQUIRE", "a", "holder-1", "60000"});
    ASSERT_EQ(0u, first.rfind("*[:", 0)) << first;
  }
  server_.Kill9();
  ASSERT_TRUE(StartServer());
  Client c(server_.port());
  // The held lease is honoured: same holder, same token; others are refused.
  EXPECT_EQ(0u, c.Call({"LEASE.ACQUIRE", "a", "holder-2", "60000"}).rfind("-LEASED", 0));
  const std::string info = c.Call({"LEASE.INFO", "a"});
  EXPECT_EQ(0u, info.rfind("*[$holder,$holder-1,$token,:1,", 0)) << info;
  // A new grant gets a strictly greater token.
  const std::string second = c.Call({"LEASE.ACQUIRE", "b", "holder-3", "60000"});
  EXPECT_EQ(0u, second.rfind("*[:2,", 0)) << second;
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
  EXPECT_NE(std::string::npos, body.find("fencedkv_writes_rejected_total 1")) << body;
  EXPECT_NE(std::string::npos, body.find("fencedkv_writes_accepted_total 1"));
  EXPECT_EQ(0, server_.Stop());
}

}  // namespace
}  // namespace fencedkv
