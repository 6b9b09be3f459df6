// Copyright (c) fencedkv authors.
//
// The embedded lease service: named leases with a holder and a TTL, each
// grant to a new holder (or after expiry) carrying a fencing token from a
// counter that is persisted (synced) before the grant is returned, so tokens
// strictly increase across restarts and crashes.
//
// The counter's rules: a new token is max(last token issued, fence floor)
// + 1. It moves only with grants and with the floor (DB::SetFenceFloor, an
// operator's action); tokens that clients wrote do not move it, so no client
// can exhaust it (a write with 2^64-1 would have, when grants were placed
// above every stored token). A token this service grants is therefore above
// every token it granted before, but not necessarily above a token some
// other party wrote into a domain: such a domain refuses the new holder
// (-STALE) until the operator raises the floor past it. Turn the token skew
// guard on (Options::max_token_skew) and nobody can write such a token.
//
// Expiry uses the wall clock (it must survive restarts). A lease is held
// while now < expires_at_ms.
//
// Expired leases are reclaimed: dropped from memory and from disk, by a
// background thread every LeaseOptions::reclaim_interval_ms (at most
// reclaim_batch per pass, in one synced write), and by Acquire when the
// number of leases on record reaches max_leases. Reclaiming never lets a
// token repeat: the counter is a record of its own, never reclaimed.
//
// Thread safety: a LeaseService is safe for concurrent use; operations are
// serialized. It must be destroyed before its DB.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_LEASE_H_
#define FENCEDKV_INCLUDE_FENCEDKV_LEASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fencedkv/status.h"
#include "fencedkv/token.h"

namespace fencedkv {

class DB;

struct LeaseGrant {
  std::string name;
  std::string holder;
  Token token = 0;
  int64_t expires_at_ms = 0;  // wall clock, ms since the epoch
  int64_t ttl_ms = 0;         // time left when the call returned
};

// The longest TTL LeaseOptions::max_ttl_ms may allow: 10 years (so that
// now + ttl never overflows).
constexpr int64_t kMaxLeaseTtlLimitMs = int64_t{10} * 365 * 24 * 3600 * 1000;

// LeaseService::Open refuses options out of these ranges (InvalidArgument).
struct LeaseOptions {
  // Milliseconds since the epoch; tests inject a fake clock.
  std::function<int64_t()> now_ms;
  // Bounds on a TTL, in ms: 1 <= min_ttl_ms <= max_ttl_ms <=
  // kMaxLeaseTtlLimitMs. Defaults: 1 ms .. 1 day.
  int64_t min_ttl_ms = 1;
  int64_t max_ttl_ms = 24LL * 3600 * 1000;
  // Bounds on names and holders, in bytes (1..max); each at least 1.
  size_t max_name_bytes = 1024;
  size_t max_holder_bytes = 1024;
  // At most this many leases on record (held, or expired and not yet
  // reclaimed): about 100 bytes each plus the name and holder, so at most
  // about 220 MB with the defaults. Acquire of a new name at the limit
  // first reclaims expired leases, then returns Busy. At least 1.
  size_t max_leases = 100000;
  // The background reclaimer's period (0: none; call ReclaimExpired; not
  // negative) and the most leases it reclaims per pass (at least 1).
  int64_t reclaim_interval_ms = 1000;
  size_t reclaim_batch = 1000;
};

class LeaseService {
 public:
  // Creates the lease service of `db` (which must come from DB::Open and
  // outlive the service). Loads the persisted leases. A DB has at most one
  // lease service at a time: while one exists, Open returns Busy (two would
  // each keep a counter and grant the same token to two holders).
  static Status Open(DB* db, const LeaseOptions& options,
                     std::unique_ptr<LeaseService>* service);

  LeaseService() = default;
  LeaseService(const LeaseService&) = delete;
  LeaseService& operator=(const LeaseService&) = delete;
  virtual ~LeaseService();

  // Grants lease `name` to `holder` for ttl_ms if it is free or expired
  // (a new token), or extends it if `holder` already holds it (the same
  // token). Returns LeaseHeld naming the holder and the time left otherwise,
  // InvalidArgument for a bad name, holder or TTL, IOError if the grant could
  // not be made durable (then nothing was granted).
  virtual Status Acquire(std::string_view name, std::string_view holder,
                         int64_t ttl_ms, LeaseGrant* grant) = 0;
  // Extends the lease if `holder` holds it with `token` and it has not
  // expired; LeaseLost otherwise (the holder must stop and re-acquire).
  virtual Status Renew(std::string_view name, std::string_view holder,
                       Token token, int64_t ttl_ms, LeaseGrant* grant) = 0;
  // Gives the lease up. OK if `holder` holds it with `token` (even if it has
  // just expired and nobody else took it); LeaseLost if someone else holds
  // it now or the token differs; OK if the lease does not exist.
  virtual Status Release(std::string_view name, std::string_view holder,
                         Token token) = 0;
  // The current holder; NotFound if the lease is free or expired.
  virtual Status Inspect(std::string_view name, LeaseGrant* grant) = 0;
  // Calls visit(grant) for each lease held now (not expired) whose name is
  // after `after` ("" = from the first), in name order, until visit
  // returns false. Holds the service's lock meanwhile (other calls wait):
  // the caller bounds the work (LEASE.LIST copies 64 leases a call and
  // matches them after it, resuming `after` the last one).
  virtual void List(std::string_view after,
                    const std::function<bool(const LeaseGrant&)>& visit) = 0;
  // Drops up to `max` expired leases from memory and disk (one synced
  // write); *reclaimed says how many. The background reclaimer calls it.
  virtual Status ReclaimExpired(size_t max, size_t* reclaimed) = 0;

  // Counters since Open. O(1): nothing is walked.
  struct Stats {
    uint64_t grants = 0;    // new tokens issued
    uint64_t renewals = 0;  // Renew, and Acquire by the current holder
    uint64_t releases = 0;
    uint64_t refusals = 0;   // LeaseHeld / LeaseLost answers
    uint64_t reclaimed = 0;  // expired leases dropped
    // Leases on record: held, or expired and not yet reclaimed (at most one
    // reclaiming pass behind).
    uint64_t held = 0;
    Token last_token = 0;  // the last token issued (persisted)
  };
  virtual Stats GetStats() = 0;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_LEASE_H_
