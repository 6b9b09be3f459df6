#!/usr/bin/env bash
# Runs redis_py_test.py (Debian python3-redis) against a fresh server.
# Usage: redis_py_test.sh /path/to/fencedkv-server
set -euo pipefail
FENCEDKV_SERVER=$1
source "$(dirname "$0")/lib.sh"
# Debian's python3-redis lives in the system interpreter (a pyenv python3
# earlier on PATH would not see it).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import redis' 2>/dev/null || { echo "python3-redis not installed (apt-get install python3-redis)" >&2; exit 1; }
start_server py
rc=0
"$PY" "$(dirname "$0")/redis_py_test.py" "$PORT_py" || rc=$?
stop_server py
check "python3-redis suite" 0 "$rc"
finish
