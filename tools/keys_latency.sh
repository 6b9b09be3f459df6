#!/usr/bin/env bash
# A writer's latency with and without five clients looping over KEYS, on
# ~300k keys: long scans must not stall writers.
# Usage: tools/keys_latency.sh build/server/fencedkv-server [server flags...]
#   PATTERN=... the KEYS pattern (default nomatch*: the server walks every
#   key and replies nothing, so the cost is the server's).
# Prints redis-benchmark's latency summary (ms) of 5000 fenced SETs, -c 1.
set -euo pipefail
BIN=$1
shift
D=$(mktemp -d "${TMPDIR:-/tmp}/keys_latency.XXXXXX")
"$BIN" --bind=127.0.0.1 --port=0 --port_file="$D/port" --db="$D/db" "$@" \
  >"$D/log" 2>&1 &
S=$!
LOOPS=()
cleanup() {
  for p in "${LOOPS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  kill "$S" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$D"
}
trap cleanup EXIT
for _ in $(seq 1 100); do [ -s "$D/port" ] && break; sleep 0.1; done
P=$(cat "$D/port")
redis-benchmark -h 127.0.0.1 -p "$P" -n 300000 -r 100000000 -c 20 -P 32 -q \
  SET key:__rand_int__ v FENCE 1 >/dev/null 2>&1
echo "keys: $(redis-cli -h 127.0.0.1 -p "$P" DBSIZE)"
latency() {
  redis-benchmark -h 127.0.0.1 -p "$P" -c 1 -n 5000 -r 100000000 \
    SET w:__rand_int__ v FENCE 1 2>/dev/null | grep -A2 "latency summary" | tail -1
}
echo "SET alone:             avg min p50 p95 p99 max = $(latency)"
for _ in 1 2 3 4 5; do
  (end=$((SECONDS + 60))
   while [ $SECONDS -lt $end ]; do
     redis-cli -h 127.0.0.1 -p "$P" KEYS "${PATTERN:-nomatch*}" >/dev/null 2>&1 || true
   done) &
  LOOPS+=($!)
done
sleep 1
echo "SET beside 5 KEYS loops: avg min p50 p95 p99 max = $(latency)"
