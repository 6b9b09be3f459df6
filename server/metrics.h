// Copyright (c) fencedkv authors.
//
// Prometheus text exposition at http://<bind>:<metrics_port>/metrics
// (prometheus-cpp's pull exposer). Values are read from the live counters at
// scrape time, so nothing is counted twice.

#ifndef FENCEDKV_SERVER_METRICS_H_
#define FENCEDKV_SERVER_METRICS_H_

#include <memory>
#include <string>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"
#include "server.h"

namespace fencedkv {
namespace server {

class MetricsExporter {
 public:
  // Serves /metrics on bind:port (port 0 = pick one). IOError if it cannot
  // listen. db, leases and stats must outlive the exporter.
  static Status Start(const std::string& bind, int port, DB* db,
                      LeaseService* leases, const ServerStats* stats,
                      std::unique_ptr<MetricsExporter>* exporter);
  virtual ~MetricsExporter();
  virtual int port() const = 0;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_METRICS_H_
