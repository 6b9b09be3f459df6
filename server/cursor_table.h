// Copyright (c) fencedkv authors.
//
// CursorTable: the server's SCAN cursors (see the class comment).

#ifndef FENCEDKV_SERVER_CURSOR_TABLE_H_
#define FENCEDKV_SERVER_CURSOR_TABLE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fencedkv/iterator.h"

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

// SCAN cursors: an integer a client holds, mapped to the key its next call
// resumes from. A cursor belongs to the connection that got it (another
// connection's SCAN of it is "ERR invalid cursor", as is an expired or
// forgotten one) and goes when that connection closes (DropOwner). Bounded
// (Limits): per connection the oldest go first past max_per_owner, server-
// wide the oldest past max_cursors or max_bytes (resume keys, up to 64 KiB
// each, plus kOverhead), and any older than idle_ttl.
//
// A cursor may also keep the scan's iterator, positioned on that key, for a
// while: with the hash memtable a new iterator first sorts the memtable, so
// a scan that re-created its iterator on every call would pay that sort per
// page. At most max_parked iterators are kept, each for at most parked_ttl
// and only while the database has not moved on from the version it reads
// (an iterator pins the memtables and files it reads, up to two full
// memtables per column family once they are flushed: the server calls
// DropExpired every few seconds); a cursor whose iterator was dropped
// resumes from its key with a new one.
//
// Thread-safe.
class CursorTable {
 public:
  struct Limits {
    size_t max_cursors = 10000;
    size_t max_bytes = 32 << 20;
    size_t max_per_owner = 16;
    std::chrono::milliseconds idle_ttl = std::chrono::minutes(5);
    size_t max_parked = 16;
    std::chrono::milliseconds parked_ttl = std::chrono::seconds(30);
  };
  // Bytes a cursor counts beyond its key.
  static constexpr size_t kOverhead = 128;

  CursorTable() : CursorTable(Limits()) {}
  explicit CursorTable(const Limits& limits) : limits_(limits) {}

  // A new cursor of connection `owner`, resuming at `next_key`, with the
  // iterator positioned there (may be null).
  uint64_t Save(uint64_t owner, std::string next_key,
                std::unique_ptr<Iterator> iterator);
  // False if the cursor is unknown to `owner` (another connection's,
  // expired, forgotten or never issued). Else the key to resume from, and
  // the cursor's parked iterator if it still has one (taken: a second Load
  // of the cursor resumes from the key alone).
  bool Load(uint64_t owner, uint64_t cursor, std::string* next_key,
            std::unique_ptr<Iterator>* iterator);
  // Drops every cursor of `owner`: its connection closed. Returns their
  // parked iterators (see DropExpired).
  std::vector<std::unique_ptr<Iterator>> DropOwner(uint64_t owner);
  // Drops cursors older than idle_ttl, and the iterators parked for longer
  // than parked_ttl or reading a version the database has moved on from
  // (Iterator::PinsOldVersion). Returns the iterators taken, for the caller
  // to destroy where it likes: destroying one may free the memtables it
  // kept and delete obsolete files, under RocksDB's mutex.
  std::vector<std::unique_ptr<Iterator>> DropExpired();
  // Drops every cursor and parked iterator: before the database closes.
  void Clear();
  size_t parked();
  size_t size();
  size_t bytes();

 private:
  struct Cursor {
    uint64_t owner;
    std::string next_key;
    std::unique_ptr<Iterator> iterator;  // may be null
    std::chrono::steady_clock::time_point saved;
  };
  using Map = std::map<uint64_t, Cursor>;  // by id: the oldest first
  // REQUIRES: mu_ held. Erases `it`, moving its iterator (if any) to *out
  // for the caller to free after unlocking.
  void Erase(Map::iterator it, std::vector<std::unique_ptr<Iterator>>* out)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ held. Moves into *out the parked iterators past the ttl,
  // and the oldest beyond `keep`.
  void ReleaseParked(std::chrono::steady_clock::time_point now, size_t keep,
                     std::vector<std::unique_ptr<Iterator>>* out)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  Map cursors_ GUARDED_BY(mu_);
  std::map<uint64_t, std::set<uint64_t>> by_owner_ GUARDED_BY(mu_);
  std::set<uint64_t> parked_ GUARDED_BY(mu_);  // cursors with an iterator
  size_t bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_CURSOR_TABLE_H_
