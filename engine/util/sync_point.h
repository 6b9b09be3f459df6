// Copyright (c) fencedkv authors.
//
// Sync points let a test force a dangerous interleaving instead of waiting
// for it (the idea of rocksdb/test_util/sync_point.h). Production code marks
// places with TEST_SYNC_POINT("Class::Method:Where"); a test installs a
// callback for a name, which runs on the thread that reaches the point, so
// it can park that thread until another has done its work.
//
// Points exist only in builds with FENCEDKV_SYNC_POINTS defined (CMake
// option FENCEDKV_SYNC_POINTS, on when the tests are built): elsewhere they
// compile to nothing, as RocksDB's TEST_SYNC_POINT does under NDEBUG. With
// them and no callback installed, a point costs one relaxed atomic load.
//
// Typical usage in a test:
//   SyncPoint::Get()->SetCallback("DBImpl::Write:AfterCheck", [&](void*) {
//     parked.Notify(); release.Wait();
//   });
//   SyncPoint::Get()->EnableProcessing();
//   ...
//   SyncPoint::Get()->DisableProcessing();
//   SyncPoint::Get()->ClearAllCallbacks();

#ifndef FENCEDKV_ENGINE_UTIL_SYNC_POINT_H_
#define FENCEDKV_ENGINE_UTIL_SYNC_POINT_H_

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace fencedkv {

class SyncPoint {
 public:
  static SyncPoint* Get();

  // Installs (replaces) the callback run when a thread reaches `name`.
  void SetCallback(const std::string& name, std::function<void(void*)> cb);
  void ClearAllCallbacks();
  void EnableProcessing() { enabled_.store(true, std::memory_order_release); }
  void DisableProcessing() { enabled_.store(false, std::memory_order_release); }

  // Called by TEST_SYNC_POINT.
  void Process(const char* name, void* arg);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> enabled_{false};
  std::mutex mu_;
  std::map<std::string, std::function<void(void*)>> callbacks_;
};

}  // namespace fencedkv

#ifdef FENCEDKV_SYNC_POINTS
#define TEST_SYNC_POINT_CALLBACK(name, arg)                 \
  do {                                                      \
    if (::fencedkv::SyncPoint::Get()->enabled()) {          \
      ::fencedkv::SyncPoint::Get()->Process((name), (arg)); \
    }                                                       \
  } while (0)
#else
#define TEST_SYNC_POINT_CALLBACK(name, arg) \
  do {                                      \
    (void)(arg);                            \
  } while (0)
#endif
#define TEST_SYNC_POINT(name) TEST_SYNC_POINT_CALLBACK(name, nullptr)

#endif  // FENCEDKV_ENGINE_UTIL_SYNC_POINT_H_
