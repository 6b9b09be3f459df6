#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, and
# run the seed's scenario on the embedded API.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/tools/fencedkv_demo
