#!/usr/bin/env bash
# Builds a libFuzzer target (tests/fuzz, with ASan and UBSan) into
# ./build-fuzz and fuzzes it for SECONDS, or replays inputs.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   fuzz, then report
#   scripts/fuzz.sh TARGET FILE|DIR...                    replay (reproduce)
#
# TARGET: engine_model (engine operations against the model), log_batch (a
# replica fed its primary's log with damaged batches), command (the
# server's command layer on a real DB), resp_parser (the RESP parser).
#
# Needs Debian's clang-14 and libclang-rt-14-dev (libFuzzer and the
# sanitizer runtimes); installed with apt-get here if missing. Runs under
# nice -n 10, one process. The corpus grows in build-fuzz/corpus/TARGET
# (seeded from tests/fuzz/corpus/TARGET, which is only read); a finding is
# saved in build-fuzz/findings/TARGET/ and makes the script exit 1. To keep
# one as a regression input, minimize it (add -minimize_crash=1 -runs=10000
# to a replay of the file), copy it into tests/fuzz/corpus/TARGET/ and the
# default build's ctest replays it (fuzz_corpus_TARGET).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
target=$1
shift
case "$target" in
  engine_model) max_len=256 ;;
  log_batch) max_len=512 ;;
  command) max_len=2048 ;;
  resp_parser) max_len=4096 ;;
  *) usage ;;
esac

if ! command -v clang++-14 >/dev/null 2>&1 ||
   ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "fuzz: installing clang-14 libclang-rt-14-dev" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    clang-14 libclang-rt-14-dev >/dev/null
fi

build=build-fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DFENCEDKV_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
  -DFENCEDKV_BUILD_TOOLS=OFF -DFENCEDKV_INSTALL=OFF >/dev/null
nice -n 10 cmake --build "$build" -j2 --target "${target}_fuzzer" >/dev/null
bin=$build/tests/fuzz/${target}_fuzzer
seeds=tests/fuzz/corpus/$target
dict=()
[ -f "tests/fuzz/$target.dict" ] && dict=("-dict=tests/fuzz/$target.dict")

if ! [[ $1 =~ ^[0-9]+$ ]]; then  # replay files, or every file of a directory
  files=()
  for a in "$@"; do
    if [ -d "$a" ]; then
      while IFS= read -r f; do files+=("$f"); done < <(find "$a" -type f | sort)
    else
      files+=("$a")
    fi
  done
  mkdir -p "$build/findings/$target"
  if ! nice -n 10 "$bin" -artifact_prefix="$build/findings/$target/" "${files[@]}" \
      > "$build/replay-$target.log" 2>&1; then
    grep -vE '^(INFO|Executed|Running|\*\*\*)' "$build/replay-$target.log" | head -60
    echo "fuzz: FINDING replaying ${#files[@]} inputs (log: $build/replay-$target.log)"
    exit 1
  fi
  echo "fuzz: replayed ${#files[@]} inputs, no finding"
  exit 0
fi
seconds=$1
shift
corpus=$build/corpus/$target
findings=$build/findings/$target
mkdir -p "$corpus" "$findings"
seed_dirs=()
[ -d "$seeds" ] && seed_dirs=("$seeds")
log=$build/fuzz-$target.log
started=$build/fuzz-$target.started  # findings newer than this are this run's
touch "$started"
echo "fuzz: $target for ${seconds}s; log in $log" >&2
set +e
nice -n 10 "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=30 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$findings/" \
  "${dict[@]}" "$@" "$corpus" "${seed_dirs[@]}" >"$log" 2>&1
rc=$?
set -e

stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
cov=$(sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 edges, ft \2 features/p' <<<"$last")
echo "target:      $target"
echo "executions:  $(stat number_of_executed_units) in ${seconds}s ($(stat average_exec_per_sec) exec/s)"
echo "coverage:    ${cov:-unknown} (build-fuzz/corpus/$target: $(ls "$corpus" | wc -l) inputs)"
echo "new units:   $(stat new_units_added)"
echo "peak rss:    $(stat peak_rss_mb) MiB"
found=$(find "$findings" -type f -newer "$started" | wc -l)
echo "findings:    $found new in $findings"
if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
  grep -E 'ERROR|FINDING|MISMATCH|SUMMARY' "$log" | head -5
  echo "fuzz: see $log; replay with: scripts/fuzz.sh $target $findings/<file>" >&2
  exit 1
fi
