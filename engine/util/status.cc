// Copyright (c) fencedkv authors.

#include "fencedkv/status.h"

#include <cstdio>

namespace fencedkv {

struct Status::Rep {
  Code code;
  std::string msg;
  StaleTokenInfo stale;
};

namespace {

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kNotFound:
      return "NotFound";
    case Status::Code::kCorruption:
      return "Corruption";
    case Status::Code::kNotSupported:
      return "Not supported";
    case Status::Code::kInvalidArgument:
      return "Invalid argument";
    case Status::Code::kIOError:
      return "IO error";
    case Status::Code::kStaleToken:
      return "Stale token";
    case Status::Code::kBusy:
      return "Busy";
    case Status::Code::kLeaseHeld:
      return "Lease held";
    case Status::Code::kLeaseLost:
      return "Lease lost";
    case Status::Code::kShutdown:
      return "Shutdown";
    case Status::Code::kTokenSkew:
      return "Token skew";
    case Status::Code::kReadOnly:
      return "Read only";
  }
  return "Unknown code";
}

}  // namespace

std::string EscapeBytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out.append(buf);
    }
  }
  return out;
}

std::string EscapeBytesBounded(std::string_view bytes, size_t max_bytes) {
  if (bytes.size() <= max_bytes) return EscapeBytes(bytes);
  return EscapeBytes(bytes.substr(0, max_bytes)) + "...(" +
         std::to_string(bytes.size()) + " bytes)";
}

Status::Status(Code code, std::string_view msg, std::string_view msg2) {
  auto rep = std::make_shared<Rep>();
  rep->code = code;
  rep->msg.assign(msg);
  if (!msg2.empty()) {
    rep->msg.append(": ");
    rep->msg.append(msg2);
  }
  rep_ = std::move(rep);
}

#define FENCEDKV_STATUS_FACTORY(Name)                                \
  Status Status::Name(std::string_view msg, std::string_view msg2) { \
    return Status(Code::k##Name, msg, msg2);                         \
  }
FENCEDKV_STATUS_FACTORY(NotFound)
FENCEDKV_STATUS_FACTORY(Corruption)
FENCEDKV_STATUS_FACTORY(NotSupported)
FENCEDKV_STATUS_FACTORY(InvalidArgument)
FENCEDKV_STATUS_FACTORY(IOError)
FENCEDKV_STATUS_FACTORY(Busy)
FENCEDKV_STATUS_FACTORY(LeaseHeld)
FENCEDKV_STATUS_FACTORY(LeaseLost)
FENCEDKV_STATUS_FACTORY(Shutdown)
FENCEDKV_STATUS_FACTORY(TokenSkew)
FENCEDKV_STATUS_FACTORY(ReadOnly)
#undef FENCEDKV_STATUS_FACTORY

Status Status::StaleToken(StaleTokenInfo info) {
  auto rep = std::make_shared<Rep>();
  rep->code = Code::kStaleToken;
  const char* op = "<";
  const char* what = "max";
  if (info.reason == StaleReason::kNotAboveMax) op = "<=";
  if (info.reason == StaleReason::kBelowFloor) what = "floor";
  rep->msg = "token " + std::to_string(info.offered) + " " + op + " " + what +
             " " + std::to_string(info.max) + " for domain \"" +
             EscapeBytesBounded(info.domain) + "\"";
  if (info.batch_index >= 0) {
    rep->msg += " (batch op " + std::to_string(info.batch_index) + ")";
  }
  rep->stale = std::move(info);
  Status s;
  s.rep_ = std::move(rep);
  return s;
}

Status::Code Status::code() const {
  return rep_ == nullptr ? Code::kOk : rep_->code;
}

const StaleTokenInfo* Status::stale() const {
  return IsStaleToken() ? &rep_->stale : nullptr;
}

std::string_view Status::message() const {
  return rep_ == nullptr ? std::string_view() : std::string_view(rep_->msg);
}

std::string Status::ToString() const {
  if (rep_ == nullptr) return "OK";
  std::string out = CodeName(rep_->code);
  out.append(": ");
  out.append(rep_->msg);
  return out;
}

}  // namespace fencedkv
