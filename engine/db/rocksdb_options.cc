// Copyright (c) fencedkv authors.

#include "db/rocksdb_options.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <rocksdb/cache.h>
#include <rocksdb/comparator.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>

#include "db/fence_format.h"
#include "db/sorted_flush_memtable.h"

namespace fencedkv {

namespace {
bool ParseCompression(const std::string& name, rocksdb::CompressionType* t) {
  static const struct {
    const char* name;
    rocksdb::CompressionType type;
  } kTable[] = {
      {"none", rocksdb::kNoCompression},
      {"snappy", rocksdb::kSnappyCompression},
      {"zlib", rocksdb::kZlibCompression},
      {"bzip2", rocksdb::kBZip2Compression},
      {"lz4", rocksdb::kLZ4Compression},
      {"lz4hc", rocksdb::kLZ4HCCompression},
      {"zstd", rocksdb::kZSTD},
  };
  for (const auto& e : kTable) {
    if (name == e.name) {
      *t = e.type;
      return true;
    }
  }
  return false;
}
}  // namespace

Status BuildRocksDBOptions(const Options& options,
                           rocksdb::DBOptions* db_options,
                           rocksdb::ColumnFamilyOptions* cf_options) {
  rocksdb::CompressionType compression;
  if (!ParseCompression(options.compression, &compression)) {
    return Status::InvalidArgument(
        "unknown compression \"" + options.compression +
        "\": expected none | snappy | zlib | bzip2 | lz4 | lz4hc | zstd");
  }
  const bool hash_memtable = options.memtable == "hash";
  if (!hash_memtable && options.memtable != "skiplist") {
    return Status::InvalidArgument("unknown memtable \"" + options.memtable +
                                   "\": expected skiplist | hash");
  }
  if (options.env != nullptr) db_options->env = options.env;
  db_options->create_if_missing = options.create_if_missing;
  db_options->max_open_files = options.max_open_files;
  db_options->max_background_jobs = options.max_background_jobs;
  db_options->statistics = options.statistics;
  db_options->keep_log_file_num = 5;
  db_options->WAL_ttl_seconds = options.wal_retention_seconds;
  db_options->WAL_size_limit_MB = options.wal_retention_mb;
  // Concurrent writers overlap: the next group writes the WAL while this one
  // fills the memtable. Without it two writer threads on two cores took
  // turns through the whole write, the waiting one spinning in sched_yield
  // (fenced_bench fillrandom --threads=2 shows the difference). A write still
  // returns only once its own memtable insert is visible.
  // Not for a database following a primary's log (Options::pipelined_write):
  // there a failed write must take no sequence number, and RocksDB 7.8's
  // pipelined path numbers a group whose WAL write failed anyway (its write
  // thread keeps the last sequence it handed out), so the replica's log
  // moved past a batch it never held and its next apply landed two numbers
  // late (ReplicationTest.AFailedApplyTakesNoSequenceNumbers). The plain
  // path publishes a group's numbers only when it succeeded.
  db_options->enable_pipelined_write =
      options.pipelined_write && !options.log_replica;
  // RocksDB's default bound on the live WAL is 4 x every column family's
  // memtables (2 each): 1.5 GiB at 64 MiB, all of it replayed by the next
  // open, since a column family written rarely (meta: leases, the floor)
  // keeps old WAL files alive until it is flushed. Past this bound RocksDB
  // flushes the column families that hold the oldest WAL.
  db_options->max_total_wal_size = std::max<uint64_t>(
      4 * static_cast<uint64_t>(options.write_buffer_size), uint64_t{64} << 20);

  cf_options->write_buffer_size = options.write_buffer_size;
  cf_options->level0_file_num_compaction_trigger =
      options.level0_file_num_compaction_trigger;
  // A whole-key bloom filter on the skiplist memtable: a Get of an absent key
  // (and the fence check of a key never written) skips the skiplist walk,
  // which dominated server GET profiles. Not on the hash memtable: there a
  // Get of an absent key is one bucket probe, which costs what the filter's
  // probe costs (a cache miss), and the filter cost every insert a miss of
  // its own (a replica's profile: about 14% of its apply time in
  // MemTable::Add's filter update).
  if (options.bloom_bits_per_key > 0 && !hash_memtable) {
    cf_options->memtable_prefix_bloom_size_ratio = 0.02;
    cf_options->memtable_whole_key_filtering = true;
  }
  if (hash_memtable) {
    // Each key is its own "prefix", so a bucket holds one key's versions:
    // an insert or a Get is a hash probe, no skiplist search. Iterators must
    // ask for total order (every one in the engine does), and then the rep
    // sorts a copy of its entry list first (sorted_flush_memtable.h). The
    // rep takes no concurrent inserts.
    cf_options->prefix_extractor.reset(rocksdb::NewNoopTransform());
    const size_t buckets =
        std::max<size_t>(1024, options.write_buffer_size / 128);
    // The rep sorts a read-only memtable for its flush (a radix sort)
    // instead of building a skiplist (sorted_flush_memtable.h).
    cf_options->memtable_factory = NewSortedFlushHashRepFactory(
        buckets, cf_options->comparator == rocksdb::BytewiseComparator());
    db_options->allow_concurrent_memtable_write = false;
  }
  cf_options->compression = compression;
  rocksdb::BlockBasedTableOptions table;
  if (options.block_cache_size > 0) {
    table.block_cache = rocksdb::NewLRUCache(options.block_cache_size);
  } else {
    table.no_block_cache = true;
  }
  if (options.bloom_bits_per_key > 0) {
    table.filter_policy.reset(
        rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key));
  }
  // A hash index in each data block: a point lookup (every Get, and every
  // fence check that reaches RocksDB) finds its key without the binary
  // search over the block's restart points.
  table.data_block_index_type =
      rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  table.data_block_hash_table_util_ratio = 0.75;
  cf_options->table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return Status::OK();
}

rocksdb::ReadOptions IteratorReadOptions() {
  rocksdb::ReadOptions ro;
  ro.total_order_seek = true;
  return ro;
}

Status FromRocksDB(const rocksdb::Status& s) {
  if (s.ok()) return Status::OK();
  // RocksDB's text without its code name: ours says it again.
  std::string msg = s.ToString();
  for (const char* name :
       {"NotFound: ", "Corruption: ", "Not implemented: ", "Invalid argument: ",
        "IO error: ", "Resource busy: "}) {
    if (msg.rfind(name, 0) == 0) {
      msg.erase(0, std::strlen(name));
      break;
    }
  }
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return Status::NotFound(msg);
    case rocksdb::Status::kCorruption:
      return Status::Corruption(msg);
    case rocksdb::Status::kNotSupported:
      return Status::NotSupported(msg);
    case rocksdb::Status::kInvalidArgument:
      return Status::InvalidArgument(msg);
    case rocksdb::Status::kBusy:
      return Status::Busy(msg);
    case rocksdb::Status::kIOError:
      // The LOCK file held by another process (or DB): RocksDB's
      // PosixFileSystem::LockFile says so in these words. Only these: an I/O
      // error on a path that merely contains "lock" is an I/O error.
      if (msg.find("While lock file: ") != std::string::npos ||
          msg.find("lock hold by current process") != std::string::npos) {
        return Status::Busy(msg);
      }
      return Status::IOError(msg);
    default:
      return Status::IOError(msg);
  }
}

bool OptionsNameFencedkvFamilies(rocksdb::Env* env, const std::string& path) {
  std::vector<std::string> children;
  if (!env->GetChildren(path, &children).ok()) return false;
  // The newest OPTIONS-<number> file: RocksDB writes one at every open,
  // with a section per column family.
  uint64_t newest = 0;
  std::string name;
  for (const std::string& c : children) {
    const std::string prefix = "OPTIONS-";
    if (c.rfind(prefix, 0) != 0 || c.size() == prefix.size() ||
        c.size() > prefix.size() + 19 ||
        c.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
      continue;
    }
    const uint64_t n = std::stoull(c.substr(prefix.size()));
    if (name.empty() || n > newest) {
      newest = n;
      name = c;
    }
  }
  if (name.empty()) return false;
  std::string text;
  if (!rocksdb::ReadFileToString(env, path + "/" + name, &text).ok()) {
    return false;
  }
  return text.find("[CFOptions \"" + std::string(format::kFenceColumnFamily) +
                   "\"]") != std::string::npos &&
         text.find("[CFOptions \"" + std::string(format::kMetaColumnFamily) +
                   "\"]") != std::string::npos;
}

Status CheckColumnFamilies(const rocksdb::DBOptions& options,
                           const std::string& path) {
  std::vector<std::string> names;
  rocksdb::Status rs = rocksdb::DB::ListColumnFamilies(options, path, &names);
  if (rs.IsCorruption()) {
    // A CURRENT file that RocksDB reads but a MANIFEST (or CURRENT) that
    // fails its checks: most likely damage, which fencedkv-admin check
    // reports as such (exit 2).
    return Status::Corruption(
        "damaged, or not a fencedkv database: " + path,
        "cannot read its column families (" + rs.ToString() + ")");
  }
  rocksdb::Env* env =
      options.env != nullptr ? options.env : rocksdb::Env::Default();
  if (!rs.ok() && OptionsNameFencedkvFamilies(env, path)) {
    return Status::Corruption(
        "damaged fencedkv database: " + path,
        "its OPTIONS file records fencedkv's column families, but its "
        "MANIFEST cannot be read (" +
            rs.ToString() + ")");
  }
  if (!rs.ok()) {
    return Status::InvalidArgument(
        "not a fencedkv database: " + path,
        "cannot read its column families (" + rs.ToString() + ")");
  }
  const std::set<std::string> have(names.begin(), names.end());
  const std::set<std::string> want = {format::kDataColumnFamily,
                                      format::kFenceColumnFamily,
                                      format::kMetaColumnFamily};
  if (have != want) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    if (OptionsNameFencedkvFamilies(env, path)) {
      // A MANIFEST cut short still parses, as far as it goes: RocksDB's
      // default family only.
      return Status::Corruption(
          "damaged fencedkv database: " + path,
          "its MANIFEST lists the column families [" + list +
              "], but its OPTIONS file records fencedkv's [default, fence, "
              "meta]: the MANIFEST is cut short or damaged");
    }
    return Status::InvalidArgument("not a fencedkv database: " + path,
                                   "its column families are [" + list +
                                       "], expected [default, fence, meta]");
  }
  return Status::OK();
}

}  // namespace fencedkv
