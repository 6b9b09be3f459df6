// Copyright (c) fencedkv authors.

#include "db/db_iter.h"

#include <string>

#include "db/fence_format.h"
#include "db/rocksdb_options.h"

namespace fencedkv {

namespace {

class DBIter final : public Iterator {
 public:
  DBIter(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
         const ReadOptions& options)
      : db_(db),
        cf_(cf),
        upper_bound_(options.iterate_upper_bound),
        upper_slice_(upper_bound_) {
    rocksdb::ReadOptions ro = IteratorReadOptions();
    ro.verify_checksums = options.verify_checksums;
    ro.fill_cache = options.fill_cache;
    if (!upper_bound_.empty()) ro.iterate_upper_bound = &upper_slice_;
    iter_.reset(db->NewIterator(ro, cf));
  }

  bool Valid() const override { return valid_; }
  void SeekToFirst() override {
    iter_->SeekToFirst();
    SkipForward();
  }
  void SeekToLast() override {
    iter_->SeekToLast();
    SkipBackward();
  }
  void Seek(std::string_view target) override {
    iter_->Seek(rocksdb::Slice(target.data(), target.size()));
    SkipForward();
  }
  void SeekForPrev(std::string_view target) override {
    iter_->SeekForPrev(rocksdb::Slice(target.data(), target.size()));
    SkipBackward();
  }
  void Next() override {
    iter_->Next();
    SkipForward();
  }
  void Prev() override {
    iter_->Prev();
    SkipBackward();
  }
  std::string_view key() const override {
    return {iter_->key().data(), iter_->key().size()};
  }
  std::string_view value() const override { return record_.value; }
  Token token() const override { return record_.token; }
  Status status() const override {
    if (!corruption_.ok()) return corruption_;
    return FromRocksDB(iter_->status());
  }
  bool PinsOldVersion() const override {
    // RocksDB numbers a column family's versions (its "super version": the
    // memtables and files a read sees); the iterator holds the one it was
    // created on.
    std::string mine;
    uint64_t current = 0;
    if (!iter_->GetProperty("rocksdb.iterator.super-version-number", &mine)
             .ok() ||
        !db_->GetIntProperty(cf_, "rocksdb.current-super-version-number",
                             &current)) {
      return false;
    }
    return mine != std::to_string(current);
  }

 private:
  // Decodes the current record; true if it is a visible value.
  bool Visible() {
    const rocksdb::Slice raw = iter_->value();
    corruption_ =
        format::DecodeDataRecordOf(key(), {raw.data(), raw.size()}, &record_);
    if (!corruption_.ok()) return true;  // stop here; Valid() becomes false
    return record_.kind == format::RecordKind::kValue;
  }
  void SkipForward() {
    while (iter_->Valid() && !Visible()) iter_->Next();
    valid_ = iter_->Valid() && corruption_.ok();
  }
  void SkipBackward() {
    while (iter_->Valid() && !Visible()) iter_->Prev();
    valid_ = iter_->Valid() && corruption_.ok();
  }

  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const cf_;
  std::string upper_bound_;
  rocksdb::Slice upper_slice_;
  std::unique_ptr<rocksdb::Iterator> iter_;
  format::DataRecord record_{format::RecordKind::kNoValue, 0, {}};
  Status corruption_;
  bool valid_ = false;
};

}  // namespace

std::unique_ptr<Iterator> NewDBIterator(rocksdb::DB* db,
                                        rocksdb::ColumnFamilyHandle* data_cf,
                                        const ReadOptions& options) {
  return std::make_unique<DBIter>(db, data_cf, options);
}

}  // namespace fencedkv
