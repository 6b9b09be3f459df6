// Copyright (c) fencedkv authors.

#include "db/fence_format.h"

#include "util/coding.h"

namespace fencedkv {
namespace format {

void EncodeDataHeader(char* buf, RecordKind kind, Token token) {
  buf[0] = static_cast<char>(kind);
  EncodeFixed64(buf + 1, token);
}

bool DecodeDataRecord(std::string_view raw, DataRecord* record) {
  if (raw.size() < kDataHeaderSize) return false;
  const auto kind = static_cast<RecordKind>(static_cast<uint8_t>(raw[0]));
  if (kind != RecordKind::kValue && kind != RecordKind::kNoValue) return false;
  if (kind == RecordKind::kNoValue && raw.size() != kDataHeaderSize) {
    return false;
  }
  record->kind = kind;
  record->token = DecodeFixed64(raw.data() + 1);
  record->value = raw.substr(kDataHeaderSize);
  return true;
}

std::string EncodeToken(Token token) {
  std::string out;
  PutFixed64(&out, token);
  return out;
}

bool DecodeToken(std::string_view raw, Token* token) {
  if (raw.size() != 8) return false;
  *token = DecodeFixed64(raw.data());
  return true;
}

}  // namespace format
}  // namespace fencedkv
