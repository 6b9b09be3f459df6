// Copyright (c) fencedkv authors.

#include "etcd_revision.h"

#include <charconv>

#include <curl/curl.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "util/thread_name.h"

namespace fencedkv {
namespace server {

namespace {

constexpr size_t kMaxReplyBytes = 64 << 10;

size_t Append(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * n > kMaxReplyBytes) return 0;  // aborts the call
  body->append(data, size * n);
  return size * n;
}

// POSTs a count-only range of key "\0" (base64 "AA==") to one endpoint.
Status AskEndpoint(const std::string& endpoint,
                   std::chrono::milliseconds timeout, uint64_t* revision) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(),
                                              curl_easy_cleanup);
  if (curl == nullptr) return Status::IOError("curl_easy_init failed");
  const std::string url = endpoint + "/v3/kv/range";
  static const char kRequest[] = R"({"key":"AA==","count_only":true})";
  std::string body;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, kRequest);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS,
                   static_cast<long>(timeout.count()));
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  const CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) {
    return Status::IOError("etcd " + url, curl_easy_strerror(rc));
  }
  long http = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &http);
  if (http != 200 || !ParseEtcdRevision(body, revision)) {
    return Status::IOError(
        "etcd " + url, "HTTP " + std::to_string(http) + ", no header.revision");
  }
  return Status::OK();
}

}  // namespace

bool ParseEtcdRevision(const std::string& body, uint64_t* revision) {
  const auto json =
      nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("header")) return false;
  const auto& header = json["header"];
  if (!header.is_object() || !header.contains("revision")) return false;
  const auto& rev = header["revision"];
  if (rev.is_number_unsigned()) {
    *revision = rev.get<uint64_t>();
    return true;
  }
  if (!rev.is_string()) return false;
  const std::string text = rev.get<std::string>();
  uint64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() ||
      r.ptr != text.data() + text.size()) {
    return false;
  }
  *revision = v;
  return true;
}

EtcdRevisionSource::EtcdRevisionSource(DB* db, const Options& options)
    : db_(db), options_(options) {}

std::unique_ptr<EtcdRevisionSource> EtcdRevisionSource::Start(
    DB* db, const Options& options, Status* first) {
  curl_global_init(CURL_GLOBAL_DEFAULT);  // once per process; idempotent
  std::unique_ptr<EtcdRevisionSource> source(
      new EtcdRevisionSource(db, options));
  *first = source->Refresh();
  source->thread_ = std::thread([s = source.get()] {
    SetThreadName("fencedkv:etcdrv");
    s->Run();
  });
  return source;
}

EtcdRevisionSource::~EtcdRevisionSource() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status EtcdRevisionSource::Refresh() {
  Status last = Status::IOError("no etcd endpoint");
  for (const auto& endpoint : options_.endpoints) {
    uint64_t rev = 0;
    last = AskEndpoint(endpoint, options_.timeout, &rev);
    if (last.ok()) {
      revision_.store(rev);
      db_->NoteIssuedToken(rev);
      return last;
    }
  }
  return last;
}

void EtcdRevisionSource::Run() {
  auto last_warning = std::chrono::steady_clock::time_point();
  mu_.Lock();
  while (!stop_) {
    cv_.wait_for(mu_, options_.refresh);  // early wakeups: an early refresh
    if (stop_) break;
    mu_.Unlock();
    const Status s = Refresh();
    const auto now = std::chrono::steady_clock::now();
    if (!s.ok() && now - last_warning > std::chrono::seconds(60)) {
      LOG(WARNING) << "token source: " << s.ToString()
                   << " (the skew guard keeps revision " << revision() << ")";
      last_warning = now;
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace server
}  // namespace fencedkv
