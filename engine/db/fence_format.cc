// Copyright (c) fencedkv authors.

#include "db/fence_format.h"

#include "util/coding.h"

namespace fencedkv {
namespace format {

size_t EncodeDataHeader(char* buf, RecordKind kind, Token token) {
  buf[0] = static_cast<char>(kind);
  return static_cast<size_t>(EncodeVarint64(buf + 1, token) - buf);
}

bool DecodeDataRecord(std::string_view raw, DataRecord* record) {
  if (raw.empty()) return false;
  const auto kind = static_cast<RecordKind>(static_cast<uint8_t>(raw[0]));
  if (kind != RecordKind::kValue && kind != RecordKind::kNoValue) return false;
  raw.remove_prefix(1);
  Token token = 0;
  if (!GetVarint64(&raw, &token)) return false;
  if (kind == RecordKind::kNoValue && !raw.empty()) return false;
  record->kind = kind;
  record->token = token;
  record->value = raw;
  return true;
}

Status DecodeDataRecordOf(std::string_view key, std::string_view raw,
                          DataRecord* record) {
  if (DecodeDataRecord(raw, record)) return Status::OK();
  return Status::Corruption(
      "bad data record for key \"" + EscapeBytes(key) + "\"",
      "not written by fencedkv (e.g. by ldb put), or damaged");
}

std::string HighWaterMarkKey(uint32_t stripe) {
  static const char kHex[] = "0123456789abcdef";
  std::string key(kMetaHighWaterMarkPrefix);
  for (int shift = 12; shift >= 0; shift -= 4)
    key += kHex[(stripe >> shift) & 0xf];
  return key;
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

std::string EncodeLeaseRecord(const LeaseRecord& r) {
  std::string out;
  char buf[kMaxVarint64Length];
  out.append(buf, EncodeVarint64(buf, r.holder.size()) - buf);
  out.append(r.holder);
  PutFixed64(&out, r.token);
  PutFixed64(&out, static_cast<uint64_t>(r.expires_at_ms));
  return out;
}

bool DecodeLeaseRecord(std::string_view in, LeaseRecord* r) {
  uint64_t len = 0;
  if (!GetVarint64(&in, &len) || in.size() < len) return false;
  r->holder.assign(in.data(), len);
  in.remove_prefix(len);
  uint64_t expires = 0;
  if (!GetFixed64(&in, &r->token) || !GetFixed64(&in, &expires) ||
      !in.empty()) {
    return false;
  }
  r->expires_at_ms = static_cast<int64_t>(expires);
  return true;
}

}  // namespace format
}  // namespace fencedkv
