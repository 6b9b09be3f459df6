// Copyright (c) fencedkv authors.
//
// GET SET DEL EXISTS MGET MSET SCAN KEYS DBSIZE, with Redis behaviour plus
// fencing arguments, and ResolveWriteToken (the FENCE policy).
//
//   GET key [FENCE token]                 fenced read with FENCE
//   SET key value [NX|XX] [GET] FENCE token
//   DEL key [key ...] FENCE token         one atomic batch
//   MSET key value [key value ...] FENCE token   one atomic batch
//
// The write commands' arguments are parsed by ParseWriteCommand
// (write_command.h), as MULTI and the io loops' group commit parse them.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>

#include <glog/logging.h>

#include "command_table.h"
#include "error_mapping.h"
#include "fast_path.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

bool ResolveWriteToken(ServerState& server, const Args& args,
                       const WriteCommand& cmd, Token* token,
                       std::string* out) {
  switch (cmd.fence) {
    case WriteCommand::Fence::kToken:
      *token = cmd.token;
      return true;
    case WriteCommand::Fence::kInvalid:
      return ParseTokenArg(args[cmd.token_arg], token, out);  // the error
    case WriteCommand::Fence::kNone:
      break;
  }
  if (!server.options->allow_unfenced) {
    server.stats->nofence_rejections.fetch_add(1, std::memory_order_relaxed);
    resp::Error(out, std::string("NOFENCE ") + cmd.name() +
                         " needs FENCE <token>: this server refuses unfenced "
                         "writes (see --allow_unfenced)");
    return false;
  }
  // Counted each (INFO fencing: unfenced_writes), logged at most once a
  // second: a line per write wrote 21 MB of log for 200k SETs and cut
  // their rate to 30k/s (a helper's review).
  const uint64_t n =
      server.stats->unfenced_writes.fetch_add(1, std::memory_order_relaxed) + 1;
  static std::atomic<int64_t> last_logged_ms{-1000};
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_logged_ms.load(std::memory_order_relaxed);
  if (now - last >= 1000 && last_logged_ms.compare_exchange_strong(
                                last, now, std::memory_order_relaxed)) {
    LOG(WARNING) << "unfenced write (--allow_unfenced): " << cmd.name() << " "
                 << EscapeBytes(args[1].substr(0, 128)) << " (" << n
                 << " so far; one line a second at most)";
  }
  *token = 0;
  return true;
}

namespace {

// SET, DEL and MSET: parsed by ParseWriteCommand, applied as one atomic
// batch (a plain SET as one Put).
void CmdWrite(ServerState& server, ClientState&, const Args& args,
              std::string* out) {
  WriteCommand cmd;
  std::string error;
  if (!ParseWriteCommand(args, &cmd, &error)) {
    resp::Error(out, error);
    return;
  }
  Token token;
  if (!ResolveWriteToken(server, args, cmd, &token, out)) return;
  const WriteOptions wo = ServerWriteOptions(server);
  if (cmd.kind == WriteCommand::Kind::kSet && !cmd.nx && !cmd.xx && !cmd.get) {
    Status s = server.db->Put(wo, args[1], args[2], token);
    if (s.ok()) {
      resp::Simple(out, "OK");
    } else {
      ReplyStatus(s, out);
    }
    return;
  }
  WriteBatch batch;
  AppendWriteOps(args, cmd, token, &batch);
  if (cmd.kind == WriteCommand::Kind::kMset) {
    Status s = server.db->Write(wo, batch);  // (no result wanted: no reads)
    if (s.ok()) {
      resp::Simple(out, "OK");
    } else {
      ReplyStatus(s, out);
    }
    return;
  }
  WriteResult result;
  result.want_old_values = cmd.get;
  Status s = server.db->Write(wo, batch, &result);
  if (!s.ok()) {
    ReplyStatus(s, out);
  } else if (cmd.kind == WriteCommand::Kind::kDel) {
    int64_t deleted = 0;
    for (bool e : result.existed) deleted += e ? 1 : 0;
    resp::Integer(out, deleted);
  } else if (cmd.get) {
    if (result.existed[0]) {
      resp::Bulk(out, result.old_values[0]);
    } else {
      resp::Null(out);
    }
  } else if (result.applied) {
    resp::Simple(out, "OK");
  } else {
    resp::Null(out);  // SET NX / XX: the condition failed
  }
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

// TYPE key: "string" if it has a value, else "none" (fencedkv stores
// strings only; a deleted key that keeps its token is "none").
void CmdType(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  std::string value;
  Status s = server.db->Get(ReadOptions(), args[1], &value);
  if (s.ok()) {
    resp::Simple(out, "string");
  } else if (s.IsNotFound()) {
    resp::Simple(out, "none");
  } else {
    ReplyStatus(s, out);
  }
}

void CmdStrlen(ServerState& server, ClientState&, const Args& args,
               std::string* out) {
  std::string value;
  Status s = server.db->Get(ReadOptions(), args[1], &value);
  if (s.ok()) {
    resp::Integer(out, static_cast<int64_t>(value.size()));
  } else if (s.IsNotFound()) {
    resp::Integer(out, 0);
  } else {
    ReplyStatus(s, out);
  }
}

size_t VarintLength(uint64_t v) {
  size_t n = 1;
  while (v >= 128) {
    v >>= 7;
    ++n;
  }
  return n;
}

// MEMORY USAGE key [SAMPLES n]: an estimate of the key's record, in bytes,
// as RocksDB encodes it in a memtable or an uncompressed data block: the
// internal key (the key and RocksDB's 8-byte sequence number and type), the
// value with fencedkv's header (a kind byte and the token as a varint), and
// both lengths as varints. Not counted: a share of index and filter blocks,
// copies in the block cache, older versions not yet compacted, compression,
// and (with domain functions other than `key`) the domain's fence record,
// which its keys share. nil if the key has no value, as Redis. SAMPLES is
// accepted and ignored (a string has nothing to sample).
void CmdMemory(ServerState& server, ClientState&, const Args& args,
               std::string* out) {
  if (EqualsIgnoreCase(args[1], "HELP") && args.size() == 2) {
    static const char* const kHelp[] = {
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <key> [SAMPLES <count>]",
        "    Estimate of the bytes of the key's record (see README).", "HELP",
        "    Print this help."};
    resp::ArrayHeader(out, std::size(kHelp));
    for (const char* line : kHelp) resp::Simple(out, line);
    return;
  }
  if (!EqualsIgnoreCase(args[1], "USAGE") || args.size() < 3) {
    resp::Error(out,
                "ERR unknown subcommand or wrong number of arguments for '" +
                    EscapeBytes(args[1].substr(0, 64)) + "'. Try MEMORY HELP.");
    return;
  }
  if (args.size() != 3 &&
      !(args.size() == 5 && EqualsIgnoreCase(args[3], "SAMPLES"))) {
    resp::Error(out, "ERR syntax error");
    return;
  }
  if (args.size() == 5) {
    int64_t samples;
    if (!ParseInt64Arg(args[4], &samples, out)) return;
  }
  std::string value;
  Status s = server.db->Get(ReadOptions(), args[2], &value);
  if (s.IsNotFound()) {
    resp::Null(out);
    return;
  }
  Token token = 0;
  if (s.ok()) s = server.db->GetFence(args[2], &token);
  if (!s.ok()) {
    ReplyStatus(s, out);
    return;
  }
  const size_t internal_key = args[2].size() + 8;
  const size_t stored_value = 1 + VarintLength(token) + value.size();
  resp::Integer(out, static_cast<int64_t>(internal_key + stored_value +
                                          VarintLength(internal_key) +
                                          VarintLength(stored_value)));
}

// A read of many keys: within kLoopReadBytes and kLoopReadTime while it runs
// on an event loop (ClientState::loop_read_budget), unbounded elsewhere.
class LoopReadBudget {
 public:
  explicit LoopReadBudget(ClientState& client)
      : client_(client), on_(client.loop_read_budget) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  // After a read of `bytes`, with more to read: true if the command must
  // stop, reply nothing and run again off the loop (client.read_deferred
  // is set).
  bool Spent(size_t bytes) {
    if (!on_) return false;
    bytes_ += bytes;
    if (bytes_ < kLoopReadBytes &&
        (++reads_ % kReadsPerClockLook != 0 ||
         std::chrono::steady_clock::now() - start_ < kLoopReadTime)) {
      return false;
    }
    client_.read_deferred = true;
    return true;
  }

 private:
  static constexpr size_t kReadsPerClockLook = 16;
  ClientState& client_;
  const bool on_;
  std::chrono::steady_clock::time_point start_;
  size_t bytes_ = 0;
  size_t reads_ = 0;
};

void CmdExists(ServerState& server, ClientState& client, const Args& args,
               std::string* out) {
  LoopReadBudget budget(client);
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
    if (i + 1 < args.size() && budget.Spent(s.ok() ? value.size() : 0)) {
      return;
    }
  }
  resp::Integer(out, n);
}

void CmdMget(ServerState& server, ClientState& client, const Args& args,
             std::string* out) {
  LoopReadBudget budget(client);
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
    // (Past the last key the work is done: it replies.)
    if (i + 1 < args.size() && budget.Spent(s.ok() ? value.size() : 0)) {
      return;
    }
  }
  out->append(reply);
}

// A bulk string's framing in a reply: "$<length>\r\n" and "\r\n".
constexpr size_t kBulkOverhead = 16;

}  // namespace

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

bool PatternOk(const GlobPattern& glob, std::string* out) {
  if (glob.ok()) return true;
  resp::Error(out, "ERR " + glob.error());
  return false;
}

namespace {

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
// Blocks pinned in the block cache past which a SCAN's iterator is not
// parked (Limits).
constexpr int64_t kParkedBlockBudget = 64 << 20;
constexpr size_t kScanMaxExaminedBytes = 8 << 20;
constexpr size_t kScanMaxReplyBytes = 1 << 20;

void CmdScan(ServerState& server, ClientState& client, const Args& args,
             std::string* out) {
  std::string start;
  std::unique_ptr<Iterator> it;  // the cursor's own, if it kept one
  uint64_t cursor = 0;
  auto r =
      std::from_chars(args[1].data(), args[1].data() + args[1].size(), cursor);
  if (r.ec != std::errc() || r.ptr != args[1].data() + args[1].size()) {
    resp::Error(out, "ERR invalid cursor");
    return;
  }
  // Any spelling of 0 ("00" too, as Redis reads it) starts a new scan.
  if (cursor != 0 && !server.cursors.Load(client.id, cursor, &start, &it)) {
    resp::Error(out, "ERR invalid cursor");
    return;
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
  const GlobPattern glob(pattern);
  if (!PatternOk(glob, out)) return;
  if (it == nullptr || !it->Valid() || it->key() != start) {
    it = server.db->NewIterator(ScanOptions());
    it->Seek(start);
  }
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
  // The iterator stays with the cursor: the next page goes on from it;
  // unless the blocks iterators pin (this one's included) pass
  // kParkedBlockBudget. An iterator pins the block it stands on in each
  // sorted run, and a block holding a large value is that value's size,
  // charged to the block cache even past its capacity: 16 parked iterators
  // each kept 120-180 MiB over three 60 MiB values. Not parked, the cursor
  // keeps its key and the next page seeks again.
  std::string next = "0";
  if (it->Valid()) {
    std::string key(it->key());
    // (Without a block cache, --block_cache_size=0, RocksDB charges
    // nothing and the pins cannot be counted: no iterator is parked.)
    std::string pinned;
    if (!server.db->GetProperty("rocksdb.block-cache-pinned-usage", &pinned) ||
        std::strtoll(pinned.c_str(), nullptr, 10) > kParkedBlockBudget) {
      it.reset();
    }
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
  if (!PatternOk(glob, out)) return;
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

void AppendKvCommands(std::vector<CommandSpec>* t) {
  t->push_back({"get", CmdGet, -2, kCmdReadOnly, {1, 1, 1}, kCatRead});
  t->push_back(
      {"set", CmdWrite, -3, kCmdWrite | kCmdMulti, {1, 1, 1}, kCatWrite});
  // DEL k [k ...] FENCE t, MSET k v [k v ...] FENCE t: the FENCE clause is
  // not a key (-3: the last key is the third argument from the end). An
  // unfenced call (--allow_unfenced) has keys up to its end: movable keys.
  t->push_back({"del",
                CmdWrite,
                -2,
                kCmdWrite | kCmdMulti | kCmdMovableKeys | kCmdReadsRecords,
                {1, -3, 1},
                kCatWrite});
  t->push_back({"mset",
                CmdWrite,
                -3,
                kCmdWrite | kCmdMulti | kCmdMovableKeys,
                {1, -3, 2},
                kCatWrite});
  t->push_back({"exists", CmdExists, -2, kCmdReadOnly, {1, -1, 1}, kCatRead});
  t->push_back(
      {"type", CmdType, 2, kCmdReadOnly, {1, 1, 1}, kCatRead | kCatKeyspace});
  t->push_back({"strlen", CmdStrlen, 2, kCmdReadOnly, {1, 1, 1}, kCatRead});
  // MEMORY USAGE key: the key is the third word.
  t->push_back({"memory", CmdMemory, -2, kCmdReadOnly, {2, 2, 1}, kCatRead});
  t->push_back({"mget", CmdMget, -2, kCmdReadOnly, {1, -1, 1}, kCatRead});
  t->push_back({"scan",
                CmdScan,
                -2,
                kCmdReadOnly | kCmdIterates,
                {},
                kCatRead | kCatKeyspace});
  t->push_back({"keys",
                CmdKeys,
                2,
                kCmdReadOnly | kCmdIterates,
                {},
                kCatRead | kCatKeyspace | kCatDangerous});
  t->push_back({"dbsize",
                CmdDbsize,
                1,
                kCmdReadOnly | kCmdIterates,
                {},
                kCatRead | kCatKeyspace});
}

}  // namespace server
}  // namespace fencedkv
