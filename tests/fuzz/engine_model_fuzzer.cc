// Copyright (c) fencedkv authors.
//
// libFuzzer target: sequences of engine operations on a real RocksDB,
// every result checked against the model (util/model_db.h).
//
// Input layout (bytes past the end read as 0):
//   byte 0: bits 0-1 domain function (key, prefix:N, delimiter:C, hashtag),
//           bit 2 strict mode, bit 3 hash memtable, bits 4-5 fence cache
//           (1 MiB, none, 4 KiB, 256 KiB), bit 6 allow_unfenced, bit 7 small
//           size limits (keys <= 3 bytes, values <= 4 bytes)
//   byte 1: N = 1 + b % 3 for prefix:N; C = ':' or '}' for delimiter:C;
//           bits 2-3 the token skew guard (off, off, 3, 20)
//   byte 2: the initial floor (b % 8, 0 = none)
//   then operations: an opcode byte and its argument bytes (see Run below).
// Keys come from a table of 16 (plus the empty key), tokens from 0..11 and
// the top 8 values of the token space, so domains and tokens collide.
//
// A mismatch prints the operations so far and aborts. The database lives in
// one directory per process under $FENCEDKV_FUZZ_DIR (else /dev/shm, else
// /tmp), wiped before each input; with FENCEDKV_FUZZ_MEMENV=1 in a RocksDB
// in-memory Env instead.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fencedkv/db.h"

#include "fuzz_util.h"
#include "util/model_db.h"
#include "util/testutil.h"

namespace fencedkv {
namespace {

using test::ModelDB;
using test::StatusString;

const char* const kKeys[] = {
    "a",    "b",    "ab",    "a:1", "a:2", "b:1",  "a:b:c", "{a}1",
    "{a}2", "x{a}", "{b}:1", "{}a", "a{",  "a}b{", "abc:d", "b{a}",
};
constexpr size_t kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

// Reads the fuzz input front to back; 0 once exhausted.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string Key() {
    const uint8_t b = Byte();
    return b % (kNumKeys + 1) == kNumKeys ? std::string()
                                          : kKeys[b % (kNumKeys + 1)];
  }
  Token TokenValue() {
    const uint8_t b = Byte();
    return b >= 0xF8 ? kMaxToken - (b - 0xF8) : b % 12;
  }
  std::string Value() {
    const uint8_t b = Byte();
    if (b >= 0xF0) return std::string(b - 0xF0 + 3, 'x');
    if (b % 8 == 0) return std::string();
    return "v" + std::to_string(b % 8);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

std::string TokenText(std::optional<Token> t) {
  return t ? std::to_string(*t) : "?";
}

class Harness {
 public:
  Harness(const std::string& dir, const Options& options,
          const FenceDomainSpec& spec, const ModelDB::Limits& limits)
      : dir_(dir),
        options_(options),
        spec_(spec),
        mode_(options.fence_mode),
        model_(spec, options.fence_mode, limits) {}

  void Fail(const std::string& what, const std::string& want,
            const std::string& got) {
    std::fprintf(stderr,
                 "engine_model_fuzzer: MISMATCH\nconfig: %s %s%s skew %s\n",
                 spec_.ToString().c_str(), FenceModeName(mode_),
                 options_.allow_unfenced ? " allow_unfenced" : "",
                 options_.max_token_skew == kNoTokenSkewLimit
                     ? "off"
                     : std::to_string(options_.max_token_skew).c_str());
    for (const auto& line : trace_)
      std::fprintf(stderr, "  %s\n", line.c_str());
    std::fprintf(stderr, "%s\n  model:  %s\n  engine: %s\n", what.c_str(),
                 want.c_str(), got.c_str());
    std::abort();
  }
  void Expect(const std::string& what, const std::string& want,
              const std::string& got) {
    if (want != got) Fail(what, want, got);
  }
  // A status against the model's string; a stale one must also name the
  // domain of `stale_key` and the op index.
  void ExpectStatus(const std::string& what, const std::string& want,
                    const Status& got, const std::string& stale_key = "",
                    int64_t index = -1) {
    Expect(what, want, StatusString(got));
    if (got.IsStaleToken()) {
      Expect(what + " domain", EscapeBytes(spec_.DomainOf(stale_key)),
             EscapeBytes(got.stale()->domain));
      Expect(what + " batch_index", std::to_string(index),
             std::to_string(got.stale()->batch_index));
    }
  }
  void Log(std::string line) {
    if (trace_.size() == 400) trace_.pop_front();
    trace_.push_back(std::move(line));
  }

  void Open() {
    Status s = DB::Open(options_, dir_, &db_);
    if (!s.ok()) Fail("open", "OK", s.ToString());
    Expect("stored domain", spec_.ToString(), db_->GetFenceDomain().ToString());
    Expect("stored mode", FenceModeName(mode_),
           FenceModeName(db_->GetFenceMode()));
    model_.ResetStats();
    model_.ResetIssued();  // not persisted
  }

  // Reopen variants: the same options; a mismatching domain (refused, then
  // the same options); another configuration with adopt_stored_fence_config.
  void Reopen(uint8_t how) {
    db_.reset();
    Options other = options_;
    other.fence_domain = spec_.is_per_key() ? "hashtag" : "key";
    other.fence_mode = options_.fence_mode == FenceMode::kStrict
                           ? FenceMode::kMonotonic
                           : FenceMode::kStrict;
    if (how % 3 == 1) {
      Log("reopen with fence_domain " + other.fence_domain + " (refused)");
      Status s = DB::Open(other, dir_, &db_);
      Expect("reopen with another domain", "INVALID", StatusString(s));
      db_.reset();
    } else if (how % 3 == 2) {
      Log("reopen adopting the stored config");
      other.adopt_stored_fence_config = true;
      Options saved = options_;
      options_ = other;
      Open();  // checks that the stored configuration was adopted
      options_ = saved;
      return;
    }
    Log("reopen");
    Open();
  }

  void CheckFloorAndStats() {
    Expect("GetFenceFloor", std::to_string(model_.floor()),
           std::to_string(db_->GetFenceFloor()));
    Expect("GetIssuedToken", std::to_string(model_.issued()),
           std::to_string(db_->GetIssuedToken()));
    const FenceStats got = db_->GetFenceStats();
    const FenceStats& want = model_.stats();
    auto text = [](const FenceStats& s) {
      return "accepted " + std::to_string(s.accepted_writes) + " rejected " +
             std::to_string(s.rejected_writes) + " advances " +
             std::to_string(s.advances) + " rejected_reads " +
             std::to_string(s.rejected_reads);
    };
    Expect("FenceStats", text(want), text(got));
  }

  void CheckHighWaterMark() {
    std::string stats;
    if (!db_->GetProperty("fencedkv.stats", &stats)) {
      Fail("fencedkv.stats", "a property", "none");
    }
    const std::string tag = "high_water_mark: ";
    const size_t at = stats.find(tag);
    const std::string got =
        at == std::string::npos
            ? stats
            : stats.substr(at + tag.size(),
                           stats.find('\n', at) - at - tag.size());
    Expect("high_water_mark", std::to_string(model_.high_water_mark()), got);
  }

  // Every key: value, token, effective max; and a full scan.
  void CheckAll() {
    for (const char* k : kKeys) {
      std::string v;
      Status s = db_->Get(ReadOptions(), k, &v);
      Expect(std::string("final Get ") + k, model_.Get(k),
             s.ok() ? v : StatusString(s));
      Token max = 0;
      s = db_->GetFence(k, &max);
      Expect(std::string("final GetFence ") + k,
             model_.ValidateKey(k).empty() ? std::to_string(model_.Reported(k))
                                           : "INVALID",
             s.ok() ? std::to_string(max) : StatusString(s));
    }
    Scan(0, "", "");
    CheckHighWaterMark();
  }

  // The engine's iterator against the model's map. how: 0 forward from the
  // start, 1 forward from Seek(target), 2 backward from SeekForPrev(target),
  // 3 backward from the end. A non-empty upper bound limits both.
  void Scan(int how, const std::string& target, const std::string& bound) {
    ReadOptions ro;
    ro.iterate_upper_bound = bound;
    auto it = db_->NewIterator(ro);
    const auto& data = model_.data();
    auto end = bound.empty() ? data.end() : data.lower_bound(bound);
    std::vector<std::string> want;
    auto entry = [&](const std::string& k, const std::string& v,
                     std::optional<Token> t) {
      return k + "=" + v + "@" + TokenText(t);
    };
    if (how <= 1) {
      auto m = how == 0 ? data.begin() : data.lower_bound(target);
      for (; m != data.end() && (bound.empty() || m->first < bound); ++m) {
        want.push_back(entry(m->first, m->second, model_.TokenOf(m->first)));
      }
      how == 0 ? it->SeekToFirst() : it->Seek(target);
    } else {
      auto m = how == 3 ? end : data.upper_bound(target);
      if (how == 2 && !bound.empty() && target >= bound) m = end;
      while (m != data.begin()) {
        --m;
        want.push_back(entry(m->first, m->second, model_.TokenOf(m->first)));
      }
      how == 3 ? it->SeekToLast() : it->SeekForPrev(target);
    }
    std::vector<std::string> got;
    for (size_t n = 0; it->Valid() && n <= kNumKeys; ++n) {
      const std::string k(it->key());
      // Where the model cannot tell the token, neither side shows one.
      std::optional<Token> t;
      if (model_.TokenOf(k)) t = it->token();
      got.push_back(entry(k, std::string(it->value()), t));
      how <= 1 ? it->Next() : it->Prev();
    }
    ExpectStatus("iterator status", "OK", it->status());
    auto join = [](const std::vector<std::string>& v) {
      std::string out;
      for (const auto& e : v) out += e + ";";
      return out;
    };
    Expect("scan " + std::to_string(how) + " from '" + target + "' bound '" +
               bound + "'",
           join(want), join(got));
  }

  // Runs the operations of `in`, after SetFenceFloor(floor) if floor != 0.
  void Run(Input& in, Token floor);

 private:
  std::string dir_;
  Options options_;
  const FenceDomainSpec spec_;
  const FenceMode mode_;
  ModelDB model_;
  std::unique_ptr<DB> db_;
  std::deque<std::string> trace_;
};

std::string OpText(bool is_put, const std::string& k, const std::string& v,
                   Token t) {
  return (is_put ? "put '" + k + "'='" + v + "'" : "del '" + k + "'") +
         " t=" + std::to_string(t);
}

void Harness::Run(Input& in, Token floor) {
  Open();
  if (floor != 0) {
    Log("floor " + std::to_string(floor));
    ExpectStatus(trace_.back(), model_.SetFloor(floor),
                 db_->SetFenceFloor(WriteOptions(), floor));
  }
  for (int steps = 0; !in.done() && steps < 64; ++steps) {
    const uint8_t op = in.Byte() % 16;
    switch (op) {
      case 0:
      case 1: {
        const std::string k = in.Key(), v = in.Value();
        const Token t = in.TokenValue();
        Log(OpText(true, k, v, t));
        ExpectStatus(trace_.back(), model_.Put(k, v, t),
                     db_->Put(WriteOptions(), k, v, t), k);
        break;
      }
      case 2: {
        const std::string k = in.Key();
        const Token t = in.TokenValue();
        Log(OpText(false, k, "", t));
        ExpectStatus(trace_.back(), model_.Delete(k, t),
                     db_->Delete(WriteOptions(), k, t), k);
        break;
      }
      case 3:    // a batch over several domains
      case 4: {  // the same with conditions (SET NX / XX) and WriteResult
        const bool conditional = op == 4;
        const size_t n = conditional ? 1 + in.Byte() % 4 : in.Byte() % 6;
        std::vector<ModelDB::BatchOp> ops;
        std::vector<WriteCondition> conditions;
        WriteBatch batch;
        std::string text = conditional ? "write(result)" : "write";
        for (size_t i = 0; i < n; ++i) {
          const uint8_t b = in.Byte();
          const bool is_put = b % 4 != 0;
          const auto c = static_cast<WriteCondition>(
              conditional && is_put ? (b >> 2) % 3 : 0);
          const std::string k = in.Key(), v = is_put ? in.Value() : "";
          const Token t = in.TokenValue();
          ops.emplace_back(is_put, k, v, t);
          conditions.push_back(c);
          is_put ? batch.Put(k, v, t, c) : batch.Delete(k, t);
          text += " [" + OpText(is_put, k, v, t) +
                  (c == WriteCondition::kIfAbsent    ? " NX"
                   : c == WriteCondition::kIfPresent ? " XX"
                                                     : "") +
                  "]";
        }
        Log(text);
        int index = -1;
        if (!conditional) {
          const std::string want = model_.Write(ops, &index);
          Status s = db_->Write(WriteOptions(), batch);
          ExpectStatus(text, want, s, index >= 0 ? std::get<1>(ops[index]) : "",
                       index);
          break;
        }
        ModelDB::Result want_result;
        const bool want_old = in.Byte() % 2 == 0;
        const std::string want =
            model_.Write(ops, conditions, &want_result, &index);
        WriteResult result;
        result.want_old_values = want_old;
        Status s = db_->Write(WriteOptions(), batch, &result);
        ExpectStatus(text, want, s, index >= 0 ? std::get<1>(ops[index]) : "",
                     index);
        if (!s.ok()) break;
        Expect(text + " applied",
               std::to_string(want_result.applied) + " failed at " +
                   std::to_string(want_result.failed_index),
               std::to_string(result.applied) + " failed at " +
                   std::to_string(result.failed_index));
        for (size_t i = 0; i < n; ++i) {
          Expect(text + " existed[" + std::to_string(i) + "]",
                 std::to_string(want_result.existed[i]),
                 std::to_string(result.existed[i]));
          if (want_old) {
            Expect(text + " old_values[" + std::to_string(i) + "]",
                   want_result.old_values[i], result.old_values[i]);
          }
        }
        break;
      }
      case 5: {  // WriteGroup of independent batches
        const size_t nb = 1 + in.Byte() % 4;
        std::vector<WriteBatch> batches(nb);
        std::vector<std::vector<ModelDB::BatchOp>> ops(nb);
        std::vector<bool> has_condition(nb, false);
        std::string text = "group";
        for (size_t g = 0; g < nb; ++g) {
          const size_t n = in.Byte() % 4;
          text += " {";
          for (size_t i = 0; i < n; ++i) {
            const uint8_t b = in.Byte();
            const bool is_put = b % 4 != 0;
            const std::string k = in.Key(), v = is_put ? in.Value() : "";
            const Token t = in.TokenValue();
            ops[g].emplace_back(is_put, k, v, t);
            if (is_put && b >= 0xF0) {  // refused: WriteGroup takes none
              has_condition[g] = true;
              batches[g].Put(k, v, t, WriteCondition::kIfAbsent);
            } else {
              is_put ? batches[g].Put(k, v, t) : batches[g].Delete(k, t);
            }
            text += " [" + OpText(is_put, k, v, t) +
                    (has_condition[g] && is_put && b >= 0xF0 ? " NX" : "") +
                    "]";
          }
          text += " }";
        }
        Log(text);
        // Batches with conditions are refused; the model sees the others.
        std::vector<std::vector<ModelDB::BatchOp>> model_ops;
        for (size_t g = 0; g < nb; ++g) {
          if (!has_condition[g]) model_ops.push_back(ops[g]);
        }
        std::vector<std::string> want;
        std::vector<int> want_index;
        model_.WriteGroup(model_ops, &want, &want_index);
        std::vector<const WriteBatch*> ptrs;
        for (const auto& b : batches) ptrs.push_back(&b);
        std::vector<Status> statuses(nb);
        ExpectStatus(
            text, "OK",
            db_->WriteGroup(WriteOptions(), ptrs.data(), nb, statuses.data()));
        for (size_t g = 0, m = 0; g < nb; ++g) {
          const std::string what = text + " batch " + std::to_string(g);
          if (has_condition[g]) {
            ExpectStatus(what, "INVALID", statuses[g]);
            continue;
          }
          const int index = want_index[m];
          ExpectStatus(what, want[m], statuses[g],
                       index >= 0 ? std::get<1>(ops[g][index]) : "", index);
          ++m;
        }
        break;
      }
      case 6: {
        const std::string k = in.Key();
        const Token t = in.TokenValue();
        Log("advance '" + k + "' t=" + std::to_string(t));
        std::string want;
        const Token want_max = model_.Advance(k, t, &want);
        Token max = 0;
        Status s = db_->AdvanceFence(WriteOptions(), k, t, &max);
        ExpectStatus(trace_.back(), want, s);
        if (s.ok()) {
          Expect(trace_.back() + " max_after", std::to_string(want_max),
                 std::to_string(max));
        }
        break;
      }
      case 7: {
        const Token f = in.TokenValue();
        Log("floor " + std::to_string(f));
        ExpectStatus(trace_.back(), model_.SetFloor(f),
                     db_->SetFenceFloor(WriteOptions(), f));
        break;
      }
      case 8: {
        const std::string k = in.Key();
        Log("getfence '" + k + "'");
        Token max = 0;
        Status s = db_->GetFence(k, &max);
        Expect(trace_.back(),
               model_.ValidateKey(k).empty()
                   ? std::to_string(model_.Reported(k))
                   : "INVALID",
               s.ok() ? std::to_string(max) : StatusString(s));
        break;
      }
      case 9: {
        const std::string k = in.Key();
        const Token t = in.TokenValue();
        Log("getfenced '" + k + "' t=" + std::to_string(t));
        std::string v = "unchanged";
        Token max = 0;
        Status s = db_->GetFenced(ReadOptions(), k, t, &v, &max);
        const std::string want = model_.GetFenced(k, t);
        Expect(trace_.back(), want, s.ok() ? v : StatusString(s));
        if (s.IsStaleToken()) ExpectStatus(trace_.back(), want, s, k);
        if (!s.ok()) Expect(trace_.back() + " value", "unchanged", v);
        if (!s.IsInvalidArgument()) {
          Expect(trace_.back() + " max", std::to_string(model_.Reported(k)),
                 std::to_string(max));
        }
        break;
      }
      case 10: {
        const std::string k = in.Key();
        Log("get '" + k + "'");
        std::string v;
        Status s = db_->Get(ReadOptions(), k, &v);
        Expect(trace_.back(), model_.Get(k), s.ok() ? v : StatusString(s));
        break;
      }
      case 11: {
        const size_t n = 1 + in.Byte() % 6;
        std::vector<std::string> keys;
        std::string text = "multiget";
        for (size_t i = 0; i < n; ++i) {
          keys.push_back(in.Key());
          text += " '" + keys.back() + "'";
        }
        Log(text);
        std::vector<std::string_view> views(keys.begin(), keys.end());
        std::vector<std::string> values(n, "unchanged");
        std::vector<Status> statuses(n);
        db_->MultiGet(ReadOptions(), n, views.data(), values.data(),
                      statuses.data());
        for (size_t i = 0; i < n; ++i) {
          Expect(text + " [" + std::to_string(i) + "]", model_.Get(keys[i]),
                 statuses[i].ok() ? values[i] : StatusString(statuses[i]));
          if (!statuses[i].ok()) {
            Expect(text + " value", "unchanged", values[i]);
          }
        }
        break;
      }
      case 12: {
        const uint8_t b = in.Byte();
        const std::string target = in.Key();
        const std::string bound = (b & 4) ? in.Key() : "";
        Log("scan " + std::to_string(b % 4) + " '" + target + "' bound '" +
            bound + "'");
        Scan(b % 4, target, bound);
        break;
      }
      case 13: {
        if (in.Byte() % 2 == 0) {
          Log("flush");
          ExpectStatus("flush", "OK", db_->Flush());
        } else {
          const Token t = in.TokenValue();
          Log("issued " + std::to_string(t));
          db_->NoteIssuedToken(t);
          model_.NoteIssuedToken(t);
        }
        break;
      }
      case 14: {
        const uint8_t b = in.Byte();
        const std::string begin = in.Key(), end = in.Key();
        Log("compact " + ((b & 1) ? "'" + begin + "'" : "-") + " .. " +
            ((b & 2) ? "'" + end + "'" : "-"));
        ExpectStatus(trace_.back(), "OK",
                     db_->CompactRange((b & 1) ? &begin : nullptr,
                                       (b & 2) ? &end : nullptr));
        break;
      }
      case 15: {
        Reopen(in.Byte());
        CheckHighWaterMark();
        break;
      }
    }
    CheckFloorAndStats();
  }
  CheckAll();  // (reopens and compactions are operations of their own)
  db_.reset();
}

}  // namespace
}  // namespace fencedkv

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fencedkv;
  Input in(data, size);
  const uint8_t config = in.Byte(), arg = in.Byte(), floor = in.Byte() % 8;
  static const char* const kDomains[] = {"key",
                                         "prefix:", "delimiter:", "hashtag"};
  Options options;
  options.create_if_missing = true;
  options.fence_domain = kDomains[config % 4];
  if (config % 4 == 1) options.fence_domain += std::to_string(1 + arg % 3);
  if (config % 4 == 2) options.fence_domain += (arg % 2) ? ':' : '}';
  options.fence_mode =
      (config & 4) ? FenceMode::kStrict : FenceMode::kMonotonic;
  options.memtable = (config & 8) ? "hash" : "skiplist";
  // Small budgets: the table is mapped with huge pages, and zero-filling
  // 2 MiB per touched bucket would cost more than the whole input.
  static const size_t kCache[] = {1 << 20, 0, 4 << 10, 256 << 10};
  options.fence_cache_bytes = kCache[(config >> 4) % 4];
  options.allow_unfenced = (config & 0x40) != 0;
  ModelDB::Limits limits;
  limits.allow_unfenced = options.allow_unfenced;
  if (config & 0x80) {
    options.max_key_size = limits.max_key_size = 3;
    options.max_value_size = limits.max_value_size = 4;
  }
  static const uint64_t kSkew[] = {kNoTokenSkewLimit, kNoTokenSkewLimit, 3, 20};
  options.max_token_skew = limits.max_token_skew = kSkew[(arg >> 2) % 4];
  options.compression = "none";
  options.env = fuzz::FuzzEnv();
  options.block_cache_size = 1 << 20;
  options.write_buffer_size = 1 << 20;
  FenceDomainSpec spec;
  if (!FenceDomainSpec::Parse(options.fence_domain, &spec).ok()) std::abort();

  // FENCEDKV_FUZZ_MEMENV=1: the database in a RocksDB in-memory Env, given
  // through Options::env (one per input).
  std::unique_ptr<rocksdb::Env> mem_env;
  std::string dir;
  if (std::getenv("FENCEDKV_FUZZ_MEMENV") != nullptr) {
    mem_env.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
    options.env = mem_env.get();
    dir = "/fencedkv_fuzz_memenv/db";
  } else {
    dir = fuzz::FreshDbPath();
  }
  Harness h(dir, options, spec, limits);
  h.Run(in, floor);
  return 0;
}
