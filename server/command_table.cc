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
  resp::Error(out,
              "ERR invalid token '" + EscapeBytes(text.substr(0, 64)) +
                  "': a fencing token is a decimal integer in 1.." +
                  std::to_string(kMaxToken));
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

uint64_t CursorTable::Save(std::string next_key,
                          std::unique_ptr<Iterator> iterator) {
  std::vector<std::unique_ptr<Iterator>> expired;  // freed after unlocking
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (iterator != nullptr) ReleaseParked(now, kMaxParked - 1, &expired);
  const uint64_t id = next_id_++;
  if (iterator != nullptr) ++parked_;
  cursors_.emplace(id, Cursor{std::move(next_key), std::move(iterator), now});
  while (cursors_.size() > kMaxCursors) {
    auto oldest = cursors_.begin();
    if (oldest->second.iterator != nullptr) {
      expired.push_back(std::move(oldest->second.iterator));
      --parked_;
    }
    cursors_.erase(oldest);
  }
  return id;
}

bool CursorTable::Load(uint64_t cursor, std::string* next_key,
                       std::unique_ptr<Iterator>* iterator) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cursors_.find(cursor);
  if (it == cursors_.end()) return false;
  *next_key = it->second.next_key;
  *iterator = std::move(it->second.iterator);  // null if none is parked
  if (*iterator != nullptr) --parked_;
  return true;
}

void CursorTable::ReleaseParked(std::chrono::steady_clock::time_point now,
                                size_t keep,
                                std::vector<std::unique_ptr<Iterator>>* out) {
  // Oldest first: those past the ttl, then any beyond `keep`.
  for (auto& [id, c] : cursors_) {
    if (parked_ == 0) break;
    if (c.iterator != nullptr && (now - c.parked > ttl_ || parked_ > keep)) {
      out->push_back(std::move(c.iterator));
      --parked_;
    }
  }
}

void CursorTable::DropExpired() {
  std::vector<std::unique_ptr<Iterator>> expired;  // freed after unlocking
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseParked(std::chrono::steady_clock::now(), kMaxParked, &expired);
}

size_t CursorTable::parked() {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_;
}

void CursorTable::Clear() {
  std::map<uint64_t, Cursor> drop;
  std::lock_guard<std::mutex> lock(mu_);
  drop.swap(cursors_);
  parked_ = 0;
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
  if (!client.authed && !(cmd->flags & kCmdNoAuth)) {
    resp::Error(out, "NOAUTH Authentication required.");
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
