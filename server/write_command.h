// Copyright (c) fencedkv authors.
//
// The write commands' arguments, parsed in one place (kvrocks separates a
// command's Parse from its Execute):
//
//   SET key value [NX|XX] [GET] FENCE token
//   DEL key [key ...] FENCE token
//   MSET key value [key value ...] FENCE token
//
// ParseWriteCommand checks the syntax and says where the ops are, whether
// the write is fenced and with which token, and SET's conditions. Every user
// of these commands takes that result: their handlers (commands_kv.cc),
// MULTI (a command is parsed when it is queued, and EXEC builds its batch
// from the parse: commands_multi.cc), the io loops' group commit
// (ChooseRoute, fast_path.h) and COMMAND GETKEYS.
//
// What a write without FENCE gets (-NOFENCE, or token 0 with
// --allow_unfenced) is the server's policy, not syntax: ResolveWriteToken
// (command_table.h) applies it. An invalid token is not a syntax error
// either: a handler answers "-ERR invalid token" after the syntax errors,
// and inside MULTI it is reported by EXEC, not when the command is queued.
//
// Pure functions; a WriteCommand refers to arguments by index, so it stays
// valid for a copy of the arguments (a queued command's).

#ifndef FENCEDKV_SERVER_WRITE_COMMAND_H_
#define FENCEDKV_SERVER_WRITE_COMMAND_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/token.h"
#include "fencedkv/write_batch.h"

namespace fencedkv {
namespace server {

// A command's words: args[0] is its name. Views into the connection's input
// (or into a queued command's own copies).
using Args = std::vector<std::string_view>;

struct WriteCommand {
  enum class Kind : uint8_t { kSet, kDel, kMset };
  enum class Fence : uint8_t {
    kNone,     // no FENCE clause
    kToken,    // FENCE with a valid token (in `token`)
    kInvalid,  // FENCE with an invalid token (args[token_arg])
  };

  Kind kind = Kind::kSet;
  // The ops: args[first, end), one key each (DEL) or key-value pairs (SET,
  // MSET).
  size_t first = 1;
  size_t end = 1;
  Fence fence = Fence::kNone;
  Token token = 0;
  size_t token_arg = 0;  // the index of the FENCE clause's token
  // SET's conditions (NX, XX: never both) and GET.
  bool nx = false;
  bool xx = false;
  bool get = false;

  // Arguments per op: 1 for DEL, 2 for SET and MSET.
  size_t step() const { return kind == Kind::kDel ? 1 : 2; }
  // The command as errors name it: "SET", "DEL", "MSET".
  const char* name() const;
  // A SET or MSET with a valid token and no condition: what the io loops
  // may group-commit (each such command is one WriteBatch of puts).
  bool PlainFenced() const {
    return kind != Kind::kDel && fence == Fence::kToken && !nx && !xx && !get;
  }
};

// Whether `name` (any case) is SET, DEL or MSET, and which.
bool IsWriteCommand(std::string_view name, WriteCommand::Kind* kind);

// Parses `args`, whose args[0] is SET, DEL or MSET (any case; see
// IsWriteCommand), into *cmd. On a syntax or arity error returns false with
// *error holding the reply line without its '-' ("ERR syntax error").
// Rules: SET's NX, XX and GET may repeat (as Redis 7 allows), FENCE may not;
// DEL and MSET take the FENCE clause as their last two arguments only (a
// key or value may be named FENCE: "DEL FENCE 1" deletes two keys).
bool ParseWriteCommand(const Args& args, WriteCommand* cmd, std::string* error);

// Appends cmd's ops on `args` (the arguments it was parsed from, or a copy)
// to *batch, each with `token`; SET's put carries its NX / XX condition.
void AppendWriteOps(const Args& args, const WriteCommand& cmd, Token token,
                    WriteBatch* batch);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_WRITE_COMMAND_H_
