// Copyright (c) fencedkv authors.
//
// The read-only verbs: scan, get, dump, fence get, fence list, leases,
// stats. Each opens the directory through ReadOnlyStore (no lock).

#include <chrono>
#include <filesystem>
#include <functional>

#include <rocksdb/env.h>

#include "admin_tool.h"
#include "db/fence_check.h"
#include "db/fence_format.h"
#include "db/read_only_store.h"
#include "db/synced_stamp.h"

namespace fencedkv {
namespace admin {

namespace {

namespace fs = std::filesystem;

// Calls fn(key, record) for the data records in [--from, --to), at most
// --limit of those for which fn returns true (the ones it printed).
Status ForEachDataRecord(
    const ReadOnlyStore& store,
    const std::function<bool(std::string_view, const format::DataRecord&)>&
        fn) {
  // In hex with --hex, as KEY arguments are (and as ldb takes them).
  std::string from, to, error;
  if (!ParseKeyArg(FLAGS_from, &from, &error) ||
      !ParseKeyArg(FLAGS_to, &to, &error)) {
    return Status::InvalidArgument("--from/--to: " + error);
  }
  auto it = store.NewIterator(store.data());
  const int64_t limit = KeyLimit();
  int64_t shown = 0;
  if (from.empty()) {
    it->SeekToFirst();
  } else {
    it->Seek(from);
  }
  for (; it->Valid() && (limit < 0 || shown < limit); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (!to.empty() && key >= std::string_view(to)) break;
    format::DataRecord record;
    Status s = format::DecodeDataRecordOf(
        key, {it->value().data(), it->value().size()}, &record);
    if (!s.ok()) return s;
    if (fn(key, record)) ++shown;
  }
  if (!it->status().ok()) return ReadError("the data records", it->status());
  return Status::OK();
}

class ScanCommand : public ReadCommand {
 public:
  const char* Name() const override { return "scan"; }
  void Help(std::string* out) const override {
    *out +=
        "  scan [--from=K] [--to=K] [--limit=N] [--hex]\n"
        "      key : value, in key order (deleted keys are not shown)\n";
  }
  std::vector<const char*> Flags() const override {
    return {"hex", "from", "to", "limit", "max_keys"};
  }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    return ExecResult::FromStatus(ForEachDataRecord(
        store, [out](std::string_view key, const format::DataRecord& rec) {
          if (rec.kind != format::RecordKind::kValue) return false;
          Print(out, FormatBytes(key) + " : " + FormatBytes(rec.value) + "\n");
          return true;
        }));
  }
};

class DumpCommand : public ReadCommand {
 public:
  const char* Name() const override { return "dump"; }
  void Help(std::string* out) const override {
    *out +=
        "  dump [--from=K] [--to=K] [--limit=N] [--hex]\n"
        "      every key with its token, in key order: \"key\" token "
        "\"value\", or \"key\" token\n      (no value) for a key that "
        "keeps a token but has no value (deleted, or advanced)\n";
  }
  std::vector<const char*> Flags() const override {
    return {"hex", "from", "to", "limit", "max_keys"};
  }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    return ExecResult::FromStatus(ForEachDataRecord(
        store, [out](std::string_view key, const format::DataRecord& rec) {
          Print(out, QuoteBytes(key) + " " + std::to_string(rec.token) + " " +
                         (rec.kind == format::RecordKind::kValue
                              ? QuoteBytes(rec.value)
                              : std::string("(no value)")) +
                         "\n");
          return true;
        }));
  }
};

class GetCommand : public ReadCommand {
 public:
  const char* Name() const override { return "get"; }
  void Help(std::string* out) const override {
    *out +=
        "  get KEY [--hex]\n"
        "      the key's value (exit 3 if it has none)\n";
  }
  std::vector<const char*> Flags() const override { return {"hex"}; }
  size_t NumArgs() const override { return 1; }
  const char* ArgsUsage() const override { return "KEY"; }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    std::string key, error;
    if (!ParseKeyArg(args[0], &key, &error)) return ExecResult::Error(error);
    std::string raw;
    rocksdb::Status rs =
        store.db()->Get(rocksdb::ReadOptions(), store.data(), key, &raw);
    format::DataRecord record{format::RecordKind::kNoValue, 0, {}};
    if (rs.ok()) {
      Status s = format::DecodeDataRecordOf(key, raw, &record);
      if (!s.ok()) return ExecResult::FromStatus(s);
    } else if (!rs.IsNotFound()) {
      return ExecResult::FromStatus(ReadError("the key", rs));
    }
    if (record.kind != format::RecordKind::kValue) {
      return {kExitNotFound, "key " + QuoteBytes(key) + " not found"};
    }
    Print(out, FormatBytes(record.value) + "\n");
    return ExecResult::Ok();
  }
};

class FenceGetCommand : public ReadCommand {
 public:
  const char* Name() const override { return "fence get"; }
  void Help(std::string* out) const override {
    *out +=
        "  fence get KEY [--hex]\n"
        "      the key's domain, its max token as FENCE.GET reports it (the "
        "floor applied),\n      the stored max and the floor\n";
  }
  std::vector<const char*> Flags() const override { return {"hex"}; }
  size_t NumArgs() const override { return 1; }
  const char* ArgsUsage() const override { return "KEY"; }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    std::string key, error;
    if (!ParseKeyArg(args[0], &key, &error)) return ExecResult::Error(error);
    if (key.empty()) return ExecResult::Error("empty key");
    const StoreConfig& c = store.config();
    const std::string_view domain = c.spec.DomainOf(key);
    Token stored = 0;
    Status s = store.StoredMax(domain, &stored);
    if (!s.ok()) return ExecResult::FromStatus(s);
    Print(out, "domain " + QuoteBytes(domain) + " max " +
                   std::to_string(ReportedMax(c.mode, stored, c.floor)) +
                   " stored " + std::to_string(stored) + " floor " +
                   std::to_string(c.floor) + "\n");
    return ExecResult::Ok();
  }
};

class FenceListCommand : public ReadCommand {
 public:
  const char* Name() const override { return "fence list"; }
  void Help(std::string* out) const override {
    *out +=
        "  fence list [--prefix=P] [--limit=N] [--hex]\n"
        "      every domain with its stored max token: \"domain\" max (the "
        "floor applies on top)\n";
  }
  std::vector<const char*> Flags() const override {
    return {"hex", "prefix", "limit", "max_keys"};
  }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    std::string prefix, error;
    if (!ParseKeyArg(FLAGS_prefix, &prefix, &error)) {
      return ExecResult::Error("--prefix: " + error);
    }
    const bool per_key = store.config().spec.is_per_key();
    auto it = store.NewIterator(per_key ? store.data() : store.fence());
    const int64_t limit = KeyLimit();
    int64_t shown = 0;
    for (it->Seek(prefix); it->Valid() && (limit < 0 || shown < limit);
         it->Next()) {
      const std::string_view domain(it->key().data(), it->key().size());
      if (domain.substr(0, prefix.size()) != prefix) break;
      const std::string_view raw(it->value().data(), it->value().size());
      Token max = 0;
      if (per_key) {
        format::DataRecord record;
        Status s = format::DecodeDataRecordOf(domain, raw, &record);
        if (!s.ok()) return ExecResult::FromStatus(s);
        max = record.token;
      } else if (!format::DecodeToken(raw, &max)) {
        return ExecResult::Error("bad fence record for domain " +
                                 QuoteBytes(domain) + ": not 8 bytes");
      }
      Print(out, QuoteBytes(domain) + " " + std::to_string(max) + "\n");
      ++shown;
    }
    if (!it->status().ok()) {
      return ExecResult::FromStatus(ReadError("the domains", it->status()));
    }
    return ExecResult::Ok();
  }
};

class LeasesCommand : public ReadCommand {
 public:
  const char* Name() const override { return "leases"; }
  void Help(std::string* out) const override {
    *out +=
        "  leases\n"
        "      every lease record: name, holder, token, expiry; then the "
        "lease counter\n";
  }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    Status s = store.ForEachLease([&](std::string_view name,
                                      const format::LeaseRecord& lease) {
      const int64_t left = lease.expires_at_ms - now;
      Print(out,
            "lease \"" + EscapeBytes(name) + "\" holder \"" +
                EscapeBytes(lease.holder) + "\" token " +
                std::to_string(lease.token) + " expires_at_ms " +
                std::to_string(lease.expires_at_ms) +
                (left > 0 ? " (in " + std::to_string(left) + " ms)"
                          : " (expired " + std::to_string(-left) + " ms ago)") +
                "\n");
    });
    if (!s.ok()) return ExecResult::FromStatus(s);
    Print(out, "lease_counter " + std::to_string(store.config().lease_counter) +
                   "\n");
    return ExecResult::Ok();
  }
};

class StatsCommand : public ReadCommand {
 public:
  const char* Name() const override { return "stats"; }
  void Help(std::string* out) const override {
    *out +=
        "  stats\n"
        "      configuration, floor, high-water mark, lease counter, record "
        "counts, file sizes,\n      the latest sequence and the synced "
        "stamp (SYNCED: how far the log was synced)\n";
  }
  ExecResult Read(const ReadOnlyStore& store,
                  const std::vector<std::string>& args, FILE* out) override {
    const StoreConfig& c = store.config();
    Status s;
    uint64_t values = 0, deleted = 0, fence_records = 0, leases = 0;
    s = ForEachDataRecord(
        store, [&](std::string_view, const format::DataRecord& record) {
          ++(record.kind == format::RecordKind::kValue ? values : deleted);
          return true;
        });
    if (!s.ok()) return ExecResult::FromStatus(s);
    auto fence = store.NewIterator(store.fence());
    for (fence->SeekToFirst(); fence->Valid(); fence->Next()) ++fence_records;
    if (!fence->status().ok()) {
      return ExecResult::FromStatus(ReadError("the fences", fence->status()));
    }
    s = store.ForEachLease(
        [&leases](std::string_view, const format::LeaseRecord&) { ++leases; });
    if (!s.ok()) return ExecResult::FromStatus(s);
    std::vector<rocksdb::LiveFileMetaData> files;
    store.db()->GetLiveFilesMetaData(&files);
    uint64_t sst_bytes = 0, wal_bytes = 0;
    for (const auto& f : files) sst_bytes += f.size;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(FLAGS_db, ec)) {
      if (e.path().extension() == ".log") wal_bytes += e.file_size(ec);
    }
    std::string text;
    auto line = [&text](const char* name, const std::string& value) {
      text += std::string(name) + ": " + value + "\n";
    };
    line("format_version", std::to_string(c.format_version));
    line("fence_domain", c.spec.ToString());
    line("fence_mode", FenceModeName(c.mode));
    line("fence_floor", std::to_string(c.floor));
    line("high_water_mark", std::to_string(c.hwm));
    line("high_water_mark_records", std::to_string(c.hwm_records));
    line("lease_counter", std::to_string(c.lease_counter));
    line("leases", std::to_string(leases));
    line("keys", std::to_string(values));
    line("deleted_keys", std::to_string(deleted));
    line("fence_records", std::to_string(fence_records));
    line("sst_files", std::to_string(files.size()));
    line("sst_bytes", std::to_string(sst_bytes));
    line("wal_bytes", std::to_string(wal_bytes));
    // How far the log was synced (the SYNCED file), and where this view
    // recovered to: the open refuses a store below its stamp.
    bool stamp_found = false;
    uint64_t stamped = 0;
    s = ReadSyncedStamp(rocksdb::Env::Default(), FLAGS_db, &stamp_found,
                        &stamped);
    if (!s.ok()) return ExecResult::FromStatus(s);
    line("latest_sequence",
         std::to_string(store.db()->GetLatestSequenceNumber()));
    line("synced_stamp", stamp_found ? std::to_string(stamped) : "none");
    Print(out, text);
    return ExecResult::Ok();
  }
};

}  // namespace

void AppendReadCommands(std::vector<CommandFactory>* table) {
  table->push_back(MakeCommand<ScanCommand>);
  table->push_back(MakeCommand<GetCommand>);
  table->push_back(MakeCommand<DumpCommand>);
  table->push_back(MakeCommand<FenceGetCommand>);
  table->push_back(MakeCommand<FenceListCommand>);
  table->push_back(MakeCommand<LeasesCommand>);
  table->push_back(MakeCommand<StatsCommand>);
}

}  // namespace admin
}  // namespace fencedkv
