// Copyright (c) fencedkv authors.
//
// Crash recovery with real processes. A child (crash_child) does fenced
// writes and reports every intent and acknowledgement through a pipe; the
// parent kills it with SIGKILL at a random moment, reopens the database and
// checks it against a model fed with the child's reports. Three modes:
//  - sync / nosync: every write is synced / none is; SIGKILL is a process
//    crash. Every acknowledged write is there (or superseded), the one in
//    flight is wholly applied or wholly absent.
//  - power: the child writes through test::FaultInjectionFS, which keeps
//    unsynced data in memory, so SIGKILL is a power cut, and a third of its
//    writes are synced. The recovered state must be the model after a prefix
//    of the acknowledged history (plus, perhaps, the call in flight) that
//    holds every call acknowledged with sync and every AdvanceFence, and
//    every call before them.
// In both: no max token goes backwards (from the synced history); data and
// tokens agree; every verdict the child saw (OK / STALE / max after
// advance) is the one the model predicts.
//
// FENCEDKV_CRASH_CYCLES=N runs N cycles per domain instead of the default
// (scripts/crash_loop.sh); each test prints its figures.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fencedkv/db.h"

#include "util/model_db.h"
#include "util/testutil.h"

#ifndef FENCEDKV_CRASH_CHILD
#error "FENCEDKV_CRASH_CHILD must name the crash_child executable"
#endif

namespace fencedkv {
namespace {

struct ChildOp {
  char kind;                                // P D A B
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
  if (op.kind == 'A')
    return "ADV " + std::to_string(model->Advance(op.key, op.token));
  int index = -1;
  std::string r = model->Write(op.ops, &index);
  return r == "OK" ? "OK" : "STALE";
}

struct CrashStats {
  int cycles = 0;
  uint64_t acked_writes = 0;  // acknowledged OK writes, all verified
  uint64_t acked_stale = 0;
  uint64_t acked_advances = 0;
  uint64_t synced = 0;  // acknowledged calls that had to survive
  uint64_t in_flight_applied = 0;
  uint64_t in_flight_absent = 0;
  uint64_t lost_unsynced = 0;  // power: acknowledged, unsynced, not recovered
  uint64_t kept_unsynced = 0;  // power: acknowledged, unsynced, recovered
  int max_lost = 0;            // the most unsynced calls one cycle lost
  uint64_t acked_calls = 0;    // acknowledged calls that changed the model
  uint64_t recovered = 0;      // ... of which recovered (prefix lengths)

  void Add(const CrashStats& o) {
    cycles += o.cycles;
    acked_writes += o.acked_writes;
    acked_stale += o.acked_stale;
    acked_advances += o.acked_advances;
    synced += o.synced;
    in_flight_applied += o.in_flight_applied;
    in_flight_absent += o.in_flight_absent;
    lost_unsynced += o.lost_unsynced;
    kept_unsynced += o.kept_unsynced;
    max_lost = std::max(max_lost, o.max_lost);
    acked_calls += o.acked_calls;
    recovered += o.recovered;
  }
};

int CyclesFromEnv(int default_cycles) {
  const char* env = std::getenv("FENCEDKV_CRASH_CYCLES");
  if (env == nullptr || *env == '\0') return default_cycles;
  return std::max(1, std::atoi(env));
}

// Runs `cycles` kill -9 cycles of crash_child in `mode` ("sync", "nosync"
// or "power") on one database, checking each recovery.
void RunCrashCycles(const char* domain, const char* mode, int cycles,
                    uint32_t seed, CrashStats* stats) {
  const bool power = std::string(mode) == "power";
  test::TempDir dir;
  const std::string db_path = dir.Sub("db");
  FenceDomainSpec spec;
  ASSERT_FENCEDKV_OK(FenceDomainSpec::Parse(domain, &spec));
  test::ModelDB model(spec, FenceMode::kMonotonic);
  std::vector<std::string> keys;
  keys.reserve(40);
  for (int i = 0; i < 40; ++i) {
    keys.push_back("u{g" + std::to_string(i % 5) + "}:" + std::to_string(i));
  }
  std::mt19937 rng(seed);
  Token base = 10;

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
            child_seed.c_str(), base_s.c_str(), cycle_s.c_str(), mode,
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
    // states[i]: the model after the first i acknowledged calls of this
    // cycle; must_keep: the calls up to the last one that had to be durable.
    std::vector<test::ModelDB> states = {model};
    std::vector<std::string> calls = {""};  // calls[i]: the i-th call's intent
    std::vector<bool> synced_call = {false};
    size_t must_keep = 0;
    std::string intent;
    CrashStats cs;
    bool pending = false;
    bool pending_sync = false;
    ChildOp op;
    for (const std::string& line : lines) {
      if (line.rfind("I ", 0) == 0) {
        ASSERT_FALSE(pending) << "two intents without a result";
        ASSERT_TRUE(ParseIntent(line, &op)) << line;
        intent = line;
        pending = true;
        pending_sync = !power || line.size() < 2 ||
                       line.compare(line.size() - 2, 2, " S") == 0;
      } else if (line.rfind("R ", 0) == 0) {
        ASSERT_TRUE(pending) << line;
        const std::string got = line.substr(line.find(' ', 2) + 1);
        test::ModelDB before = model;
        const std::string want = Apply(&model, op);
        ASSERT_EQ(want, got) << "verdict differs from the model for " << line;
        if (got == "OK") ++cs.acked_writes;
        if (got == "STALE") ++cs.acked_stale;
        if (op.kind == 'A') ++cs.acked_advances;
        for (const auto& bop : op.ops) {
          base = std::max(base, std::get<3>(bop));
        }
        if (op.kind == 'A') base = std::max(base, op.token);
        if (got != "STALE") {
          states.push_back(model);
          calls.push_back(intent);
          calls.back().append(" -> ").append(got);
          synced_call.push_back(false);
        }
        // Synced: a synced write, or any AdvanceFence (always synced, even
        // when it raises nothing: the max it reports must survive).
        const bool advance_synced = op.kind == 'A';
        if ((got == "OK" && pending_sync) || advance_synced) {
          must_keep = states.size() - 1;
          synced_call.back() = true;
          ++cs.synced;
        }
        pending = false;
      } else {
        FAIL() << "unexpected line from child: " << line;
      }
    }

    // Reopen after the crash. Sync mode: the state is the model, with or
    // without the op in flight. Power mode: the model after some prefix of
    // at least must_keep calls (the one in flight only after all of them).
    Options options;
    options.fence_domain = domain;
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(options, db_path, &db));
    const std::string state = test::StateOf(db.get(), keys);
    const size_t first = power ? must_keep : states.size() - 1;
    size_t found = states.size();
    for (size_t p = states.size(); p-- > first;) {
      if (test::StateOf(states[p], keys) == state) {
        found = p;
        break;
      }
    }
    if (found < states.size()) {
      model = states[found];
      if (pending) ++cs.in_flight_absent;
    } else if (pending) {
      test::ModelDB with_in_flight = model;
      Apply(&with_in_flight, op);
      ASSERT_EQ(test::StateOf(with_in_flight, keys), state)
          << "recovered state matches no acknowledged prefix (of at least "
          << first << " of " << states.size() - 1 << " calls)";
      model = with_in_flight;
      found = states.size() - 1;
      ++cs.in_flight_applied;
    } else {
      FAIL() << "recovered state matches no acknowledged prefix (of at least "
             << first << " of " << states.size() - 1 << " calls):\n  " << state
             << "\n  last synced: " << test::StateOf(states[must_keep], keys);
    }
    // No max went back from the synced history.
    for (const auto& k : keys) {
      Token max = 0;
      ASSERT_FENCEDKV_OK(db->GetFence(k, &max));
      ASSERT_GE(max, states[must_keep].Reported(k))
          << "max token of " << k << " went back";
    }
    const size_t lost = states.size() - 1 - found;
    cs.lost_unsynced = lost;
    cs.kept_unsynced = found - must_keep;
    cs.max_lost = static_cast<int>(lost);
    cs.acked_calls = states.size() - 1;
    cs.recovered = found;
    cs.cycles = 1;
    stats->Add(cs);
  }
}

void PrintStats(const char* mode, const CrashStats& st, double seconds) {
  std::printf(
      "crash recovery (%s): %d kill -9 cycles in %.1f s, %llu acknowledged "
      "writes, %llu acknowledged rejections, %llu advances, %llu calls that "
      "had to survive did; recovered prefixes: %llu of %llu acknowledged "
      "calls; unsynced "
      "calls lost %llu (at most %d in a cycle), kept %llu; in-flight at kill: "
      "%llu applied, %llu absent; violations: 0\n",
      mode, st.cycles, seconds,
      static_cast<unsigned long long>(st.acked_writes),
      static_cast<unsigned long long>(st.acked_stale),
      static_cast<unsigned long long>(st.acked_advances),
      static_cast<unsigned long long>(st.synced),
      static_cast<unsigned long long>(st.recovered),
      static_cast<unsigned long long>(st.acked_calls),
      static_cast<unsigned long long>(st.lost_unsynced), st.max_lost,
      static_cast<unsigned long long>(st.kept_unsynced),
      static_cast<unsigned long long>(st.in_flight_applied),
      static_cast<unsigned long long>(st.in_flight_absent));
}

void RunMode(const char* mode, int key_cycles, int tag_cycles) {
  const auto start = std::chrono::steady_clock::now();
  CrashStats key_stats, tag_stats;
  RunCrashCycles("key", mode, CyclesFromEnv(key_cycles), 7, &key_stats);
  ASSERT_FALSE(testing::Test::HasFatalFailure());
  RunCrashCycles("hashtag", mode, CyclesFromEnv(tag_cycles), 11, &tag_stats);
  ASSERT_FALSE(testing::Test::HasFatalFailure());
  key_stats.Add(tag_stats);
  PrintStats(
      mode, key_stats,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  EXPECT_EQ(CyclesFromEnv(key_cycles) + CyclesFromEnv(tag_cycles),
            key_stats.cycles);
  EXPECT_GT(key_stats.acked_writes, 100u);
}

TEST(CrashRecoveryTest, KillNineDuringSyncedFencedWrites) {
  RunMode("sync", 20, 10);
}

TEST(CrashRecoveryTest, KillNineDuringUnsyncedFencedWrites) {
  RunMode("nosync", 10, 5);
}

TEST(CrashRecoveryTest, PowerLossKeepsASyncedPrefix) {
  RunMode("power", 20, 10);
}

}  // namespace
}  // namespace fencedkv
