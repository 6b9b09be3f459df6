// Copyright (c) fencedkv authors.
//
// Test-only: a trivial model of a fencedkv database (LevelDB's ModelDB
// idea): a std::map of values plus a std::map of domain max tokens, with the
// SPEC's acceptance rule written out again, independently of the engine.
// Copyable, so a test can keep "before" and "after" states.

#ifndef FENCEDKV_ENGINE_UTIL_MODEL_DB_H_
#define FENCEDKV_ENGINE_UTIL_MODEL_DB_H_

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "fencedkv/fence_domain.h"
#include "fencedkv/options.h"
#include "fencedkv/token.h"

namespace fencedkv {
namespace test {

class ModelDB {
 public:
  ModelDB(const FenceDomainSpec& spec, FenceMode mode)
      : spec_(spec), strict_(mode == FenceMode::kStrict) {}

  // "OK" or "STALE(offered<max)" / "STALE(offered<=max)" /
  // "STALE(offered<floorF)", the testutil StatusString form.
  std::string Check(std::string_view key, Token t,
                    const std::map<std::string, Token>& maxes) const {
    if (t < floor_) {
      return "STALE(" + std::to_string(t) + "<floor" + std::to_string(floor_) +
             ")";
    }
    Token m = StoredMax(key, maxes);
    if (strict_ ? t <= m : t < m) {
      return "STALE(" + std::to_string(t) + (strict_ ? "<=" : "<") +
             std::to_string(m) + ")";
    }
    return "OK";
  }
  Token StoredMax(std::string_view key,
                  const std::map<std::string, Token>& maxes) const {
    auto it = maxes.find(std::string(spec_.DomainOf(key)));
    return it == maxes.end() ? 0 : it->second;
  }
  Token Reported(std::string_view key) const {
    Token m = StoredMax(key, max_);
    if (floor_ == 0) return m;
    Token f = strict_ ? floor_ - 1 : floor_;
    return m > f ? m : f;
  }

  std::string Put(const std::string& k, const std::string& v, Token t) {
    std::string r = Check(k, t, max_);
    if (r == "OK") {
      data_[k] = v;
      max_[std::string(spec_.DomainOf(k))] = t;
    }
    return r;
  }
  std::string Delete(const std::string& k, Token t) {
    std::string r = Check(k, t, max_);
    if (r == "OK") {
      data_.erase(k);
      max_[std::string(spec_.DomainOf(k))] = t;
    }
    return r;
  }
  // Returns "OK" or the first stale op's status and index.
  using BatchOp = std::tuple<bool, std::string, std::string, Token>;
  std::string Write(const std::vector<BatchOp>& ops, int* stale_index) {
    auto data = data_;
    auto maxes = max_;
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& [is_put, k, v, t] = ops[i];
      std::string r = Check(k, t, maxes);
      if (r != "OK") {
        *stale_index = static_cast<int>(i);
        return r;
      }
      if (is_put) {
        data[k] = v;
      } else {
        data.erase(k);
      }
      maxes[std::string(spec_.DomainOf(k))] = t;
    }
    data_.swap(data);
    max_.swap(maxes);
    return "OK";
  }
  // Raises the domain so that every token below t is refused and t still
  // passes: to t, or in strict mode to t - 1.
  Token Advance(const std::string& k, Token t) {
    Token& m = max_[std::string(spec_.DomainOf(k))];
    const Token target = strict_ ? t - 1 : t;
    if (target > m) m = target;
    return Reported(k);
  }
  std::string Get(const std::string& k) const {
    auto it = data_.find(k);
    return it == data_.end() ? "NOT_FOUND" : it->second;
  }
  std::string GetFenced(const std::string& k, Token t) const {
    if (t < floor_) {
      return "STALE(" + std::to_string(t) + "<floor" + std::to_string(floor_) +
             ")";
    }
    Token m = StoredMax(k, max_);
    if (t < m) return "STALE(" + std::to_string(t) + "<" + std::to_string(m) + ")";
    return Get(k);
  }
  std::string SetFloor(Token f) {
    if (f < floor_) return "INVALID";
    floor_ = f;
    return "OK";
  }
  std::string Contents() const {
    std::string out;
    for (const auto& [k, v] : data_) out += k + "=" + v + ";";
    return out;
  }
  Token floor() const { return floor_; }
  const std::map<std::string, std::string>& data() const { return data_; }

 private:
  FenceDomainSpec spec_;
  bool strict_;
  Token floor_ = 0;
  std::map<std::string, std::string> data_;
  std::map<std::string, Token> max_;
};

}  // namespace test
}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_MODEL_DB_H_
