// Copyright (c) fencedkv authors.
//
// The embedded lease service: named leases with a holder and a TTL, each
// grant to a new holder (or after expiry) carrying a fencing token from a
// counter that is persisted (synced) before the grant is returned, so tokens
// strictly increase across restarts and crashes. A grant's token is also
// above every token the database has ever stored (its high-water mark) and
// at or above the fence floor, so a fresh holder can always write.
//
// Expiry uses the wall clock (it must survive restarts). A lease is held
// while now < expires_at_ms.
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

struct LeaseOptions {
  // Milliseconds since the epoch; tests inject a fake clock.
  std::function<int64_t()> now_ms;
  // Bounds on a TTL, in ms. Defaults: 1 ms .. 1 day.
  int64_t min_ttl_ms = 1;
  int64_t max_ttl_ms = 24LL * 3600 * 1000;
  // Bounds on names and holders, in bytes (1..max).
  size_t max_name_bytes = 1024;
  size_t max_holder_bytes = 1024;
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

  // Counters since Open.
  struct Stats {
    uint64_t grants = 0;     // new tokens issued
    uint64_t renewals = 0;   // Renew, and Acquire by the current holder
    uint64_t releases = 0;
    uint64_t refusals = 0;   // LeaseHeld / LeaseLost answers
    uint64_t held = 0;       // leases currently held (not expired)
    Token last_token = 0;    // the last token issued (persisted)
  };
  virtual Stats GetStats() = 0;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_LEASE_H_
