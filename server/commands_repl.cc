// Copyright (c) fencedkv authors.
//
// Replication commands (replication.h, docs/replication.md):
//   REPLICAOF host port | REPLICAOF NO ONE  -> +OK (SLAVEOF too)  @admin
//   ROLE                     -> as in Redis: [master, seq, [[ip, port,
//                               acked], ...]] | [slave, host, port, state,
//                               applied seq]
//   WAIT numreplicas timeout -> integer: replicas that acknowledged every
//                               write before the call (the connection waits
//                               off the loop: Connection::StartWait)
//   FENCEDKV.SYNC ...        -> the replica's handshake: the connection
//                               becomes a replication link  @admin
//   SENTINEL get-master-addr-by-name <shard> | master <shard> | masters |
//            replicas <shard> | slaves <shard> | sentinels <shard>
//                            -> as Redis Sentinel, from etcd's record (etcd
//                               mode): Sentinel clients find the primary
//   FENCEDKV.DIGEST          -> bulk: the "fencedkv.digest" property (16 hex
//                               digits over every record), on the scan
//                               thread: it reads everything

#include <cctype>

#include "command_table.h"
#include "error_mapping.h"
#include "repl_stream.h"
#include "replication.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {

void CmdReplicaOf(ServerState& server, ClientState&, const Args& args,
                  std::string* out) {
  if (server.repl == nullptr) {
    resp::Error(out, "ERR replication is not available");
    return;
  }
  std::string primary;
  if (EqualsIgnoreCase(args[1], "no") && EqualsIgnoreCase(args[2], "one")) {
    primary.clear();
  } else {
    int64_t port;
    if (!ParseInt64Arg(args[2], &port, out)) return;
    if (args[1].empty()) {
      resp::Error(out, "ERR Invalid master host");
      return;
    }
    if (port < 1 || port > 65535) {
      resp::Error(out, "ERR Invalid master port");
      return;
    }
    // Printed in INFO and ROLE, and a name to connect to: host:port only.
    std::string host;
    int parsed_port = 0;
    if (!SplitHostPort(
            JoinHostPort(std::string(args[1]), static_cast<int>(port)), &host,
            &parsed_port)) {
      resp::Error(out, "ERR Invalid master host");
      return;
    }
    primary = JoinHostPort(host, parsed_port);
  }
  std::string reply;
  Status s = server.repl->ReplicaOf(primary, &reply);
  if (s.ok()) {
    resp::Simple(out, reply);
  } else {
    ReplyStatus(s, out);
  }
}

void CmdRole(ServerState& server, ClientState&, const Args&, std::string* out) {
  if (server.repl == nullptr) {
    resp::ArrayHeader(out, 3);
    resp::Bulk(out, "master");
    resp::Integer(out,
                  static_cast<int64_t>(server.db->GetLatestSequenceNumber()));
    resp::ArrayHeader(out, 0);
    return;
  }
  server.repl->AppendRole(out);
}

// Reached only when the connection could not wait (a replica, bad
// arguments, no replication): the answer is immediate.
void CmdWait(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  int64_t n, timeout;
  if (!ParseInt64Arg(args[1], &n, out) ||
      !ParseInt64Arg(args[2], &timeout, out)) {
    return;
  }
  if (n < 0) {
    resp::Error(out, "ERR numreplicas is negative");
    return;
  }
  if (timeout < 0) {
    resp::Error(out, "ERR timeout is negative");
    return;
  }
  if (server.repl != nullptr && server.repl->is_replica()) {
    resp::Error(out, "ERR WAIT cannot be used with replica instances");
    return;
  }
  resp::Integer(out, 0);
}

void CmdSync(ServerState& server, ClientState& client, const Args& args,
             std::string* out) {
  if (server.repl == nullptr) {
    resp::Error(out, "ERR replication is not available");
    return;
  }
  client.handoff = true;
  client.handoff_args.assign(args.begin(), args.end());
}

void CmdDigest(ServerState& server, ClientState&, const Args&,
               std::string* out) {
  std::string digest;
  if (!server.db->GetProperty("fencedkv.digest", &digest)) {
    resp::Error(out, "ERR no digest");
    return;
  }
  resp::Bulk(out, digest);
}

void SentinelState(const std::string& name, const std::string& addr,
                   const char* flags,
                   std::vector<std::pair<std::string, std::string>> extra,
                   std::string* out) {
  std::string host;
  int port = 0;
  SplitHostPort(addr, &host, &port);
  std::vector<std::pair<std::string, std::string>> fields = {
      {"name", name},
      {"ip", host},
      {"port", std::to_string(port)},
      {"runid", ""},
      {"flags", flags}};
  fields.insert(fields.end(), extra.begin(), extra.end());
  resp::ArrayHeader(out, fields.size() * 2);
  for (const auto& [k, v] : fields) {
    resp::Bulk(out, k);
    resp::Bulk(out, v);
  }
}

// SENTINEL get-master-addr-by-name | master | masters | replicas | slaves |
// sentinels: what Redis Sentinel answers, from etcd's record of the shard
// (etcd mode), so Sentinel clients find the primary after a failover.
void CmdSentinel(ServerState& server, ClientState&, const Args& args,
                 std::string* out) {
  std::string sub(args[1]);
  for (char& ch : sub) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  const bool all = sub == "masters";
  if (!all && args.size() != 3) {
    ReplyWrongArgs("sentinel", out);
    return;
  }
  ShardRecord r;
  std::vector<std::pair<std::string, std::string>> members;
  const std::string shard =
      all ? (server.repl != nullptr ? server.repl->shard() : std::string())
          : std::string(args[2]);
  const bool known =
      server.repl != nullptr && server.repl->ShardView(shard, &r, &members);
  std::vector<std::string> replicas;
  for (const auto& [addr, role] : members) {
    if (addr != r.primary && role == "replica") replicas.push_back(addr);
  }
  std::string host;
  int port = 0;
  SplitHostPort(r.primary, &host, &port);
  auto master_state = [&] {
    SentinelState(shard, r.primary, "master",
                  {{"role-reported", "master"},
                   {"num-slaves", std::to_string(replicas.size())},
                   {"num-other-sentinels", "0"},
                   {"quorum", "1"},
                   {"config-epoch", std::to_string(r.epoch)}},
                  out);
  };
  if (sub == "get-master-addr-by-name") {
    if (!known) {
      resp::NullArray(out);
      return;
    }
    resp::ArrayHeader(out, 2);
    resp::Bulk(out, host);
    resp::Bulk(out, std::to_string(port));
  } else if (all) {
    resp::ArrayHeader(out, known ? 1 : 0);
    if (known) master_state();
  } else if (!known) {
    resp::Error(out, "ERR No such master with that name");
  } else if (sub == "master") {
    master_state();
  } else if (sub == "replicas" || sub == "slaves") {
    resp::ArrayHeader(out, replicas.size());
    for (const auto& a : replicas) {
      SentinelState(a, a, "slave",
                    {{"role-reported", "slave"},
                     {"master-host", host},
                     {"master-port", std::to_string(port)},
                     {"master-link-status", "ok"},
                     {"in-isr", r.InIsr(a) ? "1" : "0"}},
                    out);
    }
  } else if (sub == "sentinels") {
    resp::ArrayHeader(out, 0);
  } else {
    resp::Error(out, "ERR Unknown sentinel subcommand '" +
                         EscapeBytes(args[1].substr(0, 64)) + "'");
  }
}

}  // namespace

bool ParseWaitArgs(const Args& args, size_t* n, int64_t* timeout_ms) {
  if (args.size() != 3) return false;
  std::string ignored;
  int64_t count, timeout;
  if (!ParseInt64Arg(args[1], &count, &ignored) ||
      !ParseInt64Arg(args[2], &timeout, &ignored) || count < 0 || timeout < 0) {
    return false;
  }
  *n = static_cast<size_t>(count);
  *timeout_ms = timeout;
  return true;
}

void AppendReplicationCommands(std::vector<CommandSpec>* t) {
  t->push_back({"replicaof",
                CmdReplicaOf,
                3,
                kCmdAdmin | kCmdOffLoop,
                {},
                kCatAdmin | kCatDangerous});
  t->push_back({"slaveof",
                CmdReplicaOf,
                3,
                kCmdAdmin | kCmdOffLoop,
                {},
                kCatAdmin | kCatDangerous});
  // Clients (Sentinel-aware ones) ask a node its role: not @admin here,
  // where the default user has no @admin.
  t->push_back({"role", CmdRole, 1, 0, {}, kCatConnection});
  t->push_back({"wait", CmdWait, 3, 0, {}, kCatConnection});
  t->push_back({"sentinel", CmdSentinel, -2, 0, {}, kCatConnection});
  t->push_back(
      {"fencedkv.sync", CmdSync, -9, kCmdAdmin, {}, kCatAdmin | kCatDangerous});
  t->push_back({"fencedkv.digest",
                CmdDigest,
                1,
                kCmdReadOnly | kCmdIterates,
                {},
                kCatRead | kCatKeyspace | kCatDangerous});
}

}  // namespace server
}  // namespace fencedkv
