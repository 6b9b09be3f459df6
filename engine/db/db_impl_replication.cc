// Copyright (c) fencedkv authors.
//
// Log shipping (fencedkv/replication.h): reading committed batches from
// RocksDB's WAL (GetUpdatesSince), applying them verbatim on a replica, and
// re-reading the fence state a replica's applied batches changed.

#include <rocksdb/transaction_log.h>
#include <rocksdb/write_batch.h>

#include "db/db_impl.h"
#include "db/rocksdb_options.h"
#include "util/coding.h"

namespace fencedkv {

LogReader::~LogReader() = default;

uint32_t LogBatchCount(std::string_view data) {
  // A RocksDB batch: sequence:fixed64 count:fixed32 records...
  if (data.size() < 12) return 0;
  return DecodeFixed32(data.data() + 8);
}

namespace {

class LogReaderImpl final : public LogReader {
 public:
  LogReaderImpl(rocksdb::DB* db, uint64_t next) : db_(db), next_(next) {}

  bool Next(uint64_t* first_sequence, std::string_view* data) override {
    if (!status_.ok()) return false;
    if (next_ > db_->GetLatestSequenceNumber()) return false;  // caught up
    if (iter_ != nullptr) {
      // On the batch last returned, or at the end of the log as it was when
      // the reader caught up: either way Next() reads on, including what was
      // appended since (a new iterator would first re-read the current WAL
      // file from its start: milliseconds per call on a full file).
      iter_->Next();
      if (!iter_->Valid()) {
        rocksdb::Status rs = iter_->status();
        iter_.reset();  // TryAgain: the tail is in a newer WAL file
        if (!rs.ok() && !rs.IsTryAgain()) {
          status_ = FromRocksDB(rs);
          return false;
        }
      }
    }
    if (iter_ == nullptr) {
      rocksdb::Status rs = db_->GetUpdatesSince(next_, &iter_);
      if (!rs.ok() || !iter_->Valid()) {
        if (rs.ok()) rs = iter_->status();
        iter_.reset();
        status_ = Status::NotFound(
            "the log no longer holds sequence " + std::to_string(next_),
            rs.ToString());
        return false;
      }
    }
    rocksdb::BatchResult batch = iter_->GetBatch();
    if (batch.sequence != next_) {
      // Later: the batches in between are gone (their WAL was deleted).
      // Earlier: `next_` is inside a batch, not at a batch's first record.
      status_ = Status::NotFound(
          "the log does not hold a batch starting at sequence " +
              std::to_string(next_),
          "the nearest batch starts at " + std::to_string(batch.sequence));
      return false;
    }
    batch_ = std::move(batch.writeBatchPtr);
    next_ = batch.sequence + batch_->Count();
    *first_sequence = batch.sequence;
    *data = std::string_view(batch_->Data());
    return true;
  }

  Status status() const override { return status_; }

 private:
  rocksdb::DB* const db_;
  uint64_t next_;  // the first sequence of the next batch to return
  // On the batch last returned, or past the end of the log it had read.
  std::unique_ptr<rocksdb::TransactionLogIterator> iter_;
  std::unique_ptr<rocksdb::WriteBatch> batch_;
  Status status_;
};

}  // namespace

uint64_t DBImpl::GetLatestSequenceNumber() {
  return db_->GetLatestSequenceNumber();
}

Status DBImpl::NewLogReader(uint64_t after_sequence,
                            std::unique_ptr<LogReader>* reader) {
  *reader = std::make_unique<LogReaderImpl>(db_.get(), after_sequence + 1);
  return Status::OK();
}

Status DBImpl::ApplyLogBatch(const WriteOptions& options,
                             uint64_t first_sequence, std::string_view data) {
  if (LogBatchCount(data) == 0) {
    return Status::InvalidArgument("not a log batch (",
                                   std::to_string(data.size()) + " bytes)");
  }
  const uint64_t expected = db_->GetLatestSequenceNumber() + 1;
  if (first_sequence != expected) {
    return Status::InvalidArgument(
        "log batch at sequence " + std::to_string(first_sequence) +
            ", expected " + std::to_string(expected),
        first_sequence > expected ? "a gap: batches are missing"
                                  : "a repeat: already applied");
  }
  rocksdb::WriteBatch batch{std::string(data)};
  rocksdb::WriteOptions wo;
  wo.sync = options.sync;
  rocksdb::Status rs = db_->Write(wo, &batch);
  if (!rs.ok()) return FromRocksDB(rs);
  // (A concurrent writer would have broken the numbering: say so.)
  const uint64_t now = db_->GetLatestSequenceNumber();
  if (now != first_sequence + batch.Count() - 1) {
    return Status::Corruption(
        "log batch applied at another sequence than the primary's",
        "a replica must have no other writer");
  }
  return Status::OK();
}

Status DBImpl::ReloadFenceState() {
  table_->LockAll();
  StoredConfig stored;
  Status s =
      ReadStoredConfig(db_.get(), {data_cf_, fence_cf_, meta_cf_}, &stored);
  if (s.ok() && !stored.has_version) {
    s = Status::Corruption("the format_version record disappeared");
  }
  if (s.ok()) {
    table_->Reset(stored.hwm);
    hwm_.store(stored.hwm, std::memory_order_release);
    floor_.store(stored.floor, std::memory_order_release);
  }
  table_->UnlockAll();
  return s;
}

}  // namespace fencedkv
