// Copyright (c) fencedkv authors.

#include "db/info_logger.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>

#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

namespace fencedkv {

InfoLogger::InfoLogger(std::string dir)
    : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL),
      dir_(std::move(dir)) {}

InfoLogger::~InfoLogger() { CloseImpl().PermitUncheckedError(); }

rocksdb::Status InfoLogger::CloseImpl() {
  MutexLock lock(&mu_);
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  return rocksdb::Status::OK();
}

void InfoLogger::OpenLocked() {
  opened_ = true;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  const std::string path = dir_ + "/LOG";
  if (fs::exists(path, ec)) {
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    fs::rename(path, path + ".old." + std::to_string(micros), ec);
  }
  file_ = std::fopen(path.c_str(), "a");
  // Unbuffered: a line that cannot be written is gone, not kept to retry.
  if (file_ != nullptr) std::setvbuf(file_, nullptr, _IONBF, 0);
}

void InfoLogger::Logv(const char* format, va_list ap) {
  // "2026/01/31-12:34:56.123456 4242 <message>\n", as RocksDB's LOG.
  char line[4096];
  struct timeval now;
  gettimeofday(&now, nullptr);
  struct tm t;
  localtime_r(&now.tv_sec, &t);
  int n = std::snprintf(
      line, sizeof(line), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %ld ",
      t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
      static_cast<long>(now.tv_usec), static_cast<long>(syscall(SYS_gettid)));
  if (n < 0) return;
  va_list copy;
  va_copy(copy, ap);
  const int m = std::vsnprintf(line + n, sizeof(line) - n, format, copy);
  va_end(copy);
  if (m < 0) return;
  size_t len = std::min(sizeof(line) - 1, static_cast<size_t>(n + m));
  if (len == 0 || line[len - 1] != '\n') {
    if (len == sizeof(line) - 1) --len;  // a long line is cut
    line[len++] = '\n';
  }
  MutexLock lock(&mu_);
  if (!opened_) OpenLocked();
  if (file_ == nullptr || std::fwrite(line, 1, len, file_) != len) {
    ++dropped_;
    if (file_ != nullptr) std::clearerr(file_);
    return;
  }
  size_ += len;
}

void InfoLogger::Flush() {
  MutexLock lock(&mu_);
  if (file_ != nullptr) std::fflush(file_);
}

size_t InfoLogger::GetLogFileSize() const {
  MutexLock lock(&mu_);
  return size_;
}

uint64_t InfoLogger::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace fencedkv
