// Copyright (c) fencedkv authors.
//
// GET SET DEL EXISTS MGET MSET SCAN KEYS DBSIZE, with Redis behaviour plus
// fencing arguments, and EXEC's batch of fenced writes.
//
//   GET key [FENCE token]                 fenced read with FENCE
//   SET key value [NX|XX] [GET] FENCE token
//   DEL key [key ...] FENCE token         one atomic batch
//   MSET key value [key value ...] FENCE token   one atomic batch

#include <algorithm>
#include <charconv>

#include <glog/logging.h>

#include "command_table.h"
#include "error_mapping.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {

// The token of a write: from its FENCE clause, or 0 (explicitly unfenced)
// when the server allows it. Otherwise replies -NOFENCE and returns false.
bool ResolveWriteToken(ServerState& server, bool has_fence,
                       std::string_view token_text, std::string_view command,
                       std::string_view key, Token* token, std::string* out) {
  if (has_fence) return ParseTokenArg(token_text, token, out);
  if (!server.options->allow_unfenced) {
    server.stats->nofence_rejections.fetch_add(1, std::memory_order_relaxed);
    resp::Error(out, "NOFENCE " + std::string(command) +
                         " needs FENCE <token>: this server refuses unfenced "
                         "writes (see --allow_unfenced)");
    return false;
  }
  server.stats->unfenced_writes.fetch_add(1, std::memory_order_relaxed);
  LOG(WARNING) << "unfenced write (--allow_unfenced): " << command << " "
               << EscapeBytes(key.substr(0, 128));
  *token = 0;
  return true;
}

struct SetRequest {
  std::string_view key, value;
  bool nx = false, xx = false, get = false;
  bool has_fence = false;
  std::string_view token_text;
};

// Parses SET's arguments; on failure *error is the reply line. NX, XX and GET
// may be repeated (Redis 7 accepts "SET k v NX NX"); FENCE may not.
bool ParseSet(const Args& args, SetRequest* req, std::string* error) {
  req->key = args[1];
  req->value = args[2];
  for (size_t i = 3; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (EqualsIgnoreCase(a, "NX")) {
      req->nx = true;
    } else if (EqualsIgnoreCase(a, "XX")) {
      req->xx = true;
    } else if (EqualsIgnoreCase(a, "GET")) {
      req->get = true;
    } else if (EqualsIgnoreCase(a, "FENCE") && i + 1 < args.size()) {
      if (req->has_fence) {  // which token would the write carry?
        *error = "ERR syntax error: FENCE given more than once";
        return false;
      }
      req->has_fence = true;
      req->token_text = args[++i];
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
  if (req->nx && req->xx) {
    *error = "ERR syntax error";
    return false;
  }
  return true;
}

// DEL keys and fence clause: "DEL k1 k2 FENCE 7". False if no key.
bool SplitFenceSuffix(const Args& args, size_t first, size_t* end,
                      bool* has_fence, std::string_view* token_text) {
  *end = args.size();
  *has_fence = false;
  if (args.size() >= first + 3 && EqualsIgnoreCase(args[args.size() - 2], "FENCE")) {
    *has_fence = true;
    *token_text = args.back();
    *end = args.size() - 2;
  }
  return *end > first;
}

// MSET pairs and fence clause. False on an odd number of pair arguments.
bool SplitMset(const Args& args, size_t* end, bool* has_fence,
               std::string_view* token_text) {
  const size_t n = args.size();
  *has_fence = false;
  *end = n;
  if (n >= 5 && (n - 1) % 2 == 0 && EqualsIgnoreCase(args[n - 2], "FENCE")) {
    *has_fence = true;
    *token_text = args[n - 1];
    *end = n - 2;
  }
  return *end > 1 && (*end - 1) % 2 == 0;
}

void CmdGet(ServerState& server, ClientState&, const Args& args,
            std::string* out) {
  std::string value;
  Status s;
  if (args.size() == 2) {
    s = server.db->Get(ReadOptions(), args[1], &value);
  } else if (args.size() == 4 && EqualsIgnoreCase(args[2], "FENCE")) {
    Token token;
    if (!ParseTokenArg(args[3], &token, out)) return;
    s = server.db->GetFenced(ReadOptions(), args[1], token, &value);
  } else {
    resp::Error(out, "ERR syntax error");
    return;
  }
  if (s.ok()) {
    resp::Bulk(out, value);
  } else if (s.IsNotFound()) {
    resp::Null(out);
  } else {
    ReplyStatus(s, out);
  }
}

void CmdSet(ServerState& server, ClientState&, const Args& args,
            std::string* out) {
  SetRequest req;
  std::string error;
  if (!ParseSet(args, &req, &error)) {
    resp::Error(out, error);
    return;
  }
  Token token;
  if (!ResolveWriteToken(server, req.has_fence, req.token_text, "SET", req.key,
                         &token, out)) {
    return;
  }
  if (!req.nx && !req.xx && !req.get) {
    Status s = server.db->Put(ServerWriteOptions(server), req.key, req.value,
                              token);
    if (s.ok()) {
      resp::Simple(out, "OK");
    } else {
      ReplyStatus(s, out);
    }
    return;
  }
  WriteBatch batch;
  batch.Put(req.key, req.value, token,
            req.nx ? WriteCondition::kIfAbsent
                   : req.xx ? WriteCondition::kIfPresent : WriteCondition::kNone);
  WriteResult result;
  result.want_old_values = req.get;
  Status s = server.db->Write(ServerWriteOptions(server), batch, &result);
  if (!s.ok()) {
    ReplyStatus(s, out);
  } else if (req.get) {
    if (result.existed[0]) {
      resp::Bulk(out, result.old_values[0]);
    } else {
      resp::Null(out);
    }
  } else if (result.applied) {
    resp::Simple(out, "OK");
  } else {
    resp::Null(out);
  }
}

void CmdDel(ServerState& server, ClientState&, const Args& args,
            std::string* out) {
  size_t end;
  bool has_fence;
  std::string_view token_text;
  if (!SplitFenceSuffix(args, 1, &end, &has_fence, &token_text)) {
    ReplyWrongArgs("del", out);
    return;
  }
  Token token;
  if (!ResolveWriteToken(server, has_fence, token_text, "DEL", args[1], &token,
                         out)) {
    return;
  }
  WriteBatch batch;
  for (size_t i = 1; i < end; ++i) batch.Delete(args[i], token);
  WriteResult result;
  Status s = server.db->Write(ServerWriteOptions(server), batch, &result);
  if (!s.ok()) {
    ReplyStatus(s, out);
    return;
  }
  int64_t deleted = 0;
  for (bool e : result.existed) deleted += e ? 1 : 0;
  resp::Integer(out, deleted);
}

void CmdMset(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  size_t end;
  bool has_fence;
  std::string_view token_text;
  if (!SplitMset(args, &end, &has_fence, &token_text)) {
    ReplyWrongArgs("mset", out);
    return;
  }
  Token token;
  if (!ResolveWriteToken(server, has_fence, token_text, "MSET", args[1], &token,
                         out)) {
    return;
  }
  WriteBatch batch;
  for (size_t i = 1; i + 1 < end; i += 2) batch.Put(args[i], args[i + 1], token);
  Status s = server.db->Write(ServerWriteOptions(server), batch);
  if (s.ok()) {
    resp::Simple(out, "OK");
  } else {
    ReplyStatus(s, out);
  }
}

void CmdExists(ServerState& server, ClientState&, const Args& args,
               std::string* out) {
  int64_t n = 0;
  std::string value;
  for (size_t i = 1; i < args.size(); ++i) {
    Status s = server.db->Get(ReadOptions(), args[i], &value);
    if (s.ok()) {
      ++n;
    } else if (!s.IsNotFound()) {
      ReplyStatus(s, out);
      return;
    }
  }
  resp::Integer(out, n);
}

void CmdMget(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  std::string reply;
  resp::ArrayHeader(&reply, args.size() - 1);
  std::string value;
  for (size_t i = 1; i < args.size(); ++i) {
    Status s = server.db->Get(ReadOptions(), args[i], &value);
    if (s.ok()) {
      resp::Bulk(&reply, value);
    } else if (s.IsNotFound() || s.IsInvalidArgument()) {
      resp::Null(&reply);  // as Redis: a missing key is nil
    } else {
      ReplyStatus(s, out);
      return;
    }
    if (ReplyTooLarge(server, reply.size(), out)) return;
  }
  out->append(reply);
}

// A bulk string's framing in a reply: "$<length>\r\n" and "\r\n".
constexpr size_t kBulkOverhead = 16;
// Matches `key` against `glob` into *matched. False, and the error reply,
// if the match would cost more than its budget.
bool MatchKey(const GlobPattern& glob, std::string_view key, bool* matched,
              std::string* out) {
  const GlobPattern::Result m = glob.Match(key);
  if (m == GlobPattern::Result::kTooCostly) {
    resp::Error(out,
                "ERR pattern too complex: matching it against one key "
                "took more than " +
                    std::to_string(GlobPattern::kStepsPerByte) +
                    " steps per byte (a long literal between two '*'?)");
    return false;
  }
  *matched = m == GlobPattern::Result::kMatch;
  return true;
}

ReadOptions ScanOptions() {
  ReadOptions ro;
  ro.fill_cache = false;
  return ro;
}

// One SCAN call examines at most this many keys, or key bytes, whatever
// its COUNT, and stops once its reply holds kScanMaxReplyBytes of keys: a
// huge COUNT cannot make one call run (or reply) unbounded. The cursor
// goes on from there.
constexpr int64_t kScanMaxExamined = 10000;
constexpr size_t kScanMaxExaminedBytes = 8 << 20;
constexpr size_t kScanMaxReplyBytes = 1 << 20;

void CmdScan(ServerState& server, ClientState& client, const Args& args,
             std::string* out) {
  std::string start;
  std::unique_ptr<Iterator> it;  // the cursor's own, if it kept one
  if (args[1] != "0") {
    uint64_t cursor = 0;
    auto r = std::from_chars(args[1].data(), args[1].data() + args[1].size(), cursor);
    if (r.ec != std::errc() || r.ptr != args[1].data() + args[1].size() ||
        !server.cursors.Load(client.id, cursor, &start, &it)) {
      resp::Error(out, "ERR invalid cursor");
      return;
    }
  }
  std::string_view pattern;
  bool has_pattern = false;
  int64_t count = 10;
  bool type_ok = true;
  for (size_t i = 2; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "MATCH") && i + 1 < args.size()) {
      pattern = args[++i];
      has_pattern = true;
    } else if (EqualsIgnoreCase(args[i], "COUNT") && i + 1 < args.size()) {
      if (!ParseInt64Arg(args[++i], &count, out)) return;
      if (count < 1) {
        resp::Error(out, "ERR syntax error");
        return;
      }
    } else if (EqualsIgnoreCase(args[i], "TYPE") && i + 1 < args.size()) {
      type_ok = EqualsIgnoreCase(args[++i], "string");  // the only type
    } else {
      resp::Error(out, "ERR syntax error");
      return;
    }
  }
  if (it == nullptr || !it->Valid() || it->key() != start) {
    it = server.db->NewIterator(ScanOptions());
    it->Seek(start);
  }
  const GlobPattern glob(pattern);
  std::vector<std::string> keys;
  const int64_t max_examined = std::min(count, kScanMaxExamined);
  int64_t examined = 0;
  size_t examined_bytes = 0, reply_bytes = 0;
  for (; it->Valid() && examined < max_examined &&
         examined_bytes < kScanMaxExaminedBytes &&
         reply_bytes < kScanMaxReplyBytes;
       it->Next(), ++examined) {
    examined_bytes += it->key().size();
    if (!type_ok) continue;
    bool matched = true;
    if (has_pattern && !MatchKey(glob, it->key(), &matched, out)) return;
    if (!matched) continue;
    keys.emplace_back(it->key());
    reply_bytes += keys.back().size() + kBulkOverhead;
    if (ReplyTooLarge(server, reply_bytes, out)) return;
  }
  if (!it->status().ok()) {
    ReplyStatus(it->status(), out);
    return;
  }
  // The iterator stays with the cursor: the next page goes on from it.
  std::string next = "0";
  if (it->Valid()) {
    std::string key(it->key());
    next = std::to_string(
        server.cursors.Save(client.id, std::move(key), std::move(it)));
  }
  resp::ArrayHeader(out, 2);
  resp::Bulk(out, next);
  resp::ArrayHeader(out, keys.size());
  for (const auto& k : keys) resp::Bulk(out, k);
}

void CmdKeys(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  const GlobPattern glob(args[1]);
  auto it = server.db->NewIterator(ScanOptions());
  std::vector<std::string> keys;
  size_t reply_bytes = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    bool matched;
    if (!MatchKey(glob, it->key(), &matched, out)) return;
    if (!matched) continue;
    keys.emplace_back(it->key());
    reply_bytes += keys.back().size() + kBulkOverhead;
    if (ReplyTooLarge(server, reply_bytes, out)) return;
  }
  if (!it->status().ok()) {
    ReplyStatus(it->status(), out);
    return;
  }
  resp::ArrayHeader(out, keys.size());
  for (const auto& k : keys) resp::Bulk(out, k);
}

void CmdDbsize(ServerState& server, ClientState&, const Args&,
               std::string* out) {
  // Exact (a full key scan), like Redis' answer; O(keys).
  auto it = server.db->NewIterator(ScanOptions());
  int64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  if (!it->status().ok()) {
    ReplyStatus(it->status(), out);
    return;
  }
  resp::Integer(out, n);
}

}  // namespace

bool CheckQueueable(const Args& args, std::string* error) {
  if (EqualsIgnoreCase(args[0], "SET")) {
    SetRequest req;
    if (!ParseSet(args, &req, error)) return false;
    if (req.nx || req.xx || req.get) {
      *error = "ERR SET options NX, XX and GET are not supported inside MULTI";
      return false;
    }
    return true;
  }
  size_t end;
  bool has_fence;
  std::string_view token_text;
  if (EqualsIgnoreCase(args[0], "DEL") &&
      !SplitFenceSuffix(args, 1, &end, &has_fence, &token_text)) {
    *error = "ERR wrong number of arguments for 'del' command";
    return false;
  }
  if (EqualsIgnoreCase(args[0], "MSET") &&
      !SplitMset(args, &end, &has_fence, &token_text)) {
    *error = "ERR wrong number of arguments for 'mset' command";
    return false;
  }
  return true;
}

void ExecTransaction(ServerState& server, ClientState& client,
                     std::string* out) {
  // The queued commands (already checked by CheckQueueable) become one
  // atomic batch; each op's index range is kept for the per-command replies.
  std::vector<std::vector<std::string>> queued;
  queued.swap(client.queued);
  client.in_multi = false;
  if (client.multi_failed) {
    client.multi_failed = false;
    resp::Error(out, "EXECABORT Transaction discarded because of previous errors.");
    return;
  }
  WriteBatch batch;
  std::vector<std::pair<size_t, size_t>> ranges;  // [first op, end op)
  for (const auto& cmd : queued) {
    const Args args(cmd.begin(), cmd.end());
    const size_t first = batch.Count();
    std::string error;
    size_t end;
    bool has_fence = false;
    std::string_view token_text;
    Token token = 0;
    if (EqualsIgnoreCase(args[0], "SET")) {
      SetRequest req;
      ParseSet(args, &req, &error);
      if (!ResolveWriteToken(server, req.has_fence, req.token_text, "SET",
                             req.key, &token, out)) {
        return;
      }
      batch.Put(req.key, req.value, token);
    } else if (EqualsIgnoreCase(args[0], "DEL")) {
      SplitFenceSuffix(args, 1, &end, &has_fence, &token_text);
      if (!ResolveWriteToken(server, has_fence, token_text, "DEL", args[1],
                             &token, out)) {
        return;
      }
      for (size_t i = 1; i < end; ++i) batch.Delete(args[i], token);
    } else if (EqualsIgnoreCase(args[0], "MSET")) {
      SplitMset(args, &end, &has_fence, &token_text);
      if (!ResolveWriteToken(server, has_fence, token_text, "MSET", args[1],
                             &token, out)) {
        return;
      }
      for (size_t i = 1; i + 1 < end; i += 2) batch.Put(args[i], args[i + 1], token);
    }
    ranges.emplace_back(first, batch.Count());
  }
  WriteResult result;
  Status s = server.db->Write(ServerWriteOptions(server), batch, &result);
  if (!s.ok()) {
    // e.g. -STALE ... at command N: nothing was applied. The op index maps
    // back to the queued command that holds it.
    if (s.IsStaleToken()) {
      StaleTokenInfo info = *s.stale();
      for (size_t c = 0; c < ranges.size(); ++c) {
        if (static_cast<size_t>(info.batch_index) < ranges[c].second) {
          info.batch_index = static_cast<int64_t>(c);
          break;
        }
      }
      resp::Error(out, ErrorLine(Status::StaleToken(info), true));
    } else {
      ReplyStatus(s, out);
    }
    return;
  }
  resp::ArrayHeader(out, queued.size());
  for (size_t c = 0; c < queued.size(); ++c) {
    const std::string& name = queued[c][0];
    if (EqualsIgnoreCase(name, "DEL")) {
      int64_t n = 0;
      for (size_t i = ranges[c].first; i < ranges[c].second; ++i) {
        n += result.existed[i] ? 1 : 0;
      }
      resp::Integer(out, n);
    } else if (EqualsIgnoreCase(name, "PING")) {
      resp::Simple(out, "PONG");
    } else {
      resp::Simple(out, "OK");
    }
  }
}

void AppendKvCommands(std::vector<CommandSpec>* t) {
  t->push_back({"get", CmdGet, -2, kCmdReadOnly | kCmdKeys, kCatRead});
  t->push_back(
      {"set", CmdSet, -3, kCmdWrite | kCmdMulti | kCmdKeys, kCatWrite});
  t->push_back(
      {"del", CmdDel, -2, kCmdWrite | kCmdMulti | kCmdKeys, kCatWrite});
  t->push_back(
      {"mset", CmdMset, -3, kCmdWrite | kCmdMulti | kCmdKeys, kCatWrite});
  t->push_back({"exists", CmdExists, -2, kCmdReadOnly | kCmdKeys, kCatRead});
  t->push_back({"mget", CmdMget, -2, kCmdReadOnly | kCmdKeys, kCatRead});
  t->push_back({"scan", CmdScan, -2, kCmdReadOnly | kCmdIterates,
                kCatRead | kCatKeyspace});
  t->push_back({"keys", CmdKeys, 2, kCmdReadOnly | kCmdIterates,
                kCatRead | kCatKeyspace | kCatDangerous});
  t->push_back({"dbsize", CmdDbsize, 1, kCmdReadOnly | kCmdIterates,
                kCatRead | kCatKeyspace});
}

}  // namespace server
}  // namespace fencedkv
