// Copyright (c) fencedkv authors.
//
// The soft open files limit raised to the hard one, as Redis does: the
// server for --maxclients, fencedkv-admin for a store's SST files (a
// read-only open holds every one open).

#ifndef FENCEDKV_ENGINE_UTIL_OPEN_FILES_LIMIT_H_
#define FENCEDKV_ENGINE_UTIL_OPEN_FILES_LIMIT_H_

#include <sys/resource.h>

namespace fencedkv {

// True if the soft limit was below the hard one and is now raised to it;
// *from and *to (if not null) are then the old and the new soft limit.
inline bool RaiseOpenFilesLimit(rlim_t* from = nullptr, rlim_t* to = nullptr) {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 ||
      nofile.rlim_cur >= nofile.rlim_max) {
    return false;
  }
  const rlim_t soft = nofile.rlim_cur;
  nofile.rlim_cur = nofile.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) return false;
  if (from != nullptr) *from = soft;
  if (to != nullptr) *to = nofile.rlim_max;
  return true;
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_OPEN_FILES_LIMIT_H_
