#!/usr/bin/env bash
# redis-benchmark against fencedkv-server and Debian's redis-server in one
# run, on this machine, loopback only, free ports, both stopped by PID.
#   Redis: --appendonly yes --appendfsync everysec (the nearest durability
#   to fencedkv's default WAL-without-fsync), and appendfsync always vs
#   fencedkv --sync.
# Workload: -c 50, -P 1 and -P 16, 100-byte values, keys over 1M:
#   fencedkv: SET key:__rand_int__ <v> FENCE 1   and  GET key:__rand_int__
#   redis:    SET key:__rand_int__ <v>           and  GET key:__rand_int__
#   redis+Lua: EVALSHA <check-and-set> 1 lkey:__rand_int__ <v> 1, the fencing
#   users script on Redis today (see FENCE_LUA below; README says what it
#   gets wrong), on the everysec server.
# Each round starts on a quiet disk (the previous round's directories
# deleted, then sync: see quiet_disk), and the sync rows alternate which
# server is measured first.
# A benchmark, not a test. Usage: tools/server_bench.sh [build-dir]
# Environment: REPEATS (3), N1 / N16 (requests per run at -P 1 and -P 16),
# NSYNC / NSYNC16 (with sync, at -P 1 and -P 16), FENCED_FLAGS (extra
# fencedkv-server flags).
set -euo pipefail
build=${1:-build}
server="$build/server/fencedkv-server"
[ -x "$server" ] || { echo "build first: $server missing" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "apt-get install redis-server" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fencedkv_sbench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

start_redis() {  # start_redis <fsync-policy> -> sets RPORT, RDIR
  RPORT=$(free_port)
  local dir="$work/redis-$1-$RANDOM"
  RDIR=$dir
  mkdir -p "$dir"
  redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$dir" \
    --appendonly yes --appendfsync "$1" --save '' --daemonize no \
    --logfile "$work/redis-$1.log" &
  pids+=($!); RPID=$!
  wait_port "$RPORT"
}
start_fenced() {  # start_fenced <extra flags> -> sets FPORT, FDIR
  FPORT=$(free_port)
  FDIR="$work/fenced-$RANDOM"
  "$server" --bind=127.0.0.1 --port="$FPORT" --db="$FDIR" ${FENCED_FLAGS:-} \
    --logtostderr=false --log_dir="$work" "$@" >/dev/null 2>&1 &
  pids+=($!); FPID=$!
  wait_port "$FPORT"
}
stop() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; }
# Before a round: the disk quiet. A round's data directories are deleted
# when it ends (their dirty pages dropped, never written back), then
# everything else still dirty is written out. Without this, the kernel's
# writeback of the 2M-SET round's files (30 s after they were written)
# landed in the sync round's fsyncs, slowing whichever server it hit.
quiet_disk() { rm -rf "$@"; sync; }

value=$(printf 'v%.0s' $(seq 1 100))
# Check-and-set fencing in Lua: the key is a hash of its value (v) and the
# highest token it has taken (m); a lower token is refused, an equal or
# higher one writes both (fencedkv's monotonic mode).
FENCE_LUA='local m = redis.call("HGET", KEYS[1], "m")
if m and tonumber(m) > tonumber(ARGV[2]) then
  return redis.error_reply("STALE token " .. ARGV[2] .. " < max " .. m)
end
redis.call("HSET", KEYS[1], "v", ARGV[1], "m", ARGV[2])
return redis.status_reply("OK")'

rps() {  # rps <port> <n> <P> <command...>: requests per second
  local port=$1 n=$2 p=$3 line; shift 3
  line=$(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$n" -P "$p" -r 1000000 \
    --csv "$@" 2>>"$work/redis-benchmark.err" | grep -E '^"(SET|GET|EVALSHA) ' | tail -1)
  if [ -z "$line" ]; then
    echo "redis-benchmark -P $p $1 on port $port gave no result:" >&2
    tail -5 "$work/redis-benchmark.err" >&2
    exit 1
  fi
  echo "$line" | cut -d, -f2 | tr -d '"'
}

# Repeats: each repeat runs every workload on both servers (fresh data
# directories), interleaved; the table shows medians. Requests per run are
# sized for a few seconds each: shorter runs are mostly noise on 2 cores.
REPEATS=${REPEATS:-3}
N1=${N1:-300000}; N16=${N16:-2000000}; NSYNC=${NSYNC:-40000}
# -P 16 with sync groups hundreds of writes per fsync: 40,000 requests took
# a fifth of a second, too short to measure; ten times as many take a few.
NSYNC16=${NSYNC16:-400000}
declare -A R   # key -> space-separated results of every repeat
measure() {  # measure <key> <rps args...>: appends one result to R[key]
  local key=$1 v; shift
  v=$(rps "$@") || exit 1
  R[$key]="${R[$key]:-} $v"
}
for rep in $(seq 1 "$REPEATS"); do
  for round in default sync; do
    if [ "$round" = default ]; then
      start_redis everysec; start_fenced
      sha=$(redis-cli -p "$RPORT" SCRIPT LOAD "$FENCE_LUA")
      [ "$(redis-cli -p "$RPORT" EVALSHA "$sha" 1 lcheck x 5)" = OK ] &&
        redis-cli -p "$RPORT" EVALSHA "$sha" 1 lcheck y 4 | grep -q '^STALE' || {
        echo "the Lua fencing script does not fence" >&2; exit 1; }
      for p in 1 16; do
        n=$([ $p = 1 ] && echo "$N1" || echo "$N16")
        measure redis-set-$p "$RPORT" "$n" "$p" SET key:__rand_int__ "$value"
        measure fenced-set-$p "$FPORT" "$n" "$p" SET key:__rand_int__ "$value" FENCE 1
        measure redis-get-$p "$RPORT" "$n" "$p" GET key:__rand_int__
        measure fenced-get-$p "$FPORT" "$n" "$p" GET key:__rand_int__
        measure lua-set-$p "$RPORT" "$n" "$p" EVALSHA "$sha" 1 lkey:__rand_int__ "$value" 1
      done
    else
      quiet_disk
      start_redis always; start_fenced --sync
      for p in 1 16; do
        n=$([ $p = 1 ] && echo "$NSYNC" || echo "$NSYNC16")
        # Which server goes first alternates between repeats, and a sync
        # separates them: neither always runs second, after the other's
        # writes.
        if [ $((rep % 2)) = 1 ]; then
          measure redis-sset-$p "$RPORT" "$n" "$p" SET key:__rand_int__ "$value"
          sync
          measure fenced-sset-$p "$FPORT" "$n" "$p" SET key:__rand_int__ "$value" FENCE 1
        else
          measure fenced-sset-$p "$FPORT" "$n" "$p" SET key:__rand_int__ "$value" FENCE 1
          sync
          measure redis-sset-$p "$RPORT" "$n" "$p" SET key:__rand_int__ "$value"
        fi
        sync
      done
    fi
    stop "$FPID"; stop "$RPID"
    quiet_disk "$FDIR" "$RDIR"
  done
  echo "repeat $rep/$REPEATS done" >&2
done

printf '%-34s %12s %12s %7s %s\n' "workload (-c 50, 100 B; medians)" "fencedkv" "redis" "ratio" "target"
row() {
  local label=$1 f=$2 r=$3 target=$4
  python3 - "$label" "$f" "$r" "$target" <<'PY'
import statistics, sys
label, target = sys.argv[1], sys.argv[4]
f = statistics.median(float(x) for x in sys.argv[2].split())
r = statistics.median(float(x) for x in sys.argv[3].split())
ratio = f / r if r else 0
ok = "" if target == "-" else ("ok" if ratio >= float(target) else "MISSED")
print(f"{label:34s} {f:12.0f} {r:12.0f} {ratio:7.2f} >= {target} {ok}")
print(f"{'':34s} runs: fencedkv [{sys.argv[2].strip()}]  redis [{sys.argv[3].strip()}]")
PY
}
row "SET -P 1 (redis everysec)"  "${R[fenced-set-1]}"  "${R[redis-set-1]}"  0.85
row "GET -P 1"                   "${R[fenced-get-1]}"  "${R[redis-get-1]}"  0.85
row "SET -P 16 (redis everysec)" "${R[fenced-set-16]}" "${R[redis-set-16]}" 0.85
row "GET -P 16"                  "${R[fenced-get-16]}" "${R[redis-get-16]}" 0.85
row "SET -P 1 vs redis+Lua CAS"   "${R[fenced-set-1]}"  "${R[lua-set-1]}"  1.0
row "SET -P 16 vs redis+Lua CAS"  "${R[fenced-set-16]}" "${R[lua-set-16]}" 1.0
row "SET -P 1 --sync vs always"  "${R[fenced-sset-1]}" "${R[redis-sset-1]}" 1.0
row "SET -P 16 --sync vs always" "${R[fenced-sset-16]}" "${R[redis-sset-16]}" 1.0
