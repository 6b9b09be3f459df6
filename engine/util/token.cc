// Copyright (c) fencedkv authors.

#include "fencedkv/token.h"

namespace fencedkv {

bool ParseToken(std::string_view text, Token* token) {
  if (text.empty() || text.size() > 20) return false;  // 2^64-1 has 20 digits
  if (text[0] == '0') return false;  // "0", or a leading zero: not canonical
  Token value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const Token digit = static_cast<Token>(c - '0');
    if (value > (kMaxToken - digit) / 10) return false;  // would overflow
    value = value * 10 + digit;
  }
  if (value < kMinToken) return false;
  *token = value;
  return true;
}

}  // namespace fencedkv
