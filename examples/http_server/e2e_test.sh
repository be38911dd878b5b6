#!/usr/bin/env bash
# End-to-end test of admit_http_server with a real client (curl):
#   1. requests over the per-IP limit get 429 with Retry-After and the RateLimit-* fields, exact;
#   2. a burst beyond concurrency + queue gets 503 (queue_full) while the others are served;
#   3. a queued request whose wait deadline passes gets 503 (deadline); with --shed, 503 (shed) at once;
#   4. a client that closes its connection while its request waits for a permit leaves the queue at once, and its
#      request never runs (GET /stats shows the counts; the test polls them, it never sleeps to let time pass);
#   5. an HTTP/1.1 request without exactly one Host field gets 400;
#   6. on SIGTERM, queued requests get 503 closed with Connection: close, admitted ones run to the end (or, past
#      --grace, get 503 closed), idle keep-alive connections are closed, and the server exits 0; a client that never
#      reads its answers is dropped one second after --grace (under AddressSanitizer this also checks that no
#      connection outlives the io_context);
#   7. nothing hangs: every curl has --max-time, every server must exit 0 within 10 s of SIGTERM;
#   8. GET /metrics, scraped with curl after a known burst, parses with python3-prometheus-client's text parser
#      (prometheus_client.parser, not admit's code): every family, and the counts equal the requests made.
# Usage: e2e_test.sh path/to/admit_http_server. Exits 77 (skipped) when curl or python3 is missing, or, after every
# other check passed, when python3-prometheus-client is not installed (never when it is: then an import failure fails).
set -euo pipefail

server_bin=${1:?usage: e2e_test.sh path/to/admit_http_server}
command -v curl >/dev/null || { echo "curl not found: skipping"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found: skipping"; exit 77; }

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

# Starts the server with the given options; sets server_pid, port and server_log. Each server writes its own log: the
# redirection of a reused one is truncated by the child after the fork, so the first read could see the previous
# server's port.
starts=0
start_server() {
  starts=$((starts + 1))
  server_log="$work_dir/server.$starts.log"
  "$server_bin" --port 0 "$@" >"$server_log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$server_log" 2>/dev/null || true)
    [[ -n "$port" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL - the server did not start: $(cat "$server_log")"
  exit 1
}

# Stops the server with SIGTERM and checks that it exits 0 within 10 s. `stop_server signalled`: the test has sent
# SIGTERM already (a second one could reach another process that reused the id of a server that has exited).
stop_server() {
  if [[ "${1:-}" != signalled ]]; then kill -TERM "$server_pid"; fi
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
  tr -d '\r' <"$work_dir/headers" | awk -v name="$(echo "$1" | tr '[:upper:]' '[:lower:]')" -F': ' \
    'tolower($1) == name { print $2 }'
}

# stat <name>: that line of GET /stats ("waiting", "in_use", "started", ...).
stat() {
  curl -s --max-time 5 "http://127.0.0.1:$port/stats" | awk -v name="$1" '$1 == name { print $2 }'
}
# wait_for <name> <value>: polls GET /stats until it shows that value (at most 200 polls); prints "ok" or what it saw.
wait_for() {
  local seen=""
  for _ in $(seq 1 200); do
    seen=$(stat "$1")
    if [[ "$seen" == "$2" ]]; then
      echo ok
      return 0
    fi
    sleep 0.05
  done
  echo "$1 stayed at '$seen'"
}
# fetch <name> [curl options]: GET / in the background; status, headers and body go to $work_dir/<name>.*; sets
# fetch_pid to curl's own process id (killing it closes its connection).
fetch() {
  local name=$1
  shift
  rm -f "$work_dir/$name".*
  curl -s --max-time 30 "$@" -D "$work_dir/$name.headers" -o "$work_dir/$name.body" -w '%{http_code}' \
    "http://127.0.0.1:$port/" >"$work_dir/$name.status" &
  fetch_pid=$!
}
# answer <name>: "status body" of a finished fetch.
answer() {
  echo "$(cat "$work_dir/$1.status") $(tr -d '\n' <"$work_dir/$1.body" 2>/dev/null)"
}
# connection_field <name>: the Connection field of a finished fetch, lower case.
connection_field() {
  tr -d '\r' <"$work_dir/$1.headers" | awk -F': ' 'tolower($1) == "connection" { print tolower($2) }'
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
  local clients
  mapfile -t clients < <(jobs -p | grep -v "^$server_pid$")
  if ((${#clients[@]})); then wait "${clients[@]}" 2>/dev/null || true; fi
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

echo "# concurrency 2 + queue 2, each request works 1.5 s: a burst of 8; then GET /metrics"
start_server --rate 1000/s --burst 1000 --concurrency 2 --queue 2 --deadline 10000 --work 1500
burst_result=$(burst 8)
check "burst of 8: 4 served, 4 refused" "200:ok 200:ok 200:ok 200:ok 503:queue_full 503:queue_full 503:queue_full 503:queue_full" "$burst_result"
check "served again once the burst is over" 200 "$(get)"
# The requests made, as the clients saw them: every 200 was admitted (the last one at once), every 503 refused.
served=$(($(grep -o '200:ok' <<<"$burst_result" | wc -l) + 1))
refused=$(grep -o '503:queue_full' <<<"$burst_result" | wc -l)
curl -s --max-time 10 -D "$work_dir/metrics.headers" -o "$work_dir/metrics.txt" "http://127.0.0.1:$port/metrics"
check "/metrics Content-Type" "text/plain; version=0.0.4; charset=utf-8" \
  "$(tr -d '\r' <"$work_dir/metrics.headers" | awk -F': ' 'tolower($1) == "content-type" { print $2 }')"
metrics_skipped=""
# The python3 that has Debian's package: the one on PATH, or the system's (PATH may lead to another install first).
prom_python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import prometheus_client.parser' 2>/dev/null; then
    prom_python=$candidate
    break
  fi
done
if [[ -n "$prom_python" ]]; then
  # Every family parses; prints "family type" lines and then the checks' values, one "name value" a line.
  "$prom_python" - "$work_dir/metrics.txt" >"$work_dir/metrics.parsed" 2>&1 <<'PY' || true
import sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
families = {f.name: f for f in text_string_to_metric_families(text)}
for name in sorted(families):
    print("family", name, families[name].type)
def value(family, suffix="", limiter="concurrency", **labels):
    want = {"limiter": limiter, "route": "/", **labels}
    return [s.value for s in families[family].samples if s.name == family + suffix and s.labels == want]
print("admitted", int(value("admit_admitted", "_total")[0]))
print("waited", int(value("admit_waited", "_total")[0]))
for reason in ["unavailable", "queue_full", "timeout", "cancelled", "closed", "exceeds_capacity", "failed"]:
    print("rejected_" + reason, int(value("admit_rejected", "_total", reason=reason)[0]))
for gauge in ["admit_limit", "admit_in_flight", "admit_waiting"]:
    print(gauge, int(value(gauge)[0]))
buckets = [(s.labels["le"], s.value) for s in families["admit_wait_seconds"].samples
           if s.name.endswith("_bucket") and s.labels["limiter"] == "concurrency"]
counts = [v for _, v in buckets]
print("buckets", len(buckets), "last_le", buckets[-1][0], "monotonic", counts == sorted(counts))
print("le_1us", int(buckets[0][1]), "le_inf", int(buckets[-1][1]))
print("count", int(value("admit_wait_seconds", "_count")[0]))
print("sum_positive", value("admit_wait_seconds", "_sum")[0] > 0)
print("per_client_admitted", int(value("admit_admitted", "_total", limiter="per_client")[0]))
print("per_client_unavailable", int(value("admit_rejected", "_total", limiter="per_client", reason="unavailable")[0]))
PY
  parsed() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$work_dir/metrics.parsed"; }
  check "every family parses, with its type" \
    "admit_admitted counter|admit_in_flight gauge|admit_limit gauge|admit_rejected counter|admit_wait_seconds histogram|admit_waited counter|admit_waiting gauge" \
    "$(parsed family | tr '\n' '|' | sed 's/|$//')"
  check "admitted = the requests served" "$served" "$(parsed admitted)"
  check "rejected{queue_full} = the requests refused" "$refused" "$(parsed rejected_queue_full)"
  check "waited = the requests that queued (the 3rd and 4th served)" 2 "$(parsed waited)"
  for reason in unavailable timeout cancelled closed exceeds_capacity failed; do
    check "rejected{$reason}" 0 "$(parsed "rejected_$reason")"
  done
  check "limit gauge" 2 "$(parsed admit_limit)"
  check "in_flight gauge (all answered)" 0 "$(parsed admit_in_flight)"
  check "waiting gauge" 0 "$(parsed admit_waiting)"
  check "histogram buckets: 22 bounds + +Inf, cumulative" "23 last_le +Inf monotonic True" "$(parsed buckets)"
  check "le=1e-06 holds the immediate admissions, +Inf all" "le_1us $((served - 2)) le_inf $served" \
    "le_1us $(parsed le_1us)"
  check "histogram count = admitted" "$served" "$(parsed count)"
  check "histogram sum > 0 (two requests waited)" True "$(parsed sum_positive)"
  check "per_client admitted = every request (all within the rate)" "$((served + refused))" "$(parsed per_client_admitted)"
  check "per_client rejected{unavailable}" 0 "$(parsed per_client_unavailable)"
  if grep -q Traceback "$work_dir/metrics.parsed"; then
    echo "FAIL - the parser: $(cat "$work_dir/metrics.parsed")"
    failures=$((failures + 1))
  fi
elif dpkg-query -W -f='${Status}' python3-prometheus-client 2>/dev/null | grep -q "install ok installed"; then
  check "python3-prometheus-client is installed but prometheus_client.parser does not import" "imports" "fails"
else
  metrics_skipped="python3-prometheus-client is not installed (scripts/install-deps.sh installs it)"
  echo "SKIP - parsing /metrics: $metrics_skipped"
fi
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

echo "# a client that disconnects while it waits for a permit leaves the queue (concurrency 1, work 60 s)"
start_server --rate 1000/s --burst 1000 --concurrency 1 --queue 4 --deadline 60000 --work 60000 --grace 100
fetch holder
holder_pid=$fetch_pid
check "the first request holds the permit" ok "$(wait_for in_use 1)"
fetch waiter
waiter_pid=$fetch_pid
check "the second request waits" ok "$(wait_for waiting 1)"
kill -KILL "$waiter_pid"
wait "$waiter_pid" 2>/dev/null || true
check "the closed connection's request left the queue" ok "$(wait_for waiting 0)"
check "the permit is still the first request's" 0 "$(stat available)"
kill -KILL "$holder_pid"
wait "$holder_pid" 2>/dev/null || true
check "a request whose client is gone gives its permit back" ok "$(wait_for in_use 0)"
check "the abandoned waiter never ran" 1 "$(stat started)"
check "the permit is free" 1 "$(stat available)"
stop_server

echo "# Host field (RFC 9112, 3.2)"
start_server --rate 1000/s --burst 1000
check "HTTP/1.1 without Host" 400 "$(curl -s --max-time 10 -o /dev/null -H 'Host:' -w '%{http_code}' "http://127.0.0.1:$port/")"
check "HTTP/1.0 without Host" 200 \
  "$(curl -s --max-time 10 -0 -o /dev/null -H 'Host:' -w '%{http_code}' "http://127.0.0.1:$port/")"
check "HTTP/1.1 with two Host fields" "HTTP/1.1 400 Bad Request" "$(python3 -c '
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as s:
    s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    print(s.makefile("rb").readline().decode().strip())
' "$port")"
check "HTTP/1.1 with Host" 200 "$(get)"
stop_server

echo "# SIGTERM: queued requests get 503 closed at once, the admitted one runs to the end (work 5 s)"
start_server --rate 1000/s --burst 1000 --concurrency 1 --queue 4 --deadline 60000 --work 5000 --grace 60000
fetch holder
holder_pid=$fetch_pid
check "the first request holds the permit" ok "$(wait_for in_use 1)"
fetch queued1
queued1_pid=$fetch_pid
fetch queued2
queued2_pid=$fetch_pid
check "two requests wait" ok "$(wait_for waiting 2)"
kill -TERM "$server_pid"
wait "$queued1_pid" "$queued2_pid" || true
holder_state=finished
if kill -0 "$holder_pid" 2>/dev/null; then holder_state=running; fi
check "the queued requests are answered while the admitted one still runs" running "$holder_state"
check "queued request 1" "503 closed" "$(answer queued1)"
check "queued request 1 Connection" close "$(connection_field queued1)"
check "queued request 2" "503 closed" "$(answer queued2)"
check "queued request 2 Connection" close "$(connection_field queued2)"
wait "$holder_pid" || true
check "the admitted request" "200 ok" "$(answer holder)"
check "the admitted request Connection" close "$(connection_field holder)"
stop_server signalled

echo "# SIGTERM: past --grace the admitted request gets 503 closed; idle connections are closed"
start_server --rate 1000/s --burst 1000 --concurrency 1 --queue 4 --deadline 60000 --work 60000 --grace 200
# An idle keep-alive connection: one request answered, then it waits for the server to close it.
python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
c.request("GET", "/stats")
c.getresponse().read()
print("answered", flush=True)
print("closed by the server" if c.sock.recv(1) == b"" else "got data")
' "$port" >"$work_dir/idle.out" &
idle_pid=$!
fetch holder
holder_pid=$fetch_pid
check "the first request holds the permit" ok "$(wait_for in_use 1)"
check "the idle connection is open" ok "$(wait_for connections 3)"
# Its request answered (an open connection may still be reading it: SIGTERM then closes it unanswered).
idle_answered=waiting
for _ in $(seq 1 200); do
  if grep -q answered "$work_dir/idle.out" 2>/dev/null; then idle_answered=ok; break; fi
  sleep 0.05
done
check "the idle connection's request is answered" ok "$idle_answered"
kill -TERM "$server_pid"
wait "$holder_pid" || true
check "the admitted request past the grace period" "503 closed" "$(answer holder)"
check "its Connection" close "$(connection_field holder)"
wait "$idle_pid" || true
check "the idle keep-alive connection" "answered closed by the server" "$(tr '\n' ' ' <"$work_dir/idle.out" | sed 's/ $//')"
stop_server signalled

echo "# SIGTERM: a client that never reads its answers is dropped one second after --grace; the server exits 0"
start_server --rate 1000/s --burst 1000 --grace 100
# Pipelined requests, none of whose answers is read: the server's write blocks once both socket buffers are full.
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.settimeout(2)
request = b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n" * 64
try:
    while True:
        s.sendall(request)
except socket.timeout:
    print("stuck", flush=True)
time.sleep(60)
' "$port" >"$work_dir/stuck.out" &
stuck_pid=$!
for _ in $(seq 1 200); do
  grep -q stuck "$work_dir/stuck.out" 2>/dev/null && break
  sleep 0.1
done
check "the client's requests fill the connection" stuck "$(cat "$work_dir/stuck.out")"
stop_server
kill "$stuck_pid" 2>/dev/null || true
wait "$stuck_pid" 2>/dev/null || true

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
if [[ -n "$metrics_skipped" ]]; then
  echo "every other check passed; skipped: parsing /metrics ($metrics_skipped)"
  exit 77
fi
echo "all checks passed"
