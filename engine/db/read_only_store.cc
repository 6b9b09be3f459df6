// Copyright (c) fencedkv authors.

#include "db/read_only_store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include <rocksdb/env.h>
#include <rocksdb/sst_file_reader.h>
#include <sys/stat.h>

#include "db/fence_format.h"
#include "db/fence_gc_filter.h"
#include "db/rocksdb_options.h"
#include "db/wal_scan.h"
#include "util/coding.h"

namespace fencedkv {

namespace {

namespace fs = std::filesystem;

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

Status ReadError(std::string_view what, const rocksdb::Status& s) {
  return Status::Corruption("cannot read " + std::string(what), s.ToString());
}

Status LockStore(const std::string& dir, std::string_view advice,
                 rocksdb::FileLock** lock) {
  const std::string lock_path = dir + "/LOCK";
  std::error_code ec;
  if (!fs::exists(lock_path, ec)) {
    return Status::NotFound(lock_path + " is missing",
                            "not a directory a server has opened");
  }
  rocksdb::Status rs = rocksdb::Env::Default()->LockFile(lock_path, lock);
  // RocksDB opens the file before it locks it: a failed open (a read-only
  // file system, no permission) is not a holder.
  if (!rs.ok() &&
      rs.ToString().find("open a file for lock") != std::string::npos) {
    return Status::IOError(dir + " cannot be changed: cannot open its LOCK",
                           rs.ToString());
  }
  if (!rs.ok()) {
    return Status::Busy(dir +
                            " is in use by a running process (its LOCK is "
                            "held): " +
                            std::string(advice),
                        rs.ToString());
  }
  return Status::OK();
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Status CheckNotInUse(const std::string& dir, std::string_view advice) {
  rocksdb::FileLock* lock = nullptr;
  Status s = LockStore(dir, advice, &lock);
  if (s.IsNotFound()) return Status::OK();  // nothing holds it
  if (s.ok()) rocksdb::Env::Default()->UnlockFile(lock);
  return s;
}

Status ReadOnlyStore::Open(const std::string& path,
                           std::unique_ptr<ReadOnlyStore>* store,
                           rocksdb::Env* env) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  rocksdb::DBOptions db_options;
  if (env != nullptr) db_options.env = env;
  env = db_options.env;
  if (!env->FileExists(path).ok()) {
    return Status::InvalidArgument(path, "does not exist");
  }
  bool is_dir = false;
  if (!env->IsDirectory(path, &is_dir).ok() || !is_dir) {
    return Status::InvalidArgument(path, "is not a directory");
  }
  if (!env->FileExists(path + "/CURRENT").ok()) {
    if (OptionsNameFencedkvFamilies(env, path)) {
      return Status::Corruption("damaged fencedkv database: " + path,
                                "its CURRENT file is missing (its OPTIONS "
                                "file records fencedkv's column families)");
    }
    return Status::InvalidArgument("not a fencedkv database: " + path,
                                   "it has no RocksDB CURRENT file");
  }
  Status cs = CheckColumnFamilies(db_options, path);
  if (!cs.ok()) return cs;
  // The merge operator reads a format version 1 high-water mark.
  rocksdb::ColumnFamilyOptions meta_options;
  meta_options.merge_operator = NewMaxTokenMergeOperator();
  const std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {format::kDataColumnFamily, rocksdb::ColumnFamilyOptions()},
      {format::kFenceColumnFamily, rocksdb::ColumnFamilyOptions()},
      {format::kMetaColumnFamily, meta_options}};
  std::unique_ptr<ReadOnlyStore> s;
  // A running server may flush and delete a log between the scan and the
  // open (Busy): a few fresh tries.
  for (int attempt = 1;; ++attempt) {
    s.reset(new ReadOnlyStore());
    s->path_ = path;
    s->env_ = env;
    // Before the open: a running server only appends to its WAL, so
    // whatever this scan finds intact the open recovers too, unless damage
    // stops it; its later stamp may cover writes this open does not see;
    // and a file archived after the open's read of the MANIFEST would look
    // like one it lost (wal_scan.h).
    BeforeOpen before;
    Status ws = ReadBeforeOpen(env, path, &before);
    if (!ws.ok()) return ws;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status rs = rocksdb::DB::OpenForReadOnly(
        db_options, path, descriptors, &s->handles_, &raw);
    if (!rs.ok()) {
      return Status::Corruption("cannot open " + path + " read-only",
                                rs.ToString());
    }
    s->db_.reset(raw);
    bool log_complete = false;
    s->wal_status_ = CheckAfterOpen(env, path, before, raw, &log_complete);
    // (A running server may have flushed and deleted or archived a log
    // between this open's reads of the MANIFEST and of the logs: the stamp
    // or archive/ then seem to miss a file. Try again, a moment later.)
    if (log_complete && !s->wal_status_.ok() && attempt < 5) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
      continue;
    }
    if (!s->wal_status_.IsBusy() || attempt == 5) break;
  }
  *store = std::move(s);
  return Status::OK();
}

Status ReadOnlyStore::OpenChecked(const std::string& path,
                                  std::unique_ptr<ReadOnlyStore>* store,
                                  rocksdb::Env* env) {
  Status s = Open(path, store, env);
  if (s.ok()) s = (*store)->wal_status();
  if (s.ok()) s = (*store)->ReadConfig(nullptr);
  if (!s.ok()) store->reset();
  return s;
}

ReadOnlyStore::~ReadOnlyStore() {
  for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
}

namespace {

// The descriptors this process holds, by what they name ("/d/000012.sst",
// or "/d/000012.sst (deleted)" once it was deleted); empty without /proc.
std::unordered_multimap<std::string, int> OpenDescriptors() {
  std::unordered_multimap<std::string, int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    fs::path target = fs::read_symlink(e.path(), link_ec);
    if (link_ec) continue;
    const std::string name = e.path().filename().string();
    out.emplace(target.string(), std::atoi(name.c_str()));
  }
  return out;
}

// A descriptor among `held` that names `path` (or names it deleted) and is
// a regular file of `size` bytes; -1 if none.
int HeldDescriptor(const std::unordered_multimap<std::string, int>& held,
                   const std::string& path, uint64_t size) {
  for (const std::string& name : {path, path + " (deleted)"}) {
    auto range = held.equal_range(name);
    for (auto it = range.first; it != range.second; ++it) {
      struct stat st;
      if (::fstat(it->second, &st) == 0 && S_ISREG(st.st_mode) &&
          static_cast<uint64_t>(st.st_size) == size) {
        return it->second;
      }
    }
  }
  return -1;
}

}  // namespace

void ReadOnlyStore::VerifyTableChecksums(
    const std::function<void(std::string)>& violation, size_t* files,
    uint64_t* bytes, const std::function<bool()>& stop) const {
  std::vector<rocksdb::LiveFileMetaData> live;
  db_->GetLiveFilesMetaData(&live);
  // The open read every table file (max_open_files -1: all at once) and
  // holds it open until the view is closed, deleted or not. Each file is
  // read again through that descriptor, as /proc/self/fd/N (a new open of
  // the same file). By name through the Env if it is not the default one
  // (a backup in place), or if no descriptor is found (no /proc).
  std::error_code ec;
  const bool local = env_ == rocksdb::Env::Default();
  const std::string real_dir = local ? fs::canonical(path_, ec).string() : "";
  const std::unordered_multimap<std::string, int> held =
      local && !ec ? OpenDescriptors()
                   : std::unordered_multimap<std::string, int>();
  *files = 0;
  *bytes = 0;
  for (const auto& f : live) {
    if (stop && stop()) return;
    ++*files;
    *bytes += f.size;
    const std::string path = f.db_path + f.name;  // the name starts with '/'
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    for (auto* h : handles_) {
      if (h->GetName() == f.column_family_name) cf = h;
    }
    if (cf == nullptr) {  // (Open refuses other column families)
      violation("SST file " + path + " of unknown column family " +
                f.column_family_name);
      continue;
    }
    const int fd = HeldDescriptor(held, real_dir + f.name, f.size);
    const std::string read_as =
        fd >= 0 ? "/proc/self/fd/" + std::to_string(fd) : path;
    rocksdb::Options options(db_->GetDBOptions(), db_->GetOptions(cf));
    rocksdb::SstFileReader reader(options);
    rocksdb::Status rs = reader.Open(read_as);
    if (rs.ok()) rs = reader.VerifyChecksum(rocksdb::ReadOptions());
    if (rs.ok()) continue;
    // RocksDB names the file it read ("... in /proc/self/fd/5 offset 0"):
    // the operator is told the SST's own path instead.
    std::string text = rs.ToString();
    size_t at = read_as == path ? std::string::npos : text.find(read_as);
    while (at != std::string::npos) {
      const size_t end = at + read_as.size();
      const bool longer = end < text.size() && text[end] >= '0' &&
                          text[end] <= '9';  // fd 5 within fd 57
      if (!longer) text.replace(at, read_as.size(), path);
      at = text.find(read_as, longer ? end : at + path.size());
    }
    violation("SST file " + path + ": " + std::move(text));
  }
}

std::unique_ptr<rocksdb::Iterator> ReadOnlyStore::NewIterator(
    rocksdb::ColumnFamilyHandle* cf) const {
  rocksdb::ReadOptions ro = IteratorReadOptions();
  ro.verify_checksums = true;
  ro.fill_cache = false;
  return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(ro, cf));
}

Status ReadOnlyStore::ReadConfig(std::vector<std::string>* problems) {
  std::vector<std::string> local;
  if (problems == nullptr) problems = &local;
  const size_t first = problems->size();
  config_ = StoreConfig();
  std::string raw;
  // Reads `record`: false if absent (a problem if `required`).
  auto get = [&](std::string_view record, bool required,
                 Status* error) -> bool {
    rocksdb::Status rs =
        db_->Get(rocksdb::ReadOptions(), meta(), ToSlice(record), &raw);
    if (rs.IsNotFound()) {
      if (required) {
        problems->push_back("meta record \"" + std::string(record) +
                            "\" is missing");
      }
      return false;
    }
    if (!rs.ok()) {
      *error = ReadError("meta record \"" + std::string(record) + "\"", rs);
      return false;
    }
    return true;
  };
  auto bad = [&](std::string_view record, const std::string& why) {
    problems->push_back("meta record \"" + std::string(record) + "\" " + why +
                        " (value \"" + EscapeBytes(raw.substr(0, 64)) + "\")");
  };
  Status error;
  if (get(format::kMetaFormatVersion, true, &error)) {
    if (raw.size() != 4) {
      bad(format::kMetaFormatVersion, "is not 4 bytes");
    } else {
      config_.format_version = DecodeFixed32(raw.data());
      if (config_.format_version > format::kFormatVersion) {
        // Not damage: a newer fencedkv wrote it, and its other records may
        // mean what this build cannot know (the server says the same).
        return Status::NotSupported(
            "database format version " + std::to_string(config_.format_version),
            "this build reads versions 1 and " +
                std::to_string(format::kFormatVersion));
      }
      if (config_.format_version != format::kFormatVersion &&
          config_.format_version != format::kFormatVersionMergedHwm) {
        bad(format::kMetaFormatVersion,
            "is version " + std::to_string(config_.format_version) +
                ", this build knows 1 and " +
                std::to_string(format::kFormatVersion));
      }
    }
  }
  if (get(format::kMetaFenceDomain, true, &error) &&
      !FenceDomainSpec::Parse(raw, &config_.spec).ok()) {
    bad(format::kMetaFenceDomain, "is not a domain function");
  }
  if (get(format::kMetaFenceMode, true, &error)) {
    if (raw.size() != 1 || static_cast<uint8_t>(raw[0]) > 1) {
      bad(format::kMetaFenceMode, "is not 0 (monotonic) or 1 (strict)");
    } else {
      config_.mode = static_cast<FenceMode>(raw[0]);
    }
  }
  if (get(format::kMetaFenceFloor, true, &error) &&
      !format::DecodeToken(raw, &config_.floor)) {
    bad(format::kMetaFenceFloor, "is not 8 bytes");
  }
  if (get(format::kMetaLeaseCounter, false, &error)) {
    config_.has_lease_counter = true;
    if (!format::DecodeToken(raw, &config_.lease_counter)) {
      bad(format::kMetaLeaseCounter, "is not 8 bytes");
    }
  }
  if (config_.format_version == format::kFormatVersionMergedHwm) {
    if (get(format::kMetaLegacyHighWaterMark, false, &error)) {
      config_.hwm_records = 1;
      if (!format::DecodeToken(raw, &config_.hwm)) {
        bad(format::kMetaLegacyHighWaterMark, "is not 8 bytes");
      }
    }
  } else {
    auto it = NewIterator(meta());
    const rocksdb::Slice prefix = ToSlice(format::kMetaHighWaterMarkPrefix);
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
         it->Next()) {
      Token mark = 0;
      raw = it->value().ToString();
      if (!format::DecodeToken(raw, &mark)) {
        bad(it->key().ToString(), "is not 8 bytes");
        continue;
      }
      ++config_.hwm_records;
      config_.hwm = std::max(config_.hwm, mark);
    }
    if (!it->status().ok()) {
      error = ReadError("the high-water mark records", it->status());
    }
  }
  if (!error.ok()) return error;
  if (problems->size() > first) {
    return Status::Corruption(path_ + ": " + (*problems)[first]);
  }
  return Status::OK();
}

Status ReadOnlyStore::StoredMax(std::string_view domain, Token* max) const {
  std::string raw;
  *max = 0;
  if (config_.spec.is_per_key()) {
    rocksdb::Status rs =
        db_->Get(rocksdb::ReadOptions(), data(), ToSlice(domain), &raw);
    if (rs.IsNotFound()) return Status::OK();
    if (!rs.ok()) return ReadError("a data record", rs);
    format::DataRecord record;
    Status s = format::DecodeDataRecordOf(domain, raw, &record);
    if (s.ok()) *max = record.token;
    return s;
  }
  rocksdb::Status rs =
      db_->Get(rocksdb::ReadOptions(), fence(), ToSlice(domain), &raw);
  if (rs.IsNotFound()) return Status::OK();
  if (!rs.ok()) return ReadError("a fence record", rs);
  if (!format::DecodeToken(raw, max)) {
    return Status::Corruption(
        "bad fence record for domain \"" + EscapeBytes(domain) + "\"",
        "not 8 bytes");
  }
  return Status::OK();
}

Status ReadOnlyStore::ForEachLease(
    const std::function<void(std::string_view, const format::LeaseRecord&)>& fn)
    const {
  auto it = NewIterator(meta());
  const rocksdb::Slice prefix = ToSlice(format::kMetaLeasePrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    const std::string_view name(it->key().data() + prefix.size(),
                                it->key().size() - prefix.size());
    format::LeaseRecord lease;
    if (!format::DecodeLeaseRecord({it->value().data(), it->value().size()},
                                   &lease)) {
      return Status::Corruption("bad lease record \"" + EscapeBytes(name) +
                                "\"");
    }
    fn(name, lease);
  }
  if (!it->status().ok()) return ReadError("the lease records", it->status());
  return Status::OK();
}

}  // namespace fencedkv
