// Copyright (c) fencedkv authors.
//
// Server and Server::Impl (server_impl.h): accepting connections, the io
// loops, the flush of each loop's grouped writes, the timeout and cursor
// sweeps, the registry of connections, and shutdown. The connections'
// state machine is connection.cc.

#include "server.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "connection.h"
#include "process_memory.h"
#include "replication.h"
#include "resp_writer.h"
#include "server_impl.h"
#include "util/sync_point.h"
#include "util/thread_name.h"

namespace fencedkv {
namespace server {

namespace {
// accept() failing (e.g. EMFILE: out of file descriptors) is retried after
// kAcceptBackoff instead of at once, and logged at most once an interval.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr auto kAcceptLogInterval = std::chrono::seconds(10);
// File descriptors kept for the server's own use (logs, the metrics port,
// new database files) beyond those open at Start: Redis reserves 32 too.
constexpr size_t kReservedFds = 32;
// Connections whose GETs share one trip to the database thread at most
// before it leaves (fewer if the loop runs out of ready connections first).
constexpr size_t kGatherReaders = 4;
// While replies wait for replicas (without --sync), a loop's pass writes
// what its connections added so far once it reaches this many writes (a
// threshold, not a cap: one connection adds up to kMaxJob), sending it to
// RocksDB, and so to the replica links, at once. A pass over every
// connection at once (redis-benchmark -c 50 -P 16: 800 writes) made one
// group: the replicas idled while the loop parsed it, the loop idled while
// they applied it, and the clients, all answered by one acknowledgement,
// came back together for the next. In parts the stages overlap. Measured
// (1 primary + 2 replicas on 2 cores, SET FENCE -c 50 -P 16, 1.2M SETs,
// quiet runs): 120-122k/s in one group, 131-155k/s in parts of 256, idle CPU
// 0.33 -> 0.24 cores; parts of 64 or 128 lost more to per-write overhead
// than they gained, 512 left most of the idle time.
constexpr size_t kAckedGroup = 256;

// File descriptors this process has open now.
size_t OpenFds() {
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end;
       !ec && it != end; it.increment(ec)) {
    ++n;
  }
  return n;
}
}  // namespace

ServerStats::Shard& ServerStats::Local() {
  static std::atomic<size_t> next{0};
  thread_local const size_t index = next.fetch_add(1) % kShards;
  return shards[index];
}

uint64_t ServerStats::commands() const {
  uint64_t n = 0;
  for (const Shard& s : shards) n += s.commands.load(std::memory_order_relaxed);
  return n;
}

int64_t ServerStats::executing() const {
  int64_t n = 0;
  for (const Shard& s : shards) n += s.executing.load();
  return n;
}

Server::Impl::Impl(const ServerOptions& options) : options_(options) {
  state_.options = &options_;
  state_.stats = &stats_;
  const int n = std::max(1, options_.io_threads);
  for (int i = 0; i < n; ++i)
    loops_.push_back(std::make_unique<Loop>(options_.sync_gather));
  acceptor_.emplace(loops_[0]->io);
}

Server::Impl::~Impl() {
  // Connections still referenced by queued writes or handlers unregister
  // themselves from conns_ when those go: before the rest of Impl, and
  // the worker's before the io_contexts their sockets belong to. The
  // acceptor and its timer go before their io_context too.
  worker_.reset();
  accept_retry_.reset();
  acceptor_.reset();
  loops_.clear();
}

void Server::Impl::AddWriter(Loop* loop, std::shared_ptr<Connection> c) {
  loop->writer_batches += c->job_size();
  loop->writers.push_back(std::move(c));
  // While replies wait for replicas, a large pass goes out in parts: the
  // replicas apply one part while this loop parses the next (kAckedGroup).
  // Not while a write's completions run here (writing_part): a connection
  // they continue joins the next write.
  if (!options_.sync && !loop->writing_part &&
      loop->writer_batches >= kAckedGroup && state_.repl != nullptr &&
      state_.repl->tracker().NeedsAcks()) {
    WriteWriters(loop);
  }
  if (!loop->flush_posted) {
    loop->flush_posted = true;
    asio::post(loop->io, [this, loop] { Flush(loop); });
  }
}

void Server::Impl::AddReader(Loop* loop, std::shared_ptr<Connection> c) {
  loop->readers.push_back(std::move(c));
  // Enough for one trip: off now, if the database thread has room (reading
  // here would answer, and continue, a connection still in its Process).
  if (loop->readers.size() >= kGatherReaders && FlushReads(loop, false)) {
    return;
  }
  if (!loop->reads_posted) {
    loop->reads_posted = true;
    asio::post(loop->io, [this, loop] {
      loop->reads_posted = false;
      FlushReads(loop, true);
    });
  }
}

bool Server::Impl::FlushReads(Loop* loop, bool may_read_here) {
  if (loop->readers.empty()) return true;
  auto readers = std::make_shared<std::vector<std::shared_ptr<Connection>>>(
      std::move(loop->readers));
  loop->readers.clear();
  size_t n = readers->size();
  TEST_SYNC_POINT_CALLBACK("Server::FlushReads", &n);
  const bool queued = worker_->TrySubmitRead([loop, readers] {
    // On the database thread; these connections wait (reads_pending_).
    for (const auto& c : *readers) c->ReadGets();
    asio::post(loop->io, [readers] {
      for (const auto& c : *readers) c->OnReadsDone();
    });
  });
  if (queued) return true;
  if (!may_read_here) {
    loop->readers = std::move(*readers);
    return false;
  }
  // The database thread is behind: read here.
  for (const auto& c : *readers) c->ReadGets();
  for (const auto& c : *readers) c->OnReadsDone();
  return true;
}

void Server::Impl::Flush(Loop* loop) {
  loop->flush_posted = false;
  if (loop->writers.empty()) return;
  // With --sync, first gather the writes that are on their way
  // (sync_gather.h): a re-posted Flush runs after the loop's next poll of
  // its sockets, and the writes of the connections that poll found ready
  // join this group (their handlers run before the Flush after next).
  if (options_.sync && loop->gather.KeepGathering(
                           loop->writer_batches,
                           worker_->Idle() ? options_.sync_inline_batches : 0,
                           SyncGather::Clock::now())) {
    loop->flush_posted = true;
    asio::post(loop->io, [this, loop] { Flush(loop); });
    return;
  }
  WriteWriters(loop);
}

void Server::Impl::WriteWriters(Loop* loop) {
  if (loop->writers.empty()) return;
  loop->writer_batches = 0;
  // Kept alive (with their batches) until the statuses are back.
  auto conns = std::make_shared<std::vector<std::shared_ptr<Connection>>>();
  conns->swap(loop->writers);
  std::vector<const WriteBatch*> batches;
  for (const auto& c : *conns) c->AppendJob(&batches);
  TEST_SYNC_POINT_CALLBACK("Server::Flush:Batches", &batches);
  auto complete = [conns](const std::vector<Status>& statuses) {
    size_t at = 0;
    for (const auto& c : *conns) {
      const size_t n = c->job_size();
      c->OnJobDone(statuses.data() + at);
      at += n;
    }
  };
  // Without --sync there is nothing to wait for but the write itself: do it
  // here. With --sync, a small group while the database thread is idle too
  // (db_worker.h): its cost is the hand-off's latency, not CPU.
  //
  // While a long write runs (on its own thread), it holds the fence
  // stripes of every key it touches: a group written here would wait for
  // them on the loop, and the loop's other clients with it (a DEL of 1M
  // keys held them 3.2 s; a helper's review). The database thread waits
  // instead.
  const bool long_write = state_.long_writes.load() > 0;
  if ((!options_.sync && !long_write) ||
      (options_.sync && !long_write &&
       batches.size() <= options_.sync_inline_batches && worker_->Idle())) {
    std::vector<Status> statuses(batches.size());
    const auto began = SyncGather::Clock::now();
    WriteGroupsBounded(state_.db, ServerWriteOptions(state_), batches.data(),
                       batches.size(), statuses.data());
    if (options_.sync)
      loop->gather.RecordWrite(SyncGather::Clock::now() - began);
    const bool nested = loop->writing_part;
    loop->writing_part = true;
    complete(statuses);
    loop->writing_part = nested;
    return;
  }
  worker_->SubmitWrite(
      std::move(batches), [this, loop, complete](std::vector<Status> statuses) {
        // On the database thread: back to the loop, with how long the
        // write took, for the loop's gathering.
        const std::chrono::nanoseconds took(worker_->last_write_nanos());
        asio::post(loop->io, [loop, took, complete, st = std::move(statuses)] {
          loop->gather.RecordWrite(took);
          complete(st);
        });
      });
}

Status Server::Impl::Listen() {
  asio::error_code ec;
  const auto address = asio::ip::make_address(options_.bind, ec);
  if (ec) {
    return Status::InvalidArgument("invalid --bind address \"" + options_.bind +
                                   "\": " + ec.message());
  }
  const asio::ip::tcp::endpoint ep(address,
                                   static_cast<uint16_t>(options_.port));
  acceptor_->open(ep.protocol(), ec);
  if (!ec) {
    acceptor_->set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  }
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::IOError("cannot listen on " + options_.bind + ":" +
                               std::to_string(options_.port),
                           ec.message());
  }
  port_ = acceptor_->local_endpoint().port();
  return Status::OK();
}

Status Server::Impl::Start(DB* db, LeaseService* leases, Replication* repl) {
  state_.db = db;
  state_.leases = leases;
  state_.repl = repl;
  if (repl != nullptr) {
    state_.read_only = repl->read_only();
    state_.lease_deadline = repl->lease_deadline();
  }
  state_.port = port_;
  state_.started = std::chrono::steady_clock::now();
  state_.list_clients = [this](std::string* out) { ListClients(out); };
  state_.kill_clients = [this](const KillFilter& f) { return KillClients(f); };
  state_.evict_client = [this](uint64_t self, int64_t at_least) {
    return EvictLargestClient(self, at_least);
  };
  if (options_.on_shutdown) {
    state_.request_shutdown = [this] {
      options_.on_shutdown();
      return true;
    };
  }
  state_.slowlog.Configure(options_.slowlog_log_slower_than,
                           options_.slowlog_max_len);
  CapMaxClients();
  worker_ = std::make_unique<DbWorker>(db, ServerWriteOptions(state_));
  accept_retry_.emplace(loops_[0]->io);
  DoAccept();
  accepting_.store(true);
  loops_[0]->sweep.emplace(loops_[0]->io);
  ScheduleSweep();
  for (size_t i = 0; i < loops_.size(); i++) {
    Loop* l = loops_[i].get();
    l->timeouts.emplace(l->io);
    l->hangups.emplace(l->io);
    ScheduleTimeouts(l);
    l->work.emplace(l->io.get_executor());
    l->thread = std::thread([l, i] {
      SetThreadName("fencedkv:io" + std::to_string(i));
      l->io.run();
    });
  }
  started_ = true;
  return Status::OK();
}

void Server::Impl::CapMaxClients() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 ||
      limit.rlim_cur == RLIM_INFINITY) {
    return;
  }
  const size_t budget = static_cast<size_t>(limit.rlim_cur);
  const size_t reserved = OpenFds() + kReservedFds;
  const size_t allowed = budget > reserved ? budget - reserved : 1;
  if (options_.maxclients <= allowed) return;
  LOG(WARNING) << "maxclients " << options_.maxclients << " lowered to "
               << allowed << ": the open files limit (ulimit -n) is " << budget
               << " and " << reserved
               << " are kept for the database and the server itself; raise "
               << "the hard limit to serve more clients";
  options_.maxclients = allowed;
}

void Server::Impl::ScheduleTimeouts(Loop* loop) {
  if (!timeouts_enabled()) return;
  const auto idle = options_.idle_timeout;
  const auto auth =
      login_required() ? options_.auth_timeout : std::chrono::milliseconds(0);
  // Checked a few times per timeout, at most once a second.
  auto period = std::chrono::milliseconds(1000);
  for (auto t : {idle, auth}) {
    if (t.count() > 0) {
      period = std::min(period, std::max(t / 4, std::chrono::milliseconds(10)));
    }
  }
  loop->timeouts->expires_after(period);
  loop->timeouts->async_wait([this, loop](const asio::error_code& ec) {
    if (ec || stopping_.load()) return;
    const int64_t now = SteadyMs();
    auto& conns = loop->conns;
    size_t kept = 0;
    for (size_t i = 0; i < conns.size(); ++i) {
      auto c = conns[i].lock();
      if (c == nullptr) continue;
      c->CheckTimeouts(now);
      if (kept != i)
        conns[kept] = std::move(conns[i]);  // (a self-move empties)
      ++kept;
    }
    conns.resize(kept);
    ScheduleTimeouts(loop);
  });
}

void Server::Impl::ScheduleSweep() {
  asio::steady_timer& timer = *loops_[0]->sweep;
  timer.expires_after(std::chrono::seconds(5));
  timer.async_wait([this](const asio::error_code& ec) {
    if (ec || stopping_.load()) return;
    state_.DisposeIterators(state_.cursors.DropExpired());
    NotePeakMemory(&state_);
    ScheduleSweep();
  });
}

void Server::Impl::DoAccept() {
  // Connections go to the loops in turn.
  Loop* loop = loops_[next_loop_++ % loops_.size()].get();
  acceptor_->async_accept(loop->io, [this, loop](const asio::error_code& ec,
                                                 asio::ip::tcp::socket socket) {
    if (stopping_.load()) return;
    if (!ec) {
      if (probing_.load()) NoteAccepted(socket.native_handle());
      stats_.connections_received.fetch_add(1);
      if (stats_.connected.load() >= options_.maxclients) {
        stats_.connections_rejected.fetch_add(1);
        static const char kFull[] = "-ERR max number of clients reached\r\n";
        asio::error_code wec;
        asio::write(socket, asio::buffer(kFull, sizeof(kFull) - 1), wec);
        socket.close(wec);
      } else {
        stats_.connected.fetch_add(1);
        const uint64_t id = next_id_.fetch_add(1);
        auto conn =
            std::make_shared<Connection>(this, loop, std::move(socket), id);
        Register(id, conn);
        conn->Start();
      }
    } else if (ec == asio::error::operation_aborted) {
      return;
    } else {
      AcceptFailed(ec);
      return;
    }
    DoAccept();
  });
}

namespace {

// "ip:port" of a socket address; an IPv4 address mapped into IPv6 (a
// dual-stack listener's view of an IPv4 peer) as the IPv4 one. Empty if
// neither family.
std::string EndpointText(const sockaddr_storage& a) {
  char ip[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], ip, sizeof(ip));
    } else {
      inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip));
    }
    port = ntohs(v6->sin6_port);
  } else {
    return std::string();
  }
  return std::string(ip) + ":" + std::to_string(port);
}

// "peer->local" of a connected socket, "" if either cannot be read.
std::string ConnectionText(int fd, bool peer_first) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    return std::string();
  }
  const std::string p = EndpointText(peer), l = EndpointText(local);
  if (p.empty() || l.empty()) return std::string();
  return peer_first ? p + "->" + l : l + "->" + p;
}

}  // namespace

void Server::Impl::NoteAccepted(int fd) {
  // Seen from this end: the client (peer) first.
  const std::string from = ConnectionText(fd, /*peer_first=*/true);
  if (from.empty()) return;
  MutexLock lock(&probe_mu_);
  if (probe_seen_.size() < 1024) probe_seen_.push_back(from);
  probe_cv_.notify_all();
}

AddressReach Server::Impl::ReachesSelf(const std::string& host_port,
                                       std::chrono::milliseconds timeout) {
  if (!accepting_.load() || stopping_.load()) return AddressReach::kUnknown;
  MutexLock one(&probe_run_mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  {
    MutexLock lock(&probe_mu_);
    probe_seen_.clear();
  }
  // Set before the connection exists: the acceptor may take it at once.
  probing_.store(true);
  struct EndProbe {
    Impl* impl;
    ~EndProbe() {
      impl->probing_.store(false);
      MutexLock lock(&impl->probe_mu_);
      impl->probe_seen_.clear();
    }
  } end_probe{this};
  ReplSocket socket;
  if (!socket.Connect(host_port, timeout).ok()) return AddressReach::kElsewhere;
  // Seen from the probe's end: itself (local) first, as the acceptor
  // writes its client first.
  const std::string from = ConnectionText(socket.fd(), /*peer_first=*/false);
  if (from.empty()) return AddressReach::kUnknown;
  MutexLock lock(&probe_mu_);
  while (!ProbeSeen(from)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return AddressReach::kElsewhere;
    }
    probe_cv_.wait_until(probe_mu_, deadline);
  }
  return AddressReach::kThisServer;
}

bool Server::Impl::ProbeSeen(const std::string& from) {
  return std::find(probe_seen_.begin(), probe_seen_.end(), from) !=
         probe_seen_.end();
}

void Server::Impl::AcceptFailed(const asio::error_code& ec) {
  // Out of file descriptors (or memory), the pending connection stays in
  // the backlog and accept() fails again at once: retrying straight away
  // would spin a core and flood the log.
  stats_.accept_errors.fetch_add(1);
  ++accept_errors_unlogged_;
  const auto now = std::chrono::steady_clock::now();
  if (now - accept_logged_ >= kAcceptLogInterval) {
    LOG(WARNING) << "accept: " << ec.message() << " ("
                 << accept_errors_unlogged_
                 << " failure(s) since the last such line; retrying every "
                 << kAcceptBackoff.count()
                 << " ms; connected clients: " << stats_.connected.load()
                 << ", maxclients " << options_.maxclients << ")";
    accept_logged_ = now;
    accept_errors_unlogged_ = 0;
  }
  accept_retry_->expires_after(kAcceptBackoff);
  accept_retry_->async_wait([this](const asio::error_code& tec) {
    if (tec || stopping_.load()) return;
    DoAccept();
  });
}

void Server::Impl::Register(uint64_t id, const std::shared_ptr<Connection>& c) {
  MutexLock lock(&conns_mu_);
  conns_[id] = c;
}

void Server::Impl::Unregister(uint64_t id) {
  MutexLock lock(&conns_mu_);
  conns_.erase(id);
}

std::vector<std::shared_ptr<Connection>> Server::Impl::LiveConnections() {
  std::vector<std::shared_ptr<Connection>> live;
  MutexLock lock(&conns_mu_);
  for (auto& [id, w] : conns_) {
    if (auto c = w.lock()) live.push_back(std::move(c));
  }
  return live;
}

void Server::Impl::ListClients(std::string* out) {
  const std::vector<std::shared_ptr<Connection>> live = LiveConnections();
  const int64_t now = NowMs(), now_steady = SteadyMs();
  std::string list;
  for (const auto& c : live) {
    c->Describe(now, now_steady, &list);
    if (ReplyTooLarge(state_, list.size(), out)) return;
  }
  resp::Bulk(out, list);
}

size_t Server::Impl::KillClients(const KillFilter& filter) {
  size_t killed = 0;
  for (const auto& c : LiveConnections()) {
    if (c->Matches(filter)) {
      c->Kill();  // on its own loop
      ++killed;
    }
  }
  return killed;
}

bool Server::Impl::EvictLargestClient(uint64_t self, int64_t at_least) {
  // Rare (only past the cap), so a walk of every connection is fine.
  for (int tries = 0; tries < 8; ++tries) {
    std::shared_ptr<Connection> largest;
    int64_t most = 0;
    for (const auto& c : LiveConnections()) {
      if (c->id() == self) continue;
      const int64_t held = c->charged();  // (-1: written off)
      if (held > most) {
        most = held;
        largest = c;
      }
    }
    if (largest == nullptr || most < at_least) return false;
    // The exchange claims it: of two loops picking the same client, one
    // writes it off and kills it, the other looks again.
    if (largest->ReleaseCharge() <= 0) continue;
    // One already closing (CLIENT KILL, a timeout, its peer gone) whose
    // command still runs kept its share: written off now, not counted as an
    // eviction.
    if (largest->closing()) return true;
    largest->Kill();  // on its own loop
    NoteEviction(largest->id(), most);
    return true;
  }
  return false;
}

void Server::Impl::NoteEviction(uint64_t id, int64_t held) {
  const uint64_t n =
      stats_.evicted_clients.fetch_add(1, std::memory_order_relaxed) + 1;
  const int64_t now = SteadyMs();
  int64_t last = last_evict_log_ms_.load(std::memory_order_relaxed);
  if (now - last >= 10000 && last_evict_log_ms_.compare_exchange_strong(
                                 last, now, std::memory_order_relaxed)) {
    LOG(WARNING) << "client " << id << " evicted: it held " << held
                 << " bytes (request buffer, MULTI queue, replies not yet "
                    "sent), the most of any client, with all clients "
                    "together at --maxmemory_clients="
                 << options_.maxmemory_clients << " (" << n
                 << " evicted since the start; INFO stats evicted_clients)";
  }
}

void Server::Impl::Stop(std::chrono::milliseconds deadline) {
  if (stopping_.exchange(true)) return;
  // 1. Stop accepting.
  asio::post(loops_[0]->io, [this] {
    asio::error_code ec;
    acceptor_->close(ec);
  });
  // 2-3. New commands now get -SHUTDOWN; wait for those executing.
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (stats_.executing() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (stats_.executing() > 0) {
    LOG(WARNING) << stats_.executing()
                 << " command(s) still running at the shutdown deadline";
  }
  // 4. Send what is ready, close every connection and stop the io threads.
  {
    std::vector<std::shared_ptr<Connection>> live = LiveConnections();
    for (auto& c : live) c->Close();
  }
  for (auto& loop : loops_) loop->work.reset();
  // Let the posted closes run, then stop whatever is left.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (auto& loop : loops_) loop->io.stop();
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
  }
  // Jobs still queued end now: their connections are closed (Close), so
  // each skips its command.
  if (worker_) worker_->Stop();
  state_.longs.Stop();
  state_.scans.Stop();
  // Parked SCAN iterators go before the database closes.
  state_.cursors.Clear();
}

Server::Server(const ServerOptions& options) : impl_(new Impl(options)) {}
Server::~Server() { Stop(std::chrono::milliseconds(0)); }
Status Server::Listen() { return impl_->Listen(); }
int Server::port() const { return impl_->port_; }
Status Server::Start(DB* db, LeaseService* leases, Replication* repl) {
  return impl_->Start(db, leases, repl);
}
void Server::Stop(std::chrono::milliseconds deadline) {
  if (!impl_->started_) {
    impl_->stopping_ = true;
    return;
  }
  impl_->Stop(deadline);
}
const ServerStats& Server::stats() const { return impl_->stats_; }
const CommandStats& Server::command_stats() const {
  return *impl_->state_.command_stats;
}
size_t Server::maxclients() const { return impl_->options_.maxclients; }
bool Server::stopping() const { return impl_->stopping_.load(); }
AddressReach Server::ReachesSelf(const std::string& host_port,
                                 std::chrono::milliseconds timeout) {
  return impl_->ReachesSelf(host_port, timeout);
}

}  // namespace server
}  // namespace fencedkv
