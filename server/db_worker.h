// Copyright (c) fencedkv authors.
//
// DbWorker: a database thread beside the io loops, for work a loop should
// not wait for:
//
//  - synced writes (--sync): once per loop iteration, a loop submits every
//    plain fenced write (SET ... FENCE t, MSET ... FENCE t) its connections
//    parsed, each a WriteBatch. The worker applies all write jobs queued
//    since its last write with one DB::WriteGroup -- one RocksDB write, one
//    WAL record, one fsync: group commit across connections and loops, and
//    the longer an fsync takes, the more the next group carries, while the
//    loops keep serving. Each batch stands or falls alone (a stale one gets
//    -STALE, the others apply). (Without --sync a loop writes its group
//    itself: handing it over costs more than the write. With --sync, so
//    does a loop whose group has at most
//    ServerOptions::sync_inline_batches (64) batches while
//    the worker is idle: such a group waits for its fsync either way, and
//    the hand-off's two thread wake-ups cost a single synced client a
//    third of its rate on a 2-core VM; RocksDB still merges the synced
//    writes of several loops into one fsync. The loop serves nothing else
//    during that fsync, as Redis with appendfsync always. Before either, a
//    loop gathers the writes on their way: sync_gather.h.)
//  - pipelined reads, when the worker has room: a connection's batch of GETs
//    (one MultiGet) runs here while the loop serves its other connections,
//    so reads use a second core even with one loop. (SCAN, KEYS and
//    DBSIZE, which may walk the whole key space, and long commands have
//    threads of their own: scan_worker.h, ServerState::longs.)
//  - while a long write runs, a loop's unsynced group too: the long write
//    holds its keys' fence stripes, and the loop must not wait for one.
//
// Jobs run in the order they were queued. Each job's callback runs on the
// worker thread and must only hand the result back to the loop (post).
//
// Thread-safe.

#ifndef FENCEDKV_SERVER_DB_WORKER_H_
#define FENCEDKV_SERVER_DB_WORKER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "fencedkv/db.h"

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

// DB::WriteGroup's result applied to its batches: if the group failed,
// every batch not explicitly marked failed gets its error (an engine that
// returns an error with a batch still OK must not make the server answer
// +OK for a write that did not happen).
void FailUnmarkedBatches(const Status& group, Status* statuses, size_t n);

// The most batch bytes one DB::WriteGroup call carries (a larger batch goes
// alone). A group is one RocksDB write, one WAL record and so one frame of
// the replication stream: this keeps frames within a replica's limit.
constexpr size_t kMaxGroupBytes = 16 << 20;

// Writes the n batches, in order, as DB::WriteGroup calls of at most
// kMaxGroupBytes each; statuses[i] is batch i's (FailUnmarkedBatches
// applied to each call).
void WriteGroupsBounded(DB* db, const WriteOptions& options,
                        const WriteBatch* const* batches, size_t n,
                        Status* statuses);

class DbWorker {
 public:
  // One Status per batch, in order. The batches may be freed once it runs.
  using WriteDone = std::function<void(std::vector<Status>)>;

  // Starts the thread.
  DbWorker(DB* db, const WriteOptions& options);
  ~DbWorker();  // Stop()
  DbWorker(const DbWorker&) = delete;
  DbWorker& operator=(const DbWorker&) = delete;

  // Queues `batches` (which must stay valid until `done` runs). After
  // Stop(), `done` gets -SHUTDOWN statuses at once, on the calling thread.
  void SubmitWrite(std::vector<const WriteBatch*> batches, WriteDone done)
      LOCKS_EXCLUDED(mu_);
  // Queues `read`, to run on the worker thread, if fewer than two jobs are
  // waiting (so the worker always has the next one at hand). False, and
  // nothing queued, if it is that far behind or stopped: the caller reads
  // itself.
  bool TrySubmitRead(std::function<void()> read) LOCKS_EXCLUDED(mu_);
  // True if no job is queued or running (a moment later it may not be).
  bool Idle() LOCKS_EXCLUDED(mu_);
  // Refuses new jobs, runs the queued ones, joins the thread. Idempotent.
  void Stop() LOCKS_EXCLUDED(mu_);
  // How long its last group write took (ns; 0 before the first), for the
  // loops' gathering (sync_gather.h).
  int64_t last_write_nanos() const {
    return last_write_nanos_.load(std::memory_order_relaxed);
  }

 private:
  struct Job {
    std::vector<const WriteBatch*> batches;  // a write job, or
    WriteDone done;
    std::function<void()> read;  // a read job
  };
  void Run() LOCKS_EXCLUDED(mu_);
  // Applies jobs[first, last), all writes, as one group.
  void WriteJobs(std::vector<Job>* jobs, size_t first, size_t last)
      LOCKS_EXCLUDED(mu_);

  DB* const db_;
  const WriteOptions options_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Job> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  bool running_ GUARDED_BY(mu_) = false;  // jobs taken and not all done
  // Reused by WriteJobs (worker thread only).
  std::vector<const WriteBatch*> ptrs_;
  std::vector<Status> statuses_;
  std::atomic<int64_t> last_write_nanos_{0};
  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_DB_WORKER_H_
