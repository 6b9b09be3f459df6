// Copyright (c) fencedkv authors.
//
// A latency histogram printed exactly like RocksDB's HistogramStat
// (rocksdb/monitoring/histogram.cc), so fenced_bench --histogram output can
// be compared line by line with db_bench's: the same buckets (1, 2, then x1.5
// rounded to two significant digits), the same percentile interpolation and
// the same text layout.
//
// Not thread-safe: use one per thread and Merge() them.

#ifndef FENCEDKV_ENGINE_UTIL_HISTOGRAM_H_
#define FENCEDKV_ENGINE_UTIL_HISTOGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fencedkv {

class Histogram {
 public:
  Histogram();

  void Clear();
  void Add(uint64_t value);
  void Merge(const Histogram& other);

  uint64_t num() const { return num_; }
  uint64_t min() const { return num_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double Average() const;
  double StandardDeviation() const;
  double Median() const { return Percentile(50.0); }
  double Percentile(double p) const;

  // "Count: ... Average: ...  StdDev: ...\nMin: ...\nPercentiles: ...\n"
  // "------...\n" then one line per non-empty bucket.
  std::string ToString() const;

  // The bucket upper limits (shared by all histograms).
  static const std::vector<uint64_t>& BucketLimits();

 private:
  uint64_t min_;
  uint64_t max_;
  uint64_t num_;
  uint64_t sum_;
  double sum_squares_;
  std::vector<uint64_t> buckets_;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_HISTOGRAM_H_
