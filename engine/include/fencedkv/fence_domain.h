// Copyright (c) fencedkv authors.
//
// A fence domain function maps every key to exactly one fence domain; the
// store keeps one max token per domain. The function is chosen when the
// database is created and is stored in it.
//
// Thread safety: a FenceDomainSpec is immutable after Parse(); DomainOf() may
// be called concurrently.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_FENCE_DOMAIN_H_
#define FENCEDKV_INCLUDE_FENCEDKV_FENCE_DOMAIN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fencedkv/status.h"

namespace fencedkv {

class FenceDomainSpec {
 public:
  // The values are persisted; never renumber them.
  enum class Kind : uint8_t {
    kKey = 0,        // "key": the whole key
    kPrefix = 1,     // "prefix:N": the first N bytes (the whole key if shorter)
    kDelimiter = 2,  // "delimiter:C": the bytes before the first C
    kHashtag = 3,    // "hashtag": Redis Cluster hash tag rules
  };

  // The default: one domain per key.
  FenceDomainSpec() = default;

  // Parses "key", "prefix:N" (1 <= N <= 65536), "delimiter:C" (C is exactly
  // one byte) or "hashtag". Returns InvalidArgument naming the bad text
  // otherwise and leaves *spec unchanged.
  static Status Parse(std::string_view text, FenceDomainSpec* spec);

  // The canonical text form, accepted by Parse().
  std::string ToString() const;

  // The domain of `key`: a view into `key` itself, so it lives as long as the
  // key's bytes do. A pure function of the key and the spec.
  //  - kKey: the key.
  //  - kPrefix: the first N bytes.
  //  - kDelimiter: the bytes before the first C, the whole key if C is absent.
  //  - kHashtag: the bytes between the first '{' and the first '}' after it,
  //    if that is non-empty; the whole key otherwise (as Redis Cluster does:
  //    "user:{shard7}:name" -> "shard7", "a{}b" -> "a{}b").
  std::string_view DomainOf(std::string_view key) const;

  Kind kind() const { return kind_; }
  bool is_per_key() const { return kind_ == Kind::kKey; }

  bool operator==(const FenceDomainSpec& other) const {
    return kind_ == other.kind_ && prefix_len_ == other.prefix_len_ &&
           delimiter_ == other.delimiter_;
  }
  bool operator!=(const FenceDomainSpec& other) const {
    return !(*this == other);
  }

 private:
  Kind kind_ = Kind::kKey;
  uint32_t prefix_len_ = 0;
  char delimiter_ = 0;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_FENCE_DOMAIN_H_
