// Copyright (c) fencedkv authors.
//
// Clang thread-safety annotations (no-ops with other compilers), as in
// leveldb/port/thread_annotations.h. `scripts/check.sh` builds everything
// with clang -Wthread-safety -Werror so the compiler checks them. Use them
// with fencedkv::Mutex (util/mutexlock.h): std::mutex carries no capability
// annotations in libstdc++.
//
// Where the lock a member needs is chosen at run time (FenceTable's stripes:
// which stripe depends on a hash), the analysis cannot name it: such
// functions say "REQUIRES: ..." in prose and carry NO_THREAD_SAFETY_ANALYSIS.

#ifndef FENCEDKV_ENGINE_UTIL_THREAD_ANNOTATIONS_H_
#define FENCEDKV_ENGINE_UTIL_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define FENCEDKV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define FENCEDKV_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) FENCEDKV_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY FENCEDKV_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) FENCEDKV_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) FENCEDKV_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) \
  FENCEDKV_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRE(...) FENCEDKV_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) FENCEDKV_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) FENCEDKV_THREAD_ANNOTATION(assert_capability(x))
#define EXCLUSIVE_LOCKS_REQUIRED(...) \
  FENCEDKV_THREAD_ANNOTATION(exclusive_locks_required(__VA_ARGS__))
#define REQUIRES(...) EXCLUSIVE_LOCKS_REQUIRED(__VA_ARGS__)
#define LOCKS_EXCLUDED(...) \
  FENCEDKV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS \
  FENCEDKV_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // FENCEDKV_ENGINE_UTIL_THREAD_ANNOTATIONS_H_
