// Copyright (c) fencedkv authors.
//
// The memtable behind Options::memtable == "hash": RocksDB's hash-linklist
// rep (an insert or a Get is a hash probe, no skiplist search), which also
// keeps a list of its entries in insertion order. Once the memtable is
// read-only (full, waiting for its flush), an iterator over it -- the
// flush's, or a scan's -- sorts that list once with std::sort instead of
// inserting every entry into a new skiplist, which is what the hash-linklist
// rep's own iterator does: under redis-benchmark SET -P 16 that skiplist
// build was about half of the server's CPU (perf: the flush thread's
// SkipList::Insert). An iterator over the memtable still being written is
// the hash-linklist rep's own.
//
// Thread-safety: as RocksDB requires of a MemTableRep without concurrent
// inserts (one writer at a time; readers and iterators from any thread).

#ifndef FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_
#define FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_

#include <cstddef>
#include <memory>

#include <rocksdb/memtablerep.h>

namespace fencedkv {

// A factory for the rep above, with `buckets` hash buckets. With `bytewise`
// (the column family's comparator is RocksDB's BytewiseComparator) the sort
// first compares 8 bytes of each key past the prefix all keys share, as one
// integer, and the comparator only breaks ties.
std::shared_ptr<rocksdb::MemTableRepFactory> NewSortedFlushHashRepFactory(
    size_t buckets, bool bytewise);

}  // namespace fencedkv

#endif  // FENCEDKV_DB_SORTED_FLUSH_MEMTABLE_H_
