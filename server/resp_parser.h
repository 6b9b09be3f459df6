// Copyright (c) fencedkv authors.
//
// Incremental decoding of client requests in the Redis protocol: RESP arrays
// of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") and inline commands
// ("GET k\r\n", as telnet users type). Pure: no I/O, no DB -- fuzzable.
//
// Every size is bounded: a request larger than max_request_bytes, an array
// of more than max_args elements, an inline line over max_inline_bytes or a
// malformed frame is an error (the server answers "-ERR Protocol error: ..."
// and closes that connection). Before AUTH the bounds are Redis 7's: at most
// 10 arguments of at most 16 KiB each (set_authenticated).
//
// Not thread-safe; one parser per connection.

#ifndef FENCEDKV_SERVER_RESP_PARSER_H_
#define FENCEDKV_SERVER_RESP_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fencedkv {
namespace server {

class RespParser {
 public:
  struct Limits {
    size_t max_request_bytes = 64 << 20;  // one command, all arguments
    size_t max_args = 1 << 20;
    size_t max_inline_bytes = 64 << 10;  // inline commands
    // Until set_authenticated(true): "unauthenticated multibulk length"
    // past max_unauth_args, "unauthenticated bulk length" past
    // max_unauth_bulk_bytes.
    size_t max_unauth_args = 10;
    size_t max_unauth_bulk_bytes = 16 << 10;
  };
  enum class Result { kNeedMore, kCommand, kError };

  explicit RespParser(const Limits& limits) : limits_(limits) {}

  // Parses the next command from buf[0, n), which starts where the previous
  // command ended (the caller drops consumed bytes and may move the buffer
  // between calls; the parser keeps only offsets). On kCommand, *args views
  // into buf (an inline command's: into the parser, until the next Parse)
  // and *consumed is the command's length. On kNeedMore, call again
  // with the same bytes and more. On kError, error() says why.
  Result Parse(const char* buf, size_t n, std::vector<std::string_view>* args,
               size_t* consumed);

  const std::string& error() const { return error_; }

  // After kNeedMore: how many bytes from the command's start it needs at
  // least, when a bulk length says so (0 when not known). A reader grows
  // its buffer to that at once.
  size_t bytes_needed() const { return needed_; }

  // Whether the connection has authenticated (the default): the limits of
  // the commands parsed from now on.
  void set_authenticated(bool authenticated) { authenticated_ = authenticated; }

  // Frees scratch memory a large request left behind. Call between commands.
  void ShrinkScratch();

 private:
  Result ParseInline(const char* buf, size_t n,
                     std::vector<std::string_view>* args, size_t* consumed);
  Result Fail(std::string msg);
  void Reset();

  const Limits limits_;
  bool authenticated_ = true;
  std::string error_;
  // Progress through a partially received array.
  bool in_array_ = false;
  long long expected_ = 0;  // elements in the array
  size_t pos_ = 0;          // parse position (offset from the command start)
  size_t needed_ = 0;       // bytes_needed()
  std::vector<std::pair<size_t, size_t>> spans_;  // (offset, length)
  std::string inline_;  // an inline command's arguments, unescaped
};

// A Redis glob pattern (stringmatchlen): *, ?, [abc], [^a], [a-z], \x.
// Compiled once (a class is a 256-bit set), then matched against many keys
// with bounded work: one Match takes at most kStepsPerByte steps per byte of
// the text, plus the pattern's length, whatever the pattern (the greedy
// two-pointer match with '*' backtracking is O(pattern x text) at worst: a
// 16 KB pattern on a 64 KiB key took 4 s). Past that budget Match gives up
// with kTooCostly: commands then refuse the pattern with a clear error.
//
// Compiling is linear in the pattern's length (a class's ranges are set as
// bit ranges, a few word operations each) and its result is bounded: a
// pattern of more than kMaxPatternBytes bytes or kMaxClasses character
// classes is not compiled (ok() is false, error() says why, and it matches
// nothing), so a compiled pattern holds at most 4 bytes per pattern byte
// plus 32 bytes per class: 4 MiB + 32 KiB. (Before these bounds a 9 MB
// pattern of 3M classes took 200 MB, and 256 probes per range made a 1 MB
// class cost 0.3 s to compile.)
//
// Immutable once built; Match is safe to call concurrently.
class GlobPattern {
 public:
  enum class Result { kMatch, kNoMatch, kTooCostly };
  static constexpr size_t kStepsPerByte = 32;
  static constexpr size_t kMaxPatternBytes = 1 << 20;
  static constexpr size_t kMaxClasses = 1024;

  explicit GlobPattern(std::string_view pattern, bool nocase = false);
  Result Match(std::string_view text) const;

  // False if the pattern is over a bound; error() then says which, as
  // "pattern too ...: ..." (commands answer "-ERR " + error()).
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  enum class Kind : uint8_t { kLiteral, kAny, kStar, kClass };
  struct Item {
    Kind kind;
    unsigned char c;  // kLiteral (lower case with nocase)
    uint16_t set;     // kClass: index into sets_ (< kMaxClasses)
  };
  // 256 bits, one per byte value.
  struct ByteSet {
    uint64_t w[4] = {0, 0, 0, 0};
    void SetRange(unsigned lo, unsigned hi);  // [lo, hi], lo <= hi <= 255
    bool Has(unsigned char c) const { return (w[c >> 6] >> (c & 63)) & 1; }
  };
  bool Matches(const Item& item, unsigned char c) const;

  const bool nocase_;
  std::string error_;
  std::vector<Item> items_;
  size_t last_star_ = SIZE_MAX;  // index of the last kStar item
  std::vector<ByteSet> sets_;
};

// GlobPattern(pattern, nocase).Match(text) == kMatch: false when the match
// would cost more than its budget.
bool GlobMatch(std::string_view pattern, std::string_view text,
               bool nocase = false);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_RESP_PARSER_H_
