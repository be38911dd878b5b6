#!/usr/bin/env bash
# Runs the redis_fencing example against a redis-server of its own (on a unix socket, persistence off) and
# compares its output with expected.txt. Usage: run_test.sh path/to/redis_fencing. Exits 77 (skipped) without
# redis-server.
set -euo pipefail
example=${1:?usage: run_test.sh path/to/redis_fencing}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v redis-server >/dev/null || { echo "redis-server not found: skipping"; exit 77; }
dir=$(mktemp -d)
socket="$dir/redis.sock"
redis-server --port 0 --unixsocket "$socket" --save "" --appendonly no --dir "$dir" --daemonize no \
  --logfile "$dir/redis.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$dir"' EXIT
for ((i = 0; i < 100; ++i)); do
  [[ -S "$socket" ]] && break
  sleep 0.05  # a real process starting: a bounded poll
done
"$example" "unix://$socket" >"$dir/out.txt"
diff -u "$here/expected.txt" "$dir/out.txt"
echo "ok - the stale holder's write was refused by its fencing token"
