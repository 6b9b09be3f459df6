// Copyright (c) fencedkv authors.
//
// libFuzzer target: a replica fed its primary's log with some batches
// damaged (docs/replication.md, "A replica checks every batch before it
// writes it"). A primary on a real RocksDB runs the operations the input
// names; its batches, read back with NewLogReader, go to a replica opened
// from a checkpoint of it, some mutated on the way. The rules checked:
//  - an undamaged batch applies;
//  - a damaged batch that is refused changes nothing: the replica's
//    sequence and digest are as before, the undamaged batch applies after
//    it, and a reopen finds the same content (nothing of it in the WAL);
//  - a damaged batch that is accepted (it is one a primary could have
//    written: a changed value, say) leaves a database that reopens, whose
//    fence state loads once promoted, that reads every key and takes a
//    fenced write (or refuses it as stale: a damaged max may be high);
//  - a replica given every batch undamaged ends with the primary's digest.
//
// Input layout (bytes past the end read as 0):
//   byte 0: bits 0-1 the fence domain (key, prefix:2, hashtag,
//           delimiter::), bit 2 strict mode
//   then up to 24 primary operations, an opcode byte (% 8) and its
//   arguments; opcode 7 ends them
//   then per batch of the log, in order: a byte m; m % 3 == 0 applies it as
//   it is, otherwise a byte b and 1 + (b / 3) % 4 edits follow, each a kind
//   byte and a position byte (and a value byte where one is needed); bit 7
//   of m also reopens the replica after the batch.
// A broken rule prints what happened and aborts. The databases live under
// fuzz::ProcessDir() (see fuzz_util.h), wiped before each input.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"
#include "fencedkv/replication.h"

#include "fuzz_util.h"

namespace fencedkv {
namespace {

const char* const kKeys[] = {"a",    "b",    "a:1",  "a:2",
                             "{x}1", "{x}2", "ab:c", "lease"};
constexpr size_t kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool done() const { return pos_ >= size_; }
  std::string Key() { return kKeys[Byte() % kNumKeys]; }
  Token TokenValue() {
    const uint8_t b = Byte();
    return b >= 0xFC ? kMaxToken - (b - 0xFC) : b % 16;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] void Fail(const std::vector<std::string>& trace,
                       const std::string& what) {
  std::fprintf(stderr, "log_batch_fuzzer: RULE BROKEN\n");
  for (const auto& line : trace) std::fprintf(stderr, "  %s\n", line.c_str());
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

std::string Digest(DB* db) {
  std::string d;
  if (!db->GetProperty("fencedkv.digest", &d)) return "(no digest)";
  return d;
}

// Edits `batch` as the input says; returns a description.
std::string Mutate(Input* in, std::string* batch) {
  std::string what;
  const int edits = 1 + (in->Byte() / 3) % 4;
  for (int e = 0; e < edits; ++e) {
    const uint8_t kind = in->Byte() % 6;
    const size_t size = batch->size();
    const size_t pos = size == 0 ? 0 : in->Byte() % size;
    switch (kind) {
      case 0: {  // set a byte
        const char v = static_cast<char>(in->Byte());
        if (size != 0) (*batch)[pos] = v;
        what += " set@" + std::to_string(pos);
        break;
      }
      case 1: {  // flip a bit
        const uint8_t bit = in->Byte() % 8;
        if (size != 0) (*batch)[pos] ^= static_cast<char>(1u << bit);
        what += " flip@" + std::to_string(pos);
        break;
      }
      case 2:  // cut
        batch->resize(pos);
        what += " cut@" + std::to_string(pos);
        break;
      case 3:  // insert a byte
        batch->insert(pos, 1, static_cast<char>(in->Byte()));
        what += " insert@" + std::to_string(pos);
        break;
      case 4: {  // append a copy of the tail from pos (a record repeated)
        const std::string tail = batch->substr(pos);
        batch->append(tail);
        what += " repeat@" + std::to_string(pos);
        break;
      }
      default: {  // the record count (bytes 8-11) + or - a little
        if (size >= 12) {
          const int delta = static_cast<int>(in->Byte() % 5) - 2;
          (*batch)[8] = static_cast<char>((*batch)[8] + delta);
        }
        what += " count";
        break;
      }
    }
  }
  return what;
}

class Harness {
 public:
  Harness(const std::string& dir, Options options)
      : dir_(dir), options_(std::move(options)) {
    replica_options_ = options_;
    replica_options_.log_replica = true;
  }

  void Run(Input& in) {
    Status s = DB::Open(options_, dir_ + "/p", &primary_);
    if (!s.ok()) Fail(trace_, "primary open: " + s.ToString());
    s = primary_->Checkpoint(dir_ + "/r");
    if (!s.ok()) Fail(trace_, "checkpoint: " + s.ToString());
    OpenReplica("replica open");
    std::unique_ptr<LeaseService> leases;
    s = LeaseService::Open(primary_.get(), LeaseOptions(), &leases);
    if (!s.ok()) Fail(trace_, "lease service: " + s.ToString());
    RunPrimary(in, leases.get());

    std::unique_ptr<LogReader> reader;
    s = primary_->NewLogReader(replica_->GetLatestSequenceNumber(), &reader);
    if (!s.ok()) Fail(trace_, "log reader: " + s.ToString());
    uint64_t first;
    std::string_view data;
    while (reader->Next(&first, &data)) {
      const std::string batch(data);
      const uint8_t m = in.Byte();
      if (m % 3 != 0) {
        std::string damaged = batch;
        const std::string what = Mutate(&in, &damaged);
        if (damaged != batch) {
          trace_.push_back("batch at " + std::to_string(first) + " (" +
                           std::to_string(batch.size()) + " bytes):" + what);
          if (ApplyDamaged(first, damaged)) return;  // accepted: done
        }
      }
      s = replica_->ApplyLogBatch(WriteOptions(), first, batch);
      trace_.push_back("batch at " + std::to_string(first) + " applied");
      if (!s.ok()) Fail(trace_, "an undamaged batch: " + s.ToString());
      if (m & 0x80) {
        const std::string before = Digest(replica_.get());
        OpenReplica("reopen");
        if (Digest(replica_.get()) != before) {
          Fail(trace_, "a reopen changed the replica's content");
        }
      }
    }
    if (!reader->status().ok()) {
      Fail(trace_, "log reader: " + reader->status().ToString());
    }
    if (Digest(replica_.get()) != Digest(primary_.get())) {
      Fail(trace_, "the replica's digest differs from the primary's");
    }
    if (std::getenv("FENCEDKV_FUZZ_TRACE") != nullptr) {
      for (const auto& line : trace_)
        std::fprintf(stderr, "  %s\n", line.c_str());
    }
  }

 private:
  void OpenReplica(const char* what) {
    replica_.reset();
    Status s = DB::Open(replica_options_, dir_ + "/r", &replica_);
    if (!s.ok()) Fail(trace_, std::string(what) + ": " + s.ToString());
  }

  void RunPrimary(Input& in, LeaseService* leases) {
    for (int i = 0; i < 24 && !in.done(); ++i) {
      const uint8_t op = in.Byte() % 8;
      if (op == 7) break;
      const std::string key = in.Key();
      const Token token = in.TokenValue();
      Status s;
      switch (op) {
        case 0:
        case 1:
          s = primary_->Put(WriteOptions(), key,
                            std::string(in.Byte() % 40, 'v'), token);
          break;
        case 2:
          s = primary_->Delete(WriteOptions(), key, token);
          break;
        case 3: {
          WriteBatch b;
          b.Put(key, "w", token);
          b.Delete(in.Key(), token);
          s = primary_->Write(WriteOptions(), b);
          break;
        }
        case 4:
          s = primary_->AdvanceFence(WriteOptions(), key, token, nullptr);
          break;
        case 5:
          s = primary_->SetFenceFloor(WriteOptions(), token);
          break;
        default: {
          LeaseGrant g;
          s = leases->Acquire(key, "h" + std::to_string(in.Byte() % 2), 60000,
                              &g);
          break;
        }
      }
      trace_.push_back("primary op " + std::to_string(op) + " " + key + " " +
                       std::to_string(token) + ": " + s.ToString());
      // Refusals (stale, held, bad token) are the primary's business; an
      // I/O error or corruption is not.
      if (s.IsIOError() || s.IsCorruption()) Fail(trace_, "primary failed");
    }
  }

  // True if the damaged batch was accepted (then the replica's log is no
  // longer the primary's: its checks are made and the input ends).
  bool ApplyDamaged(uint64_t first, const std::string& damaged) {
    const uint64_t seq = replica_->GetLatestSequenceNumber();
    const std::string before = Digest(replica_.get());
    const Status s = replica_->ApplyLogBatch(WriteOptions(), first, damaged);
    trace_.push_back("  damaged: " + s.ToString());
    if (!s.ok()) {
      if (!s.IsCorruption() && !s.IsInvalidArgument()) {
        Fail(trace_,
             "a damaged batch failed as neither Corruption nor "
             "InvalidArgument");
      }
      if (replica_->GetLatestSequenceNumber() != seq) {
        Fail(trace_, "a refused batch moved the replica's sequence from " +
                         std::to_string(seq) + " to " +
                         std::to_string(replica_->GetLatestSequenceNumber()));
      }
      if (Digest(replica_.get()) != before) {
        Fail(trace_, "a refused batch changed the replica's content");
      }
      return false;
    }
    // Accepted: whatever it wrote must be something the database lives with.
    OpenReplica("reopen after an accepted batch");
    replica_->SetFollowing(false);
    Status r = replica_->ReloadFenceState();
    if (!r.ok()) Fail(trace_, "fence state after promotion: " + r.ToString());
    for (const char* key : kKeys) {
      std::string v;
      r = replica_->Get(ReadOptions(), key, &v);
      if (!r.ok() && !r.IsNotFound()) {
        Fail(trace_, std::string("read of ") + key + ": " + r.ToString());
      }
    }
    r = replica_->Put(WriteOptions(), "{new}k", "v", kMaxToken - 8);
    if (!r.ok() && !r.IsStaleToken()) {
      Fail(trace_, "a fenced write after promotion: " + r.ToString());
    }
    return true;
  }

  const std::string dir_;
  Options options_;
  Options replica_options_;
  std::unique_ptr<DB> primary_;
  std::unique_ptr<DB> replica_;
  std::vector<std::string> trace_;
};

}  // namespace
}  // namespace fencedkv

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fencedkv;
  Input in(data, size);
  const uint8_t config = in.Byte();
  static const char* const kDomains[] = {"key", "prefix:2", "hashtag",
                                         "delimiter::"};
  Options options;
  options.create_if_missing = true;
  options.fence_domain = kDomains[config % 4];
  options.fence_mode =
      (config & 4) ? FenceMode::kStrict : FenceMode::kMonotonic;
  options.wal_retention_mb = 64;
  options.compression = "none";
  options.env = fuzz::FuzzEnv();
  options.block_cache_size = 1 << 20;
  options.write_buffer_size = 1 << 20;
  const std::string dir = fuzz::ProcessDir() + "/log";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  Harness h(dir, options);
  h.Run(in);
  return 0;
}
