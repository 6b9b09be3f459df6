// Copyright (c) fencedkv authors.

#include "resp_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

namespace fencedkv {
namespace server {

namespace {

// Parses a decimal integer line ending at `end` (exclusive). Returns false on
// anything but an optional '-' and 1..18 digits.
bool ParseLineInt(const char* p, const char* end, long long* out) {
  bool neg = false;
  if (p < end && *p == '-') {
    neg = true;
    ++p;
  }
  if (p == end || end - p > 18) return false;
  // As Redis's string2ll: no leading zero, no "-0".
  if (*p == '0' && (end - p > 1 || neg)) return false;
  long long v = 0;
  for (; p < end; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
  }
  *out = neg ? -v : v;
  return true;
}

// Finds "\r\n" in [p, end); nullptr if absent.
const char* FindCrlf(const char* p, const char* end) {
  while (p < end) {
    const void* cr = std::memchr(p, '\r', static_cast<size_t>(end - p));
    if (cr == nullptr) return nullptr;
    const char* c = static_cast<const char*>(cr);
    if (c + 1 >= end) return nullptr;  // need the '\n'
    if (c[1] == '\n') return c;
    p = c + 1;
  }
  return nullptr;
}

}  // namespace

void RespParser::Reset() {
  needed_ = 0;
  in_array_ = false;
  expected_ = 0;
  pos_ = 0;
  spans_.clear();
}

RespParser::Result RespParser::Fail(std::string msg) {
  error_ = "Protocol error: " + std::move(msg);
  Reset();
  return Result::kError;
}

RespParser::Result RespParser::Parse(const char* buf, size_t n,
                                     std::vector<std::string_view>* args,
                                     size_t* consumed) {
  const char* end = buf + n;
  if (!in_array_) {
    if (n == 0) return Result::kNeedMore;
    if (buf[0] != '*') return ParseInline(buf, n, args, consumed);
    const char* crlf = FindCrlf(buf + 1, end);
    if (crlf == nullptr) {
      if (n > 32) return Fail("invalid multibulk length");
      return Result::kNeedMore;
    }
    long long count = 0;
    if (!ParseLineInt(buf + 1, crlf, &count))
      return Fail("invalid multibulk length");
    if (!authenticated_ &&
        count > static_cast<long long>(limits_.max_unauth_args)) {
      return Fail("unauthenticated multibulk length");
    }
    if (count > static_cast<long long>(limits_.max_args)) {
      return Fail("invalid multibulk length");
    }
    pos_ = static_cast<size_t>(crlf + 2 - buf);
    if (count <= 0) {  // "*0" / "*-1": an empty request, skipped as Redis does
      *consumed = pos_;
      Reset();
      args->clear();
      return Result::kCommand;
    }
    in_array_ = true;
    expected_ = count;
    spans_.clear();
    spans_.reserve(static_cast<size_t>(std::min<long long>(count, 1024)));
  }
  while (static_cast<long long>(spans_.size()) < expected_) {
    const char* p = buf + pos_;
    if (p >= end) return Result::kNeedMore;
    if (*p != '$') {
      return Fail(std::string("expected '$', got '") +
                  (std::isprint(static_cast<unsigned char>(*p)) ? *p : '?') +
                  "'");
    }
    const char* crlf = FindCrlf(p + 1, end);
    if (crlf == nullptr) {
      if (end - p > 32) return Fail("invalid bulk length");
      return Result::kNeedMore;
    }
    long long len = 0;
    if (!ParseLineInt(p + 1, crlf, &len) || len < 0)
      return Fail("invalid bulk length");
    if (!authenticated_ &&
        static_cast<unsigned long long>(len) > limits_.max_unauth_bulk_bytes) {
      return Fail("unauthenticated bulk length");
    }
    if (static_cast<unsigned long long>(len) > limits_.max_request_bytes) {
      return Fail("invalid bulk length");
    }
    const size_t body = static_cast<size_t>(crlf + 2 - buf);
    if (body + static_cast<size_t>(len) > limits_.max_request_bytes) {
      return Fail("request of more than " +
                  std::to_string(limits_.max_request_bytes) +
                  " bytes (max_request_bytes)");
    }
    if (body + static_cast<size_t>(len) + 2 > n) {
      needed_ = body + static_cast<size_t>(len) + 2;
      return Result::kNeedMore;
    }
    const char* tail = buf + body + len;
    if (tail[0] != '\r' || tail[1] != '\n') {
      return Fail("bulk string not terminated by CRLF");
    }
    spans_.emplace_back(body, static_cast<size_t>(len));
    pos_ = body + static_cast<size_t>(len) + 2;
  }
  args->clear();
  args->reserve(spans_.size());
  for (const auto& [off, len] : spans_) args->emplace_back(buf + off, len);
  *consumed = pos_;
  Reset();
  return Result::kCommand;
}

RespParser::Result RespParser::ParseInline(const char* buf, size_t n,
                                           std::vector<std::string_view>* args,
                                           size_t* consumed) {
  const void* nl = std::memchr(buf, '\n', n);
  if (nl == nullptr) {
    if (n > limits_.max_inline_bytes) return Fail("too big inline request");
    return Result::kNeedMore;
  }
  const char* line_end = static_cast<const char*>(nl);
  // The limit holds however the line arrived (in pieces or in one read).
  if (static_cast<size_t>(line_end - buf) > limits_.max_inline_bytes) {
    return Fail("too big inline request");
  }
  *consumed = static_cast<size_t>(line_end - buf) + 1;
  if (line_end > buf && line_end[-1] == '\r') --line_end;
  args->clear();
  // As Redis' sdssplitargs: an argument is a run of non-blanks in which a
  // double-quoted part unescapes \xHH, \n, \r, \t, \b, \a and \<c> (c
  // itself), a single-quoted one only \'; a closing quote must end the
  // argument, and an unclosed one is an error. Arguments are unescaped into
  // inline_ (a line is at most max_inline_bytes), then viewed.
  inline_.clear();
  spans_.clear();
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
  };
  auto hex_value = [](char c) {
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
  };
  // Words end at any isspace() byte, as there (a stray \r too).
  auto blank = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
  };
  const char* p = buf;
  while (p < line_end) {
    while (p < line_end && blank(*p)) ++p;
    if (p == line_end) break;
    const size_t start = inline_.size();
    while (p < line_end && !blank(*p)) {
      if (*p != '"' && *p != '\'') {
        inline_.push_back(*p++);
        continue;
      }
      const char quote = *p++;
      bool closed = false;
      while (p < line_end) {
        if (*p == quote) {
          closed = true;
          ++p;
          break;
        }
        if (quote == '"' && *p == '\\' && p + 3 < line_end && p[1] == 'x' &&
            hex(p[2]) && hex(p[3])) {
          inline_.push_back(
              static_cast<char>(hex_value(p[2]) * 16 + hex_value(p[3])));
          p += 4;
        } else if (quote == '"' && *p == '\\' && p + 1 < line_end) {
          const char c = p[1];
          inline_.push_back(c == 'n'   ? '\n'
                            : c == 'r' ? '\r'
                            : c == 't' ? '\t'
                            : c == 'b' ? '\b'
                            : c == 'a' ? '\a'
                                       : c);
          p += 2;
        } else if (quote == '\'' && *p == '\\' && p + 1 < line_end &&
                   p[1] == '\'') {
          inline_.push_back('\'');
          p += 2;
        } else {
          inline_.push_back(*p++);
        }
      }
      // As Redis: "ab"cd is refused, and so is a quote left open.
      if (!closed || (p < line_end && !blank(*p))) {
        return Fail("unbalanced quotes in request");
      }
    }
    spans_.emplace_back(start, inline_.size() - start);
  }
  for (const auto& [off, len] : spans_) {
    args->emplace_back(inline_.data() + off, len);
  }
  spans_.clear();
  return Result::kCommand;  // an empty line yields no args: skipped
}

void RespParser::ShrinkScratch() {
  if (!in_array_ && spans_.capacity() > 1024) {
    std::vector<std::pair<size_t, size_t>>().swap(spans_);
  }
  if (inline_.capacity() > 1024) std::string().swap(inline_);
}

namespace {
// ASCII only, as Redis' stringmatchlen does in the C locale (the server never
// changes its locale).
inline unsigned char AsciiLower(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c - 'A' + 'a') : c;
}
}  // namespace

void GlobPattern::ByteSet::SetRange(unsigned lo, unsigned hi) {
  for (unsigned word = lo >> 6; word <= hi >> 6; ++word) {
    const unsigned first = std::max(lo, word * 64) - word * 64;
    const unsigned last = std::min(hi, word * 64 + 63) - word * 64;
    const uint64_t upto =
        last == 63 ? ~uint64_t{0} : (uint64_t{1} << (last + 1)) - 1;
    w[word] |= upto & ~((uint64_t{1} << first) - 1);
  }
}

GlobPattern::GlobPattern(std::string_view pattern, bool nocase)
    : nocase_(nocase) {
  if (pattern.size() > kMaxPatternBytes) {
    error_ = "pattern too long: more than " + std::to_string(kMaxPatternBytes) +
             " bytes";
    return;
  }
  auto lower = [&](char c) {
    const auto u = static_cast<unsigned char>(c);
    return nocase ? AsciiLower(u) : u;
  };
  size_t p = 0;
  while (p < pattern.size()) {
    const char pc = pattern[p];
    if (pc == '*') {
      while (p < pattern.size() && pattern[p] == '*') ++p;  // one is enough
      last_star_ = items_.size();
      items_.push_back({Kind::kStar, 0, 0});
    } else if (pc == '?') {
      items_.push_back({Kind::kAny, 0, 0});
      ++p;
    } else if (pc == '[') {
      if (sets_.size() == kMaxClasses) {
        error_ = "pattern too complex: more than " +
                 std::to_string(kMaxClasses) + " character classes";
        items_.clear();
        sets_.clear();
        return;
      }
      // [abc] [^abc] [a-z] [\]]; an unterminated class ends the pattern.
      // Each range's bits are set at once: the class costs O(its length).
      // With nocase the ranges are lowered and so is the byte matched, as
      // in Redis: after the ranges, 'A'..'Z' take the bits of 'a'..'z'.
      size_t q = p + 1;
      const bool negate = q < pattern.size() && pattern[q] == '^';
      if (negate) ++q;
      ByteSet set;
      while (q < pattern.size() && pattern[q] != ']') {
        if (pattern[q] == '\\' && q + 1 < pattern.size()) {
          ++q;
          set.SetRange(lower(pattern[q]), lower(pattern[q]));
        } else if (q + 2 < pattern.size() && pattern[q + 1] == '-' &&
                   pattern[q + 2] != ']') {
          unsigned char lo = lower(pattern[q]), hi = lower(pattern[q + 2]);
          if (lo > hi) std::swap(lo, hi);
          set.SetRange(lo, hi);
          q += 2;
        } else {
          set.SetRange(lower(pattern[q]), lower(pattern[q]));
        }
        ++q;
      }
      if (nocase) {
        // Bits 65..90 ('A'..'Z') and 97..122 ('a'..'z') are in word 1, at
        // 1..26 and 33..58.
        constexpr uint64_t kLetters = (uint64_t{1} << 26) - 1;
        set.w[1] = (set.w[1] & ~(kLetters << 1)) |
                   ((set.w[1] >> 32) & (kLetters << 1));
      }
      if (negate) {
        for (uint64_t& word : set.w) word = ~word;
      }
      items_.push_back({Kind::kClass, 0, static_cast<uint16_t>(sets_.size())});
      sets_.push_back(set);
      p = q < pattern.size() ? q + 1 : q;
    } else if (pc == '\\' && p + 1 < pattern.size()) {
      items_.push_back({Kind::kLiteral, lower(pattern[p + 1]), 0});
      p += 2;
    } else {
      items_.push_back({Kind::kLiteral, lower(pc), 0});
      ++p;
    }
  }
}

bool GlobPattern::Matches(const Item& item, unsigned char c) const {
  switch (item.kind) {
    case Kind::kAny:
      return true;
    case Kind::kLiteral:
      return item.c == (nocase_ ? AsciiLower(c) : c);
    case Kind::kClass:
      return sets_[item.set].Has(c);
    case Kind::kStar:
      break;
  }
  return false;
}

GlobPattern::Result GlobPattern::Match(std::string_view text) const {
  if (!ok()) return Result::kNoMatch;
  // Greedy, left to right; on a mismatch the last '*' takes one more byte
  // and the rest of the pattern is tried again from there.
  // After the last '*' every item takes one byte: that tail can only match
  // the text's last bytes, so it is tried there once (a "*suffix" pattern
  // costs O(text), not O(text x suffix)).
  const size_t n = items_.size();
  const uint64_t budget = kStepsPerByte * (text.size() + 1) + n;
  uint64_t steps = 0;
  size_t p = 0, t = 0;
  size_t star_p = SIZE_MAX, star_t = 0;
  bool anchored = false;  // matching the tail against the text's end
  while (t < text.size()) {
    if (++steps > budget) return Result::kTooCostly;
    if (p < n) {
      if (items_[p].kind == Kind::kStar) {
        if (++p == n) return Result::kMatch;
        if (p >= last_star_ + 1) {
          const size_t tail = n - p;
          if (text.size() - t < tail) return Result::kNoMatch;
          t = text.size() - tail;
          anchored = true;
        }
        star_p = p;
        star_t = t;
        continue;
      }
      if (Matches(items_[p], static_cast<unsigned char>(text[t]))) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star_p == SIZE_MAX || anchored) return Result::kNoMatch;
    p = star_p;
    t = ++star_t;
  }
  while (p < n && items_[p].kind == Kind::kStar) ++p;
  return p == n ? Result::kMatch : Result::kNoMatch;
}

bool GlobMatch(std::string_view pattern, std::string_view text, bool nocase) {
  return GlobPattern(pattern, nocase).Match(text) ==
         GlobPattern::Result::kMatch;
}

}  // namespace server
}  // namespace fencedkv
