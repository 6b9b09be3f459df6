// Copyright (c) fencedkv authors.
//
// Log shipping: a primary's committed write batches, in commit order, as
// opaque byte strings that a replica applies verbatim. A batch holds the
// data records and the fence and meta records (raised maxima, high-water
// marks, the floor, lease records) of one write together, so a replica that
// has applied the batches up to sequence S has exactly the primary's data
// AND fence state at S.
//
// Sequence numbers are RocksDB's: a batch of n records holds sequences
// first .. first + n - 1, and DB::GetLatestSequenceNumber() is the last
// sequence written. A replica that starts from a copy of the primary (a
// Checkpoint) and applies every later batch in order keeps the primary's
// numbering, so "applied up to S" needs no other bookkeeping: it is the
// replica's own latest sequence, persisted in its WAL like any write.
//
// A replica must write nothing of its own (no lease service, no fenced
// writes): that would take sequence numbers the primary's batches need.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_REPLICATION_H_
#define FENCEDKV_INCLUDE_FENCEDKV_REPLICATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fencedkv/status.h"

namespace fencedkv {

// Reads committed batches from a position of the primary's log.
// Not thread-safe; one reader per thread. Must be destroyed before its DB.
class LogReader {
 public:
  LogReader() = default;
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;
  virtual ~LogReader();

  // Moves to the next committed batch. True and the batch in *first_sequence
  // / *data (*data is valid until the next call) if there is one; false if
  // the reader has caught up with the log (call again later: new batches
  // show up) or on an error (then status() says which; e.g. NotFound when
  // the log no longer holds the next batch: the caller must copy the whole
  // database instead).
  virtual bool Next(uint64_t* first_sequence, std::string_view* data) = 0;
  virtual Status status() const = 0;
};

// The number of records (sequence numbers) a batch holds, from its bytes;
// 0 if `data` is not a batch.
uint32_t LogBatchCount(std::string_view data);

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_REPLICATION_H_
