// Copyright (c) fencedkv authors.

#include "bench_store.h"

#include <filesystem>
#include <fstream>
#include <mutex>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/write_batch.h>

#include "db/rocksdb_options.h"

namespace fencedkv {
namespace bench {

namespace {

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

// In a raw database fenced_bench created (--fenced=false): a plain RocksDB
// database it may destroy again, unlike anyone else's.
constexpr char kRawMark[] = "/FENCED_BENCH_RAW";

class FencedStore final : public BenchStore {
 public:
  FencedStore(std::unique_ptr<DB> db, bool sync) : db_(std::move(db)) {
    wo_.sync = sync;
  }
  bool fenced() const override { return true; }

  Outcome Put(std::string_view key, std::string_view value,
              Token token) override {
    return Map(db_->Put(wo_, key, value, token));
  }
  Outcome Delete(std::string_view key, Token token) override {
    return Map(db_->Delete(wo_, key, token));
  }
  Outcome Write(const std::vector<BatchOp>& ops) override {
    thread_local fencedkv::WriteBatch batch;  // reused: no steady-state allocs
    batch.Clear();
    for (const BatchOp& op : ops) {
      if (op.is_delete) {
        batch.Delete(op.key, op.token);
      } else {
        batch.Put(op.key, op.value, op.token);
      }
    }
    return Map(db_->Write(wo_, batch));
  }
  Outcome Get(std::string_view key, std::string* value) override {
    return Map(db_->Get(ro_, key, value));
  }
  void MultiGet(size_t n, const std::string_view* keys, std::string* values,
                Outcome* outcomes) override {
    thread_local std::vector<Status> statuses;
    statuses.resize(n);
    db_->MultiGet(ro_, n, keys, values, statuses.data());
    for (size_t i = 0; i < n; ++i) outcomes[i] = Map(statuses[i]);
  }
  Outcome Seek(std::string_view target, int nexts, bool* found,
               uint64_t* bytes) override {
    std::unique_ptr<Iterator> it = db_->NewIterator(ro_);
    it->Seek(target);
    *found = it->Valid() && it->key() == target;
    for (int j = 0; j < nexts && it->Valid(); ++j) {
      *bytes += it->key().size() + it->value().size();
      it->Next();
    }
    if (it->status().ok()) return Outcome::kOk;
    SetError(it->status().ToString());
    return Outcome::kError;
  }
  Outcome GetFenced(std::string_view key, Token token,
                    std::string* value) override {
    return Map(db_->GetFenced(ro_, key, token, value));
  }
  Outcome AdvanceFence(std::string_view key, Token token) override {
    return Map(db_->AdvanceFence(wo_, key, token, nullptr));
  }
  Token GetFence(std::string_view key) override {
    Token t = 0;
    Status s = db_->GetFence(key, &t);
    if (!s.ok()) SetError(s.ToString());
    return t;
  }
  bool Scan(uint64_t n, const std::function<void(size_t)>& fn) override {
    auto it = db_->NewIterator(ro_);
    uint64_t i = 0;
    for (it->SeekToFirst(); i < n && it->Valid(); it->Next(), ++i) {
      fn(it->key().size() + it->value().size());
    }
    if (!it->status().ok()) SetError(it->status().ToString());
    return it->status().ok();
  }
  Outcome Compact() override {
    return Map(db_->CompactRange(nullptr, nullptr));
  }
  std::string Property(const std::string& name) override {
    std::string v;
    return db_->GetProperty(name, &v) ? v : "";
  }
  Token HighWaterMark() override {
    const std::string stats = Property("fencedkv.stats");
    const std::string tag = "high_water_mark: ";
    const size_t pos = stats.find(tag);
    if (pos == std::string::npos) return 0;
    return std::strtoull(stats.c_str() + pos + tag.size(), nullptr, 10);
  }
  std::string LastError() const override {
    std::lock_guard<std::mutex> l(error_mu_);
    return error_;
  }

 private:
  Outcome Map(const Status& s) {
    if (s.ok()) return Outcome::kOk;
    if (s.IsStaleToken()) return Outcome::kStale;
    if (s.IsNotFound()) return Outcome::kNotFound;
    SetError(s.ToString());
    return Outcome::kError;
  }

  std::unique_ptr<DB> db_;
  WriteOptions wo_;
  ReadOptions ro_;
  void SetError(std::string e) {
    std::lock_guard<std::mutex> l(error_mu_);
    error_ = std::move(e);
  }
  mutable std::mutex error_mu_;
  std::string error_;
};

class RawStore final : public BenchStore {
 public:
  RawStore(std::unique_ptr<rocksdb::DB> db, bool sync) : db_(std::move(db)) {
    wo_.sync = sync;
  }
  bool fenced() const override { return false; }

  Outcome Put(std::string_view key, std::string_view value, Token) override {
    return Map(db_->Put(wo_, ToSlice(key), ToSlice(value)));
  }
  Outcome Delete(std::string_view key, Token) override {
    return Map(db_->Delete(wo_, ToSlice(key)));
  }
  Outcome Write(const std::vector<BatchOp>& ops) override {
    rocksdb::WriteBatch batch;
    for (const BatchOp& op : ops) {
      if (op.is_delete) {
        batch.Delete(ToSlice(op.key));
      } else {
        batch.Put(ToSlice(op.key), ToSlice(op.value));
      }
    }
    return Map(db_->Write(wo_, &batch));
  }
  Outcome Get(std::string_view key, std::string* value) override {
    rocksdb::PinnableSlice v;
    Outcome o =
        Map(db_->Get(ro_, db_->DefaultColumnFamily(), ToSlice(key), &v));
    if (o == Outcome::kOk) value->assign(v.data(), v.size());
    return o;
  }
  void MultiGet(size_t n, const std::string_view* keys, std::string* values,
                Outcome* outcomes) override {
    thread_local std::vector<rocksdb::Slice> slices;
    thread_local std::vector<rocksdb::PinnableSlice> pinned;
    thread_local std::vector<rocksdb::Status> statuses;
    slices.resize(n);
    pinned.resize(n);
    statuses.resize(n);
    for (size_t i = 0; i < n; ++i) {
      slices[i] = ToSlice(keys[i]);
      pinned[i].Reset();
    }
    db_->MultiGet(ro_, db_->DefaultColumnFamily(), n, slices.data(),
                  pinned.data(), statuses.data());
    for (size_t i = 0; i < n; ++i) {
      outcomes[i] = Map(statuses[i]);
      if (outcomes[i] == Outcome::kOk) {
        values[i].assign(pinned[i].data(), pinned[i].size());
      }
      pinned[i].Reset();
    }
  }
  Outcome Seek(std::string_view target, int nexts, bool* found,
               uint64_t* bytes) override {
    rocksdb::ReadOptions ro = IteratorReadOptions();  // as the fenced store's
    ro.fill_cache = ro_.fill_cache;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    it->Seek(ToSlice(target));
    *found = it->Valid() && it->key() == ToSlice(target);
    for (int j = 0; j < nexts && it->Valid(); ++j) {
      *bytes += it->key().size() + it->value().size();
      it->Next();
    }
    if (it->status().ok()) return Outcome::kOk;
    SetError(it->status().ToString());
    return Outcome::kError;
  }
  Outcome GetFenced(std::string_view key, Token, std::string* value) override {
    return Get(key, value);
  }
  Outcome AdvanceFence(std::string_view, Token) override {
    SetError("AdvanceFence is not applicable with --fenced=false");
    return Outcome::kError;
  }
  Token GetFence(std::string_view) override { return 0; }
  bool Scan(uint64_t n, const std::function<void(size_t)>& fn) override {
    rocksdb::ReadOptions ro = IteratorReadOptions();
    ro.fill_cache = ro_.fill_cache;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    uint64_t i = 0;
    for (it->SeekToFirst(); i < n && it->Valid(); it->Next(), ++i) {
      fn(it->key().size() + it->value().size());
    }
    if (!it->status().ok()) SetError(it->status().ToString());
    return it->status().ok();
  }
  Outcome Compact() override {
    rocksdb::CompactRangeOptions cro;
    return Map(db_->CompactRange(cro, nullptr, nullptr));
  }
  std::string Property(const std::string& name) override {
    std::string v;
    return db_->GetProperty(name, &v) ? v : "";
  }
  Token HighWaterMark() override { return 0; }
  std::string LastError() const override {
    std::lock_guard<std::mutex> l(error_mu_);
    return error_;
  }

 private:
  Outcome Map(const rocksdb::Status& s) {
    if (s.ok()) return Outcome::kOk;
    if (s.IsNotFound()) return Outcome::kNotFound;
    SetError(s.ToString());
    return Outcome::kError;
  }

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions wo_;
  rocksdb::ReadOptions ro_;
  void SetError(std::string e) {
    std::lock_guard<std::mutex> l(error_mu_);
    error_ = std::move(e);
  }
  mutable std::mutex error_mu_;
  std::string error_;
};

}  // namespace

std::unique_ptr<BenchStore> OpenFencedStore(const StoreOptions& options,
                                            const std::string& path,
                                            std::string* error) {
  std::unique_ptr<DB> db;
  Status s = DB::Open(options.options, path, &db);
  if (s.ok() && options.fence_floor > db->GetFenceFloor()) {
    WriteOptions wo;
    s = db->SetFenceFloor(wo, options.fence_floor);
  }
  if (!s.ok()) {
    *error = s.ToString();
    return nullptr;
  }
  return std::make_unique<FencedStore>(std::move(db), options.sync);
}

std::unique_ptr<BenchStore> OpenRawStore(const StoreOptions& options,
                                         const std::string& path,
                                         std::string* error) {
  rocksdb::DBOptions db_options;
  rocksdb::ColumnFamilyOptions cf_options;
  Status s = BuildRocksDBOptions(options.options, &db_options, &cf_options);
  if (!s.ok()) {
    *error = s.ToString();
    return nullptr;
  }
  rocksdb::Options ro(db_options, cf_options);
  const bool created = !StoreExists(path);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status rs = rocksdb::DB::Open(ro, path, &raw);
  if (rs.ok() && created) {
    std::ofstream mark(path + kRawMark);
    mark << "a raw (--fenced=false) database fenced_bench created\n";
    mark.close();
    if (!mark) rs = rocksdb::Status::IOError("cannot write " + path + kRawMark);
  }
  if (!rs.ok()) {
    delete raw;
    *error = rs.ToString();
    return nullptr;
  }
  return std::make_unique<RawStore>(std::unique_ptr<rocksdb::DB>(raw),
                                    options.sync);
}

bool StoreExists(const std::string& path) {
  return rocksdb::Env::Default()->FileExists(path + "/CURRENT").ok();
}

bool MayReplace(const std::string& path, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return true;
  if (!fs::is_directory(st)) {
    *error = path + " exists and is not a directory";
    return false;
  }
  if (fs::is_empty(path, ec) && !ec) return true;
  // A server's store (it keeps its node id and replication state beside
  // the database): never destroyed for a benchmark. Before, fenced_bench
  // deleted its RocksDB files, then could not open what was left (those
  // two files, no CURRENT), and neither could the server.
  for (const char* f : {"NODE_ID", "REPLICATION"}) {
    if (fs::exists(path + "/" + f, ec)) {
      *error = path + " holds a fencedkv-server's store (its " +
               std::string(f) +
               "): fenced_bench destroys --db before a fresh benchmark and "
               "will not destroy that; give it another --db";
      return false;
    }
  }
  const rocksdb::DBOptions options;
  if (!StoreExists(path)) {
    *error = "not a fencedkv database: " + path +
             ": it has files but no RocksDB CURRENT file";
    return false;
  }
  const Status s = CheckColumnFamilies(options, path);
  if (s.ok()) return true;  // fencedkv's
  std::vector<std::string> names;
  if (fs::exists(path + kRawMark, ec) &&
      rocksdb::DB::ListColumnFamilies(options, path, &names).ok() &&
      names == std::vector<std::string>{rocksdb::kDefaultColumnFamilyName}) {
    return true;  // its own raw database
  }
  *error = std::string(s.message());
  return false;
}

bool DestroyStore(const std::string& path, std::string* error) {
  rocksdb::Options options;
  // Name our column families so their files are recognized too.
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"fence", rocksdb::ColumnFamilyOptions()},
      {"meta", rocksdb::ColumnFamilyOptions()}};
  rocksdb::Status s = rocksdb::DestroyDB(path, options, cfs);
  if (!s.ok() && !s.IsNotFound()) {
    *error = s.ToString();
    return false;
  }
  // DestroyDB left the directory if the mark was in it.
  std::error_code ec;
  if (std::filesystem::remove(path + kRawMark, ec)) {
    std::filesystem::remove(path, ec);
  }
  return true;
}

}  // namespace bench
}  // namespace fencedkv
