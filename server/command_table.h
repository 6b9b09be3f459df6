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
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/db.h"
#include "fencedkv/iterator.h"
#include "fencedkv/lease.h"

#include "acl.h"
#include "scan_worker.h"
#include "server.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

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
  // The ACL user the connection runs as (set with authed; see StartSession),
  // owned by the server's Acl.
  const AclUser* user = nullptr;
  bool close_after_reply = false;
  // MULTI: the queued commands (owned copies) and whether one was refused.
  bool in_multi = false;
  bool multi_failed = false;
  std::vector<std::vector<std::string>> queued;
  size_t queued_bytes = 0;  // their arguments' bytes (max_multi_bytes)
};

// SCAN cursors: an integer a client holds, mapped to the key its next call
// resumes from. A cursor belongs to the connection that got it (another
// connection's SCAN of it is "ERR invalid cursor", as is an expired or
// forgotten one) and goes when that connection closes (DropOwner). Bounded
// (Limits): per connection the oldest go first past max_per_owner, server-
// wide the oldest past max_cursors or max_bytes (resume keys, up to 64 KiB
// each, plus kOverhead), and any older than idle_ttl.
//
// A cursor may also keep the scan's iterator, positioned on that key, for a
// while: with the hash memtable a new iterator first sorts the memtable, so
// a scan that re-created its iterator on every call would pay that sort per
// page. At most max_parked iterators are kept, each for at most parked_ttl
// (an iterator pins the memtables and files it reads: the server calls
// DropExpired every few seconds); a cursor whose iterator was dropped
// resumes from its key with a new one.
//
// Thread-safe.
class CursorTable {
 public:
  struct Limits {
    size_t max_cursors = 10000;
    size_t max_bytes = 32 << 20;
    size_t max_per_owner = 16;
    std::chrono::milliseconds idle_ttl = std::chrono::minutes(5);
    size_t max_parked = 16;
    std::chrono::milliseconds parked_ttl = std::chrono::seconds(30);
  };
  // Bytes a cursor counts beyond its key.
  static constexpr size_t kOverhead = 128;

  CursorTable() : CursorTable(Limits()) {}
  explicit CursorTable(const Limits& limits) : limits_(limits) {}

  // A new cursor of connection `owner`, resuming at `next_key`, with the
  // iterator positioned there (may be null).
  uint64_t Save(uint64_t owner, std::string next_key,
                std::unique_ptr<Iterator> iterator);
  // False if the cursor is unknown to `owner` (another connection's,
  // expired, forgotten or never issued). Else the key to resume from, and
  // the cursor's parked iterator if it still has one (taken: a second Load
  // of the cursor resumes from the key alone).
  bool Load(uint64_t owner, uint64_t cursor, std::string* next_key,
            std::unique_ptr<Iterator>* iterator);
  // Drops every cursor of `owner`: its connection closed.
  void DropOwner(uint64_t owner);
  // Drops cursors older than idle_ttl, and iterators parked for longer than
  // parked_ttl.
  void DropExpired();
  // Drops every cursor and parked iterator: before the database closes.
  void Clear();
  size_t parked();
  size_t size();
  size_t bytes();

 private:
  struct Cursor {
    uint64_t owner;
    std::string next_key;
    std::unique_ptr<Iterator> iterator;  // may be null
    std::chrono::steady_clock::time_point saved;
  };
  using Map = std::map<uint64_t, Cursor>;  // by id: the oldest first
  // REQUIRES: mu_ held. Erases `it`, moving its iterator (if any) to *out
  // for the caller to free after unlocking.
  void Erase(Map::iterator it, std::vector<std::unique_ptr<Iterator>>* out)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ held. Moves into *out the parked iterators past the ttl,
  // and the oldest beyond `keep`.
  void ReleaseParked(std::chrono::steady_clock::time_point now, size_t keep,
                     std::vector<std::unique_ptr<Iterator>>* out)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  Map cursors_ GUARDED_BY(mu_);
  std::map<uint64_t, std::set<uint64_t>> by_owner_ GUARDED_BY(mu_);
  std::set<uint64_t> parked_ GUARDED_BY(mu_);  // cursors with an iterator
  size_t bytes_ GUARDED_BY(mu_) = 0;
};

// What handlers see of the server.
struct ServerState {
  DB* db = nullptr;
  LeaseService* leases = nullptr;
  const ServerOptions* options = nullptr;
  ServerStats* stats = nullptr;
  CursorTable cursors;
  // Runs SCAN, KEYS and DBSIZE off the io loops (scan_worker.h).
  ScanWorker scans;
  std::chrono::steady_clock::time_point started;
  int port = 0;
  // CLIENT LIST: appends the reply (the list, or an error past
  // max_reply_bytes); filled by the server on demand.
  std::function<void(std::string* out)> list_clients;

  // The users: options->acl, or if it is null the built-in 'default' user
  // with options->requirepass (acl.h). Built on first use.
  const Acl& acl();

 private:
  std::once_flag acl_once_;
  std::shared_ptr<const Acl> acl_;
};

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
  // Takes keys as arguments: a user without ~* may not run it (nor any
  // @keyspace command).
  kCmdKeys = 1 << 6,
};

struct CommandSpec {
  const char* name;  // lower case
  Handler handler;
  int arity;         // >0: exactly; <0: at least -arity (name included)
  uint32_t flags;
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

// Sets a new connection's user: 'default', authenticated at once, if that
// user is on and needs no password; else none (the client must AUTH).
void StartSession(ServerState& server, ClientState* client);

// True if `client` may run `cmd` with `args`: it is authenticated (or the
// command needs no AUTH), and its user allows the command in this form and,
// if it takes keys, keys. The one permission check: Dispatch (which then
// answers -NOAUTH / -NOPERM) and the server's fast paths (plain GET, grouped
// SET / MSET) call it.
bool MayRun(const ClientState& client, const CommandSpec& cmd,
            const Args& args);

// Runs one command (auth, ACL, arity, MULTI queueing, shutdown checks
// included) and appends its reply to *out.
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
