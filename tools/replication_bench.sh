#!/usr/bin/env bash
# SET FENCE throughput of a replicated fencedkv shard against a single node,
# on this machine, loopback only, free ports, every server stopped by PID.
#   single:     one fencedkv-server
#   replicated: a primary and two replicas (manual mode, --replicaof),
#               --min_insync_replicas=2: each reply waits until both
#               replicas have the write in their WAL
#   redis:      redis-server with one replica (appendonly, everysec), plain
#               SET: what Redis acknowledges without waiting
#   redis WAIT: the same, every SET followed by WAIT 1 0, so that a reply
#               means a replica has the write: sent by build/tools/wait_bench
#               (redis-benchmark cannot send it), which also runs the
#               replicated fencedkv shard once more, so that the two are
#               compared with the same client
# Also printed: each server's CPU time per request (from /proc), which
# bounds the replicated/single ratio when all servers and the client share
# this machine's cores.
# Workload: redis-benchmark -c 50, -P 1 and -P 16, 100-byte values, keys over
# 1M: SET key:__rand_int__ <v> FENCE 1. A benchmark, not a test.
# Each measured run starts on a quiet disk: the runs before it deleted, then
# sync (see quiet_disk).
# Usage: tools/replication_bench.sh [build-dir]
# Environment: REPEATS (3), N1 / N16 (requests per run at -P 1 / -P 16;
# N16 spans about three 64 MiB memtables, so that every server's runs
# include its flushes: 400,000 SETs ended just before the single node's
# first flush, while the replicated shard's three servers each flushed),
# NWAIT1 / NWAIT16 (the same for the WAIT rows, which are slower).
set -euo pipefail
build=${1:-build}
server="$build/server/fencedkv-server"
wait_bench="$build/tools/wait_bench"
[ -x "$server" ] || { echo "build first: $server missing" >&2; exit 1; }
[ -x "$wait_bench" ] || { echo "build first: $wait_bench missing" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fencedkv_rbench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
printf 'user default on nopass ~* &* +@all\n' >"$work/acl"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }
start_fenced() {  # start_fenced <name> <flags...> -> PORT, PID, DIR
  PORT=$(free_port)
  local name=$1; shift
  DIR="$work/$name-$RANDOM"
  "$server" --bind=127.0.0.1 --port="$PORT" --db="$DIR" \
    --aclfile="$work/acl" --logtostderr=false --log_dir="$work" "$@" >/dev/null 2>&1 &
  PID=$!; pids+=($PID)
  wait_port "$PORT"
}
value=$(printf 'v%.0s' $(seq 1 100))
rps() {  # rps <port> <n> <P> <command...>
  local port=$1 n=$2 p=$3; shift 3
  redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$n" -P "$p" -r 1000000 --csv "$@" \
    2>>"$work/bench.err" | grep -E '^"SET ' | tail -1 | cut -d, -f2 | tr -d '"'
}
# Before each measured run: the disk quiet. The runs before it are deleted
# (their dirty pages dropped, never written back), then whatever else is
# dirty is written out: otherwise the kernel writes a run's files back 30 s
# later, in the middle of another run, and takes CPU and disk from it.
quiet_disk() { rm -rf "$@"; sync; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# CPU time (user + system, clock ticks) a process has used so far.
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# us_per_req <ticks before> <ticks after> <requests>
us_per_req() { awk -v a="$1" -v b="$2" -v n="$3" -v hz="$hz" 'BEGIN {printf "%.2f", (b-a)*1e6/hz/n}'; }
wrps() {  # wrps <port> <n> <P> <wait_bench flags...>
  local port=$1 n=$2 p=$3; shift 3
  "$wait_bench" --port="$port" --clients=50 --requests="$n" --pipeline="$p" \
    --value_size=100 --keyspace=1000000 --csv "$@" 2>>"$work/bench.err" |
    cut -d, -f2 | tr -d '"'
}

REPEATS=${REPEATS:-3}
N1=${N1:-100000}
N16=${N16:-1200000}
NWAIT1=${NWAIT1:-30000}
NWAIT16=${NWAIT16:-200000}
declare -A results cpu
for r in $(seq 1 "$REPEATS"); do
  for p in 1 16; do
    n=$N1; [ "$p" = 16 ] && n=$N16
    nw=$NWAIT1; [ "$p" = 16 ] && nw=$NWAIT16
    start_fenced single
    quiet_disk
    t0=$(ticks "$PID")
    results[single_$p]+="$(rps "$PORT" "$n" "$p" SET key:__rand_int__ "$value" FENCE 1) "
    cpu[single_$p]+="$(us_per_req "$t0" "$(ticks "$PID")" "$n") "
    kill -TERM "$PID"; wait "$PID" 2>/dev/null || true
    quiet_disk "$DIR"

    start_fenced primary --min_insync_replicas=2 --replica_lag_ms=5000
    pport=$PORT; ppid=$PID; dirs=("$DIR")
    start_fenced r1 --replicaof=127.0.0.1:$pport; r1=$PID; dirs+=("$DIR")
    start_fenced r2 --replicaof=127.0.0.1:$pport; r2=$PID; dirs+=("$DIR")
    for _ in $(seq 1 200); do
      [ "$(redis-cli -p "$pport" INFO replication | tr -d '\r' | grep '^isr_size:' | cut -d: -f2)" = 3 ] && break
      sleep 0.05
    done
    quiet_disk
    t0=$(ticks "$ppid"); t1=$(ticks "$r1"); t2=$(ticks "$r2")
    results[repl_$p]+="$(rps "$pport" "$n" "$p" SET key:__rand_int__ "$value" FENCE 1) "
    cpu[repl_$p]+="$(us_per_req "$t0" "$(ticks "$ppid")" "$n")+$(us_per_req "$t1" "$(ticks "$r1")" "$n")+$(us_per_req "$t2" "$(ticks "$r2")" "$n") "
    results[replw_$p]+="$(wrps "$pport" "$nw" "$p" --fence=1) "
    for x in $r1 $r2 $ppid; do kill -TERM "$x"; wait "$x" 2>/dev/null || true; done
    quiet_disk "${dirs[@]}"

    if command -v redis-server >/dev/null; then
      rp=$(free_port); rr=$(free_port)
      mkdir -p "$work/redis-p-$r-$p" "$work/redis-r-$r-$p"
      redis-server --port "$rp" --bind 127.0.0.1 --dir "$work/redis-p-$r-$p" --appendonly yes \
        --save '' --logfile "$work/redis.log" & rpid=$!; pids+=($rpid)
      redis-server --port "$rr" --bind 127.0.0.1 --dir "$work/redis-r-$r-$p" --appendonly yes \
        --save '' --replicaof 127.0.0.1 "$rp" --logfile "$work/redis.log" & rrpid=$!; pids+=($rrpid)
      wait_port "$rp"; wait_port "$rr"
      # The replica online (its full sync done), or WAIT measures the sync.
      for _ in $(seq 1 200); do
        redis-cli -p "$rp" INFO replication | tr -d '\r' | grep -q '^slave0:.*state=online' && break
        sleep 0.05
      done
      quiet_disk
      results[redis_$p]+="$(rps "$rp" "$n" "$p" SET key:__rand_int__ "$value") "
      results[redisw_$p]+="$(wrps "$rp" "$nw" "$p" --wait_replicas=1 --wait_timeout_ms=0) "
      kill -TERM "$rpid" "$rrpid"; wait "$rpid" "$rrpid" 2>/dev/null || true
      quiet_disk "$work/redis-p-$r-$p" "$work/redis-r-$r-$p"
    fi
  done
done
printf '%-52s %12s %12s\n' "SET FENCE, requests/s (median of $REPEATS)" "-P 1" "-P 16"
for k in single repl redis replw redisw; do
  case $k in
    single) label="fencedkv single node" ;;
    repl) label="fencedkv + 2 replicas, min_insync_replicas=2" ;;
    redis) label="redis + 1 replica (no WAIT)" ;;
    replw) label="  the same shard, wait_bench (same client as below)" ;;
    redisw) label="redis + 1 replica, WAIT 1 0 after each SET" ;;
  esac
  [ -n "${results[${k}_1]:-}" ] || continue
  printf '%-52s %12s %12s\n' "$label" \
    "$(echo "${results[${k}_1]}" | tr ' ' '\n' | grep . | median)" \
    "$(echo "${results[${k}_16]}" | tr ' ' '\n' | grep . | median)"
done
echo
echo "server CPU microseconds per request (every repeat; replicated: primary+replica+replica)"
for k in single repl; do
  printf '%-10s -P 1: %s   -P 16: %s\n' "$k" "${cpu[${k}_1]}" "${cpu[${k}_16]}"
done
