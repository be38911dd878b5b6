#!/usr/bin/env bash
# Checks the Debian packages that `cmake --build --preset release --target package` made in BUILD_DIR: their names,
# Depends lines and contents; then unpacks them into a scratch directory and uses them there as a new user would —
# `admit serve` on the packaged rules answering /healthcheck and draining on SIGTERM (the container's steps), the
# systemd unit verified by systemd-analyze, and examples/consumer built against the unpacked libadmit-dev.
#   scripts/check-packages.sh build/release
set -euo pipefail
build=$(cd "${1:?usage: check-packages.sh BUILD_DIR}" && pwd)
source_dir=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "check-packages: $*" >&2; exit 1; }

shopt -s nullglob
tool=("$build"/admit_*_amd64.deb)
dev=("$build"/libadmit-dev_*_amd64.deb)
((${#tool[@]} == 1)) || fail "expected one admit_<version>_amd64.deb in $build, found ${#tool[@]}"
((${#dev[@]} == 1)) || fail "expected one libadmit-dev_<version>_amd64.deb in $build, found ${#dev[@]}"
version=$(basename "${tool[0]}" | sed -E 's/^admit_(.*)_amd64\.deb$/\1/')
[[ "$(basename "${dev[0]}")" == "libadmit-dev_${version}_amd64.deb" ]] || fail "the two packages' versions differ"
echo "packages: $(basename "${tool[0]}"), $(basename "${dev[0]}")"

field() { dpkg-deb --field "$1" "$2"; }
[[ "$(field "${tool[0]}" Package)" == admit ]] || fail "admit's Package field"
[[ "$(field "${dev[0]}" Package)" == libadmit-dev ]] || fail "libadmit-dev's Package field"
depends=$(field "${tool[0]}" Depends)
for lib in libgrpc++1.51 libprotobuf32 libhiredis0.14 libssl3 libyaml-cpp0.7 libstdc++6 passwd init-system-helpers; do
  [[ "$depends" == *"$lib"* ]] || fail "admit's Depends lacks $lib: $depends"
done
dev_depends=$(field "${dev[0]}" Depends)
for pkg in libboost1.81-dev libhiredis-dev libssl-dev pkg-config; do
  [[ "$dev_depends" == *"$pkg"* ]] || fail "libadmit-dev's Depends lacks $pkg: $dev_depends"
done
echo "admit Depends: $depends"

contents() { dpkg-deb --contents "$1" | awk '{print $NF}'; }
tool_files=$(contents "${tool[0]}")
for f in ./usr/bin/admit ./usr/libexec/admit/admit-serve ./usr/lib/systemd/system/admit-serve.service \
         ./etc/admit/serve/edge.yaml ./usr/share/doc/admit/README.md ./usr/share/doc/admit/docs/serve.md \
         ./usr/share/doc/admit/docs/redis.md \
         ./usr/share/doc/admit/docs/algorithms.md ./usr/share/doc/admit/examples/serve/container/Dockerfile \
         ./usr/share/doc/admit/examples/serve/monitoring/grafana-dashboard.json; do
  grep -qxF "$f" <<<"$tool_files" || fail "admit lacks $f"
done
dev_files=$(contents "${dev[0]}")
for f in ./usr/include/admit/admission.hpp ./usr/include/admit/redis/gcra.hpp ./usr/lib/libadmit_redis.a \
         ./usr/lib/cmake/admit/admit-config.cmake ./usr/lib/cmake/admit/admit-targets.cmake \
         ./usr/lib/cmake/admit/admit-asio-targets.cmake ./usr/lib/cmake/admit/admit-redis-targets.cmake; do
  grep -qxF "$f" <<<"$dev_files" || fail "libadmit-dev lacks $f"
done
if grep -q '^./usr/bin/' <<<"$dev_files" || grep -q '^./usr/include/' <<<"$tool_files"; then
  fail "a file is in the wrong package"
fi
conffiles=$(dpkg-deb --ctrl-tarfile "${tool[0]}" | tar -xO ./conffiles)
grep -qxF /etc/admit/serve/edge.yaml <<<"$conffiles" || fail "the rules are not conffiles: $conffiles"
echo "contents: as expected ($(wc -l <<<"$tool_files") and $(wc -l <<<"$dev_files") entries)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/admit packages.XXXXXX")  # a space in the path, on purpose
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]]; then kill "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
dpkg-deb -x "${tool[0]}" "$scratch/root"
dpkg-deb -x "${dev[0]}" "$scratch/root"
admit="$scratch/root/usr/bin/admit"
"$admit" --version

# The unit as packaged, its ExecStart pointed at the unpacked binary (verify checks that the command exists; the rest
# — targets, /bin/kill — is this machine's).
unit="$scratch/root/usr/lib/systemd/system/admit-serve.service"
grep -qx 'ExecStart=/usr/bin/admit serve' "$unit" || fail "the unit's ExecStart is not /usr/bin/admit serve"
sed "s|^ExecStart=/usr/bin/admit|ExecStart=\"$admit\"|" "$unit" >"$scratch/admit-serve.service"
systemd-analyze verify "$scratch/admit-serve.service" || fail "systemd-analyze verify refused admit-serve.service"
echo "systemd-analyze verify: admit-serve.service is valid"

# The container's steps: `admit serve` configured by ADMIT_SERVE_CONFIG on the packaged rules.
http_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ADMIT_SERVE_CONFIG="$scratch/root/etc/admit/serve" ADMIT_SERVE_HTTP_PORT=$http_port ADMIT_SERVE_GRPC_PORT=0 \
  "$admit" serve 2>"$scratch/serve.log" &
serve_pid=$!
answer=""
for _ in $(seq 100); do
  answer=$(curl -s "http://127.0.0.1:$http_port/healthcheck" || true)
  [[ "$answer" == OK ]] && break
  kill -0 "$serve_pid" 2>/dev/null || fail "admit serve exited: $(cat "$scratch/serve.log")"
  sleep 0.1
done
[[ "$answer" == OK ]] || fail "the unpacked admit serve did not answer /healthcheck: $(cat "$scratch/serve.log")"
rules=$(curl -s "http://127.0.0.1:$http_port/rules" | python3 -c 'import json, sys; print(json.load(sys.stdin)["rules"])')
((rules > 0)) || fail "the packaged rules did not load"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "admit serve did not exit 0 on SIGTERM"
serve_pid=""
echo "the unpacked admit serve answered /healthcheck with $rules packaged rules and drained on SIGTERM"

# libadmit-dev: find_package(admit) from the unpacked tree.
cmake -S "$source_dir/examples/consumer" -B "$scratch/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/root/usr" \
  >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer" >/dev/null
# (find_package defines admit::redis only when hiredis and OpenSSL are found: here they must be.)
[[ -x "$scratch/consumer/consumer_redis" ]] || fail "find_package(admit) left admit::redis out: its dependencies?"
echo "examples/consumer built and ran against the unpacked libadmit-dev"
echo "check-packages: all passed"
