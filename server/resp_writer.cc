// Copyright (c) fencedkv authors.

#include "resp_writer.h"

#include <charconv>

namespace fencedkv {
namespace server {
namespace resp {

namespace {
void AppendLine(std::string* out, char type, std::string_view s) {
  out->push_back(type);
  const size_t start = out->size();
  out->append(s);
  for (size_t i = start; i < out->size(); ++i) {
    if ((*out)[i] == '\r' || (*out)[i] == '\n') (*out)[i] = ' ';
  }
  out->append("\r\n", 2);
}
template <typename T>
void AppendNumberLine(std::string* out, char type, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->push_back(type);
  out->append(buf, static_cast<size_t>(r.ptr - buf));
  out->append("\r\n", 2);
}
}  // namespace

void Simple(std::string* out, std::string_view s) { AppendLine(out, '+', s); }
void Error(std::string* out, std::string_view line) {
  AppendLine(out, '-', line);
}
void Integer(std::string* out, int64_t v) { AppendNumberLine(out, ':', v); }
void UInteger(std::string* out, uint64_t v) { AppendNumberLine(out, ':', v); }
void BulkNumber(std::string* out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  Bulk(out, std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}
void Bulk(std::string* out, std::string_view s) {
  AppendNumberLine(out, '$', s.size());
  out->append(s);
  out->append("\r\n", 2);
}
void Null(std::string* out) { out->append("$-1\r\n", 5); }
void NullArray(std::string* out) { out->append("*-1\r\n", 5); }
void ArrayHeader(std::string* out, size_t n) { AppendNumberLine(out, '*', n); }

}  // namespace resp
}  // namespace server
}  // namespace fencedkv
