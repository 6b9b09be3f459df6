// Copyright (c) fencedkv authors.
//
// A read of a database directory's write-ahead log files, record by record,
// checking every checksum: what an open would recover, found without
// RocksDB. RocksDB's recovery (WALRecoveryMode::kPointInTimeRecovery, the
// mode a torn tail after a crash needs) stops at the first damaged record of
// the newest WAL file and drops everything after it without an error: one
// flipped byte in the middle of the log silently lost every write after it,
// fence raises and lease grants included, and the reopened store accepted
// tokens it had refused (docs/faults.md "Damage in the log"). A torn tail
// has nothing intact after its damage; such a flip has. So an open compares
// the last sequence the log holds intact with the one RocksDB recovered,
// and refuses to drop the difference silently (CheckWalRecovery).
//
// The format read is RocksDB's (db/log_format.h): 32 KiB blocks of
// fragments, each a 7-byte header (masked crc32c of the type byte and the
// payload, length, type: full, first, middle, last) and its payload; a
// record is a full fragment or first, middles, last; a fencedkv WAL record is
// a write batch (sequence:fixed64 count:fixed32 ...). Recycled log files and
// WAL compression, which fencedkv never enables, are not read (their
// fragment types count as damage).
//
// Thread-compatible functions.

#ifndef FENCEDKV_ENGINE_DB_WAL_SCAN_H_
#define FENCEDKV_ENGINE_DB_WAL_SCAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fencedkv/status.h"

namespace rocksdb {
class DB;
class Env;
}  // namespace rocksdb

namespace fencedkv {

struct WalScan {
  uint64_t files = 0;    // *.log files read (archive/ is not replayed)
  uint64_t bytes = 0;    // bytes read
  uint64_t records = 0;  // intact records (write batches)
  // The last sequence number in an intact record (0: none).
  uint64_t last_sequence = 0;
  // Damage: a fragment with a bad checksum, cut short, of an unknown type,
  // or out of order (a middle without a first), or a record too short for a
  // batch. Counted once per place found: after damage the scan goes on at
  // the block's next intact fragment, if any (RocksDB's recovery skips the
  // rest of the block, so the intact records there are what it drops).
  uint64_t damaged_blocks = 0;
  // Zeros where a header belongs with an intact record after them: a page
  // lost or zeroed mid-log. RocksDB skips such zeros without a word and
  // replays around them (preallocated space at the tail has nothing after
  // it). The first one:
  uint64_t holes = 0;
  std::string hole_file;
  uint64_t hole_offset = 0;
  std::string hole_next_file;  // the first intact record after it
  uint64_t hole_next_offset = 0;
  uint64_t hole_next_sequence = 0;

  // Filled only for a scan with `beyond` (ScanWal): the intact records
  // holding sequences past it, and where damage was last seen before the
  // first of them.
  uint64_t beyond_records = 0;
  uint64_t beyond_first = 0;  // the first such record's first sequence
  uint64_t beyond_last = 0;   // the last sequence of the last one
  std::string beyond_file;    // the file holding the first one
  uint64_t beyond_offset = 0;
  std::string damage_file;  // empty: no damage before it
  uint64_t damage_offset = 0;
  std::string damage_what;

  // The newest log file, the one a power cut may have torn: where its
  // first damage is, or zeros with an intact record after them in the
  // file (kNone: neither), from the start of the record it cut if it cut
  // one; and the intact records after that in the file: how many, and how
  // many were written with sync (led by the synced marker,
  // synced_marker.h).
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t tail_damage_offset = kNone;
  uint64_t tail_after_records = 0;
  uint64_t tail_after_synced = 0;
  // Damage or a hole before the newest file.
  bool older_damage = false;
};

// Reads every "*.log" file directly in `dir` through `env`, in file-number
// order. A file that disappears while it is read (a running server deleted
// it after a flush) is skipped. `beyond`: see WalScan (UINT64_MAX: none);
// records starting past `upto` are not counted as beyond it. IOError only
// if the directory cannot be listed or a file cannot be read.
Status ScanWal(rocksdb::Env* env, const std::string& dir, uint64_t beyond,
               WalScan* scan, uint64_t upto = UINT64_MAX);

// Whether `scan` found what may be a tail a power cut tore: damage or
// zeros in the newest log file with intact records after them, none of
// which was written with sync, and nothing wrong before that file. A power
// cut leaves this when the disk wrote a later page of the unsynced tail
// and not an earlier one. (Damage followed by a synced record is not a
// power cut's doing: the sync put everything before it on disk.) It cannot
// tell that damage from damage that hit a synced record itself, so the
// open still refuses it; CheckWalRecovery says which case it may be.
bool TornUnsyncedTail(const WalScan& scan);

// After an open that recovered up to sequence `recovered`, given a scan made
// BEFORE that open (a running server may append records after it, never
// before): OK if the log has no hole and holds no intact record past
// `recovered` up to what the scan saw; otherwise Corruption saying which
// records the open dropped or skipped and where (it rescans the log for
// that). Busy if those records' log vanished meanwhile (a running server
// flushed it): open again.
Status CheckWalRecovery(rocksdb::Env* env, const std::string& dir,
                        const WalScan& before_open, uint64_t recovered);

// The names of the log files in `dir`/archive (none if it does not
// exist), sorted, listed BEFORE the read-only open CheckArchivedWals follows: a
// running server may archive a file between that open's read of the
// MANIFEST and a later listing (a file archived before the MANIFEST was
// read is always below the min log it records).
std::vector<std::string> ListArchivedWals(rocksdb::Env* env,
                                          const std::string& dir);

// After a read-only open that found `min_log` to be the oldest log file the
// MANIFEST still counts on (RocksDB's rocksdb.min-log-number-to-keep):
// Corruption if such a file (number >= min_log) among `archived` (listed
// before the open) is not in `dir`. RocksDB moves a log file to archive/
// (keeping it for replicas) only once a synced MANIFEST edit no longer
// needs it, so the MANIFEST lost that edit (a cut last edit: the family's
// flushed records are then in no file the recovery reads), and RocksDB
// 7.8's recovery skips the missing file without a word, its records with
// it.
Status CheckArchivedWals(rocksdb::Env* env, const std::string& dir,
                         const std::vector<std::string>& archived,
                         uint64_t min_log);

// What every open reads before RocksDB's read-only open recovers the store
// (DBImpl's, before it writes anything, and ReadOnlyStore's), and the checks
// it then makes of what that open recovered. The reads come first because a
// running server only appends to its log, and stamps and archives later.
struct BeforeOpen {
  WalScan wal;               // ScanWal
  bool stamp_found = false;  // ReadSyncedStamp (synced_stamp.h)
  uint64_t stamped = 0;
  std::vector<std::string> archived;  // ListArchivedWals
};
Status ReadBeforeOpen(rocksdb::Env* env, const std::string& dir,
                      BeforeOpen* before);
// Given the read-only open `db` of `dir` made after ReadBeforeOpen: the
// first of CheckWalRecovery, CheckSyncedStamp and CheckArchivedWals that
// fails (Busy: a running server's flush raced the open; open again).
// `log_complete`, if given, is set when CheckWalRecovery passed.
Status CheckAfterOpen(rocksdb::Env* env, const std::string& dir,
                      const BeforeOpen& before, rocksdb::DB* db,
                      bool* log_complete = nullptr);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_WAL_SCAN_H_
