// Copyright (c) fencedkv authors.

#include "fencedkv/options.h"

#include <rocksdb/version.h>

#include "fencedkv/iterator.h"
#include "fencedkv/version.h"

namespace fencedkv {

const char* FenceModeName(FenceMode mode) {
  return mode == FenceMode::kStrict ? "strict" : "monotonic";
}

bool ParseFenceMode(const std::string& text, FenceMode* mode) {
  if (text == "monotonic") {
    *mode = FenceMode::kMonotonic;
  } else if (text == "strict") {
    *mode = FenceMode::kStrict;
  } else {
    return false;
  }
  return true;
}

const char* RocksDBVersion() {
#define FENCEDKV_STR2(x) #x
#define FENCEDKV_STR(x) FENCEDKV_STR2(x)
  return FENCEDKV_STR(ROCKSDB_MAJOR) "." FENCEDKV_STR(
      ROCKSDB_MINOR) "." FENCEDKV_STR(ROCKSDB_PATCH);
#undef FENCEDKV_STR
#undef FENCEDKV_STR2
}

Iterator::~Iterator() = default;

}  // namespace fencedkv
