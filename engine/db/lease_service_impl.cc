// Copyright (c) fencedkv authors.
//
// The embedded lease service. State lives in the meta column family
// ("lease_counter" and "lease/" name records, fence_format.h).
// Every change is one synced RocksDB write (DBImpl::PutMetaSynced) made
// before the caller hears of it: a token is never issued twice, even across a
// crash, and a grant the caller saw survives one.

#include <chrono>
#include <map>
#include <mutex>

#include "db/db_impl.h"
#include "db/fence_format.h"
#include "fencedkv/lease.h"

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

  ~LeaseServiceImpl() override { db_->ReleaseLeaseService(); }

  Status Load() {
    std::string raw;
    Status s = db_->GetMeta(format::kMetaLeaseCounter, &raw);
    if (s.ok()) {
      if (!format::DecodeToken(raw, &counter_)) {
        return Status::Corruption("bad lease_counter record");
      }
    } else if (!s.IsNotFound()) {
      return s;
    }
    db_->NoteIssuedToken(counter_);
    std::vector<std::pair<std::string, std::string>> records;
    s = db_->ScanMeta(format::kMetaLeasePrefix, &records);
    if (!s.ok()) return s;
    for (auto& [key, value] : records) {
      LeaseRecord r;
      if (!format::DecodeLeaseRecord(value, &r)) {
        return Status::Corruption("bad lease record", EscapeBytes(key));
      }
      leases_[key.substr(format::kMetaLeasePrefix.size())] = std::move(r);
    }
    return Status::OK();
  }

  Status Acquire(std::string_view name, std::string_view holder,
                 int64_t ttl_ms, LeaseGrant* grant) override {
    Status s = Validate(name, holder, ttl_ms);
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = options_.now_ms();
    auto it = leases_.find(std::string(name));
    if (it != leases_.end() && it->second.expires_at_ms > now) {
      if (it->second.holder != holder) {
        stats_.refusals++;
        return Status::LeaseHeld(
            "lease \"" + EscapeBytes(name) + "\" is held by \"" +
            EscapeBytes(it->second.holder) + "\" for another " +
            std::to_string(it->second.expires_at_ms - now) + " ms");
      }
      // The holder asks again: same token, fresh TTL.
      return Extend(it, name, now, ttl_ms, grant);
    }
    // Free or expired: a new token, above every token issued or stored.
    Token next = std::max({counter_, db_->HighWaterMark(),
                           db_->GetFenceFloor()});
    if (next == kMaxToken) {
      return Status::NotSupported("the lease token counter is exhausted");
    }
    ++next;
    LeaseRecord r{std::string(holder), next, now + ttl_ms};
    s = db_->PutMetaSynced(
        {{std::string(format::kMetaLeaseCounter), format::EncodeToken(next)},
         {MetaKey(name), format::EncodeLeaseRecord(r)}});
    if (!s.ok()) return s;  // nothing granted
    counter_ = next;
    db_->NoteIssuedToken(next);
    leases_[std::string(name)] = r;
    stats_.grants++;
    Fill(name, r, now, grant);
    return Status::OK();
  }

  Status Renew(std::string_view name, std::string_view holder, Token token,
               int64_t ttl_ms, LeaseGrant* grant) override {
    Status s = Validate(name, holder, ttl_ms);
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = options_.now_ms();
    auto it = leases_.find(std::string(name));
    s = CheckHeldBy(it, name, holder, token, now, /*allow_expired=*/false);
    if (!s.ok()) return s;
    return Extend(it, name, now, ttl_ms, grant);
  }

  Status Release(std::string_view name, std::string_view holder,
                 Token token) override {
    Status s = Validate(name, holder, options_.min_ttl_ms);
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(std::string(name));
    if (it == leases_.end()) return Status::OK();
    s = CheckHeldBy(it, name, holder, token, options_.now_ms(),
                    /*allow_expired=*/true);
    if (!s.ok()) return s;
    // Keep the counter; drop the record (an absent record means free).
    s = db_->DeleteMetaSynced(MetaKey(name));
    if (!s.ok()) return s;
    leases_.erase(it);
    stats_.releases++;
    return Status::OK();
  }

  Status Inspect(std::string_view name, LeaseGrant* grant) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = options_.now_ms();
    auto it = leases_.find(std::string(name));
    if (it == leases_.end() || it->second.expires_at_ms <= now) {
      return Status::NotFound("lease \"" + EscapeBytes(name) + "\" is free");
    }
    Fill(name, it->second, now, grant);
    return Status::OK();
  }

  Stats GetStats() override {
    std::lock_guard<std::mutex> lock(mu_);
    Stats st = stats_;
    const int64_t now = options_.now_ms();
    st.held = 0;
    for (const auto& [name, r] : leases_) {
      if (r.expires_at_ms > now) st.held++;
    }
    st.last_token = counter_;
    return st;
  }

 private:
  Status Validate(std::string_view name, std::string_view holder,
                  int64_t ttl_ms) const {
    if (name.empty() || name.size() > options_.max_name_bytes) {
      return Status::InvalidArgument(
          "lease name must be 1.." + std::to_string(options_.max_name_bytes) +
          " bytes");
    }
    if (holder.empty() || holder.size() > options_.max_holder_bytes) {
      return Status::InvalidArgument(
          "lease holder must be 1.." +
          std::to_string(options_.max_holder_bytes) + " bytes");
    }
    if (ttl_ms < options_.min_ttl_ms || ttl_ms > options_.max_ttl_ms) {
      return Status::InvalidArgument(
          "invalid ttl_ms " + std::to_string(ttl_ms) + ": must be " +
          std::to_string(options_.min_ttl_ms) + ".." +
          std::to_string(options_.max_ttl_ms));
    }
    return Status::OK();
  }

  // Moves a held lease's expiry to now + ttl_ms, durably (synced) first.
  Status Extend(std::map<std::string, LeaseRecord>::iterator it,
                std::string_view name, int64_t now, int64_t ttl_ms,
                LeaseGrant* grant) {
    LeaseRecord r = it->second;
    r.expires_at_ms = now + ttl_ms;
    Status s =
        db_->PutMetaSynced({{MetaKey(name), format::EncodeLeaseRecord(r)}});
    if (!s.ok()) return s;
    it->second = r;
    stats_.renewals++;
    Fill(name, r, now, grant);
    return Status::OK();
  }

  Status CheckHeldBy(std::map<std::string, LeaseRecord>::iterator it,
                     std::string_view name, std::string_view holder,
                     Token token, int64_t now, bool allow_expired) {
    const std::string who = "lease \"" + EscapeBytes(name) + "\"";
    if (it == leases_.end()) {
      stats_.refusals++;
      return Status::LeaseLost(who + " is not held");
    }
    const LeaseRecord& r = it->second;
    if (r.holder != holder || r.token != token) {
      stats_.refusals++;
      return Status::LeaseLost(who + " is held by \"" + EscapeBytes(r.holder) +
                               "\" with token " + std::to_string(r.token) +
                               ", not by \"" + EscapeBytes(holder) +
                               "\" with token " + std::to_string(token));
    }
    if (!allow_expired && r.expires_at_ms <= now) {
      stats_.refusals++;
      return Status::LeaseLost(who + " expired " +
                               std::to_string(now - r.expires_at_ms) +
                               " ms ago");
    }
    return Status::OK();
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

  DBImpl* const db_;
  LeaseOptions options_;
  std::mutex mu_;
  Token counter_ = 0;                            // GUARDED_BY(mu_)
  std::map<std::string, LeaseRecord> leases_;    // GUARDED_BY(mu_)
  Stats stats_;                                  // GUARDED_BY(mu_)
};

}  // namespace

Status LeaseService::Open(DB* db, const LeaseOptions& options,
                          std::unique_ptr<LeaseService>* service) {
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
  auto s = std::make_unique<LeaseServiceImpl>(impl, options);  // releases the claim
  Status st = s->Load();
  if (st.ok()) *service = std::move(s);
  return st;
}

}  // namespace fencedkv
