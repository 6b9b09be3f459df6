// Copyright (c) fencedkv authors.
//
// libFuzzer target: the server's command layer. The input is a client's
// byte stream (RESP arrays or inline commands), parsed with RespParser and
// executed with Dispatch against a real DB and lease service, as a
// connection would. Besides crashes and sanitizer reports, these are
// findings (printed, then abort):
//  - a reply that is not exactly one well-formed RESP2 value, or an error
//    line without a known code, or -IOERR / -CORRUPTION on a healthy store;
//  - SET / MSET / DEL / EXEC whose reply disagrees with the store: +OK but
//    the value is not there, an error but something changed, DEL's count
//    not the number of keys that existed, SET ... GET not the old value,
//    EXEC's array not one reply per queued command;
//  - a domain's max token going down; FENCE.ADVANCE answering less than its
//    token or not what FENCE.GET says; FENCE.FLOOR going down;
//  - a lease token granted to two (name, holder) pairs, or a new grant not
//    above every token granted before and the floor;
//  - a command refused (-NOAUTH, -NOPERM, any error) that changed a key.
//
// Input: byte 0 is the configuration (bits 0-1 domain key | prefix:2 |
// delimiter:: | hashtag, bit 2 strict, bit 3 'default' needs the password
// "pw", bit 4 --allow_unfenced, bit 5 hash memtable, bit 6 --sync, bit 7
// 'default' without @admin); the rest is the stream. Besides 'default' the
// ACL has 'reader' (password "rpw", @read and @connection only) and
// 'locker' ("lpw", @lease and PING). "FUZZ.TICK ms" (not a server command)
// moves the lease clock. After QUIT the stream goes on as a new connection
// to the same server. The online copy commands (FENCEDKV.CHECKPOINT,
// FENCEDKV.BACKUP) write wherever their path argument says: never run.

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "acl.h"
#include "command_table.h"
#include "fuzz_util.h"
#include "resp_parser.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {
namespace {

// One parsed RESP2 reply.
struct Reply {
  char type = 0;     // + - : $ *
  std::string text;  // + - $ (null bulk: is_null)
  bool is_null = false;
  std::string number;  // :
  std::vector<Reply> elems;
};

// Parses one RESP2 value at s[*pos]; on failure *why says what is wrong.
bool ParseReply(std::string_view s, size_t* pos, int depth, Reply* r,
                std::string* why) {
  auto line = [&](std::string* out) {
    const size_t end = s.find("\r\n", *pos);
    if (end == std::string_view::npos) {
      *why = "unterminated line";
      return false;
    }
    *out = std::string(s.substr(*pos, end - *pos));
    if (out->find_first_of("\r\n") != std::string::npos) {
      *why = "CR or LF inside a line";
      return false;
    }
    *pos = end + 2;
    return true;
  };
  auto integer = [&](const std::string& t, int64_t* v) {
    const char* b = t.data();
    const char* e = b + t.size();
    auto res = std::from_chars(b, e, *v);
    if (t.empty() || res.ec != std::errc() || res.ptr != e) {
      *why = "bad length '" + t + "'";
      return false;
    }
    return true;
  };
  if (depth > 8) {
    *why = "nested too deep";
    return false;
  }
  if (*pos >= s.size()) {
    *why = "missing reply";
    return false;
  }
  r->type = s[(*pos)++];
  std::string t;
  switch (r->type) {
    case '+':
      return line(&r->text);
    case '-':
      if (!line(&r->text)) return false;
      {
        const size_t sp = r->text.find(' ');
        const std::string code = r->text.substr(0, sp);
        static const std::set<std::string> kCodes = {
            "ERR",       "STALE",  "NOFENCE",   "NOAUTH",  "NOPERM",
            "WRONGPASS", "LEASED", "LEASELOST", "NOPROTO", "TOKENSKEW",
            "EXECABORT", "BUSY",   "SHUTDOWN"};
        if (kCodes.count(code) == 0) {
          *why = "error code '" + code + "' (unknown, or a store failure)";
          return false;
        }
      }
      return true;
    case ':': {
      if (!line(&r->number)) return false;
      const std::string& n = r->number;
      const size_t digits = n[0] == '-' ? 1 : 0;
      if (n.size() == digits ||
          n.find_first_not_of("0123456789", digits) != std::string::npos) {
        *why = "bad integer '" + n + "'";
        return false;
      }
      return true;
    }
    case '$':
    case '*': {
      // "$<len>" / "*<count>"; -1 is the null bulk / array.
      int64_t n = 0;
      if (!line(&t) || !integer(t, &n)) return false;
      if (n == -1) {
        r->is_null = true;
        return true;
      }
      if (n < 0) {
        *why = std::string("bad length ") + r->type + t;
        return false;
      }
      if (r->type == '$') {
        if (static_cast<size_t>(n) + 2 > s.size() - *pos ||
            s.substr(*pos + n, 2) != "\r\n") {
          *why = "bad bulk of length " + t;
          return false;
        }
        r->text = std::string(s.substr(*pos, n));
        *pos += n + 2;
        return true;
      }
      for (int64_t i = 0; i < n; ++i) {
        r->elems.emplace_back();
        if (!ParseReply(s, pos, depth + 1, &r->elems.back(), why)) return false;
      }
      return true;
    }
    default:
      *why = std::string("bad type byte '") + r->type + "'";
      return false;
  }
}

// The pieces joined into one string (a finding's message).
std::string Cat(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view p : pieces) out.append(p);
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A key's value, "<absent>" or "<invalid>".
using Snapshot = std::map<std::string, std::string>;

class Harness {
 public:
  explicit Harness(const std::string& dir) : dir_(dir) {}
  ~Harness() { Close(); }

  bool Open(uint8_t config) {
    static const char* const kDomains[] = {"key", "prefix:2",
                                           "delimiter::", "hashtag"};
    Options o;
    o.create_if_missing = true;
    o.fence_domain = kDomains[config % 4];
    o.fence_mode = (config & 4) ? FenceMode::kStrict : FenceMode::kMonotonic;
    o.allow_unfenced = (config & 16) != 0;
    o.memtable = (config & 32) ? "hash" : "skiplist";
    o.compression = "none";
    o.env = fuzz::FuzzEnv();
    o.block_cache_size = 1 << 20;
    o.write_buffer_size = 1 << 20;
    o.fence_cache_bytes = 1 << 20;  // a 64 MiB table zero-fills huge pages
    Status s = DB::Open(o, dir_, &db_);
    if (!s.ok()) Fail("open", s.ToString());
    LeaseOptions lo;
    lo.now_ms = [this] { return now_ms_; };
    lo.reclaim_interval_ms = 0;  // no thread of its own: reproducible
    s = LeaseService::Open(db_.get(), lo, &leases_);
    if (!s.ok()) Fail("lease service", s.ToString());
    options_.allow_unfenced = o.allow_unfenced;
    options_.sync = (config & 64) != 0;
    const std::string acl = std::string("user default on ") +
                            ((config & 8) ? ">pw" : "nopass") + " ~* &* +@all" +
                            ((config & 128) ? " -@admin" : "") +
                            " -fencedkv.checkpoint -fencedkv.backup\n"
                            "user reader on >rpw ~* +@read +@connection\n"
                            "user locker on >lpw +@lease +ping\n";
    s = Acl::Parse(acl, "fuzz.acl", "", &options_.acl);
    if (!s.ok()) Fail("acl", s.ToString());
    options_.limits.max_request_bytes = 1 << 16;
    options_.limits.max_args = 64;
    options_.limits.max_inline_bytes = 4096;
    state_ = std::make_unique<ServerState>();
    state_->db = db_.get();
    state_->leases = leases_.get();
    state_->options = &options_;
    state_->stats = &stats_;
    state_->started = std::chrono::steady_clock::now();
    state_->port = 7379;
    state_->list_clients = [](std::string* out) {
      resp::Bulk(out, "id=1 addr=127.0.0.1:1\n");
    };
    NewClient();
    return true;
  }

  void Close() {
    state_.reset();  // parked SCAN iterators go before the database
    leases_.reset();
    db_.reset();
  }

  void NewClient() {
    client_ = ClientState();
    client_.id = ++next_client_id_;
    StartSession(*state_, &client_);
    queued_ = 0;
    multi_.clear();
  }

  [[noreturn]] void Fail(const std::string& what, const std::string& detail) {
    std::fprintf(stderr, "command_fuzzer: FINDING: %s\n", what.c_str());
    for (const auto& c : trace_) std::fprintf(stderr, "  > %s\n", c.c_str());
    std::fprintf(stderr, "  %s\n", detail.c_str());
    std::abort();
  }

  std::string Value(const std::string& key) {
    std::string v;
    Status s = db_->Get(ReadOptions(), key, &v);
    if (s.ok()) return v;
    if (s.IsNotFound()) return "<absent>";
    if (s.IsInvalidArgument()) return "<invalid>";
    Fail("Get " + key, s.ToString());
  }

  // The max of key's domain must never go down.
  void CheckFence(const std::string& key) {
    if (key.empty()) return;
    Token max = 0;
    Status s = db_->GetFence(key, &max);
    if (!s.ok()) return;  // e.g. a key over the size limit
    const std::string domain(db_->GetFenceDomain().DomainOf(key));
    Token& seen = fence_seen_[domain];
    if (max < seen) {
      Fail("fence max went down", "domain '" + domain + "' from " +
                                      std::to_string(seen) + " to " +
                                      std::to_string(max));
    }
    seen = max;
  }

  void Execute(const Args& args);
  bool authed() const { return client_.authed; }

 private:
  // The keys a write command names, and for SET / MSET the value each ends
  // with when it applies (in order; a later pair wins). DEL: value nullopt.
  struct Effect {
    std::vector<std::pair<std::string, std::optional<std::string>>> writes;
    bool has_get = false;  // SET ... GET
  };
  static bool WriteEffect(const std::vector<std::string>& a, Effect* e);
  void CheckWrite(const std::string& name, const std::vector<std::string>& a,
                  const Effect& e, const Snapshot& before, const Reply& r);
  // GET, MGET, EXISTS, KEYS, DBSIZE and SCAN against the store.
  void CheckRead(const std::string& name, const std::vector<std::string>& a,
                 const Reply& r, const std::string& out);
  // The reply a GET of `key` gives: "<absent>" for nil, else the bulk.
  static std::string BulkValue(const Reply& r) {
    return r.type == '$' && r.is_null ? "<absent>" : r.text;
  }

  std::string dir_;
  std::unique_ptr<DB> db_;
  std::unique_ptr<LeaseService> leases_;
  ServerOptions options_;
  ServerStats stats_;
  std::unique_ptr<ServerState> state_;
  ClientState client_;
  uint64_t next_client_id_ = 0;
  int64_t now_ms_ = 1700000000000;
  size_t queued_ = 0;                            // +QUEUED replies since MULTI
  std::vector<std::vector<std::string>> multi_;  // what was queued
  std::map<std::string, Token> fence_seen_;
  Token floor_seen_ = 0;
  // Lease tokens granted: token -> "name\0holder".
  std::map<Token, std::string> grants_;
  Token max_granted_ = 0;
  std::vector<std::string> trace_;
};

bool Harness::WriteEffect(const std::vector<std::string>& a, Effect* e) {
  const std::string name = Lower(a[0]);
  if (name == "set" && a.size() >= 3) {
    for (size_t i = 3; i < a.size(); ++i) {
      if (Lower(a[i]) == "get") e->has_get = true;
      if (Lower(a[i]) == "fence") ++i;
    }
    e->writes.emplace_back(a[1], a[2]);
    return true;
  }
  if (name == "mset" && a.size() >= 3) {
    size_t end = a.size();
    if (end >= 5 && (end - 1) % 2 == 0 && Lower(a[end - 2]) == "fence")
      end -= 2;
    for (size_t i = 1; i + 1 < end; i += 2)
      e->writes.emplace_back(a[i], a[i + 1]);
    return true;
  }
  if (name == "del" && a.size() >= 2) {
    size_t end = a.size();
    if (end >= 4 && Lower(a[end - 2]) == "fence") end -= 2;
    for (size_t i = 1; i < end; ++i) e->writes.emplace_back(a[i], std::nullopt);
    return true;
  }
  return false;
}

void Harness::CheckWrite(const std::string& name,
                         const std::vector<std::string>& a, const Effect& e,
                         const Snapshot& before, const Reply& r) {
  auto unchanged = [&](const std::string& why) {
    for (const auto& [k, v] : before) {
      if (Value(k) != v) {
        Fail(Cat({why, " but key '", k, "' changed"}),
             Cat({"was '", v, "', now '", Value(k), "'"}));
      }
    }
  };
  if (r.type == '-') {
    unchanged("error reply -" + r.text);
    return;
  }
  if (name == "set") {
    if (r.type == '+') {
      if (Value(a[1]) != a[2])
        Fail("SET +OK", "value is '" + Value(a[1]) + "'");
    } else if (e.has_get) {
      const std::string old = r.is_null ? "<absent>" : r.text;
      if (old != before.at(a[1])) {
        Fail("SET GET",
             "answered '" + old + "', the value was '" + before.at(a[1]) + "'");
      }
    } else if (r.is_null) {
      unchanged("SET NX/XX answered nil");
    }
    return;
  }
  if (name == "mset") {
    std::map<std::string, std::string> last;
    for (const auto& [k, v] : e.writes) last[k] = *v;
    for (const auto& [k, v] : last) {
      if (Value(k) != v) Fail("MSET +OK", "'" + k + "' is '" + Value(k) + "'");
    }
    return;
  }
  if (name == "del") {
    int64_t existed = 0;
    for (const auto& [k, v] : before) {
      if (Value(k) != "<absent>" && Value(k) != "<invalid>") {
        Fail("DEL answered :" + r.number, "'" + k + "' is still there");
      }
      existed += v != "<absent>" && v != "<invalid>" ? 1 : 0;
    }
    if (r.number != std::to_string(existed)) {
      Fail("DEL count", "answered " + r.number + ", " +
                            std::to_string(existed) + " keys existed");
    }
  }
}

void Harness::CheckRead(const std::string& name,
                        const std::vector<std::string>& a, const Reply& r,
                        const std::string& out) {
  auto keys_of = [&](const Reply& array) {
    std::vector<std::string> keys;
    for (const Reply& e : array.elems) {
      if (e.type != '$' || e.is_null) Fail(name + " reply shape", out);
      if (Value(e.text) == "<absent>") {
        Fail(name + " answered a key that has no value", e.text);
      }
      keys.push_back(e.text);
    }
    return keys;
  };
  size_t total = 0;
  if (name == "dbsize" || name == "keys") {
    auto it = db_->NewIterator(ReadOptions());
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++total;
  }
  if (name == "get") {
    if (r.type != '$' || (BulkValue(r) != Value(a[1]) &&
                          !(r.is_null && Value(a[1]) == "<invalid>"))) {
      Fail("GET answered what the store does not hold", out);
    }
  } else if (name == "mget") {
    if (r.type != '*' || r.elems.size() != a.size() - 1)
      Fail("MGET shape", out);
    for (size_t i = 1; i < a.size(); ++i) {
      const std::string v = Value(a[i]);
      const std::string got = BulkValue(r.elems[i - 1]);
      if (got != v && !(got == "<absent>" && v == "<invalid>")) {
        Fail("MGET element " + std::to_string(i),
             Cat({"'", got, "', the store holds '", v, "'"}));
      }
    }
  } else if (name == "exists") {
    int64_t n = 0;
    for (size_t i = 1; i < a.size(); ++i) {
      const std::string v = Value(a[i]);
      n += v != "<absent>" && v != "<invalid>" ? 1 : 0;
    }
    if (r.number != std::to_string(n)) Fail("EXISTS count", out);
  } else if (name == "dbsize") {
    if (r.number != std::to_string(total)) {
      Fail("DBSIZE", "answered " + r.number + ", the store has " +
                         std::to_string(total) + " keys");
    }
  } else if (name == "keys") {
    if (r.type != '*') Fail("KEYS shape", out);
    keys_of(r);
    if (a[1] == "*" && r.elems.size() != total) Fail("KEYS * misses keys", out);
  } else if (name == "scan") {
    if (r.type != '*' || r.elems.size() != 2 || r.elems[0].type != '$' ||
        r.elems[1].type != '*') {
      Fail("SCAN shape", out);
    }
    keys_of(r.elems[1]);
  }
}

void Harness::Execute(const Args& args) {
  std::vector<std::string> a(args.begin(), args.end());
  std::string line;
  for (const auto& w : a) line += (line.empty() ? "" : " ") + EscapeBytes(w);
  if (trace_.size() < 256) trace_.push_back(line);

  if (Lower(a[0]) == "fuzz.tick") {  // the harness's own: move the clock
    int64_t ms = 1000;
    if (a.size() > 1) ms = std::strtoll(a[1].c_str(), nullptr, 10);
    if (ms > 0 && ms <= 48LL * 3600 * 1000) now_ms_ += ms;
    return;
  }
  const std::string name = Lower(a[0]);
  if (name.rfind("fencedkv.", 0) == 0 && name != "fencedkv.jobstatus") {
    return;  // copies to a path on this machine: see the top
  }
  const CommandSpec* spec = LookupCommand(a[0]);
  const bool runs = spec != nullptr && client_.authed && !client_.in_multi;

  // What the command may change, read before it runs.
  Effect effect;
  Snapshot before;
  std::vector<Effect> exec_effects;
  if (client_.in_multi && name == "exec") {
    for (const auto& q : multi_) {
      exec_effects.emplace_back();
      WriteEffect(q, &exec_effects.back());
      for (const auto& w : exec_effects.back().writes) {
        before[w.first] = Value(w.first);
      }
    }
  } else if (WriteEffect(a, &effect)) {
    for (const auto& w : effect.writes) before[w.first] = Value(w.first);
  }
  const Token floor_before = db_->GetFenceFloor();
  const bool was_in_multi = client_.in_multi;

  std::string out;
  Dispatch(*state_, client_, args, &out);

  Reply r;
  size_t pos = 0;
  std::string why;
  if (!ParseReply(out, &pos, 0, &r, &why) || pos != out.size()) {
    Fail("malformed reply",
         (why.empty() ? "trailing bytes after one reply" : why) + ": " +
             EscapeBytes(out.substr(0, 512)));
  }

  if (was_in_multi) {
    const bool ended = !client_.in_multi;  // EXEC, DISCARD, QUIT
    if (ended && name == "exec") {
      if (r.type != '*' && r.type != '-') Fail("EXEC reply type", out);
      if (r.type == '*') {
        if (r.elems.size() != multi_.size() || queued_ != multi_.size()) {
          Fail("EXEC reply count", std::to_string(r.elems.size()) +
                                       " replies, " + std::to_string(queued_) +
                                       " commands queued");
        }
        // Each key ends with its last queued write.
        std::map<std::string, std::string> last;
        for (const auto& e : exec_effects) {
          for (const auto& [k, v] : e.writes) {
            if (!k.empty()) last[k] = v ? *v : "<absent>";
          }
        }
        for (const auto& [k, v] : last) {
          if (Value(k) != v)
            Fail("EXEC applied",
                 Cat({"'", k, "' is '", Value(k), "', not '", v, "'"}));
        }
      } else {
        CheckWrite("exec", a, effect, before, r);
      }
    } else if (r.type == '+' && r.text == "QUEUED") {
      ++queued_;
      multi_.push_back(a);
    } else {
      for (const auto& [k, v] : before) {
        if (Value(k) != v) Fail("a write inside MULTI applied before EXEC", k);
      }
    }
    if (ended) {
      multi_.clear();
      queued_ = 0;
    }
  } else if (runs && !before.empty()) {
    CheckWrite(name, a, effect, before, r);
  } else if (!before.empty()) {
    for (const auto& [k, v] : before) {
      if (Value(k) != v) Fail("a refused command changed '" + k + "'", out);
    }
  }
  if (name == "multi" && r.type == '+') {
    multi_.clear();
    queued_ = 0;
  }

  // Tokens are answered as bulk strings of decimal digits.
  auto token_of = [&](const Reply& e) {
    Token t = 0;
    if (e.type != '$' || e.is_null || !ParseToken(e.text, &t)) {
      Fail(name + ": a token that is not a decimal bulk string", out);
    }
    return t;
  };
  // A max or a floor is a token, or 0 while there is none: a floor never
  // raised, or FENCE.ADVANCE k 1 in strict mode (the max becomes t - 1).
  auto max_of = [&](const Reply& e) {
    return e.type == '$' && !e.is_null && e.text == "0" ? Token{0}
                                                        : token_of(e);
  };
  if (runs && name == "fence.advance" && r.type != '-') {
    Token t = 0, now = 0;
    ParseToken(a[2], &t);
    db_->GetFence(a[1], &now);
    const Token after = max_of(r);
    // Strict mode: the max becomes t - 1, so that t itself still passes.
    const Token least = db_->GetFenceMode() == FenceMode::kStrict ? t - 1 : t;
    if (after < least || after != now) {
      Fail("FENCE.ADVANCE", "answered " + r.text + " for token " + a[2] +
                                ", FENCE.GET says " + std::to_string(now));
    }
  }
  if (runs && name == "fence.floor" && r.type != '-') {
    const Token f = max_of(r);
    if (f < floor_seen_ || f != db_->GetFenceFloor()) {
      Fail("FENCE.FLOOR",
           "answered " + r.text + " after " + std::to_string(floor_seen_));
    }
    floor_seen_ = f;
  }
  if (runs && (name == "lease.acquire" || name == "lease.renew") &&
      r.type != '-') {
    if (r.type != '*' || r.elems.size() != 2) Fail("lease reply", out);
    const Token t = token_of(r.elems[0]);
    const std::string who = a[1] + '\0' + a[2];
    auto it = grants_.find(t);
    if (it == grants_.end()) {
      if (name == "lease.renew") Fail("LEASE.RENEW issued a new token", out);
      // A new token: above every token granted before, and the floor.
      if (t <= max_granted_ || t <= floor_before) {
        Fail("a new lease token is not above the last one and the floor",
             "token " + std::to_string(t) + ", last " +
                 std::to_string(max_granted_) + ", floor " +
                 std::to_string(floor_before));
      }
      grants_[t] = who;
      max_granted_ = t;
    } else if (it->second != who) {
      Fail("one lease token granted twice", "token " + std::to_string(t));
    }
  }
  if (runs && r.type != '-') CheckRead(name, a, r, out);
  if (a.size() >= 2) CheckFence(a[1]);
  for (const auto& [k, v] : before) CheckFence(k);

  if (client_.close_after_reply) NewClient();  // QUIT: a new connection
}

}  // namespace
}  // namespace server
}  // namespace fencedkv

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Handlers log unfenced writes with glog: keep the fuzzer's output quiet.
  FLAGS_minloglevel = 3;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fencedkv::server;
  if (size == 0) return 0;
  const std::string dir = fencedkv::fuzz::FreshDbPath();
  Harness h(dir);
  h.Open(data[0]);
  RespParser::Limits limits;
  limits.max_request_bytes = 1 << 16;
  limits.max_args = 64;
  limits.max_inline_bytes = 4096;
  RespParser parser(limits);
  parser.set_authenticated(h.authed());
  const char* buf = reinterpret_cast<const char*>(data + 1);
  size_t pos = 0, n = size - 1;
  std::vector<std::string_view> args;
  for (int commands = 0; pos < n && commands < 200; ++commands) {
    size_t consumed = 0;
    if (parser.Parse(buf + pos, n - pos, &args, &consumed) !=
        RespParser::Result::kCommand) {
      break;  // the server would answer a protocol error and close
    }
    pos += consumed;
    if (!args.empty()) h.Execute(args);
    parser.set_authenticated(h.authed());  // as a connection does
  }
  return 0;
}
