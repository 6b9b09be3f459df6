// Copyright (c) fencedkv authors.

#include "connection.h"

#include <algorithm>
#include <cstring>

#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "command_table.h"
#include "error_mapping.h"
#include "fast_path.h"
#include "replication.h"
#include "resp_writer.h"
#include "util/sync_point.h"

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
// Replies waiting for a client count toward maxmemory_clients (Recharge)
// from this many bytes on: below it, the share of a client that reads its
// replies would change with every command, each change an atomic add on
// one counter every io thread shares.
constexpr size_t kCountedReplyBytes = 64 << 10;
// GETs read with one MultiGet at most; fewer than kOffloadGets are read on
// the loop itself.
constexpr size_t kMaxGets = 16;
constexpr size_t kOffloadGets = 4;
// One connection's share of a group commit: at most this many commands or
// bytes of requests.
constexpr size_t kMaxJob = 1024;
constexpr size_t kMaxJobBytes = 4 << 20;
// Batches and values are reused; one grown past this is not kept.
constexpr size_t kKeepBatchBytes = 64 << 10;
// A pass over one connection's input yields to the loop's other
// connections once the commands it ran on the loop (Execute) have taken
// this long: a pipeline of synced commands (each FENCE.ADVANCE fsyncs)
// held the loop for as long as the whole pipeline ran. The fast paths
// (grouped writes, batched GETs) are bounded by kMaxJob and kMaxGets.
constexpr auto kPassBudget = std::chrono::milliseconds(2);

uint64_t UsecSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - t0)
          .count());
}
// A write for the rejected-writes counters: a mutation, or EXEC (its
// mutations).
bool IsWrite(const CommandSpec* cmd) {
  return cmd != nullptr &&
         ((cmd->flags & kCmdWrite) != 0 || (cmd->categories & kCatWrite) != 0 ||
          std::string_view(cmd->name) == "exec");
}
}  // namespace

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Connection::Connection(Server::Impl* server, Loop* loop,
                       asio::ip::tcp::socket socket, uint64_t id)
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
  // CLIENT LIST shows the user from the start, not after a first command.
  published_user_ = client_.user;
  {
    MutexLock lock(&info_mu_);
    shown_user_ = client_.user;
  }
  asio::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) {
    client_.addr = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  // A peer whose host went away sends no FIN: without probes its
  // connection (and a WAIT it blocks in) held its slot for ever.
  if (const int idle = server->options_.tcp_keepalive_s; idle > 0) {
    const int fd = socket_.native_handle(), on = 1,
              interval = std::max(1, idle / 3), probes = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
  }
  // Replies are written straight away when the socket takes them.
  socket_.non_blocking(true, ec);
}

Connection::~Connection() {
  ReleaseCharge();
  // Its SCAN cursors go (their parked iterators on the scan thread).
  server_->state_.DisposeIterators(
      server_->state_.cursors.DropOwner(client_.id));
  server_->stats_.connected.fetch_sub(1);
  server_->Unregister(client_.id);
}

void Connection::Start() {
  auto self = shared_from_this();
  asio::post(loop_->io, [self] {
    if (self->server_->timeouts_enabled()) self->loop_->conns.push_back(self);
    self->DoRead();
  });
}

void Connection::Kill() {
  killed_.store(true, std::memory_order_relaxed);
  Close();
}

void Connection::Close() {
  gone_.store(true, std::memory_order_relaxed);
  auto self = shared_from_this();
  asio::post(loop_->io, [self] { self->CloseNow(/*flush=*/true); });
}

void Connection::Describe(int64_t now_ms, int64_t now_steady_ms,
                          std::string* out) const {
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
  out->append(ClientListLine(
      client_.id, client_.addr, name, (now_ms - client_.created_ms) / 1000,
      std::max<int64_t>(0, idle_ms) / 1000, multi, user));
}

bool Connection::Matches(const KillFilter& filter) const {
  if (filter.skipme && client_.id == filter.self) return false;
  if (filter.id.has_value() && *filter.id != client_.id) return false;
  if (filter.addr.has_value() && *filter.addr != client_.addr) return false;
  if (filter.user.has_value()) {
    MutexLock lock(&info_mu_);
    if (ShownUserName(shown_user_) != *filter.user) {
      return false;
    }
  }
  return true;
}

void Connection::CheckTimeouts(int64_t now_steady_ms) {
  if (closed_ || reads_pending_ || job_n_ > 0) return;
  const ServerOptions& o = server_->options_;
  const auto auth_ms = static_cast<int64_t>(o.auth_timeout.count());
  const auto idle_ms = static_cast<int64_t>(o.idle_timeout.count());
  if (!client_.authed && auth_ms > 0 &&
      now_steady_ms - connected_ms_ >= auth_ms) {
    server_->stats_.timeouts.fetch_add(1);
    if (!writing_) {
      resp::Error(&out_, "NOAUTH authentication timeout: no AUTH within " +
                             std::to_string(auth_ms) +
                             " ms of connecting (auth_timeout)");
    }
    CloseNow(/*flush=*/true);
  } else if (idle_ms > 0 &&
             now_steady_ms - last_command_ms_.load(std::memory_order_relaxed) >=
                 idle_ms) {
    server_->stats_.timeouts.fetch_add(1);
    CloseNow(/*flush=*/false);  // as Redis: silently
  }
}

void Connection::AppendJob(std::vector<const WriteBatch*>* out) const {
  for (size_t i = 0; i < job_n_; ++i) out->push_back(&job_[i]);
}

void Connection::OnJobDone(const Status* statuses) {
  TEST_SYNC_POINT("Connection::WriteReleased");
  const uint64_t usec = UsecSince(job_start_);
  Replication* const repl = server_->state_.repl;
  if (repl != nullptr && !repl->tracker().CommitsAtOnce()) {
    // The commit tracker decides the replies (HoldReplies); they are
    // counted then, with what they turned out to be.
    std::vector<std::string> lines(job_n_);
    held_cmds_.assign(job_cmd_.begin(),
                      job_cmd_.begin() + static_cast<std::ptrdiff_t>(job_n_));
    for (size_t i = 0; i < job_n_; ++i) {
      if (!statuses[i].ok()) lines[i] = ErrorLine(statuses[i]);
      if (job_[i].ApproximateSize() > kKeepBatchBytes) job_[i] = WriteBatch();
    }
    const size_t n = job_n_;
    job_n_ = 0;
    job_bytes_ = 0;
    held_start_ = job_start_;
    if (HoldReplies(out_.size(), std::move(lines), n)) return;
    Continue();
    return;
  }
  for (size_t i = 0; i < job_n_; ++i) {
    const size_t before = out_.size();
    if (statuses[i].ok()) {
      out_.append("+OK\r\n", 5);
    } else {
      resp::Error(&out_, ErrorLine(statuses[i]));
    }
    if (CountCall(job_cmd_[i], false, usec,
                  std::string_view(out_).substr(before))) {
      // Its words again, from its batch: SET k v FENCE t / MSET k v ...
      const WriteBatch& b = job_[i];
      std::vector<std::string> words{job_cmd_[i]->name};
      for (size_t j = 0; j < b.Count() && words.size() < SlowLog::kMaxArgs;
           ++j) {
        const WriteBatch::Op op = b.Get(j);
        words.emplace_back(op.key);
        words.emplace_back(op.value);
      }
      const std::string token =
          std::to_string(b.Count() > 0 ? b.Get(0).token : 0);
      const size_t argc = 1 + 2 * b.Count() + 2;  // ... FENCE t
      LogSlow(usec, argc, [&](size_t k) -> std::string_view {
        if (k == argc - 2) return "FENCE";
        if (k == argc - 1) return token;
        return words[k];  // k < kMaxArgs - 1 when argc > kMaxArgs
      });
    }
    server_->EndCommand();
    if (job_[i].ApproximateSize() > kKeepBatchBytes) job_[i] = WriteBatch();
  }
  job_n_ = 0;
  job_bytes_ = 0;
  Continue();
}

void Connection::CloseNow(bool flush) {
  if (closed_) return;
  closed_ = true;
  gone_.store(true, std::memory_order_relaxed);
  // A WAIT ends with its client (its answer goes nowhere): its callback
  // holds this connection, and with it a client slot.
  if (wait_id_ != 0) server_->state_.repl->CancelWait(wait_id_);
  if (flush) SendWhatFits();
  asio::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void Connection::InputBuffer::Grow(size_t n, size_t keep) {
  std::unique_ptr<char[]> bigger(new char[n]);  // not zero-filled
  std::memcpy(bigger.get(), data.get(), keep);
  data = std::move(bigger);
  size = n;
}

void Connection::DoRead() {
  if (closed_) return;
  // Closing (Close, Kill: CloseNow is on its way), or evicted (its share
  // written off): nothing more is read, and above all no buffer grows
  // uncounted, nor evicts others on behalf of a client that is going.
  if (gone_.load(std::memory_order_relaxed) || charged() < 0) return;
  if (in_end_ == in_.size) {
    if (in_begin_ > 0) {
      std::memmove(in_.data.get(), in_.data.get() + in_begin_,
                   in_end_ - in_begin_);
      in_end_ -= in_begin_;
      in_begin_ = 0;
    } else {
      // One command is larger than the buffer: grow, within the limit
      // (the parser refuses anything over max_request_bytes first). Once
      // half of what the command needs has come (the parser knows its
      // length from a bulk header), at once to hold all of it: doubling
      // copied what was read at each step and touched fresh pages twice
      // over (a 60 MB SET held its loop 0.3 s). Not before: a header alone
      // would reserve its whole length.
      const size_t cap =
          server_->options_.limits.max_request_bytes + (64 << 10);
      size_t grow = in_.size * 2;
      const size_t needed = parser_.bytes_needed();
      if (needed > grow && in_end_ >= needed / 2) grow = needed;
      grow = std::min(cap, grow);
      if (in_.size < grow) {
        // All clients together are bounded too (maxmemory_clients): past
        // it, the client holding the most goes, this one if it would.
        const size_t more = grow - in_.size;
        if (!server_->state_.MakeClientRoom(
                client_.id, charged() + static_cast<int64_t>(more), more)) {
          resp::Error(&out_,
                      server_->state_.ClientMemoryRefusal("request refused"));
          client_.close_after_reply = true;
          Continue();
          return;
        }
        in_.Grow(grow, in_end_);
        Recharge();
      }
      if (in_end_ == in_.size) {
        resp::Error(&out_, "ERR Protocol error: request too large");
        client_.close_after_reply = true;
        Continue();
        return;
      }
    }
  }
  auto self = shared_from_this();
  socket_.async_read_some(
      asio::buffer(in_.data.get() + in_end_, in_.size - in_end_),
      [self](const asio::error_code& ec, size_t n) { self->OnRead(ec, n); });
}

void Connection::OnRead(const asio::error_code& ec, size_t n) {
  if (ec) {
    CloseNow();
    return;
  }
  in_end_ += n;
  Continue();
}

void Connection::Continue() {
  while (!closed_) {
    Process();
    if (reads_pending_) return;  // OnReadsDone / OnOffloadDone continues
    if (job_n_ > 0) {
      server_->AddWriter(loop_, shared_from_this());
      return;
    }
    if (!out_.empty()) {
      if (!WriteNow()) return;  // the rest goes asynchronously
      if (!yielded_) continue;  // all written: on with what is buffered
    }
    if (yielded_) {
      // Its pass ran out of time (kPassBudget): the rest of what is
      // buffered after the loop's other ready connections.
      yielded_ = false;
      auto self = shared_from_this();
      asio::post(loop_->io, [self] { self->Continue(); });
      return;
    }
    if (client_.close_after_reply) {
      CloseNow();
    } else {
      if (in_begin_ == in_end_) ShrinkIdle();
      // The read waits for the loop's other ready handlers: a client that
      // was just answered needs a moment to send more, and a read tried
      // at once would mostly find nothing (asio reads before it waits: one
      // recv into EAGAIN per request at redis-benchmark -P 1, a third of
      // the loop's syscalls).
      auto self = shared_from_this();
      asio::post(loop_->io, [self] { self->DoRead(); });
    }
    return;
  }
}

void Connection::Process() {
  const size_t begin = in_begin_;
  yielded_ = false;
  // When this pass first ran a command on the loop (Execute), and whether
  // the pass has used up kPassBudget.
  std::chrono::steady_clock::time_point pass_start;
  bool executed = false, spent = false;
  // (killed_: by CLIENT KILL, its own or another connection's; nothing
  // after the kill runs, as in Redis.)
  while (in_begin_ < in_end_ && !client_.close_after_reply &&
         !killed_.load(std::memory_order_relaxed) &&
         out_.size() < kMaxPendingOutput) {
    if (spent) {
      // Out of time: what was collected is written (as below), and the
      // rest waits for the loop's next turn (Continue).
      yielded_ = true;
      break;
    }
    size_t consumed = 0;
    const auto r = parser_.Parse(in_.data.get() + in_begin_,
                                 in_end_ - in_begin_, &args_, &consumed);
    if (r == RespParser::Result::kNeedMore) break;
    if (r == RespParser::Result::kError) {
      // Replies in request order: the GETs and grouped writes before the
      // bad request are answered first; it is parsed again after them (the
      // parser starts over after an error).
      if (FlushGets() || job_n_ > 0) break;
      server_->stats_.protocol_errors.fetch_add(1);
      resp::Error(&out_, "ERR " + parser_.error());
      client_.close_after_reply = true;
      break;
    }
    if (args_.empty()) {  // an empty command
      in_begin_ += consumed;
      continue;
    }
    // The gates come first, whatever the command's route: Admit (login,
    // ACL, arity, MULTI), then shutting down. Only an admitted command may
    // take a fast path.
    const Admission admission = Admit(client_, args_);
    if (job_n_ == job_.size()) job_.emplace_back();
    Route route = ChooseRoute(admission, client_, args_, &job_[job_n_]);
    if (MayReadLargeValue(admission, route)) route = Route::kLongExec;
    // A primary that may not take writes now (fewer in-sync replicas than
    // min_insync_replicas) refuses them before they run: nothing is lost.
    Replication* const repl = server_->state_.repl;
    const bool is_write = repl != nullptr &&
                          admission.verdict == Admission::Verdict::kRun &&
                          IsWriteCall(*admission.cmd, client_, args_);
    std::string refusal;
    if (is_write && repl->tracker().MayRefuse() &&
        !repl->tracker().Writable(&refusal)) {
      route = Route::kExecute;
    }
    // Replies in request order: the GETs collected so far are answered
    // before anything but another GET, the grouped writes before anything
    // but another grouped write. (This command is parsed again once they
    // are.)
    if (route != Route::kBatchedGet && FlushGets()) break;
    if (route != Route::kGroupedWrite && job_n_ > 0) break;
    // (Their replies may have evicted it: nothing more runs.)
    if (closed_) break;
    // A WAIT may block the connection, which then writes nothing until it
    // ends (maybe never): it starts only once every reply before it is
    // written, as Redis has sent them before it blocks. (Parsed again
    // then.)
    static const CommandSpec* const kWait = LookupCommand("wait");
    if (admission.cmd == kWait && !out_.empty()) break;
    if (!server_->BeginCommand()) {
      // Shutting down: what was collected before this command is answered
      // first (then it is parsed again); it gets -SHUTDOWN, and did nothing.
      if (FlushGets() || job_n_ > 0) break;
      RefuseShuttingDown();
      break;
    }
    in_begin_ += consumed;
    TEST_SYNC_POINT_CALLBACK("Connection::Process:Route", &route);
    if (route == Route::kBatchedGet) {
      if (get_ends_.empty()) gets_start_ = std::chrono::steady_clock::now();
      get_keys_.append(args_[1].data(), args_[1].size());
      get_ends_.push_back(get_keys_.size());
      if (get_ends_.size() >= kMaxGets && FlushGets()) break;
      continue;
    }
    if (route == Route::kGroupedWrite) {
      if (job_n_ == 0) job_start_ = std::chrono::steady_clock::now();
      if (job_cmd_.size() <= job_n_) job_cmd_.resize(job_n_ + 1);
      job_cmd_[job_n_] = admission.cmd;
      ++job_n_;
      job_bytes_ += consumed;
      TEST_SYNC_POINT("Connection::Process:Grouped");
      if (job_n_ >= kMaxJob || job_bytes_ >= kMaxJobBytes) break;
      continue;
    }
    // A walk of the key space runs on the scan thread, a long command (an
    // EXEC's one large write, a command of many keys) on the database
    // thread if it has room.
    if (route == Route::kScanThread && OffloadCommand(admission, true, false)) {
      break;
    }
    if (route == Route::kLongExec &&
        OffloadCommand(admission, false, is_write)) {
      break;
    }
    if (admission.verdict == Admission::Verdict::kRun &&
        admission.cmd == kWait && StartWait(admission)) {
      break;
    }
    const size_t before = out_.size();
    const auto t0 = std::chrono::steady_clock::now();
    if (!executed) {
      executed = true;
      pass_start = t0;
    } else if (t0 - pass_start >= kPassBudget) {
      spent = true;  // this one runs; the pass stops after it
    }
    if (!refusal.empty()) {
      resp::Error(&out_, refusal);
      NoteExecuted(admission, args_, t0, std::string_view(out_).substr(before));
      server_->EndCommand();
      AfterDispatch();
      continue;
    }
    // A read that may run again (MGET, EXISTS) runs here within a budget:
    // past it, it ran in vain and runs again on the long-command thread
    // (fast_path.h, kLoopReadBytes).
    client_.loop_read_budget = true;
    Execute(server_->state_, client_, args_, admission, &out_);
    client_.loop_read_budget = false;
    if (client_.read_deferred) {
      client_.read_deferred = false;
      out_.resize(before);  // (it replied nothing)
      if (OffloadCommand(admission, false, false)) {
        offload_start_ = t0;  // its latency counts from its start here
        server_->stats_.reads_moved_off_loop.fetch_add(
            1, std::memory_order_relaxed);
        break;
      }
      // The long-command thread is stopping: here, unbounded.
      Execute(server_->state_, client_, args_, admission, &out_);
    }
    if (is_write) {
      TEST_SYNC_POINT("Connection::WriteReleased");
      if (!repl->tracker().CommitsAtOnce()) {
        // Counted and ended once the commit tracker decided its reply.
        held_admission_ = admission;
        held_start_ = t0;
        held_offloaded_ = false;
        if (HoldReplies(before, {}, 1)) break;
        continue;
      }
    }
    NoteExecuted(admission, args_, t0, std::string_view(out_).substr(before));
    server_->EndCommand();
    AfterDispatch();
    if (client_.handoff) {
      HandOff();
      break;
    }
  }
  if (!reads_pending_ && !closed_) FlushGets();
  if (in_begin_ != begin) {
    last_command_ms_.store(SteadyMs(), std::memory_order_relaxed);
  }
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
}

bool Connection::MayReadLargeValue(const Admission& admission, Route route) {
  // (A grouped write reads nothing; a refused or queued command runs on
  // the loop, which only answers it.)
  if (admission.verdict != Admission::Verdict::kRun ||
      (route != Route::kBatchedGet && route != Route::kExecute)) {
    return false;
  }
  DB* db = server_->state_.db;
  if (route == Route::kBatchedGet) return db->MayHoldLargeValue(args_[1]);
  if (admission.cmd->keys.first == 0 ||
      !CommandKeys(*admission.cmd, args_, &key_positions_)) {
    return false;
  }
  for (size_t at : key_positions_) {
    if (db->MayHoldLargeValue(args_[at])) return true;
  }
  return false;
}

void Connection::Recharge() {
  const size_t input =
      in_.size > kInitialReadBuffer ? in_.size - kInitialReadBuffer : 0;
  const size_t queue = client_.queued.empty() ? 0 : client_.queued_bytes;
  const size_t replies = out_.size() >= kCountedReplyBytes ? out_.size() : 0;
  const auto held = static_cast<int64_t>(input + queue + replies);
  int64_t was = charged_.load(std::memory_order_relaxed);
  // Written off (ReleaseCharge: evicted, or gone): nothing more counts.
  if (was < 0 || held == was) return;
  // A client on its way out (killed, closed, its peer gone) takes no more,
  // and never evicts others for a reply that goes nowhere.
  if (held > was && (closed_ || closing())) return;
  // Replies it has not taken grew: room for them as for a request (the
  // clients holding the most go first); once this one would hold the
  // most, it is the one evicted (it does not read them). (Its request
  // buffer and MULTI queue made room before they grew.)
  if (replies > reply_share_ && held > was &&
      !server_->state_.MakeClientRoom(client_.id, held,
                                      replies - reply_share_)) {
    EvictSelf(held);
    return;
  }
  reply_share_ = replies;
  // Exchanged first: a ReleaseCharge between the two steps takes back
  // `held`, and this adds held - was, so the sum loses `was` either way.
  if (!charged_.compare_exchange_strong(was, held, std::memory_order_relaxed)) {
    return;  // written off meanwhile
  }
  server_->stats_.client_bytes.fetch_add(held - was, std::memory_order_relaxed);
  client_.memory_share = held;
}

void Connection::EvictSelf(int64_t held) {
  // Written off for good, a share of 0 too (nothing it does later counts,
  // nor evicts others on its behalf).
  const int64_t was = charged_.exchange(-1, std::memory_order_relaxed);
  if (was < 0) return;  // written off already (evicted by another)
  if (was > 0) {
    server_->stats_.client_bytes.fetch_sub(was, std::memory_order_relaxed);
  }
  killed_.store(true, std::memory_order_relaxed);
  // Closing already (CLIENT KILL, a timeout, its peer gone): not counted
  // as an eviction.
  if (!closing()) server_->NoteEviction(client_.id, held);
  // Closed now, not after this pass: no reply of its own goes out, and no
  // command it sent runs after this.
  CloseNow(/*flush=*/false);
}

int64_t Connection::ReleaseCharge() {
  // Only a share above 0 is written off: one of 0 stays counted (from 0),
  // or a connection that held nothing when an evictor looked would grow
  // uncounted.
  int64_t was = charged_.load(std::memory_order_relaxed);
  while (was > 0 &&
         !charged_.compare_exchange_weak(was, -1, std::memory_order_relaxed)) {
  }
  if (was <= 0) return was;
  server_->stats_.client_bytes.fetch_sub(was, std::memory_order_relaxed);
  return was;
}

void Connection::AfterDispatch() {
  Recharge();  // (a MULTI queue grew, or went)
  parser_.set_authenticated(client_.authed);
  const int64_t multi = ShownMulti(client_);
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

void Connection::ShrinkIdle() {
  if (in_.size > kInitialReadBuffer) {
    in_ = InputBuffer(kInitialReadBuffer);
    in_begin_ = in_end_ = 0;
  }
  Recharge();
  if (out_.capacity() > kKeepBufferBytes) std::string().swap(out_);
  if (args_.capacity() > kKeepScratchItems) {
    std::vector<std::string_view>().swap(args_);
  }
  if (offload_args_.capacity() > kKeepScratchItems) {
    std::vector<std::string>().swap(offload_args_);
  }
  if (offload_out_.capacity() > kKeepBufferBytes) {
    std::string().swap(offload_out_);
  }
  if (get_keys_.capacity() > kKeepBufferBytes) std::string().swap(get_keys_);
  if (!client_.in_multi && client_.queued.capacity() > kKeepScratchItems) {
    std::vector<QueuedCommand>().swap(client_.queued);
  }
  parser_.ShrinkScratch();
}

void Connection::RefuseShuttingDown() {
  resp::Error(&out_, "SHUTDOWN the server is shutting down");
  client_.close_after_reply = true;
}

bool Connection::CountCall(const CommandSpec* cmd, bool refused, uint64_t usec,
                           std::string_view reply) {
  CommandStats& stats = *server_->state_.command_stats;
  const size_t index = cmd != nullptr ? CommandIndex(*cmd) : stats.commands();
  const bool failed = !reply.empty() && reply[0] == '-';
  if (failed) stats.NoteError(CommandStats::ClassifyError(reply), IsWrite(cmd));
  if (refused) {
    stats.Reject(index);
    return false;
  }
  stats.Record(index, usec, failed);
  return server_->state_.slowlog.ShouldLog(usec);
}

void Connection::NoteExecuted(const Admission& admission, const Args& args,
                              std::chrono::steady_clock::time_point t0,
                              std::string_view reply) {
  const uint64_t usec = UsecSince(t0);
  if (admission.verdict == Admission::Verdict::kQueue) {
    // Queued: counted when EXEC runs; only its error, if any.
    if (!reply.empty() && reply[0] == '-') {
      server_->state_.command_stats->NoteError(
          CommandStats::ClassifyError(reply), IsWrite(admission.cmd));
    }
    return;
  }
  const bool refused = admission.verdict == Admission::Verdict::kRefuse;
  if (CountCall(admission.cmd, refused, usec, reply)) {
    // As Redis: the slow log never shows a password.
    const std::string_view name =
        admission.cmd != nullptr ? admission.cmd->name : "";
    const bool redact = name == "auth" || name == "hello";
    LogSlow(usec, args.size(), [&](size_t i) -> std::string_view {
      return redact && i > 0 ? "(redacted)" : args[i];
    });
  }
}

void Connection::LogSlow(uint64_t usec, size_t argc,
                         const std::function<std::string_view(size_t)>& arg) {
  server_->state_.slowlog.Add(usec, argc, arg, client_.addr, client_.name);
}

bool Connection::OffloadCommand(const Admission& admission, bool to_scans,
                                bool is_write) {
  offload_args_.assign(args_.begin(), args_.end());  // in_ may move on
  offload_admission_ = admission;
  offload_start_ = std::chrono::steady_clock::now();
  auto self = shared_from_this();
  // A write of many keys (or an EXEC) holds many fence stripes while it
  // runs: counted from before it is queued until it has run, so that no
  // loop starts a write of its own meanwhile (is_write is only known with
  // replication). One large value holds one stripe: not counted.
  static const CommandSpec* const kExec = LookupCommand("exec");
  const bool holds_stripes =
      !to_scans && IsWrite(admission.cmd) &&
      (admission.cmd == kExec || args_.size() >= kOffloadArgs);
  std::atomic<int>& long_writes = server_->state_.long_writes;
  if (holds_stripes) long_writes.fetch_add(1);
  auto job = [self, admission, holds_stripes] {
    // Off the loop; this connection waits (reads_pending_).
    if (self->gone_.load(std::memory_order_relaxed)) {
      self->offload_skipped_ = true;
    } else {
      const Args args(self->offload_args_.begin(), self->offload_args_.end());
      Execute(self->server_->state_, self->client_, args, admission,
              &self->offload_out_);
    }
    if (holds_stripes) self->server_->state_.long_writes.fetch_sub(1);
    asio::post(self->loop_->io, [self] { self->OnOffloadDone(); });
  };
  // A long command always waits for its thread (only a stopped one
  // refuses): before, it took the database thread when that had room and
  // else ran on the loop, so four clients sending MGETs of 1M keys held
  // their loop for seconds, and a synced group commit waited behind each
  // (a helper's review).
  const bool queued = to_scans ? server_->state_.scans.Submit(job)
                               : server_->state_.longs.Submit(job);
  if (!queued && holds_stripes) long_writes.fetch_sub(1);
  if (queued) {
    reads_pending_ = true;
    // A write's reply (a long EXEC's, DEL's, MSET's) is held for the
    // commit tracker (OnOffloadDone); a long MGET's is not.
    offload_write_ = is_write;
  }
  return queued;
}

void Connection::OnOffloadDone() {
  reads_pending_ = false;
  if (wait_id_ != 0) {
    wait_id_ = 0;
    server_->stats_.blocked.fetch_sub(1);
  }
  if (offload_skipped_) {
    // Its client is gone: no reply, no call counted (commandstats, the
    // slow log), nothing for the commit tracker (nothing was written).
    offload_skipped_ = false;
    offload_write_ = false;
    offload_args_.clear();
    offload_out_.clear();
    server_->EndCommand();
    return;
  }
  Replication* const repl = server_->state_.repl;
  // A long EXEC's reply is the commit tracker's to decide (HoldReplies).
  const bool hold =
      offload_write_ && repl != nullptr && !repl->tracker().CommitsAtOnce();
  if (!hold) {
    const Args args(offload_args_.begin(), offload_args_.end());
    NoteExecuted(offload_admission_, args, offload_start_, offload_out_);
  }
  // The replies before it first, as far as the socket takes them, so that
  // a large reply is moved into out_, not copied on the loop (it is unless
  // the client left earlier replies unread).
  SendWhatFits();
  const size_t mark = out_.size();
  if (out_.empty()) {
    out_.swap(offload_out_);
  } else {
    out_.append(offload_out_);
    offload_out_.clear();
  }
  offload_write_ = false;
  if (hold) {
    TEST_SYNC_POINT("Connection::WriteReleased");
    held_admission_ = offload_admission_;
    held_start_ = offload_start_;
    held_offloaded_ = true;
    if (HoldReplies(mark, {}, 1)) return;
    Continue();
    return;
  }
  offload_args_.clear();
  server_->EndCommand();
  AfterDispatch();
  Continue();
}

bool Connection::HoldReplies(size_t mark, std::vector<std::string> grouped,
                             size_t commands) {
  held_mark_ = mark;
  held_grouped_ = std::move(grouped);
  held_commands_ = commands;
  Replication* const repl = server_->state_.repl;
  const uint64_t latest = server_->state_.db->GetLatestSequenceNumber();
  if (repl->tracker().NeedsAcks()) repl->NotifyLinks(latest);
  auto self = shared_from_this();
  std::string error;
  const CommitTracker::Verdict verdict = repl->tracker().Release(
      latest,
      // (Called once: the reference moves on with the decision, so the
      // link thread that decided keeps none.)
      [self](const std::string* e) mutable {
        HandOverDecided(std::move(self), e != nullptr ? *e : std::string());
      },
      &error);
  if (verdict == CommitTracker::Verdict::kPending) {
    reads_pending_ = true;
    holding_ = true;
    return true;
  }
  FinishHeld(error);  // empty: committed
  return false;
}

void Connection::HandOverDecided(std::shared_ptr<Connection> c,
                                 std::string error) {
  Loop* const loop = c->loop_;
  bool post;
  {
    MutexLock lock(&loop->decided.mu);
    loop->decided.items.emplace_back(std::move(c), std::move(error));
    post = !loop->decided.posted;
    loop->decided.posted = true;
  }
  if (!post) return;  // the post already made takes this one too
  asio::post(loop->io, [loop] {
    std::vector<std::pair<std::shared_ptr<Connection>, std::string>> items;
    {
      MutexLock lock(&loop->decided.mu);
      items.swap(loop->decided.items);
      loop->decided.posted = false;
    }
    for (auto& [conn, line] : items) conn->OnRepliesCommitted(line);
  });
}

void Connection::OnRepliesCommitted(const std::string& error) {
  reads_pending_ = false;
  FinishHeld(error);
  Continue();
}

void Connection::FinishHeld(const std::string& error) {
  holding_ = false;
  if (held_grouped_.empty()) {
    if (!error.empty()) {
      out_.resize(held_mark_);
      resp::Error(&out_, error);
    }
    const std::string_view reply = std::string_view(out_).substr(held_mark_);
    if (held_offloaded_) {
      const Args args(offload_args_.begin(), offload_args_.end());
      NoteExecuted(held_admission_, args, held_start_, reply);
      offload_args_.clear();
    } else {
      // args_ still holds its words: nothing was parsed since.
      NoteExecuted(held_admission_, args_, held_start_, reply);
    }
  } else {
    const uint64_t usec = UsecSince(held_start_);
    for (size_t i = 0; i < held_grouped_.size(); ++i) {
      const std::string& line = held_grouped_[i];
      const size_t before = out_.size();
      if (!line.empty()) {
        resp::Error(&out_, line);  // refused: nothing was written
      } else if (error.empty()) {
        out_.append("+OK\r\n", 5);
      } else {
        resp::Error(&out_, error);
      }
      CountCall(i < held_cmds_.size() ? held_cmds_[i] : nullptr, false, usec,
                std::string_view(out_).substr(before));
    }
    held_grouped_.clear();
    held_cmds_.clear();
  }
  for (size_t i = 0; i < held_commands_; ++i) server_->EndCommand();
  held_commands_ = 0;
  AfterDispatch();
}

bool Connection::StartWait(const Admission& admission) {
  Replication* repl = server_->state_.repl;
  size_t n;
  int64_t timeout_ms;
  if (repl == nullptr || repl->is_replica() ||
      !ParseWaitArgs(args_, &n, &timeout_ms)) {
    return false;
  }
  reads_pending_ = true;
  // Counted as an offloaded command's call (OnOffloadDone).
  offload_args_.assign(args_.begin(), args_.end());
  offload_admission_ = admission;
  offload_start_ = std::chrono::steady_clock::now();
  auto self = shared_from_this();
  server_->stats_.blocked.fetch_add(1);
  if (!in_waiting_list_) {
    in_waiting_list_ = true;
    loop_->waiting.push_back(self);
  }
  if (!loop_->hangups_armed) {
    loop_->hangups_armed = true;
    WatchHangups(loop_);
  }
  wait_id_ = repl->WaitReplicas(
      n, timeout_ms, [self](size_t count, const std::string* error) {
        std::string line = error != nullptr ? *error : "";
        asio::post(self->loop_->io, [self, count, line = std::move(line)] {
          if (line.empty()) {
            resp::Integer(&self->offload_out_, static_cast<int64_t>(count));
          } else {
            // As Redis: the error, then the connection
            // closes.
            resp::Error(&self->offload_out_, line);
            self->client_.close_after_reply = true;
          }
          self->OnOffloadDone();
        });
      });
  return true;
}

void Connection::SendWhatFits() {
  // Never a reply the commit tracker still holds (from held_mark_ on): a
  // client closed meanwhile (CLIENT KILL, shutdown) was sent ":1" or "+OK"
  // for a write no in-sync replica had (a helper's review).
  const size_t end = holding_ ? held_mark_ : out_.size();
  if (writing_ || end == 0) return;
  size_t sent = 0;
  asio::error_code ec;
  while (sent < end) {
    const size_t n =
        socket_.write_some(asio::buffer(out_.data() + sent, end - sent), ec);
    if (ec) break;  // would block, or an error the next write finds again
    sent += n;
  }
  out_.erase(0, sent);
  if (holding_) held_mark_ -= sent;
}

void Connection::WatchHangups(Loop* loop) {
  loop->hangups->expires_after(std::chrono::milliseconds(200));
  loop->hangups->async_wait([loop](const asio::error_code& ec) {
    if (ec) {
      loop->hangups_armed = false;
      return;
    }
    auto& waiting = loop->waiting;
    size_t kept = 0;
    for (size_t i = 0; i < waiting.size(); ++i) {
      auto c = waiting[i].lock();
      if (c == nullptr) continue;
      if (c->closed_ || c->wait_id_ == 0) {
        c->in_waiting_list_ = false;
        continue;
      }
      if (c->PeerHungUp()) {
        // (What it was sent before the WAIT goes out first: a client that
        // only shut down its side reads it.)
        c->in_waiting_list_ = false;
        c->CloseNow(/*flush=*/true);
        continue;
      }
      if (kept != i) waiting[kept] = std::move(waiting[i]);
      ++kept;
    }
    waiting.resize(kept);
    if (waiting.empty()) {
      loop->hangups_armed = false;
    } else {
      WatchHangups(loop);
    }
  });
}

bool Connection::PeerHungUp() {
  pollfd p{socket_.native_handle(), POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void Connection::HandOff() {
  client_.handoff = false;
  asio::error_code ec;
  if (!out_.empty()) {
    socket_.non_blocking(false, ec);
    asio::write(socket_, asio::buffer(out_), ec);
    out_.clear();
  }
  closed_ = true;
  const int fd = socket_.release(ec);
  if (ec || fd < 0) return;
  server_->state_.repl->AcceptReplica(fd, std::move(client_.handoff_args));
}

bool Connection::FlushGets() {
  size_t n = get_ends_.size();
  if (n == 0) return false;
  TEST_SYNC_POINT_CALLBACK("Connection::FlushGets", &n);
  get_views_.clear();
  size_t begin = 0;
  for (size_t end : get_ends_) {
    get_views_.emplace_back(get_keys_.data() + begin, end - begin);
    begin = end;
  }
  if (get_values_.size() < n) get_values_.resize(n);
  get_statuses_.assign(n, Status());
  if (n >= kOffloadGets) {
    // With other connections' GETs, on the database thread (or, if it is
    // behind, on this loop once the others have collected theirs).
    reads_pending_ = true;
    server_->AddReader(loop_, shared_from_this());
    return true;
  }
  ReadGets();
  ReplyGets();
  return false;
}

void Connection::ReadGets() {
  const size_t n = get_views_.size();
  DB* db = server_->state_.db;
  if (n == 1) {
    get_statuses_[0] = db->Get(ReadOptions(), get_views_[0], &get_values_[0]);
  } else {
    db->MultiGet(ReadOptions(), n, get_views_.data(), get_values_.data(),
                 get_statuses_.data());
  }
}

void Connection::OnReadsDone() {
  reads_pending_ = false;
  ReplyGets();
  Continue();
}

void Connection::ReplyGets() {
  static const CommandSpec* const kGet = LookupCommand("get");
  const uint64_t usec = UsecSince(gets_start_);
  const size_t n = get_ends_.size();
  for (size_t i = 0; i < n; ++i) {
    const Status& st = get_statuses_[i];
    const size_t before = out_.size();
    if (st.ok()) {
      resp::Bulk(&out_, get_values_[i]);
    } else if (st.IsNotFound()) {
      resp::Null(&out_);
    } else {
      resp::Error(&out_, ErrorLine(st));
    }
    if (CountCall(kGet, false, usec, std::string_view(out_).substr(before))) {
      const std::string_view key = get_views_[i];
      LogSlow(usec, 2, [&](size_t k) { return k == 0 ? "get" : key; });
    }
    if (get_values_[i].capacity() > kKeepBatchBytes) {
      std::string().swap(get_values_[i]);
    }
    server_->EndCommand();
  }
  get_keys_.clear();
  get_ends_.clear();
  Recharge();  // (replies of large values count)
}

bool Connection::WriteNow() {
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
    Recharge();  // (its replies are gone)
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
                      self->Recharge();  // (its replies are gone)
                      self->Continue();
                    });
  return false;
}

}  // namespace server
}  // namespace fencedkv
