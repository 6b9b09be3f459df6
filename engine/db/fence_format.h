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
//     "hwm/" XXXX      -> fixed64, XXXX = 4 lowercase hex digits (a lock
//                         stripe): the high-water mark of that stripe. The
//                         largest of these records is an upper bound of
//                         every domain max ever stored (see below).
//     "lease/" name    -> lease_record (the embedded lease service's)
//     "lease_counter"  -> fixed64: the last lease token issued
//     lease_record := holder_len:varint64 holder token:fixed64
//                     expires_at_ms:fixed64 (wall clock, ms since the epoch)
//
// Fixed-width integers are little-endian; varints are LevelDB's (7 bits a
// byte, low bits first). Do not renumber kinds or change names: a
// change here needs a new kFormatVersion and an upgrade path.
//
// Every record is a plain Put or Delete: no merge operator and no
// compaction filter is needed to read or compact the files, so RocksDB's own
// tools (ldb, sst_dump) can open, read, write and compact a fencedkv
// database without breaking it. (The floor's compaction filter only drops
// records that the floor makes irrelevant; compacting without it keeps
// them, which is harmless.)
//
// The high-water mark. A writer that raises a domain's max above its
// stripe's mark writes "hwm/<stripe>" with the new mark in the same atomic
// batch, holding the stripe's lock from its check until RocksDB's write
// returns: so the records of one stripe are written in increasing order, and
// any prefix of the log that holds a domain's max also holds a stripe record
// at or above it. Open takes the largest record as the mark of every stripe.
//
// Version history:
//   1: the mark was one "hwm" record written with a max() merge operator
//      ("fencedkv.MaxToken"), which tools without that operator cannot read
//      or compact. DB::Open upgrades a version-1 database in place: it reads
//      "hwm" with the operator, writes "hwm/0000" and deletes "hwm".
//   2: per-stripe "hwm/XXXX" records, plain Puts.

#ifndef FENCEDKV_ENGINE_DB_FENCE_FORMAT_H_
#define FENCEDKV_ENGINE_DB_FENCE_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fencedkv/status.h"
#include "fencedkv/token.h"

namespace fencedkv {
namespace format {

constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kFormatVersionMergedHwm = 1;  // upgraded on open

constexpr const char* kDataColumnFamily = "default";
constexpr const char* kFenceColumnFamily = "fence";
constexpr const char* kMetaColumnFamily = "meta";

constexpr std::string_view kMetaFormatVersion = "format_version";
constexpr std::string_view kMetaFenceDomain = "fence_domain";
constexpr std::string_view kMetaFenceMode = "fence_mode";
constexpr std::string_view kMetaFenceFloor = "fence_floor";
constexpr std::string_view kMetaHighWaterMarkPrefix = "hwm/";
constexpr std::string_view kMetaLegacyHighWaterMark = "hwm";  // version 1
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
// DecodeDataRecord as a Status: Corruption naming `key` on a malformed
// record (one written by something other than fencedkv, or damaged).
Status DecodeDataRecordOf(std::string_view key, std::string_view raw,
                          DataRecord* record);

// "hwm/" + the stripe as 4 lowercase hex digits.
std::string HighWaterMarkKey(uint32_t stripe);

// Encodes / decodes a fixed64 token value (fence records, floor, hwm).
std::string EncodeToken(Token token);
bool DecodeToken(std::string_view raw, Token* token);

// A "lease/" name record of the embedded lease service.
struct LeaseRecord {
  std::string holder;
  Token token = 0;
  int64_t expires_at_ms = 0;
};
std::string EncodeLeaseRecord(const LeaseRecord& record);
// Returns false on a malformed record (then *record is unspecified).
bool DecodeLeaseRecord(std::string_view raw, LeaseRecord* record);

}  // namespace format
}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_FENCE_FORMAT_H_
