// Copyright (c) fencedkv authors.
//
// FENCE.* and LEASE.*. Every token in a reply is a bulk string holding its
// decimal form (a RESP2 integer is signed: 2^64-1 would not fit); other
// numbers (ttl_ms) are integers.
//   FENCE.ADVANCE key token          -> token: the domain's max after it
//   FENCE.GET key                    -> token ("0" if none)
//   FENCE.DOMAIN key                 -> bulk: the key's fence domain
//   FENCE.FLOOR [token]              -> token: the floor (after raising it)
//   LEASE.ACQUIRE name holder ttl_ms -> [token, ttl_ms] | -LEASED
//   LEASE.RENEW name holder token ttl_ms -> [token, ttl_ms] | -LEASELOST
//   LEASE.RELEASE name holder token  -> +OK | -LEASELOST
//   LEASE.INFO name                  -> [holder, h, token, t, ttl_ms, n] | nil

#include <string>
#include <vector>

#include "command_table.h"
#include "resp_writer.h"

namespace fencedkv {
namespace server {

namespace {

void CmdFenceAdvance(ServerState& server, ClientState&, const Args& args,
                     std::string* out) {
  Token token, after = 0;
  if (!ParseTokenArg(args[2], &token, out)) return;
  Status s = server.db->AdvanceFence(ServerWriteOptions(server), args[1], token,
                                     &after);
  if (s.ok()) {
    resp::BulkNumber(out, after);
  } else {
    ReplyStatus(s, out);
  }
}

void CmdFenceGet(ServerState& server, ClientState&, const Args& args,
                 std::string* out) {
  Token max = 0;
  Status s = server.db->GetFence(args[1], &max);
  if (s.ok()) {
    resp::BulkNumber(out, max);
  } else {
    ReplyStatus(s, out);
  }
}

void CmdFenceDomain(ServerState& server, ClientState&, const Args& args,
                    std::string* out) {
  if (args[1].empty()) {
    resp::Error(out, "ERR empty key");
    return;
  }
  resp::Bulk(out, server.db->GetFenceDomain().DomainOf(args[1]));
}

void CmdFenceFloor(ServerState& server, ClientState&, const Args& args,
                   std::string* out) {
  if (args.size() > 2) {
    ReplyWrongArgs("fence.floor", out);
    return;
  }
  if (args.size() == 2) {
    Token floor;
    if (!ParseTokenArg(args[1], &floor, out)) return;
    Status s = server.db->SetFenceFloor(ServerWriteOptions(server), floor);
    if (!s.ok()) {
      ReplyStatus(s, out);
      return;
    }
  }
  resp::BulkNumber(out, server.db->GetFenceFloor());
}

bool ParseTtl(std::string_view text, int64_t* ttl, std::string* out) {
  if (!ParseInt64Arg(text, ttl, out)) return false;
  if (*ttl <= 0) {
    resp::Error(out, "ERR invalid ttl_ms: must be a positive integer");
    return false;
  }
  return true;
}

void ReplyGrant(const LeaseGrant& g, std::string* out) {
  resp::ArrayHeader(out, 2);
  resp::BulkNumber(out, g.token);
  resp::Integer(out, g.ttl_ms);
}

void CmdLeaseAcquire(ServerState& server, ClientState&, const Args& args,
                     std::string* out) {
  int64_t ttl;
  if (!ParseTtl(args[3], &ttl, out)) return;
  LeaseGrant g;
  Status s = server.leases->Acquire(args[1], args[2], ttl, &g);
  if (s.ok()) {
    ReplyGrant(g, out);
  } else {
    ReplyStatus(s, out);
  }
}

void CmdLeaseRenew(ServerState& server, ClientState&, const Args& args,
                   std::string* out) {
  Token token;
  int64_t ttl;
  if (!ParseTokenArg(args[3], &token, out) || !ParseTtl(args[4], &ttl, out)) {
    return;
  }
  LeaseGrant g;
  Status s = server.leases->Renew(args[1], args[2], token, ttl, &g);
  if (s.ok()) {
    ReplyGrant(g, out);
  } else {
    ReplyStatus(s, out);
  }
}

void CmdLeaseRelease(ServerState& server, ClientState&, const Args& args,
                     std::string* out) {
  Token token;
  if (!ParseTokenArg(args[3], &token, out)) return;
  Status s = server.leases->Release(args[1], args[2], token);
  if (s.ok()) {
    resp::Simple(out, "OK");
  } else {
    ReplyStatus(s, out);
  }
}

void CmdLeaseInfo(ServerState& server, ClientState&, const Args& args,
                  std::string* out) {
  LeaseGrant g;
  Status s = server.leases->Inspect(args[1], &g);
  if (s.IsNotFound()) {
    resp::NullArray(out);
  } else if (!s.ok()) {
    ReplyStatus(s, out);
  } else {
    resp::ArrayHeader(out, 6);
    resp::Bulk(out, "holder");
    resp::Bulk(out, g.holder);
    resp::Bulk(out, "token");
    resp::BulkNumber(out, g.token);
    resp::Bulk(out, "ttl_ms");
    resp::Integer(out, g.ttl_ms);
  }
}

// LEASE.LIST [pattern]: the leases held now whose names match (all by
// default), in name order, each [name, holder, token, ttl_ms,
// expires_at_ms]. Run on the scan thread (kCmdIterates), never on a loop:
// matching 100,000 names of 1 KiB against a costly pattern takes seconds.
// The leases are copied kLeaseListSlice at a time under the lease
// service's lock and matched after it, so that lease calls wait for a copy
// of 64 leases at most, not for the matching; the listing is therefore not
// one snapshot: a lease granted or dropped meanwhile may be missing or
// listed. The reply is bounded by
// max_reply_bytes (then an error: ask with a narrower pattern).
constexpr size_t kLeaseListSlice = 64;

void CmdLeaseList(ServerState& server, ClientState&, const Args& args,
                  std::string* out) {
  if (args.size() > 2) {
    ReplyWrongArgs("lease.list", out);
    return;
  }
  const GlobPattern glob(args.size() == 2 ? args[1] : std::string_view("*"));
  if (!PatternOk(glob, out)) return;
  std::string body;
  size_t n = 0;
  bool failed = false;
  std::string error;
  std::string after;  // the last name copied ("": from the first)
  std::vector<LeaseGrant> slice;
  for (bool more = true; more && !failed;) {
    // Copied under the service's lock, matched after it (the costly part).
    slice.clear();
    more = false;
    server.leases->List(after, [&](const LeaseGrant& g) {
      if (slice.size() == kLeaseListSlice) {
        more = true;  // the rest in the next slice
        return false;
      }
      slice.push_back(g);
      return true;
    });
    if (!slice.empty()) after = slice.back().name;
    for (const LeaseGrant& g : slice) {
      bool matched;
      if (!MatchKey(glob, g.name, &matched, &error)) {
        failed = true;
        break;
      }
      if (!matched) continue;
      resp::ArrayHeader(&body, 5);
      resp::Bulk(&body, g.name);
      resp::Bulk(&body, g.holder);
      resp::BulkNumber(&body, g.token);
      resp::Integer(&body, g.ttl_ms);
      resp::Integer(&body, g.expires_at_ms);
      ++n;
      if (ReplyTooLarge(server, body.size(), &error)) {
        failed = true;
        break;
      }
    }
  }
  if (failed) {
    out->append(error);
    return;
  }
  resp::ArrayHeader(out, n);
  out->append(body);
}

}  // namespace

void AppendFenceCommands(std::vector<CommandSpec>* t) {
  t->push_back({"fence.advance",
                CmdFenceAdvance,
                3,
                kCmdWrite,
                {1, 1, 1},
                kCatWrite | kCatFencing});
  t->push_back({"fence.get",
                CmdFenceGet,
                2,
                kCmdReadOnly,
                {1, 1, 1},
                kCatRead | kCatFencing});
  t->push_back({"fence.domain",
                CmdFenceDomain,
                2,
                kCmdReadOnly,
                {1, 1, 1},
                kCatRead | kCatFencing});
  // Reading the floor is for everyone; raising it refuses every older token
  // in every domain, for good: an operator's (@admin) act.
  t->push_back({"fence.floor",
                CmdFenceFloor,
                -1,
                kCmdAdmin,
                {},
                kCatRead | kCatFencing,
                [](const Args& args) -> const char* {
                  return args.size() > 1
                             ? "'fence.floor' command with an argument"
                             : nullptr;
                },
                kCatWrite | kCatFencing});
  // A lease's name is not a key: leases live beside the key space.
  t->push_back({"lease.acquire",
                CmdLeaseAcquire,
                4,
                kCmdWrite,
                {},
                kCatWrite | kCatLease});
  t->push_back(
      {"lease.renew", CmdLeaseRenew, 5, kCmdWrite, {}, kCatWrite | kCatLease});
  t->push_back({"lease.release",
                CmdLeaseRelease,
                4,
                kCmdWrite,
                {},
                kCatWrite | kCatLease});
  t->push_back(
      {"lease.info", CmdLeaseInfo, 2, kCmdReadOnly, {}, kCatRead | kCatLease});
  t->push_back({"lease.list",
                CmdLeaseList,
                -1,
                kCmdReadOnly | kCmdIterates,
                {},
                kCatRead | kCatLease});
}

}  // namespace server
}  // namespace fencedkv
