#!/usr/bin/env bash
# fencedkv-server under the operator's views of the real redis-cli (Debian
# redis-tools): --pipe, --stat, --bigkeys, --memkeys, --scan, --latency, and
# the commands behind them (INFO keyspace/memory/commandstats/latencystats,
# TYPE, STRLEN, MEMORY USAGE), plus SLOWLOG, CLIENT KILL, LEASE.LIST and
# SHUTDOWN.
# Usage: redis_tools_test.sh /path/to/fencedkv-server
set -euo pipefail
FENCEDKV_SERVER=$1
source "$(dirname "$0")/lib.sh"
command -v redis-cli >/dev/null || { echo "redis-cli not installed (apt-get install redis-tools)" >&2; exit 1; }

# An operator (@admin) and an ordinary user besides the built-in default.
printf 'user op on >oppw ~* &* +@all\nuser app on >apppw ~* &* +@all -@admin\nuser default on nopass ~* &* +@all -@admin\n' \
  > "$E2E_TMP/users.acl"
# Every command goes to the slow log (0 us), the log keeps 16.
start_server main --aclfile="$E2E_TMP/users.acl" \
  --slowlog_log_slower_than=0 --slowlog_max_len=16
P=$PORT_main
cli() { redis-cli -h 127.0.0.1 -p "$P" "$@" 2>&1 || true; }
op() { redis-cli -h 127.0.0.1 -p "$P" --user op --pass oppw --no-auth-warning "$@" 2>&1 || true; }
# info SECTION FIELD: one field of INFO SECTION.
info() { cli INFO "$1" | tr -d '\r' | sed -n "s/^$2://p"; }

# --- --pipe: 500 fenced SETs in RESP, and one big value ---
N=500
python3 - "$N" > "$E2E_TMP/pipe.resp" <<'EOF'
import sys
n = int(sys.argv[1])
def cmd(*words):
    out = "*%d\r\n" % len(words)
    for w in words:
        out += "$%d\r\n%s\r\n" % (len(w.encode()), w)
    return out
for i in range(1, n + 1):
    sys.stdout.write(cmd("SET", "pipe:%d" % i, "v%d" % i, "FENCE", str(i)))
sys.stdout.write(cmd("SET", "big", "x" * 10000, "FENCE", "7"))
EOF
pipe_out=$(redis-cli -h 127.0.0.1 -p "$P" --pipe < "$E2E_TMP/pipe.resp" 2>&1 || true)
check "--pipe: no error, every reply" "errors: 0, replies: $((N + 1))" \
      "$(echo "$pipe_out" | tail -1)"
check "--pipe: the values are there"  "v123" "$(cli GET pipe:123)"
check "--pipe: with their tokens"     "123"  "$(cli FENCE.GET pipe:123)"
check "--pipe: the fence holds"       "STALE" "$(cli SET pipe:123 x FENCE 122 | cut -d' ' -f1)"
KEYS=$((N + 1))

# --- The commands the tools use ---
check "TYPE of a value"       "string" "$(cli TYPE big)"
check "TYPE of nothing"       "none"   "$(cli TYPE nope)"
check "STRLEN"                "10000"  "$(cli STRLEN big)"
check "STRLEN of nothing"     "0"      "$(cli STRLEN nope)"
usage=$(cli MEMORY USAGE big)
check "MEMORY USAGE: value, key and header" "true" \
      "$( [ "$usage" -ge 10003 ] && [ "$usage" -le 10100 ] && echo true)"
check "MEMORY USAGE SAMPLES"  "$usage" "$(cli MEMORY USAGE big SAMPLES 0)"
check "MEMORY USAGE of nothing" "" "$(cli MEMORY USAGE nope)"
# near N V: V is N (RocksDB's estimate of the keys, exact for a store of
# fresh puts; the engine's own sentinel lives in another column family).
near() { [ "$2" -eq "$1" ] && echo true; }
ks=$(info keyspace db0)
check "INFO keyspace: the key count" "true" "$(near "$KEYS" "$(echo "$ks" | sed 's/^keys=\([0-9]*\),.*/\1/')")"
check "INFO keyspace: format" "true" "$(echo "$ks" | grep -qE '^keys=[0-9]+,expires=0,avg_ttl=0$' && echo true)"
check "INFO replication"      "master 0" \
      "$(info replication role) $(info replication connected_slaves)"
used=$(info memory used_memory)
check "INFO memory: used_memory"  "true" "$( [ "$used" -gt 1000000 ] && echo true)"
check "INFO memory: rss"          "true" "$( [ "$(info memory used_memory_rss)" -gt 1000000 ] && echo true)"
check "INFO memory: memtables"    "true" "$( [ "$(info memory rocksdb_memtables_bytes)" -gt 10000 ] && echo true)"
check_prefix "INFO memory: human" "" "$(info memory used_memory_human | grep -E '^[0-9.]+[BKMGT]$')"
check "INFO memory: peak >= used" "true" "$( [ "$(info memory used_memory_peak)" -ge "$used" ] && echo true)"

# --- --stat: a line a tick, the key count and memory from INFO ---
stat_out=$(timeout 3 stdbuf -oL redis-cli -h 127.0.0.1 -p "$P" --stat -i 0.3 2>&1 || true)
row=$(echo "$stat_out" | sed -n 3p)
check "--stat: keys"          "true" "$(near "$KEYS" "$(echo "$row" | awk '{print $1}')")"
check "--stat: memory"        "true" \
      "$(echo "$row" | awk '{print $2}' | grep -qE '^[0-9.]+[BKMGT]$' && echo true)"
check "--stat: clients"       "1" "$(echo "$row" | awk '{print $3}')"

# --- --bigkeys / --memkeys: SCAN, TYPE, STRLEN / MEMORY USAGE ---
big_out=$(cli --bigkeys)
check "--bigkeys: the biggest" "Biggest string found '\"big\"' has 10000 bytes" \
      "$(echo "$big_out" | grep '^Biggest string')"
check "--bigkeys: every key"  "$KEYS strings" \
      "$(echo "$big_out" | grep -o '^[0-9]* strings')"
mem_out=$(cli --memkeys)
check "--memkeys: the biggest" "Biggest string found '\"big\"' has $usage bytes" \
      "$(echo "$mem_out" | grep '^Biggest string')"

# --- --scan ---
check "--scan: all"           "$KEYS" "$(cli --scan | wc -l | tr -d ' ')"
# pipe:1, pipe:10..19, pipe:100..199
check "--scan --pattern"      "111" "$(cli --scan --pattern 'pipe:1*' | wc -l | tr -d ' ')"

# --- --latency: with output to a pipe it prints "min max avg samples" once ---
lat=$(timeout 10 redis-cli -h 127.0.0.1 -p "$P" --latency -i 0.5 </dev/null 2>&1 | tail -1 || true)
check "--latency: min <= avg <= max, samples" "true" "$(echo "$lat" | awk \
      'NF == 4 && $1 <= $3 && $3 <= $2 && $4 > 0 {print "true"}')"

# --- INFO commandstats / errorstats / latencystats ---
cli SET pipe:1 again FENCE 1 >/dev/null         # 1 more SET
cli SLOWLOG GET >/dev/null                      # refused: not @admin
sets=$(cli INFO commandstats | tr -d '\r' | grep '^cmdstat_set:')
check_prefix "cmdstat_set: calls" "cmdstat_set:calls=$((N + 3)),usec=" "$sets"
check "cmdstat_set: failed (the stale SET)" "failed_calls=1" \
      "$(echo "$sets" | grep -o 'failed_calls=[0-9]*')"
check "cmdstat_set: format" "true" "$(echo "$sets" | grep -qE \
      '^cmdstat_set:calls=[0-9]+,usec=[0-9]+,usec_per_call=[0-9]+\.[0-9]{2},rejected_calls=0,failed_calls=1$' && echo true)"
check "cmdstat_slowlog: rejected" "rejected_calls=1" \
      "$(cli INFO commandstats | tr -d '\r' | grep '^cmdstat_slowlog:' | grep -o 'rejected_calls=[0-9]*')"
check "errorstat_STALE"      "count=1" "$(info errorstats errorstat_STALE)"
check "errorstat_NOPERM"     "count=1" "$(info errorstats errorstat_NOPERM)"
check "latencystats: set"    "true" "$(cli INFO latencystats | tr -d '\r' | grep -qE \
      '^latency_percentiles_usec_set:p50=[0-9]+\.[0-9]{3},p99=[0-9]+\.[0-9]{3},p99\.9=[0-9]+\.[0-9]{3}$' && echo true)"
check "INFO everything has them" "2" \
      "$(cli INFO everything | tr -d '\r' | grep -cE '^# (Commandstats|Latencystats)$')"

# --- SLOWLOG (@admin) ---
check_prefix "SLOWLOG refused to default" "NOPERM" "$(cli SLOWLOG LEN)"
check "SLOWLOG RESET"        "OK" "$(op SLOWLOG RESET)"
long=$(printf 'y%.0s' $(seq 1 200))
printf 'CLIENT SETNAME tagged\nSET slow:k %s FENCE 1\n' "$long" | cli >/dev/null
entry=$(op SLOWLOG GET 2)   # the newest: op's AUTH, then the SET
check "SLOWLOG: the client's name"   "1" "$(echo "$entry" | grep -cx 'tagged')"
check "SLOWLOG: the key"             "1" "$(echo "$entry" | grep -cx 'slow:k')"
check "SLOWLOG: a long value is cut" "$(printf 'y%.0s' $(seq 1 128))... (72 more bytes)" \
      "$(echo "$entry" | grep '^y')"
check "SLOWLOG: no password"         "0" "$(op SLOWLOG GET -1 | grep -c oppw)"
check "SLOWLOG: redacted AUTH"       "true" "$(op SLOWLOG GET -1 | grep -qx '(redacted)' && echo true)"
for i in $(seq 1 30); do cli PING >/dev/null; done
check "SLOWLOG LEN: at most max_len" "16" "$(op SLOWLOG LEN)"
check "SLOWLOG GET -1: max_len entries" "16" \
      "$(op SLOWLOG GET -1 | grep -c '^127\.0\.0\.1:[0-9]*$')"
check_prefix "SLOWLOG GET -2"        "ERR count should be" "$(op SLOWLOG GET -2)"

# --- LEASE.LIST ---
check "LEASE.ACQUIRE orders"  "1" "$(cli LEASE.ACQUIRE orders A 60000 | head -1)"
check "LEASE.ACQUIRE billing" "2" "$(cli LEASE.ACQUIRE billing B 60000 | head -1)"
list=$(cli LEASE.LIST)
check "LEASE.LIST: names, holders, tokens in name order" "billing B 2 orders A 1" \
      "$(echo "$list" | awk 'NR % 5 == 1 || NR % 5 == 2 || NR % 5 == 3' | tr '\n' ' ' | sed 's/ $//')"
check "LEASE.LIST: ttl and expiry" "true" "$(echo "$list" | awk \
      'NR == 4 && $1 > 59000 && $1 <= 60000 {ok = 1} NR == 5 && $1 > 1700000000000 {ok2 = 1} END {if (ok && ok2) print "true"}')"
check "LEASE.LIST pattern"    "orders" "$(cli LEASE.LIST 'ord*' | head -1)"
check "LEASE.LIST no match"   "" "$(cli LEASE.LIST 'zz*')"

# --- CLIENT KILL (@admin), each target closed by its own loop ---
exec 5<>"/dev/tcp/127.0.0.1/$P"
printf 'CLIENT ID\r\n' >&5
IFS= read -r -t 5 idline <&5
victim=${idline#:}; victim=${victim%$'\r'}
check_prefix "CLIENT KILL refused to default" "NOPERM" "$(cli CLIENT KILL ID "$victim")"
check "CLIENT KILL ID"        "1" "$(op CLIENT KILL ID "$victim")"
check "the victim's socket is closed" "closed" \
      "$(IFS= read -r -t 5 line <&5 && echo "open: $line" || echo closed)"
exec 5<&- 5>&-
check "CLIENT KILL ID gone"   "0" "$(op CLIENT KILL ID "$victim")"
exec 6<>"/dev/tcp/127.0.0.1/$P"
printf 'AUTH app apppw\r\nCLIENT INFO\r\n' >&6
IFS= read -r -t 5 line <&6   # +OK
IFS= read -r -t 5 line <&6   # $len
IFS= read -r -t 5 line <&6   # id=.. addr=..
addr=$(echo "$line" | grep -o 'addr=[^ ]*' | cut -d= -f2)
check "CLIENT KILL USER"      "1" "$(op CLIENT KILL USER app)"
check "CLIENT KILL USER unknown" "ERR No such user 'nobody'" "$(op CLIENT KILL USER nobody)"
check "CLIENT KILL ADDR gone" "ERR No such client" "$(op CLIENT KILL "$addr")"
exec 6<&- 6>&-
check "CLIENT KILL bad option" "ERR syntax error" "$(op CLIENT KILL ID 1 FOO bar)"

# --- SHUTDOWN (@admin): a clean stop that keeps every acknowledged write ---
check_prefix "SHUTDOWN refused to default" "NOPERM" "$(cli SHUTDOWN NOSAVE)"
check "SHUTDOWN bad option" "ERR syntax error" "$(op SHUTDOWN LATER)"
op SHUTDOWN NOSAVE >/dev/null
wait_server_exit main
start_server again --db="$E2E_TMP/main/data" --aclfile="$E2E_TMP/users.acl"
P=$PORT_again
check "after SHUTDOWN: the values"  "v500" "$(cli GET pipe:500)"
check "after SHUTDOWN: the tokens"  "500" "$(cli FENCE.GET pipe:500)"
check "after SHUTDOWN: the last SET" "again" "$(cli GET pipe:1)"
check "after SHUTDOWN: the leases"  "orders" "$(cli LEASE.LIST 'ord*' | head -1)"
op SHUTDOWN SAVE >/dev/null
wait_server_exit again
finish
