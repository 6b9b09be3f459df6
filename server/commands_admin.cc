// Copyright (c) fencedkv authors.
//
// PING ECHO QUIT SELECT HELLO AUTH CLIENT COMMAND CONFIG INFO MULTI EXEC
// DISCARD, and a clear refusal of FLUSHDB / FLUSHALL (unfenced mass deletes).

#include <unistd.h>

#include <cctype>
#include <optional>

#include "command_table.h"
#include "fencedkv/version.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void CmdPing(ServerState&, ClientState&, const Args& args, std::string* out) {
  if (args.size() > 2) {
    ReplyWrongArgs("ping", out);
  } else if (args.size() == 2) {
    resp::Bulk(out, args[1]);
  } else {
    resp::Simple(out, "PONG");
  }
}

void CmdEcho(ServerState&, ClientState&, const Args& args, std::string* out) {
  resp::Bulk(out, args[1]);
}

void CmdQuit(ServerState&, ClientState& client, const Args&, std::string* out) {
  resp::Simple(out, "OK");
  client.close_after_reply = true;
}

void CmdSelect(ServerState&, ClientState&, const Args& args, std::string* out) {
  if (args[1] == "0") {
    resp::Simple(out, "OK");
  } else {
    resp::Error(out, "ERR DB index is out of range (fencedkv has one database, 0)");
  }
}

// Constant-time comparison, so AUTH does not leak the password's prefix.
bool SecretEquals(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^
            static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  }
  return diff == 0;
}

// AUTH [user] password: false and an error reply on failure.
bool Authenticate(ServerState& server, ClientState& client,
                  std::string_view user, std::string_view password,
                  std::string* out) {
  const std::string& pass = server.options->requirepass;
  if (pass.empty()) {
    resp::Error(out,
                "ERR AUTH <password> called without any password configured "
                "for the default user. Are you sure your configuration is "
                "correct?");
    return false;
  }
  if (user != "default" || !SecretEquals(password, pass)) {
    resp::Error(out,
                "WRONGPASS invalid username-password pair or user is disabled.");
    return false;
  }
  client.authed = true;
  return true;
}

void CmdAuth(ServerState& server, ClientState& client, const Args& args,
             std::string* out) {
  if (args.size() > 3) {
    ReplyWrongArgs("auth", out);
    return;
  }
  const std::string_view user = args.size() == 3 ? args[1] : "default";
  if (Authenticate(server, client, user, args.back(), out)) {
    resp::Simple(out, "OK");
  }
}

// Redis' rule for client names: printable ASCII without spaces. False (and
// the error reply) otherwise.
bool ValidClientName(std::string_view name, std::string* out) {
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      resp::Error(out,
                  "ERR Client names cannot contain spaces, newlines or special "
                  "characters.");
      return false;
    }
  }
  return true;
}

void CmdHello(ServerState& server, ClientState& client, const Args& args,
              std::string* out) {
  size_t i = 1;
  std::optional<std::string_view> name;
  if (args.size() > 1) {
    if (args[1] != "2") {
      if (args[1] == "3") {
        resp::Error(out, "NOPROTO unsupported protocol version (fencedkv speaks RESP2)");
      } else {
        resp::Error(out, "NOPROTO unsupported protocol version");
      }
      return;
    }
    i = 2;
  }
  for (; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "AUTH") && i + 2 < args.size()) {
      if (!Authenticate(server, client, args[i + 1], args[i + 2], out)) return;
      i += 2;
    } else if (EqualsIgnoreCase(args[i], "SETNAME") && i + 1 < args.size()) {
      name = args[++i];
      if (!ValidClientName(*name, out)) return;
    } else {
      resp::Error(out, "ERR syntax error in HELLO option '" +
                           EscapeBytes(args[i].substr(0, 64)) + "'");
      return;
    }
  }
  if (!client.authed) {
    resp::Error(out, "NOAUTH HELLO must be called with the client already "
                     "authenticated, otherwise the HELLO AUTH <user> <pass> "
                     "option can be used to authenticate the client");
    return;
  }
  // The name is set only once the client is authenticated.
  if (name.has_value()) client.name = std::string(*name);
  resp::ArrayHeader(out, 14);
  resp::Bulk(out, "server");
  resp::Bulk(out, "fencedkv");
  resp::Bulk(out, "version");
  resp::Bulk(out, FENCEDKV_VERSION_STRING);
  resp::Bulk(out, "proto");
  resp::Integer(out, 2);
  resp::Bulk(out, "id");
  resp::UInteger(out, client.id);
  resp::Bulk(out, "mode");
  resp::Bulk(out, "standalone");
  resp::Bulk(out, "role");
  resp::Bulk(out, "master");
  resp::Bulk(out, "modules");
  resp::ArrayHeader(out, 0);
}

void CmdClient(ServerState& server, ClientState& client, const Args& args,
               std::string* out) {
  const std::string sub = Lower(args[1]);
  if (sub == "setname" && args.size() == 3) {
    if (!ValidClientName(args[2], out)) return;
    client.name = std::string(args[2]);
    resp::Simple(out, "OK");
  } else if (sub == "getname" && args.size() == 2) {
    if (client.name.empty()) {
      resp::Null(out);
    } else {
      resp::Bulk(out, client.name);
    }
  } else if (sub == "id" && args.size() == 2) {
    resp::UInteger(out, client.id);
  } else if (sub == "list" && args.size() == 2) {
    if (server.list_clients) {
      server.list_clients(out);
    } else {
      resp::Bulk(out, "");
    }
  } else if (sub == "info" && args.size() == 2) {
    resp::Bulk(out, "id=" + std::to_string(client.id) + " addr=" + client.addr +
                        " name=" + client.name + " db=0\n");
  } else if (sub == "setinfo" && args.size() == 4) {
    resp::Simple(out, "OK");  // redis-py sends lib-name / lib-ver
  } else {
    resp::Error(out, "ERR unknown subcommand or wrong number of arguments for '" +
                         EscapeBytes(args[1].substr(0, 64)) + "'. Try CLIENT HELP.");
  }
}

void CommandInfo(const CommandSpec& c, std::string* out) {
  resp::ArrayHeader(out, 6);
  resp::Bulk(out, c.name);
  resp::Integer(out, c.arity);
  std::vector<const char*> flags;
  if (c.flags & kCmdWrite) flags.push_back("write");
  if (c.flags & kCmdReadOnly) flags.push_back("readonly");
  if (c.flags & kCmdAdmin) flags.push_back("admin");
  if (c.flags & kCmdNoAuth) flags.push_back("no_auth");
  resp::ArrayHeader(out, flags.size());
  for (const char* f : flags) resp::Simple(out, f);
  const bool has_key = (c.flags & (kCmdWrite | kCmdReadOnly)) &&
                       std::string_view(c.name).rfind("lease.", 0) != 0;
  resp::Integer(out, has_key ? 1 : 0);
  resp::Integer(out, has_key ? 1 : 0);
  resp::Integer(out, has_key ? 1 : 0);
}

void CmdCommand(ServerState&, ClientState&, const Args& args, std::string* out) {
  const auto& all = AllCommands();
  if (args.size() == 1) {
    resp::ArrayHeader(out, all.size());
    for (const auto& c : all) CommandInfo(c, out);
    return;
  }
  const std::string sub = Lower(args[1]);
  if (sub == "count") {
    resp::Integer(out, static_cast<int64_t>(all.size()));
  } else if (sub == "docs") {
    resp::ArrayHeader(out, 0);  // no docs: redis-cli works without hints
  } else if (sub == "info") {
    resp::ArrayHeader(out, args.size() - 2);
    for (size_t i = 2; i < args.size(); ++i) {
      const CommandSpec* c = LookupCommand(args[i]);
      if (c == nullptr) {
        resp::NullArray(out);
      } else {
        CommandInfo(*c, out);
      }
    }
  } else {
    resp::Error(out, "ERR unknown subcommand '" +
                         EscapeBytes(args[1].substr(0, 64)) + "'. Try COMMAND HELP.");
  }
}

void CmdConfig(ServerState& server, ClientState&, const Args& args,
               std::string* out) {
  const std::string sub = Lower(args[1]);
  if (sub == "get" && args.size() >= 3) {
    const ServerOptions& o = *server.options;
    const std::vector<std::pair<std::string, std::string>> config = {
        {"bind", o.bind},
        {"port", std::to_string(server.port)},
        {"maxclients", std::to_string(o.maxclients)},
        {"databases", "1"},
        {"save", ""},
        {"appendonly", "yes"},  // the WAL is always on
        {"appendfsync", o.sync ? "always" : "no"},
        {"proto-max-bulk-len", std::to_string(o.limits.max_request_bytes)},
        {"requirepass", o.requirepass.empty() ? "" : "********"},
    };
    std::vector<std::pair<std::string, std::string>> hits;
    for (const auto& kv : config) {
      for (size_t i = 2; i < args.size(); ++i) {
        if (GlobMatch(args[i], kv.first, /*nocase=*/true)) {
          hits.push_back(kv);
          break;
        }
      }
    }
    resp::ArrayHeader(out, hits.size() * 2);
    for (const auto& [k, v] : hits) {
      resp::Bulk(out, k);
      resp::Bulk(out, v);
    }
  } else if (sub == "set") {
    resp::Error(out, "ERR CONFIG SET is not supported: restart fencedkv-server "
                     "with the flag instead (see --help)");
  } else if (sub == "resetstat" && args.size() == 2) {
    resp::Simple(out, "OK");
  } else {
    resp::Error(out, "ERR unknown subcommand or wrong number of arguments for '" +
                         EscapeBytes(args[1].substr(0, 64)) + "'");
  }
}

void CmdInfo(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  std::string section = args.size() > 1 ? Lower(args[1]) : "default";
  const bool all = section == "default" || section == "all" || section == "everything";
  std::string info;
  auto want = [&](const char* s) { return all || section == s; };
  auto line = [&](const std::string& k, const std::string& v) {
    info += k + ":" + v + "\r\n";
  };
  const ServerStats& st = *server.stats;
  if (want("server")) {
    info += "# Server\r\n";
    line("redis_version", "7.0.0");  // the protocol level clients can expect
    line("fencedkv_version", FENCEDKV_VERSION_STRING);
    line("rocksdb_version", RocksDBVersion());
    line("redis_mode", "standalone");
    line("process_id", std::to_string(getpid()));
    line("tcp_port", std::to_string(server.port));
    line("uptime_in_seconds",
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now() - server.started)
                            .count()));
    line("io_threads_active", std::to_string(server.options->io_threads));
    info += "\r\n";
  }
  if (want("clients")) {
    info += "# Clients\r\n";
    line("connected_clients", std::to_string(st.connected.load()));
    line("maxclients", std::to_string(server.options->maxclients));
    info += "\r\n";
  }
  if (want("stats")) {
    info += "# Stats\r\n";
    line("total_connections_received", std::to_string(st.connections_received.load()));
    line("total_commands_processed", std::to_string(st.commands()));
    line("rejected_connections", std::to_string(st.connections_rejected.load()));
    line("protocol_errors", std::to_string(st.protocol_errors.load()));
    info += "\r\n";
  }
  if (want("persistence")) {
    info += "# Persistence\r\n";
    line("loading", "0");
    line("wal_enabled", "1");
    line("sync_writes", server.options->sync ? "1" : "0");
    line("aof_enabled", "1");  // the RocksDB WAL plays the AOF's part
    std::string v;
    if (server.db->GetProperty("rocksdb.estimate-num-keys", &v)) {
      line("rocksdb_estimate_num_keys", v);
    }
    if (server.db->GetProperty("rocksdb.cur-size-all-mem-tables", &v)) {
      line("rocksdb_memtable_bytes", v);
    }
    info += "\r\n";
  }
  if (want("fencing")) {
    const FenceStats fs = server.db->GetFenceStats();
    const LeaseService::Stats ls = server.leases->GetStats();
    info += "# Fencing\r\n";
    line("fence_domain", server.db->GetFenceDomain().ToString());
    line("fence_mode", FenceModeName(server.db->GetFenceMode()));
    line("fence_floor", std::to_string(server.db->GetFenceFloor()));
    line("accepted_writes", std::to_string(fs.accepted_writes));
    line("rejected_writes", std::to_string(fs.rejected_writes));
    line("fence_advances", std::to_string(fs.advances));
    line("rejected_reads", std::to_string(fs.rejected_reads));
    line("unfenced_writes", std::to_string(fs.unfenced_writes));
    line("nofence_rejections", std::to_string(st.nofence_rejections.load()));
    line("leases_granted", std::to_string(ls.grants));
    line("leases_renewed", std::to_string(ls.renewals));
    line("leases_released", std::to_string(ls.releases));
    line("leases_refused", std::to_string(ls.refusals));
    line("leases_held", std::to_string(ls.held));
    line("last_lease_token", std::to_string(ls.last_token));
    info += "\r\n";
  }
  resp::Bulk(out, info);
}

void CmdMulti(ServerState&, ClientState& client, const Args&, std::string* out) {
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

void CmdFlush(ServerState&, ClientState&, const Args& args, std::string* out) {
  resp::Error(out, "ERR " + Lower(args[0]) +
                       " is not supported: every write needs a fencing token; "
                       "delete keys with DEL ... FENCE <token>");
}

}  // namespace

void AppendAdminCommands(std::vector<CommandSpec>* t) {
  t->push_back({"ping", CmdPing, -1, kCmdMulti});
  t->push_back({"echo", CmdEcho, 2, 0});
  t->push_back({"quit", CmdQuit, -1, kCmdNoAuth});
  t->push_back({"select", CmdSelect, 2, 0});
  t->push_back({"auth", CmdAuth, -2, kCmdNoAuth});
  t->push_back({"hello", CmdHello, -1, kCmdNoAuth});
  t->push_back({"client", CmdClient, -2, 0});
  t->push_back({"command", CmdCommand, -1, 0});
  t->push_back({"config", CmdConfig, -2, kCmdAdmin});
  t->push_back({"info", CmdInfo, -1, 0});
  t->push_back({"multi", CmdMulti, 1, 0});
  t->push_back({"exec", CmdExec, 1, 0});
  t->push_back({"discard", CmdDiscard, 1, 0});
  t->push_back({"flushdb", CmdFlush, -1, kCmdAdmin});
  t->push_back({"flushall", CmdFlush, -1, kCmdAdmin});
}

}  // namespace server
}  // namespace fencedkv
