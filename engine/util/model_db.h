// Copyright (c) fencedkv authors.
//
// Test-only: a trivial model of a fencedkv database (LevelDB's ModelDB
// idea): a std::map of values plus a std::map of domain max tokens, with the
// SPEC's acceptance rule written out again, independently of the engine.
// Copyable, so a test can keep "before" and "after" states.
//
// Results are strings in the testutil StatusString form ("OK", "INVALID",
// "NOT_FOUND", "STALE(7<8)", ...). Besides the acceptance rule the model
// knows the argument checks (key and value sizes, token 0), WriteGroup,
// conditional batches (SET NX / XX), the floor's effect on advances, the
// token each visible value carries and the high-water mark.
//
// Not thread-safe.

#ifndef FENCEDKV_ENGINE_UTIL_MODEL_DB_H_
#define FENCEDKV_ENGINE_UTIL_MODEL_DB_H_

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fencedkv/db.h"
#include "fencedkv/fence_domain.h"
#include "fencedkv/options.h"
#include "fencedkv/token.h"
#include "fencedkv/write_batch.h"

namespace fencedkv {
namespace test {

class ModelDB {
 public:
  // The argument checks of Options (max_key_size, max_value_size,
  // allow_unfenced, max_token_skew).
  struct Limits {
    size_t max_key_size = 64 << 10;
    size_t max_value_size = 64 << 20;
    bool allow_unfenced = false;
    uint64_t max_token_skew = kNoTokenSkewLimit;
  };

  ModelDB(const FenceDomainSpec& spec, FenceMode mode)
      : spec_(spec), strict_(mode == FenceMode::kStrict) {}
  ModelDB(const FenceDomainSpec& spec, FenceMode mode, const Limits& limits)
      : spec_(spec), strict_(mode == FenceMode::kStrict), limits_(limits) {}

  // "OK" or "STALE(offered<max)" / "STALE(offered<=max)" /
  // "STALE(offered<floorF)". Token 0 (unfenced) passes.
  std::string Check(std::string_view key, Token t,
                    const std::map<std::string, Token>& maxes) const {
    if (t == 0) return "OK";
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
  // The effective max (DB::GetFence).
  Token Reported(std::string_view key) const {
    Token m = StoredMax(key, max_);
    if (floor_ == 0) return m;
    Token f = strict_ ? floor_ - 1 : floor_;
    return m > f ? m : f;
  }
  // Whether the floor makes a max irrelevant (it may be garbage-collected).
  bool Subsumed(Token m) const {
    return floor_ != 0 && (strict_ ? m < floor_ : m <= floor_);
  }

  // "" if the arguments are valid, else "INVALID".
  std::string ValidateKey(std::string_view k) const {
    return k.empty() || k.size() > limits_.max_key_size ? "INVALID" : "";
  }
  std::string ValidateWrite(std::string_view k, std::string_view v,
                            Token t) const {
    if (!ValidateKey(k).empty() || v.size() > limits_.max_value_size ||
        (t == 0 && !limits_.allow_unfenced)) {
      return "INVALID";
    }
    return ValidateSkew(t);
  }
  // "TOKEN_SKEW" if t is more than max_token_skew above the highest token
  // issued (NoteIssuedToken), else "".
  std::string ValidateSkew(Token t) const {
    const uint64_t skew = limits_.max_token_skew;
    if (skew == kNoTokenSkewLimit) return "";
    const Token ceiling =
        issued_ > kMaxToken - skew ? kMaxToken : issued_ + skew;
    return t > ceiling ? "TOKEN_SKEW" : "";
  }
  // DB::NoteIssuedToken; not persisted: a reopen forgets it (ResetIssued).
  void NoteIssuedToken(Token t) { issued_ = std::max(issued_, t); }
  void ResetIssued() { issued_ = 0; }

  std::string Put(const std::string& k, const std::string& v, Token t) {
    int unused;
    return Write({BatchOp{true, k, v, t}}, &unused);
  }
  std::string Delete(const std::string& k, Token t) {
    int unused;
    return Write({BatchOp{false, k, "", t}}, &unused);
  }
  // (is_put, key, value, token). Returns "OK", the first invalid op's
  // "INVALID" / "TOKEN_SKEW", or the first stale op's status and (in
  // *stale_index) its index; all or nothing.
  using BatchOp = std::tuple<bool, std::string, std::string, Token>;
  std::string Write(const std::vector<BatchOp>& ops, int* stale_index) {
    return Write(ops, {}, nullptr, stale_index);
  }

  // DB::Write(batch, result): conditions[i] applies to ops[i] (empty: none).
  // Fence checks come first; then the conditions in order, each against the
  // state left by the earlier ops. A failed condition is "OK" with
  // result->applied false and nothing written.
  struct Result {
    bool applied = true;
    int failed_index = -1;
    std::vector<bool> existed;
    std::vector<std::string> old_values;
  };
  std::string Write(const std::vector<BatchOp>& ops,
                    const std::vector<WriteCondition>& conditions,
                    Result* result, int* stale_index) {
    *stale_index = -1;
    if (result != nullptr) {
      *result = Result();
      result->existed.assign(ops.size(), false);
      result->old_values.assign(ops.size(), "");
    }
    for (const auto& [is_put, k, v, t] : ops) {
      std::string invalid = ValidateWrite(k, v, t);
      if (!invalid.empty()) return invalid;
    }
    if (ops.empty()) return "OK";
    auto maxes = max_;
    // The token each op's record carries.
    std::vector<std::optional<Token>> record_tokens;
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& [is_put, k, v, t] = ops[i];
      std::string r = Check(k, t, maxes);
      if (r != "OK") {
        *stale_index = static_cast<int>(i);
        ++stats_.rejected_writes;
        return r;
      }
      record_tokens.push_back(t != 0 ? t : UnfencedToken(k, maxes));
      if (t != 0) maxes[std::string(spec_.DomainOf(k))] = t;
    }
    auto data = data_;
    auto tokens = tokens_;
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& [is_put, k, v, t] = ops[i];
      auto it = data.find(k);
      const bool present = it != data.end();
      if (result != nullptr) {
        result->existed[i] = present;
        if (present) result->old_values[i] = it->second;
        const WriteCondition c =
            i < conditions.size() ? conditions[i] : WriteCondition::kNone;
        if ((c == WriteCondition::kIfAbsent && present) ||
            (c == WriteCondition::kIfPresent && !present)) {
          result->applied = false;
          result->failed_index = static_cast<int>(i);
          return "OK";
        }
      }
      if (is_put) {
        data[k] = v;
        tokens[k] = record_tokens[i];
      } else {
        data.erase(k);
        tokens.erase(k);
      }
    }
    data_.swap(data);
    tokens_.swap(tokens);
    max_.swap(maxes);
    for (const auto& op : ops) hwm_ = std::max(hwm_, std::get<3>(op));
    ++stats_.accepted_writes;
    return "OK";
  }

  // DB::WriteGroup: each batch all or nothing on its own, in order. Fills
  // (*statuses)[i] and (*stale_indexes)[i] per batch; returns "OK".
  std::string WriteGroup(const std::vector<std::vector<BatchOp>>& batches,
                         std::vector<std::string>* statuses,
                         std::vector<int>* stale_indexes) {
    statuses->clear();
    stale_indexes->clear();
    for (const auto& ops : batches) {
      int index = -1;
      statuses->push_back(Write(ops, &index));
      stale_indexes->push_back(index);
    }
    return "OK";
  }

  // DB::AdvanceFence: the effective max after the call, or "INVALID" in
  // *status. Raises the domain so that every token below t is refused and t
  // still passes: to t, or in strict mode to t - 1. A target the floor
  // subsumes changes nothing.
  Token Advance(const std::string& k, Token t, std::string* status = nullptr) {
    std::string invalid = t == 0 ? std::string("INVALID") : ValidateKey(k);
    if (invalid.empty()) invalid = ValidateSkew(t);
    if (status != nullptr) *status = invalid.empty() ? "OK" : invalid;
    if (!invalid.empty()) return 0;
    const Token target = strict_ ? t - 1 : t;
    Token& m = max_[std::string(spec_.DomainOf(k))];
    if (target != 0 && !Subsumed(target) && target > m) {
      m = target;
      hwm_ = std::max(hwm_, target);
      ++stats_.advances;
      // With the key domain the max lives in the key's record.
      if (spec_.is_per_key() && data_.count(k) != 0) tokens_[k] = target;
    }
    return Reported(k);
  }
  std::string Get(const std::string& k) const {
    std::string invalid = ValidateKey(k);
    if (!invalid.empty()) return invalid;
    auto it = data_.find(k);
    return it == data_.end() ? "NOT_FOUND" : it->second;
  }
  // DB::GetFenced; reads use the monotonic rule in both modes.
  std::string GetFenced(const std::string& k, Token t) {
    std::string invalid = t == 0 ? std::string("INVALID") : ValidateKey(k);
    if (!invalid.empty()) return invalid;
    if (t < floor_) {
      ++stats_.rejected_reads;
      return "STALE(" + std::to_string(t) + "<floor" + std::to_string(floor_) +
             ")";
    }
    Token m = StoredMax(k, max_);
    if (t < m) {
      ++stats_.rejected_reads;
      return "STALE(" + std::to_string(t) + "<" + std::to_string(m) + ")";
    }
    return Get(k);
  }
  std::string SetFloor(Token f) {
    if (f == 0 || f < floor_) return "INVALID";
    floor_ = f;
    return "OK";
  }
  std::string Contents() const {
    std::string out;
    for (const auto& [k, v] : data_)
      out.append(k).append("=").append(v).append(";");
    return out;
  }
  // The token an iterator reports for k's value: the token of the write
  // that stored it (raised by an advance with the key domain). nullopt if
  // k has no value, or where the engine may report either of two equivalent
  // tokens (an unfenced write over a max the floor subsumes).
  std::optional<Token> TokenOf(const std::string& k) const {
    auto it = tokens_.find(k);
    return it == tokens_.end() ? std::nullopt : it->second;
  }
  // The highest max ever raised (fencedkv.stats' high_water_mark).
  Token high_water_mark() const { return hwm_; }
  Token floor() const { return floor_; }
  Token issued() const { return issued_; }
  const std::map<std::string, std::string>& data() const { return data_; }
  // The counters of FenceStats the model predicts (since ResetStats).
  const FenceStats& stats() const { return stats_; }
  void ResetStats() { stats_ = FenceStats(); }

 private:
  // The token an unfenced write (token 0) leaves in k's record: with the
  // key domain the key's max, which the record carries.
  std::optional<Token> UnfencedToken(
      const std::string& k, const std::map<std::string, Token>& maxes) const {
    if (!spec_.is_per_key()) return std::nullopt;
    const Token m = StoredMax(k, maxes);
    if (Subsumed(m)) return std::nullopt;
    return m;
  }

  FenceDomainSpec spec_;
  bool strict_;
  Limits limits_;
  Token floor_ = 0;
  Token hwm_ = 0;
  Token issued_ = 0;
  std::map<std::string, std::string> data_;
  std::map<std::string, std::optional<Token>> tokens_;
  std::map<std::string, Token> max_;
  FenceStats stats_;
};

}  // namespace test
}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_MODEL_DB_H_
