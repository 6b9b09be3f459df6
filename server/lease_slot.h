// Copyright (c) fencedkv authors.
//
// LeaseSlot: the server's lease service, which comes and goes with the
// server's role (docs/replication.md). A primary has one open; a replica
// has none: it must write nothing of its own (the lease reclaimer would),
// and its leases are the primary's, replicated. A promoted replica opens
// one (Open), which loads the replicated leases and issues tokens above
// the replicated counter; a demoted primary closes its own (Close).
// Handlers keep calling the slot: while it is empty every call fails with
// NotSupported.
//
// Thread-safe: calls are serialized with Open and Close (the service
// serializes its operations anyway).

#ifndef FENCEDKV_SERVER_LEASE_SLOT_H_
#define FENCEDKV_SERVER_LEASE_SLOT_H_

#include <memory>
#include <string>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

class LeaseSlot : public LeaseService {
 public:
  LeaseSlot(DB* db, const LeaseOptions& options) : db_(db), options_(options) {}
  ~LeaseSlot() override;

  // Opens the lease service of the DB (loading its leases) if none is open.
  Status Open() LOCKS_EXCLUDED(mu_);
  // Closes it (its reclaimer stops); calls fail from then on.
  void Close() LOCKS_EXCLUDED(mu_);
  bool is_open() LOCKS_EXCLUDED(mu_);
  // Acquire and Renew fail with `why` from now on (NotSupported): tokens
  // come from another issuer (--token_source=etcd), and a grant of this
  // service's would count as issued for the skew guard and share that
  // issuer's numbers. Release, Inspect and List still work.
  void RefuseGrants(std::string why) LOCKS_EXCLUDED(mu_);

  Status Acquire(std::string_view name, std::string_view holder, int64_t ttl_ms,
                 LeaseGrant* grant) override LOCKS_EXCLUDED(mu_);
  Status Renew(std::string_view name, std::string_view holder, Token token,
               int64_t ttl_ms, LeaseGrant* grant) override LOCKS_EXCLUDED(mu_);
  Status Release(std::string_view name, std::string_view holder,
                 Token token) override LOCKS_EXCLUDED(mu_);
  Status Inspect(std::string_view name, LeaseGrant* grant) override
      LOCKS_EXCLUDED(mu_);
  // Visits nothing while closed.
  void List(std::string_view after,
            const std::function<bool(const LeaseGrant&)>& visit) override
      LOCKS_EXCLUDED(mu_);
  Status ReclaimExpired(size_t max, size_t* reclaimed) override
      LOCKS_EXCLUDED(mu_);
  // Zeros while closed.
  Stats GetStats() override LOCKS_EXCLUDED(mu_);

 private:
  static Status Closed();
  DB* const db_;
  const LeaseOptions options_;
  Mutex mu_;
  std::unique_ptr<LeaseService> service_ GUARDED_BY(mu_);
  std::string grants_refused_ GUARDED_BY(mu_);  // RefuseGrants
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_LEASE_SLOT_H_
