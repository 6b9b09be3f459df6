// Copyright (c) fencedkv authors.
//
// WriteCombiner: server-level group commit. Each io loop hands it, once per
// loop iteration, every plain fenced write (SET ... FENCE t, MSET ... FENCE
// t) its connections parsed in that iteration, each a WriteBatch, and gets
// one Status per batch back. Each batch stands or falls alone (a stale one
// gets -STALE, the others apply).
//
// Without --sync, the loop applies its job itself with one DB::WriteGroup,
// right away: loops writing at the same time are merged by RocksDB into one
// WAL write and insert into the memtable in parallel, and no thread waits
// for another loop.
//
// With --sync (flat combining), the fsync is what must be shared. If no write
// is in progress, the submitting thread becomes the writer: it takes
// everything queued (its own job and any other loop's) and applies it with
// one DB::WriteGroup -- one RocksDB write, one fsync; otherwise the job just
// queues and Submit returns. One writer at a time: two would split the
// groups and pay two fsyncs. After a group, if the next queued job belongs to
// another loop, the writer hands the role to that loop (posts the drain
// there) and returns to its own connections: a loop never writes the other's
// jobs for ever while its own connections wait, and each job's callback
// usually runs on its own loop.
//
// Thread-safe. `done` runs on the writer thread, possibly inside Submit.

#ifndef FENCEDKV_SERVER_WRITE_COMBINER_H_
#define FENCEDKV_SERVER_WRITE_COMBINER_H_

#define ASIO_STANDALONE
#include <asio/io_context.hpp>

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
  // One Status per batch, in order. The batches may be freed once it runs.
  using Done = std::function<void(std::vector<Status>)>;

  WriteCombiner(DB* db, const WriteOptions& options);
  ~WriteCombiner();  // Stop()
  WriteCombiner(const WriteCombiner&) = delete;
  WriteCombiner& operator=(const WriteCombiner&) = delete;

  // Queues `batches` (which must stay valid until `done` runs) from the loop
  // running `home` (the thread calling Submit must be running it).
  void Submit(asio::io_context* home, std::vector<const WriteBatch*> batches,
              Done done);
  // Refuses new jobs (-SHUTDOWN), writes what is queued and waits for the
  // write in progress. Call after the io loops have stopped: a drain handed to
  // a stopped loop is taken over here.
  void Stop();

  // Batches written per RocksDB write, for INFO.
  uint64_t groups() const { return groups_.load(); }
  uint64_t batches() const { return batches_.load(); }

 private:
  struct Job {
    asio::io_context* home;
    std::vector<const WriteBatch*> batches;
    Done done;
  };
  // Writes groups until the queue is empty or the next job is another
  // loop's. REQUIRES: this thread holds the writer role.
  void Drain(asio::io_context* home);
  // Runs on `home` when the role was handed to it.
  void TakeOver(asio::io_context* home);

  DB* const db_;
  const WriteOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::atomic<bool> stopped_{false};  // stop_, read without mu_
  bool writing_ = false;        // the writer role is taken (or in transit)
  bool handoff_pending_ = false;  // in transit: posted, not yet taken
  std::atomic<uint64_t> groups_{0};
  std::atomic<uint64_t> batches_{0};
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_WRITE_COMBINER_H_
