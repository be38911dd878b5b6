#!/usr/bin/env bash
# Measures `admit serve` over gRPC (Envoy's RLS v3 ShouldRateLimit), in process and on Redis, with admit_serve_load
# (bench/serve_load.cpp), next to the Redis work envoyproxy/ratelimit does per decision, in one run; writes
# docs/perf/serve.md (which bench/compare.sh appends to docs/PERFORMANCE.md; compare.sh does not run this script).
#
#   bench/serve_compare.sh                  the full run: 3 rounds of 4 s per case (~8 minutes on 2 cores)
#   bench/serve_compare.sh --quick          1 round of 1.5 s per case (~1 minute); still writes the report
#   bench/serve_compare.sh --build-dir DIR  use an already configured build directory (Release, with
#                                           ADMIT_BUILD_BENCHMARKS=ON) instead of the `release` preset's build/release
#
# What it runs:
#   1. scripts/install-deps.sh --bench (redis-server, redis-tools);
#   2. builds the admit tool (admit_cli), admit_serve_load and admit_serve_grpc_floor in Release;
#   3. starts redis-server on a free loopback port (--save "" --appendonly no), pinned to CPU 0 when there are 2+
#      CPUs; every load generator runs on CPU 1; the servers of the in-process cases (`admit serve` and the gRPC
#      floor) run on CPU 0 too, where Redis then idles, and those of the Redis cases are not pinned (see serve_cpu);
#   4. rounds (3; 1 with --quick), each running every case one after the other; the report gives the median over the
#      rounds of each number. The configuration is bench/serve_config (a fixed-window rule and a GCRA rule of
#      1,000,000,000 a second per value: every decision is counted and answered OK). Keys: 100,000 values drawn at
#      random per call ("many"), or one value ("hot").
#      a. `admit serve` in process: gRPC at 1, 16 and 256 concurrent streams, many keys and the hot key; GCRA at 16;
#         each concurrency followed at once by the floor of a call over gRPC (admit_serve_grpc_floor,
#         bench/serve_grpc_floor.cpp: a server built as admit serve's whose handler answers every call with the same
#         bytes, deciding nothing) at the same concurrency: a target compares the two, and the machine's speed
#         drifts over a round, so each pair is measured back to back;
#      b. the library call the service makes for each of those calls (admit_serve_load --mode library:
#         admit::serve::service::should_rate_limit in process, no gRPC) at 1 and 16 streams;
#      c. `admit serve --redis` (fail-closed, so that a Redis failure shows as OVER_LIMIT rather than as throughput):
#         gRPC at 1, 16 and 256 streams, many keys and the hot key; GCRA at 16; the hot key of a rule with
#         `prefetch: 20` at 16 and 256; each concurrency followed at once by the floor of a call that goes to Redis
#         (the floor server with --redis: INCRBY + EXPIRE NX of a counter per call, pipelined on one connection) on
#         100,000 counters and (at 16 and 256) on one, their keys as long as admit serve's fixed-window keys of the
#         same descriptor (the same bytes for Redis to hash and keep); then the library call on Redis (the same
#         backend, no gRPC) at 1, 16 and 256 streams;
#      d. envoyproxy/ratelimit's Redis work per decision: INCRBY + EXPIRE of the descriptor's key, pipelined
#         (admit_serve_load --mode redis-incr-expire), at 1, 16 and 256 decisions outstanding, many keys and hot key.
#      Around each Redis case: CONFIG RESETSTAT, then INFO commandstats (script calls, commands — those scripts call
#      included — and the server's µs inside them, per decision) and INFO cpu (redis-server's CPU per decision);
#      around each gRPC case, admit serve's own CPU (/proc/PID/stat) per decision.
#   5. writes docs/perf/serve.md: the targets (met / not met), the side-by-side table, the machine load.
# Raw outputs are kept in <build dir>/bench/serve/ (raw.tsv: every case of every round; results.tsv: the medians).
set -euo pipefail
# shellcheck disable=SC2034  # load_before, the medians and the case globals are read by bench/serve_report.sh

# shellcheck source=bench/redis_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"
parse_arguments 32 "$@"

if ((quick)); then rounds=1 duration=1.5 warmup=0.5; else rounds=3 duration=4 warmup=1; fi
out="$build_dir/bench/serve"  # relative to the repository (the script runs there)
report="$repo/docs/perf/serve.md"
key_count=100000
# The floor's counter keys, shaped as `admit serve`'s fixed-window keys of the load's descriptor user=<n>
# ("admit:serve:fw:{5:bench4:user5:<n>}:1:<window start>"): with its default "floor:<n>", 12 bytes against about 50,
# Redis spent about 8 % less CPU per decision at 256 streams (2026-12-05, the median of three alternating runs): a
# difference of keys, not of work.
floor_key_shape=(--redis-key-prefix 'admit:serve:fw:{5:bench4:user5:' --redis-key-suffix "}:1:$(date +%s)")
config_dir=bench/serve_config

load_before=$(cut -d" " -f1-3 /proc/loadavg)
step 1/7 "dependencies: scripts/install-deps.sh --bench"
scripts/install-deps.sh --bench
if [[ "$build_dir" == build/release ]]; then
  step 2/7 "build: cmake --preset release && cmake --build --preset release --target admit_cli admit_serve_load admit_serve_grpc_floor"
  cmake --preset release >/dev/null
  cmake --build --preset release --target admit_cli admit_serve_load admit_serve_grpc_floor -j 2
else
  step 2/7 "build: cmake --build $build_dir --target admit_cli admit_serve_load admit_serve_grpc_floor"
  cmake --build "$build_dir" --target admit_cli admit_serve_load admit_serve_grpc_floor -j 2
fi
load_bin="$repo/$build_dir/bench/admit_serve_load"
floor_bin="$repo/$build_dir/bench/admit_serve_grpc_floor"
admit_bin="$repo/$build_dir/tools/admit/admit"
for b in "$load_bin" "$floor_bin" "$admit_bin"; do
  [[ -x "$b" ]] || { echo "$script: $b was not built (is ADMIT_SERVE on: gRPC, yaml-cpp?)" >&2; exit 1; }
done
mkdir -p "$out"
rm -f "$out"/*.tsv "$out"/*.log

start_redis_server  # step 4/7 in its words: sets port, cli, url, server_cpu, client_cpu, server_pid
serve_pid=""
trap 'stop_serve; kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT

# Where the servers run: on CPU 0 for the in-process cases (set before them), where Redis idles then, and unpinned for
# the Redis cases, where CPU 0 is Redis's. Unpinned, a server's threads share CPU 1 with the load generator whenever
# the scheduler puts them there: on 2 CPUs the same server's calls/s then changed by up to 1.5x from one round to the
# next (2026-12-05: 33,700 to 51,600 at 16 streams), in either direction for admit serve and the floor alike, which
# made the in-process targets' verdict a coin toss. Pinned, both run the way a server with a CPU of its own runs.
serve_cpu=()
# start_server NAME COMMAND...: starts a gRPC server that logs a "listening" line with its grpc_port (admit serve, or
# the floor), on serve_cpu; sets serve_pid and grpc_target once it has (in a log of its own: serve-<start>-NAME.log).
serve_starts=0
start_server() {
  serve_starts=$((serve_starts + 1))
  local log="$out/serve-$serve_starts-$1.log" i
  shift
  "${serve_cpu[@]}" "$@" 2>"$log" &
  serve_pid=$!
  for ((i = 0; i < 200; ++i)); do
    grep -q '"msg":"listening"' "$log" 2>/dev/null && break
    kill -0 "$serve_pid" 2>/dev/null || { echo "$script: the server exited: $(tail -3 "$log")" >&2; exit 1; }
    sleep 0.05  # a real process starting: a bounded poll
  done
  local grpc_port
  grpc_port=$(sed -n 's/.*"msg":"listening".*"grpc_port":\([0-9]*\).*/\1/p' "$log" | tail -1)
  [[ -n "$grpc_port" ]] || { echo "$script: the server did not start ($log)" >&2; exit 1; }
  grpc_target="127.0.0.1:$grpc_port"
}
# start_serve NAME [ARG...]: `admit serve` on bench/serve_config, gRPC and HTTP on free loopback ports, with ARGs.
start_serve() {
  local name=$1
  shift
  start_server "$name" "$admit_bin" serve --config "$config_dir" --host 127.0.0.1 --grpc-port 0 --http-port 0 \
    --log-level info "$@"
}
stop_serve() {
  if [[ -n "$serve_pid" ]]; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=""
  fi
}

clk_tck=$(getconf CLK_TCK)
# proc_cpu PID: the process's CPU time so far, seconds.
proc_cpu() { awk -v t="$clk_tck" '{ print ($14 + $15) / t }' "/proc/$1/stat"; }
# redis_cpu: redis-server's CPU time so far, seconds (INFO cpu).
redis_cpu() {
  "${cli[@]}" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'
}
# redis_commands: "<calls> <usec> <script calls>" since the last RESETSTAT: every command but INFO and CONFIG (the
# script's own), those that scripts call included (commandstats counts them too), and the script calls alone (EVAL,
# EVALSHA and their _RO forms, FCALL).
redis_commands() {
  "${cli[@]}" info commandstats | tr -d '\r' | awk -F'[:,=]' '
    /^cmdstat_/ && !/^cmdstat_(info|config):/ {
      for (i = 2; i < NF; i += 2) { if ($i == "calls") calls += $(i + 1); if ($i == "usec") usec += $(i + 1) }
    }
    /^cmdstat_(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro):/ {
      for (i = 2; i < NF; i += 2) if ($i == "calls") scripts += $(i + 1)
    }
    END { printf "%d %d %d", calls, usec, scripts }'
}

# redis_reads: "<commands> <reads>" since the last RESETSTAT (INFO stats: every command, and every read of a client's
# socket that brought some): commands per read is how many a client's writes carried on average.
redis_reads() {
  "${cli[@]}" info stats | tr -d '\r' |
    awk -F: '/^total_commands_processed:/ { c = $2 } /^total_reads_processed:/ { r = $2 } END { printf "%d %d", c, r }'
}

# keys_args KEYS: the load's descriptor for many keys, the hot key or GCRA on many keys.
keys_args() {
  case "$1" in
    many) echo "--descriptor user={rand} --key-count $key_count" ;;
    hot) echo "--descriptor user=hot" ;;
    gcra) echo "--descriptor user_gcra={rand} --key-count $key_count" ;;
    prefetch) echo "--descriptor user_prefetch=hot" ;;
  esac
}

raw="$out/raw.tsv"
: >"$raw"
loads=()
failures=()
# measure IMPL VARIANT KEYS STREAMS ROUND REDIS(0|1) LOAD_ARG...: one case; appends to raw.tsv
#   impl variant keys streams round dps p50 p90 p99 max over_limit errors client_cpu_us cmds/decision
#   redis_usec/decision redis_cpu_us/decision serve_cpu_us/decision script_calls/decision commands/read
# ("-" where not measured). A run with failed calls or wrong answers is kept, with its errors, and listed.
measure() {
  local impl=$1 variant=$2 keys=$3 streams=$4 r=$5 redis=$6
  shift 6
  local rcpu0="" scpu0="" line status=0
  if ((redis)); then
    "${cli[@]}" config resetstat >/dev/null
    rcpu0=$(redis_cpu)
  fi
  if [[ -n "$serve_pid" ]]; then scpu0=$(proc_cpu "$serve_pid"); fi  # the gRPC cases: admit serve is running
  # shellcheck disable=SC2046  # keys_args's words are separate arguments
  line=$("${client_cpu[@]}" "$load_bin" --streams "$streams" --duration "$duration" --warmup "$warmup" \
    --label "$impl" $(keys_args "$keys") "$@" 2>>"$out/load.log") || status=$?
  [[ -n "$line" ]] || { echo "$script: no result from admit_serve_load $* (see $out/load.log)" >&2; exit 1; }
  ((status == 0)) || failures+=("$impl $variant $keys $streams (round $r)")
  # label mode streams dps p50 p90 p99 max ok over errors unlimited bad answered cpu_us
  local answered cmds="-" rusec="-" rcpu="-" scpu="-" scalls="-" cpr="-"
  answered=$(cut -f14 <<<"$line")
  if ((redis)) && ((answered > 0)); then
    read -r calls usec scripts <<<"$(redis_commands)"
    read -r processed reads <<<"$(redis_reads)"
    cpr=$(awk -v c="$processed" -v r="$reads" 'BEGIN { printf "%.2f", (r > 0 ? c / r : 0) }')
    cmds=$(awk -v c="$calls" -v n="$answered" 'BEGIN { printf "%.3f", c / n }')
    scalls=$(awk -v c="$scripts" -v n="$answered" 'BEGIN { printf "%.3f", c / n }')
    rusec=$(awk -v u="$usec" -v n="$answered" 'BEGIN { printf "%.2f", u / n }')
    rcpu=$(awk -v a="$rcpu0" -v b="$(redis_cpu)" -v n="$answered" 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }')
  fi
  if [[ -n "$scpu0" ]] && ((answered > 0)); then
    scpu=$(awk -v a="$scpu0" -v b="$(proc_cpu "$serve_pid")" -v n="$answered" 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }')
  fi
  awk -F'\t' -v OFS='\t' -v impl="$impl" -v variant="$variant" -v keys="$keys" -v r="$r" -v cmds="$cmds" \
    -v rusec="$rusec" -v rcpu="$rcpu" -v scpu="$scpu" -v scalls="$scalls" -v cpr="$cpr" '{
      errors = $11 + $12 + $13
      print impl, variant, keys, $3, r, $4, $5, $6, $7, $8, $10, errors, $15, cmds, rusec, rcpu, scpu, scalls, cpr
    }' <<<"$line" | tee -a "$raw" >&2
}

step 5/7 "$rounds round(s) of $duration s per case (after $warmup s of warm-up)"
for ((round = 1; round <= rounds; ++round)); do
  begin_round "$round"
  # a. in process, and the floor of a call over gRPC at the same concurrency right after it (the machine's speed
  # drifts over a round: a target compares the two, so they are measured back to back)
  serve_cpu=("${server_cpu[@]}")
  for streams in 1 16 256; do
    start_serve in-process
    for keys in many hot; do
      measure admit-serve grpc "$keys" "$streams" "$round" 0 --target "$grpc_target"
    done
    if ((streams == 16)); then measure admit-serve grpc gcra 16 "$round" 0 --target "$grpc_target"; fi
    stop_serve
    start_server grpc-floor "$floor_bin" --host 127.0.0.1 --port 0
    measure grpc-floor empty many "$streams" "$round" 0 --target "$grpc_target"
    stop_serve
  done
  # b. the library call
  for keys in many hot; do
    for streams in 1 16; do
      measure admit-library in-process "$keys" "$streams" "$round" 0 --mode library --config "$config_dir"
    done
  done
  # c. on Redis, and the floor of a call that goes to Redis (the floor server sending INCRBY + EXPIRE NX of a counter
  # per call) at the same concurrency right after it
  serve_cpu=()
  for streams in 1 16 256; do
    "${cli[@]}" flushall >/dev/null
    start_serve redis --redis "$url" --redis-required --fail-closed
    for keys in many hot; do
      measure admit-serve-redis grpc "$keys" "$streams" "$round" 1 --target "$grpc_target"
    done
    if ((streams == 16)); then measure admit-serve-redis grpc gcra 16 "$round" 1 --target "$grpc_target"; fi
    if ((streams > 1)); then measure admit-serve-redis grpc prefetch "$streams" "$round" 1 --target "$grpc_target"; fi
    stop_serve
    "${cli[@]}" flushall >/dev/null
    start_server grpc-floor-redis "$floor_bin" --host 127.0.0.1 --port 0 --redis "$url" --redis-keys "$key_count" \
      "${floor_key_shape[@]}"
    measure grpc-floor-redis empty many "$streams" "$round" 1 --target "$grpc_target"
    stop_serve
    if ((streams > 1)); then
      start_server grpc-floor-redis-hot "$floor_bin" --host 127.0.0.1 --port 0 --redis "$url" --redis-keys 1 \
        "${floor_key_shape[@]}"
      measure grpc-floor-redis empty hot "$streams" "$round" 1 --target "$grpc_target"
      stop_serve
    fi
  done
  for keys in many hot; do
    for streams in 1 16 256; do
      measure admit-library redis "$keys" "$streams" "$round" 1 --mode library --config "$config_dir" --redis "$url"
    done
  done
  # d. envoyproxy/ratelimit's Redis work
  "${cli[@]}" flushall >/dev/null
  for keys in many hot; do
    for streams in 1 16 256; do
      measure envoy-redis incr-expire "$keys" "$streams" "$round" 1 --mode redis-incr-expire --url "$url"
    done
  done
done
end_rounds

step 6/7 "medians over the rounds: $out/results.tsv"
# <impl>:<variant>/<keys>/<streams> then the medians of columns 6..19.
medians 4 19 <"$raw" >"$out/results.tsv"
declare -A dps=() p50=() p90=() p99=() pmax=() over=() errs=() ccpu=() cmds=() rusec=() rcpu=() scpu=() scalls=() cpr=()
while read -r key a b c d e f g h i j k l m n; do
  dps[$key]=$a p50[$key]=$b p90[$key]=$c p99[$key]=$d pmax[$key]=$e over[$key]=$f errs[$key]=$g ccpu[$key]=$h
  cmds[$key]=$i rusec[$key]=$j rcpu[$key]=$k scpu[$key]=$l scalls[$key]=$m cpr[$key]=$n
done <"$out/results.tsv"

step 7/7 "report: $report"
# shellcheck source=bench/serve_report.sh
source "$(dirname "${BASH_SOURCE[0]}")/serve_report.sh"
write_report
show_report '### Targets: admit serve'
