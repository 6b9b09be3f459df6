// Copyright (c) fencedkv authors.

#include "util/sync_point.h"

namespace fencedkv {

SyncPoint* SyncPoint::Get() {
  static SyncPoint* instance = new SyncPoint();  // never destroyed
  return instance;
}

void SyncPoint::SetCallback(const std::string& name,
                            std::function<void(void*)> cb) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_[name] = std::move(cb);
}

void SyncPoint::ClearAllCallbacks() {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_.clear();
}

void SyncPoint::Process(const char* name, void* arg) {
  std::function<void(void*)> cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = callbacks_.find(name);
    if (it == callbacks_.end()) return;
    cb = it->second;
  }
  cb(arg);  // outside the lock: the callback may block
}

}  // namespace fencedkv
