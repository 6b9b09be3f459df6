// Copyright (c) fencedkv authors.
//
// fencedkv-server in this process, on a real DB, talked to over real
// sockets: the faults and races that need a hook inside the process -- a
// file system that fails reads, a sync point, the process's own file
// descriptor limit.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "fast_path.h"
#include "server.h"
#include "server_test_util.h"
#include "util/sync_point.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

using test::RespTestClient;

// Fails every read of a file opened for random access (SST data, index and
// filter blocks) while fail_reads is set: an I/O error or a bad disk under
// the fence check's read of a stored max.
class FailingReadsFs : public rocksdb::FileSystemWrapper {
 public:
  FailingReadsFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  static const char* kClassName() { return "FailingReadsFs"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
      rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> file;
    rocksdb::IOStatus s =
        target()->NewRandomAccessFile(name, options, &file, dbg);
    if (s.ok()) result->reset(new File(std::move(file), &fail_reads));
    return s;
  }

  std::atomic<bool> fail_reads{false};

 private:
  class File : public rocksdb::FSRandomAccessFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSRandomAccessFile> file,
         const std::atomic<bool>* fail)
        : FSRandomAccessFileOwnerWrapper(std::move(file)), fail_(fail) {}
    rocksdb::IOStatus Read(uint64_t offset, size_t n,
                           const rocksdb::IOOptions& options,
                           rocksdb::Slice* result, char* scratch,
                           rocksdb::IODebugContext* dbg) const override {
      if (fail_->load())
        return rocksdb::IOStatus::IOError("injected read error");
      return target()->Read(offset, n, options, result, scratch, dbg);
    }
    rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n,
                                const rocksdb::IOOptions& options,
                                rocksdb::IODebugContext* dbg) override {
      if (!fail_->load()) return target()->MultiRead(reqs, n, options, dbg);
      for (size_t i = 0; i < n; ++i)
        reqs[i].status = rocksdb::IOStatus::IOError("injected");
      return rocksdb::IOStatus::IOError("injected read error");
    }

   private:
    const std::atomic<bool>* fail_;
  };
};

// A DB, its lease service and a server on a free port, in this process.
class InProcessServer {
 public:
  Status Start(const std::string& dir, const Options& db_options,
               const server::ServerOptions& options) {
    Status s = DB::Open(db_options, dir, &db_);
    if (s.ok()) s = LeaseService::Open(db_.get(), LeaseOptions(), &leases_);
    if (!s.ok()) return s;
    server::ServerOptions so = options;
    so.port = 0;
    server_ = std::make_unique<server::Server>(so);
    s = server_->Listen();
    if (s.ok()) s = server_->Start(db_.get(), leases_.get());
    return s;
  }
  // Stops the server (deadline `ms`) and closes the DB.
  void Stop(int ms = 5000) {
    if (server_ != nullptr) server_->Stop(std::chrono::milliseconds(ms));
    server_.reset();
    leases_.reset();
    db_.reset();
  }
  ~InProcessServer() { Stop(0); }
  server::Server* server() { return server_.get(); }
  DB* db() { return db_.get(); }
  int port() const { return server_->port(); }

 private:
  std::unique_ptr<DB> db_;
  std::unique_ptr<LeaseService> leases_;
  std::unique_ptr<server::Server> server_;
};

class ServerInProcessTest : public testing::Test {
 protected:
  void TearDown() override {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }
  test::TempDir dir_;
};

// ReachesSelf (etcd mode's test of a member key under this server's name):
// only a connection this server's own acceptor takes counts.
TEST_F(ServerInProcessTest, ReachesSelfTellsItsOwnAddressFromOthers) {
  Options o;
  o.create_if_missing = true;
  test::TempDir other_dir;
  InProcessServer a, b;
  ASSERT_FENCEDKV_OK(a.Start(dir_.path(), o, server::ServerOptions()));
  ASSERT_FENCEDKV_OK(b.Start(other_dir.path(), o, server::ServerOptions()));
  const std::chrono::milliseconds timeout(500);
  auto at = [](int port) { return "127.0.0.1:" + std::to_string(port); };
  EXPECT_EQ(server::AddressReach::kThisServer,
            a.server()->ReachesSelf(at(a.port()), timeout));
  EXPECT_EQ(server::AddressReach::kElsewhere,
            a.server()->ReachesSelf(at(b.port()), timeout));
  EXPECT_EQ(server::AddressReach::kThisServer,
            b.server()->ReachesSelf(at(b.port()), timeout));
  // Nobody there: refused.
  const int gone = b.port();
  b.Stop();
  EXPECT_EQ(server::AddressReach::kElsewhere,
            a.server()->ReachesSelf(at(gone), timeout));
  // Other connections coming and going meanwhile do not confuse it.
  std::vector<std::unique_ptr<test::RespTestClient>> clients;
  clients.reserve(20);
  for (int i = 0; i < 20; ++i) {
    clients.push_back(std::make_unique<test::RespTestClient>(a.port()));
  }
  EXPECT_EQ(server::AddressReach::kThisServer,
            a.server()->ReachesSelf(at(a.port()), timeout));
  // Before Start nothing is accepted: unknown, not "elsewhere".
  server::ServerOptions so;
  so.port = 0;
  server::Server idle(so);
  ASSERT_FENCEDKV_OK(idle.Listen());
  EXPECT_EQ(server::AddressReach::kUnknown,
            idle.ReachesSelf(at(idle.port()), timeout));
  idle.Stop(std::chrono::milliseconds(0));
}

// Issue 10.2: when DB::WriteGroup failed but left batches' statuses OK (a
// failed read of a stored max), both the loop's group write and the database
// thread's (--sync) answered +OK for writes that never happened. Checked
// with real failures (reads, the RocksDB write), and with an engine that
// returns an error but leaves the statuses OK (the server's own guard).
TEST_F(ServerInProcessTest, FailedGroupWritesAreNeverAcknowledged) {
  // The loop's write, --sync on the loop (a small group), --sync on the
  // database thread (forced).
  for (int way = 0; way < 3; ++way) {
    const bool sync = way > 0;
    SCOPED_TRACE(way == 0   ? "loop"
                 : way == 1 ? "--sync, on the loop"
                            : "--sync, database thread");
    test::TempDir dir;
    auto fs = std::make_shared<FailingReadsFs>();
    std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
    Options o;
    o.create_if_missing = true;
    o.env = env.get();
    o.block_cache_size = 0;  // every read goes to the file
    {
      std::unique_ptr<DB> db;
      ASSERT_FENCEDKV_OK(DB::Open(o, dir.path(), &db));
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k1", "v1", 5));
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "k2", "v2", 5));
      ASSERT_FENCEDKV_OK(db->Put(WriteOptions(), "other", "v", 7));
      ASSERT_FENCEDKV_OK(db->Flush());
    }
    // Reopened: the maxima are known only from the SST file, so a write with
    // token 5 (below the high-water mark, 7) must read them.
    InProcessServer s;
    server::ServerOptions so;
    so.sync = sync;
    if (way == 2) so.sync_inline_batches = 0;
    ASSERT_FENCEDKV_OK(s.Start(dir.path(), o, so));
    RespTestClient c(s.port());
    ASSERT_TRUE(c.connected());
    fs->fail_reads = true;
    c.SendRaw(RespTestClient::Encode({"SET", "k1", "a", "FENCE", "5"}) +
              RespTestClient::Encode({"SET", "k2", "b", "FENCE", "5"}));
    EXPECT_EQ("-IOERR", c.Read().substr(0, 6));
    EXPECT_EQ("-IOERR", c.Read().substr(0, 6));
    fs->fail_reads = false;
    EXPECT_EQ("$v1", c.Call({"GET", "k1"}));
    EXPECT_EQ("$v2", c.Call({"GET", "k2"}));

    // The RocksDB write fails (a full disk, say).
    SyncPoint::Get()->SetCallback("DBImpl::Write:RocksDBWrite", [](void* arg) {
      *static_cast<rocksdb::Status*>(arg) =
          rocksdb::Status::IOError("injected write error");
    });
    SyncPoint::Get()->EnableProcessing();
    c.SendRaw(
        RespTestClient::Encode({"SET", "k3", "c", "FENCE", "9"}) +
        RespTestClient::Encode({"MSET", "k4", "d", "k5", "e", "FENCE", "9"}));
    EXPECT_EQ("-IOERR", c.Read().substr(0, 6));
    EXPECT_EQ("-IOERR", c.Read().substr(0, 6));
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    EXPECT_EQ("$nil", c.Call({"GET", "k3"}));
    EXPECT_EQ("$nil", c.Call({"GET", "k4"}));
    // The fault cleared:
    EXPECT_EQ("+OK", c.Call({"SET", "k3", "c", "FENCE", "9"}));

    // An engine that returns an error but leaves the batches' statuses OK
    // (as WriteGroup did for a failed read) still gets no +OK out.
    SyncPoint::Get()->SetCallback("Server::WriteGroup:Result", [](void* arg) {
      *static_cast<Status*>(arg) = Status::IOError("injected group error");
    });
    SyncPoint::Get()->EnableProcessing();
    c.SendRaw(RespTestClient::Encode({"SET", "k6", "f", "FENCE", "9"}) +
              RespTestClient::Encode({"SET", "k7", "g", "FENCE", "9"}));
    EXPECT_EQ("-IOERR injected group error", c.Read());
    EXPECT_EQ("-IOERR injected group error", c.Read());
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    c.Close();
    s.Stop();
  }
}

// Issue 11.2, forced: shutdown begins between two pipelined SETs of one
// group. The first is applied and answered +OK, then the second gets
// -SHUTDOWN and is not applied -- in that order (the -SHUTDOWN used to come
// first, shifting every reply by one).
TEST_F(ServerInProcessTest, ShutdownKeepsGroupedRepliesInOrder) {
  Options o;
  o.create_if_missing = true;
  InProcessServer s;
  ASSERT_FENCEDKV_OK(s.Start(dir_.path(), o, server::ServerOptions()));
  std::thread stopper;
  std::atomic<bool> fired{false};
  server::Server* server = s.server();
  SyncPoint::Get()->SetCallback("Connection::Process:Grouped", [&](void*) {
    if (fired.exchange(true)) return;
    // On the loop, between the two SETs: shutdown begins now.
    stopper = std::thread(
        [server] { server->Stop(std::chrono::milliseconds(5000)); });
    while (!server->stopping()) std::this_thread::yield();
  });
  SyncPoint::Get()->EnableProcessing();
  RespTestClient c(s.port());
  c.SendRaw(RespTestClient::Encode({"SET", "a", "1", "FENCE", "1"}) +
            RespTestClient::Encode({"SET", "b", "2", "FENCE", "1"}));
  EXPECT_EQ("+OK", c.Read());
  EXPECT_EQ("-SHUTDOWN the server is shutting down", c.Read());
  EXPECT_EQ("EOF", c.Read());
  ASSERT_TRUE(fired.load());
  stopper.join();
  SyncPoint::Get()->DisableProcessing();
  s.Stop();
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(o, dir_.path(), &db));
  std::string v;
  EXPECT_FENCEDKV_OK(db->Get(ReadOptions(), "a", &v));
  EXPECT_TRUE(db->Get(ReadOptions(), "b", &v).IsNotFound());
}

const char* RouteName(server::Route r) {
  switch (r) {
    case server::Route::kExecute:
      return "execute";
    case server::Route::kBatchedGet:
      return "get";
    case server::Route::kGroupedWrite:
      return "write";
    case server::Route::kScanThread:
      return "scan";
    case server::Route::kLongExec:
      return "long-exec";
  }
  return "?";
}

// Starts `s` on a database created in `path`, with or without --sync.
Status StartCreating(InProcessServer* s, const std::string& path, bool sync) {
  Options o;
  o.create_if_missing = true;
  server::ServerOptions so;
  so.sync = sync;
  return s->Start(path, o, so);
}

// Sets *pending (under *mu) to the number of batches of each group a loop
// flushes, before it is written.
void RecordFlushedBatches(std::mutex* mu, size_t* pending) {
  SyncPoint::Get()->SetCallback("Server::Flush:Batches", [=](void* arg) {
    std::lock_guard<std::mutex> lock(*mu);
    *pending = static_cast<std::vector<const WriteBatch*>*>(arg)->size();
  });
}

// With --sync a small group is written by its loop while the database
// thread is idle: the hand-off's two thread wake-ups cost a lone synced
// client a third of its rate. A larger group still goes to that thread.
// (Before, every synced group went to the database thread.)
TEST_F(ServerInProcessTest, ASmallSyncedGroupIsWrittenByItsLoop) {
  test::TempDir dir;
  InProcessServer s;
  ASSERT_FENCEDKV_OK(StartCreating(&s, dir.path(), /*sync=*/true));
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false, release = false;
  std::thread::id loop;
  std::vector<std::pair<size_t, bool>> groups;  // size, on the loop
  size_t pending = 0;
  SyncPoint::Get()->SetCallback("Connection::Process:Route", [&](void*) {
    std::unique_lock<std::mutex> lock(mu);
    loop = std::this_thread::get_id();
    if (hold) {  // the PING: the loop waits for the whole pipeline
      hold = false;
      cv.wait(lock, [&] { return release; });
    }
  });
  RecordFlushedBatches(&mu, &pending);
  SyncPoint::Get()->SetCallback("Server::WriteGroup:Result", [&](void*) {
    std::lock_guard<std::mutex> lock(mu);
    groups.emplace_back(pending, std::this_thread::get_id() == loop);
  });
  SyncPoint::Get()->EnableProcessing();
  RespTestClient c(s.port());
  ASSERT_TRUE(c.connected());
  EXPECT_EQ("+OK", c.Call({"SET", "one", "v", "FENCE", "1"}));
  std::string many;
  const size_t n = server::kInlineSyncBatches + 1;
  for (size_t i = 0; i < n; ++i) {
    many += RespTestClient::Encode(
        {"SET", "k" + std::to_string(i), "v", "FENCE", "1"});
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    hold = true;
  }
  c.Send({"PING"});
  c.SendRaw(many);
  // On loopback the bytes are in the server's socket buffer once sent;
  // the pause is a margin.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_EQ("+PONG", c.Read());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ("+OK", c.Read());
  SyncPoint::Get()->DisableProcessing();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(2u, groups.size());
  EXPECT_EQ(1u, groups[0].first);
  EXPECT_TRUE(groups[0].second) << "a lone synced SET went to the worker";
  EXPECT_EQ(n, groups[1].first);
  EXPECT_FALSE(groups[1].second) << "a large group was written by the loop";
}

// With --sync a loop gathers the writes on their way before it writes and
// fsyncs a group (sync_gather.h): SETs from other clients that arrive while
// the loop is busy with one client's SET share its fsync. Without gathering
// (--sync_gather_us=0) that first SET was written alone and the others
// after it, two fsyncs.
TEST_F(ServerInProcessTest, ASyncedLoopGathersTheWritesOnTheirWay) {
  constexpr size_t kClients = 8;
  for (const int cap_us : {10000, 0}) {
    SCOPED_TRACE("sync_gather_us " + std::to_string(cap_us));
    test::TempDir dir;
    InProcessServer s;
    Options o;
    o.create_if_missing = true;
    server::ServerOptions so;
    so.sync = true;
    so.sync_gather = std::chrono::microseconds(cap_us);
    ASSERT_FENCEDKV_OK(s.Start(dir.path(), o, so));
    std::mutex mu;
    std::condition_variable cv;
    bool hold = false, held = false, release = false, slow = true;
    std::vector<size_t> groups;
    size_t pending = 0;
    SyncPoint::Get()->SetCallback("Connection::Process:Route", [&](void*) {
      std::unique_lock<std::mutex> lock(mu);
      if (hold) {  // the first SET: the loop waits while the others arrive
        hold = false;
        held = true;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
      }
    });
    RecordFlushedBatches(&mu, &pending);
    SyncPoint::Get()->SetCallback("Server::WriteGroup:Result", [&](void*) {
      std::lock_guard<std::mutex> lock(mu);
      groups.push_back(pending);
      if (slow) {
        // The first write takes 20 ms: the loop then gathers for up to
        // min(cap, 20 ms), time enough for its passes even on a busy
        // machine.
        slow = false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    SyncPoint::Get()->EnableProcessing();
    std::vector<std::unique_ptr<RespTestClient>> clients;
    for (size_t i = 0; i < kClients; ++i) {
      clients.push_back(std::make_unique<RespTestClient>(s.port()));
      ASSERT_TRUE(clients.back()->connected());
    }
    EXPECT_EQ("+OK", clients[0]->Call({"SET", "seed", "v", "FENCE", "1"}));
    {
      std::unique_lock<std::mutex> lock(mu);
      groups.clear();
      hold = true;
    }
    clients[0]->Send({"SET", "k0", "v", "FENCE", "1"});
    {
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(
          cv.wait_for(lock, std::chrono::seconds(10), [&] { return held; }));
    }
    for (size_t i = 1; i < kClients; ++i) {
      clients[i]->Send({"SET", "k" + std::to_string(i), "v", "FENCE", "1"});
    }
    // On loopback the bytes are in the server's socket buffers once sent;
    // the pause is a margin.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
    for (size_t i = 0; i < kClients; ++i) {
      EXPECT_EQ("+OK", clients[i]->Read()) << "client " << i;
    }
    for (size_t i = 0; i < kClients; ++i) {
      EXPECT_EQ("$v", clients[0]->Call({"GET", "k" + std::to_string(i)}));
    }
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    std::lock_guard<std::mutex> lock(mu);
    if (cap_us > 0) {
      EXPECT_EQ(std::vector<size_t>({kClients}), groups)
          << "the SETs on their way did not share the first one's fsync";
    } else {
      // The first SET alone, the others after it (in one group or more).
      ASSERT_GE(groups.size(), 2u);
      EXPECT_EQ(1u, groups[0]);
      size_t all = 0;
      for (size_t g : groups) all += g;
      EXPECT_EQ(kClients, all);
    }
  }
}

// The io loop's fast paths over a real socket, with and without --sync: a
// run of pipelined GETs is read with one MultiGet, consecutive plain fenced
// SET / MSET are one group commit, anything else takes Execute, SCAN the
// scan thread -- and every reply comes in request order (the GETs after
// the writes see them). The loop is held on the first command while the
// rest of the pipeline arrives, so it reads it all in one pass.
TEST_F(ServerInProcessTest, PipelinedCommandsTakeTheFastPaths) {
  for (bool sync : {false, true}) {
    SCOPED_TRACE(sync ? "--sync" : "no sync");
    test::TempDir dir;
    InProcessServer s;
    ASSERT_FENCEDKV_OK(StartCreating(&s, dir.path(), sync));

    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    std::vector<std::string> routes;  // after the first command's
    std::vector<size_t> get_runs, groups;
    bool held = false;
    SyncPoint::Get()->SetCallback("Connection::Process:Route", [&](void* arg) {
      std::unique_lock<std::mutex> lock(mu);
      if (!held) {  // the first command (PING): hold the loop
        held = true;
        cv.wait(lock, [&] { return release; });
        return;
      }
      routes.push_back(RouteName(*static_cast<server::Route*>(arg)));
    });
    SyncPoint::Get()->SetCallback("Connection::FlushGets", [&](void* arg) {
      std::lock_guard<std::mutex> lock(mu);
      get_runs.push_back(*static_cast<size_t*>(arg));
    });
    SyncPoint::Get()->SetCallback("Server::Flush:Batches", [&](void* arg) {
      std::lock_guard<std::mutex> lock(mu);
      groups.push_back(
          static_cast<std::vector<const WriteBatch*>*>(arg)->size());
    });
    SyncPoint::Get()->EnableProcessing();

    RespTestClient c(s.port());
    ASSERT_TRUE(c.connected());
    c.Send({"PING"});
    std::string pipeline;
    for (int i = 0; i < 10; ++i) {
      pipeline += RespTestClient::Encode({"GET", "g" + std::to_string(i)});
    }
    for (const std::vector<std::string>& w :
         std::vector<std::vector<std::string>>{
             {"SET", "a", "1", "FENCE", "5"},
             {"MSET", "b", "2", "c", "3", "FENCE", "5"},
             {"GET", "a"},
             {"GET", "b"},
             {"GET", "c"},
             {"SET", "a", "x", "NX", "FENCE", "5"},
             {"SET", "d", "4", "FENCE", "0"},
             {"DEL", "a", "FENCE", "5"},
             {"GET", "a"},
             {"SCAN", "0"},
         }) {
      pipeline += RespTestClient::Encode(w);
    }
    c.SendRaw(pipeline);
    // On loopback the bytes are in the server's socket buffer once sent;
    // the pause is a margin.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    {
      std::lock_guard<std::mutex> lock(mu);
      ASSERT_TRUE(held) << "the first command never reached the loop";
      release = true;
      cv.notify_all();
    }
    EXPECT_EQ("+PONG", c.Read());
    for (int i = 0; i < 10; ++i) EXPECT_EQ("$nil", c.Read()) << i;
    EXPECT_EQ("+OK", c.Read());
    EXPECT_EQ("+OK", c.Read());
    EXPECT_EQ("$1", c.Read());
    EXPECT_EQ("$2", c.Read());
    EXPECT_EQ("$3", c.Read());
    EXPECT_EQ("$nil", c.Read());  // NX: a exists
    EXPECT_EQ(0u, c.Read().rfind("-ERR invalid token '0'", 0));
    EXPECT_EQ(":1", c.Read());
    EXPECT_EQ("$nil", c.Read());
    EXPECT_EQ("*[$0,*[$b,$c]]", c.Read());
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ((std::vector<std::string>{
                  "get", "get",     "get",     "get",     "get",   "get", "get",
                  "get", "get",     "get",     "write",   "write", "get", "get",
                  "get", "execute", "execute", "execute", "get",   "scan"}),
              routes);
    EXPECT_EQ((std::vector<size_t>{10, 3, 1}), get_runs)
        << "one MultiGet per run of GETs";
    EXPECT_EQ((std::vector<size_t>{2}), groups)
        << "the SET and the MSET: one group commit";
    c.Close();
    s.Stop();
  }
}

// A malformed request after pipelined GETs or grouped writes: their
// replies come first, in order, then the protocol error, then the close.
// (The error used to be queued before them: a client took it for its first
// GET's reply.)
TEST_F(ServerInProcessTest, AProtocolErrorComesAfterTheRepliesBeforeIt) {
  for (int gets : {2, 6}) {  // read on the loop, and on the database thread
    SCOPED_TRACE(gets);
    test::TempDir dir;
    InProcessServer s;
    ASSERT_FENCEDKV_OK(StartCreating(&s, dir.path(), false));
    RespTestClient c(s.port());
    ASSERT_EQ("+OK", c.Call({"SET", "k", "v", "FENCE", "1"}));
    std::string pipeline;
    for (int i = 0; i < gets; ++i)
      pipeline += RespTestClient::Encode({"GET", "k"});
    pipeline += RespTestClient::Encode({"SET", "a", "1", "FENCE", "2"});
    pipeline += RespTestClient::Encode({"SET", "b", "2", "FENCE", "2"});
    pipeline += "*1\r\n$abc\r\n";  // an invalid bulk length
    c.SendRaw(pipeline);
    for (int i = 0; i < gets; ++i) EXPECT_EQ("$v", c.Read()) << i;
    EXPECT_EQ("+OK", c.Read());
    EXPECT_EQ("+OK", c.Read());
    EXPECT_EQ(0u, c.Read().rfind("-ERR Protocol error", 0));
    EXPECT_EQ("EOF", c.Read());
    RespTestClient after(s.port());
    EXPECT_EQ("$1", after.Call({"GET", "a"}));
    EXPECT_EQ("$2", after.Call({"GET", "b"}));
    c.Close();
    after.Close();
    s.Stop();
  }
}

// GETs of several connections share one trip to the database thread
// (Server::Impl::FlushReads), and each connection still gets its own values
// in request order. The loop is held on a first PING while 12 connections
// send 16 GETs each (and a SET between two runs of GETs), so it finds them
// all ready in one pass.
TEST_F(ServerInProcessTest, GetsOfManyConnectionsShareTripsAndStayTheirOwn) {
  for (bool sync : {false, true}) {
    SCOPED_TRACE(sync ? "--sync" : "no sync");
    test::TempDir dir;
    InProcessServer s;
    ASSERT_FENCEDKV_OK(StartCreating(&s, dir.path(), sync));
    constexpr int kConns = 12, kGets = 16;
    {
      RespTestClient w(s.port());
      for (int c = 0; c < kConns; ++c) {
        for (int i = 0; i < kGets; ++i) {
          const std::string k =
              "k" + std::to_string(c) + "_" + std::to_string(i);
          ASSERT_EQ("+OK", w.Call({"SET", k, "v" + k, "FENCE", "1"}));
        }
      }
    }
    std::mutex mu;
    std::condition_variable cv;
    bool held = false, release = false;
    std::vector<size_t> trips;  // connections per trip
    SyncPoint::Get()->SetCallback("Connection::Process:Route", [&](void*) {
      std::unique_lock<std::mutex> lock(mu);
      if (!held) {
        held = true;
        cv.wait(lock, [&] { return release; });
      }
    });
    SyncPoint::Get()->SetCallback("Server::FlushReads", [&](void* arg) {
      std::lock_guard<std::mutex> lock(mu);
      trips.push_back(*static_cast<size_t*>(arg));
    });
    SyncPoint::Get()->EnableProcessing();
    RespTestClient first(s.port());
    first.Send({"PING"});
    std::vector<std::unique_ptr<RespTestClient>> clients;
    for (int c = 0; c < kConns; ++c) {
      clients.push_back(std::make_unique<RespTestClient>(s.port()));
      ASSERT_TRUE(clients.back()->connected());
      std::string pipeline;
      for (int i = 0; i < kGets; ++i) {
        pipeline += RespTestClient::Encode(
            {"GET", "k" + std::to_string(c) + "_" + std::to_string(i)});
        if (i == kGets / 2) {  // a write between two runs of GETs
          pipeline +=
              RespTestClient::Encode({"SET", "k" + std::to_string(c) + "_0",
                                      "new" + std::to_string(c), "FENCE", "1"});
        }
      }
      clients.back()->SendRaw(pipeline);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a margin
    {
      std::lock_guard<std::mutex> lock(mu);
      ASSERT_TRUE(held);
      release = true;
      cv.notify_all();
    }
    EXPECT_EQ("+PONG", first.Read());
    for (int c = 0; c < kConns; ++c) {
      for (int i = 0; i < kGets; ++i) {
        const std::string k = "k" + std::to_string(c) + "_" + std::to_string(i);
        EXPECT_EQ("$v" + k, clients[c]->Read()) << c << " " << i;
        if (i == kGets / 2) {
          EXPECT_EQ("+OK", clients[c]->Read()) << c;
        }
      }
      // The SET is seen by what follows it.
      EXPECT_EQ("$new" + std::to_string(c),
                clients[c]->Call({"GET", "k" + std::to_string(c) + "_0"}));
    }
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
    std::lock_guard<std::mutex> lock(mu);
    size_t most = 0, total = 0;
    for (size_t n : trips) {
      most = std::max(most, n);
      total += n;
    }
    EXPECT_GE(most, 2u) << "no trip carried more than one connection's GETs";
    EXPECT_LT(trips.size(), total) << "one trip per connection";
    for (auto& c : clients) c->Close();
    first.Close();
    s.Stop();
  }
}

size_t OpenFds() {
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd");
       it != std::filesystem::directory_iterator(); ++it) {
    ++n;
  }
  return n;
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Issue 11.6: with RLIMIT_NOFILE below what --maxclients needs, Start caps
// maxclients (keeping 32 descriptors), and when descriptors run out anyway
// accept() failing with EMFILE is retried after a pause instead of at once
// (which spun a core and wrote 42 MB of log in 5 s).
TEST_F(ServerInProcessTest, OutOfFileDescriptors) {
  rlimit saved{};
  ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &saved));
  Options o;
  o.create_if_missing = true;
  InProcessServer s;
  std::vector<int> fillers;
  auto restore = [&] {
    for (int fd : fillers) close(fd);
    fillers.clear();
    setrlimit(RLIMIT_NOFILE, &saved);
  };
  // The server starts under a limit of 60 descriptors more than are open
  // now (the DB's and the server's own come out of those).
  rlimit low = saved;
  low.rlim_cur = OpenFds() + 60;  // the server's own and RocksDB's come on top
  ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
  server::ServerOptions so;
  so.maxclients = 10000;
  const Status st = s.Start(dir_.path(), o, so);
  if (!st.ok()) restore();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(s.server()->maxclients(), 60u)
      << "maxclients not capped to the fd limit";
  EXPECT_GE(s.server()->maxclients(), 1u);

  // Every descriptor taken but one, which the client's socket takes: the
  // kernel completes its handshake, and the server has no descriptor left
  // to accept it with.
  while (true) {
    const int fd = open("/dev/null", O_RDONLY);
    if (fd < 0) break;
    fillers.push_back(fd);
  }
  ASSERT_FALSE(fillers.empty());
  close(fillers.back());
  fillers.pop_back();
  RespTestClient waiting(s.port(), 5000);
  ASSERT_TRUE(waiting.connected());
  const auto before = s.server()->stats().accept_errors.load();
  const double cpu0 = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const double cpu = ProcessCpuSeconds() - cpu0;
  const auto errors = s.server()->stats().accept_errors.load() - before;
  restore();
  std::printf(
      "[ figures  ] out of descriptors for 1 s: %.3f s of CPU, %llu accept "
      "failures\n",
      cpu, static_cast<unsigned long long>(errors));
  EXPECT_LT(cpu, 0.3) << "accept() spins";
  EXPECT_LE(errors, 20u);
  // Descriptors back: the waiting client is served.
  EXPECT_EQ("+PONG", waiting.Call({"PING"}));
  s.Stop();
}

}  // namespace
}  // namespace fencedkv
