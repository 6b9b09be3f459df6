// Copyright (c) fencedkv authors.
//
// fencedkv_demo: the paused-holder scenario, step by step, on the embedded API.
//
// Holder A gets the lease with token 7 and writes. A pauses (a GC pause, a
// SIGSTOP); its lease expires; holder B gets the lease with token 8, fences A
// out with AdvanceFence and writes. A wakes up, still believing it holds the
// lease, and writes with token 7: the store refuses it and B's value stands.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <unistd.h>

#include "fencedkv/db.h"

namespace {

int Fail(const char* what, const fencedkv::Status& s) {
  std::fprintf(stderr, "fencedkv_demo: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  bool temporary = false;
  if (argc == 2 && std::string(argv[1]) != "--help") {
    path = argv[1];
  } else if (argc == 1) {
    char tmpl[] = "/tmp/fencedkv_demo_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    path = tmpl;
    temporary = true;
  } else {
    std::printf(
        "usage: fencedkv_demo [db-dir]\n"
        "Walks through the paused-holder scenario on the embedded API.\n");
    return argc == 2 ? 0 : 2;
  }
  fencedkv::Options options;
  options.create_if_missing = true;
  options.fence_domain = "hashtag";  // one domain per {lease}
  std::unique_ptr<fencedkv::DB> db;
  fencedkv::Status s = fencedkv::DB::Open(options, path, &db);
  if (!s.ok()) return Fail("open", s);
  std::printf("fencedkv %s (RocksDB %s), database %s, fence domain %s\n\n",
              FENCEDKV_VERSION_STRING, fencedkv::RocksDBVersion(), path.c_str(),
              db->GetFenceDomain().ToString().c_str());

  fencedkv::WriteOptions wo;
  wo.sync = true;
  const char* kKey = "orders:{shard1}:next-id";
  std::printf("1. Holder A acquires lease shard1 -> token 7, writes %s=100\n",
              kKey);
  s = db->Put(wo, kKey, "100", 7);
  std::printf("   -> %s\n", s.ToString().c_str());
  if (!s.ok()) return Fail("A's first write", s);

  std::printf("2. A pauses (GC, SIGSTOP); its lease expires.\n");
  std::printf(
      "3. Holder B acquires lease shard1 -> token 8 and fences A out:\n"
      "   AdvanceFence({shard1}, 8)\n");
  fencedkv::Token after = 0;
  s = db->AdvanceFence(wo, "{shard1}", 8, &after);
  if (!s.ok()) return Fail("advance", s);
  std::printf("   -> max token of domain shard1 is now %llu\n",
              static_cast<unsigned long long>(after));
  std::printf("4. B writes %s=200 with token 8\n", kKey);
  s = db->Put(wo, kKey, "200", 8);
  std::printf("   -> %s\n", s.ToString().c_str());
  if (!s.ok()) return Fail("B's write", s);

  std::printf(
      "5. A wakes up, still believes it holds the lease, and writes "
      "%s=101 with token 7\n",
      kKey);
  s = db->Put(wo, kKey, "101", 7);
  std::printf("   -> %s\n", s.ToString().c_str());
  if (!s.IsStaleToken()) {
    std::fprintf(stderr, "fencedkv_demo: expected a stale-token rejection\n");
    return 1;
  }
  std::printf("   (offered %llu, max %llu, domain \"%s\")\n",
              static_cast<unsigned long long>(s.stale()->offered),
              static_cast<unsigned long long>(s.stale()->max),
              s.stale()->domain.c_str());
  std::printf(
      "6. A also tries a key of the same lease that B never touched:\n");
  s = db->Put(wo, "orders:{shard1}:audit", "A was here", 7);
  std::printf("   -> %s\n", s.ToString().c_str());

  std::string value;
  s = db->Get(fencedkv::ReadOptions(), kKey, &value);
  if (!s.ok()) return Fail("get", s);
  std::printf("\nResult: %s = %s (B's value stands; A changed nothing)\n", kKey,
              value.c_str());
  const fencedkv::FenceStats st = db->GetFenceStats();
  std::printf("Stats: %llu accepted, %llu rejected, %llu advances\n",
              static_cast<unsigned long long>(st.accepted_writes),
              static_cast<unsigned long long>(st.rejected_writes),
              static_cast<unsigned long long>(st.advances));
  db.reset();
  if (temporary) std::filesystem::remove_all(path);
  return 0;
}
