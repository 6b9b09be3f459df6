// Copyright (c) fencedkv authors.
//
// MULTI EXEC DISCARD: a transaction of fenced writes. Inside MULTI, SET
// (without NX, XX or GET), DEL, MSET and PING are queued; any other
// command, or a queued one that does not parse (or PING with more than one
// argument), is refused and discards
// the transaction (EXEC then answers -EXECABORT). EXEC applies the queued
// writes as one atomic batch, from the parses made when they were queued:
// if one is stale nothing is applied and EXEC answers "-STALE ... at
// command N"; a missing or invalid token is reported by EXEC too (tokens
// are resolved then: the skew guard's view is EXEC's), naming the command.

#include "command_table.h"
#include "error_mapping.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

void QueueCommand(ServerState& server, ClientState& client, const Args& args,
                  std::string* out) {
  QueuedCommand queued;
  WriteCommand::Kind kind;
  if (IsWriteCommand(args[0], &kind)) {
    std::string error;
    if (!ParseWriteCommand(args, &queued.write, &error)) {
      client.multi_failed = true;
      resp::Error(out, error);
      return;
    }
    if (queued.write.nx || queued.write.xx || queued.write.get) {
      client.multi_failed = true;
      resp::Error(out,
                  "ERR SET options NX, XX and GET are not supported inside "
                  "MULTI");
      return;
    }
    queued.is_write = true;
  } else if (args.size() > 2) {
    // PING [message], the one other queued command: its arguments are
    // checked when it is queued, as the writes' are, so EXEC never runs a
    // command that could only fail (and PING's 1M arguments are not kept).
    client.multi_failed = true;
    ReplyWrongArgs(args[0], out);
    return;
  }
  // The queue is bounded; past a bound the transaction is discarded as
  // after any queuing error (EXEC answers -EXECABORT) and nothing more of
  // it is kept. What the queue holds is counted, not only the argument
  // bytes: each argument is a std::string of its own (500,000 empty
  // arguments held 16 MB and counted 0).
  if (client.queued.empty()) client.queued_bytes = 0;
  size_t bytes = sizeof(QueuedCommand);
  for (std::string_view a : args) bytes += sizeof(std::string) + a.size();
  const ServerOptions& o = *server.options;
  if (client.queued.size() >= o.max_multi_commands ||
      client.queued_bytes + bytes > o.max_multi_bytes) {
    client.multi_failed = true;
    std::vector<QueuedCommand>().swap(client.queued);
    resp::Error(out, "ERR MULTI queue limit reached (max_multi_commands " +
                         std::to_string(o.max_multi_commands) +
                         ", max_multi_bytes " +
                         std::to_string(o.max_multi_bytes) +
                         "): the transaction is discarded");
    return;
  }
  // And all clients together (maxmemory_clients; the queue is charged
  // once the command is dispatched: Connection::Recharge). Past it, the
  // client holding the most goes, this one if it would.
  if (!client.multi_failed &&
      !server.MakeClientRoom(client.id,
                             client.memory_share + static_cast<int64_t>(bytes),
                             bytes)) {
    client.multi_failed = true;
    std::vector<QueuedCommand>().swap(client.queued);
    resp::Error(out,
                server.ClientMemoryRefusal("the transaction is discarded"));
    return;
  }
  if (!client.multi_failed) {
    queued.args.assign(args.begin(), args.end());
    client.queued.push_back(std::move(queued));
    client.queued_bytes += bytes;
  }
  resp::Simple(out, "QUEUED");
}

namespace {

// Applies the queued writes as one atomic batch, each op's index range kept
// for the per-command replies.
void ExecTransaction(ServerState& server, ClientState& client,
                     std::string* out) {
  std::vector<QueuedCommand> queued;
  queued.swap(client.queued);
  client.in_multi = false;
  if (client.multi_failed) {
    client.multi_failed = false;
    resp::Error(out,
                "EXECABORT Transaction discarded because of previous errors.");
    return;
  }
  WriteBatch batch;
  std::vector<std::pair<size_t, size_t>> ranges;  // [first op, end op)
  for (const QueuedCommand& q : queued) {
    const size_t first = batch.Count();
    if (q.is_write) {
      const Args args(q.args.begin(), q.args.end());
      Token token = 0;
      std::string refused;
      if (!ResolveWriteToken(server, args, q.write, &token, &refused)) {
        // Named as a stale token's is ("at command N").
        if (refused.size() >= 2 &&
            refused.compare(refused.size() - 2, 2, "\r\n") == 0) {
          refused.insert(refused.size() - 2,
                         " at command " + std::to_string(ranges.size() + 1) +
                             " (nothing was applied)");
        }
        out->append(refused);
        return;
      }
      AppendWriteOps(args, q.write, token, &batch);
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
    const QueuedCommand& q = queued[c];
    if (!q.is_write) {
      // PING [message], the one other queued command: as outside MULTI.
      if (q.args.size() == 2) {
        resp::Bulk(out, q.args[1]);
      } else {
        resp::Simple(out, "PONG");
      }
    } else if (q.write.kind == WriteCommand::Kind::kDel) {
      int64_t n = 0;
      for (size_t i = ranges[c].first; i < ranges[c].second; ++i) {
        n += result.existed[i] ? 1 : 0;
      }
      resp::Integer(out, n);
    } else {
      resp::Simple(out, "OK");
    }
  }
}

void CmdMulti(ServerState&, ClientState& client, const Args&,
              std::string* out) {
  if (client.in_multi) {
    resp::Error(out, "ERR MULTI calls can not be nested");
    return;
  }
  client.in_multi = true;
  client.multi_failed = false;
  client.queued.clear();
  resp::Simple(out, "OK");
}

void CmdExec(ServerState& server, ClientState& client, const Args&,
             std::string* out) {
  if (!client.in_multi) {
    resp::Error(out, "ERR EXEC without MULTI");
    return;
  }
  ExecTransaction(server, client, out);
}

void CmdDiscard(ServerState&, ClientState& client, const Args&,
                std::string* out) {
  if (!client.in_multi) {
    resp::Error(out, "ERR DISCARD without MULTI");
    return;
  }
  client.in_multi = false;
  client.multi_failed = false;
  client.queued.clear();
  resp::Simple(out, "OK");
}

}  // namespace

void AppendMultiCommands(std::vector<CommandSpec>* t) {
  t->push_back({"multi", CmdMulti, 1, 0, {}, kCatTransaction});
  t->push_back({"exec", CmdExec, 1, 0, {}, kCatTransaction});
  t->push_back({"discard", CmdDiscard, 1, 0, {}, kCatTransaction});
}

}  // namespace server
}  // namespace fencedkv
