// Copyright (c) fencedkv authors.

#include "db/synced_marker.h"

namespace fencedkv {

namespace {

constexpr size_t kBatchHeader = 12;  // sequence:fixed64 count:fixed32
constexpr char kLogDataTag = 0x03;   // RocksDB's kTypeLogData

}  // namespace

std::string_view SyncedMarkerRecord() {
  static const std::string record = [] {
    static_assert(kSyncedMarker.size() < 128, "one varint byte");
    std::string r;
    r.push_back(kLogDataTag);
    r.push_back(static_cast<char>(kSyncedMarker.size()));
    r.append(kSyncedMarker);
    return r;
  }();
  return record;
}

rocksdb::Status AddSyncedMarker(rocksdb::WriteBatch* batch) {
  return batch->PutLogData(
      rocksdb::Slice(kSyncedMarker.data(), kSyncedMarker.size()));
}

bool LeadsWithSyncedMarker(std::string_view rep) {
  return rep.size() >= kBatchHeader + kSyncedMarkerRecordSize &&
         rep.substr(kBatchHeader, kSyncedMarkerRecordSize) ==
             SyncedMarkerRecord();
}

std::string WithSyncedMarker(std::string_view rep) {
  std::string out;
  out.reserve(rep.size() + kSyncedMarkerRecordSize);
  out.append(rep.substr(0, kBatchHeader));
  out.append(SyncedMarkerRecord());
  if (rep.size() > kBatchHeader) out.append(rep.substr(kBatchHeader));
  return out;
}

AroundMarker AroundLeadingSyncedMarker(std::string_view rep) {
  return {rep.substr(0, kBatchHeader),
          rep.substr(kBatchHeader + kSyncedMarkerRecordSize)};
}

}  // namespace fencedkv
