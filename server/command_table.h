// Copyright (c) fencedkv authors.
//
// The command table: name -> handler, arity and flags (kvrocks / Redis
// style). Handlers are grouped by family in commands_kv.cc (GET SET DEL
// EXISTS MGET MSET SCAN KEYS DBSIZE), commands_fence.cc (FENCE.* and
// LEASE.*) and commands_admin.cc (PING ECHO QUIT SELECT HELLO AUTH CLIENT
// COMMAND CONFIG INFO MULTI EXEC DISCARD).

#ifndef FENCEDKV_SERVER_COMMAND_TABLE_H_
#define FENCEDKV_SERVER_COMMAND_TABLE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/db.h"
#include "fencedkv/iterator.h"
#include "fencedkv/lease.h"
#include "server.h"

namespace fencedkv {
namespace server {

using Args = std::vector<std::string_view>;

// Per-connection state.
struct ClientState {
  uint64_t id = 0;
  std::string name;
  std::string addr;
  int64_t created_ms = 0;
  bool authed = false;
  bool close_after_reply = false;
  // MULTI: the queued commands (owned copies) and whether one was refused.
  bool in_multi = false;
  bool multi_failed = false;
  std::vector<std::vector<std::string>> queued;
  size_t queued_bytes = 0;  // their arguments' bytes (max_multi_bytes)
};

// Server-wide SCAN cursors: an integer a client can hold, mapped to the key
// the next call resumes from. Bounded; the oldest are forgotten.
//
// A cursor may also keep the scan's iterator, positioned on that key, for a
// while: with the hash memtable a new iterator first sorts the memtable, so
// a scan that re-created its iterator on every call would pay that sort per
// page. At most kMaxParked iterators are kept, each for at most `ttl` (an
// iterator pins the memtables and files it reads: the server calls
// DropExpired every few seconds); a cursor whose iterator was dropped
// resumes from its key with a new one.
class CursorTable {
 public:
  explicit CursorTable(std::chrono::milliseconds ttl = std::chrono::seconds(30))
      : ttl_(ttl) {}

  uint64_t Save(std::string next_key, std::unique_ptr<Iterator> iterator);
  // False if the cursor is unknown (expired or never issued). Else the key
  // to resume from, and the cursor's parked iterator if it still has one
  // (taken: a second Load of the cursor resumes from the key alone).
  bool Load(uint64_t cursor, std::string* next_key,
            std::unique_ptr<Iterator>* iterator);
  // Drops the iterators parked for longer than the ttl.
  void DropExpired();
  // Drops every parked iterator: before the database closes.
  void Clear();
  size_t parked();

 private:
  static constexpr size_t kMaxCursors = 10000;
  static constexpr size_t kMaxParked = 16;
  const std::chrono::milliseconds ttl_;
  struct Cursor {
    std::string next_key;
    std::unique_ptr<Iterator> iterator;  // may be null
    std::chrono::steady_clock::time_point parked;
  };
  // REQUIRES: mu_ held. Moves into *out the parked iterators past the ttl,
  // and the oldest beyond `keep`, for the caller to free after unlocking.
  void ReleaseParked(std::chrono::steady_clock::time_point now, size_t keep,
                     std::vector<std::unique_ptr<Iterator>>* out);

  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Cursor> cursors_;
  size_t parked_ = 0;  // cursors with an iterator
};

// What handlers see of the server.
struct ServerState {
  DB* db = nullptr;
  LeaseService* leases = nullptr;
  const ServerOptions* options = nullptr;
  ServerStats* stats = nullptr;
  CursorTable cursors;
  std::chrono::steady_clock::time_point started;
  int port = 0;
  // CLIENT LIST: appends the reply (the list, or an error past
  // max_reply_bytes); filled by the server on demand.
  std::function<void(std::string* out)> list_clients;
};

using Handler = void (*)(ServerState& server, ClientState& client,
                         const Args& args, std::string* out);

enum CommandFlags : uint32_t {
  kCmdWrite = 1 << 0,     // a mutation (needs FENCE)
  kCmdReadOnly = 1 << 1,
  kCmdNoAuth = 1 << 2,    // allowed before AUTH
  kCmdMulti = 1 << 3,     // may be queued inside MULTI
  kCmdAdmin = 1 << 4,
  // Creates a database iterator (with the hash memtable, a sort of the
  // memtable first): the server runs it on its database thread when it can,
  // so the loop goes on serving its other connections.
  kCmdIterates = 1 << 5,
};

struct CommandSpec {
  const char* name;  // lower case
  Handler handler;
  int arity;         // >0: exactly; <0: at least -arity (name included)
  uint32_t flags;
};

// nullptr for an unknown command. Case-insensitive.
const CommandSpec* LookupCommand(std::string_view name);
const std::vector<CommandSpec>& AllCommands();

// Runs one command (auth, arity, MULTI queueing, shutdown checks included)
// and appends its reply to *out.
void Dispatch(ServerState& server, ClientState& client, const Args& args,
              std::string* out);

// Family registration (each commands_*.cc).
void AppendKvCommands(std::vector<CommandSpec>* table);
void AppendFenceCommands(std::vector<CommandSpec>* table);
void AppendAdminCommands(std::vector<CommandSpec>* table);
void AppendBackupCommands(std::vector<CommandSpec>* table);
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
// Parses a token argument; on failure appends "-ERR invalid token ..." and
// returns false.
bool ParseTokenArg(std::string_view text, Token* token, std::string* out);
// Parses an integer argument; on failure appends "-ERR value is not an
// integer or out of range" and returns false.
bool ParseInt64Arg(std::string_view text, int64_t* v, std::string* out);
WriteOptions ServerWriteOptions(const ServerState& server);
// Applies a batch of fenced writes built from a queued transaction
// (commands_kv.cc); used by EXEC.
void ExecTransaction(ServerState& server, ClientState& client,
                     std::string* out);
// True (and `args` is fine to queue) if the command may be queued in MULTI.
bool CheckQueueable(const Args& args, std::string* error);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_COMMAND_TABLE_H_
