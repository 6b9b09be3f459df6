// Copyright (c) fencedkv authors.
//
// Clang thread-safety annotations (no-ops with other compilers), as in
// leveldb/port/thread_annotations.h. Build with clang -Wthread-safety to have
// the compiler check them.

#ifndef FENCEDKV_ENGINE_UTIL_THREAD_ANNOTATIONS_H_
#define FENCEDKV_ENGINE_UTIL_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define FENCEDKV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define FENCEDKV_THREAD_ANNOTATION(x)
#endif

#define GUARDED_BY(x) FENCEDKV_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) FENCEDKV_THREAD_ANNOTATION(pt_guarded_by(x))
#define EXCLUSIVE_LOCKS_REQUIRED(...) \
  FENCEDKV_THREAD_ANNOTATION(exclusive_locks_required(__VA_ARGS__))
#define LOCKS_EXCLUDED(...) \
  FENCEDKV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS \
  FENCEDKV_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // FENCEDKV_ENGINE_UTIL_THREAD_ANNOTATIONS_H_
