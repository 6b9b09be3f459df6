// Copyright (c) fencedkv authors.
//
// Replication: the server's role (primary or replica) and the streams
// between them (docs/replication.md). Manual mode: REPLICAOF / --replicaof
// choose the primary, as in Redis; nothing fails over by itself.
//
//  - As a primary it serves replicas: a connection that sent
//    FENCEDKV.SYNC is handed over (AcceptReplica) to a thread of its own,
//    which answers the handshake, ships a checkpoint if the replica's log
//    cannot continue (full sync), then ships the committed write batches in
//    commit order, read from the WAL (DB::NewLogReader), and collects the
//    replica's acknowledgements (CommitTracker: WAIT, INFO, ROLE).
//  - As a replica it runs one thread that connects to the primary, applies
//    the batches verbatim (DB::ApplyLogBatch, synced with --sync) and
//    acknowledges each. After a full sync it has the new copy beside the
//    database and asks the server to restart on it (options.restart).
//    Writes are refused (read_only()).
//
// Every buffer is bounded: a link holds one batch and what the socket
// holds; a replica that takes nothing for timeout_ms is dropped (it
// reconnects and resyncs), nothing queues for it in memory.
//
// Thread-safe.

#ifndef FENCEDKV_SERVER_REPLICATION_H_
#define FENCEDKV_SERVER_REPLICATION_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fencedkv/db.h"

#include "lease_slot.h"
#include "metrics.h"
#include "repl_commit.h"
#include "repl_state.h"
#include "repl_stream.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

struct ReplicationOptions {
  std::string db_path;
  // This server's "host:port", told to the primary (INFO, ROLE).
  std::string self_addr;
  // Credentials a replica logs in to its primary with (FENCEDKV.SYNC is
  // @admin): AUTH [masteruser] masterauth, if masterauth is set.
  std::string masteruser;
  std::string masterauth;
  bool sync = false;  // apply replicated batches with fsync (--sync)
  int min_insync_replicas = 1;
  // A replica of the in-sync set that has not acknowledged what the primary
  // had this long ago leaves it (writes stop waiting for it); one that
  // catches up within half of it joins again.
  int64_t replica_lag_ms = 10000;
  // A link that moved nothing (no batch, ping or acknowledgement) for this
  // long is dropped; so is a replica that took nothing sent for this long.
  int64_t timeout_ms = 10000;
  size_t max_replicas = 16;  // connected replicas at most
  // A replicated frame (one batch) at most.
  size_t max_frame_bytes = 256 << 20;
  // etcd mode (docs/replication.md "Coordination"): with a shard name and
  // endpoints, etcd's record <etcd_prefix>/shards/<shard> chooses the
  // primary; this server keeps <etcd_prefix>/members/<shard>/<self_addr>
  // on an etcd lease of etcd_lease_ttl_ms, takes over when the primary's
  // lease is gone and it is in the ISR, and follows whoever the record
  // names otherwise. REPLICAOF is refused.
  std::vector<std::string> etcd_endpoints;
  std::string shard;
  std::string etcd_prefix = "/fencedkv";
  int64_t etcd_lease_ttl_ms = 2000;
  // etcd mode: whether a connection to this server's own address (self_addr)
  // reaches this server (Server::ReachesSelf). A member key of another node
  // under that address is then this server's previous run, whose data
  // directory was replaced, or a server announcing an address not its own:
  // this server waits for that key's lease to end and takes its name.
  // Unset, or kElsewhere: another server holds the name, and this one takes
  // no part until it is restarted.
  std::function<AddressReach(const std::string& addr)> reaches_self;
  // The address this server's RESP port listens at, as bound ("host:port",
  // the host possibly a wildcard): REPLICAOF and --replicaof refuse a
  // primary that leads there (ListenerReachedBy). Empty: only an exact
  // match of self_addr is refused.
  std::string listen_addr;
  // Called on the replica's thread once a full copy is in place beside the
  // database (FullSyncDir): the server must stop, then restart with
  // --replicaof=`primary`; at start, AdoptFullSync swaps it in.
  std::function<void(const std::string& primary)> restart;
};

class Replication {
 public:
  Replication(ReplicationOptions options, DB* db, LeaseSlot* leases);
  ~Replication();
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  // Before the database opens: if a completed full sync waits beside
  // `db_path` (FullSyncDir) and opens as a fencedkv database, it replaces
  // the database; the old one is kept as ReplacedDir until the copy opened
  // in its place, then removed. A copy that does not open is dropped and
  // the database kept. Recovery from a crash during the swap: if
  // ReplacedDir exists and the database is missing or does not open, the
  // old database is restored from it (docs/replication.md, "Full copy").
  static Status AdoptFullSync(const std::string& db_path);

  // Becomes a replica of `replicaof` ("host:port"), or the primary if it is
  // empty (then opens the lease service and starts a new epoch).
  Status Start(const std::string& replicaof) LOCKS_EXCLUDED(mu_);
  bool etcd_mode() const { return !options_.shard.empty(); }
  const std::string& shard() const { return options_.shard; }
  // SENTINEL's view (etcd mode): the shard's record and the members alive
  // (addr -> role), as last read from etcd. False if none was read.
  bool ShardView(const std::string& shard, ShardRecord* record,
                 std::vector<std::pair<std::string, std::string>>* members)
      LOCKS_EXCLUDED(mu_);

  // Stops every link and thread; WAITs are answered. Idempotent.
  void Stop() LOCKS_EXCLUDED(mu_);

  // True while this server must refuse writes (a replica). Admit reads it.
  const std::atomic<bool>* read_only() const { return &read_only_; }
  // etcd mode, as primary: the ReplNowMs from which its etcd lease may have
  // expired (0: none). Admission refuses writes, fenced reads and lease
  // commands from then on, as the commit tracker refuses acknowledgements.
  const std::atomic<int64_t>* lease_deadline() const {
    return &lease_deadline_ms_;
  }
  bool is_replica() const { return read_only_.load(); }

  // REPLICAOF host port (primary = "host:port") / REPLICAOF NO ONE
  // (primary empty). *reply is the status line to answer.
  Status ReplicaOf(const std::string& primary, std::string* reply)
      LOCKS_EXCLUDED(mu_);

  // A connection that sent FENCEDKV.SYNC `args` (the command's words) is
  // handed over: its socket `fd` becomes a replica link (or gets the
  // handshake's error and is closed). Takes ownership of fd.
  void AcceptReplica(int fd, std::vector<std::string> args) LOCKS_EXCLUDED(mu_);

  // WAIT numreplicas timeout_ms (0: forever): done(count, nullptr) with the
  // number of replicas that acknowledged everything written before the
  // call, once `n` did or at the timeout; done(count, &error) at once if
  // this server stops being the primary (-UNBLOCKED, as Redis). done runs
  // on another thread. Returns the wait's id for CancelWait.
  uint64_t WaitReplicas(size_t n, int64_t timeout_ms,
                        CommitTracker::CountDone done);
  // Ends that WAIT now (done runs with the count so far): its client went.
  void CancelWait(uint64_t id) { tracker_.CancelWait(id); }

  // INFO replication's lines; ROLE's reply.
  void AppendInfo(std::string* out) LOCKS_EXCLUDED(mu_);
  void AppendRole(std::string* out) LOCKS_EXCLUDED(mu_);

  CommitTracker& tracker() { return tracker_; }
  // A write committed (a reply waiting for the replicas, or any write of
  // the database's own, through DB::SetLogListener): the links that sleep
  // look for new batches at once instead of at their next look (100 ms).
  // Returns at once while no link runs. `seq` is
  // the latest sequence once the write is in: every connection of a loop's
  // group holds its replies at the group's last sequence, and only the
  // first to ask past the last one notified wakes the links (one eventfd
  // write per link and group, not per connection: under redis-benchmark
  // -P 16 the loop made 24 times more writes to the links' eventfds than
  // to the WAL, each a wake-up of a link thread). And only a link that is
  // about to wait is written to: a busy one reads the new batches on its
  // next pass (Link::sleeping).
  void NotifyLinks(uint64_t seq) LOCKS_EXCLUDED(wake_mu_);
  // The error a write gets here while read-only: Redis's words on a
  // replica, else why (not yet told its role by etcd, stepped down).
  std::string ReadOnlyLine();
  // The gauges /metrics shows.
  ReplicationGauges Gauges() LOCKS_EXCLUDED(mu_);

  // Where a full copy is written while it arrives, and where it waits
  // complete for the restart.
  static std::string FullSyncTmpDir(const std::string& db_path);
  static std::string FullSyncDir(const std::string& db_path);
  // Where the database waits while a full copy is swapped in.
  static std::string ReplacedDir(const std::string& db_path);

 private:
  struct Link {
    Link();
    ~Link();
    std::thread thread;
    std::shared_ptr<ReplSocket> socket;
    std::atomic<bool> done{false};
    int wake_fd = -1;  // an eventfd: NotifyLinks wakes the link with it
    // Set by the link just before it waits on wake_fd; NotifyLinks writes
    // the eventfd only if it takes this (an eventcount: a busy link finds
    // the new batches on its own, so most notifications cost no syscall).
    std::atomic<bool> sleeping{false};
    std::string node;  // the replica's node id, from its handshake ("": none)
  };

  // Role changes. REQUIRES: mu_ not held; role_mu_ held. `record` (etcd
  // mode): the record that made this server the primary, whose epoch,
  // epochs and history it takes, and `lease_deadline_ms` when its etcd
  // lease may have expired (one TTL from the last keep-alive or grant, as
  // the etcd loop reckons it); null: the next epoch of its own.
  Status BecomePrimary(const ShardRecord* record = nullptr,
                       int64_t lease_deadline_ms = 0)
      EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // In manual mode it also keeps `primary` in REPLICATION (follow), for a
  // restart: an error if that cannot be written (the server follows
  // `primary` all the same).
  // `consent`: the operator named `primary` (copy_consent_).
  Status BecomeReplica(const std::string& primary, bool consent = false)
      EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Manual mode: whether `primary` is this server itself, under any
  // spelling: self_addr, or an address its listener takes
  // (options_.listen_addr).
  bool LeadsHere(const std::string& primary) const;
  static std::string SelfReplicationError(const std::string& primary,
                                          bool at_start);
  // Manual mode, before REPLICAOF host port: InvalidArgument if `primary`
  // says (INFO replication) it is a primary of this server's history at an
  // epoch below this server's highest seen, which its handshake would
  // refuse for ever (STALEEPOCH). OK if it is not, or cannot be asked.
  Status CheckNotDeposed(const std::string& primary) LOCKS_EXCLUDED(mu_);
  void StopReplicaThread() EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Busy once a full copy waits for the restart (restarting_on_copy_).
  Status RestartPending() LOCKS_EXCLUDED(mu_);
  // Removes a full copy left ready (FullSyncDir) that no restart will
  // take, durably: renamed to FullSyncTmpDir first (which a start drops).
  static Status DropReadyCopy(const std::string& db_path);
  void StopLinks() LOCKS_EXCLUDED(mu_);

  // ---- Primary side (each on its link's thread) ----
  void ServeReplica(Link* link, std::vector<std::string> args);
  // Answers the handshake with `header` and the checkpoint's files; with
  // `sized` (the replica asked), the header also announces the files' total
  // size and `latest`, a sequence the copy holds at least (read before the
  // checkpoint), which the replica checks the copy against.
  Status SendFullSync(ReplSocket* socket, const std::string& header, bool sized,
                      uint64_t latest);
  // Ships the batches after `after` (the first one, read by the handshake,
  // in first_seq / first_batch unless empty) until the link ends.
  // `id`: the link's, from CommitTracker::Attach (detached on return).
  void StreamTo(ReplSocket* socket, const std::string& addr, uint64_t id,
                uint64_t epoch, uint64_t after, uint64_t first_seq,
                std::string first_batch, std::unique_ptr<LogReader> reader,
                Link* link);

  // Every tick as a primary: replicas that lag past replica_lag_ms leave
  // the in-sync set, caught-up ones join it (CommitTracker::SetIsr).
  void UpdateIsr() LOCKS_EXCLUDED(mu_);

  // ---- etcd mode (replication_etcd.cc, on etcd_thread_) ----
  void EtcdLoop();
  // Follows `primary` (stepping down first if this server leads).
  void Follow(const std::string& primary) LOCKS_EXCLUDED(mu_);
  // Stops acknowledging writes at once (a higher epoch, or the etcd lease
  // lost): read-only until the record says what to do.
  void StepDown(const std::string& why) LOCKS_EXCLUDED(mu_);
  // Raises the highest epoch seen (persisted) to `epoch`.
  void SeeEpoch(uint64_t epoch) LOCKS_EXCLUDED(mu_);
  // etcd mode, once etcd took this server's member key: the database is
  // the shard's member from now on (ReplState::shard; main refuses a start
  // without --shard, or with another, on it). Not before: a start with a
  // mistyped --shard or an etcd that never answered marks nothing.
  void NoteShardMember() LOCKS_EXCLUDED(mu_);
  // The etcd lease's deadline, for the commit tracker and for admission.
  void SetLeaseDeadline(int64_t deadline_ms);

  // ---- Replica side (on replica_thread_) ----
  void ReplicaLoop(const std::string& primary, uint64_t generation);
  // One connection to the primary; returns why it ended. *applied: the
  // last sequence this replica's sessions of this loop applied from the
  // primary or started from (UINT64_MAX: none yet), kept across sessions.
  // A session that finds the log elsewhere (a failed apply whose numbers
  // RocksDB used) takes a full copy instead of continuing from there.
  Status ReplicaSession(const std::string& primary, uint64_t generation,
                        uint64_t* applied);
  // What +FULLSYNC announced: the number of files; with `sized` (a
  // primary of this build) their total size and a sequence the copy holds
  // at least.
  struct CopyAnnounced {
    uint64_t files = 0;
    bool sized = false;
    uint64_t bytes = 0;
    uint64_t seq = 0;
  };
  // Receives the copy into FullSyncTmpDir, checks it (the files and bytes
  // announced, and that it opens as a fencedkv database with this server's
  // fence configuration and the sequence announced, every table's block
  // checksums verified), then renames it to FullSyncDir. Any failure
  // deletes what arrived; the database is never touched here. Stops when
  // the replica thread of `generation` is to stop.
  Status ReceiveFullSync(ReplSocket* socket, FrameReader* in,
                         const ReplState& adopted,
                         const CopyAnnounced& announced,
                         const std::string& primary, uint64_t generation);
  // A frame the replica could not read, as an error naming the limit.
  Status FrameError(const FrameReader& in) const;
  bool ReplicaStopping(uint64_t generation) LOCKS_EXCLUDED(mu_);
  void SetLink(const std::string& state, const std::string& error)
      LOCKS_EXCLUDED(mu_);
  // Sleeps up to ms unless the replica thread is told to stop.
  void Backoff(uint64_t generation, int64_t ms) LOCKS_EXCLUDED(mu_);

  const ReplicationOptions options_;
  DB* const db_;
  LeaseSlot* const leases_;
  CommitTracker tracker_;
  std::atomic<bool> read_only_{false};
  std::atomic<int64_t> lease_deadline_ms_{0};  // lease_deadline()

  // Serializes role changes (REPLICAOF, Start, Stop).
  Mutex role_mu_;  // before mu_
  std::thread replica_thread_ GUARDED_BY(role_mu_);

  Mutex mu_;
  std::condition_variable_any cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
  // The ticker's own wake-ups (not cv_, which the etcd thread waits on):
  // it may be asleep for 100 ms (quiet), and WaitReplicas then asks for a
  // tick now.
  std::condition_variable_any tick_cv_;
  bool ticker_quiet_ GUARDED_BY(mu_) = false;
  bool tick_soon_ GUARDED_BY(mu_) = false;
  ReplState state_ GUARDED_BY(mu_);
  uint64_t epoch_ GUARDED_BY(mu_) = 0;  // as a primary: the current epoch
  // As a replica: the primary, the thread's generation (a new REPLICAOF
  // ends the old thread), the socket it uses (to wake it), and the link's
  // state for INFO.
  std::string primary_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::shared_ptr<ReplSocket> replica_socket_ GUARDED_BY(mu_);
  std::string link_state_ GUARDED_BY(mu_) = "connect";
  std::string link_error_ GUARDED_BY(mu_);
  int64_t last_io_ms_ GUARDED_BY(mu_) = 0;
  uint64_t primary_latest_ GUARDED_BY(mu_) = 0;
  // As a primary: the replica links (finished ones are reaped on the next
  // accept), and whether a full sync is being sent.
  std::list<std::unique_ptr<Link>> links_ GUARDED_BY(mu_);
  bool full_sync_running_ GUARDED_BY(mu_) = false;
  // A replica's full copy is in place for the restart, which was asked of
  // main (options_.restart) with this primary: no role change until it
  // happens (the restart swaps the copy in, undoing whatever came after).
  std::string restarting_on_copy_ GUARDED_BY(mu_);
  // Manual mode, as a replica: whether the operator named the primary
  // (REPLICAOF host port, or a --replicaof other than the one kept) since
  // the last sync. Only then is a full copy taken that would discard what
  // this replica holds and the primary does not (CopyWouldDiscard):
  // another history, or a replica ahead. Cleared once a stream begins.
  bool copy_consent_ GUARDED_BY(mu_) = false;
  // Why the last full copy offered was refused for want of that word (""
  // if none was): REPLICAOF of the same primary then starts over instead
  // of answering "Already connected".
  std::string refused_copy_ GUARDED_BY(mu_);
  // The last full copy was refused for a damaged table (the primary's
  // file): the next try waits kRefusedCopyRetryMs too, as each costs the
  // primary a whole copy. Read and cleared by the replica thread.
  bool copy_damaged_ GUARDED_BY(mu_) = false;
  // As a primary: the replicas of the in-sync set (the commit rule waits
  // for each), kept by UpdateIsr.
  std::vector<std::string> isr_ GUARDED_BY(mu_);
  // Manual mode: the replicas writes wait for (the ISR and the joiners),
  // and each joiner's floor, the sequence it must acknowledge to join.
  std::vector<std::string> required_isr_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> join_floor_ GUARDED_BY(mu_);
  std::thread ticker_;  // Tick()s the tracker (WAIT timeouts), UpdateIsr
  // The links NotifyLinks wakes (through their eventfds).
  Mutex wake_mu_;
  std::vector<Link*> wake_links_ GUARDED_BY(wake_mu_);
  // wake_links_.size(), read without the lock (NotifyLinks' early return).
  std::atomic<size_t> wake_link_count_{0};
  // The highest sequence NotifyLinks woke the links for. (Should the
  // sequence ever go back, a link still finds the batches at its next
  // look, within 100 ms.)
  std::atomic<uint64_t> notified_seq_{0};
  std::thread etcd_thread_;
  // etcd mode: the last record and members read (SENTINEL), and what went
  // wrong last with etcd (INFO).
  bool have_view_ GUARDED_BY(mu_) = false;
  // When view_ was last read from etcd (ReplNowMs): ShardView gives no view
  // older than a lease TTL (a server cut off from etcd named its old
  // primary to Sentinel clients indefinitely).
  int64_t view_ms_ GUARDED_BY(mu_) = 0;
  ShardRecord view_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> view_members_
      GUARDED_BY(mu_);
  std::string etcd_error_ GUARDED_BY(mu_);
  // This server's node id (repl_state.h), read by Start before any thread
  // starts, constant after: in a replica's handshake, and in etcd mode its
  // member key and the record's ISR.
  std::string node_id_;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_REPLICATION_H_
