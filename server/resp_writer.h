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
void UInteger(std::string* out, uint64_t v);  // tokens beyond int64 stay exact
void Bulk(std::string* out, std::string_view s);
void Null(std::string* out);       // "$-1\r\n"
void NullArray(std::string* out);  // "*-1\r\n"
void ArrayHeader(std::string* out, size_t n);

}  // namespace resp
}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_RESP_WRITER_H_
