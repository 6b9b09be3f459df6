#!/usr/bin/env bash
# Runs Debian's /usr/bin/db_bench (package rocksdb-tools) and fenced_bench
# with the same flags and prints their result lines side by side.
# Use db_bench's benchmark names (fillseq, fillrandom, overwrite, readrandom,
# readseq, deleterandom, readwhilewriting, ...) -- fenced_bench runs them
# fenced. Note: db_bench runs with its own defaults (no bloom filter, its key
# format), so this ratio is not the cost of fencing; for that, run
# fenced_bench --fenced=false (same options, same driver), or
# tools/bench_targets.sh.
#   tools/compare.sh --benchmarks=fillrandom,readrandom --num=200000
# BUILD=<dir> selects the build (default ./build).
set -euo pipefail
build=${BUILD:-build}
fenced="$build/tools/fenced_bench"
[ -x "$fenced" ] || { echo "no $fenced: build first (scripts/build.sh)" >&2; exit 1; }
[ -x /usr/bin/db_bench ] || { echo "no /usr/bin/db_bench: apt-get install rocksdb-tools" >&2; exit 1; }
for a in "$@"; do
  case "$a" in --db=*|--fenced=*) echo "compare.sh picks --db itself; drop $a" >&2; exit 2;; esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/fencedkv_compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
lines() { awk 'NF >= 10 && $8 == "seconds"'; }
/usr/bin/db_bench --db="$work/db_bench" "$@" 2>/dev/null | lines > "$work/a"
"$fenced" --db="$work/fenced" "$@" 2>/dev/null | lines > "$work/b"
printf '%-14s %14s %14s %8s\n' benchmark "db_bench op/s" "fenced op/s" ratio
join -j 1 <(awk '{print $1, $5}' "$work/a" | sort -k1,1) \
          <(awk '{print $1, $5}' "$work/b" | sort -k1,1) |
  awk '{ printf "%-14s %14d %14d %8.3f\n", $1, $2, $3, ($2 ? $3 / $2 : 0) }'
echo
echo "db_bench:";     cat "$work/a"
echo "fenced_bench:"; cat "$work/b"
