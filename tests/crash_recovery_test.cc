// Copyright (c) fencedkv authors.
//
// Crash recovery with real processes. A child (crash_child) does fenced
// writes with sync=true and reports every intent and acknowledgement through
// a pipe; the parent kills it with SIGKILL at a random moment, reopens the
// database and checks it against a model fed with the child's reports:
//  - every acknowledged write is present, or superseded by a later one;
//  - the one write in flight at the kill is either wholly applied or wholly
//    absent (batches included);
//  - no max token went backwards; data and tokens agree;
//  - every verdict the child saw (OK / STALE / max after advance) is the one
//    the model predicts.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "fencedkv/db.h"
#include "util/model_db.h"
#include "util/testutil.h"

#ifndef FENCEDKV_CRASH_CHILD
#error "FENCEDKV_CRASH_CHILD must name the crash_child executable"
#endif

namespace fencedkv {
namespace {

struct ChildOp {
  char kind;  // P D A B
  std::vector<test::ModelDB::BatchOp> ops;  // for P/D/B
  std::string key;                          // for A
  Token token = 0;                          // for A
};

bool ParseIntent(const std::string& line, ChildOp* op) {
  std::istringstream in(line);
  std::string tag, id;
  in >> tag >> id >> op->kind;
  op->ops.clear();
  auto read_one = [&](char kind) {
    std::string k, v;
    Token t = 0;
    in >> k;
    if (kind == 'P') in >> v;
    in >> t;
    op->ops.emplace_back(kind == 'P', k, v, t);
  };
  switch (op->kind) {
    case 'P':
    case 'D':
      read_one(op->kind);
      break;
    case 'A':
      in >> op->key >> op->token;
      break;
    case 'B': {
      int n = 0;
      in >> n;
      for (int i = 0; i < n; ++i) {
        char kind;
        in >> kind;
        read_one(kind);
      }
      break;
    }
    default:
      return false;
  }
  return !in.fail();
}

// Applies op to the model; returns the verdict string the child should have
// reported ("OK", "STALE", "ADV <n>").
std::string Apply(test::ModelDB* model, const ChildOp& op) {
  if (op.kind == 'A') return "ADV " + std::to_string(model->Advance(op.key, op.token));
  int index = -1;
  std::string r = model->Write(op.ops, &index);
  return r == "OK" ? "OK" : "STALE";
}

// Empty if the database matches the model exactly (values and fences).
std::string Diff(DB* db, const test::ModelDB& model,
                 const std::vector<std::string>& keys) {
  std::string contents;
  auto it = db->NewIterator(ReadOptions());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    contents += std::string(it->key()) + "=" + std::string(it->value()) + ";";
  }
  if (!it->status().ok()) return "iterator: " + it->status().ToString();
  if (contents != model.Contents()) {
    return "contents differ:\n db:    " + contents + "\n model: " + model.Contents();
  }
  for (const auto& k : keys) {
    Token max = 0;
    Status s = db->GetFence(k, &max);
    if (!s.ok()) return "GetFence: " + s.ToString();
    if (max != model.Reported(k)) {
      return "fence of " + k + ": db " + std::to_string(max) + " model " +
             std::to_string(model.Reported(k));
    }
  }
  return "";
}

struct CrashStats {
  int cycles = 0;
  uint64_t acked_writes = 0;  // acknowledged OK writes, all verified
  uint64_t acked_stale = 0;
  uint64_t in_flight_applied = 0;
  uint64_t in_flight_absent = 0;
};

void RunCrashCycles(const char* domain, int cycles, uint32_t seed,
                    CrashStats* stats) {
  test::TempDir dir;
  const std::string db_path = dir.Sub("db");
  FenceDomainSpec spec;
  ASSERT_FENCEDKV_OK(FenceDomainSpec::Parse(domain, &spec));
  test::ModelDB model(spec, FenceMode::kMonotonic);
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back("u{g" + std::to_string(i % 5) + "}:" + std::to_string(i));
  }
  std::mt19937 rng(seed);
  Token base = 10;
  std::map<std::string, Token> last_fences;

  for (int cycle = 0; cycle < cycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    int pipefd[2];
    ASSERT_EQ(0, pipe(pipefd));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(pipefd[1], STDOUT_FILENO);
      close(pipefd[0]);
      close(pipefd[1]);
      const std::string child_seed = std::to_string(rng());
      const std::string base_s = std::to_string(base);
      const std::string cycle_s = std::to_string(cycle);
      execl(FENCEDKV_CRASH_CHILD, FENCEDKV_CRASH_CHILD, db_path.c_str(), domain,
            child_seed.c_str(), base_s.c_str(), cycle_s.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(pipefd[1]);
    FILE* in = fdopen(pipefd[0], "r");
    ASSERT_NE(nullptr, in);

    // Let it run for a random while after it is ready, then SIGKILL.
    const int run_ms = 5 + static_cast<int>(rng() % 120);
    std::vector<std::string> lines;
    char buf[4096];
    bool ready = false;
    auto deadline = std::chrono::steady_clock::time_point::max();
    while (std::chrono::steady_clock::now() < deadline &&
           fgets(buf, sizeof(buf), in) != nullptr) {
      std::string line(buf);
      if (!line.empty() && line.back() == '\n') line.pop_back();
      if (line == "READY") {
        ready = true;
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(run_ms);
        continue;
      }
      lines.push_back(line);
    }
    kill(pid, SIGKILL);
    // Drain whatever the child wrote before it died.
    while (fgets(buf, sizeof(buf), in) != nullptr) {
      std::string line(buf);
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        lines.push_back(line);
      }  // a torn last line is an intent never completed: ignore it
    }
    fclose(in);
    int wstatus = 0;
    ASSERT_EQ(pid, waitpid(pid, &wstatus, 0));
    ASSERT_TRUE(ready) << "child never became ready";
    ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "child exited by itself, status " << wstatus;

    // Feed the model with what was acknowledged, checking each verdict.
    bool pending = false;
    ChildOp op;
    for (const std::string& line : lines) {
      if (line.rfind("I ", 0) == 0) {
        ASSERT_FALSE(pending) << "two intents without a result";
        ASSERT_TRUE(ParseIntent(line, &op)) << line;
        pending = true;
      } else if (line.rfind("R ", 0) == 0) {
        ASSERT_TRUE(pending) << line;
        const std::string got = line.substr(line.find(' ', 2) + 1);
        const std::string want = Apply(&model, op);
        ASSERT_EQ(want, got) << "verdict differs from the model for " << line;
        if (got == "OK") ++stats->acked_writes;
        if (got == "STALE") ++stats->acked_stale;
        for (const auto& bop : op.ops) {
          base = std::max(base, std::get<3>(bop));
        }
        if (op.kind == 'A') base = std::max(base, op.token);
        pending = false;
      } else {
        FAIL() << "unexpected line from child: " << line;
      }
    }

    // Reopen after the crash and compare with the model, with or without
    // the op that was in flight.
    Options options;
    options.fence_domain = domain;
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(options, db_path, &db));
    std::string diff = Diff(db.get(), model, keys);
    if (!diff.empty() && pending) {
      test::ModelDB with_in_flight = model;
      Apply(&with_in_flight, op);
      const std::string diff2 = Diff(db.get(), with_in_flight, keys);
      if (diff2.empty()) {
        model = with_in_flight;
        diff.clear();
        ++stats->in_flight_applied;
      }
    } else if (pending) {
      ++stats->in_flight_absent;
    }
    ASSERT_EQ("", diff) << "recovered state matches no acknowledged prefix";
    for (const auto& k : keys) {
      Token max = 0;
      ASSERT_FENCEDKV_OK(db->GetFence(k, &max));
      ASSERT_GE(max, last_fences[k]) << "max token of " << k << " went back";
      last_fences[k] = max;
    }
    ++stats->cycles;
  }
}

TEST(CrashRecoveryTest, KillNineDuringSyncedFencedWrites) {
  CrashStats key_stats, tag_stats;
  RunCrashCycles("key", 20, 7, &key_stats);
  RunCrashCycles("hashtag", 10, 11, &tag_stats);
  const int cycles = key_stats.cycles + tag_stats.cycles;
  const uint64_t acked = key_stats.acked_writes + tag_stats.acked_writes;
  std::printf(
      "crash recovery: %d kill -9 cycles, %llu acknowledged writes verified, "
      "%llu acknowledged rejections, in-flight at kill: %llu applied, %llu "
      "absent, violations: 0\n",
      cycles, static_cast<unsigned long long>(acked),
      static_cast<unsigned long long>(key_stats.acked_stale +
                                      tag_stats.acked_stale),
      static_cast<unsigned long long>(key_stats.in_flight_applied +
                                      tag_stats.in_flight_applied),
      static_cast<unsigned long long>(key_stats.in_flight_absent +
                                      tag_stats.in_flight_absent));
  EXPECT_EQ(30, cycles);
  EXPECT_GT(acked, 100u);
}

}  // namespace
}  // namespace fencedkv
