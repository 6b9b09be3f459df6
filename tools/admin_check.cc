// Copyright (c) fencedkv authors.
//
// check: reads everything and verifies the store's invariants, one class
// after another, stopping at the first class with a violation:
//   wal       no intact write in the WAL past where RocksDB's recovery
//             stops (at damage: wal_scan.h), and nothing missing that the
//             SYNCED stamp says was synced (a log file gone:
//             synced_stamp.h)
//   checksum  RocksDB's block checksums of every SST file (SstFileReader::
//             VerifyChecksum, through the descriptors the view holds)
//   meta      format_version, fence_domain, fence_mode, fence_floor present
//             and valid; lease_counter and hwm/XXXX records valid; no
//             record this build does not know
//   decode    every data, fence, high-water-mark and lease record decodes
//   hwm       every domain max (and data token) <= the high-water mark, the
//             largest hwm/XXXX record (a domain's stripe is a run-time
//             hash: the largest record bounds them all)
//   domain    (domain functions other than "key") every data record's token
//             <= its domain's max, unless the floor subsumes it (compaction
//             may have dropped that domain record: fence_gc_filter)
//   lease     every lease token <= lease_counter
//   replication  NODE_ID and REPLICATION, if there, parse as the server
//             reads them at start (it refuses to start otherwise)
// Exit 0 if all hold; 2 (kExitDamaged) naming the class otherwise; 1 if
// the directory cannot be read as a fencedkv database at all.

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "admin_tool.h"
#include "db/fence_check.h"
#include "db/fence_format.h"
#include "db/read_only_store.h"
#include "repl_state.h"

namespace fencedkv {
namespace admin {

namespace {

constexpr size_t kShownViolations = 10;

// One class of invariants: its violations (the first few kept) and the
// summary of what held.
struct Phase {
  explicit Phase(const char* n) : name(n) {}
  void Add(std::string violation) {
    if (shown.size() < kShownViolations) shown.push_back(std::move(violation));
    ++count;
  }
  const char* name;
  std::vector<std::string> shown;
  size_t count = 0;
  std::string summary;
};

bool IsHwmKey(std::string_view key) {
  const auto& prefix = format::kMetaHighWaterMarkPrefix;
  if (key.size() != prefix.size() + 4 ||
      key.substr(0, prefix.size()) != prefix) {
    return false;
  }
  for (char c : key.substr(prefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsKnownMetaKey(std::string_view key, uint32_t version) {
  for (std::string_view k :
       {format::kMetaFormatVersion, format::kMetaFenceDomain,
        format::kMetaFenceMode, format::kMetaFenceFloor,
        format::kMetaLeaseCounter}) {
    if (key == k) return true;
  }
  if (key.substr(0, format::kMetaLeasePrefix.size()) ==
      format::kMetaLeasePrefix) {
    return true;
  }
  if (version == format::kFormatVersionMergedHwm) {
    return key == format::kMetaLegacyHighWaterMark;
  }
  return key.substr(0, format::kMetaHighWaterMarkPrefix.size()) ==
         format::kMetaHighWaterMarkPrefix;
}

class CheckCommand : public AdminCommand {
 public:
  const char* Name() const override { return "check"; }
  void Help(std::string* out) const override {
    *out +=
        "  check\n"
        "      read everything and verify the invariants, in this order: wal "
        "(no intact write past\n      damage in the WAL, none synced "
        "missing), checksum (RocksDB's block checksums),\n      meta "
        "(records present and valid), decode (every record), hwm (every "
        "max <= the\n      high-water mark), domain (data tokens <= their "
        "domain's max), lease (lease tokens\n      <= the lease counter), "
        "replication (NODE_ID and REPLICATION parse as the server\n"
        "      reads them). Stops at the first class violated: exit 2\n";
  }

  ExecResult DoCommand(const std::vector<std::string>& args,
                       FILE* out) override {
    ExecResult r = ExpectArgs(args, 0, "no argument");
    if (r.code != kExitOk) return r;
    // Beside a running server, a compaction may delete an SST file the
    // read-only view lists. RocksDB's VerifyChecksum opened every file
    // again by name, and a deleted one failed the check as damage (27 of
    // 60 checks under a write load with small memtables; 39 of 150 with a
    // single try). The checksum class now reads each file through the
    // descriptor the view's open holds (VerifyTableChecksums): 0
    // of 200. What remains is the open itself meeting a file deleted while
    // it reads the manifest (2 of 200): retried on a fresh view, as the
    // other verbs do; only the last attempt's output is printed.
    for (int attempt = 1;; ++attempt) {
      CheckCommand run;
      std::string text;
      r = run.Once(&text);
      if (r.code == kExitOk || attempt == kFreshViewAttempts ||
          !VanishedUnderRunningServer(r.message + "\n" + text)) {
        Print(out, text);
        return r;
      }
      PauseBeforeAttempt(attempt);
    }
  }

 private:
  // One check on a fresh read-only view; its output goes to *text.
  ExecResult Once(std::string* text) {
    char* buf = nullptr;
    size_t len = 0;
    FILE* out = open_memstream(&buf, &len);
    if (out == nullptr) return ExecResult::Error("open_memstream failed");
    ExecResult r = Run(out);
    std::fclose(out);
    text->assign(buf, len);
    std::free(buf);
    return r;
  }

  ExecResult Run(FILE* out) {
    out_ = out;
    std::unique_ptr<ReadOnlyStore> store;
    Status s = ReadOnlyStore::Open(FLAGS_db, &store);
    if (!s.ok() && !s.IsCorruption()) return ExecResult::FromStatus(s);
    Print(out, "check " + FLAGS_db + "\n");
    if (s.IsCorruption()) {
      // RocksDB could not even open the files: damage too.
      Phase open("open");
      open.Add(s.ToString());
      return Report(open);
    }
    store_ = store.get();

    // The WAL first: if RocksDB's recovery stopped at damage, everything
    // below checks a store without the writes after it.
    Phase wal("wal");
    if (!store_->wal_status().ok()) wal.Add(store_->wal_status().ToString());
    wal.summary =
        "no intact write past where recovery stops, no synced write missing";
    if (wal.count > 0) return Report(wal);
    Phase checksum("checksum");
    CheckChecksums(&checksum);
    if (checksum.count > 0) return Report(checksum);
    Phase meta("meta");
    s = CheckMeta(&meta);
    if (!s.ok()) return ExecResult::FromStatus(s);
    if (meta.count > 0) return Report(meta);
    Phase decode("decode");
    s = ReadEverything(&decode);
    if (!s.ok()) return ExecResult::FromStatus(s);
    if (decode.count > 0) return Report(decode);
    Phase& hwm = above_hwm_;
    hwm.summary = "largest max " + std::to_string(largest_) +
                  " <= high-water mark " + std::to_string(store_->config().hwm);
    if (hwm.count > 0) return Report(hwm);
    Phase domain("domain");
    s = CheckDomains(&domain);
    if (!s.ok()) return ExecResult::FromStatus(s);
    if (domain.count > 0) return Report(domain);
    Phase lease("lease");
    CheckLeases(&lease);
    if (lease.count > 0) return Report(lease);
    Phase replication("replication");
    CheckReplicationFiles(&replication);
    if (replication.count > 0) return Report(replication);
    for (const Phase* p : {&wal, &checksum, &meta, &decode, &hwm, &domain,
                           &lease, &replication}) {
      Print(out, std::string(p->name) + ": OK (" + p->summary + ")\n");
    }
    Print(out, "check: OK\n");
    return ExecResult::Ok();
  }

  // Prints the violated class and what held before it; exit 2.
  ExecResult Report(const Phase& failed) {
    Print(out_, std::string(failed.name) + ": FAILED, " +
                    std::to_string(failed.count) + " violation(s)\n");
    for (const std::string& v : failed.shown) Print(out_, "  " + v + "\n");
    if (failed.count > failed.shown.size()) {
      Print(out_, "  ... and " +
                      std::to_string(failed.count - failed.shown.size()) +
                      " more\n");
    }
    Print(out_, "check: FAILED (" + std::string(failed.name) + ")\n");
    return {kExitDamaged, std::string(failed.name) + ": " + failed.shown[0]};
  }

  // The files the server reads at start, read the same way.
  void CheckReplicationFiles(Phase* phase) {
    std::string node;
    Status s = server::ReadNodeId(FLAGS_db, &node);
    if (!s.ok()) phase->Add("NODE_ID: " + s.ToString());
    server::ReplState state;
    Status r = server::ReplState::Load(FLAGS_db, &state);
    if (!r.ok()) phase->Add("REPLICATION: " + r.ToString());
    phase->summary =
        "node id " + (node.empty() ? std::string("-") : node) +
        (r.ok()
             ? ", history " +
                   (state.history.empty() ? std::string("-") : state.history) +
                   ", max_epoch " + std::to_string(state.max_epoch)
             : std::string());
  }

  void CheckChecksums(Phase* phase) {
    size_t files = 0;
    uint64_t bytes = 0;
    store_->VerifyTableChecksums(
        [phase](std::string violation) { phase->Add(std::move(violation)); },
        &files, &bytes);
    phase->summary = std::to_string(files) + " SST files, " +
                     std::to_string(bytes) + " bytes verified";
  }

  Status CheckMeta(Phase* phase) {
    std::vector<std::string> problems;
    Status s = store_->ReadConfig(&problems);
    if (!s.ok() && !s.IsCorruption()) return s;
    for (auto& p : problems) phase->Add(std::move(p));
    const StoreConfig& c = store_->config();
    auto it = store_->NewIterator(store_->meta());
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string key = it->key().ToString();
      if (!IsKnownMetaKey(key, c.format_version)) {
        phase->Add("unknown meta record \"" + EscapeBytes(key) + "\"");
      }
    }
    if (!it->status().ok()) return ReadError("the meta records", it->status());
    phase->summary =
        "format_version " + std::to_string(c.format_version) +
        ", fence_domain " + c.spec.ToString() + ", fence_mode " +
        FenceModeName(c.mode) + ", fence_floor " + std::to_string(c.floor) +
        ", lease_counter " +
        (c.has_lease_counter ? std::to_string(c.lease_counter)
                             : std::string("absent (no lease granted)")) +
        ", high-water mark " + std::to_string(c.hwm) + " in " +
        std::to_string(c.hwm_records) + " record(s)";
    return Status::OK();
  }

  // Decodes every record, remembering what the later classes need.
  Status ReadEverything(Phase* phase) {
    const Token hwm = store_->config().hwm;
    const bool per_key = store_->config().spec.is_per_key();
    auto data = store_->NewIterator(store_->data());
    for (data->SeekToFirst(); data->Valid(); data->Next()) {
      const std::string_view key(data->key().data(), data->key().size());
      format::DataRecord record;
      Status s = format::DecodeDataRecordOf(
          key, {data->value().data(), data->value().size()}, &record);
      if (!s.ok()) {
        phase->Add(s.ToString());
        continue;
      }
      ++(record.kind == format::RecordKind::kValue ? values_ : deleted_);
      largest_ = std::max(largest_, record.token);
      if (record.token > hwm) {
        above_hwm_.Add(std::string(per_key ? "key" : "data record") + " \"" +
                       EscapeBytes(key) + "\" token " +
                       std::to_string(record.token) + " > high-water mark " +
                       std::to_string(hwm));
      }
    }
    if (!data->status().ok()) {
      return ReadError("the data records", data->status());
    }
    auto fence = store_->NewIterator(store_->fence());
    for (fence->SeekToFirst(); fence->Valid(); fence->Next()) {
      Token max = 0;
      const std::string domain = fence->key().ToString();
      if (!format::DecodeToken({fence->value().data(), fence->value().size()},
                               &max)) {
        phase->Add("fence record \"" + EscapeBytes(domain) +
                   "\" is not 8 bytes");
        continue;
      }
      ++fence_records_;
      largest_ = std::max(largest_, max);
      if (max > hwm) {
        above_hwm_.Add("fence record \"" + EscapeBytes(domain) + "\" max " +
                       std::to_string(max) + " > high-water mark " +
                       std::to_string(hwm));
      }
    }
    if (!fence->status().ok()) {
      return ReadError("the fence records", fence->status());
    }
    auto meta = store_->NewIterator(store_->meta());
    for (meta->SeekToFirst(); meta->Valid(); meta->Next()) {
      const std::string key = meta->key().ToString();
      const std::string_view value(meta->value().data(), meta->value().size());
      if (key.rfind(format::kMetaLeasePrefix, 0) == 0) {
        format::LeaseRecord lease;
        if (!format::DecodeLeaseRecord(value, &lease)) {
          phase->Add("lease record \"" + EscapeBytes(key) +
                     "\" does not decode");
          continue;
        }
        leases_.emplace_back(key.substr(format::kMetaLeasePrefix.size()),
                             lease.token);
      } else if (key.rfind(format::kMetaHighWaterMarkPrefix, 0) == 0 &&
                 !IsHwmKey(key)) {
        phase->Add("high-water mark record \"" + EscapeBytes(key) +
                   "\" is not hwm/ and 4 lowercase hex digits");
      }
    }
    if (!meta->status().ok()) {
      return ReadError("the meta records", meta->status());
    }
    phase->summary = "data " + std::to_string(values_ + deleted_) + " (" +
                     std::to_string(values_) + " values, " +
                     std::to_string(deleted_) + " deleted), fence " +
                     std::to_string(fence_records_) + ", leases " +
                     std::to_string(leases_.size());
    return Status::OK();
  }

  Status CheckDomains(Phase* phase) {
    const StoreConfig& c = store_->config();
    if (c.spec.is_per_key()) {
      phase->summary = "fence_domain key: each key's record holds its max";
      return Status::OK();
    }
    uint64_t checked = 0;
    std::string last_domain;
    Token last_max = 0;
    auto data = store_->NewIterator(store_->data());
    for (data->SeekToFirst(); data->Valid(); data->Next()) {
      const std::string_view key(data->key().data(), data->key().size());
      format::DataRecord record;
      if (!format::DecodeDataRecord(
              {data->value().data(), data->value().size()}, &record)) {
        continue;  // (reported by decode)
      }
      const std::string_view domain = c.spec.DomainOf(key);
      if (checked == 0 || domain != last_domain) {
        Status s = store_->StoredMax(domain, &last_max);
        if (!s.ok()) return s;
        last_domain.assign(domain);
      }
      ++checked;
      if (record.token > last_max &&
          !SubsumedByFloor(c.mode, record.token, c.floor)) {
        phase->Add("key \"" + EscapeBytes(key) + "\" token " +
                   std::to_string(record.token) + " > its domain \"" +
                   EscapeBytes(domain) + "\" max " + std::to_string(last_max));
      }
    }
    if (!data->status().ok()) {
      return ReadError("the data records", data->status());
    }
    phase->summary =
        std::to_string(checked) + " data tokens <= their domain's max";
    return Status::OK();
  }

  void CheckLeases(Phase* phase) {
    const StoreConfig& c = store_->config();
    Token largest = 0;
    for (const auto& [name, token] : leases_) {
      largest = std::max(largest, token);
      if (token > c.lease_counter) {
        phase->Add("lease \"" + EscapeBytes(name) + "\" token " +
                   std::to_string(token) + " > lease_counter " +
                   (c.has_lease_counter ? std::to_string(c.lease_counter)
                                        : std::string("(absent)")));
      }
    }
    phase->summary = "largest lease token " + std::to_string(largest) +
                     " <= lease_counter " + std::to_string(c.lease_counter);
  }

  FILE* out_ = nullptr;
  ReadOnlyStore* store_ = nullptr;
  uint64_t values_ = 0, deleted_ = 0, fence_records_ = 0;
  Token largest_ = 0;       // the largest max (or data token) read
  Phase above_hwm_{"hwm"};  // filled while reading everything
  std::vector<std::pair<std::string, Token>> leases_;
};

}  // namespace

void AppendCheckCommand(std::vector<CommandFactory>* table) {
  table->push_back(MakeCommand<CheckCommand>);
}

}  // namespace admin
}  // namespace fencedkv
