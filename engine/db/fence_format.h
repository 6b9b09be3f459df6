// Copyright (c) fencedkv authors.
//
// The on-disk format of a fencedkv database. Three RocksDB column families:
//
//   "default" (data):  user_key -> data_record
//     data_record := kind:uint8 token:varint64 user_value
//     kind        := 0x01  value present (user_value follows)
//                  | 0x00  no value: a deleted key (or a key-mode fence with
//                          no data) that keeps its domain's token
//     token       := the token of the write that produced the record; with the
//                    "key" domain function this IS the domain's max token, so
//                    a fenced Put is one record.
//
//   "fence" (domain maxima, for every domain function but "key"):
//     domain -> max:fixed64
//     written only when a domain's max rises.
//
//   "meta" (one record each, keys are ASCII):
//     "format_version" -> fixed32            (kFormatVersion)
//     "fence_domain"   -> FenceDomainSpec::ToString() text
//     "fence_mode"     -> uint8 FenceMode value
//     "fence_floor"    -> fixed64
//     "hwm"            -> fixed64, merged with max(): an upper bound of every
//                         domain max ever stored (the high-water mark)
//     "lease/" name    -> lease_record (see lease_service_impl.cc)
//     "lease_counter"  -> fixed64: the last lease token issued
//
// Fixed-width integers are little-endian; varints are LevelDB's (7 bits a
// byte, low bits first). Do not renumber kinds or change names: a
// change here needs a new kFormatVersion and an upgrade path.

#ifndef FENCEDKV_ENGINE_DB_FENCE_FORMAT_H_
#define FENCEDKV_ENGINE_DB_FENCE_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fencedkv/token.h"

namespace fencedkv {
namespace format {

constexpr uint32_t kFormatVersion = 1;

constexpr const char* kDataColumnFamily = "default";
constexpr const char* kFenceColumnFamily = "fence";
constexpr const char* kMetaColumnFamily = "meta";

constexpr std::string_view kMetaFormatVersion = "format_version";
constexpr std::string_view kMetaFenceDomain = "fence_domain";
constexpr std::string_view kMetaFenceMode = "fence_mode";
constexpr std::string_view kMetaFenceFloor = "fence_floor";
constexpr std::string_view kMetaHighWaterMark = "hwm";
constexpr std::string_view kMetaLeasePrefix = "lease/";
constexpr std::string_view kMetaLeaseCounter = "lease_counter";

enum class RecordKind : uint8_t { kNoValue = 0x00, kValue = 0x01 };

// The largest data record header: kind + a 10-byte varint.
constexpr size_t kMaxDataHeaderSize = 11;

// Writes the header of a data record into buf (kMaxDataHeaderSize bytes of
// room); returns its length.
size_t EncodeDataHeader(char* buf, RecordKind kind, Token token);

struct DataRecord {
  RecordKind kind;
  Token token;
  std::string_view value;  // empty for kNoValue
};

// Decodes a data record. Returns false on a malformed record.
bool DecodeDataRecord(std::string_view raw, DataRecord* record);

// Encodes / decodes a fixed64 token value (fence records, floor, hwm).
std::string EncodeToken(Token token);
bool DecodeToken(std::string_view raw, Token* token);

}  // namespace format
}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_FENCE_FORMAT_H_
