// Copyright (c) fencedkv authors.

#include "metrics.h"

#include <cctype>
#include <cstdlib>
#include <limits>

#include <civetweb.h>
#include <netdb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <sys/socket.h>

#include "command_table.h"
#include "process_memory.h"

namespace fencedkv {
namespace server {

namespace {

class Collector : public prometheus::Collectable {
 public:
  Collector(DB* db, LeaseService* leases, const ServerStats* stats,
            const CommandStats* commands,
            std::function<ReplicationGauges()> replication)
      : db_(db),
        leases_(leases),
        stats_(stats),
        commands_(commands),
        replication_(std::move(replication)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const FenceStats fs = db_->GetFenceStats();
    const LeaseService::Stats ls = leases_->GetStats();
    std::vector<prometheus::MetricFamily> out;
    auto add = [&](const char* name, const char* help,
                   prometheus::MetricType type, double value) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      prometheus::ClientMetric m;
      if (type == prometheus::MetricType::Counter) {
        m.counter.value = value;
      } else {
        m.gauge.value = value;
      }
      f.metric.push_back(std::move(m));
      out.push_back(std::move(f));
    };
    using T = prometheus::MetricType;
    add("fencedkv_writes_accepted_total", "Fenced writes applied", T::Counter,
        static_cast<double>(fs.accepted_writes));
    add("fencedkv_writes_rejected_total", "Writes refused with a stale token",
        T::Counter, static_cast<double>(fs.rejected_writes));
    add("fencedkv_fence_advances_total",
        "FENCE.ADVANCE calls that raised a max", T::Counter,
        static_cast<double>(fs.advances));
    add("fencedkv_reads_rejected_total", "Fenced reads refused as stale",
        T::Counter, static_cast<double>(fs.rejected_reads));
    add("fencedkv_unfenced_writes_total",
        "Writes without FENCE (--allow_unfenced)", T::Counter,
        static_cast<double>(stats_->unfenced_writes.load()));
    add("fencedkv_nofence_rejections_total", "Writes refused for lacking FENCE",
        T::Counter, static_cast<double>(stats_->nofence_rejections.load()));
    add("fencedkv_commands_total", "Commands processed", T::Counter,
        static_cast<double>(stats_->commands()));
    add("fencedkv_connections_received_total", "Connections accepted",
        T::Counter, static_cast<double>(stats_->connections_received.load()));
    add("fencedkv_connections_rejected_total",
        "Connections refused (maxclients)", T::Counter,
        static_cast<double>(stats_->connections_rejected.load()));
    add("fencedkv_connected_clients", "Open client connections", T::Gauge,
        static_cast<double>(stats_->connected.load()));
    add("fencedkv_accept_errors_total",
        "accept() failures (e.g. out of file descriptors)", T::Counter,
        static_cast<double>(stats_->accept_errors.load()));
    add("fencedkv_client_memory_bytes",
        "What clients hold past their idle buffers: grown request buffers, "
        "MULTI queues and replies not taken (--maxmemory_clients bounds it)",
        T::Gauge,
        static_cast<double>(std::max<int64_t>(0, stats_->client_bytes.load())));
    add("fencedkv_client_memory_refusals_total",
        "Requests and queued commands refused by --maxmemory_clients",
        T::Counter, static_cast<double>(stats_->client_memory_refusals.load()));
    add("fencedkv_evicted_clients_total",
        "Clients closed by --maxmemory_clients (each held the most)",
        T::Counter, static_cast<double>(stats_->evicted_clients.load()));
    add("fencedkv_reads_moved_off_loop_total",
        "MGETs and EXISTS that read 1 MiB or ran 2 ms on an event loop and "
        "ran again on the long-command thread",
        T::Counter, static_cast<double>(stats_->reads_moved_off_loop.load()));
    add("fencedkv_connection_timeouts_total",
        "Connections closed by --timeout or --auth_timeout", T::Counter,
        static_cast<double>(stats_->timeouts.load()));
    add("fencedkv_fence_floor", "The global fence floor", T::Gauge,
        static_cast<double>(db_->GetFenceFloor()));
    add("fencedkv_leases_granted_total", "Lease grants with a new token",
        T::Counter, static_cast<double>(ls.grants));
    add("fencedkv_leases_held",
        "Leases on record (held, or expired and not yet reclaimed)", T::Gauge,
        static_cast<double>(ls.held));
    add("fencedkv_lease_last_token", "The last lease token issued", T::Gauge,
        static_cast<double>(ls.last_token));
    add("fencedkv_memory_used_bytes",
        "Bytes the allocator has handed out (INFO memory used_memory)",
        T::Gauge, static_cast<double>(UsedMemory()));
    add("fencedkv_memory_rss_bytes", "Resident set size", T::Gauge,
        static_cast<double>(RssBytes()));
    if (commands_ != nullptr) CollectCommands(&out);
    CollectRocksDB(add);
    if (replication_) {
      const ReplicationGauges g = replication_();
      add("fencedkv_replication_primary", "1 on the primary, 0 on a replica",
          T::Gauge, g.primary ? 1 : 0);
      add("fencedkv_replication_epoch",
          "The epoch this server leads or follows", T::Gauge,
          static_cast<double>(g.epoch));
      add("fencedkv_replication_isr_size",
          "In-sync replica set, the primary included (0 on a replica)",
          T::Gauge, static_cast<double>(g.isr_size));
      add("fencedkv_replication_connected_replicas", "Replicas streaming",
          T::Gauge, static_cast<double>(g.replicas));
      add("fencedkv_replication_max_lag_ms",
          "The largest lag of a connected replica", T::Gauge,
          static_cast<double>(g.max_lag_ms));
      add("fencedkv_replication_applied_sequence",
          "This server's latest sequence number", T::Gauge,
          static_cast<double>(g.applied_seq));
    }
    return out;
  }

 private:
  // Per command: calls, failed and rejected calls, and a latency histogram;
  // errors by code, and refused writes by reason.
  void CollectCommands(std::vector<prometheus::MetricFamily>* out) const {
    using T = prometheus::MetricType;
    auto family = [](const char* name, const char* help, T type) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      return f;
    };
    auto calls = family("fencedkv_command_calls_total",
                        "Calls of each command that ran", T::Counter);
    auto failed = family("fencedkv_command_failed_calls_total",
                         "Calls that answered an error", T::Counter);
    auto rejected =
        family("fencedkv_command_rejected_calls_total",
               "Calls refused before running (ACL, arity, login)", T::Counter);
    auto latency = family(
        "fencedkv_command_duration_seconds",
        "Time from a command's parse to its reply (a grouped write or GET: "
        "its group's); a call counts under the first bound at or above the "
        "top of its 12.5%-wide internal bucket",
        T::Histogram);
    // The histogram's bounds (seconds).
    static const double kBounds[] = {1e-5,   5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
                                     2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
                                     0.25,   0.5,  1,    2.5,    5,    10};
    constexpr size_t kNumBounds = sizeof(kBounds) / sizeof(kBounds[0]);
    const auto& table = AllCommands();
    for (size_t i = 0; i < table.size(); ++i) {
      const CommandStats::Totals t = commands_->Get(i, true);
      if (t.calls == 0 && t.rejected == 0) continue;
      const prometheus::ClientMetric::Label label{"cmd", table[i].name};
      prometheus::ClientMetric m;
      m.label = {label};
      m.counter.value = static_cast<double>(t.calls);
      calls.metric.push_back(m);
      m.counter.value = static_cast<double>(t.failed);
      failed.metric.push_back(m);
      m.counter.value = static_cast<double>(t.rejected);
      rejected.metric.push_back(m);
      prometheus::ClientMetric h;
      h.label = {label};
      h.histogram.sample_count = t.calls;
      h.histogram.sample_sum = static_cast<double>(t.usec) / 1e6;
      std::vector<uint64_t> counts(kNumBounds + 1, 0);
      for (size_t b = 0; b < t.histogram.size(); ++b) {
        if (t.histogram[b] == 0) continue;
        // The largest value the bucket holds, in seconds.
        const double top =
            static_cast<double>(CommandStats::BucketUpperBound(b) - 1) / 1e6;
        size_t j = 0;
        while (j < kNumBounds && kBounds[j] < top) ++j;
        counts[j] += t.histogram[b];
      }
      uint64_t cumulative = 0;
      for (size_t j = 0; j <= kNumBounds; ++j) {
        cumulative += counts[j];
        h.histogram.bucket.push_back(
            {cumulative, j < kNumBounds
                             ? kBounds[j]
                             : std::numeric_limits<double>::infinity()});
      }
      latency.metric.push_back(std::move(h));
    }
    auto errors = family("fencedkv_errors_total",
                         "Error replies by code (INFO errorstats)", T::Counter);
    auto refused = family(
        "fencedkv_rejected_writes_total",
        "Writes (SET DEL MSET EXEC FENCE.ADVANCE LEASE.*) answered an error, "
        "by reason: stale, tokenskew, nofence, noauth, noperm, err (syntax, "
        "bad token, ...), ...",
        T::Counter);
    for (int c = 0; c < CommandStats::kNumErrorCodes; ++c) {
      const auto code = static_cast<CommandStats::ErrorCode>(c);
      const std::string name = CommandStats::ErrorCodeName(code);
      prometheus::ClientMetric m;
      m.label = {{"code", name}};
      m.counter.value = static_cast<double>(commands_->Errors(code));
      errors.metric.push_back(m);
      std::string reason = name;
      for (char& ch : reason) {
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
      m.label = {{"reason", reason}};
      m.counter.value = static_cast<double>(commands_->WriteErrors(code));
      refused.metric.push_back(m);
    }
    for (auto* f : {&calls, &failed, &rejected, &latency, &errors, &refused}) {
      out->push_back(std::move(*f));
    }
  }

  // What an operator watches in RocksDB, read from its properties and
  // statistics now (never on a command's path).
  template <typename Add>
  void CollectRocksDB(const Add& add) const {
    using T = prometheus::MetricType;
    auto prop = [this](const char* name) -> double {
      std::string v;
      if (!db_->GetProperty(name, &v)) return 0;
      return static_cast<double>(std::strtoull(v.c_str(), nullptr, 10));
    };
    add("fencedkv_rocksdb_write_stopped",
        "1 while RocksDB stops writes (too many L0 files, memtables or "
        "pending compaction bytes)",
        T::Gauge, prop("rocksdb.is-write-stopped"));
    add("fencedkv_rocksdb_delayed_write_rate_bytes",
        "RocksDB's write rate limit while it slows writes down (0: not "
        "slowed)",
        T::Gauge, prop("rocksdb.actual-delayed-write-rate"));
    add("fencedkv_rocksdb_write_stalls_total",
        "Write slowdowns and stops RocksDB has imposed (its cfstats "
        "'Stalls(count)' total)",
        T::Counter, StallCount());
    add("fencedkv_rocksdb_pending_compaction_bytes",
        "Bytes RocksDB estimates compaction must rewrite", T::Gauge,
        prop("rocksdb.estimate-pending-compaction-bytes"));
    add("fencedkv_rocksdb_running_compactions", "Compactions running", T::Gauge,
        prop("rocksdb.num-running-compactions"));
    add("fencedkv_rocksdb_memtable_bytes",
        "Memory of the memtables (active, immutable, pinned), every column "
        "family",
        T::Gauge, prop("fencedkv.aggregated.rocksdb.cur-size-all-mem-tables"));
    add("fencedkv_rocksdb_block_cache_usage_bytes",
        "Memory of the block cache's entries", T::Gauge,
        prop("rocksdb.block-cache-usage"));
    add("fencedkv_rocksdb_block_cache_capacity_bytes",
        "The block cache's capacity", T::Gauge,
        prop("rocksdb.block-cache-capacity"));
    add("fencedkv_rocksdb_table_readers_bytes",
        "Memory of the open SST files' index and filter blocks, every column "
        "family",
        T::Gauge,
        prop("fencedkv.aggregated.rocksdb.estimate-table-readers-mem"));
    add("fencedkv_fence_cache_bytes", "Memory of the fence cache", T::Gauge,
        prop("fencedkv.fence-cache-bytes"));
    add("fencedkv_value_cache_bytes",
        "Memory of the value cache (--value_cache_size)", T::Gauge,
        prop("fencedkv.value-cache-bytes"));
    add("fencedkv_rocksdb_estimate_num_keys",
        "RocksDB's estimate of the keys stored", T::Gauge,
        prop("rocksdb.estimate-num-keys"));
    // Tickers (--rocksdb_statistics): block cache hits and misses, stall
    // time.
    std::string tickers;
    if (db_->GetProperty("fencedkv.tickers", &tickers)) {
      auto ticker = [&tickers](const char* name) -> double {
        const std::string key = std::string("\n") + name + " ";
        const size_t at = ("\n" + tickers).find(key);
        if (at == std::string::npos) return 0;
        return static_cast<double>(
            std::strtoull(tickers.c_str() + at + key.size() - 1, nullptr, 10));
      };
      add("fencedkv_rocksdb_block_cache_hits_total", "Block cache hits",
          T::Counter, ticker("rocksdb.block.cache.hit"));
      add("fencedkv_rocksdb_block_cache_misses_total", "Block cache misses",
          T::Counter, ticker("rocksdb.block.cache.miss"));
      add("fencedkv_rocksdb_stall_seconds_total",
          "Time writers were delayed or stopped by RocksDB", T::Counter,
          ticker("rocksdb.stall.micros") / 1e6);
    }
  }

  // The total of RocksDB's "Stalls(count): ... N total count" line.
  double StallCount() const {
    std::string stats;
    if (!db_->GetProperty("rocksdb.cfstats-no-file-histogram", &stats)) {
      return 0;
    }
    const size_t line = stats.find("Stalls(count):");
    if (line == std::string::npos) return 0;
    const size_t end = stats.find('\n', line);
    const std::string l = stats.substr(line, end - line);
    const size_t total = l.find(" total count");
    if (total == std::string::npos) return 0;
    size_t begin = l.rfind(' ', total - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    return static_cast<double>(std::strtoull(l.c_str() + begin, nullptr, 10));
  }

 public:
 private:
  DB* db_;
  LeaseService* leases_;
  const ServerStats* stats_;
  const CommandStats* commands_;
  const std::function<ReplicationGauges()> replication_;
};

class ExporterImpl final : public MetricsExporter {
 public:
  std::shared_ptr<Collector> collector;
  std::unique_ptr<prometheus::Exposer> exposer;
  bool auth = false;
  int port() const override {
    auto ports = exposer->GetListeningPorts();
    return ports.empty() ? 0 : ports[0];
  }
  bool asks_auth() const override { return auth; }
};

}  // namespace

MetricsExporter::~MetricsExporter() = default;

Status ResolveMetricsBind(const std::string& bind, std::string* host) {
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(bind.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    if (res != nullptr) freeaddrinfo(res);
    return Status::InvalidArgument(
        "--metrics_bind=" + bind + " is not an address to listen on",
        rc != 0 ? gai_strerror(rc) : "no address");
  }
  // An IPv4 answer first: "localhost" is ::1 before 127.0.0.1 in Debian's
  // /etc/hosts, and a client of the metrics port most likely uses IPv4.
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  char buf[NI_MAXHOST];
  const int nrc = getnameinfo(pick->ai_addr, pick->ai_addrlen, buf, sizeof(buf),
                              nullptr, 0, NI_NUMERICHOST);
  const bool v6 = pick->ai_family == AF_INET6;
  freeaddrinfo(res);
  if (nrc != 0) {
    return Status::InvalidArgument(
        "--metrics_bind=" + bind + " is not an address to listen on",
        gai_strerror(nrc));
  }
  if (v6 && mg_check_feature(MG_FEATURES_IPV6) == 0) {
    return Status::InvalidArgument(
        "--metrics_bind=" + bind + " is an IPv6 address",
        "this build's HTTP server (civetweb) has no IPv6: give an IPv4 one");
  }
  *host = buf;
  return Status::OK();
}

std::string MetricsHostPort(const std::string& host, int port) {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p
                                             : host + ":" + p;
}

Status MetricsExporter::Start(const MetricsOptions& options, DB* db,
                              LeaseService* leases, const ServerStats* stats,
                              const CommandStats* commands,
                              std::unique_ptr<MetricsExporter>* exporter) {
  auto impl = std::make_unique<ExporterImpl>();
  impl->collector = std::make_shared<Collector>(db, leases, stats, commands,
                                                options.replication);
  std::string host;
  Status s = ResolveMetricsBind(options.bind, &host);
  if (!s.ok()) return s;
  const std::string address = MetricsHostPort(host, options.port);
  try {
    impl->exposer =
        std::make_unique<prometheus::Exposer>(std::vector<std::string>{
            "listening_ports", address, "num_threads",
            std::to_string(options.threads), "request_timeout_ms",
            std::to_string(options.request_timeout_ms)});
  } catch (const std::exception& e) {
    return Status::IOError("cannot serve metrics on " + address, e.what());
  }
  const CommandSpec* info = LookupCommand("info");
  if (info == nullptr) {
    return Status::Corruption("the command table has no INFO");
  }
  const size_t index = CommandIndex(*info);
  // Open only where a RESP connection may run INFO without AUTH.
  const AclUser* anyone =
      options.acl != nullptr ? options.acl->InitialUser() : nullptr;
  if (options.acl != nullptr &&
      (anyone == nullptr || !anyone->Allows(index, /*admin_form=*/false))) {
    impl->auth = true;
    impl->exposer->RegisterAuth(
        [acl = options.acl, index](const std::string& user,
                                   const std::string& pass) {
          const AclUser* u = acl->Authenticate(user, pass);
          return u != nullptr && u->Allows(index, /*admin_form=*/false);
        },
        "fencedkv");
  }
  impl->exposer->RegisterCollectable(impl->collector);
  *exporter = std::move(impl);
  return Status::OK();
}

}  // namespace server
}  // namespace fencedkv
