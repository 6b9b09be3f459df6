// Copyright (c) fencedkv authors.
//
// Names the calling thread as `top -H`, `ps -L`, gdb and perf show it. Every
// thread fencedkv starts names itself "fencedkv:<role>" (RocksDB's own are
// "rocksdb:low" / "rocksdb:high"). Linux keeps 15 characters and refuses a
// longer name: one is cut to them.

#ifndef FENCEDKV_ENGINE_UTIL_THREAD_NAME_H_
#define FENCEDKV_ENGINE_UTIL_THREAD_NAME_H_

#include <string>

#include <pthread.h>

namespace fencedkv {

inline void SetThreadName(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_THREAD_NAME_H_
