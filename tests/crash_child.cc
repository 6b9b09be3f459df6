// Copyright (c) fencedkv authors.
//
// The writer process of crash_recovery_test. It opens the database, then
// does random fenced operations forever, reporting each on stdout
// (unbuffered) so the parent knows exactly what was acknowledged:
//   READY
//   I <id> P <key> <value> <token> [S]  intent: Put (S: with sync)
//   I <id> D <key> <token> [S]          intent: Delete
//   I <id> A <key> <token>              intent: AdvanceFence (always synced)
//   I <id> B <n> P|D <key> [<value>] <token> ... [S]   intent: Write(batch)
//   R <id> OK | R <id> STALE | R <id> ADV <max_after>   acknowledged result
// The parent kills it with SIGKILL at a random moment.
//
// Modes: "sync" (every write synced) and "nosync" (none; AdvanceFence is
// always synced): SIGKILL is a process crash. "power": the database does its
// I/O through test::FaultInjectionFS, which keeps unsynced data in memory,
// so SIGKILL is a power cut; a third of the writes are synced.
//
// Usage: crash_child <db> <fence_domain> <seed> <base_token> <cycle> [mode]

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include <rocksdb/env.h>
#include <unistd.h>

#include "fencedkv/db.h"

#include "util/fault_injection_fs.h"

namespace {

void Emit(const std::string& line) {
  std::string out = line + "\n";
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    ssize_t n = write(STDOUT_FILENO, p, left);
    if (n <= 0) std::_Exit(3);
    p += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void Die(const std::string& what, const fencedkv::Status& s) {
  std::fprintf(stderr, "crash_child: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  std::_Exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 7 ? argv[6] : "sync";
  if ((argc != 6 && argc != 7) ||
      (mode != "sync" && mode != "nosync" && mode != "power")) {
    std::fprintf(stderr,
                 "usage: crash_child <db> <fence_domain> <seed> <base_token> "
                 "<cycle> [sync|nosync|power]\n");
    return 1;
  }
  const bool power = mode == "power";
  fencedkv::Options options;
  options.create_if_missing = true;
  options.fence_domain = argv[2];
  std::unique_ptr<rocksdb::Env> env;
  if (power) {
    env = fencedkv::test::FaultInjectionFS::NewEnv(
        std::make_shared<fencedkv::test::FaultInjectionFS>());
    options.env = env.get();
  }
  std::unique_ptr<fencedkv::DB> db;
  fencedkv::Status s = fencedkv::DB::Open(options, argv[1], &db);
  if (!s.ok()) Die("open", s);
  std::mt19937_64 rng(std::strtoull(argv[3], nullptr, 10));
  uint64_t base = std::strtoull(argv[4], nullptr, 10);
  const std::string cycle = argv[5];
  auto key = [&] {
    const uint64_t i = rng() % 40;
    return "u{g" + std::to_string(i % 5) + "}:" + std::to_string(i);
  };
  auto token = [&]() -> uint64_t {
    if (rng() % 20 == 0) base += 1 + rng() % 3;
    const int64_t t =
        static_cast<int64_t>(base) - 6 + static_cast<int64_t>(rng() % 9);
    return t < 1 ? 1 : static_cast<uint64_t>(t);
  };
  fencedkv::WriteOptions wo;
  Emit("READY");
  for (uint64_t id = 0;; ++id) {
    const std::string ids = std::to_string(id);
    wo.sync = mode == "sync" || (power && rng() % 3 == 0);
    const std::string sync_tag = power && wo.sync ? " S" : "";
    const std::string value = "c" + cycle + "-" + ids;
    const uint64_t op = rng() % 100;
    const std::string k = key();
    const uint64_t t = token();
    if (op < 55) {
      Emit("I " + ids + " P " + k + " " + value + " " + std::to_string(t) +
           sync_tag);
      s = db->Put(wo, k, value, t);
    } else if (op < 70) {
      Emit("I " + ids + " D " + k + " " + std::to_string(t) + sync_tag);
      s = db->Delete(wo, k, t);
    } else if (op < 80) {
      Emit("I " + ids + " A " + k + " " + std::to_string(t));
      uint64_t after = 0;
      s = db->AdvanceFence(wo, k, t, &after);
      if (!s.ok()) Die("advance", s);
      Emit("R " + ids + " ADV " + std::to_string(after));
      continue;
    } else {
      fencedkv::WriteBatch batch;
      const uint64_t n = 2 + rng() % 3;
      std::string line = "I " + ids + " B " + std::to_string(n);
      for (uint64_t i = 0; i < n; ++i) {
        const std::string bk = i == 0 ? k : key();
        const uint64_t bt = i == 0 ? t : token();
        if (rng() % 4 == 0) {
          batch.Delete(bk, bt);
          line += " D " + bk + " " + std::to_string(bt);
        } else {
          const std::string bv = value + "b" + std::to_string(i);
          batch.Put(bk, bv, bt);
          line += " P " + bk + " " + bv + " " + std::to_string(bt);
        }
      }
      Emit(line + sync_tag);
      s = db->Write(wo, batch);
    }
    if (s.ok()) {
      Emit("R " + ids + " OK");
    } else if (s.IsStaleToken()) {
      Emit("R " + ids + " STALE");
    } else {
      Die("write", s);
    }
  }
}
