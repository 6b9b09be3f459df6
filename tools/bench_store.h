// Copyright (c) fencedkv authors.
//
// The two stores fenced_bench drives through one interface:
//  - FencedStore: fencedkv::DB, every write fenced;
//  - RawStore: plain RocksDB with the same options (BuildRocksDBOptions), no
//    fence records and no checks -- the physical limit (--fenced=false).
// The same workload code runs on both, so their ratio is the cost of fencing.

#ifndef FENCEDKV_TOOLS_BENCH_STORE_H_
#define FENCEDKV_TOOLS_BENCH_STORE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/db.h"

namespace fencedkv {
namespace bench {

enum class Outcome { kOk, kNotFound, kStale, kError };

class BenchStore {
 public:
  struct BatchOp {
    std::string_view key;
    std::string_view value;
    Token token;
    bool is_delete;
  };

  virtual ~BenchStore() = default;
  virtual bool fenced() const = 0;
  virtual Outcome Put(std::string_view key, std::string_view value,
                      Token token) = 0;
  virtual Outcome Delete(std::string_view key, Token token) = 0;
  virtual Outcome Write(const std::vector<BatchOp>& ops) = 0;
  virtual Outcome Get(std::string_view key, std::string* value) = 0;
  // n reads from one view through the store's batched MultiGet; outcomes[i]
  // is kOk (values[i] set), kNotFound or kError.
  virtual void MultiGet(size_t n, const std::string_view* keys,
                        std::string* values, Outcome* outcomes) = 0;
  // A new iterator, Seek(target): *found if it lands on target; then up to
  // `nexts` Next(), adding the key and value bytes of each entry passed to
  // *bytes. kError on an iterator error.
  virtual Outcome Seek(std::string_view target, int nexts, bool* found,
                       uint64_t* bytes) = 0;
  // Raw store: a plain Get.
  virtual Outcome GetFenced(std::string_view key, Token token,
                            std::string* value) = 0;
  // Raw store: kError (not applicable).
  virtual Outcome AdvanceFence(std::string_view key, Token token) = 0;
  // Raw store: 0.
  virtual Token GetFence(std::string_view key) = 0;
  // Visits up to n keys in order from the first, calling fn(key bytes +
  // value bytes) for each; returns false on an iterator error.
  virtual bool Scan(uint64_t n, const std::function<void(size_t)>& fn) = 0;
  virtual Outcome Compact() = 0;
  virtual std::string Property(const std::string& name) = 0;
  // The high-water mark of stored tokens (0 for the raw store or an empty DB).
  virtual Token HighWaterMark() = 0;
  // The last error's text (valid after kError).
  virtual std::string LastError() const = 0;
};

struct StoreOptions {
  Options options;        // shared by both stores
  bool sync = false;      // WriteOptions::sync
  Token fence_floor = 0;  // fenced store: SetFenceFloor at open when > 0
};

// Opens (creating if needed) the store at `path`. On failure returns nullptr
// and sets *error.
std::unique_ptr<BenchStore> OpenFencedStore(const StoreOptions& options,
                                            const std::string& path,
                                            std::string* error);
std::unique_ptr<BenchStore> OpenRawStore(const StoreOptions& options,
                                         const std::string& path,
                                         std::string* error);
// Whether `path` holds a RocksDB database (its CURRENT file), fencedkv's or
// not.
bool StoreExists(const std::string& path);
// Whether fenced_bench may destroy what is at `path` and create a database
// there: nothing, an empty directory, a fencedkv database, or a raw database
// it created itself (--fenced=false; OpenRawStore marks those). Anything
// else (a plain RocksDB database, a directory of other files, a file) is
// false, with *error saying what it is: DestroyDB would delete whatever
// RocksDB-named files it holds (000001.log, LOG, ...).
bool MayReplace(const std::string& path, std::string* error);
// Removes the database files at `path` (RocksDB's DestroyDB: only files
// RocksDB recognizes are deleted) and the raw store's mark.
// REQUIRES: MayReplace(path).
bool DestroyStore(const std::string& path, std::string* error);

}  // namespace bench
}  // namespace fencedkv

#endif  // FENCEDKV_TOOLS_BENCH_STORE_H_
