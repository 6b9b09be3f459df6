// Copyright (c) fencedkv authors.

#include "replication.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_set>

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fencedkv/replication.h"

#include "db/read_only_store.h"
#include "resp_writer.h"
#include "util/sync_point.h"
#include "util/thread_name.h"

namespace fencedkv {
namespace server {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

// A full copy's files travel in chunks of this size.
constexpr size_t kFileChunk = 1 << 20;
// The handshake's last word from a replica that checks a full copy against
// the size and sequence +FULLSYNC announces.
constexpr const char* kSizedCopyWord = "sized";
// The most files a full copy may hold (a million 64 MiB tables: 64 TiB).
// Each announced file is created on the replica's disk before its bytes
// come, and a file may be empty, so without a bound a hostile or broken
// primary could fill the replica's inode table (the byte count announced
// bounds only the bytes).
constexpr uint64_t kMaxCopyFiles = 1000000;
// Acknowledgement frames a primary reads are small; anything larger is not
// a replica.
constexpr size_t kMaxAckFrame = 4096;
// A primary with nothing to send pings this often (the replica's liveness
// check and its view of the primary's latest sequence).
constexpr int64_t kPingMs = 1000;
// How long a link with nothing to send sleeps at most: new batches
// (NotifyLinks, from every write through DB::SetLogListener), an
// acknowledgement and a closed link wake it at once. Until 2026-12-05 it
// looked every millisecond: an idle primary's two links woke 1,200 times a
// second each, 3% of a core. Pings (kPingMs) and the timeouts need no
// finer step.
constexpr int kLinkIdleWaitMs = 100;
// A replica that refused a full copy for want of the operator's word asks
// again this often (each answer costs the primary a checkpoint).
constexpr int64_t kRefusedCopyRetryMs = 10000;

std::string NormalizeDir(const std::string& path) {
  std::string p = fs::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// Renames `from` to `to` and fsyncs the directory holding `to`, so the
// rename survives a crash.
Status RenameDurably(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) {
    return Status::IOError("cannot rename " + from + " to " + to, ec.message());
  }
  const fs::path parent = fs::path(to).parent_path();
  return SyncPath(parent.empty() ? std::string(".") : parent.string(),
                  /*directory=*/true);
}

// Whether `dir` opens as a fencedkv database: RocksDB's read-only open (no
// lock, nothing written) and every required meta record. OK and, if asked,
// its latest sequence and fence configuration; else why not.
Status OpenAsDatabase(const std::string& dir, uint64_t* seq = nullptr,
                      StoreConfig* config = nullptr) {
  std::unique_ptr<ReadOnlyStore> store;
  Status s = ReadOnlyStore::OpenChecked(dir, &store);
  if (!s.ok()) return s;
  if (seq != nullptr) *seq = store->db()->GetLatestSequenceNumber();
  if (config != nullptr) *config = store->config();
  return Status::OK();
}

// Every table file of the open `store` read in full and its block
// checksums verified: the read-only open reads a table's footer and index,
// not its data blocks. OK; Corruption naming the first damaged table (as
// a file name, the store's directory being a temporary copy); an IOError
// once stop() says so (checked between files: a copy may be large).
Status VerifyCopyTables(const ReadOnlyStore& store,
                        const std::function<bool()>& stop) {
  std::string damage;
  size_t files = 0;
  uint64_t bytes = 0;
  store.VerifyTableChecksums(
      [&damage](std::string text) {
        if (damage.empty()) damage = std::move(text);
      },
      &files, &bytes, [&] { return !damage.empty() || stop(); });
  if (!damage.empty()) {
    // "SST file <dir>/000012.sst: ..." -> "000012.sst: ..."
    const std::string prefix = "SST file " + store.path() + "/";
    if (damage.rfind(prefix, 0) == 0) damage = damage.substr(prefix.size());
    return Status::Corruption(damage);
  }
  if (stop()) return Status::IOError("stopped while checking the copy");
  return Status::OK();
}

// Removes `dir` by renaming it to `trash` first (durably): a crash midway
// leaves a part of it only under `trash`, which a start drops, never a
// partial directory under its own name.
void DropDirectory(const std::string& dir, const std::string& trash) {
  std::error_code ec;
  fs::remove_all(trash, ec);
  if (RenameDurably(dir, trash).ok()) fs::remove_all(trash, ec);
}

// A name a checkpoint's file may have: RocksDB's (CURRENT, MANIFEST-000005,
// 000012.sst, OPTIONS-000007, 000010.log), letters, digits, '.', '-', '_',
// at most 255 bytes, never "." or "..". Anything else (a path, a NUL) is
// not a file of a copy.
bool IsCopyFileName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' &&
        c != '_') {
      return false;
    }
  }
  return true;
}

// "host:port" as REPLICAOF's two words.
std::string HostPortWords(const std::string& host_port) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(host_port, &host, &port)) return host_port;
  return host + " " + std::to_string(port);
}

std::string HeldByAnotherNodeError(const std::string& addr,
                                   const std::string& holder) {
  return "ERR another replica (node " + holder + ") is connected as " + addr +
         ": two replicas announce one address (give each its own "
         "--announce_addr); if that replica is gone, this one is accepted "
         "once its link times out (--repl_timeout_ms). Nothing was changed";
}

// A word a peer sent, fit for a log line or INFO's master_last_error: bytes
// outside printable ASCII as \xHH, at most 64 of them.
std::string PrintableWord(std::string_view word) {
  std::string out;
  for (size_t i = 0; i < word.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(word[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  if (word.size() > 64) out += "...";
  return out;
}

std::string Words(const std::vector<std::string_view>& words, size_t i) {
  return i < words.size() ? PrintableWord(words[i]) : std::string();
}

// Splits `text` on `sep`, dropping empty pieces: a "+WORD a b c" reply
// line on spaces, an INFO reply on '\n' (each line keeps its '\r').
std::vector<std::string> SplitOn(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(sep, i);
    if (j == std::string::npos) j = text.size();
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

Replication::Link::Link() : wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

Replication::Link::~Link() {
  if (wake_fd >= 0) close(wake_fd);
}

void Replication::NotifyLinks(uint64_t seq) {
  // No link: nothing to wake (every write of the database's own comes here,
  // replicas or not). A link that registers after this read looks at the
  // latest sequence before it first sleeps (the fence pairs with its own,
  // as below).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (wake_link_count_.load(std::memory_order_relaxed) == 0) return;
  // A caller that finds `seq` notified already returns at once: whoever
  // raised notified_seq_ to it or past it wakes the links after doing so,
  // and a link woken then reads every batch the log holds by then.
  uint64_t notified = notified_seq_.load(std::memory_order_relaxed);
  do {
    if (notified >= seq) return;
  } while (!notified_seq_.compare_exchange_weak(notified, seq,
                                                std::memory_order_relaxed));
  // Pairs with the fence in StreamTo: the batch is published (the
  // database's latest sequence) before `sleeping` is read here, and a link
  // sets `sleeping` before it reads the latest sequence; so either the link
  // sees the batch and does not wait, or this sees it sleeping and wakes
  // it. (Were a wake-up ever missed, the link still looks every
  // kLinkIdleWaitMs.)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  MutexLock lock(&wake_mu_);
  const uint64_t one = 1;
  for (Link* link : wake_links_) {
    if (!link->sleeping.load(std::memory_order_relaxed) ||
        !link->sleeping.exchange(false, std::memory_order_relaxed)) {
      continue;  // busy: it reads the new batches on its next pass
    }
    if (write(link->wake_fd, &one, sizeof(one)) < 0) {
      // EAGAIN: already woken
    }
  }
}

Replication::Replication(ReplicationOptions options, DB* db, LeaseSlot* leases)
    : options_(std::move(options)),
      db_(db),
      leases_(leases),
      tracker_(options_.min_insync_replicas) {
  // Every write of the database's own wakes the links that sleep (its
  // batch is in the log by then), so that an idle link can sleep long.
  db_->SetLogListener([this] { NotifyLinks(db_->GetLatestSequenceNumber()); });
  ticker_ = std::thread([this] {
    SetThreadName("fencedkv:isr");
    for (;;) {
      // Every 10 ms while replicas, waiters or a lease deadline need the
      // clock; every 100 ms (Redis's default hz) when nothing does. A WAIT
      // wakes a quiet ticker (WaitReplicas): the flag is up before the
      // tracker is asked, so a WAIT registered after that question sees it,
      // and one registered before makes the tracker not quiet.
      {
        MutexLock lock(&mu_);
        ticker_quiet_ = true;
      }
      const bool quiet = tracker_.Quiet();
      {
        MutexLock lock(&mu_);
        if (stopped_) return;
        if (!quiet) {
          ticker_quiet_ = false;
          tick_soon_ = false;  // (a WAIT in that instant: 10 ms is soon)
        }
        if (!tick_soon_) tick_cv_.wait_for(mu_, milliseconds(quiet ? 100 : 10));
        tick_soon_ = false;
        ticker_quiet_ = false;
        if (stopped_) return;
      }
      TEST_SYNC_POINT("Replication::Tick");
      tracker_.Tick();
      UpdateIsr();
    }
  });
}

Replication::~Replication() { Stop(); }

std::string Replication::FullSyncTmpDir(const std::string& db_path) {
  return NormalizeDir(db_path) + ".fullsync.tmp";
}

std::string Replication::FullSyncDir(const std::string& db_path) {
  return NormalizeDir(db_path) + ".fullsync";
}

std::string Replication::ReplacedDir(const std::string& db_path) {
  return NormalizeDir(db_path) + ".replaced";
}

Status Replication::AdoptFullSync(const std::string& db_path) {
  const std::string db = NormalizeDir(db_path);
  const std::string ready = FullSyncDir(db);
  const std::string old = ReplacedDir(db);
  const std::string tmp = FullSyncTmpDir(db);
  std::error_code ec;
  fs::remove_all(tmp, ec);  // an interrupted copy, or a drop (DropDirectory)
  // A swap that a crash interrupted. The old database is removed only once
  // the copy in its place opened, by renaming it to `tmp` first: a
  // `.replaced` directory is always whole. If the database opens, the swap
  // was done and the old data goes. If it is missing (the crash came
  // between the two renames), the old database comes back, and a copy still
  // ready is checked and swapped in again below. A database that exists
  // but does not open is not the swap's doing (both renames move whole,
  // checked directories): a disk error, damage, a store refused for its
  // WAL. Neither it nor the old one is deleted or silently put back (that
  // would roll the fence state back to the old copy's): the start fails,
  // naming both, for the operator to choose.
  if (fs::exists(old, ec)) {
    Status opens = fs::exists(db, ec) ? OpenAsDatabase(db) : Status::OK();
    if (fs::exists(db, ec) && opens.ok()) {
      DropDirectory(old, tmp);
      if (fs::exists(old, ec)) {
        // Left behind, it would be taken for an interrupted swap at a later
        // start: refuse to run until it is gone.
        return Status::IOError("cannot remove " + old +
                                   " (the database it held was replaced by "
                                   "a full copy): remove it by hand",
                               ec.message());
      }
    } else if (fs::exists(db, ec)) {
      return Status::Corruption(
          db + " does not open (" + opens.ToString() + ") and " + old +
              " holds the database a full copy replaced",
          "nothing was changed: move " + db +
              " aside and start again to "
              "run on " +
              old + " (its fence state is older), or fix " + db +
              " and remove " + old);
    } else {
      Status s = RenameDurably(old, db);
      if (!s.ok()) return s;
      LOG(WARNING) << "replication: " << db << " was missing or did not open "
                   << "after an interrupted full-copy swap: restored from "
                   << old;
    }
  }
  if (!fs::exists(ready, ec)) return Status::OK();
  // The copy was checked as it arrived (ReceiveFullSync); checked again
  // here, as it is what the server is about to run on: a copy that does not
  // open is dropped and the database kept (the replica asks its primary
  // again), never swapped in over it.
  Status check = OpenAsDatabase(ready);
  if (!check.ok()) {
    LOG(ERROR) << "replication: the full copy in " << ready
               << " does not open (" << check.ToString()
               << "): dropped; the database " << db << " is kept";
    DropDirectory(ready, tmp);
    return Status::OK();
  }
  const bool had_db = fs::exists(db, ec);
  if (had_db) {
    // The node id stays with the server, not with the data.
    const fs::path id = fs::path(db) / kNodeIdFile;
    if (fs::exists(id, ec)) {
      fs::copy_file(id, fs::path(ready) / kNodeIdFile,
                    fs::copy_options::overwrite_existing, ec);
      if (ec) {
        return Status::IOError("cannot keep " + id.string(), ec.message());
      }
      Status s = SyncPath((fs::path(ready) / kNodeIdFile).string(), false);
      if (s.ok()) s = SyncPath(ready, /*directory=*/true);
      if (!s.ok()) return s;
    }
    Status s = RenameDurably(db, old);
    if (!s.ok()) return s;
  }
  Status s = RenameDurably(ready, db);
  if (!s.ok()) return s;
  check = OpenAsDatabase(db);
  if (!check.ok()) {
    // (A copy that opened a moment ago: a disk error, say.) The old
    // database comes back, or none (a new one is made, and the replica
    // asks for a copy again), rather than a server that cannot start.
    LOG(ERROR) << "replication: the full copy swapped into " << db
               << " does not open (" << check.ToString()
               << "): the old database is put back";
    DropDirectory(db, tmp);
    if (had_db) {
      s = RenameDurably(old, db);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }
  if (had_db) DropDirectory(old, tmp);
  LOG(INFO) << "replication: the full copy in " << ready << " replaced " << db;
  if (had_db && fs::exists(old, ec)) {
    return Status::IOError("cannot remove " + old +
                               " (the database a full copy replaced): "
                               "remove it by hand",
                           ec.message());
  }
  return Status::OK();
}

Status Replication::Start(const std::string& replicaof) {
  MutexLock role(&role_mu_);
  {
    MutexLock lock(&mu_);
    Status s = ReplState::Load(options_.db_path, &state_);
    if (!s.ok()) return s;
  }
  Status s = LoadOrCreateNodeId(options_.db_path, &node_id_);
  if (!s.ok()) return s;
  if (etcd_mode()) {
    // Read-only until etcd's record says which role to take.
    read_only_.store(true);
    tracker_.SetPrimary(false,
                        "READONLY this server has not yet learnt its role "
                        "from etcd");
    db_->SetFollowing(true);
    etcd_thread_ = std::thread([this] {
      SetThreadName("fencedkv:etcd");
      EtcdLoop();
    });
    return Status::OK();
  }
  if (replicaof.empty()) return BecomePrimary();
  std::string host;
  int port;
  if (!SplitHostPort(replicaof, &host, &port)) {
    return Status::InvalidArgument("--replicaof must be host:port, not '" +
                                   replicaof + "'");
  }
  // Any spelling of this server's own address: before, only the exact
  // string was refused, and the server became a replica of itself.
  if (LeadsHere(replicaof)) {
    return Status::InvalidArgument(SelfReplicationError(replicaof, true));
  }
  // The primary kept from before a restart (or named again as it was) is
  // no word of the operator's to discard this replica's data: a copy of
  // another history is then refused (CopyWouldDiscard). A new one is.
  bool consent;
  {
    MutexLock lock(&mu_);
    consent = NormalizeHostPort(state_.follow) != NormalizeHostPort(replicaof);
  }
  return BecomeReplica(replicaof, consent);
}

bool Replication::LeadsHere(const std::string& primary) const {
  if (NormalizeHostPort(primary) == NormalizeHostPort(options_.self_addr)) {
    return true;
  }
  return !options_.listen_addr.empty() &&
         ListenerReachedBy(options_.listen_addr, primary);
}

std::string Replication::SelfReplicationError(const std::string& primary,
                                              bool at_start) {
  std::string out = "the primary to follow, " + primary;
  out += at_start ? " (--replicaof, or kept in REPLICATION from before a "
                    "restart), is this server itself: start it with "
                    "--replicaof=<its primary>, or --replicaof=none to make "
                    "it a primary"
                  : ", is this server itself (a connection to it reaches "
                    "this server): a server cannot replicate itself";
  return out;
}

void Replication::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    cv_.notify_all();
    tick_cv_.notify_all();
  }
  // Writes are refused from now on; those already released are still
  // decided by the commit rule while the links run (a replica may still
  // acknowledge them), then fail if they still wait (kAcksEnded).
  tracker_.Shutdown(CommitTracker::ShutdownStep::kRefuseWrites);
  if (etcd_thread_.joinable()) etcd_thread_.join();  // revokes its lease
  {
    MutexLock role(&role_mu_);
    StopReplicaThread();
  }
  StopLinks();
  if (ticker_.joinable()) ticker_.join();
  tracker_.Shutdown(CommitTracker::ShutdownStep::kAcksEnded);
  tracker_.FinishWaits();
  // Last (no link is left to wake): this may be destroyed next, and a
  // write after this must not call it.
  db_->SetLogListener(nullptr);
}

Status Replication::DropReadyCopy(const std::string& db_path) {
  const std::string ready = FullSyncDir(db_path);
  const std::string tmp = FullSyncTmpDir(db_path);
  std::error_code ec;
  if (!fs::exists(ready, ec)) return Status::OK();
  // Renamed first, so that a crash midway leaves a directory a start drops
  // (AdoptFullSync), never a partial copy it would swap in.
  fs::remove_all(tmp, ec);
  Status s = RenameDurably(ready, tmp);
  if (!s.ok()) return s;
  fs::remove_all(tmp, ec);
  return Status::OK();
}

Status Replication::RestartPending() {
  MutexLock lock(&mu_);
  if (restarting_on_copy_.empty()) return Status::OK();
  return Status::Busy("restarting on a full copy of " + restarting_on_copy_ +
                      ": the restart would undo a role change now; retry "
                      "after it");
}

Status Replication::BecomePrimary(const ShardRecord* record,
                                  int64_t lease_deadline_ms) {
  if (record != nullptr) {
    // The record was checked against the highest epoch seen (etcd's state
    // can go back): never lower it, never list epochs out of order. Before
    // anything changes (the replica thread, following).
    MutexLock lock(&mu_);
    if (record->epoch < state_.max_epoch ||
        (!record->epochs.empty() &&
         record->epochs.back().epoch != record->epoch)) {
      return Status::InvalidArgument(
          "the shard record's epoch " + std::to_string(record->epoch) +
          " is below epoch " + std::to_string(state_.max_epoch) +
          " seen here, or its epochs do not end with it: not taken");
    }
  } else {
    // Manual mode takes max_epoch + 1: refused before anything changes (the
    // replica thread, following). A replica adopts no epoch at or past
    // kMaxEpoch, so only a REPLICATION file edited by hand gets here.
    MutexLock lock(&mu_);
    if (state_.max_epoch >= kMaxEpoch) {
      return Status::InvalidArgument(
          "epoch " + std::to_string(state_.max_epoch) +
          " is the last: no epoch is left for a promotion");
    }
  }
  StopReplicaThread();
  // A promotion now would take writes that the restart (swapping in the
  // copy, then following its primary) loses.
  Status pending = RestartPending();
  if (!pending.ok()) return pending;
  // A copy left ready by a receipt that failed after its rename (the
  // directory's fsync): a later start would swap it in over this
  // primary's writes.
  Status dropped = DropReadyCopy(options_.db_path);
  if (!dropped.ok()) return dropped;
  // Where the log stops being the old epoch's: read while nothing of this
  // server's own can write (following), as SetFollowing(false) may write
  // the recovery's sentinel at once, the new epoch's first batch. (Read
  // after it, the sentinel counted in the old epoch: an old primary's
  // one-sequence suffix then passed for a prefix.)
  const uint64_t latest = db_->GetLatestSequenceNumber();
  db_->SetFollowing(false);  // (clients still get READONLY: read_only_)
  Status s = db_->ReloadFenceState();
  if (!s.ok()) return s;
  {
    MutexLock lock(&mu_);
    ReplState next = state_;
    if (next.history.empty()) next.history = NewHistoryId();
    // Each term as primary is a new epoch: batches of an older epoch that
    // this log does not have (a deposed primary's unsynced tail) are then
    // told apart from this one's (DecideSync).
    uint64_t epoch = next.max_epoch + 1;
    if (record != nullptr) {
      // Checked above, before anything changed; again here, since the
      // replica thread (stopped since) may have seen a newer epoch
      // meanwhile: never lower max_epoch.
      if (record->epoch < next.max_epoch) {
        return Status::InvalidArgument(
            "the shard record's epoch " + std::to_string(record->epoch) +
            " is below epoch " + std::to_string(next.max_epoch) +
            " seen here: not taken");
      }
      epoch = record->epoch;
      next.history = record->history;
      next.epochs = record->epochs;
    } else {
      // Manual mode: another server may take this number apart from this
      // one (promoted from the same epoch): the id tells the two apart.
      AppendEpoch(&next.epochs, epoch, latest, NewPromotionId());
    }
    next.max_epoch = epoch;
    next.log_epoch = epoch;
    next.follow.clear();  // a restart starts as a primary again
    s = next.Store(options_.db_path);
    if (!s.ok()) return s;
    state_ = next;
    epoch_ = epoch;
    primary_.clear();
    link_error_.clear();
  }
  s = leases_->Open();
  if (!s.ok()) return s;
  {
    MutexLock lock(&mu_);
    isr_.clear();
    required_isr_.clear();
    join_floor_.clear();
  }
  tracker_.SetIsr({}, 1);
  if (etcd_mode()) {
    // Fenced reads, leases and writes stop when the etcd lease may have
    // expired: one TTL from the last keep-alive before this, not from now
    // (the takeover may come up to a third of a TTL after it; before, the
    // first deadline ran that much past the lease).
    SetLeaseDeadline(lease_deadline_ms);
  }
  tracker_.SetPrimary(true, "");
  read_only_.store(false);
  MutexLock lock(&mu_);
  LOG(INFO) << "replication: primary, epoch " << epoch_ << ", sequence "
            << latest;
  return Status::OK();
}

Status Replication::BecomeReplica(const std::string& primary, bool consent) {
  // Writes stop first; then nothing of ours writes (the lease reclaimer);
  // then the replicas we served go (they will follow the new primary).
  read_only_.store(true);
  tracker_.SetPrimary(false,
                      "READONLY You can't write against a read only replica.");
  // A write admitted while this was a primary may still be on its way to
  // the database (queued for the database thread behind an fsync, or in a
  // loop's group): it must fail, not land after the position the replica
  // thread is about to read, where it would take sequence numbers of the
  // primary's log. This returns once none is in flight.
  db_->SetFollowing(true);
  leases_->Close();
  StopLinks();
  StopReplicaThread();
  Status pending = RestartPending();
  if (!pending.ok()) return pending;
  uint64_t generation;
  Status kept;
  {
    MutexLock lock(&mu_);
    primary_ = primary;
    generation = ++generation_;
    link_state_ = "connect";
    link_error_.clear();
    // Set once the previous replica thread is gone (it clears it when its
    // stream begins).
    copy_consent_ = consent;
    refused_copy_.clear();
    // Kept before the replica thread starts: its handshake stores a state
    // made from state_, which must already hold it.
    if (!etcd_mode() && state_.follow != primary) {
      ReplState next = state_;
      next.follow = primary;
      kept = next.Store(options_.db_path);
      if (kept.ok()) state_ = next;
    }
  }
  replica_thread_ = std::thread([this, primary, generation] {
    SetThreadName("fencedkv:follow");
    ReplicaLoop(primary, generation);
  });
  LOG(INFO) << "replication: replica of " << primary;
  if (!kept.ok()) {
    LOG(ERROR) << "replication: cannot keep the primary to follow for a "
                  "restart: "
               << kept.ToString();
  }
  return kept;
}

void Replication::StopReplicaThread() {
  {
    MutexLock lock(&mu_);
    ++generation_;
    if (replica_socket_ != nullptr) replica_socket_->ShutdownBoth();
    cv_.notify_all();
  }
  if (replica_thread_.joinable()) replica_thread_.join();
}

void Replication::StopLinks() {
  std::list<std::unique_ptr<Link>> links;
  {
    MutexLock lock(&mu_);
    links.swap(links_);
    for (auto& l : links) {
      if (l->socket != nullptr) l->socket->ShutdownBoth();
    }
  }
  for (auto& l : links) {
    if (l->thread.joinable()) l->thread.join();
  }
}

Status Replication::ReplicaOf(const std::string& primary, std::string* reply) {
  if (etcd_mode()) {
    return Status::InvalidArgument(
        "REPLICAOF is not allowed with --shard: etcd's record chooses the "
        "primary");
  }
  MutexLock role(&role_mu_);
  {
    MutexLock lock(&mu_);
    if (stopped_) return Status::Shutdown("the server is shutting down");
    if (primary.empty() && !read_only_.load()) {
      *reply = "OK";
      return Status::OK();
    }
    // (Unless it refused that primary's copy: then the operator's word is
    // what it waits for.)
    if (!primary.empty() && read_only_.load() && primary_ == primary &&
        state_.follow == primary && refused_copy_.empty()) {
      *reply = "OK Already connected to specified master";
      return Status::OK();
    }
  }
  if (primary.empty()) {
    Status s = BecomePrimary();
    if (s.ok()) *reply = "OK";
    return s;
  }
  // Any spelling of this server's address (localhost, 127.1, 0.0.0.0,
  // ::ffff:127.0.0.1 ...): before, only the exact string was refused, and
  // the server became a read-only replica of itself.
  if (LeadsHere(primary)) {
    return Status::InvalidArgument(SelfReplicationError(primary, false));
  }
  Status stale = CheckNotDeposed(primary);
  if (!stale.ok()) return stale;
  Status s = BecomeReplica(primary, /*consent=*/true);
  if (s.IsBusy()) return s;
  if (!s.ok()) {
    return Status::IOError(
        "this server follows " + primary +
            " now, but could not keep it for a restart (it would start as a "
            "primary)",
        s.ToString());
  }
  *reply = "OK";
  return Status::OK();
}

Status Replication::CheckNotDeposed(const std::string& primary) {
  ReplState mine;
  {
    MutexLock lock(&mu_);
    mine = state_;
  }
  if (mine.history.empty() || mine.max_epoch == 0) return Status::OK();
  // What the primary says of itself; anything short of a clear answer
  // leaves the decision to the handshake, as before. REPLICAOF runs on an
  // io loop, whose other clients wait meanwhile: one deadline of at most
  // 1 s bounds the whole exchange, however slow the target.
  const int64_t deadline =
      ReplNowMs() + std::min<int64_t>(options_.timeout_ms, 1000);
  auto timeout_left = [deadline] {
    return milliseconds(std::max<int64_t>(1, deadline - ReplNowMs()));
  };
  ReplSocket socket;
  if (!socket.Connect(primary, timeout_left()).ok()) return Status::OK();
  std::string req, buf, line;
  if (!options_.masterauth.empty()) {
    if (options_.masteruser.empty()) {
      AppendFrame(&req, {"AUTH", options_.masterauth});
    } else {
      AppendFrame(&req, {"AUTH", options_.masteruser, options_.masterauth});
    }
  }
  AppendFrame(&req, {"INFO", "replication"});
  if (!socket.SendAll(req, timeout_left()).ok()) return Status::OK();
  if (!options_.masterauth.empty() &&
      (!ReadReplyLine(&socket, &buf, &line, timeout_left()).ok() ||
       line != "+OK")) {
    return Status::OK();
  }
  uint64_t len = 0;
  if (!ReadReplyLine(&socket, &buf, &line, timeout_left()).ok() ||
      line.empty() || line[0] != '$' || !ParseU64Text(line.substr(1), &len) ||
      len > (1 << 20)) {
    return Status::OK();
  }
  while (buf.size() < len && ReplNowMs() < deadline) {
    if (!socket.ReadSome(&buf, milliseconds(100), len - buf.size()).ok()) {
      return Status::OK();
    }
  }
  if (buf.size() < len) return Status::OK();
  std::string role, history, epoch_text;
  for (std::string l : SplitOn(buf.substr(0, len), '\n')) {
    if (l.back() == '\r') l.pop_back();
    if (l.rfind("role:", 0) == 0) role = l.substr(5);
    if (l.rfind("repl_history:", 0) == 0) history = l.substr(13);
    if (l.rfind("repl_epoch:", 0) == 0) epoch_text = l.substr(11);
  }
  uint64_t epoch = 0;
  if (role != "master" || history != mine.history ||
      !ParseU64Text(epoch_text, &epoch) || epoch >= mine.max_epoch) {
    return Status::OK();
  }
  return Status::InvalidArgument(
      primary + " is a primary of this server's history at epoch " +
      std::to_string(epoch) + ", below the epoch " +
      std::to_string(mine.max_epoch) +
      " this server has seen: it was deposed (by this server's promotion, "
      "or a later one), and would refuse this server for ever (STALEEPOCH). "
      "Nothing was changed. To make it the primary again: REPLICAOF " +
      HostPortWords(options_.self_addr) +
      " on it, once it caught up REPLICAOF NO ONE on it (its new epoch is "
      "then above this one's), then REPLICAOF " +
      HostPortWords(primary) + " here");
}

// ---------------------------------------------------------------- primary

void Replication::AcceptReplica(int fd, std::vector<std::string> args) {
  auto link = std::make_unique<Link>();
  link->socket = std::make_shared<ReplSocket>(fd);
  Link* l = link.get();
  // Kept here: a refused link is answered after the lock.
  const std::shared_ptr<ReplSocket> socket = link->socket;
  std::list<std::unique_ptr<Link>> finished;
  std::string refusal;
  {
    MutexLock lock(&mu_);
    for (auto it = links_.begin(); it != links_.end();) {
      if ((*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = links_.erase(it);
      } else {
        ++it;
      }
    }
    if (stopped_) {
      refusal = "-SHUTDOWN the server is shutting down\r\n";
    } else if (links_.size() >= options_.max_replicas) {
      refusal = "-ERR max number of replicas reached (" +
                std::to_string(options_.max_replicas) + ")\r\n";
    } else {
      link->thread = std::thread([this, l, args = std::move(args)]() mutable {
        SetThreadName("fencedkv:ship");
        ServeReplica(l, std::move(args));
        l->socket->Close();
        l->done.store(true);
      });
      links_.push_back(std::move(link));
    }
  }
  if (!refusal.empty()) socket->SendAll(refusal, milliseconds(100));
  for (auto& f : finished) {
    if (f->thread.joinable()) f->thread.join();
  }
}

void Replication::ServeReplica(Link* link, std::vector<std::string> args) {
  ReplSocket* socket = link->socket.get();
  const milliseconds timeout(options_.timeout_ms);
  auto refuse = [&](const std::string& line) {
    LOG(WARNING) << "replication: refused a replica: " << line;
    socket->SendAll("-" + line + "\r\n", timeout);
  };
  // FENCEDKV.SYNC history addr max_epoch log_epoch seq domain mode sync
  // [node [log_id [sized]]] (a replica of an older build sends no node id
  // or no id of its log epoch's promotion; "-": it knows none). "sized": the
  // replica checks a full copy against its announced size and sequence, so
  // +FULLSYNC carries them (a replica of an older build would refuse the
  // longer line).
  if (args.size() < 9 || args.size() > 12 ||
      (args[8] != "sync" && args[8] != "nosync") ||
      (args.size() >= 10 && !IsNodeId(args[9])) ||
      (args.size() >= 11 && args[10] != "-" && !IsPromotionId(args[10])) ||
      (args.size() == 12 && args[11] != kSizedCopyWord)) {
    refuse(
        "ERR FENCEDKV.SYNC takes history addr max_epoch log_epoch seq "
        "domain mode sync|nosync [node [log_id [sized]]]");
    return;
  }
  const bool sized = args.size() == 12;
  link->node = args.size() >= 10 ? args[9] : "";
  // A replica of an older build neither sends its log epoch's promotion id
  // nor parses ids: it gets the epochs without them, and is not compared
  // by them (its list never holds any).
  const bool knows_ids = args.size() >= 11;
  const std::string log_id = knows_ids && args[10] != "-" ? args[10] : "";
  const std::string history = args[1] == "-" ? "" : args[1];
  std::string addr;
  if (!ReplicaAddress(args[2], socket->fd(), &addr)) {
    refuse("ERR FENCEDKV.SYNC: the replica's address is not host:port");
    return;
  }
  uint64_t max_epoch, log_epoch, seq;
  if (!ParseU64Text(args[3], &max_epoch) ||
      !ParseU64Text(args[4], &log_epoch) || !ParseU64Text(args[5], &seq)) {
    refuse("ERR FENCEDKV.SYNC: bad epoch or sequence");
    return;
  }
  const std::string domain = db_->GetFenceDomain().ToString();
  const std::string mode = FenceModeName(db_->GetFenceMode());
  if (args[6] != domain || args[7] != mode) {
    refuse("ERR fence configuration differs: this primary has fence_domain=" +
           domain + " fence_mode=" + mode + ", the replica " +
           PrintableWord(args[6]) + " " + PrintableWord(args[7]) +
           " (a copy with another domain function or mode would "
           "break every fence: nothing was changed)");
    return;
  }
  // The commit rule counts a replica's acknowledgement as durable as this
  // server's own write: with --sync here, an ISR member that does not
  // fsync what it applies would weaken every acknowledged write.
  if (options_.sync && args[8] != "sync") {
    refuse(
        "ERR durability differs: this primary runs with --sync (a write is "
        "acknowledged once fsync'ed everywhere) and the replica does not: "
        "start it with --sync (nothing was changed)");
    return;
  }
  if (read_only_.load()) {
    refuse(
        "ERR this server is a replica, not a primary (no chained "
        "replication)");
    return;
  }
  // Two replicas announcing one address would take each other's place,
  // acknowledgements and ISR membership: the one connected keeps it.
  std::string holder;
  if (tracker_.HeldByAnotherNode(addr, link->node, &holder)) {
    refuse(HeldByAnotherNodeError(addr, holder));
    return;
  }
  uint64_t epoch;
  ReplState mine;
  {
    MutexLock lock(&mu_);
    epoch = epoch_;
    mine = state_;
  }
  const uint64_t latest = db_->GetLatestSequenceNumber();
  EpochList sent_epochs = mine.epochs;
  if (!knows_ids) ClearPromotionIds(&sent_epochs);
  const std::string epochs =
      sent_epochs.empty() ? "-" : FormatEpochs(sent_epochs);
  bool full = history != mine.history;
  std::string why = full ? "another history" : "";
  if (!full && max_epoch > epoch) {
    refuse("ERR STALEEPOCH this primary's epoch " + std::to_string(epoch) +
           " is below the replica's highest seen epoch " +
           std::to_string(max_epoch) + ": it was deposed");
    return;
  }
  std::unique_ptr<LogReader> reader;
  if (!full) {
    // etcd mode numbers one epoch per promotion and keeps no ids. A replica
    // whose log epoch has one was promoted in manual mode (a member started
    // without its etcd flags takes its highest seen epoch + 1, the number
    // etcd gives the next primary): its batches of that epoch are not the
    // shard's, wherever they begin. Matched by number alone, it was taken
    // on from its own position and kept them (a helper's review).
    const bool compare_ids = knows_ids && (!etcd_mode() || !log_id.empty());
    SyncDecision d = DecideSync(mine.epochs, latest, log_epoch, seq,
                                compare_ids ? &log_id : nullptr);
    full = d.full_sync;
    why = d.reason;
  }
  // The log must still hold seq + 1: the first batch is read now (a log
  // that no longer has it means a full copy).
  uint64_t first = 0;
  std::string first_batch;
  if (!full) {
    Status s = db_->NewLogReader(seq, &reader);
    std::string_view data;
    // A reader may say "not yet" for a batch on its way to the log tail
    // (the engine's copy of the newest batches); after at most 200 ms it
    // asks the WAL, which has the batch or says the log does not hold it.
    const auto give_up = std::chrono::steady_clock::now() + milliseconds(2000);
    while (s.ok() && latest > seq) {
      if (reader->Next(&first, &data)) {
        first_batch.assign(data.data(), data.size());
        break;
      }
      s = reader->status();
      if (s.ok() && std::chrono::steady_clock::now() >= give_up) {
        s = Status::Busy("the log did not yield sequence " +
                         std::to_string(seq + 1));
      }
    }
    if (!s.ok()) {
      full = true;
      why = "the log no longer holds sequence " + std::to_string(seq + 1) +
            ": " + s.ToString();
    }
  }
  const std::string head =
      std::to_string(epoch) + " " + mine.history + " " + epochs;
  if (full) {
    LOG(INFO) << "replication: full sync of " << addr << " (" << why << ")";
    Status s = SendFullSync(socket, "+FULLSYNC " + head, sized, latest);
    if (!s.ok()) {
      LOG(WARNING) << "replication: full sync of " << addr
                   << " failed: " << s.ToString();
    }
    return;  // the replica restarts on the copy and reconnects
  }
  // The name is taken before the answer: of two nodes that passed the
  // check above at once, the second is refused here with the error.
  const uint64_t id = tracker_.Attach(addr, link->node, &holder);
  if (id == 0) {
    refuse(HeldByAnotherNodeError(addr, holder));
    return;
  }
  Status s = socket->SendAll("+CONTINUE " + head + "\r\n", timeout);
  if (!s.ok()) {
    tracker_.Detach(addr, id);
    return;
  }
  LOG(INFO) << "replication: streaming to " << addr << " from sequence " << seq
            << " (epoch " << epoch << ")";
  StreamTo(socket, addr, id, epoch, seq, first, first_batch, std::move(reader),
           link);
}

Status Replication::SendFullSync(ReplSocket* socket, const std::string& header,
                                 bool sized, uint64_t latest) {
  const milliseconds timeout(options_.timeout_ms);
  {
    MutexLock lock(&mu_);
    if (full_sync_running_) {
      socket->SendAll("-BUSY a full sync is running; retry\r\n", timeout);
      return Status::Busy("a full sync is running");
    }
    full_sync_running_ = true;
  }
  const std::string dir = NormalizeDir(options_.db_path) + ".replcopy";
  std::error_code ec;
  fs::remove_all(dir, ec);
  Status s = db_->Checkpoint(dir);
  std::vector<fs::path> files;
  uint64_t total = 0;
  if (s.ok()) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.is_regular_file()) continue;
      files.push_back(e.path());
      total += e.file_size(ec);
      if (ec) break;
    }
    if (ec) s = Status::IOError("cannot list " + dir, ec.message());
  }
  if (!s.ok()) {
    socket->SendAll("-ERR full sync: " + s.ToString() + "\r\n", timeout);
  } else {
    // A checkpoint's files do not change once made: what is announced is
    // what is sent. `latest` was read before the checkpoint was taken, so
    // the copy holds at least that sequence.
    std::string line = header + " " + std::to_string(files.size());
    if (sized) {
      line += " " + std::to_string(total) + " " + std::to_string(latest);
    }
    s = socket->SendAll(line + "\r\n", timeout);
  }
  std::string frame;
  std::string chunk(kFileChunk, '\0');
  for (size_t i = 0; s.ok() && i < files.size(); ++i) {
    std::ifstream in(files[i], std::ios::binary);
    const std::string name = files[i].filename().string();
    bool any = false;
    while (s.ok() && in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const auto n = static_cast<size_t>(in.gcount());
      if (n == 0 && any) break;
      any = true;
      frame.clear();
      AppendFrame(&frame,
                  {"FENCEDKV.FILE", name, std::string_view(chunk.data(), n)});
      s = socket->SendAll(frame, timeout);
    }
    if (s.ok() && in.bad())
      s = Status::IOError("cannot read " + files[i].string());
  }
  if (s.ok()) {
    frame.clear();
    AppendFrame(&frame, {"FENCEDKV.FILESDONE", std::to_string(files.size())});
    s = socket->SendAll(frame, timeout);
  }
  fs::remove_all(dir, ec);
  MutexLock lock(&mu_);
  full_sync_running_ = false;
  return s;
}

void Replication::StreamTo(ReplSocket* socket, const std::string& addr,
                           uint64_t id, uint64_t epoch, uint64_t after,
                           uint64_t first_seq, std::string first_batch,
                           std::unique_ptr<LogReader> reader, Link* link) {
  if (link->wake_fd >= 0) {
    MutexLock lock(&wake_mu_);
    wake_links_.push_back(link);
    wake_link_count_.store(wake_links_.size(), std::memory_order_relaxed);
  }
  struct Unregister {
    Replication* r;
    Link* link;
    ~Unregister() {
      MutexLock lock(&r->wake_mu_);
      r->wake_links_.erase(
          std::remove(r->wake_links_.begin(), r->wake_links_.end(), link),
          r->wake_links_.end());
      r->wake_link_count_.store(r->wake_links_.size(),
                                std::memory_order_relaxed);
    }
  } unregister{this, link};
  tracker_.SetLinkState(addr, id, "online");
  tracker_.OnAck(addr, id, after, 0);  // it has what it asked to follow
  const milliseconds timeout(options_.timeout_ms);
  const std::string epoch_text = std::to_string(epoch);
  FrameReader in(kMaxAckFrame);
  std::vector<std::string_view> words;
  std::string out;
  uint64_t sent = after;
  // (sequence, when it was all the primary had), for the replica's lag:
  // once it acknowledges the sequence, it was caught up as of then.
  std::deque<std::pair<uint64_t, int64_t>> marks;
  int64_t last_send = ReplNowMs();
  int64_t last_heard = last_send;
  Status s;
  while (s.ok() && !link->done.load()) {
    {
      MutexLock lock(&mu_);
      if (stopped_ || epoch_ != epoch || read_only_.load()) break;
    }
    out.clear();
    if (!first_batch.empty()) {  // read by the handshake
      if (first_seq != sent + 1) {
        s = Status::Corruption("log gap at sequence " +
                               std::to_string(sent + 1));
        break;
      }
      AppendFrame(&out, {"FENCEDKV.LOG", epoch_text, std::to_string(first_seq),
                         first_batch});
      sent = first_seq + std::max<uint32_t>(1, LogBatchCount(first_batch)) - 1;
      std::string().swap(first_batch);
    }
    // What committed since the last pass, up to about 1 MiB per send.
    while (out.size() < kFileChunk && db_->GetLatestSequenceNumber() > sent) {
      uint64_t first;
      std::string_view data;
      if (!reader->Next(&first, &data)) {
        s = reader->status();
        break;
      }
      if (first != sent + 1) {
        s = Status::Corruption("log gap: expected sequence " +
                               std::to_string(sent + 1) + ", read " +
                               std::to_string(first));
        break;
      }
      AppendFrame(&out,
                  {"FENCEDKV.LOG", epoch_text, std::to_string(first), data});
      sent = first + std::max<uint32_t>(1, LogBatchCount(data)) - 1;
    }
    if (!s.ok()) break;
    const int64_t now = ReplNowMs();
    if (db_->GetLatestSequenceNumber() <= sent &&
        (marks.empty() || marks.back().first != sent)) {
      marks.emplace_back(sent, now);
      if (marks.size() > 1024) marks.pop_front();
    }
    if (out.empty() && now - last_send >= kPingMs) {
      AppendFrame(&out, {"FENCEDKV.PING",
                         std::to_string(db_->GetLatestSequenceNumber())});
    }
    if (!out.empty()) {
      s = socket->SendAll(out, timeout);
      if (!s.ok()) break;
      last_send = ReplNowMs();
    }
    // Acknowledgements; when idle, wait a little for one (or new batches).
    bool wait = out.empty();
    if (wait && link->wake_fd >= 0) {
      // About to sleep: say so, then look once more (NotifyLinks).
      link->sleeping.store(true, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (db_->GetLatestSequenceNumber() > sent) wait = false;
    }
    s = socket->ReadSome(in.buffer(),
                         milliseconds(!wait                ? 0
                                      : link->wake_fd >= 0 ? kLinkIdleWaitMs
                                                           : 1),
                         kMaxAckFrame, link->wake_fd);
    link->sleeping.store(false, std::memory_order_relaxed);
    if (!s.ok()) break;
    // Only whole frames are signs of life: a peer that sent a byte of one
    // now and then held the link (and a --max_replicas slot) for good.
    while (in.Next(&words)) {
      last_heard = ReplNowMs();
      uint64_t seq;
      if (words.size() == 2 && words[0] == "FENCEDKV.ACK" &&
          ParseU64Text(words[1], &seq)) {
        if (seq > sent) {
          // It cannot have what it was never sent: an acknowledgement past
          // it would count writes as replicated that are not.
          s = Status::InvalidArgument("the replica acknowledged sequence " +
                                      std::to_string(seq) + ", past the " +
                                      std::to_string(sent) + " it was sent");
          break;
        }
        int64_t caught_up = 0;
        while (!marks.empty() && marks.front().first <= seq) {
          caught_up = marks.front().second;
          marks.pop_front();
        }
        tracker_.OnAck(addr, id, seq, caught_up);
      } else {
        s = Status::InvalidArgument("unexpected frame from the replica: " +
                                    Words(words, 0));
        break;
      }
    }
    if (!in.error().empty()) s = Status::InvalidArgument(in.error());
    if (s.ok() && ReplNowMs() - last_heard > options_.timeout_ms) {
      s = Status::IOError("no acknowledgement for " +
                          std::to_string(options_.timeout_ms) + " ms");
    }
  }
  tracker_.Detach(addr, id);
  if (!s.ok()) {
    LOG(WARNING) << "replication: link to " << addr
                 << " dropped: " << s.ToString();
  }
}

namespace {
// How far behind the latest sequence a replica may be when it joins the
// in-sync set (it is then required, so writes wait for it to close the gap).
constexpr uint64_t kJoinSlack = 4096;
}  // namespace

void Replication::UpdateIsr() {
  if (read_only_.load()) return;
  const uint64_t latest = db_->GetLatestSequenceNumber();
  const auto replicas = tracker_.Replicas(latest);
  std::vector<std::string> isr, required;
  std::vector<std::string> new_joiners;
  {
    MutexLock lock(&mu_);
    std::vector<std::string> candidates;
    std::map<std::string, uint64_t> acked;
    for (const auto& r : replicas) {
      const bool member =
          std::find(isr_.begin(), isr_.end(), r.addr) != isr_.end();
      // A member stays while it keeps up within replica_lag_ms; a replica
      // is a candidate once well within it (half: no flapping at the edge)
      // and within kJoinSlack sequence numbers of the latest (a replica
      // still copying old batches may have acknowledged recently sent
      // ones).
      const int64_t bound =
          member ? options_.replica_lag_ms : options_.replica_lag_ms / 2;
      const bool close = member || r.acked + kJoinSlack >= latest;
      if (r.connected && r.state == "online" && r.lag_ms <= bound && close) {
        candidates.push_back(r.addr);
        acked[r.addr] = r.acked;
      }
    }
    if (etcd_mode()) {
      // The candidates are the etcd thread's wish; it enters one in the
      // record's ISR only once it has everything acknowledged without it
      // (join_floor in replication_etcd.cc), then sets the tracker.
      isr = candidates;
    } else {
      // The same rule here: a candidate is required from now on (every
      // write waits for it) and joins once it has acknowledged the latest
      // sequence of when it was first required, so an ISR member never
      // lacks an acknowledged write (Kafka: a follower joins at the high
      // watermark). Before, INFO listed a replica as in sync while it
      // lacked up to kJoinSlack acknowledged sequence numbers.
      for (const auto& a : candidates) {
        const bool member =
            std::find(isr_.begin(), isr_.end(), a) != isr_.end();
        auto floor = join_floor_.find(a);
        if (member ||
            (floor != join_floor_.end() && acked[a] >= floor->second)) {
          isr.push_back(a);
        } else if (floor == join_floor_.end()) {
          new_joiners.push_back(a);
        }
        required.push_back(a);
      }
      for (auto it = join_floor_.begin(); it != join_floor_.end();) {
        const bool joining =
            std::find(required.begin(), required.end(), it->first) !=
                required.end() &&
            std::find(isr.begin(), isr.end(), it->first) == isr.end();
        it = joining ? std::next(it) : join_floor_.erase(it);
      }
    }
    if (isr != isr_) {
      for (const auto& a : isr_) {
        if (std::find(isr.begin(), isr.end(), a) == isr.end()) {
          LOG(WARNING) << "replication: " << a << " leaves the in-sync set";
        }
      }
      for (const auto& a : isr) {
        if (std::find(isr_.begin(), isr_.end(), a) == isr_.end()) {
          LOG(INFO) << "replication: " << a << " joins the in-sync set";
        }
      }
      isr_ = isr;
    } else if (new_joiners.empty() && required_isr_ == required) {
      return;
    }
    required_isr_ = required;
  }
  // In etcd mode the record's ISR is what counts: the etcd thread changes
  // it, then the tracker (replication_etcd.cc).
  if (etcd_mode()) return;
  tracker_.SetIsr(required, isr.size() + 1);
  if (new_joiners.empty()) return;
  // Taken once they are required: a write released before this is at or
  // below the floor, and every later one waits for them. One that has the
  // floor already (an idle or caught-up replica) joins in this same pass.
  const uint64_t floor = db_->GetLatestSequenceNumber();
  bool joined = false;
  {
    MutexLock lock(&mu_);
    for (const auto& a : new_joiners) {
      if (tracker_.Acked(a) >= floor) {
        LOG(INFO) << "replication: " << a << " joins the in-sync set";
        isr_.push_back(a);
        joined = true;
        continue;
      }
      join_floor_.emplace(a, floor);
      LOG(INFO) << "replication: " << a
                << " is required from now on and joins the in-sync set once "
                   "it has sequence "
                << floor;
    }
    isr = isr_;
  }
  if (joined) tracker_.SetIsr(required, isr.size() + 1);
}

// ---------------------------------------------------------------- replica

bool Replication::ReplicaStopping(uint64_t generation) {
  MutexLock lock(&mu_);
  return stopped_ || generation_ != generation;
}

void Replication::SetLink(const std::string& state, const std::string& error) {
  MutexLock lock(&mu_);
  link_state_ = state;
  if (!error.empty()) link_error_ = error;
}

void Replication::Backoff(uint64_t generation, int64_t ms) {
  MutexLock lock(&mu_);
  const int64_t until = ReplNowMs() + ms;
  while (!stopped_ && generation_ == generation && ReplNowMs() < until) {
    cv_.wait_for(mu_, milliseconds(until - ReplNowMs()));
  }
}

void Replication::ReplicaLoop(const std::string& primary, uint64_t generation) {
  uint64_t applied = UINT64_MAX;
  while (!ReplicaStopping(generation)) {
    Status s = ReplicaSession(primary, generation, &applied);
    if (ReplicaStopping(generation)) break;
    if (s.IsShutdown()) return;  // a full copy is in place: restarting
    LOG(WARNING) << "replication: link to primary " << primary << ": "
                 << s.ToString();
    SetLink("connect", s.ToString());
    bool refused;
    {
      MutexLock lock(&mu_);
      refused = !refused_copy_.empty() || copy_damaged_;
      copy_damaged_ = false;
    }
    // Each try at a refused copy costs the primary a checkpoint: asked
    // less often (an operator's REPLICAOF ends the wait at once).
    Backoff(generation, refused ? kRefusedCopyRetryMs : 1000);
  }
}

Status Replication::ReplicaSession(const std::string& primary,
                                   uint64_t generation, uint64_t* applied) {
  const milliseconds timeout(options_.timeout_ms);
  auto socket = std::make_shared<ReplSocket>();
  SetLink("connecting", "");
  Status s = socket->Connect(primary, milliseconds(2000));
  if (!s.ok()) return s;
  {
    MutexLock lock(&mu_);
    if (stopped_ || generation_ != generation) return Status::OK();
    replica_socket_ = socket;
  }
  struct Unset {
    Replication* r;
    ~Unset() {
      MutexLock lock(&r->mu_);
      r->replica_socket_.reset();
    }
  } unset{this};
  std::string buf, line, req;
  if (!options_.masterauth.empty()) {
    if (options_.masteruser.empty()) {
      AppendFrame(&req, {"AUTH", options_.masterauth});
    } else {
      AppendFrame(&req, {"AUTH", options_.masteruser, options_.masterauth});
    }
    s = socket->SendAll(req, timeout);
    if (s.ok()) s = ReadReplyLine(socket.get(), &buf, &line, timeout);
    if (!s.ok()) return s;
    if (line != "+OK") {
      return Status::InvalidArgument("AUTH refused by the primary: " + line);
    }
  }
  ReplState st;
  {
    MutexLock lock(&mu_);
    st = state_;
  }
  const uint64_t seq = db_->GetLatestSequenceNumber();
  // The log is not where this replica's last session left it: an apply
  // that failed (a full disk) had its sequence numbers used by RocksDB
  // anyway, without its data. Continuing from here would skip that batch
  // and acknowledge it (the primary counts the position a replica follows
  // from as held): an acknowledged write lost at the next failover. This
  // copy is asked to be replaced: the handshake names no history, so the
  // primary sends a full copy, taken without the operator's word (nothing
  // this replica holds is worth keeping over the primary's).
  const bool broken = *applied != UINT64_MAX && seq != *applied;
  if (broken) {
    LOG(ERROR) << "replication: this replica's log is at sequence " << seq
               << ", but the last batch it applied from " << primary
               << " ended at " << *applied
               << " (a failed write used sequence numbers without its data): "
                  "taking a full copy";
    MutexLock lock(&mu_);
    copy_consent_ = true;
  }
  std::vector<std::string> handshake = {
      "FENCEDKV.SYNC",
      st.history.empty() || broken ? "-" : st.history,
      options_.self_addr,
      std::to_string(st.max_epoch),
      std::to_string(st.log_epoch),
      std::to_string(seq),
      db_->GetFenceDomain().ToString(),
      FenceModeName(db_->GetFenceMode()),
      options_.sync ? "sync" : "nosync",
      node_id_};
  // The promotion this log's epoch was (manual mode: another server may
  // have taken the same number apart from it).
  const std::string log_id = PromotionIdOf(st.epochs, st.log_epoch);
  handshake.push_back(log_id.empty() ? "-" : log_id);
  // A full copy is checked against the size and sequence announced (a
  // primary of an older build refuses the word; asked again without it).
  handshake.push_back(kSizedCopyWord);
  auto ask = [&] {
    req.clear();
    AppendFrame(&req, handshake);
    Status sent = socket->SendAll(req, timeout);
    if (sent.ok()) sent = ReadReplyLine(socket.get(), &buf, &line, timeout);
    return sent;
  };
  s = ask();
  // A primary of an older build takes the handshake without the log's
  // promotion id, or without the node id either (its FENCEDKV.SYNC has a
  // fixed arity): asked again with one word less each time.
  while (s.ok() && handshake.size() > 9 &&
         (line.rfind("-ERR wrong number of arguments", 0) == 0 ||
          line.rfind("-ERR FENCEDKV.SYNC takes", 0) == 0)) {
    handshake.pop_back();
    s = ask();
  }
  if (!s.ok()) {
    return Status::IOError(
        "no handshake answer from " + primary + " (is it a fencedkv server?)",
        s.ToString());
  }
  if (line.rfind("-ERR unknown command", 0) == 0) {
    return Status::NotSupported(primary +
                                " is not a fencedkv server: it "
                                "does not know FENCEDKV.SYNC (" +
                                line.substr(1, 120) + ")");
  }
  if (!line.empty() && line[0] == '-') {
    return Status::InvalidArgument("the primary refused: " + line.substr(1));
  }
  const std::vector<std::string> w = SplitOn(line, ' ');
  const bool full = !w.empty() && w[0] == "+FULLSYNC";
  // +FULLSYNC epoch history epochs files [bytes seq]: the last two for a
  // replica that sent "sized", and then required (a copy of unannounced
  // size would be unbounded: a hostile peer could fill the disk). Only a
  // primary of an older build, asked again without the word, omits them.
  const bool sized = handshake.back() == kSizedCopyWord;
  uint64_t epoch = 0;
  EpochList epochs;
  CopyAnnounced announced;
  if (w.size() < 4 || (w[0] != "+CONTINUE" && !full) ||
      !ParseU64Text(w[1], &epoch) || !ParseEpochs(w[3], &epochs) ||
      (full && w.size() != (sized ? 7u : 5u)) ||
      (full && !ParseU64Text(w[4], &announced.files)) ||
      (full && w.size() == 7 &&
       (!ParseU64Text(w[5], &announced.bytes) ||
        !ParseU64Text(w[6], &announced.seq)))) {
    return Status::NotSupported(primary +
                                " is not a fencedkv server: it "
                                "answered '" +
                                line.substr(0, 120) + "'");
  }
  announced.sized = full && w.size() == 7;
  const std::string& history = w[2];
  // A primary continues only the history the handshake named (another
  // one, or none, gets a full copy). Anything else is not this replica's
  // primary (an impostor on its address, a broken peer): adopted, its
  // history was stored without a byte of data, and the real primary's
  // stream was then refused as another history's.
  const std::string& asked = handshake[1];
  if (!full && (asked == "-" || history != asked)) {
    return Status::NotSupported(
        primary + " answered +CONTINUE for history " + PrintableWord(history) +
        ", but this replica asked for " +
        (asked == "-" ? std::string("a full copy") : "history " + asked) +
        ": not a fencedkv primary continuing this replica's log; nothing "
        "was changed");
  }
  ReplState next;
  std::string why;
  if (!AdoptPrimaryState(st, history, epoch, epochs, etcd_mode(), &next,
                         &why)) {
    return Status::InvalidArgument("refusing the stream of epoch " +
                                   std::to_string(epoch) + " from " + primary +
                                   ": " + why);
  }
  FrameReader in(options_.max_frame_bytes);
  in.buffer()->append(buf);
  if (full && !etcd_mode()) {
    // Manual mode: a copy that would discard what this replica holds and
    // its primary does not (another history: the primary's data directory
    // was wiped or replaced; or this replica is ahead of it) is taken only
    // on the operator's word: a REPLICAOF (or a new --replicaof) since the
    // last sync. Taken silently, a primary restarted on an empty --db
    // wiped its replicas too, and then accepted tokens they had fenced
    // out. A replica merely behind the primary's log is copied as before.
    bool consent;
    {
      MutexLock lock(&mu_);
      consent = copy_consent_;
    }
    std::string discards;
    if (!consent &&
        CopyWouldDiscard(st, seq, history, epochs,
                         announced.sized ? announced.seq : UINT64_MAX,
                         &discards)) {
      const std::string why =
          "refusing a full copy from " + primary +
          " that would replace this replica's data: " + discards +
          ". Nothing was changed; this server stays a read-only replica. To "
          "take the copy (and lose what only this replica has): REPLICAOF " +
          HostPortWords(primary) +
          " again; to keep this data: REPLICAOF NO ONE (promote it) and make "
          "the other server its replica";
      {
        MutexLock lock(&mu_);
        refused_copy_ = why;
      }
      LOG(WARNING) << "replication: " << why;
      return Status::InvalidArgument(why);
    }
  }
  {
    MutexLock lock(&mu_);
    refused_copy_.clear();
  }
  if (full) {
    SetLink("sync", "");
    s = ReceiveFullSync(socket.get(), &in, next, announced, primary,
                        generation);
    if (!s.ok()) return s;
    {
      // Before this thread ends: a promotion or another REPLICAOF, which
      // join it first, see it and refuse (RestartPending).
      MutexLock lock(&mu_);
      restarting_on_copy_ = primary;
    }
    if (options_.restart) options_.restart(primary);
    return Status::Shutdown("restarting on the full copy");
  }
  {
    // Under mu_: SeeEpoch (the etcd thread) stores the file too, and may
    // have raised the highest epoch seen since `st` was read.
    MutexLock lock(&mu_);
    std::string why_not;
    if (!KeepSeenEpoch(state_, epoch, etcd_mode(), &next, &why_not)) {
      return Status::InvalidArgument("refusing the stream of epoch " +
                                     std::to_string(epoch) + " from " +
                                     primary + ": " + why_not);
    }
    s = next.Store(options_.db_path);
    if (!s.ok()) return s;
    state_ = next;
    link_state_ = "connected";
    link_error_.clear();
    last_io_ms_ = ReplNowMs();
    // Synced: the operator's word covered this sync, not later ones.
    copy_consent_ = false;
  }
  LOG(INFO) << "replication: following " << primary << " (epoch " << epoch
            << ") from sequence " << seq;
  WriteOptions wo;
  wo.sync = options_.sync;
  std::vector<std::string_view> words;
  *applied = seq;  // (the session continues from where the log is)
  uint64_t acked = 0;
  int64_t last_heard = ReplNowMs();
  std::string ack;
  const std::string epoch_text = std::to_string(epoch);
  while (!ReplicaStopping(generation)) {
    s = socket->ReadSome(in.buffer(), milliseconds(200), 1 << 20);
    if (!s.ok()) return s;
    {
      // etcd named a newer primary meanwhile: not one more batch of this
      // stream (its primary was deposed).
      MutexLock lock(&mu_);
      if (state_.max_epoch > epoch) {
        return Status::InvalidArgument(
            "epoch " + std::to_string(state_.max_epoch) +
            " began: the stream of epoch " + std::to_string(epoch) + " ends");
      }
    }
    const int64_t now = ReplNowMs();
    bool heard = false;
    while (in.Next(&words)) {
      heard = true;
      if (words[0] == "FENCEDKV.LOG" && words.size() == 4) {
        uint64_t first;
        if (words[1] != epoch_text || !ParseU64Text(words[2], &first)) {
          return Status::Corruption(
              "a log frame of another epoch or "
              "without a sequence");
        }
        s = db_->ApplyLogBatch(wo, first, words[3]);
        if (!s.ok()) return s;
        *applied = db_->GetLatestSequenceNumber();
      } else if (words[0] == "FENCEDKV.PING" && words.size() == 2) {
        uint64_t latest;
        if (ParseU64Text(words[1], &latest)) {
          MutexLock lock(&mu_);
          primary_latest_ = latest;
        }
      } else {
        return Status::Corruption("unexpected frame from the primary: " +
                                  Words(words, 0));
      }
    }
    if (!in.error().empty()) return FrameError(in);
    if (heard) {
      // Every frame is answered, pings too: the primary's liveness check.
      acked = UINT64_MAX;
      last_heard = now;
      MutexLock lock(&mu_);
      last_io_ms_ = now;
      primary_latest_ = std::max(primary_latest_, *applied);
    } else if (now - last_heard > options_.timeout_ms) {
      return Status::IOError("nothing from the primary for " +
                             std::to_string(options_.timeout_ms) + " ms");
    }
    if (*applied != acked) {
      ack.clear();
      AppendFrame(&ack, {"FENCEDKV.ACK", std::to_string(*applied)});
      s = socket->SendAll(ack, timeout);
      if (!s.ok()) return s;
      acked = *applied;
    }
  }
  return Status::OK();
}

Status Replication::FrameError(const FrameReader& in) const {
  if (!in.over_limit()) return Status::Corruption(in.error());
  // The primary's batches are bounded by its own request and MULTI
  // limits; this replica's frame limit comes from its own.
  return Status::Corruption(
      in.error() + ": over this replica's frame limit of " +
      std::to_string(options_.max_frame_bytes) +
      " bytes (--max_request_bytes + --max_multi_bytes + 20 MiB): start the "
      "replica with --max_request_bytes and --max_multi_bytes at least the "
      "primary's");
}

Status Replication::ReceiveFullSync(ReplSocket* socket, FrameReader* in,
                                    const ReplState& adopted,
                                    const CopyAnnounced& announced,
                                    const std::string& primary,
                                    uint64_t generation) {
  const std::string tmp = FullSyncTmpDir(options_.db_path);
  const std::string ready = FullSyncDir(options_.db_path);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::remove_all(ready, ec);
  // A copy abandoned for any reason (refused, cut off, REPLICAOF NO ONE)
  // is deleted at once: it may be as large as the primary's database, and
  // nothing else would remove it before the next sync or restart.
  bool keep_tmp = false;
  struct DropTmp {
    const std::string& dir;
    const bool& keep;
    ~DropTmp() {
      std::error_code ignored;
      if (!keep) fs::remove_all(dir, ignored);
    }
  } drop_tmp{tmp, keep_tmp};
  auto refuse = [&](const std::string& why) {
    return Status::Corruption("refusing the full copy from " + primary + ": " +
                              why + " (this server's database is unchanged)");
  };
  if (announced.files > kMaxCopyFiles) {
    return refuse("it announces " + std::to_string(announced.files) +
                  " files, more than the " + std::to_string(kMaxCopyFiles) +
                  " a copy may hold");
  }
  fs::create_directories(tmp, ec);
  if (ec) return Status::IOError("cannot create " + tmp, ec.message());
  if (announced.sized) {
    const fs::space_info space = fs::space(tmp, ec);
    if (!ec && space.available < announced.bytes) {
      return refuse("it is " + std::to_string(announced.bytes) +
                    " bytes and the file system of " + tmp + " has " +
                    std::to_string(space.available) + " free");
    }
  }
  std::vector<std::string_view> words;
  std::ofstream out;
  std::string current;
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;  // names, for "sent twice"
  uint64_t bytes = 0;
  int64_t last_heard = ReplNowMs();
  for (;;) {
    if (!in->Next(&words)) {
      if (!in->error().empty()) return FrameError(*in);
      // Only bytes that came now count: part of a frame that waits in the
      // buffer for the rest is no sign of life (a primary that stopped in
      // the middle of a frame held the copy, and its disk, for good).
      const size_t before = in->buffered();
      Status s = socket->ReadSome(in->buffer(), milliseconds(200), 1 << 20);
      if (!s.ok()) return s;
      if (in->buffered() != before) last_heard = ReplNowMs();
      if (ReplNowMs() - last_heard > options_.timeout_ms) {
        return Status::IOError("the full sync stalled: nothing from " +
                               primary + " for " +
                               std::to_string(options_.timeout_ms) + " ms");
      }
      continue;
    }
    if (words[0] == "FENCEDKV.FILE" && words.size() == 3) {
      const std::string name(words[1]);
      if (!IsCopyFileName(name)) {
        return refuse("a file named '" + PrintableWord(name) + "'");
      }
      if (name != current) {
        if (out.is_open()) out.close();
        if (!seen.insert(name).second) {
          return refuse("file " + name + " sent twice");
        }
        // The copy is bounded by what +FULLSYNC announced: no more files,
        // and (a primary of this build) no more bytes.
        if (names.size() >= announced.files) {
          return refuse("more files than the " +
                        std::to_string(announced.files) + " announced");
        }
        out.open((fs::path(tmp) / name).string(),
                 std::ios::binary | std::ios::trunc);
        current = name;
        names.push_back(name);
      }
      bytes += words[2].size();
      if (announced.sized && bytes > announced.bytes) {
        return refuse("more than the " + std::to_string(announced.bytes) +
                      " bytes announced");
      }
      out.write(words[2].data(), static_cast<std::streamsize>(words[2].size()));
      if (!out) {
        std::string what = "cannot write ";
        what.append(tmp).append("/").append(name);
        return Status::IOError(what);
      }
    } else if (words[0] == "FENCEDKV.FILESDONE" && words.size() == 2) {
      if (words[1] != std::to_string(names.size()) ||
          names.size() != announced.files) {
        return refuse(std::to_string(names.size()) + " files received, " +
                      PrintableWord(words[1]) + " sent, " +
                      std::to_string(announced.files) + " announced");
      }
      break;
    } else {
      return refuse("unexpected frame " + Words(words, 0));
    }
  }
  if (out.is_open()) out.close();
  if (!out) return Status::IOError("cannot write " + tmp + "/" + current);
  if (announced.sized && bytes != announced.bytes) {
    return refuse(std::to_string(bytes) + " bytes received, " +
                  std::to_string(announced.bytes) + " announced");
  }
  for (const auto& name : names) {
    Status s = SyncPath((fs::path(tmp) / name).string(), /*directory=*/false);
    if (!s.ok()) return s;
  }
  {
    // What the restart will run on must open as a fencedkv database with
    // this server's fence configuration, holding what the primary had
    // when it answered. (Before, an empty or damaged copy replaced the
    // database, and the server could not start again.)
    // (Open in this block only: closed before the copy is renamed.)
    std::unique_ptr<ReadOnlyStore> store;
    Status s = ReadOnlyStore::OpenChecked(tmp, &store);
    if (!s.ok()) return refuse("it does not open: " + s.ToString());
    const uint64_t copy_seq = store->db()->GetLatestSequenceNumber();
    const StoreConfig& config = store->config();
    const std::string domain = db_->GetFenceDomain().ToString();
    const std::string mode = FenceModeName(db_->GetFenceMode());
    if (config.spec.ToString() != domain ||
        FenceModeName(config.mode) != mode) {
      return refuse(
          "its fence configuration is fence_domain=" + config.spec.ToString() +
          " fence_mode=" + FenceModeName(config.mode) + ", this server's " +
          domain + " " + mode);
    }
    if (announced.sized && copy_seq < announced.seq) {
      return refuse("it ends at sequence " + std::to_string(copy_seq) +
                    ", before the " + std::to_string(announced.seq) +
                    " announced");
    }
    // A damaged table is the primary's own file (a checkpoint links its
    // tables, it reads none): refused, and asked for again only every
    // kRefusedCopyRetryMs, each try costing the primary a whole copy.
    s = VerifyCopyTables(*store, [&] { return ReplicaStopping(generation); });
    if (!s.ok() && ReplicaStopping(generation)) return s;
    if (!s.ok()) {
      {
        MutexLock lock(&mu_);
        copy_damaged_ = true;
      }
      return refuse("a table the primary sent is damaged (" + s.ToString() +
                    "): the primary's own file needs repair (fencedkv-admin "
                    "check on its database names every damaged file)");
    }
  }
  ReplState keep = adopted;
  Status s;
  {
    // The highest epoch seen may have risen during the copy (SeeEpoch):
    // merged and stored under the lock SeeEpoch takes.
    MutexLock lock(&mu_);
    std::string why_not;
    if (!KeepSeenEpoch(state_, adopted.log_epoch, etcd_mode(), &keep,
                       &why_not)) {
      return Status::InvalidArgument("dropping the full copy: " + why_not);
    }
    s = keep.Store(tmp);  // also syncs the directory
  }
  if (!s.ok()) return s;
  s = RenameDurably(tmp, ready);
  if (!s.ok()) return s;
  keep_tmp = true;  // (renamed: nothing left under tmp)
  LOG(INFO) << "replication: full copy received (" << names.size() << " files, "
            << bytes << " bytes) in " << ready << "; restarting on it";
  return Status::OK();
}

// ---------------------------------------------------------------- clients

uint64_t Replication::WaitReplicas(size_t n, int64_t timeout_ms,
                                   CommitTracker::CountDone done) {
  const uint64_t seq = db_->GetLatestSequenceNumber();
  bool stopped;
  {
    MutexLock lock(&mu_);
    stopped = stopped_;
  }
  // Once stopped nothing ticks: answer at once. A timeout past the end of
  // the clock is no timeout (now + timeout would overflow).
  const int64_t now = ReplNowMs();
  const int64_t deadline =
      stopped ? 1
      : timeout_ms > 0 && timeout_ms < std::numeric_limits<int64_t>::max() - now
          ? now + timeout_ms
          : 0;
  const uint64_t id = tracker_.WaitReplicas(seq, n, deadline, std::move(done));
  {
    // A quiet ticker (100 ms) wakes for this WAIT's timeout; a ticking one
    // (10 ms) is left alone: WAITs at any rate cost no extra ticks, and the
    // etcd thread (on cv_) is not woken by them.
    MutexLock lock(&mu_);
    if (ticker_quiet_) {
      tick_soon_ = true;
      tick_cv_.notify_all();
    }
  }
  return id;
}

void Replication::AppendInfo(std::string* out) {
  auto line = [out](const std::string& name, const std::string& value) {
    out->append(name + ":" + value + "\r\n");
  };
  const uint64_t latest = db_->GetLatestSequenceNumber();
  const auto replicas = tracker_.Replicas(latest);
  // The backlog the links send from (the engine's log tail): "name: value"
  // lines.
  std::string tail;
  if (!db_->GetProperty("fencedkv.log-tail", &tail)) tail.clear();
  tail.insert(0, "\n");
  auto tail_stat = [&tail](const std::string& name) {
    const std::string key = "\n" + name + ": ";
    const size_t at = tail.find(key);
    if (at == std::string::npos) return std::string("0");
    const size_t from = at + key.size();
    return tail.substr(from, tail.find('\n', from) - from);
  };
  MutexLock lock(&mu_);
  const bool replica = read_only_.load();
  line("role", replica ? "slave" : "master");
  line("repl_history", state_.history.empty() ? "-" : state_.history);
  line("repl_epoch", std::to_string(replica ? state_.log_epoch : epoch_));
  line("repl_max_epoch", std::to_string(state_.max_epoch));
  line("repl_epochs",
       state_.epochs.empty() ? "-" : FormatEpochs(state_.epochs));
  line("min_insync_replicas", std::to_string(tracker_.min_insync_replicas()));
  if (etcd_mode()) {
    line("shard", options_.shard);
    line("etcd_last_error", etcd_error_.empty() ? "-" : etcd_error_);
    if (have_view_) {
      line("shard_epoch", std::to_string(view_.epoch));
      line("shard_primary", view_.primary);
      std::string isr;
      for (const auto& a : view_.isr) isr += (isr.empty() ? "" : ",") + a;
      line("shard_isr", isr);
    }
  }
  if (replica) {
    std::string host;
    int port = 0;
    SplitHostPort(primary_, &host, &port);
    line("master_host", host);
    line("master_port", std::to_string(port));
    line("master_link_status", link_state_ == "connected" ? "up" : "down");
    line("master_link_state", link_state_);
    line("master_last_io_seconds_ago",
         last_io_ms_ == 0 ? "-1"
                          : std::to_string((ReplNowMs() - last_io_ms_) / 1000));
    line("master_sync_in_progress", link_state_ == "sync" ? "1" : "0");
    line("master_last_error", link_error_.empty() ? "-" : link_error_);
    line("slave_repl_offset", std::to_string(latest));
    line("master_repl_offset",
         std::to_string(std::max(primary_latest_, latest)));
    line("slave_read_only", "1");
  } else {
    line("master_repl_offset", std::to_string(latest));
    // The set the commit rule uses: in etcd mode, the record's.
    std::string isr = options_.self_addr;
    if (etcd_mode()) {
      isr.clear();
      for (const auto& a : view_.isr) isr += (isr.empty() ? "" : ",") + a;
    } else {
      for (const auto& a : isr_) isr += "," + a;
    }
    line("isr", isr);
    line("isr_size", std::to_string(tracker_.isr_size()));
    size_t connected = 0;
    for (const auto& r : replicas) connected += r.connected ? 1 : 0;
    line("connected_slaves", std::to_string(connected));
    size_t i = 0;
    for (const auto& r : replicas) {
      if (!r.connected) continue;
      std::string host;
      int port = 0;
      SplitHostPort(r.addr, &host, &port);
      line("slave" + std::to_string(i++),
           "ip=" + host + ",port=" + std::to_string(port) +
               ",state=" + r.state + ",offset=" + std::to_string(r.acked) +
               ",lag=" + std::to_string(r.lag_ms / 1000) +
               ",lag_ms=" + std::to_string(r.lag_ms));
    }
    // Redis' names: whether the backlog holds anything, its capacity and
    // what it holds (bytes); then its batches and how many batches the
    // links took from it or read from the WAL (fencedkv's).
    line("repl_backlog_active", tail_stat("batches") == "0" ? "0" : "1");
    line("repl_backlog_size", tail_stat("capacity"));
    line("repl_backlog_histlen", tail_stat("bytes"));
    line("repl_backlog_batches", tail_stat("batches"));
    line("repl_backlog_reads", tail_stat("found"));
    line("repl_backlog_wal_reads", tail_stat("missed"));
  }
}

std::string Replication::ReadOnlyLine() {
  std::string line = tracker_.not_primary_error();
  if (line.rfind("READONLY", 0) == 0) return line;
  return "READONLY You can't write against a read only replica.";
}

ReplicationGauges Replication::Gauges() {
  ReplicationGauges g;
  g.applied_seq = db_->GetLatestSequenceNumber();
  const auto replicas = tracker_.Replicas(g.applied_seq);
  for (const auto& r : replicas) {
    if (!r.connected) continue;
    ++g.replicas;
    g.max_lag_ms = std::max(g.max_lag_ms, r.lag_ms);
  }
  MutexLock lock(&mu_);
  g.primary = !read_only_.load();
  g.epoch = g.primary ? epoch_ : state_.log_epoch;
  g.isr_size = g.primary ? tracker_.isr_size() : 0;
  return g;
}

void Replication::AppendRole(std::string* out) {
  const uint64_t latest = db_->GetLatestSequenceNumber();
  if (!read_only_.load()) {
    const auto replicas = tracker_.Replicas(latest);
    size_t connected = 0;
    for (const auto& r : replicas) connected += r.connected ? 1 : 0;
    resp::ArrayHeader(out, 3);
    resp::Bulk(out, "master");
    resp::Integer(out, static_cast<int64_t>(latest));
    resp::ArrayHeader(out, connected);
    for (const auto& r : replicas) {
      if (!r.connected) continue;
      std::string host;
      int port = 0;
      SplitHostPort(r.addr, &host, &port);
      resp::ArrayHeader(out, 3);
      resp::Bulk(out, host);
      resp::Bulk(out, std::to_string(port));
      resp::Bulk(out, std::to_string(r.acked));
    }
    return;
  }
  MutexLock lock(&mu_);
  std::string host;
  int port = 0;
  SplitHostPort(primary_, &host, &port);
  resp::ArrayHeader(out, 5);
  resp::Bulk(out, "slave");
  resp::Bulk(out, host);
  resp::Integer(out, port);
  resp::Bulk(out, link_state_);
  resp::Integer(out, static_cast<int64_t>(latest));
}

}  // namespace server
}  // namespace fencedkv
