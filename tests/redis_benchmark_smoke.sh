#!/usr/bin/env bash
# A short redis-benchmark run of fenced SETs and GETs: every request must
# succeed, and the server must count exactly the writes sent.
# Usage: redis_benchmark_smoke.sh /path/to/fencedkv-server
set -euo pipefail
FENCEDKV_SERVER=$1
source "$(dirname "$0")/lib.sh"
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not installed" >&2; exit 1; }
start_server bench
N=20000
out=$(redis-benchmark -h 127.0.0.1 -p "$PORT_bench" -n $N -c 20 -P 4 -r 100000 -d 64 \
        SET key:__rand_int__ value FENCE 1 2>&1)
check "no errors from SET" "" "$(grep -i 'error' <<<"$out" || true)"
check_prefix "all SETs done" "true" "$(grep -q "$N requests completed" <<<"$out" && echo true)"
accepted=$(redis-cli -h 127.0.0.1 -p "$PORT_bench" INFO fencing | tr -d '\r' | sed -n 's/^accepted_writes://p')
check "server counted every SET" "$N" "$accepted"
out=$(redis-benchmark -h 127.0.0.1 -p "$PORT_bench" -n $N -c 20 -P 4 -r 100000 \
        GET key:__rand_int__ 2>&1)
check "no errors from GET" "" "$(grep -i 'error' <<<"$out" || true)"
check_prefix "all GETs done" "true" "$(grep -q "$N requests completed" <<<"$out" && echo true)"
stop_server bench
finish
