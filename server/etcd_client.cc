// Copyright (c) fencedkv authors.

#include "etcd_client.h"

#include <charconv>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

namespace fencedkv {
namespace server {

namespace {

using json = nlohmann::json;

// etcd replies hold a few records; a shard's record and member keys are
// small. Anything larger is not an answer we asked for.
constexpr size_t kMaxReplyBytes = 4 << 20;

// gRPC status codes etcd puts in its JSON errors.
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcUnavailable = 14;

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * n > kMaxReplyBytes) return 0;  // aborts the call
  body->append(data, size * n);
  return size * n;
}

// etcd's JSON writes int64 fields as decimal strings (and omits zeros).
int64_t Int64Field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return 0;
  const std::string& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

bool ParseKv(const json& j, EtcdKv* kv) {
  if (!j.is_object()) return false;
  auto key = j.find("key");
  if (key == j.end() || !key->is_string() ||
      !Base64Decode(key->get_ref<const std::string&>(), &kv->key)) {
    return false;
  }
  kv->value.clear();
  auto value = j.find("value");
  if (value != j.end() &&
      (!value->is_string() ||
       !Base64Decode(value->get_ref<const std::string&>(), &kv->value))) {
    return false;
  }
  kv->create_revision = Int64Field(j, "create_revision");
  kv->mod_revision = Int64Field(j, "mod_revision");
  kv->version = Int64Field(j, "version");
  kv->lease = Int64Field(j, "lease");
  return true;
}

// The records of a RangeResponse.
Status ParseKvs(const json& range, std::vector<EtcdKv>* kvs) {
  auto it = range.find("kvs");
  if (it == range.end()) return Status::OK();
  if (!it->is_array()) return Status::Corruption("etcd: kvs is not an array");
  for (const json& j : *it) {
    EtcdKv kv;
    if (!ParseKv(j, &kv)) return Status::Corruption("etcd: a malformed kv");
    kvs->push_back(std::move(kv));
  }
  return Status::OK();
}

// The end of the range of keys starting with `prefix` (etcd's
// clientv3.GetPrefixRangeEnd): the prefix with its last byte below 0xff
// incremented; "\0" (every key) if there is none.
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

json OpJson(const EtcdOp& op) {
  json r;
  switch (op.type) {
    case EtcdOp::Type::kGet:
      r["request_range"] = {{"key", Base64Encode(op.key)}};
      break;
    case EtcdOp::Type::kPut: {
      json put = {{"key", Base64Encode(op.key)},
                  {"value", Base64Encode(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      r["request_put"] = std::move(put);
      break;
    }
    case EtcdOp::Type::kDelete:
      r["request_delete_range"] = {{"key", Base64Encode(op.key)}};
      break;
  }
  return r;
}

json CompareJson(const EtcdCompare& c) {
  static const char* const kResults[] = {"EQUAL", "NOT_EQUAL", "GREATER",
                                         "LESS"};
  json r = {{"key", Base64Encode(c.key)},
            {"result", kResults[static_cast<int>(c.result)]}};
  switch (c.target) {
    case EtcdCompare::Target::kVersion:
      r["target"] = "VERSION";
      r["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kCreate:
      r["target"] = "CREATE";
      r["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kMod:
      r["target"] = "MOD";
      r["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      r["target"] = "VALUE";
      r["value"] = Base64Encode(c.value);
      break;
  }
  return r;
}

// Parses an etcd reply: a JSON object, which is an answer unless it carries
// an error. The error's gRPC code decides whether another endpoint may do
// better (*retry).
Status ParseReply(const std::string& body, json* out, bool* retry) {
  *retry = false;
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!out->is_object()) {
    *retry = true;
    return Status::IOError("etcd: not a JSON object", body.substr(0, 120));
  }
  auto err = out->find("error");
  if (err == out->end()) return Status::OK();
  const int code = static_cast<int>(Int64Field(*out, "code"));
  std::string message = err->is_string() ? err->get<std::string>() : "error";
  if (code == kGrpcNotFound) return Status::NotFound("etcd: " + message);
  *retry = code == kGrpcUnavailable;
  return Status::IOError("etcd: " + message,
                         "gRPC code " + std::to_string(code));
}

}  // namespace

EtcdCompare EtcdCompare::ModRevisionIs(std::string key, int64_t revision) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = Target::kMod;
  c.number = revision;
  return c;
}

EtcdCompare EtcdCompare::Absent(std::string key) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = Target::kCreate;
  c.number = 0;
  return c;
}

EtcdOp EtcdOp::Get(std::string key) {
  EtcdOp op;
  op.type = Type::kGet;
  op.key = std::move(key);
  return op;
}

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.type = Type::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key) {
  EtcdOp op;
  op.type = Type::kDelete;
  op.key = std::move(key);
  return op;
}

EtcdClient::EtcdClient(const Options& options) : options_(options) {
  curl_global_init(CURL_GLOBAL_DEFAULT);  // idempotent
  MutexLock lock(&mu_);
  curl_ = curl_easy_init();
}

EtcdClient::~EtcdClient() {
  MutexLock lock(&mu_);
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string EtcdClient::endpoint() {
  MutexLock lock(&mu_);
  return last_endpoint_;
}

Status EtcdClient::Call(const char* path, const std::string& body,
                        std::string* reply) {
  MutexLock lock(&mu_);
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Status::IOError("curl_easy_init failed");
  const size_t n = options_.endpoints.size();
  if (n == 0) return Status::InvalidArgument("no etcd endpoint");
  Status last;
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (preferred_ + i) % n;
    const std::string url = options_.endpoints[index] + path;
    reply->clear();
    curl_easy_reset(curl);  // keeps the connection cache
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE,
                     static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(options_.timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.timeout.count()));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, reply);
    const CURLcode rc = curl_easy_perform(curl);
    if (rc != CURLE_OK) {
      last = Status::IOError("etcd " + url, curl_easy_strerror(rc));
      continue;
    }
    long http = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
    json parsed;
    bool retry = false;
    last = ParseReply(*reply, &parsed, &retry);
    if (retry) {
      last = Status::IOError("etcd " + url + ": HTTP " + std::to_string(http),
                             last.ToString());
      continue;
    }
    preferred_ = index;
    last_endpoint_ = options_.endpoints[index];
    return last;
  }
  return last;
}

// A reply Call accepted, as JSON.
json Parsed(const std::string& body) {
  return json::parse(body, nullptr, /*allow_exceptions=*/false);
}

Status EtcdClient::Get(std::string_view key, EtcdKv* kv, bool* found,
                       int64_t* revision) {
  const std::string request = json{{"key", Base64Encode(key)}}.dump();
  std::string body;
  Status s = Call("/v3/kv/range", request, &body);
  if (!s.ok()) return s;
  const json reply = Parsed(body);
  std::vector<EtcdKv> kvs;
  s = ParseKvs(reply, &kvs);
  if (!s.ok()) return s;
  *found = !kvs.empty();
  if (*found) *kv = std::move(kvs[0]);
  if (revision != nullptr) *revision = Int64Field(reply["header"], "revision");
  return Status::OK();
}

Status EtcdClient::GetPrefix(std::string_view prefix, std::vector<EtcdKv>* kvs,
                             int64_t limit, int64_t* revision) {
  json request = {{"key", Base64Encode(prefix)},
                  {"range_end", Base64Encode(PrefixEnd(prefix))}};
  if (limit > 0) request["limit"] = std::to_string(limit);
  std::string body;
  Status s = Call("/v3/kv/range", request.dump(), &body);
  if (!s.ok()) return s;
  const json reply = Parsed(body);
  kvs->clear();
  s = ParseKvs(reply, kvs);
  if (s.ok() && revision != nullptr) {
    *revision = Int64Field(reply["header"], "revision");
  }
  return s;
}

Status EtcdClient::Put(std::string_view key, std::string_view value,
                       int64_t lease) {
  json request = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) request["lease"] = std::to_string(lease);
  std::string body;
  return Call("/v3/kv/put", request.dump(), &body);
}

Status EtcdClient::Delete(std::string_view key) {
  const std::string request = json{{"key", Base64Encode(key)}}.dump();
  std::string body;
  return Call("/v3/kv/deleterange", request, &body);
}

Status EtcdClient::Txn(const std::vector<EtcdCompare>& compares,
                       const std::vector<EtcdOp>& success,
                       const std::vector<EtcdOp>& failure, bool* succeeded,
                       std::vector<EtcdKv>* got) {
  json request = {{"compare", json::array()},
                  {"success", json::array()},
                  {"failure", json::array()}};
  for (const auto& c : compares) request["compare"].push_back(CompareJson(c));
  for (const auto& op : success) request["success"].push_back(OpJson(op));
  for (const auto& op : failure) request["failure"].push_back(OpJson(op));
  std::string body;
  Status s = Call("/v3/kv/txn", request.dump(), &body);
  if (!s.ok()) return s;
  const json reply = Parsed(body);
  auto ok = reply.find("succeeded");
  *succeeded = ok != reply.end() && ok->is_boolean() && ok->get<bool>();
  if (got == nullptr) return Status::OK();
  got->clear();
  auto responses = reply.find("responses");
  if (responses == reply.end() || !responses->is_array()) return Status::OK();
  for (const json& r : *responses) {
    auto range = r.find("response_range");
    if (range == r.end()) continue;
    s = ParseKvs(*range, got);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status EtcdClient::LeaseGrant(std::chrono::milliseconds ttl, int64_t* id,
                              std::chrono::milliseconds* granted) {
  const int64_t seconds = std::max<int64_t>(1, (ttl.count() + 999) / 1000);
  const std::string request = json{{"TTL", std::to_string(seconds)}}.dump();
  std::string body;
  Status s = Call("/v3/lease/grant", request, &body);
  if (!s.ok()) return s;
  const json reply = Parsed(body);
  *id = Int64Field(reply, "ID");
  *granted = std::chrono::seconds(Int64Field(reply, "TTL"));
  if (*id == 0 || granted->count() <= 0) {
    return Status::IOError("etcd: lease/grant answered without a lease",
                           reply.dump().substr(0, 200));
  }
  return Status::OK();
}

Status EtcdClient::LeaseKeepAlive(int64_t id, std::chrono::milliseconds* ttl) {
  const std::string request = json{{"ID", std::to_string(id)}}.dump();
  std::string body;
  Status s = Call("/v3/lease/keepalive", request, &body);
  if (!s.ok()) return s;
  const json reply = Parsed(body);
  // A stream of one message: {"result": {"ID": .., "TTL": ..}}; no TTL
  // when the lease is gone.
  auto result = reply.find("result");
  const int64_t seconds = result != reply.end() && result->is_object()
                              ? Int64Field(*result, "TTL")
                              : 0;
  if (seconds <= 0) {
    return Status::NotFound("etcd lease " + std::to_string(id) +
                            " has expired");
  }
  *ttl = std::chrono::seconds(seconds);
  return Status::OK();
}

Status EtcdClient::LeaseRevoke(int64_t id) {
  const std::string request = json{{"ID", std::to_string(id)}}.dump();
  std::string body;
  return Call("/v3/lease/revoke", request, &body);
}

std::string Base64Encode(std::string_view in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) |
                       static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out->clear();
  if (in.size() % 4 != 0) return false;
  out->reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = in[i + j];
      if (c == '=' && i + 4 == in.size() && j >= 2) {
        v[j] = 0;
        ++pad;
      } else if (pad > 0 || (v[j] = value(c)) < 0) {
        return false;
      }
    }
    const uint32_t bits = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out->push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out->push_back(static_cast<char>((bits >> 8) & 0xff));
    if (pad < 1) out->push_back(static_cast<char>(bits & 0xff));
  }
  return true;
}

std::vector<std::string> SplitEtcdEndpoints(std::string_view list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string_view::npos) end = list.size();
    std::string e(list.substr(begin, end - begin));
    while (!e.empty() && e.back() == '/') e.pop_back();
    if (!e.empty()) {
      if (e.find("://") == std::string::npos) e = "http://" + e;
      out.push_back(std::move(e));
    }
    begin = end + 1;
  }
  return out;
}

}  // namespace server
}  // namespace fencedkv
