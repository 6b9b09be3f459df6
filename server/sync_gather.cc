// Copyright (c) fencedkv authors.

#include "sync_gather.h"

#include <algorithm>

namespace fencedkv {
namespace server {

bool SyncGather::KeepGathering(size_t batches, size_t max_batches,
                               Clock::time_point now) {
  const std::chrono::nanoseconds limit = bound();
  if (limit.count() <= 0 || batches >= max_batches) {
    gathering_ = false;
    return false;
  }
  if (!gathering_) {
    gathering_ = true;
    started_ = now;
    seen_ = batches;
    return true;
  }
  if (batches > seen_ && now - started_ < limit) {
    seen_ = batches;
    return true;
  }
  gathering_ = false;
  return false;
}

void SyncGather::RecordWrite(std::chrono::nanoseconds took) {
  if (took.count() < 0) took = std::chrono::nanoseconds(0);
  // An average over the last eight or so, so one slow fsync (a flush, a
  // busy disk) neither stops gathering nor lets it run long.
  if (average_.count() == 0) {
    average_ = took;
  } else {
    average_ += (took - average_) / 8;
  }
}

std::chrono::nanoseconds SyncGather::bound() const {
  return std::min<std::chrono::nanoseconds>(cap_, average_);
}

}  // namespace server
}  // namespace fencedkv
