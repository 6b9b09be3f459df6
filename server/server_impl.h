// Copyright (c) fencedkv authors.
//
// Server::Impl: the server's own threads and shared state (server.cc):
// the acceptor, the io loops (loop.h), the registry of connections (for
// CLIENT LIST and shutdown), the flush of each loop's grouped writes, the
// timeout and cursor sweeps, and the shutdown sequence. The connections
// (connection.h) call back into it.
//
// Thread safety: what the connections share -- options_ (immutable once
// Start has run), state_, stats_, stopping_, worker_ and the registry
// (conns_mu_) -- is thread-safe; each Loop is its own thread's, and the
// acceptor with its retry state is loop 0's.

#ifndef FENCEDKV_SERVER_SERVER_IMPL_H_
#define FENCEDKV_SERVER_SERVER_IMPL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "command_table.h"
#include "db_worker.h"
#include "loop.h"
#include "server.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

class Connection;

class Server::Impl {
 public:
  explicit Impl(const ServerOptions& options);
  ~Impl();

  Status Listen();
  Status Start(DB* db, LeaseService* leases, Replication* repl);
  void Stop(std::chrono::milliseconds deadline);

  // The shutdown gate: a command may run only between these; false if
  // shutting down. (Stop sets stopping_ then sums the shards; a command
  // bumps its shard then reads stopping_: with seq_cst, one of them sees
  // the other.)
  bool BeginCommand() {
    ServerStats::Shard& shard = stats_.Local();
    shard.executing.fetch_add(1);
    if (stopping_.load()) {
      shard.executing.fetch_sub(1);
      return false;
    }
    shard.commands.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void EndCommand() { stats_.Local().executing.fetch_sub(1); }

  // On `loop`'s thread: `c` has grouped writes. They go out with the loop's
  // next flush, which runs once the loop has handled what is ready now.
  // (While replies wait for replicas, a pass's writes go out in parts of
  // about kAckedGroup writes: server.cc.)
  void AddWriter(Loop* loop, std::shared_ptr<Connection> c);
  // On `loop`'s thread: writes the grouped writes waiting now as one group
  // (without --sync on this thread, at once; with it, on the database
  // thread unless the group is small and that thread idle).
  void WriteWriters(Loop* loop);
  // On `loop`'s thread: `c` has GETs to read (Connection::FlushGets). They
  // go to the database thread with other connections' in one job: at once
  // once kGatherReaders connections wait, else once the loop has handled
  // what is ready now. One trip (two thread hand-offs) per few connections
  // rather than per connection.
  void AddReader(Loop* loop, std::shared_ptr<Connection> c);
  // Whether a new connection must log in first: the ACL's default user is
  // off or has a password (--aclfile), or --requirepass is set.
  bool login_required() const {
    return options_.acl != nullptr ? options_.acl->InitialUser() == nullptr
                                   : !options_.requirepass.empty();
  }
  // Whether idle_timeout or auth_timeout (when a login is required)
  // applies; only then do the loops keep their connections in Loop::conns.
  bool timeouts_enabled() const {
    return options_.idle_timeout.count() > 0 ||
           (login_required() && options_.auth_timeout.count() > 0);
  }
  // The registry of live connections (CLIENT LIST, Stop).
  void Register(uint64_t id, const std::shared_ptr<Connection>& c)
      LOCKS_EXCLUDED(conns_mu_);
  void Unregister(uint64_t id) LOCKS_EXCLUDED(conns_mu_);

  ServerOptions options_;
  ServerStats stats_;
  ServerState state_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  // The database thread (db_worker.h): --sync group commits, offloaded
  // reads and long EXECs.
  std::unique_ptr<DbWorker> worker_;

  // maxmemory_clients evicted client `id`, which held `held` bytes: counts
  // it (INFO stats evicted_clients) and says so in the log, one line per
  // 10 s at most (clients holding little each at a small cap could
  // otherwise make one line per request).
  void NoteEviction(uint64_t id, int64_t held);

 private:
  // On `loop`: applies the grouped writes of its connections as one
  // DB::WriteGroup, here or (--sync) on the database thread, and answers
  // them.
  void Flush(Loop* loop);
  // On `loop`: hands the GETs of its waiting readers to the database thread
  // if it has room; else, with `may_read_here`, reads and answers them here,
  // or leaves them waiting and returns false.
  bool FlushReads(Loop* loop, bool may_read_here);
  // Every few seconds on loop 0: parked SCAN iterators past their time go.
  void ScheduleSweep();
  // On each loop, if a timeout is set: closes the connections past it.
  void ScheduleTimeouts(Loop* loop);
  // Caps options_.maxclients to what RLIMIT_NOFILE leaves (see Start).
  void CapMaxClients();
  // CLIENT LIST's reply: one line per connection, or an error past
  // max_reply_bytes.
  void ListClients(std::string* out) LOCKS_EXCLUDED(conns_mu_);
  // CLIENT KILL: closes the connections `filter` matches, each on its
  // loop; how many.
  size_t KillClients(const KillFilter& filter) LOCKS_EXCLUDED(conns_mu_);
  // ServerState::evict_client.
  bool EvictLargestClient(uint64_t self, int64_t at_least)
      LOCKS_EXCLUDED(conns_mu_);
  // When NoteEviction last logged (steady ms): one line per 10 s.
  std::atomic<int64_t> last_evict_log_ms_{-10000};
  // The live connections, for CLIENT LIST and Stop.
  std::vector<std::shared_ptr<Connection>> LiveConnections()
      LOCKS_EXCLUDED(conns_mu_);
  void DoAccept();
  // The acceptor, during a ReachesSelf probe: notes where a connection
  // came from.
  void NoteAccepted(int fd) LOCKS_EXCLUDED(probe_mu_);
  // Whether the acceptor noted the connection `from` ("peer->local").
  bool ProbeSeen(const std::string& from) EXCLUSIVE_LOCKS_REQUIRED(probe_mu_);
  // After a failed accept: logs (rate-limited) and retries after a pause.
  void AcceptFailed(const asio::error_code& ec);

  std::atomic<uint64_t> next_id_{1};
  Mutex conns_mu_;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> conns_
      GUARDED_BY(conns_mu_);
  std::vector<std::unique_ptr<Loop>> loops_;
  // Loop 0's: the acceptor, the next loop to give a connection to, and
  // after accept() failures the retry timer and what was logged.
  std::optional<asio::ip::tcp::acceptor> acceptor_;
  size_t next_loop_ = 0;
  std::optional<asio::steady_timer> accept_retry_;
  std::chrono::steady_clock::time_point accept_logged_;
  uint64_t accept_errors_unlogged_ = 0;

 public:
  AddressReach ReachesSelf(const std::string& host_port,
                           std::chrono::milliseconds timeout)
      LOCKS_EXCLUDED(probe_run_mu_, probe_mu_);

 private:
  // ReachesSelf: set once the acceptor runs; while a probe runs, the
  // acceptor adds each connection's whole identity, "peer->local" (each
  // "ip:port", an IPv4 mapped into IPv6 as IPv4), to probe_seen_ (bounded:
  // a probe that misses its own among more is kElsewhere, as if it never
  // came). The peer alone would not do: a connection of another process
  // on this host may take the probe's source port while the probe goes to
  // another server, as long as its destination differs.
  std::atomic<bool> accepting_{false};
  std::atomic<bool> probing_{false};
  Mutex probe_run_mu_;  // one probe at a time
  Mutex probe_mu_;
  std::condition_variable_any probe_cv_;
  std::vector<std::string> probe_seen_ GUARDED_BY(probe_mu_);
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SERVER_IMPL_H_
