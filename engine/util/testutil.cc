// Copyright (c) fencedkv authors.

#include "util/testutil.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string_view>

#include <sys/mount.h>

namespace fencedkv {
namespace test {

TempDir::TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base ? base : "/tmp") +
                     "/fencedkv_test_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + tmpl);
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

uint64_t PropertyNumber(DB* db, const std::string& property,
                        const std::string& name) {
  std::string v;
  if (!db->GetProperty(property, &v)) return 0;
  const std::string lines = "\n" + v;
  const size_t at = lines.find("\n" + name + ": ");
  if (at == std::string::npos) return 0;
  return std::strtoull(lines.c_str() + at + name.size() + 3, nullptr, 10);
}

ScopedUnmount::~ScopedUnmount() {
  if (umount(at.c_str()) != 0) umount2(at.c_str(), MNT_DETACH);
}

std::string StatusString(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kNotFound:
      return "NOT_FOUND";
    case Status::Code::kInvalidArgument:
      return "INVALID";
    case Status::Code::kCorruption:
      return "CORRUPTION";
    case Status::Code::kNotSupported:
      return "NOT_SUPPORTED";
    case Status::Code::kIOError:
      return "IO_ERROR";
    case Status::Code::kBusy:
      return "BUSY";
    case Status::Code::kLeaseHeld:
      return "LEASE_HELD";
    case Status::Code::kLeaseLost:
      return "LEASE_LOST";
    case Status::Code::kShutdown:
      return "SHUTDOWN";
    case Status::Code::kTokenSkew:
      return "TOKEN_SKEW";
    case Status::Code::kReadOnly:
      return "READ_ONLY";
    case Status::Code::kStaleToken: {
      const StaleTokenInfo* st = s.stale();
      std::string op = st->reason == StaleReason::kNotAboveMax ? "<=" : "<";
      std::string what = st->reason == StaleReason::kBelowFloor ? "floor" : "";
      return "STALE(" + std::to_string(st->offered) + op + what +
             std::to_string(st->max) + ")";
    }
  }
  return "UNKNOWN";
}

std::string StateOf(DB* db, const std::vector<std::string>& keys) {
  std::string out;
  auto it = db->NewIterator(ReadOptions());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out += std::string(it->key()) + "=" + std::string(it->value()) + ";";
  }
  if (!it->status().ok()) out += "iterator error: " + it->status().ToString();
  out += " | fences:";
  for (const auto& k : keys) {
    Token max = 0;
    Status s = db->GetFence(k, &max);
    out += " " + k + "=" + (s.ok() ? std::to_string(max) : s.ToString());
  }
  return out;
}

std::string StateOf(const ModelDB& model,
                    const std::vector<std::string>& keys) {
  std::string out = model.Contents() + " | fences:";
  for (const auto& k : keys) {
    out += " " + k + "=" + std::to_string(model.Reported(k));
  }
  return out;
}

size_t CatchUp(DB* from, DB* replica) {
  std::unique_ptr<LogReader> reader;
  EXPECT_FENCEDKV_OK(
      from->NewLogReader(replica->GetLatestSequenceNumber(), &reader));
  if (reader == nullptr) return 0;
  uint64_t seq;
  std::string_view data;
  size_t n = 0;
  while (reader->Next(&seq, &data)) {
    Status s = replica->ApplyLogBatch(WriteOptions(), seq, data);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    ++n;
  }
  EXPECT_FENCEDKV_OK(reader->status());
  return n;
}

}  // namespace test
}  // namespace fencedkv
