// Copyright (c) fencedkv authors.
//
// The acceptance rule as pure functions of (mode, offered, max, floor), so it
// can be tested exhaustively without RocksDB.

#ifndef FENCEDKV_ENGINE_DB_FENCE_CHECK_H_
#define FENCEDKV_ENGINE_DB_FENCE_CHECK_H_

#include "fencedkv/options.h"
#include "fencedkv/status.h"
#include "fencedkv/token.h"

namespace fencedkv {

enum class Verdict : uint8_t {
  kAccept = 0,
  kBelowMax,     // monotonic: offered < max
  kNotAboveMax,  // strict: offered <= max
  kBelowFloor,   // offered < floor (checked first, in both modes)
};

// Whether a write with `offered` is accepted by a domain whose stored max is
// `max`, under the global `floor` (0 = none).
inline Verdict CheckWrite(FenceMode mode, Token offered, Token max,
                          Token floor) {
  if (offered < floor) return Verdict::kBelowFloor;
  if (mode == FenceMode::kStrict) {
    return offered > max ? Verdict::kAccept : Verdict::kNotAboveMax;
  }
  return offered >= max ? Verdict::kAccept : Verdict::kBelowMax;
}

// Fenced reads use the monotonic rule in both modes: the holder that wrote
// with token t may read with t.
inline Verdict CheckRead(Token offered, Token max, Token floor) {
  return CheckWrite(FenceMode::kMonotonic, offered, max, floor);
}

// Whether the floor makes a stored max irrelevant: every token the floor
// admits passes this max too, so the record may be dropped (and is reported
// as 0). Monotonic: max <= floor. Strict: max < floor (a strict domain at
// max == floor still refuses the floor token itself).
inline bool SubsumedByFloor(FenceMode mode, Token max, Token floor) {
  if (floor == 0) return false;
  return mode == FenceMode::kStrict ? max < floor : max <= floor;
}

// The effective max reported to users (GetFence, GetFenced, AdvanceFence):
// the one number that, with the mode's rule alone, tells which tokens the
// domain accepts. Monotonic: max(stored, floor) (accept t >= it). Strict:
// max(stored, floor - 1) (accept t > it). Records the floor subsumes do not
// change it, so it never depends on whether compaction dropped them yet.
inline Token ReportedMax(FenceMode mode, Token max, Token floor) {
  if (floor == 0) return max;
  const Token from_floor = mode == FenceMode::kStrict ? floor - 1 : floor;
  return max > from_floor ? max : from_floor;
}

// The stored max that AdvanceFence(token) raises a domain to: the largest
// max that refuses every token below `token` and still admits `token`, so
// the new holder that advanced can write with its own token. Monotonic:
// `token` (accept t >= max). Strict: `token - 1` (accept t > max). 0 means
// nothing to raise (a strict advance to 1 refuses nothing).
inline Token AdvanceTarget(FenceMode mode, Token token) {
  return mode == FenceMode::kStrict ? token - 1 : token;
}

// The InvalidArgument status for token 0, which no fenced operation takes
// (a write takes it only as "unfenced", with Options::allow_unfenced).
Status InvalidTokenZero();

// A StaleToken status for a refused verdict (verdict != kAccept).
Status StaleStatus(Verdict verdict, Token offered, Token max, Token floor,
                   std::string_view domain, int64_t batch_index);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_FENCE_CHECK_H_
