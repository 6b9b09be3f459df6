// Copyright (c) fencedkv authors.
//
// The state replication keeps beside the data (docs/replication.md):
//
//  - ReplState: the REPLICATION file in the database directory: the highest
//    epoch this server has seen (a replica refuses any stream from a lower
//    one), the epoch of the log it holds (the epoch of the primary whose
//    batches it applied last: the truncation rule needs it), and the epochs
//    it knows of with the sequence each began after. Written with a
//    temporary file, fsync, rename and an fsync of the directory.
//  - ShardRecord: etcd's record of a shard, <prefix>/shards/<shard>.
//  - DecideSync: the primary's answer to a replica's FENCEDKV.SYNC, from the
//    epochs: continue the stream, or a full copy because the replica's log
//    has a suffix no ISR ever had (Kafka's leader-epoch truncation).
//
// Pure data and files; thread-compatible.

#ifndef FENCEDKV_SERVER_REPL_STATE_H_
#define FENCEDKV_SERVER_REPL_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fencedkv/status.h"

namespace fencedkv {
namespace server {

// One epoch: its number, the sequence it began after (its primary's latest
// sequence when it took over) and, in manual mode, the promotion's own id.
// Manual mode numbers an epoch by the promoted server's highest seen + 1,
// so two servers promoted apart from one epoch take the same number: the
// id (16 random hex digits, made at the promotion) tells the two apart.
// etcd mode numbers epochs by transaction, one number per promotion, and
// leaves it empty (as does an older build): empty matches any id.
struct EpochStart {
  uint64_t epoch = 0;
  uint64_t start = 0;
  std::string id;
  bool operator==(const EpochStart& o) const {
    return epoch == o.epoch && start == o.start && id == o.id;
  }
};
using EpochList = std::vector<EpochStart>;

// At most this many epochs are kept (the oldest go): a server whose log
// epoch is older than the list gets a full copy.
constexpr size_t kMaxEpochs = 32;

// Appends (epoch, start, id), dropping the oldest past kMaxEpochs. `epoch`
// must be above every epoch in the list.
void AppendEpoch(EpochList* list, uint64_t epoch, uint64_t start,
                 std::string id);
// "5:1200,6:4410:9f1c0a3b5e7d2468" (an id where there is one) and back.
// False on anything else (also on epochs that do not increase, or an id
// that is not 16 lowercase hex digits).
std::string FormatEpochs(const EpochList& list);
bool ParseEpochs(std::string_view text, EpochList* list);
// A new promotion id (16 random lowercase hex digits).
std::string NewPromotionId();
bool IsPromotionId(std::string_view text);
// The id `list` holds for `epoch`; empty if none (or not listed).
std::string PromotionIdOf(const EpochList& list, uint64_t epoch);
// Drops every id (etcd mode keeps none; an older build cannot parse them).
void ClearPromotionIds(EpochList* list);

struct ReplState {
  // The history this database belongs to: a random id a primary creates
  // the first time it serves a replica, which its replicas adopt with its
  // data. Sequence numbers of two different histories say nothing about
  // each other: a replica of another history gets a full copy. Empty: none.
  std::string history;
  uint64_t max_epoch = 0;  // the highest epoch seen
  uint64_t log_epoch = 0;  // the epoch of the last batches applied or written
  EpochList epochs;        // what this server knows of the shard's epochs
  // Manual mode: the primary this server follows (host:port, set by
  // --replicaof or REPLICAOF host port, cleared by REPLICAOF NO ONE), so
  // that a restart without --replicaof follows it again rather than
  // starting as a second primary. Empty: a primary. Unused in etcd mode.
  std::string follow;
  // etcd mode: the shard this database is a member of, kept from the first
  // start with --shard on. A server on it refuses to start without --shard
  // (it would promote itself to its highest seen epoch + 1, the number
  // etcd gives the shard's next primary, and take writes beside it) or
  // with another shard. `fencedkv-admin replication --leave_shard` clears
  // it. Empty: none (manual mode, or a state from before it was kept).
  std::string shard;

  static constexpr const char* kFileName = "REPLICATION";

  // Reads dir/REPLICATION. A missing file is OK with an empty state (a
  // server that never replicated). Corruption if it is not one.
  static Status Load(const std::string& dir, ReplState* state);
  // Replaces dir/REPLICATION atomically and durably.
  Status Store(const std::string& dir) const;
};

// A replica's state once it takes the stream (or full copy) of a primary
// that answered with `history`, `epoch` and `epochs`: true and *next, or
// false and *why if it must refuse it (a deposed primary: its epoch is below
// the highest this replica has seen). `shard_epochs` (etcd mode): epochs are
// the shard's, numbered by etcd's record across histories (a copy of
// another history included), so the highest seen never decreases and a
// lower epoch is refused whatever its history. Without it (manual mode)
// each history numbers its own epochs from 1: a primary of another history
// is taken with its own epoch.
bool AdoptPrimaryState(const ReplState& mine, const std::string& history,
                       uint64_t epoch, const EpochList& epochs,
                       bool shard_epochs, ReplState* next, std::string* why);

// etcd mode (`shard_epochs`): `next` was made by AdoptPrimaryState from a
// snapshot taken before the handshake's round trip, during which the etcd
// thread may have seen a higher epoch (`current`, this server's state now).
// False and *why if the stream's epoch is now below the highest seen (its
// primary was deposed meanwhile); else true, with next->max_epoch at least
// the current one, so storing `next` never lowers it. Manual mode: true,
// nothing changed (only the replica thread changes the state there).
bool KeepSeenEpoch(const ReplState& current, uint64_t stream_epoch,
                   bool shard_epochs, ReplState* next, std::string* why);

// <prefix>/shards/<shard> in etcd.
struct ShardRecord {
  uint64_t epoch = 0;
  std::string primary;           // host:port
  std::vector<std::string> isr;  // host:port, the primary included
  EpochList epochs;
  std::string history;  // the shard's history id (ReplState::history)
  // The primary's etcd lease: the primary is alive while its member key
  // exists with this lease.
  int64_t lease = 0;
  // host:port -> node id (NODE_ID, kept in the data directory) of the ISR
  // members, the primary included: the data that holds every acknowledged
  // write is that node's. A server back under a member's address with
  // another node id (its data wiped or replaced) is not that member. Empty
  // in a record of an older build.
  std::map<std::string, std::string> nodes;

  std::string ToJson() const;
  // InvalidArgument naming what is wrong.
  static Status Parse(std::string_view json, ShardRecord* record);
  bool InIsr(std::string_view addr) const;
  // False if the record names another node at `addr` than `node`; true if
  // it names `node` or none (a record of an older build).
  bool NodeMatches(const std::string& addr, std::string_view node) const;
};

// A member's liveness key, <prefix>/members/<shard>/<addr>, attached to its
// etcd lease.
struct MemberRecord {
  uint64_t epoch = 0;
  uint64_t seq = 0;
  std::string role;  // "primary" | "replica"
  std::string node;  // the writer's node id (LoadOrCreateNodeId); may be
                     // empty in a record of an older build
  std::string ToJson() const;
  static bool Parse(std::string_view json, MemberRecord* member);
};

struct SyncDecision {
  bool full_sync = false;
  std::string reason;  // why a full copy (for the logs)
};

// fsyncs a file or (directory) a directory.
Status SyncPath(const std::string& path, bool directory);

// A new random history id (32 hex digits).
std::string NewHistoryId();
// Whether `text` is a history id as NewHistoryId makes them (a primary's
// answer is checked: the id is printed in INFO and stored on its own line).
bool IsHistoryId(std::string_view text);
// The highest valid epoch: a manual promotion takes max_epoch + 1, which
// must neither wrap to 0 ("never replicated") nor reach 2^64-1 (invalid in
// a shard record too).
constexpr uint64_t kMaxEpoch = UINT64_MAX - 1;

// This server's node id: dir/NODE_ID, 32 random hex digits made the first
// time and kept (a full copy carries it over, Replication::AdoptFullSync).
// In etcd mode it tells this server's member key, left by its previous run,
// from another server's under the same name. Corruption if the file holds
// anything else, IOError if it cannot be read (never replaced). A copy of
// a whole database directory (cp -r, a disk image) copies the id: delete
// NODE_ID in the copy, or two servers count as one node.
Status LoadOrCreateNodeId(const std::string& dir, std::string* id);
// Reads dir/NODE_ID: OK with "" if there is none yet; Corruption or IOError
// as LoadOrCreateNodeId. Creates nothing.
Status ReadNodeId(const std::string& dir, std::string* id);
// Puts `id` (IsNodeId, else InvalidArgument) in dir/NODE_ID atomically and
// durably, replacing any: fencedkv-admin's `replication --set_node_id`, for
// a member whose directory was moved without its NODE_ID
// (docs/replication.md, Coordination). The caller holds the directory's
// LOCK (no server runs on it).
Status StoreNodeId(const std::string& dir, const std::string& id);
// 32 lowercase hex digits.
bool IsNodeId(std::string_view text);
constexpr const char* kNodeIdFile = "NODE_ID";

// What a primary of `epoch` whose epochs are `epochs` (its own the last)
// answers a replica whose log ends at `replica_seq` with batches of
// `replica_log_epoch` (0: a server that never replicated), the promotion
// `*replica_log_id` ("": a promotion without one; null: ids are not
// compared, as in etcd mode or for a replica of an older build):
//  - a full copy if the replica never replicated, its log epoch is not in
//    the list (too old), the list has another promotion by that number
//    (another id, or an id on one side only: the two were promoted apart;
//    in manual mode an id travels with its epoch through every handshake),
//    it is ahead of the primary, or the epoch after its log epoch began
//    before replica_seq (the replica holds batches of a deposed primary
//    that no later primary had: never acknowledged);
//  - else continue from replica_seq (whether the primary's WAL still holds
//    replica_seq + 1 is the log reader's to say).
SyncDecision DecideSync(const EpochList& epochs, uint64_t primary_latest_seq,
                        uint64_t replica_log_epoch, uint64_t replica_seq,
                        const std::string* replica_log_id);

// Manual mode, on a replica whose primary answered with a full copy (of
// `history`, whose epochs are `epochs` and latest sequence
// `primary_latest`, UINT64_MAX if it did not say): whether taking it would
// discard what the replica (`mine`, its log ending at `replica_seq`) holds
// and the primary does not. True and *why if the primary is of another
// history (its data directory was wiped or replaced: the replica's data is
// not an older state of the primary's), or its epochs do not contain the
// replica's position (DecideSync would copy: the replica is ahead of it,
// or holds batches of another promotion or of a deposed primary). False if
// the replica holds no history yet, or merely lags behind what the
// primary's log still has (the copy loses nothing).
bool CopyWouldDiscard(const ReplState& mine, uint64_t replica_seq,
                      const std::string& history, const EpochList& epochs,
                      uint64_t primary_latest, std::string* why);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_REPL_STATE_H_
