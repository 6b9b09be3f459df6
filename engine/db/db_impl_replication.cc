// Copyright (c) fencedkv authors.
//
// Log shipping (fencedkv/replication.h): reading committed batches from
// RocksDB's WAL (GetUpdatesSince), applying them verbatim on a replica, and
// re-reading the fence state a replica's applied batches changed.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/transaction_log.h>
#include <rocksdb/write_batch.h>

#include "db/db_impl.h"
#include "db/error_recovery.h"
#include "db/fence_format.h"
#include "db/log_tail.h"
#include "db/rocksdb_options.h"
#include "db/sorted_flush_memtable.h"
#include "db/synced_marker.h"
#include "util/coding.h"

namespace fencedkv {

LogReader::~LogReader() = default;

uint32_t LogBatchCount(std::string_view data) {
  // A RocksDB batch: sequence:fixed64 count:fixed32 records...
  if (data.size() < 12) return 0;
  return DecodeFixed32(data.data() + 8);
}

namespace {

// A varint32 as RocksDB writes one (at most 5 bytes, at most 32 bits);
// advances *in. Stricter than RocksDB's reader, which drops the 5th byte's
// high bits: such an encoding is refused rather than read another way.
bool GetVarint32(std::string_view* in, uint32_t* value) {
  std::string_view probe = *in;
  uint64_t v;
  if (!GetVarint64(&probe, &v) || v > UINT32_MAX ||
      in->size() - probe.size() > 5) {
    return false;
  }
  *value = static_cast<uint32_t>(v);
  *in = probe;
  return true;
}
// A length-prefixed string (varint32 length, then the bytes); advances *in.
bool GetLengthPrefixed(std::string_view* in, std::string_view* out) {
  std::string_view probe = *in;
  uint32_t n;
  if (!GetVarint32(&probe, &n) || n > probe.size()) return false;
  *out = probe.substr(0, n);
  probe.remove_prefix(n);
  *in = probe;
  return true;
}

// RocksDB's record types a fencedkv primary writes (db/dbformat.h,
// ValueType).
constexpr char kDeletion = 0x0, kValue = 0x1, kLogData = 0x3, kCfDeletion = 0x4,
               kCfValue = 0x5;

// One record of a batch (`in` not empty): its type, column family, key
// and value (a Put's); advances *in when kRecord. A LogData record (the
// synced marker, synced_marker.h, is the only one fencedkv writes) is
// kLogData, its blob in *key, and advances *in: it takes no sequence
// number.
enum class Parsed {
  kRecord,
  kLogData,
  kBadColumnFamily,
  kUnknownType,
  kCutShort
};
Parsed NextRecord(std::string_view* in, char* type, uint32_t* cf,
                  std::string_view* key, std::string_view* value) {
  std::string_view probe = *in;
  *type = probe[0];
  probe.remove_prefix(1);
  *cf = 0;  // the default column family
  *value = std::string_view();
  if (*type == kLogData) {
    if (!GetLengthPrefixed(&probe, key)) return Parsed::kCutShort;
    *in = probe;
    return Parsed::kLogData;
  }
  if (*type == kCfValue || *type == kCfDeletion) {
    if (!GetVarint32(&probe, cf)) return Parsed::kBadColumnFamily;
  } else if (*type != kValue && *type != kDeletion) {
    return Parsed::kUnknownType;
  }
  const bool put = *type == kValue || *type == kCfValue;
  if (!GetLengthPrefixed(&probe, key) ||
      (put && !GetLengthPrefixed(&probe, value))) {
    return Parsed::kCutShort;
  }
  *in = probe;
  return Parsed::kRecord;
}

// `batch` without its first `skip` records (each took one sequence
// number): the batch a reader that already has those gets. False if a
// record does not parse.
bool DropLeadingRecords(std::string_view batch, uint64_t skip,
                        std::string* out) {
  const uint64_t first = DecodeFixed64(batch.data());
  const uint32_t count = DecodeFixed32(batch.data() + 8);
  if (skip >= count) return false;
  std::string_view in = batch.substr(12);
  for (uint64_t i = 0; i < skip;) {
    char type;
    uint32_t cf;
    std::string_view key, value;
    if (in.empty()) return false;
    const Parsed p = NextRecord(&in, &type, &cf, &key, &value);
    if (p == Parsed::kRecord) {
      ++i;
    } else if (p != Parsed::kLogData) {  // (a LogData takes no number)
      return false;
    }
  }
  out->clear();
  char header[12];
  EncodeFixed64(header, first + skip);
  EncodeFixed32(header + 8, static_cast<uint32_t>(count - skip));
  out->append(header, sizeof(header));
  out->append(in.data(), in.size());
  return true;
}

// `batch` without the synced markers its records hold (synced_marker.h:
// a log record RocksDB merged from several synced writers holds one per
// writer) into *out: what log readers ship. False if there are none or a
// record does not parse (*parsed false); *out is then not to be used.
bool StripSyncedMarkers(std::string_view batch, std::string* out,
                        bool* parsed) {
  *parsed = true;
  if (batch.size() < 12 ||
      batch.find(kSyncedMarker) == std::string_view::npos) {
    return false;
  }
  std::string_view in = batch.substr(12);
  out->assign(batch.data(), 12);
  bool found = false;
  while (!in.empty()) {
    const std::string_view at = in;
    char type;
    uint32_t cf;
    std::string_view key, value;
    const Parsed p = NextRecord(&in, &type, &cf, &key, &value);
    if (p != Parsed::kRecord && p != Parsed::kLogData) {
      *parsed = false;
      return false;
    }
    if (p == Parsed::kLogData && key == kSyncedMarker) {
      found = true;
    } else {
      out->append(at.data(), at.size() - in.size());
    }
  }
  return found;
}

// How long a reader waits for a batch the tail covers but does not hold
// yet (its write published it and is on its way to Append): per call, and
// in all before it restarts the tail and reads the WAL instead (numbers a
// failed WAL write took, which RocksDB skips: see LogTail).
constexpr std::chrono::microseconds kTailWait(1000);
constexpr std::chrono::milliseconds kTailGiveUp(200);

class LogReaderImpl final : public LogReader {
 public:
  LogReaderImpl(rocksdb::DB* db, LogTail* tail, uint64_t next)
      : db_(db), tail_(tail), next_(next) {
    if (tail_ != nullptr) tail_->AddReader();
  }
  ~LogReaderImpl() override {
    if (tail_ != nullptr) tail_->RemoveReader();
  }

  bool Next(uint64_t* first_sequence, std::string_view* data) override {
    if (!status_.ok()) return false;
    if (next_ > db_->GetLatestSequenceNumber()) return false;  // caught up
    if (tail_ != nullptr && !FromTail(first_sequence, data)) {
      return false;  // pending: not yet
    }
    if (tail_batch_ != nullptr) return true;
    return FromWal(first_sequence, data);
  }

  Status status() const override { return status_; }

 private:
  // True with tail_batch_ set: the tail's batch at next_. True with it
  // null: read the WAL. False: the tail covers next_ but its batch is not
  // there yet.
  bool FromTail(uint64_t* first_sequence, std::string_view* data) {
    tail_batch_.reset();
    std::shared_ptr<const std::string> batch;
    switch (tail_->Find(next_, kTailWait, &batch)) {
      case LogTail::Found::kBatch:
        pending_at_ = 0;
        iter_.reset();  // (its position is behind now)
        wal_batch_.reset();
        tail_batch_ = std::move(batch);
        *first_sequence = next_;
        next_ += LogBatchCount(*tail_batch_);
        *data = std::string_view(*tail_batch_);
        return true;
      case LogTail::Found::kPending:
        if (pending_at_ != next_) {
          pending_at_ = next_;
          pending_since_ = std::chrono::steady_clock::now();
        }
        if (std::chrono::steady_clock::now() - pending_since_ < kTailGiveUp) {
          return false;
        }
        pending_at_ = 0;
        // Not coming: numbers a write took without appending them (RocksDB
        // skips those of a failed WAL write). Restart the tail past them,
        // so that no other reader waits for them too, and ask the WAL,
        // which has the batch or says the log does not hold it.
        tail_->Reset();
        return true;
      case LogTail::Found::kNotHeld:
        break;
    }
    pending_at_ = 0;
    return true;
  }

  bool FromWal(uint64_t* first_sequence, std::string_view* data) {
    // (A loop: it skips the records that ship nothing.)
    for (;;) {
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
      wal_batch_ = std::move(batch.writeBatchPtr);
      if (wal_batch_->Count() == 0) {
        // A record of no sequence number (the WAL syncer's idle sync,
        // DBImpl::IdleSync: the synced marker alone) ships nothing. In its
        // place it carries next_, and the batch at next_ follows it. A seek
        // lands on one carrying a later number when the numbers before it
        // are gone: that is a gap (skipping it and seeking again found the
        // same record, for ever: a review).
        if (batch.sequence == next_) continue;
        status_ = Status::NotFound(
            "the log does not hold a batch starting at sequence " +
                std::to_string(next_),
            "the nearest record starts at " + std::to_string(batch.sequence));
        return false;
      }
      std::string_view rep(wal_batch_->Data());
      uint64_t first = batch.sequence;
      if (first < next_ && next_ < first + wal_batch_->Count()) {
        // Inside a record: several writers' batches RocksDB wrote as one,
        // the first of which this reader had from the tail.
        if (!DropLeadingRecords(rep, next_ - first, &cut_)) {
          status_ = Status::Corruption("a log record at sequence " +
                                       std::to_string(first) +
                                       " does not parse as fencedkv's");
          return false;
        }
        rep = cut_;
        first = next_;
      }
      if (first != next_) {
        // Later: the batches in between are gone (their WAL was deleted).
        // Earlier: `next_` is inside a batch, not at a batch's first record.
        status_ = Status::NotFound(
            "the log does not hold a batch starting at sequence " +
                std::to_string(next_),
            "the nearest batch starts at " + std::to_string(first));
        return false;
      }
      // Without the synced markers: the batches replicas have always taken.
      bool parsed = true;
      if (StripSyncedMarkers(rep, &stripped_, &parsed)) rep = stripped_;
      if (!parsed) {
        status_ = Status::Corruption("a log record at sequence " +
                                     std::to_string(first) +
                                     " does not parse as fencedkv's");
        return false;
      }
      next_ = first + LogBatchCount(rep);
      *first_sequence = first;
      *data = rep;
      return true;
    }
  }

  rocksdb::DB* const db_;
  LogTail* const tail_;  // null: the WAL only
  uint64_t next_;        // the first sequence of the next batch to return
  // On the batch last returned from the WAL, or past the end of the log
  // it had read; null while reading the tail.
  std::unique_ptr<rocksdb::TransactionLogIterator> iter_;
  // The batch last returned (one of these).
  std::unique_ptr<rocksdb::WriteBatch> wal_batch_;
  std::shared_ptr<const std::string> tail_batch_;
  std::string cut_;
  std::string stripped_;  // a WAL batch without its synced markers
  // The sequence the tail has had pending since pending_since_ (0: none; a
  // batch's sequence is at least 1).
  uint64_t pending_at_ = 0;
  std::chrono::steady_clock::time_point pending_since_;
  Status status_;
};

// A meta key made of `prefix` and a non-empty name (hwm/<stripe>,
// lease/<name>).
bool IsNamedUnder(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && key.substr(0, prefix.size()) == prefix;
}

// What ApplyLogBatch lets in: the records a fencedkv primary writes (Puts
// and Deletes into the three column families), each well formed. A batch
// RocksDB cannot insert into its memtables fails only after it is in the
// WAL, and leaves a background error that stops every later write (and a
// bad record that may break the next open); a record that parses in RocksDB
// but not as fencedkv's (a meta record a reopen refuses) is no better. So a
// bad frame is refused whole, before anything is written.
//
// The batch is walked here, not with RocksDB's WriteBatch::Iterate: that
// walk asserts when a handler refuses a record it parses but fencedkv never
// writes (a transaction marker, a no-op; an empty commit timestamp even
// before that), and Debian's librocksdb is built with its assertions: one
// such frame aborted the replica. Only the four record types a primary
// writes get past this walk (a Put or a Delete, into the default column
// family or another), so RocksDB's own walk, when it inserts the batch,
// meets nothing else.
class LogBatchCheck {
 public:
  LogBatchCheck(uint32_t data, uint32_t fence, uint32_t meta,
                std::string domain, char mode, bool per_key)
      : data_(data),
        fence_(fence),
        meta_(meta),
        domain_(std::move(domain)),
        mode_(mode),
        per_key_(per_key) {}

  // The user keys the batch writes (views into it), for the value cache.
  const std::vector<std::string_view>& data_keys() const { return data_keys_; }

  // The batch (sequence:fixed64 count:fixed32, then its records), each
  // record checked in turn; as many records as the header counts.
  rocksdb::Status Walk(std::string_view batch) {
    if (batch.size() < 12) {
      return rocksdb::Status::Corruption("a batch of fewer than 12 bytes");
    }
    const uint32_t count = DecodeFixed32(batch.data() + 8);
    std::string_view in = batch.substr(12);
    uint64_t found = 0;
    while (!in.empty()) {
      char type;
      uint32_t cf;
      std::string_view key, value;
      switch (NextRecord(&in, &type, &cf, &key, &value)) {
        case Parsed::kRecord:
          break;
        case Parsed::kLogData:
          // The synced marker a replica adds to a batch it applies with
          // sync; a primary's readers strip theirs. Nothing else.
          if (key != kSyncedMarker) {
            return rocksdb::Status::Corruption(
                "record " + std::to_string(found) +
                " is log data fencedkv never writes");
          }
          continue;
        case Parsed::kBadColumnFamily:
          return rocksdb::Status::Corruption("record " + std::to_string(found) +
                                             ": a bad column family id");
        case Parsed::kUnknownType:
          return rocksdb::Status::Corruption(
              "record " + std::to_string(found) + " is of type " +
              std::to_string(static_cast<unsigned char>(type)) +
              ", which fencedkv never writes");
        case Parsed::kCutShort:
          return rocksdb::Status::Corruption("record " + std::to_string(found) +
                                             " is cut short");
      }
      const bool put = type == kValue || type == kCfValue;
      rocksdb::Status s = put ? Put(cf, key, value) : Delete(cf, key);
      if (!s.ok()) return s;
      ++found;
    }
    if (found != count) {
      return rocksdb::Status::Corruption(
          "the batch counts " + std::to_string(count) + " records and holds " +
          std::to_string(found));
    }
    return rocksdb::Status::OK();
  }

 private:
  rocksdb::Status Put(uint32_t cf, std::string_view key, std::string_view v) {
    if (cf == data_) {
      format::DataRecord rec;
      if (!format::DecodeDataRecord(v, &rec)) {
        return Bad("a data record that does not parse", key);
      }
      data_keys_.push_back(key);
      return rocksdb::Status::OK();
    }
    Token token;
    if (cf == fence_) {
      if (!format::DecodeToken(v, &token)) {
        return Bad("a fence max that is not 8 bytes", key);
      }
      return rocksdb::Status::OK();
    }
    if (cf == meta_) return CheckMeta(key, v);
    return Bad("a record of an unknown column family " + std::to_string(cf),
               key);
  }
  // The deletes a primary writes: data keys, with a domain function other
  // than `key` (there a delete is a tombstone record that keeps the max);
  // meta lease records (release, reclaim); the meta empty key (the recovery
  // sentinel, the sync marker); the version-1 mark (the upgrade). Deleting
  // a max, the floor, the lease counter or the configuration would undo a
  // fence or break the next open.
  rocksdb::Status Delete(uint32_t cf, std::string_view k) {
    if (cf == data_) {
      if (!per_key_) {
        data_keys_.push_back(k);
        return rocksdb::Status::OK();
      }
      return Bad(
          "a data delete, which drops a key's max (the key domain "
          "writes a tombstone record instead)",
          k);
    }
    if (cf == meta_ && (k.empty() || k == format::kMetaLegacyHighWaterMark ||
                        IsNamedUnder(k, format::kMetaLeasePrefix))) {
      return rocksdb::Status::OK();
    }
    return Bad("a delete fencedkv never writes (column family " +
                   std::to_string(cf) + ")",
               k);
  }
  rocksdb::Status CheckMeta(std::string_view key, std::string_view v) {
    Token token;
    format::LeaseRecord lease;
    bool ok = false;
    if (key == format::kMetaFenceFloor || key == format::kMetaLeaseCounter ||
        IsNamedUnder(key, format::kMetaHighWaterMarkPrefix)) {
      ok = format::DecodeToken(v, &token);
    } else if (IsNamedUnder(key, format::kMetaLeasePrefix)) {
      ok = format::DecodeLeaseRecord(v, &lease);
    } else if (key == format::kMetaFormatVersion) {
      ok = v.size() == 4 && DecodeFixed32(v.data()) == format::kFormatVersion;
    } else if (key == format::kMetaFenceDomain) {
      ok = v == domain_;  // (the handshake compares them too)
    } else if (key == format::kMetaFenceMode) {
      ok = v.size() == 1 && v[0] == mode_;
    }
    if (!ok) {
      return Bad("a meta record this database would not open with", key);
    }
    return rocksdb::Status::OK();
  }
  static rocksdb::Status Bad(const std::string& what, std::string_view key) {
    return rocksdb::Status::Corruption(what + " (key \"" +
                                       EscapeBytes(key.substr(0, 64)) + "\")");
  }

  const uint32_t data_, fence_, meta_;
  const std::string domain_;
  const char mode_;
  const bool per_key_;
  std::vector<std::string_view> data_keys_;
};

}  // namespace

uint64_t DBImpl::GetLatestSequenceNumber() {
  return db_->GetLatestSequenceNumber();
}

Status DBImpl::NewLogReader(uint64_t after_sequence,
                            std::unique_ptr<LogReader>* reader) {
  *reader = std::make_unique<LogReaderImpl>(db_.get(), log_tail_.get(),
                                            after_sequence + 1);
  return Status::OK();
}

void DBImpl::SetLogListener(std::function<void()> listener) {
  recovery_->SetWriteListener(std::move(listener));
}

Status DBImpl::ApplyLogBatch(const WriteOptions& options,
                             uint64_t first_sequence, std::string_view data) {
  // RocksDB 7.8's pipelined path numbers a group whose WAL write failed
  // anyway (rocksdb_options.cc): a full disk would leave a gap, and the
  // replica's next batch would land past the primary's numbers.
  if (options_.pipelined_write && !options_.log_replica) {
    return Status::NotSupported(
        "log batches are applied only by a database opened without "
        "pipelined writes",
        "open it with Options::log_replica or Options::pipelined_write = "
        "false: the pipelined path numbers a failed write anyway");
  }
  if (LogBatchCount(data) == 0) {
    return Status::InvalidArgument("not a log batch (" +
                                   std::to_string(data.size()) +
                                   " bytes, no record)");
  }
  const uint64_t expected = db_->GetLatestSequenceNumber() + 1;
  if (first_sequence != expected) {
    return Status::InvalidArgument(
        "log batch at sequence " + std::to_string(first_sequence) +
            ", expected " + std::to_string(expected),
        first_sequence > expected ? "a gap: batches are missing"
                                  : "a repeat: already applied");
  }
  // Synced when asked, or when the WAL syncer says a sync is due
  // (Options::wal_sync_interval_ms; a replica writes no record of its
  // own while batches come). Applied with sync, it carries this replica's
  // synced marker (synced_marker.h): its WAL is read by its own open's scan.
  const bool sync =
      options.sync || sync_due_.exchange(false, std::memory_order_acq_rel);
  rocksdb::WriteBatch batch{sync && !LeadsWithSyncedMarker(data)
                                ? WithSyncedMarker(data)
                                : std::string(data)};
  LogBatchCheck check(data_cf_->GetID(), fence_cf_->GetID(), meta_cf_->GetID(),
                      spec_.ToString(), static_cast<char>(mode_),
                      spec_.is_per_key());
  // (The keys it keeps are views into the batch's own copy.)
  const rocksdb::Status checked = check.Walk(batch.Data());
  if (!checked.ok()) {
    return Status::Corruption("log batch at sequence " +
                                  std::to_string(first_sequence) +
                                  " refused, nothing applied",
                              checked.ToString());
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  // The value cache's keys out before the batch is visible (a replica has
  // no other writer: nothing else writes these keys meanwhile). Their new
  // values are left to the next reads.
  if (values_ != nullptr) {
    // The keys' stripes are spread over the cache: load their lines
    // together rather than miss on each in turn (as BeginValueWrites does).
    for (std::string_view key : check.data_keys()) values_->Prefetch(key);
    for (std::string_view key : check.data_keys()) values_->BeginWrite(key);
  }
  // Their memtable buckets load while the batch is written to the WAL.
  if (data_buckets_ != nullptr) {
    for (std::string_view key : check.data_keys()) data_buckets_->Prefetch(key);
  }
  rocksdb::Status rs = db_->Write(wo, &batch);
  // Numbers taken by a write the tail does not hold (a promoted replica's
  // readers read these batches from the WAL).
  if (log_tail_ != nullptr) log_tail_->Reset();
  if (values_ != nullptr) {
    for (std::string_view key : check.data_keys()) {
      values_->EndWrite(key, /*keep=*/false, nullptr);
    }
  }
  if (!rs.ok()) {
    // (A sync it owed is still due.)
    if (sync && !options.sync) {
      sync_due_.store(true, std::memory_order_release);
    }
    return FromRocksDB(rs);
  }
  if (sync) NoteSynced(batch);
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
