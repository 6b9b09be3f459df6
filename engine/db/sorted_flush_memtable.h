// Copyright (c) fencedkv authors.
//
// The memtable behind Options::memtable == "hash": a hash index of the
// entries (an insert or a Get is a hash probe, no skiplist search; an
// insert reads nothing but its bucket) and a list of the entries in
// insertion order. Once the memtable is read-only (full, waiting for its
// flush), an iterator over it -- the flush's, or a scan's -- sorts that
// list once (a radix sort on 8-byte key windows, the comparator for ties).
// RocksDB's hash-linklist rep, which this replaced, built a new skiplist of
// every entry for each iterator: under redis-benchmark SET -P 16 that was
// about half of the server's CPU (perf: the flush thread's
// SkipList::Insert), and SCAN 0 over a full 64 MiB memtable took 2.3 s. An
// iterator over the memtable still being written sorts a copy of the list
// as it stands.
//
// Keys are equal only if their bytes are (the hash is of the bytes): true
// of every comparator fencedkv opens a database with.
//
// Thread-safety: as RocksDB requires of a MemTableRep without concurrent
// inserts (one writer at a time; readers and iterators from any thread).

#ifndef FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_
#define FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include <rocksdb/memtablerep.h>

namespace fencedkv {

// A factory for the rep above, with `buckets` hash buckets. With `bytewise`
// (the column family's comparator is RocksDB's BytewiseComparator) the sort
// compares 8 bytes of the keys at a time as one integer, most significant
// first, past the prefix the keys being ordered share; the comparator only
// breaks ties.
std::shared_ptr<rocksdb::MemTableRepFactory> NewSortedFlushHashRepFactory(
    size_t buckets, bool bytewise);

// Counts, for tests and diagnostics: read-only memtables whose entries were
// sorted (once each) and iterators over a memtable still being written
// (each sorts a copy), process-wide; and the entries this thread's Gets
// looked at.
struct SortedFlushCounts {
  uint64_t sorts = 0;
  uint64_t snapshot_sorts = 0;
  uint64_t get_steps = 0;
};
SortedFlushCounts GetSortedFlushCounts();

// Tests: every Get sorts its key's entries before handing them to RocksDB,
// as after an insert out of sequence order (which RocksDB never does).
void ForceSortedMemtableGetsForTesting(bool on);

// The hash of a user key that picks its bucket: SipHash-1-3 under a key
// made at random for each process.
uint64_t MemtableKeyHash(const char* key, size_t size);

// The buckets of a column family's newest memtable of this rep, for a
// writer that knows its keys before its write: it loads the buckets their
// inserts will write, so that their cache misses overlap instead of coming
// one key at a time inside RocksDB's insert. Only a hint: a memtable
// switched meanwhile makes it load lines nobody uses (a prefetch never
// faults, whatever the address).
class MemtableBuckets {
 public:
  void Prefetch(std::string_view user_key) const {
    void* const* buckets = buckets_.load(std::memory_order_relaxed);
    if (buckets == nullptr) return;
    const size_t mask = mask_.load(std::memory_order_relaxed);
    __builtin_prefetch(
        &buckets[MemtableKeyHash(user_key.data(), user_key.size()) & mask], 1);
  }
  // (The factory, as it makes the column family's memtable.)
  void Set(void* const* buckets, size_t mask) {
    // (The same mask for every memtable of one factory; atomic all the same,
    // as writers read it while another thread's write switches memtables.)
    mask_.store(mask, std::memory_order_relaxed);
    buckets_.store(buckets, std::memory_order_relaxed);
  }

 private:
  std::atomic<void* const*> buckets_{nullptr};
  std::atomic<size_t> mask_{0};
};
// Column family `cf_id`'s, if `factory` is one of
// NewSortedFlushHashRepFactory's (and cf_id < 16); else null. It lives as
// long as the factory.
const MemtableBuckets* GetMemtableBuckets(
    const rocksdb::MemTableRepFactory* factory, uint32_t cf_id);

}  // namespace fencedkv

#endif  // FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_
