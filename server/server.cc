// Copyright (c) fencedkv authors.

#include "server.h"

#define ASIO_STANDALONE
#include <asio.hpp>
#include <glog/logging.h>

#include <sys/resource.h>

#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "acl.h"
#include "command_table.h"
#include "db_worker.h"
#include "error_mapping.h"
#include "resp_writer.h"
#include "util/mutexlock.h"
#include "util/sync_point.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

namespace {
constexpr size_t kInitialReadBuffer = 16 << 10;
// Parse no further while this much output waits: bounds a pipelining
// client's memory to this plus one command's reply (or one MultiGet's: at
// most kMaxGets values).
constexpr size_t kMaxPendingOutput = 4 << 20;
// An idle connection frees buffers and scratch vectors larger than these
// (a large request or reply grew them).
constexpr size_t kKeepBufferBytes = 64 << 10;
constexpr size_t kKeepScratchItems = 1024;
// accept() failing (e.g. EMFILE: out of file descriptors) is retried after
// kAcceptBackoff instead of at once, and logged at most once an interval.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr auto kAcceptLogInterval = std::chrono::seconds(10);
// File descriptors kept for the server's own use (logs, the metrics port,
// new database files) beyond those open at Start: Redis reserves 32 too.
constexpr size_t kReservedFds = 32;
// An EXEC of at least this many queued commands runs on the DbWorker, so
// the loop serves its other connections meanwhile.
constexpr size_t kOffloadExecCommands = 64;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Monotonic milliseconds, for idle times and deadlines.
int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

class Connection;

// One io thread: its own io_context, so a connection's handlers never run
// concurrently (no strand needed), and the fenced writes its connections
// parsed in one loop iteration reach the DbWorker as one job.
struct Loop {
  Loop() : io(1) {}
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
  // Connections with grouped writes for this iteration's flush.
  std::vector<std::shared_ptr<Connection>> writers;
  bool flush_posted = false;
  // This loop's connections, for the timeout checks (expired entries are
  // dropped as they are met).
  std::vector<std::weak_ptr<Connection>> conns;
  // Closes connections past idle_timeout or auth_timeout, if either is set.
  // (Timers after `io`, so they are destroyed first.)
  std::optional<asio::steady_timer> timeouts;
  // Loop 0 only: releases SCAN iterators parked too long.
  std::optional<asio::steady_timer> sweep;
};

class Server::Impl {
 public:
  explicit Impl(const ServerOptions& options) : options_(options) {
    state_.options = &options_;
    state_.stats = &stats_;
    const int n = std::max(1, options_.io_threads);
    for (int i = 0; i < n; ++i) loops_.push_back(std::make_unique<Loop>());
    acceptor_.emplace(loops_[0]->io);
  }
  ~Impl() {
    // Connections still referenced by queued writes or handlers unregister
    // themselves from conns_ when those go: before the rest of Impl, and
    // the worker's before the io_contexts their sockets belong to. The
    // acceptor and its timer go before their io_context too.
    worker_.reset();
    accept_retry_.reset();
    acceptor_.reset();
    loops_.clear();
  }

  Status Listen();
  Status Start(DB* db, LeaseService* leases);
  void Stop(std::chrono::milliseconds deadline);

  // A command may run only between these; false if shutting down. (Stop
  // sets stopping_ then sums the shards; a command bumps its shard then
  // reads stopping_: with seq_cst, one of them sees the other.)
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

  // `c` (on `loop`) has grouped writes: they go out with the loop's next
  // flush, which runs once the loop has handled what is ready now.
  void AddWriter(Loop* loop, std::shared_ptr<Connection> c) {
    loop->writers.push_back(std::move(c));
    if (!loop->flush_posted) {
      loop->flush_posted = true;
      asio::post(loop->io, [this, loop] { Flush(loop); });
    }
  }
  void Flush(Loop* loop);
  // Every few seconds on loop 0: parked SCAN iterators past their time go.
  void ScheduleSweep();
  // On each loop, if a timeout is set: closes the connections past it.
  void ScheduleTimeouts(Loop* loop);
  // Whether idle_timeout or auth_timeout (with a password) applies; only
  // then do the loops keep their connections in Loop::conns.
  bool timeouts_enabled() const {
    return options_.idle_timeout.count() > 0 ||
           (!options_.requirepass.empty() && options_.auth_timeout.count() > 0);
  }
  // Caps options_.maxclients to what RLIMIT_NOFILE leaves (see Start).
  void CapMaxClients();

  void Register(uint64_t id, const std::shared_ptr<Connection>& c);
  void Unregister(uint64_t id);
  // CLIENT LIST's reply: one line per connection, or an error past
  // max_reply_bytes.
  void ListClients(std::string* out);

  ServerOptions options_;
  ServerStats stats_;
  ServerState state_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_id_{1};
  size_t next_loop_ = 0;  // accept handler only
  bool started_ = false;
  std::mutex conns_mu_;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> conns_;
  std::unique_ptr<DbWorker> worker_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::optional<asio::ip::tcp::acceptor> acceptor_;  // on loops_[0]
  // accept() failures (loop 0 only): the retry timer, and what was logged.
  std::optional<asio::steady_timer> accept_retry_;
  std::chrono::steady_clock::time_point accept_logged_;
  uint64_t accept_errors_unlogged_ = 0;

 private:
  void DoAccept();
  // After a failed accept: logs (rate-limited) and retries after a pause.
  void AcceptFailed(const asio::error_code& ec);
};

// One client connection. Every handler runs on the connection's loop thread,
// except a command handed to the DbWorker (OffloadCommand), which runs there
// while the loop leaves this connection alone (reads_pending_). What other
// threads may read (CLIENT LIST) is published under info_mu_.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl* server, Loop* loop, asio::ip::tcp::socket socket,
             uint64_t id)
      : server_(server),
        loop_(loop),
        socket_(std::move(socket)),
        parser_(server->options_.limits),
        in_(kInitialReadBuffer),
        connected_ms_(SteadyMs()),
        last_command_ms_(connected_ms_) {
    client_.id = id;
    client_.created_ms = NowMs();
    StartSession(server->state_, &client_);
    parser_.set_authenticated(client_.authed);
    asio::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) client_.addr = ep.address().to_string() + ":" + std::to_string(ep.port());
    socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    // Replies are written straight away when the socket takes them.
    socket_.non_blocking(true, ec);
  }
  ~Connection() {
    server_->state_.cursors.DropOwner(client_.id);  // its SCAN cursors go
    server_->stats_.connected.fetch_sub(1);
    server_->Unregister(client_.id);
  }

  void Start() {
    auto self = shared_from_this();
    asio::post(loop_->io, [self] {
      if (self->server_->timeouts_enabled()) self->loop_->conns.push_back(self);
      self->DoRead();
    });
  }

  // Sends what replies are ready (if the socket takes them now), then
  // closes the socket, on the connection's loop (thread-safe).
  void Close() {
    auto self = shared_from_this();
    asio::post(loop_->io, [self] { self->CloseNow(/*flush=*/true); });
  }

  // CLIENT LIST's line. Thread-safe: reads only what is immutable or
  // published.
  void Describe(int64_t now_ms, int64_t now_steady_ms, std::string* out) const {
    std::string name;
    int64_t multi;
    const AclUser* user;  // the ACL's users live as long as the server
    {
      MutexLock lock(&info_mu_);
      name = shown_name_;
      multi = shown_multi_;
      user = shown_user_;
    }
    const int64_t idle_ms =
        now_steady_ms - last_command_ms_.load(std::memory_order_relaxed);
    out->append(
        "id=" + std::to_string(client_.id) + " addr=" + client_.addr +
        " name=" + name +
        " age=" + std::to_string((now_ms - client_.created_ms) / 1000) +
        " idle=" + std::to_string(std::max<int64_t>(0, idle_ms) / 1000) +
        " db=0 multi=" + std::to_string(multi) +
        " user=" + (user != nullptr ? user->name() : std::string()) + "\n");
  }

  // On the loop's timeout sweep: closes the connection if it has not
  // authenticated within auth_timeout, or sent no complete command for
  // idle_timeout. A connection whose command is still running is left alone.
  void CheckTimeouts(int64_t now_ms) {
    if (closed_ || reads_pending_ || job_n_ > 0) return;
    const ServerOptions& o = server_->options_;
    const auto auth_ms = static_cast<int64_t>(o.auth_timeout.count());
    const auto idle_ms = static_cast<int64_t>(o.idle_timeout.count());
    if (!client_.authed && auth_ms > 0 && now_ms - connected_ms_ >= auth_ms) {
      server_->stats_.timeouts.fetch_add(1);
      if (!writing_) {
        resp::Error(&out_, "NOAUTH authentication timeout: no AUTH within " +
                               std::to_string(auth_ms) +
                               " ms of connecting (auth_timeout)");
      }
      CloseNow(/*flush=*/true);
    } else if (idle_ms > 0 &&
               now_ms - last_command_ms_.load(std::memory_order_relaxed) >=
                   idle_ms) {
      server_->stats_.timeouts.fetch_add(1);
      CloseNow(/*flush=*/false);  // as Redis: silently
    }
  }

  // The grouped writes waiting for the loop's flush.
  void AppendJob(std::vector<const WriteBatch*>* out) const {
    for (size_t i = 0; i < job_n_; ++i) out->push_back(&job_[i]);
  }
  size_t job_size() const { return job_n_; }

  // Their statuses: replies, then on with what is buffered.
  void OnJobDone(const Status* statuses) {
    for (size_t i = 0; i < job_n_; ++i) {
      if (statuses[i].ok()) {
        out_.append("+OK\r\n", 5);
      } else {
        resp::Error(&out_, ErrorLine(statuses[i]));
      }
      server_->EndCommand();
      // Batches are reused; a big one is not kept for ever.
      if (job_[i].ApproximateSize() > kKeepBatchBytes) job_[i] = WriteBatch();
    }
    job_n_ = 0;
    job_bytes_ = 0;
    Continue();
  }

 private:
  // With `flush`, first sends what of out_ the socket takes now (no
  // waiting), unless an asynchronous write is under way.
  void CloseNow(bool flush = false) {
    if (closed_) return;
    closed_ = true;
    asio::error_code ec;
    if (flush && !writing_ && !out_.empty()) {
      socket_.write_some(asio::buffer(out_), ec);
    }
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  void DoRead() {
    if (closed_) return;
    if (in_end_ == in_.size()) {
      if (in_begin_ > 0) {
        std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
        in_end_ -= in_begin_;
        in_begin_ = 0;
      } else {
        // One command is larger than the buffer: grow, within the limit
        // (the parser refuses anything over max_request_bytes first).
        const size_t cap = server_->options_.limits.max_request_bytes + (64 << 10);
        in_.resize(std::min(cap, in_.size() * 2));
        if (in_end_ == in_.size()) {
          resp::Error(&out_, "ERR Protocol error: request too large");
          client_.close_after_reply = true;
          Continue();
          return;
        }
      }
    }
    auto self = shared_from_this();
    socket_.async_read_some(
        asio::buffer(in_.data() + in_end_, in_.size() - in_end_),
        [self](const asio::error_code& ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(const asio::error_code& ec, size_t n) {
    if (ec) {
      CloseNow();
      return;
    }
    in_end_ += n;
    Continue();
  }

  // Runs what is buffered and writes the replies, until it must wait: for
  // more input, for the socket to take more output, or for the loop's
  // flush of its grouped writes (which calls OnJobDone).
  void Continue() {
    while (!closed_) {
      Process();
      if (reads_pending_) return;  // OnReadsDone continues
      if (job_n_ > 0) {
        server_->AddWriter(loop_, shared_from_this());
        return;
      }
      if (!out_.empty()) {
        if (!WriteNow()) return;  // the rest goes asynchronously
        continue;                 // all written: on with what is buffered
      }
      if (client_.close_after_reply) {
        CloseNow();
      } else {
        if (in_begin_ == in_end_) ShrinkIdle();
        DoRead();
      }
      return;
    }
  }

  void Process() {
    const size_t begin = in_begin_;
    while (in_begin_ < in_end_ && !client_.close_after_reply &&
           out_.size() < kMaxPendingOutput) {
      size_t consumed = 0;
      const auto r = parser_.Parse(in_.data() + in_begin_, in_end_ - in_begin_,
                                   &args_, &consumed);
      if (r == RespParser::Result::kNeedMore) break;
      if (r == RespParser::Result::kError) {
        server_->stats_.protocol_errors.fetch_add(1);
        resp::Error(&out_, "ERR " + parser_.error());
        client_.close_after_reply = true;
        break;
      }
      if (!args_.empty() && PlainGet()) {
        // Consecutive GETs are read together with one MultiGet.
        if (job_n_ > 0) break;  // after the pending writes
        if (!server_->BeginCommand()) {
          if (FlushGets()) break;  // their replies first
          RefuseShuttingDown();
          break;
        }
        get_keys_.append(args_[1].data(), args_[1].size());
        get_ends_.push_back(get_keys_.size());
        in_begin_ += consumed;
        if (get_ends_.size() >= kMaxGets && FlushGets()) break;
        continue;
      }
      // Replies in order, and reads before later writes. (This command is
      // parsed again once offloaded reads are answered.)
      if (FlushGets()) break;
      if (!args_.empty()) {
        if (job_n_ == job_.size()) job_.emplace_back();
        WriteBatch* batch = &job_[job_n_];
        batch->Clear();
        if (Groupable(batch)) {
          // Plain fenced writes join the loop's next group commit.
          if (!server_->BeginCommand()) {
            // Shutting down. The writes grouped before this one are answered
            // first; this command is parsed again after their replies.
            if (job_n_ == 0) RefuseShuttingDown();
            break;
          }
          ++job_n_;
          job_bytes_ += consumed;
          in_begin_ += consumed;
          TEST_SYNC_POINT("Connection::Process:Grouped");
          if (job_n_ >= kMaxJob || job_bytes_ >= kMaxJobBytes) break;
          continue;
        }
        // Anything else waits for the pending writes (order of replies).
        if (job_n_ > 0) break;
        if (!server_->BeginCommand()) {
          RefuseShuttingDown();
          break;
        }
        in_begin_ += consumed;
        // A walk of the key space runs on the scan thread, a long EXEC's
        // one large write on the DbWorker if it has room.
        if (Iterates() && OffloadCommand(/*to_scans=*/true)) break;
        if (LongExec() && OffloadCommand(/*to_scans=*/false)) break;
        Dispatch(server_->state_, client_, args_, &out_);
        server_->EndCommand();
        AfterDispatch();
        continue;
      }
      in_begin_ += consumed;  // an empty command
    }
    if (!reads_pending_) FlushGets();
    if (in_begin_ != begin) {
      last_command_ms_.store(SteadyMs(), std::memory_order_relaxed);
    }
    if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  }

  // After a command ran: the parser's limits follow AUTH, and what CLIENT
  // LIST shows follows the name and the MULTI queue.
  void AfterDispatch() {
    parser_.set_authenticated(client_.authed);
    const int64_t multi =
        client_.in_multi ? static_cast<int64_t>(client_.queued.size()) : -1;
    if (multi == published_multi_ && client_.name == published_name_ &&
        client_.user == published_user_) {
      return;
    }
    published_multi_ = multi;
    published_name_ = client_.name;
    published_user_ = client_.user;
    MutexLock lock(&info_mu_);
    shown_multi_ = multi;
    shown_name_ = client_.name;
    shown_user_ = client_.user;
  }

  // Frees what a large request or reply left behind; called when nothing is
  // buffered and nothing waits (so that memory per idle client stays small).
  void ShrinkIdle() {
    if (in_.size() > kInitialReadBuffer) {
      std::vector<char>(kInitialReadBuffer).swap(in_);
      in_begin_ = in_end_ = 0;
    }
    if (out_.capacity() > kKeepBufferBytes) std::string().swap(out_);
    if (args_.capacity() > kKeepScratchItems)
      std::vector<std::string_view>().swap(args_);
    if (offload_args_.capacity() > kKeepScratchItems) {
      std::vector<std::string>().swap(offload_args_);
    }
    if (offload_out_.capacity() > kKeepBufferBytes)
      std::string().swap(offload_out_);
    if (get_keys_.capacity() > kKeepBufferBytes) std::string().swap(get_keys_);
    if (!client_.in_multi && client_.queued.capacity() > kKeepScratchItems) {
      std::vector<std::vector<std::string>>().swap(client_.queued);
    }
    parser_.ShrinkScratch();
  }

  // The reply to a command that arrives once shutdown has begun.
  void RefuseShuttingDown() {
    resp::Error(&out_, "SHUTDOWN the server is shutting down");
    client_.close_after_reply = true;
  }

  // SCAN, KEYS or DBSIZE from a client allowed to run it, outside MULTI.
  bool Iterates() const {
    if (client_.in_multi) return false;
    const CommandSpec* cmd = LookupCommand(args_[0]);
    return cmd != nullptr && (cmd->flags & kCmdIterates) != 0 &&
           MayRun(client_, *cmd, args_);
  }

  // An EXEC of a long queue (its one large write runs on the DbWorker).
  bool LongExec() const {
    static const CommandSpec& kExec = *LookupCommand("exec");
    return client_.in_multi && client_.queued.size() >= kOffloadExecCommands &&
           EqualsIgnoreCase(args_[0], "EXEC") && MayRun(client_, kExec, args_);
  }

  // Runs the command in args_ elsewhere, so this loop's other connections
  // do not wait for it: on the scan thread (to_scans: a walk of the key
  // space may take long and first sort the memtable, --memtable=hash), else
  // on the DbWorker if it has room. True if handed over: then nothing more
  // is processed until OnOffloadDone. (The handler reads client_, which the
  // loop leaves alone meanwhile.)
  bool OffloadCommand(bool to_scans) {
    offload_args_.assign(args_.begin(), args_.end());  // in_ may move on
    auto self = shared_from_this();
    auto job = [self] {
      // Off the loop; this connection waits (reads_pending_).
      const Args args(self->offload_args_.begin(), self->offload_args_.end());
      Dispatch(self->server_->state_, self->client_, args, &self->offload_out_);
      asio::post(self->loop_->io, [self] { self->OnOffloadDone(); });
    };
    const bool queued = to_scans ? server_->state_.scans.Submit(job)
                                 : server_->worker_->TrySubmitRead(job);
    if (queued) reads_pending_ = true;
    return queued;
  }

  void OnOffloadDone() {
    reads_pending_ = false;
    if (out_.empty()) {
      out_.swap(offload_out_);
    } else {
      out_.append(offload_out_);
      offload_out_.clear();
    }
    offload_args_.clear();
    server_->EndCommand();
    AfterDispatch();
    Continue();
  }

  // GET key from a client allowed to run it, outside MULTI.
  bool PlainGet() const {
    static const CommandSpec& kGet = *LookupCommand("get");
    return args_.size() == 2 && !client_.in_multi &&
           EqualsIgnoreCase(args_[0], "GET") && MayRun(client_, kGet, args_);
  }

  // Answers the GETs collected by Process: here if few, else with one
  // MultiGet on the DbWorker, so this loop serves its other connections
  // meanwhile. True if handed to the worker: then nothing more may be
  // processed until OnReadsDone.
  bool FlushGets() {
    const size_t n = get_ends_.size();
    if (n == 0) return false;
    get_views_.clear();
    size_t begin = 0;
    for (size_t end : get_ends_) {
      get_views_.emplace_back(get_keys_.data() + begin, end - begin);
      begin = end;
    }
    if (get_values_.size() < n) get_values_.resize(n);
    get_statuses_.assign(n, Status());
    DB* db = server_->state_.db;
    if (n >= kOffloadGets) {
      auto self = shared_from_this();
      const bool queued = server_->worker_->TrySubmitRead([self, db, n] {
        // On the worker thread; this connection waits (reads_pending_).
        db->MultiGet(ReadOptions(), n, self->get_views_.data(),
                     self->get_values_.data(), self->get_statuses_.data());
        asio::post(self->loop_->io, [self] { self->OnReadsDone(); });
      });
      if (queued) {
        reads_pending_ = true;
        return true;
      }
    }
    if (n == 1) {
      get_statuses_[0] = db->Get(ReadOptions(), get_views_[0], &get_values_[0]);
    } else {
      db->MultiGet(ReadOptions(), n, get_views_.data(), get_values_.data(),
                   get_statuses_.data());
    }
    ReplyGets();
    return false;
  }

  void OnReadsDone() {
    reads_pending_ = false;
    ReplyGets();
    Continue();
  }

  void ReplyGets() {
    const size_t n = get_ends_.size();
    for (size_t i = 0; i < n; ++i) {
      const Status& st = get_statuses_[i];
      if (st.ok()) {
        resp::Bulk(&out_, get_values_[i]);
      } else if (st.IsNotFound()) {
        resp::Null(&out_);
      } else {
        resp::Error(&out_, ErrorLine(st));
      }
      // Values are reused; a big one is not kept for ever.
      if (get_values_[i].capacity() > kKeepBatchBytes) std::string().swap(get_values_[i]);
      server_->EndCommand();
    }
    get_keys_.clear();
    get_ends_.clear();
  }

  // SET k v FENCE t and MSET k v ... FENCE t with a valid token, from a
  // client allowed to run them, outside MULTI: everything else (options,
  // errors, NOFENCE, unfenced writes) takes the ordinary path through
  // Dispatch.
  bool Groupable(WriteBatch* batch) const {
    static const CommandSpec& kSet = *LookupCommand("set");
    static const CommandSpec& kMset = *LookupCommand("mset");
    if (client_.in_multi) return false;
    const auto& a = args_;
    const size_t n = a.size();
    if (n < 5 || !EqualsIgnoreCase(a[n - 2], "FENCE")) return false;
    Token token;
    if (!ParseToken(a[n - 1], &token)) return false;
    if (n == 5 && EqualsIgnoreCase(a[0], "SET") && MayRun(client_, kSet, a)) {
      batch->Put(a[1], a[2], token);
      return true;
    }
    if ((n - 1) % 2 == 0 && EqualsIgnoreCase(a[0], "MSET") &&
        MayRun(client_, kMset, a)) {
      for (size_t i = 1; i + 2 < n; i += 2) batch->Put(a[i], a[i + 1], token);
      return true;
    }
    return false;
  }

  // Writes out_ with non-blocking sends. True if all of it went (out_ is
  // then empty); false if the rest was handed to an asynchronous write,
  // whose completion continues, or the connection was closed.
  bool WriteNow() {
    size_t sent = 0;
    asio::error_code ec;
    while (sent < out_.size()) {
      const size_t n = socket_.write_some(
          asio::buffer(out_.data() + sent, out_.size() - sent), ec);
      if (ec) break;
      sent += n;
    }
    if (sent == out_.size()) {
      out_.clear();
      return true;
    }
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      CloseNow();
      return false;
    }
    out_.erase(0, sent);
    auto self = shared_from_this();
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_),
                      [self](const asio::error_code& wec, size_t) {
                        self->writing_ = false;
                        if (wec) {
                          self->CloseNow();
                          return;
                        }
                        self->out_.clear();
                        self->Continue();
                      });
    return false;
  }

  Server::Impl* const server_;
  Loop* const loop_;  // every handler of this connection runs on its thread
  asio::ip::tcp::socket socket_;
  bool closed_ = false;
  bool writing_ = false;  // an asynchronous write of out_ is under way
  ClientState client_;
  RespParser parser_;
  std::vector<char> in_;
  size_t in_begin_ = 0, in_end_ = 0;
  std::string out_;
  std::vector<std::string_view> args_;
  // Steady-clock ms: when the connection was accepted, and when its last
  // complete command was parsed (relaxed: CLIENT LIST reads it elsewhere).
  const int64_t connected_ms_;
  std::atomic<int64_t> last_command_ms_;
  // What CLIENT LIST shows: the name and MULTI queue length as of the last
  // command, copied here by AfterDispatch (published_* are the loop's own
  // copies, so an unchanged state costs no lock).
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
  size_t job_n_ = 0;
  size_t job_bytes_ = 0;
  // GETs collected for one MultiGet: keys back to back in get_keys_.
  std::string get_keys_;
  std::vector<size_t> get_ends_;
  std::vector<std::string_view> get_views_;
  std::vector<std::string> get_values_;
  std::vector<Status> get_statuses_;
  bool reads_pending_ = false;  // a MultiGet or command of ours is on the DbWorker
  // A command run on the scan thread or the DbWorker: its words and reply.
  std::vector<std::string> offload_args_;
  std::string offload_out_;
  static constexpr size_t kMaxGets = 16;
  // Fewer GETs than this are read on the loop itself.
  static constexpr size_t kOffloadGets = 4;
  static constexpr size_t kMaxJob = 1024;
  static constexpr size_t kMaxJobBytes = 4 << 20;
  static constexpr size_t kKeepBatchBytes = 64 << 10;
};

void Server::Impl::Flush(Loop* loop) {
  loop->flush_posted = false;
  if (loop->writers.empty()) return;
  // Kept alive (with their batches) until the statuses are back.
  auto conns = std::make_shared<std::vector<std::shared_ptr<Connection>>>();
  conns->swap(loop->writers);
  std::vector<const WriteBatch*> batches;
  for (const auto& c : *conns) c->AppendJob(&batches);
  auto complete = [conns](const std::vector<Status>& statuses) {
    size_t at = 0;
    for (const auto& c : *conns) {
      const size_t n = c->job_size();
      c->OnJobDone(statuses.data() + at);
      at += n;
    }
  };
  if (!options_.sync) {
    // Nothing to wait for but the write itself: do it here.
    std::vector<Status> statuses(batches.size());
    Status s = state_.db->WriteGroup(ServerWriteOptions(state_), batches.data(),
                                     batches.size(), statuses.data());
    TEST_SYNC_POINT_CALLBACK("Server::WriteGroup:Result", &s);
    FailUnmarkedBatches(s, statuses.data(), statuses.size());
    complete(statuses);
    return;
  }
  worker_->SubmitWrite(std::move(batches),
                       [loop, complete](std::vector<Status> statuses) {
                         // On the worker thread: back to the loop.
                         asio::post(loop->io, [complete, st = std::move(statuses)] {
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
  const asio::ip::tcp::endpoint ep(address, static_cast<uint16_t>(options_.port));
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
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

Status Server::Impl::Start(DB* db, LeaseService* leases) {
  state_.db = db;
  state_.leases = leases;
  state_.port = port_;
  state_.started = std::chrono::steady_clock::now();
  state_.list_clients = [this](std::string* out) { ListClients(out); };
  CapMaxClients();
  worker_ = std::make_unique<DbWorker>(db, ServerWriteOptions(state_));
  accept_retry_.emplace(loops_[0]->io);
  DoAccept();
  loops_[0]->sweep.emplace(loops_[0]->io);
  ScheduleSweep();
  for (auto& loop : loops_) {
    Loop* l = loop.get();
    l->timeouts.emplace(l->io);
    ScheduleTimeouts(l);
    l->work.emplace(l->io.get_executor());
    l->thread = std::thread([l] { l->io.run(); });
  }
  started_ = true;
  return Status::OK();
}

void Server::Impl::CapMaxClients() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return;
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
  const auto auth = options_.requirepass.empty() ? std::chrono::milliseconds(0)
                                                 : options_.auth_timeout;
  // Checked a few times per timeout, at most once a second.
  auto period = std::chrono::milliseconds(1000);
  for (auto t : {idle, auth}) {
    if (t.count() > 0)
      period = std::min(period, std::max(t / 4, std::chrono::milliseconds(10)));
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
    state_.cursors.DropExpired();
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
        auto conn = std::make_shared<Connection>(this, loop, std::move(socket), id);
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
  std::lock_guard<std::mutex> lock(conns_mu_);
  conns_[id] = c;
}

void Server::Impl::Unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(conns_mu_);
  conns_.erase(id);
}

void Server::Impl::ListClients(std::string* out) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& [id, w] : conns_) {
      if (auto c = w.lock()) live.push_back(std::move(c));
    }
  }
  const int64_t now = NowMs(), now_steady = SteadyMs();
  std::string list;
  for (const auto& c : live) {
    c->Describe(now, now_steady, &list);
    if (ReplyTooLarge(state_, list.size(), out)) return;
  }
  resp::Bulk(out, list);
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
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& [id, w] : conns_) {
      if (auto c = w.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) c->Close();
  live.clear();
  for (auto& loop : loops_) loop->work.reset();
  // Let the posted closes run, then stop whatever is left.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (auto& loop : loops_) loop->io.stop();
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
  }
  // Jobs still queued run now; their replies go nowhere.
  if (worker_) worker_->Stop();
  state_.scans.Stop();
  // Parked SCAN iterators go before the database closes.
  state_.cursors.Clear();
}

Server::Server(const ServerOptions& options) : impl_(new Impl(options)) {}
Server::~Server() { Stop(std::chrono::milliseconds(0)); }
Status Server::Listen() { return impl_->Listen(); }
int Server::port() const { return impl_->port_; }
Status Server::Start(DB* db, LeaseService* leases) {
  return impl_->Start(db, leases);
}
void Server::Stop(std::chrono::milliseconds deadline) {
  if (!impl_->started_) {
    impl_->stopping_ = true;
    return;
  }
  impl_->Stop(deadline);
}
const ServerStats& Server::stats() const { return impl_->stats_; }
size_t Server::maxclients() const { return impl_->options_.maxclients; }
bool Server::stopping() const { return impl_->stopping_.load(); }

}  // namespace server
}  // namespace fencedkv
