// Copyright (c) fencedkv authors.

#include "resp_parser.h"

#include <cctype>
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
    if (body + static_cast<size_t>(len) + 2 > n) return Result::kNeedMore;
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
  const char* p = buf;
  while (p < line_end) {
    while (p < line_end && (*p == ' ' || *p == '\t')) ++p;
    if (p == line_end) break;
    if (*p == '"' || *p == '\'') {
      const char quote = *p++;
      const char* start = p;
      while (p < line_end && *p != quote) ++p;
      if (p == line_end) return Fail("unbalanced quotes in request");
      args->emplace_back(start, static_cast<size_t>(p - start));
      ++p;
      // As Redis: a closing quote ends the argument ("ab"cd is refused).
      if (p < line_end && *p != ' ' && *p != '\t') {
        return Fail("unbalanced quotes in request");
      }
    } else {
      const char* start = p;
      while (p < line_end && *p != ' ' && *p != '\t') ++p;
      args->emplace_back(start, static_cast<size_t>(p - start));
    }
  }
  return Result::kCommand;  // an empty line yields no args: skipped
}

void RespParser::ShrinkScratch() {
  if (!in_array_ && spans_.capacity() > 1024) {
    std::vector<std::pair<size_t, size_t>>().swap(spans_);
  }
}

bool GlobMatch(std::string_view pattern, std::string_view text, bool nocase) {
  auto lower = [&](char c) {
    return nocase ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                  : c;
  };
  size_t p = 0, t = 0;
  size_t star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (pc == '*') {
        while (p < pattern.size() && pattern[p] == '*') ++p;
        if (p == pattern.size()) return true;
        star_p = p;
        star_t = t;
        continue;
      }
      bool matched = false;
      size_t next_p = p + 1;
      if (pc == '?') {
        matched = true;
      } else if (pc == '[') {
        size_t q = p + 1;
        const bool negate = q < pattern.size() && pattern[q] == '^';
        if (negate) ++q;
        bool found = false;
        while (q < pattern.size() && pattern[q] != ']') {
          if (pattern[q] == '\\' && q + 1 < pattern.size()) {
            ++q;
            if (lower(pattern[q]) == lower(text[t])) found = true;
          } else if (q + 2 < pattern.size() && pattern[q + 1] == '-' &&
                     pattern[q + 2] != ']') {
            char lo = lower(pattern[q]), hi = lower(pattern[q + 2]);
            if (lo > hi) std::swap(lo, hi);
            const char c = lower(text[t]);
            if (c >= lo && c <= hi) found = true;
            q += 2;
          } else if (lower(pattern[q]) == lower(text[t])) {
            found = true;
          }
          ++q;
        }
        matched = negate ? !found : found;
        next_p = q < pattern.size() ? q + 1 : q;
      } else if (pc == '\\' && p + 1 < pattern.size()) {
        matched = lower(pattern[p + 1]) == lower(text[t]);
        next_p = p + 2;
      } else {
        matched = lower(pc) == lower(text[t]);
      }
      if (matched) {
        p = next_p;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace server
}  // namespace fencedkv
