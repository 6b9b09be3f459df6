#!/usr/bin/env bash
# Runs the kill -9 crash loop of tests/crash_recovery_test.cc for N cycles
# in each mode (sync / nosync: synced or unsynced writes, SIGKILL is a
# process crash; power: SIGKILL through a FileSystem that keeps unsynced
# data in memory, i.e. a power cut) and prints the figures of each. Half
# the cycles use the "key" domain function, half "hashtag".
# Usage: scripts/crash_loop.sh N [build_dir]      (default build dir: build)
set -euo pipefail
N=${1:?usage: crash_loop.sh N [build_dir]}
BUILD=${2:-build}
TEST="$BUILD/tests/crash_recovery_test"
[ -x "$TEST" ] || { echo "$TEST not built (cmake --build $BUILD --target crash_recovery_test crash_child)" >&2; exit 1; }
HALF=$(( (N + 1) / 2 ))
rc=0
for mode in KillNineDuringSyncedFencedWrites KillNineDuringUnsyncedFencedWrites \
            PowerLossKeepsASyncedPrefix; do
  start=$(date +%s)
  out=$(FENCEDKV_CRASH_CYCLES=$HALF nice -n 10 "$TEST" --gtest_filter="CrashRecoveryTest.$mode" 2>&1) || rc=1
  end=$(date +%s)
  if grep -q '^crash recovery' <<<"$out"; then
    grep '^crash recovery' <<<"$out"
  else
    echo "$mode: FAILED after $((end - start)) s (violations: 1):"
    grep -B2 -A12 'Failure' <<<"$out" | head -40
  fi
done
exit $rc
