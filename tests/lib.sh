#!/usr/bin/env bash
# Helpers for the end-to-end scripts: servers bound to 127.0.0.1 on a free
# port, started and stopped by PID. Source it; set FENCEDKV_SERVER first.

set -euo pipefail

: "${FENCEDKV_SERVER:?set FENCEDKV_SERVER to the fencedkv-server binary}"
E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/fencedkv_e2e.XXXXXX")
E2E_PIDS=()
e2e_cleanup() {
  for pid in "${E2E_PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$E2E_TMP"
}
trap e2e_cleanup EXIT

FAILS=0
PASSES=0
# check NAME EXPECTED ACTUAL
check() {
  if [ "$2" == "$3" ]; then
    PASSES=$((PASSES + 1))
  else
    FAILS=$((FAILS + 1))
    printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3" >&2
  fi
}
# check_prefix NAME PREFIX ACTUAL
check_prefix() {
  if [[ "$3" == "$2"* ]]; then
    PASSES=$((PASSES + 1))
  else
    FAILS=$((FAILS + 1))
    printf 'FAIL %s\n  expected prefix: %q\n  actual:          %q\n' "$1" "$2" "$3" >&2
  fi
}
finish() {
  echo "$PASSES passed, $FAILS failed"
  [ "$FAILS" -eq 0 ]
}

# low_free_port: a free port in 15000-32000 (below the ephemeral range),
# chosen at random and checked with a bind.
low_free_port() {
  python3 -c '
import random, socket
for _ in range(1000):
    p = random.randrange(15000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()'
}

# skip WHY: the test cannot run here; exits 77 (ctest's SKIP_RETURN_CODE).
skip() {
  echo "SKIPPED: $*"
  exit 77
}

# mount_tmpfs DIR SIZE: mounts a tmpfs of SIZE (e.g. 24m) on DIR (made if
# missing) and unmounts it on exit, after killing the servers (their files
# keep a mount busy). Exits 77 (ctest's SKIP_RETURN_CODE) if it cannot.
# A script that sets its own EXIT trap calls tmpfs_cleanup from it.
TMPFS_DIR=
tmpfs_cleanup() {
  for pid in "${E2E_PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  done
  if [ -n "$TMPFS_DIR" ]; then
    umount "$TMPFS_DIR" 2>/dev/null || umount -l "$TMPFS_DIR" || true
  fi
  e2e_cleanup
}
mount_tmpfs() {
  mkdir -p "$1"
  mount -t tmpfs -o size="$2",mode=0700 tmpfs "$1" 2>/dev/null ||
    skip "cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?)"
  TMPFS_DIR=$1
  trap tmpfs_cleanup EXIT
}

# start_server NAME [flags...]: starts a server with its own data dir (unless
# --db is given); sets PORT_<NAME> and PID_<NAME>.
start_server() {
  local name=$1; shift
  local dir="$E2E_TMP/$name"
  mkdir -p "$dir"
  local portfile="$dir/port"
  rm -f "$portfile"
  # A port below the kernel's ephemeral range, not --port=0: a replica
  # restarts itself on its port after a full copy, and an ephemeral port may
  # have been taken by an outgoing connection by then.
  local args=(--bind=127.0.0.1 --port="$(low_free_port)" --port_file="$portfile")
  if [[ " $* " != *" --db="* ]]; then args+=(--db="$dir/data"); fi
  "$FENCEDKV_SERVER" "${args[@]}" "$@" >"$dir/stdout" 2>"$dir/stderr" &
  local pid=$!
  E2E_PIDS+=("$pid")
  for _ in $(seq 1 200); do
    if [ -s "$portfile" ]; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "server $name died at start:" >&2
      cat "$dir/stderr" >&2
      return 1
    fi
    sleep 0.05
  done
  [ -s "$portfile" ] || { echo "server $name did not start" >&2; return 1; }
  printf -v "PORT_$name" '%s' "$(cat "$portfile")"
  printf -v "PID_$name" '%s' "$pid"
}

# await_exit NAME HOW: waits up to 10 s for the server to exit and checks
# it exits 0 ("server NAME exits 0 HOW"); kills it and fails if it does not.
await_exit() {
  local pidvar="PID_$1"
  local pid=${!pidvar}
  local rc=0
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "server $1 did not exit $2" >&2
    kill -9 "$pid"
    return 1
  fi
  wait "$pid" || rc=$?
  check "server $1 exits 0 $2" 0 "$rc"
}

# stop_server NAME: SIGTERM, expects a clean exit 0 within 10 s.
stop_server() {
  local pidvar="PID_$1"
  kill -TERM "${!pidvar}"
  await_exit "$1" "on SIGTERM"
}

# wait_server_exit NAME: the server stops by itself (SHUTDOWN).
wait_server_exit() { await_exit "$1" "by itself"; }

# kill9_server NAME: the crash case.
kill9_server() {
  local pidvar="PID_$1"
  kill -9 "${!pidvar}"
  wait "${!pidvar}" 2>/dev/null || true
}

