#!/usr/bin/env bash
# Measures admit's distributed GCRA (admit::redis::gcra over one admit::redis::connection, issue 5 "Performance")
# next to the references, in one run on one redis-server it starts itself, and writes docs/perf/redis.md (which
# bench/compare.sh appends to docs/PERFORMANCE.md; compare.sh does not run this script).
#
#   bench/redis_compare.sh                  the full run: 3 rounds of 3 s per case (~8 minutes on 2 cores)
#   bench/redis_compare.sh --quick          1 round of 1 s per case (~1.5 minutes); still writes the report
#   bench/redis_compare.sh --build-dir DIR  use an already configured build directory (Release, with
#                                           ADMIT_BUILD_BENCHMARKS=ON) instead of the `release` preset's build/release
#
# What it runs:
#   1. scripts/install-deps.sh --bench (redis-server, redis-tools' redis-benchmark, npm, python3-limits, python3-redis);
#   2. builds admit_redis_bench (bench/redis_bench.cpp) in Release;
#   3. `npm ci` of bench/reference/redis/node (rate-limiter-flexible + ioredis, versions pinned by its
#      package-lock.json) in a copy under the output directory;
#   4. starts redis-server on a free loopback port (--save "" --appendonly no), pinned to CPU 0 when there are 2+
#      CPUs, every client on CPU 1; captures under MONITOR the exact EVALSHA admit sends (script SHA1, keys, arguments)
#      and checks that SCRIPT LOAD of admit's own src/redis/lua/gcra.lua (after common.lua, as the build embeds them)
#      gives that SHA1;
#   5. rounds (3; 1 with --quick), each running every implementation one after the other, so that all see about the
#      same machine load; the report gives the median over the rounds of each number:
#      a. the ceiling: redis-benchmark running admit's own EVALSHA (gcra.lua, admit's keys and arguments: T = 1000 µs,
#         burst 1000, n = 1), on the hot key "{admit-bench}:hot" and on random keys "{admit-bench}:k__rand_int__"
#         (-r 100000): -c 1 -P 1,
#         -c 1 -P 64 (one connection with 64 in flight: what admit with 64 callers is compared with), -c 1 -P 512, and
#         -c 8 -P 64 (8 connections: saturates the server);
#      b. admit_redis_bench: callback-chain callers 1, 64 and 512 (and at 64: C++20 coroutines; lost-state detection
#         off), one connection, the same limiter (1000/s, burst 1000, default limiter_options) and the same keys;
#      c. rate-limiter-flexible's RateLimiterRedis on ioredis (Node), 1, 64 and 512 in flight, and with ioredis's
#         enableAutoPipelining at 64;
#      d. Python `limits` with Redis storage (moving window and fixed window: limits has no GCRA), 1 and 8 threads;
#      e. GCRA with local leasing (leases of 100 tokens) on the hot key at 1,000,000/s, next to the same limiter
#         without leasing;
#      Before each case the server's statistics are reset (CONFIG RESETSTAT); after it, INFO commandstats gives the
#      server's time inside commands per script call, the cost of each limiter's Lua script on the server.
#   6. writes docs/perf/redis.md: the targets of issue 5 (met / not met), the side-by-side table, the machine load.
# Raw outputs are kept in <build dir>/bench/redis/ (raw.tsv: every case of every round; results.tsv: the medians).
set -euo pipefail

# shellcheck source=bench/redis_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"
parse_arguments 35 "$@"

if ((quick)); then rounds=1 duration=1 warmup=0.3; else rounds=3 duration=3 warmup=0.5; fi

out="$build_dir/bench/redis"  # relative to the repository (the script runs there)
report="$repo/docs/perf/redis.md"

# The limiter every implementation gets: 1000 per second per key, bursts of 1000 (GCRA: T = 1000 µs).
rate=1000 burst=1000 interval_us=1000 key_count=100000 name=admit-bench

build_bench admit_redis_bench
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.tsv

npm_install rate-limiter-flexible rlf_bench.js
rlf_version=$(version_of rate-limiter-flexible)
ioredis_version=$(version_of ioredis)
limits_version=$(/usr/bin/python3 -c 'import limits; print(limits.__version__)')

start_redis_server
# The exact command admit sends: a short admit_redis_bench run on many keys under MONITOR, its first FCALL of the
# limiter's function library (EVALSHA of the same code on a server without functions). The
# ceiling then runs that command (script, keys, arguments) with the key replaced by redis-benchmark's __rand_int__ or
# the hot key, whatever the library's calling convention is at the time.
"${cli[@]}" monitor >"$out/monitor.txt" &
monitor_pid=$!
for ((i = 0; i < 100; ++i)); do [[ -s "$out/monitor.txt" ]] && break; sleep 0.05; done  # "OK" once attached
"$bench_bin" --url "$url" --keys many --callers 1 --key-count "$key_count" --rate "$rate" --burst "$burst" \
  --name "$name" --duration 0.2 --warmup 0.1 >/dev/null
kill "$monitor_pid" 2>/dev/null || true
wait "$monitor_pid" 2>/dev/null || true
mapfile -t evalsha < <(grep -m1 -E '"(FCALL|EVALSHA)"' "$out/monitor.txt" |
  /usr/bin/python3 -c 'import shlex, sys; print("\n".join(shlex.split(sys.stdin.read().split("] ", 1)[1])))')
((${#evalsha[@]} >= 4)) || { echo "redis_compare.sh: no FCALL or EVALSHA from admit under MONITOR ($out/monitor.txt)" >&2; exit 1; }
# EVALSHA names the script's SHA1; FCALL the library's function: admit_gcra_<the library's version> (admit_gcra_<the
# script's SHA1's first 16 digits> before the limiters and the semaphore became one library, admit_<version>).
sha=${evalsha[1]#admit_gcra_}
hot_cmd=() many_cmd=()
for a in "${evalsha[@]}"; do
  if [[ "$a" =~ ^\{$name\}:k[0-9]{12}$ ]]; then hot_cmd+=("{$name}:hot") many_cmd+=("{$name}:k__rand_int__"); else
    hot_cmd+=("$a") many_cmd+=("$a"); fi
done
# The script file(s) admit embeds (src/redis/lua/common.lua, when there is one, before gcra.lua, as embed.cmake
# does; then the script's last line, `return call(KEYS, ARGV)`, when the code is a function library): their SHA1 must
# be the one admit sends (its first 16 digits, for an FCALL).
lua_files=(src/redis/lua/gcra.lua)
[[ -f src/redis/lua/common.lua ]] && lua_files=(src/redis/lua/common.lua src/redis/lua/gcra.lua)
call_line=""
grep -q '^local function call(KEYS, ARGV)' src/redis/lua/gcra.lua && call_line=$'\nreturn call(KEYS, ARGV)\n'
file_sha=$({ cat "${lua_files[@]}"; printf '%s' "$call_line"; } | "${cli[@]}" -x script load | tr -d '\r')
script_note="SCRIPT LOAD of ${lua_files[*]} (concatenated) gives $file_sha, the SHA1 admit's call names"
if [[ "${evalsha[0]}" == FCALL && "$file_sha" != "$sha"* ]]; then
  # One library for all of admit's code: the function's digits are the library's version; its code, as the server
  # has it, must hold the files' text.
  "${cli[@]}" function list withcode libraryname "admit_$sha" >"$out/library.txt"
  if /usr/bin/python3 -c 'import sys; code = open(sys.argv[1]).read(); text = "".join(open(f).read() for f in sys.argv[2:]); sys.exit(0 if text in code else 1)' \
    "$out/library.txt" "${lua_files[@]}"; then
    file_sha=$sha
    script_note="the library admit_$sha that admit's FCALL names holds ${lua_files[*]} (concatenated) as they are"
  fi
fi
if [[ "$file_sha" != "$sha"* ]]; then
  script_note="**SCRIPT LOAD of ${lua_files[*]} gives $file_sha, but admit sends $sha** (the build is older or newer than the sources): the ceiling runs admit's"
  echo "redis_compare.sh: warning: $script_note" >&2
fi
printf '  admit sends: %s\n' "${evalsha[*]}" >&2

raw="$out/raw.tsv"
: >"$raw"
loads=()

# server_us [PER]: the server's time inside commands (INFO commandstats, µs) per decision since the last RESETSTAT.
# Decisions are EVALSHA calls (one per decision: rate-limiter-flexible, limits), or with PER = get the GETs (admit's
# GCRA script GETs each decision's key once, and decides a batch of them in one EVALSHA), or with PER = N, N per call
# (redis-benchmark running a batch of N).
server_us() {
  local per=${1:-1}
  "${cli[@]}" info commandstats | tr -d '\r' | awk -F'[:,=]' -v per="$per" '
    /^cmdstat_/ { for (i = 2; i < NF; i += 2) if ($i == "usec") total += $(i + 1) }
    /^cmdstat_(evalsha|fcall):/ { for (i = 2; i < NF; i += 2) if ($i == "calls") calls += $(i + 1) }
    /^cmdstat_get:/ { for (i = 2; i < NF; i += 2) if ($i == "calls") gets += $(i + 1) }
    END {
      decisions = per == "get" ? gets : calls * per
      if (decisions > 0) printf "%.2f", total / decisions; else printf "-"
    }'
}
# measure CMD...: one case whose output has one data line (impl variant keys callers rep dps p50 p99 admitted errors
# cmds_per_write client_cpu_us); appends it to raw.tsv with the server's µs per script call and prints it.
measure() {
  "${cli[@]}" config resetstat >/dev/null
  local line per=1
  [[ "$1" == "$bench_bin" ]] && per="get"
  line=$("${client_cpu[@]}" "$@" | grep -v '^#' | tail -1)
  [[ -n "$line" ]] || { echo "redis_compare.sh: no result from: $*" >&2; return 1; }
  printf '%s\t%s\n' "$line" "$(server_us "$per")" | tee -a "$raw" >&2
}
# batch_cmd KEY B: admit's EVALSHA deciding a batch of B decisions on KEY (hot or a __rand_int__ key, each occurrence
# of which redis-benchmark draws anew), from the captured single decision {EVALSHA sha 2 epoch key detect p1 .. pP n
# k}: KEYS = the epoch then B state keys, ARGV = detect, the P parameters, then n and k per decision (common.lua).
batch_cmd() {
  local key=$1 b=$2 i last=$((${#evalsha[@]} - 1))
  batch=("${evalsha[0]}" "${evalsha[1]}" $((b + 1)) "${evalsha[3]}")
  for ((i = 0; i < b; ++i)); do batch+=("$key"); done
  batch+=("${evalsha[@]:5:$((last - 6))}")
  for ((i = 0; i < b; ++i)); do batch+=("${evalsha[last - 1]}" "${evalsha[last]}"); done
}
# redis_benchmark KEYS C P ROUND [B]: redis-benchmark -c C -P P, admit's EVALSHA on the hot key or random keys; with
# B, calls deciding B requests each (decisions/s = calls/s × B).
redis_benchmark() {
  local keys=$1 c=$2 p=$3 r=$4 b=${5:-1} n extra=() cmd=() variant
  if ((p == 1)); then n=$((8000 * duration)); else n=$((100000 * duration)); fi
  n=$((n / b))
  if [[ $keys == hot ]]; then cmd=("${hot_cmd[@]}"); else cmd=("${many_cmd[@]}") extra=(-r "$key_count"); fi
  variant="c$c-P$p"
  if ((b > 1)); then
    if [[ $keys == hot ]]; then batch_cmd "{$name}:hot" "$b"; else batch_cmd "{$name}:k__rand_int__" "$b"; fi
    cmd=("${batch[@]}") variant="c$c-P$p-B$b"
  fi
  "${cli[@]}" config resetstat >/dev/null
  local csv
  csv=$("${client_cpu[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -P "$p" -n "$n" "${extra[@]}" --csv \
    "${cmd[@]}" | tail -1)
  # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  awk -F'","' -v keys="$keys" -v c="$c" -v p="$p" -v b="$b" -v r="$r" -v v="$variant" -v s="$(server_us "$b")" '{
      gsub(/"/, "", $0); split($0, f, ",")
      printf "redis-benchmark\t%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t-\t0\t%d\t-\t%s\n", v, keys, c * p * b, r, f[2] * b,
        f[5] * 1000, f[7] * 1000, p, s
    }' <<<"$csv" | tee -a "$raw" >&2
}

step 5/7 "$rounds round(s) of $duration s per case: redis-benchmark, admit_redis_bench, rate-limiter-flexible, limits"
common=(--duration "$duration" --warmup "$warmup" --repetitions 1)
for ((round = 1; round <= rounds; ++round)); do
  begin_round "$round"
  for keys in hot many; do
    # a. the ceiling
    for cp in "1 1" "1 64" "1 512" "8 64"; do redis_benchmark "$keys" "${cp% *}" "${cp#* }" "$round"; done
    # a'. the ceiling for batches: 64 decisions in flight as 2 calls of 32 (what admit's batching does at 64 callers,
    #     at most two calls out, the rest queued), and 512 in flight as 8 connections × 2 calls of 32
    for cp in "1 2" "8 2"; do redis_benchmark "$keys" "${cp% *}" "${cp#* }" "$round" 32; done
    # b. admit
    for callers in 1 64 512; do
      measure "$bench_bin" --url "$url" --keys "$keys" --callers "$callers" --key-count "$key_count" --rate "$rate" \
        --burst "$burst" --name "$name" "${common[@]}"
    done
    measure "$bench_bin" --url "$url" --keys "$keys" --callers 64 --key-count "$key_count" --rate "$rate" \
      --burst "$burst" --name "$name" --style coroutine "${common[@]}"
    measure "$bench_bin" --url "$url" --keys "$keys" --callers 64 --key-count "$key_count" --rate "$rate" \
      --burst "$burst" --name "$name" --lost-state-detection on "${common[@]}"
    measure "$bench_bin" --url "$url" --keys "$keys" --callers 64 --key-count "$key_count" --rate "$rate" \
      --burst "$burst" --name "$name" --max-batch 1 "${common[@]}"
    # e. GCRA with local leasing, on the hot key only (where it pays: admissions on one key) with a rate far above what
    #    the callers reach (1,000,000/s, burst 100,000), leases of 100 tokens; next to the same limiter without leasing.
    if [[ $keys == hot ]]; then
      for callers in 1 64 512; do
        measure "$bench_bin" --url "$url" --keys hot --callers "$callers" --rate 1000000 --burst 100000 \
          --name lease --lease 100 "${common[@]}"
      done
      measure "$bench_bin" --url "$url" --keys hot --callers 64 --rate 1000000 --burst 100000 --name lease \
        --tag -fast "${common[@]}"
    fi
    # c. rate-limiter-flexible
    for callers in 1 64 512; do
      measure node "$out/node/rlf_bench.js" --url "$url" --keys "$keys" --callers "$callers" --key-count "$key_count" \
        "${common[@]}"
    done
    measure node "$out/node/rlf_bench.js" --url "$url" --keys "$keys" --callers 64 --key-count "$key_count" \
      --auto-pipelining "${common[@]}"
    # d. Python limits
    for strategy in moving fixed; do
      for callers in 1 8; do
        measure /usr/bin/python3 bench/reference/redis/python/limits_bench.py --url "$url" --strategies "$strategy" \
          --keys "$keys" --callers "$callers" --key-count "$key_count" "${common[@]}"
      done
    done
  done
done
end_rounds

step 6/7 "medians over the rounds: $out/results.tsv"
# <impl>:<variant>/<keys>/<callers> <dps> <p50> <p99> <admitted> <errors> <cmds_per_write> <client_cpu> <server_us>
# — each the median over the rounds ("-" where not measured).
medians 4 13 <"$raw" >"$out/results.tsv"

# (The errors column is reported from results.tsv itself, below.)
declare -A dps=() p50=() p99=() adm=() cpw=() ccpu=() sus=()
while read -r key a b c d _ f g h; do
  dps[$key]=$a p50[$key]=$b p99[$key]=$c adm[$key]=$d cpw[$key]=$f ccpu[$key]=$g sus[$key]=$h
done <"$out/results.tsv"

# one-decimal helpers (fmt_int, us_to_ms, le and verdict: bench/redis_common.sh).
one() { if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.1f", a }'; fi; }
pct() { if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.1f%%", a * 100 }'; fi; }
# ratio A B: A / B with two decimals, empty when either is missing.
ratio() { [[ -n "${1:-}" && "$1" != - && -n "${2:-}" && "$2" != - ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b }'; }
ge() { [[ -n "${1:-}" ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
# best_rlf KEYS: the faster rate-limiter-flexible configuration at 64 in flight (default or auto-pipelining).
best_rlf() {
  local a=${dps[rlf:default/$1/64]:--} b=${dps[rlf:autopipelining/$1/64]:--}
  if [[ $a == - ]]; then echo "autopipelining"; elif [[ $b == - ]]; then echo default;
  elif awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > a) }'; then echo autopipelining; else echo default; fi
}

# ceiling KEYS: the key of redis-benchmark's faster form of admit's script at 64 in flight on one connection (64
# single-decision calls pipelined, or 2 calls of 32 decisions).
ceiling() {
  local a=${dps[redis-benchmark:c1-P64/$1/64]:-0} b=${dps[redis-benchmark:c1-P2-B32/$1/64]:-0}
  if awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > a) }'; then echo c1-P2-B32; else echo c1-P64; fi
}
check_ceiling() {
  local ok=1 k r
  for k in hot many; do
    r=$(ratio "${dps[admit:callback/$k/64]:--}" "${dps[redis-benchmark:$(ceiling $k)/$k/64]:--}")
    [[ -z "$r" ]] && { echo none; return; }
    ge "$r" 0.8 || ok=0
  done
  echo $ok
}
check_rlf() {
  local ok=1 k r
  for k in hot many; do
    r=$(ratio "${dps[admit:callback/$k/64]:--}" "${dps[rlf:$(best_rlf $k)/$k/64]:--}")
    [[ -z "$r" ]] && { echo none; return; }
    ge "$r" 1.5 || ok=0
  done
  echo $ok
}
check_p99() {
  local ok=1 k
  for k in hot many; do
    [[ "${p99[admit:callback/$k/64]:--}" == - ]] && { echo none; return; }
    le "${p99[admit:callback/$k/64]}" 2000 || ok=0
  done
  echo $ok
}
# Leasing: decisions/s above what the server can do at all (redis-benchmark saturating it, 8 connections × 64), i.e.
# bounded by the client, not by Redis.
check_lease() {
  local r
  r=$(ratio "${dps[admit-lease:callback/hot/64]:--}" "${dps[redis-benchmark:c8-P64/hot/512]:--}")
  [[ -z "$r" ]] && { echo none; return; }
  if ge "$r" 1; then echo 1; else echo 0; fi
}

step 7/7 "report: $report"
describe_machine
rlf_hot=$(best_rlf hot) rlf_many=$(best_rlf many)

# row IMPL:VARIANT KEYS CALLERS NAME VARIANT-TEXT: one line of the side-by-side table.
row() {
  local k="$1/$2/$3"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$4" "$5" "$3" "$(fmt_int "${dps[$k]:-}")" \
    "$(us_to_ms "${p50[$k]:-}")" "$(us_to_ms "${p99[$k]:-}")" "$(pct "${adm[$k]:-}")" "$(one "${cpw[$k]:-}")" \
    "$(one "${ccpu[$k]:-}")" "$(one "${sus[$k]:-}")"
}

mkdir -p "$(dirname "$report")"
{
  cat <<EOF
## Redis: admit::redis::gcra next to redis-benchmark, rate-limiter-flexible and Python limits

Run on $(date +%F) by \`$command_line\` (separately from bench/compare.sh), medians over $rounds round(s) of ${duration} s per
case (after ${warmup} s of warm-up), every implementation one after the other in each round, on one redis-server
$redis_version (127.0.0.1, persistence off) that the script started. Machine: $(nproc) × $cpu; $pinning. Load average
before $load_before, after $load_after (1-minute value at the rounds: ${loads[*]}; max $load_max).

The limiter, the same for everyone: 1000 per second per key, bursts of 1000 — admit's GCRA (T = ${interval_us} µs,
burst $burst, n = 1, default \`limiter_options\`), rate-limiter-flexible $rlf_version \`RateLimiterRedis({points: 1000,
duration: 1})\` on ioredis $ioredis_version, limits $limits_version \`"1000/second"\`. Keys: one hot key, or ${key_count} keys picked
uniformly at random per decision (\`k\` + 12 digits, redis-benchmark's \`__rand_int__\` form). On the hot key nearly
every decision is a refusal (a GCRA refusal writes nothing); on many keys every one is an admission.

The ceiling runs the very command admit sends (captured under MONITOR from admit_redis_bench):
\`$(printf '%s ' "${many_cmd[@]}" | sed 's/ $//')\` (with \`-r $key_count\`; on the hot key \`{$name}:hot\`);
$script_note.

### Targets: Redis

| target | measured | verdict |
| --- | --- | --- |
| ≥ 80% of the decisions/s redis-benchmark reaches for admit's own GCRA script (pipelined, same server), at 64 in flight on one connection | hot key: admit $(fmt_int "${dps[admit:callback/hot/64]:-}") vs redis-benchmark \`$(ceiling hot)\` $(fmt_int "${dps[redis-benchmark:$(ceiling hot)/hot/64]:-}") ($(ratio "${dps[admit:callback/hot/64]:--}" "${dps[redis-benchmark:$(ceiling hot)/hot/64]:--}")×); many keys: $(fmt_int "${dps[admit:callback/many/64]:-}") vs \`$(ceiling many)\` $(fmt_int "${dps[redis-benchmark:$(ceiling many)/many/64]:-}") ($(ratio "${dps[admit:callback/many/64]:--}" "${dps[redis-benchmark:$(ceiling many)/many/64]:--}")×) | $(verdict "$(check_ceiling)") |
| ≥ 1.5× rate-limiter-flexible's decisions/s at 64 in flight | hot key: admit $(fmt_int "${dps[admit:callback/hot/64]:-}") vs $(fmt_int "${dps[rlf:$rlf_hot/hot/64]:-}") (RLF $rlf_hot; $(ratio "${dps[admit:callback/hot/64]:--}" "${dps[rlf:$rlf_hot/hot/64]:--}")×); many keys: $(fmt_int "${dps[admit:callback/many/64]:-}") vs $(fmt_int "${dps[rlf:$rlf_many/many/64]:-}") (RLF $rlf_many; $(ratio "${dps[admit:callback/many/64]:--}" "${dps[rlf:$rlf_many/many/64]:--}")×) | $(verdict "$(check_rlf)") |
| p99 ≤ 2 ms at 64 in flight | admit p99 hot $(us_to_ms "${p99[admit:callback/hot/64]:-}") ms, many keys $(us_to_ms "${p99[admit:callback/many/64]:-}") ms | $(verdict "$(check_p99)") |
| with local token leasing, decisions/s bounded by the local limiter, not by Redis | hot key, 64 callers, 1,000,000/s: leasing 100 tokens $(fmt_int "${dps[admit-lease:callback/hot/64]:-}") vs without $(fmt_int "${dps[admit:callback-fast/hot/64]:-}") ($(ratio "${dps[admit-lease:callback/hot/64]:--}" "${dps[admit:callback-fast/hot/64]:--}")×), above the ceiling's $(fmt_int "${dps[redis-benchmark:c8-P64/hot/512]:-}") | $(verdict "$(check_lease)") |

Each verdict needs both the hot key and many keys. The ceiling is redis-benchmark's faster form of admit's script at
64 in flight on one connection: 64 one-decision calls pipelined (\`c1-P64\`), or two calls deciding 32 each
(\`c1-P2-B32\`, what admit's batching sends). The rate-limiter-flexible target is judged against its faster
configuration at 64 in flight (ioredis default, or with \`enableAutoPipelining\`).

### Side by side (medians)

Decisions/s count only decisions the limiter made (errors — timeouts, connection errors — are counted apart; there
were none unless a row says so below). Latency is per decision, from the call to its completion. *in flight* is the
number of concurrent callers (redis-benchmark: connections × pipeline depth). *cmds/write*: admit's commands per
socket write (its pipelining), redis-benchmark's \`-P\`. *client CPU*: the client process's CPU time per decision, µs.
*server µs*: the server's time inside commands per decision (\`INFO commandstats\`, all commands' usec — the scripts'
and, counted again, the commands they call — ÷ decisions: EVALSHA calls, or for admit the GETs, one per decision)
— the cost of each decision on the server.

| implementation | how | in flight | decisions/s | p50 ms | p99 ms | admitted | cmds/write | client CPU µs | server µs |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
EOF
  for keys in hot many; do
    label="*one hot key*"
    [[ $keys == many ]] && label="*${key_count} keys*"
    printf '| %s | | | | | | | | | |\n' "$label"
    for v in c1-P1:1 c1-P64:64 c1-P512:512 c8-P64:512; do
      c=${v%%-*} p=${v#*-P}
      p=${p%:*}
      row redis-benchmark:${v%:*} "$keys" "${v#*:}" "redis-benchmark (the ceiling)" \
        "admit's EVALSHA, \`-c ${c#c} -P $p\`"
    done
    row redis-benchmark:c1-P2-B32 "$keys" 64 "redis-benchmark (the ceiling)" "admit's EVALSHA, 32 decisions a call, \`-c 1 -P 2\`"
    row redis-benchmark:c8-P2-B32 "$keys" 512 "redis-benchmark (the ceiling)" "admit's EVALSHA, 32 decisions a call, \`-c 8 -P 2\`"
    for c in 1 64 512; do row admit:callback "$keys" "$c" "**admit** \`redis::gcra\`" "callback chains"; done
    row admit:coroutine "$keys" 64 "**admit** \`redis::gcra\`" "C++20 coroutines"
    row admit:callback-lsd "$keys" 64 "**admit** \`redis::gcra\`" "callback chains, lost-state detection on"
    row admit:callback-b1 "$keys" 64 "**admit** \`redis::gcra\`" "callback chains, \`max_batch = 1\` (no batching)"
    if [[ $keys == hot ]]; then
      row admit:callback-fast "$keys" 64 "**admit** \`redis::gcra\`" "1,000,000/s, burst 100,000: no leasing"
      for c in 1 64 512; do
        row admit-lease:callback "$keys" "$c" "**admit**, local token leasing" "1,000,000/s, burst 100,000, leases of 100"
      done
    fi
    for c in 1 64 512; do row rlf:default "$keys" "$c" "rate-limiter-flexible" "ioredis defaults"; done
    row rlf:autopipelining "$keys" 64 "rate-limiter-flexible" "ioredis \`enableAutoPipelining\`"
    for st in moving fixed; do
      for c in 1 8; do row limits:$st "$keys" "$c" "Python limits" "$st window, $c thread(s)"; done
    done
  done
  errors=$(awk '$6 != "-" && $6 > 0 { printf "%s%s (%s per round)", (n++ ? ", " : ""), $1, $6 }' "$out/results.tsv")
  if [[ -n "$errors" ]]; then printf '\nRows with errors (decisions Redis did not make): %s.\n' "$errors"; fi
  cat <<EOF

Reading the table:

- redis-benchmark \`-c 1 -P 64\` sends 64 EVALSHA, waits for all 64 replies, sends the next 64: the server works
  while the client waits and the other way round. \`-c 1 -P 512\` and \`-c 8 -P 64\` keep the server busy nearly all
  the time: the higher of the two is about what this server does with this script at all (on 2 cores, redis-
  benchmark's own CPU can be the limit too).
- admit batches (\`limiter_options::max_batch\`, default 64): a decision asked for while two calls of its limiter are
  out waits and leaves with the others as one EVALSHA that decides them in order at one instant of the server's
  clock. A call costs the server a fixed few µs (dispatch, the script's setup, TIME, the reply) on top of each
  decision's GET and SET: batches pay that once for many decisions. *cmds/write* counts calls, so with batching it
  stays small; the row \`max_batch = 1\` shows one call per decision (the connection's pipelining alone).
- *server µs* is what a decision costs the server; with one Redis core, 1 ÷ server µs bounds the decisions/s of any
  client: here $(one "${sus[admit:callback/many/64]:-}") µs for admit's GCRA on many keys (about $(fmt_int "$(awk -v a="${sus[admit:callback/many/64]:-0}" 'BEGIN { if (a > 0) print 1e6 / a }')")/s at most), $(one "${sus[admit:callback-b1/many/64]:-}") µs without batching, $(one "${sus[rlf:default/many/64]:-}") µs for
  rate-limiter-flexible's script (SET NX EX, INCRBY, PTTL: a fixed window; at most $(fmt_int "$(awk -v a="${sus[rlf:default/many/64]:-0}" 'BEGIN { if (a > 0) print 1e6 / a }')")/s). On many keys a GCRA
  key at 1000/s lives only until its TAT (≤ 1 ms after a lone request): every admission there creates a key that
  Redis expires soon after, where a fixed-window key lives for its whole second. Lost-state detection (off by
  default) adds the epoch hash's update to every call that admits: the row "lost-state detection on".
- Raw outputs of this run: \`$out/\` (raw.tsv: every case of every round; results.tsv: the medians).
EOF
} >"$report"

show_report '### Targets: Redis'
