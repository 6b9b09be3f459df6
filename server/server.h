// Copyright (c) fencedkv authors.
//
// fencedkv-server: a Redis-protocol front end to a fencedkv DB and its
// embedded lease service.
//
// Threads: --io_threads loops, each a thread running its own Asio
// io_context; connections are spread over them in turn and all of a
// connection's handlers run on its loop, never concurrently. Commands execute
// on that thread, in order, and a reply is sent only after the DB call
// returned, i.e. after the write is durable to the configured level (WAL;
// fsync with --sync). Writers group-commit: the plain fenced SET/MSET a loop
// parsed in one iteration are applied as one DB::WriteGroup, on the loop, or
// with --sync on the DbWorker thread, which takes every loop's groups queued
// meanwhile into one write and one fsync. Pipelined GETs are read with one
// MultiGet, on the DbWorker when it has room (see db_worker.h).
//
// Connections: CLIENT LIST reads another connection's state only through
// what that connection publishes under its own mutex. Buffers grown by a
// large request or reply are freed once the connection is idle; every
// bound a client can meet is in ServerOptions.
//
// Shutdown contract (Stop):
//   1. stop accepting connections;
//   2. answer new commands with "-SHUTDOWN ..." -- in order: after the
//      replies of the commands before them, which still complete -- and
//      close those connections. A command answered -SHUTDOWN did nothing;
//      an +OK was durable (to the configured level) before it was sent;
//   3. let commands already executing finish, until the deadline;
//   4. send what replies are ready, close every connection and stop the io
//      threads;
//   5. the caller then closes the DB (which flushes nothing it has not
//      already written to the WAL) and exits 0.

#ifndef FENCEDKV_SERVER_SERVER_H_
#define FENCEDKV_SERVER_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "repl_stream.h"
#include "resp_parser.h"

namespace fencedkv {
namespace server {

// Every bound a client meets (README "Limits" lists them with their flags
// and errors).
class Acl;
class CommandStats;
class Replication;

// With --sync, a loop writes a group of at most this many batches itself
// if the database thread is idle (db_worker.h); a larger one goes to that
// thread, which writes it while the loop parses the next. 64 holds one
// command from each of 50 clients (redis-benchmark's default), whose next
// commands wait for these replies, so there is nothing to parse meanwhile:
// against 16, SET -c 50 -P 1 --sync went from a median of 19.0k to 20.4k/s
// (five interleaved runs; -P 16 unchanged, 131k against 132k). Writing every
// group on the loop was slower at -P 16, where more commands are waiting.
constexpr size_t kInlineSyncBatches = 64;

struct ServerOptions {
  std::string bind = "127.0.0.1";
  int port = 7379;          // 0 = pick a free port (see Server::port())
  int io_threads = 1;       // event loops
  std::string requirepass;  // empty = no AUTH needed
  // Capped at Start to what RLIMIT_NOFILE allows (see Server::Start).
  size_t maxclients = 10000;
  RespParser::Limits limits;  // max_request_bytes, limits before AUTH etc.
  // One reply: a command whose reply would be larger is refused with
  // "-ERR reply of more than N bytes (max_reply_bytes)", checked while the
  // reply is built. (A GET's value is never refused: it was accepted as a
  // request.)
  size_t max_reply_bytes = 64 << 20;
  // MULTI: a transaction queuing more commands, or more bytes (arguments'
  // bytes plus the strings and records that hold them: ClientState's
  // queued_bytes), gets an error and is discarded (EXEC answers -EXECABORT).
  size_t max_multi_commands = 10000;
  size_t max_multi_bytes = 64 << 20;
  // All clients together (Redis 7's maxmemory-clients): what connections'
  // input buffers hold past their idle size, what their MULTI queues hold
  // and the replies they have not taken (from 64 KiB), summed over every
  // connection (ServerStats::client_bytes). Past
  // it the client holding the most is closed: another one (evicted), or
  // the one asking (ServerState::MakeClientRoom): a request with an error
  // and its connection closed, a queued command as past max_multi_bytes.
  // 0 = no cap.
  size_t maxmemory_clients = 0;
  // Close a connection that sent no complete command for this long; 0 =
  // never (Redis' `timeout`).
  std::chrono::milliseconds idle_timeout{0};
  // TCP keepalive on client connections: probes after this many idle
  // seconds, then 3 probes a third of it apart (Redis' tcp-keepalive);
  // 0 = off.
  int tcp_keepalive_s = 300;
  // With requirepass: close a connection not authenticated this long after
  // it connected; 0 = never.
  std::chrono::milliseconds auth_timeout{10000};
  bool sync = false;  // fsync every write before its reply
  // With sync: a loop writes a group of at most this many batches itself
  // while the database thread is idle (db_worker.h); 0 = never (tests).
  size_t sync_inline_batches = kInlineSyncBatches;
  // With sync: a loop may look for more writes to share one fsync for at
  // most this long (sync_gather.h); 0 = write each group at once.
  std::chrono::microseconds sync_gather{500};
  bool allow_unfenced = false;  // writes without FENCE (logged and counted)
  // The users (--aclfile, acl.h); null: only the built-in 'default' user,
  // with requirepass.
  std::shared_ptr<const Acl> acl;
  // The slow log (slowlog.h): commands of at least this many us (negative:
  // none, 0: all), the last max_len of them.
  int64_t slowlog_log_slower_than = 10000;
  size_t slowlog_max_len = 128;
  // SHUTDOWN calls it (from an io thread) to stop the process as SIGTERM
  // does; if unset, SHUTDOWN is refused.
  std::function<void()> on_shutdown;
};

// Counters shared by the connections (INFO, /metrics). The per-command
// ones are sharded by thread: one shared atomic bumped by every io thread on
// every command bounces its cache line between cores.
struct ServerStats {
  std::atomic<uint64_t> connections_received{0};
  std::atomic<uint64_t> connections_rejected{0};
  std::atomic<uint64_t> connected{0};
  std::atomic<uint64_t> nofence_rejections{0};
  std::atomic<uint64_t> unfenced_writes{0};
  std::atomic<uint64_t> protocol_errors{0};
  std::atomic<uint64_t> accept_errors{0};  // accept() failed (e.g. EMFILE)
  std::atomic<uint64_t> timeouts{0};  // closed by idle_timeout/auth_timeout
  std::atomic<int64_t> blocked{0};    // connections blocked in WAIT
  // What every connection holds past its idle buffers: its input buffer's
  // growth, its MULTI queue and its replies not taken from 64 KiB on
  // (ServerOptions::maxmemory_clients). Each
  // connection adds its own share and takes it back as it shrinks or goes
  // (Connection::Recharge).
  std::atomic<int64_t> client_bytes{0};
  // Requests and queued commands refused by maxmemory_clients, and
  // clients closed to make room (Redis 7's evicted_clients).
  std::atomic<uint64_t> client_memory_refusals{0};
  std::atomic<uint64_t> evicted_clients{0};
  // MGETs and EXISTS that outgrew their budget on an event loop and ran
  // again on the long-command thread (fast_path.h, kLoopReadBytes).
  std::atomic<uint64_t> reads_moved_off_loop{0};

  static constexpr size_t kShards = 16;
  struct alignas(64) Shard {
    std::atomic<uint64_t> commands{0};
    std::atomic<int64_t> executing{0};  // commands running (or queued writes)
  };
  Shard shards[kShards];
  // This thread's shard.
  Shard& Local();
  uint64_t commands() const;
  int64_t executing() const;
};

class Server {
 public:
  explicit Server(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (nothing is accepted yet). Done before the DB is
  // opened, so a taken port fails fast. IOError if the address is unusable.
  Status Listen();
  // The port bound by Listen (the real one when options.port was 0).
  int port() const;

  // Starts accepting and serving with `db` and `leases` (both must outlive
  // the server until Stop() has returned). First caps maxclients so that
  // the clients, the files open now (the database's) and 32 more fit under
  // RLIMIT_NOFILE's soft limit, with a warning (as Redis does).
  // `repl` (optional, outliving the server too): the server's role and
  // replication streams (replication.h): replicas refuse writes, FENCEDKV.SYNC
  // connections become replication links, WAIT waits off the loops.
  Status Start(DB* db, LeaseService* leases, Replication* repl = nullptr);

  // Graceful shutdown (see the contract above). Idempotent.
  void Stop(std::chrono::milliseconds deadline);

  const ServerStats& stats() const;
  // Per-command counters (INFO commandstats, /metrics).
  const CommandStats& command_stats() const;
  // maxclients after Start's cap.
  size_t maxclients() const;
  // True once Stop has begun.
  bool stopping() const;
  // Connects to `host_port` and tells whether this server's acceptor took
  // that connection within `timeout` (kThisServer), or not: refused, timed
  // out, or taken by another (kElsewhere). kUnknown before Start (nothing
  // is accepted yet) or when the probe's own address cannot be read. One
  // probe at a time; the connection is closed before it returns. (etcd
  // mode: is a member key under this server's address its previous run's?)
  AddressReach ReachesSelf(const std::string& host_port,
                           std::chrono::milliseconds timeout);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SERVER_H_
