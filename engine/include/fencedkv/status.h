// Copyright (c) fencedkv authors.
//
// A Status reports the outcome of an operation: success, or an error with a
// code from a closed set and a human-readable message. A stale-token
// rejection has its own code and carries its details (offered token, current
// max, domain) so callers never parse text.
//
// Status is a small value type: copying one is cheap (a shared, immutable
// representation) and an OK status allocates nothing. Multiple threads may
// read the same Status concurrently.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_STATUS_H_
#define FENCEDKV_INCLUDE_FENCEDKV_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fencedkv/token.h"

namespace fencedkv {

// Why a token was refused.
enum class StaleReason : uint8_t {
  kBelowMax = 0,     // token < max (monotonic mode)
  kNotAboveMax = 1,  // token <= max (strict mode)
  kBelowFloor = 2,   // token < the global fence floor
};

// The machine-readable part of a stale-token rejection.
struct StaleTokenInfo {
  Token offered = 0;   // the token the caller sent
  Token max = 0;       // the domain's max (or the floor, for kBelowFloor)
  std::string domain;  // the fence domain (raw bytes) that refused it
  StaleReason reason = StaleReason::kBelowMax;
  // For DB::Write: the index of the first stale operation in the batch;
  // -1 for single-key calls.
  int64_t batch_index = -1;
};

class Status {
 public:
  // The values are part of the API (they may be logged or sent over the
  // wire); never renumber them.
  enum class Code : uint8_t {
    kOk = 0,
    kNotFound = 1,
    kCorruption = 2,
    kNotSupported = 3,
    kInvalidArgument = 4,
    kIOError = 5,
    kStaleToken = 6,
    kBusy = 7,        // e.g. the database is locked by another process
    kLeaseHeld = 8,   // lease service: the lease belongs to another holder
    kLeaseLost = 9,   // lease service: caller no longer holds the lease
    kShutdown = 10,   // the server or DB is shutting down
    kTokenSkew = 11,  // a token too far above what the token source issued
    kReadOnly = 12,   // the database follows a primary (DB::SetFollowing)
  };

  // Creates a success status.
  Status() noexcept = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg, std::string_view msg2 = {});
  static Status Corruption(std::string_view msg, std::string_view msg2 = {});
  static Status NotSupported(std::string_view msg, std::string_view msg2 = {});
  static Status InvalidArgument(std::string_view msg,
                                std::string_view msg2 = {});
  static Status IOError(std::string_view msg, std::string_view msg2 = {});
  static Status Busy(std::string_view msg, std::string_view msg2 = {});
  static Status LeaseHeld(std::string_view msg, std::string_view msg2 = {});
  static Status LeaseLost(std::string_view msg, std::string_view msg2 = {});
  static Status Shutdown(std::string_view msg, std::string_view msg2 = {});
  static Status TokenSkew(std::string_view msg, std::string_view msg2 = {});
  static Status ReadOnly(std::string_view msg, std::string_view msg2 = {});
  // A stale-token rejection. The message is derived from `info`.
  static Status StaleToken(StaleTokenInfo info);

  bool ok() const { return rep_ == nullptr; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsNotSupported() const { return code() == Code::kNotSupported; }
  bool IsInvalidArgument() const { return code() == Code::kInvalidArgument; }
  bool IsIOError() const { return code() == Code::kIOError; }
  bool IsStaleToken() const { return code() == Code::kStaleToken; }
  bool IsBusy() const { return code() == Code::kBusy; }
  bool IsLeaseHeld() const { return code() == Code::kLeaseHeld; }
  bool IsLeaseLost() const { return code() == Code::kLeaseLost; }
  bool IsShutdown() const { return code() == Code::kShutdown; }
  bool IsTokenSkew() const { return code() == Code::kTokenSkew; }
  bool IsReadOnly() const { return code() == Code::kReadOnly; }

  Code code() const;

  // The details of a stale-token rejection; nullptr unless IsStaleToken().
  const StaleTokenInfo* stale() const;

  // The message without the code name ("" for OK).
  std::string_view message() const;

  // "OK", or "<Code name>: <message>", e.g.
  // `Stale token: token 7 < max 8 for domain "k"`.
  std::string ToString() const;

 private:
  struct Rep;
  Status(Code code, std::string_view msg, std::string_view msg2);

  std::shared_ptr<const Rep> rep_;  // nullptr means OK
};

// Renders raw domain/key bytes for messages: printable ASCII as is, quotes,
// backslashes and other bytes escaped (\", \\, \xNN).
std::string EscapeBytes(std::string_view bytes);
// The same for at most the first `max_bytes` of `bytes`; a longer input
// ends with "...(N bytes)". A stale token's message names its domain with
// it (StaleTokenInfo::domain keeps all of it): an 8 MiB key made a 32 MiB
// message, and a 64 KiB one a 256 KiB -STALE line.
std::string EscapeBytesBounded(std::string_view bytes, size_t max_bytes = 256);

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_STATUS_H_
