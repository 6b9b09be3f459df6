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
#   PAIRED=1: the holders targets run fenced and raw at the same time (each
#   --duration=${DURATION:-5} s), so both see the same load; on a machine
#   shared with other work that varies less than runs one after the other.
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

run() {  # run <tag> <args...>: appends "tag name ops_per_sec cpu|wall repeat"
  local tag=$1; shift
  echo "+ fenced_bench $*" >&2
  "$bench" --db="$work/db-$tag" --progress_reports=false --cpu_time "$@" 2>&1 |
    awk -v tag="$tag" -v r="$r" '
      NF >= 10 && $8 == "seconds" { print tag, $1, $5, "wall", r }
      $2 == ":" && $3 == "cpu" { print tag, $1, $6, "cpu", r }' >> "$out"
  rm -rf "$work/db-$tag"
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
  done
  if [[ $groups == *" holders "* ]]; then
    for t in 1 2; do
      args=(--seed="$r" --num="$num" --threads=$t --token_holders=64
            --benchmarks=fillrandom,overwrite)
      if [ -n "${PAIRED:-}" ]; then
        run "h64t$t-true" --fenced=true "${args[@]}" --duration="${DURATION:-5}" &
        run "h64t$t-false" --fenced=false "${args[@]}" --duration="${DURATION:-5}" &
        wait
      else
        run "h64t$t-true" --fenced=true "${args[@]}"
        run "h64t$t-false" --fenced=false "${args[@]}"
      fi
    done
  fi
  if [[ $groups == *" base "* ]]; then
    run "stale-true" --fenced=true --seed=$r --num=$num \
      --benchmarks=fillseq,stalewrite,fillrandom
  fi
done

python3 - "$out" <<'PY'
import collections, statistics, sys
# Wall-clock ops/sec decide the targets (ratio of the medians); beside them
# the median of the ratios of runs of the same repeat, and the same for ops
# per CPU-second (--cpu_time), which vary less on a machine shared with
# other loads.
d = collections.defaultdict(list)
cpu = collections.defaultdict(list)
by_run = {}
for line in open(sys.argv[1]):
    tag, name, ops, kind, rep = line.split()
    (d if kind == "wall" else cpu)[(tag, name)].append(float(ops))
    by_run[(tag, name, kind, rep)] = float(ops)
med = {k: statistics.median(v) for k, v in d.items()}
def run_ratios(a, b, kind):
    reps = sorted({k[3] for k in by_run})
    rs = [by_run[a + (kind, x)] / by_run[b + (kind, x)] for x in reps
          if a + (kind, x) in by_run and b + (kind, x) in by_run]
    return f"{statistics.median(rs):7.3f}" if rs else " " * 7
def row(label, a, b, target):
    if a not in med or b not in med:
        return  # group not run
    r = med[a] / med[b]
    ok = "ok" if r >= target else "MISSED"
    print(f"{label:44s} {med[a]:>10.0f} {med[b]:>10.0f} {r:7.3f}  >= {target:<5} {ok:6s} "
          f"{run_ratios(a, b, 'wall')} {run_ratios(a, b, 'cpu')}")
print(f"{'target':44s} {'ops/sec':>10s} {'baseline':>10s} {'ratio':>7s}  {'target':8s} "
      f"{'':6s} {'per-run':>7s} {'cpu':>7s}")
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
print("\nall runs (ops/sec; ops per cpu-second):")
for k in sorted(d): print(" ", k[0], k[1], [int(x) for x in d[k]], [int(x) for x in cpu[k]])
PY
