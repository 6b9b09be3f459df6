// Copyright (c) fencedkv authors.
//
// fenced_bench workload bodies. Each runs on one thread with its own
// ThreadState; the driver (fenced_bench_tool.cc) merges and reports.
//
// Tokens: in monotonic mode every write of a run carries the current
// holder's token (epoch_), as a lease holder does; strict mode takes a fresh
// token per write. A stale token is one below every token written this run.

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
  const Token e = epoch_.load(std::memory_order_relaxed);
  return e > 1 ? e - 1 : 1;
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
  Tracker::RaiseTo(tracker_->max[i], token);
  if (advance) return;
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

bool Benchmark::PutOne(ThreadState* thread, uint64_t idx, Token token) {
  const std::string key = Key(idx);
  const std::string_view v = Value(thread, token);
  const Outcome o = store_->Put(key, v, token);
  if (!CountWrite(thread, o, "put")) return false;
  if (o == Outcome::kOk) Track(idx, token, false, false);
  thread->stats.AddBytes(static_cast<int64_t>(
      key.size() + v.size() + (store_->fenced() ? kTokenBytes : 0)));
  thread->stats.FinishedOps(1, OpType::kWrite);
  return true;
}

void Benchmark::DoWrite(ThreadState* thread, bool sequential, int batch) {
  const uint64_t num = static_cast<uint64_t>(num_);
  const uint64_t token_bytes = store_->fenced() ? kTokenBytes : 0;
  Duration duration(FLAGS_duration, writes_);
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
      tokens[b] = stale ? StaleToken() : WriteToken();
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
      for (int b = 0; b < batch; ++b) Track(indexes[b], tokens[b], false, false);
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
  const bool ok = store_->Scan(static_cast<uint64_t>(reads_), [&](size_t bytes) {
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
    const Token token = WriteToken();
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
    if (!PutOne(thread, thread->Uniform(num), WriteToken())) return;
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
  const uint64_t kDomains = std::min<uint64_t>(8, static_cast<uint64_t>(num_));
  const size_t holders = holder_tokens_.size();
  if (thread->tid == 0) {
    for (auto& t : holder_tokens_) {
      Token zero = 0;
      t.compare_exchange_strong(zero, NewLeaseToken());
    }
  }
  Duration duration(FLAGS_duration, writes_);
  while (!duration.Done(1)) {
    const size_t h = thread->Uniform(holders);
    if (thread->Uniform(64) == 0) holder_tokens_[h].store(NewLeaseToken());
    Token token = holder_tokens_[h].load();
    if (token == 0) token = WriteToken();  // before thread 0 initialized it
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
    Token want = spec.is_per_key()
                     ? tracker_->max[i].load()
                     : [&] {
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
