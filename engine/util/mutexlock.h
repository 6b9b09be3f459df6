// Copyright (c) fencedkv authors.
//
// A mutex the thread-safety analysis understands, and its scoped guard (as
// leveldb/port/port_stdcxx.h and util/mutexlock.h). Typical usage:
//
//   class Counter {
//    public:
//     void Add(int n) LOCKS_EXCLUDED(mu_) {
//       MutexLock lock(&mu_);
//       total_ += n;
//     }
//    private:
//     Mutex mu_;
//     int total_ GUARDED_BY(mu_) = 0;
//   };
//
// Mutex is also BasicLockable (lock/unlock), for std::condition_variable_any.

#ifndef FENCEDKV_ENGINE_UTIL_MUTEXLOCK_H_
#define FENCEDKV_ENGINE_UTIL_MUTEXLOCK_H_

#include <mutex>

#include "util/thread_annotations.h"

namespace fencedkv {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it (no run-time check).
  void AssertHeld() ASSERT_CAPABILITY(this) {}

  // BasicLockable, for std::condition_variable_any and std::unique_lock.
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_MUTEXLOCK_H_
