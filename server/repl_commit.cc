// Copyright (c) fencedkv authors.

#include "repl_commit.h"

#include <algorithm>
#include <chrono>

#include <time.h>

namespace fencedkv {
namespace server {

int64_t ReplNowMs() {
  // CLOCK_BOOTTIME, not steady_clock's CLOCK_MONOTONIC: the monotonic clock
  // stops while the machine is suspended, etcd's clock does not. A primary
  // suspended past its lease's expiry would wake believing it had time left
  // and acknowledge writes as a replica takes over; on the boot clock the
  // deadline has passed when it wakes.
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

CommitTracker::CommitTracker(int min_insync_replicas)
    : min_insync_(std::max(1, min_insync_replicas)) {}

namespace {
// What a released write's error adds: it is in this server's WAL.
constexpr char kAppliedHere[] =
    " (the write was applied on this server and may or may not survive)";
}  // namespace

void CommitTracker::Fired::Run() {
  for (auto& done : committed) done(nullptr);
  for (auto& [done, error] : failed) done(&error);
  for (auto& [done, n] : counted) done(n, nullptr);
  for (auto& [done, n] : ended) done(n, &unblocked);
}

bool CommitTracker::BlockedLocked(int64_t now, std::string* error_line) {
  if (!primary_) {
    *error_line = not_primary_error_;
    return true;
  }
  if (now >= lease_deadline_ms_) {
    *error_line =
        "READONLY this server could not renew its etcd lease in time: it is "
        "no longer sure to be the primary";
    return true;
  }
  if (isr_size_ < static_cast<size_t>(min_insync_)) {
    *error_line =
        "NOREPLICAS Not enough good replicas to write: the in-sync "
        "replica set has " +
        std::to_string(isr_size_) +
        " member(s), min_insync_replicas "
        "is " +
        std::to_string(min_insync_);
    return true;
  }
  return false;
}

bool CommitTracker::RefusedLocked(int64_t now, std::string* error_line) {
  if (stopping_) {
    *error_line = "SHUTDOWN the server is shutting down";
    return true;
  }
  return BlockedLocked(now, error_line);
}

CommitTracker::Verdict CommitTracker::DecideLocked(int64_t now, uint64_t seq,
                                                   std::string* error_line) {
  if (BlockedLocked(now, error_line)) {
    error_line->append(kAppliedHere);
    return Verdict::kFailed;
  }
  if (seq <= CommittedLocked()) return Verdict::kCommitted;
  if (acks_ended_) {
    *error_line =
        "NOREPLICAS the server shut down before every in-sync replica "
        "acknowledged this write";
    error_line->append(kAppliedHere);
    return Verdict::kFailed;
  }
  return Verdict::kPending;
}

uint64_t CommitTracker::CommittedLocked() {
  uint64_t committed = UINT64_MAX;
  for (const auto& addr : required_) {
    auto it = replicas_.find(addr);
    uint64_t acked = it == replicas_.end() ? 0 : it->second.acked;
    auto expected = required_nodes_.find(addr);
    if (acked > 0 && expected != required_nodes_.end() &&
        !expected->second.empty() && !it->second.node.empty() &&
        it->second.node != expected->second) {
      acked = 0;  // another node's link: not the member the ISR names
    }
    committed = std::min(committed, acked);
  }
  return committed;
}

size_t CommitTracker::AckedCountLocked(uint64_t seq) {
  size_t n = 0;
  for (const auto& [addr, p] : replicas_) {
    if (p.link != 0 && p.acked >= seq) ++n;
  }
  return n;
}

void CommitTracker::CollectLocked(int64_t now, Fired* fired) {
  std::string ignored;
  may_refuse_.store(
      lease_deadline_ms_ != INT64_MAX || RefusedLocked(now, &ignored),
      std::memory_order_release);
  commits_at_once_.store(primary_ && lease_deadline_ms_ == INT64_MAX &&
                             required_.empty() &&
                             isr_size_ >= static_cast<size_t>(min_insync_),
                         std::memory_order_seq_cst);
  // Waiters in sequence order: once one is pending, so are the later ones.
  while (!waiters_.empty()) {
    auto it = waiters_.begin();
    std::string error;
    const Verdict v = DecideLocked(now, it->first, &error);
    if (v == Verdict::kPending) break;
    if (v == Verdict::kCommitted) {
      fired->committed.push_back(std::move(it->second));
    } else {
      fired->failed.emplace_back(std::move(it->second), std::move(error));
    }
    waiters_.erase(it);
  }
  if (!primary_) {
    // As Redis when a master becomes a replica: WAIT ends at once.
    fired->unblocked =
        "UNBLOCKED force unblock from blocking operation, instance state "
        "changed (master -> replica?)";
    for (ReplicaWaiter& w : replica_waiters_) {
      fired->ended.emplace_back(std::move(w.done), AckedCountLocked(w.seq));
    }
    replica_waiters_.clear();
    return;
  }
  size_t kept = 0;
  for (size_t i = 0; i < replica_waiters_.size(); ++i) {
    ReplicaWaiter& w = replica_waiters_[i];
    const size_t acked = AckedCountLocked(w.seq);
    if (acked >= w.n || (w.deadline_ms > 0 && now >= w.deadline_ms)) {
      fired->counted.emplace_back(std::move(w.done), acked);
    } else {
      if (kept != i) replica_waiters_[kept] = std::move(w);
      ++kept;
    }
  }
  replica_waiters_.resize(kept);
}

void CommitTracker::SetPrimary(bool primary, const std::string& error_line) {
  Fired fired;
  {
    MutexLock lock(&mu_);
    primary_ = primary;
    not_primary_error_ = error_line;
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
}

void CommitTracker::SetLeaseDeadline(int64_t deadline_ms) {
  Fired fired;
  {
    MutexLock lock(&mu_);
    lease_deadline_ms_ = deadline_ms;
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
}

void CommitTracker::SetIsr(std::vector<std::string> required, size_t isr_size,
                           std::map<std::string, std::string> nodes) {
  Fired fired;
  {
    MutexLock lock(&mu_);
    required_ = std::move(required);
    required_nodes_ = std::move(nodes);
    isr_size_ = isr_size;
    needs_acks_.store(!required_.empty(), std::memory_order_release);
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
}

void CommitTracker::Tick() {
  Fired fired;
  {
    MutexLock lock(&mu_);
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
}

bool CommitTracker::Quiet() {
  MutexLock lock(&mu_);
  return replicas_.empty() && waiters_.empty() && replica_waiters_.empty() &&
         required_.empty() && lease_deadline_ms_ == INT64_MAX;
}

void CommitTracker::Shutdown(ShutdownStep step) {
  Fired fired;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (step == ShutdownStep::kAcksEnded) acks_ended_ = true;
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
}

bool CommitTracker::Writable(std::string* error_line) {
  MutexLock lock(&mu_);
  return !RefusedLocked(ReplNowMs(), error_line);
}

CommitTracker::Verdict CommitTracker::Release(uint64_t seq, Done done,
                                              std::string* error) {
  MutexLock lock(&mu_);
  const Verdict v = DecideLocked(ReplNowMs(), seq, error);
  if (v == Verdict::kPending) waiters_.emplace(seq, std::move(done));
  return v;
}

uint64_t CommitTracker::WaitReplicas(uint64_t seq, size_t n,
                                     int64_t deadline_ms, CountDone done) {
  Fired fired;
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = next_wait_id_++;
    replica_waiters_.push_back({id, seq, n, deadline_ms, std::move(done)});
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
  return id;
}

void CommitTracker::CancelWait(uint64_t id) {
  Fired fired;
  {
    MutexLock lock(&mu_);
    for (auto it = replica_waiters_.begin(); it != replica_waiters_.end();
         ++it) {
      if (it->id != id) continue;
      fired.counted.emplace_back(std::move(it->done),
                                 AckedCountLocked(it->seq));
      replica_waiters_.erase(it);
      break;
    }
  }
  fired.Run();
}

void CommitTracker::FinishWaits() {
  Fired fired;
  {
    MutexLock lock(&mu_);
    for (auto& w : replica_waiters_) {
      fired.counted.emplace_back(std::move(w.done), AckedCountLocked(w.seq));
    }
    replica_waiters_.clear();
  }
  fired.Run();
}

uint64_t CommitTracker::committed() {
  MutexLock lock(&mu_);
  return CommittedLocked();
}

bool CommitTracker::OtherNodeConnected(const Progress& p,
                                       const std::string& node,
                                       std::string* holder) {
  if (p.link == 0 || p.node.empty() || node.empty() || p.node == node) {
    return false;
  }
  *holder = p.node;
  return true;
}

bool CommitTracker::HeldByAnotherNode(const std::string& addr,
                                      const std::string& node,
                                      std::string* holder) {
  MutexLock lock(&mu_);
  auto it = replicas_.find(addr);
  return it != replicas_.end() && OtherNodeConnected(it->second, node, holder);
}

uint64_t CommitTracker::Attach(const std::string& addr, const std::string& node,
                               std::string* holder) {
  MutexLock lock(&mu_);
  Progress& p = replicas_[addr];
  if (OtherNodeConnected(p, node, holder)) return 0;
  p.link = next_link_++;
  p.node = node;
  p.state = "connected";
  p.acked = 0;  // a new link: what it has is what it says (OnAck)
  // A member of the in-sync set that reconnects gets replica_lag_ms from
  // now to catch up. Any other replica's lag still runs from the last time
  // it had everything: a far-behind replica must not look in sync (it would
  // join the set while lacking acknowledged writes).
  if (std::find(required_.begin(), required_.end(), addr) != required_.end()) {
    p.caught_up_ms = std::max(p.caught_up_ms, ReplNowMs());
  }
  return p.link;
}

uint64_t CommitTracker::Acked(const std::string& addr, std::string* node) {
  MutexLock lock(&mu_);
  auto it = replicas_.find(addr);
  const bool linked = it != replicas_.end() && it->second.link != 0;
  if (node != nullptr) *node = linked ? it->second.node : std::string();
  return linked ? it->second.acked : 0;
}

void CommitTracker::Detach(const std::string& addr, uint64_t link) {
  MutexLock lock(&mu_);
  auto it = replicas_.find(addr);
  if (it != replicas_.end() && it->second.link == link) {
    it->second.link = 0;
    it->second.state = "disconnected";
  }
}

void CommitTracker::OnAck(const std::string& addr, uint64_t link, uint64_t seq,
                          int64_t caught_up_ms) {
  Fired fired;
  {
    MutexLock lock(&mu_);
    auto it = replicas_.find(addr);
    if (it == replicas_.end() || it->second.link != link) return;  // stale
    Progress& p = it->second;
    p.acked = std::max(p.acked, seq);
    if (caught_up_ms > 0)
      p.caught_up_ms = std::max(p.caught_up_ms, caught_up_ms);
    CollectLocked(ReplNowMs(), &fired);
  }
  fired.Run();
}

void CommitTracker::SetLinkState(const std::string& addr, uint64_t link,
                                 const std::string& state) {
  MutexLock lock(&mu_);
  auto it = replicas_.find(addr);
  if (it != replicas_.end() && it->second.link == link)
    it->second.state = state;
}

std::vector<CommitTracker::ReplicaInfo> CommitTracker::Replicas(
    uint64_t latest_seq) {
  const int64_t now = ReplNowMs();
  MutexLock lock(&mu_);
  std::vector<ReplicaInfo> out;
  for (auto& [addr, p] : replicas_) {
    if (p.acked >= latest_seq && p.link != 0) p.caught_up_ms = now;
    ReplicaInfo info;
    info.addr = addr;
    info.connected = p.link != 0;
    info.state = p.state;
    info.acked = p.acked;
    info.lag_ms =
        p.acked >= latest_seq ? 0 : std::max<int64_t>(0, now - p.caught_up_ms);
    out.push_back(std::move(info));
  }
  return out;
}

std::string CommitTracker::not_primary_error() {
  MutexLock lock(&mu_);
  return not_primary_error_;
}

size_t CommitTracker::isr_size() {
  MutexLock lock(&mu_);
  return isr_size_;
}

}  // namespace server
}  // namespace fencedkv
