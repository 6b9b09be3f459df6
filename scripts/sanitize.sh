#!/usr/bin/env bash
# Builds fencedkv with a sanitizer into its own build directory and runs the
# test suite there (or the part the ctest arguments select).
#
#   scripts/sanitize.sh address [ctest args...]   ASan + UBSan, in build-asan
#   scripts/sanitize.sh thread  [ctest args...]   TSan, in build-tsan
#
# e.g. scripts/sanitize.sh thread -L 'race|crash|e2e'
#      scripts/sanitize.sh thread -R 'FenceRace|ModelDB|DBTest|FenceTable'
#
# A sanitizer report fails the test that produced it (the process exits
# non-zero, children of e2e scripts included: the options below travel in
# the environment). RocksDB (Debian's build) is not instrumented; TSan's
# options and suppressions are compiled into the TSan build, each with its
# reason, in cmake/tsan_defaults.cc.
# Builds and tests run under nice -n 10 with 2 jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
kind=$1
shift
case "$kind" in
  address) build=build-asan ;;
  thread) build=build-tsan ;;
  *) echo "sanitize: address or thread, not '$kind'" >&2; exit 2 ;;
esac

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFENCEDKV_SANITIZE="$kind" >/dev/null
nice -n 10 cmake --build "$build" -j2

# Every process also writes its reports to $build/sanitizer-logs/, so a
# report from a server an e2e script started (whose exit status or stderr
# the script may not look at) still fails the run.
logs=$PWD/$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:log_path=$logs/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
export TSAN_OPTIONS="history_size=4:log_path=$logs/tsan"
cd "$build"
rc=0
nice -n 10 ctest -j2 --output-on-failure --timeout 900 "$@" || rc=$?
reports=$(grep -lE 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$logs"/* 2>/dev/null || true)
if [ -n "$reports" ]; then
  echo "sanitize: reports in:" $reports
  grep -h -A12 -E 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' $reports | head -80
  rc=1
else
  echo "sanitize: no $kind sanitizer report in $logs"
fi
exit $rc
