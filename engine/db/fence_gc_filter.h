// Copyright (c) fencedkv authors.
//
// Compaction-time garbage collection of fence state the floor subsumes, and
// the max() merge operator of format version 1's high-water mark (only to
// read a version-1 database while upgrading it; see fence_format.h).

#ifndef FENCEDKV_ENGINE_DB_FENCE_GC_FILTER_H_
#define FENCEDKV_ENGINE_DB_FENCE_GC_FILTER_H_

#include <atomic>
#include <memory>

#include <rocksdb/compaction_filter.h>
#include <rocksdb/merge_operator.h>

#include "fencedkv/options.h"
#include "fencedkv/token.h"

namespace fencedkv {

// Drops records whose token the floor subsumes (SubsumedByFloor):
//  - on the fence column family: every domain record;
//  - on the data column family (per-key domains only): no-value records.
// Records with a value are always kept. RocksDB turns a removal into a
// deletion marker, so an older version of the key can never reappear.
// Thread-safe: it only reads the floor atomically.
class FenceGcFilter : public rocksdb::CompactionFilter {
 public:
  enum class Target { kFenceRecords, kDataRecords };
  FenceGcFilter(const std::atomic<Token>* floor, Target target)
      : floor_(floor), target_(target) {}

  // The mode is only known once the stored metadata is read; it must be set
  // before the floor becomes non-zero (until then nothing is dropped).
  void SetMode(FenceMode mode) { mode_.store(mode, std::memory_order_release); }

  Decision FilterV2(int level, const rocksdb::Slice& key, ValueType value_type,
                    const rocksdb::Slice& existing_value,
                    std::string* new_value,
                    std::string* skip_until) const override;
  const char* Name() const override { return "fencedkv.FenceGcFilter"; }

 private:
  const std::atomic<Token>* floor_;
  std::atomic<FenceMode> mode_{FenceMode::kMonotonic};
  const Target target_;
};

// Merge operator: operands and values are fixed64; the result is their max.
// Format version 1 only (see above).
std::shared_ptr<rocksdb::MergeOperator> NewMaxTokenMergeOperator();

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_FENCE_GC_FILTER_H_
