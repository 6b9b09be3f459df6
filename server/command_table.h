// Copyright (c) fencedkv authors.
//
// The command table: name -> handler, arity and flags (kvrocks / Redis
// style). Handlers are grouped by family in commands_kv.cc (GET SET DEL
// EXISTS MGET MSET SCAN KEYS DBSIZE), commands_multi.cc (MULTI EXEC
// DISCARD), commands_fence.cc (FENCE.* and LEASE.*), commands_backup.cc
// (FENCEDKV.*) and commands_admin.cc (PING ECHO QUIT SELECT HELLO AUTH ACL
// CLIENT COMMAND CONFIG INFO FLUSHDB FLUSHALL).

#ifndef FENCEDKV_SERVER_COMMAND_TABLE_H_
#define FENCEDKV_SERVER_COMMAND_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/db.h"

#include "server_state.h"
#include "write_command.h"

namespace fencedkv {
namespace server {

using Handler = void (*)(ServerState& server, ClientState& client,
                         const Args& args, std::string* out);

enum CommandFlags : uint32_t {
  kCmdWrite = 1 << 0,  // a mutation (needs FENCE)
  kCmdReadOnly = 1 << 1,
  kCmdNoAuth = 1 << 2,  // allowed before AUTH
  kCmdMulti = 1 << 3,   // may be queued inside MULTI
  kCmdAdmin = 1 << 4,
  // Walks the key space (and with the hash memtable first sorts it): the
  // server runs it on ServerState::scans, so the loop goes on serving its
  // other connections.
  kCmdIterates = 1 << 5,
  // Its key positions hold for its usual (fenced) form only: a call's keys
  // are what its parse says (CommandKeys). Redis' "movablekeys": a router
  // asks COMMAND GETKEYS.
  kCmdMovableKeys = 1 << 6,
  // Waits on the network: REPLICAOF resolves the target's name and asks it
  // whether it was deposed (up to 1 s). Run on ServerState::scans like
  // kCmdIterates: a silent target held every client of the loop 1 s.
  kCmdOffLoop = 1 << 7,
  // A write that reads each key's record, value included, before it
  // writes (DEL counts what it deleted). Unlike a read it cannot stop half
  // way and run again, so from kOffloadRecordReadArgs arguments on it runs
  // on the long-command thread (fast_path.h).
  kCmdReadsRecords = 1 << 8,
};

// Where a command's keys are among its arguments, as in Redis' command
// table (COMMAND INFO's first key, last key and step): args[first],
// args[first + step], ... up to args[last]; a negative last counts from the
// end (-1: the last argument). first == 0: the command takes no keys.
struct KeyPositions {
  int first = 0;
  int last = 0;
  int step = 0;
};

struct CommandSpec {
  const char* name;  // lower case
  Handler handler;
  int arity;  // >0: exactly; <0: at least -arity (name included)
  uint32_t flags;
  // Its keys. A user without ~* may not run a command that takes keys (nor
  // any @keyspace command). Cluster mode will route by them.
  KeyPositions keys;
  uint32_t categories = 0;  // ACL categories (AclCategory)
  // If set: for the calls that are the command's administrative form (e.g.
  // FENCE.FLOOR with an argument) it returns how a refusal names them
  // ("'client|list' command"); nullptr for the ordinary calls. That form's
  // categories are admin_categories plus @admin and @dangerous.
  const char* (*admin_form)(const Args& args) = nullptr;
  uint32_t admin_categories = 0;
};

// nullptr for an unknown command. Case-insensitive.
const CommandSpec* LookupCommand(std::string_view name);
const std::vector<CommandSpec>& AllCommands();
// `cmd`'s index in AllCommands() (AclUser::Allows, CommandStats).
size_t CommandIndex(const CommandSpec& cmd);

// The positions in `args` (a call of `cmd`; args[0] is its name, the arity
// is right) of its keys, into *positions. False if the call's arguments
// cannot be parsed (a movable-keys command's syntax error). For COMMAND
// GETKEYS and, later, routing.
bool CommandKeys(const CommandSpec& cmd, const Args& args,
                 std::vector<size_t>* positions);

// Sets a new connection's user: 'default', authenticated at once, if that
// user is on and needs no password; else none (the client must AUTH).
void StartSession(ServerState& server, ClientState* client);

// True if the call (of `cmd`, arity checked) writes: a @write command, a
// command's writing administrative form (FENCE.FLOOR t), or EXEC of a
// queue holding writes. A replica refuses these; a primary's replies to
// them wait for the in-sync replicas.
bool IsWriteCall(const CommandSpec& cmd, const ClientState& client,
                 const Args& args);

// What the gate decided for one command.
struct Admission {
  enum class Verdict : uint8_t {
    kRun,     // run its handler
    kQueue,   // a MULTI is open: queue it (if it parses)
    kRefuse,  // answer the refusal's error
  };
  enum class Refusal : uint8_t {
    kNone,
    kUnknownCommand,
    kWrongArity,
    kNoAuth,        // not logged in
    kNoPermission,  // the ACL user may not run it (in this form)
    kNoKeys,        // the ACL user has no keys (~*)
    kNotInMulti,    // a MULTI is open and the command cannot be queued
    // A replica (ClientState::read_only): a write, a fenced read or a read
    // of fence state (FENCE.GET, FENCE.FLOOR: the replica may lag, and its
    // in-memory fence state is the primary's only once promoted), a lease
    // command (the lease service runs on the primary).
    kReadOnly,
    kReadOnlyFencedRead,
    kReadOnlyLease,
    // The same commands on a primary past its etcd lease deadline
    // (ClientState::lease_deadline).
    kLeaseLapsed,
  };
  Verdict verdict = Verdict::kRefuse;
  Refusal refusal = Refusal::kUnknownCommand;
  const CommandSpec* cmd = nullptr;  // null for an unknown command
  // kNoPermission: the refused form ("'client|list' command"), or null for
  // the command itself.
  const char* form = nullptr;
};

// The gate every command passes before it runs, on every path: Dispatch
// and each of the io loops' fast paths (plain GETs read together, grouped
// SET / MSET, commands handed to the scan or database thread), which are
// taken only by a command admitted to run (ChooseRoute, fast_path.h). In
// order: the command exists, has the right arity, the client is logged in
// (or the command needs no login), its ACL user may run it in this form
// and, if it takes keys or is @keyspace, has keys; on a replica it is not a
// write, a fenced read or a lease command; inside MULTI it is
// queued, or refused if it cannot be. Changes nothing. (Shutting down is the
// other gate, the server's: Connection::Process asks it once per command,
// whatever its path.)
Admission Admit(const ClientState& client, const Args& args);

// Carries out `admission` for `args` (the call Admit decided on) and
// appends the reply to *out: the refusal's error (inside MULTI, a refusal
// other than NOAUTH also discards the transaction: EXEC answers
// -EXECABORT), the queueing (QueueCommand), or the command's handler.
void Execute(ServerState& server, ClientState& client, const Args& args,
             const Admission& admission, std::string* out);

// Admit, then Execute.
void Dispatch(ServerState& server, ClientState& client, const Args& args,
              std::string* out);

// Family registration (each commands_*.cc).
void AppendKvCommands(std::vector<CommandSpec>* table);
void AppendMultiCommands(std::vector<CommandSpec>* table);
void AppendFenceCommands(std::vector<CommandSpec>* table);
void AppendAdminCommands(std::vector<CommandSpec>* table);
void AppendBackupCommands(std::vector<CommandSpec>* table);
void AppendReplicationCommands(std::vector<CommandSpec>* table);
// WAIT's arguments (commands_repl.cc): false if they are not two
// non-negative integers.
bool ParseWaitArgs(const Args& args, size_t* n, int64_t* timeout_ms);
// Stops the online checkpoint/backup job (commands_backup.cc) and waits for
// it: call before the database closes.
void StopBackupJobs();

// Helpers shared by the families.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
void ReplyStatus(const Status& s, std::string* out);  // error line from s
void ReplyWrongArgs(std::string_view command, std::string* out);
// True if a reply of `bytes` exceeds max_reply_bytes: then appends the
// error ("-ERR reply of more than N bytes (max_reply_bytes) ...") to *out.
// Commands whose reply grows with the data check it while they build it.
bool ReplyTooLarge(const ServerState& server, size_t bytes, std::string* out);
// Matches `key` against `glob` into *matched. False, and the error reply
// ("-ERR pattern too complex: ..."), if the match would cost more than its
// budget (commands_kv.cc).
bool MatchKey(const GlobPattern& glob, std::string_view key, bool* matched,
              std::string* out);
// False, and the error reply ("-ERR pattern too long: ..." / "... too
// complex: ..."), if `glob` is over its bounds and was not compiled.
bool PatternOk(const GlobPattern& glob, std::string* out);
// Parses a token argument; on failure appends "-ERR invalid token ..." and
// returns false.
bool ParseTokenArg(std::string_view text, Token* token, std::string* out);
// Parses an integer argument; on failure appends "-ERR value is not an
// integer or out of range" and returns false.
bool ParseInt64Arg(std::string_view text, int64_t* v, std::string* out);
WriteOptions ServerWriteOptions(const ServerState& server);
// The token a parsed write carries (commands_kv.cc): its FENCE clause's; an
// invalid one is "-ERR invalid token ..."; without FENCE, "-NOFENCE ..."
// (counted) unless --allow_unfenced, which logs and counts the write and
// gives it token 0. False, with the error appended to *out, if refused.
bool ResolveWriteToken(ServerState& server, const Args& args,
                       const WriteCommand& cmd, Token* token, std::string* out);
// MULTI's queueing of a command that may be queued (commands_multi.cc): a
// write is parsed (a syntax error, or SET's NX / XX / GET, discards the
// transaction), the queue's bounds are checked, then "+QUEUED".
void QueueCommand(ServerState& server, ClientState& client, const Args& args,
                  std::string* out);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_COMMAND_TABLE_H_
