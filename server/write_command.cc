// Copyright (c) fencedkv authors.

#include "write_command.h"

#include "command_table.h"

namespace fencedkv {
namespace server {

namespace {

// The FENCE clause's token at args[index].
void SetFence(const Args& args, size_t index, WriteCommand* cmd) {
  cmd->token_arg = index;
  cmd->fence = ParseToken(args[index], &cmd->token)
                   ? WriteCommand::Fence::kToken
                   : WriteCommand::Fence::kInvalid;
}

// SET key value [NX|XX] [GET] FENCE token.
bool ParseSet(const Args& args, WriteCommand* cmd, std::string* error) {
  if (args.size() < 3) {
    *error = "ERR wrong number of arguments for 'set' command";
    return false;
  }
  cmd->first = 1;
  cmd->end = 3;
  for (size_t i = 3; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (EqualsIgnoreCase(a, "NX")) {
      cmd->nx = true;
    } else if (EqualsIgnoreCase(a, "XX")) {
      cmd->xx = true;
    } else if (EqualsIgnoreCase(a, "GET")) {
      cmd->get = true;
    } else if (EqualsIgnoreCase(a, "FENCE") && i + 1 < args.size()) {
      if (cmd->fence != WriteCommand::Fence::kNone) {
        *error = "ERR syntax error: FENCE given more than once";
        return false;
      }
      SetFence(args, ++i, cmd);
    } else if (EqualsIgnoreCase(a, "EX") || EqualsIgnoreCase(a, "PX") ||
               EqualsIgnoreCase(a, "EXAT") || EqualsIgnoreCase(a, "PXAT") ||
               EqualsIgnoreCase(a, "KEEPTTL")) {
      *error = "ERR SET option " + std::string(a) +
               " is not supported: fencedkv keys do not expire";
      return false;
    } else {
      *error = "ERR syntax error";
      return false;
    }
  }
  if (cmd->nx && cmd->xx) {
    *error = "ERR syntax error";
    return false;
  }
  return true;
}

// DEL key [key ...] FENCE token: the clause is the last two arguments, after
// at least one key.
bool ParseDel(const Args& args, WriteCommand* cmd, std::string* error) {
  const size_t n = args.size();
  cmd->first = 1;
  cmd->end = n;
  if (n >= 4 && EqualsIgnoreCase(args[n - 2], "FENCE")) {
    SetFence(args, n - 1, cmd);
    cmd->end = n - 2;
  }
  if (cmd->end <= cmd->first) {
    *error = "ERR wrong number of arguments for 'del' command";
    return false;
  }
  return true;
}

// MSET key value [key value ...] FENCE token: the clause is the last two
// arguments, after at least one pair.
bool ParseMset(const Args& args, WriteCommand* cmd, std::string* error) {
  const size_t n = args.size();
  cmd->first = 1;
  cmd->end = n;
  if (n >= 5 && (n - 1) % 2 == 0 && EqualsIgnoreCase(args[n - 2], "FENCE")) {
    SetFence(args, n - 1, cmd);
    cmd->end = n - 2;
  }
  if (cmd->end <= cmd->first || (cmd->end - cmd->first) % 2 != 0) {
    *error = "ERR wrong number of arguments for 'mset' command";
    return false;
  }
  return true;
}

}  // namespace

const char* WriteCommand::name() const {
  switch (kind) {
    case Kind::kSet:
      return "SET";
    case Kind::kDel:
      return "DEL";
    case Kind::kMset:
      return "MSET";
  }
  return "";
}

bool IsWriteCommand(std::string_view name, WriteCommand::Kind* kind) {
  if (EqualsIgnoreCase(name, "SET")) {
    *kind = WriteCommand::Kind::kSet;
  } else if (EqualsIgnoreCase(name, "DEL")) {
    *kind = WriteCommand::Kind::kDel;
  } else if (EqualsIgnoreCase(name, "MSET")) {
    *kind = WriteCommand::Kind::kMset;
  } else {
    return false;
  }
  return true;
}

bool ParseWriteCommand(const Args& args, WriteCommand* cmd,
                       std::string* error) {
  *cmd = WriteCommand();
  if (args.empty() || !IsWriteCommand(args[0], &cmd->kind)) {
    *error = "ERR not a write command";
    return false;
  }
  switch (cmd->kind) {
    case WriteCommand::Kind::kSet:
      return ParseSet(args, cmd, error);
    case WriteCommand::Kind::kDel:
      return ParseDel(args, cmd, error);
    case WriteCommand::Kind::kMset:
      return ParseMset(args, cmd, error);
  }
  return false;
}

void AppendWriteOps(const Args& args, const WriteCommand& cmd, Token token,
                    WriteBatch* batch) {
  if (cmd.kind == WriteCommand::Kind::kDel) {
    for (size_t i = cmd.first; i < cmd.end; ++i) batch->Delete(args[i], token);
    return;
  }
  const WriteCondition condition = cmd.nx   ? WriteCondition::kIfAbsent
                                   : cmd.xx ? WriteCondition::kIfPresent
                                            : WriteCondition::kNone;
  for (size_t i = cmd.first; i + 1 < cmd.end; i += 2) {
    batch->Put(args[i], args[i + 1], token, condition);
  }
}

}  // namespace server
}  // namespace fencedkv
