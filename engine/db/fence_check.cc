// Copyright (c) fencedkv authors.

#include "db/fence_check.h"

#include <string>

namespace fencedkv {

Status InvalidTokenZero() {
  return Status::InvalidArgument(
      "invalid token 0: a fencing token is an integer in [1, 2^64-1]");
}

Status StaleStatus(Verdict verdict, Token offered, Token max, Token floor,
                   std::string_view domain, int64_t batch_index) {
  StaleTokenInfo info;
  info.offered = offered;
  info.domain = std::string(domain);
  info.batch_index = batch_index;
  switch (verdict) {
    case Verdict::kBelowFloor:
      info.reason = StaleReason::kBelowFloor;
      info.max = floor;
      break;
    case Verdict::kNotAboveMax:
      info.reason = StaleReason::kNotAboveMax;
      info.max = max;
      break;
    default:
      info.reason = StaleReason::kBelowMax;
      info.max = max;
      break;
  }
  return Status::StaleToken(std::move(info));
}

}  // namespace fencedkv
