#!/usr/bin/env bash
# "A KV server behind a lease service", proven with real processes on
# 127.0.0.1 (free ports, started and stopped by PID by this script).
# Usage: lease_e2e_test.sh SERVER_BIN LOCK_BIN CASE
#   CASE: builtin | builtin_strict | etcd | etcdskew | hashtag | strict |
#         kill9 | lockcmd | lockgroup | lockhold
set -euo pipefail
FENCEDKV_SERVER=$1
LOCK=$2
CASE=$3
source "$(dirname "$0")/lib.sh"
T0=$(date +%s%N)

wait_file() {  # wait_file PATH [seconds]
  for _ in $(seq 1 $((${2:-10} * 50))); do [ -e "$1" ] && return 0; sleep 0.02; done
  echo "timed out waiting for $1" >&2
  return 1
}
# start_etcd: a one-member etcd on loopback; sets EP (host:port) and ETCD (pid).
start_etcd() {
  command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
    { echo "etcd-server / etcd-client not installed" >&2; exit 1; }
  local cp pp
  cp=$(low_free_port); pp=$(low_free_port)  # lib.sh
  etcd --name e2e --data-dir "$E2E_TMP/etcd" \
    --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "e2e=http://127.0.0.1:$pp" > "$E2E_TMP/etcd.log" 2>&1 &
  ETCD=$!
  E2E_PIDS+=("$ETCD")
  export ETCDCTL_API=3
  EP="127.0.0.1:$cp"
  for _ in $(seq 1 200); do etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1 && break; sleep 0.05; done
  etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1 || { cat "$E2E_TMP/etcd.log" >&2; exit 1; }
}

case "$CASE" in
builtin|builtin_strict)
  # The hand-over with the built-in lease service: A acquires (token t) and
  # writes; A is frozen; its lease expires; B acquires (t' > t), advances the
  # fence and writes; A resumes and writes with t: -STALE; B's value stands.
  # builtin_strict: the same in strict mode, where B's own write with t'
  # right after its FENCE.ADVANCE to t' must be accepted (an advance to t'
  # fences out every token below t').
  OP="<"; MODE=()
  if [ "$CASE" = builtin_strict ]; then OP="<="; MODE=(--fence_mode=strict); fi
  start_server s "${MODE[@]}"
  P=$PORT_s; D=$E2E_TMP
  cli() { redis-cli -h 127.0.0.1 -p "$P" "$@" 2>&1; }
  sh -c '
    t=$(redis-cli -h 127.0.0.1 -p '"$P"' LEASE.ACQUIRE orders A 400 | head -1)
    echo "$t" > '"$D"'/tA
    redis-cli -h 127.0.0.1 -p '"$P"' SET orders:next A1 FENCE "$t" > '"$D"'/wA1
    touch '"$D"'/wrote
    while [ ! -f '"$D"'/go ]; do sleep 0.02; done
    redis-cli -h 127.0.0.1 -p '"$P"' SET orders:next A2 FENCE "$t" > '"$D"'/resultA 2>&1
  ' &
  A=$!
  E2E_PIDS+=("$A")
  wait_file "$D/wrote"
  kill -STOP "$A"                       # A is paused (GC, SIGSTOP...)
  check "A wrote with its token" "OK" "$(cat "$D/wA1")"
  sleep 0.6                             # ... past its 400 ms lease
  check "A's lease has expired" "" "$(cli LEASE.INFO orders)"
  "$LOCK" --server "127.0.0.1:$P" --holder B --ttl_ms 5000 \
    --fence_advance orders:next orders -- \
    sh -c 'redis-cli -h 127.0.0.1 -p '"$P"' SET orders:next B1 FENCE "$FENCEDKV_TOKEN" > '"$D"'/wB1; echo "$FENCEDKV_TOKEN" > '"$D"'/tB'
  check "B (fencedkv-lock) exits 0" 0 $?
  tA=$(cat "$D/tA"); tB=$(cat "$D/tB")
  check "B's token is greater" true "$([ "$tB" -gt "$tA" ] && echo true)"
  check "B wrote" "OK" "$(cat "$D/wB1")"
  touch "$D/go"
  kill -CONT "$A"                       # A wakes up, still "leader"
  wait "$A"
  check "A's late write is STALE" "STALE token $tA $OP max $tB (domain \"orders:next\")" \
        "$(cat "$D/resultA")"
  check "B's value stands" "B1" "$(cli GET orders:next)"
  check "INFO counts the rejection" "rejected_writes:1" \
        "$(cli INFO fencing | tr -d '\r' | grep '^rejected_writes:')"
  stop_server s
  ;;

etcd)
  # The same with etcd as the lease service: tokens are etcdctl lock's
  # ETCD_LOCK_REV. A (etcdctl + its command) is frozen until etcd expires
  # its session; B takes the lock; A resumes and is rejected.
  start_etcd
  start_server s
  P=$PORT_s; D=$E2E_TMP
  setsid etcdctl --endpoints="$EP" lock --ttl=2 orders -- sh -c '
    echo "$ETCD_LOCK_REV" > '"$D"'/tA
    redis-cli -h 127.0.0.1 -p '"$P"' SET orders:next A1 FENCE "$ETCD_LOCK_REV" > '"$D"'/wA1
    touch '"$D"'/wrote
    while [ ! -f '"$D"'/go ]; do sleep 0.02; done
    redis-cli -h 127.0.0.1 -p '"$P"' SET orders:next A2 FENCE "$ETCD_LOCK_REV" > '"$D"'/resultA.tmp 2>&1
    mv '"$D"'/resultA.tmp '"$D"'/resultA
  ' > /dev/null 2>&1 &
  A=$!
  E2E_PIDS+=("$A")
  wait_file "$D/wrote" 20
  kill -STOP -- "-$A"                   # freeze etcdctl and its command
  check "A wrote with ETCD_LOCK_REV" "OK" "$(cat "$D/wA1")"
  # B blocks in etcdctl lock until etcd expires A's 2 s session.
  timeout 30 etcdctl --endpoints="$EP" lock --ttl=2 orders -- sh -c '
    redis-cli -h 127.0.0.1 -p '"$P"' FENCE.ADVANCE orders:next "$ETCD_LOCK_REV" > /dev/null
    redis-cli -h 127.0.0.1 -p '"$P"' SET orders:next B1 FENCE "$ETCD_LOCK_REV" > '"$D"'/wB1
    echo "$ETCD_LOCK_REV" > '"$D"'/tB
  ' > /dev/null
  check "B got the lock from etcd" 0 $?
  tA=$(cat "$D/tA"); tB=$(cat "$D/tB")
  check "B's revision is greater" true "$([ "$tB" -gt "$tA" ] && echo true)"
  check "B wrote" "OK" "$(cat "$D/wB1")"
  touch "$D/go"
  kill -CONT -- "-$A"
  wait_file "$D/resultA" 20
  check "A's late write is STALE" "STALE token $tA < max $tB (domain \"orders:next\")" \
        "$(cat "$D/resultA")"
  check "B's value stands" "B1" "$(redis-cli -h 127.0.0.1 -p "$P" GET orders:next)"
  kill -TERM -- "-$A" 2>/dev/null || true
  stop_server s
  kill -TERM "$ETCD"; wait "$ETCD" 2>/dev/null || true
  ;;

hashtag)
  # One domain per lease: B fences {shard1}; A's write to a key of {shard1}
  # that B never touched is still rejected.
  start_server s --fence_domain=hashtag
  cli() { redis-cli -h 127.0.0.1 -p "$PORT_s" "$@" 2>&1; }
  tA=$(cli LEASE.ACQUIRE shard1 A 200 | head -1)
  check "A writes" "OK" "$(cli SET 'user:{shard1}:a' A FENCE "$tA")"
  sleep 0.3
  tB=$(cli LEASE.ACQUIRE shard1 B 5000 | head -1)
  check "B advances {shard1}" "$tB" "$(cli FENCE.ADVANCE '{shard1}' "$tB")"
  check "B writes" "OK" "$(cli SET 'user:{shard1}:b' B FENCE "$tB")"
  check "A on an untouched key of the domain" \
        "STALE token $tA < max $tB (domain \"shard1\")" \
        "$(cli SET 'user:{shard1}:never-touched' A FENCE "$tA")"
  check "other domains are not fenced" "OK" "$(cli SET 'user:{shard2}:x' A FENCE "$tA")"
  check "the key's domain" "shard1" "$(cli FENCE.DOMAIN 'user:{shard1}:zz')"
  stop_server s
  rc=0
  err=$("$FENCEDKV_SERVER" --bind=127.0.0.1 --port=0 --db="$E2E_TMP/s/data" \
        --fence_domain=key 2>&1 >/dev/null) || rc=$?
  check "reopening with another domain function is refused" 1 "$rc"
  check_prefix "with a clear error" \
        "fencedkv-server: open database: Invalid argument: --fence_domain=key but the database" \
        "$(grep '^fencedkv-server:' <<<"$err")"
  ;;

strict)
  # Strict mode: an equal token is rejected.
  start_server s --fence_mode=strict
  cli() { redis-cli -h 127.0.0.1 -p "$PORT_s" "$@" 2>&1; }
  check "first write" "OK" "$(cli SET k v1 FENCE 5)"
  check "equal token is STALE" 'STALE token 5 <= max 5 (domain "k")' "$(cli SET k v2 FENCE 5)"
  check "higher token" "OK" "$(cli SET k v3 FENCE 6)"
  check "value" "v3" "$(cli GET k)"
  check "INFO mode" "fence_mode:strict" "$(cli INFO fencing | tr -d '\r' | grep '^fence_mode:')"
  stop_server s
  ;;

kill9)
  # The lease service survives kill -9 between grants: the next token is
  # still strictly greater; held leases are honoured, expired ones re-granted
  # with a new token, never the same token twice.
  start_server s
  DB="$E2E_TMP/s/data"
  cli() { redis-cli -h 127.0.0.1 -p "$PORT_s" "$@" 2>&1; }
  t1=$(cli LEASE.ACQUIRE held A 60000 | head -1)
  t2=$(cli LEASE.ACQUIRE short C 300 | head -1)
  kill9_server s
  start_server s --db="$DB"
  t3=$(cli LEASE.ACQUIRE other B 60000 | head -1)
  check "token after kill -9 is greater" true "$([ "$t3" -gt "$t2" ] && [ "$t2" -gt "$t1" ] && echo true)"
  check "held lease is honoured" "LEASED" "$(cli LEASE.ACQUIRE held B 60000 | cut -d' ' -f1)"
  check "held lease keeps its token" "holder
A
token
$t1" "$(cli LEASE.INFO held | head -4)"
  sleep 0.4
  kill9_server s
  start_server s --db="$DB"
  t4=$(cli LEASE.ACQUIRE short D 5000 | head -1)
  check "expired lease re-granted with a new token" true "$([ "$t4" -gt "$t3" ] && echo true)"
  check "LEASE.INFO of the re-grant" "holder
D" "$(cli LEASE.INFO short | head -2)"
  stop_server s
  ;;

lockcmd)
  # fencedkv-lock: environment, exit status, release, and lease loss.
  start_server s
  S="127.0.0.1:$PORT_s"
  out=$("$LOCK" --server "$S" --holder H1 jobs -- sh -c 'echo "$FENCEDKV_HOLDER $FENCEDKV_LEASE $FENCEDKV_TOKEN"; exit 7') && rc=0 || rc=$?
  check "exit status passed on" 7 "$rc"
  check "environment" "H1 jobs 1" "$out"
  check "released after CMD" "" "$(redis-cli -p "$PORT_s" LEASE.INFO jobs)"
  "$LOCK" --server "$S" --holder H2 --ttl_ms 300 jobs -- sleep 30 &
  L=$!
  E2E_PIDS+=("$L")
  sleep 0.3
  kill -STOP "$L"                       # the lock holder pauses...
  sleep 0.5                             # ... its lease expires ...
  check "another holder takes it" "3" "$(redis-cli -p "$PORT_s" LEASE.ACQUIRE jobs H3 60000 | head -1)"
  kill -CONT "$L"
  started=$(date +%s)
  wait "$L" && rc=0 || rc=$?
  check "lease lost: exit 3" 3 "$rc"
  check "CMD stopped promptly" true "$([ $(( $(date +%s) - started )) -lt 5 ] && echo true)"
  check "not acquired within --wait_ms: exit 4" 4 \
        "$("$LOCK" --server "$S" --wait_ms 100 jobs -- true >/dev/null 2>&1; echo $?)"
  check "usage error: exit 2" 2 "$("$LOCK" --server "$S" jobs >/dev/null 2>&1; echo $?)"
  stop_server s
  ;;
etcdskew)
  # The skew guard with etcd as the token source: the server learns etcd's
  # revision (JSON gateway, every 50 ms here); a token more than S above it
  # is refused, and the ceiling follows etcd as it moves on.
  start_etcd
  start_server s --max_token_skew=5 --token_source=etcd \
    --etcd_endpoints="http://127.0.0.1:1,http://$EP" --etcd_refresh_ms=50
  cli() { redis-cli -h 127.0.0.1 -p "$PORT_s" "$@" 2>&1; }
  rev() { curl -s -X POST "http://$EP/v3/kv/range" -d '{"key":"AA==","count_only":true}' |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])'; }
  r0=$(rev)
  check "a token etcd issued" "OK" "$(cli SET a v FENCE "$r0")"
  check "within the skew" "OK" "$(cli SET b v FENCE $((r0 + 5)))"
  check_prefix "past it" "TOKENSKEW token $((r0 + 6)) is more than 5 above the highest token issued ($r0)" \
        "$(cli SET c v FENCE $((r0 + 6)))"
  for i in $(seq 1 10); do
    curl -s -X POST "http://$EP/v3/kv/put" -d '{"key":"eA==","value":"eQ=="}' >/dev/null
  done
  r1=$(rev)
  check "etcd moved on" true "$([ "$r1" -ge $((r0 + 10)) ] && echo true)"
  sleep 0.3                             # a few refreshes
  check "the ceiling followed" "highest_token_issued:$r1" \
        "$(cli INFO fencing | tr -d '\r' | grep '^highest_token_issued:')"
  check "so the same token passes now" "OK" "$(cli SET c v FENCE $((r0 + 6)))"
  # The lock flow: a fresh ETCD_LOCK_REV is accepted once learnt.
  out=$(timeout 20 etcdctl --endpoints="$EP" lock --ttl=5 orders -- sh -c \
    'sleep 0.3; redis-cli -h 127.0.0.1 -p '"$PORT_s"' SET orders:next 1 FENCE "$ETCD_LOCK_REV"')
  check "ETCD_LOCK_REV" "OK" "$out"
  # One issuer: with etcd's revisions as the tokens the built-in lease
  # service grants none. Before, any client's LEASE.ACQUIRE loop raised the
  # ceiling far past etcd's revision (each grant counted as issued), so
  # that a FENCE.ADVANCE there locked every etcd holder out.
  check_prefix "LEASE.ACQUIRE is off" "ERR LEASE.ACQUIRE and LEASE.RENEW are off with --token_source=etcd" \
        "$(cli LEASE.ACQUIRE spin x 60000)"
  check_prefix "LEASE.RENEW is off" "ERR LEASE.ACQUIRE and LEASE.RENEW are off with --token_source=etcd" \
        "$(cli LEASE.RENEW spin x 1 60000)"
  # More grants than etcd has revisions would have lifted it before.
  for i in $(seq 1 40); do cli LEASE.ACQUIRE "spin$i" x 60000 >/dev/null; done
  # (etcd's revision may move meanwhile, the lock's release: the ceiling
  # follows it, and only it.)
  ceiling=$(cli INFO fencing | tr -d '\r' | grep '^highest_token_issued:' | cut -d: -f2)
  check "the ceiling is etcd's revision at most" true "$([ "$ceiling" -le "$(rev)" ] && echo true)"
  stop_server s
  rc=0; "$FENCEDKV_SERVER" --port=0 --db="$E2E_TMP/x" --token_source=etcd >/dev/null 2>&1 || rc=$?
  check "etcd without endpoints is refused" 1 "$rc"
  kill -TERM "$ETCD"; wait "$ETCD" 2>/dev/null || true
  ;;

lockgroup)
  # fencedkv-lock runs CMD in its own process group and stops the whole
  # group: when the lease is lost (SIGTERM, SIGKILL after the grace period
  # for what ignores it) and when CMD ends (leftovers must not outlive the
  # lease). A `sh -c` command's grandchildren used to run on past the lease.
  start_server s
  S="127.0.0.1:$PORT_s"; D=$E2E_TMP
  alive() { kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ] && echo alive || echo gone; }
  gone_within() {  # gone_within PID SECONDS
    for _ in $(seq 1 $(($2 * 50))); do [ "$(alive "$1")" = gone ] && echo gone && return; sleep 0.02; done
    echo alive
  }
  "$LOCK" --server "$S" --holder H1 --ttl_ms 300 --kill_grace_ms 500 jobs -- \
    sh -c 'sleep 300 & echo $! > '"$D"'/gc1; (trap "" TERM; exec sleep 300) & echo $! > '"$D"'/gc2; wait' &
  L=$!
  E2E_PIDS+=("$L")
  wait_file "$D/gc2"; sleep 0.1
  GC1=$(cat "$D/gc1"); GC2=$(cat "$D/gc2")
  E2E_PIDS+=("$GC1" "$GC2")
  check "grandchildren run" "alive alive" "$(alive "$GC1") $(alive "$GC2")"
  kill -STOP "$L"; sleep 0.5
  check "another holder takes the lease" "OK" \
        "$(redis-cli -p "$PORT_s" LEASE.ACQUIRE jobs H2 60000 >/dev/null && echo OK)"
  kill -CONT "$L"
  wait "$L" && rc=0 || rc=$?
  check "lease lost: exit 3" 3 "$rc"
  check "a grandchild is stopped (SIGTERM)" gone "$(gone_within "$GC1" 3)"
  check "one ignoring SIGTERM is killed after the grace period" gone "$(gone_within "$GC2" 3)"
  # CMD ends on its own: what it left in its group is stopped before release.
  "$LOCK" --server "$S" --holder H3 --kill_grace_ms 500 other -- \
    sh -c 'sleep 300 & echo $! > '"$D"'/gc3' && rc=0 || rc=$?
  check "CMD's status" 0 "$rc"
  GC3=$(cat "$D/gc3"); E2E_PIDS+=("$GC3")
  check "its leftover is stopped" gone "$(gone_within "$GC3" 3)"
  check "then the lease is released" "" "$(redis-cli -p "$PORT_s" LEASE.INFO other)"
  # fencedkv-lock's own SIGTERM goes to the whole group.
  "$LOCK" --server "$S" --holder H4 third -- \
    sh -c 'sleep 300 & echo $! > '"$D"'/gc4; wait' &
  L=$!
  E2E_PIDS+=("$L")
  wait_file "$D/gc4"; sleep 0.1
  GC4=$(cat "$D/gc4"); E2E_PIDS+=("$GC4")
  kill -TERM "$L"
  wait "$L" && rc=0 || rc=$?
  check "SIGTERM: CMD's status (sh killed by SIGTERM)" 143 "$rc"
  check "the grandchild got it too" gone "$(gone_within "$GC4" 3)"
  check "and the lease is released" "" "$(redis-cli -p "$PORT_s" LEASE.INFO third)"
  stop_server s
  ;;

lockhold)
  # --hold: no command; prints the token, renews until SIGINT/SIGTERM (then
  # releases, exit 0) or until the lease is lost (exit 3).
  start_server s
  S="127.0.0.1:$PORT_s"; D=$E2E_TMP
  check "--help exits 0" 0 "$("$LOCK" --help >/dev/null 2>&1; echo $?)"
  "$LOCK" --server "$S" --holder H1 --ttl_ms 300 --hold jobs > "$D/hold.out" &
  L=$!
  E2E_PIDS+=("$L")
  for _ in $(seq 1 250); do [ -s "$D/hold.out" ] && break; sleep 0.02; done
  token=$(head -1 "$D/hold.out")
  check "prints the token" "1" "$token"
  sleep 1                               # past its 300 ms TTL: renewed
  check "held and renewed" "holder
H1
token
1" "$(redis-cli -p "$PORT_s" LEASE.INFO jobs | head -4)"
  kill -TERM "$L"
  wait "$L" && rc=0 || rc=$?
  check "SIGTERM: exit 0" 0 "$rc"
  check "released" "" "$(redis-cli -p "$PORT_s" LEASE.INFO jobs)"
  "$LOCK" --server "$S" --holder H2 --ttl_ms 300 --hold jobs > "$D/hold2.out" &
  L=$!
  E2E_PIDS+=("$L")
  for _ in $(seq 1 250); do [ -s "$D/hold2.out" ] && break; sleep 0.02; done
  kill -STOP "$L"; sleep 0.5
  redis-cli -p "$PORT_s" LEASE.ACQUIRE jobs H3 60000 >/dev/null
  kill -CONT "$L"
  wait "$L" && rc=0 || rc=$?
  check "lease lost: exit 3" 3 "$rc"
  check "--hold with a command is a usage error" 2 \
        "$("$LOCK" --server "$S" --hold jobs -- true >/dev/null 2>&1; echo $?)"
  stop_server s
  # An ACL user, its password from the environment (not on the command line).
  printf 'user locker on >lockpw +@lease\n' > "$D/users.acl"
  start_server acl --aclfile="$D/users.acl"
  REDISCLI_AUTH=lockpw "$LOCK" --server "127.0.0.1:$PORT_acl" --user locker \
    --hold jobs > "$D/hold3.out" &
  L=$!
  E2E_PIDS+=("$L")
  for _ in $(seq 1 250); do [ -s "$D/hold3.out" ] && break; sleep 0.02; done
  check "--user, REDISCLI_AUTH" "1" "$(head -1 "$D/hold3.out")"
  kill -INT "$L"
  wait "$L" && rc=0 || rc=$?
  check "SIGINT: exit 0" 0 "$rc"
  stop_server acl
  ;;
*)
  echo "unknown case $CASE" >&2
  exit 2
  ;;
esac
echo "lease_e2e $CASE took $(( ($(date +%s%N) - T0) / 1000000 )) ms"
finish
