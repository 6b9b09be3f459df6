// Copyright (c) fencedkv authors.
//
// A fencing token: an unsigned 64-bit number, 1 .. 2^64-1, issued by a lease
// service in strictly increasing order and carried by every mutation.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_TOKEN_H_
#define FENCEDKV_INCLUDE_FENCEDKV_TOKEN_H_

#include <cstdint>
#include <limits>
#include <string_view>

namespace fencedkv {

using Token = uint64_t;

// The smallest valid token. Token 0 is never a valid fencing token; it is
// reported by GetFence() as "no token accepted yet".
constexpr Token kMinToken = 1;
constexpr Token kMaxToken = std::numeric_limits<uint64_t>::max();

// Parses a token written as a decimal integer in [1, 2^64-1], in canonical
// form: digits only, the first one 1-9 (as Redis reads integers).
//
// This is the one place that decides what text is a token. It rejects the
// empty string, 0 (also "00"), leading zeros ("007", whatever the length),
// a sign ("-1", "+1"), any non-digit, leading or trailing spaces, and numbers
// that overflow 64 bits. On success stores the
// token in *token and returns true; on failure returns false and leaves
// *token unchanged.
bool ParseToken(std::string_view text, Token* token);

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_TOKEN_H_
