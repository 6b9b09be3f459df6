// Copyright (c) fencedkv authors.
//
// Shared by the libFuzzer targets of tests/fuzz.

#ifndef FENCEDKV_TESTS_FUZZ_FUZZ_UTIL_H_
#define FENCEDKV_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <unistd.h>

namespace fencedkv {
namespace fuzz {

// A directory of this process's own for the databases the target creates:
// under $FENCEDKV_FUZZ_DIR, else /dev/shm (a tmpfs: no disk I/O), else /tmp.
// Created on the first call, removed at exit. Aborts if it cannot be made.
inline const std::string& ProcessDir() {
  // Never destroyed: the exit handler below still needs it.
  static const std::string* const dir = [] {
    const char* env = std::getenv("FENCEDKV_FUZZ_DIR");
    const std::string base = env != nullptr && *env          ? env
                             : access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                             : "/tmp";
    std::string tmpl = base + "/fencedkv_fuzz_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror(tmpl.c_str());
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ProcessDir(), ec);
    });
    return new std::string(tmpl);
  }();
  return *dir;
}

// ProcessDir()/db, emptied: a fresh database path for one input.
inline std::string FreshDbPath() {
  std::string path = ProcessDir() + "/db";
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return path;
}

// The default file system without preallocation: RocksDB fallocates each
// new WAL to 1.1 x the largest write buffer (64 MiB for the meta column
// family), which on a tmpfs means allocating and then truncating that much
// memory per database, a quarter of an input's time.
class NoFallocateFileSystem : public rocksdb::FileSystemWrapper {
 public:
  NoFallocateFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "NoFallocateFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* d) override {
    return target()->NewWritableFile(f, NoFallocate(o), r, d);
  }
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* d) override {
    return target()->ReopenWritableFile(f, NoFallocate(o), r, d);
  }
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& f, const std::string& old,
      const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* d) override {
    return target()->ReuseWritableFile(f, old, NoFallocate(o), r, d);
  }

 private:
  static rocksdb::FileOptions NoFallocate(rocksdb::FileOptions o) {
    o.allow_fallocate = false;
    return o;
  }
};

// The Env the targets give Options::env (lives until exit).
inline rocksdb::Env* FuzzEnv() {
  static rocksdb::Env* const env =
      rocksdb::NewCompositeEnv(std::make_shared<NoFallocateFileSystem>())
          .release();
  return env;
}

}  // namespace fuzz
}  // namespace fencedkv

#endif  // FENCEDKV_TESTS_FUZZ_FUZZ_UTIL_H_
