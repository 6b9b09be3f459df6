// Copyright (c) fencedkv authors.
//
// EtcdRevisionSource: the token skew guard's reference point when the
// fencing tokens are etcd revisions (etcdctl lock's ETCD_LOCK_REV). It keeps
// DB::NoteIssuedToken at etcd's current revision: a thread of its own asks
// etcd's v3 JSON gateway (POST <endpoint>/v3/kv/range, whose reply carries
// header.revision) every `refresh`, trying the endpoints in turn, each call
// bounded by `timeout`. The io loops never wait for etcd.
//
// A holder's revision can be ahead of the last one learnt by what etcd
// issued since the last refresh: --max_token_skew must cover that (etcd
// issues one revision per write).
//
// Thread-safe.

#ifndef FENCEDKV_SERVER_ETCD_REVISION_H_
#define FENCEDKV_SERVER_ETCD_REVISION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fencedkv/db.h"
#include "fencedkv/status.h"

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

class EtcdRevisionSource {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // "http://127.0.0.1:2379"
    std::chrono::milliseconds refresh{100};
    std::chrono::milliseconds timeout{500};
  };

  // Asks etcd once (into *first: IOError if no endpoint answered; the
  // source runs anyway and keeps asking), then starts the thread. `db` must
  // outlive the source.
  static std::unique_ptr<EtcdRevisionSource> Start(DB* db,
                                                   const Options& options,
                                                   Status* first);
  ~EtcdRevisionSource();  // stops the thread
  EtcdRevisionSource(const EtcdRevisionSource&) = delete;
  EtcdRevisionSource& operator=(const EtcdRevisionSource&) = delete;

  // Asks etcd now, from the calling thread; reports the revision to the DB.
  Status Refresh();
  // The last revision etcd reported (0 before the first answer).
  uint64_t revision() const { return revision_.load(); }

 private:
  EtcdRevisionSource(DB* db, const Options& options);
  void Run() LOCKS_EXCLUDED(mu_);

  DB* const db_;
  const Options options_;
  std::atomic<uint64_t> revision_{0};
  Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Parses a /v3/kv/range reply body: header.revision (a decimal string in
// etcd's JSON, an int64 in its proto). False if it is not there.
bool ParseEtcdRevision(const std::string& body, uint64_t* revision);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_ETCD_REVISION_H_
