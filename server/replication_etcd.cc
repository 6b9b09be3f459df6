// Copyright (c) fencedkv authors.
//
// Replication's etcd mode (docs/replication.md "Coordination"): one thread
// per server that keeps its etcd lease and member key, reads the shard's
// record and acts on it: bootstrap, follow, take over, step down, and (as
// the primary) keep the record's ISR. Every change of the record is a txn
// comparing the mod revision it read.

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include <glog/logging.h>

#include "etcd_client.h"
#include "repl_stream.h"
#include "replication.h"

namespace fencedkv {
namespace server {

namespace {

using std::chrono::milliseconds;

constexpr int64_t kPollMs = 100;       // how often the record is read
constexpr int64_t kMemberPutMs = 500;  // how often the member key is put

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Why a record that is missing, or below an epoch already seen, is not acted
// on (docs/replication.md, "When etcd lost the shard record"): `what` says
// what was found and what was seen.
std::string UntrustedRecordError(const std::string& record_key,
                                 const std::string& what) {
  return "the shard record " + record_key + " " + what +
         ": etcd lost its data (restarted with an empty data directory, "
         "restored from an older snapshot) or the record was deleted or "
         "edited. No server creates it again or acts on it: a primary "
         "stops taking writes, replicas keep serving reads. Recreate the "
         "record by hand at an epoch above every server's repl_max_epoch "
         "(docs/replication.md, \"When etcd lost the shard record\")";
}

}  // namespace

bool Replication::ShardView(
    const std::string& shard, ShardRecord* record,
    std::vector<std::pair<std::string, std::string>>* members) {
  MutexLock lock(&mu_);
  if (!etcd_mode() || shard != options_.shard || !have_view_) return false;
  if (ReplNowMs() - view_ms_ > options_.etcd_lease_ttl_ms) return false;
  *record = view_;
  *members = view_members_;
  return true;
}

void Replication::NoteShardMember() {
  MutexLock lock(&mu_);
  if (state_.shard == options_.shard) return;
  ReplState next = state_;
  next.shard = options_.shard;
  Status s = next.Store(options_.db_path);
  if (!s.ok()) {
    LOG(ERROR) << "replication: cannot record the membership of shard "
               << options_.shard << ": " << s.ToString();
    return;
  }
  state_ = next;
}

void Replication::SeeEpoch(uint64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch <= state_.max_epoch) return;
  ReplState next = state_;
  next.max_epoch = epoch;
  Status s = next.Store(options_.db_path);
  if (!s.ok()) {
    LOG(ERROR) << "replication: cannot persist epoch " << epoch << ": "
               << s.ToString();
    return;
  }
  state_ = next;
}

void Replication::SetLeaseDeadline(int64_t deadline_ms) {
  lease_deadline_ms_.store(deadline_ms, std::memory_order_relaxed);
  tracker_.SetLeaseDeadline(deadline_ms);
}

void Replication::StepDown(const std::string& why) {
  if (read_only_.load()) return;
  LOG(WARNING) << "replication: stepping down: " << why;
  read_only_.store(true);
  tracker_.SetPrimary(
      false, "READONLY this server is no longer the primary (" + why + ")");
  db_->SetFollowing(true);  // (see BecomeReplica)
  MutexLock role(&role_mu_);
  leases_->Close();
  StopLinks();
}

void Replication::Follow(const std::string& primary) {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    if (read_only_.load() && primary_ == primary) return;  // already
  }
  if (!read_only_.load()) StepDown("the record names " + primary);
  MutexLock role(&role_mu_);
  // etcd mode keeps nothing; Busy only while a full copy waits for the
  // restart, which then follows etcd's record afresh.
  BecomeReplica(primary);
}

void Replication::EtcdLoop() {
  EtcdClient::Options eo;
  eo.endpoints = options_.etcd_endpoints;
  eo.timeout =
      milliseconds(std::max<int64_t>(200, options_.etcd_lease_ttl_ms / 4));
  EtcdClient etcd(eo);
  const std::string record_key =
      options_.etcd_prefix + "/shards/" + options_.shard;
  const std::string members_prefix =
      options_.etcd_prefix + "/members/" + options_.shard + "/";
  const std::string member_key = members_prefix + options_.self_addr;
  const std::string me = options_.self_addr;
  int64_t lease = 0;
  int64_t lease_deadline = 0;  // ReplNowMs when it may have expired
  int64_t last_keepalive = 0, last_member_put = 0;
  // Another server holds member_key (name_held), for good if it is a
  // known other node (shut_out: this run never takes part).
  bool name_held = false, shut_out = false;
  // The etcd lease of another node's key under this server's name that was
  // found to be this server's own previous run (its address leads here):
  // waited out, not probed again.
  std::optional<int64_t> own_previous_lease;
  int64_t primary_dead_since = 0;
  // A takeover that could not make this server the primary (it cannot
  // write its replication state or its database: a full or lost disk),
  // whether it found so before its txn or after, is not tried again before
  // takeover_not_before, each failure doubling the wait (1 s to 10 s; a
  // live primary starts it over), and INFO's etcd_last_error says why
  // meanwhile. Each try past the txn raises the record's epoch: a survivor
  // on a full disk raised it ten times a second, and nothing it showed
  // named the disk.
  int64_t takeover_not_before = 0;
  int64_t takeover_backoff_ms = 0;
  std::string takeover_error;
  auto takeover_failed = [&](const std::string& why) {
    takeover_backoff_ms = std::min<int64_t>(
        10000, std::max<int64_t>(1000, 2 * takeover_backoff_ms));
    takeover_not_before = ReplNowMs() + takeover_backoff_ms;
    takeover_error = why + "; next takeover attempt in " +
                     std::to_string(takeover_backoff_ms) + " ms";
    LOG(ERROR) << "replication: " << takeover_error;
    MutexLock lock(&mu_);
    etcd_error_ = takeover_error;
  };
  // Since when a server that has seen no epoch has found the record
  // missing (0: it has not): it creates it only after a TTL of that, by
  // which the members of an etcd that lost its data have registered again
  // (with the epochs they have seen).
  int64_t missing_since = 0;
  // The last refusal of the record logged (logged once, not every poll).
  std::string refused;
  // The record is not trusted (missing, or below an epoch seen): no role
  // from it; a primary stops taking writes, as on losing its etcd lease.
  auto refuse = [&](const std::string& why, bool step_down) {
    {
      MutexLock lock(&mu_);
      etcd_error_ = why;
      have_view_ = false;  // SENTINEL names no primary
    }
    if (why != refused) {
      LOG(ERROR) << "replication: " << why;
      refused = why;
    }
    if (step_down && !read_only_.load()) {
      StepDown("the shard record is missing or behind this server");
    }
  };
  // Replicas joining the record's ISR, each with its floor: the latest
  // sequence once the replica was required (every write acknowledged
  // without it is at or below). It enters the record only once it has
  // acknowledged its floor, so an ISR member never lacks an acknowledged
  // write (Kafka's rule: a follower joins once it has the high watermark).
  std::map<std::string, uint64_t> join_floor;
  auto fail = [this](const std::string& what, const Status& s) {
    MutexLock lock(&mu_);
    etcd_error_ = what + ": " + s.ToString();
  };
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopped_) break;
    }
    const int64_t now = ReplNowMs();
    // 1. The lease: this server's liveness.
    if (lease == 0) {
      milliseconds granted{0};
      Status s = etcd.LeaseGrant(milliseconds(options_.etcd_lease_ttl_ms),
                                 &lease, &granted);
      if (!s.ok()) {
        lease = 0;
        fail("lease grant", s);
      } else {
        lease_deadline = now + options_.etcd_lease_ttl_ms;
        last_keepalive = now;
        last_member_put = 0;
      }
    } else if (now - last_keepalive >= options_.etcd_lease_ttl_ms / 3) {
      milliseconds ttl{0};
      Status s = etcd.LeaseKeepAlive(lease, &ttl);
      if (s.ok()) {
        // The lease runs ttl from when the keep-alive was sent, at least.
        lease_deadline =
            now + std::min<int64_t>(ttl.count(), options_.etcd_lease_ttl_ms);
        last_keepalive = now;
      } else if (s.IsNotFound()) {
        lease = 0;  // expired: our member key is gone
        StepDown("the etcd lease expired");
        fail("lease keep-alive", s);
      } else {
        fail("lease keep-alive", s);
      }
    }
    if (!read_only_.load()) {
      SetLeaseDeadline(lease_deadline);
      // (Not `now`: the calls above may have taken their timeouts.)
      if (ReplNowMs() >= lease_deadline)
        StepDown("the etcd lease could not be renewed");
    }
    // 2. The member key, with what ranks candidates (never again, once
    // another node was seen holding the name: not even to create it when
    // it is gone, which is when its owner restarts).
    if (lease != 0 && !shut_out && now - last_member_put >= kMemberPutMs) {
      MemberRecord m;
      {
        MutexLock lock(&mu_);
        m.epoch = state_.max_epoch;
      }
      m.seq = db_->GetLatestSequenceNumber();
      m.role = read_only_.load() ? "replica" : "primary";
      m.node = node_id_;
      // The name is this server's only if no other server holds it: two
      // servers announcing one address would take each other's member key,
      // place in the ISR and acknowledgements. The key is created if
      // absent; an existing one is taken over only if it is this run's or
      // this node's previous run's (same node id, an older lease), and only
      // if unchanged since it was read.
      bool created = false;
      std::vector<EtcdKv> held;
      Status s = etcd.Txn({EtcdCompare::Absent(member_key)},
                          {EtcdOp::Put(member_key, m.ToJson(), lease)},
                          {EtcdOp::Get(member_key)}, &created, &held);
      if (s.ok() && !created) {
        MemberRecord other;
        const bool known_node = !held.empty() &&
                                MemberRecord::Parse(held[0].value, &other) &&
                                IsNodeId(other.node);
        if (held.empty()) {
          s = Status::IOError("the member key vanished while read: retrying");
        } else if (held[0].lease == lease ||
                   (known_node && other.node == node_id_)) {
          bool replaced = false;
          s = etcd.Txn(
              {EtcdCompare::ModRevisionIs(member_key, held[0].mod_revision)},
              {EtcdOp::Put(member_key, m.ToJson(), lease)}, {}, &replaced);
          if (s.ok() && !replaced) {
            s = Status::IOError(
                "the member key changed while taken over: "
                "retrying");
          }
        } else if (known_node) {
          // Another node id under this server's name. If the name leads to
          // this server, no other server can be serving there: the key is
          // this server's previous run with its data directory replaced (a
          // wiped member restarted within a TTL), or a server announcing
          // an address not its own. It is left to its lease (the replaced
          // run's ends within a TTL), then the name is this server's, as a
          // new node (docs/replication.md, Coordination).
          AddressReach reach = AddressReach::kElsewhere;
          if (own_previous_lease == held[0].lease) {
            reach = AddressReach::kThisServer;
          } else if (options_.reaches_self) {
            reach = options_.reaches_self(me);
          }
          if (reach == AddressReach::kThisServer) {
            own_previous_lease = held[0].lease;
            s = Status::Busy("the name " + me + " is held by node " +
                             other.node +
                             " under another etcd lease, but it leads to "
                             "this server: that key is this server's "
                             "previous run (its data directory replaced) "
                             "or a server announcing an address not its "
                             "own; waiting for its lease to end");
          } else if (reach == AddressReach::kUnknown) {
            s = Status::Busy("the name " + me + " is held by node " +
                             other.node +
                             ": checking whether it leads to this server "
                             "once this server accepts connections");
          } else {
            // At another server: for the rest of this run. A server that
            // once saw its name held by another never takes it, not even
            // once the other's key is gone (a restart of the rightful
            // owner deletes it; this one must not step into its place).
            shut_out = true;
            s = Status::Busy("another server (node " + other.node +
                             ") holds the name " + me +
                             ": two servers announce the same address "
                             "(--announce_addr); this one takes no part in "
                             "the shard until it is restarted");
          }
        } else {
          // A key without a node id (a server of an older build, or not a
          // member record): wait for its lease to end.
          s = Status::Busy("the name " + me +
                           " is held under another etcd lease by a server "
                           "of an older build: waiting for that lease to "
                           "end");
        }
      }
      if (s.ok() && !shut_out) {
        last_member_put = now;
        name_held = false;
        NoteShardMember();
      } else {
        if (s.IsBusy() && !name_held) {
          LOG(ERROR) << "replication: " << s.ToString();
          // Whatever role this server had under the name ends (its key
          // was deleted by hand, or its lease ended, and another took it).
          StepDown("another server holds this server's name");
          MutexLock role(&role_mu_);
          StopReplicaThread();
          MutexLock lock(&mu_);
          primary_.clear();  // followed again once the name is back
        }
        // Until a put succeeds: a transient error after a Busy must not
        // let step 3 act under a name another server holds.
        if (s.IsBusy()) name_held = true;
        if (!s.ok()) fail("member put", s);
      }
    }
    // 3. The members alive, then the record: read in this order, no
    // member reports an epoch above the record's unless etcd's state went
    // back (a member's epoch is one it read in the record or a stream of
    // its primary, and the record's epoch only grows).
    // The highest epoch this server has seen (whether it has seen any: a
    // history counts), read first: what its replica thread adopts meanwhile
    // comes from a record at least as new as the one read below.
    uint64_t seen = 0;
    bool seen_any = false;
    {
      MutexLock lock(&mu_);
      seen = state_.max_epoch;
      seen_any = seen > 0 || !state_.history.empty();
    }
    EtcdKv kv;
    bool found = false;
    std::vector<EtcdKv> member_kvs;
    Status s = etcd.GetPrefix(members_prefix, &member_kvs, 1000);
    if (s.ok()) s = etcd.Get(record_key, &kv, &found);
    // The highest a live member reports having seen: for the bootstrap of
    // a missing record only. (Not to refuse a record that exists: one
    // server started on a data directory of another shard, or of manual
    // mode, would report a high epoch and stop every server of this one.)
    uint64_t members_seen = 0;
    std::string members_seen_by;
    if (s.ok()) {
      for (const auto& m : member_kvs) {
        MemberRecord mr;
        if (!MemberRecord::Parse(m.value, &mr) || mr.epoch <= members_seen)
          continue;
        members_seen = mr.epoch;
        members_seen_by =
            NormalizeHostPort(m.key.substr(members_prefix.size()));
      }
    }
    const bool may_act =
        lease != 0 && last_member_put != 0 && !name_held && !shut_out;
    if (!s.ok() || found || !may_act || seen_any) missing_since = 0;
    if (!s.ok()) {
      fail("read", s);
    } else if (!found && seen_any) {
      // Never created again by a server that has seen an epoch: its
      // members' data is the shard's, which a new record would disown.
      refuse(UntrustedRecordError(
                 record_key, "is missing although this server has seen epoch " +
                                 std::to_string(seen)),
             true);
    } else if (!may_act) {
      // Without a lease, before this lease holds the member key, or under
      // a name another server holds, nothing of ours may go into the
      // record, and this server follows no one.
    } else if (!found && members_seen > 0) {
      refuse(UntrustedRecordError(
                 record_key, "is missing although member " + members_seen_by +
                                 " reports having seen epoch " +
                                 std::to_string(members_seen)),
             true);
    } else if (!found &&
               (ReplNowMs() >= lease_deadline || !RestartPending().ok())) {
      // No bootstrap past this server's lease deadline (as no takeover),
      // nor while a full copy waits for this server's restart (it could
      // not become the primary the record would name).
    } else if (!found && (missing_since == 0 ||
                          now - missing_since <
                              options_.etcd_lease_ttl_ms + kMemberPutMs)) {
      // A brand-new shard, or an etcd that lost its data whose members
      // have not registered again yet: wait a TTL for them.
      if (missing_since == 0) missing_since = now;
    } else if (!found) {
      // Bootstrap of a brand-new shard: a server that has seen no epoch
      // (nor has any member alive) becomes the primary of epoch 1.
      ShardRecord r;
      {
        MutexLock lock(&mu_);
        r.epoch = state_.max_epoch + 1;
        r.history = state_.history.empty() ? NewHistoryId() : state_.history;
        r.epochs = state_.epochs;
      }
      // etcd numbers epochs one per promotion: no promotion ids (a state
      // from manual mode has some), as the record's JSON keeps none.
      ClearPromotionIds(&r.epochs);
      r.primary = me;
      r.isr = {me};
      r.nodes = {{me, node_id_}};
      r.lease = lease;
      AppendEpoch(&r.epochs, r.epoch, db_->GetLatestSequenceNumber(), "");
      bool ok = false;
      s = etcd.Txn({EtcdCompare::Absent(record_key)},
                   {EtcdOp::Put(record_key, r.ToJson())}, {}, &ok);
      if (s.ok() && ok) {
        LOG(INFO) << "replication: created shard " << options_.shard
                  << ", primary of epoch " << r.epoch;
        {
          MutexLock lock(&mu_);
          view_ = r;
          have_view_ = true;
          view_ms_ = ReplNowMs();
        }
        MutexLock role(&role_mu_);
        s = BecomePrimary(&r, lease_deadline);
        if (!s.ok()) LOG(ERROR) << "replication: " << s.ToString();
      } else if (!s.ok()) {
        fail("bootstrap txn", s);
      }
    } else {
      ShardRecord r;
      s = ShardRecord::Parse(kv.value, &r);
      if (!s.ok()) {
        refuse("the shard record " + record_key + " cannot be read: " +
                   s.ToString() + ": no role is taken from it",
               true);
      } else if (r.epoch < seen) {
        // Neither followed, nor taken over (at an epoch used already),
        // nor served as its primary.
        refuse(UntrustedRecordError(
                   record_key, "is at epoch " + std::to_string(r.epoch) +
                                   ", below epoch " + std::to_string(seen) +
                                   " that this server has seen"),
               true);
      } else if (!r.epochs.empty() && r.epochs.back().epoch > r.epoch) {
        refuse("the shard record " + record_key + " is at epoch " +
                   std::to_string(r.epoch) + " but lists epoch " +
                   std::to_string(r.epochs.back().epoch) +
                   ": edited by hand? No role is taken from it",
               true);
      } else {
        if (!refused.empty()) {
          LOG(WARNING) << "replication: the shard record is back at epoch "
                       << r.epoch;
          refused.clear();
        }
        std::vector<std::pair<std::string, std::string>> alive;
        bool primary_alive = false;
        std::map<std::string, uint64_t> seqs;
        // The node each live member's key names, where it names one.
        std::map<std::string, std::string> live_nodes;
        for (const auto& m : member_kvs) {
          const std::string addr =
              NormalizeHostPort(m.key.substr(members_prefix.size()));
          MemberRecord mr;
          if (!MemberRecord::Parse(m.value, &mr)) continue;
          alive.emplace_back(addr, mr.role);
          seqs[addr] = mr.seq;
          if (IsNodeId(mr.node)) live_nodes[addr] = mr.node;
          if (addr == r.primary && m.lease == r.lease && addr != me) {
            primary_alive = true;
          }
        }
        {
          MutexLock lock(&mu_);
          view_ = r;
          view_members_ = alive;
          have_view_ = true;
          view_ms_ = ReplNowMs();
          // (A takeover that failed keeps saying why until its next try.)
          if (now < takeover_not_before) {
            etcd_error_ = takeover_error;
          } else {
            etcd_error_.clear();
          }
        }
        SeeEpoch(r.epoch);
        uint64_t my_epoch;
        {
          MutexLock lock(&mu_);
          my_epoch = epoch_;
        }
        const bool leading = !read_only_.load();
        // An ISR member back under its address as another node (its data
        // directory wiped or replaced) is not that member: it lacks what
        // the record's member acknowledged.
        auto impostor = [&](const std::string& addr) {
          auto it = live_nodes.find(addr);
          return it != live_nodes.end() && !r.NodeMatches(addr, it->second);
        };
        if (r.primary == me && r.lease == lease && leading &&
            my_epoch == r.epoch) {
          primary_dead_since = 0;
          // The primary keeps the record's ISR: a replica is required
          // before the txn that adds it, and still after the txn that
          // removes it has failed.
          std::vector<std::string> desired;
          {
            MutexLock lock(&mu_);
            desired = isr_;
          }
          // The record's replicas; one back as another node joins again
          // like any replica (from its floor), under its new node id.
          // Whose acknowledgements count for an address is its link's
          // node: the record may name only that node there (else another
          // node, lacking what the link acknowledged, could take over).
          auto link_node = [&](const std::string& a) {
            std::string node;
            tracker_.Acked(a, &node);
            return node;
          };
          std::vector<std::string> record_replicas, record_isr;
          for (const auto& a : r.isr) {
            if (a == me) continue;
            record_isr.push_back(a);
            const std::string linked = link_node(a);
            if (impostor(a)) {
              LOG_EVERY_N(WARNING, 50)
                  << "replication: " << a << " is back as another node ("
                  << live_nodes[a] << ", the record names " << r.nodes.at(a)
                  << "): it leaves the ISR and rejoins as a new replica";
            } else if (!linked.empty() && !r.NodeMatches(a, linked)) {
              LOG_EVERY_N(WARNING, 50)
                  << "replication: the link of " << a << " is node " << linked
                  << ", the record names " << r.nodes.at(a)
                  << ": it leaves the ISR and rejoins as a new replica";
            } else {
              record_replicas.push_back(a);
            }
          }
          std::vector<std::string> required = record_replicas;
          for (const auto& a : desired) {
            if (!Contains(required, a)) required.push_back(a);
          }
          // Phase 1: a joiner is required (writes wait for it) from now
          // on, and its floor is the latest sequence after that. Phase 2:
          // it enters the record once it has acknowledged its floor.
          std::vector<std::string> joiners;
          for (const auto& a : desired) {
            if (!Contains(record_replicas, a)) joiners.push_back(a);
          }
          for (auto it = join_floor.begin(); it != join_floor.end();) {
            it = Contains(joiners, it->first) ? std::next(it)
                                              : join_floor.erase(it);
          }
          std::vector<std::string> target;
          // A joiner's node, as its link names it ("": a replica of an
          // older build, which sends none).
          std::map<std::string, std::string> joiner_nodes;
          for (const auto& a : desired) {
            if (Contains(record_replicas, a)) {
              target.push_back(a);
              continue;
            }
            auto it = join_floor.find(a);
            std::string linked;
            if (it == join_floor.end() ||
                tracker_.Acked(a, &linked) < it->second) {
              continue;
            }
            auto live = live_nodes.find(a);
            if (!linked.empty() && live != live_nodes.end() &&
                live->second != linked) {
              // Its member key is another node's (two servers announce
              // one address): which of them would take over is unclear,
              // so neither enters the record.
              LOG_EVERY_N(WARNING, 50)
                  << "replication: " << a << " stays out of the ISR: its link "
                  << "is node " << linked << ", its member key names "
                  << live->second;
              continue;
            }
            target.push_back(a);
            joiner_nodes[a] = linked;
          }
          // (An impostor does not count towards the minimum: it is not
          // required, so counted it would let a write be acknowledged by
          // fewer members than --min_insync_replicas.)
          std::map<std::string, std::string> record_nodes;
          for (const auto& a : record_replicas) {
            auto it = r.nodes.find(a);
            if (it != r.nodes.end()) record_nodes.emplace(a, it->second);
          }
          tracker_.SetIsr(required, record_replicas.size() + 1, record_nodes);
          const uint64_t floor = db_->GetLatestSequenceNumber();
          for (const auto& a : joiners) join_floor.emplace(a, floor);
          std::vector<std::string> t_sorted = target, r_sorted = record_isr;
          std::sort(t_sorted.begin(), t_sorted.end());
          std::sort(r_sorted.begin(), r_sorted.end());
          // Each member's node: a joiner's as its link names it; else as
          // its key names it now, else as recorded.
          std::map<std::string, std::string> nodes = {{me, node_id_}};
          for (const auto& a : target) {
            auto live = live_nodes.find(a);
            auto recorded = r.nodes.find(a);
            auto joined = joiner_nodes.find(a);
            if (joined != joiner_nodes.end() && !joined->second.empty()) {
              nodes[a] = joined->second;
            } else if (live != live_nodes.end()) {
              nodes[a] = live->second;
            } else if (recorded != r.nodes.end()) {
              nodes[a] = recorded->second;
            }
          }
          if (t_sorted != r_sorted || nodes != r.nodes) {
            ShardRecord next = r;
            next.isr = {me};
            next.nodes = nodes;
            for (const auto& a : target) next.isr.push_back(a);
            bool ok = false;
            s = etcd.Txn(
                {EtcdCompare::ModRevisionIs(record_key, kv.mod_revision)},
                {EtcdOp::Put(record_key, next.ToJson())}, {}, &ok);
            if (s.ok() && ok) {
              LOG(INFO) << "replication: ISR of shard " << options_.shard
                        << " is now " << next.isr.size() << " member(s)";
              // Pending joiners stay required: their floors hold only
              // while every write waits for them.
              tracker_.SetIsr(desired, next.isr.size(), next.nodes);
              for (const auto& a : target) join_floor.erase(a);
              MutexLock lock(&mu_);
              view_ = next;
            } else if (!s.ok()) {
              fail("ISR txn", s);
            }
          }
        } else if (r.primary != me && primary_alive) {
          primary_dead_since = 0;
          // A live primary: the next failure starts the wait over.
          takeover_backoff_ms = 0;
          takeover_not_before = 0;
          if (leading)
            StepDown("epoch " + std::to_string(r.epoch) + " belongs to " +
                     r.primary);
          Follow(r.primary);
        } else {
          // The primary's lease is gone (or it is this server's previous
          // life): an ISR member takes over. The one with the highest
          // applied sequence first; the others after two TTLs.
          if (primary_dead_since == 0) primary_dead_since = now;
          if (leading && r.epoch != my_epoch) StepDown("a newer record");
          const uint64_t mine = db_->GetLatestSequenceNumber();
          bool best = true;
          for (const auto& a : r.isr) {
            if (a == me || a == r.primary || impostor(a)) continue;
            auto it = seqs.find(a);
            if (it != seqs.end() &&
                (it->second > mine || (it->second == mine && a < me))) {
              best = false;
            }
          }
          const bool member = r.InIsr(me) && r.NodeMatches(me, node_id_);
          if (r.InIsr(me) && !member) {
            MutexLock lock(&mu_);
            etcd_error_ =
                "takeover: the record's ISR names another node at " + me +
                " (" + r.nodes.at(me) + "; this server is node " + node_id_ +
                "): this data directory is not that member's (wiped or "
                "replaced) and lacks what it acknowledged, so this server "
                "takes no part in a takeover; it rejoins the ISR once a "
                "primary has copied it everything";
          }
          // Not past this server's own lease deadline (keep-alives failing
          // while transactions pass): a primary that must refuse every
          // write at once would step down and take over again, raising
          // the epoch on every pass.
          // Nor while a full copy waits for this server's restart: the
          // record would name a primary that cannot take writes (Busy).
          // (An epoch past kMaxEpoch, which Parse refuses, is never made.)
          const bool waiting_out = now < takeover_not_before;
          bool may = member && !waiting_out && r.epoch < kMaxEpoch &&
                     ReplNowMs() < lease_deadline && RestartPending().ok() &&
                     (best || now - primary_dead_since >
                                  2 * options_.etcd_lease_ttl_ms);
          if (may) {
            // Before the epoch is raised: this server can write what a
            // primary must (its replication state, durably).
            Status probe;
            {
              MutexLock lock(&mu_);
              probe = state_.Store(options_.db_path);
            }
            if (!probe.ok()) {
              takeover_failed(
                  "takeover: cannot write this server's "
                  "replication state: " +
                  probe.ToString());
              may = false;
            }
            // (The store's two fsyncs may have taken this server past its
            // lease deadline, which a takeover must not be.)
            may = may && ReplNowMs() < lease_deadline;
          }
          if (may) {
            ShardRecord next = r;
            next.epoch = r.epoch + 1;
            next.primary = me;
            next.isr = {me};
            next.nodes = {{me, node_id_}};
            next.lease = lease;
            {
              // A record recreated by hand may leave out the history and
              // epochs: this server's own (all at or below its max_epoch,
              // at or below the record's epoch).
              MutexLock lock(&mu_);
              if (next.history.empty()) next.history = state_.history;
              if (next.epochs.empty()) {
                next.epochs = state_.epochs;
                ClearPromotionIds(&next.epochs);
              }
            }
            AppendEpoch(&next.epochs, next.epoch, mine, "");
            bool ok = false;
            s = etcd.Txn(
                {EtcdCompare::ModRevisionIs(record_key, kv.mod_revision)},
                {EtcdOp::Put(record_key, next.ToJson())}, {}, &ok);
            if (s.ok() && ok) {
              LOG(WARNING) << "replication: took over shard " << options_.shard
                           << " from " << r.primary << " (epoch " << next.epoch
                           << ", sequence " << mine << ")";
              primary_dead_since = 0;
              SeeEpoch(next.epoch);
              {
                MutexLock lock(&mu_);
                view_ = next;
              }
              MutexLock role(&role_mu_);
              s = BecomePrimary(&next, lease_deadline);
              if (s.ok()) {
                takeover_backoff_ms = 0;
                takeover_error.clear();
              } else {
                takeover_failed(
                    "took over epoch " + std::to_string(next.epoch) +
                    " but cannot become the primary: " + s.ToString());
              }
            } else if (!s.ok()) {
              fail("takeover txn", s);
            }
          } else if (r.primary != me) {
            Follow(r.primary);  // it may come back; a winner will be named
          }
        }
      }
    }
    MutexLock lock(&mu_);
    if (stopped_) break;
    cv_.wait_for(mu_, milliseconds(kPollMs));
  }
  // A clean stop hands over at once: the member key goes with the lease.
  if (lease != 0) etcd.LeaseRevoke(lease);
}

}  // namespace server
}  // namespace fencedkv
