// Copyright (c) fencedkv authors.
//
// EtcdClient: the few etcd v3 calls replication needs (docs/replication.md),
// over etcd's v3 JSON gateway (POST <endpoint>/v3/kv/range, kv/put, kv/txn,
// lease/grant, lease/keepalive, lease/revoke) with libcurl and
// nlohmann-json. Keys and values are bytes (base64 on the wire).
//
// Every call is bounded by Options::timeout per endpoint. Endpoints are tried
// in turn, starting with the last one that answered; a call fails over to
// the next one on a transport error, an HTTP error without an etcd answer,
// or an etcd error that means "try another member" (Unavailable). An etcd
// answer (even "lease not found") is final. IOError when no endpoint
// answered.
//
// Thread-safe: calls are serialized on one libcurl handle, which keeps its
// HTTP connection alive between calls.

#ifndef FENCEDKV_SERVER_ETCD_CLIENT_H_
#define FENCEDKV_SERVER_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/status.h"

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// One compare of a transaction: `key`'s target compared with a number
// (version, create or mod revision; 0 = the key does not exist) or a value.
struct EtcdCompare {
  enum class Target { kVersion, kCreate, kMod, kValue };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kMod;
  Result result = Result::kEqual;
  int64_t number = 0;
  std::string value;

  static EtcdCompare ModRevisionIs(std::string key, int64_t revision);
  // create_revision == 0: the key does not exist.
  static EtcdCompare Absent(std::string key);
};

// One operation of a transaction.
struct EtcdOp {
  enum class Type { kGet, kPut, kDelete };
  Type type = Type::kGet;
  std::string key;
  std::string value;
  int64_t lease = 0;

  static EtcdOp Get(std::string key);
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key);
};

class EtcdClient {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // "http://127.0.0.1:2379"
    std::chrono::milliseconds timeout{1000};
  };

  explicit EtcdClient(const Options& options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // `key`'s record: *found false if there is none. *revision (if non-null)
  // receives the store's revision as of the read.
  Status Get(std::string_view key, EtcdKv* kv, bool* found,
             int64_t* revision = nullptr);
  // Every key that starts with `prefix`, in key order (at most `limit`; 0:
  // no limit).
  Status GetPrefix(std::string_view prefix, std::vector<EtcdKv>* kvs,
                   int64_t limit = 0, int64_t* revision = nullptr);
  Status Put(std::string_view key, std::string_view value, int64_t lease = 0);
  Status Delete(std::string_view key);

  // If every compare holds, applies `success`, else `failure`; *succeeded
  // says which. The records read by the kGet operations of the branch taken
  // go to *got (if non-null), in order.
  Status Txn(const std::vector<EtcdCompare>& compares,
             const std::vector<EtcdOp>& success,
             const std::vector<EtcdOp>& failure, bool* succeeded,
             std::vector<EtcdKv>* got = nullptr);

  // A new lease of `ttl` (etcd counts whole seconds: rounded up, and raised
  // to its minimum, 2 s with its default election timeout). *granted is
  // the TTL etcd granted.
  Status LeaseGrant(std::chrono::milliseconds ttl, int64_t* id,
                    std::chrono::milliseconds* granted);
  // Renews lease `id`: *ttl is its TTL again. NotFound if it has expired
  // or was revoked (its keys are gone).
  Status LeaseKeepAlive(int64_t id, std::chrono::milliseconds* ttl);
  // Revokes lease `id` and deletes its keys. NotFound if it does not exist.
  Status LeaseRevoke(int64_t id);

  // The endpoint that answered last (empty before the first answer).
  std::string endpoint() LOCKS_EXCLUDED(mu_);

 private:
  // POSTs `body` to `path` on the endpoints in turn, from the preferred one;
  // the first etcd answer goes to *reply (a JSON object) and its status is
  // returned: OK, NotFound, or IOError for another etcd error. IOError if
  // no endpoint answered.
  Status Call(const char* path, const std::string& body, std::string* reply)
      LOCKS_EXCLUDED(mu_);

  const Options options_;
  Mutex mu_;
  void* curl_ GUARDED_BY(mu_) = nullptr;  // CURL*
  size_t preferred_ GUARDED_BY(mu_) = 0;  // index of the endpoint to try first
  std::string last_endpoint_ GUARDED_BY(mu_);
};

// Base64 (RFC 4648, with padding), as etcd's JSON carries bytes.
std::string Base64Encode(std::string_view in);
// False if `in` is not valid base64.
bool Base64Decode(std::string_view in, std::string* out);

// Splits "a,b,c" into non-empty endpoints, adding "http://" to those
// without a scheme.
std::vector<std::string> SplitEtcdEndpoints(std::string_view list);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_ETCD_CLIENT_H_
