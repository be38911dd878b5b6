#!/usr/bin/env bash
# Load test of admit's middleware in a real HTTP server: admit_http_server (examples/http_server) under wrk, with the
# middleware (per-IP keyed GCRA + deadline + concurrency limit, limits set so high that nothing is rejected) and
# without it (--no-admit), in the same run, rounds interleaved; a third mode also sends the RateLimit-* fields on
# every admitted response. With 2+ CPUs the server is pinned to CPU 0 and wrk to CPU 1. Besides requests/s and
# latency it reports the server's CPU time per request (utime + stime from /proc over the requests wrk completed),
# which other load on the machine disturbs less than throughput. Prints a Markdown table and writes it to
# docs/perf/http.md (or $OUT).
#
#   cmake --preset release -DADMIT_BUILD_EXAMPLES=ON && cmake --build --preset release --target admit_http_server
#   bench/http_load.sh build/release/examples/http_server/admit_http_server
# (The release preset leaves the examples out of its build: the debug and asan presets build and test them.)
#
# Environment: DURATION (s per round, default 10), ROUNDS (per mode, default 5), CONNECTIONS (default 64),
# WRK_THREADS (default 1), SERVER_THREADS (default 1), WORK (ms of simulated handler time, default 0), OUT.
# Needs wrk (Debian package wrk). Build the server in Release.
set -euo pipefail

server_bin=${1:?usage: bench/http_load.sh path/to/admit_http_server}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
duration=${DURATION:-10}
rounds=${ROUNDS:-5}
connections=${CONNECTIONS:-64}
wrk_threads=${WRK_THREADS:-1}
server_threads=${SERVER_THREADS:-1}
work=${WORK:-0}
out=${OUT:-$root/docs/perf/http.md}

work_dir=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work_dir"
}
trap cleanup EXIT

# High limits: every request goes through a real keyed GCRA decision and a real permit, none is refused.
admit_args=(--rate 100000000/s --burst 100000000 --concurrency 100000 --queue 100000 --deadline 10000)
modes=(no-admit admit admit-fields)
mode_args() {
  case $1 in
    no-admit) echo --no-admit ;;
    admit) echo "${admit_args[@]}" --no-rate-fields ;;
    admit-fields) echo "${admit_args[@]}" ;;
  esac
}
server_cpu=() wrk_cpu=()
if (($(nproc) >= 2)) && command -v taskset >/dev/null; then server_cpu=(taskset -c 0) wrk_cpu=(taskset -c 1); fi
clk_tck=$(getconf CLK_TCK)

start_server() {
  "${server_cpu[@]}" "$server_bin" --port 0 --threads "$server_threads" --work "$work" "$@" >"$work_dir/server.log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$work_dir/server.log")
    [[ -n "$port" ]] && return 0
    sleep 0.1
  done
  echo "the server did not start: $(cat "$work_dir/server.log")" >&2
  exit 1
}
stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
}

# to_ms <wrk latency like 512.00us / 1.23ms / 2.00s>
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000;
    printf "%.3f", n }'
}

# One wrk run against the running server; appends "rps p50 p99 non2xx errors cpu_us_per_request" to $1.
measure() {
  local cpu0 cpu1 requests
  cpu0=$(awk '{ print $14 + $15 }' "/proc/$server_pid/stat")
  "${wrk_cpu[@]}" wrk -t"$wrk_threads" -c"$connections" -d"${duration}s" --latency "http://127.0.0.1:$port/" \
    >"$work_dir/wrk.txt"
  cpu1=$(awk '{ print $14 + $15 }' "/proc/$server_pid/stat")
  requests=$(awk '/requests in/ { print $1 }' "$work_dir/wrk.txt")
  local rps p50 p99 non2xx errors cpu
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$work_dir/wrk.txt")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$work_dir/wrk.txt")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$work_dir/wrk.txt")")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$work_dir/wrk.txt")
  errors=$(awk '/Socket errors:/ { s = 0; for (i = 3; i <= NF; i += 2) s += $(i + 1); print s }' "$work_dir/wrk.txt" |
    tr -d ',')
  cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$clk_tck" -v r="$requests" 'BEGIN { printf "%.2f", (b - a) / t * 1e6 / r }')
  echo "$rps $p50 $p99 ${non2xx:-0} ${errors:-0} $cpu" >>"$1"
}

# Warm-up (page cache, CPU frequency), then interleaved rounds.
start_server --no-admit
wrk -t1 -c"$connections" -d2s "http://127.0.0.1:$port/" >/dev/null
stop_server
for r in $(seq 1 "$rounds"); do
  for mode in "${modes[@]}"; do
    # shellcheck disable=SC2046
    start_server $(mode_args "$mode")
    measure "$work_dir/$mode.txt"
    stop_server
    echo "round $r $mode: $(tail -1 "$work_dir/$mode.txt")" >&2
  done
done

# median <file> <column>
median() { awk -v c="$2" '{ print $c }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
sum() { awk -v c="$2" '{ s += $c } END { print s + 0 }' "$1"; }

row() {  # row <mode> <label>
  local f="$work_dir/$1.txt"
  printf '| %s | %.0f | %.3f ms | %.3f ms | %.2f us | %s | %s |\n' "$2" "$(median "$f" 1)" "$(median "$f" 2)" \
    "$(median "$f" 3)" "$(median "$f" 6)" "$(sum "$f" 4)" "$(sum "$f" 5)"
}
cost() {  # cost <mode> <column> : median relative to no-admit, in percent (positive: admit is worse)
  awk -v a="$(median "$work_dir/$1.txt" "$2")" -v n="$(median "$work_dir/no-admit.txt" "$2")" -v c="$2" \
    'BEGIN { d = (c == 1) ? (n - a) / n : (a - n) / n; printf "%+.1f", d * 100 }'
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
  echo "## HTTP server under load: admit's middleware vs none"
  echo
  echo "\`bench/http_load.sh\`: examples/http_server (Boost.Beast, HTTP/1.1 keep-alive, ${server_threads} server thread(s), handler work ${work} ms)"
  echo "under \`wrk -t${wrk_threads} -c${connections} -d${duration}s --latency\`, ${rounds} interleaved rounds per mode, medians shown."
  echo "With the middleware every request takes a per-client-IP \`admit::keyed<admit::gcra>\` decision, passes a deadline"
  echo "layer and takes a permit of a global \`admit::semaphore\` (held until the response is written); the limits are"
  echo "set so high that nothing is refused. Machine: $(nproc) CPUs, ${cpu}; server pinned to CPU 0 and wrk to CPU 1 when there are two;"
  echo "the machine was shared with other jobs, so single rounds vary: compare the medians."
  echo
  echo "| server | requests/s | p50 latency | p99 latency | server CPU per request | non-2xx | socket errors |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  row no-admit "--no-admit"
  row admit "admit middleware"
  row admit-fields "admit middleware + RateLimit-* on 200s"
  echo
  echo "Cost of the middleware against --no-admit (medians): throughput lost $(cost admit 1)%, server CPU per request added"
  echo "$(cost admit 6)%; with the RateLimit-* fields on every admitted response: throughput lost $(cost admit-fields 1)%, CPU added"
  echo "$(cost admit-fields 6)% (three more header fields for Beast to serialize and wrk to parse). Target: at most 3%."
  echo
  echo "Every round (requests/s, p50 ms, p99 ms, non-2xx, socket errors, server CPU us per request):"
  echo
  echo "| round | --no-admit | admit middleware | + RateLimit-* on 200s |"
  echo "| ---: | --- | --- | --- |"
  paste -d'|' "$work_dir/no-admit.txt" "$work_dir/admit.txt" "$work_dir/admit-fields.txt" |
    awk -F'|' '{ printf "| %d | %s | %s | %s |\n", NR, $1, $2, $3 }'
} >"$out"
cat "$out"
