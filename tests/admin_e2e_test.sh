#!/usr/bin/env bash
# fencedkv-admin with real processes (servers on 127.0.0.1, free ports,
# stopped by PID).
# Usage: admin_e2e_test.sh SERVER_BIN ADMIN_BIN CASE
#   restore  the fencing-safe restore scenario of issue 13, end to end
#   online   checkpoint and backup of a server under redis-benchmark load
#   pipe     export | redis-cli --pipe into another server round-trips
#   server   the FENCEDKV.* commands' errors, AUTH, and SIGTERM mid-backup
set -euo pipefail
FENCEDKV_SERVER=$1
ADMIN=$2
CASE=$3
source "$(dirname "$0")/lib.sh"

cli() { local p=$1; shift; redis-cli -h 127.0.0.1 -p "$p" "$@" 2>&1; }
# The copy commands are operator commands (@admin): servers run with an
# operator user, and fencedkv-admin logs in as it.
OPS_ACL=$E2E_TMP/ops.acl
printf 'user default on nopass ~* &* +@all -@admin\nuser op on >oppw ~* &* +@all\n' > "$OPS_ACL"
OP=(--user=op --password=oppw)
# The files below a directory with sizes and times: "nothing was written".
tree_state() { [ -e "$1" ] && find "$1" -printf '%p %s %T@\n' | sort || echo absent; }

case "$CASE" in
restore)
  # Server up; holder A writes with its token; backup; B takes over with a
  # higher token and writes; server and directory destroyed; restore
  # without --fence_floor is refused and writes nothing; restore with the
  # floor: A's token is refused, B's accepted, LEASE.ACQUIRE is above it.
  start_server old --aclfile="$OPS_ACL"
  P=$PORT_old; DB=$E2E_TMP/old/data; BK=$E2E_TMP/backups
  for h in 1 2 3 4 5; do                      # earlier holders
    t=$(cli "$P" LEASE.ACQUIRE orders "h$h" 60000 | head -1)
    cli "$P" SET history "$h" FENCE "$t" >/dev/null
    cli "$P" LEASE.RELEASE orders "h$h" "$t" >/dev/null
  done
  tA=$(cli "$P" LEASE.ACQUIRE orders A 300 | head -1)
  check "A writes with its token" OK "$(cli "$P" SET orders:next A1 FENCE "$tA")"
  out=$("$ADMIN" "${OP[@]}" --server="127.0.0.1:$P" backup --backup_dir="$BK" --verify)
  check_prefix "online backup" "backup 1: " "$out"
  sleep 0.4                                   # A's lease expires
  tB=$(cli "$P" LEASE.ACQUIRE orders B 60000 | head -1)
  check "B's token is higher" true "$([ "$tB" -gt "$tA" ] && echo true)"
  check "B fences A out" "$tB" "$(cli "$P" FENCE.ADVANCE orders:next "$tB")"
  check "B writes" OK "$(cli "$P" SET orders:next B1 FENCE "$tB")"
  # Where N comes from: the old server, while it is alive.
  N=$(cli "$P" INFO fencing | tr -d '\r' | sed -n 's/^last_lease_token://p')
  HWM=$(cli "$P" INFO fencing | tr -d '\r' | sed -n 's/^high_water_mark://p')
  check "no stored token is above it" true "$([ "$HWM" -le "$N" ] && echo true)"
  check "INFO fencing's last lease token is B's" "$tB" "$N"
  kill9_server old
  rm -rf "$DB"
  # Why the floor: a naive restore (RocksDB's own ldb restore) accepts the
  # fenced-out A again and re-issues B's token.
  if command -v ldb >/dev/null; then
    ldb --db="$E2E_TMP/naive" restore --backup_dir="$BK" >/dev/null 2>&1
    start_server naive --db="$E2E_TMP/naive"
    check "a naive restore accepts A's token again" OK \
      "$(cli "$PORT_naive" SET orders:next A2 FENCE "$tA")"
    check "and issues B's token a second time" "$tB" \
      "$(cli "$PORT_naive" LEASE.ACQUIRE orders C 60000 | head -1)"
    stop_server naive
  fi
  before=$(tree_state "$E2E_TMP/old")
  rc=0; err=$("$ADMIN" restore --backup_dir="$BK" --db="$DB" 2>&1) || rc=$?
  check "restore without --fence_floor is refused" 1 "$rc"
  check_prefix "and says why" \
    "fencedkv-admin restore: --fence_floor=N is required: N must be at least every token issued since the backup" "$err"
  rc=0; err=$("$ADMIN" restore --backup_dir="$BK" --db="$DB" --fence_floor=$((tA - 1)) 2>&1) || rc=$?
  check "a floor below the backup's high-water mark is refused" 1 "$rc"
  check_prefix "naming the mark" "fencedkv-admin restore: Invalid argument: fence_floor $((tA - 1)) is below the backup's high-water mark $tA" "$err"
  check "nothing was written" "$before" "$(tree_state "$E2E_TMP/old")"
  out=$("$ADMIN" restore --backup_dir="$BK" --db="$DB" --fence_floor="$N")
  check "restore with the floor" "restored backup 1 of $BK to $DB
backup: high_water_mark $tA, lease_counter $tA
now: fence_floor $N, lease_counter $N, 1 lease record(s) dropped" "$out"
  check_prefix "the restored store passes check" "check: OK" \
    "$("$ADMIN" --db="$DB" check | tail -1)"
  start_server new --db="$DB"
  P=$PORT_new
  check "A's token is refused" "STALE token $tA < floor $N (domain \"orders:next\")" \
    "$(cli "$P" SET orders:next A2 FENCE "$tA")"
  check "the backed-up value is there" A1 "$(cli "$P" GET orders:next)"
  check "B's token is accepted" OK "$(cli "$P" SET orders:next B2 FENCE "$tB")"
  t=$(cli "$P" LEASE.ACQUIRE orders C 60000 | head -1)
  check "LEASE.ACQUIRE returns a token above the floor" true "$([ "$t" -gt "$N" ] && echo true)"
  check "A's old lease is gone" "" "$(cli "$P" LEASE.RENEW orders A "$tA" 1000 | grep -v LEASELOST || true)"
  stop_server new
  ;;

online)
  # A server under load (GETs and fenced SETs) is backed up and
  # checkpointed online; it keeps answering (max GET latency reported);
  # both copies pass check and open.
  command -v redis-benchmark >/dev/null || { echo "redis-benchmark not installed" >&2; exit 1; }
  start_server s --aclfile="$OPS_ACL"
  P=$PORT_s
  nice -n 10 redis-benchmark -h 127.0.0.1 -p "$P" -n 150000 -c 20 -P 16 -r 150000 -d 100 \
    SET key:__rand_int__ value FENCE 1 > /dev/null
  gets() {  # gets N: a GET load; prints redis-benchmark's max latency (ms)
    nice -n 10 redis-benchmark -h 127.0.0.1 -p "$P" -n "$1" -c 4 -r 150000 GET key:__rand_int__ 2>&1 |
      tr '\r' '\n' | awk '/avg +min +p50/ {getline; print $6}'
  }
  sets() {
    nice -n 10 redis-benchmark -h 127.0.0.1 -p "$P" -n "$1" -c 4 -r 150000 -d 100 \
      SET key:__rand_int__ value FENCE 2 > /dev/null 2>&1
  }
  base=$(gets 20000)
  # GETs run in rounds until both copies are done (so they overlap them);
  # the max of the rounds' max latencies is reported.
  (while [ ! -e "$E2E_TMP/stop" ]; do gets 5000 >> "$E2E_TMP/during"; done) &
  G=$!; E2E_PIDS+=("$G")
  sets 20000 &
  S=$!; E2E_PIDS+=("$S")
  sleep 0.3
  bk=$("$ADMIN" "${OP[@]}" --server="127.0.0.1:$P" backup --backup_dir="$E2E_TMP/bk" --verify)
  cp=$("$ADMIN" "${OP[@]}" --server="127.0.0.1:$P" checkpoint "$E2E_TMP/cp")
  touch "$E2E_TMP/stop"
  wait "$G"; wait "$S"
  rounds=$(wc -l < "$E2E_TMP/during")
  during=$(sort -g "$E2E_TMP/during" | tail -1)
  echo "online: $bk"
  echo "online: $cp"
  echo "online: max GET latency ${base} ms alone, ${during} ms during the backup and checkpoint ($rounds rounds of 5000 GETs)"
  check_prefix "backup under load" "backup 1: " "$bk"
  check_prefix "checkpoint under load" "checkpoint $E2E_TMP/cp created" "$cp"
  check "GETs ran during the copies" true "$([ "$rounds" -ge 1 ] && echo true)"
  check "the server kept answering (max GET latency under 1 s)" true \
    "$(awk -v d="$during" 'BEGIN { print (d != "" && d < 1000) ? "true" : "false" }')"
  check "PING" PONG "$(cli "$P" PING)"
  # The command answers before the copy ends (it runs on its own thread):
  # the status sent right behind it, on the same connection, says running.
  st=$(printf 'FENCEDKV.BACKUP %s VERIFY\r\nFENCEDKV.JOBSTATUS\r\n' "$E2E_TMP/bk" |
       redis-cli -h 127.0.0.1 -p "$P" --user op --pass oppw --no-auth-warning |
       sed -n '1p;9p' | tr '\n' ' ')
  check "FENCEDKV.BACKUP answers at once; the job is still running" "3 running " "$st"
  for _ in $(seq 1 200); do
    [ "$(cli "$P" --user op --pass oppw --no-auth-warning FENCEDKV.JOBSTATUS | sed -n 8p)" = running ] || break
    sleep 0.05
  done
  check "and then done" done "$(cli "$P" --user op --pass oppw --no-auth-warning FENCEDKV.JOBSTATUS | sed -n 8p)"
  check_prefix "the checkpoint passes check" "check: OK" "$("$ADMIN" --db="$E2E_TMP/cp" check | tail -1)"
  out=$("$ADMIN" restore --backup_dir="$E2E_TMP/bk" --db="$E2E_TMP/restored" --fence_floor=2)
  check_prefix "the backup restores" "restored backup " "$out"
  check_prefix "and passes check" "check: OK" "$("$ADMIN" --db="$E2E_TMP/restored" check | tail -1)"
  stop_server s
  for copy in cp restored; do
    n=$("$ADMIN" --db="$E2E_TMP/$copy" stats | sed -n 's/^keys: //p')
    check "the $copy holds the keys" true "$([ "$n" -gt 50000 ] && echo true)"
    start_server "$copy" --db="$E2E_TMP/$copy"
    port="PORT_$copy"
    check "the $copy opens in a server" "$n" "$(cli "${!port}" DBSIZE)"
    stop_server "$copy"
  done
  ;;

pipe)
  # export of a live store, replayed with redis-cli --pipe into a fresh
  # server with the same domain function and mode: the same keys, values,
  # tokens, maxima and floor.
  start_server a --fence_domain=hashtag --fence_mode=strict --aclfile="$OPS_ACL"
  A=$PORT_a
  cli "$A" SET 'user:{7}:name' ada FENCE 5 >/dev/null
  cli "$A" SET 'user:{7}:mail' 'a@x' FENCE 6 >/dev/null
  cli "$A" SET 'user:{8}:name' bob FENCE 3 >/dev/null
  cli "$A" SET gone x FENCE 4 >/dev/null
  cli "$A" DEL gone FENCE 9 >/dev/null
  cli "$A" FENCE.ADVANCE '{9}' 40 >/dev/null
  cli "$A" --user op --pass oppw --no-auth-warning FENCE.FLOOR 2 >/dev/null
  "$ADMIN" --db="$E2E_TMP/a/data" export --output="$E2E_TMP/stream" 2>"$E2E_TMP/export.err"
  check "export summary" "fencedkv-admin export: sets=3 advances=4 floor=2 lease_counter=0" "$(cat "$E2E_TMP/export.err")"
  start_server b --fence_domain=hashtag --fence_mode=strict --aclfile="$OPS_ACL"
  B=$PORT_b
  out=$(redis-cli -h 127.0.0.1 -p "$B" --user op --pass oppw --no-auth-warning --pipe < "$E2E_TMP/stream" 2>&1 | tr -d '\r')
  check "redis-cli --pipe: no errors" "errors: 0, replies: 10" "$(tail -1 <<<"$out")"
  check "values" "ada bob" "$(cli "$B" GET 'user:{7}:name') $(cli "$B" GET 'user:{8}:name')"
  for k in 'x{7}' 'x{8}' gone '{9}'; do
    check "FENCE.GET $k" "$(cli "$A" FENCE.GET "$k")" "$(cli "$B" FENCE.GET "$k")"
  done
  check "maxima" "6 3 9 39" "$(cli "$B" FENCE.GET 'x{7}') $(cli "$B" FENCE.GET 'x{8}') $(cli "$B" FENCE.GET gone) $(cli "$B" FENCE.GET '{9}')"
  check "floor" 2 "$(cli "$B" FENCE.FLOOR)"
  check "a stale token is stale there too" 'STALE token 6 <= max 6 (domain "7")' \
    "$(cli "$B" SET 'user:{7}:x' y FENCE 6)"
  cli "$B" SET 'user:{7}:x' y FENCE 6 >/dev/null  # (refused: changes nothing)
  for v in dump "fence list"; do
    # shellcheck disable=SC2086
    check "$v of both agree" "$("$ADMIN" --db="$E2E_TMP/a/data" $v)" "$("$ADMIN" --db="$E2E_TMP/b/data" $v)"
  done
  stop_server a
  stop_server b
  ;;

server)
  # The online commands' bad input, AUTH, and a SIGTERM while a backup runs.
  printf 'user default on >secret ~* &* +@all\n' > "$E2E_TMP/secret.acl"
  start_server s --aclfile="$E2E_TMP/secret.acl"
  P=$PORT_s
  check "JOBSTATUS needs AUTH" "NOAUTH Authentication required." "$(cli "$P" FENCEDKV.JOBSTATUS)"
  c() { redis-cli -h 127.0.0.1 -p "$P" -a secret --no-auth-warning "$@" 2>&1; }
  check "no job yet" "" "$(c FENCEDKV.JOBSTATUS)"
  check "a relative directory is refused" \
    "ERR the directory must be an absolute path on the server's machine" "$(c FENCEDKV.CHECKPOINT rel/dir)"
  check "an existing directory is refused" \
    "ERR $E2E_TMP already exists: a checkpoint creates its directory" "$(c FENCEDKV.CHECKPOINT "$E2E_TMP")"
  check "a bad option" "ERR syntax error: FENCEDKV.BACKUP backup_dir [VERIFY]" "$(c FENCEDKV.BACKUP /x NOW)"
  check "wrong arity" "ERR wrong number of arguments for 'fencedkv.checkpoint' command" "$(c FENCEDKV.CHECKPOINT)"
  rc=0; err=$("$ADMIN" --server="127.0.0.1:$P" backup --backup_dir="$E2E_TMP/bk" 2>&1) || rc=$?
  check "the tool without the password" 1 "$rc"
  check "says so" "fencedkv-admin backup: FENCEDKV.BACKUP: NOAUTH Authentication required." "$err"
  check "nothing was written" absent "$(tree_state "$E2E_TMP/bk")"
  out=$("$ADMIN" --server="127.0.0.1:$P" --password=secret backup --backup_dir="$E2E_TMP/bk")
  check_prefix "with it" "backup 1: " "$out"
  check "JOBSTATUS" "id 1 kind backup target $E2E_TMP/bk state done" \
    "$(c FENCEDKV.JOBSTATUS | head -8 | tr '\n' ' ' | sed 's/ $//')"
  rc=0; err=$("$ADMIN" --server="127.0.0.1:$P" --password=secret checkpoint "$E2E_TMP/s/data/inside" 2>&1) || rc=$?
  check "a checkpoint inside the database directory is refused" 1 "$rc"
  check_prefix "naming it" "fencedkv-admin checkpoint: the server's job failed: Invalid argument: checkpoint directory $E2E_TMP/s/data/inside is inside the database directory" "$err"
  rc=0; err=$("$ADMIN" --server="127.0.0.1:1" checkpoint /tmp/x 2>&1) || rc=$?
  check "no server" "1 fencedkv-admin checkpoint: cannot connect to 127.0.0.1:1: Connection refused" "$rc $err"
  # SIGTERM while a backup runs: it stops, the server exits 0.
  redis-benchmark -h 127.0.0.1 -p "$P" -a secret -n 50000 -c 10 -P 16 -r 50000 -d 200 \
    SET key:__rand_int__ value FENCE 1 > /dev/null 2>&1
  check "a second backup starts" 3 "$(c FENCEDKV.BACKUP "$E2E_TMP/bk2")"
  stop_server s
  ;;

*)
  echo "unknown case $CASE" >&2; exit 2 ;;
esac
finish
