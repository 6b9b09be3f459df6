// Copyright (c) fencedkv authors.
//
// ScanWorker: the thread that runs the commands which walk the key space
// (SCAN, KEYS, DBSIZE) for the io loops, so that a long walk never stalls a
// loop's other connections: run on a loop, concurrent KEYS over a large
// key space stall every writer of that loop for seconds (measure it with
// tools/keys_latency.sh). Here they wait for each other instead.
//
// Jobs run one at a time, in the order queued. A connection queues at most
// one (it waits for its reply), so the queue holds at most one job per
// connection. A job's callback must only hand its result back (post to the
// connection's loop). A job is destroyed outside the worker's lock, so what
// it holds may submit when it goes (a connection's destructor does).
//
// Thread-safe.

#ifndef FENCEDKV_SERVER_SCAN_WORKER_H_
#define FENCEDKV_SERVER_SCAN_WORKER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

class ScanWorker {
 public:
  // Starts the thread, named `name` (at most 15 characters).
  explicit ScanWorker(const char* name = "fencedkv:scan");
  ~ScanWorker();  // Stop()
  ScanWorker(const ScanWorker&) = delete;
  ScanWorker& operator=(const ScanWorker&) = delete;

  // Queues `job`; false, and nothing queued, once stopped.
  bool Submit(std::function<void()> job);
  // Refuses new jobs, runs the queued ones, joins the thread. Idempotent.
  void Stop();

 private:
  void Run() LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SCAN_WORKER_H_
