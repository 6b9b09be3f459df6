// Copyright (c) fencedkv authors.

#include "lease_slot.h"

namespace fencedkv {
namespace server {

LeaseSlot::~LeaseSlot() { Close(); }

Status LeaseSlot::Closed() {
  return Status::NotSupported(
      "the lease service runs on the primary: this server is a replica");
}

Status LeaseSlot::Open() {
  MutexLock lock(&mu_);
  if (service_ != nullptr) return Status::OK();
  return LeaseService::Open(db_, options_, &service_);
}

void LeaseSlot::Close() {
  std::unique_ptr<LeaseService> old;
  {
    MutexLock lock(&mu_);
    old = std::move(service_);
  }
  old.reset();  // joins its reclaimer
}

bool LeaseSlot::is_open() {
  MutexLock lock(&mu_);
  return service_ != nullptr;
}

void LeaseSlot::RefuseGrants(std::string why) {
  MutexLock lock(&mu_);
  grants_refused_ = std::move(why);
}

Status LeaseSlot::Acquire(std::string_view name, std::string_view holder,
                          int64_t ttl_ms, LeaseGrant* grant) {
  MutexLock lock(&mu_);
  if (!grants_refused_.empty()) return Status::NotSupported(grants_refused_);
  if (service_ == nullptr) return Closed();
  return service_->Acquire(name, holder, ttl_ms, grant);
}

Status LeaseSlot::Renew(std::string_view name, std::string_view holder,
                        Token token, int64_t ttl_ms, LeaseGrant* grant) {
  MutexLock lock(&mu_);
  if (!grants_refused_.empty()) return Status::NotSupported(grants_refused_);
  if (service_ == nullptr) return Closed();
  return service_->Renew(name, holder, token, ttl_ms, grant);
}

Status LeaseSlot::Release(std::string_view name, std::string_view holder,
                          Token token) {
  MutexLock lock(&mu_);
  if (service_ == nullptr) return Closed();
  return service_->Release(name, holder, token);
}

Status LeaseSlot::Inspect(std::string_view name, LeaseGrant* grant) {
  MutexLock lock(&mu_);
  if (service_ == nullptr) return Closed();
  return service_->Inspect(name, grant);
}

void LeaseSlot::List(std::string_view after,
                     const std::function<bool(const LeaseGrant&)>& visit) {
  MutexLock lock(&mu_);
  if (service_ != nullptr) service_->List(after, visit);
}

Status LeaseSlot::ReclaimExpired(size_t max, size_t* reclaimed) {
  MutexLock lock(&mu_);
  if (service_ == nullptr) return Closed();
  return service_->ReclaimExpired(max, reclaimed);
}

LeaseService::Stats LeaseSlot::GetStats() {
  MutexLock lock(&mu_);
  if (service_ == nullptr) return Stats();
  return service_->GetStats();
}

}  // namespace server
}  // namespace fencedkv
