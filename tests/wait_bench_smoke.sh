#!/usr/bin/env bash
# wait_bench, the client tools/replication_bench.sh uses for its Redis WAIT
# row, against real fencedkv servers: with a replica every SET and its WAIT
# succeed and every SET is on the replica; without one, WAIT 1 reaches 0
# replicas and the run fails, as does a stale FENCE token, so a throughput
# is printed only for writes acknowledged as asked.
# Usage: wait_bench_smoke.sh /path/to/fencedkv-server /path/to/wait_bench
set -euo pipefail
FENCEDKV_SERVER=$1
WAIT_BENCH=$2
source "$(dirname "$0")/lib.sh"
printf 'user default on nopass ~* &* +@all\n' >"$E2E_TMP/acl"
start_server primary --aclfile="$E2E_TMP/acl"
start_server replica --aclfile="$E2E_TMP/acl" --replicaof="127.0.0.1:$PORT_primary"
for _ in $(seq 1 200); do
  [ "$(redis-cli -p "$PORT_primary" INFO replication | tr -d '\r' | sed -n 's/^connected_slaves://p')" = 1 ] && break
  sleep 0.05
done
N=3000
out=$("$WAIT_BENCH" --port="$PORT_primary" --clients=10 --requests=$N --pipeline=4 \
      --keyspace=1000000000 --wait_replicas=1 --wait_timeout_ms=5000 --fence=5 2>&1) && rc=0 || rc=$?
check "SET + WAIT 1 with a replica succeeds" 0 "$rc"
check_prefix "it reports its rate" "$N SETs each followed by WAIT in" "$out"
accepted=$(redis-cli -p "$PORT_primary" INFO fencing | tr -d '\r' | sed -n 's/^accepted_writes://p')
check "the primary took every SET" "$N" "$accepted"
keys_p=$(redis-cli -p "$PORT_primary" DBSIZE)
keys_r=$(redis-cli -p "$PORT_replica" DBSIZE)
check "the replica holds what the primary holds" "$keys_p" "$keys_r"
"$WAIT_BENCH" --port="$PORT_primary" --clients=1 --requests=1 --keyspace=1 --fence=5 >/dev/null
out=$("$WAIT_BENCH" --port="$PORT_primary" --clients=2 --requests=10 --keyspace=1 --fence=4 2>&1) && rc=0 || rc=$?
check "a stale token fails the run" 1 "$rc"
check_prefix "with the server's error" "wait_bench: error reply: -STALE" "$out"
stop_server replica
stop_server primary
start_server lone
out=$("$WAIT_BENCH" --port="$PORT_lone" --clients=2 --requests=10 --fence=1 \
      --wait_replicas=1 --wait_timeout_ms=50 2>&1) && rc=0 || rc=$?
check "WAIT 1 without a replica fails the run" 1 "$rc"
check "and says why" "wait_bench: WAIT reached 0 replica(s), asked for 1" "$out"
stop_server lone
out=$("$WAIT_BENCH" --port="$PORT_lone" --requests=1 2>&1) && rc=0 || rc=$?
check "a closed port fails" 1 "$rc"
check_prefix "naming the address" "wait_bench: connection to 127.0.0.1:$PORT_lone: Connection refused" "$out"
finish
