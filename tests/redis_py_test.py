#!/usr/bin/env python3
"""fencedkv-server through Debian's python3-redis, unchanged.

Usage: redis_py_test.py PORT
"""
import sys

import redis

port = int(sys.argv[1])
passed = failed = 0


def check(name, expected, actual):
    global passed, failed
    if expected == actual:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: expected {expected!r}, got {actual!r}", file=sys.stderr)


def error_of(fn):
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        return str(e)
    return None


r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
check("ping", True, r.ping())

# The hand-over scenario with fenced writes.
check("A writes with 7", True, r.execute_command("SET", "py:k", "A", "FENCE", 7))
# Tokens come back as bulk strings (a RESP2 integer cannot hold 2^64-1).
check("B advances to 8", b"8", r.execute_command("FENCE.ADVANCE", "py:k", 8))
check("B writes with 8", True, r.execute_command("SET", "py:k", "B", "FENCE", 8))
err = error_of(lambda: r.execute_command("SET", "py:k", "late", "FENCE", 7))
check("stale A is refused with STALE", True, err is not None and err.startswith("STALE token 7 < max 8"))
check("B's value stands", b"B", r.get("py:k"))
check("plain SET is refused", True,
      (error_of(lambda: r.set("py:x", "v")) or "").startswith("NOFENCE"))
check("invalid token", True,
      (error_of(lambda: r.execute_command("SET", "py:k", "v", "FENCE", 0)) or "").startswith("invalid token"))

# Reads, many keys, pipelining.
pipe = r.pipeline(transaction=False)
for i in range(100):
    pipe.execute_command("SET", f"py:p:{i:03d}", f"v{i}", "FENCE", 8)
check("pipelined fenced SETs", [True] * 100, pipe.execute())
check("mget", [b"v0", b"v99", None], r.mget("py:p:000", "py:p:099", "py:nope"))
check("exists", 2, r.exists("py:p:000", "py:p:001", "py:nope"))
check("scan_iter", 100, len(list(r.scan_iter(match="py:p:*", count=17))))
check("del counts existing keys", 2,
      r.execute_command("DEL", "py:p:000", "py:p:001", "py:nope", "FENCE", 8))
check("fenced get", b"v2", r.execute_command("GET", "py:p:002", "FENCE", 8))

# Leases.
token, ttl = r.execute_command("LEASE.ACQUIRE", "py:lease", "holder-1", 5000)
check("lease token is a decimal bulk string", True, int(token) >= 1)
check("lease ttl", True, 0 < ttl <= 5000)
err = error_of(lambda: r.execute_command("LEASE.ACQUIRE", "py:lease", "holder-2", 5000))
check("lease held", True, (err or "").startswith("LEASED"))
check("lease release", b"OK", r.execute_command("LEASE.RELEASE", "py:lease", "holder-1", token))

# MULTI/EXEC through redis-py's transaction pipeline.
tx = r.pipeline(transaction=True)
tx.execute_command("SET", "py:t1", "1", "FENCE", 9)
tx.execute_command("SET", "py:t2", "2", "FENCE", 9)
check("transaction", [True, True], tx.execute())
check("transaction applied", [b"1", b"2"], r.mget("py:t1", "py:t2"))

check("FENCE.ADVANCE near 2^64", b"18446744073709551615",
      r.execute_command("FENCE.ADVANCE", "py:big", 18446744073709551615))
# ... and one client's 2^64-1 does not stop the lease service for everyone.
token2, _ = r.execute_command("LEASE.ACQUIRE", "py:lease2", "holder-1", 5000)
check("leases still granted after a token of 2^64-1", int(token) + 1, int(token2))

# The keys a cluster client would route by: redis-py's CommandsParser reads
# COMMAND's key positions, and asks COMMAND GETKEYS for movablekeys ones
# (DEL, MSET: their FENCE clause is not a key).
from redis.commands.parser import CommandsParser
keys = CommandsParser(r)
check("routing keys of MSET ... FENCE t", ["a", "b"],
      keys.get_keys(r, "MSET", "a", "1", "b", "2", "FENCE", "3"))
check("routing keys of DEL ... FENCE t", ["a", "b"],
      keys.get_keys(r, "DEL", "a", "b", "FENCE", "3"))
check("routing keys of SET", ["k"], keys.get_keys(r, "SET", "k", "v", "FENCE", "3"))
check("routing keys of MGET", ["a", "b"], keys.get_keys(r, "MGET", "a", "b"))

info = r.info("fencing")
check("INFO fencing counts the rejection", True, info["rejected_writes"] >= 1)
check("INFO fence_domain", "key", info["fence_domain"])

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
