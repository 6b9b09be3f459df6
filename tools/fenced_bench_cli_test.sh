#!/usr/bin/env bash
# fenced_bench's command line, run as a user runs it: db_bench's flags and
# benchmarks, checked against db_bench's output formats, fenced and on raw
# RocksDB. Each case takes a few seconds.
# Usage: fenced_bench_cli_test.sh FENCED_BENCH CASE
#   CASE: refuse | statistics | report | intervals | benchmarks | holders |
#         foreign_db | flag_bounds | strict_verify | use_existing | floor |
#         sizes
set -euo pipefail
BENCH=$1
CASE=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fenced_bench_cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

FAILS=0
PASSES=0
pass() { PASSES=$((PASSES + 1)); }
fail() { FAILS=$((FAILS + 1)); printf 'FAIL %s\n' "$*" >&2; }
# expect NAME REGEX FILE: FILE has a line matching the extended REGEX.
expect() { if grep -Eq -- "$2" "$3"; then pass; else fail "$1: no line matches /$2/ in:"; sed 's/^/    /' "$3" >&2; fi; }
# refute NAME REGEX FILE: no line of FILE matches.
refute() { if grep -Eq -- "$2" "$3"; then fail "$1: unexpected /$2/ in:"; sed 's/^/    /' "$3" >&2; else pass; fi; }
# bench NAME ARGS...: runs fenced_bench into $WORK/NAME.out/.err and .rc.
bench() {
  local name=$1; shift
  set +e
  "$BENCH" --db="$WORK/db" --seed=7 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  echo $? >"$WORK/$name.rc"
  set -e
}
rc() { cat "$WORK/$1.rc"; }
# A db_bench V2 result line for benchmark $2 (benchmark.sh's NF/$8 test).
result_re() { printf '^%-12s : +[0-9.]+ micros/op [0-9]+ ops/sec [0-9.]+ seconds [0-9]+ operations;' "$1"; }

case "$CASE" in
refuse)
  # Everything is checked before anything runs: an unknown benchmark late in
  # the list, a malformed repeat suffix, an unknown flag.
  bench late --num=100 --benchmarks=fillseq,frobnicate
  [ "$(rc late)" != 0 ] && pass || fail "unknown benchmark: exit status 0"
  expect late "^unknown benchmark 'frobnicate'" "$WORK/late.err"
  refute late "DB path|operations;" "$WORK/late.out"
  [ ! -e "$WORK/db" ] && pass || fail "unknown benchmark: the database was created"
  bench suffix --num=100 --benchmarks=fillseq,overwrite[X0]
  [ "$(rc suffix)" != 0 ] && pass || fail "bad suffix: exit status 0"
  expect suffix "^unknown benchmark 'overwrite\[X0\]'" "$WORK/suffix.err"
  refute suffix "DB path|operations;" "$WORK/suffix.out"
  bench flag --num=100 --benchmarks=fillseq --frobnicate=1
  [ "$(rc flag)" != 0 ] && pass || fail "unknown flag: exit status 0"
  expect flag "unknown command line flag 'frobnicate'" "$WORK/flag.err"
  refute flag "DB path|operations;" "$WORK/flag.out"
  ;;
statistics)
  # --statistics: RocksDB's dump after the last benchmark, as db_bench
  # prints it (STATISTICS:, then tickers and histograms), fenced and raw.
  for f in true false; do
    bench "stats_$f" --fenced=$f --num=2000 --statistics \
      --benchmarks=fillrandom,readrandom
    [ "$(rc stats_$f)" = 0 ] && pass || fail "statistics fenced=$f: exit status $(rc stats_$f)"
    expect "stats_$f" "^STATISTICS:$" "$WORK/stats_$f.out"
    expect "stats_$f" "^rocksdb\.number\.keys\.written COUNT : [1-9][0-9]*$" "$WORK/stats_$f.out"
    expect "stats_$f" "^rocksdb\.number\.keys\.read COUNT : 2000$" "$WORK/stats_$f.out"
    expect "stats_$f" "^rocksdb\.db\.get\.micros P50 : [0-9.]+ P95 : [0-9.]+ P99 : [0-9.]+ P100 : [0-9.]+ COUNT : 2000 SUM : [0-9]+$" "$WORK/stats_$f.out"
    # The dump comes after the last result line.
    [ "$(grep -n '^STATISTICS:' "$WORK/stats_$f.out" | cut -d: -f1)" -gt \
      "$(grep -n '^readrandom ' "$WORK/stats_$f.out" | cut -d: -f1)" ] && pass ||
      fail "statistics fenced=$f: the dump is not after the results"
  done
  bench nostats --num=200 --benchmarks=fillrandom
  refute nostats "^STATISTICS:" "$WORK/nostats.out"
  ;;
report)
  # --report_interval_seconds / --report_file: db_bench's CSV, one line per
  # interval of the (last) benchmark run.
  bench report --num=100000 --duration=3 --report_interval_seconds=1 \
    --report_file="$WORK/report.csv" --benchmarks=fillrandom
  [ "$(rc report)" = 0 ] && pass || fail "report: exit status $(rc report)"
  [ "$(head -1 "$WORK/report.csv")" = "secs_elapsed,interval_qps" ] && pass ||
    fail "report: header is '$(head -1 "$WORK/report.csv")'"
  lines=$(tail -n +2 "$WORK/report.csv" | grep -Ec '^[0-9]+,[0-9]+$' || true)
  all=$(tail -n +2 "$WORK/report.csv" | wc -l)
  [ "$lines" -ge 2 ] && [ "$lines" = "$all" ] && pass ||
    fail "report: $lines good of $all lines: $(cat "$WORK/report.csv")"
  # The intervals add up to at most the ops done, and the seconds rise.
  total=$(awk -F, 'NR > 1 { s += $2 } END { print s }' "$WORK/report.csv")
  done_ops=$(awk '$1 == "fillrandom" { print $9 }' "$WORK/report.out")
  [ "$total" -gt 0 ] && [ "$total" -le "$done_ops" ] && pass ||
    fail "report: intervals sum to $total, $done_ops ops done"
  awk -F, 'NR > 2 && $1 <= prev { exit 1 } { prev = $1 }' "$WORK/report.csv" &&
    pass || fail "report: seconds do not rise"
  # An unwritable report file is refused before anything runs.
  bench badreport --num=100 --report_interval_seconds=1 \
    --report_file="$WORK/no/such/dir/r.csv" --benchmarks=fillseq
  [ "$(rc badreport)" != 0 ] && pass || fail "unwritable report file: exit status 0"
  expect badreport "^Can't open .*/no/such/dir/r.csv" "$WORK/badreport.err"
  refute badreport "DB path|operations;" "$WORK/badreport.out"
  ;;
intervals)
  # --stats_interval_seconds: db_bench's per-thread lines on stderr.
  bench intervals --num=100000 --duration=3 --threads=2 \
    --stats_interval_seconds=1 --benchmarks=fillrandom
  [ "$(rc intervals)" = 0 ] && pass || fail "intervals: exit status $(rc intervals)"
  re='^[0-9]{4}/[0-9]{2}/[0-9]{2}-[0-9]{2}:[0-9]{2}:[0-9]{2}  \.\.\. thread [01]: \([0-9]+,[0-9]+\) ops and \([0-9.]+,[0-9.]+\) ops/second in \([0-9.]+,[0-9.]+\) seconds$'
  n=$(grep -Ec "$re" "$WORK/intervals.err" || true)
  [ "$n" -ge 2 ] && pass || fail "intervals: $n interval lines in: $(cat "$WORK/intervals.err")"
  refute intervals "finished [0-9]+ ops" "$WORK/intervals.err"
  # --stats_interval=N: a line every N ops of a thread.
  bench every --num=5000 --stats_interval=1000 --benchmarks=fillseq
  n=$(grep -Ec "$re" "$WORK/every.err" || true)
  [ "$n" = 5 ] && pass || fail "stats_interval=1000: $n lines for 5000 ops"
  ;;
benchmarks)
  # db_bench's benchmarks, with db_bench's result lines and messages, on
  # fencedkv and on raw RocksDB; tuning flags accepted.
  for f in true false; do
    bench "b_$f" --fenced=$f --num=3000 --progress_reports=false --batch_size=4 --readwritepercent=80 \
      --seek_nexts=2 --max_background_jobs=3 \
      --level0_file_num_compaction_trigger=2 \
      --benchmarks=fillbatch,seekrandom,multireadrandom,readrandomwriterandom,fillrandom
    [ "$(rc b_$f)" = 0 ] && pass || fail "benchmarks fenced=$f: exit status $(rc b_$f)"
    o="$WORK/b_$f.out"
    expect "fillbatch $f" "$(result_re fillbatch) +[0-9.]+ MB/s$" "$o"
    expect "fillbatch $f" "^fillbatch .* 3000 operations;" "$o"
    expect "seekrandom $f" "$(result_re seekrandom) +[0-9.]+ MB/s \(3000 of 3000 found\)$" "$o"
    # db_bench's seekrandom message ends with a newline: an empty line follows.
    [ -z "$(sed -n "$(( $(grep -n '^seekrandom ' "$o" | cut -d: -f1) + 1 ))p" "$o")" ] &&
      pass || fail "seekrandom $f: no empty line after the result"
    expect "multireadrandom $f" "$(result_re multireadrandom) +[0-9.]+ MB/s \(3000 of 3000 found\)$" "$o"
    expect "multireadrandom $f" "^entries_per_batch = 4$" "$WORK/b_$f.err"
    expect "readrandomwriterandom $f" "$(result_re readrandomwriterandom) \( reads:2400 writes:600 total:3000 found:2400\)$" "$o"
    grep -q "^Fenced:     $( [ $f = true ] && echo true || echo 'false (raw RocksDB)')$" "$o" &&
      pass || fail "benchmarks fenced=$f: wrong Fenced: header"
  done
  # The tuning reached RocksDB (its OPTIONS file).
  opts=$(ls "$WORK"/db/OPTIONS-* | sort | tail -1)
  expect options "^ *max_background_jobs=3$" "$opts"
  expect options "^ *level0_file_num_compaction_trigger=2$" "$opts"
  bench badjobs --num=10 --max_background_jobs=0 --benchmarks=fillseq
  [ "$(rc badjobs)" != 0 ] && pass || fail "max_background_jobs=0: exit status 0"
  expect badjobs "Invalid value for --max_background_jobs: 0" "$WORK/badjobs.err"
  bench badrw --num=10 --readwritepercent=101 --benchmarks=fillseq
  [ "$(rc badrw)" != 0 ] && pass || fail "readwritepercent=101: exit status 0"
  ;;
holders)
  # --token_holders: every write workload takes its domain's holder's
  # token; nothing stale is applied (verify), for every write workload and
  # both kinds of domain.
  for domain in key prefix:12; do
    bench "h_$domain" --num=4000 --threads=2 --token_holders=64 \
      --token_renew_every=200 --fence_domain=$domain \
      --benchmarks=fillseq,fillrandom,overwrite,fillbatch,fencedbatch,deleterandom,readrandomwriterandom,readwhilewriting,verify
    [ "$(rc h_$domain)" = 0 ] && pass || fail "holders $domain: exit status $(rc h_$domain)"
    expect "holders $domain" "^FenceVerify Success\." "$WORK/h_$domain.out"
  done
  # Holders renew, so many writes are below their stripe's mark and their
  # check needs a lookup. Without the fence cache every lookup is a RocksDB
  # read, which --statistics counts. With one holder (the default) every
  # write is at the mark: no read.
  reads() { awk '/^rocksdb.number.keys.read COUNT/ { print $4 }' "$WORK/$1.out"; }
  bench h64 --num=4000 --token_holders=64 --fence_cache_bytes=0 --statistics \
    --benchmarks=fillrandom,overwrite
  [ "$(reads h64)" -gt 3000 ] && pass || fail "64 holders: only $(reads h64) lookups for 8000 writes"
  bench h1 --num=4000 --fence_cache_bytes=0 --statistics --benchmarks=fillrandom,overwrite
  [ "$(reads h1)" = 0 ] && pass || fail "1 holder: $(reads h1) lookups"
  # The fence view is made resident at open, as the server does
  # (--fence_cache_prefault): a 20-key run then peaks above the budget.
  # Without it only the pages its writes touch are (huge pages: 2 MiB each).
  peak() { awk '/^Peak RSS:/ { print int($3) }' "$WORK/$1.out"; }
  bench pf --num=20 --fence_cache_bytes=268435456 --benchmarks=fillrandom
  [ "$(peak pf)" -ge 256 ] && pass || fail "prefault: peak RSS $(peak pf) MB, budget 256"
  bench nopf --num=20 --fence_cache_bytes=268435456 --fence_cache_prefault=false \
    --benchmarks=fillrandom
  [ "$(peak nopf)" -lt 200 ] && pass || fail "no prefault: peak RSS $(peak nopf) MB"
  # Raw RocksDB runs the same workloads.
  bench hraw --fenced=false --num=4000 --token_holders=64 \
    --benchmarks=fillrandom,overwrite,readrandomwriterandom
  [ "$(rc hraw)" = 0 ] && pass || fail "holders raw: exit status $(rc hraw)"
  expect hraw "$(result_re overwrite)" "$WORK/hraw.out"
  ;;
foreign_db)
  # --db is destroyed only if it is missing, empty, a fencedkv database or
  # a raw database fenced_bench made (--fenced=false); anything else is
  # refused before anything is touched.
  # snapshot DIR: every file's name and checksum.
  snapshot() { (cd "$1" && find . -type f -exec md5sum {} + | sort); }
  # A plain RocksDB database: one fenced_bench made with --fenced=false,
  # without the mark that says so.
  bench mkplain --fenced=false --num=50 --benchmarks=fillseq
  [ "$(rc mkplain)" = 0 ] && pass || fail "plain: setup exit status $(rc mkplain)"
  rm -f "$WORK/db/FENCED_BENCH_RAW"
  before=$(snapshot "$WORK/db")
  for f in true false; do
    bench "plain_$f" --fenced=$f --num=10 --benchmarks=fillseq
    [ "$(rc plain_$f)" = 1 ] && pass || fail "plain fenced=$f: exit status $(rc plain_$f)"
    expect "plain_$f" "^fenced_bench: refusing --db .*/db: not a fencedkv database: " "$WORK/plain_$f.err"
    refute "plain_$f" "DB path|operations;" "$WORK/plain_$f.out"
    [ "$(snapshot "$WORK/db")" = "$before" ] && pass || fail "plain fenced=$f: the database changed"
  done
  # A directory of files named like RocksDB's, and no database.
  rm -rf "$WORK/db"; mkdir "$WORK/db"
  for n in 000001.log LOG LOG.old.1 notes.txt; do echo "$n" >"$WORK/db/$n"; done
  before=$(snapshot "$WORK/db")
  bench files --num=10 --benchmarks=fillseq
  [ "$(rc files)" = 1 ] && pass || fail "files: exit status $(rc files)"
  expect files "^fenced_bench: refusing --db .*/db: not a fencedkv database: " "$WORK/files.err"
  [ "$(snapshot "$WORK/db")" = "$before" ] && pass || fail "files: files were removed or changed"
  # A server's store (NODE_ID, REPLICATION beside the database): refused
  # and left as it was. Before, fenced_bench deleted its RocksDB files and
  # then neither it nor the server could open what was left.
  rm -rf "$WORK/db"
  bench mkserver --num=50 --benchmarks=fillseq
  [ "$(rc mkserver)" = 0 ] && pass || fail "server store: setup exit status $(rc mkserver)"
  printf '0123456789abcdef0123456789abcdef\n' >"$WORK/db/NODE_ID"
  before=$(snapshot "$WORK/db")
  bench server_store --num=10 --benchmarks=fillseq
  [ "$(rc server_store)" = 1 ] && pass || fail "server store: exit status $(rc server_store)"
  expect server_store "^fenced_bench: refusing --db .*/db: .* holds a fencedkv-server's store" "$WORK/server_store.err"
  [ "$(snapshot "$WORK/db")" = "$before" ] && pass || fail "server store: files were removed or changed"
  rm -rf "$WORK/db"; mkdir "$WORK/db"
  for n in 000001.log LOG LOG.old.1 notes.txt; do echo "$n" >"$WORK/db/$n"; done
  # A refused --db leaves the report file of an earlier run as it was
  # ("Nothing was changed"): before, the check of the report path had
  # already emptied it.
  printf 'secs_elapsed,interval_qps\n1,1000\n' >"$WORK/old_report.csv"
  bench files_report --num=10 --benchmarks=fillseq --report_interval_seconds=1 \
    --report_file="$WORK/old_report.csv"
  [ "$(rc files_report)" = 1 ] && pass || fail "files + report: exit status $(rc files_report)"
  expect files_report "^fenced_bench: refusing --db " "$WORK/files_report.err"
  [ "$(cat "$WORK/old_report.csv")" = "$(printf 'secs_elapsed,interval_qps\n1,1000')" ] && pass ||
    fail "files + report: the earlier report file was changed: '$(cat "$WORK/old_report.csv")'"
  # A regular file.
  rm -rf "$WORK/db"; echo data >"$WORK/db"
  bench regular --num=10 --benchmarks=fillseq
  [ "$(rc regular)" = 1 ] && pass || fail "regular file: exit status $(rc regular)"
  expect regular "^fenced_bench: refusing --db .*/db: .*/db exists and is not a directory" "$WORK/regular.err"
  [ "$(cat "$WORK/db")" = data ] && pass || fail "regular file: changed"
  # What it may replace: an empty directory, its own databases, fenced and
  # raw, in turn.
  rm -f "$WORK/db"; mkdir "$WORK/db"
  for f in true false false true; do
    bench "own_$f" --fenced=$f --num=10 --benchmarks=fillseq,readrandom
    [ "$(rc own_$f)" = 0 ] && pass || fail "own fenced=$f: exit status $(rc own_$f)"
    expect "own_$f" "$(result_re readrandom) .*\(10 of 10 found\)" "$WORK/own_$f.out"
  done
  ;;
flag_bounds)
  # Thread counts the machine cannot start are refused, not an abort.
  bench threads --num=10 --threads=100000 --benchmarks=fillrandom
  [ "$(rc threads)" = 1 ] && pass || fail "threads=100000: exit status $(rc threads)"
  expect threads "Invalid value for --threads: 100000 \(must be 1\.\.1024\)" "$WORK/threads.err"
  bench jobs --num=10 --max_background_jobs=1000000 --benchmarks=fillseq
  [ "$(rc jobs)" = 1 ] && pass || fail "max_background_jobs=1000000: exit status $(rc jobs)"
  expect jobs "Invalid value for --max_background_jobs: 1000000 \(must be 1\.\.256\)" "$WORK/jobs.err"
  bench jobs257 --num=10 --max_background_jobs=257 --benchmarks=fillseq
  [ "$(rc jobs257)" = 1 ] && pass || fail "max_background_jobs=257: exit status $(rc jobs257)"
  # Values refused before anything runs: a key_size past max_key_size (it
  # ran for seconds and grew to 1.9 GB before failing), counts below -1
  # (taken as --num), a negative fence cache (taken as 0), and an empty
  # --benchmarks (it ran nothing and exited 0).
  for bad in key_size=1000000000 reads=-5 writes=-2 deletes=-3 \
      fence_cache_bytes=-1 benchmarks=; do
    name=bad_${bad%%=*}
    bench "$name" --num=10 --"$bad"
    [ "$(rc "$name")" = 1 ] && pass || fail "--$bad: exit status $(rc "$name")"
    expect "$name" "Invalid value for --${bad%%=*}" "$WORK/$name.err"
  done
  [ ! -e "$WORK/db" ] && pass || fail "refused flags: the database was created"
  # The bounds themselves are accepted.
  bench top --num=10 --writes=2 --threads=1024 --max_background_jobs=256 \
    --benchmarks=fillrandom
  [ "$(rc top)" = 0 ] && pass || fail "threads=1024 jobs=256: exit status $(rc top)"
  expect top "$(result_re fillrandom)" "$WORK/top.out"
  ;;
strict_verify)
  # Strict mode: AdvanceFence(t) stores t - 1 (docs/contract.md); verify
  # expects that, with and without a floor and after writes.
  bench strict --num=100 --fence_mode=strict --benchmarks=advancefence,verify
  [ "$(rc strict)" = 0 ] && pass || fail "strict advancefence: exit status $(rc strict)"
  expect strict "^FenceVerify Success\." "$WORK/strict.out"
  bench strict2 --num=100 --fence_mode=strict --fence_floor=1000 \
    --benchmarks=fillseq,advancefence,fillrandom,advancefence,verify
  [ "$(rc strict2)" = 0 ] && pass || fail "strict mixed: exit status $(rc strict2)"
  expect strict2 "^FenceVerify Success\." "$WORK/strict2.out"
  bench strict3 --num=100 --fence_mode=strict --fence_domain=prefix:14 \
    --benchmarks=fillseq,advancefence,verify
  [ "$(rc strict3)" = 0 ] && pass || fail "strict prefix: exit status $(rc strict3)"
  expect strict3 "^FenceVerify Success\." "$WORK/strict3.out"
  ;;
use_existing)
  # --use_existing_db needs a database: a missing one is refused (as
  # db_bench does), and nothing is created.
  bench missing --use_existing_db --num=10 --benchmarks=readrandom,verify
  [ "$(rc missing)" = 1 ] && pass || fail "missing: exit status $(rc missing)"
  expect missing "^fenced_bench: --use_existing_db: no database at .*/db" "$WORK/missing.err"
  refute missing "DB path|operations;" "$WORK/missing.out"
  [ ! -e "$WORK/db" ] && pass || fail "missing: something was created"
  rm -rf "$WORK/db"; mkdir "$WORK/db"
  bench empty --use_existing_db --num=10 --benchmarks=readrandom
  [ "$(rc empty)" = 1 ] && pass || fail "empty dir: exit status $(rc empty)"
  [ -z "$(ls -A "$WORK/db")" ] && pass || fail "empty dir: files were created"
  for f in true false; do
    rm -rf "$WORK/db"
    bench "missing_$f" --fenced=$f --use_existing_db --num=10 --benchmarks=readrandom
    [ "$(rc missing_$f)" = 1 ] && pass || fail "missing fenced=$f: exit status $(rc missing_$f)"
    [ ! -e "$WORK/db" ] && pass || fail "missing fenced=$f: something was created"
    # An existing one is used.
    bench "fill_$f" --fenced=$f --num=10 --benchmarks=fillseq
    bench "reuse_$f" --fenced=$f --use_existing_db --num=10 --benchmarks=readrandom
    [ "$(rc reuse_$f)" = 0 ] && pass || fail "reuse fenced=$f: exit status $(rc reuse_$f)"
    expect "reuse_$f" "$(result_re readrandom) .*\(10 of 10 found\)" "$WORK/reuse_$f.out"
  done
  ;;
floor)
  # --fence_floor must leave room above it for every token the run takes
  # (tokens are at most 2^64-1): refused before anything runs.
  max=18446744073709551615
  bench top --num=10 --fence_floor=$max --benchmarks=fillseq
  [ "$(rc top)" = 1 ] && pass || fail "floor 2^64-1: exit status $(rc top)"
  expect top "^Invalid value for --fence_floor: $max " "$WORK/top.err"
  refute top "DB path|operations;" "$WORK/top.out"
  [ ! -e "$WORK/db" ] && pass || fail "floor 2^64-1: the database was created"
  # Monotonic, one holder: one token (the run's epoch) above the floor.
  bench mono --num=10 --fence_floor=18446744073709551614 --benchmarks=fillseq,verify
  [ "$(rc mono)" = 0 ] && pass || fail "floor 2^64-2 monotonic: exit status $(rc mono)"
  expect mono "^FenceVerify Success\." "$WORK/mono.out"
  # Strict: one more per write (10), so 2^64-12 is the highest floor.
  bench strict --num=10 --fence_mode=strict --fence_floor=18446744073709551605 \
    --benchmarks=fillseq
  [ "$(rc strict)" = 1 ] && pass || fail "strict floor 2^64-12+1: exit status $(rc strict)"
  expect strict "^Invalid value for --fence_floor: 18446744073709551605 .*11 tokens" "$WORK/strict.err"
  bench strictok --num=10 --fence_mode=strict --fence_floor=18446744073709551604 \
    --benchmarks=fillseq,verify
  [ "$(rc strictok)" = 0 ] && pass || fail "strict floor 2^64-12: exit status $(rc strictok)"
  expect strictok "^FenceVerify Success\." "$WORK/strictok.out"
  # Workloads that take a token per op count them: advancefence, 2 threads.
  bench adv --num=100 --threads=2 --fence_floor=18446744073709551515 \
    --benchmarks=fillseq,advancefence
  [ "$(rc adv)" = 1 ] && pass || fail "advancefence floor: exit status $(rc adv)"
  expect adv "^Invalid value for --fence_floor: .*201 tokens" "$WORK/adv.err"
  ;;
sizes)
  # Sizes are bounded: write_buffer_size 64 KiB..64 GiB, value_size up to
  # the library's Options::max_value_size (64 MiB).
  for v in -1 0 65535 68719476737; do
    bench "wb_$v" --num=10 --write_buffer_size=$v --benchmarks=fillseq
    [ "$(rc wb_$v)" = 1 ] && pass || fail "write_buffer_size=$v: exit status $(rc wb_$v)"
    expect "wb_$v" "Invalid value for --write_buffer_size: $v \(must be 65536\.\.68719476736\)" "$WORK/wb_$v.err"
  done
  for v in 67108865 2147483647 -1; do
    bench "vs_$v" --num=1 --value_size=$v --benchmarks=fillseq
    [ "$(rc vs_$v)" = 1 ] && pass || fail "value_size=$v: exit status $(rc vs_$v)"
    expect "vs_$v" "Invalid value for --value_size: $v \(must be 0\.\.67108864\)" "$WORK/vs_$v.err"
  done
  [ ! -e "$WORK/db" ] && pass || fail "refused sizes: the database was created"
  bench wbok --num=10 --write_buffer_size=65536 --benchmarks=fillseq
  [ "$(rc wbok)" = 0 ] && pass || fail "write_buffer_size=65536: exit status $(rc wbok)"
  bench vsok --num=2 --value_size=67108864 --benchmarks=fillseq,readrandom
  [ "$(rc vsok)" = 0 ] && pass || fail "value_size=64 MiB: exit status $(rc vsok)"
  ;;
*)
  echo "unknown case $CASE" >&2
  exit 2
  ;;
esac

echo "$PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
