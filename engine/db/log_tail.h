// Copyright (c) fencedkv authors.
//
// LogTail: the batches this database wrote last, kept in memory for log
// shipping (DB::NewLogReader), as Redis keeps its replication backlog.
//
// Without it every replica link read each batch back from the WAL file
// (RocksDB's GetUpdatesSince): a read syscall, a software crc32c of every
// record (Debian's librocksdb is built without SSE 4.2) and a copy, once
// per link. Under redis-benchmark SET -P 16 with two replicas that was
// about an eighth of the primary's CPU. A write now hands its batch here
// once; every link takes it from here, and reads the WAL only for what the
// tail does not hold (a replica catching up from further back, or after a
// Reset).
//
// What the tail holds is exactly what the WAL reader would return, cut
// finer: every batch RocksDB wrote to the WAL and published, at the
// sequence numbers it was given. (One WAL record may hold several writers'
// batches, which RocksDB merged; the tail holds them one by one. A reader
// that later goes back to the WAL may so have to start inside a record:
// LogReaderImpl cuts that record's head off.)
//
// Coverage. The tail starts (`start_`) with the first batch appended past
// the sequence published when it last restarted: its first reader came,
// its last reader went, or Reset. From there on every batch a write
// published is appended, as the write returns (ErrorRecovery::Write). A
// write that takes sequence numbers without appending them (a failed
// write, one without the WAL, the recovery's sentinel, a replica's applied
// batch) calls Reset. Keep-or-skip is decided under the lock, and a restart
// reads the published sequence under it: a write publishes before it
// appends, so a write skipped by a restart is at or below the new start.
// A batch in the range that is not there yet is pending: its write is on
// its way here, and Find waits a little for it. The one that never comes
// is a number RocksDB skipped (a group whose WAL write failed took numbers
// no batch has): the reader gives up after a while, resets the tail and
// asks the WAL (LogReaderImpl). Evicting the oldest batches (over
// `capacity` bytes) moves the start past them.
//
// Cost when nobody reads: a lock per write; nothing is kept.
//
// Thread-safe.

#ifndef FENCEDKV_DB_LOG_TAIL_H_
#define FENCEDKV_DB_LOG_TAIL_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class LogTail {
 public:
  // At most `capacity` bytes of batches, counting kEntryOverhead for each
  // (the newest batch is kept even if it alone is larger). `published`
  // returns the database's latest published sequence number; it is called
  // with the tail's lock held, so it must not write.
  LogTail(size_t capacity, std::function<uint64_t()> published);
  LogTail(const LogTail&) = delete;
  LogTail& operator=(const LogTail&) = delete;

  // What one kept batch costs besides its bytes (its string, the shared
  // pointer's block, its place in the queue), counted against `capacity`.
  static constexpr size_t kEntryOverhead = 128;

  // A log reader exists / went away: the tail keeps batches only while at
  // least one does. Adding the first, or removing the last, restarts it.
  void AddReader();
  void RemoveReader();

  // A batch RocksDB wrote to the WAL and published: its representation
  // (sequence:fixed64 count:fixed32 records...), the header holding the
  // first sequence number it was given. It may come in two pieces, kept
  // as one batch, `head` + `rest` (a writer that drops a record from its
  // batch's front passes what is around it); `head` holds at least the
  // 12-byte header. Nothing is copied while no reader exists.
  void Append(std::string_view head, std::string_view rest = {});
  // Sequence numbers were taken by a write the tail will not hold: forget
  // everything, and start again at the next batch appended past what is
  // published now (read under the lock, so the write's numbers are never
  // inside the tail, whatever order the concurrent writers' Appends come
  // in).
  void Reset();

  enum class Found {
    kBatch,    // *batch is the batch that starts at `sequence`
    kPending,  // covered but not appended yet, after waiting `wait`
    kNotHeld,  // before the tail, not a batch's start, or no tail: the WAL
  };
  Found Find(uint64_t sequence, std::chrono::microseconds wait,
             std::shared_ptr<const std::string>* batch);

  struct Stats {
    uint64_t appended = 0;  // batches appended
    uint64_t resets = 0;
    uint64_t found = 0;   // Find calls answered from the tail
    uint64_t missed = 0;  // kNotHeld answers (the WAL instead)
    uint64_t waited = 0;  // Find calls that waited for a pending batch
    size_t bytes = 0;     // held now (with kEntryOverhead each)
    size_t batches = 0;
  };
  Stats GetStats() const;

 private:
  struct Entry {
    uint64_t first;
    uint64_t count;
    std::shared_ptr<const std::string> data;
  };
  // Empties the tail and raises the floor to what is published now.
  void RestartLocked() REQUIRES(mu_);

  const size_t capacity_;
  const std::function<uint64_t()> published_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  int readers_ GUARDED_BY(mu_) = 0;
  // Batches in sequence order, each starting at or after start_.
  std::deque<Entry> entries_ GUARDED_BY(mu_);
  uint64_t start_ GUARDED_BY(mu_) = 0;  // 0: covers nothing yet
  // Not yet started: the first batch that starts after this starts it.
  uint64_t floor_ GUARDED_BY(mu_) = 0;
  // Counts restarts: an Append that copied its batch across one drops it.
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  size_t bytes_ GUARDED_BY(mu_) = 0;
  int waiters_ GUARDED_BY(mu_) = 0;
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace fencedkv

#endif  // FENCEDKV_DB_LOG_TAIL_H_
