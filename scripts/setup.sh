#!/usr/bin/env bash
# Installs everything fencedkv needs to build, test and benchmark on Debian 12,
# from Debian's own packages. Idempotent: does nothing when all are present.
# Run as root (or with sudo).
set -euo pipefail

PACKAGES=(
  # build
  cmake g++ make pkg-config
  # engine
  librocksdb-dev libgflags-dev
  # server
  libgoogle-glog-dev libasio-dev prometheus-cpp-dev libssl-dev
  libcurl4-openssl-dev nlohmann-json3-dev
  # tests
  googletest libgtest-dev libgmock-dev
  # real peers for tests and benchmarks
  redis-tools redis-server python3 python3-redis etcd-server etcd-client
  rocksdb-tools procps curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian starts these services on install; fencedkv's tests start their own
# instances on free ports, so stop the system-wide ones.
if command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now redis-server etcd >/dev/null 2>&1 || true
fi
