// Copyright (c) fencedkv authors.
//
// The synced marker: how a record in the write-ahead log says it was
// written with sync (its write returned only once it, and every record
// before it, was on disk).
//
// Why. A power cut may leave the newest, unsynced part of the log torn in
// any order: the disk may have written a later page and not an earlier
// one, so intact records can follow damage or zeros. Those records were
// never synced, and losing them is what a power cut may do. But damage
// followed by a record that WAS synced cannot be a power cut's doing (the
// sync put everything before it on disk): that is real damage, and
// dropping the records would lose acknowledged writes, fence raises among
// them. The scan (wal_scan.h) tells the two apart by this marker, and the
// open's error says which it may be (docs/faults.md "Damage in the
// log").
//
// What. A LogData record (in the WAL only: it takes no sequence number and
// never reaches a memtable) holding kSyncedMarker, the first record of
// every batch fencedkv writes with sync. RocksDB merges a write group into
// one log record, the leader's batch first, and never puts a synced write
// in a group led by an unsynced one: so a log record holding any synced
// write starts with the marker. A primary's log readers strip the markers
// (replicas of any build take the batches they always took); a replica
// that applies a batch with sync adds its own.
//
// Thread-safe (pure functions).

#ifndef FENCEDKV_ENGINE_DB_SYNCED_MARKER_H_
#define FENCEDKV_ENGINE_DB_SYNCED_MARKER_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <rocksdb/write_batch.h>

namespace fencedkv {

inline constexpr std::string_view kSyncedMarker = "fencedkv:synced";

// The marker's bytes as a batch record: LogData's tag (0x03), the blob's
// length (one varint byte) and the blob.
inline constexpr size_t kSyncedMarkerRecordSize = 2 + kSyncedMarker.size();
std::string_view SyncedMarkerRecord();

// Appends the marker to `batch`, which must hold no record yet.
rocksdb::Status AddSyncedMarker(rocksdb::WriteBatch* batch);

// Whether the batch representation `rep` (sequence:fixed64 count:fixed32
// records...) starts with the marker.
bool LeadsWithSyncedMarker(std::string_view rep);

// `rep` with the marker as its first record (it must have none): for a
// synced write of a batch built without it.
std::string WithSyncedMarker(std::string_view rep);

// `rep` without its leading marker (it must have one), as the two pieces
// around it: the header, and the records after the marker (no copy).
struct AroundMarker {
  std::string_view header;
  std::string_view records;
};
AroundMarker AroundLeadingSyncedMarker(std::string_view rep);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_SYNCED_MARKER_H_
