// Copyright (c) fencedkv authors.

#include "fencedkv/fence_domain.h"

#include <string>

namespace fencedkv {

namespace {
constexpr uint32_t kMaxPrefixLen = 65536;
constexpr std::string_view kPrefix = "prefix:";
constexpr std::string_view kDelimiter = "delimiter:";
}  // namespace

Status FenceDomainSpec::Parse(std::string_view text, FenceDomainSpec* spec) {
  FenceDomainSpec result;
  if (text == "key") {
    result.kind_ = Kind::kKey;
  } else if (text == "hashtag") {
    result.kind_ = Kind::kHashtag;
  } else if (text.substr(0, kPrefix.size()) == kPrefix) {
    std::string_view digits = text.substr(kPrefix.size());
    uint64_t n = 0;
    bool ok = !digits.empty() && digits.size() <= 6;
    for (char c : digits) {
      if (c < '0' || c > '9') ok = false;
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!ok || n < 1 || n > kMaxPrefixLen) {
      return Status::InvalidArgument(
          "invalid fence domain \"" + EscapeBytes(text) +
          "\": prefix:N needs 1 <= N <= " + std::to_string(kMaxPrefixLen));
    }
    result.kind_ = Kind::kPrefix;
    result.prefix_len_ = static_cast<uint32_t>(n);
  } else if (text.substr(0, kDelimiter.size()) == kDelimiter) {
    std::string_view c = text.substr(kDelimiter.size());
    if (c.size() != 1) {
      return Status::InvalidArgument(
          "invalid fence domain \"" + EscapeBytes(text) +
          "\": delimiter:C needs exactly one byte C");
    }
    result.kind_ = Kind::kDelimiter;
    result.delimiter_ = c[0];
  } else {
    return Status::InvalidArgument(
        "invalid fence domain \"" + EscapeBytes(text) +
        "\": expected key | prefix:N | delimiter:C | hashtag");
  }
  *spec = result;
  return Status::OK();
}

std::string FenceDomainSpec::ToString() const {
  switch (kind_) {
    case Kind::kKey:
      return "key";
    case Kind::kPrefix:
      return "prefix:" + std::to_string(prefix_len_);
    case Kind::kDelimiter:
      return std::string("delimiter:") + delimiter_;
    case Kind::kHashtag:
      return "hashtag";
  }
  return "key";
}

std::string_view FenceDomainSpec::DomainOf(std::string_view key) const {
  switch (kind_) {
    case Kind::kKey:
      return key;
    case Kind::kPrefix:
      return key.substr(0, prefix_len_);
    case Kind::kDelimiter: {
      size_t pos = key.find(delimiter_);
      return pos == std::string_view::npos ? key : key.substr(0, pos);
    }
    case Kind::kHashtag: {
      size_t open = key.find('{');
      if (open == std::string_view::npos) return key;
      size_t close = key.find('}', open + 1);
      if (close == std::string_view::npos || close == open + 1) return key;
      return key.substr(open + 1, close - open - 1);
    }
  }
  return key;
}

}  // namespace fencedkv
