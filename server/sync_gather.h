// Copyright (c) fencedkv authors.
//
// SyncGather: with --sync, whether a loop should look once more for writes
// before it writes (and fsyncs) the group it has collected.
//
// A synced group waits for its fsync however small it is, and the fsync
// costs the same for one write as for fifty. Clients that were answered by
// the last fsync send their next writes a few microseconds apart; a loop
// that wrote as soon as the first of them arrived would split them over
// two fsyncs (measured: 18 writes per fsync from 50 clients, against
// Redis' 28 with appendfsync always). So, as PostgreSQL's commit_delay
// does, the loop takes another pass over its ready sockets while the last
// pass brought new writes, and writes once
//  - a pass brought none (a lone client waits one pass: a few
//    microseconds),
//  - or the gathering has lasted as long as recent synced group writes
//    took, the loop's own and those it handed to the database thread
//    (waiting longer than one fsync cannot pay off),
//  - or it has lasted `cap` (--sync_gather_us; 0 turns gathering off),
//  - or the group is as large as the caller allows (the loop: what it
//    writes itself, ServerOptions::sync_inline_batches, and nothing while
//    the database thread is busy: that thread merges whatever is queued
//    when it is free, so waiting on the loop would only delay it).
// So a write waits at most min(cap, recent fsync time), plus the one pass
// that was under way when that time ran out, longer than it would without
// gathering. Until a synced write of the loop's was timed nothing is
// gathered.
//
// Not thread-safe: one per loop, used on the loop's thread only.

#ifndef FENCEDKV_SERVER_SYNC_GATHER_H_
#define FENCEDKV_SERVER_SYNC_GATHER_H_

#include <chrono>
#include <cstddef>

namespace fencedkv {
namespace server {

class SyncGather {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SyncGather(std::chrono::microseconds cap) : cap_(cap) {}

  // At a flush with `batches` writes collected: true = pass once more over
  // the ready sockets and ask again; false = write now (and the next call
  // starts a new gathering). A group of `max_batches` or more is written at
  // once.
  bool KeepGathering(size_t batches, size_t max_batches, Clock::time_point now);
  // A synced group write took `took`: the bound follows a moving average.
  void RecordWrite(std::chrono::nanoseconds took);
  // How long a gathering may last now: min(cap, recent write time); zero
  // before the first write was timed.
  std::chrono::nanoseconds bound() const;

 private:
  const std::chrono::microseconds cap_;
  std::chrono::nanoseconds average_{0};  // of recent synced group writes
  bool gathering_ = false;
  Clock::time_point started_;
  size_t seen_ = 0;  // batches at the last pass
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SYNC_GATHER_H_
