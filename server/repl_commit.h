// Copyright (c) fencedkv authors.
//
// CommitTracker: the primary's commit rule (docs/replication.md). A write is
// acknowledged only once every member of the in-sync replica set (ISR) has
// acknowledged a sequence at or above it, and only while this server is the
// primary, its etcd lease is valid and the ISR has at least
// min_insync_replicas members (the primary included).
//
// The coordinator sets the role, the lease deadline and the ISR; replica
// links report acknowledgements; the server asks whether a write may run
// (Writable), and once the write's sequence is released (in this server's
// WAL) hands it over (Release): the reply is decided there, under the lock
// that changes the ISR, never from a view of it taken earlier. The set whose
// acknowledgements are required may be larger than the ISR on record (a
// replica is required before the transaction that adds it: from the moment
// it is in etcd, every acknowledged write is on it), never smaller: a
// replica leaves it only after it left the ISR on record.
//
// Callbacks run on the thread that completed them (a link's, the
// coordinator's, or the caller's): they must only hand the result over.
//
// Thread-safe.

#ifndef FENCEDKV_SERVER_REPL_COMMIT_H_
#define FENCEDKV_SERVER_REPL_COMMIT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

// Milliseconds on the boot clock (CLOCK_BOOTTIME: monotonic, and running
// while the machine is suspended, as etcd's lease clock does). Every
// replication deadline (the etcd lease, lag, WAIT) is on it.
int64_t ReplNowMs();

class CommitTracker {
 public:
  // error == nullptr: committed. Else the error line to reply with
  // ("NOREPLICAS ...", "READONLY ..."): the write was applied here and may
  // or may not survive.
  using Done = std::function<void(const std::string* error)>;
  // WAIT's answer: the count of replicas that acknowledged, or (error set)
  // why it ended without one (this server stopped being the primary).
  using CountDone = std::function<void(size_t count, const std::string* error)>;
  enum class Verdict { kCommitted, kFailed, kPending };

  explicit CommitTracker(int min_insync_replicas);
  CommitTracker(const CommitTracker&) = delete;
  CommitTracker& operator=(const CommitTracker&) = delete;

  // ---- The coordinator ----
  // Becomes the primary, or stops being it: then every waiter fails with
  // `error_line`, writes are refused with it, and every WAIT is answered
  // -UNBLOCKED at once (as Redis's when a master becomes a replica).
  void SetPrimary(bool primary, const std::string& error_line)
      LOCKS_EXCLUDED(mu_);
  // Writes are refused (and waiters fail) from `deadline_ms` (ReplNowMs) on:
  // the etcd lease may have expired by then. INT64_MAX: no lease.
  void SetLeaseDeadline(int64_t deadline_ms) LOCKS_EXCLUDED(mu_);
  // The replicas whose acknowledgements commit a write (the ISR on record
  // minus this server, plus any being added), and the ISR's size on record
  // (this server included), which min_insync_replicas bounds. `nodes`: the
  // node id a required replica must be (etcd mode: the record's); the
  // acknowledgements of a link of another node do not count for it (none
  // named, or a link that sent none: any link's count).
  void SetIsr(std::vector<std::string> required, size_t isr_size,
              std::map<std::string, std::string> nodes = {})
      LOCKS_EXCLUDED(mu_);
  // Fails waiters past the lease deadline and WAITs past their timeout.
  // The coordinator calls it every few tens of ms.
  void Tick() LOCKS_EXCLUDED(mu_);
  // Nothing a tick could change: no replica known, no write or WAIT
  // waiting, no lease deadline, no required replica. The coordinator then
  // ticks less often (an idle server is not woken 100 times a second); a
  // WAIT wakes it (Replication::WaitReplicas).
  bool Quiet() LOCKS_EXCLUDED(mu_);
  // The server stops, in two steps. kRefuseWrites: writes are refused
  // (-SHUTDOWN, nothing written) from now on; writes already released are
  // still decided by the commit rule (a replica may still acknowledge
  // them). kAcksEnded: the links are gone, no acknowledgement can come any
  // more: a released write that still waits for one fails (-NOREPLICAS,
  // applied here and may survive); a later one is decided at once.
  enum class ShutdownStep { kRefuseWrites, kAcksEnded };
  void Shutdown(ShutdownStep step) LOCKS_EXCLUDED(mu_);

  // ---- The server ----
  // True if a write may run now; else false and *error_line says why.
  bool Writable(std::string* error_line) LOCKS_EXCLUDED(mu_);
  // True if replies to writes must wait for replicas (some are required).
  bool NeedsAcks() const { return needs_acks_.load(std::memory_order_acquire); }
  // False while Writable would say yes for certain: a lock-free check for
  // every write (then Writable gives the reason).
  bool MayRefuse() const { return may_refuse_.load(std::memory_order_acquire); }
  // True while every released write is committed the moment it is: this
  // server is the primary without an etcd lease, no replica is required
  // and the ISR (itself) meets min_insync_replicas. A lock-free check for
  // every write; when false, Release decides. It turns false in the
  // critical section that changes any of these, so a reader that saw true
  // decided at a moment when the rule held.
  bool CommitsAtOnce() const {
    return commits_at_once_.load(std::memory_order_seq_cst);
  }
  // A write whose sequence numbers are at most `seq` was released (it is
  // in this server's WAL): decides its reply now, under the lock that
  // changes the ISR. kCommitted: +OK. kFailed: *error is the line to reply
  // with (the write was applied here and may or may not survive).
  // kPending: done runs later, once decided (done(nullptr): committed).
  // The rule: refused unless this server is the primary, its lease is
  // valid and the ISR has min_insync_replicas members; then committed once
  // every required replica acknowledged `seq`.
  Verdict Release(uint64_t seq, Done done, std::string* error)
      LOCKS_EXCLUDED(mu_);
  // WAIT numreplicas timeout: calls done(count, nullptr) once `n` replicas
  // (in the ISR or not) acknowledged `seq`, or at `deadline_ms` (0: none)
  // with how many did; done(count, &error) if this server stops being the
  // primary first (or is not). Returns the wait's id for CancelWait.
  uint64_t WaitReplicas(uint64_t seq, size_t n, int64_t deadline_ms,
                        CountDone done) LOCKS_EXCLUDED(mu_);
  // Answers that WAIT now, with the count so far, if it still waits (its
  // client went: killed, or its peer closed).
  void CancelWait(uint64_t id) LOCKS_EXCLUDED(mu_);
  // Answers every WAIT now, with the count so far (shutting down).
  void FinishWaits() LOCKS_EXCLUDED(mu_);
  // Sequences at or below it are committed (UINT64_MAX when no replica is
  // required).
  uint64_t committed() LOCKS_EXCLUDED(mu_);

  // ---- Replica links (one per connected replica) ----
  // A replica connected: returns the link's id (an older link of the same
  // replica stops counting). `node` is the replica's node id ("" if it sent
  // none): 0, and *holder set, if a link of another node is connected
  // under the same name (two replicas announcing one address).
  uint64_t Attach(const std::string& addr, const std::string& node,
                  std::string* holder) LOCKS_EXCLUDED(mu_);
  // The node of another link connected as `addr`, if one is (true: Attach
  // would refuse `node`).
  bool HeldByAnotherNode(const std::string& addr, const std::string& node,
                         std::string* holder) LOCKS_EXCLUDED(mu_);
  void Detach(const std::string& addr, uint64_t link) LOCKS_EXCLUDED(mu_);
  // The replica acknowledged `seq`; caught_up_ms (if > 0): at that time it
  // had been sent everything the primary had.
  void OnAck(const std::string& addr, uint64_t link, uint64_t seq,
             int64_t caught_up_ms) LOCKS_EXCLUDED(mu_);
  // What the link is doing ("online", "fullsync", ...), for INFO.
  void SetLinkState(const std::string& addr, uint64_t link,
                    const std::string& state) LOCKS_EXCLUDED(mu_);

  struct ReplicaInfo {
    std::string addr;
    bool connected = false;
    std::string state;
    uint64_t acked = 0;
    int64_t lag_ms = 0;  // 0 when caught up with latest_seq
  };
  // The sequence `addr` has acknowledged on its current link; 0 if none.
  // `node` (if not null): that link's node id ("": no link, or it sent
  // none), read together with the sequence.
  uint64_t Acked(const std::string& addr, std::string* node = nullptr)
      LOCKS_EXCLUDED(mu_);
  // Every replica seen, with its lag against `latest_seq`.
  std::vector<ReplicaInfo> Replicas(uint64_t latest_seq) LOCKS_EXCLUDED(mu_);
  size_t isr_size() LOCKS_EXCLUDED(mu_);
  // What writes are refused with while this server is not the primary.
  std::string not_primary_error() LOCKS_EXCLUDED(mu_);
  int min_insync_replicas() const { return min_insync_; }

 private:
  struct Progress {
    uint64_t link = 0;  // the current link; 0 if none
    std::string node;   // the current link's node id ("": none sent)
    uint64_t acked = 0;
    int64_t caught_up_ms = 0;
    std::string state = "disconnected";
  };
  // A link of a node other than `node` (both known) is connected: *holder
  // is its node.
  static bool OtherNodeConnected(const Progress& p, const std::string& node,
                                 std::string* holder);
  struct ReplicaWaiter {
    uint64_t id;
    uint64_t seq;
    size_t n;
    int64_t deadline_ms;
    CountDone done;
  };
  // The error line if no write can be acknowledged now (not the primary,
  // lease past, ISR below the minimum).
  bool BlockedLocked(int64_t now, std::string* error_line)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error line if a new write may not run now: blocked, or stopping.
  bool RefusedLocked(int64_t now, std::string* error_line)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The verdict on a released write at `seq` (kPending: it waits).
  Verdict DecideLocked(int64_t now, uint64_t seq, std::string* error_line)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t CommittedLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t AckedCountLocked(uint64_t seq) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Callbacks to run once mu_ is released.
  struct Fired {
    std::vector<Done> committed;
    std::vector<std::pair<Done, std::string>> failed;
    std::vector<std::pair<CountDone, size_t>> counted;
    std::string unblocked;  // the error of the WAITs in `ended`
    std::vector<std::pair<CountDone, size_t>> ended;
    void Run();
  };
  // Moves the waiters that can complete now into *fired.
  void CollectLocked(int64_t now, Fired* fired) EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int min_insync_;
  std::atomic<bool> needs_acks_{false};
  std::atomic<bool> may_refuse_{true};
  std::atomic<bool> commits_at_once_{false};
  Mutex mu_;
  bool primary_ GUARDED_BY(mu_) = false;
  std::string not_primary_error_ GUARDED_BY(mu_);
  int64_t lease_deadline_ms_ GUARDED_BY(mu_) = INT64_MAX;
  bool stopping_ GUARDED_BY(mu_) = false;    // Shutdown
  bool acks_ended_ GUARDED_BY(mu_) = false;  // Shutdown(kAcksEnded)
  std::vector<std::string> required_ GUARDED_BY(mu_);
  std::map<std::string, std::string> required_nodes_ GUARDED_BY(mu_);
  size_t isr_size_ GUARDED_BY(mu_) = 1;
  uint64_t next_link_ GUARDED_BY(mu_) = 1;
  std::map<std::string, Progress> replicas_ GUARDED_BY(mu_);
  std::multimap<uint64_t, Done> waiters_ GUARDED_BY(mu_);
  std::vector<ReplicaWaiter> replica_waiters_ GUARDED_BY(mu_);
  uint64_t next_wait_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_REPL_COMMIT_H_
