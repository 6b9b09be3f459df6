// Copyright (c) fencedkv authors.
//
// The embedded lease service. State lives in the meta column family
// ("lease_counter" and "lease/" name records, fence_format.h).
// Every change is one synced RocksDB write (DBImpl::WriteMetaSynced) made
// before the caller hears of it: a token is never issued twice, even across a
// crash, and a grant the caller saw survives one. Reclaiming an expired lease
// deletes its record and never touches the counter.

#include <chrono>
#include <condition_variable>
#include <map>
#include <thread>

#include "fencedkv/lease.h"

#include "db/db_impl.h"
#include "db/fence_format.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"
#include "util/thread_name.h"

namespace fencedkv {

LeaseService::~LeaseService() = default;

namespace {

using format::LeaseRecord;

std::string MetaKey(std::string_view name) {
  return std::string(format::kMetaLeasePrefix) + std::string(name);
}

class LeaseServiceImpl final : public LeaseService {
 public:
  LeaseServiceImpl(DBImpl* db, LeaseOptions options)
      : db_(db), options_(std::move(options)) {
    if (!options_.now_ms) {
      options_.now_ms = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
      };
    }
  }

  ~LeaseServiceImpl() override {
    {
      MutexLock lock(&reclaimer_mu_);
      stop_ = true;
    }
    reclaimer_cv_.notify_all();
    if (reclaimer_.joinable()) reclaimer_.join();
    db_->ReleaseLeaseService();
  }

  // Starts the background reclaimer (LeaseOptions::reclaim_interval_ms).
  void StartReclaimer() {
    if (options_.reclaim_interval_ms <= 0) return;
    reclaimer_ = std::thread([this] {
      SetThreadName("fencedkv:lease");
      ReclaimLoop();
    });
  }

  Status Load() {
    MutexLock lock(&mu_);  // before any other thread: for the analysis
    Status s = db_->ReadLeaseCounter(&counter_);
    if (!s.ok()) return s;
    db_->NoteIssuedToken(counter_);
    std::vector<std::pair<std::string, std::string>> records;
    s = db_->ScanMeta(format::kMetaLeasePrefix, &records);
    if (!s.ok()) return s;
    for (auto& [key, value] : records) {
      LeaseRecord r;
      if (!format::DecodeLeaseRecord(value, &r)) {
        return Status::Corruption("bad lease record", EscapeBytes(key));
      }
      if (r.token > counter_) {
        // Every grant raises the counter in the batch that writes the
        // lease: a lease above it means damaged or altered records, and
        // the service would issue that token again.
        return Status::Corruption(
            "lease record " + EscapeBytes(key) + " holds token " +
                std::to_string(r.token) + ", above the lease_counter " +
                std::to_string(counter_),
            "the meta records are damaged or were changed by another tool "
            "(fencedkv-admin check names them)");
      }
      Put(key.substr(format::kMetaLeasePrefix.size()), std::move(r));
    }
    return Status::OK();
  }

  Status Acquire(std::string_view name, std::string_view holder, int64_t ttl_ms,
                 LeaseGrant* grant) override {
    Status s = Validate(name, holder, ttl_ms);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    const int64_t now = options_.now_ms();
    auto it = leases_.find(name);
    if (it != leases_.end() && Held(it->second.r, now)) {
      const LeaseRecord& held = it->second.r;
      if (held.holder != holder) {
        stats_.refusals++;
        return Status::LeaseHeld(
            "lease \"" + EscapeBytes(name) + "\" is held by \"" +
            EscapeBytes(held.holder) + "\" for another " +
            std::to_string(held.expires_at_ms - now) + " ms");
      }
      // The holder asks again: same token, fresh TTL.
      return Extend(it, name, now, ttl_ms, grant);
    }
    // A new name at the limit takes the place of expired leases, reclaimed
    // in the grant's own write.
    std::vector<std::string> reclaim;
    Token walked = floor_walked_;  // kept once the grant is written
    if (it == leases_.end() && leases_.size() >= options_.max_leases) {
      for (auto e = by_expiry_.begin();
           e != by_expiry_.end() && e->first <= now && reclaim.size() < 16;
           ++e) {
        reclaim.push_back(*e->second);
      }
      // Leases the floor ended are no leases either (a walk over them all,
      // only at the limit with nothing expired).
      // Grants are above the floor: after a walk that left none below it,
      // none is until the floor moves again.
      const Token floor = db_->GetFenceFloor();
      if (reclaim.empty() && floor != floor_walked_) {
        for (auto l = leases_.begin();
             reclaim.size() < 16 && l != leases_.end(); ++l) {
          if (l->second.r.token < floor) reclaim.push_back(l->first);
        }
        if (reclaim.size() < 16) walked = floor;
      }
      if (reclaim.empty()) {
        floor_walked_ = walked;  // none below the floor: no walk till it moves
        stats_.refusals++;
        return Status::Busy(
            "too many leases: " + std::to_string(leases_.size()) +
            " held (max_leases); release some or wait for "
            "one to expire");
      }
    }
    // Free or expired: a new token, above every token issued and at or
    // above the floor. Not above the tokens clients wrote: one client's
    // 2^64-1 in one domain would exhaust the counter for everyone.
    Token next = std::max(counter_, db_->GetFenceFloor());
    if (next == kMaxToken) {
      return Status::NotSupported(
          "the lease token counter is exhausted: the last token issued or "
          "the fence floor is 2^64-1");
    }
    ++next;
    LeaseRecord r{std::string(holder), next, now + ttl_ms};
    std::vector<std::string> deletes;
    deletes.reserve(reclaim.size());
    for (const auto& n : reclaim) deletes.push_back(MetaKey(n));
    s = db_->WriteMetaSynced(
        {{std::string(format::kMetaLeaseCounter), format::EncodeToken(next)},
         {MetaKey(name), format::EncodeLeaseRecord(r)}},
        deletes);
    if (!s.ok()) return s;  // nothing granted (nor reclaimed: walk again)
    floor_walked_ = walked;
    counter_ = next;
    db_->NoteIssuedToken(next);
    for (const auto& n : reclaim) Erase(leases_.find(n));
    stats_.reclaimed += reclaim.size();
    Put(std::string(name), r);
    stats_.grants++;
    Fill(name, r, now, grant);
    return Status::OK();
  }

  Status Renew(std::string_view name, std::string_view holder, Token token,
               int64_t ttl_ms, LeaseGrant* grant) override {
    Status s = Validate(name, holder, ttl_ms);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    const int64_t now = options_.now_ms();
    auto it = leases_.find(name);
    s = CheckHeldBy(it, name, holder, token, now, /*allow_expired=*/false);
    if (!s.ok()) return s;
    return Extend(it, name, now, ttl_ms, grant);
  }

  Status Release(std::string_view name, std::string_view holder,
                 Token token) override {
    Status s = Validate(name, holder, options_.min_ttl_ms);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    auto it = leases_.find(name);
    if (it == leases_.end()) return Status::OK();
    s = CheckHeldBy(it, name, holder, token, options_.now_ms(),
                    /*allow_expired=*/true);
    if (!s.ok()) return s;
    // Keep the counter; drop the record (an absent record means free).
    s = db_->DeleteMetaSynced(MetaKey(name));
    if (!s.ok()) return s;
    Erase(it);
    stats_.releases++;
    return Status::OK();
  }

  Status Inspect(std::string_view name, LeaseGrant* grant) override {
    MutexLock lock(&mu_);
    const int64_t now = options_.now_ms();
    auto it = leases_.find(name);
    if (it == leases_.end() || !Held(it->second.r, now)) {
      return Status::NotFound("lease \"" + EscapeBytes(name) + "\" is free");
    }
    Fill(name, it->second.r, now, grant);
    return Status::OK();
  }

  void List(std::string_view after,
            const std::function<bool(const LeaseGrant&)>& visit) override {
    MutexLock lock(&mu_);
    const int64_t now = options_.now_ms();
    LeaseGrant g;
    for (auto it = leases_.upper_bound(after); it != leases_.end(); ++it) {
      if (!Held(it->second.r, now)) continue;
      Fill(it->first, it->second.r, now, &g);
      if (!visit(g)) return;
    }
  }

  Status ReclaimExpired(size_t max, size_t* reclaimed) override {
    *reclaimed = 0;
    MutexLock lock(&mu_);
    const int64_t now = options_.now_ms();
    std::vector<std::string> deletes;
    for (auto e = by_expiry_.begin();
         e != by_expiry_.end() && e->first <= now && deletes.size() < max;
         ++e) {
      deletes.push_back(MetaKey(*e->second));
    }
    if (deletes.empty()) return Status::OK();
    Status s = db_->WriteMetaSynced({}, deletes);
    if (!s.ok()) return s;  // all kept; the next pass tries again
    for (const auto& key : deletes) {
      Erase(leases_.find(
          std::string_view(key).substr(format::kMetaLeasePrefix.size())));
    }
    stats_.reclaimed += deletes.size();
    *reclaimed = deletes.size();
    return Status::OK();
  }

  Stats GetStats() override {
    MutexLock lock(&mu_);
    Stats st = stats_;
    st.held = leases_.size();
    st.last_token = counter_;
    return st;
  }

 private:
  Status Validate(std::string_view name, std::string_view holder,
                  int64_t ttl_ms) const {
    if (name.empty() || name.size() > options_.max_name_bytes) {
      return Status::InvalidArgument("lease name must be 1.." +
                                     std::to_string(options_.max_name_bytes) +
                                     " bytes");
    }
    if (holder.empty() || holder.size() > options_.max_holder_bytes) {
      return Status::InvalidArgument("lease holder must be 1.." +
                                     std::to_string(options_.max_holder_bytes) +
                                     " bytes");
    }
    if (ttl_ms < options_.min_ttl_ms || ttl_ms > options_.max_ttl_ms) {
      return Status::InvalidArgument(
          "invalid ttl_ms " + std::to_string(ttl_ms) + ": must be " +
          std::to_string(options_.min_ttl_ms) + ".." +
          std::to_string(options_.max_ttl_ms));
    }
    return Status::OK();
  }

  // A lease and its place in the expiry index.
  struct Entry {
    LeaseRecord r;
    std::multimap<int64_t, const std::string*>::iterator expiry;
  };
  using LeaseMap = std::map<std::string, Entry, std::less<>>;
  // The floor at the last walk for leases below it that left none (at the
  // max_leases limit).
  Token floor_walked_ GUARDED_BY(mu_) = 0;

  // REQUIRES: mu_ held. Records `r` as lease `name` (new or replacing).
  void Put(std::string name, LeaseRecord r) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto [it, inserted] = leases_.try_emplace(std::move(name));
    if (!inserted) by_expiry_.erase(it->second.expiry);
    it->second.r = std::move(r);
    it->second.expiry =
        by_expiry_.emplace(it->second.r.expires_at_ms, &it->first);
  }

  // REQUIRES: mu_ held. Forgets the lease at `it` (not end()).
  void Erase(LeaseMap::iterator it) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    by_expiry_.erase(it->second.expiry);
    leases_.erase(it);
  }

  // Moves a held lease's expiry to now + ttl_ms, durably (synced) first.
  Status Extend(LeaseMap::iterator it, std::string_view name, int64_t now,
                int64_t ttl_ms, LeaseGrant* grant)
      EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    LeaseRecord r = it->second.r;
    r.expires_at_ms = now + ttl_ms;
    Status s =
        db_->PutMetaSynced({{MetaKey(name), format::EncodeLeaseRecord(r)}});
    if (!s.ok()) return s;
    by_expiry_.erase(it->second.expiry);
    it->second.r = r;
    it->second.expiry = by_expiry_.emplace(r.expires_at_ms, &it->first);
    stats_.renewals++;
    Fill(name, r, now, grant);
    return Status::OK();
  }

  Status CheckHeldBy(LeaseMap::iterator it, std::string_view name,
                     std::string_view holder, Token token, int64_t now,
                     bool allow_expired) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string who = "lease \"" + EscapeBytes(name) + "\"";
    if (it == leases_.end()) {
      stats_.refusals++;
      return Status::LeaseLost(who + " is not held");
    }
    const LeaseRecord& r = it->second.r;
    const bool expired = r.expires_at_ms <= now;
    const std::string ago =
        "expired " + std::to_string(now - r.expires_at_ms) + " ms ago";
    const std::string last = "\"" + EscapeBytes(r.holder) + "\" with token " +
                             std::to_string(r.token);
    // An expired lease is held by nobody (its record waits for the
    // reclaimer): not called held by its last holder.
    if (!allow_expired && BelowFloor(r.token)) {
      stats_.refusals++;
      return Status::LeaseLost(
          who + "'s token " + std::to_string(r.token) +
          " is below the fence floor " + std::to_string(db_->GetFenceFloor()) +
          " (raised after it was granted to \"" + EscapeBytes(r.holder) +
          "\"): every write with it is refused; acquire the lease again");
    }
    if (expired && !allow_expired) {
      stats_.refusals++;
      if (r.holder == holder && r.token == token) {
        return Status::LeaseLost(who + " " + ago);
      }
      return Status::LeaseLost(who + " " + ago + " (last held by " + last +
                               ")");
    }
    if (r.holder != holder || r.token != token) {
      stats_.refusals++;
      const std::string gone = expired ? ", which " + ago
                               : BelowFloor(r.token)
                                   ? ", a token now below the fence floor " +
                                         std::to_string(db_->GetFenceFloor())
                                   : "";
      return Status::LeaseLost(
          who + (gone.empty() ? " is held by " : " was held by ") + last +
          gone + ", not by \"" + EscapeBytes(holder) + "\" with token " +
          std::to_string(token));
    }
    return Status::OK();
  }

  // A token the fence floor refuses (FENCE.FLOOR raised above it; in every
  // mode the floor itself is accepted, fence_check.h) is no lease: its
  // holder can write nothing with it.
  bool BelowFloor(Token token) const { return token < db_->GetFenceFloor(); }
  // Held: unexpired, with a token writes can still use.
  bool Held(const LeaseRecord& r, int64_t now) const {
    return r.expires_at_ms > now && !BelowFloor(r.token);
  }

  static void Fill(std::string_view name, const LeaseRecord& r, int64_t now,
                   LeaseGrant* grant) {
    if (grant == nullptr) return;
    grant->name = std::string(name);
    grant->holder = r.holder;
    grant->token = r.token;
    grant->expires_at_ms = r.expires_at_ms;
    grant->ttl_ms = r.expires_at_ms > now ? r.expires_at_ms - now : 0;
  }

  // The background reclaimer: a bounded pass every reclaim_interval_ms
  // (sooner while a pass finds a full batch).
  void ReclaimLoop() LOCKS_EXCLUDED(reclaimer_mu_, mu_) {
    const auto interval =
        std::chrono::milliseconds(options_.reclaim_interval_ms);
    auto wait = interval;
    reclaimer_mu_.Lock();
    while (!stop_) {
      reclaimer_cv_.wait_for(reclaimer_mu_, wait);  // early wakeups: a pass
      if (stop_) break;
      reclaimer_mu_.Unlock();
      size_t n = 0;
      const Status s = ReclaimExpired(options_.reclaim_batch, &n);
      wait = s.ok() && n == options_.reclaim_batch
                 ? std::min(interval, std::chrono::milliseconds(10))
                 : interval;
      reclaimer_mu_.Lock();
    }
    reclaimer_mu_.Unlock();
  }

  DBImpl* const db_;
  LeaseOptions options_;
  Mutex mu_;
  Token counter_ GUARDED_BY(mu_) = 0;
  LeaseMap leases_ GUARDED_BY(mu_);
  // Expiry time -> the lease's name (the key in leases_): the expired ones
  // come first, so reclaiming never walks the held ones.
  std::multimap<int64_t, const std::string*> by_expiry_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);

  Mutex reclaimer_mu_;
  std::condition_variable_any reclaimer_cv_;
  bool stop_ GUARDED_BY(reclaimer_mu_) = false;
  std::thread reclaimer_;
};

}  // namespace

namespace {

// Options that cannot work: an Acquire at a max_ttl_ms of INT64_MAX
// overflowed its expiry (negative: another holder took the lease at once),
// and min above max, or no room for a name, refused every Acquire.
Status ValidateLeaseOptions(const LeaseOptions& o) {
  if (o.min_ttl_ms < 1 || o.max_ttl_ms < o.min_ttl_ms ||
      o.max_ttl_ms > kMaxLeaseTtlLimitMs) {
    return Status::InvalidArgument(
        "lease TTL bounds min_ttl_ms " + std::to_string(o.min_ttl_ms) +
        ", max_ttl_ms " + std::to_string(o.max_ttl_ms) +
        ": expected 1 <= min_ttl_ms <= max_ttl_ms <= " +
        std::to_string(kMaxLeaseTtlLimitMs) + " (10 years)");
  }
  if (o.max_name_bytes < 1 || o.max_holder_bytes < 1) {
    return Status::InvalidArgument(
        "max_name_bytes and max_holder_bytes must be at least 1");
  }
  if (o.max_leases < 1) {
    return Status::InvalidArgument("max_leases must be at least 1");
  }
  if (o.reclaim_interval_ms < 0 || o.reclaim_batch < 1) {
    return Status::InvalidArgument(
        "reclaim_interval_ms must be 0 (no reclaimer) or positive, and "
        "reclaim_batch at least 1");
  }
  return Status::OK();
}

}  // namespace

Status LeaseService::Open(DB* db, const LeaseOptions& options,
                          std::unique_ptr<LeaseService>* service) {
  Status valid = ValidateLeaseOptions(options);
  if (!valid.ok()) return valid;
  auto* impl = dynamic_cast<DBImpl*>(db);
  if (impl == nullptr) {
    return Status::InvalidArgument("LeaseService needs a DB from DB::Open");
  }
  if (!impl->TryClaimLeaseService()) {
    return Status::Busy(
        "a lease service is already open on this database",
        "use that one: two services would each keep a counter and issue the "
        "same tokens");
  }
  auto s =
      std::make_unique<LeaseServiceImpl>(impl, options);  // releases the claim
  Status st = s->Load();
  if (!st.ok()) return st;
  s->StartReclaimer();
  *service = std::move(s);
  return st;
}

}  // namespace fencedkv
