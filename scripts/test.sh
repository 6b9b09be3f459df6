#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: install dependencies,
# build, run every ctest suite (unit, race, crash, install, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest -j"$(nproc)" --output-on-failure --timeout 600 "$@"
