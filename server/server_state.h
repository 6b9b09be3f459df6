// Copyright (c) fencedkv authors.
//
// What command handlers see: the server (ServerState, shared by every
// connection) and the connection they run for (ClientState).

#ifndef FENCEDKV_SERVER_SERVER_STATE_H_
#define FENCEDKV_SERVER_SERVER_STATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "acl.h"
#include "command_stats.h"
#include "cursor_table.h"
#include "scan_worker.h"
#include "server.h"
#include "slowlog.h"
#include "write_command.h"

namespace fencedkv {
namespace server {

// A command queued by MULTI: its own copy of the words, and for a write
// (SET, DEL, MSET) its parse, which EXEC applies. (The other command MULTI
// queues is PING.)
struct QueuedCommand {
  std::vector<std::string> args;
  bool is_write = false;
  WriteCommand write;  // if is_write
};

// Wall-clock milliseconds since the epoch (CLIENT LIST's age).
int64_t NowMs();

// One connection's state. Not thread-safe: only the connection's own
// commands touch it, one at a time (on its io loop, or on the thread a
// command was handed to while the loop leaves the connection alone).
struct ClientState {
  uint64_t id = 0;
  // Its share of ServerStats::client_bytes as of the last command
  // (Connection::Recharge): its grown input buffer, its MULTI queue and its
  // replies not taken.
  int64_t memory_share = 0;
  std::string name;
  std::string addr;
  int64_t created_ms = 0;
  bool authed = false;
  // The ACL user the connection runs as (set with authed; see StartSession),
  // owned by the server's Acl.
  const AclUser* user = nullptr;
  bool close_after_reply = false;
  // The server's "refuse writes" flag while it is a replica (Admit reads
  // it); null: never.
  const std::atomic<bool>* read_only = nullptr;
  // etcd mode: the ReplNowMs after which this primary's etcd lease may have
  // expired (0: none); null: never (see Replication::lease_deadline).
  const std::atomic<int64_t>* lease_deadline = nullptr;
  // FENCEDKV.SYNC: the connection becomes a replication link; its socket
  // goes to ServerState::repl with these words (Connection::HandOff).
  bool handoff = false;
  std::vector<std::string> handoff_args;
  // MULTI: the queued commands and whether one was refused.
  bool in_multi = false;
  bool multi_failed = false;
  std::vector<QueuedCommand> queued;
  // What they hold (max_multi_bytes): per command sizeof(QueuedCommand),
  // per argument its bytes plus sizeof(std::string).
  size_t queued_bytes = 0;
  // Set by the connection while a command runs on its event loop: an MGET
  // or EXISTS (the reads that may run twice) that has read kLoopReadBytes
  // of values or run kLoopReadTime (fast_path.h) stops without a reply and
  // sets read_deferred, and the connection runs it again on the
  // long-command thread. Other handlers ignore it.
  bool loop_read_budget = false;
  bool read_deferred = false;
};

// MULTI's queue length as CLIENT LIST shows it (multi=): -1 outside MULTI.
int64_t ShownMulti(const ClientState& client);
// One line of CLIENT LIST (and CLIENT INFO's reply): Redis's fields that
// fencedkv keeps, ages in seconds.
std::string ClientListLine(uint64_t id, const std::string& addr,
                           const std::string& name, int64_t age_s,
                           int64_t idle_s, int64_t multi, const AclUser* user);

// Which connections CLIENT KILL closes: those matching every filter given.
struct KillFilter {
  std::optional<uint64_t> id;
  std::optional<std::string> addr;  // "ip:port"
  std::optional<std::string> user;
  bool skipme = true;  // not the calling connection (`self`)
  uint64_t self = 0;
};

// The server as handlers see it. Set up once before the first command; its
// members are thread-safe (or immutable) from then on.
class Replication;

struct ServerState {
  DB* db = nullptr;
  LeaseService* leases = nullptr;
  // Roles and streams (replication.h); null in tests that run none.
  Replication* repl = nullptr;
  // repl's read-only flag (each connection's ClientState::read_only).
  const std::atomic<bool>* read_only = nullptr;
  // repl's lease deadline (each connection's ClientState::lease_deadline).
  const std::atomic<int64_t>* lease_deadline = nullptr;
  const ServerOptions* options = nullptr;
  ServerStats* stats = nullptr;
  CursorTable cursors;
  // Runs SCAN, KEYS and DBSIZE off the io loops (scan_worker.h).
  ScanWorker scans;
  // Runs long commands (fast_path.h: kLongExec) off the io loops, one at a
  // time, in their own thread: they never wait for a loop's turn, never
  // run on a loop, and never hold up the database thread's group commits.
  ScanWorker longs{"fencedkv:long"};
  // How many of them are writes running now: their batches hold the fence
  // stripes of every key they touch for the whole write, so a loop hands
  // its group write to the database thread meanwhile rather than wait for
  // a stripe itself (server.cc: WriteWriters).
  std::atomic<int> long_writes{0};
  std::chrono::steady_clock::time_point started;
  int port = 0;
  // CLIENT LIST: appends the reply (the list, or an error past
  // max_reply_bytes); filled by the server on demand.
  std::function<void(std::string* out)> list_clients;
  // CLIENT KILL: closes the matching connections, each on its own loop
  // (after the replies it has ready); returns how many. Null outside a
  // server.
  std::function<size_t(const KillFilter& filter)> kill_clients;
  // SHUTDOWN: asks the process to stop as on SIGTERM; false if this server
  // cannot be stopped so (embedded in a test). Null: cannot.
  std::function<bool()> request_shutdown;
  // Every command's calls, times, latencies and errors (command_stats.h).
  std::unique_ptr<CommandStats> command_stats;
  SlowLog slowlog;
  // INFO memory's used_memory_peak: the largest used_memory seen (at INFO,
  // /metrics and the server's periodic sweep).
  std::atomic<uint64_t> peak_memory{0};
  // Whether `more` bytes may be taken by clients now (maxmemory_clients).
  // Checked, then charged: loops checking at once may together go past the
  // cap by one request or queued command each.
  bool ClientMemoryAllows(size_t more) const;
  // Room for client `self` to take `more` bytes, which would make its share
  // `self_after`: true if the cap allows it, or once the clients holding
  // the most, each holding at least self_after, were evicted until it does
  // (as Redis evicts its largest clients; an evicted client's share is
  // written off at once, though a command of its own still running on
  // another thread holds its memory until it ends); false once `self`
  // would hold the most: it is the one refused.
  bool MakeClientRoom(uint64_t self, int64_t self_after, size_t more);
  // After MakeClientRoom refused: counts the refusal (INFO stats
  // client_memory_refusals) and returns the error line, ending with what
  // became of the request (`outcome`).
  std::string ClientMemoryRefusal(const char* outcome);
  // maxmemory_clients' eviction: closes the live client other than `self`
  // holding the most (its ServerStats::client_bytes share), if that is at
  // least `at_least` bytes, and writes its share off; whether it did.
  // Null outside a server.
  std::function<bool(uint64_t self, int64_t at_least)> evict_client;

  ServerState();

  // The users: options->acl, or if it is null the built-in 'default' user
  // with options->requirepass (acl.h). Built on first use.
  const Acl& acl();
  // Destroys iterators taken from `cursors` on the scan thread (here once
  // it has stopped): the last one holding an old RocksDB version frees its
  // memtables and deletes the files only it used, under RocksDB's mutex,
  // which an io loop serving clients must not wait for.
  void DisposeIterators(std::vector<std::unique_ptr<Iterator>> iterators);

 private:
  std::once_flag acl_once_;
  std::shared_ptr<const Acl> acl_;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SERVER_STATE_H_
