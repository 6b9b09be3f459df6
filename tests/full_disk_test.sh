#!/usr/bin/env bash
# A real full disk: fencedkv-server on a small tmpfs, filled with pipelined
# SETs by redis-benchmark and by full_disk_client.py, which records every
# write the server acknowledged. Checks that the server does not crash,
# answers the writes it cannot make with -IOERR, keeps serving reads, takes
# writes again once space is freed (a filler file on the mount is deleted),
# and that after a restart every acknowledged write is there.
# Needs root (mount); elsewhere it prints SKIPPED and exits 77 (ctest's
# SKIP_RETURN_CODE). Always unmounts.
# Usage: full_disk_test.sh /path/to/fencedkv-server
set -euo pipefail
FENCEDKV_SERVER=$1
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import redis' 2>/dev/null || skip "python3-redis is not installed"
command -v redis-benchmark >/dev/null || skip "redis-benchmark is not installed"
[ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root"

MNT="$E2E_TMP/mnt"
BENCH_PID=
mount_tmpfs "$MNT" 24m
cleanup() {
  [ -n "$BENCH_PID" ] && kill -9 "$BENCH_PID" 2>/dev/null || true
  tmpfs_cleanup
}
trap cleanup EXIT

# 6 MiB of it held by a file the test deletes to free space.
head -c $((6 << 20)) /dev/zero >"$MNT/filler"
FLAGS=(--db="$MNT/db" --write_buffer_size=1048576 --io_threads=2)
start_server full "${FLAGS[@]}"

"$PY" "$HERE/full_disk_client.py" prefill "$PORT_full" "$E2E_TMP/acks"
# The load: plain pipelined fenced SETs (the server's group-commit path).
# redis-benchmark stops at its first error reply.
VALUE=$(head -c 1000 /dev/zero | tr '\0' v)
timeout 180 redis-benchmark -h 127.0.0.1 -p "$PORT_full" -c 4 -P 4 -n 100000000 \
  -r 1000000 SET "bench:__rand_int__" "$VALUE" FENCE 1 \
  >"$E2E_TMP/bench.out" 2>&1 &
BENCH_PID=$!

rc=0
"$PY" "$HERE/full_disk_client.py" fill "$PORT_full" "$E2E_TMP/acks" "$BENCH_PID" \
  "$MNT/filler" || rc=$?
wait "$BENCH_PID" 2>/dev/null || true
BENCH_PID=
if [ "$rc" = 3 ] && [ "$(grep -c 'fencedkv: Resume() after' "$MNT/db/LOG")" -gt \
     "$(grep -c 'fencedkv: Resume() returned' "$MNT/db/LOG")" ]; then
  # RocksDB 7.8 can leave a flush request queued but never scheduled (a
  # flush job that starts after the error drops out; every later flush of
  # that column family, the recovery's too, waits on it for ever). Then
  # only a restart brings writes back: engine/db/error_recovery.h.
  echo "KNOWN LIMITATION: Resume() waits for a flush RocksDB 7.8 never" \
       "scheduled; writes come back with the restart below"
  rc=0
fi
check "client: full disk, errors, reads, recovery" 0 "$rc"
check "server alive after the disk filled up" 0 "$(kill -0 "$PID_full" 2>/dev/null; echo $?)"
check "redis-benchmark stopped at an -IOERR reply" 1 \
  "$(grep -c -m1 'Error from server: IOERR' "$E2E_TMP/bench.out" || true)"
df -k "$MNT" | tail -1 | awk '{print "tmpfs: " $3 " KiB used of " $2}'

stop_server full
check "no assertion or crash in the server log" "" \
  "$(grep -i 'assert\|abort\|segfault' "$E2E_TMP/full/stderr" || true)"
start_server full "${FLAGS[@]}"
rc=0
"$PY" "$HERE/full_disk_client.py" verify "$PORT_full" "$E2E_TMP/acks" || rc=$?
check "every acknowledged write survives the restart; writes are taken" 0 "$rc"
stop_server full
finish
