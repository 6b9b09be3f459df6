// Copyright (c) fencedkv authors.
//
// WriteCombiner: server-level group commit (flat combining). Connections
// hand it runs of plain fenced writes (SET ... FENCE t, MSET ... FENCE t),
// each a WriteBatch. If fewer than max_writers writes are in progress, the
// submitting thread becomes a writer: it takes everything queued (its own job and any other
// connection's) and applies it with one DB::WriteGroup -- one RocksDB write,
// one WAL record, one fsync with --sync -- and repeats while jobs keep
// arriving; other submitters just queue and return. No thread is woken per
// group. Each job's callback receives its statuses. Each batch still stands or
// falls alone (a stale one gets -STALE, the others apply). While waiting, a
// connection parses nothing further, so its replies stay in order.
//
// Thread-safe. Callbacks run on whichever thread is writing: they must only
// post work elsewhere.

#ifndef FENCEDKV_SERVER_WRITE_COMBINER_H_
#define FENCEDKV_SERVER_WRITE_COMBINER_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "fencedkv/db.h"

namespace fencedkv {
namespace server {

class WriteCombiner {
 public:
  using Done = std::function<void(std::vector<Status>)>;

  // Up to `max_writers` threads drain at once, so RocksDB can insert their
  // groups into the memtable in parallel (allow_concurrent_memtable_write).
  WriteCombiner(DB* db, const WriteOptions& options, int max_writers);
  ~WriteCombiner();  // Stop()
  WriteCombiner(const WriteCombiner&) = delete;
  WriteCombiner& operator=(const WriteCombiner&) = delete;

  // Queues `batches`; `done` receives one Status per batch, possibly before
  // Submit returns (when this thread does the write).
  void Submit(std::vector<WriteBatch> batches, Done done);
  // Refuses new jobs (-SHUTDOWN) and waits for the write in progress.
  void Stop();

  // Batches written per RocksDB write, for INFO.
  uint64_t groups() const { return groups_.load(); }
  uint64_t batches() const { return batches_.load(); }

 private:
  struct Job {
    std::vector<WriteBatch> batches;
    Done done;
  };
  // Writes groups until the queue is empty. REQUIRES: this thread counted
  // itself in writers_.
  void Drain();

  DB* const db_;
  const WriteOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  const int max_writers_;
  int writers_ = 0;  // threads in Drain()
  std::atomic<uint64_t> groups_{0};
  std::atomic<uint64_t> batches_{0};
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_WRITE_COMBINER_H_
