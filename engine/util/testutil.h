// Copyright (c) fencedkv authors.
//
// Test-only helpers: temporary directories, status assertions and a
// compact string form of results so tests read like docs/contract.md:
//   ASSERT_EQ("STALE(7<8)", Put("k", "v", 7));

#ifndef FENCEDKV_ENGINE_UTIL_TESTUTIL_H_
#define FENCEDKV_ENGINE_UTIL_TESTUTIL_H_

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fencedkv/db.h"
#include "fencedkv/status.h"

#include "util/model_db.h"

#define ASSERT_FENCEDKV_OK(expr)                            \
  do {                                                      \
    const ::fencedkv::Status& _s = (expr);                  \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)
#define EXPECT_FENCEDKV_OK(expr)                            \
  do {                                                      \
    const ::fencedkv::Status& _s = (expr);                  \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)

namespace fencedkv {
namespace test {

// A fresh, empty directory under $TEST_TMPDIR (or /tmp); removed with its
// contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // A path inside the directory (not created).
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The number a "name: value" line of db's `property` holds (the
// "fencedkv.wal-sync" and "fencedkv.stats" properties); 0 if none.
uint64_t PropertyNumber(DB* db, const std::string& property,
                        const std::string& name);

// For tests that mount (a tmpfs, a bind mount; they need root): unmounts
// `at` when it goes, lazily if it is busy.
struct ScopedUnmount {
  std::string at;
  ~ScopedUnmount();
};

// "OK", "NOT_FOUND", "STALE(7<8)", "STALE(8<=8)", "STALE(3<floor5)",
// "INVALID", "CORRUPTION", ... (the first word of other codes).
std::string StatusString(const Status& s);

// The state of a database as one string, to compare a DB with a ModelDB:
// every user key=value in order, then the reported max of each of `keys`
// (GetFence). A read error shows up in the string.
std::string StateOf(DB* db, const std::vector<std::string>& keys);
std::string StateOf(const ModelDB& model, const std::vector<std::string>& keys);

// Applies every batch of `from`'s log after `replica`'s latest sequence to
// `replica` (ApplyLogBatch), as a replica's link would; returns how many.
// A failure is a test failure, and stops it.
size_t CatchUp(DB* from, DB* replica);

}  // namespace test
}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_TESTUTIL_H_
