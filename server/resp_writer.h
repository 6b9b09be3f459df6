// Copyright (c) fencedkv authors.
//
// RESP2 reply encoders, appending to a connection's output buffer.

#ifndef FENCEDKV_SERVER_RESP_WRITER_H_
#define FENCEDKV_SERVER_RESP_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace fencedkv {
namespace server {
namespace resp {

// "+OK\r\n". `s` must not contain CR or LF (they are replaced by spaces).
void Simple(std::string* out, std::string_view s);
// "-CODE message\r\n". `line` is "CODE message"; CR/LF replaced by spaces.
void Error(std::string* out, std::string_view line);
void Integer(std::string* out, int64_t v);
// For values below 2^63 only (ids): a RESP2 integer is signed 64-bit, and
// clients refuse a larger one (redis-cli: "Bad integer value").
void UInteger(std::string* out, uint64_t v);
// A fencing token (1..2^64-1, or 0 for "none"): always a bulk string of its
// decimal form, so the reply's type never depends on the token's size.
void BulkNumber(std::string* out, uint64_t v);
void Bulk(std::string* out, std::string_view s);
void Null(std::string* out);       // "$-1\r\n"
void NullArray(std::string* out);  // "*-1\r\n"
void ArrayHeader(std::string* out, size_t n);

}  // namespace resp
}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_RESP_WRITER_H_
