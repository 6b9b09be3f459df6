// Copyright (c) fencedkv authors.
//
// Options that control a database (Options), a read (ReadOptions) and a
// write (WriteOptions). Each field says its default, its unit and whether it
// is persisted in the database.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_OPTIONS_H_
#define FENCEDKV_INCLUDE_FENCEDKV_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace rocksdb {
class Env;
class Statistics;
}  // namespace rocksdb

namespace fencedkv {

// The acceptance rule. The values are persisted; never renumber them.
enum class FenceMode : uint8_t {
  // Accept token >= max(domain), reject token < max. A holder makes many
  // writes under one lease (Kafka epochs, HDFS journal epochs, Chubby
  // sequencers).
  kMonotonic = 0,
  // Accept token > max(domain), reject token <= max: every write needs a
  // fresh token.
  kStrict = 1,
};

// "monotonic" / "strict".
const char* FenceModeName(FenceMode mode);
// Parses "monotonic" or "strict"; returns false for anything else and leaves
// *mode unchanged.
bool ParseFenceMode(const std::string& text, FenceMode* mode);

// The largest max_key_size and max_value_size Open accepts: what RocksDB
// can store (its memtable encodes an entry, key and value together, with a
// 32-bit length; RocksDB recommends keys up to 8 MB and values up to 3 GB).
constexpr size_t kMaxKeySizeLimit = size_t{8} << 20;
constexpr size_t kMaxValueSizeLimit = size_t{3} << 30;

// Options::write_buffer_size's range (RocksDB clips a memtable to 64 GiB),
// and Options::max_background_jobs's largest value.
constexpr size_t kMinWriteBufferSize = size_t{64} << 10;
constexpr size_t kMaxWriteBufferSize = size_t{64} << 30;
constexpr int kMaxBackgroundJobsLimit = 256;

// Options::max_token_skew: no limit (the guard is off).
constexpr uint64_t kNoTokenSkewLimit = UINT64_MAX;

struct Options {
  // If true, a missing database is created (an existing empty directory
  // counts as missing). Default: false.
  bool create_if_missing = false;

  // If true, opening an existing database is an error. Default: false.
  bool error_if_exists = false;

  // The fence domain function: "key" | "prefix:N" | "delimiter:C" | "hashtag"
  // (see fence_domain.h). Default: "key".
  // PERSISTED: chosen at creation and stored in the database; reopening with
  // a different value is refused with InvalidArgument (it would silently
  // break every fence), unless adopt_stored_fence_config is set.
  std::string fence_domain = "key";

  // The acceptance rule. Default: kMonotonic.
  // PERSISTED, with the same reopen rule as fence_domain.
  FenceMode fence_mode = FenceMode::kMonotonic;

  // If true, fence_domain and fence_mode are only used to create a new
  // database; an existing database keeps its stored values (read them back
  // with DB::GetFenceDomain() / DB::GetFenceMode()). Default: false, so a
  // mismatch is an error.
  bool adopt_stored_fence_config = false;

  // If true, token 0 is accepted by Put/Delete/Write as an explicitly
  // unfenced write: it skips the check, does not change any max token, and
  // is counted in FenceStats::unfenced_writes. Default: false (token 0 is
  // InvalidArgument). Not persisted.
  bool allow_unfenced = false;

  // The token skew guard. Unless kNoTokenSkewLimit, a write or AdvanceFence
  // whose token is more than max_token_skew above the highest token the
  // token source has issued (DB::NoteIssuedToken; the embedded lease service
  // reports every grant, so with it this is "the lease counter") is refused
  // with TokenSkew and changes nothing. Without it one client holding no
  // lease could raise a domain's max (or the floor of strict-mode domains)
  // to 2^64-1 and lock every holder out of it for good. 0 admits exactly the
  // tokens issued so far. Default: kNoTokenSkewLimit (off). Not persisted.
  uint64_t max_token_skew = kNoTokenSkewLimit;

  // Memory budget, in bytes, of the in-memory view of domain max tokens.
  // The view is exact for the domains it holds and falls back to one RocksDB
  // read on a miss, so the budget bounds memory, never correctness.
  // Default: 64 MiB. 0 disables the cache. Not persisted.
  size_t fence_cache_bytes = 64 << 20;

  // Makes the fence cache's memory resident when the database opens, so
  // that the first writes (each touching a random part of it) do not pay a
  // page fault each: the open takes longer instead (zeroing
  // fence_cache_bytes), and the process holds that memory from the start.
  // fencedkv-server turns it on (--fence_cache_prefault). Default: false.
  // Not persisted.
  bool prefault_fence_cache = false;

  // Limits on user keys and values, in bytes. Keys must be 1..max_key_size
  // bytes; values 0..max_value_size bytes. Larger ones are InvalidArgument.
  // Defaults: 64 KiB and 64 MiB; at most kMaxKeySizeLimit (8 MiB) and
  // kMaxValueSizeLimit (3 GiB), else Open is InvalidArgument. Not persisted.
  size_t max_key_size = 64 << 10;
  size_t max_value_size = 64 << 20;

  // RocksDB tuning (none of it persisted, none of it affects fencing).
  // Bytes of memtable per column family before a flush; 64 KiB..64 GiB
  // (kMinWriteBufferSize..kMaxWriteBufferSize). Default: 64 MiB.
  size_t write_buffer_size = 64 << 20;
  // Bytes of block cache shared by all column families; 0 = no block cache.
  // Default: 32 MiB.
  size_t block_cache_size = 32 << 20;
  // Bytes of the value cache: the latest values of recently read or written
  // keys, so Get / MultiGet of a hot key skip RocksDB's lookups. Exact: a
  // read never returns an older value than RocksDB's latest (every write
  // updates or erases its keys first). Counts keys, values and metadata;
  // an entry over 64 KiB is not kept. 0 = off. Default: 0.
  size_t value_cache_size = 0;
  // Bloom filter bits per key; <= 0 disables filters. Default: 10.
  int bloom_bits_per_key = 10;
  // "none" | "snappy" | "zlib" | "bzip2" | "lz4" | "lz4hc" | "zstd".
  // Default: "snappy". An unknown name is InvalidArgument at Open.
  std::string compression = "snappy";
  // The memtable (applies to the data and fence column families):
  //  "skiplist": RocksDB's default; ordered inserts cost a skiplist search.
  //  "hash": fencedkv's hash memtable, a hash table of per-key lists.
  //    Point writes and reads skip the skiplist search: a server's SET went
  //    ~20% faster. The cost moves to scans: every new iterator first sorts
  //    a copy of the live memtable's entry list (about 0.1 us per entry),
  //    and concurrent writers no longer insert in parallel. For
  //    point-operation workloads.
  // Default: "skiplist". An unknown name is InvalidArgument at Open.
  std::string memtable = "skiplist";
  // Max open files for RocksDB; -1 = unlimited, else positive. Default: -1.
  int max_open_files = -1;
  // Background flush/compaction threads, 1..kMaxBackgroundJobsLimit (256).
  // Default: 2.
  int max_background_jobs = 2;
  // Level-0 files that trigger a compaction into level 1 (data and fence
  // column families), at least 1. Default: 4 (RocksDB's).
  int level0_file_num_compaction_trigger = 4;

  // Advanced: RocksDB's statistics for the whole database (tickers and
  // histograms; make one with rocksdb::CreateDBStatistics() and read it with
  // its ToString() or getTickerCount()). nullptr = none, as in RocksDB.
  // Only a forward declaration here: using it needs <rocksdb/statistics.h>.
  // Not persisted.
  std::shared_ptr<rocksdb::Statistics> statistics;

  // How long the write-ahead log is kept after its data is flushed, for log
  // shipping to replicas (DB::NewLogReader): by age (seconds) and/or total
  // size (MiB); 0 and 0 = deleted as soon as it is flushed (RocksDB's
  // default). RocksDB's WAL_ttl_seconds / WAL_size_limit_MB. Not persisted.
  uint64_t wal_retention_seconds = 0;
  uint64_t wal_retention_mb = 0;

  // While a log reader (DB::NewLogReader) exists, the batches written last
  // are also kept in memory, up to this many bytes, and readers take them
  // from there instead of reading them back from the WAL (as Redis serves
  // replicas from its replication backlog). A reader further behind reads
  // the WAL. 0 = none: readers always read the WAL. Default: 32 MiB. Not
  // persisted.
  size_t log_tail_bytes = size_t{32} << 20;

  // Writes made without sync (WriteOptions::sync false) reach the disk when
  // the OS writes them back: a power cut may lose any of them. With this
  // set, once per interval in which something was written, the next write
  // (on a replica, Options::log_replica, the next batch it applies) is
  // written with sync, putting everything before it on disk; if no write
  // comes for a whole interval, the engine syncs the log itself with a
  // record of no sequence number (the synced marker alone). So a power cut
  // loses at most about this many milliseconds of writes, twice it when the
  // writes had just stopped.
  // Damage in the log followed by a synced record is then told from a tail a
  // power cut may have torn (docs/faults.md "Damage in the log"). 0 = never
  // (the log is synced only by synced writes). The same thread keeps the
  // synced stamp, SYNCED in the directory, which every open checks: a store
  // that recovers below it (a log file deleted) is refused (docs/faults.md
  // "Lost log files"; with 0 none is written, but for the zero an open with
  // drop_wal_after_damage leaves). Default: 0;
  // fencedkv-server's --wal_sync_interval_ms: 1000. Not persisted.
  uint32_t wal_sync_interval_ms = 0;

  // Open even though the write-ahead log holds intact writes after damage
  // (a flipped byte in the middle of the log, not a tail torn by a crash),
  // dropping them: what RocksDB's point-in-time recovery does; or though
  // the store recovered below what its synced stamp says was synced (a log
  // file deleted; the stamp is the SYNCED file the WAL syncer keeps, see
  // wal_sync_interval_ms), which then starts over at 0. Without it such
  // an open fails with Corruption naming the writes, since the dropped
  // writes may include fence raises (docs/faults.md "Damage in the log",
  // "Lost log files"). Default: false. Not persisted.
  bool drop_wal_after_damage = false;

  // Set on a replica, a database fed only by DB::ApplyLogBatch: it opens
  // following (DB::SetFollowing(true)), so that from the open on the
  // engine writes nothing of its own (not even the I/O-error recovery's
  // empty-memtable sentinel, docs/faults.md; only the WAL syncer's idle
  // sync, which takes no sequence number) and the replica's sequence
  // numbers stay exactly the primary's. SetFollowing(false) promotes it.
  // Default: false. Not persisted.
  bool log_replica = false;

  // RocksDB's pipelined write path (its enable_pipelined_write): the next
  // group of concurrent writers writes the WAL while this one fills the
  // memtables. But it numbers a group whose WAL write failed (a full disk)
  // anyway, so a failed write leaves a gap in the log's sequence numbers; a
  // database that follows a primary's log must have none (its numbers are
  // the primary's: a replica would move past a batch it never held). So it
  // is off with log_replica, and a server, which may begin to follow a
  // primary without reopening (REPLICAOF), turns it off too;
  // DB::ApplyLogBatch refuses to run with it on. With one writer thread it
  // gains nothing. Default: true. Not persisted.
  bool pipelined_write = true;

  // Advanced: the RocksDB Env the database does its I/O through (it must
  // outlive the DB). nullptr = rocksdb::Env::Default(). An escape hatch for
  // encrypted or in-memory file systems, and for tests, which inject I/O
  // errors and power loss through a rocksdb::FileSystemWrapper wrapped with
  // rocksdb::NewCompositeEnv. Only a forward declaration here: using it
  // needs <rocksdb/env.h>. Not persisted.
  rocksdb::Env* env = nullptr;
};

struct ReadOptions {
  // Verify the checksum of every block read from a file (as RocksDB does by
  // default). With false, a damaged block is not detected: the read may
  // return garbage, or RocksDB may abort on it. Default: true.
  bool verify_checksums = true;
  // Whether blocks read by this operation go into the block cache.
  // Default: true (set false for bulk scans).
  bool fill_cache = true;
  // Iterators only: if non-empty, keys at or past this bound are not
  // visited (exclusive). Default: empty (no bound).
  std::string iterate_upper_bound;
};

struct WriteOptions {
  // If true, the write is acknowledged only after the WAL is fsync'ed, so a
  // machine crash loses nothing acknowledged. If false (the default, as in
  // RocksDB) a process crash loses nothing but a machine crash may lose the
  // most recent writes. Either way the WAL is always on and recovery yields a
  // prefix of the acknowledged writes, with data and max tokens consistent.
  // AdvanceFence, SetFenceFloor and lease grants are always synced.
  bool sync = false;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_OPTIONS_H_
