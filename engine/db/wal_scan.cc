// Copyright (c) fencedkv authors.

#include "db/wal_scan.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_checksum.h>

#include "db/rocksdb_options.h"
#include "db/synced_marker.h"
#include "db/synced_stamp.h"
#include "util/coding.h"

namespace fencedkv {

namespace {

// RocksDB's log format (db/log_format.h), legacy (non-recyclable) records.
constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;  // crc:fixed32 length:fixed16 type:1
enum FragmentType : uint8_t {
  kZeroType = 0,  // preallocated space never written
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
};
constexpr size_t kBatchHeader = 12;  // sequence:fixed64 count:fixed32
// What of a record the scan keeps: the batch header and the synced marker
// a synced batch leads with.
constexpr size_t kHeadBytes = kBatchHeader + kSyncedMarkerRecordSize;

// RocksDB stores a crc32c "masked" (rotated and offset), since a crc of
// data holding crcs is weak (util/crc32c.h).
uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// crc32c of the type byte followed by the payload: through RocksDB's own
// implementation, which its public file-checksum factory exposes (the
// function itself is not exported).
uint32_t FragmentCrc(rocksdb::FileChecksumGenFactory* factory, char type,
                     const char* payload, size_t n) {
  std::unique_ptr<rocksdb::FileChecksumGenerator> gen =
      factory->CreateFileChecksumGenerator(rocksdb::FileChecksumGenContext());
  gen->Update(&type, 1);
  gen->Update(payload, n);
  gen->Finalize();
  const std::string c = gen->GetChecksum();  // 4 bytes, big-endian
  uint32_t v = 0;
  for (unsigned char b : c) v = (v << 8) | b;
  return v;
}

// A fragment header's payload length (fixed16, little-endian).
size_t FragmentLength(const char* h) {
  return static_cast<unsigned char>(h[4]) |
         (static_cast<size_t>(static_cast<unsigned char>(h[5])) << 8);
}

bool LogNumber(const std::string& name, uint64_t* number) {
  const std::string suffix = ".log";
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  uint64_t n = 0;
  for (size_t i = 0; i < name.size() - suffix.size(); ++i) {
    const char c = name[i];
    if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *number = n;
  return true;
}

// One pass over the files; the state a record spans blocks with.
class Scanner {
 public:
  Scanner(uint64_t beyond, uint64_t upto, WalScan* scan)
      : factory_(rocksdb::GetFileChecksumGenCrc32cFactory()),
        beyond_(beyond),
        upto_(upto),
        scan_(scan) {}

  Status File(rocksdb::Env* env, const std::string& dir,
              const std::string& name) {
    std::unique_ptr<rocksdb::SequentialFile> file;
    rocksdb::Status rs =
        env->NewSequentialFile(dir + "/" + name, &file, rocksdb::EnvOptions());
    if (rs.IsNotFound() || rs.IsPathNotFound()) return Status::OK();
    if (!rs.ok()) return FromRocksDB(rs);
    ++scan_->files;
    name_ = &name;
    in_record_ = false;
    // What the newest file is; so far, whatever came before it.
    if (scan_->damaged_blocks > 0 || scan_->holes > 0) {
      scan_->older_damage = true;
    }
    scan_->tail_damage_offset = WalScan::kNone;
    scan_->tail_after_records = scan_->tail_after_synced = 0;
    std::string scratch(kBlockSize, '\0');
    for (uint64_t offset = 0;; offset += kBlockSize) {
      rocksdb::Slice block;
      rs = file->Read(kBlockSize, &block, &scratch[0]);
      if (!rs.ok()) return FromRocksDB(rs);
      if (block.empty()) break;
      scan_->bytes += block.size();
      Block(offset, block.data(), block.size());
      if (block.size() < kBlockSize) break;
    }
    if (in_record_)
      Damage(record_offset_, "a record cut off by the file's end");
    in_record_ = false;
    return Status::OK();
  }

 private:
  // Whether an intact fragment starts at p[q] (its type one of the four,
  // within the block, its checksum right): where the scan may go on after
  // damage.
  bool IntactAt(const char* p, size_t n, size_t q) const {
    if (q + kHeaderSize > n) return false;
    const char* h = p + q;
    const auto type = static_cast<uint8_t>(h[6]);
    if (type < kFullType || type > kLastType) return false;
    const size_t length = FragmentLength(h);
    if (q + kHeaderSize + length > n) return false;
    return Unmask(DecodeFixed32(h)) == FragmentCrc(factory_.get(),
                                                   static_cast<char>(type),
                                                   h + kHeaderSize, length);
  }

  // After damage at p[at]: where the next intact fragment of the block
  // starts (n: none). RocksDB's recovery skips the rest of the block, and
  // stops there for a bad checksum; the scan must still see the intact
  // records after the damage, or damage in the log's last block (the
  // newest writes, and the whole log of a small store) went unreported.
  // First the end the damaged header declares (a flipped payload leaves
  // the next fragment there); then every byte past that end, never inside
  // it: a torn write leaves the rest of its declared payload unwritten or
  // stale, and a value a client wrote may itself look like a fragment. A
  // header whose length is not to be trusted (zeros, an unknown type, one
  // past the block) is searched past byte by byte, except in the file's
  // last block, where that is a torn tail unless a synced record follows
  // (a sync put everything before it on disk, so the damage is not a torn
  // write; before the synced marker a flipped length byte there dropped
  // the synced writes after it without a word, an adversarial review).
  size_t Resync(const char* p, size_t n, size_t at, size_t declared_end,
                bool at_file_end) const {
    if (declared_end > at && declared_end < n && IntactAt(p, n, declared_end)) {
      return declared_end;
    }
    size_t q = declared_end > at ? declared_end : at + 1;
    const bool torn_unless_synced = declared_end <= at && at_file_end;
    for (; q + kHeaderSize <= n; ++q) {
      if (IntactAt(p, n, q) && (!torn_unless_synced || SyncedStartAt(p, q))) {
        return q;
      }
    }
    return n;
  }

  // Whether the intact fragment at p[q] starts a record a synced write
  // made (a full or first fragment whose batch leads with the marker).
  static bool SyncedStartAt(const char* p, size_t q) {
    const char* h = p + q;
    const auto type = static_cast<uint8_t>(h[6]);
    const size_t length = FragmentLength(h);
    return (type == kFullType || type == kFirstType) && length >= kHeadBytes &&
           LeadsWithSyncedMarker(std::string_view(h + kHeaderSize, kHeadBytes));
  }

  void Block(uint64_t offset, const char* p, size_t n) {
    const bool file_end = n < kBlockSize;
    size_t pos = 0;
    while (pos + kHeaderSize <= n) {
      const char* h = p + pos;
      const uint32_t masked = DecodeFixed32(h);
      const size_t length = FragmentLength(h);
      const auto type = static_cast<uint8_t>(h[6]);
      if (type == kZeroType && length == 0 && masked == 0) {
        // Zeros where a header belongs: space never written (a tail), or a
        // page lost or zeroed mid-log. RocksDB skips the block's rest
        // silently and replays what follows, around the hole: so an intact
        // record after zeros is a hole (Record), whatever RocksDB recovers.
        if (in_record_) Damage(offset + pos, "a record cut off by zeros");
        if (zeros_file_.empty()) {
          zeros_file_ = *name_;
          zeros_offset_ = offset + pos;
        }
        // Past the zeros, an intact fragment in this block is what RocksDB
        // skips with them.
        size_t q = pos;
        while (q < n && p[q] == 0) ++q;
        if (q >= n) return;
        pos = Resync(p, n, q - 1, 0, false);  // (q > pos: p[pos] is 0)
        continue;
      }
      if (type < kFullType || type > kLastType) {
        Damage(offset + pos,
               "a fragment of unknown type " + std::to_string(type));
        // Types 5..255 are damage wherever they are; a torn header at the
        // file's end reads as type 0 (an unwritten sector).
        pos = Resync(p, n, pos, 0, file_end && type == kZeroType);
        continue;
      }
      if (pos + kHeaderSize + length > n) {
        Damage(offset + pos, "a fragment cut short");
        pos = Resync(p, n, pos, 0, file_end);
        continue;
      }
      const char* payload = h + kHeaderSize;
      if (Unmask(masked) != FragmentCrc(factory_.get(), static_cast<char>(type),
                                        payload, length)) {
        Damage(offset + pos, "a checksum mismatch");
        pos = Resync(p, n, pos, pos + kHeaderSize + length, file_end);
        continue;
      }
      const uint64_t at = offset + pos;
      pos += kHeaderSize + length;
      switch (type) {
        case kFullType:
        case kFirstType:
          if (in_record_) Damage(record_offset_, "a record without its end");
          in_record_ = true;
          record_offset_ = at;
          head_.assign(payload, std::min(length, kHeadBytes));
          break;
        case kMiddleType:
        case kLastType:
          if (!in_record_) {
            Damage(at, "a fragment without its record's start");
            continue;
          }
          if (head_.size() < kHeadBytes) {
            head_.append(payload, std::min(length, kHeadBytes - head_.size()));
          }
          break;
      }
      if (type == kFullType || type == kLastType) Record();
    }
  }

  void Record() {
    in_record_ = false;
    if (head_.size() < kBatchHeader) {
      Damage(record_offset_, "a record too short for a write batch");
      return;
    }
    const uint64_t first = DecodeFixed64(head_.data());
    const uint32_t count = DecodeFixed32(head_.data() + 8);
    // A record of no sequence number (an idle sync, DBImpl::IdleSync: the
    // synced marker alone) covers none, except right after damage: there
    // it stands for the number it would take, so that a recovery that
    // stopped at the damage is found to have missed it, as it would an
    // intact batch (an intact synced record after damage says the damage
    // is not a torn write).
    uint64_t last = first + count - 1;
    if (count == 0)
      last = damage_file_.empty() && first > 0 ? first - 1 : first;
    ++scan_->records;
    scan_->last_sequence = std::max(scan_->last_sequence, last);
    if (!zeros_file_.empty()) {
      // Zeros, then this record: in this file, the newest file's damage if
      // it is the newest; before it, older damage.
      if (zeros_file_ == *name_) {
        TailDamage(zeros_offset_);
      } else {
        scan_->older_damage = true;
      }
    }
    if (scan_->tail_damage_offset != WalScan::kNone &&
        record_offset_ > scan_->tail_damage_offset) {
      ++scan_->tail_after_records;
      if (LeadsWithSyncedMarker(head_)) ++scan_->tail_after_synced;
    }
    if (!zeros_file_.empty()) {
      if (scan_->holes++ == 0) {
        scan_->hole_file = zeros_file_;
        scan_->hole_offset = zeros_offset_;
        scan_->hole_next_file = *name_;
        scan_->hole_next_offset = record_offset_;
        scan_->hole_next_sequence = first;
      }
      zeros_file_.clear();
    }
    if (last <= beyond_ || first > upto_) {
      damage_file_.clear();  // what recovery gets past
      return;
    }
    if (scan_->beyond_records++ == 0) {
      scan_->beyond_first = first;
      scan_->beyond_file = *name_;
      scan_->beyond_offset = record_offset_;
      if (!damage_file_.empty()) {
        scan_->damage_file = damage_file_;
        scan_->damage_offset = damage_offset_;
        scan_->damage_what = damage_what_;
      }
    }
    scan_->beyond_last = std::max(scan_->beyond_last, last);
  }

  // Damage at `offset` of the current file; an open record is lost with it.
  void Damage(uint64_t offset, std::string what) {
    ++scan_->damaged_blocks;
    // A record it cuts is lost from its start.
    TailDamage(in_record_ ? std::min(offset, record_offset_) : offset);
    in_record_ = false;
    // The first damage since the last record within `beyond_`: where
    // recovery stops.
    if (!damage_file_.empty()) return;
    damage_file_ = *name_;
    damage_offset_ = offset;
    damage_what_ = std::move(what);
  }

  // The first damage of the current file (as if it were the newest).
  void TailDamage(uint64_t offset) {
    scan_->tail_damage_offset = std::min(scan_->tail_damage_offset, offset);
  }

  const std::shared_ptr<rocksdb::FileChecksumGenFactory> factory_;
  const uint64_t beyond_;
  const uint64_t upto_;
  WalScan* const scan_;
  // Where zeros stood in for a header, if no intact record came since.
  std::string zeros_file_;
  uint64_t zeros_offset_ = 0;
  const std::string* name_ = nullptr;
  bool in_record_ = false;
  uint64_t record_offset_ = 0;
  std::string head_;  // the open record's first bytes (its batch header)
  std::string damage_file_;
  uint64_t damage_offset_ = 0;
  std::string damage_what_;
};

}  // namespace

Status ScanWal(rocksdb::Env* env, const std::string& dir, uint64_t beyond,
               WalScan* scan, uint64_t upto) {
  *scan = WalScan();
  std::vector<std::string> children;
  rocksdb::Status rs = env->GetChildren(dir, &children);
  if (!rs.ok()) return FromRocksDB(rs);
  std::vector<std::pair<uint64_t, std::string>> logs;
  for (auto& name : children) {
    uint64_t number;
    if (LogNumber(name, &number)) logs.emplace_back(number, std::move(name));
  }
  std::sort(logs.begin(), logs.end());
  Scanner scanner(beyond, upto, scan);
  for (const auto& log : logs) {
    Status s = scanner.File(env, dir, log.second);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

bool TornUnsyncedTail(const WalScan& scan) {
  return !scan.older_damage && scan.tail_damage_offset != WalScan::kNone &&
         scan.tail_after_records > 0 && scan.tail_after_synced == 0;
}

namespace {
constexpr const char* kTornTailHint =
    "none of the records after it was written with sync, which is what a "
    "power cut leaves when the disk wrote a later page of the log's "
    "unsynced tail and not an earlier one. If the machine lost power, "
    "those writes were never synced: start with --drop_wal_after_damage "
    "(Options::drop_wal_after_damage) to open without them. Otherwise this "
    "is damage: restore the store from a replica or a backup";
}  // namespace

Status CheckWalRecovery(rocksdb::Env* env, const std::string& dir,
                        const WalScan& before_open, uint64_t recovered) {
  const bool torn = TornUnsyncedTail(before_open);
  if (before_open.holes > 0) {
    return Status::Corruption(
        "the write-ahead log has a hole: zeros where a record belongs in " +
            before_open.hole_file + " at offset " +
            std::to_string(before_open.hole_offset) +
            ", then intact write batches again (from sequence " +
            std::to_string(before_open.hole_next_sequence) + " in " +
            before_open.hole_next_file + " at offset " +
            std::to_string(before_open.hole_next_offset) + ")",
        torn ? kTornTailHint
             : "recovering it would skip the writes the zeros stand for, "
               "fence raises and lease grants among them, and keep the later "
               "ones. Restore the store from a replica or a backup; to open "
               "it without them, set Options::drop_wal_after_damage "
               "(fencedkv-server --drop_wal_after_damage)");
  }
  if (before_open.last_sequence <= recovered) return Status::OK();
  // Only the sequences the scan before the open saw: a running server may
  // have appended more since.
  WalScan scan;
  Status s = ScanWal(env, dir, recovered, &scan, before_open.last_sequence);
  if (!s.ok()) return s;
  if (scan.beyond_records == 0) {
    // The log that held them is gone: a running server flushed and deleted
    // it between the scan and the open, which may then have missed them.
    return Status::Busy("the write-ahead log changed while it was read",
                        "open again");
  }
  std::string what =
      "the write-ahead log holds " + std::to_string(scan.beyond_records) +
      " intact write batch(es) past sequence " + std::to_string(recovered) +
      ", where recovering it stopped (sequences " +
      std::to_string(scan.beyond_first) + ".." +
      std::to_string(scan.beyond_last) + ", the first in " + scan.beyond_file +
      " at offset " + std::to_string(scan.beyond_offset) + ")";
  if (!scan.damage_file.empty()) {
    what += ", after damage in " + scan.damage_file + " at offset " +
            std::to_string(scan.damage_offset) + " (" + scan.damage_what + ")";
  }
  if (torn) return Status::Corruption(what, kTornTailHint);
  return Status::Corruption(
      what,
      "opening would drop those writes, with every fence raise and lease "
      "grant among them, and accept tokens they fenced out. Restore the "
      "store from a replica or a backup; to open it without them, set "
      "Options::drop_wal_after_damage (fencedkv-server "
      "--drop_wal_after_damage)");
}

std::vector<std::string> ListArchivedWals(rocksdb::Env* env,
                                          const std::string& dir) {
  std::vector<std::string> names;
  std::vector<std::string> children;
  // (No archive directory: nothing was ever kept for replicas.)
  if (!env->GetChildren(dir + "/archive", &children).ok()) return names;
  uint64_t number;
  for (const std::string& name : children) {
    if (LogNumber(name, &number)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status CheckArchivedWals(rocksdb::Env* env, const std::string& dir,
                         const std::vector<std::string>& archived,
                         uint64_t min_log) {
  if (min_log == 0) return Status::OK();
  for (const std::string& name : archived) {
    uint64_t number = 0;
    if (!LogNumber(name, &number) || number < min_log) continue;
    std::string live = dir;
    live += '/';
    live += name;
    // Only a file known to be absent (an error reading the directory says
    // nothing either way).
    if (!env->FileExists(live).IsNotFound()) continue;
    std::string what = "the MANIFEST still counts on log file ";
    what += name;
    what += " (every file from ";
    what += std::to_string(min_log);
    what += " on), which is in archive/, not in ";
    what += dir;
    return Status::Corruption(
        what,
        "RocksDB moves a log file to archive/ only once the MANIFEST no "
        "longer needs it, so the MANIFEST lost an edit; opening would skip "
        "that file's records, fence raises and lease grants among them. "
        "Restore the store from a replica or a backup; to open it without "
        "them, set Options::drop_wal_after_damage (fencedkv-server "
        "--drop_wal_after_damage)");
  }
  return Status::OK();
}

Status ReadBeforeOpen(rocksdb::Env* env, const std::string& dir,
                      BeforeOpen* before) {
  Status s = ScanWal(env, dir, UINT64_MAX, &before->wal);
  if (s.ok()) {
    s = ReadSyncedStamp(env, dir, &before->stamp_found, &before->stamped);
  }
  if (s.ok()) before->archived = ListArchivedWals(env, dir);
  return s;
}

Status CheckAfterOpen(rocksdb::Env* env, const std::string& dir,
                      const BeforeOpen& before, rocksdb::DB* db,
                      bool* log_complete) {
  const uint64_t recovered = db->GetLatestSequenceNumber();
  Status s = CheckWalRecovery(env, dir, before.wal, recovered);
  if (log_complete != nullptr) *log_complete = s.ok();
  if (s.ok()) {
    s = CheckSyncedStamp(dir, before.stamp_found, before.stamped, recovered);
  }
  uint64_t min_log = 0;
  if (s.ok() &&
      db->GetIntProperty("rocksdb.min-log-number-to-keep", &min_log)) {
    s = CheckArchivedWals(env, dir, before.archived, min_log);
  }
  return s;
}

}  // namespace fencedkv
