#!/usr/bin/env bash
# Fuzzes the RESP parser with libFuzzer + ASan + UBSan (needs clang and
# Debian's libclang-rt-14-dev). Usage: tools/fuzz_resp.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "install clang-14 and libclang-rt-14-dev" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fencedkv_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$cxx" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -Iserver \
  server/resp_parser_fuzzer.cc server/resp_parser.cc -o "$work/resp_fuzz"
mkdir -p "$work/corpus"
printf '*2\r\n$3\r\nGET\r\n$1\r\nk\r\n' > "$work/corpus/get"
printf 'SET k "v w" FENCE 1\r\n' > "$work/corpus/inline"
printf '*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n' > "$work/corpus/pipeline"
"$work/resp_fuzz" -max_total_time="$seconds" -print_final_stats=1 "$work/corpus"
