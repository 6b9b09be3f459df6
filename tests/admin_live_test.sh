#!/usr/bin/env bash
# fencedkv-admin's reading verbs beside a running server under write load,
# with small memtables so that flushes and compactions delete files all the
# time. A file the read-only view listed and the server then deleted used
# to fail `check` as damage ("checksum: FAILED ... No such file"; 27 of 60
# runs) and the reading verbs as "cannot open read-only". check now reads
# every file through the descriptor its view's open holds, and an open that
# meets a deleted file is retried on a fresh view (export too: it opened
# once, and failed 3 runs of 10 beside 64 KiB memtables). Every run must
# pass.
# Usage: admin_live_test.sh SERVER_BIN ADMIN_BIN [RUNS]
set -euo pipefail
FENCEDKV_SERVER=$1
ADMIN=$2
RUNS=${3:-20}
source "$(dirname "$0")/lib.sh"

start_server live --write_buffer_size=262144 --wal_retention_mb=0
P=$PORT_live
DB=$E2E_TMP/live/data
redis-cli -h 127.0.0.1 -p "$P" SET probe v FENCE 7 >/dev/null
# Bounded load: at most 60 s, stopped when the runs are done.
timeout 60 redis-benchmark -h 127.0.0.1 -p "$P" -c 20 -n 3000000 -P 16 \
  -r 1000000 -d 100 -q SET key:__rand_int__ __data__ FENCE 7 \
  >/dev/null 2>&1 &
LOAD=$!
sleep 2
files_before=$(ls "$DB" | grep -c '\.sst$' || true)
check_failed=0; get_failed=0; export_failed=0; last_err=
for run in $(seq 1 "$RUNS"); do
  if ! out=$("$ADMIN" --db="$DB" check 2>&1); then
    check_failed=$((check_failed + 1)); last_err=$out
  fi
  if ! out=$("$ADMIN" --db="$DB" fence get probe 2>&1); then
    get_failed=$((get_failed + 1)); last_err=$out
  fi
  # (export reads the whole store: every other run.)
  if [ $((run % 2)) = 0 ] && ! out=$("$ADMIN" --db="$DB" export 2>&1 >/dev/null); then
    export_failed=$((export_failed + 1)); last_err=$out
  fi
done
kill "$LOAD" 2>/dev/null || true
wait "$LOAD" 2>/dev/null || true
[ -z "$last_err" ] || printf 'last failure:\n%s\n' "$last_err" | head -20 >&2
check "the load made SST files" true "$([ "$files_before" -gt 0 ] && echo true)"
check "check passes on every run" 0 "$check_failed"
check "fence get passes on every run" 0 "$get_failed"
check "export passes on every run" 0 "$export_failed"
stop_server live
finish
