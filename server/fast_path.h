// Copyright (c) fencedkv authors.
//
// Which path a command takes on an io loop (Connection::Process). Most run
// their handler on the loop, through Execute; a few common or long ones
// take a faster or less blocking path. A fast path is only ever chosen for
// a command Admit admitted to run: login, ACL, arity and MULTI are checked
// once, by the same gate as every other command's.

#ifndef FENCEDKV_SERVER_FAST_PATH_H_
#define FENCEDKV_SERVER_FAST_PATH_H_

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "fencedkv/write_batch.h"

#include "command_table.h"

namespace fencedkv {
namespace server {

enum class Route : uint8_t {
  // Execute on the loop: every command below does when it is not admitted
  // to run (its refusal, or MULTI's queueing) or does not fit its path.
  kExecute,
  // GET key: read with the connection's next MultiGet, together with the
  // GETs pipelined after it.
  kBatchedGet,
  // SET k v FENCE t / MSET k v ... FENCE t with a valid token and no
  // condition: joins the loop's next group commit (DB::WriteGroup), each
  // command one batch.
  kGroupedWrite,
  // SCAN, KEYS, DBSIZE, and REPLICAOF (which waits on the network): on the
  // scan thread.
  kScanThread,
  // A long command, on the long-command thread: an EXEC of at least
  // kOffloadExecCommands queued commands, kOffloadArgs queued arguments or
  // kOffloadBytes queued bytes, a command with keys (DEL, MSET, MGET,
  // EXISTS, ...) of at least kOffloadArgs arguments or kOffloadBytes bytes,
  // a write that reads each key's record (kCmdReadsRecords: DEL) of at
  // least kOffloadRecordReadArgs arguments, or an INFO or COMMAND of
  // at least kOffloadArgs arguments. (An MGET or
  // EXISTS of fewer keys starts on the loop and moves there once it has
  // read kLoopReadBytes or run kLoopReadTime: ClientState::loop_read_budget.)
  kLongExec,
};

// An EXEC of at least this many queued commands runs on the database
// thread, so the loop serves its other connections meanwhile.
constexpr size_t kOffloadExecCommands = 64;
// So does a command with keys of at least this many arguments, or an EXEC
// whose queue holds that many: their cost is per key (1 to 7 us each; one
// DEL of 1M keys held a loop 5.3 s, an EXEC of three 300k-pair MSETs
// 6.5 s), not per command. Below it a command costs a few ms at most,
// unless it reads large values (below).
constexpr size_t kOffloadArgs = 1024;
// So does a command with keys whose arguments hold at least this many
// bytes: a value is copied into the batch, the WAL and the memtable (about
// 10 ms per MiB on the loop, one 60 MB SET 0.6 s).
constexpr size_t kOffloadBytes = size_t{1} << 20;
// A write that reads each key's record (kCmdReadsRecords: DEL, which
// counts what it deleted, values included) runs there too from this many
// arguments on: it cannot stop half-way and run again as a read can
// (below); a DEL of 1000 keys of 64 KB held its loop 50-70 ms.
constexpr size_t kOffloadRecordReadArgs = 128;
// An MGET or EXISTS on the loop that has read this many bytes of values, or
// run this long, stops and runs again on the long-command thread (a read
// changes nothing, so running it twice is safe): its cost is in the values
// it reads, which the arguments do not tell. Before, an MGET of 1000 keys
// of 64 KB (below kOffloadArgs) held its loop for 100 to 400 ms. What the
// loop reads in vain is bounded by these plus one value.
constexpr size_t kLoopReadBytes = size_t{1} << 20;
constexpr std::chrono::microseconds kLoopReadTime{2000};

// The route of `args`, which `admission` (Admit's verdict on it, for
// `client`) admits or not. For kGroupedWrite, *batch is cleared and holds
// the command's puts. Changes nothing else.
Route ChooseRoute(const Admission& admission, const ClientState& client,
                  const Args& args, WriteBatch* batch);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_FAST_PATH_H_
