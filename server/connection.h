// Copyright (c) fencedkv authors.
//
// Connection: one client's state machine (kvrocks' redis_connection.cc). It
// reads requests, parses them (resp_parser.h), passes each command through
// the gates (Admit for login, ACL, arity and MULTI; the server's for
// shutdown), then takes its route (fast_path.h): GETs collected for one
// MultiGet, plain fenced SET / MSET joining the loop's group commit, SCAN
// and friends on the scan thread, a long EXEC on the database thread, or
// Execute on the loop. Replies go out
// in request order, each only after its command's effect is durable to the
// configured level. It also closes itself on a timeout, and frees what a large
// request or reply grew once idle.
//
// Thread safety: every handler runs on the connection's loop, except a
// command handed to the scan or database thread, which runs there while the
// loop leaves this connection alone (reads_pending_). What other threads
// may read (CLIENT LIST) is immutable or published under info_mu_.

#ifndef FENCEDKV_SERVER_CONNECTION_H_
#define FENCEDKV_SERVER_CONNECTION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loop.h"
#include "resp_parser.h"
#include "server_impl.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

enum class Route : uint8_t;  // fast_path.h

// (NowMs, CLIENT LIST's clock: server_state.h.)
// Monotonic milliseconds, for idle times and deadlines.
int64_t SteadyMs();

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl* server, Loop* loop, asio::ip::tcp::socket socket,
             uint64_t id);
  ~Connection();

  // Starts reading, on the connection's loop. Thread-safe.
  void Start();

  // Sends what replies are ready (if the socket takes them now), then
  // closes the socket, on the connection's loop. Thread-safe.
  void Close();
  // CLIENT KILL: Close, and no command of this connection that has not
  // begun runs (pipelined after its own kill, say). A server shutting down
  // calls Close alone: those commands still get -SHUTDOWN. Thread-safe.
  void Kill();

  // Appends CLIENT LIST's line. Thread-safe: reads only what is immutable
  // or published.
  void Describe(int64_t now_ms, int64_t now_steady_ms, std::string* out) const
      LOCKS_EXCLUDED(info_mu_);

  // Its id, and its share of ServerStats::client_bytes (maxmemory_clients'
  // eviction). Thread-safe.
  uint64_t id() const { return client_.id; }  // (set once, at construction)
  int64_t charged() const { return charged_.load(std::memory_order_relaxed); }
  // Closed, or its close is on its way (Close, Kill). Thread-safe.
  bool closing() const { return gone_.load(std::memory_order_relaxed); }
  // Writes its share off ServerStats::client_bytes at once, for good (an
  // evicted connection's memory is as good as gone; a command of its own
  // still running on another thread frees its part when it ends): returns
  // the share it had, -1 if it was written off already (another thread
  // evicting it too), 0 if it holds nothing (then it stays counted from 0).
  // Thread-safe.
  int64_t ReleaseCharge();

  // CLIENT KILL: whether `filter` names this connection. Thread-safe.
  bool Matches(const KillFilter& filter) const LOCKS_EXCLUDED(info_mu_);

  // On the loop's timeout sweep: closes the connection if it has not
  // authenticated within auth_timeout, or sent no complete command for
  // idle_timeout. A connection whose command is still running is left
  // alone.
  void CheckTimeouts(int64_t now_steady_ms);

  // On the loop's flush (or a part of its pass: Server::Impl::AddWriter):
  // the grouped writes waiting for it, appended to
  // *out (valid until OnJobDone), and how many.
  void AppendJob(std::vector<const WriteBatch*>* out) const;
  size_t job_size() const { return job_n_; }
  // Their statuses, in order: the replies, then on with what is buffered.
  void OnJobDone(const Status* statuses);

 private:
  // With `flush`, first sends what of out_ the socket takes now
  // (SendWhatFits).
  void CloseNow(bool flush = false);
  // Sends what of out_ the socket takes now, without waiting, unless an
  // asynchronous write is under way, and never a reply still held for the
  // commit tracker; drops what was sent from out_.
  void SendWhatFits();
  void DoRead();
  void OnRead(const asio::error_code& ec, size_t n);
  // Runs what is buffered and writes the replies, until it must wait: for
  // more input, for the socket to take more output, for the loop's flush of
  // its grouped writes (which calls OnJobDone) or for a command handed to
  // another thread.
  void Continue();
  // Parses and runs the buffered commands, while the replies may wait.
  void Process();
  // After a command ran: the parser's limits follow AUTH, and what CLIENT
  // LIST shows follows the name and the MULTI queue.
  void AfterDispatch() LOCKS_EXCLUDED(info_mu_);
  // Frees what a large request or reply left behind; called when nothing is
  // buffered and nothing waits (so that memory per idle client stays
  // small).
  void ShrinkIdle();
  // Brings this connection's share of ServerStats::client_bytes (charged_)
  // to what it holds now: its input buffer past the idle size, its MULTI
  // queue, and the replies it has not taken (from kCountedReplyBytes on).
  // Past maxmemory_clients, grown replies evict the clients holding the
  // most, this one once it holds the most. On the loop.
  void Recharge();
  // maxmemory_clients evicts this connection, which holds `held` bytes:
  // its share is written off and it closes.
  void EvictSelf(int64_t held);
  // The reply to a command that arrives once shutdown has begun.
  void RefuseShuttingDown();
  // Runs the admitted command in args_ elsewhere, so this loop's other
  // connections do not wait for it: on the scan thread (to_scans: a walk of
  // the key space may take long and first sort the memtable,
  // --memtable=hash), else on the long-command thread (ServerState::longs).
  // True if handed over (false only once that thread stopped): then
  // nothing more is processed until OnOffloadDone. (The
  // handler reads client_, which the loop leaves alone meanwhile.) A write
  // (is_write) has its reply held for the commit tracker, as on the loop.
  bool OffloadCommand(const Admission& admission, bool to_scans, bool is_write);
  // Whether args_, admitted to run and routed to the loop (`route`: a
  // kBatchedGet or kExecute), names a key that may hold a large value
  // (DB::MayHoldLargeValue): its read would copy that value on the loop,
  // so it runs on the long-command thread instead.
  bool MayReadLargeValue(const Admission& admission, Route route);
  void OnOffloadDone();
  // The write(s) just run were released (they are in the WAL): their
  // replies -- out_ from `mark` on, or `grouped` (one line per grouped
  // write: empty for +OK, else its error: nothing written) -- are the
  // commit tracker's to decide (CommitTracker::Release), under the lock
  // that changes the ISR: at once, or once the in-sync replicas
  // acknowledged them (then true: nothing more is processed until
  // OnRepliesCommitted). If refused, the tracker's error replaces them (the
  // write was applied here and may or may not survive). The `commands`
  // commands are counted (INFO commandstats) and end once decided
  // (FinishHeld). The caller sets held_cmds_ (grouped) or held_admission_,
  // held_offloaded_ (one command), and held_start_.
  bool HoldReplies(size_t mark, std::vector<std::string> grouped,
                   size_t commands);
  // From any thread: queues c's decided replies for its loop, which takes
  // every queued one in one handler (Loop::decided).
  static void HandOverDecided(std::shared_ptr<Connection> c, std::string error);
  void OnRepliesCommitted(const std::string& error);
  // The held replies' final form (`error` empty: committed).
  void FinishHeld(const std::string& error);
  // WAIT on a primary: waits for the replicas' acknowledgements off the
  // loop (the answer comes as an offloaded command's). False if it cannot
  // wait (a replica, bad arguments): then its handler answers.
  bool StartWait(const Admission& admission);
  // Closes the connections of `loop` blocked in WAIT whose peer closed
  // (a WAIT whose client went would otherwise hold its slot for ever: the
  // socket is not read while it waits); runs again while any waits.
  static void WatchHangups(Loop* loop);
  // Whether the peer closed its side or the socket failed (POLLRDHUP).
  bool PeerHungUp();
  // After FENCEDKV.SYNC: what replies are waiting are written, then the
  // socket goes to the replication (a link thread) and this connection
  // ends.
  void HandOff();
  // Answers the GETs collected by Process: here if few, else with one
  // MultiGet on the database thread, so this loop serves its other
  // connections meanwhile. True if handed to it: then nothing more may be
  // processed until OnReadsDone.
  bool FlushGets();

 public:
  // For Server::Impl::FlushReads: the MultiGet of what FlushGets collected
  // (on the database thread, or on the loop), and then, on the loop, the
  // replies, after which processing continues.
  void ReadGets();
  void OnReadsDone();

 private:
  void ReplyGets();
  // Counts one call of `cmd` (command_stats.h) whose reply is `reply` and
  // which took `usec`: as a refusal (`refused`: it did not run) or a call,
  // with its error if the reply is one. True if it belongs in the slow log.
  bool CountCall(const CommandSpec* cmd, bool refused, uint64_t usec,
                 std::string_view reply);
  // After `admission`'s command (args) ran from t0, appending `reply`:
  // CountCall, and the slow log.
  void NoteExecuted(const Admission& admission, const Args& args,
                    std::chrono::steady_clock::time_point t0,
                    std::string_view reply);
  // Adds a slow log entry for this client.
  void LogSlow(uint64_t usec, size_t argc,
               const std::function<std::string_view(size_t)>& arg);
  // Writes out_ with non-blocking sends. True if all of it went (out_ is
  // then empty); false if the rest was handed to an asynchronous write,
  // whose completion continues, or the connection was closed.
  bool WriteNow();

  Server::Impl* const server_;
  Loop* const loop_;  // every handler of this connection runs on its thread
  asio::ip::tcp::socket socket_;
  bool closed_ = false;
  // Set by Close (any thread) and CloseNow: a command queued for the scan
  // or database thread is then skipped, not run (its reply goes nowhere).
  // Before, a killed client's KEYS still ran, and at shutdown every queued
  // command ran past the deadline (a helper's review: 9980 queued KEYS
  // kept a SIGTERMed server up for minutes).
  std::atomic<bool> gone_{false};
  // Set by Kill (any thread): Process runs no further command.
  std::atomic<bool> killed_{false};
  bool writing_ = false;  // an asynchronous write of out_ is under way
  ClientState client_;
  RespParser parser_;
  // The input: a buffer that grows without being zero-filled, so a page is
  // committed only when a read writes it.
  struct InputBuffer {
    explicit InputBuffer(size_t n) : data(new char[n]), size(n) {}
    // Grows to n bytes (n > size), keeping the first `keep`.
    void Grow(size_t n, size_t keep);
    std::unique_ptr<char[]> data;
    size_t size;
  };
  InputBuffer in_;
  size_t in_begin_ = 0, in_end_ = 0;
  // This connection's share of ServerStats::client_bytes (Recharge), -1
  // once written off (ReleaseCharge). Set on the loop; taken by whichever
  // thread evicts it (an exchange: only one does).
  std::atomic<int64_t> charged_{0};
  size_t reply_share_ = 0;  // the replies counted in charged_ (Recharge)
  std::string out_;
  std::vector<std::string_view> args_;
  std::vector<size_t> key_positions_;  // MayReadLargeValue's scratch
  // Steady-clock ms: when the connection was accepted, and when its last
  // complete command was parsed (relaxed: CLIENT LIST reads it elsewhere).
  const int64_t connected_ms_;
  std::atomic<int64_t> last_command_ms_;
  // What CLIENT LIST shows: the name, MULTI queue length and user as of the
  // last command, copied here by AfterDispatch, and the user from the start
  // by the constructor (published_* are the loop's own copies, so an
  // unchanged state costs no lock).
  mutable Mutex info_mu_;
  std::string shown_name_ GUARDED_BY(info_mu_);
  int64_t shown_multi_ GUARDED_BY(info_mu_) = -1;
  const AclUser* shown_user_ GUARDED_BY(info_mu_) = nullptr;
  std::string published_name_;
  int64_t published_multi_ = -1;
  const AclUser* published_user_ = nullptr;
  // Grouped writes waiting for the loop's flush: job_[0, job_n_). The
  // batches are reused from one group to the next.
  std::vector<WriteBatch> job_;
  std::vector<const CommandSpec*> job_cmd_;  // each one's command
  size_t job_n_ = 0;
  size_t job_bytes_ = 0;
  // GETs collected for one MultiGet: keys back to back in get_keys_.
  std::string get_keys_;
  std::vector<size_t> get_ends_;
  std::vector<std::string_view> get_views_;
  std::vector<std::string> get_values_;
  std::vector<Status> get_statuses_;
  // A MultiGet or command of ours is on the scan or database thread.
  bool reads_pending_ = false;
  // The WAIT this connection is blocked in (Replication::CancelWait), 0 if
  // none.
  uint64_t wait_id_ = 0;
  // Listed in loop_->waiting (once: a pipeline of WAITs, each answered
  // within one handler, would otherwise add an entry per WAIT that the
  // hang-up check never drops).
  bool in_waiting_list_ = false;
  // Process stopped with input left because its pass ran out of time
  // (kPassBudget): Continue posts itself rather than read.
  bool yielded_ = false;
  // A command run on the scan thread or the database thread: its words and
  // reply.
  std::vector<std::string> offload_args_;
  std::string offload_out_;
  Admission offload_admission_;
  // When the current group of GETs, the grouped writes, and the offloaded
  // command began (their calls' time in INFO commandstats: from their
  // parse to their reply).
  std::chrono::steady_clock::time_point gets_start_, job_start_, offload_start_;
  bool offload_write_ = false;  // the offloaded command is a long EXEC
  // The offloaded command was skipped (gone_): nothing ran, nothing is
  // counted. Set by the job before it posts OnOffloadDone.
  bool offload_skipped_ = false;
  // Replies held for the commit tracker (HoldReplies), and what counts
  // their calls once decided: the grouped writes' commands, or the one
  // command's admission (its words in args_, or in offload_args_ if
  // held_offloaded_), and when they began.
  bool holding_ = false;  // from a pending HoldReplies to FinishHeld
  size_t held_mark_ = 0;
  std::vector<std::string> held_grouped_;
  std::vector<const CommandSpec*> held_cmds_;
  size_t held_commands_ = 0;
  Admission held_admission_;
  bool held_offloaded_ = false;
  std::chrono::steady_clock::time_point held_start_;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_CONNECTION_H_
