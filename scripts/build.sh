#!/usr/bin/env bash
# Configures and builds fencedkv into ./build (RelWithDebInfo: optimized,
# with symbols for perf and gdb). Arguments:
#   scripts/build.sh [--target T ...] [-- cmake configure args...]
# e.g. `scripts/build.sh --target fencedkv-server` builds only the server.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
# A build directory configured for another place (the tree was moved or
# copied) cannot be reused: CMake would refuse with a raw cache error.
if [ -f build/CMakeCache.txt ]; then
  cached=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/CMakeCache.txt)
  if [ -n "$cached" ] && [ "$cached" != "$PWD" ]; then
    echo "build.sh: ./build was configured for $cached, not $PWD (was the tree moved?)." >&2
    echo "build.sh: remove it and build again:  rm -rf build && bash scripts/build.sh" >&2
    exit 1
  fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
