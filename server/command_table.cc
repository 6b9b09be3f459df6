// Copyright (c) fencedkv authors.

#include "command_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "error_mapping.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

void ReplyStatus(const Status& s, std::string* out) {
  resp::Error(out, ErrorLine(s));
}

void ReplyWrongArgs(std::string_view command, std::string* out) {
  std::string lower(command);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
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
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
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

uint64_t CursorTable::Save(uint64_t owner, std::string next_key,
                           std::unique_ptr<Iterator> iterator) {
  std::vector<std::unique_ptr<Iterator>> dropped;  // freed after unlocking
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (iterator != nullptr) {
    ReleaseParked(now, limits_.max_parked - 1, &dropped);
  }
  const uint64_t id = next_id_++;
  if (iterator != nullptr) parked_.insert(id);
  bytes_ += next_key.size() + kOverhead;
  cursors_.emplace(
      id, Cursor{owner, std::move(next_key), std::move(iterator), now});
  std::set<uint64_t>& mine = by_owner_[owner];
  mine.insert(id);
  while (mine.size() > limits_.max_per_owner) {
    Erase(cursors_.find(*mine.begin()), &dropped);
  }
  while (!cursors_.empty() && (cursors_.size() > limits_.max_cursors ||
                               bytes_ > limits_.max_bytes)) {
    Erase(cursors_.begin(), &dropped);
  }
  return id;
}

bool CursorTable::Load(uint64_t owner, uint64_t cursor, std::string* next_key,
                       std::unique_ptr<Iterator>* iterator) {
  std::vector<std::unique_ptr<Iterator>> dropped;  // freed after unlocking
  MutexLock lock(&mu_);
  auto it = cursors_.find(cursor);
  if (it == cursors_.end() || it->second.owner != owner) return false;
  if (std::chrono::steady_clock::now() - it->second.saved > limits_.idle_ttl) {
    Erase(it, &dropped);
    return false;
  }
  *next_key = it->second.next_key;
  *iterator = std::move(it->second.iterator);  // null if none is parked
  parked_.erase(cursor);
  return true;
}

void CursorTable::Erase(Map::iterator it,
                        std::vector<std::unique_ptr<Iterator>>* out) {
  if (it->second.iterator != nullptr) {
    out->push_back(std::move(it->second.iterator));
  }
  parked_.erase(it->first);
  auto mine = by_owner_.find(it->second.owner);
  mine->second.erase(it->first);
  if (mine->second.empty()) by_owner_.erase(mine);
  bytes_ -= it->second.next_key.size() + kOverhead;
  cursors_.erase(it);
}

void CursorTable::ReleaseParked(std::chrono::steady_clock::time_point now,
                                size_t keep,
                                std::vector<std::unique_ptr<Iterator>>* out) {
  // Oldest first: those past the ttl, then any beyond `keep`.
  for (auto id = parked_.begin(); id != parked_.end();) {
    Cursor& c = cursors_.at(*id);
    if (now - c.saved <= limits_.parked_ttl && parked_.size() <= keep) break;
    out->push_back(std::move(c.iterator));
    id = parked_.erase(id);
  }
}

void CursorTable::DropOwner(uint64_t owner) {
  std::vector<std::unique_ptr<Iterator>> dropped;  // freed after unlocking
  MutexLock lock(&mu_);
  auto mine = by_owner_.find(owner);
  if (mine == by_owner_.end()) return;
  const std::set<uint64_t> ids = mine->second;
  for (uint64_t id : ids) Erase(cursors_.find(id), &dropped);
}

void CursorTable::DropExpired() {
  std::vector<std::unique_ptr<Iterator>> dropped;  // freed after unlocking
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  ReleaseParked(now, limits_.max_parked, &dropped);
  while (!cursors_.empty() &&
         now - cursors_.begin()->second.saved > limits_.idle_ttl) {
    Erase(cursors_.begin(), &dropped);
  }
}

size_t CursorTable::parked() {
  MutexLock lock(&mu_);
  return parked_.size();
}

size_t CursorTable::size() {
  MutexLock lock(&mu_);
  return cursors_.size();
}

size_t CursorTable::bytes() {
  MutexLock lock(&mu_);
  return bytes_;
}

void CursorTable::Clear() {
  Map drop;
  MutexLock lock(&mu_);
  drop.swap(cursors_);
  by_owner_.clear();
  parked_.clear();
  bytes_ = 0;
}

const std::vector<CommandSpec>& AllCommands() {
  static const std::vector<CommandSpec>* table = [] {
    auto* t = new std::vector<CommandSpec>();
    AppendKvCommands(t);
    AppendFenceCommands(t);
    AppendAdminCommands(t);
    AppendBackupCommands(t);
    std::sort(t->begin(), t->end(), [](const CommandSpec& a, const CommandSpec& b) {
      return std::string_view(a.name) < std::string_view(b.name);
    });
    return t;
  }();
  return *table;
}

const CommandSpec* LookupCommand(std::string_view name) {
  if (name.size() > 32) return nullptr;
  char lower[33];
  for (size_t i = 0; i < name.size(); ++i) {
    lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
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

const Acl& ServerState::acl() {
  std::call_once(acl_once_, [this] {
    acl_ = options->acl;
    if (acl_ == nullptr) {
      Status s = Acl::Parse("", "", options->requirepass, &acl_);
      (void)s;  // cannot fail: no text
    }
  });
  return *acl_;
}

void StartSession(ServerState& server, ClientState* client) {
  client->user = server.acl().InitialUser();
  client->authed = client->user != nullptr;
}

namespace {

enum class Access { kOk, kNoAuth, kNoCommand, kNoKeys };

// The one permission check (see MayRun). *form names the call in a
// kNoCommand refusal.
Access CheckAccess(const ClientState& client, const CommandSpec& cmd,
                   const Args& args, const char** form) {
  if (cmd.flags & kCmdNoAuth) return Access::kOk;
  if (!client.authed) return Access::kNoAuth;
  if (client.user == nullptr) return Access::kNoCommand;  // fail closed
  const char* admin =
      cmd.admin_form != nullptr ? cmd.admin_form(args) : nullptr;
  if (!client.user->Allows(static_cast<size_t>(&cmd - AllCommands().data()),
                           admin != nullptr)) {
    *form = admin;
    return Access::kNoCommand;
  }
  if (!client.user->allkeys() &&
      ((cmd.flags & kCmdKeys) || (cmd.categories & kCatKeyspace))) {
    return Access::kNoKeys;
  }
  return Access::kOk;
}

}  // namespace

bool MayRun(const ClientState& client, const CommandSpec& cmd,
            const Args& args) {
  const char* form = nullptr;
  return CheckAccess(client, cmd, args, &form) == Access::kOk;
}

void Dispatch(ServerState& server, ClientState& client, const Args& args,
              std::string* out) {
  const CommandSpec* cmd = LookupCommand(args[0]);
  if (cmd == nullptr) {
    std::string msg = "ERR unknown command '" +
                      EscapeBytes(args[0].substr(0, 128)) +
                      "', with args beginning with:";
    for (size_t i = 1; i < args.size() && i < 4; ++i) {
      msg += " '" + EscapeBytes(args[i].substr(0, 64)) + "'";
    }
    if (client.in_multi) client.multi_failed = true;
    resp::Error(out, msg);
    return;
  }
  const auto argc = static_cast<int>(args.size());
  if ((cmd->arity > 0 && argc != cmd->arity) ||
      (cmd->arity < 0 && argc < -cmd->arity)) {
    if (client.in_multi) client.multi_failed = true;
    ReplyWrongArgs(cmd->name, out);
    return;
  }
  const char* form = nullptr;
  switch (CheckAccess(client, *cmd, args, &form)) {
    case Access::kOk:
      break;
    case Access::kNoAuth:
      resp::Error(out, "NOAUTH Authentication required.");
      return;
    case Access::kNoCommand:
      if (client.in_multi) client.multi_failed = true;
      resp::Error(out, "NOPERM this user has no permissions to run the " +
                           (form != nullptr
                                ? std::string(form)
                                : "'" + std::string(cmd->name) + "' command"));
      return;
    case Access::kNoKeys:
      if (client.in_multi) client.multi_failed = true;
      resp::Error(out,
                  "NOPERM this user has no permissions to access one of "
                  "the keys used as arguments");
      return;
  }
  const std::string_view name(cmd->name);
  if (client.in_multi && name != "exec" && name != "discard" &&
      name != "multi" && name != "quit") {
    std::string error;
    if (!(cmd->flags & kCmdMulti)) {
      client.multi_failed = true;
      resp::Error(out, "ERR " + std::string(cmd->name) +
                           " is not allowed inside MULTI: a fencedkv "
                           "transaction applies fenced writes (SET, DEL, "
                           "MSET) as one atomic batch");
      return;
    }
    if (!CheckQueueable(args, &error)) {
      client.multi_failed = true;
      resp::Error(out, error);
      return;
    }
    // The queue is bounded; past a bound the transaction is discarded as
    // after any queuing error (EXEC answers -EXECABORT) and nothing more
    // of it is kept.
    if (client.queued.empty()) client.queued_bytes = 0;
    size_t bytes = 0;
    for (std::string_view a : args) bytes += a.size();
    const ServerOptions& o = *server.options;
    if (client.queued.size() >= o.max_multi_commands ||
        client.queued_bytes + bytes > o.max_multi_bytes) {
      client.multi_failed = true;
      std::vector<std::vector<std::string>>().swap(client.queued);
      resp::Error(out, "ERR MULTI queue limit reached (max_multi_commands " +
                           std::to_string(o.max_multi_commands) +
                           ", max_multi_bytes " +
                           std::to_string(o.max_multi_bytes) +
                           "): the transaction is discarded");
      return;
    }
    if (!client.multi_failed) {
      client.queued.emplace_back(args.begin(), args.end());
      client.queued_bytes += bytes;
    }
    resp::Simple(out, "QUEUED");
    return;
  }
  cmd->handler(server, client, args, out);
}

}  // namespace server
}  // namespace fencedkv
