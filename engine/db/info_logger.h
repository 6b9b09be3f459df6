// Copyright (c) fencedkv authors.
//
// InfoLogger: RocksDB's info LOG (the text log in the database directory),
// written so that a full disk cannot take the process down.
//
// RocksDB 7.8's own logger (EnvLogger) writes through a WritableFileWriter,
// which refuses every write after a failed one; in Debian's build (which
// keeps assertions on) the next LOG line after a failed write, for example
// on a full disk, aborts the process. This logger writes each line with
// stdio and drops the lines it cannot write (counting them), so a full disk
// costs log lines, never the process, and logging resumes with the space.
//
// Like RocksDB's, it renames an existing LOG to LOG.old.<microseconds> when
// it starts (RocksDB deletes the old ones beyond keep_log_file_num). It
// opens the file at the first line, so a database that is only inspected
// (and then refused) is not touched.
//
// Thread-safe.

#ifndef FENCEDKV_ENGINE_DB_INFO_LOGGER_H_
#define FENCEDKV_ENGINE_DB_INFO_LOGGER_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include <rocksdb/env.h>

#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {

class InfoLogger : public rocksdb::Logger {
 public:
  // Logs to <dir>/LOG.
  explicit InfoLogger(std::string dir);
  ~InfoLogger() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void Flush() override;
  size_t GetLogFileSize() const override;

  // Lines that could not be written.
  uint64_t dropped() const;

 protected:
  rocksdb::Status CloseImpl() override;

 private:
  void OpenLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  mutable Mutex mu_;
  bool opened_ GUARDED_BY(mu_) = false;
  std::FILE* file_ GUARDED_BY(mu_) = nullptr;
  size_t size_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
};

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_INFO_LOGGER_H_
