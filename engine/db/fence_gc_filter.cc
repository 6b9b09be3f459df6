// Copyright (c) fencedkv authors.

#include "db/fence_gc_filter.h"

#include "db/fence_check.h"
#include "db/fence_format.h"

namespace fencedkv {

rocksdb::CompactionFilter::Decision FenceGcFilter::FilterV2(
    int /*level*/, const rocksdb::Slice& /*key*/, ValueType value_type,
    const rocksdb::Slice& existing_value, std::string* /*new_value*/,
    std::string* /*skip_until*/) const {
  if (value_type != ValueType::kValue) return Decision::kKeep;
  const Token floor = floor_->load(std::memory_order_acquire);
  if (floor == 0) return Decision::kKeep;
  const std::string_view raw(existing_value.data(), existing_value.size());
  Token token = 0;
  if (target_ == Target::kFenceRecords) {
    if (!format::DecodeToken(raw, &token)) return Decision::kKeep;
  } else {
    format::DataRecord record;
    if (!format::DecodeDataRecord(raw, &record) ||
        record.kind != format::RecordKind::kNoValue) {
      return Decision::kKeep;
    }
    token = record.token;
  }
  return SubsumedByFloor(mode_.load(std::memory_order_acquire), token, floor)
             ? Decision::kRemove
             : Decision::kKeep;
}

namespace {

class MaxTokenMergeOperator : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger* /*logger*/) const override {
    Token a = 0, b = 0;
    if (existing != nullptr &&
        !format::DecodeToken({existing->data(), existing->size()}, &a)) {
      return false;
    }
    if (!format::DecodeToken({value.data(), value.size()}, &b)) return false;
    *new_value = format::EncodeToken(a > b ? a : b);
    return true;
  }
  const char* Name() const override { return "fencedkv.MaxToken"; }
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewMaxTokenMergeOperator() {
  return std::make_shared<MaxTokenMergeOperator>();
}

}  // namespace fencedkv
