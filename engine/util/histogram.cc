// Copyright (c) fencedkv authors.

#include "util/histogram.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

namespace fencedkv {

const std::vector<uint64_t>& Histogram::BucketLimits() {
  static const std::vector<uint64_t>* limits = [] {
    auto* v = new std::vector<uint64_t>{1, 2};
    const double max =
        static_cast<double>(std::numeric_limits<uint64_t>::max());
    double bucket = 2;
    while ((bucket = 1.5 * bucket) <= max) {
      v->push_back(static_cast<uint64_t>(bucket));
      // Keep the two most significant digits: 172 -> 170.
      uint64_t pow10 = 1;
      while (v->back() / 10 > 10) {
        v->back() /= 10;
        pow10 *= 10;
      }
      v->back() *= pow10;
    }
    return v;
  }();
  return *limits;
}

Histogram::Histogram() { Clear(); }

void Histogram::Clear() {
  min_ = BucketLimits().back();
  max_ = 0;
  num_ = 0;
  sum_ = 0;
  sum_squares_ = 0;
  buckets_.assign(BucketLimits().size(), 0);
}

void Histogram::Add(uint64_t value) {
  const auto& limits = BucketLimits();
  size_t b =
      std::lower_bound(limits.begin(), limits.end(), value) - limits.begin();
  if (b >= buckets_.size()) b = buckets_.size() - 1;
  buckets_[b]++;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  num_++;
  sum_ += value;
  sum_squares_ += static_cast<double>(value) * static_cast<double>(value);
}

void Histogram::Merge(const Histogram& other) {
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  num_ += other.num_;
  sum_ += other.sum_;
  sum_squares_ += other.sum_squares_;
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b] += other.buckets_[b];
}

double Histogram::Average() const {
  return num_ == 0 ? 0 : static_cast<double>(sum_) / static_cast<double>(num_);
}

double Histogram::StandardDeviation() const {
  if (num_ == 0) return 0;
  const double n = static_cast<double>(num_);
  const double s = static_cast<double>(sum_);
  const double variance = (sum_squares_ * n - s * s) / (n * n);
  return std::sqrt(std::max(variance, 0.0));
}

double Histogram::Percentile(double p) const {
  const auto& limits = BucketLimits();
  const double threshold = static_cast<double>(num_) * (p / 100.0);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    cumulative += buckets_[b];
    if (static_cast<double>(cumulative) >= threshold) {
      const double left = b == 0 ? 0 : static_cast<double>(limits[b - 1]);
      const double right = static_cast<double>(limits[b]);
      const uint64_t left_sum = cumulative - buckets_[b];
      double pos = 0;
      if (buckets_[b] != 0) {
        pos = (threshold - static_cast<double>(left_sum)) /
              static_cast<double>(buckets_[b]);
      }
      double r = left + (right - left) * pos;
      r = std::max(r, static_cast<double>(min()));
      r = std::min(r, static_cast<double>(max()));
      return r;
    }
  }
  return static_cast<double>(max());
}

std::string Histogram::ToString() const {
  char buf[1024];
  std::string r;
  std::snprintf(buf, sizeof(buf),
                "Count: %" PRIu64 " Average: %.4f  StdDev: %.2f\n", num_,
                Average(), StandardDeviation());
  r.append(buf);
  std::snprintf(buf, sizeof(buf),
                "Min: %" PRIu64 "  Median: %.4f  Max: %" PRIu64 "\n", min(),
                Median(), max());
  r.append(buf);
  std::snprintf(buf, sizeof(buf),
                "Percentiles: P50: %.2f P75: %.2f P99: %.2f P99.9: %.2f "
                "P99.99: %.2f\n",
                Percentile(50), Percentile(75), Percentile(99),
                Percentile(99.9), Percentile(99.99));
  r.append(buf);
  r.append("------------------------------------------------------\n");
  if (num_ == 0) return r;
  const auto& limits = BucketLimits();
  const double mult = 100.0 / static_cast<double>(num_);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b] == 0) continue;
    cumulative += buckets_[b];
    std::snprintf(buf, sizeof(buf),
                  "%c %7" PRIu64 ", %7" PRIu64 " ] %8" PRIu64
                  " %7.3f%% %7.3f%% ",
                  b == 0 ? '[' : '(', b == 0 ? 0 : limits[b - 1], limits[b],
                  buckets_[b], mult * static_cast<double>(buckets_[b]),
                  mult * static_cast<double>(cumulative));
    r.append(buf);
    // 20 marks for 100%.
    r.append(
        static_cast<size_t>(mult * static_cast<double>(buckets_[b]) / 5 + 0.5),
        '#');
    r.push_back('\n');
  }
  return r;
}

}  // namespace fencedkv
