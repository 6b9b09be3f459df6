// Copyright (c) fencedkv authors.
//
// Which path each command takes on an io loop (ChooseRoute after Admit):
// the fast paths (GETs read together, grouped SET / MSET, the scan thread,
// a long EXEC on the database thread) and everything that falls back to
// Execute on the loop -- in particular every command the gate does not
// admit to run (not logged in, not allowed, wrong arity, inside MULTI).

#include "fast_path.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "util/testutil.h"

namespace fencedkv {
namespace server {
namespace {

const char* Name(Route r) {
  switch (r) {
    case Route::kExecute:
      return "execute";
    case Route::kBatchedGet:
      return "batched-get";
    case Route::kGroupedWrite:
      return "grouped-write";
    case Route::kScanThread:
      return "scan-thread";
    case Route::kLongExec:
      return "long-exec";
  }
  return "?";
}

class FastPathTest : public testing::Test {
 protected:
  // The users: default (no password), plus those of `acl_text`.
  void Users(const std::string& acl_text, const std::string& pass = "") {
    options_ = ServerOptions();
    options_.requirepass = pass;
    ASSERT_FENCEDKV_OK(Acl::Parse(acl_text, "acl", pass, &options_.acl));
    state_ = std::make_unique<ServerState>();
    state_->options = &options_;
    client_ = ClientState();
    StartSession(*state_, &client_);
  }
  void SetUp() override { Users(""); }

  void LogIn(const std::string& user, const std::string& pass) {
    client_.user = state_->acl().Authenticate(user, pass);
    ASSERT_NE(nullptr, client_.user);
    client_.authed = true;
  }

  // The route of `words` for client_; *batch_ops gets the grouped batch's
  // puts ("k=v,k=v").
  std::string RouteOf(std::vector<std::string> words,
                      std::string* batch_ops = nullptr) {
    const Args args(words.begin(), words.end());
    WriteBatch batch;
    batch.Put("stale", "op", 1);  // a grouped write replaces it
    const Route r = ChooseRoute(Admit(client_, args), client_, args, &batch);
    if (batch_ops != nullptr) {
      batch_ops->clear();
      for (size_t i = 0; i < batch.Count(); ++i) {
        const WriteBatch::Op op = batch.Get(i);
        if (!batch_ops->empty()) *batch_ops += ",";
        *batch_ops += std::string(op.key) + "=" + std::string(op.value) + "@" +
                      std::to_string(op.token);
      }
    }
    return Name(r);
  }

  ServerOptions options_;
  std::unique_ptr<ServerState> state_;
  ClientState client_;
};

TEST_F(FastPathTest, FastPaths) {
  EXPECT_EQ("batched-get", RouteOf({"GET", "k"}));
  EXPECT_EQ("batched-get", RouteOf({"get", "k"}));
  std::string ops;
  EXPECT_EQ("grouped-write", RouteOf({"SET", "k", "v", "FENCE", "7"}, &ops));
  EXPECT_EQ("k=v@7", ops);
  EXPECT_EQ("grouped-write",
            RouteOf({"mset", "a", "1", "b", "2", "fence", "9"}, &ops));
  EXPECT_EQ("a=1@9,b=2@9", ops);
  EXPECT_EQ("scan-thread", RouteOf({"SCAN", "0"}));
  EXPECT_EQ("scan-thread", RouteOf({"KEYS", "*"}));
  EXPECT_EQ("scan-thread", RouteOf({"DBSIZE"}));
}

// Anything but a plain fenced SET / MSET is executed by its handler: the
// conditions, an invalid or missing token, a syntax or arity error, DEL.
TEST_F(FastPathTest, WritesThatAreNotGrouped) {
  for (const std::vector<std::string>& w :
       std::vector<std::vector<std::string>>{
           {"SET", "k", "v", "NX", "FENCE", "1"},
           {"SET", "k", "v", "GET", "FENCE", "1"},
           {"SET", "k", "v", "FENCE", "0"},
           {"SET", "k", "v", "FENCE", "007"},
           {"SET", "k", "v"},
           {"SET", "k", "v", "FENCE", "1", "FENCE", "2"},
           {"SET", "k", "v", "EX", "1", "FENCE", "1"},
           {"SET", "k"},
           {"MSET", "a", "1", "b", "FENCE", "1"},
           {"MSET", "a", "1"},
           {"DEL", "k", "FENCE", "1"},
           {"GET", "k", "FENCE", "1"},
           {"GET"},
           {"KEYS", "a", "b"},
           {"FENCE.ADVANCE", "k", "5"},
           {"NOPE", "k"},
       }) {
    EXPECT_EQ("execute", RouteOf(w)) << w[0] << " " << w.size();
  }
}

// The gate comes first: a fast path is never taken by a command that is
// not admitted to run.
TEST_F(FastPathTest, RefusedCommandsNeverTakeAFastPath) {
  Users(
      "user ro on >ro ~* +@read +@connection +@transaction\n"
      "user nokeys on >nk +@all -@admin\n"
      "user getter on >g ~* +get +scan\n",
      "pw");
  // Not logged in (--requirepass): every command is refused.
  for (const auto& w : std::vector<std::vector<std::string>>{
           {"GET", "k"}, {"SET", "k", "v", "FENCE", "1"}, {"SCAN", "0"}}) {
    const Args args(w.begin(), w.end());
    EXPECT_EQ(Admission::Refusal::kNoAuth, Admit(client_, args).refusal);
    EXPECT_EQ("execute", RouteOf(w)) << w[0];
  }
  LogIn("ro", "ro");
  EXPECT_EQ("batched-get", RouteOf({"GET", "k"}));
  EXPECT_EQ("execute", RouteOf({"SET", "k", "v", "FENCE", "1"}));  // NOPERM
  EXPECT_EQ("execute", RouteOf({"MSET", "a", "1", "FENCE", "1"}));
  LogIn("nokeys", "nk");
  EXPECT_EQ("execute", RouteOf({"GET", "k"}));
  EXPECT_EQ("execute", RouteOf({"SET", "k", "v", "FENCE", "1"}));
  EXPECT_EQ("execute", RouteOf({"SCAN", "0"}));  // @keyspace
  LogIn("getter", "g");
  EXPECT_EQ("batched-get", RouteOf({"GET", "k"}));
  EXPECT_EQ("scan-thread", RouteOf({"SCAN", "0"}));
  EXPECT_EQ("execute", RouteOf({"KEYS", "*"}));
  EXPECT_EQ("execute", RouteOf({"MSET", "a", "1", "FENCE", "1"}));
}

// Inside MULTI every command is queued or refused by Execute; EXEC of a
// long queue goes to the database thread.
TEST_F(FastPathTest, MultiAndLongExec) {
  client_.in_multi = true;
  EXPECT_EQ("execute", RouteOf({"SET", "k", "v", "FENCE", "1"}));  // queued
  EXPECT_EQ("execute", RouteOf({"GET", "k"}));                     // refused
  EXPECT_EQ("execute", RouteOf({"SCAN", "0"}));                    // refused
  {
    const std::vector<std::string> w = {"SET", "k", "v", "FENCE", "1"};
    EXPECT_EQ(Admission::Verdict::kQueue,
              Admit(client_, Args(w.begin(), w.end())).verdict);
  }
  client_.queued.resize(kOffloadExecCommands - 1);
  EXPECT_EQ("execute", RouteOf({"EXEC"}));
  client_.queued.resize(kOffloadExecCommands);
  EXPECT_EQ("long-exec", RouteOf({"exec"}));
  EXPECT_EQ("execute", RouteOf({"DISCARD"}));
  client_.in_multi = false;
  EXPECT_EQ("execute", RouteOf({"EXEC"}));  // EXEC without MULTI
}

// A command's cost grows with its keys: an EXEC of three 300k-pair MSETs
// held its loop 6.5 s, a DEL of 1M keys 5.3 s. An EXEC whose queue holds
// kOffloadArgs arguments, and a command with keys of that many arguments,
// leave the loop as a long EXEC does (a plain fenced MSET too: it is not
// grouped).
TEST_F(FastPathTest, CommandsWithManyKeysLeaveTheLoop) {
  std::vector<std::string> del(kOffloadArgs - 2, "k");
  del[0] = "DEL";
  del.push_back("FENCE");
  del.push_back("1");  // kOffloadArgs arguments
  EXPECT_EQ("long-exec", RouteOf(del));
  // A DEL reads each key's record, values too (1000 keys of 64 KB: 50-70
  // ms on the loop): from kOffloadRecordReadArgs arguments on.
  del.resize(kOffloadRecordReadArgs - 2);
  del.push_back("FENCE");
  del.push_back("1");
  EXPECT_EQ("long-exec", RouteOf(del));
  del.pop_back();
  del.back() = "1";
  EXPECT_EQ("execute", RouteOf(del));
  del[0] = "EXISTS";  // (a read: it moves by what it reads)
  EXPECT_EQ("execute", RouteOf(del));
  std::vector<std::string> mset = {"MSET"};
  for (size_t i = 0; i < kOffloadArgs / 2; ++i) {
    mset.push_back("k" + std::to_string(i));
    mset.push_back("v");
  }
  mset.push_back("FENCE");
  mset.push_back("1");
  EXPECT_EQ("long-exec", RouteOf(mset));
  std::vector<std::string> mget(kOffloadArgs, "k");
  mget[0] = "MGET";
  EXPECT_EQ("long-exec", RouteOf(mget));
  mget[0] = "EXISTS";
  EXPECT_EQ("long-exec", RouteOf(mget));
  mget.resize(kOffloadArgs - 1);
  EXPECT_EQ("execute", RouteOf(mget));
  // Arguments without keys do not count (ECHO, CONFIG GET), but INFO's and
  // COMMAND's do: COMMAND INFO of 900k names held a loop 0.6 s.
  std::vector<std::string> info(kOffloadArgs, "get");
  info[0] = "ECHO";
  info.resize(2);
  EXPECT_EQ("execute", RouteOf(info));
  info.assign(kOffloadArgs, "get");
  info[0] = "CONFIG";
  EXPECT_EQ("execute", RouteOf(info));
  info[0] = "COMMAND";
  info[1] = "INFO";
  EXPECT_EQ("long-exec", RouteOf(info));
  info[0] = "INFO";
  EXPECT_EQ("long-exec", RouteOf(info));
  info.pop_back();
  EXPECT_EQ("execute", RouteOf(info));
  client_.in_multi = true;
  client_.queued.resize(3);
  for (QueuedCommand& q : client_.queued) {
    q.args.assign(kOffloadArgs / 3, "k");
  }
  EXPECT_EQ("execute", RouteOf({"EXEC"}));
  client_.queued[0].args.push_back("k");
  EXPECT_EQ("long-exec", RouteOf({"EXEC"}));
  // Or bytes: one 30 MB SET in a MULTI held the loop 0.7 s.
  client_.queued.resize(1);
  client_.queued[0].args = {"SET", "k", "v"};
  client_.queued_bytes = kOffloadBytes - 1;
  EXPECT_EQ("execute", RouteOf({"EXEC"}));
  client_.queued_bytes = kOffloadBytes;
  EXPECT_EQ("long-exec", RouteOf({"EXEC"}));
}

// A command with keys leaves the loop also when its arguments are large:
// one SET of 60 MB held its loop 0.6 s.
TEST_F(FastPathTest, LargeWritesLeaveTheLoop) {
  const std::string big(kOffloadBytes, 'v');
  EXPECT_EQ("long-exec", RouteOf({"SET", "k", big, "FENCE", "1"}));
  EXPECT_EQ("long-exec", RouteOf({"SET", "k", big}));
  EXPECT_EQ("long-exec",
            RouteOf({"MSET", "a", big.substr(1), "b", "v", "FENCE", "1"}));
  const std::string below(kOffloadBytes - 64, 'v');
  EXPECT_EQ("grouped-write", RouteOf({"SET", "k", below, "FENCE", "1"}));
  // Without keys, bytes count only for ECHO and PING, which copy them into
  // their reply (a 60 MiB ECHO held the loop 0.4 s).
  EXPECT_EQ("long-exec", RouteOf({"ECHO", big}));
  EXPECT_EQ("long-exec", RouteOf({"PING", big}));
  EXPECT_EQ("execute", RouteOf({"ECHO", below}));
  EXPECT_EQ("execute", RouteOf({"CLIENT", "SETNAME", big}));
}

// REPLICAOF resolves the target and asks it whether it was deposed (up to
// 1 s): on the loop, a silent target held every other client 1 s.
TEST_F(FastPathTest, ReplicaOfLeavesTheLoop) {
  Users("user default on nopass ~* &* +@all\n");
  EXPECT_EQ("scan-thread", RouteOf({"REPLICAOF", "127.0.0.1", "6379"}));
  EXPECT_EQ("scan-thread", RouteOf({"slaveof", "localhost", "6379"}));
  // A promotion asks nothing of the network: not behind a long scan.
  EXPECT_EQ("execute", RouteOf({"REPLICAOF", "NO", "ONE"}));
  EXPECT_EQ("execute", RouteOf({"slaveof", "no", "one"}));
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
