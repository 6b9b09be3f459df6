// Copyright (c) fencedkv authors.
//
// Opening a database: options are validated before anything is touched;
// an existing database's stored configuration is read through a read-only
// RocksDB open (which changes nothing on disk) and checked against the
// options before the read-write open, which replays and flushes the WAL; so
// a refused open leaves the directory exactly as it was. A format version 1
// database is upgraded in place (fence_format.h).

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <vector>

#include <rocksdb/env.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include "db/db_impl.h"
#include "db/error_recovery.h"
#include "db/fence_format.h"
#include "db/log_tail.h"
#include "db/rocksdb_options.h"
#include "db/sorted_flush_memtable.h"
#include "db/synced_marker.h"
#include "db/synced_stamp.h"
#include "db/wal_scan.h"
#include "util/coding.h"

namespace fencedkv {

namespace {

// A file RocksDB writes while it creates a database, before CURRENT: a
// directory holding only these is a creation that failed (e.g. a full disk
// at the CURRENT rename) and holds no data, so a create_if_missing Open
// creates the database again instead of refusing the directory.
bool IsCreationFile(const std::string& name) {
  auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
  };
  std::string_view n = name;
  if (n == "IDENTITY" || n == "LOCK" || n == "LOG" || n == "MANIFEST-000001") {
    return true;
  }
  if (n.substr(0, 8) == "LOG.old.") return digits(n.substr(8));
  if (n.size() > 6 && n.substr(n.size() - 6) == ".dbtmp") {
    return digits(n.substr(0, n.size() - 6));
  }
  return false;
}

constexpr size_t kNumStripes = 1024;

rocksdb::Slice ToSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

// RocksDB's memtable encodes a whole entry (varint lengths, the key and its
// 8-byte sequence/type, the value) with a 32-bit length; our value carries a
// data record header. The size limits must keep the largest entry inside.
static_assert(uint64_t{kMaxKeySizeLimit} + 8 + kMaxValueSizeLimit +
                      format::kMaxDataHeaderSize + 2 * 5 <=
                  0xffffffffull,
              "a key and a value at the limits must fit one RocksDB entry");

// Names the meta record a failed read was about, and the likely cause.
Status MetaReadError(std::string_view record, const rocksdb::Status& rs) {
  std::string cause = "the files are damaged";
  if (rs.ToString().find("merge") != std::string::npos) {
    cause =
        "it holds merge operands that cannot be merged: written by a tool "
        "that does not know fencedkv's format version 1 merge operator?";
  }
  return Status::Corruption("cannot read meta record \"" + std::string(record) +
                                "\" (" + rs.ToString() + ")",
                            cause);
}

// The databases open read-write in this process, by directory. RocksDB's
// in-process lock table is keyed by the path string as given, so "db/",
// "./db" or a symlink opened a database that "db" held: two DBs on one
// directory wrote over each other's MANIFEST (the next open failed with
// Corruption) and each kept its own fence view and lease counter.
class OpenDirectories {
 public:
  // The directory `path` names, absolute, with symlinks of its existing
  // part resolved and no "." or ".." or trailing '/'.
  static std::string KeyOf(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path p = fs::absolute(path, ec);
    if (ec) p = fs::path(path);
    fs::path c = fs::weakly_canonical(p, ec);
    std::string key = (ec ? p.lexically_normal() : c).string();
    while (key.size() > 1 && key.back() == '/') key.pop_back();
    return key;
  }
  // The directory `path` names by its device and inode, which no spelling
  // changes, a bind mount included (a path key cannot see one: the same
  // directory under /data/db and a bind mount of it were two DBs); empty
  // if it does not exist (yet) on the local file system.
  static std::string InodeKeyOf(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "";
    return "inode " + std::to_string(st.st_dev) + ":" +
           std::to_string(st.st_ino);
  }
  // Claims every one of `keys` for `path`, or none: Busy if one is open
  // already (the message names how it was opened).
  static Status Claim(const std::vector<std::string>& keys,
                      const std::string& path) {
    MutexLock lock(&mu_);
    for (const std::string& key : keys) {
      auto it = open().find(key);
      if (it != open().end()) {
        return Status::Busy(
            path + " is already open in this process (as " + it->second + ")",
            "one directory takes one DB at a time");
      }
    }
    for (const std::string& key : keys) open().emplace(key, path);
    return Status::OK();
  }
  static void Release(const std::vector<std::string>& keys) {
    MutexLock lock(&mu_);
    for (const std::string& key : keys) open().erase(key);
  }

 private:
  // Never destroyed: a DB closed during static destruction still finds it.
  static std::map<std::string, std::string>& open() REQUIRES(mu_) {
    static auto* const open = new std::map<std::string, std::string>;
    return *open;
  }
  static Mutex mu_;
};
Mutex OpenDirectories::mu_;

}  // namespace

DBImpl::DBImpl(const Options& options, const FenceDomainSpec& spec,
               std::string path)
    : options_(options),
      path_(std::move(path)),
      spec_(spec),
      mode_(options.fence_mode),
      table_(new FenceTable(kNumStripes, options.fence_cache_bytes,
                            options.prefault_fence_cache)),
      values_(options.value_cache_size > 0
                  ? new ValueCache(options.value_cache_size)
                  : nullptr),
      data_gc_(new FenceGcFilter(&floor_, FenceGcFilter::Target::kDataRecords)),
      fence_gc_(
          new FenceGcFilter(&floor_, FenceGcFilter::Target::kFenceRecords)),
      log_tail_(options.log_tail_bytes > 0
                    ? new LogTail(options.log_tail_bytes,
                                  [this] {
                                    return db_ == nullptr
                                               ? 0
                                               : db_->GetLatestSequenceNumber();
                                  })
                    : nullptr),
      recovery_(new ErrorRecovery),
      stats_(new StatShard[kStatShards]) {
  recovery_->SetLogTail(log_tail_.get());
}

DBImpl::~DBImpl() {
  StopWalSyncer();    // no write of its own on a closing DB
  recovery_->Stop();  // no Resume() on a closing DB
  if (db_ != nullptr) {
    for (auto* cf : {data_cf_, fence_cf_, meta_cf_}) {
      if (cf != nullptr) db_->DestroyColumnFamilyHandle(cf);
    }
    db_->Close();
    db_.reset();
  }
  OpenDirectories::Release(open_keys_);
}

Status DBImpl::ValidateOptions(const Options& o) {
  FenceDomainSpec spec;
  Status s = FenceDomainSpec::Parse(o.fence_domain, &spec);
  if (!s.ok()) return s;
  if (o.fence_mode != FenceMode::kMonotonic &&
      o.fence_mode != FenceMode::kStrict) {
    return Status::InvalidArgument(
        "invalid fence_mode " + std::to_string(static_cast<int>(o.fence_mode)),
        "expected FenceMode::kMonotonic or FenceMode::kStrict");
  }
  if (o.max_key_size == 0 || o.max_key_size > kMaxKeySizeLimit) {
    return Status::InvalidArgument(
        "max_key_size " + std::to_string(o.max_key_size) +
        " is out of range: 1.." + std::to_string(kMaxKeySizeLimit) +
        " (RocksDB cannot store larger keys)");
  }
  if (o.max_value_size > kMaxValueSizeLimit) {
    return Status::InvalidArgument(
        "max_value_size " + std::to_string(o.max_value_size) +
        " is out of range: 0.." + std::to_string(kMaxValueSizeLimit) +
        " (RocksDB cannot store larger values)");
  }
  if (o.wal_sync_interval_ms > 3600 * 1000) {
    return Status::InvalidArgument("wal_sync_interval_ms " +
                                   std::to_string(o.wal_sync_interval_ms) +
                                   " is out of range: 0..3600000");
  }
  // (RocksDB clips a memtable to 64 GiB; the hash memtable sizes its
  // buckets from it: SIZE_MAX took 600 MB and more for one write.)
  if (o.write_buffer_size < kMinWriteBufferSize ||
      o.write_buffer_size > kMaxWriteBufferSize) {
    return Status::InvalidArgument("write_buffer_size " +
                                   std::to_string(o.write_buffer_size) +
                                   " is out of range: 64 KiB..64 GiB");
  }
  // (A thread RocksDB cannot create is an abort, not an error.)
  if (o.max_background_jobs < 1 ||
      o.max_background_jobs > kMaxBackgroundJobsLimit) {
    return Status::InvalidArgument(
        "max_background_jobs " + std::to_string(o.max_background_jobs) +
        " is out of range: 1.." + std::to_string(kMaxBackgroundJobsLimit));
  }
  if (o.level0_file_num_compaction_trigger < 1) {
    return Status::InvalidArgument(
        "level0_file_num_compaction_trigger must be at least 1");
  }
  if (o.max_open_files != -1 && o.max_open_files < 1) {
    return Status::InvalidArgument(
        "max_open_files must be -1 (unlimited) or positive");
  }
  // compression and memtable names: BuildRocksDBOptions, also before any
  // file is touched.
  rocksdb::DBOptions db_options;
  rocksdb::ColumnFamilyOptions cf_options;
  Options names_only = o;
  names_only.block_cache_size = 0;  // nothing to allocate for the check
  return BuildRocksDBOptions(names_only, &db_options, &cf_options);
}

Status DB::Open(const Options& options, const std::string& path,
                std::unique_ptr<DB>* db) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  Status s = DBImpl::ValidateOptions(options);
  if (!s.ok()) return s;
  FenceDomainSpec spec;
  s = FenceDomainSpec::Parse(options.fence_domain, &spec);
  if (!s.ok()) return s;
  auto impl = std::make_unique<DBImpl>(options, spec, path);
  s = impl->OpenImpl();
  if (!s.ok()) return s;
  // A replica's database follows its primary's log from the start (its
  // own setup, above, wrote the meta records a new database needs; a
  // replica's first batch is then a full copy's).
  if (options.log_replica) impl->SetFollowing(true);
  impl->StartWalSyncer();
  *db = std::move(impl);
  return s;
}

DB::~DB() = default;

Status DBImpl::OpenImpl() {
  rocksdb::DBOptions db_options;
  rocksdb::ColumnFamilyOptions data_options;
  Status s = BuildRocksDBOptions(options_, &db_options, &data_options);
  if (!s.ok()) return s;
  // Before anything is read: another DB of this process on the directory
  // under another spelling would not be seen by RocksDB's lock.
  std::vector<std::string> keys{OpenDirectories::KeyOf(path_)};
  // (The inode only through the local file system: another Env's path
  // names something else.)
  const bool local =
      options_.env == nullptr || options_.env == rocksdb::Env::Default();
  const std::string inode =
      local ? OpenDirectories::InodeKeyOf(path_) : std::string();
  if (!inode.empty()) keys.push_back(inode);
  s = OpenDirectories::Claim(keys, path_);
  if (!s.ok()) return s;
  open_keys_ = keys;
  rocksdb::Env* env = db_options.env;

  // What is there: nothing, an empty directory, a RocksDB database, or
  // something else. (Through the Env, which may not be the local disk.)
  bool has_current = false;
  if (env->FileExists(path_).ok()) {
    bool is_dir = false;
    rocksdb::Status rs = env->IsDirectory(path_, &is_dir);
    if (rs.IsNotSupported()) {
      // (RocksDB's in-memory Env cannot tell; GetChildren below can.)
      rs = rocksdb::Status::OK();
      is_dir = true;
    }
    if (rs.ok() && !is_dir) {
      return Status::InvalidArgument(path_, "exists and is not a directory");
    }
    std::vector<std::string> children;
    if (rs.ok()) rs = env->GetChildren(path_, &children);
    if (!rs.ok()) return Status::IOError(path_, rs.ToString());
    children.erase(std::remove_if(children.begin(), children.end(),
                                  [](const std::string& c) {
                                    return c == "." || c == "..";
                                  }),
                   children.end());
    has_current = std::find(children.begin(), children.end(), "CURRENT") !=
                  children.end();
    if (!has_current && !children.empty() &&
        !std::all_of(children.begin(), children.end(), IsCreationFile)) {
      if (OptionsNameFencedkvFamilies(env, path_)) {
        // As fencedkv-admin check says: damage (exit 2 there), not some
        // other directory.
        return Status::Corruption(
            "damaged fencedkv database: " + path_,
            "its OPTIONS file records fencedkv's column families, but it has "
            "no RocksDB CURRENT file");
      }
      return Status::InvalidArgument(
          "not a fencedkv database: " + path_,
          "the directory has files but no RocksDB CURRENT file");
    }
  }
  if (has_current && options_.error_if_exists) {
    return Status::InvalidArgument(path_,
                                   "database exists (error_if_exists is true)");
  }
  if (!has_current && !options_.create_if_missing) {
    return Status::InvalidArgument(
        path_, "database does not exist (create_if_missing is false)");
  }
  if (local && inode.empty()) {
    // A directory this open creates: made here (RocksDB would make it) and
    // claimed by its inode before RocksDB touches it, so that an open of it
    // under another path meanwhile (a bind mount) is one of two Busy.
    rocksdb::Status rs = env->CreateDirIfMissing(path_);
    if (!rs.ok()) return FromRocksDB(rs);
    const std::string created = OpenDirectories::InodeKeyOf(path_);
    if (!created.empty()) {
      s = OpenDirectories::Claim({created}, path_);
      if (!s.ok()) return s;
      open_keys_.push_back(created);
    }
  }

  data_options.compaction_filter = data_gc_.get();
  rocksdb::ColumnFamilyOptions fence_options = data_options;
  fence_options.compaction_filter = fence_gc_.get();
  rocksdb::ColumnFamilyOptions meta_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {format::kDataColumnFamily, data_options},
      {format::kFenceColumnFamily, fence_options},
      {format::kMetaColumnFamily, meta_options}};

  StoredConfig stored;
  bool create = !has_current;
  BeforeOpen before;  // read below when the store exists
  stamp_env_ = env;
  if (has_current && env->FileExists(path_ + "/LOCK").ok()) {
    // Another process (or DB) holding the database: refuse before RocksDB
    // opens anything, which would rotate the holder's info LOG first. (Only
    // probed if the file exists: locking creates it.)
    rocksdb::FileLock* lock = nullptr;
    rocksdb::Status rs = env->LockFile(path_ + "/LOCK", &lock);
    if (!rs.ok()) {
      return Status::Busy(path_ + " is in use by another process or DB",
                          rs.ToString());
    }
    env->UnlockFile(lock);
  }
  if (has_current) {
    // Refuse anything that is not ours before RocksDB touches it.
    Status cs = CheckColumnFamilies(db_options, path_);
    if (!cs.ok()) return cs;
    // Read the stored configuration without changing anything: a read-only
    // open replays the WAL in memory only. (The merge operator reads a
    // version-1 mark.)
    std::vector<rocksdb::ColumnFamilyDescriptor> ro_descriptors = descriptors;
    ro_descriptors[2].options.merge_operator = NewMaxTokenMergeOperator();
    // What the WAL holds intact (its recovery stops silently at damage:
    // wal_scan.h), how far it had been synced (RocksDB skips a WAL file that
    // is gone without a word: synced_stamp.h) and what archive/ holds, read
    // before RocksDB recovers it.
    s = ReadBeforeOpen(env, path_, &before);
    if (!s.ok()) return s;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* ro = nullptr;
    rocksdb::Status rs = rocksdb::DB::OpenForReadOnly(
        db_options, path_, ro_descriptors, &handles, &ro);
    if (!rs.ok()) return FromRocksDB(rs);
    if (!options_.drop_wal_after_damage) {
      s = CheckAfterOpen(env, path_, before, ro);
    }
    if (s.ok()) s = ReadStoredConfig(ro, handles, &stored);
    for (auto* h : handles) ro->DestroyColumnFamilyHandle(h);
    delete ro;
    if (!s.ok()) return s;
    if (!stored.has_version) {
      // Either not ours, or a creation interrupted before its first
      // (synced) metadata write. Only a completely empty database is the
      // latter.
      if (!stored.empty || !options_.create_if_missing) {
        return Status::InvalidArgument(
            "not a fencedkv database: " + path_,
            stored.empty ? "its creation was interrupted; open it with "
                           "create_if_missing to finish"
                         : "it has no format_version record");
      }
      create = true;
    } else {
      s = CheckStoredConfig(stored);
      if (!s.ok()) return s;
    }
  }

  // Everything is checked: now the read-write open, which may write.
  recovery_->Configure(path_, &db_options);
  db_options.create_if_missing = !has_current;
  db_options.create_missing_column_families = !has_current;
  if (stored.version == format::kFormatVersionMergedHwm) {
    descriptors[2].options.merge_operator = NewMaxTokenMergeOperator();
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status rs =
      rocksdb::DB::Open(db_options, path_, descriptors, &handles, &raw);
  if (!rs.ok()) return FromRocksDB(rs);
  db_.reset(raw);
  data_cf_ = handles[0];
  fence_cf_ = handles[1];
  meta_cf_ = handles[2];
  memtable_factory_ = db_->GetOptions(data_cf_).memtable_factory;
  data_buckets_ =
      GetMemtableBuckets(memtable_factory_.get(), data_cf_->GetID());
  // The sentinel goes in the meta column family, where it cannot touch the
  // data's key count estimate; a replica writes none (its sequence numbers
  // are the primary's) until it is promoted (SetFollowing(false)).
  recovery_->Attach(db_.get(), handles,
                    options_.log_replica ? nullptr : meta_cf_);
  if (before.stamp_found && db_->GetLatestSequenceNumber() < before.stamped) {
    // Opened with what was left (drop_wal_after_damage): that is the store
    // now. The stamp starts over from nothing: the latest sequence may be
    // a record not synced yet (the sentinel Attach just wrote), and the
    // next synced write stamps anew (a review saw a stamp of the latest
    // here refuse the store after a power cut).
    before.stamped = 0;
    s = WriteSyncedStamp(env, path_, before.stamped);
    if (!s.ok()) return s;
  }
  stamped_sequence_.store(before.stamp_found ? before.stamped : 0,
                          std::memory_order_relaxed);

  if (create) return InitializeNewDatabase();
  if (stored.version == format::kFormatVersionMergedHwm) {
    s = UpgradeFromMergedHwm(stored.hwm);
    if (!s.ok()) return s;
  }
  return LoadMeta();
}

Status DBImpl::ReadStoredConfig(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs,
    StoredConfig* config) {
  rocksdb::ColumnFamilyHandle* meta = cfs[2];
  std::string raw;
  auto get = [&](std::string_view record, bool* found) -> Status {
    rocksdb::Status rs =
        db->Get(rocksdb::ReadOptions(), meta, ToSlice(record), &raw);
    *found = rs.ok();
    if (rs.ok() || rs.IsNotFound()) return Status::OK();
    return MetaReadError(record, rs);
  };
  auto missing = [](std::string_view record) {
    return Status::Corruption(
        "meta record \"" + std::string(record) + "\" is missing",
        "a fencedkv database always has it: the files are damaged or were "
        "changed by another tool");
  };
  auto bad = [&](std::string_view record, const std::string& why) {
    return Status::Corruption(
        "bad meta record \"" + std::string(record) + "\": " + why,
        "value " + EscapeBytes(raw.substr(0, 64)));
  };
  bool found = false;
  Status s = get(format::kMetaFormatVersion, &found);
  if (!s.ok()) return s;
  if (!found) {
    config->has_version = false;
    config->empty = true;
    for (auto* cf : cfs) {
      std::unique_ptr<rocksdb::Iterator> it(
          db->NewIterator(IteratorReadOptions(), cf));
      it->SeekToFirst();
      if (it->Valid() || !it->status().ok()) config->empty = false;
    }
    return Status::OK();
  }
  config->has_version = true;
  if (raw.size() != 4) return bad(format::kMetaFormatVersion, "not 4 bytes");
  config->version = DecodeFixed32(raw.data());
  if (config->version != format::kFormatVersion &&
      config->version != format::kFormatVersionMergedHwm) {
    return Status::NotSupported(
        "database format version " + std::to_string(config->version),
        "this build reads versions 1 and " +
            std::to_string(format::kFormatVersion));
  }

  s = get(format::kMetaFenceDomain, &found);
  if (!s.ok()) return s;
  if (!found) return missing(format::kMetaFenceDomain);
  if (!FenceDomainSpec::Parse(raw, &config->spec).ok()) {
    return bad(format::kMetaFenceDomain, "not a domain function");
  }
  s = get(format::kMetaFenceMode, &found);
  if (!s.ok()) return s;
  if (!found) return missing(format::kMetaFenceMode);
  if (raw.size() != 1 || static_cast<uint8_t>(raw[0]) > 1) {
    return bad(format::kMetaFenceMode, "not 0 (monotonic) or 1 (strict)");
  }
  config->mode = static_cast<FenceMode>(raw[0]);
  s = get(format::kMetaFenceFloor, &found);
  if (!s.ok()) return s;
  if (!found) return missing(format::kMetaFenceFloor);
  if (!format::DecodeToken(raw, &config->floor)) {
    return bad(format::kMetaFenceFloor, "not 8 bytes");
  }

  config->hwm = 0;
  if (config->version == format::kFormatVersionMergedHwm) {
    s = get(format::kMetaLegacyHighWaterMark, &found);
    if (!s.ok()) return s;
    if (found && !format::DecodeToken(raw, &config->hwm)) {
      return bad(format::kMetaLegacyHighWaterMark, "not 8 bytes");
    }
    return Status::OK();
  }
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions(), meta));
  const rocksdb::Slice prefix = ToSlice(format::kMetaHighWaterMarkPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    Token mark = 0;
    if (!format::DecodeToken({it->value().data(), it->value().size()}, &mark)) {
      raw = it->value().ToString();
      return bad(it->key().ToString(), "not 8 bytes");
    }
    config->hwm = std::max(config->hwm, mark);
  }
  if (!it->status().ok()) {
    return MetaReadError(format::kMetaHighWaterMarkPrefix, it->status());
  }
  return Status::OK();
}

Status DBImpl::CheckStoredConfig(const StoredConfig& stored) {
  if (options_.adopt_stored_fence_config) return Status::OK();
  if (stored.spec != spec_) {
    return Status::InvalidArgument(
        "fence domain mismatch: the database at " + path_ +
            " was created with fence_domain \"" + stored.spec.ToString() +
            "\" but the options ask for \"" + spec_.ToString() + "\"",
        "reopening with another domain function would silently break "
        "every fence");
  }
  if (stored.mode != mode_) {
    return Status::InvalidArgument(
        "fence mode mismatch: the database at " + path_ +
            " was created with fence_mode \"" + FenceModeName(stored.mode) +
            "\" but the options ask for \"" + FenceModeName(mode_) + "\"",
        "the acceptance rule is fixed at creation");
  }
  return Status::OK();
}

Status DBImpl::InitializeNewDatabase() {
  rocksdb::WriteBatch batch;
  char version[4];
  EncodeFixed32(version, format::kFormatVersion);
  const char mode = static_cast<char>(mode_);
  rocksdb::Status rs = AddSyncedMarker(&batch);  // synced_marker.h
  if (rs.ok()) {
    rs = batch.Put(meta_cf_, ToSlice(format::kMetaFormatVersion),
                   rocksdb::Slice(version, 4));
  }
  if (rs.ok()) {
    rs = batch.Put(meta_cf_, ToSlice(format::kMetaFenceDomain),
                   spec_.ToString());
  }
  if (rs.ok()) {
    rs = batch.Put(meta_cf_, ToSlice(format::kMetaFenceMode),
                   rocksdb::Slice(&mode, 1));
  }
  if (rs.ok()) {
    rs = batch.Put(meta_cf_, ToSlice(format::kMetaFenceFloor),
                   format::EncodeToken(0));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (rs.ok()) rs = db_->Write(wo, &batch);
  if (!rs.ok()) return FromRocksDB(rs);
  data_gc_->SetMode(mode_);
  fence_gc_->SetMode(mode_);
  return Status::OK();
}

Status DBImpl::UpgradeFromMergedHwm(Token hwm) {
  // One synced batch: the mark as a plain record, the merged one gone, the
  // new version. Then compact the meta family so no merge operand is left
  // on disk for a tool without the operator to trip on.
  rocksdb::WriteBatch batch;
  char version[4];
  EncodeFixed32(version, format::kFormatVersion);
  rocksdb::Status rs = AddSyncedMarker(&batch);  // synced_marker.h
  if (rs.ok()) {
    rs = batch.Put(meta_cf_, format::HighWaterMarkKey(0),
                   format::EncodeToken(hwm));
  }
  if (rs.ok()) {
    rs = batch.Delete(meta_cf_, ToSlice(format::kMetaLegacyHighWaterMark));
  }
  if (rs.ok()) {
    rs = batch.Put(meta_cf_, ToSlice(format::kMetaFormatVersion),
                   rocksdb::Slice(version, 4));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (rs.ok()) rs = db_->Write(wo, &batch);
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  if (rs.ok()) rs = db_->CompactRange(cro, meta_cf_, nullptr, nullptr);
  if (!rs.ok()) {
    return Status::IOError("upgrading the database from format version 1",
                           rs.ToString());
  }
  return Status::OK();
}

Status DBImpl::LoadMeta() {
  StoredConfig stored;
  Status s =
      ReadStoredConfig(db_.get(), {data_cf_, fence_cf_, meta_cf_}, &stored);
  if (!s.ok()) return s;
  if (!stored.has_version) {
    return Status::Corruption("the format_version record disappeared");
  }
  s = CheckStoredConfig(stored);  // (again: another process may have raced)
  if (!s.ok()) return s;
  spec_ = stored.spec;
  mode_ = stored.mode;
  data_gc_->SetMode(mode_);
  fence_gc_->SetMode(mode_);
  table_->InitHwm(stored.hwm);
  hwm_.store(stored.hwm, std::memory_order_release);
  floor_.store(stored.floor, std::memory_order_release);
  return Status::OK();
}

}  // namespace fencedkv
