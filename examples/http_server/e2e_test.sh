#!/usr/bin/env bash
# End-to-end test of admit_http_server with a real client (curl):
#   1. requests over the per-IP limit get 429 with Retry-After and the RateLimit-* fields, exact;
#   2. a burst beyond concurrency + queue gets 503 (queue_full) while the others are served;
#   3. a queued request whose wait deadline passes gets 503 (deadline); with --shed, 503 (shed) at once;
#   4. nothing hangs: every curl has --max-time, every server must exit 0 within 10 s of SIGTERM.
# Usage: e2e_test.sh path/to/admit_http_server. Exits 77 (skipped) when curl is missing.
set -euo pipefail

server_bin=${1:?usage: e2e_test.sh path/to/admit_http_server}
command -v curl >/dev/null || { echo "curl not found: skipping"; exit 77; }

work_dir=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work_dir"
}
trap cleanup EXIT

failures=0
check() {  # check <description> <expected> <actual>
  if [[ "$2" == "$3" ]]; then
    echo "ok   - $1"
  else
    echo "FAIL - $1: expected '$2', got '$3'"
    failures=$((failures + 1))
  fi
}

# Starts the server with the given options; sets server_pid and port.
start_server() {
  "$server_bin" --port 0 "$@" >"$work_dir/server.log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$work_dir/server.log")
    [[ -n "$port" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL - the server did not start: $(cat "$work_dir/server.log")"
  exit 1
}

# Stops the server with SIGTERM and checks that it exits 0 within 10 s.
stop_server() {
  kill -TERM "$server_pid"
  for _ in $(seq 1 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$server_pid" 2>/dev/null; then
    check "server exits within 10 s of SIGTERM" "exited" "still running"
    kill -KILL "$server_pid"
  fi
  local rc=0
  wait "$server_pid" || rc=$?
  check "server exit status" "0" "$rc"
  server_pid=""
}

# GET / ; prints the status code. Headers go to $work_dir/headers.
get() {
  curl -s --max-time 10 -o /dev/null -D "$work_dir/headers" -w '%{http_code}' "http://127.0.0.1:$port/"
}
header() {  # header <name>: the value of that field in $work_dir/headers
  tr -d '\r' <"$work_dir/headers" | awk -v name="$(echo "$1" | tr 'A-Z' 'a-z')" -F': ' \
    'tolower($1) == name { print $2 }'
}

# Fires n requests at once; prints "status:body" of each (the body is "ok" or the rejection reason), sorted, on one
# line.
burst() {
  local n=$1 i
  for i in $(seq 1 "$n"); do
    (
      out=$(curl -s --max-time 15 -w ' %{http_code}' "http://127.0.0.1:$port/" || true)
      echo "${out##* }:$(echo "${out% *}" | tr -d '\n')" >"$work_dir/burst.$i"
    ) &
  done
  wait $(jobs -p | grep -v "^$server_pid$") 2>/dev/null || true
  cat "$work_dir"/burst.* | sort | tr '\n' ' ' | sed 's/ $//'
  rm -f "$work_dir"/burst.*
}

echo "# per-IP rate limit: 1/min, burst 3"
start_server --rate 1/min --burst 3 --concurrency 16 --queue 16
check "request 1" 200 "$(get)"
check "request 1 RateLimit-Remaining" 2 "$(header RateLimit-Remaining)"
check "request 2" 200 "$(get)"
check "request 3" 200 "$(get)"
check "request 3 RateLimit-Remaining" 0 "$(header RateLimit-Remaining)"
check "request 4 is over the limit" 429 "$(get)"
# One request every 60 s, three spent within a second: the next fits in (0, 60] s, rounded up: 60; the bucket is
# full again in (179, 180] s: 180.
check "429 Retry-After" 60 "$(header Retry-After)"
check "429 RateLimit-Limit" 3 "$(header RateLimit-Limit)"
check "429 RateLimit-Remaining" 0 "$(header RateLimit-Remaining)"
check "429 RateLimit-Reset" 180 "$(header RateLimit-Reset)"
stop_server

echo "# concurrency 2 + queue 2, each request works 1.5 s: a burst of 8"
start_server --rate 1000/s --burst 1000 --concurrency 2 --queue 2 --deadline 10000 --work 1500
check "burst of 8: 4 served, 4 refused" "200:ok 200:ok 200:ok 200:ok 503:queue_full 503:queue_full 503:queue_full 503:queue_full" "$(burst 8)"
check "served again once the burst is over" 200 "$(get)"
stop_server

echo "# concurrency 1, wait deadline 300 ms, each request works 2 s: a burst of 3"
start_server --rate 1000/s --burst 1000 --concurrency 1 --queue 8 --deadline 300 --work 2000
check "burst of 3: 1 served, 2 past their deadline" "200:ok 503:deadline 503:deadline" "$(burst 3)"
stop_server

echo "# concurrency 1 with --shed, each request works 1 s: a burst of 3"
start_server --rate 1000/s --burst 1000 --concurrency 1 --queue 8 --shed --work 1000
check "burst of 3: 1 served, 2 shed" "200:ok 503:shed 503:shed" "$(burst 3)"
stop_server

echo "# --no-admit serves everything"
start_server --no-admit --rate 1/min --burst 1
check "no limit: request 1" 200 "$(get)"
check "no limit: request 2" 200 "$(get)"
stop_server

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
