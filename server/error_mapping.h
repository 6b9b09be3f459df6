// Copyright (c) fencedkv authors.
//
// The single table from a Status to a Redis error line ("CODE message",
// without the leading '-'). Clients match on the code:
//   StaleToken      -> "STALE token 7 < max 8 (domain \"k\")"
//   InvalidArgument -> "ERR ..."
//   LeaseHeld       -> "LEASED ..."      LeaseLost -> "LEASELOST ..."
//   Busy            -> "BUSY ..."        Shutdown  -> "SHUTDOWN ..."
//   IOError         -> "IOERR ..."       Corruption -> "CORRUPTION ..."
//   NotFound, NotSupported, others -> "ERR ..."

#ifndef FENCEDKV_SERVER_ERROR_MAPPING_H_
#define FENCEDKV_SERVER_ERROR_MAPPING_H_

#include <string>

#include "fencedkv/status.h"

namespace fencedkv {
namespace server {

// REQUIRES: !s.ok(). With `with_command_index` (EXEC), a stale batch op's
// index is appended as " at command N" (1-based).
std::string ErrorLine(const Status& s, bool with_command_index = false);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_ERROR_MAPPING_H_
