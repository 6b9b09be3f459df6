#!/usr/bin/env bash
# fencedkv-server driven by the real redis-cli (Debian redis-tools): the
# hand-over scenario, then every command the server offers.
# Usage: redis_cli_test.sh /path/to/fencedkv-server
set -euo pipefail
FENCEDKV_SERVER=$1
source "$(dirname "$0")/lib.sh"
command -v redis-cli >/dev/null || { echo "redis-cli not installed (apt-get install redis-tools)" >&2; exit 1; }

# An operator (@admin) for FENCE.FLOOR <t> and CONFIG; everyone else is the
# default user.
printf 'user op on >oppw ~* +@all\n' > "$E2E_TMP/users.acl"
start_server main --aclfile="$E2E_TMP/users.acl"
cli() { redis-cli -h 127.0.0.1 -p "$PORT_main" "$@" 2>&1 || true; }
op() { redis-cli -h 127.0.0.1 -p "$PORT_main" --user op --pass oppw --no-auth-warning "$@" 2>&1 || true; }

# --- The hand-over: A (token 7) writes, pauses; B (token 8) fences it out. ---
check "A acquires lease"        "1
5000" "$(cli LEASE.ACQUIRE orders A 5000)"
check "A writes with 7"         "OK"   "$(cli SET orders:next 100 FENCE 1)"
check "lease held by A"         "LEASED"  "$(cli LEASE.ACQUIRE orders B 5000 | cut -d' ' -f1)"
sleep 0.1
check "A's short lease"         "1
50" "$(cli LEASE.RENEW orders A 1 50)"
sleep 0.2   # A is "paused" past its TTL
check "B acquires: token 2"     "2
5000" "$(cli LEASE.ACQUIRE orders B 5000)"
check "B advances the fence"    "2"    "$(cli FENCE.ADVANCE orders:next 2)"
check "B writes with 2"         "OK"   "$(cli SET orders:next 200 FENCE 2)"
check "paused A is STALE"       'STALE token 1 < max 2 (domain "orders:next")' \
      "$(cli SET orders:next 101 FENCE 1)"
check "A's renew is LEASELOST"  "LEASELOST" "$(cli LEASE.RENEW orders A 1 5000 | cut -d' ' -f1)"
check "B's value stands"        "200"  "$(cli GET orders:next)"
check "INFO counts it"          "rejected_writes:1" \
      "$(cli INFO fencing | tr -d '\r' | grep '^rejected_writes:')"

# --- Strings ---
check "SET without FENCE"       "NOFENCE" "$(cli SET k v | cut -d' ' -f1)"
check "SET token 0"             "ERR" "$(cli SET k v FENCE 0 | cut -d' ' -f1)"
check "SET token overflow"      "ERR" "$(cli SET k v FENCE 18446744073709551616 | cut -d' ' -f1)"
check "SET token negative"      "ERR" "$(cli SET k v FENCE -3 | cut -d' ' -f1)"
check "SET token text"          "ERR" "$(cli SET k v FENCE seven | cut -d' ' -f1)"
check "SET EX refused"          "ERR SET option EX is not supported: fencedkv keys do not expire" \
      "$(cli SET k v EX 10 FENCE 3)"
check "SET"                     "OK"  "$(cli SET k v1 FENCE 3)"
check "SET NX on existing"      ""    "$(cli SET k v2 NX FENCE 3)"
check "SET XX"                  "OK"  "$(cli SET k v2 XX FENCE 3)"
check "SET GET"                 "v2"  "$(cli SET k v3 GET FENCE 3)"
check "GET"                     "v3"  "$(cli GET k)"
check "GET FENCE ok"            "v3"  "$(cli GET k FENCE 3)"
check "GET FENCE stale"         'STALE token 2 < max 3 (domain "k")' "$(cli GET k FENCE 2)"
check "GET missing"             ""    "$(cli GET missing)"
check "MSET"                    "OK"  "$(cli MSET a 1 b 2 FENCE 3)"
check "MGET"                    "1
2" "$(cli MGET a b nope)"
check "MGET nil is a line"      "3"   "$(cli MGET a b nope | wc -l | tr -d ' ')"
check "EXISTS"                  "2"   "$(cli EXISTS a b nope)"
check "DEL"                     "2"   "$(cli DEL a b nope FENCE 3)"
check "DEL keeps the fence"     'STALE token 2 < max 3 (domain "a")' "$(cli SET a x FENCE 2)"
check "wrong arity"             "ERR wrong number of arguments for 'get' command" "$(cli GET)"
check "unknown command"         "ERR unknown command 'FROB', with args beginning with: 'x'" "$(cli FROB x)"

# --- Fence commands ---
check "FENCE.GET"               "3"   "$(cli FENCE.GET k)"
check "FENCE.GET none"          "0"   "$(cli FENCE.GET never)"
check "FENCE.ADVANCE lower"     "3"   "$(cli FENCE.ADVANCE k 1)"
check "FENCE.DOMAIN"            "user:{x}:1" "$(cli FENCE.DOMAIN user:{x}:1)"
check "FENCE.FLOOR get"         "0"   "$(cli FENCE.FLOOR)"
check "FENCE.FLOOR set: @admin" "NOPERM" "$(cli FENCE.FLOOR 2 | cut -d' ' -f1)"
check "FENCE.FLOOR set"         "2"   "$(op FENCE.FLOOR 2)"
check "FENCE.FLOOR lower"       "ERR" "$(op FENCE.FLOOR 1 | cut -d' ' -f1)"
check "below floor"             'STALE token 1 < floor 2 (domain "fresh")' "$(cli SET fresh v FENCE 1)"
# Tokens go out as bulk strings: RESP2 integers are signed, and redis-cli
# cannot print one above 2^63-1 ("Bad integer value").
check "SET near 2^64"           "OK"  "$(cli SET big v FENCE 18446744073709551615)"
check "FENCE.GET near 2^64"     "18446744073709551615" "$(cli FENCE.GET big)"
check "FENCE.ADVANCE near 2^64" "18446744073709551615" "$(cli FENCE.ADVANCE big2 18446744073709551614 >/dev/null; cli FENCE.ADVANCE big2 18446744073709551615)"
check "FENCE.GET is a bulk string" '"3"' "$(redis-cli -h 127.0.0.1 -p "$PORT_main" --no-raw FENCE.GET k)"

# --- Scans ---
for i in $(seq 1 25); do cli SET "scan:$i" v FENCE 3 >/dev/null; done
check "SCAN via --scan"         "25"  "$(redis-cli -h 127.0.0.1 -p "$PORT_main" --scan --pattern 'scan:*' | wc -l)"
check "KEYS"                    "10"  "$(cli KEYS 'scan:1?' | wc -l | tr -d ' ')"
check "DBSIZE"                  "28"  "$(cli DBSIZE)"   # orders:next, k, big, 25 scan:*

# --- Transactions (one connection, via stdin) ---
tx=$(printf 'MULTI\nSET t1 1 FENCE 3\nSET t2 2 FENCE 3\nEXEC\n' | cli)
check "MULTI/EXEC"              "OK
QUEUED
QUEUED
OK
OK" "$tx"
tx=$(printf 'MULTI\nSET t3 3 FENCE 3\nSET k stale FENCE 2\nEXEC\n' | cli)
check "stale EXEC applies nothing" "OK
QUEUED
QUEUED
STALE token 2 < max 3 (domain \"k\") at command 2" "$tx"
check "t3 not written"          ""    "$(cli GET t3)"
check "DISCARD"                 "OK
QUEUED
OK" "$(printf 'MULTI\nSET t4 4 FENCE 3\nDISCARD\n' | cli)"

# --- Admin ---
check "PING"                    "PONG"  "$(cli PING)"
check "ECHO"                    "hello" "$(cli ECHO hello)"
check "SELECT 0"                "OK"    "$(cli SELECT 0)"
check "SELECT 1"                "ERR"   "$(cli SELECT 1 | cut -d' ' -f1)"
check "CLIENT SETNAME/GETNAME"  "OK
w1" "$(printf 'CLIENT SETNAME w1\nCLIENT GETNAME\n' | cli)"
check_prefix "CLIENT ID"        ""      "$(cli CLIENT ID)"
check "HELLO 2 server"          "server
fencedkv" "$(cli HELLO 2 | head -2)"
check "COMMAND COUNT"           "true"  "$( [ "$(cli COMMAND COUNT)" -gt 20 ] && echo true)"
check "CONFIG GET appendonly"   "appendonly
yes" "$(op CONFIG GET appendonly)"
check "INFO sections"           "# Server # Clients # Memory # Stats # Persistence # Replication # Fencing # Errorstats # Keyspace" \
      "$(cli INFO | tr -d '\r' | grep '^#' | tr '\n' ' ' | sed 's/ $//')"
check "QUIT"                    "OK"    "$(cli QUIT)"
check "FLUSHALL refused"        "ERR"   "$(cli FLUSHALL | cut -d' ' -f1)"

# --- --malloc_retain_mb: glibc takes an int of bytes, so at most 2047 ---
out=$("$FENCEDKV_SERVER" --db="$E2E_TMP/retain" --port=0 --malloc_retain_mb=2048 2>&1) && rc=0 || rc=$?
check "malloc_retain_mb=2048 refused" "1 Invalid value for --malloc_retain_mb: 2048 (must be 0..2047)" \
      "$rc $(echo "$out" | head -1)"
check "nothing created"         "no" "$([ -e "$E2E_TMP/retain" ] && echo yes || echo no)"
# --malloc_prefault_mb must leave the retained heap room to keep it
out=$("$FENCEDKV_SERVER" --db="$E2E_TMP/retain" --port=0 --malloc_prefault_mb=240 2>&1) && rc=0 || rc=$?
check "malloc_prefault_mb=240 refused" "1 fencedkv-server: --malloc_prefault_mb=240 needs --malloc_retain_mb of at least 272 (it is 256): the heap would give the touched memory back at once" \
      "$rc $(echo "$out" | head -1)"
check "nothing created"         "no" "$([ -e "$E2E_TMP/retain" ] && echo yes || echo no)"
out=$("$FENCEDKV_SERVER" --db="$E2E_TMP/retain" --port=0 --malloc_prefault_mb=-2 2>&1) && rc=0 || rc=$?
check "malloc_prefault_mb=-2 refused" "1 Invalid value for --malloc_prefault_mb: -2 (must be -1..2047)" \
      "$rc $(echo "$out" | head -1)"
# (with --malloc_retain_mb=0 the default prefault is none: nothing to keep it)
start_server retain --malloc_retain_mb=0
check "glibc defaults serve"    "OK 1" \
      "$(redis-cli -h 127.0.0.1 -p "$PORT_retain" SET r v FENCE 1) $(redis-cli -h 127.0.0.1 -p "$PORT_retain" EXISTS r)"
stop_server retain

# --- A memory cgroup's limit sizes what the server takes by default: a
# quarter of it for --maxmemory_clients, an eighth at most touched at start
# (--malloc_prefault_mb). The limit (512 MiB) is on a v1 cgroup made under
# this script's own, and the server runs in a child of it without a limit
# of its own: the lowest limit on the way up applies (systemd's MemoryMax=
# on a service's slice; nothing at the mount's root says it).
mine=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
cg=/sys/fs/cgroup/memory${mine%/}/fencedkv-test-$$
cg_cleanup() {  # whatever is left in the cgroups goes first: rmdir needs them empty
  local pid
  for pid in $(cat "$cg/server/cgroup.procs" "$cg/cgroup.procs" 2>/dev/null); do
    kill -9 "$pid" 2>/dev/null || true
  done
  for _ in $(seq 1 100); do
    rmdir "$cg/server" "$cg" 2>/dev/null || true
    [ -e "$cg" ] || break
    sleep 0.05
  done
}
if [ -n "$mine" ] && [ -f "/sys/fs/cgroup/memory${mine%/}/cgroup.procs" ] &&
   mkdir "$cg" 2>/dev/null; then
  trap 'cg_cleanup; e2e_cleanup' EXIT
  mkdir "$cg/server"
  echo $((512 << 20)) > "$cg/memory.limit_in_bytes"
  printf '#!/bin/sh\necho $$ > "%s/cgroup.procs" && exec "%s" "$@"\n' \
    "$cg/server" "$FENCEDKV_SERVER" > "$E2E_TMP/in_cgroup.sh"
  chmod +x "$E2E_TMP/in_cgroup.sh"
  real_server=$FENCEDKV_SERVER
  FENCEDKV_SERVER="$E2E_TMP/in_cgroup.sh"
  start_server cg
  FENCEDKV_SERVER=$real_server
  check "cgroup: maxmemory_clients a quarter of 512 MiB" "maxmemory_clients:134217728" \
        "$(redis-cli -h 127.0.0.1 -p "$PORT_cg" INFO memory | tr -d '\r' | grep '^maxmemory_clients:')"
  # 64 MiB fence view + 64 MiB touched heap + the rest: about 150 MiB (a
  # full 192 MiB prefault makes it 280).
  rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID_cg/status")
  check "cgroup: resident under 200 MiB (${rss_kib} KiB)" "yes" \
        "$([ "$rss_kib" -lt $((200 << 10)) ] && echo yes || echo no)"
  stop_server cg
  # As in a container that shares the host's cgroup namespace: the mount
  # shows this script's cgroup at the mount point (a private mount
  # namespace binds it there), while /proc/self/cgroup names the server's
  # full path. The limit is found through /proc/self/mountinfo's root of
  # the mount (before, the full path was looked up under the mount point,
  # where it does not exist: maxmemory_clients was a quarter of the
  # machine).
  if [ "${mine%/}" != "" ] && command -v unshare > /dev/null; then
    printf '#!/bin/sh\necho $$ > "%s/cgroup.procs" && exec unshare -m --propagation private sh -c '"'"'mount --bind "%s" /sys/fs/cgroup/memory && exec "$0" "$@"'"'"' "%s" "$@"\n' \
      "$cg/server" "/sys/fs/cgroup/memory${mine%/}" "$FENCEDKV_SERVER" > "$E2E_TMP/in_ns.sh"
    chmod +x "$E2E_TMP/in_ns.sh"
    FENCEDKV_SERVER="$E2E_TMP/in_ns.sh"
    start_server cgns
    FENCEDKV_SERVER=$real_server
    check "cgroup: the server sees this script's cgroup mounted" "${mine%/}" \
          "$(awk '$5 == "/sys/fs/cgroup/memory" {root = $4} END {print root}' "/proc/$PID_cgns/mountinfo")"
    check "cgroup through mountinfo: maxmemory_clients a quarter of 512 MiB" "maxmemory_clients:134217728" \
          "$(redis-cli -h 127.0.0.1 -p "$PORT_cgns" INFO memory | tr -d '\r' | grep '^maxmemory_clients:')"
    stop_server cgns
  fi
  cg_cleanup
  check "cgroup: removed" "no" "$([ -e "$cg" ] && echo yes || echo no)"
  trap e2e_cleanup EXIT
else
  echo "(no writable v1 memory cgroup here: the cgroup checks did not run)"
fi

# --- Without one heap (--malloc_hugepages=false) the default touches
# nothing at start: the database thread's own heap would not use it.
start_server cold --malloc_hugepages=false
rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID_cold/status")
check "no one heap: resident under 200 MiB (${rss_kib} KiB)" "yes" \
      "$([ "$rss_kib" -lt $((200 << 10)) ] && echo yes || echo no)"
stop_server cold

# --- AUTH on a second server ---
start_server auth --requirepass=pw
check "NOAUTH"                  "NOAUTH Authentication required." \
      "$(redis-cli -h 127.0.0.1 -p "$PORT_auth" GET k 2>&1)"
check "AUTH via -a"             "OK" \
      "$(redis-cli -h 127.0.0.1 -p "$PORT_auth" -a pw --no-auth-warning SET k v FENCE 1 2>&1)"
stop_server auth

stop_server main
finish
