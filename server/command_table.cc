// Copyright (c) fencedkv authors.

#include "command_table.h"

#include <algorithm>
#include <charconv>

#include "error_mapping.h"
#include "repl_commit.h"
#include "replication.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {
// ASCII only, as Redis matches command and option names (std::tolower, a
// libc call per character through the locale's table, was about 2% of a
// pipelined SET's CPU with its thread-local lookup).
inline char AsciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

void ReplyStatus(const Status& s, std::string* out) {
  resp::Error(out, ErrorLine(s));
}

void ReplyWrongArgs(std::string_view command, std::string* out) {
  std::string lower(command);
  for (char& c : lower) c = AsciiLower(c);
  resp::Error(out, "ERR wrong number of arguments for '" + lower + "' command");
}

bool ReplyTooLarge(const ServerState& server, size_t bytes, std::string* out) {
  const size_t limit = server.options->max_reply_bytes;
  if (bytes <= limit) return false;
  resp::Error(out, "ERR reply of more than " + std::to_string(limit) +
                       " bytes (max_reply_bytes): ask for less (fewer keys, a "
                       "narrower pattern, SCAN with a smaller COUNT)");
  return true;
}

bool ParseTokenArg(std::string_view text, Token* token, std::string* out) {
  if (ParseToken(text, token)) return true;
  resp::Error(out, "ERR invalid token '" + EscapeBytes(text.substr(0, 64)) +
                       "': a fencing token is a decimal integer in 1.." +
                       std::to_string(kMaxToken) + " without leading zeros");
  return false;
}

bool ParseInt64Arg(std::string_view text, int64_t* v, std::string* out) {
  int64_t value = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  // As Redis's string2ll: "0", or an optional '-' and a digit 1-9 first
  // (no leading zero, no "-0").
  const std::string_view digits =
      text.empty() || text[0] != '-' ? text : text.substr(1);
  const bool canonical =
      text == "0" || (!digits.empty() && digits[0] >= '1' && digits[0] <= '9');
  if (!canonical || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    resp::Error(out, "ERR value is not an integer or out of range");
    return false;
  }
  *v = value;
  return true;
}

WriteOptions ServerWriteOptions(const ServerState& server) {
  WriteOptions wo;
  wo.sync = server.options->sync;
  return wo;
}

const std::vector<CommandSpec>& AllCommands() {
  static const std::vector<CommandSpec>* table = [] {
    auto* t = new std::vector<CommandSpec>();
    AppendKvCommands(t);
    AppendMultiCommands(t);
    AppendFenceCommands(t);
    AppendAdminCommands(t);
    AppendBackupCommands(t);
    AppendReplicationCommands(t);
    std::sort(t->begin(), t->end(),
              [](const CommandSpec& a, const CommandSpec& b) {
                return std::string_view(a.name) < std::string_view(b.name);
              });
    return t;
  }();
  return *table;
}

size_t CommandIndex(const CommandSpec& cmd) {
  return static_cast<size_t>(&cmd - AllCommands().data());
}

const CommandSpec* LookupCommand(std::string_view name) {
  if (name.size() > 32) return nullptr;
  char lower[33];
  for (size_t i = 0; i < name.size(); ++i) {
    lower[i] = AsciiLower(name[i]);
  }
  const std::string_view key(lower, name.size());
  const auto& table = AllCommands();
  auto it = std::lower_bound(table.begin(), table.end(), key,
                             [](const CommandSpec& c, std::string_view k) {
                               return std::string_view(c.name) < k;
                             });
  if (it == table.end() || std::string_view(it->name) != key) return nullptr;
  return &*it;
}

bool CommandKeys(const CommandSpec& cmd, const Args& args,
                 std::vector<size_t>* positions) {
  positions->clear();
  if ((cmd.flags & kCmdMovableKeys) != 0) {
    // Where the keys end depends on the FENCE clause: the parse says.
    WriteCommand write;
    std::string error;
    if (!ParseWriteCommand(args, &write, &error)) return false;
    for (size_t i = write.first; i < write.end; i += write.step()) {
      positions->push_back(i);
    }
    return true;
  }
  const KeyPositions& k = cmd.keys;
  if (k.first <= 0 || k.step <= 0) return true;
  const auto argc = static_cast<int>(args.size());
  const int last = k.last < 0 ? argc + k.last : k.last;
  for (int i = k.first; i <= last && i < argc; i += k.step) {
    positions->push_back(static_cast<size_t>(i));
  }
  return true;
}

void StartSession(ServerState& server, ClientState* client) {
  client->user = server.acl().InitialUser();
  client->authed = client->user != nullptr;
  client->read_only = server.read_only;
  client->lease_deadline = server.lease_deadline;
}

bool IsWriteCall(const CommandSpec& cmd, const ClientState& client,
                 const Args& args) {
  if ((cmd.categories & kCatWrite) != 0) return true;
  if ((cmd.admin_categories & kCatWrite) != 0 && cmd.admin_form != nullptr &&
      cmd.admin_form(args) != nullptr) {
    return true;  // FENCE.FLOOR t
  }
  if (std::string_view(cmd.name) == "exec") {
    for (const auto& q : client.queued) {
      if (q.is_write) return true;
    }
  }
  return false;
}

Admission Admit(const ClientState& client, const Args& args) {
  using Verdict = Admission::Verdict;
  using Refusal = Admission::Refusal;
  Admission a;
  a.cmd = LookupCommand(args[0]);
  if (a.cmd == nullptr) return a;  // kUnknownCommand
  const CommandSpec& cmd = *a.cmd;
  const auto argc = static_cast<int>(args.size());
  if ((cmd.arity > 0 && argc != cmd.arity) ||
      (cmd.arity < 0 && argc < -cmd.arity)) {
    a.refusal = Refusal::kWrongArity;
    return a;
  }
  if ((cmd.flags & kCmdNoAuth) == 0) {
    if (!client.authed) {
      a.refusal = Refusal::kNoAuth;
      return a;
    }
    if (client.user == nullptr) {  // fail closed
      a.refusal = Refusal::kNoPermission;
      return a;
    }
    const char* admin =
        cmd.admin_form != nullptr ? cmd.admin_form(args) : nullptr;
    if (!client.user->Allows(CommandIndex(cmd), admin != nullptr)) {
      a.refusal = Refusal::kNoPermission;
      a.form = admin;
      return a;
    }
    if (!client.user->allkeys() &&
        (cmd.keys.first > 0 || (cmd.categories & kCatKeyspace) != 0)) {
      a.refusal = Refusal::kNoKeys;
      return a;
    }
  }
  const bool replica = client.read_only != nullptr &&
                       client.read_only->load(std::memory_order_relaxed);
  // A primary whose etcd lease may have expired may already have been
  // replaced: until it renews the lease or steps down (which its etcd
  // thread does only between two calls to etcd, each with its timeout), it
  // answers nothing that only the primary may answer.
  bool lapsed = false;
  if (!replica && client.lease_deadline != nullptr) {
    const int64_t deadline =
        client.lease_deadline->load(std::memory_order_relaxed);
    lapsed = deadline != 0 && ReplNowMs() >= deadline;
  }
  if (replica || lapsed) {
    const std::string_view name(cmd.name);
    Refusal refusal = Refusal::kNone;
    if (IsWriteCall(cmd, client, args)) {
      refusal = Refusal::kReadOnly;
    } else if ((cmd.categories & kCatLease) != 0) {
      refusal = Refusal::kReadOnlyLease;
    } else if ((name == "get" && args.size() > 2) ||
               ((cmd.categories & kCatFencing) != 0 &&
                name != "fence.domain")) {
      // The fence state a replica keeps in memory (the floor, cached
      // maxima) is not refreshed by the batches it applies: only the
      // primary answers.
      refusal = Refusal::kReadOnlyFencedRead;
    }
    if (refusal != Refusal::kNone) {
      a.refusal = lapsed ? Refusal::kLeaseLapsed : refusal;
      return a;
    }
  }
  a.refusal = Refusal::kNone;
  if (client.in_multi) {
    const std::string_view name(cmd.name);
    if (name != "exec" && name != "discard" && name != "multi" &&
        name != "quit") {
      if ((cmd.flags & kCmdMulti) == 0) {
        a.refusal = Refusal::kNotInMulti;
        return a;
      }
      a.verdict = Verdict::kQueue;
      return a;
    }
  }
  a.verdict = Verdict::kRun;
  return a;
}

namespace {

// The error line of a refusal (see Admission::Refusal).
std::string RefusalLine(const Admission& a, const Args& args) {
  using Refusal = Admission::Refusal;
  switch (a.refusal) {
    case Refusal::kUnknownCommand: {
      std::string msg = "ERR unknown command '" +
                        EscapeBytes(args[0].substr(0, 128)) +
                        "', with args beginning with:";
      for (size_t i = 1; i < args.size() && i < 4; ++i) {
        msg += " '" + EscapeBytes(args[i].substr(0, 64)) + "'";
      }
      return msg;
    }
    case Refusal::kWrongArity:
      return "ERR wrong number of arguments for '" + std::string(a.cmd->name) +
             "' command";
    case Refusal::kNoAuth:
      return "NOAUTH Authentication required.";
    case Refusal::kNoPermission:
      return "NOPERM this user has no permissions to run the " +
             (a.form != nullptr ? std::string(a.form)
                                : "'" + std::string(a.cmd->name) + "' command");
    case Refusal::kNoKeys:
      return "NOPERM this user has no permissions to access one of the keys "
             "used as arguments";
    case Refusal::kNotInMulti:
      return "ERR " + std::string(a.cmd->name) +
             " is not allowed inside MULTI: a fencedkv transaction applies "
             "fenced writes (SET, DEL, MSET) as one atomic batch";
    case Refusal::kReadOnly:
      return "READONLY You can't write against a read only replica.";
    case Refusal::kReadOnlyFencedRead:
      return "READONLY fenced reads are answered by the primary: a replica "
             "may lag";
    case Refusal::kReadOnlyLease:
      return "READONLY the lease service runs on the primary";
    case Refusal::kLeaseLapsed:
      return "READONLY this server's etcd lease may have expired, so it may "
             "no longer be the primary: no write, fenced read or lease "
             "command until it renews the lease or steps down";
    case Refusal::kNone:
      break;
  }
  return "ERR refused";
}

}  // namespace

void Execute(ServerState& server, ClientState& client, const Args& args,
             const Admission& admission, std::string* out) {
  switch (admission.verdict) {
    case Admission::Verdict::kRefuse:
      // Inside MULTI a refused command discards the transaction. (NOAUTH
      // is left out; it cannot happen there: MULTI needs a login.)
      if (client.in_multi && admission.refusal != Admission::Refusal::kNoAuth) {
        client.multi_failed = true;
      }
      if (admission.refusal == Admission::Refusal::kReadOnly &&
          server.repl != nullptr) {
        resp::Error(out, server.repl->ReadOnlyLine());  // says why
        return;
      }
      resp::Error(out, RefusalLine(admission, args));
      return;
    case Admission::Verdict::kQueue:
      QueueCommand(server, client, args, out);
      return;
    case Admission::Verdict::kRun:
      admission.cmd->handler(server, client, args, out);
      return;
  }
}

void Dispatch(ServerState& server, ClientState& client, const Args& args,
              std::string* out) {
  Execute(server, client, args, Admit(client, args), out);
}

}  // namespace server
}  // namespace fencedkv
