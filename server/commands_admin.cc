// Copyright (c) fencedkv authors.
//
// PING ECHO QUIT SELECT HELLO AUTH ACL CLIENT COMMAND CONFIG INFO, and a
// clear refusal of FLUSHDB / FLUSHALL (unfenced mass deletes).

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include <unistd.h>

#include "fencedkv/version.h"

#include "command_table.h"
#include "process_memory.h"
#include "replication.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
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
    resp::Error(out,
                "ERR DB index is out of range (fencedkv has one database, 0)");
  }
}

// AUTH [user] password: false and an error reply on failure.
bool Authenticate(ServerState& server, ClientState& client,
                  std::string_view user, std::string_view password,
                  std::string* out) {
  const AclUser* u = server.acl().Authenticate(user, password);
  if (u == nullptr) {
    resp::Error(
        out, "WRONGPASS invalid username-password pair or user is disabled.");
    return false;
  }
  client.user = u;
  client.authed = true;
  return true;
}

void CmdAuth(ServerState& server, ClientState& client, const Args& args,
             std::string* out) {
  if (args.size() > 3) {
    ReplyWrongArgs("auth", out);
    return;
  }
  if (args.size() == 2 && server.acl().DefaultIsNopass()) {
    resp::Error(out,
                "ERR AUTH <password> called without any password configured "
                "for the default user. Are you sure your configuration is "
                "correct?");
    return;
  }
  const std::string_view user = args.size() == 3 ? args[1] : "default";
  if (Authenticate(server, client, user, args.back(), out)) {
    resp::Simple(out, "OK");
  }
}

// A client name is at most this long: CLIENT LIST shows every name, and
// 10,000 clients with names of 1 KiB make a reply of about 12 MiB, well
// under --max_reply_bytes' default (unbounded names let one client make
// the operator's CLIENT LIST fail).
constexpr size_t kMaxClientNameBytes = 1024;

// Redis' rule for client names: printable ASCII without spaces; and at most
// kMaxClientNameBytes. False (and the error reply) otherwise.
bool ValidClientName(std::string_view name, std::string* out) {
  if (name.size() > kMaxClientNameBytes) {
    resp::Error(out, "ERR Client names are limited to " +
                         std::to_string(kMaxClientNameBytes) + " bytes");
    return false;
  }
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
        resp::Error(
            out,
            "NOPROTO unsupported protocol version (fencedkv speaks RESP2)");
      } else {
        resp::Error(out, "NOPROTO unsupported protocol version");
      }
      return;
    }
    i = 2;
  }
  // Every option is checked before AUTH is tried, as Redis 7.2 does: a
  // HELLO refused for its SETNAME (or a bad option) leaves the connection
  // as it was, not logged in.
  std::optional<std::pair<std::string_view, std::string_view>> auth;
  for (; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "AUTH") && i + 2 < args.size()) {
      auth.emplace(args[i + 1], args[i + 2]);
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
  if (auth.has_value() &&
      !Authenticate(server, client, auth->first, auth->second, out)) {
    return;
  }
  if (!client.authed) {
    resp::Error(out,
                "NOAUTH HELLO must be called with the client already "
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

// CLIENT KILL ip:port (+OK, or an error if no such client), or CLIENT KILL
// with filters (ID id, ADDR ip:port, USER name, SKIPME yes|no, TYPE normal):
// how many connections match them all. Each is closed by its own io loop,
// after the replies it has ready.
void ClientKill(ServerState& server, ClientState& client, const Args& args,
                std::string* out) {
  if (!server.kill_clients) {
    resp::Error(out, "ERR CLIENT KILL is not available here");
    return;
  }
  KillFilter filter;
  filter.self = client.id;
  if (args.size() == 3) {  // the old form: the address, itself included
    filter.addr = std::string(args[2]);
    filter.skipme = false;
    if (server.kill_clients(filter) == 0) {
      resp::Error(out, "ERR No such client");
    } else {
      resp::Simple(out, "OK");
    }
    return;
  }
  if (args.size() % 2 != 0) {
    resp::Error(out, "ERR syntax error");
    return;
  }
  bool none = false;  // a filter no connection can match (TYPE master)
  for (size_t i = 2; i + 1 < args.size(); i += 2) {
    const std::string opt = Lower(args[i]);
    const std::string_view v = args[i + 1];
    if (opt == "id") {
      int64_t id = 0;
      if (!ParseInt64Arg(v, &id, out)) return;
      if (id <= 0) {
        resp::Error(out, "ERR client-id should be greater than 0");
        return;
      }
      filter.id = static_cast<uint64_t>(id);
    } else if (opt == "addr") {
      filter.addr = std::string(v);
    } else if (opt == "user") {
      if (server.acl().users().count(std::string(v)) == 0) {
        resp::Error(out,
                    "ERR No such user '" + EscapeBytes(v.substr(0, 64)) + "'");
        return;
      }
      filter.user = std::string(v);
    } else if (opt == "skipme") {
      const std::string yes = Lower(v);
      if (yes != "yes" && yes != "no") {
        resp::Error(out, "ERR syntax error");
        return;
      }
      filter.skipme = yes == "yes";
    } else if (opt == "type") {
      const std::string type = Lower(v);
      if (type == "master" || type == "replica" || type == "slave" ||
          type == "pubsub") {
        none = true;  // fencedkv's clients are all "normal"
      } else if (type != "normal") {
        resp::Error(out, "ERR Unknown client type '" +
                             EscapeBytes(v.substr(0, 64)) + "'");
        return;
      }
    } else {
      resp::Error(out, "ERR syntax error");
      return;
    }
  }
  resp::Integer(out,
                none ? 0 : static_cast<int64_t>(server.kill_clients(filter)));
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
    // Its CLIENT LIST line (idle: it runs this).
    resp::Bulk(out, ClientListLine(client.id, client.addr, client.name,
                                   (NowMs() - client.created_ms) / 1000, 0,
                                   ShownMulti(client), client.user));
  } else if (sub == "kill" && args.size() >= 3) {
    ClientKill(server, client, args, out);
  } else if (sub == "setinfo" && args.size() == 4) {
    resp::Simple(out, "OK");  // redis-py sends lib-name / lib-ver
  } else {
    resp::Error(out,
                "ERR unknown subcommand or wrong number of arguments for '" +
                    EscapeBytes(args[1].substr(0, 64)) + "'. Try CLIENT HELP.");
  }
}

// The ACL subcommands that show other users: @admin.
const char* AclAdminForm(const Args& args) {
  if (args.size() < 2) return nullptr;
  const std::string sub = Lower(args[1]);
  if (sub == "list") return "'acl|list' command";
  if (sub == "users") return "'acl|users' command";
  return nullptr;
}

// The categories a command is in, in either form.
uint32_t AllCategories(const CommandSpec& c) {
  return c.categories | (c.admin_form != nullptr
                             ? c.admin_categories | kCatAdmin | kCatDangerous
                             : 0);
}

void CmdAcl(ServerState& server, ClientState& client, const Args& args,
            std::string* out) {
  const std::string sub = Lower(args[1]);
  if (sub == "whoami" && args.size() == 2) {
    resp::Bulk(out, client.user != nullptr ? client.user->name() : "default");
  } else if ((sub == "list" || sub == "users") && args.size() == 2) {
    const auto& users = server.acl().users();
    resp::ArrayHeader(out, users.size());
    for (const auto& [name, u] : users) {
      resp::Bulk(out, sub == "list" ? u.Describe() : name);
    }
  } else if (sub == "cat" && args.size() == 2) {
    const auto& names = AclCategoryNames();
    resp::ArrayHeader(out, names.size());
    for (const auto& n : names) resp::Bulk(out, n);
  } else if (sub == "cat" && args.size() == 3) {
    const auto& names = AclCategoryNames();
    const std::string want = Lower(args[2]);
    auto it = std::find(names.begin(), names.end(),
                        want.rfind('@', 0) == 0 ? want.substr(1) : want);
    if (it == names.end()) {
      resp::Error(out, "ERR Unknown category '" +
                           EscapeBytes(args[2].substr(0, 64)) + "'");
      return;
    }
    const uint32_t cat = 1u << (it - names.begin());
    std::vector<const char*> hits;
    for (const auto& c : AllCommands()) {
      if (AllCategories(c) & cat) hits.push_back(c.name);
    }
    resp::ArrayHeader(out, hits.size());
    for (const char* h : hits) resp::Bulk(out, h);
  } else if (sub == "setuser" || sub == "deluser" || sub == "load" ||
             sub == "save" || sub == "getuser" || sub == "dryrun" ||
             sub == "genpass" || sub == "log") {
    std::string upper = sub;
    for (char& c : upper)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    resp::Error(out, "ERR ACL " + upper +
                         " is not supported: users come from --aclfile (edit "
                         "it and restart)");
  } else {
    resp::Error(out,
                "ERR unknown subcommand or wrong number of arguments for '" +
                    EscapeBytes(args[1].substr(0, 64)) + "'. Try ACL HELP.");
  }
}

// COMMAND INFO's entry: name, arity, flags, first key, last key, step, and
// Redis 7's seventh field, the ACL categories.
void CommandInfo(const CommandSpec& c, std::string* out) {
  resp::ArrayHeader(out, 7);
  resp::Bulk(out, c.name);
  resp::Integer(out, c.arity);
  std::vector<const char*> flags;
  if (c.flags & kCmdWrite) flags.push_back("write");
  if (c.flags & kCmdReadOnly) flags.push_back("readonly");
  if (c.flags & kCmdAdmin) flags.push_back("admin");
  if (c.flags & kCmdNoAuth) flags.push_back("no_auth");
  if (c.flags & kCmdMovableKeys) flags.push_back("movablekeys");
  resp::ArrayHeader(out, flags.size());
  for (const char* f : flags) resp::Simple(out, f);
  resp::Integer(out, c.keys.first);
  resp::Integer(out, c.keys.last);
  resp::Integer(out, c.keys.step);
  const auto& names = AclCategoryNames();
  const uint32_t cats = AllCategories(c);
  std::vector<std::string> in;
  for (size_t i = 0; i < names.size(); ++i) {
    if (cats & (1u << i)) in.push_back("@" + names[i]);
  }
  resp::ArrayHeader(out, in.size());
  for (const auto& n : in) resp::Simple(out, n);
}

// COMMAND GETKEYS command [arg ...]: the keys of that call, as the server
// finds them (Redis' errors).
void CommandGetKeys(const ServerState& server, const Args& args,
                    std::string* out) {
  if (args.size() < 3) {
    resp::Error(out,
                "ERR wrong number of arguments for 'command|getkeys' command");
    return;
  }
  const Args call(args.begin() + 2, args.end());
  const CommandSpec* c = LookupCommand(call[0]);
  const auto argc = static_cast<int>(call.size());
  std::vector<size_t> positions;
  if (c == nullptr) {
    resp::Error(out, "ERR Invalid command specified");
  } else if (c->keys.first == 0) {
    resp::Error(out, "ERR The command has no key arguments");
  } else if ((c->arity > 0 && argc != c->arity) ||
             (c->arity < 0 && argc < -c->arity)) {
    resp::Error(out, "ERR Invalid number of arguments specified for command");
  } else if (!CommandKeys(*c, call, &positions)) {
    resp::Error(out, "ERR Invalid arguments specified for command");
  } else {
    // As long as the request (each key's framing is its own length): past
    // max_reply_bytes when the request is.
    std::string reply;
    resp::ArrayHeader(&reply, positions.size());
    for (size_t p : positions) {
      resp::Bulk(&reply, call[p]);
      if (ReplyTooLarge(server, reply.size(), out)) return;
    }
    out->append(reply);
  }
}

// COMMAND LIST [FILTERBY ACLCAT category | PATTERN pattern | MODULE name]:
// the commands' names (no modules: MODULE lists none).
void CommandList(const Args& args, std::string* out) {
  const auto& all = AllCommands();
  std::vector<const char*> names;
  if (args.size() == 2) {
    for (const auto& c : all) names.push_back(c.name);
  } else if (args.size() == 5 && EqualsIgnoreCase(args[2], "FILTERBY")) {
    const std::string by = Lower(args[3]);
    if (by == "aclcat") {
      const auto& cats = AclCategoryNames();
      std::string want = Lower(args[4]);
      if (!want.empty() && want[0] == '@') want.erase(0, 1);
      auto it = std::find(cats.begin(), cats.end(), want);
      const uint32_t cat =
          it == cats.end() ? 0 : 1u << static_cast<int>(it - cats.begin());
      for (const auto& c : all) {
        if (AllCategories(c) & cat) names.push_back(c.name);
      }
    } else if (by == "pattern") {
      // Compiled once for all the commands (it was once per command: a
      // 1 MB pattern held the loop for 14 s).
      const GlobPattern glob(args[4], /*nocase=*/true);
      if (!PatternOk(glob, out)) return;
      for (const auto& c : all) {
        if (glob.Match(c.name) == GlobPattern::Result::kMatch) {
          names.push_back(c.name);
        }
      }
    } else if (by != "module") {
      resp::Error(out, "ERR syntax error");
      return;
    }
  } else {
    resp::Error(out, "ERR syntax error");
    return;
  }
  resp::ArrayHeader(out, names.size());
  for (const char* n : names) resp::Bulk(out, n);
}

void CmdCommand(ServerState& server, ClientState&, const Args& args,
                std::string* out) {
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
  } else if (sub == "getkeys") {
    CommandGetKeys(server, args, out);
  } else if (sub == "list") {
    CommandList(args, out);
  } else if (sub == "info") {
    // An entry per argument, about 70 bytes for a name of 4: the reply
    // grows with the request (COMMAND INFO mset x 1M was 71 MB), so it is
    // bounded as it is built.
    std::string reply;
    resp::ArrayHeader(&reply, args.size() - 2);
    for (size_t i = 2; i < args.size(); ++i) {
      const CommandSpec* c = LookupCommand(args[i]);
      if (c == nullptr) {
        resp::NullArray(&reply);
      } else {
        CommandInfo(*c, &reply);
      }
      if (ReplyTooLarge(server, reply.size(), out)) return;
    }
    out->append(reply);
  } else {
    resp::Error(out, "ERR unknown subcommand '" +
                         EscapeBytes(args[1].substr(0, 64)) +
                         "'. Try COMMAND HELP.");
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
        {"maxmemory-clients", std::to_string(o.maxmemory_clients)},
        {"databases", "1"},
        {"save", ""},
        {"appendonly", "yes"},  // the WAL is always on
        {"appendfsync", o.sync ? "always" : "no"},
        {"proto-max-bulk-len", std::to_string(o.limits.max_request_bytes)},
        {"requirepass", o.requirepass.empty() ? "" : "********"},
        {"slowlog-log-slower-than", std::to_string(o.slowlog_log_slower_than)},
        {"slowlog-max-len", std::to_string(o.slowlog_max_len)},
    };
    // Each pattern is compiled once, whatever the number of parameters.
    std::vector<bool> hit(config.size(), false);
    for (size_t i = 2; i < args.size(); ++i) {
      const GlobPattern glob(args[i], /*nocase=*/true);
      if (!PatternOk(glob, out)) return;
      for (size_t k = 0; k < config.size(); ++k) {
        if (!hit[k] &&
            glob.Match(config[k].first) == GlobPattern::Result::kMatch) {
          hit[k] = true;
        }
      }
    }
    std::vector<std::pair<std::string, std::string>> hits;
    for (size_t k = 0; k < config.size(); ++k) {
      if (hit[k]) hits.push_back(config[k]);
    }
    resp::ArrayHeader(out, hits.size() * 2);
    for (const auto& [k, v] : hits) {
      resp::Bulk(out, k);
      resp::Bulk(out, v);
    }
  } else if (sub == "set") {
    resp::Error(out,
                "ERR CONFIG SET is not supported: restart fencedkv-server "
                "with the flag instead (see --help)");
  } else if (sub == "resetstat" && args.size() == 2) {
    server.command_stats->Reset();
    resp::Simple(out, "OK");
  } else {
    resp::Error(out,
                "ERR unknown subcommand or wrong number of arguments for '" +
                    EscapeBytes(args[1].substr(0, 64)) + "'");
  }
}

// A RocksDB integer property, or 0 if the engine does not know it.
uint64_t IntProperty(DB* db, std::string_view property) {
  std::string v;
  if (!db->GetProperty(property, &v)) return 0;
  return std::strtoull(v.c_str(), nullptr, 10);
}

// INFO's sections. Redis' default set leaves out commandstats and
// latencystats; "all" and "everything" have them.
void CmdInfo(ServerState& server, ClientState&, const Args& args,
             std::string* out) {
  // A set: each section is looked up once, however many names are asked.
  std::set<std::string> asked;
  for (size_t i = 1; i < args.size(); ++i) asked.insert(Lower(args[i]));
  if (asked.empty()) asked.insert("default");
  const bool all = asked.count("all") > 0 || asked.count("everything") > 0;
  const bool by_default = asked.count("default") > 0;
  std::string info;
  auto want = [&](const char* s, bool in_default = true) {
    if (all || (by_default && in_default)) return true;
    return asked.count(s) > 0;
  };
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
    line("blocked_clients", std::to_string(st.blocked.load()));  // WAIT
    info += "\r\n";
  }
  if (want("memory")) {
    // used_memory is the allocator's (glibc malloc) bytes in use; RocksDB's
    // memtables, block cache and table readers, and the fence and value
    // caches, are part of it, and shown apart below.
    const uint64_t used = NotePeakMemory(&server);
    const uint64_t rss = RssBytes();
    const uint64_t peak = server.peak_memory.load(std::memory_order_relaxed);
    info += "# Memory\r\n";
    line("used_memory", std::to_string(used));
    line("used_memory_human", HumanBytes(used));
    line("used_memory_rss", std::to_string(rss));
    line("used_memory_rss_human", HumanBytes(rss));
    line("used_memory_peak", std::to_string(peak));
    line("used_memory_peak_human", HumanBytes(peak));
    line("maxmemory", "0");
    line("mem_allocator", "libc");
    DB* db = server.db;
    line("rocksdb_memtables_bytes",
         std::to_string(IntProperty(
             db, "fencedkv.aggregated.rocksdb.cur-size-all-mem-tables")));
    line("rocksdb_block_cache_bytes",
         std::to_string(IntProperty(db, "rocksdb.block-cache-usage")));
    line("rocksdb_block_cache_capacity",
         std::to_string(IntProperty(db, "rocksdb.block-cache-capacity")));
    // Blocks pinned by iterators (parked SCANs) and reads in progress,
    // charged to the cache even past its capacity.
    line("rocksdb_block_cache_pinned_bytes",
         std::to_string(IntProperty(db, "rocksdb.block-cache-pinned-usage")));
    line("rocksdb_table_readers_bytes",
         std::to_string(IntProperty(
             db, "fencedkv.aggregated.rocksdb.estimate-table-readers-mem")));
    line("fence_cache_bytes",
         std::to_string(IntProperty(db, "fencedkv.fence-cache-bytes")));
    line("fence_cache_capacity",
         std::to_string(IntProperty(db, "fencedkv.fence-cache-capacity")));
    line("value_cache_bytes",
         std::to_string(IntProperty(db, "fencedkv.value-cache-bytes")));
    line("value_cache_capacity",
         std::to_string(IntProperty(db, "fencedkv.value-cache-capacity")));
    line("scan_cursor_bytes", std::to_string(server.cursors.bytes()));
    // Redis 7's name: what clients hold past their idle buffers (grown
    // input buffers, MULTI queues, replies not taken), and its cap.
    line("mem_clients_normal",
         std::to_string(std::max<int64_t>(0, st.client_bytes.load())));
    line("maxmemory_clients",
         std::to_string(server.options->maxmemory_clients));
    info += "\r\n";
  }
  if (want("stats")) {
    info += "# Stats\r\n";
    line("total_connections_received",
         std::to_string(st.connections_received.load()));
    line("total_commands_processed", std::to_string(st.commands()));
    line("rejected_connections",
         std::to_string(st.connections_rejected.load()));
    line("protocol_errors", std::to_string(st.protocol_errors.load()));
    line("client_memory_refusals",
         std::to_string(st.client_memory_refusals.load()));
    line("evicted_clients", std::to_string(st.evicted_clients.load()));
    line("reads_moved_off_loop",
         std::to_string(st.reads_moved_off_loop.load()));
    line("scan_cursors", std::to_string(server.cursors.size()));
    line("scan_cursor_bytes", std::to_string(server.cursors.bytes()));
    line("scan_parked_iterators", std::to_string(server.cursors.parked()));
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
    // The log's sync state (--wal_sync_interval_ms): the newest sequence
    // written, the newest a sync is known to cover, the idle syncs.
    line("wal_latest_sequence",
         std::to_string(server.db->GetLatestSequenceNumber()));
    if (server.db->GetProperty("fencedkv.wal-sync", &v)) {
      for (size_t at = 0; at < v.size();) {
        size_t end = v.find('\n', at);
        if (end == std::string::npos) end = v.size();
        const size_t colon = v.find(": ", at);
        if (colon != std::string::npos && colon < end) {
          line("wal_" + v.substr(at, colon - at),
               v.substr(colon + 2, end - colon - 2));
        }
        at = end + 1;
      }
    }
    info += "\r\n";
  }
  if (want("replication")) {
    info += "# Replication\r\n";
    if (server.repl != nullptr) {
      server.repl->AppendInfo(&info);
    } else {
      line("role", "master");
      line("connected_slaves", "0");
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
    line("leases_reclaimed", std::to_string(ls.reclaimed));
    line("last_lease_token", std::to_string(ls.last_token));
    line("highest_token_issued", std::to_string(server.db->GetIssuedToken()));
    // Every token stored is at or below it (a restore's --fence_floor must
    // be at least this and last_lease_token).
    std::string hwm;
    if (server.db->GetProperty("fencedkv.high-water-mark", &hwm)) {
      line("high_water_mark", hwm);
    }
    info += "\r\n";
  }
  const CommandStats& cs = *server.command_stats;
  const auto& commands = AllCommands();
  if (want("commandstats", false)) {
    info += "# Commandstats\r\n";
    for (size_t i = 0; i < commands.size(); ++i) {
      const CommandStats::Totals t = cs.Get(i, false);
      if (t.calls == 0 && t.rejected == 0 && t.failed == 0) continue;
      char per_call[32];
      std::snprintf(per_call, sizeof(per_call), "%.2f",
                    t.calls == 0 ? 0.0
                                 : static_cast<double>(t.usec) /
                                       static_cast<double>(t.calls));
      line(std::string("cmdstat_") + commands[i].name,
           "calls=" + std::to_string(t.calls) + ",usec=" +
               std::to_string(t.usec) + ",usec_per_call=" + per_call +
               ",rejected_calls=" + std::to_string(t.rejected) +
               ",failed_calls=" + std::to_string(t.failed));
    }
    info += "\r\n";
  }
  if (want("errorstats")) {
    info += "# Errorstats\r\n";
    for (int c = 0; c < CommandStats::kNumErrorCodes; ++c) {
      const auto code = static_cast<CommandStats::ErrorCode>(c);
      const uint64_t n = cs.Errors(code);
      if (n == 0) continue;
      line(std::string("errorstat_") + CommandStats::ErrorCodeName(code),
           "count=" + std::to_string(n));
    }
    info += "\r\n";
  }
  if (want("latencystats", false)) {
    // Redis 7's percentiles (latency-tracking-info-percentiles "50 99
    // 99.9"); each the largest value of its histogram bucket (within 12.5%).
    info += "# Latencystats\r\n";
    for (size_t i = 0; i < commands.size(); ++i) {
      const CommandStats::Totals t = cs.Get(i, true);
      if (t.calls == 0) continue;
      char v[128];
      std::snprintf(v, sizeof(v), "p50=%.3f,p99=%.3f,p99.9=%.3f",
                    CommandStats::Percentile(t.histogram, 0.50),
                    CommandStats::Percentile(t.histogram, 0.99),
                    CommandStats::Percentile(t.histogram, 0.999));
      line(std::string("latency_percentiles_usec_") + commands[i].name, v);
    }
    info += "\r\n";
  }
  if (want("keyspace")) {
    // RocksDB's estimate (rocksdb.estimate-num-keys), not an exact count
    // (DBSIZE is, at O(keys)): overwrites not yet compacted away and deleted
    // keys that keep their token make it differ.
    info += "# Keyspace\r\n";
    const uint64_t keys = IntProperty(server.db, "rocksdb.estimate-num-keys");
    if (keys > 0) {
      line("db0", "keys=" + std::to_string(keys) + ",expires=0,avg_ttl=0");
    }
    info += "\r\n";
  }
  resp::Bulk(out, info);
}

void CmdFlush(ServerState&, ClientState&, const Args& args, std::string* out) {
  resp::Error(out, "ERR " + Lower(args[0]) +
                       " is not supported: every write needs a fencing token; "
                       "delete keys with DEL ... FENCE <token>");
}

// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE]: stops the server as SIGTERM does
// (every acknowledged write is in the WAL). SAVE first flushes the
// memtables, so the next start replays no WAL; NOW and FORCE change nothing
// (there is no save to wait for or to fail). No reply: the connection
// closes, as in Redis.
void CmdShutdown(ServerState& server, ClientState& client, const Args& args,
                 std::string* out) {
  bool save = false, nosave = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "SAVE")) {
      save = true;
    } else if (EqualsIgnoreCase(args[i], "NOSAVE")) {
      nosave = true;
    } else if (EqualsIgnoreCase(args[i], "ABORT")) {
      resp::Error(out, "ERR No shutdown in progress.");
      return;
    } else if (!EqualsIgnoreCase(args[i], "NOW") &&
               !EqualsIgnoreCase(args[i], "FORCE")) {
      resp::Error(out, "ERR syntax error");
      return;
    }
  }
  if (save && nosave) {
    resp::Error(out, "ERR syntax error");
    return;
  }
  if (!server.request_shutdown) {
    resp::Error(out,
                "ERR SHUTDOWN is not available: stop the process that "
                "embeds this server");
    return;
  }
  if (save) {
    Status s = server.db->Flush();
    if (!s.ok()) {
      resp::Error(out, "ERR Errors trying to SHUTDOWN: " + s.ToString());
      return;
    }
  }
  server.request_shutdown();
  client.close_after_reply = true;
}

// SLOWLOG GET [count] | LEN | RESET | HELP.
void CmdSlowlog(ServerState& server, ClientState&, const Args& args,
                std::string* out) {
  const std::string sub = Lower(args[1]);
  if (sub == "get" && args.size() <= 3) {
    int64_t n = 10;
    if (args.size() == 3) {
      if (!ParseInt64Arg(args[2], &n, out)) return;
      if (n < -1) {
        resp::Error(out, "ERR count should be greater than or equal to -1");
        return;
      }
    }
    server.slowlog.Reply(n, out);
  } else if (sub == "len" && args.size() == 2) {
    resp::Integer(out, static_cast<int64_t>(server.slowlog.Len()));
  } else if (sub == "reset" && args.size() == 2) {
    server.slowlog.Reset();
    resp::Simple(out, "OK");
  } else if (sub == "help" && args.size() == 2) {
    // Long lines continue as adjacent literals, on purpose.
    // NOLINTBEGIN(bugprone-suspicious-missing-comma)
    static const char* const kHelp[] = {
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 "
        "mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP "
        "and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help."};
    // NOLINTEND(bugprone-suspicious-missing-comma)
    resp::ArrayHeader(out, std::size(kHelp));
    for (const char* line : kHelp) resp::Simple(out, line);
  } else {
    resp::Error(
        out, "ERR unknown subcommand or wrong number of arguments for '" +
                 EscapeBytes(args[1].substr(0, 64)) + "'. Try SLOWLOG HELP.");
  }
}

}  // namespace

void AppendAdminCommands(std::vector<CommandSpec>* t) {
  t->push_back({"ping", CmdPing, -1, kCmdMulti, {}, kCatConnection});
  t->push_back({"echo", CmdEcho, 2, 0, {}, kCatConnection});
  t->push_back({"quit", CmdQuit, -1, kCmdNoAuth, {}, kCatConnection});
  t->push_back({"select", CmdSelect, 2, 0, {}, kCatConnection});
  t->push_back({"auth", CmdAuth, -2, kCmdNoAuth, {}, kCatConnection});
  t->push_back({"hello", CmdHello, -1, kCmdNoAuth, {}, kCatConnection});
  // CLIENT LIST shows every connection: @admin, as in Redis.
  t->push_back({"client",
                CmdClient,
                -2,
                0,
                {},
                kCatConnection,
                [](const Args& args) -> const char* {
                  if (EqualsIgnoreCase(args[1], "list")) {
                    return "'client|list' command";
                  }
                  if (EqualsIgnoreCase(args[1], "kill")) {
                    return "'client|kill' command";
                  }
                  return nullptr;
                },
                kCatConnection});
  t->push_back(
      {"shutdown", CmdShutdown, -1, kCmdAdmin, {}, kCatAdmin | kCatDangerous});
  // The slow log shows other clients' arguments: @admin, as in Redis.
  t->push_back(
      {"slowlog", CmdSlowlog, -2, kCmdAdmin, {}, kCatAdmin | kCatDangerous});
  t->push_back({"acl", CmdAcl, -2, 0, {}, kCatConnection, AclAdminForm, 0});
  t->push_back({"command", CmdCommand, -1, 0, {}, kCatConnection});
  t->push_back(
      {"config", CmdConfig, -2, kCmdAdmin, {}, kCatAdmin | kCatDangerous});
  t->push_back({"info", CmdInfo, -1, 0, {}, kCatDangerous});
  t->push_back({"flushdb",
                CmdFlush,
                -1,
                kCmdAdmin,
                {},
                kCatWrite | kCatKeyspace | kCatDangerous});
  t->push_back({"flushall",
                CmdFlush,
                -1,
                kCmdAdmin,
                {},
                kCatWrite | kCatKeyspace | kCatDangerous});
}

}  // namespace server
}  // namespace fencedkv
