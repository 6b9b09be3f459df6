// Copyright (c) fencedkv authors.
//
// The one parser of SET / DEL / MSET (write_command.h): what it accepts,
// where it finds the ops and the token, and the exact error lines.

#include "write_command.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fencedkv {
namespace server {
namespace {

using Kind = WriteCommand::Kind;
using Fence = WriteCommand::Fence;

// Parses `words`; on failure returns the error line, else "".
std::string Parse(const std::vector<std::string>& words, WriteCommand* cmd) {
  const Args args(words.begin(), words.end());
  std::string error;
  if (!ParseWriteCommand(args, cmd, &error)) return error;
  return "";
}

// The ops the parse appends with token 7, rendered "P k=v" / "D k".
std::string Ops(const std::vector<std::string>& words) {
  const Args args(words.begin(), words.end());
  WriteCommand cmd;
  std::string error;
  if (!ParseWriteCommand(args, &cmd, &error)) return error;
  WriteBatch batch;
  AppendWriteOps(args, cmd, 7, &batch);
  std::string out;
  for (size_t i = 0; i < batch.Count(); ++i) {
    const WriteBatch::Op op = batch.Get(i);
    if (!out.empty()) out += " ";
    out += op.type == WriteBatch::OpType::kPut
               ? "P " + std::string(op.key) + "=" + std::string(op.value)
               : "D " + std::string(op.key);
    if (op.token != 7) out += "!token";
    if (op.condition == WriteCondition::kIfAbsent) out += "(NX)";
    if (op.condition == WriteCondition::kIfPresent) out += "(XX)";
  }
  return out;
}

TEST(WriteCommandTest, FencedForms) {
  WriteCommand cmd;
  ASSERT_EQ("", Parse({"set", "k", "v", "FENCE", "9"}, &cmd));
  EXPECT_EQ(Kind::kSet, cmd.kind);
  EXPECT_EQ(Fence::kToken, cmd.fence);
  EXPECT_EQ(9u, cmd.token);
  EXPECT_EQ(4u, cmd.token_arg);
  EXPECT_TRUE(cmd.PlainFenced());
  EXPECT_STREQ("SET", cmd.name());

  ASSERT_EQ("",
            Parse({"DEL", "a", "b", "fence", "18446744073709551615"}, &cmd));
  EXPECT_EQ(Kind::kDel, cmd.kind);
  EXPECT_EQ(1u, cmd.first);
  EXPECT_EQ(3u, cmd.end);
  EXPECT_EQ(1u, cmd.step());
  EXPECT_EQ(kMaxToken, cmd.token);
  EXPECT_FALSE(cmd.PlainFenced());  // DEL is never grouped

  ASSERT_EQ("", Parse({"MSET", "a", "1", "b", "2", "FENCE", "3"}, &cmd));
  EXPECT_EQ(Kind::kMset, cmd.kind);
  EXPECT_EQ(5u, cmd.end);
  EXPECT_EQ(2u, cmd.step());
  EXPECT_TRUE(cmd.PlainFenced());

  EXPECT_EQ("P k=v", Ops({"SET", "k", "v", "FENCE", "1"}));
  EXPECT_EQ("D a D b", Ops({"DEL", "a", "b", "FENCE", "1"}));
  EXPECT_EQ("P a=1 P b=2", Ops({"MSET", "a", "1", "b", "2", "FENCE", "1"}));
}

TEST(WriteCommandTest, ConditionsRepeatButNotFence) {
  WriteCommand cmd;
  ASSERT_EQ("", Parse({"SET", "k", "v", "NX", "nx", "FENCE", "1"}, &cmd));
  EXPECT_TRUE(cmd.nx);
  EXPECT_FALSE(cmd.PlainFenced());
  EXPECT_EQ("P k=v(NX)", Ops({"SET", "k", "v", "NX", "FENCE", "1"}));
  EXPECT_EQ("P k=v(XX)", Ops({"SET", "k", "v", "FENCE", "1", "XX"}));
  ASSERT_EQ("", Parse({"SET", "k", "v", "GET", "GET", "FENCE", "1"}, &cmd));
  EXPECT_TRUE(cmd.get);
  EXPECT_FALSE(cmd.PlainFenced());
  EXPECT_EQ("ERR syntax error: FENCE given more than once",
            Parse({"SET", "k", "v", "FENCE", "1", "FENCE", "2"}, &cmd));
  EXPECT_EQ("ERR syntax error",
            Parse({"SET", "k", "v", "NX", "XX", "FENCE", "1"}, &cmd));
  EXPECT_EQ("ERR syntax error", Parse({"SET", "k", "v", "BOGUS"}, &cmd));
  EXPECT_EQ("ERR syntax error", Parse({"SET", "k", "v", "FENCE"}, &cmd));
  EXPECT_EQ("ERR SET option px is not supported: fencedkv keys do not expire",
            Parse({"SET", "k", "v", "px", "10", "FENCE", "1"}, &cmd));
  // A syntax error wins over an invalid token (as it always has).
  EXPECT_EQ("ERR syntax error",
            Parse({"SET", "k", "v", "FENCE", "0", "BOGUS"}, &cmd));
}

// No FENCE, or an invalid token, is not a syntax error: the server's policy
// (NOFENCE, --allow_unfenced) and the token error come after the parse.
TEST(WriteCommandTest, UnfencedAndInvalidTokens) {
  WriteCommand cmd;
  ASSERT_EQ("", Parse({"SET", "k", "v"}, &cmd));
  EXPECT_EQ(Fence::kNone, cmd.fence);
  EXPECT_FALSE(cmd.PlainFenced());
  for (const char* bad : {"0", "007", "-1", "18446744073709551616", "x"}) {
    ASSERT_EQ("", Parse({"MSET", "a", "1", "FENCE", bad}, &cmd)) << bad;
    EXPECT_EQ(Fence::kInvalid, cmd.fence) << bad;
    EXPECT_EQ(4u, cmd.token_arg);
    EXPECT_FALSE(cmd.PlainFenced());
  }
  // DEL and MSET take FENCE only as their last two arguments; with too few
  // arguments for a clause they are unfenced writes of keys named so.
  ASSERT_EQ("", Parse({"DEL", "FENCE", "1"}, &cmd));
  EXPECT_EQ(Fence::kNone, cmd.fence);
  EXPECT_EQ("D FENCE D 1", Ops({"DEL", "FENCE", "1"}));
  EXPECT_EQ("P FENCE=1", Ops({"MSET", "FENCE", "1"}));
  EXPECT_EQ("D FENCE", Ops({"DEL", "FENCE", "FENCE", "1"}));
  EXPECT_EQ("P FENCE=x", Ops({"MSET", "FENCE", "x", "FENCE", "1"}));
}

TEST(WriteCommandTest, Arity) {
  WriteCommand cmd;
  EXPECT_EQ("ERR wrong number of arguments for 'set' command",
            Parse({"SET", "k"}, &cmd));
  EXPECT_EQ("ERR wrong number of arguments for 'del' command",
            Parse({"del"}, &cmd));
  EXPECT_EQ("ERR wrong number of arguments for 'mset' command",
            Parse({"MSET", "a", "1", "b", "FENCE", "3"}, &cmd));
  EXPECT_EQ("ERR wrong number of arguments for 'mset' command",
            Parse({"MSET", "a"}, &cmd));
  EXPECT_EQ("ERR wrong number of arguments for 'mset' command",
            Parse({"MSET", "a", "FENCE", "1"}, &cmd));
  EXPECT_EQ("ERR not a write command", Parse({"GET", "k"}, &cmd));
  WriteCommand::Kind kind;
  EXPECT_TRUE(IsWriteCommand("mSeT", &kind));
  EXPECT_EQ(Kind::kMset, kind);
  EXPECT_FALSE(IsWriteCommand("MGET", &kind));
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
