// Copyright (c) fencedkv authors.
//
// A primary (manual mode) in this process, on a real DB, talked to over
// real sockets: the commit rule's races that need a hook inside the process.
// The test sets the in-sync set on the commit tracker itself (as the
// coordinator does) with a replica that never acknowledges, and moves it at
// the moment it wants (a sync point where a write's sequence is released).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencedkv/db.h"

#include "acl.h"
#include "lease_slot.h"
#include "replication.h"
#include "server.h"
#include "server_test_util.h"
#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

using test::RespTestClient;
using Clock = std::chrono::steady_clock;

// A replica that is in the in-sync set but never acknowledges anything.
constexpr char kSilentReplica[] = "127.0.0.1:1";

// A DB, its lease slot, a Replication (manual mode, primary) and a server
// on a free port, in this process; stopped in main.cc's order.
class InProcessPrimary {
 public:
  // With `sync` (--sync), writes go through the database thread.
  Status Start(const std::string& dir, int min_insync_replicas,
               bool sync = false) {
    Options o;
    o.create_if_missing = true;
    Status s = DB::Open(o, dir + "/db", &db_);
    if (!s.ok()) return s;
    leases_ = std::make_unique<server::LeaseSlot>(db_.get(), LeaseOptions());
    server::ServerOptions so;
    so.port = 0;  // the kernel's choice, bound at once (the default, 7379,
                  // clashed when ctest ran two of these tests together)
    so.sync = sync;
    // Everything, admin commands included (a fake replica's handshake).
    s = server::Acl::Parse("user default on nopass ~* &* +@all", "test", "",
                           &so.acl);
    if (!s.ok()) return s;
    server_ = std::make_unique<server::Server>(so);
    s = server_->Listen();
    if (!s.ok()) return s;
    server::ReplicationOptions ro;
    ro.db_path = dir + "/db";
    ro.self_addr = "127.0.0.1:" + std::to_string(server_->port());
    ro.min_insync_replicas = min_insync_replicas;
    ro.sync = sync;
    repl_ = std::make_unique<server::Replication>(ro, db_.get(), leases_.get());
    s = repl_->Start("");
    if (s.ok()) s = server_->Start(db_.get(), leases_.get(), repl_.get());
    return s;
  }
  void Stop() {
    if (repl_ != nullptr) repl_->Stop();
    if (server_ != nullptr) server_->Stop(std::chrono::milliseconds(5000));
    server_.reset();
    repl_.reset();
    leases_.reset();
    db_.reset();
  }
  ~InProcessPrimary() { Stop(); }
  server::Replication* repl() { return repl_.get(); }
  server::CommitTracker& tracker() { return repl_->tracker(); }
  DB* db() { return db_.get(); }
  server::Server* server() { return server_.get(); }
  int port() const { return server_->port(); }

 private:
  std::unique_ptr<DB> db_;
  std::unique_ptr<server::LeaseSlot> leases_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<server::Replication> repl_;
};

class ReplicationInProcessTest : public testing::Test {
 protected:
  void TearDown() override {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }
  // The fields of `cmdstat_<cmd>` (calls=..,failed_calls=..) on `port`.
  static std::string CmdStat(int port, const std::string& cmd) {
    return test::InfoFields(port, "commandstats")["cmdstat_" + cmd];
  }
  test::TempDir dir_;
};

// The ISR falls below --min_insync_replicas in the instant between a write's
// sequence being released (it is in the primary's WAL) and its reply: it
// must not be acknowledged. It gets -NOREPLICAS (the write was applied here
// and may survive), and the next write is refused before it runs. Before
// the fix the reply path saw that no replica was required any more and
// answered +OK with an ISR of 1 below the minimum of 2.
TEST_F(ReplicationInProcessTest, NoAckOnceTheIsrFellBelowTheMinimum) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/2));
  for (const bool grouped : {true, false}) {
    SCOPED_TRACE(grouped ? "grouped SET" : "executed SET (with GET)");
    // Two members: writes are admitted (and would wait for the replica).
    p.tracker().SetIsr({kSilentReplica}, 2);
    std::atomic<int> fired{0};
    SyncPoint::Get()->SetCallback("Connection::WriteReleased", [&](void*) {
      // The replica leaves the ISR now: one member, below the minimum.
      if (fired.fetch_add(1) == 0) p.tracker().SetIsr({}, 1);
    });
    SyncPoint::Get()->EnableProcessing();
    RespTestClient c(p.port(), 5000);
    const std::string key = grouped ? "g" : "e";
    // SET ... GET is not a plain SET: it takes Execute, not the group.
    const std::vector<std::string> set =
        grouped
            ? std::vector<std::string>{"SET", key, "v", "FENCE", "1"}
            : std::vector<std::string>{"SET", key, "v", "GET", "FENCE", "1"};
    const std::string reply = c.Call(set);
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    EXPECT_EQ(1, fired.load());
    EXPECT_EQ(0u, reply.rfind("-NOREPLICAS", 0))
        << "acknowledged with an ISR below min_insync_replicas: " << reply;
    // It was applied here: the error says it may survive.
    EXPECT_NE(std::string::npos, reply.find("applied")) << reply;
    EXPECT_EQ("$v", c.Call({"GET", key}));
    // Below the minimum, the next write is refused before it runs.
    EXPECT_EQ(
        0u,
        c.Call({"SET", key + "2", "v", "FENCE", "1"}).rfind("-NOREPLICAS", 0));
    EXPECT_EQ("$nil", c.Call({"GET", key + "2"}));
  }
}

// INFO commandstats counts a write whose reply waited for the replicas by
// that reply once decided: here -NOREPLICAS (the ISR fell below the
// minimum while it waited), a failed call. Before the fix it was counted
// as a success when it was held, before any replica acknowledged it.
TEST_F(ReplicationInProcessTest, CommandStatsCountAHeldWriteByItsFinalReply) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/2));
  int calls = 0;
  for (const bool grouped : {true, false}) {
    SCOPED_TRACE(grouped ? "grouped SET" : "executed SET (with GET)");
    // The write waits for a replica that never acknowledges.
    p.tracker().SetIsr({kSilentReplica}, 2);
    RespTestClient c(p.port(), 5000);
    const std::string key = grouped ? "g" : "e";
    c.Send(grouped ? std::vector<std::string>{"SET", key, "v", "FENCE", "1"}
                   : std::vector<std::string>{"SET", key, "v", "GET", "FENCE",
                                              "1"});
    ASSERT_TRUE(test::WaitUntil(
        [&] {
          std::string v;
          return p.db()->Get(ReadOptions(), key, &v).ok();
        },
        5000))
        << "the write was not applied";
    // The replica leaves the ISR: below the minimum, the held write fails.
    p.tracker().SetIsr({}, 1);
    const std::string reply = c.Read();
    EXPECT_EQ(0u, reply.rfind("-NOREPLICAS", 0)) << reply;
    ++calls;
    const std::string stat = CmdStat(p.port(), "set");
    EXPECT_NE(std::string::npos,
              stat.find("calls=" + std::to_string(calls) + ","))
        << stat;
    EXPECT_NE(std::string::npos,
              stat.find("failed_calls=" + std::to_string(calls)))
        << "a held write answered -NOREPLICAS counted as a success: " << stat;
  }
}

// WAIT on a primary that stops being one ends at once, as Redis's does
// when a master becomes a replica: -UNBLOCKED, then the connection closes.
// Before the fix it waited for its whole timeout (30 s here).
TEST_F(ReplicationInProcessTest, WaitEndsWhenThePrimaryStepsDown) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/1));
  RespTestClient c(p.port(), 10000);
  ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "1"}));
  c.Send({"WAIT", "1", "30000"});  // no replica: it waits
  ASSERT_TRUE(test::WaitUntil(
      [&] { return p.server()->stats().executing() == 1; }, 5000))
      << "WAIT is not waiting";
  const auto t0 = Clock::now();
  std::string line;
  // Not a fencedkv server on port 1: the new role is what counts here.
  ASSERT_FENCEDKV_OK(p.repl()->ReplicaOf("127.0.0.1:1", &line));
  const std::string reply = c.Read();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0)
          .count();
  EXPECT_EQ(
      "-UNBLOCKED force unblock from blocking operation, instance state "
      "changed (master -> replica?)",
      reply);
  EXPECT_LT(ms, 5000) << "WAIT answered " << ms << " ms after the step-down";
  EXPECT_EQ("EOF", c.Read());  // closed after the reply, as Redis
}

// A primary with --sync becomes a replica while a client's write is still
// queued for the database thread (behind another group's fsync; a loop
// writes a small group itself only while that thread is idle). That write
// must not reach the database: it would take sequence numbers of the new
// primary's log after the position the replica thread reads, and a later
// handshake could take the deposed primary's batch for the new primary's
// (an acknowledged write of the new primary silently missing here). It is
// refused with -READONLY and the database holds nothing of it. Before the
// fix the queued write was applied after the role change.
TEST_F(ReplicationInProcessTest,
       AWriteQueuedWhenThePrimaryStepsDownIsNotApplied) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/1,
                             /*sync=*/true));
  std::promise<void> parked_promise, release_promise;
  std::shared_future<void> release = release_promise.get_future().share();
  std::atomic<bool> armed{true};
  std::atomic<int> flushes{0};
  // The first group parks on the database thread after its write.
  SyncPoint::Get()->SetCallback("Server::WriteGroup:Result", [&](void*) {
    if (armed.exchange(false)) {
      parked_promise.set_value();
      release.wait();
    }
  });
  SyncPoint::Get()->SetCallback("Server::Flush:Batches",
                                [&](void*) { flushes.fetch_add(1); });
  SyncPoint::Get()->EnableProcessing();
  RespTestClient first(p.port(), 10000), queued(p.port(), 10000);
  // More batches than a loop writes itself (server::kInlineSyncBatches):
  // the group goes to the database thread, which parks with it.
  std::string group;
  for (size_t i = 0; i <= server::kInlineSyncBatches; ++i) {
    group += RespTestClient::Encode(
        {"SET", "first" + std::to_string(i), "v", "FENCE", "1"});
  }
  first.SendRaw(group);
  parked_promise.get_future().wait();
  queued.Send({"SET", "queued", "v", "FENCE", "1"});
  ASSERT_TRUE(test::WaitUntil([&] { return flushes.load() == 2; }, 5000))
      << "the second write was not handed to the database thread";
  const uint64_t before = p.db()->GetLatestSequenceNumber();
  std::string line;
  // Not a fencedkv server on port 1: the new role is what counts here.
  ASSERT_FENCEDKV_OK(p.repl()->ReplicaOf("127.0.0.1:1", &line));
  release_promise.set_value();
  // The first write was in the database before the role changed; its
  // client is told the primary stepped down (it may or may not survive).
  EXPECT_EQ(0u, first.Read().rfind("-READONLY", 0));
  const std::string reply = queued.Read();
  EXPECT_EQ(0u, reply.rfind("-READONLY", 0)) << reply;
  std::string v;
  const Status s = p.db()->Get(ReadOptions(), "queued", &v);
  EXPECT_TRUE(s.IsNotFound())
      << "the queued write was applied: " << s.ToString() << " " << v;
  EXPECT_EQ(before, p.db()->GetLatestSequenceNumber());
}

// A replica's acknowledgement counts only up to what it was sent. A peer
// that says it has everything (FENCEDKV.ACK 2^64-1) must not get a write
// acknowledged that no replica has: its link is dropped instead. Before the
// fix the write waiting for it was answered +OK at once.
TEST_F(ReplicationInProcessTest, AnAckPastWhatWasSentIsRefused) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/2));
  auto info = test::InfoFields(p.port(), "replication");
  const std::string fake_addr = "127.0.0.1:5555";
  RespTestClient fake(p.port(), 10000);
  const std::string epoch = info["repl_epoch"];
  const std::string reply =
      fake.Call({"FENCEDKV.SYNC", info["repl_history"], fake_addr, epoch, epoch,
                 std::to_string(p.db()->GetLatestSequenceNumber()), "key",
                 "monotonic", "nosync"});
  ASSERT_EQ(0u, reply.rfind("+CONTINUE", 0)) << reply;
  p.tracker().SetIsr({fake_addr}, 2);
  RespTestClient c(p.port(), 1500);
  c.Send({"SET", "k", "v", "FENCE", "1"});
  fake.Send({"FENCEDKV.ACK", "18446744073709551615"});
  EXPECT_NE("+OK", c.Read()) << "acknowledged on a replica's word alone";
  // (The SET's batch may have been streamed to it first.)
  std::string last;
  for (int i = 0; i < 10 && last != "EOF"; ++i) last = fake.Read();
  EXPECT_EQ("EOF", last) << "the lying link is still up";
  p.tracker().SetIsr({}, 1);  // (lets the server stop without waiting)
}

// Manual mode keeps etcd mode's join rule: a replica enters the ISR only
// once it has every write acknowledged without it (Kafka: a follower
// joins at the high watermark). Before, it joined as soon as its lag was
// within half of replica_lag_ms and it was 4,096 sequence numbers close,
// so INFO listed as in sync a replica that lacked acknowledged writes (the
// one an operator would promote).
TEST_F(ReplicationInProcessTest, AReplicaJoinsTheIsrOnlyWithEveryAckedWrite) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/1));
  // The coordinator's ticks held until the acknowledged write is in.
  std::mutex mu;
  std::condition_variable cv;
  bool hold = true;
  SyncPoint::Get()->SetCallback("Replication::Tick", [&](void*) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !hold; });
  });
  SyncPoint::Get()->EnableProcessing();
  auto info = test::InfoFields(p.port(), "replication");
  const std::string fake_addr = "127.0.0.1:5557";
  RespTestClient fake(p.port(), 10000);
  const std::string epoch = info["repl_epoch"];
  const uint64_t start = p.db()->GetLatestSequenceNumber();
  const std::string reply =
      fake.Call({"FENCEDKV.SYNC", info["repl_history"], fake_addr, epoch, epoch,
                 std::to_string(start), "key", "monotonic", "nosync"});
  ASSERT_EQ(0u, reply.rfind("+CONTINUE", 0)) << reply;
  fake.Send({"FENCEDKV.ACK", std::to_string(start)});
  for (int i = 0; i < 200 && p.tracker().Acked(fake_addr) < start; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Caught up now (INFO reads the replicas' progress).
  info = test::InfoFields(p.port(), "replication");
  RespTestClient c(p.port(), 5000);
  ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "1"}));  // alone
  const uint64_t acked_write = p.db()->GetLatestSequenceNumber();
  ASSERT_GT(acked_write, start);
  {
    std::lock_guard<std::mutex> lock(mu);
    hold = false;
  }
  cv.notify_all();
  // Ticks run; the replica has not acknowledged the write.
  const auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) {
    info = test::InfoFields(p.port(), "replication");
    ASSERT_EQ(std::string::npos, info["isr"].find(fake_addr))
        << "in the ISR without the acknowledged write at " << acked_write
        << " (it acknowledged " << p.tracker().Acked(fake_addr) << ")";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Once it has it, it joins.
  fake.Send({"FENCEDKV.ACK", std::to_string(acked_write)});
  bool joined = false;
  for (int i = 0; i < 300 && !joined; ++i) {
    joined = test::InfoFields(p.port(), "replication")["isr"].find(fake_addr) !=
             std::string::npos;
    if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(joined) << "it acknowledged everything and did not join";
  SyncPoint::Get()->DisableProcessing();
  SyncPoint::Get()->ClearAllCallbacks();
  fake.Close();
  p.tracker().SetIsr({}, 1);  // (lets the server stop without waiting)
}

// Two replicas announcing one address (a copied configuration, or a peer
// lying about who it is): the one connected keeps the address's place in
// the ISR and its acknowledgements; the other node is refused at its
// handshake and can acknowledge nothing for it. A write waits for the node
// connected under the address and is acknowledged by its ack alone. (The
// same node connecting again, a restarted replica, takes over its place.)
TEST_F(ReplicationInProcessTest, ASecondNodeUnderAConnectedReplicasAddress) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/2));
  auto info = test::InfoFields(p.port(), "replication");
  const std::string addr = "127.0.0.1:5556";
  const std::string owner(32, 'a'), other_node(32, 'b');
  auto handshake = [&](RespTestClient* c, const std::string& node) {
    return c->Call({"FENCEDKV.SYNC", info["repl_history"], addr,
                    info["repl_epoch"], info["repl_epoch"],
                    std::to_string(p.db()->GetLatestSequenceNumber()), "key",
                    "monotonic", "nosync", node});
  };
  RespTestClient first(p.port(), 10000);
  const std::string continued = handshake(&first, owner);
  ASSERT_EQ(0u, continued.rfind("+CONTINUE", 0)) << continued;
  // It has everything (its handshake position is the latest): it joins the
  // ISR on the coordinator's next pass (set by hand before, which that pass
  // undid while the replica was joining).
  bool joined = false;
  for (int i = 0; i < 300 && !joined; ++i) {
    joined = test::InfoFields(p.port(), "replication")["isr"].find(addr) !=
             std::string::npos;
    if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(joined);

  RespTestClient second(p.port(), 3000);
  const std::string refused = handshake(&second, other_node);
  EXPECT_EQ(0u, refused.rfind("-ERR another replica (node " + owner, 0))
      << refused;
  EXPECT_TRUE(second.PeerClosed()) << "the refused link stays open";
  EXPECT_EQ("1", test::InfoFields(p.port(), "replication")["connected_slaves"]);

  // A write waits for the owner; an ack on the refused node's behalf (on a
  // new connection, without a handshake) does not count.
  RespTestClient c(p.port(), 10000);
  c.Send({"SET", "k", "v", "FENCE", "1"});
  std::string frame;  // the write's batch (after any pings)
  for (int i = 0; i < 50 && frame.rfind("*[$FENCEDKV.LOG", 0) != 0; ++i) {
    frame = first.Read();
  }
  ASSERT_EQ(0u, frame.rfind("*[$FENCEDKV.LOG", 0)) << frame.substr(0, 64);
  const std::string seq = std::to_string(p.db()->GetLatestSequenceNumber());
  const uint64_t had = p.tracker().Acked(addr);  // (its handshake position)
  EXPECT_LT(had, std::stoull(seq));
  RespTestClient liar(p.port(), 3000);
  liar.Send({"FENCEDKV.ACK", seq});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(had, p.tracker().Acked(addr)) << "acknowledged by another node";
  first.Send({"FENCEDKV.ACK", seq});
  EXPECT_EQ("+OK", c.Read());
  EXPECT_EQ(std::stoull(seq), p.tracker().Acked(addr));

  // The owner again (restarted): it takes over its own place.
  RespTestClient again(p.port(), 10000);
  const std::string back = handshake(&again, owner);
  EXPECT_EQ(0u, back.rfind("+CONTINUE", 0)) << back;
  p.tracker().SetIsr({}, 1);  // (lets the server stop without waiting)
}

// In etcd mode the ISR names each member's node: a link of another node
// under a member's address (its own handshake accepted, the member's link
// gone) acknowledges nothing for the member until the record names it.
// Before, any link's acks counted, while the record still named a node
// that lacked the write (and could take over).
TEST_F(ReplicationInProcessTest,
       AnotherNodesLinkAcknowledgesNothingForAMember) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/2));
  auto info = test::InfoFields(p.port(), "replication");
  const std::string addr = "127.0.0.1:5557";
  const std::string member(32, 'a'), other_node(32, 'b');
  RespTestClient link(p.port(), 10000);
  const std::string continued = link.Call(
      {"FENCEDKV.SYNC", info["repl_history"], addr, info["repl_epoch"],
       info["repl_epoch"], std::to_string(p.db()->GetLatestSequenceNumber()),
       "key", "monotonic", "nosync", other_node});
  ASSERT_EQ(0u, continued.rfind("+CONTINUE", 0)) << continued;
  // (Manual mode puts the link in the ISR, nodes unnamed; then the record's
  // view is played here.)
  ASSERT_TRUE(test::WaitUntil(
      [&] {
        return test::InfoFields(p.port(), "replication")["isr_size"] == "2";
      },
      5000));
  p.tracker().SetIsr({addr}, 2, {{addr, member}});
  RespTestClient c(p.port(), 1000);
  c.Send({"SET", "k", "v", "FENCE", "1"});
  std::string frame;
  for (int i = 0; i < 50 && frame.rfind("*[$FENCEDKV.LOG", 0) != 0; ++i) {
    frame = link.Read();
  }
  ASSERT_EQ(0u, frame.rfind("*[$FENCEDKV.LOG", 0)) << frame.substr(0, 64);
  const std::string seq = std::to_string(p.db()->GetLatestSequenceNumber());
  link.Send({"FENCEDKV.ACK", seq});
  EXPECT_EQ("TIMEOUT", c.Read()) << "acknowledged by another node's link";
  // The record names that node now: its ack counts.
  p.tracker().SetIsr({addr}, 2, {{addr, other_node}});
  EXPECT_EQ("+OK", c.Read());
  p.tracker().SetIsr({}, 1);  // (lets the server stop without waiting)
}

// While replies wait for replicas, one pass of the loop over many
// pipelining connections goes to RocksDB, and so to the replica links, in
// parts of about 256 writes (server.cc, kAckedGroup): the replicas apply one
// part while the loop parses the next. Without replicas to wait for, the
// pass stays one group. Before, it was one group of all 400 either way.
TEST_F(ReplicationInProcessTest, APassOfManyWritesGoesOutInParts) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/1));
  constexpr int kClients = 4, kEach = 100;
  for (const bool acks : {false, true}) {
    SCOPED_TRACE(acks ? "replies wait for a replica" : "no replica");
    const std::string tag = acks ? "a" : "n";
    if (acks) p.tracker().SetIsr({kSilentReplica}, 2);
    std::mutex mu;
    std::vector<size_t> groups;
    std::atomic<bool> parked{false};
    SyncPoint::Get()->SetCallback("Server::Flush:Batches", [&](void* arg) {
      const size_t n =
          static_cast<std::vector<const WriteBatch*>*>(arg)->size();
      {
        std::lock_guard<std::mutex> lock(mu);
        groups.push_back(n);
        if (groups.size() > 1) return;
      }
      // The first write parks the loop: the pipelines below arrive
      // meanwhile (a second is ample even under load), and its next pass
      // finds them all.
      parked.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    });
    // Connected (and each waiting in a read) before the loop is parked.
    std::vector<std::unique_ptr<RespTestClient>> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.push_back(std::make_unique<RespTestClient>(p.port(), 10000));
      ASSERT_EQ("+PONG", clients.back()->Call({"PING"}));
    }
    SyncPoint::Get()->EnableProcessing();
    RespTestClient first(p.port(), 10000);
    first.Send({"SET", tag + "first", "v", "FENCE", "1"});
    ASSERT_TRUE(test::WaitUntil([&] { return parked.load(); }, 5000));
    for (int c = 0; c < kClients; ++c) {
      std::string pipeline;
      for (int i = 0; i < kEach; ++i) {
        pipeline += RespTestClient::Encode(
            {"SET", tag + std::to_string(c) + ":" + std::to_string(i), "v",
             "FENCE", "1"});
      }
      ASSERT_EQ(pipeline.size(), clients[c]->SendRaw(pipeline));
    }
    auto written = [&] {
      std::lock_guard<std::mutex> lock(mu);
      size_t sum = 0;
      for (size_t g : groups) sum += g;
      return sum;
    };
    ASSERT_TRUE(test::WaitUntil(
        [&] { return written() == 1 + kClients * kEach; }, 10000))
        << written() << " writes reached RocksDB";
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    if (acks) p.tracker().SetIsr({}, 1);  // the held replies commit
    EXPECT_EQ("+OK", first.Read());
    for (int c = 0; c < kClients; ++c) {
      for (int i = 0; i < kEach; ++i) {
        ASSERT_EQ("+OK", clients[c]->Read()) << "client " << c << " #" << i;
      }
    }
    std::string v;
    EXPECT_FENCEDKV_OK(p.db()->Get(
        ReadOptions(),
        tag + std::to_string(kClients - 1) + ":" + std::to_string(kEach - 1),
        &v));
    std::lock_guard<std::mutex> lock(mu);
    const std::vector<size_t> pass(groups.begin() + 1, groups.end());
    if (!acks) {
      EXPECT_EQ(std::vector<size_t>{kClients * kEach}, pass);
    } else {
      // 3 connections reach 256: a part of 300, then the rest.
      EXPECT_EQ((std::vector<size_t>{3 * kEach, kEach}), pass);
    }
  }
}

// WAIT with the largest timeout waits (for ever, as with 0). Before, now +
// timeout overflowed: undefined behaviour (signed overflow), which the
// UBSan build (scripts/sanitize.sh address) stops at; in a plain build it
// wrapped to a negative deadline, which the tracker happens to read as none.
TEST_F(ReplicationInProcessTest, WaitWithTheLargestTimeoutWaits) {
  InProcessPrimary p;
  ASSERT_FENCEDKV_OK(p.Start(dir_.path(), /*min_insync_replicas=*/1));
  RespTestClient c(p.port(), 10000);
  ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "1"}));
  c.Send({"WAIT", "1", "9223372036854775807"});
  ASSERT_TRUE(test::WaitUntil(
      [&] { return p.server()->stats().executing() == 1; }, 5000))
      << "WAIT is not waiting";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(1, p.server()->stats().executing()) << "WAIT answered";
}

// A replica's full copy is in place and the restart onto it asked for:
// REPLICAOF NO ONE (or another primary) must wait for that restart, which
// swaps the copy in and follows the copy's primary again. Before, the
// promotion was answered +OK, took writes, and the restart undid it.
// (In-process, no restart happens: the state stays pending.)
TEST_F(ReplicationInProcessTest, NoRoleChangeWhileAFullCopyWaitsForTheRestart) {
  InProcessPrimary a, b;
  test::TempDir bdir;
  ASSERT_FENCEDKV_OK(a.Start(dir_.path(), /*min_insync_replicas=*/1));
  ASSERT_FENCEDKV_OK(b.Start(bdir.path(), /*min_insync_replicas=*/1));
  {
    RespTestClient c(a.port());
    ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "1"}));
  }
  std::string reply;
  ASSERT_FENCEDKV_OK(
      b.repl()->ReplicaOf("127.0.0.1:" + std::to_string(a.port()), &reply));
  // b's own history is another: a full copy, ready once renamed in place.
  ASSERT_TRUE(test::WaitUntil(
      [&] { return access((bdir.path() + "/db.fullsync").c_str(), F_OK) == 0; },
      15000));
  Status s = b.repl()->ReplicaOf("", &reply);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  s = b.repl()->ReplicaOf("127.0.0.1:1", &reply);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_TRUE(b.repl()->read_only()->load());
  RespTestClient cb(b.port());
  EXPECT_EQ(0u, cb.Call({"SET", "k", "w", "FENCE", "2"}).find("-READONLY"));
}

// A full copy left ready with no restart to take it (its receipt failed
// after the rename): a promotion drops it, or a later start would swap it
// in over the promotion's writes. Before, it stayed.
TEST_F(ReplicationInProcessTest, APromotionDropsAnUnusedReadyCopy) {
  InProcessPrimary b;
  ASSERT_FENCEDKV_OK(b.Start(dir_.path(), /*min_insync_replicas=*/1));
  std::string reply;
  ASSERT_FENCEDKV_OK(b.repl()->ReplicaOf("127.0.0.1:1", &reply));  // no one
  const std::string ready = dir_.path() + "/db.fullsync";
  ASSERT_EQ(0, mkdir(ready.c_str(), 0755));
  std::ofstream(ready + "/CURRENT") << "MANIFEST-000001\n";
  ASSERT_FENCEDKV_OK(b.repl()->ReplicaOf("", &reply));
  EXPECT_NE(0, access(ready.c_str(), F_OK)) << ready << " is still there";
  EXPECT_NE(0, access((ready + ".tmp").c_str(), F_OK));
  EXPECT_FALSE(b.repl()->read_only()->load());
}

}  // namespace
}  // namespace fencedkv
