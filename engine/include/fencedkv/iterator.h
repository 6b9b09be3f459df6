// Copyright (c) fencedkv authors.
//
// An Iterator walks user keys in byte-wise order. Internal records (domain
// max tokens, tombstones that keep a deleted key's token, metadata) are never
// visible. An iterator reads a consistent snapshot taken when it is created.
//
// Not thread-safe: one iterator must not be used by several threads at once
// without external synchronization. It must be destroyed before its DB.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_ITERATOR_H_
#define FENCEDKV_INCLUDE_FENCEDKV_ITERATOR_H_

#include <string_view>

#include "fencedkv/status.h"
#include "fencedkv/token.h"

namespace fencedkv {

class Iterator {
 public:
  Iterator() = default;
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;
  virtual ~Iterator();

  // True iff positioned at a key/value pair.
  virtual bool Valid() const = 0;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  // Positions at the first key >= target.
  virtual void Seek(std::string_view target) = 0;
  // Positions at the last key <= target.
  virtual void SeekForPrev(std::string_view target) = 0;
  // REQUIRES: Valid()
  virtual void Next() = 0;
  // REQUIRES: Valid()
  virtual void Prev() = 0;
  // REQUIRES: Valid(). Views valid until the iterator moves.
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // REQUIRES: Valid(). The token of the write that produced this value.
  virtual Token token() const = 0;
  // OK unless an error (I/O, corruption) stopped the iteration.
  virtual Status status() const = 0;
  // True if the database has moved on from the version this iterator reads
  // (a memtable it reads was switched out or flushed since it was created,
  // or a file it reads was compacted away): the iterator keeps those
  // memtables' memory and those files until it is destroyed, while a new
  // iterator sought to the same key would read the current version. False
  // if it reads the current one, or cannot tell.
  virtual bool PinsOldVersion() const { return false; }
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_ITERATOR_H_
