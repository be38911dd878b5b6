#!/usr/bin/env bash
# Installs everything admit needs to build, test, fuzz and benchmark, from Debian 12 packages only.
# Idempotent: when every package is already installed it does nothing (no apt-get update, no network).
#
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --bench   also the reference implementations the benchmarks compare against
set -euo pipefail

packages=(
  cmake ninja-build g++ clang clang-tidy clang-format libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libboost1.81-dev curl
  pkg-config libhiredis-dev libssl-dev openssl redis-server ccache mold python3-prometheus-client
  libyaml-cpp-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf
  python3-yaml dpkg-dev fakeroot file systemd shellcheck
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(golang-go golang-golang-x-time-dev golang-github-juju-ratelimit-dev golang-golang-x-sync-dev libguava-java
    default-jdk-headless cargo rustc librust-tokio-dev wrk redis-tools python3-limits python3-redis parallel valgrind)
  # bench/redis_compare.sh: npm for rate-limiter-flexible. A nodejs that ships its own npm (NodeSource's) conflicts
  # with Debian's npm package, so it is only installed when no npm is on PATH.
  command -v npm >/dev/null || packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if ((EUID != 0)); then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
