// Copyright (c) fencedkv authors.
//
// fenced_bench workload bodies. Each runs on one thread with its own
// ThreadState; the driver (fenced_bench_tool.cc) merges and reports.
//
// Tokens: in monotonic mode a write carries the token of the lease holder
// of its domain, as a holder does: with one holder (the default) the current
// epoch_; with --token_holders=N each domain belongs to one of N holders
// (by its hash), each holder writes with its own token, and now and then a
// holder renews its lease, taking the next token of the shared counter, so
// the holders' tokens rise and interleave. Strict mode takes a fresh token
// per write. A stale token is one below every token written this run.

#include <cinttypes>
#include <cstdio>
#include <unordered_map>

#include "fenced_bench_internal.h"
#include "util/coding.h"

namespace fencedkv {
namespace bench {

namespace {

// Stops a loop after max_ops, or after max_seconds when that is set
// (db_bench's Duration).
class Duration {
 public:
  Duration(int max_seconds, int64_t max_ops)
      : max_seconds_(max_seconds), max_ops_(max_ops), start_(NowMicros()) {}
  bool Done(int64_t increment) {
    ops_ += increment;
    if (max_seconds_ > 0) {
      // Check the clock every 256 ops.
      if ((ops_ & 0xff) < increment || increment > 0xff) {
        return NowMicros() - start_ >=
               static_cast<uint64_t>(max_seconds_) * 1000000;
      }
      return false;
    }
    return ops_ > max_ops_;
  }

 private:
  const int max_seconds_;
  const int64_t max_ops_;
  const uint64_t start_;
  int64_t ops_ = 0;
};

constexpr uint64_t kTokenBytes = 8;

}  // namespace

Token Benchmark::WriteToken() {
  return strict_ ? strict_counter_.fetch_add(1, std::memory_order_relaxed)
                 : epoch_.load(std::memory_order_relaxed);
}

Token Benchmark::StaleToken() {
  // With holders: below the first holder's first token, hence below all.
  const Token e = first_holder_token_ > 0 && !strict_
                      ? first_holder_token_
                      : epoch_.load(std::memory_order_relaxed);
  return e > 1 ? e - 1 : 1;
}

void Benchmark::InitHolders() {
  if (first_holder_token_ > 0) return;
  for (auto& t : holder_tokens_) t.store(NewLeaseToken());
  first_holder_token_ = holder_tokens_[0].load();
}

Token Benchmark::HolderToken(ThreadState* thread, std::string_view key) {
  if (holders_ <= 1 || strict_) return WriteToken();
  const size_t h =
      std::hash<std::string_view>()(spec_.DomainOf(key)) % holders_;
  if (FLAGS_token_renew_every > 0 &&
      thread->Uniform(static_cast<uint64_t>(FLAGS_token_renew_every)) == 0) {
    Tracker::RaiseTo(holder_tokens_[h], NewLeaseToken());
  }
  return holder_tokens_[h].load(std::memory_order_relaxed);
}

Token Benchmark::NewLeaseToken() {
  return strict_ ? strict_counter_.fetch_add(1) : epoch_.fetch_add(1) + 1;
}

std::string_view Benchmark::Value(ThreadState* thread, Token token) {
  std::string_view v = values_->Generate(static_cast<size_t>(FLAGS_value_size));
  if (tracker_ == nullptr || v.size() < kTokenBytes) return v;
  // Embed the token so verify can tell which write a value came from.
  thread->value_buf.assign(v.data(), v.size());
  EncodeFixed64(thread->value_buf.data(), token);
  return thread->value_buf;
}

void Benchmark::Track(uint64_t i, Token token, bool is_delete, bool advance) {
  if (tracker_ == nullptr || i >= tracker_->max.size()) return;
  if (advance) {
    // docs/contract.md: a strict AdvanceFence(t) raises the max to t - 1 (t
    // itself is still admitted once); a monotonic one to t.
    Tracker::RaiseTo(tracker_->max[i], strict_ ? token - 1 : token);
    return;
  }
  Tracker::RaiseTo(tracker_->max[i], token);
  Tracker::RaiseTo(is_delete ? tracker_->del[i] : tracker_->put[i], token);
}

bool Benchmark::Fatal(Outcome o, const char* what) {
  if (o != Outcome::kError) return false;
  std::fprintf(stderr, "%s error: %s\n", what, store_->LastError().c_str());
  exit_code_ = 1;
  return true;
}

bool Benchmark::CountWrite(ThreadState* thread, Outcome o, const char* what) {
  if (o == Outcome::kOk) {
    thread->accepted++;
  } else if (o == Outcome::kStale) {
    thread->rejected++;
  } else if (Fatal(o, what)) {
    return false;
  }
  return true;
}

bool Benchmark::PutOne(ThreadState* thread, uint64_t idx, Token token,
                       bool add_bytes) {
  const std::string key = Key(idx);
  const std::string_view v = Value(thread, token);
  const Outcome o = store_->Put(key, v, token);
  if (!CountWrite(thread, o, "put")) return false;
  if (o == Outcome::kOk) Track(idx, token, false, false);
  if (add_bytes) {
    thread->stats.AddBytes(static_cast<int64_t>(
        key.size() + v.size() + (store_->fenced() ? kTokenBytes : 0)));
  }
  thread->stats.FinishedOps(1, OpType::kWrite);
  return true;
}

void Benchmark::DoWrite(ThreadState* thread, bool sequential, int batch) {
  const uint64_t num = static_cast<uint64_t>(num_);
  const uint64_t token_bytes = store_->fenced() ? kTokenBytes : 0;
  // As db_bench: --duration applies to random writes only; fillseq and
  // fillbatch write --writes keys.
  Duration duration(sequential ? 0 : FLAGS_duration, writes_);
  std::vector<std::string> keys(static_cast<size_t>(batch));
  std::vector<uint64_t> indexes(static_cast<size_t>(batch));
  std::vector<Token> tokens(static_cast<size_t>(batch));
  std::vector<std::string> values(static_cast<size_t>(batch));
  std::vector<BenchStore::BatchOp> ops;
  uint64_t i = 0;
  while (!duration.Done(batch)) {
    ops.clear();
    for (int b = 0; b < batch; ++b, ++i) {
      const uint64_t idx = sequential ? i % num : thread->Uniform(num);
      indexes[b] = idx;
      keys[b] = Key(idx);
      const bool stale = FLAGS_stale_write_percent > 0 &&
                         thread->Uniform(100) <
                             static_cast<uint64_t>(FLAGS_stale_write_percent);
      tokens[b] = stale ? StaleToken() : HolderToken(thread, keys[b]);
      if (batch > 1) {
        values[b].assign(Value(thread, tokens[b]));
        ops.push_back({keys[b], values[b], tokens[b], false});
      }
    }
    Outcome o;
    uint64_t bytes = 0;
    if (batch == 1) {
      std::string_view v = Value(thread, tokens[0]);
      o = store_->Put(keys[0], v, tokens[0]);
      bytes = keys[0].size() + v.size() + token_bytes;
    } else {
      o = store_->Write(ops);
      for (const auto& op : ops) {
        bytes += op.key.size() + op.value.size() + token_bytes;
      }
    }
    if (!CountWrite(thread, o, "put")) return;
    if (o == Outcome::kOk) {
      for (int b = 0; b < batch; ++b)
        Track(indexes[b], tokens[b], false, false);
    }
    thread->stats.AddBytes(static_cast<int64_t>(bytes));
    thread->stats.FinishedOps(batch, OpType::kWrite);
  }
}

void Benchmark::ReadRandom(ThreadState* thread) {
  const uint64_t num = static_cast<uint64_t>(num_);
  Duration duration(FLAGS_duration, reads_);
  std::string value;
  while (!duration.Done(1)) {
    const std::string key = Key(thread->Uniform(num));
    const Outcome o = store_->Get(key, &value);
    if (Fatal(o, "get")) return;
    thread->lookups++;
    if (o == Outcome::kOk) {
      thread->found++;
      thread->stats.AddBytes(static_cast<int64_t>(key.size() + value.size()));
    }
    thread->stats.FinishedOps(1, OpType::kRead);
  }
}

void Benchmark::MultiReadRandom(ThreadState* thread) {
  // db_bench's multireadrandom: --batch_size random keys per MultiGet, each
  // counted as one read.
  const uint64_t num = static_cast<uint64_t>(num_);
  const size_t n = static_cast<size_t>(batch_size_);
  std::vector<std::string> keys(n);
  std::vector<std::string_view> views(n);
  std::vector<std::string> values(n);
  std::vector<Outcome> outcomes(n);
  Duration duration(FLAGS_duration, reads_);
  while (!duration.Done(batch_size_)) {
    for (size_t i = 0; i < n; ++i) {
      keys[i] = Key(thread->Uniform(num));
      views[i] = keys[i];
    }
    store_->MultiGet(n, views.data(), values.data(), outcomes.data());
    for (size_t i = 0; i < n; ++i) {
      if (Fatal(outcomes[i], "multiget")) return;
      thread->lookups++;
      if (outcomes[i] == Outcome::kOk) {
        thread->found++;
        thread->stats.AddBytes(
            static_cast<int64_t>(keys[i].size() + values[i].size()));
      }
    }
    thread->stats.FinishedOps(batch_size_, OpType::kRead);
  }
}

void Benchmark::SeekRandom(ThreadState* thread) {
  // db_bench's seekrandom: a new iterator per op, Seek to a random key
  // (found if it lands on it), then --seek_nexts Next().
  const uint64_t num = static_cast<uint64_t>(num_);
  Duration duration(FLAGS_duration, reads_);
  while (!duration.Done(1)) {
    const std::string key = Key(thread->Uniform(num));
    bool found = false;
    uint64_t bytes = 0;
    const Outcome o = store_->Seek(key, FLAGS_seek_nexts, &found, &bytes);
    if (Fatal(o, "iterator")) return;
    thread->lookups++;
    if (found) thread->found++;
    thread->stats.AddBytes(static_cast<int64_t>(bytes));
    thread->stats.FinishedOps(1, OpType::kSeek);
  }
}

void Benchmark::ReadRandomWriteRandom(ThreadState* thread) {
  // db_bench's readrandomwriterandom: in each round of 100 ops,
  // --readwritepercent Gets first, then the Puts; keys at random. Runs for
  // the larger of --reads and --writes (--num when neither is set).
  const uint64_t num = static_cast<uint64_t>(num_);
  const int64_t ops = (FLAGS_writes < 0 && FLAGS_reads < 0)
                          ? num_
                          : std::max<int64_t>(FLAGS_writes, FLAGS_reads);
  Duration duration(FLAGS_duration, ops);
  std::string value;
  int get_weight = 0, put_weight = 0;
  while (!duration.Done(1)) {
    const uint64_t idx = thread->Uniform(num);
    if (get_weight == 0 && put_weight == 0) {
      get_weight = FLAGS_readwritepercent;
      put_weight = 100 - get_weight;
    }
    if (get_weight > 0) {
      const std::string key = Key(idx);
      const Outcome o = store_->Get(key, &value);
      if (Fatal(o, "get")) return;
      thread->lookups++;
      if (o == Outcome::kOk) thread->found++;
      get_weight--;
      thread->stats.FinishedOps(1, OpType::kRead);
    } else {
      // (No bytes counted: db_bench's line has no MB/s here.)
      if (!PutOne(thread, idx, HolderToken(thread, Key(idx)), false)) return;
      put_weight--;
    }
  }
}

void Benchmark::FencedRead(ThreadState* thread) {
  const uint64_t num = static_cast<uint64_t>(num_);
  Duration duration(FLAGS_duration, reads_);
  std::string value;
  // The current holder's token: at or above every token written so far.
  const Token token = strict_ ? strict_counter_.load() : epoch_.load();
  while (!duration.Done(1)) {
    const std::string key = Key(thread->Uniform(num));
    const Outcome o = store_->GetFenced(key, token, &value);
    if (Fatal(o, "fenced get")) return;
    thread->lookups++;
    if (o == Outcome::kOk) {
      thread->found++;
      thread->stats.AddBytes(
          static_cast<int64_t>(key.size() + value.size() + kTokenBytes));
    } else if (o == Outcome::kStale) {
      thread->rejected++;
    }
    thread->stats.FinishedOps(1, OpType::kRead);
  }
}

void Benchmark::ReadSeq(ThreadState* thread) {
  const bool ok =
      store_->Scan(static_cast<uint64_t>(reads_), [&](size_t bytes) {
        thread->stats.AddBytes(static_cast<int64_t>(bytes));
        thread->stats.FinishedOps(1, OpType::kRead);
      });
  if (!ok) Fatal(Outcome::kError, "iterator");
}

void Benchmark::DeleteRandom(ThreadState* thread) {
  const uint64_t num = static_cast<uint64_t>(num_);
  const uint64_t token_bytes = store_->fenced() ? kTokenBytes : 0;
  Duration duration(FLAGS_duration, deletes_);
  while (!duration.Done(1)) {
    const uint64_t idx = thread->Uniform(num);
    const std::string key = Key(idx);
    const Token token = HolderToken(thread, key);
    const Outcome o = store_->Delete(key, token);
    if (!CountWrite(thread, o, "delete")) return;
    if (o == Outcome::kOk) Track(idx, token, true, false);
    thread->stats.AddBytes(static_cast<int64_t>(key.size() + token_bytes));
    thread->stats.FinishedOps(1, OpType::kDelete);
  }
}

void Benchmark::ReadWhileWriting(ThreadState* thread) {
  SharedState* shared = thread->shared;
  if (thread->tid > 0) {
    ReadRandom(thread);
    shared->readers_done.fetch_add(1);
    return;
  }
  // Thread 0 writes until every reader is done; its stats are not reported.
  thread->stats.SetExcludeFromMerge();
  const uint64_t num = static_cast<uint64_t>(num_);
  while (shared->readers_done.load() < shared->total - 1) {
    const uint64_t idx = thread->Uniform(num);
    if (!PutOne(thread, idx, HolderToken(thread, Key(idx)))) return;
  }
}

void Benchmark::StaleWrite(ThreadState* thread) {
  const uint64_t num = static_cast<uint64_t>(num_);
  Duration duration(FLAGS_duration, writes_);
  while (!duration.Done(1)) {
    if (!PutOne(thread, thread->Uniform(num), StaleToken())) return;
  }
}

void Benchmark::AdvanceFence(ThreadState* thread) {
  const uint64_t num = static_cast<uint64_t>(num_);
  Duration duration(FLAGS_duration, writes_);
  while (!duration.Done(1)) {
    const uint64_t idx = thread->Uniform(num);
    const std::string key = Key(idx);
    const Token token = NewLeaseToken();
    const Outcome o = store_->AdvanceFence(key, token);
    if (Fatal(o, "advance")) return;
    Track(idx, token, false, true);
    thread->stats.AddBytes(static_cast<int64_t>(key.size() + kTokenBytes));
    thread->stats.FinishedOps(1, OpType::kWrite);
  }
}

void Benchmark::Contended(ThreadState* thread) {
  // --token_holders holders share 8 hot domains. Now and then a holder
  // re-acquires its lease (a new, higher token), so older holders' tokens go
  // stale while they keep writing, interleaved with the newer ones.
  // (The driver gave every holder a token before the threads started.)
  const uint64_t kDomains = std::min<uint64_t>(8, static_cast<uint64_t>(num_));
  Duration duration(FLAGS_duration, writes_);
  while (!duration.Done(1)) {
    const size_t h = thread->Uniform(contended_holders_);
    if (thread->Uniform(64) == 0) holder_tokens_[h].store(NewLeaseToken());
    const Token token = holder_tokens_[h].load();
    if (!PutOne(thread, thread->Uniform(kDomains), token)) return;
  }
}

void Benchmark::Compact(ThreadState* thread) {
  Fatal(store_->Compact(), "compact");
  thread->stats.FinishedOps(1, OpType::kOther);
}

void Benchmark::PrintStats(ThreadState* thread) {
  std::fprintf(stdout, "\n%s\n", store_->Property("rocksdb.stats").c_str());
  if (store_->fenced()) {
    std::fprintf(stdout, "%s\n", store_->Property("fencedkv.stats").c_str());
  }
  thread->stats.FinishedOps(1, OpType::kOther);
}

void Benchmark::Verify(ThreadState* thread) {
  // Independent of the engine: expected maxima come from what the benchmark
  // saw accepted (tracker_), values carry the token that wrote them.
  FenceDomainSpec spec;
  FenceDomainSpec::Parse(FLAGS_fence_domain, &spec);
  const uint64_t num = static_cast<uint64_t>(num_);
  std::unordered_map<std::string, Token> domain_max;
  if (!spec.is_per_key()) {
    for (uint64_t i = 0; i < num; ++i) {
      const Token t = tracker_->max[i].load();
      if (t == 0) continue;
      const std::string key = Key(i);
      Token& m = domain_max[std::string(spec.DomainOf(key))];
      m = std::max(m, t);
    }
  }
  const Token floor = FLAGS_fence_floor;
  uint64_t problems = 0, checked = 0;
  std::string first;
  std::string value;
  auto problem = [&](const std::string& what) {
    if (problems++ == 0) first = what;
  };
  for (uint64_t i = 0; i < num; ++i) {
    const std::string key = Key(i);
    Token want = spec.is_per_key() ? tracker_->max[i].load() : [&] {
      auto it = domain_max.find(std::string(spec.DomainOf(key)));
      return it == domain_max.end() ? Token{0} : it->second;
    }();
    if (want == 0) continue;  // untouched by this run
    ++checked;
    if (floor > 0) want = std::max(want, strict_ ? floor - 1 : floor);
    const Token got = store_->GetFence(key);
    if (got != want) {
      problem("key " + key + ": max " + std::to_string(got) + ", expected " +
              std::to_string(want));
    }
    thread->stats.FinishedOps(1, OpType::kRead);
    const Token put = tracker_->put[i].load();
    const Token del = tracker_->del[i].load();
    if (put == 0 && del == 0) continue;
    const Outcome o = store_->Get(key, &value);
    if (Fatal(o, "get")) return;
    thread->stats.AddBytes(static_cast<int64_t>(key.size() + value.size()));
    if (put > del) {
      if (o != Outcome::kOk) {
        problem("key " + key + ": missing, last accepted put had token " +
                std::to_string(put));
      } else if (value.size() >= kTokenBytes &&
                 DecodeFixed64(value.data()) != put) {
        problem("key " + key + ": value written with token " +
                std::to_string(DecodeFixed64(value.data())) +
                ", last accepted put had token " + std::to_string(put) +
                " (a stale write was applied)");
      }
    } else if (del > put && o != Outcome::kNotFound) {
      problem("key " + key + ": present after an accepted delete with token " +
              std::to_string(del));
    }
  }
  if (problems == 0) {
    std::fprintf(stdout, "FenceVerify Success. (%" PRIu64 " keys checked)\n",
                 checked);
  } else {
    std::fprintf(stdout,
                 "FenceVerify FAILED!! %" PRIu64 " of %" PRIu64
                 " keys wrong; first: %s\n",
                 problems, checked, first.c_str());
    exit_code_ = 1;
  }
}

}  // namespace bench
}  // namespace fencedkv
