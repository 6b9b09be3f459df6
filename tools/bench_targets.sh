#!/usr/bin/env bash
# Measures fenced_bench's performance targets (issue: fenced writes at raw
# RocksDB speed): every workload fenced and with --fenced=false in the same
# run, 3 interleaved repeats, medians, ratios. A benchmark, not a test.
#
# Usage: tools/bench_targets.sh [build-dir] [repeats]
#   NUM=<keys> (default 1000000); TARGETS="base holders" selects target groups:
#   base = the single-holder targets, holders = --token_holders=64 (each
#   domain's writes carry one of 64 holders' tokens, renewed now and then, so
#   most checks need a lookup).
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
bench="$build/tools/fenced_bench"
[ -x "$bench" ] || { echo "no $bench: build first (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fenced_targets.XXXXXX")
trap 'rm -rf "$work"' EXIT
out="$work/results.txt"
num=${NUM:-1000000}
groups=" ${TARGETS:-base holders} "

run() {  # run <tag> <args...>: appends "tag name ops_per_sec" lines
  local tag=$1; shift
  echo "+ fenced_bench $*" >&2
  "$bench" --db="$work/db" --progress_reports=false "$@" 2>/dev/null |
    awk -v tag="$tag" 'NF >= 10 && $8 == "seconds" { print tag, $1, $5 }' >> "$out"
}

for r in $(seq 1 "$repeats"); do
  for f in true false; do
    if [[ $groups == *" base "* ]]; then
      run "t1-$f" --fenced=$f --seed=$r --num=$num --threads=1 \
        --benchmarks=fillrandom,overwrite,readrandom,fencedread
      run "t2-$f" --fenced=$f --seed=$r --num=$num --threads=2 \
        --benchmarks=fillrandom,overwrite
      run "sync8-$f" --fenced=$f --seed=$r --num=$num --threads=8 --sync=true \
        --writes=4000 --benchmarks=fillrandom
      run "batch16-$f" --fenced=$f --seed=$r --num=$num --batch_size=16 \
        --benchmarks=fillseq,fencedbatch
    fi
    if [[ $groups == *" holders "* ]]; then
      run "h64t1-$f" --fenced=$f --seed=$r --num=$num --threads=1 \
        --token_holders=64 --benchmarks=fillrandom,overwrite
      run "h64t2-$f" --fenced=$f --seed=$r --num=$num --threads=2 \
        --token_holders=64 --benchmarks=fillrandom,overwrite
    fi
  done
  if [[ $groups == *" base "* ]]; then
    run "stale-true" --fenced=true --seed=$r --num=$num \
      --benchmarks=fillseq,stalewrite,fillrandom
  fi
done

python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tag, name, ops = line.split()
    d[(tag, name)].append(int(ops))
med = {k: statistics.median(v) for k, v in d.items()}
def row(label, a, b, target):
    if a not in med or b not in med:
        return  # group not run
    r = med[a] / med[b]
    ok = "ok" if r >= target else "MISSED"
    print(f"{label:44s} {med[a]:>10.0f} {med[b]:>10.0f} {r:7.3f}  >= {target:<5} {ok}")
print(f"{'target':44s} {'ops/sec':>10s} {'baseline':>10s} {'ratio':>7s}")
row("fillrandom threads=1 (fenced / raw)", ("t1-true","fillrandom"), ("t1-false","fillrandom"), 0.90)
row("overwrite threads=1 (fenced / raw)", ("t1-true","overwrite"), ("t1-false","overwrite"), 0.90)
row("fillrandom threads=2 (fenced / raw)", ("t2-true","fillrandom"), ("t2-false","fillrandom"), 0.90)
row("overwrite threads=2 (fenced / raw)", ("t2-true","overwrite"), ("t2-false","overwrite"), 0.90)
row("readrandom (fenced / raw)", ("t1-true","readrandom"), ("t1-false","readrandom"), 0.97)
row("fencedread / raw readrandom", ("t1-true","fencedread"), ("t1-false","readrandom"), 0.90)
row("stalewrite / fenced fillrandom", ("stale-true","stalewrite"), ("stale-true","fillrandom"), 3.0)
row("sync threads=8 fillrandom (fenced / raw)", ("sync8-true","fillrandom"), ("sync8-false","fillrandom"), 0.90)
row("fencedbatch batch_size=16 (fenced / raw)", ("batch16-true","fencedbatch"), ("batch16-false","fencedbatch"), 0.85)
row("fillrandom 64 holders threads=1 (f / raw)", ("h64t1-true","fillrandom"), ("h64t1-false","fillrandom"), 0.85)
row("overwrite 64 holders threads=1 (f / raw)", ("h64t1-true","overwrite"), ("h64t1-false","overwrite"), 0.85)
row("fillrandom 64 holders threads=2 (f / raw)", ("h64t2-true","fillrandom"), ("h64t2-false","fillrandom"), 0.85)
row("overwrite 64 holders threads=2 (f / raw)", ("h64t2-true","overwrite"), ("h64t2-false","overwrite"), 0.85)
print("\nall runs (ops/sec):")
for k in sorted(d): print(" ", k[0], k[1], d[k])
PY
