// Copyright (c) fencedkv authors.

#include "metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

namespace fencedkv {
namespace server {

namespace {

class Collector : public prometheus::Collectable {
 public:
  Collector(DB* db, LeaseService* leases, const ServerStats* stats,
            std::function<ReplicationGauges()> replication)
      : db_(db),
        leases_(leases),
        stats_(stats),
        replication_(std::move(replication)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const FenceStats fs = db_->GetFenceStats();
    const LeaseService::Stats ls = leases_->GetStats();
    std::vector<prometheus::MetricFamily> out;
    auto add = [&](const char* name, const char* help, prometheus::MetricType type,
                   double value) {
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
    add("fencedkv_fence_advances_total", "FENCE.ADVANCE calls that raised a max",
        T::Counter, static_cast<double>(fs.advances));
    add("fencedkv_reads_rejected_total", "Fenced reads refused as stale",
        T::Counter, static_cast<double>(fs.rejected_reads));
    add("fencedkv_unfenced_writes_total", "Writes without FENCE (--allow_unfenced)",
        T::Counter, static_cast<double>(stats_->unfenced_writes.load()));
    add("fencedkv_nofence_rejections_total", "Writes refused for lacking FENCE",
        T::Counter, static_cast<double>(stats_->nofence_rejections.load()));
    add("fencedkv_commands_total", "Commands processed", T::Counter,
        static_cast<double>(stats_->commands()));
    add("fencedkv_connections_received_total", "Connections accepted", T::Counter,
        static_cast<double>(stats_->connections_received.load()));
    add("fencedkv_connections_rejected_total", "Connections refused (maxclients)",
        T::Counter, static_cast<double>(stats_->connections_rejected.load()));
    add("fencedkv_connected_clients", "Open client connections", T::Gauge,
        static_cast<double>(stats_->connected.load()));
    add("fencedkv_accept_errors_total",
        "accept() failures (e.g. out of file descriptors)", T::Counter,
        static_cast<double>(stats_->accept_errors.load()));
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
  DB* db_;
  LeaseService* leases_;
  const ServerStats* stats_;
  const std::function<ReplicationGauges()> replication_;
};

// Compares without an early exit, so the time taken does not tell how much
// of a guessed password was right.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^
            static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  }
  return diff == 0;
}

class ExporterImpl final : public MetricsExporter {
 public:
  std::shared_ptr<Collector> collector;
  std::unique_ptr<prometheus::Exposer> exposer;
  int port() const override {
    auto ports = exposer->GetListeningPorts();
    return ports.empty() ? 0 : ports[0];
  }
};

}  // namespace

MetricsExporter::~MetricsExporter() = default;

Status MetricsExporter::Start(const MetricsOptions& options, DB* db,
                              LeaseService* leases, const ServerStats* stats,
                              std::unique_ptr<MetricsExporter>* exporter) {
  auto impl = std::make_unique<ExporterImpl>();
  impl->collector =
      std::make_shared<Collector>(db, leases, stats, options.replication);
  const std::string address = options.bind + ":" + std::to_string(options.port);
  try {
    impl->exposer =
        std::make_unique<prometheus::Exposer>(std::vector<std::string>{
            "listening_ports", address, "num_threads",
            std::to_string(options.threads), "request_timeout_ms",
            std::to_string(options.request_timeout_ms)});
  } catch (const std::exception& e) {
    return Status::IOError("cannot serve metrics on " + address, e.what());
  }
  if (!options.password.empty()) {
    impl->exposer->RegisterAuth(
        [password = options.password](const std::string& user,
                                      const std::string& pass) {
          return user == "default" && ConstantTimeEquals(pass, password);
        },
        "fencedkv");
  }
  impl->exposer->RegisterCollectable(impl->collector);
  *exporter = std::move(impl);
  return Status::OK();
}

}  // namespace server
}  // namespace fencedkv
