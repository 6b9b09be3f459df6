#!/usr/bin/env bash
# Installs fencedkv from a build tree into a temporary prefix, then builds and
# runs tests/consumer against it with find_package(fencedkv).
# Usage: install_test.sh <build-dir> <source-dir>
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/fencedkv_install.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# Installed headers: ours only, and none of them includes RocksDB.
test -f "$work/prefix/include/fencedkv/db.h"
test -f "$work/prefix/include/fencedkv/version.h"
test -f "$work/prefix/include/fencedkv/backup.h"
# The operator's tool comes with the package.
if [ -f "$build/tools/fencedkv-admin" ]; then
  "$work/prefix/bin/fencedkv-admin" --help | grep '^usage: fencedkv-admin' >/dev/null
fi
if grep -rl '#include <rocksdb' "$work/prefix/include"; then
  echo "FAIL: a public header includes RocksDB" >&2
  exit 1
fi
if [ -d "$work/prefix/include/db" ] || [ -d "$work/prefix/include/util" ]; then
  echo "FAIL: internal headers were installed" >&2
  exit 1
fi
cmake -S "$src/tests/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" -j2 >/dev/null
"$work/consumer/consumer" "$work/db"
