#!/usr/bin/env bash
# Operator commands need an operator: Redis-style ACL users (--aclfile),
# driven by the real redis-cli. The default user (no password, or
# --requirepass) runs everything but @admin: it cannot raise the fence floor
# (which would make every write stale for good), read CONFIG or list clients.
# Usage: acl_e2e_test.sh /path/to/fencedkv-server
set -euo pipefail
FENCEDKV_SERVER=$1
source "$(dirname "$0")/lib.sh"
command -v redis-cli >/dev/null || { echo "redis-cli not installed (apt-get install redis-tools)" >&2; exit 1; }

# --- The default user, with --requirepass ---
start_server open --requirepass=pw
cli() { redis-cli -h 127.0.0.1 -p "$PORT_open" -a pw --no-auth-warning "$@" 2>&1 || true; }
check "ordinary writes"          "OK" "$(cli SET k v FENCE 1)"
check "the default user cannot raise the floor" \
      "NOPERM this user has no permissions to run the 'fence.floor' command with an argument" \
      "$(cli FENCE.FLOOR 18446744073709551615)"
check "the floor did not move"   "0"  "$(cli FENCE.FLOOR)"
check "writes still pass"        "OK" "$(cli SET k v FENCE 2)"
check "CONFIG needs @admin"      "NOPERM this user has no permissions to run the 'config' command" \
      "$(cli CONFIG GET port)"
check "CLIENT LIST needs @admin" "NOPERM this user has no permissions to run the 'client|list' command" \
      "$(cli CLIENT LIST)"
check "CLIENT ID does not"       "true" "$([ "$(cli CLIENT ID)" -gt 0 ] && echo true)"
check "ACL WHOAMI"               "default" "$(cli ACL WHOAMI)"
check "ACL LIST needs @admin"    "NOPERM this user has no permissions to run the 'acl|list' command" \
      "$(cli ACL LIST)"
stop_server open

# --- Users from --aclfile ---
APP_HASH=$(printf '%s' apppw | sha256sum | cut -d' ' -f1)
cat > "$E2E_TMP/users.acl" <<EOF
# fencedkv users (Redis ACL syntax)
user default off
user admin on >adminpw ~* &* +@all
user app on #$APP_HASH ~* +@all -@admin

user locker on >lockpw resetkeys +@lease +ping
user reader on >readpw ~* +@read -@keyspace +@connection
user keyless on >kpw +get
EOF
start_server acl --aclfile="$E2E_TMP/users.acl"
as() { local u=$1 p=$2; shift 2; redis-cli -h 127.0.0.1 -p "$PORT_acl" --user "$u" --pass "$p" --no-auth-warning "$@" 2>&1 || true; }
check "default is off: AUTH first" "NOAUTH Authentication required." \
      "$(redis-cli -h 127.0.0.1 -p "$PORT_acl" GET k 2>&1)"
check "wrong password"           "AUTH failed: WRONGPASS invalid username-password pair or user is disabled.
NOAUTH Authentication required." "$(as admin nope PING)"
check "the default user is disabled" "AUTH failed: WRONGPASS invalid username-password pair or user is disabled.
NOAUTH Authentication required." "$(as default x PING)"
check "admin raises the floor"   "5"  "$(as admin adminpw FENCE.FLOOR 5)"
check "app (by hash) writes"     "OK" "$(as app apppw SET k v FENCE 5)"
check "app cannot raise the floor" "NOPERM this user has no permissions to run the 'fence.floor' command with an argument" \
      "$(as app apppw FENCE.FLOOR 6)"
check "app reads the floor"      "5"  "$(as app apppw FENCE.FLOOR)"
check "ACL WHOAMI"               "app" "$(as app apppw ACL WHOAMI)"
check "CLIENT LIST names the user" "user=admin" \
      "$(as admin adminpw CLIENT LIST | grep -o 'user=[a-z]*')"
# A connection that has sent nothing yet (here: one that must still AUTH)
# shows user=default, as in Redis: it once showed an empty user.
exec 7<>"/dev/tcp/127.0.0.1/$PORT_acl"
check "CLIENT LIST: a connection yet to AUTH is default's" "user=default" \
      "$(as admin adminpw CLIENT LIST | grep -v 'user=admin' | grep -o 'user=[a-z]*' | sort -u)"
check "CLIENT KILL USER default closes it" "1" "$(as admin adminpw CLIENT KILL USER default)"
exec 7<&-
check "CLIENT INFO has the user" "user=admin multi=-1" \
      "$(as admin adminpw CLIENT INFO | grep -o 'user=[a-z]*') $(as admin adminpw CLIENT INFO | grep -o 'multi=[-0-9]*')"
# The floor (5) moves the lease counter: the first grant is 6.
check "locker takes a lease"     "6"  "$(as locker lockpw LEASE.ACQUIRE jobs L 5000 | head -1)"
check "locker has no keys"       "NOPERM this user has no permissions to run the 'get' command" \
      "$(as locker lockpw GET k)"
check "keyless may GET, but no key" "NOPERM this user has no permissions to access one of the keys used as arguments" \
      "$(as keyless kpw GET k)"
check "reader reads"             "v"  "$(as reader readpw GET k)"
check "reader cannot write"      "NOPERM this user has no permissions to run the 'set' command" \
      "$(as reader readpw SET k w FENCE 9)"
check "reader cannot KEYS (-@keyspace)" "NOPERM this user has no permissions to run the 'keys' command" \
      "$(as reader readpw KEYS '*')"
check "HELLO 2 AUTH user pass"   "server
fencedkv" "$(redis-cli -h 127.0.0.1 -p "$PORT_acl" HELLO 2 AUTH admin adminpw 2>&1 | head -2)"
list=$(as admin adminpw ACL LIST)
check "ACL LIST"                 "user admin on #$(printf '%s' adminpw | sha256sum | cut -d' ' -f1) ~* &* +@all
user app on #$APP_HASH ~* +@all -@admin
user default off resetkeys -@all
user keyless on #$(printf '%s' kpw | sha256sum | cut -d' ' -f1) resetkeys +get
user locker on #$(printf '%s' lockpw | sha256sum | cut -d' ' -f1) resetkeys +@lease +ping
user reader on #$(printf '%s' readpw | sha256sum | cut -d' ' -f1) ~* +@read -@keyspace +@connection" "$list"
check "ACL LIST shows no password" "" "$(grep -E 'adminpw|lockpw|readpw' <<<"$list" || true)"
check_prefix "ACL CAT"           "read" "$(as app apppw ACL CAT | head -1)"
check "ACL CAT admin"            "acl
client
config
fence.floor
fencedkv.backup
fencedkv.checkpoint
fencedkv.jobstatus
fencedkv.sync
replicaof
shutdown
slaveof
slowlog" "$(as app apppw ACL CAT admin | sort)"
check "ACL SETUSER is refused"   "ERR ACL SETUSER is not supported: users come from --aclfile (edit it and restart)" \
      "$(as admin adminpw ACL SETUSER x on)"
stop_server acl

# --- Refused configurations: the server exits 1 with the file's line ---
printf 'user a on >x +@all\nuser b on +@nosuch\n' > "$E2E_TMP/bad.acl"
rc=0; err=$("$FENCEDKV_SERVER" --port=0 --db="$E2E_TMP/bad" --aclfile="$E2E_TMP/bad.acl" 2>&1 >/dev/null) || rc=$?
check "a bad aclfile is refused" 1 "$rc"
check "with its line"            "fencedkv-server: aclfile: Invalid argument: $E2E_TMP/bad.acl:2: unknown ACL category '@nosuch'" \
      "$(grep '^fencedkv-server:' <<<"$err")"
rc=0; "$FENCEDKV_SERVER" --port=0 --db="$E2E_TMP/bad" --aclfile="$E2E_TMP/users.acl" \
  --requirepass=pw >/dev/null 2>&1 || rc=$?
check "--requirepass with a 'user default' line is refused" 1 "$rc"
# An ACL file that is a directory read as empty: the server started with no
# authentication at all. Refused now, before anything is opened.
mkdir -p "$E2E_TMP/acldir"
rc=0; err=$(timeout 20 "$FENCEDKV_SERVER" --port=0 --bind=127.0.0.1 --db="$E2E_TMP/bad2" --aclfile="$E2E_TMP/acldir" 2>&1 >/dev/null) || rc=$?
check "--aclfile naming a directory is refused" 1 "$rc"
check "and says why" true "$(grep -q 'a directory, not a file' <<<"$err" && echo true)"
check "nothing was created" false "$([ -e "$E2E_TMP/bad2" ] && echo true || echo false)"
rc=0; err=$(timeout 20 "$FENCEDKV_SERVER" --port=0 --bind=127.0.0.1 --db="$E2E_TMP/bad3" --requirepass_file="$E2E_TMP/acldir" 2>&1 >/dev/null) || rc=$?
check "--requirepass_file naming a directory is refused" 1 "$rc"
check "and says why" true "$(grep -q 'a directory, not a file' <<<"$err" && echo true)"
# A password from a pipe (process substitution), a common way to keep it
# out of argv and the environment, is read.
start_server piped --requirepass_file=<(printf 'pipedpw\n')
check "a --requirepass_file that is a pipe" "OK" \
  "$(redis-cli -h 127.0.0.1 -p "$PORT_piped" -a pipedpw --no-auth-warning SET p v FENCE 1 2>&1)"
stop_server piped
# A --port_file that cannot be written stops the start (a supervisor
# waiting for it would wait for ever; before, the failure was silent).
rc=0; err=$(timeout 20 "$FENCEDKV_SERVER" --port=0 --bind=127.0.0.1 --db="$E2E_TMP/pf" \
  --port_file="$E2E_TMP/no/such/dir/port" 2>&1 >/dev/null) || rc=$?
check "an unwritable --port_file stops the start" 1 "$rc"
check "and says why" true "$(grep -q 'cannot write --port_file' <<<"$err" && echo true)"
# Metrics on an IPv6 address: the server passed "::1:PORT" to civetweb,
# which Debian builds without IPv6, and failed only after opening the
# database. Now it is refused before anything is created, or, with a
# civetweb that has IPv6, served in brackets. (A refusal takes well under
# a second; a server that starts is stopped by the timeout.)
mport=$(low_free_port)
rc=0; err=$(timeout 5 "$FENCEDKV_SERVER" --port=0 --bind=127.0.0.1 --db="$E2E_TMP/m6" \
  --metrics_port="$mport" --metrics_bind=::1 2>&1 >/dev/null) || rc=$?
if grep -q 'has no IPv6' <<<"$err"; then
  check "--metrics_bind=::1 without IPv6 in civetweb is refused" 1 "$rc"
  check "nothing created" false "$([ -e "$E2E_TMP/m6" ] && echo true || echo false)"
elif [ "$rc" = 124 ]; then
  echo "civetweb has IPv6: --metrics_bind=::1 started (stopped by the timeout)"
else
  check "--metrics_bind=::1: refused for want of IPv6, or started" "refused or started" \
    "exit $rc: $err"
fi
# A name is resolved before the database opens, to an IPv4 address if it
# has one: Debian's "localhost" is ::1 first, which Debian's civetweb cannot
# listen on.
start_server mlocal --metrics_port="$mport" --metrics_bind=localhost --logtostderr
check "metrics on localhost" true \
  "$(curl -s --max-time 5 "http://127.0.0.1:$mport/metrics" | grep -q '^fencedkv_' && echo true)"
check "its log names the address" true \
  "$(grep -q "metrics on http://127.0.0.1:$mport/metrics" "$E2E_TMP/mlocal/stderr" && echo true)"
stop_server mlocal
# Flags that need one another are checked before anything is opened: a
# start refused later had created the database and written a promotion
# into its REPLICATION file (each refused start moved its epoch).
n=0
for flags in "--token_source=etcd" "--shard=s1" "--replicaof=garbage" \
    "--shard=s1 --replicaof=127.0.0.1:1 --etcd_endpoints=http://127.0.0.1:1" \
    "--metrics_port=1 --metrics_bind=no.such.host.invalid" \
    "--min_insync_replicas=3 --max_replicas=1" "--masteruser=repl"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  rc=0; timeout 20 "$FENCEDKV_SERVER" --port=0 --bind=127.0.0.1 --db="$E2E_TMP/early$n" $flags \
    >/dev/null 2>&1 || rc=$?
  check "refused: $flags" 1 "$rc"
  check "nothing created: $flags" false "$([ -e "$E2E_TMP/early$n" ] && echo true || echo false)"
done
finish
