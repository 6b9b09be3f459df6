// Copyright (c) fencedkv authors.
//
// Replication in etcd mode with real processes: a real etcd (Debian's
// etcd-server) and three fencedkv-server processes on free loopback ports,
// stopped by PID. A writer records what was acknowledged; the primary is
// killed with -9 (FENCEDKV_KILL_CYCLES cycles, 8 by default) or paused with
// SIGSTOP; after each failover every acknowledged write and every advanced
// fence is on the new primary, stale tokens are still refused, a paused
// primary gets nothing acknowledged, and all copies converge. redis-py's
// Sentinel client finds the primary before and after a failover.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
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
using Clock = std::chrono::steady_clock;

class Server : public test::ServerProcess {
 public:
  Server() : test::ServerProcess(FENCEDKV_SERVER_BIN) {}
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

// INFO replication as name -> value.
std::map<std::string, std::string> Info(int port) {
  return test::InfoFields(port, "replication", 2000);
}
using test::WaitUntil;

// One acknowledged or attempted operation.
struct Op {
  enum Kind { kSet, kDel, kAdvance } kind;
  std::string key;
  std::string value;
  uint64_t token;
  bool acked;
};

class EtcdReplicationTest : public testing::Test {
 protected:
  static constexpr int kServers = 3;

  void SetUp() override {
    std::ofstream(dir_.Sub("acl")) << "user default on nopass ~* &* +@all\n";
    ASSERT_TRUE(etcd_.Start(dir_.Sub("etcd"))) << "etcd did not start";
    NotePid(etcd_.pid());
    for (int i = 0; i < kServers; ++i) ports_[i] = test::FreePort();
    for (int i = 0; i < kServers; ++i) {
      ASSERT_TRUE(StartServer(i));
      // The first one creates the shard: it leads.
      if (i == 0) {
        ASSERT_EQ(0, PrimaryIndex(10000));
      }
    }
    ASSERT_TRUE(WaitUntil([&] { return IsrSize() == kServers; }, 20000));
  }

  bool StartServer(int i, const std::vector<std::string>& extra = {}) {
    const std::string dir = dir_.Sub("s" + std::to_string(i));
    mkdir(dir.c_str(), 0755);
    // A fixed port: the server is known by its address in etcd.
    std::vector<std::string> flags = {"--db=" + dir + "/db",
                                      "--aclfile=" + dir_.Sub("acl"),
                                      "--shard=s1",
                                      "--etcd_endpoints=" + etcd_.endpoint(),
                                      "--etcd_lease_ttl_ms=2000",
                                      "--min_insync_replicas=2",
                                      "--replica_lag_ms=1000",
                                      "--repl_timeout_ms=3000",
                                      "--port=" + std::to_string(ports_[i])};
    flags.insert(flags.end(), extra.begin(), extra.end());
    const bool started = servers_[i].Start(dir, flags);
    NotePid(servers_[i].pid());
    return started;
  }

  // With FENCEDKV_TEST_PID_FILE set, every child's PID is appended to it
  // (AFailedAssertInTheKillLoopLeavesNoProcess checks they all ended).
  static void NotePid(pid_t pid) {
    const char* file = std::getenv("FENCEDKV_TEST_PID_FILE");
    if (file != nullptr && pid > 0)
      std::ofstream(file, std::ios::app) << pid << "\n";
  }

  // The index of the server every live server names as the primary, once
  // that server says it is the primary; -1 if none within timeout_ms.
  int PrimaryIndex(int timeout_ms) {
    int found = -1;
    WaitUntil(
        [&] {
          for (int i = 0; i < kServers; ++i) {
            if (servers_[i].pid() <= 0) continue;
            auto info = Info(ports_[i]);
            if (info["role"] == "master" &&
                info["shard_primary"] ==
                    "127.0.0.1:" + std::to_string(ports_[i])) {
              found = i;
              return true;
            }
          }
          return false;
        },
        timeout_ms);
    return found;
  }
  // The index of a primary other than `old` once one says it leads (within
  // 15 s), or -1.
  int NewPrimaryOtherThan(int old) {
    int next = -1;
    WaitUntil(
        [&] {
          next = PrimaryIndex(50);
          return next >= 0 && next != old;
        },
        15000);
    return next != old ? next : -1;
  }

  // Starts a fourth server of the shard announcing `name`, which a live
  // member holds: true once it reports the name taken (INFO's
  // etcd_last_error; printed if not).
  bool StartUnderTakenName(Server* s, const std::string& sub,
                           const std::string& name) {
    const std::string dir = dir_.Sub(sub);
    mkdir(dir.c_str(), 0755);
    if (!s->Start(dir,
                  {"--db=" + dir + "/db", "--aclfile=" + dir_.Sub("acl"),
                   "--shard=s1", "--etcd_endpoints=" + etcd_.endpoint(),
                   "--etcd_lease_ttl_ms=2000", "--announce_addr=" + name})) {
      return false;
    }
    NotePid(s->pid());
    const bool reported = WaitUntil(
        [&] {
          return Info(s->port())["etcd_last_error"].find(
                     "holds the name " + name) != std::string::npos;
        },
        5000);
    if (!reported) {
      std::printf("etcd_last_error: %s\n",
                  Info(s->port())["etcd_last_error"].c_str());
    }
    return reported;
  }

  int IsrSize() {
    const int p = PrimaryIndex(100);
    if (p < 0) return 0;
    return std::atoi(Info(ports_[p])["isr_size"].c_str());
  }

  // Whether the record, as server p last read it, names server i in the
  // ISR.
  // Server i's INFO replication etcd_last_error holds `text` within `ms`
  // (the failure shows the last one).
  testing::AssertionResult LastErrorSays(int i, const std::string& text,
                                         int ms) {
    std::string last;
    if (WaitUntil(
            [&] {
              last = Info(ports_[i])["etcd_last_error"];
              return last.find(text) != std::string::npos;
            },
            ms)) {
      return testing::AssertionSuccess();
    }
    return testing::AssertionFailure()
           << "etcd_last_error never said \"" << text << "\": " << last;
  }

  // etcdctl's exit status and output (stderr included).
  std::pair<int, std::string> EtcdctlStatus(const std::string& args) {
    return test::RunCommand("ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" +
                            etcd_.endpoint() + " " + args + " 2>&1");
  }
  std::string Etcdctl(const std::string& args) {
    return EtcdctlStatus(args).second;
  }
  // The shard record as etcd holds it (for failure messages, and tests
  // that read it).
  std::string Record() {
    std::string r = Etcdctl("get /fencedkv/shards/s1 --print-value-only");
    while (!r.empty() && (r.back() == '\n' || r.back() == '\r')) r.pop_back();
    return r;
  }

  bool InRecordIsr(int p, int i) {
    return Info(ports_[p])["shard_isr"].find(
               "127.0.0.1:" + std::to_string(ports_[i])) != std::string::npos;
  }

  // n fenced SETs, k0 .. k<n-1> = v, one at a time on server p: true if
  // each was acknowledged.
  testing::AssertionResult SetKeys(int p, int n) {
    Client c(ports_[p], 20000);
    for (int i = 0; i < n; ++i) {
      const std::string reply =
          c.Call({"SET", "k" + std::to_string(i), "v", "FENCE", "1"});
      if (reply != "+OK") {
        return testing::AssertionFailure() << "SET k" << i << ": " << reply;
      }
    }
    return testing::AssertionSuccess();
  }

  // kill -9 of server i, and its database directory deleted (its NODE_ID
  // with it): back, it is another node.
  void KillAndWipe(int i) {
    servers_[i].Kill9();
    Wipe(i);
  }
  // Server i's database directory deleted (it is not running).
  void Wipe(int i) {
    const std::string db = dir_.Sub("s" + std::to_string(i)) + "/db";
    ASSERT_EQ(0, std::system(("rm -rf '" + db + "'").c_str()));
  }

  // Every live server applied what the primary has.
  bool Converged(int primary) {
    const std::string seq = Info(ports_[primary])["master_repl_offset"];
    for (int i = 0; i < kServers; ++i) {
      if (i == primary || servers_[i].pid() <= 0) continue;
      auto info = Info(ports_[i]);
      if (info["master_link_status"] != "up" ||
          info["slave_repl_offset"] != seq) {
        return false;
      }
    }
    return true;
  }

  std::string Digest(int i) {
    Client c(ports_[i], 20000);
    return c.Call({"FENCEDKV.DIGEST"});
  }

  // The writer: fenced SET / DEL / FENCE.ADVANCE with increasing tokens on
  // whoever leads, each recorded acknowledged or not.
  void Writer() {
    std::unique_ptr<Client> c;
    int at = -1;
    while (!stop_writer_) {
      if (pause_writer_) {
        paused_ = true;
        std::this_thread::sleep_for(milliseconds(5));
        continue;
      }
      paused_ = false;
      if (c == nullptr || !c->connected()) {
        at = PrimaryIndex(200);
        if (at < 0) continue;
        c = std::make_unique<Client>(ports_[at], 3000);
        if (!c->connected()) {
          c.reset();
          continue;
        }
      }
      const uint64_t t = ++token_;
      Op op;
      op.token = t;
      const int k = static_cast<int>(t % 20);
      std::vector<std::string> cmd;
      if (t % 7 == 3) {
        op.kind = Op::kAdvance;
        op.key = "adv" + std::to_string(k % 5);
        cmd = {"FENCE.ADVANCE", op.key, std::to_string(t)};
      } else if (t % 5 == 4) {
        op.kind = Op::kDel;
        op.key = "k" + std::to_string(k);
        cmd = {"DEL", op.key, "FENCE", std::to_string(t)};
      } else {
        op.kind = Op::kSet;
        op.key = "k" + std::to_string(k);
        op.value = "v" + std::to_string(t);
        cmd = {"SET", op.key, op.value, "FENCE", std::to_string(t)};
      }
      const std::string reply = c->Call(cmd);
      op.acked = reply == "+OK" || (op.kind == Op::kDel && reply[0] == ':') ||
                 (op.kind == Op::kAdvance && reply[0] == '$');
      {
        std::lock_guard<std::mutex> lock(ops_mu_);
        ops_.push_back(op);
        if (op.acked) ++acked_;
      }
      if (!op.acked) c.reset();  // refused or lost: find the primary again
    }
  }
  void PauseWriter() {
    pause_writer_ = true;
    WaitUntil([&] { return paused_.load() || stop_writer_.load(); }, 10000);
  }

  // Every acknowledged write and advance is on server `p`: a key holds its
  // last acknowledged value, or that of a later write whose outcome the
  // writer does not know; every fence is at least its acknowledged max; a
  // token below a key's acknowledged one is refused.
  void Verify(int p, int* violations) {
    std::map<std::string, std::vector<Op>> by_key;
    {
      std::lock_guard<std::mutex> lock(ops_mu_);
      for (const Op& op : ops_) by_key[op.key].push_back(op);
    }
    Client c(ports_[p]);
    for (const auto& [key, ops] : by_key) {
      int last = -1;
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        if (ops[i].acked) last = i;
      }
      if (last < 0) continue;
      if (ops[last].kind == Op::kAdvance) {
        const std::string got = c.Call({"FENCE.GET", key});
        const uint64_t max = std::strtoull(got.c_str() + 1, nullptr, 10);
        if (got[0] != '$' || max < ops[last].token) {
          ADD_FAILURE() << key << ": fence " << got << " below acknowledged "
                        << ops[last].token;
          ++*violations;
        }
        continue;
      }
      std::set<std::string> allowed;
      for (int i = last; i < static_cast<int>(ops.size()); ++i) {
        if (i == last || !ops[i].acked) {
          allowed.insert(ops[i].kind == Op::kDel ? "$nil" : "$" + ops[i].value);
        }
      }
      const std::string got = c.Call({"GET", key});
      if (allowed.count(got) == 0) {
        ADD_FAILURE() << key << ": " << got << ", acknowledged "
                      << (ops[last].kind == Op::kDel ? "DEL" : ops[last].value)
                      << " at token " << ops[last].token;
        ++*violations;
      }
      if (ops[last].token > 1) {
        // While the ISR is below the minimum (a member still rejoining) the
        // primary refuses every write with -NOREPLICAS before the fence is
        // checked: asked again until it can answer (bounded).
        std::string stale;
        for (int attempt = 0; attempt < 200; ++attempt) {
          stale = c.Call({"SET", key, "stale", "FENCE",
                          std::to_string(ops[last].token - 1)});
          if (stale.rfind("-NOREPLICAS", 0) != 0) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (stale.rfind("-STALE", 0) != 0) {
          ADD_FAILURE() << key << ": a stale token got " << stale;
          ++*violations;
        }
      }
    }
  }

  test::TempDir dir_;
  test::EtcdProcess etcd_;
  Server servers_[kServers];
  int ports_[kServers] = {};
  std::atomic<bool> stop_writer_{false}, pause_writer_{false}, paused_{false};
  std::atomic<uint64_t> token_{0};
  std::mutex ops_mu_;
  std::vector<Op> ops_;
  uint64_t acked_ = 0;
};

TEST_F(EtcdReplicationTest, KillNineThePrimaryLosesNoAcknowledgedWrite) {
  const char* env = std::getenv("FENCEDKV_KILL_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 8;
  // Joined on every way out (an ASSERT's return included).
  test::ScopedThread writer([&] { Writer(); }, [&] { stop_writer_ = true; });
  std::mt19937 rng(42);
  int violations = 0;
  std::vector<double> failover_ms;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    // AFailedAssertInTheKillLoopLeavesNoProcess: an ASSERT fails mid-loop.
    ASSERT_EQ(nullptr, std::getenv("FENCEDKV_TEST_FAIL_IN_KILL_LOOP"))
        << "an injected failure in cycle " << cycle;
    const int victim = PrimaryIndex(15000);
    ASSERT_GE(victim, 0) << "no primary in cycle " << cycle;
    std::this_thread::sleep_for(milliseconds(100 + rng() % 400));
    servers_[victim].Kill9();
    const auto killed = Clock::now();
    // Failover time: until a write is acknowledged by the new primary.
    int next = -1;
    ASSERT_TRUE(WaitUntil(
        [&] {
          next = PrimaryIndex(50);
          if (next < 0 || next == victim) return false;
          Client c(ports_[next], 1000);
          return c.Call({"SET", "probe", "1", "FENCE", "1"}) == "+OK";
        },
        15000))
        << "no failover in cycle " << cycle;
    failover_ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - killed)
            .count());
    PauseWriter();
    Verify(next, &violations);
    // The victim comes back as a replica; everyone converges.
    ASSERT_TRUE(StartServer(victim));
    ASSERT_TRUE(WaitUntil([&] { return Converged(next); }, 20000))
        << "cycle " << cycle << ": no convergence";
    const std::string d = Digest(next);
    for (int i = 0; i < kServers; ++i) {
      if (Digest(i) != d) {
        ADD_FAILURE() << "cycle " << cycle << ": server " << i << " differs";
        ++violations;
      }
    }
    ASSERT_TRUE(WaitUntil([&] { return IsrSize() == kServers; }, 20000));
    pause_writer_ = false;
  }
  writer.Join();
  std::sort(failover_ms.begin(), failover_ms.end());
  std::printf(
      "kill -9 cycles: %d, acknowledged writes verified: %llu, "
      "violations: %d, failover ms median %.0f max %.0f\n",
      cycles, static_cast<unsigned long long>(acked_), violations,
      failover_ms.empty() ? 0.0 : failover_ms[failover_ms.size() / 2],
      failover_ms.empty() ? 0.0 : failover_ms.back());
  EXPECT_EQ(0, violations);
  EXPECT_GT(acked_, 0u);
}

// A replica that comes back far behind must not enter the record's ISR
// before it has every write acknowledged without it: else, when the members
// that have them die, it takes over without them. (Before the fix a
// restarted replica's lag counted from its reconnection, so it was in the
// record's ISR within a tick, thousands of writes behind; killing the other two
// made it primary without them.)
TEST_F(EtcdReplicationTest, AReplicaJoinsTheIsrOnlyWithEveryAcknowledgedWrite) {
  const int primary = PrimaryIndex(15000);
  ASSERT_GE(primary, 0);
  const int late = (primary + 1) % kServers;
  const int other = (primary + 2) % kServers;
  servers_[late].Kill9();
  ASSERT_TRUE(WaitUntil([&] { return !InRecordIsr(primary, late); }, 15000));
  // Acknowledged while `late` is away (the ISR is the other two); one at a
  // time, so each is a batch of its own that `late` must apply (and sync).
  constexpr int kWrites = 5000;
  ASSERT_TRUE(SetKeys(primary, kWrites));
  // (--sync: it applies slowly, so it is far behind for a while.)
  ASSERT_TRUE(StartServer(late, {"--sync"}));
  // Kill the two that have the writes as soon as the record names `late`.
  ASSERT_TRUE(WaitUntil([&] { return InRecordIsr(primary, late); }, 40000));
  const std::string had = Info(ports_[primary])["master_repl_offset"];
  const std::string has = Info(ports_[late])["slave_repl_offset"];
  servers_[primary].Kill9();
  servers_[other].Kill9();
  std::printf("late joined the record's ISR at %s of %s\n", has.c_str(),
              had.c_str());
  // `late` is in the ISR: it takes over, and has every write.
  ASSERT_TRUE(
      WaitUntil([&] { return Info(ports_[late])["role"] == "master"; }, 15000))
      << "the ISR member did not take over";
  {
    Client c(ports_[late], 5000);
    EXPECT_EQ(":" + std::to_string(kWrites), c.Call({"DBSIZE"}))
        << "the new primary lacks acknowledged writes";
    EXPECT_EQ("$v", c.Call({"GET", "k" + std::to_string(kWrites - 1)}));
  }
}

// A shard with kWrites acknowledged keys, whose member `wiped` is about to
// lose its data directory.
class EtcdWipedMemberTest : public EtcdReplicationTest {
 protected:
  static constexpr int kWrites = 200;
  void SetUp() override {
    EtcdReplicationTest::SetUp();
    if (HasFatalFailure()) return;
    primary = PrimaryIndex(15000);
    ASSERT_GE(primary, 0);
    wiped = (primary + 1) % kServers;
    other = (primary + 2) % kServers;
    ASSERT_TRUE(SetKeys(primary, kWrites));
  }
  int primary = -1, wiped = -1, other = -1;
};

// The record names each ISR member's node id (NODE_ID, which lives in the
// data directory). A member that comes back under its address with its data
// gone is another node: it has none of the acknowledged writes, so it must
// not take over, though its address is in the ISR. Before, it did (the
// record held addresses only): the shard's new primary was empty, and the
// old primary, back, followed it and lost every write.
TEST_F(EtcdWipedMemberTest, AMemberBackWithItsDataWipedTakesNoPartInATakeover) {
  const std::string epoch = Info(ports_[primary])["shard_epoch"];
  // All three at once, the primary first: killed after a replica, it
  // could drop that replica from the ISR (its link broke) before it died.
  servers_[primary].Kill9();
  servers_[other].Kill9();
  servers_[wiped].Kill9();
  Wipe(wiped);
  // Its old member key goes with its etcd lease (TTL 2 s): then the name
  // is free and the wiped server holds it (not shut out as another node
  // still holding it).
  std::this_thread::sleep_for(milliseconds(3500));
  ASSERT_TRUE(StartServer(wiped));
  const int port = ports_[wiped];
  // The record still names it in the ISR (with its previous node id).
  ASSERT_TRUE(WaitUntil([&] { return InRecordIsr(wiped, wiped); }, 10000))
      << Info(port)["shard_isr"];
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Info(port)["etcd_last_error"].find("node") != std::string::npos;
      },
      10000))
      << Info(port)["etcd_last_error"];
  // Three TTLs: it would have taken over by now (the others are gone).
  const auto until = Clock::now() + milliseconds(6000);
  while (Clock::now() < until) {
    auto info = Info(port);
    ASSERT_NE("master", info["role"]) << "a wiped member took over";
    ASSERT_EQ(epoch, info["shard_epoch"]);
    std::this_thread::sleep_for(milliseconds(100));
  }
  // The old primary, back with its data, takes over; the wiped server
  // follows it with a full copy and rejoins the ISR.
  ASSERT_TRUE(StartServer(primary));
  ASSERT_EQ(primary, PrimaryIndex(15000));
  ASSERT_TRUE(WaitUntil([&] { return Converged(primary); }, 20000));
  {
    Client c(ports_[primary], 5000);
    EXPECT_EQ(":" + std::to_string(kWrites), c.Call({"DBSIZE"}));
  }
  EXPECT_EQ(Digest(primary), Digest(wiped));
  EXPECT_TRUE(WaitUntil([&] { return InRecordIsr(primary, wiped); }, 15000))
      << Info(ports_[primary])["shard_isr"];
}

// The other half: a member back with its data wiped while the primary runs
// is copied everything, rejoins the ISR under its new node id, and may then
// take over like any member (it has every acknowledged write).
TEST_F(EtcdWipedMemberTest, AWipedMemberRejoinsUnderItsNewNodeAndMayTakeOver) {
  KillAndWipe(wiped);
  // Disconnected, it leaves the ISR at once (the primary's path for a
  // member still in the record when it comes back as another node is not
  // reached here).
  ASSERT_TRUE(WaitUntil([&] { return !InRecordIsr(primary, wiped); }, 15000));
  std::this_thread::sleep_for(milliseconds(2500));  // its member key ends
  ASSERT_TRUE(StartServer(wiped));
  ASSERT_TRUE(WaitUntil(
      [&] { return InRecordIsr(primary, wiped) && Converged(primary); }, 30000))
      << Info(ports_[primary])["shard_isr"];
  servers_[primary].Kill9();
  servers_[other].Kill9();
  ASSERT_TRUE(
      WaitUntil([&] { return Info(ports_[wiped])["role"] == "master"; }, 15000))
      << Info(ports_[wiped])["etcd_last_error"];
  Client c(ports_[wiped], 5000);
  EXPECT_EQ(":" + std::to_string(kWrites), c.Call({"DBSIZE"}));
}

// A member wiped and restarted at once, within its previous run's TTL, finds
// its name held by another node id: that previous run's key. Its address
// leads to itself, so no other server can be serving there: it waits for
// the key's lease to end and rejoins as a new node. Before, it took the key
// for another live server's and took no part until restarted again.
TEST_F(EtcdWipedMemberTest, AMemberWipedAndRestartedWithinItsTtlRejoins) {
  KillAndWipe(wiped);
  ASSERT_TRUE(StartServer(wiped));  // at once: its old key is still there
  const int port = ports_[wiped];
  EXPECT_TRUE(LastErrorSays(wiped, "but it leads to this server", 5000));
  ASSERT_TRUE(WaitUntil(
      [&] { return InRecordIsr(primary, wiped) && Converged(primary); }, 30000))
      << Info(port)["etcd_last_error"] << " / "
      << Info(ports_[primary])["shard_isr"];
  EXPECT_EQ(Digest(primary), Digest(wiped));
  Client c(port, 5000);
  EXPECT_EQ(":" + std::to_string(kWrites), c.Call({"DBSIZE"}));
}

// A member's data moved without its NODE_ID (a new node to the shard) while
// the rest of the ISR is lost: no server may take over, until the operator
// gives the directory its node id back with fencedkv-admin (the id the
// record names for its address); then it takes over with every write.
TEST_F(EtcdWipedMemberTest, AMovedMemberGivenItsNodeIdBackTakesOver) {
#ifndef FENCEDKV_ADMIN_BIN
  GTEST_SKIP() << "built without the tools (FENCEDKV_BUILD_TOOLS=OFF): no "
                  "fencedkv-admin";
#else
  const std::string db = dir_.Sub("s" + std::to_string(wiped)) + "/db";
  std::string id;
  std::getline(std::ifstream(db + "/NODE_ID"), id);
  ASSERT_EQ(32u, id.size());
  // The primary first: killed after a replica, it could drop that replica
  // from the record's ISR (its link broke) before it died, and the moved
  // member would then be no member at all (seen once in CI).
  servers_[primary].Kill9();
  servers_[other].Kill9();
  servers_[wiped].Kill9();
  ASSERT_EQ(0, std::remove((db + "/NODE_ID").c_str()));  // the move
  std::this_thread::sleep_for(milliseconds(2500));       // the old keys end
  ASSERT_TRUE(StartServer(wiped));
  const int port = ports_[wiped];
  // Refused by its node id (the others are gone: it would take over).
  ASSERT_TRUE(
      LastErrorSays(wiped, "the record's ISR names another node", 10000));
  EXPECT_NE("master", Info(port)["role"]);
  // The operator: stop it, give it its id back, start it again.
  ASSERT_EQ(0, servers_[wiped].Stop());
  const std::string admin = std::string(FENCEDKV_ADMIN_BIN) + " --db=" + db +
                            " replication --set_node_id=" + id;
  ASSERT_EQ(0, std::system(admin.c_str())) << admin;
  std::this_thread::sleep_for(milliseconds(2500));  // its own key ends too
  ASSERT_TRUE(StartServer(wiped));
  ASSERT_TRUE(WaitUntil([&] { return Info(port)["role"] == "master"; }, 15000))
      << Info(port)["etcd_last_error"];
  Client c(port, 5000);
  EXPECT_EQ(":" + std::to_string(kWrites), c.Call({"DBSIZE"}));
#endif
}

// The record names, for an ISR member, only the node whose link's
// acknowledgements counted for it. Here a replica loses etcd but keeps its
// link to the primary; its member key ends with its lease, and another
// node's key appears under its address (a second server announcing it).
// Before, the primary took the replica for a member back as another node,
// let its link rejoin the ISR and wrote the key's node into the record:
// that node, which never acknowledged a write, could then take over with
// none of them.
TEST_F(EtcdReplicationTest, TheRecordNamesOnlyTheNodeWhoseLinkAcknowledged) {
  // (15 s, as elsewhere: under a loaded start of the suite the primary
  // SetUp saw may be changing hands.)
  const int p = PrimaryIndex(15000);
  ASSERT_GE(p, 0) << Record();
  const int x = (p + 1) % kServers;
  // Server x reaches etcd through a proxy the test can cut.
  const std::string proxy = dir_.Sub("proxy.py");
  std::ofstream(proxy)
      << "import socket, sys, threading\n"
         "def pipe(a, b):\n"
         "    try:\n"
         "        while True:\n"
         "            d = a.recv(65536)\n"
         "            if not d: break\n"
         "            b.sendall(d)\n"
         "    except OSError: pass\n"
         "    for s in (a, b):\n"
         "        try: s.shutdown(socket.SHUT_RDWR)\n"
         "        except OSError: pass\n"
         "l = socket.socket()\n"
         "l.bind(('127.0.0.1', 0)); l.listen(64)\n"
         "print(l.getsockname()[1], flush=True)\n"
         "while True:\n"
         "    c, _ = l.accept()\n"
         "    u = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
         "    for a, b in ((c, u), (u, c)):\n"
         "        threading.Thread(target=pipe, args=(a, b), daemon=True)"
         ".start()\n";
  const std::string port_file = dir_.Sub("proxy.port");
  const pid_t proxy_pid = fork();
  ASSERT_GE(proxy_pid, 0);
  if (proxy_pid == 0) {
    const int fd = open(port_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    execl("/usr/bin/python3", "python3", proxy.c_str(),
          std::to_string(etcd_.client_port()).c_str(), nullptr);
    _exit(127);
  }
  NotePid(proxy_pid);
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{proxy_pid};
  int proxy_port = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::ifstream in(port_file);
        return static_cast<bool>(in >> proxy_port);
      },
      5000));
  EXPECT_EQ(0, servers_[x].Stop());
  ASSERT_TRUE(StartServer(
      x, {"--etcd_endpoints=http://127.0.0.1:" + std::to_string(proxy_port)}));
  const std::string name = "127.0.0.1:" + std::to_string(ports_[x]);
  const std::string member_key = "/fencedkv/members/s1/" + name;
  // x back in full: linked, its member key (through the proxy) naming its
  // own node, and in the record's ISR. (IsrSize alone can pass before the
  // primary has even dropped the stopped x.)
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto got =
            EtcdctlStatus("get " + member_key + " --print-value-only");
        return IsrSize() == kServers &&
               Info(ports_[x])["master_link_status"] == "up" &&
               got.first == 0 &&
               got.second.find("\"node\"") != std::string::npos &&
               InRecordIsr(p, x);
      },
      20000))
      << Record();
  // Cut off from etcd: its member key ends with its lease (TTL 2 s); its
  // link to the primary stays.
  kill(proxy_pid, SIGKILL);
  // (An etcdctl that failed would print no "node" either: its exit status
  // must say the key was read.)
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto got =
            EtcdctlStatus("get " + member_key + " --print-value-only");
        return got.first == 0 && got.second.find("node") == std::string::npos;
      },
      10000));
  const std::string other_node = "0123456789abcdef0123456789abcdef";
  const auto put =
      EtcdctlStatus("put " + member_key + " '{\"epoch\":1,\"seq\":0,\"role\":" +
                    "\"replica\",\"node\":\"" + other_node + "\"}'");
  ASSERT_EQ(0, put.first) << put.second;
  ASSERT_NE(std::string::npos, put.second.find("OK")) << put.second;
  Client c(ports_[p], 10000);
  const auto until = Clock::now() + milliseconds(5000);
  int i = 0;
  while (Clock::now() < until) {
    const std::string record =
        Etcdctl("get /fencedkv/shards/s1 --print-value-only");
    ASSERT_EQ(std::string::npos, record.find(other_node))
        << "the record names a node that acknowledged nothing: " << record;
    // (The ISR keeps its minimum without x: writes go on.)
    EXPECT_EQ("+OK",
              c.Call({"SET", "w" + std::to_string(i++), "v", "FENCE", "1"}));
    std::this_thread::sleep_for(milliseconds(100));
  }
  // The case above did happen: x kept its link, and the record dropped it.
  EXPECT_EQ("up", Info(ports_[x])["master_link_status"]);
  EXPECT_FALSE(InRecordIsr(p, x)) << Info(ports_[p])["shard_isr"];
  Etcdctl("del " + member_key);
}

TEST_F(EtcdReplicationTest, APausedPrimaryGetsNothingAcknowledgedAndRejoins) {
  test::ScopedThread writer([&] { Writer(); }, [&] { stop_writer_ = true; });
  std::this_thread::sleep_for(milliseconds(500));
  const int old = PrimaryIndex(5000);
  ASSERT_GE(old, 0);
  test::StopProcess(servers_[old].pid());
  // A client of the old primary sends a write while it is paused.
  Client late(ports_[old], 20000);
  late.Send({"SET", "paused", "from-the-old-primary", "FENCE", "999999999"});
  int next = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < kServers; ++i) {
          if (i == old) continue;
          auto info = Info(ports_[i]);
          if (info["role"] == "master") {
            next = i;
            return true;
          }
        }
        return false;
      },
      15000));
  EXPECT_GT(std::atoi(Info(ports_[next])["shard_epoch"].c_str()), 1);
  std::this_thread::sleep_for(milliseconds(300));
  kill(servers_[old].pid(), SIGCONT);
  const std::string reply = late.Read();
  std::printf("the paused primary answered the write sent meanwhile: %s\n",
              reply.c_str());
  EXPECT_NE("+OK", reply) << "a deposed primary acknowledged a write";
  // It steps down and follows the new primary; nobody has its write.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto info = Info(ports_[old]);
        return info["role"] == "slave" && info["master_link_status"] == "up";
      },
      20000))
      << servers_[old].Log();
  PauseWriter();
  int violations = 0;
  Verify(next, &violations);
  EXPECT_EQ(0, violations);
  ASSERT_TRUE(WaitUntil([&] { return Converged(next); }, 20000));
  for (int i = 0; i < kServers; ++i) {
    Client c(ports_[i]);
    EXPECT_NE("$from-the-old-primary", c.Call({"GET", "paused"})) << i;
    EXPECT_EQ(Digest(next), Digest(i)) << i;
  }
  writer.Join();
}

// The only in-sync survivor cannot write its replication state (a full or
// lost disk; here a directory where the state's temporary file goes): it
// does not take over, says why in etcd_last_error, and takes over once at
// epoch + 1 when it can. Before, its takeover raised the record's epoch,
// failed to become the primary, and went again on the next pass: epoch 1 to
// 66 in 7 s (a helper's review found 36,000 an hour), with no error shown.
TEST_F(EtcdReplicationTest,
       ATakeoverThatCannotWriteItsStateDoesNotRaiseTheEpoch) {
  const int old = PrimaryIndex(5000);
  ASSERT_GE(old, 0);
  // The only in-sync replica left once `old` dies.
  const int survivor = (old + 1) % kServers;
  servers_[(old + 2) % kServers].Kill9();
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == 2; }, 20000)) << Record();
  const int epoch = std::atoi(Info(ports_[old])["shard_epoch"].c_str());
  ASSERT_GT(epoch, 0);
  const std::string blocker =
      dir_.Sub("s" + std::to_string(survivor)) + "/db/REPLICATION.tmp";
  ASSERT_EQ(0, mkdir(blocker.c_str(), 0755));
  ASSERT_EQ(0, mkdir((blocker + "/x").c_str(), 0755));  // (not removable)
  servers_[old].Kill9();
  EXPECT_TRUE(LastErrorSays(
      survivor, "cannot write this server's replication state", 15000));
  std::this_thread::sleep_for(milliseconds(4000));  // two lease TTLs
  const auto record_epoch = [&] {
    const std::string r = Record();
    const size_t at = r.find("\"epoch\":");
    return at == std::string::npos ? -1 : std::atoi(r.c_str() + at + 8);
  };
  EXPECT_EQ(epoch, record_epoch()) << Record();
  EXPECT_EQ("slave", Info(ports_[survivor])["role"]);
  ASSERT_EQ(0, std::system(("rm -rf '" + blocker + "'").c_str()));
  ASSERT_TRUE(WaitUntil(
      [&] { return Info(ports_[survivor])["role"] == "master"; }, 30000))
      << Info(ports_[survivor])["etcd_last_error"];
  EXPECT_EQ(epoch + 1, record_epoch()) << Record();
  EXPECT_EQ(std::to_string(epoch + 1), Info(ports_[survivor])["shard_epoch"]);
  // The others come back and follow it.
  ASSERT_TRUE(StartServer(old));
  ASSERT_TRUE(StartServer((old + 2) % kServers));
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == kServers; }, 30000));
  EXPECT_TRUE(SetKeys(survivor, 5));
}

// A deposed primary restarted without its etcd flags started in manual
// mode and promoted itself to its highest seen epoch + 1: the number etcd
// gave the new primary. Restarted with its flags, it was taken back from
// its own position, since in etcd mode an epoch was matched by its number
// alone: it kept its stray write and lacked the new primary's, for good,
// while counted in the ISR (a helper's adversarial review; the next
// takeover by it lost acknowledged writes). Now a member's database
// refuses such a start; one taken out of the shard on purpose and put
// back has an epoch with the manual promotion's id, which the shard's
// does not: it gets a full copy.
TEST_F(EtcdReplicationTest, AMemberStartedWithoutEtcdMeanwhileGetsAFullCopy) {
  const int old = PrimaryIndex(5000);
  ASSERT_GE(old, 0);
  {
    Client c(ports_[old]);
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "k" + std::to_string(i), "v", "FENCE", "5"}));
    }
  }
  servers_[old].Kill9();
  const int next = NewPrimaryOtherThan(old);
  ASSERT_GE(next, 0);
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == 2; }, 10000));
  // The operator's mistake: the same data, no --shard, no etcd. The
  // database is the shard's member: refused before anything is opened, as
  // is another shard.
  const std::string dir = dir_.Sub("s" + std::to_string(old));
  const std::vector<std::string> manual = {
      "--db=" + dir + "/db", "--aclfile=" + dir_.Sub("acl"),
      "--port=" + std::to_string(ports_[old])};
  const std::string before = Slurp(dir + "/db/REPLICATION");
  EXPECT_FALSE(servers_[old].Start(dir, manual));
  EXPECT_NE(std::string::npos,
            servers_[old].Log().find(
                "this database is a member of the etcd shard 's1'"))
      << servers_[old].Log();
  EXPECT_FALSE(StartServer(old, {"--shard=s2"}));
  EXPECT_EQ(before, Slurp(dir + "/db/REPLICATION"));
#ifdef FENCEDKV_ADMIN_BIN
  // Taken out of the shard on purpose, it starts in manual mode (as a
  // primary of its own epochs), and is later put back.
  ASSERT_EQ(0, std::system((std::string(FENCEDKV_ADMIN_BIN) + " --db=" + dir +
                            "/db replication --leave_shard >/dev/null")
                               .c_str()));
#else
  GTEST_SKIP() << "needs fencedkv-admin";
#endif
  // Its log epoch is etcd's (no promotion id): a start without flags is
  // still refused, one that says to make it a primary is not.
  EXPECT_FALSE(servers_[old].Start(dir, manual));
  EXPECT_NE(std::string::npos,
            servers_[old].Log().find("without a promotion id"))
      << servers_[old].Log();
  std::vector<std::string> as_primary = manual;
  as_primary.push_back("--replicaof=none");
  ASSERT_TRUE(servers_[old].Start(dir, as_primary)) << servers_[old].Log();
  {
    Client c(ports_[old]);
    ASSERT_EQ("+OK",
              c.Call({"SET", "stray", "from-the-manual-start", "FENCE", "7"}));
  }
  {
    Client c(ports_[next]);
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ("+OK",
                c.Call({"SET", "real" + std::to_string(i), "x", "FENCE", "7"}));
    }
  }
  ASSERT_EQ(0, servers_[old].Stop());
  ASSERT_TRUE(StartServer(old));
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == kServers; }, 20000));
  ASSERT_TRUE(WaitUntil([&] { return Converged(next); }, 20000));
  Client back(ports_[old]);
  EXPECT_EQ("$x", back.Call({"GET", "real19"})) << servers_[old].Log();
  EXPECT_EQ("$nil", back.Call({"GET", "stray"}));
  for (int i = 0; i < kServers; ++i) {
    EXPECT_EQ(Digest(next), Digest(i)) << i;
  }
}

TEST_F(EtcdReplicationTest,
       RedisPySentinelFindsThePrimaryBeforeAndAfterAFailover) {
  const std::string script = dir_.Sub("sentinel.py");
  std::ofstream(script)
      << "import sys\n"
         "import time\n"
         "from redis.sentinel import Sentinel\n"
         "s = Sentinel([('127.0.0.1', int(p)) for p in sys.argv[1:]], "
         "socket_timeout=2)\n"
         "host, port = s.discover_master('s1')\n"
         "m = s.master_for('s1', socket_timeout=2)\n"
         "assert m.execute_command('SET', 'py', str(port), 'FENCE', "
         "str(int(time.time() * 1000))) in (True, b'OK', 'OK')\n"
         "replicas = s.discover_slaves('s1')\n"
         "print('%s:%d %d' % (host, port, len(replicas)))\n";
  auto run = [&](const std::vector<int>& alive) {
    std::string cmd = "/usr/bin/python3 " + script;
    for (int i : alive) cmd += " " + std::to_string(ports_[i]);
    FILE* f = popen(cmd.c_str(), "r");
    char buf[256] = {};
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    pclose(f);
    return std::string(buf, n);
  };
  const int first = PrimaryIndex(5000);
  ASSERT_GE(first, 0);
  EXPECT_EQ("127.0.0.1:" + std::to_string(ports_[first]) + " 2\n",
            run({0, 1, 2}));
  servers_[first].Kill9();
  std::vector<int> alive;
  for (int i = 0; i < kServers; ++i) {
    if (i != first) alive.push_back(i);
  }
  const int next = NewPrimaryOtherThan(first);
  ASSERT_GE(next, 0);
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == 2; }, 10000));
  EXPECT_EQ("127.0.0.1:" + std::to_string(ports_[next]) + " 1\n", run(alive));
}

}  // namespace
}  // namespace fencedkv

namespace fencedkv {
namespace {

TEST_F(EtcdReplicationTest,
       APrimaryCutOffFromEtcdStopsAcknowledgingWithinItsTtl) {
  const int p = PrimaryIndex(5000);
  ASSERT_GE(p, 0);
  Client c(ports_[p]);
  ASSERT_EQ("+OK", c.Call({"SET", "e", "1", "FENCE", "1"}));
  etcd_.Pause();
  const auto paused = Clock::now();
  auto since = [&] {
    return std::chrono::duration<double, std::milli>(Clock::now() - paused)
        .count();
  };
  // Writes, and fenced reads (a replaced primary's GET k FENCE t would
  // confirm a holder the new primary may have fenced out): both refused
  // from the lease's deadline on. Before, fenced reads were answered until
  // the etcd thread stepped down, up to three etcd timeouts later.
  std::string refused, read_refused;
  double write_ms = -1, read_ms = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (write_ms < 0) {
          refused = c.Call({"SET", "e", "2", "FENCE", "2"});
          if (refused != "+OK") write_ms = since();
        }
        if (read_ms < 0) {
          read_refused = c.Call({"GET", "e", "FENCE", "2"});
          if (read_refused[0] == '-') read_ms = since();
        }
        return write_ms >= 0 && read_ms >= 0;
      },
      10000));
  std::printf(
      "etcd paused: writes refused after %.0f ms (%s), fenced reads after "
      "%.0f ms\n",
      write_ms, refused.c_str(), read_ms);
  EXPECT_LE(write_ms, 2000 + 1000);  // the lease TTL, plus a write's timeout
  EXPECT_EQ(0u, refused.find("-READONLY")) << refused;
  EXPECT_LE(read_ms, 2000 + 300);  // the lease TTL (the deadline is at most
                                   // one TTL after the last keep-alive)
  EXPECT_EQ(0u, read_refused.find("-READONLY")) << read_refused;
  // Sentinel's answer is etcd's record as of at most a lease TTL ago: a
  // server cut off from etcd names no primary. Before, every server kept
  // naming the old one (and a primary that had stepped down, itself).
  std::this_thread::sleep_for(std::chrono::milliseconds(2000 + 300));
  for (int i = 0; i < 3; ++i) {
    Client s(ports_[i]);
    EXPECT_EQ("*nil", s.Call({"SENTINEL", "get-master-addr-by-name", "s1"}))
        << "server " << i;
  }
  etcd_.Resume();
  // etcd back: a primary again (the same or another), writes acknowledged.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const int q = PrimaryIndex(100);
        if (q < 0) return false;
        Client w(ports_[q], 2000);
        return w.Call({"SET", "e", "3", "FENCE", "3"}) == "+OK";
      },
      20000));
}

// A fourth server that announces the primary's address (a copied
// configuration): it must not take the primary's member key, place or
// acknowledgements. Before node ids it overwrote the member key with its
// own lease, so the others saw the primary's key under another lease.
TEST_F(EtcdReplicationTest, AServerAnnouncingAnotherOnesAddressTakesNoPart) {
  const int p = PrimaryIndex(5000);
  ASSERT_GE(p, 0);
  const std::string name = "127.0.0.1:" + std::to_string(ports_[p]);
  Server impostor;
  EXPECT_TRUE(StartUnderTakenName(&impostor, "impostor", name));
  // Longer than the lease TTL: nothing moves.
  Client c(ports_[p]);
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ("+OK", c.Call({"SET", "k" + std::to_string(i), "v", "FENCE",
                             std::to_string(100 + i)}));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(p, PrimaryIndex(1000));
  EXPECT_EQ(kServers, IsrSize());
  auto info = Info(impostor.port());
  EXPECT_NE("master", info["role"]);
  EXPECT_NE("up", info["master_link_status"]);
  EXPECT_EQ("2", Info(ports_[p])["connected_slaves"]);
  Client i(impostor.port());
  EXPECT_EQ(0u, i.Call({"SET", "x", "1", "FENCE", "1000"}).find("-READONLY"));
}

// The rightful owner of a name gets it back while a server announcing the
// same name waits: after a clean restart (its key deleted at once; the
// waiting server must not step into it) and after a kill -9 and a restart
// within the lease TTL (its old key, under its old lease, is taken over by
// node id).
TEST_F(EtcdReplicationTest, TheOwnerOfANameGetsItBackFromAnotherServer) {
  const int p = PrimaryIndex(5000);
  ASSERT_GE(p, 0);
  const int x = (p + 1) % kServers;  // a replica
  const std::string name = "127.0.0.1:" + std::to_string(ports_[x]);
  Server other;
  ASSERT_TRUE(StartUnderTakenName(&other, "other", name));
  auto owner_back = [&] {
    return WaitUntil(
        [&] {
          return IsrSize() == kServers &&
                 Info(ports_[x])["master_link_status"] == "up";
        },
        15000);
  };
  auto other_out = [&] {
    auto info = Info(other.port());
    EXPECT_NE("master", info["role"]);
    EXPECT_NE("up", info["master_link_status"]);
    EXPECT_NE(std::string::npos,
              info["etcd_last_error"].find("holds the name " + name));
  };
  // A clean restart: the key is deleted when the owner stops.
  EXPECT_EQ(0, servers_[x].Stop());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(StartServer(x));
  EXPECT_TRUE(owner_back()) << Info(ports_[x])["etcd_last_error"];
  other_out();
  // kill -9 and back within the TTL: its old key is still there.
  servers_[x].Kill9();
  ASSERT_TRUE(StartServer(x));
  EXPECT_TRUE(owner_back()) << Info(ports_[x])["etcd_last_error"];
  other_out();
  Client c(ports_[PrimaryIndex(5000)]);
  EXPECT_EQ("+OK", c.Call({"SET", "after", "1", "FENCE", "5"}));
}

// True if `pid` runs (a zombie does not: it has ended).
bool Running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() &&
         stat[close + 2] != 'Z';
}

// etcd's state of the shard lost or gone back (etcd restarted with an
// empty data directory, restored from an older snapshot, the record
// deleted or edited by hand): the servers know epochs the record does not.
class EtcdLostRecordTest : public EtcdReplicationTest {
 protected:
  std::string Addr(int i) { return "127.0.0.1:" + std::to_string(ports_[i]); }
  // Nobody says it leads for `ms`, from one second on (a primary steps
  // down at its next read of the record, every 100 ms): false (and which
  // one) if one does.
  testing::AssertionResult NoPrimaryFor(int ms) {
    std::this_thread::sleep_for(milliseconds(1000));
    const auto until = Clock::now() + milliseconds(ms);
    while (Clock::now() < until) {
      for (int i = 0; i < kServers; ++i) {
        if (servers_[i].pid() <= 0) continue;
        if (Info(ports_[i])["role"] == "master") {
          return testing::AssertionFailure()
                 << "server " << i << " leads; record: " << Record();
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return testing::AssertionSuccess();
  }
  // k0 .. k<n-1> are on server i.
  testing::AssertionResult HasKeys(int i, int n) {
    Client c(ports_[i], 10000);
    for (int k = 0; k < n; ++k) {
      const std::string got = c.Call({"GET", "k" + std::to_string(k)});
      if (got != "$v") {
        return testing::AssertionFailure()
               << "server " << i << ": k" << k << " is " << got;
      }
    }
    return testing::AssertionSuccess();
  }
};

// The record deleted (etcdctl del; an etcd restarted empty looks the same)
// while a primary and two replicas hold acknowledged writes. Before the fix
// a live server created it again as the primary of epoch max_epoch + 1
// (whichever won the race: a lagging replica's bootstrap lost every write
// it lacked). Now nobody creates it, the primary stops taking writes, each
// server says why, and the documented record put by hand brings the shard
// back with everything.
TEST_F(EtcdLostRecordTest, ADeletedRecordIsNotRecreatedAndNothingIsLost) {
  const int p = PrimaryIndex(15000);
  ASSERT_GE(p, 0);
  ASSERT_TRUE(SetKeys(p, 20));
  ASSERT_TRUE(WaitUntil([&] { return Converged(p); }, 20000));
  Etcdctl("del /fencedkv/shards/s1");
  EXPECT_TRUE(NoPrimaryFor(3 * 2000 + 1000));
  EXPECT_EQ("", Record()) << "a server created the record again";
  for (int i = 0; i < kServers; ++i) {
    EXPECT_TRUE(LastErrorSays(i,
                              "is missing although this server has seen "
                              "epoch",
                              5000))
        << i;
    Client c(ports_[i], 5000);
    EXPECT_NE("+OK", c.Call({"SET", "after", "v", "FENCE", "1"})) << i;
    EXPECT_TRUE(HasKeys(i, 20));
  }
  // The way out (docs/replication.md): a record above every server's
  // repl_max_epoch naming one server, which takes over at the next epoch.
  uint64_t max_epoch = 0;
  for (int i = 0; i < kServers; ++i) {
    max_epoch = std::max<uint64_t>(
        max_epoch,
        std::strtoull(Info(ports_[i])["repl_max_epoch"].c_str(), nullptr, 10));
  }
  const int chosen = (p + 1) % kServers;
  Etcdctl("put /fencedkv/shards/s1 '{\"epoch\":" +
          std::to_string(max_epoch + 1) + ",\"primary\":\"" + Addr(chosen) +
          "\",\"isr\":[\"" + Addr(chosen) + "\"],\"lease\":0}'");
  ASSERT_EQ(chosen, PrimaryIndex(15000)) << Record();
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == kServers; }, 20000));
  for (int i = 0; i < kServers; ++i) EXPECT_TRUE(HasKeys(i, 20));
  Client c(ports_[chosen], 10000);
  EXPECT_EQ("+OK", c.Call({"SET", "after", "v", "FENCE", "1"}));
}

// The record's epoch set below what the shard reached (a hand edit, or an
// older snapshot). Before the fix the primary took over at record epoch +
// 1, an epoch already used: it lowered its max_epoch and appended an
// out-of-order entry to its epochs, after which its REPLICATION file did not
// parse and it could not start. An epoch of 2^64-1 wrapped to 0. Now such
// a record is refused like a missing one.
TEST_F(EtcdLostRecordTest, ARecordBelowTheSeenEpochIsRefused) {
  int p = PrimaryIndex(15000);
  ASSERT_GE(p, 0);
  ASSERT_TRUE(SetKeys(p, 20));
  // A failover: epoch 2.
  servers_[p].Kill9();
  const int next = NewPrimaryOtherThan(p);
  ASSERT_GE(next, 0);
  ASSERT_TRUE(StartServer(p));
  ASSERT_TRUE(WaitUntil([&] { return IsrSize() == kServers; }, 20000));
  ASSERT_EQ("2", Info(ports_[next])["shard_epoch"]);
  const std::string record = Record();
  ASSERT_EQ(0u, record.find("{\"epoch\":2,")) << record;
  // Epoch 1, its epochs list cut to match.
  const size_t epochs = record.find("\"epochs\":[");
  const size_t end = record.find("]]", epochs);
  ASSERT_NE(std::string::npos, end) << record;
  std::string low = "{\"epoch\":1," + record.substr(11, epochs - 11) +
                    "\"epochs\":[[1,0]]" + record.substr(end + 2);
  Etcdctl("put /fencedkv/shards/s1 '" + low + "'");
  EXPECT_TRUE(NoPrimaryFor(3 * 2000 + 1000));
  EXPECT_EQ(0u, Record().find("{\"epoch\":1,")) << Record();
  for (int i = 0; i < kServers; ++i) {
    EXPECT_TRUE(LastErrorSays(i, "at epoch 1, below epoch 2", 5000)) << i;
    EXPECT_EQ("2", Info(ports_[i])["repl_max_epoch"]) << i;
  }
  // 2^64-1: refused, never taken as the highest seen.
  const std::string top = "{\"epoch\":18446744073709551615," +
                          record.substr(11, epochs - 11) + "\"epochs\":[]" +
                          record.substr(end + 2);
  Etcdctl("put /fencedkv/shards/s1 '" + top + "'");
  EXPECT_TRUE(NoPrimaryFor(2000));
  for (int i = 0; i < kServers; ++i) {
    EXPECT_TRUE(LastErrorSays(i, "18446744073709551615", 5000)) << i;
    EXPECT_EQ("2", Info(ports_[i])["repl_max_epoch"]) << i;
  }
  // Every REPLICATION file still parses: each server starts again after
  // kill -9, with every acknowledged write.
  for (int i = 0; i < kServers; ++i) {
    servers_[i].Kill9();
    ASSERT_TRUE(StartServer(i)) << servers_[i].Log();
    EXPECT_TRUE(HasKeys(i, 20));
    EXPECT_EQ("2", Info(ports_[i])["repl_max_epoch"]) << i;
  }
}

// A fresh server (no epoch seen; here with another --fence_domain, whose
// fences say nothing of this shard's) joins while the record is missing.
// Before the fix it created the record and became the primary, without
// any of the shard's data. Now it sees that registered members have seen
// epochs and creates nothing.
TEST_F(EtcdLostRecordTest, AFreshServerDoesNotRecreateASeenShardsRecord) {
  const int p = PrimaryIndex(15000);
  ASSERT_GE(p, 0);
  ASSERT_TRUE(SetKeys(p, 20));
  Etcdctl("del /fencedkv/shards/s1");
  Server fresh;
  const std::string dir = dir_.Sub("fresh");
  mkdir(dir.c_str(), 0755);
  ASSERT_TRUE(
      fresh.Start(dir, {"--db=" + dir + "/db", "--aclfile=" + dir_.Sub("acl"),
                        "--shard=s1", "--etcd_endpoints=" + etcd_.endpoint(),
                        "--etcd_lease_ttl_ms=2000", "--fence_domain=prefix:2",
                        "--port=" + std::to_string(test::FreePort())}));
  NotePid(fresh.pid());
  const auto until = Clock::now() + milliseconds(3 * 2000 + 1000);
  while (Clock::now() < until) {
    ASSERT_NE("master", Info(fresh.port())["role"]) << Record();
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ("", Record());
  const std::string error = Info(fresh.port())["etcd_last_error"];
  EXPECT_NE(std::string::npos, error.find("reports having seen epoch"))
      << error;
  EXPECT_TRUE(NoPrimaryFor(500));
}

// A server started into the shard on a data directory that saw a higher
// epoch elsewhere (another shard's, or manual mode's, where each promotion
// is an epoch): its member key reports that epoch. It must not follow the
// shard's record (below what it saw), and it must not stop the shard: with
// the first version of the lost-record rules every server refused the
// record below a member's epoch, and the primary stepped down.
TEST_F(EtcdLostRecordTest, AStrayMemberWithAHigherEpochDoesNotStopTheShard) {
  const int p = PrimaryIndex(15000);
  ASSERT_GE(p, 0);
  ASSERT_TRUE(SetKeys(p, 5));
  const std::string dir = dir_.Sub("stray");
  mkdir(dir.c_str(), 0755);
  const std::string db = dir + "/db";
  {  // A manual-mode store, then its REPLICATION raised to epoch 50.
    Server manual;
    ASSERT_TRUE(
        manual.Start(dir, {"--db=" + db, "--aclfile=" + dir_.Sub("acl"),
                           "--port=" + std::to_string(test::FreePort())}));
    NotePid(manual.pid());
    ASSERT_EQ(0, manual.Stop());
  }
  std::string text;
  {
    std::ifstream in(db + "/REPLICATION");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find("max_epoch ");
  ASSERT_NE(std::string::npos, at) << text;
  text.replace(at, text.find('\n', at) - at, "max_epoch 50");
  std::ofstream(db + "/REPLICATION", std::ios::trunc) << text;
  Server stray;
  ASSERT_TRUE(stray.Start(
      dir, {"--db=" + db, "--aclfile=" + dir_.Sub("acl"), "--shard=s1",
            "--etcd_endpoints=" + etcd_.endpoint(), "--etcd_lease_ttl_ms=2000",
            "--port=" + std::to_string(test::FreePort())}));
  NotePid(stray.pid());
  // Its member key is up within a TTL; the shard keeps its primary, which
  // keeps taking writes, for three TTLs.
  const auto until = Clock::now() + milliseconds(3 * 2000);
  int n = 0;
  while (Clock::now() < until) {
    ASSERT_NE("master", Info(stray.port())["role"]) << Record();
    Client c(ports_[p], 5000);
    ASSERT_EQ("+OK", c.Call({"SET", "s" + std::to_string(n), "v", "FENCE",
                             std::to_string(100 + n)}))
        << "write " << n << "; record: " << Record();
    ++n;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ("master", Info(ports_[p])["role"]);
  EXPECT_NE(std::string::npos, Etcdctl("get --prefix /fencedkv/members/s1/ "
                                       "--keys-only")
                                   .find(std::to_string(stray.port())))
      << "the stray server never registered: the test proves nothing";
}

// The kill -9 loop with an ASSERT that fails in its first cycle, in a child
// process: it must end as a failed test (exit 1), having stopped etcd and
// every server it started, by PID. Before the fix its writer thread was
// still joinable when the ASSERT returned, so std::thread's destructor
// called std::terminate (SIGABRT): no destructor ran, and etcd and the
// three servers lived on.
TEST(EtcdReplicationCleanupTest, AFailedAssertInTheKillLoopLeavesNoProcess) {
  test::TempDir dir;
  const std::string pids = dir.Sub("pids");
  const std::string log = dir.Sub("inner.log");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("FENCEDKV_TEST_PID_FILE", pids.c_str(), 1);
    setenv("FENCEDKV_TEST_FAIL_IN_KILL_LOOP", "1", 1);
    setenv("FENCEDKV_KILL_CYCLES", "1", 1);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execl("/proc/self/exe", "replication_etcd_test",
          "--gtest_filter=EtcdReplicationTest."
          "KillNineThePrimaryLosesNoAcknowledgedWrite",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  bool exited = false;
  for (int waited = 0; waited < 150000 && !exited; waited += 50) {
    exited = waitpid(child, &status, WNOHANG) == child;
    if (!exited) std::this_thread::sleep_for(milliseconds(50));
  }
  if (!exited) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  std::ifstream inner_log(log);
  const std::string output((std::istreambuf_iterator<char>(inner_log)),
                           std::istreambuf_iterator<char>());
  EXPECT_TRUE(exited) << "the inner test did not end within 150 s";
  EXPECT_TRUE(WIFEXITED(status))
      << "the inner test was ended by signal "
      << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
      << " (6: SIGABRT, std::terminate)\n"
      << output.substr(output.size() > 3000 ? output.size() - 3000 : 0);
  if (WIFEXITED(status)) {
    EXPECT_EQ(1, WEXITSTATUS(status)) << "not a failed test";
  }
  EXPECT_NE(std::string::npos, output.find("an injected failure in cycle 0"))
      << output.substr(output.size() > 3000 ? output.size() - 3000 : 0);
  // Every process it started has ended; any left is killed here, by PID.
  std::ifstream in(pids);
  std::vector<pid_t> started;
  for (pid_t pid; in >> pid;) started.push_back(pid);
  EXPECT_EQ(4u, started.size()) << "etcd and three servers";
  for (pid_t pid : started) {
    const bool ended = WaitUntil([&] { return !Running(pid); }, 5000);
    EXPECT_TRUE(ended) << "process " << pid << " outlived its test";
    if (!ended) kill(pid, SIGKILL);
  }
}

TEST(EtcdReplicationStartTest, EtcdDownAtStartIsAClearError) {
  test::TempDir dir;
  std::ofstream(dir.Sub("acl")) << "user default on nopass ~* &* +@all\n";
  Server s;
  const std::string endpoint =
      "http://127.0.0.1:" + std::to_string(test::FreePort());
  ASSERT_TRUE(s.Start(dir.path(),
                      {"--db=" + dir.Sub("db"), "--aclfile=" + dir.Sub("acl"),
                       "--shard=s1", "--etcd_endpoints=" + endpoint}));
  Client c(s.port());
  EXPECT_EQ("-READONLY this server has not yet learnt its role from etcd",
            c.Call({"SET", "a", "1", "FENCE", "1"}));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Info(s.port())["etcd_last_error"].find("Couldn't connect") !=
               std::string::npos;
      },
      5000))
      << Info(s.port())["etcd_last_error"];
  EXPECT_EQ("$nil", c.Call({"GET", "a"}));
  // Without endpoints, or with --replicaof: refused at start.
  Server bad;
  EXPECT_FALSE(
      bad.Start(dir.Sub("b"), {"--db=" + dir.Sub("db2"), "--shard=s1"}));
  s.Stop();
  // etcd never answered: the database did not join the shard (a start
  // with a mistyped --shard marks nothing), so it starts without one.
  EXPECT_EQ(std::string::npos, Slurp(dir.Sub("db/REPLICATION")).find("shard"));
  for (const char* d : {"p", "c"}) mkdir(dir.Sub(d).c_str(), 0755);
  Server plain;
  EXPECT_TRUE(plain.Start(dir.Sub("p"), {"--db=" + dir.Sub("db")}))
      << plain.Log();
  EXPECT_FALSE(
      Server().Start(dir.Sub("c"), {"--db=" + dir.Sub("db3"), "--shard=-"}));
}

// A member's database from a build that kept no shard line: its last epoch
// is etcd's, without a promotion id. Started without --shard it promoted
// itself in manual mode to the epoch etcd gives the next primary (a review
// of the shard line's fix); it is refused unless --replicaof says what it
// is.
TEST(EtcdReplicationStartTest, AnOlderMembersDatabaseNeedsItsShardOrAWord) {
  test::TempDir dir;
  for (const char* d : {"a", "b", "c", "d"}) mkdir(dir.Sub(d).c_str(), 0755);
  Server first;  // makes the database
  ASSERT_TRUE(first.Start(dir.Sub("a"), {"--db=" + dir.Sub("db")}));
  first.Stop();
  std::ofstream(dir.Sub("db/REPLICATION"), std::ios::trunc)
      << "fencedkv-replication 1\nhistory " << std::string(32, 'c')
      << "\nmax_epoch 3\nlog_epoch 3\nepochs 1:0,3:5\nfollow -\n";
  Server s;
  EXPECT_FALSE(s.Start(dir.Sub("b"), {"--db=" + dir.Sub("db")}));
  EXPECT_NE(std::string::npos, s.Log().find("epoch 3 without a promotion id"))
      << s.Log();
  ASSERT_TRUE(
      s.Start(dir.Sub("c"), {"--db=" + dir.Sub("db"), "--replicaof=none"}))
      << s.Log();
  Client c(s.port());
  EXPECT_EQ("+OK", c.Call({"SET", "a", "b", "FENCE", "1"}));
  s.Stop();
  // Its promotion now has an id: a restart as it was needs no word.
  EXPECT_TRUE(s.Start(dir.Sub("d"), {"--db=" + dir.Sub("db")})) << s.Log();
}

}  // namespace
}  // namespace fencedkv
