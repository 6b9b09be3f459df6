// Copyright (c) fencedkv authors.
//
// The memtable behind Options::memtable == "hash": RocksDB's hash-linklist
// rep (an insert or a Get is a hash probe, no skiplist search), which also
// keeps a list of its entries in insertion order. Once the memtable is
// read-only (full, waiting for its flush), an iterator over it -- the
// flush's, or a scan's -- sorts that list once (a radix sort on 8-byte key
// windows, the comparator for ties) instead of inserting every entry into a
// new skiplist, which is what the hash-linklist rep's own iterator does:
// under redis-benchmark SET -P 16 that skiplist
// build was about half of the server's CPU (perf: the flush thread's
// SkipList::Insert). An iterator over the memtable still being written
// sorts a copy of the list as it stands (the hash-linklist rep's own
// iterator built a skiplist of every entry there too: SCAN 0 over a full
// 64 MiB memtable took 2.3 s).
//
// Thread-safety: as RocksDB requires of a MemTableRep without concurrent
// inserts (one writer at a time; readers and iterators from any thread).

#ifndef FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_
#define FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include <rocksdb/memtablerep.h>

namespace fencedkv {

// A factory for the rep above, with `buckets` hash buckets. With `bytewise`
// (the column family's comparator is RocksDB's BytewiseComparator) the sort
// compares 8 bytes of the keys at a time as one integer, most significant
// first, past the prefix the keys being ordered share; the comparator only
// breaks ties.
std::shared_ptr<rocksdb::MemTableRepFactory> NewSortedFlushHashRepFactory(
    size_t buckets, bool bytewise);

// Process-wide counts, for tests and diagnostics: read-only memtables whose
// entries were sorted (the fast path), iterators that had to use the
// hash-linklist rep's own (an entry was not recorded; never expected), and
// iterators over a memtable still being written (each sorts a copy).
struct SortedFlushCounts {
  uint64_t sorts = 0;
  uint64_t fallbacks = 0;
  uint64_t snapshot_sorts = 0;
};
SortedFlushCounts GetSortedFlushCounts();

}  // namespace fencedkv

#endif  // FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_
