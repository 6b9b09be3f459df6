// Copyright (c) fencedkv authors.
//
// The synced stamp: a small file in the database directory, SYNCED, that
// records a sequence number every write at or below which was on disk (in
// a synced WAL, or flushed) when the file was written.
//
// Why. RocksDB 7.8 skips a write-ahead log file that is gone without a
// word: a store whose live WAL was deleted (`rm *.log` in the directory: its
// files are NNNNNN.log) opens without those writes, fence raises and lease
// grants among them, and then accepts tokens it had refused. Such an open
// recovers to a sequence below what had been synced, and nothing a crash or
// a power cut does can make it do that: what a sync put on disk stays. So
// an open that recovers less than the stamp says is refused
// (CheckSyncedStamp), unless the caller opens with what is left on purpose
// (Options::drop_wal_after_damage), which then writes a stamp of 0: the
// open's own records are not synced yet, and the next synced write stamps
// anew.
//
// When. The WAL syncer (Options::wal_sync_interval_ms > 0, the server's
// default 1000) writes it on each tick when more was synced since, and at
// close: so it trails what is synced by about one interval, and damage that
// loses only the last interval's writes is not seen. Written with a
// temporary file, fsync, rename and an fsync of the directory, through the
// database's Env; an error writing it is logged and the next tick tries
// again (the store goes on). A copy of the store (Checkpoint, BackupEngine,
// a replica's full copy) has no stamp: nothing is checked until a write is
// synced after its first tick, or an idle sync.
//
// It names only a sequence the log holds: the last of a synced batch, or
// what an idle sync covered unless a sentinel of the I/O-error recovery,
// written without the log, may have taken it (DBImpl::IdleSync).
//
// Format (text; unknown lines are ignored, a later version's):
//   fencedkv-synced 1
//   sequence <u64>
// A file that is not a regular file of at most 4096 bytes, or does not
// parse, is refused: remove it to open without the check.
//
// Thread-compatible functions.

#ifndef FENCEDKV_ENGINE_DB_SYNCED_STAMP_H_
#define FENCEDKV_ENGINE_DB_SYNCED_STAMP_H_

#include <cstdint>
#include <string>

#include "fencedkv/status.h"

namespace rocksdb {
class Env;
}

namespace fencedkv {

inline constexpr char kSyncedStampFile[] = "SYNCED";

// *found false (and OK) if `dir` has no stamp; Corruption if it does not
// parse; IOError if it cannot be read.
Status ReadSyncedStamp(rocksdb::Env* env, const std::string& dir, bool* found,
                       uint64_t* sequence);

Status WriteSyncedStamp(rocksdb::Env* env, const std::string& dir,
                        uint64_t sequence);

// An open recovered the store to `recovered`; the stamp was read before it
// (found, `stamped`). Corruption naming both if the store lacks synced
// writes.
Status CheckSyncedStamp(const std::string& dir, bool found, uint64_t stamped,
                        uint64_t recovered);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_SYNCED_STAMP_H_
