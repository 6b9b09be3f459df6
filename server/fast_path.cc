// Copyright (c) fencedkv authors.

#include "fast_path.h"

#include <string>

namespace fencedkv {
namespace server {

Route ChooseRoute(const Admission& admission, const ClientState& client,
                  const Args& args, WriteBatch* batch) {
  if (admission.verdict != Admission::Verdict::kRun) return Route::kExecute;
  static const CommandSpec* const kGet = LookupCommand("get");
  static const CommandSpec* const kSet = LookupCommand("set");
  static const CommandSpec* const kMset = LookupCommand("mset");
  static const CommandSpec* const kExec = LookupCommand("exec");
  const CommandSpec* cmd = admission.cmd;
  static const CommandSpec* const kInfo = LookupCommand("info");
  static const CommandSpec* const kCommand = LookupCommand("command");
  static const CommandSpec* const kEcho = LookupCommand("echo");
  static const CommandSpec* const kPing = LookupCommand("ping");
  // Before the grouping: a huge MSET would hold the loop through its group.
  const bool has_keys =
      (cmd->keys.first > 0 || (cmd->flags & kCmdMovableKeys) != 0) &&
      (cmd->flags & kCmdIterates) == 0;
  if (has_keys && args.size() >= kOffloadArgs) return Route::kLongExec;
  if ((cmd->flags & kCmdReadsRecords) != 0 &&
      args.size() >= kOffloadRecordReadArgs) {
    return Route::kLongExec;
  }
  if (has_keys && args.size() > 1) {
    // A write's cost grows with its bytes too (copied into the batch, the
    // WAL and the memtable): one SET of 60 MB held its loop 0.6 s.
    size_t bytes = 0;
    for (const std::string_view a : args) bytes += a.size();
    if (bytes >= kOffloadBytes) return Route::kLongExec;
  }
  // ECHO and PING copy their argument into the reply: a 60 MiB ECHO held
  // its loop 0.4 s.
  if ((cmd == kEcho || cmd == kPing) && args.size() == 2 &&
      args[1].size() >= kOffloadBytes) {
    return Route::kLongExec;
  }
  // INFO and COMMAND (INFO, GETKEYS, ...) cost per argument without keys:
  // COMMAND INFO of 900k names held a loop 0.6 s.
  if ((cmd == kInfo || cmd == kCommand) && args.size() >= kOffloadArgs) {
    return Route::kLongExec;
  }
  if (cmd == kGet) {
    return args.size() == 2 ? Route::kBatchedGet : Route::kExecute;
  }
  if (cmd == kSet || cmd == kMset) {
    WriteCommand write;
    std::string error;
    if (!ParseWriteCommand(args, &write, &error) || !write.PlainFenced()) {
      return Route::kExecute;  // its handler answers (or refuses) it
    }
    batch->Clear();
    AppendWriteOps(args, write, write.token, batch);
    return Route::kGroupedWrite;
  }
  if ((cmd->flags & kCmdIterates) != 0) return Route::kScanThread;
  // REPLICAOF host port waits on the network; REPLICAOF NO ONE does not,
  // and a promotion must not wait behind a scan.
  if ((cmd->flags & kCmdOffLoop) != 0 &&
      !(args.size() == 3 && EqualsIgnoreCase(args[1], "no") &&
        EqualsIgnoreCase(args[2], "one"))) {
    return Route::kScanThread;
  }
  if (cmd == kExec && client.in_multi) {
    if (client.queued.size() >= kOffloadExecCommands) return Route::kLongExec;
    size_t queued_args = 0;  // fewer than kOffloadExecCommands to add up
    for (const QueuedCommand& q : client.queued) queued_args += q.args.size();
    if (queued_args >= kOffloadArgs) return Route::kLongExec;
    // Its bytes too: one 30 MB SET in a MULTI held the loop 0.7 s.
    if (client.queued_bytes >= kOffloadBytes) return Route::kLongExec;
  }
  return Route::kExecute;
}

}  // namespace server
}  // namespace fencedkv
