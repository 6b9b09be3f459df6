// Copyright (c) fencedkv authors.
//
// Prometheus text exposition at http://<bind>:<metrics_port>/metrics
// (prometheus-cpp's pull exposer, on civetweb). Values are read from the live
// counters at scrape time, so nothing is counted twice.
//
// Bounded like the Redis port: its own bind address (loopback by default),
// HTTP basic auth when the RESP port asks for AUTH, a few workers, and a
// request timeout so that idle connections cannot hold every worker.

#ifndef FENCEDKV_SERVER_METRICS_H_
#define FENCEDKV_SERVER_METRICS_H_

#include <functional>
#include <memory>
#include <string>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"

#include "acl.h"
#include "command_stats.h"
#include "server.h"

namespace fencedkv {
namespace server {

// Replication's gauges (replication.h), read at each scrape.
struct ReplicationGauges {
  bool primary = true;
  uint64_t epoch = 0;
  size_t isr_size = 1;       // this server included; 0 on a replica
  size_t replicas = 0;       // connected replicas (a primary's)
  int64_t max_lag_ms = 0;    // the most any connected replica lags
  uint64_t applied_seq = 0;  // this server's latest sequence
};

struct MetricsOptions {
  std::string bind = "127.0.0.1";
  int port = 0;  // 0 = pick one
  // The server's users. Unless a RESP connection may run INFO without
  // AUTH ('default' on, nopass, INFO allowed), /metrics needs HTTP basic
  // auth as AUTH does: a user that is on, one of its passwords, and INFO
  // among its commands (what /metrics shows is INFO's). Null: open.
  std::shared_ptr<const Acl> acl;
  // civetweb workers: each serves one connection at a time.
  int threads = 8;
  // A connection that sends no request (or takes no reply) for this long
  // is dropped, freeing its worker (civetweb's default is 30 s).
  int request_timeout_ms = 3000;
  // If set: replication's gauges (role, epoch, ISR size, lag).
  std::function<ReplicationGauges()> replication;
};

// `bind` (--metrics_bind) as the numeric address the metrics port listens
// on: a name resolved, its first IPv4 address if it has one (Debian's
// "localhost" is ::1 first), else its first. InvalidArgument if it resolves
// to nothing, or to IPv6 while this civetweb was built without IPv6.
// Resolved once, before the database opens; Start is given the result.
Status ResolveMetricsBind(const std::string& bind, std::string* host);

// "host:port", an IPv6 host in brackets: civetweb's listening_ports form,
// and a URL's.
std::string MetricsHostPort(const std::string& host, int port);

// Thread-safe (civetweb's workers call the collector concurrently).
class MetricsExporter {
 public:
  // Serves /metrics as `options` say. IOError if it cannot listen. db,
  // leases, stats and commands (per-command counters; may be null) must
  // outlive the exporter. RocksDB's figures are read from its properties
  // and statistics at each scrape.
  static Status Start(const MetricsOptions& options, DB* db,
                      LeaseService* leases, const ServerStats* stats,
                      const CommandStats* commands,
                      std::unique_ptr<MetricsExporter>* exporter);
  virtual ~MetricsExporter();
  virtual int port() const = 0;
  // Whether a scrape needs HTTP basic auth (MetricsOptions::acl).
  virtual bool asks_auth() const = 0;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_METRICS_H_
