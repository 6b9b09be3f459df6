// Copyright (c) fencedkv authors.
//
// Names the calling thread as `top -H`, `ps -L`, gdb and perf show it. Every
// thread fencedkv starts names itself "fencedkv:<role>" (RocksDB's own are
// "rocksdb:low" / "rocksdb:high"). Linux keeps 15 characters; a longer name
// is refused by the kernel, so each name here is kept within them.

#ifndef FENCEDKV_ENGINE_UTIL_THREAD_NAME_H_
#define FENCEDKV_ENGINE_UTIL_THREAD_NAME_H_

#include <pthread.h>

namespace fencedkv {

inline void SetThreadName(const char* name) {
  pthread_setname_np(pthread_self(), name);
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_THREAD_NAME_H_
