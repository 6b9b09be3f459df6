#!/usr/bin/env bash
# The project's static checks, each printing OK or what it found; exits
# non-zero if any fails:
#   1. format:  clang-format (.clang-format) on every C++ file of the repo;
#   2. tidy:    clang-tidy (.clang-tidy) on the C++ files changed since BASE;
#   3. threads: a clang build of everything with -Wthread-safety -Werror, so
#               the GUARDED_BY / REQUIRES annotations are checked;
#   4. dupes:   `duplicates --change` since BASE (where the tool exists).
# Usage: scripts/check.sh [BASE]   (default BASE: origin/main, else HEAD~1)
# Needs clang-14, clang-format and clang-tidy (Debian: clang, clang-format,
# clang-tidy; installed by scripts/setup.sh --check).
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-$(git rev-parse -q --verify origin/main || git rev-parse HEAD~1)}
failed=()

mapfile -t all < <(git ls-files '*.cc' '*.h' | grep -v '^third_party/')
mapfile -t changed < <(git diff --name-only --diff-filter=AM "$BASE" -- '*.cc' '*.h' |
                       grep -v '^third_party/' || true)

echo "== 1. format (clang-format, ${#all[@]} files)"
bad=0
for f in "${all[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "  needs clang-format: $f"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -eq 0 ]; then echo "  OK"; else failed+=(format); fi

echo "== 2. tidy (clang-tidy, ${#changed[@]} changed files since $BASE)"
if [ ! -f build/compile_commands.json ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
out=$(for f in "${changed[@]}"; do
        case "$f" in *.cc) clang-tidy -p build --quiet "$f" 2>/dev/null ;; esac
      done | grep -E 'warning:|error:' || true)
if [ -z "$out" ]; then echo "  OK"; else echo "$out" | sed 's/^/  /'; failed+=(tidy); fi

echo "== 3. threads (clang -Wthread-safety, build-check/)"
cmake -S . -B build-check -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" >/dev/null &&
out=$(cmake --build build-check -j"$(nproc)" 2>&1)
if [ $? -eq 0 ]; then
  echo "  OK"
else
  echo "$out" | grep -E 'error|warning' | sort -u | head -40 | sed 's/^/  /'
  failed+=(threads)
fi

echo "== 4. dupes (duplicates --change since $BASE)"
if command -v duplicates >/dev/null 2>&1; then
  out=$(duplicates --change --base "$BASE" 2>&1)
  case "$out" in
    ""|"no duplicates"*) echo "  OK" ;;
    *) echo "$out" | sed 's/^/  /'; failed+=(dupes) ;;
  esac
else
  echo "  skipped: the duplicates tool is not on this machine"
fi

if [ ${#failed[@]} -eq 0 ]; then
  echo "check: all OK"
else
  echo "check: FAILED: ${failed[*]}"
  exit 1
fi
