// Copyright (c) fencedkv authors.
//
// Replication in manual mode with real processes (docs/replication.md):
// fencedkv-server primaries and replicas on 127.0.0.1 (free ports, stopped
// by PID), a raw RESP client. A replica ends with the primary's exact
// content (FENCEDKV.DIGEST), fence state included; it refuses writes,
// fenced reads and leases; it catches up from the log after a restart or a
// kill -9, and from a full copy when the log is gone; the handshake refuses
// another fence configuration and a peer that is not fencedkv, changing
// nothing; a replica that reads nothing is dropped without growing the
// primary's memory.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_process.h"
#include "server_test_util.h"
#include "util/testutil.h"

#ifndef FENCEDKV_SERVER_BIN
#error "FENCEDKV_SERVER_BIN must name the fencedkv-server binary"
#endif

namespace fencedkv {
namespace {

using Client = test::RespTestClient;
using std::chrono::milliseconds;

class Server : public test::ServerProcess {
 public:
  Server() : test::ServerProcess(FENCEDKV_SERVER_BIN) {}
};

// INFO replication as name -> value.
std::map<std::string, std::string> Info(int port) {
  return test::InfoFields(port, "replication", 5000);
}
using test::WaitUntil;

std::string Digest(int port) {
  Client c(port, 20000);
  return c.Call({"FENCEDKV.DIGEST"});
}

// A peer on 127.0.0.1 (a free port) that runs `serve` on each connection
// it accepts, one at a time, and closes it: a stand-in for a server that is
// not this build's fencedkv. Stopped and joined on every way out.
class FakePeer {
 public:
  explicit FakePeer(const std::function<void(int fd)>& serve)
      : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(fd_, 4) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::make_unique<test::ScopedThread>(
        [this, serve] {
          while (!done_) {
            const int c = accept(fd_, nullptr, nullptr);
            if (c < 0) break;
            ++accepted_;
            serve(c);
            close(c);
          }
        },
        [this] {
          done_ = true;
          shutdown(fd_, SHUT_RDWR);
        });
  }
  ~FakePeer() {
    thread_.reset();
    close(fd_);
  }
  int port() const { return port_; }                 // 0 if it could not listen
  int accepted() const { return accepted_.load(); }  // connections so far

 private:
  const int fd_;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<int> accepted_{0};
  std::unique_ptr<test::ScopedThread> thread_;
};

// A stand-in primary's side of a handshake (below).
void ServeFakeSync(int fd, const std::string& reply);

class ReplicationE2ETest : public testing::Test {
 protected:
  // Server `port` made a replica of a peer that answers its handshake with
  // `reply`: success once its link fails with `error`; then it is made a
  // primary again (REPLICAOF NO ONE) and the peer stopped.
  static testing::AssertionResult FailsAgainstFake(int port,
                                                   const std::string& reply,
                                                   const std::string& error) {
    FakePeer fake([&](int fd) { ServeFakeSync(fd, reply); });
    Client c(port);
    const std::string replicaof =
        c.Call({"REPLICAOF", "127.0.0.1", std::to_string(fake.port())});
    if (replicaof != "+OK") {
      return testing::AssertionFailure() << "REPLICAOF: " << replicaof;
    }
    testing::AssertionResult failed = LinkFailsWith(port, error);
    const std::string back = c.Call({"REPLICAOF", "NO", "ONE"});
    if (back != "+OK") {
      return testing::AssertionFailure() << "REPLICAOF NO ONE: " << back;
    }
    return failed;
  }
  ReplicationE2ETest() {
    std::ofstream(dir_.Sub("acl")) << "user default on nopass ~* &* +@all\n";
  }
  std::vector<std::string> Flags(const std::string& name,
                                 std::vector<std::string> extra) {
    extra.push_back("--db=" + dir_.Sub(name + "-db"));
    extra.push_back("--aclfile=" + dir_.Sub("acl"));
    extra.push_back("--repl_timeout_ms=2000");
    return extra;
  }
  bool StartPrimary(Server* s, const std::string& name,
                    std::vector<std::string> extra = {}) {
    mkdir(dir_.Sub(name).c_str(), 0755);
    return s->Start(dir_.Sub(name), Flags(name, std::move(extra)));
  }
  bool StartReplica(Server* s, const std::string& name, int primary_port,
                    std::vector<std::string> extra = {}) {
    extra.push_back("--replicaof=127.0.0.1:" + std::to_string(primary_port));
    return StartPrimary(s, name, std::move(extra));
  }
  // Success once the replica's INFO says its link to the primary failed
  // with `text` (within 10 s); else the last error it reported.
  static testing::AssertionResult LinkFailsWith(int port,
                                                const std::string& text) {
    std::string last;
    if (WaitUntil(
            [&] {
              last = Info(port)["master_last_error"];
              return last.find(text) != std::string::npos;
            },
            10000)) {
      return testing::AssertionSuccess();
    }
    return testing::AssertionFailure()
           << "master_last_error never held '" << text << "': " << last;
  }
  // True once the replica applied everything the primary has, and the
  // primary saw it acknowledged.
  static bool CaughtUp(int primary, int replica) {
    auto p = Info(primary);
    auto r = Info(replica);
    return !p["master_repl_offset"].empty() &&
           r["master_link_status"] == "up" &&
           r["slave_repl_offset"] == p["master_repl_offset"] &&
           p["slave0"].find("offset=" + p["master_repl_offset"] + ",") !=
               std::string::npos;
  }
  // Starts `s` as a primary holding one fenced key, `key` = v; returns its
  // digest ("" if it did not start).
  std::string StartHoldingOneKey(Server* s, const std::string& name,
                                 const std::string& key) {
    if (!StartPrimary(s, name)) return "";
    Client c(s->port());
    if (c.Call({"SET", key, "v", "FENCE", "7"}) != "+OK") return "";
    return Digest(s->port());
  }
  // a: a primary with Write's round 0; b: its replica, caught up (after
  // its first full copy).
  void StartCaughtUpPair(Server* a, Server* b) {
    ASSERT_TRUE(StartPrimary(a, "a"));
    Write(a->port(), 0);
    ASSERT_TRUE(StartReplica(b, "b", a->port()));
    ASSERT_TRUE(
        WaitUntil([&] { return CaughtUp(a->port(), b->port()); }, 15000));
  }
  // A workload touching every kind of record: values, deletes, MSET,
  // advances, the floor, leases.
  static void Write(int port, int round) {
    Client c(port);
    const int base = 100 * (round + 1);
    for (int i = 0; i < 40; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "k" + std::to_string(i % 13),
                        "v" + std::to_string(round) + "." + std::to_string(i),
                        "FENCE", std::to_string(base + i)}));
    }
    ASSERT_EQ(":1", c.Call({"DEL", "k3", "FENCE", std::to_string(base + 50)}));
    ASSERT_EQ("+OK", c.Call({"MSET", "m1", "a", "m2", "b", "FENCE",
                             std::to_string(base + 51)}));
    ASSERT_EQ("$" + std::to_string(base + 60),
              c.Call({"FENCE.ADVANCE", "adv" + std::to_string(round),
                      std::to_string(base + 60)}));
    ASSERT_EQ("$" + std::to_string(base / 2),
              c.Call({"FENCE.FLOOR", std::to_string(base / 2)}));
    const std::string lease =
        c.Call({"LEASE.ACQUIRE", "l" + std::to_string(round), "h", "60000"});
    ASSERT_EQ('*', lease[0]) << lease;
  }
  // Round 1: SIGTERM (a clean exit); later rounds: kill -9.
  static void StopOrKill(Server* s, int round) {
    if (round == 1) {
      EXPECT_EQ(0, s->Stop());
    } else {
      s->Kill9();
    }
  }
  test::TempDir dir_;
};

TEST_F(ReplicationE2ETest,
       AReplicaHoldsThePrimarysExactContentAndRefusesWrites) {
  Server primary, replica;
  const int metrics_port = test::FreePort();
  ASSERT_TRUE(StartPrimary(&primary, "p",
                           {"--metrics_port=" + std::to_string(metrics_port)}));
  Write(primary.port(), 0);
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  Write(primary.port(), 1);
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 15000))
      << replica.Log();
  const std::string digest = Digest(primary.port());
  ASSERT_EQ('$', digest[0]);
  EXPECT_EQ(digest, Digest(replica.port()));

  Client r(replica.port());
  EXPECT_EQ("$v1.39", r.Call({"GET", "k0"}));
  EXPECT_EQ("$nil", r.Call({"GET", "k3"}));
  const std::string fenced =
      "-READONLY fenced reads are answered by the primary: a replica may lag";
  EXPECT_EQ(fenced, r.Call({"FENCE.GET", "adv1"}));
  EXPECT_EQ(fenced, r.Call({"FENCE.FLOOR"}));
  EXPECT_EQ("$adv1", r.Call({"FENCE.DOMAIN", "adv1"}));
  const std::string readonly =
      "-READONLY You can't write against a read only replica.";
  EXPECT_EQ(readonly, r.Call({"SET", "x", "1", "FENCE", "999"}));
  EXPECT_EQ(readonly, r.Call({"DEL", "k0", "FENCE", "999"}));
  EXPECT_EQ(readonly, r.Call({"MSET", "x", "1", "FENCE", "999"}));
  EXPECT_EQ(readonly, r.Call({"FENCE.ADVANCE", "k0", "999"}));
  EXPECT_EQ(readonly, r.Call({"FENCE.FLOOR", "999"}));
  EXPECT_EQ(readonly, r.Call({"LEASE.ACQUIRE", "z", "h", "1000"}));
  EXPECT_EQ("-READONLY the lease service runs on the primary",
            r.Call({"LEASE.INFO", "l0"}));
  EXPECT_EQ(fenced, r.Call({"GET", "k0", "FENCE", "500"}));
  EXPECT_EQ("+OK", r.Call({"MULTI"}));
  EXPECT_EQ(readonly, r.Call({"SET", "x", "1", "FENCE", "999"}));
  EXPECT_EQ('-', r.Call({"EXEC"})[0]);
  EXPECT_EQ(digest, Digest(replica.port()));  // nothing changed
  EXPECT_EQ("-ERR WAIT cannot be used with replica instances",
            r.Call({"WAIT", "1", "0"}));

  // ROLE and INFO on both sides. (Two writes more while the link is up:
  // they are sent from the backlog in memory; what was written before the
  // link came up was read from the WAL.)
  Client p(primary.port());
  EXPECT_EQ("+OK", p.Call({"SET", "late1", "x", "FENCE", "900"}));
  EXPECT_EQ("+OK", p.Call({"SET", "late2", "y", "FENCE", "900"}));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 15000));
  auto pi = Info(primary.port());
  EXPECT_EQ("master", pi["role"]);
  EXPECT_EQ("1", pi["connected_slaves"]);
  EXPECT_NE(std::string::npos,
            pi["slave0"].find("offset=" + pi["master_repl_offset"]))
      << pi["slave0"];
  // The link sent the writes made while it was up from the backlog in
  // memory (the default 32 MiB), those from before it from the WAL.
  EXPECT_EQ("1", pi["repl_backlog_active"]);
  EXPECT_EQ(std::to_string(32 << 20), pi["repl_backlog_size"]);
  EXPECT_NE("0", pi["repl_backlog_histlen"]);
  EXPECT_NE("0", pi["repl_backlog_reads"]) << pi["repl_backlog_reads"];
  auto ri = Info(replica.port());
  EXPECT_EQ("slave", ri["role"]);
  EXPECT_EQ(std::to_string(primary.port()), ri["master_port"]);
  EXPECT_EQ(pi["repl_history"], ri["repl_history"]);
  EXPECT_EQ("*[$slave,$127.0.0.1,:" + std::to_string(primary.port()) +
                ",$connected,:" + ri["slave_repl_offset"] + "]",
            r.Call({"ROLE"}));
  EXPECT_EQ(0u,
            p.Call({"ROLE"}).find("*[$master,:" + pi["master_repl_offset"]));

  // Prometheus: role, epoch, ISR size, lag.
  ASSERT_TRUE(WaitUntil([&] { return Info(primary.port())["isr_size"] == "2"; },
                        10000));
  Client http(metrics_port);
  http.SendRaw("GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
  const std::string metrics = http.ReadAll();
  EXPECT_NE(std::string::npos, metrics.find("fencedkv_replication_primary 1"))
      << metrics;
  EXPECT_NE(std::string::npos, metrics.find("fencedkv_replication_epoch 1"));
  EXPECT_NE(std::string::npos, metrics.find("fencedkv_replication_isr_size 2"));
  EXPECT_NE(std::string::npos,
            metrics.find("fencedkv_replication_connected_replicas 1"));
  EXPECT_NE(std::string::npos, metrics.find("fencedkv_replication_max_lag_ms"));

  // WAIT: the replica acknowledges a new write; with the replica stopped,
  // WAIT gives up at its timeout with 0.
  EXPECT_EQ("+OK", p.Call({"SET", "w", "1", "FENCE", "1000"}));
  EXPECT_EQ(":1", p.Call({"WAIT", "1", "5000"}));
  test::StopProcess(replica.pid());
  EXPECT_EQ("+OK", p.Call({"SET", "w", "2", "FENCE", "1001"}));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(":0", p.Call({"WAIT", "1", "300"}));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, milliseconds(280));
  EXPECT_LT(waited, milliseconds(3000));
  kill(replica.pid(), SIGCONT);
  EXPECT_EQ(":1", p.Call({"WAIT", "1", "5000"}));
  EXPECT_EQ("$2", r.Call({"GET", "w"}));
}

// A primary's link to a replica looked for new batches every millisecond
// while it had nothing to send: an idle primary's link thread woke about
// 1,200 times a second (two replicas: 3% of a core). Now it sleeps until a
// write of the primary's wakes it (DB::SetLogListener), an acknowledgement
// comes or the link closes; and a write still reaches the replica at once.
TEST_F(ReplicationE2ETest, AnIdleLinkSleepsAndAWriteStillShipsAtOnce) {
  Server primary, replica;
  ASSERT_TRUE(StartPrimary(&primary, "p"));
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  Client c(primary.port());
  ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "1"}));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 15000));
  // Context switches of the primary's link threads ("fencedkv:ship").
  auto link_switches = [&]() -> long long {
    long long total = 0;
    const std::string task = "/proc/" + std::to_string(primary.pid()) + "/task";
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(task, ec)) {
      std::ifstream comm(t.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name != "fencedkv:ship") continue;
      std::ifstream status(t.path() / "status");
      for (std::string line; std::getline(status, line);) {
        if (line.find("ctxt_switches:") != std::string::npos) {
          total += std::stoll(line.substr(line.find(':') + 1));
        }
      }
    }
    return total;
  };
  const long long before = link_switches();
  ASSERT_GT(before, 0) << "no fencedkv:ship thread in the primary";
  std::this_thread::sleep_for(milliseconds(2000));
  const long long idle = link_switches() - before;
  // About 20 (a look every 100 ms) and 2 pings; it was about 2,400.
  EXPECT_LT(idle, 200) << "context switches of an idle link in 2 s";

  // A write still reaches the replica within a few milliseconds of its
  // commit, not at the link's next look. A write whose reply waits for the
  // replica wakes the links itself; a write of the server's own (the lease
  // service's reclaim of expired leases, every second, whose reply nobody
  // waits for) only through the log listener. Timed from when the
  // primary's INFO shows it to when the replica's does.
  auto offset = [](int port, const char* field) {
    const std::string v = Info(port)[field];
    return v.empty() ? uint64_t{0} : std::stoull(v);
  };
  std::vector<int64_t> lags;
  for (int i = 0; i < 7; ++i) {
    const std::string lease =
        c.Call({"LEASE.ACQUIRE", "l" + std::to_string(i), "h", "50"});
    ASSERT_EQ('*', lease[0]) << lease;
    ASSERT_TRUE(WaitUntil(
        [&] { return CaughtUp(primary.port(), replica.port()); }, 5000));
    const uint64_t acquired = offset(primary.port(), "master_repl_offset");
    uint64_t reclaimed = acquired;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (reclaimed == acquired &&
           std::chrono::steady_clock::now() < deadline) {
      reclaimed = offset(primary.port(), "master_repl_offset");
    }
    ASSERT_GT(reclaimed, acquired) << "no reclaim within 5 s";
    const auto start = std::chrono::steady_clock::now();
    while (offset(replica.port(), "slave_repl_offset") < reclaimed &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    }
    ASSERT_GE(offset(replica.port(), "slave_repl_offset"), reclaimed);
    lags.push_back(std::chrono::duration_cast<milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count());
  }
  std::sort(lags.begin(), lags.end());
  std::printf("replica lag after a reclaim: median %lld ms, max %lld ms\n",
              static_cast<long long>(lags[lags.size() / 2]),
              static_cast<long long>(lags.back()));
  // A link that waited for its next look would take 50 ms in the median.
  EXPECT_LT(lags[lags.size() / 2], 15) << "median ms until the replica had it";
}

// Concurrent large writes are grouped into one RocksDB write, one WAL
// record, one frame of the stream. (Before: a group of many clients' 900 KiB
// SETs made a frame over the replica's limit of twice --max_request_bytes;
// the replica failed with "invalid bulk length" on every reconnect and never
// caught up.) Groups are now bounded, and the replica's frame limit covers a
// group and the largest batch.
TEST_F(ReplicationE2ETest, LargeConcurrentWritesReachTheReplica) {
  Server primary, replica;
  const std::vector<std::string> limits = {"--max_request_bytes=1048576"};
  ASSERT_TRUE(StartPrimary(&primary, "p", limits));
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port(), limits));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 15000));
  const std::string value(900 << 10, 'x');
  std::vector<test::ScopedThread> writers;
  writers.reserve(16);
  std::atomic<int> acked{0};
  for (int w = 0; w < 16; ++w) {
    writers.emplace_back([&, w] {
      Client c(primary.port(), 20000);
      std::string batch;
      for (int i = 0; i < 3; ++i) {
        batch += Client::Encode(
            {"SET", "big" + std::to_string(w * 3 + i), value, "FENCE", "1"});
      }
      c.SendRaw(batch);
      for (int i = 0; i < 3; ++i) {
        if (c.Read() == "+OK") acked.fetch_add(1);
      }
    });
  }
  for (auto& t : writers) t.Join();
  EXPECT_EQ(48, acked.load());
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 20000))
      << replica.Log();
  EXPECT_EQ(Digest(primary.port()), Digest(replica.port()));
}

TEST_F(ReplicationE2ETest, ARestartedOrKilledReplicaCatchesUpFromTheLog) {
  Server primary, replica;
  ASSERT_TRUE(StartPrimary(&primary, "p"));
  Write(primary.port(), 0);
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 15000));
  for (int round = 1; round <= 2; ++round) {
    StopOrKill(&replica, round);
    Write(primary.port(), round);
    ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
    ASSERT_TRUE(WaitUntil(
        [&] { return CaughtUp(primary.port(), replica.port()); }, 15000))
        << replica.Log();
    // From the log: no second full copy.
    EXPECT_EQ(std::string::npos, replica.Log().find("full copy received"))
        << replica.Log();
    EXPECT_EQ(Digest(primary.port()), Digest(replica.port()));
  }
}

// A replica made by REPLICAOF at run time, restarted without --replicaof
// (and killed with -9 the second time), follows the same primary again:
// the primary to follow is kept in REPLICATION. Before, it started as a
// second primary and took writes of its own. REPLICAOF NO ONE is kept too:
// restarted after it, the server is a primary.
TEST_F(ReplicationE2ETest, ARestartedReplicaFollowsItsPrimaryAgain) {
  Server a, b;
  ASSERT_TRUE(StartPrimary(&a, "a"));
  Write(a.port(), 0);
  ASSERT_TRUE(StartPrimary(&b, "b"));
  {
    Client cb(b.port());
    ASSERT_EQ("+OK",
              cb.Call({"REPLICAOF", "127.0.0.1", std::to_string(a.port())}));
  }
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(a.port(), b.port()); }, 15000))
      << b.Log();
  for (int round = 1; round <= 2; ++round) {
    StopOrKill(&b, round);
    Write(a.port(), round);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(StartPrimary(&b, "b"));  // no --replicaof
    EXPECT_EQ("slave", Info(b.port())["role"]) << b.Log();
    Client cb(b.port());
    EXPECT_EQ(0u,
              cb.Call({"SET", "k0", "x", "FENCE", "100000"}).find("-READONLY"));
    ASSERT_TRUE(WaitUntil([&] { return CaughtUp(a.port(), b.port()); }, 15000))
        << b.Log();
    EXPECT_EQ(Digest(a.port()), Digest(b.port()));
  }
  {
    Client cb(b.port());
    ASSERT_EQ("+OK", cb.Call({"REPLICAOF", "NO", "ONE"}));
  }
  ASSERT_EQ(0, b.Stop());
  ASSERT_TRUE(StartPrimary(&b, "b"));
  EXPECT_EQ("master", Info(b.port())["role"]) << b.Log();
  {
    Client cb(b.port());
    EXPECT_EQ("+OK", cb.Call({"SET", "k0", "x", "FENCE", "100000"}));
    // a was deposed by b's promotion: following it again is refused at
    // once (it would refuse b with STALEEPOCH for ever).
    EXPECT_NE(std::string::npos,
              cb.Call({"REPLICAOF", "127.0.0.1", std::to_string(a.port())})
                  .find("STALEEPOCH"));
    // A replica again (of a server not running); then started with
    // --replicaof=none: a primary whatever was kept, and kept as one.
    ASSERT_EQ("+OK", cb.Call({"REPLICAOF", "127.0.0.1",
                              std::to_string(test::FreePort())}));
  }
  ASSERT_EQ(0, b.Stop());
  ASSERT_TRUE(StartPrimary(&b, "b", {"--replicaof=none"}));
  EXPECT_EQ("master", Info(b.port())["role"]) << b.Log();
  ASSERT_EQ(0, b.Stop());
  ASSERT_TRUE(StartPrimary(&b, "b"));
  EXPECT_EQ("master", Info(b.port())["role"]) << b.Log();
}

TEST_F(ReplicationE2ETest, AFullCopyWhenTheLogIsGoneAndAfterAFailover) {
  Server primary, replica;
  // No log kept once flushed, and small memtables: the log goes quickly.
  ASSERT_TRUE(StartPrimary(
      &primary, "p", {"--wal_retention_mb=0", "--write_buffer_size=65536"}));
  Write(primary.port(), 0);
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 15000));
  EXPECT_EQ(0, replica.Stop());
  {
    Client c(primary.port());
    const std::string value(4096, 'x');
    for (int i = 0; i < 400; ++i) {  // 1.6 MB: many memtables flushed
      ASSERT_EQ("+OK", c.Call({"SET", "big" + std::to_string(i), value, "FENCE",
                               "5000"}));
    }
  }
  // A checkpoint flushes every memtable: the log before it is deleted.
  {
    Client c(primary.port());
    ASSERT_EQ(':', c.Call({"FENCEDKV.CHECKPOINT", dir_.Sub("ckpt")})[0]);
    ASSERT_TRUE(WaitUntil(
        [&] {
          return c.Call({"FENCEDKV.JOBSTATUS"}).find("$done") !=
                 std::string::npos;
        },
        10000));
  }
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(primary.port(), replica.port()); }, 20000))
      << replica.Log();
  EXPECT_NE(std::string::npos, primary.Log().find("the log no longer holds"))
      << primary.Log();
  EXPECT_EQ(Digest(primary.port()), Digest(replica.port()));

  // Manual failover: the replica is promoted (a new epoch); the old primary
  // wrote once more meanwhile, then follows it: its unreplicated write is
  // discarded with a full copy, and both converge.
  Client r(replica.port());
  EXPECT_EQ("+OK", r.Call({"REPLICAOF", "NO", "ONE"}));
  EXPECT_EQ("+OK", r.Call({"SET", "after", "1", "FENCE", "6000"}));
  const std::string lease = r.Call({"LEASE.ACQUIRE", "l0", "other", "1000"});
  EXPECT_EQ(0u, lease.find("-LEASED")) << lease;  // the replicated lease holds
  // Lease tokens never repeat: a new grant is above the replicated one.
  const std::string held = r.Call({"LEASE.INFO", "l0"});
  const size_t at = held.find("$token,$");
  ASSERT_NE(std::string::npos, at) << held;
  const uint64_t old_token = std::strtoull(held.c_str() + at + 8, nullptr, 10);
  const std::string fresh = r.Call({"LEASE.ACQUIRE", "fresh", "h2", "1000"});
  ASSERT_EQ(0u, fresh.find("*[$")) << fresh;
  EXPECT_GT(std::strtoull(fresh.c_str() + 3, nullptr, 10), old_token)
      << held << fresh;
  // The fence state is the primary's: maxima, floor, stale tokens refused.
  EXPECT_EQ("$160", r.Call({"FENCE.GET", "adv0"}));
  EXPECT_EQ("$50", r.Call({"FENCE.FLOOR"}));
  EXPECT_EQ(0u, r.Call({"SET", "k0", "x", "FENCE", "138"}).find("-STALE"));
  EXPECT_EQ(0u, r.Call({"FENCE.ADVANCE", "adv0", "150"}).find("$160"));
  Client p(primary.port());
  EXPECT_EQ("+OK", p.Call({"SET", "lost", "1", "FENCE", "6000"}));
  EXPECT_EQ("+OK",
            p.Call({"REPLICAOF", "127.0.0.1", std::to_string(replica.port())}));
  EXPECT_EQ("-READONLY You can't write against a read only replica.",
            p.Call({"SET", "x", "1", "FENCE", "7000"}));
  ASSERT_TRUE(WaitUntil(
      [&] { return CaughtUp(replica.port(), primary.port()); }, 20000))
      << primary.Log();
  Client p2(primary.port());
  EXPECT_EQ("$1", p2.Call({"GET", "after"}));
  EXPECT_EQ("$nil", p2.Call({"GET", "lost"}));
  // The new primary's lease reclaimer deletes the 1 s leases above when
  // they expire: a write of its own, which may come between the two
  // digests. Compared once both hold the same sequence.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return CaughtUp(replica.port(), primary.port()) &&
               Digest(primary.port()) == Digest(replica.port()) &&
               CaughtUp(replica.port(), primary.port());
      },
      20000))
      << Digest(primary.port()) << " " << Digest(replica.port());
  EXPECT_EQ("2", Info(replica.port())["repl_epoch"]);
}

// What a primary logs for each full copy it serves (a replica's log of one
// it received ends with its restart, in a file of its own).
const char kFull[] = "replication: full sync of";

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// A clean manual switchover, both ways: the promoted replica begins a new
// epoch, and the old primary, which wrote nothing after it, follows it from
// its own log, with no full copy and no restart. (Before, a server made a
// replica at run time always took a full copy and restarted: a database
// that had been a primary could still write its I/O-error recovery
// sentinel, so it asked as another history.)
TEST_F(ReplicationE2ETest, ASwitchoverFollowsFromTheLogBothWays) {
  Server a, b;
  StartCaughtUpPair(&a, &b);
  if (HasFatalFailure()) return;
  const size_t a_served = Count(a.Log(), kFull);  // b's first copy
  ASSERT_EQ(1u, a_served) << a.Log();
  struct Turn {
    Server* from;  // the primary, which becomes a replica
    Server* to;    // the replica, which is promoted
  };
  int round = 1;
  for (const Turn& t : {Turn{&a, &b}, Turn{&b, &a}}) {
    Client to(t.to->port()), from(t.from->port());
    EXPECT_EQ("+OK", to.Call({"REPLICAOF", "NO", "ONE"}));
    Write(t.to->port(), round);
    EXPECT_EQ("+OK", from.Call({"REPLICAOF", "127.0.0.1",
                                std::to_string(t.to->port())}));
    ASSERT_TRUE(WaitUntil(
        [&] { return CaughtUp(t.to->port(), t.from->port()); }, 15000))
        << t.from->Log();
    EXPECT_EQ(Digest(t.to->port()), Digest(t.from->port()));
    ++round;
  }
  // a, primary again, holds the fences b took as primary: they came with
  // the log.
  Client c(a.port());
  EXPECT_EQ("3", Info(a.port())["repl_epoch"]);
  EXPECT_EQ("$260", c.Call({"FENCE.GET", "adv1"}));
  EXPECT_EQ("$360", c.Call({"FENCE.GET", "adv2"}));
  EXPECT_EQ(0u, c.Call({"SET", "k0", "x", "FENCE", "250"}).find("-STALE"));
  EXPECT_EQ(a_served, Count(a.Log(), kFull)) << a.Log();
  EXPECT_EQ(0u, Count(b.Log(), kFull)) << b.Log();
}

// The other case: the old primary wrote one sequence of its own (a floor)
// after the new one was promoted. That suffix was never the new primary's:
// the old primary gets a full copy and loses it. The promoted server's own
// first write (its recovery sentinel, written at once on promotion when
// every memtable is empty, as here after its first full copy) belongs to
// its new epoch: before, it was counted in the old one, the epoch list
// said the new epoch began one sequence later, and the old primary's
// one-sequence suffix passed for a prefix (it kept its floor; the digests
// differed).
TEST_F(ReplicationE2ETest, AnOldPrimaryWithAWriteOfItsOwnGetsAFullCopy) {
  Server a, b;
  StartCaughtUpPair(&a, &b);
  if (HasFatalFailure()) return;
  Client ca(a.port()), cb(b.port());
  EXPECT_EQ("+OK", cb.Call({"REPLICAOF", "NO", "ONE"}));
  EXPECT_EQ("$70", ca.Call({"FENCE.FLOOR", "70"}));  // one sequence
  EXPECT_EQ("+OK",
            ca.Call({"REPLICAOF", "127.0.0.1", std::to_string(b.port())}));
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(b.port(), a.port()); }, 20000))
      << a.Log();
  EXPECT_EQ(1u, Count(b.Log(), kFull)) << b.Log();
  EXPECT_EQ(Digest(b.port()), Digest(a.port()));
  EXPECT_EQ("$50", cb.Call({"FENCE.FLOOR"}));
}

// Two servers made primaries apart from one epoch: b by REPLICAOF NO ONE,
// a (its primary) by a restart without --replicaof. Manual mode numbers a
// promotion by the server's highest seen epoch + 1, so both are primaries
// of epoch 2, each with writes of its own from the same sequence on. Made
// b's replica, a must get a full copy: before the promotion ids, the epoch
// list matched a's log epoch by number, a was continued from its own
// sequence, kept its write and missed b's (the digests differed).
TEST_F(ReplicationE2ETest, TwoPromotionsToOneEpochNumberAreToldApart) {
  Server a, b;
  StartCaughtUpPair(&a, &b);
  if (HasFatalFailure()) return;
  {
    Client cb(b.port());
    ASSERT_EQ("+OK", cb.Call({"REPLICAOF", "NO", "ONE"}));
  }
  ASSERT_EQ(0, a.Stop());
  ASSERT_TRUE(StartPrimary(&a, "a"));
  ASSERT_EQ("2", Info(a.port())["repl_epoch"]);
  ASSERT_EQ("2", Info(b.port())["repl_epoch"]);
  Client ca(a.port());
  ASSERT_EQ("+OK", ca.Call({"SET", "only-a", "x", "FENCE", "900"}));
  Write(b.port(), 1);  // more sequences than a's one
  if (HasFatalFailure()) return;
  // a's log is not past b's: a sequence check alone would continue it.
  ASSERT_LE(std::stoull(Info(a.port())["master_repl_offset"]),
            std::stoull(Info(b.port())["master_repl_offset"]));
  ASSERT_EQ("+OK",
            ca.Call({"REPLICAOF", "127.0.0.1", std::to_string(b.port())}));
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(b.port(), a.port()); }, 20000))
      << a.Log();
  EXPECT_EQ(1u, Count(b.Log(), kFull)) << b.Log();
  EXPECT_NE(std::string::npos, b.Log().find("is another promotion")) << b.Log();
  EXPECT_EQ(Digest(b.port()), Digest(a.port()));
  Client ca2(a.port());
  EXPECT_EQ("$nil", ca2.Call({"GET", "only-a"}));
}

// Switchovers under load: writers keep sending fenced SETs to whichever
// server they started on while the two swap roles, three times. Whatever
// each old primary took after the promotion is its own suffix: it must be
// discarded (a full copy), never kept; after each swap the two converge to
// the new primary's digest, and every write the new primary acknowledged
// is on both.
TEST_F(ReplicationE2ETest, SwitchoversUnderLoadConverge) {
  Server a, b;
  StartCaughtUpPair(&a, &b);
  if (HasFatalFailure()) return;
  Server* primary = &a;
  Server* replica = &b;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> token{1000};
  std::vector<test::ScopedThread> writers;
  writers.reserve(4);
  for (int w = 0; w < 4; ++w) {
    Server* target = w % 2 == 0 ? &a : &b;
    writers.emplace_back(
        [&, w, target] {
          Client c(target->port(), 5000);
          for (int i = 0; !stop; ++i) {
            c.Call({"SET",
                    "w" + std::to_string(w) + "." + std::to_string(i % 50), "v",
                    "FENCE", std::to_string(token.fetch_add(1))});
          }
        },
        [&] { stop = true; });
  }
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(milliseconds(300));
    Client to(replica->port()), from(primary->port());
    ASSERT_EQ("+OK", to.Call({"REPLICAOF", "NO", "ONE"}));
    std::this_thread::sleep_for(milliseconds(100));  // both take writes
    ASSERT_EQ("+OK", from.Call({"REPLICAOF", "127.0.0.1",
                                std::to_string(replica->port())}));
    std::swap(primary, replica);
    // The new primary's own write, acknowledged: on both once caught up.
    const std::string key = "mark" + std::to_string(round);
    ASSERT_EQ("+OK", to.Call({"SET", key, "1", "FENCE",
                              std::to_string(token.fetch_add(1))}));
    ASSERT_TRUE(WaitUntil(
        [&] { return CaughtUp(primary->port(), replica->port()); }, 30000))
        << "round " << round << ": "
        << Info(replica->port())["master_last_error"];
    EXPECT_EQ("$1", Client(replica->port()).Call({"GET", key}));
  }
  for (auto& t : writers) t.Join();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return CaughtUp(primary->port(), replica->port()) &&
               Digest(primary->port()) == Digest(replica->port());
      },
      30000))
      << Digest(primary->port()) << " " << Digest(replica->port());
}

// The name a replica gives in its handshake is printed in INFO and ROLE and
// keys its acknowledgements: one that is not host:port is refused (before,
// "x\r\nrole:master:1" was taken and broke INFO's lines), 0.0.0.0 is
// replaced by the address the replica connects from, and --announce_addr
// is what a replica calls itself.
TEST_F(ReplicationE2ETest, AReplicasNameIsHostPortAndCanBeAnnounced) {
  Server primary;
  ASSERT_TRUE(StartPrimary(&primary, "p"));
  Write(primary.port(), 0);
  // A handshake the primary continues (its own history, epoch and latest
  // sequence), so it attaches the name and INFO lists it.
  auto info = Info(primary.port());
  auto sync = [&](Client& c, const std::string& addr) {
    return c.Call({"FENCEDKV.SYNC", info["repl_history"], addr,
                   info["repl_epoch"], info["repl_epoch"],
                   info["master_repl_offset"], "key", "monotonic", "nosync"});
  };
  auto listed = [&](const std::string& needle) {
    for (const auto& [k, v] : Info(primary.port())) {
      if (k.rfind("slave", 0) == 0 && k.size() > 5 && isdigit(k[5]) &&
          v.find(needle) != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  {
    Client c(primary.port());
    EXPECT_EQ("-ERR FENCEDKV.SYNC: the replica's address is not host:port",
              sync(c, "x\r\nrole_injected:1:5"));
  }
  EXPECT_EQ(0u, Info(primary.port()).count("role_injected"));
  {
    // A wildcard name: accepted, and known by the connection's address.
    Client c(primary.port());
    const std::string reply = sync(c, "0.0.0.0:4242");
    ASSERT_EQ(0u, reply.rfind("+CONTINUE", 0)) << reply;
    EXPECT_TRUE(
        WaitUntil([&] { return listed("ip=127.0.0.1,port=4242,"); }, 5000))
        << "the primary does not list the replica as 127.0.0.1:4242";
    EXPECT_FALSE(listed("ip=0.0.0.0"));
  }
  Server replica;
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port(),
                           {"--announce_addr=localhost:4243"}));
  EXPECT_TRUE(
      WaitUntil([&] { return listed("ip=localhost,port=4243,"); }, 10000));
}

// A manual-mode primary keeps an id with each of its promotions. A replica
// of this build sends its log epoch's id (11 words) and is continued only
// under the same promotion: with another id, or none where the primary has
// one (an older build's promotion of the same number), it gets a full
// copy. A replica of an older build (9 or 10 words) cannot parse ids: it
// gets the epochs without them (before, "1:0:<id>" made it report "not a
// fencedkv server") and is not compared by them.
TEST_F(ReplicationE2ETest, PromotionIdsInTheHandshake) {
  Server primary;
  ASSERT_TRUE(StartPrimary(&primary, "p"));
  Write(primary.port(), 0);
  auto info = Info(primary.port());
  const std::string epochs = info["repl_epochs"];  // 1:<start>:<id>
  const size_t id_at = epochs.rfind(':');
  ASSERT_NE(std::string::npos, id_at) << epochs;
  const std::string id = epochs.substr(id_at + 1);
  ASSERT_EQ(16u, id.size()) << epochs;
  const std::string without_ids = epochs.substr(0, id_at);
  const std::string node(32, 'a');
  auto sync = [&](std::vector<std::string> extra) {
    Client c(primary.port());
    std::vector<std::string> words = {"FENCEDKV.SYNC",
                                      info["repl_history"],
                                      "127.0.0.1:4250",
                                      info["repl_epoch"],
                                      info["repl_epoch"],
                                      info["master_repl_offset"],
                                      "key",
                                      "monotonic",
                                      "nosync"};
    words.insert(words.end(), extra.begin(), extra.end());
    return c.Call(words);
  };
  const std::string head = "+CONTINUE 1 " + info["repl_history"] + " ";
  EXPECT_EQ(head + without_ids, sync({}));
  EXPECT_EQ(head + without_ids, sync({node}));
  EXPECT_EQ(head + epochs, sync({node, id}));
  const std::string other = sync({node, std::string(16, 'b')});
  EXPECT_EQ(0u,
            other.rfind(
                "+FULLSYNC 1 " + info["repl_history"] + " " + epochs + " ", 0))
      << other;
  std::string none;  // (once the copy above is over: one at a time)
  EXPECT_TRUE(WaitUntil(
      [&] {
        none = sync({node, "-"});
        return none.rfind("-BUSY", 0) != 0;
      },
      10000));
  EXPECT_EQ(0u, none.rfind("+FULLSYNC", 0)) << none;
  EXPECT_EQ(0u, sync({node, "not-an-id"}).rfind("-ERR FENCEDKV.SYNC takes", 0));
  EXPECT_NE(std::string::npos, primary.Log().find("is another promotion"));
}

// Two replicas announcing one address (a copied configuration): the one
// connected keeps the name; the other is refused with a clear error (its
// node id, sent in the handshake, is another) and is accepted only once the
// first is gone. Before, each connection took the name from the other: the
// second got a full copy and the first's acknowledgements stopped counting,
// in turn, for ever.
TEST_F(ReplicationE2ETest, TwoReplicasAnnouncingOneAddressDoNotTakeTurns) {
  Server primary, first, second;
  ASSERT_TRUE(StartPrimary(&primary, "p"));
  Write(primary.port(), 0);
  const std::string name = "--announce_addr=127.0.0.1:4301";
  ASSERT_TRUE(StartReplica(&first, "r1", primary.port(), {name}));
  ASSERT_TRUE(
      WaitUntil([&] { return CaughtUp(primary.port(), first.port()); }, 15000));
  const size_t copies = Count(primary.Log(), kFull);  // the first's
  ASSERT_TRUE(StartReplica(&second, "r2", primary.port(), {name}));
  EXPECT_TRUE(LinkFailsWith(second.port(), "another replica (node "));
  EXPECT_EQ(copies, Count(primary.Log(), kFull)) << primary.Log();
  // The first keeps its link: it has every later write.
  Write(primary.port(), 1);
  EXPECT_TRUE(
      WaitUntil([&] { return CaughtUp(primary.port(), first.port()); }, 15000));
  EXPECT_EQ(Digest(primary.port()), Digest(first.port()));
  EXPECT_NE("up", Info(second.port())["master_link_status"]);
  // Gone (a clean stop ends its link at once), it leaves the name free.
  EXPECT_EQ(0, first.Stop());
  EXPECT_TRUE(
      WaitUntil([&] { return CaughtUp(primary.port(), second.port()); }, 30000))
      << Info(second.port())["master_last_error"];
  EXPECT_EQ(Digest(primary.port()), Digest(second.port()));
}

// In etcd mode the announced address goes into the shard's record, where
// replicas and Sentinel clients look for the primary: a wildcard there
// would send each of them to its own machine. Refused before the server
// opens anything.
TEST_F(ReplicationE2ETest, EtcdModeOnAWildcardBindNeedsAnAnnouncedAddress) {
  auto run = [&](const std::string& flags) {
    // (timeout: a server that got past the check must not linger.)
    const std::string cmd = "timeout 10 " + std::string(FENCEDKV_SERVER_BIN) +
                            " --db=" + dir_.Sub("never") +
                            " --shard=s1 --etcd_endpoints=http://127.0.0.1:1 " +
                            flags + " 2>&1";
    return test::RunCommand(cmd);
  };
  for (const char* bind : {"0.0.0.0", "::", "::0"}) {
    auto r = run(std::string("--bind=") + bind + " --port=1");
    EXPECT_EQ(1, r.first) << bind << ": " << r.second;
    EXPECT_NE(std::string::npos, r.second.find("set --announce_addr=host:port"))
        << r.second;
  }
  auto r = run("--bind=127.0.0.1 --port=1 --announce_addr=fe80::1");
  EXPECT_EQ(1, r.first) << r.second;
  EXPECT_NE(std::string::npos, r.second.find("is not host:port of one host"))
      << r.second;
  r = run("--bind=127.0.0.1 --announce_addr=[::]:7379 --port=1");
  EXPECT_EQ(1, r.first) << r.second;
  EXPECT_NE(std::string::npos, r.second.find("is not host:port of one host"))
      << r.second;
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("never")))
      << "the refused server created its database";
}

TEST_F(ReplicationE2ETest, TheHandshakeRefusesAnotherFenceConfigurationOrPeer) {
  Server primary;
  ASSERT_TRUE(StartPrimary(&primary, "p"));
  Write(primary.port(), 0);
  // Another domain function: refused, the replica's data untouched.
  {
    Server other;
    ASSERT_TRUE(StartPrimary(&other, "o", {"--fence_domain=prefix:3"}));
    Client o(other.port());
    ASSERT_EQ("+OK", o.Call({"SET", "mine", "1", "FENCE", "1"}));
    const std::string before = Digest(other.port());
    EXPECT_EQ("+OK", o.Call({"REPLICAOF", "127.0.0.1",
                             std::to_string(primary.port())}));
    ASSERT_TRUE(LinkFailsWith(other.port(), "fence configuration differs"));
    EXPECT_EQ("down", Info(other.port())["master_link_status"]);
    EXPECT_EQ(before, Digest(other.port()));
    EXPECT_EQ("$1", o.Call({"GET", "mine"}));
  }
  // Another mode.
  {
    Server other;
    ASSERT_TRUE(
        StartReplica(&other, "s", primary.port(), {"--fence_mode=strict"}));
    ASSERT_TRUE(LinkFailsWith(other.port(), "fence_mode=monotonic"));
  }
  // A primary with --sync and a replica without: its acknowledgements
  // would not be as durable as the primary's writes.
  {
    Server synced, other;
    ASSERT_TRUE(StartPrimary(&synced, "ps", {"--sync"}));
    ASSERT_TRUE(StartReplica(&other, "ns", synced.port()));
    ASSERT_TRUE(LinkFailsWith(other.port(), "durability differs"));
    EXPECT_EQ("0", Info(synced.port())["connected_slaves"]);
    // With --sync on both it follows.
    Server both;
    ASSERT_TRUE(StartReplica(&both, "ss", synced.port(), {"--sync"}));
    ASSERT_TRUE(WaitUntil(
        [&] { return Info(synced.port())["connected_slaves"] == "1"; }, 10000));
  }
  // Redis is not fencedkv.
  {
    const int port = test::FreePort();
    const pid_t redis = fork();
    if (redis == 0) {
      execlp("redis-server", "redis-server", "--port",
             std::to_string(port).c_str(), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_TRUE(
        WaitUntil([&] { return Client(port, 500).connected(); }, 10000));
    Server other;
    ASSERT_TRUE(StartReplica(&other, "n", port));
    ASSERT_TRUE(LinkFailsWith(other.port(), "is not a fencedkv server"));
    kill(redis, SIGKILL);
    waitpid(redis, nullptr, 0);
  }
  // Nor is a peer that answers something else (here: HTTP).
  {
    FakePeer http([](int c) {
      const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
      send(c, reply, sizeof(reply) - 1, MSG_NOSIGNAL);
    });
    ASSERT_NE(0, http.port());
    Server other;
    ASSERT_TRUE(StartReplica(&other, "h", http.port()));
    EXPECT_TRUE(LinkFailsWith(other.port(), "is not a fencedkv server"));
  }
}

// A primary of an older build knows FENCEDKV.SYNC with nine words, without
// the node id or the log's promotion id: a replica of this build asks again
// with one word less until it is understood (before, it retried the longer
// handshake for ever, "wrong number of arguments"). The peer here answers
// as such a primary would: the builds before "sized" refused twelve words
// with their usage error, one build eleven, the oldest any other count
// with Redis's arity error.
TEST_F(ReplicationE2ETest, AReplicaFollowsAPrimaryOfAnOlderBuild) {
  FakePeer old_primary([](int c) {
    std::string in;
    char buf[4096];
    int answered = 0;  // handshakes answered so far on this connection
    for (;;) {
      const ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
      const std::pair<const char*, const char*> answers[] = {
          {"*12\r\n$13\r\nFENCEDKV.SYNC",
           "-ERR FENCEDKV.SYNC takes history addr max_epoch log_epoch seq "
           "domain mode sync|nosync [node [log_id]]\r\n"},
          {"*11\r\n$13\r\nFENCEDKV.SYNC",
           "-ERR FENCEDKV.SYNC takes history addr max_epoch log_epoch seq "
           "domain mode sync|nosync [node]\r\n"},
          {"*10\r\n$13\r\nFENCEDKV.SYNC",
           "-ERR wrong number of arguments for 'fencedkv.sync' command\r\n"},
          {"*9\r\n$13\r\nFENCEDKV.SYNC",
           "-ERR the older build saw nine words\r\n"}};
      if (answered < 4 &&
          in.find(answers[answered].first) != std::string::npos) {
        const std::string reply = answers[answered].second;
        send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
        if (++answered == 4) return;
      }
    }
  });
  ASSERT_NE(0, old_primary.port());
  Server replica;
  ASSERT_TRUE(StartReplica(&replica, "r", old_primary.port()));
  EXPECT_TRUE(LinkFailsWith(replica.port(), "the older build saw nine words"));
}

TEST_F(ReplicationE2ETest,
       AWriteIsAcknowledgedOnlyOnceEveryInSyncReplicaHasIt) {
  Server primary, replica;
  ASSERT_TRUE(StartPrimary(
      &primary, "p", {"--min_insync_replicas=2", "--replica_lag_ms=500"}));
  Client p(primary.port());
  // Below the minimum: refused before it runs, nothing written.
  const std::string refused = p.Call({"SET", "a", "1", "FENCE", "1"});
  EXPECT_EQ(0u, refused.find("-NOREPLICAS Not enough good replicas to write"))
      << refused;
  EXPECT_EQ(0u, p.Call({"MSET", "a", "1", "FENCE", "1"}).find("-NOREPLICAS"));
  EXPECT_EQ("$nil", p.Call({"GET", "a"}));
  EXPECT_EQ("$0", p.Call({"FENCE.GET", "a"}));

  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  ASSERT_TRUE(
      WaitUntil([&] { return Info(primary.port())["isr_size"] == "2"; }, 15000))
      << primary.Log();
  // Every +OK is already on the replica: read it there at once.
  Client r(replica.port());
  for (int i = 1; i <= 200; ++i) {
    const std::string v = "v" + std::to_string(i);
    ASSERT_EQ("+OK", p.Call({"SET", "k" + std::to_string(i % 7), v, "FENCE",
                             std::to_string(i)}));
    ASSERT_EQ("$" + v, r.Call({"GET", "k" + std::to_string(i % 7)})) << i;
  }
  // Pipelined (one group commit) and the other write paths.
  std::string batch;
  for (int i = 0; i < 16; ++i) {
    batch +=
        Client::Encode({"SET", "g" + std::to_string(i), "x", "FENCE", "300"});
  }
  p.SendRaw(batch);
  for (int i = 0; i < 16; ++i) ASSERT_EQ("+OK", p.Read());
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ("$x", r.Call({"GET", "g" + std::to_string(i)}));
  }
  EXPECT_EQ(":1", p.Call({"DEL", "g0", "FENCE", "301"}));
  EXPECT_EQ("$nil", r.Call({"GET", "g0"}));
  EXPECT_EQ("+OK", p.Call({"MULTI"}));
  EXPECT_EQ("+QUEUED", p.Call({"SET", "t", "1", "FENCE", "302"}));
  EXPECT_EQ("*[+OK]", p.Call({"EXEC"}));
  EXPECT_EQ("$1", r.Call({"GET", "t"}));

  // The replica stops answering: the write waiting for it fails once it
  // leaves the in-sync set (then below the minimum); later writes are
  // refused at once, and write nothing.
  test::StopProcess(replica.pid());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string waited = p.Call({"SET", "s", "1", "FENCE", "400"});
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(0u, waited.find("-NOREPLICAS")) << waited;
  EXPECT_GE(took, milliseconds(400));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_EQ(0u, p.Call({"SET", "s2", "1", "FENCE", "401"}).find("-NOREPLICAS"));
  EXPECT_EQ("$nil", p.Call({"GET", "s2"}));
  EXPECT_EQ("1", Info(primary.port())["isr_size"]);
  // Back: it catches up, joins again, and writes are acknowledged again.
  kill(replica.pid(), SIGCONT);
  ASSERT_TRUE(WaitUntil([&] { return Info(primary.port())["isr_size"] == "2"; },
                        15000));
  EXPECT_EQ("+OK", p.Call({"SET", "s2", "2", "FENCE", "402"}));
  EXPECT_EQ("$2", r.Call({"GET", "s2"}));
  EXPECT_EQ("$1", r.Call({"GET", "s"}));  // the write whose reply failed
}

// A client closed by the server (CLIENT KILL; shutdown takes the same
// path) while its write's reply waited for the in-sync replicas was sent
// that reply: the close flushed the whole output, the held reply with it,
// so the writer read ":1" or "+OK" for a write no replica had (without the
// kill, the same write got -NOREPLICAS). A helper's review.
TEST_F(ReplicationE2ETest, AClientClosedWhileItsReplyIsHeldIsNotSentIt) {
  Server primary, replica;
  ASSERT_TRUE(StartPrimary(
      &primary, "p", {"--min_insync_replicas=2", "--replica_lag_ms=4000"}));
  ASSERT_TRUE(StartReplica(&replica, "r", primary.port()));
  ASSERT_TRUE(
      WaitUntil([&] { return Info(primary.port())["isr_size"] == "2"; }, 15000))
      << primary.Log();
  Client admin(primary.port());
  ASSERT_EQ("+OK", admin.Call({"SET", "a", "1", "FENCE", "1"}));
  test::StopProcess(replica.pid());
  const std::vector<std::vector<std::string>> writes = {
      {"DEL", "a", "FENCE", "5"},             // run on the loop
      {"SET", "c", "v", "NX", "FENCE", "5"},  // likewise (a condition)
      {"SET", "d", std::string(2 << 20, 'x'), "FENCE", "5"}};  // long thread
  for (const auto& w : writes) {
    Client writer(primary.port());
    writer.Send(w);
    std::this_thread::sleep_for(milliseconds(500));  // its reply is held
    // (A killed client whose reply is still held may be counted again.)
    const std::string killed =
        admin.Call({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    ASSERT_TRUE(killed.size() > 1 && killed[0] == ':' && killed != ":0")
        << w[0] << " " << killed;
    EXPECT_EQ("EOF", writer.Read()) << w[0] << " " << w[1];
  }
  kill(replica.pid(), SIGCONT);
  EXPECT_EQ(0, primary.Stop());
}

TEST_F(ReplicationE2ETest,
       AReplicaThatReadsNothingIsDroppedWithoutGrowingThePrimary) {
  Server primary;
  // 8 MiB memtables: the load below cycles through them, so the primary's
  // own memory settles during the first half (a 64 MiB memtable would
  // still be filling during the second).
  // (No heap touched at start: its growth is what is measured.)
  ASSERT_TRUE(
      StartPrimary(&primary, "p",
                   {"--write_buffer_size=8388608", "--malloc_prefault_mb=0"}));
  Write(primary.port(), 0);
  auto info = Info(primary.port());
  // A fake replica: a valid handshake, then it never reads.
  Client fake(primary.port());
  fake.Send({"FENCEDKV.SYNC", info["repl_history"], "127.0.0.1:1", "1", "1",
             info["master_repl_offset"], "key", "monotonic", "nosync"});
  const std::string answer = fake.Read();
  ASSERT_EQ(0u, answer.find("+CONTINUE 1 ")) << answer;
  ASSERT_TRUE(WaitUntil(
      [&] { return Info(primary.port())["connected_slaves"] == "1"; }, 5000));
  // 50 MiB of writes, before (the primary's own memory settles: memtables,
  // caches) and while the fake replica reads nothing.
  auto load = [&] {
    Client c(primary.port());
    const std::string value(64 << 10, 'v');
    std::string batch;
    for (int i = 0; i < 800; ++i) {
      batch += Client::Encode(
          {"SET", "big" + std::to_string(i % 50), value, "FENCE", "9000"});
      if (i % 16 == 15) {
        c.SendRaw(batch);
        batch.clear();
        for (int j = 0; j < 16; ++j) ASSERT_EQ("+OK", c.Read());
      }
    }
  };
  load();
  const long rss0 = primary.RssKiB();
  load();
  EXPECT_LT(primary.RssKiB() - rss0, 16 * 1024) << "RSS grew from " << rss0;
  EXPECT_TRUE(WaitUntil(
      [&] { return Info(primary.port())["connected_slaves"] == "0"; }, 8000));
  EXPECT_NE(std::string::npos, primary.Log().find("dropped")) << primary.Log();
}

// A fake primary for the tests below: it answers each FENCEDKV.SYNC on a
// connection with `reply` (a line and frames, sent as is), then waits for
// the replica to close. Anything else (REPLICAOF's INFO probe) gets an
// error. Returns once the replica closed.
void ServeFakeSync(int fd, const std::string& reply) {
  std::string in;
  char buf[4096];
  for (;;) {
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    in.append(buf, static_cast<size_t>(n));
    if (in.find("FENCEDKV.SYNC") != std::string::npos) {
      send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      in.clear();
    } else if (in.find("INFO") != std::string::npos) {
      const std::string no = "-ERR no INFO here\r\n";
      send(fd, no.data(), no.size(), MSG_NOSIGNAL);
      in.clear();
    }
  }
}

// A full copy that is not a database (none of its files, or a CURRENT
// naming a missing MANIFEST), or that is not what +FULLSYNC announced, is
// refused before anything is replaced: the replica keeps its data, starts
// again, and leaves no partial copy behind. Before, AdoptFullSync moved the
// database aside, renamed the bogus copy into its place and deleted the
// old one; the server then could not start ("no RocksDB CURRENT file").
TEST_F(ReplicationE2ETest, AMalformedFullCopyLeavesTheDatabaseUntouched) {
  const std::string history(32, 'a');
  auto frame = [](const std::vector<std::string>& words) {
    return Client::Encode(words);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"+FULLSYNC 1 " + history + " - 0 0 0\r\n" +
           frame({"FENCEDKV.FILESDONE", "0"}),
       "it does not open"},
      {"+FULLSYNC 1 " + history + " - 1 13 0\r\n" +
           frame({"FENCEDKV.FILE", "CURRENT", "MANIFEST-999\n"}) +
           frame({"FENCEDKV.FILESDONE", "1"}),
       "it does not open"},
      // A primary that took "sized" must announce the size.
      {"+FULLSYNC 1 " + history + " - 1\r\n", "is not a fencedkv server"},
      // More files, or more bytes, than announced; a path for a name.
      {"+FULLSYNC 1 " + history + " - 1 100 5\r\n" +
           frame({"FENCEDKV.FILE", "CURRENT", "x"}) +
           frame({"FENCEDKV.FILE", "OPTIONS-1", "y"}),
       "more files than the 1 announced"},
      {"+FULLSYNC 1 " + history + " - 1 4 5\r\n" +
           frame({"FENCEDKV.FILE", "CURRENT", "MANIFEST-1\n"}),
       "more than the 4 bytes announced"},
      {"+FULLSYNC 1 " + history + " - 1 1 0\r\n" +
           frame({"FENCEDKV.FILE", "..", "x"}),
       "a file named '..'"},
      // A file sent twice (its second part would overwrite the first).
      {"+FULLSYNC 1 " + history + " - 3 3 0\r\n" +
           frame({"FENCEDKV.FILE", "CURRENT", "x"}) +
           frame({"FENCEDKV.FILE", "OPTIONS-1", "y"}) +
           frame({"FENCEDKV.FILE", "CURRENT", "z"}),
       "file CURRENT sent twice"},
      // More files than a copy may hold: refused before any is created
      // (each may be empty, so the bytes announced do not bound them).
      // Before, the replica created them, one per frame, while a
      // std::find over the names received made each one cost their count.
      {"+FULLSYNC 1 " + history + " - 1000001 0 0\r\n" +
           frame({"FENCEDKV.FILE", "CURRENT", ""}),
       "it announces 1000001 files, more than the 1000000"}};
  Server r;
  ASSERT_TRUE(StartPrimary(&r, "r"));
  {
    Client c(r.port());
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "mine" + std::to_string(i), "v", "FENCE", "7"}));
    }
  }
  const std::string digest = Digest(r.port());
  const std::string db = dir_.Sub("r-db");
  for (const auto& [reply, error] : cases) {
    FakePeer fake([reply = reply](int fd) { ServeFakeSync(fd, reply); });
    ASSERT_NE(0, fake.port());
    Client c(r.port());
    ASSERT_EQ("+OK",
              c.Call({"REPLICAOF", "127.0.0.1", std::to_string(fake.port())}));
    EXPECT_TRUE(LinkFailsWith(r.port(), error)) << error;
    if (error != "is not a fencedkv server") {
      EXPECT_TRUE(LinkFailsWith(r.port(), "database is unchanged"));
    }
    EXPECT_EQ(digest, Digest(r.port()));
    // (A refused copy is deleted at once.)
    EXPECT_FALSE(std::filesystem::exists(db + ".fullsync.tmp")) << error;
    EXPECT_FALSE(std::filesystem::exists(db + ".fullsync")) << error;
    ASSERT_EQ("+OK", c.Call({"REPLICAOF", "NO", "ONE"}));
  }
  ASSERT_EQ(0, r.Stop());
  ASSERT_TRUE(StartPrimary(&r, "r")) << r.Log();
  EXPECT_EQ(digest, Digest(r.port()));
  Client c(r.port());
  EXPECT_EQ(":20", c.Call({"DBSIZE"}));
}

// A crash during the swap of a full copy is recovered at the next start:
// a database missing (the crash came between the two renames) or one that
// does not open is replaced by <db>.replaced, kept until the copy opened.
TEST_F(ReplicationE2ETest, AnInterruptedSwapOfAFullCopyIsUndoneAtStart) {
  Server r;
  const std::string digest = StartHoldingOneKey(&r, "r", "k");
  ASSERT_FALSE(digest.empty());
  ASSERT_EQ(0, r.Stop());
  const std::string db = dir_.Sub("r-db");
  std::filesystem::rename(db, db + ".replaced");
  ASSERT_TRUE(StartPrimary(&r, "r")) << r.Log();
  EXPECT_EQ(digest, Digest(r.port()));
  ASSERT_EQ(0, r.Stop());
  // A database that does not open, beside the old one: not the swap's doing
  // (damage, a disk error), so neither is deleted nor silently put back
  // (which would roll fences back to the old copy's: a review found a left
  // .replaced made any later failed open delete the live database). The
  // start fails naming both; nothing changes.
  std::filesystem::rename(db, db + ".replaced");
  std::filesystem::create_directories(db);
  std::ofstream(db + "/CURRENT") << "MANIFEST-999\n";
  EXPECT_FALSE(StartPrimary(&r, "r"));
  EXPECT_NE(std::string::npos, r.Log().find("holds the database a full copy "
                                            "replaced"))
      << r.Log();
  EXPECT_TRUE(std::filesystem::exists(db + "/CURRENT"));
  EXPECT_TRUE(std::filesystem::exists(db + ".replaced"));
  // The operator moves the bad one aside: the old database runs again.
  std::filesystem::rename(db, db + ".bad");
  ASSERT_TRUE(StartPrimary(&r, "r")) << r.Log();
  EXPECT_EQ(digest, Digest(r.port()));
  EXPECT_FALSE(std::filesystem::exists(db + ".replaced"));
}

// Manual mode: a primary restarted on an emptied --db (another history)
// no longer wipes its replicas. The replica reconnects by itself, refuses
// the copy (it would discard data the primary lost, and its fence maxima:
// before, SET k1 stale FENCE 1 was then accepted everywhere although k1's
// max was 1000), stays a read-only replica and says what to do; the
// operator's REPLICAOF takes the copy.
TEST_F(ReplicationE2ETest, AReplicaRefusesToBeWipedByAWipedPrimary) {
  Server a, b;
  const std::string port = std::to_string(test::FreePort());
  ASSERT_TRUE(StartPrimary(&a, "a", {"--port=" + port}));
  ASSERT_TRUE(StartReplica(&b, "b", a.port()));
  {
    Client c(a.port());
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "k" + std::to_string(i), "v", "FENCE", "1000"}));
    }
  }
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(a.port(), b.port()); }, 15000));
  const std::string digest = Digest(b.port());
  a.Kill9();
  std::filesystem::remove_all(dir_.Sub("a-db"));
  ASSERT_TRUE(StartPrimary(&a, "a", {"--port=" + port}));
  EXPECT_TRUE(LinkFailsWith(b.port(), "refusing a full copy from")) << b.Log();
  EXPECT_TRUE(LinkFailsWith(b.port(), "REPLICAOF 127.0.0.1 " + port));
  EXPECT_EQ(digest, Digest(b.port()));
  EXPECT_EQ("slave", Info(b.port())["role"]);
  EXPECT_NE(std::string::npos, b.Log().find("refusing a full copy"));
  Client cb(b.port());
  EXPECT_EQ(":100", cb.Call({"DBSIZE"}));
  // Restarted, it still refuses (the primary kept is no new word).
  ASSERT_EQ(0, b.Stop());
  ASSERT_TRUE(StartPrimary(&b, "b"));
  EXPECT_TRUE(LinkFailsWith(b.port(), "refusing a full copy from"));
  // The operator's word: the copy is taken.
  Client cb2(b.port());
  ASSERT_EQ("+OK", cb2.Call({"REPLICAOF", "127.0.0.1", port}));
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(a.port(), b.port()); }, 20000))
      << b.Log();
  EXPECT_EQ(Digest(a.port()), Digest(b.port()));
}

// Any spelling of a server's own address is refused by REPLICAOF and at
// start. Before, only the exact string was: the server became a read-only
// replica of itself.
TEST_F(ReplicationE2ETest, AServerCannotReplicateItselfUnderAnyName) {
  Server s;
  ASSERT_TRUE(StartPrimary(&s, "s"));
  const std::string port = std::to_string(s.port());
  Client c(s.port());
  for (const char* host :
       {"localhost", "127.1", "0.0.0.0", "::ffff:127.0.0.1", "127.0.0.1"}) {
    const std::string reply = c.Call({"REPLICAOF", host, port});
    EXPECT_NE(std::string::npos, reply.find("is this server itself"))
        << host << ": " << reply;
  }
  EXPECT_EQ("master", Info(s.port())["role"]);
  EXPECT_EQ("-ERR Invalid master host", c.Call({"REPLICAOF", "", "6379"}));
  EXPECT_EQ("-ERR numreplicas is negative", c.Call({"WAIT", "-1", "0"}));
  ASSERT_EQ(0, s.Stop());
  Server again;
  EXPECT_FALSE(StartPrimary(
      &again, "s", {"--port=" + port, "--replicaof=localhost:" + port}));
  EXPECT_NE(std::string::npos, again.Log().find("is this server itself"))
      << again.Log();
}

// A replica promoted by mistake (a new epoch) and told to follow its old
// primary again would be refused by it for ever (STALEEPOCH: the old
// primary's epoch is below the one the replica has seen). REPLICAOF now
// fails at once, changing nothing, and says how to go back.
TEST_F(ReplicationE2ETest, ReplicaOfADeposedPrimaryFailsUpFront) {
  Server a, b;
  StartCaughtUpPair(&a, &b);
  if (HasFatalFailure()) return;
  Client cb(b.port());
  ASSERT_EQ("+OK", cb.Call({"REPLICAOF", "NO", "ONE"}));
  const std::string reply =
      cb.Call({"REPLICAOF", "127.0.0.1", std::to_string(a.port())});
  EXPECT_EQ(0u, reply.find("-ERR")) << reply;
  EXPECT_NE(std::string::npos, reply.find("STALEEPOCH")) << reply;
  EXPECT_EQ("master", Info(b.port())["role"]);
  // The way back it names: a follows b, is promoted, b follows it.
  Client ca(a.port());
  ASSERT_EQ("+OK",
            ca.Call({"REPLICAOF", "127.0.0.1", std::to_string(b.port())}));
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(b.port(), a.port()); }, 15000));
  ASSERT_EQ("+OK", ca.Call({"REPLICAOF", "NO", "ONE"}));
  ASSERT_EQ("+OK",
            cb.Call({"REPLICAOF", "127.0.0.1", std::to_string(a.port())}));
  ASSERT_TRUE(WaitUntil([&] { return CaughtUp(a.port(), b.port()); }, 15000))
      << b.Log();
}

// A batch over the replica's frame limit names the limit and the flags
// (before: "Protocol error: invalid bulk length"); a full copy cut off
// midway leaves no <db>.fullsync.tmp behind (before, it stayed until the
// next sync, up to the size of the primary's database).
TEST_F(ReplicationE2ETest, LinkErrorsNameTheLimitAndLeaveNoPartialCopy) {
  Server r;
  ASSERT_TRUE(StartPrimary(&r, "r"));
  // (A primary continues only the history the replica asked for.)
  const std::string history = Info(r.port())["repl_history"];
  ASSERT_EQ(32u, history.size()) << history;
  EXPECT_TRUE(
      FailsAgainstFake(r.port(),
                       "+CONTINUE 1 " + history +
                           " 1:0\r\n*4\r\n$12\r\nFENCEDKV.LOG\r\n$1\r\n1\r\n$"
                           "1\r\n9\r\n$99999999999\r\n",
                       "--max_request_bytes"));
  const std::string tmp = dir_.Sub("r-db") + ".fullsync.tmp";
  FakePeer fake([&](int fd) {
    const std::string reply = "+FULLSYNC 1 " + std::string(32, 'b') +
                              " - 2 2097152 0\r\n" +
                              Client::Encode({"FENCEDKV.FILE", "000001.sst",
                                              std::string(1 << 20, 'z')});
    ServeFakeSync(fd, reply);  // then it closes the connection
  });
  Client c(r.port());
  ASSERT_EQ("+OK",
            c.Call({"REPLICAOF", "127.0.0.1", std::to_string(fake.port())}));
  ASSERT_TRUE(WaitUntil(
      [&] { return Info(r.port())["master_sync_in_progress"] == "1"; }, 10000));
  ASSERT_EQ("+OK", c.Call({"REPLICAOF", "NO", "ONE"}));
  EXPECT_FALSE(std::filesystem::exists(tmp));
}

// A peer that stops sending in the middle of a frame is dropped on time, on
// both sides, and leaves nothing behind. Before: a full copy whose primary
// stopped after part of a frame waited for it for good (a partial frame in
// the buffer counted as fresh traffic), keeping <db>.fullsync.tmp, up to
// the whole free disk, until the peer closed; and a primary kept a link
// whose replica sent a byte of an acknowledgement now and then (2 s
// timeout, the link still up after 10 s).
TEST_F(ReplicationE2ETest, APeerStoppedInTheMiddleOfAFrameIsDroppedOnTime) {
  Server r;
  const std::string digest = StartHoldingOneKey(&r, "r", "mine");
  ASSERT_FALSE(digest.empty());
  const std::string tmp = dir_.Sub("r-db") + ".fullsync.tmp";
  // 3 of a file's 100 bytes, then nothing (the connection stays open for
  // 10 s).
  EXPECT_TRUE(
      FailsAgainstFake(r.port(),
                       "+FULLSYNC 1 " + std::string(32, 'b') +
                           " - 1 100 5\r\n*3\r\n$13\r\nFENCEDKV.FILE\r\n$7\r\n"
                           "CURRENT\r\n$100\r\nabc",
                       "the full sync stalled"));
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_EQ(digest, Digest(r.port()));

  // The primary's side: a replica that acknowledges one byte at a time.
  auto info = Info(r.port());
  Client fake_replica(r.port(), 20000);
  const std::string reply = fake_replica.Call(
      {"FENCEDKV.SYNC", info["repl_history"], "127.0.0.1:4243",
       info["repl_epoch"], info["repl_epoch"], info["master_repl_offset"],
       "key", "monotonic", "nosync"});
  ASSERT_EQ(0u, reply.rfind("+CONTINUE", 0)) << reply;
  auto linked = [&] {
    for (const auto& [k, v] : Info(r.port())) {
      if (k.rfind("slave", 0) == 0 && v.find("port=4243,") != std::string::npos)
        return true;
    }
    return false;
  };
  ASSERT_TRUE(WaitUntil(linked, 5000));
  const std::string dribble = "*2\r\n$12\r\nFENCEDKV.ACK\r\n$40\r\n1111111111";
  bool dropped = false;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < dribble.size() && !dropped; ++i) {
    fake_replica.SendRaw(dribble.substr(i, 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    dropped = !linked();
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_TRUE(dropped) << "still linked after " << secs << " s";
  EXPECT_LT(secs, 8.0);
}

// A +CONTINUE for a history other than the one the replica asked for is
// not a primary continuing its log (an impostor on its address): refused,
// nothing stored. Before, the replica took the other history into its
// REPLICATION file without receiving a byte, and then refused its real
// primary's stream as another history's (until an operator's REPLICAOF).
TEST_F(ReplicationE2ETest, AContinueForAnotherHistoryIsRefused) {
  Server r;
  ASSERT_TRUE(StartPrimary(&r, "r"));
  const std::string mine = Info(r.port())["repl_history"];
  ASSERT_EQ(32u, mine.size()) << mine;
  const std::string other(32, 'f');
  EXPECT_TRUE(FailsAgainstFake(r.port(), "+CONTINUE 1 " + other + " -\r\n",
                               "answered +CONTINUE for history " + other));
  EXPECT_EQ(mine, Info(r.port())["repl_history"]);
  std::ifstream state(dir_.Sub("r-db") + "/REPLICATION");
  std::stringstream text;
  text << state.rdbuf();
  EXPECT_EQ(std::string::npos, text.str().find(other)) << text.str();
}

// A full copy whose table files are damaged (a primary's bad disk) is
// refused before it replaces anything: the replica keeps its data. Before,
// only the copy's open was checked, which reads a table's footer and index
// but not its data blocks: the copy replaced the replica's database, and
// after the restart its reads failed ("block checksum mismatch"). (A real
// primary's checkpoint may notice the damage itself; a peer sends the
// files of a stopped server's database here, one byte flipped.)
TEST_F(ReplicationE2ETest, AFullCopyWithADamagedTableIsRefused) {
  Server p;
  // A small memtable: the writes below are flushed into tables.
  ASSERT_TRUE(StartPrimary(&p, "p", {"--write_buffer_size=65536"}));
  {
    Client c(p.port());
    const std::string value(200, 'x');
    for (int i = 0; i < 2000; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "k" + std::to_string(i), value, "FENCE", "1"}));
    }
  }
  ASSERT_EQ(0, p.Stop());
  // A checkpoint's files: tables, the manifest, CURRENT, options, logs.
  std::vector<std::pair<std::string, std::string>> files;
  std::string largest;
  size_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Sub("p-db"))) {
    const std::string name = e.path().filename();
    const std::string ext = e.path().extension();
    if (ext != ".sst" && ext != ".log" && name != "CURRENT" &&
        name.rfind("MANIFEST-", 0) != 0 && name.rfind("OPTIONS-", 0) != 0) {
      continue;
    }
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    files.emplace_back(name, content.str());
    bytes += files.back().second.size();
    if (ext == ".sst" &&
        (largest.empty() ||
         files.back().second.size() >
             std::filesystem::file_size(dir_.Sub("p-db") + "/" + largest))) {
      largest = name;
    }
  }
  ASSERT_FALSE(largest.empty());
  std::string reply = "+FULLSYNC 1 " + std::string(32, 'b') + " - " +
                      std::to_string(files.size()) + " " +
                      std::to_string(bytes) + " 0\r\n";
  for (auto& [name, content] : files) {
    if (name == largest) content[100] = static_cast<char>(content[100] ^ 0x5a);
    reply += Client::Encode({"FENCEDKV.FILE", name, content});
  }
  reply += Client::Encode({"FENCEDKV.FILESDONE", std::to_string(files.size())});
  FakePeer fake([&](int fd) { ServeFakeSync(fd, reply); });
  Server r;
  const std::string digest = StartHoldingOneKey(&r, "r", "mine");
  ASSERT_FALSE(digest.empty());
  Client c(r.port());
  ASSERT_EQ("+OK",
            c.Call({"REPLICAOF", "127.0.0.1", std::to_string(fake.port())}));
  EXPECT_TRUE(LinkFailsWith(r.port(), "a table the primary sent is damaged"));
  EXPECT_TRUE(LinkFailsWith(r.port(), "checksum mismatch"));
  EXPECT_TRUE(LinkFailsWith(r.port(), "database is unchanged"));
  // Asked again only after 10 s (each try costs the primary a whole copy;
  // before, after 1 s).
  const int asked = fake.accepted();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(asked, fake.accepted());
  ASSERT_EQ("+OK", c.Call({"REPLICAOF", "NO", "ONE"}));
  EXPECT_EQ(digest, Digest(r.port()));
  EXPECT_EQ("$v", c.Call({"GET", "mine"}));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("r-db") + ".fullsync.tmp"));
}

}  // namespace
}  // namespace fencedkv
