#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, and
# run fencedkv-server with its built-in lease service on 127.0.0.1:7379
# (data in ./fencedkv-data). Extra arguments go to the server; Ctrl-C stops
# it cleanly. Try it from another shell:
#   redis-cli -p 7379 LEASE.ACQUIRE orders me 10000      # -> token, ttl
#   redis-cli -p 7379 SET orders:next 1 FENCE <token>
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh --target fencedkv-server
exec ./build/server/fencedkv-server --db="${FENCEDKV_DB:-fencedkv-data}" "$@"
