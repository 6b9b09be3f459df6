#!/usr/bin/env bash
# A fencedkv shard on this machine: one etcd and three fencedkv-server
# processes on 127.0.0.1 (README "Replicas and failover").
#
#   scripts/ha_demo.sh [BUILD_DIR]          start it, print how to use it, and
#                                           wait for Ctrl-C (then stop it all)
#   scripts/ha_demo.sh [BUILD_DIR] failover  start it, write, kill -9 the
#                                           primary, show the new one took
#                                           over with every write, stop it all
#
# Ports: etcd 23790 (peer 23800), servers 7381 7382 7383; data in
# ${HA_DEMO_DIR:-/tmp/fencedkv-ha} (removed first). Every process is stopped by
# PID on exit.
set -euo pipefail
BUILD=${1:-build}
MODE=${2:-wait}
SERVER=$BUILD/server/fencedkv-server
[ -x "$SERVER" ] || { echo "no $SERVER: build first (scripts/build.sh)" >&2; exit 1; }
command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
DIR=${HA_DEMO_DIR:-/tmp/fencedkv-ha}
ETCD=http://127.0.0.1:23790
rm -rf "$DIR" && mkdir -p "$DIR"
printf 'user default on nopass ~* &* +@all\n' > "$DIR/acl"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

etcd --name=ha --data-dir="$DIR/etcd" --listen-client-urls=$ETCD \
  --advertise-client-urls=$ETCD --listen-peer-urls=http://127.0.0.1:23800 \
  --initial-advertise-peer-urls=http://127.0.0.1:23800 \
  --initial-cluster=ha=http://127.0.0.1:23800 >"$DIR/etcd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do curl -s $ETCD/health | grep -q true && break; sleep 0.1; done

declare -A PID_OF
start() {  # start N: server N on port 738N
  "$SERVER" --db="$DIR/db$1" --port=738"$1" --aclfile="$DIR/acl" \
    --shard=demo --etcd_endpoints=$ETCD --min_insync_replicas=2 \
    --replica_lag_ms=1000 >"$DIR/server$1.log" 2>&1 &
  PIDS+=($!)
  PID_OF[$1]=$!
}
primary_port() {  # what etcd's record names, asked from any live server
  for p in 7381 7382 7383; do
    local a
    a=$(redis-cli -p "$p" SENTINEL get-master-addr-by-name demo 2>/dev/null | tail -1 || true)
    [ -n "$a" ] && [ "$a" != "$1" ] && { echo "$a"; return 0; }
  done
  return 0
}
for n in 1 2 3; do start $n; sleep 0.3; done
for _ in $(seq 100); do
  [ "$(redis-cli -p 7381 INFO replication | tr -d '\r' | grep '^isr_size:' | cut -d: -f2)" = 3 ] && break
  sleep 0.1
done
redis-cli -p 7381 INFO replication | tr -d '\r' | grep -E '^(role|shard_epoch|shard_primary|shard_isr):'

if [ "$MODE" = failover ]; then
  for i in $(seq 1 100); do redis-cli -p 7381 SET key$i value$i FENCE $i >/dev/null; done
  echo "wrote 100 keys on 7381; kill -9 it"
  kill -9 "${PID_OF[1]}"
  start_ns=$(date +%s%N)
  for _ in $(seq 100); do
    p=$(primary_port 7381)
    [ -n "$p" ] && [ "$(redis-cli -p "$p" SET after 1 FENCE 101 2>/dev/null || true)" = OK ] && break
    sleep 0.1
  done
  echo "new primary 127.0.0.1:$p after $(( ($(date +%s%N) - start_ns) / 1000000 )) ms"
  redis-cli -p "$p" INFO replication | tr -d '\r' | grep -E '^(shard_epoch|shard_isr):'
  echo "key100 on it: $(redis-cli -p "$p" GET key100)"
  [ "$(redis-cli -p "$p" GET key100)" = value100 ] || { echo "FAIL: an acknowledged write is missing" >&2; exit 1; }
  exit 0
fi

cat <<EOF
A shard "demo": etcd at $ETCD, fencedkv on 7381 7382 7383.
  redis-cli -p 7382 SENTINEL get-master-addr-by-name demo   # the primary
  redis-cli -p 7381 SET k v FENCE 1                          # on the primary
  redis-cli -p 7382 GET k                                    # on a replica
  kill -9 <the primary's pid>                                # a replica takes over in ~2 s
Server logs in $DIR. Ctrl-C stops everything.
EOF
wait
