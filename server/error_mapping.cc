// Copyright (c) fencedkv authors.

#include "error_mapping.h"

namespace fencedkv {
namespace server {

std::string ErrorLine(const Status& s, bool with_command_index) {
  if (s.IsStaleToken()) {
    const StaleTokenInfo* st = s.stale();
    const char* op = st->reason == StaleReason::kNotAboveMax ? "<=" : "<";
    const char* what = st->reason == StaleReason::kBelowFloor ? "floor" : "max";
    std::string line = "STALE token " + std::to_string(st->offered) + " " + op +
                       " " + what + " " + std::to_string(st->max) +
                       " (domain \"" + EscapeBytesBounded(st->domain) + "\")";
    if (with_command_index && st->batch_index >= 0) {
      line += " at command " + std::to_string(st->batch_index + 1);
    }
    return line;
  }
  static const struct {
    Status::Code code;
    const char* prefix;
  } kTable[] = {
      {Status::Code::kInvalidArgument, "ERR"},
      {Status::Code::kLeaseHeld, "LEASED"},
      {Status::Code::kLeaseLost, "LEASELOST"},
      {Status::Code::kBusy, "BUSY"},
      {Status::Code::kShutdown, "SHUTDOWN"},
      {Status::Code::kIOError, "IOERR"},
      {Status::Code::kTokenSkew, "TOKENSKEW"},
      {Status::Code::kReadOnly, "READONLY"},
      {Status::Code::kCorruption, "CORRUPTION"},
      {Status::Code::kNotSupported, "ERR"},
      {Status::Code::kNotFound, "ERR"},
  };
  for (const auto& e : kTable) {
    if (s.code() == e.code)
      return std::string(e.prefix) + " " + std::string(s.message());
  }
  return "ERR " + s.ToString();
}

}  // namespace server
}  // namespace fencedkv
