#!/usr/bin/env bash
# Measures admit's distributed semaphore (admit::redis::semaphore) next to the npm packages redis-semaphore (its
# Semaphore on ioredis) and bottleneck (Bottleneck's Redis clustering mode, maxConcurrent as the capacity), in one run
# on one redis-server it starts itself, and writes docs/perf/redis_semaphore.md.
#
#   bench/redis_semaphore_compare.sh                  the full run: 3 rounds (3 s per cycles case, 300 wake-ups)
#   bench/redis_semaphore_compare.sh --quick          1 round (1 s per cycles case, 100 wake-ups); still writes
#                                                     the report
#   bench/redis_semaphore_compare.sh --build-dir DIR  use an already configured build directory (Release, with
#                                                     ADMIT_BUILD_BENCHMARKS=ON) instead of the `release` preset's
#                                                     build/release
#
# What it runs:
#   1. scripts/install-deps.sh --bench (redis-server, npm);
#   2. builds admit_redis_semaphore_bench (bench/redis_semaphore_bench.cpp and its parts) in Release;
#   3. `npm ci` of bench/reference/redis/node (redis-semaphore, bottleneck and ioredis, versions pinned by its
#      package-lock.json) in a copy under the output directory;
#   4. starts redis-server on a free loopback port (--save "" --appendonly no), pinned to CPU 0 when there are 2+
#      CPUs, every client on CPU 1;
#   5. rounds (3; 1 with --quick), each running every implementation one after the other, so that all see about the
#      same machine load; the report gives the median over the rounds of each number. Every implementation gets the
#      same cases, with its default options (admit: default semaphore_options, poll_interval 1 s):
#      a. cycles 1:1 — one contender on a semaphore of capacity 1, acquire then release, as fast as it can;
#      b. cycles 64:8 — 64 contenders on a semaphore of capacity 8 (admit: 64 threads sharing one semaphore object
#         and one connection; redis-semaphore: 64 Semaphore objects on one ioredis client; bottleneck: 64 async
#         loops scheduling on one limiter); admit runs a and b a second time with its asynchronous API (variant
#         async: the contenders are chains of completion handlers on the connection's io thread, as event loops run);
#      c. wakeup — capacity 1: a holder holds the permit, a waiter (another semaphore object / limiter on other
#         connections: another process) waits; once the waiter is waiting in Redis, 2 ms + U(0, 10) ms later the
#         holder releases; the time from just before the release call to the waiter holding the permit, 300 rounds;
#      d. the floor (admit_redis_semaphore_bench): the same wake-up rounds with LPUSH -> BLPOP, no semaphore;
#      e. crowd 200:8 — 200 contenders on capacity 8, each holding what it gets 20 ms: Redis's CPU time per grant
#         (INFO cpu over the window) and the hand-off from a release to the grant of the permit it freed;
#      f. the floors of the cycles cases: the minimal FIFO hand-off (admit_redis_semaphore_bench's minimal-fifo: a
#         function of acquire and release-to-the-head only, with admit's asynchronous contenders) at 1:1 and 64:8, and
#         two round trips of `redis-benchmark -c 1 -t ping` (PING_MBULK), the least a cycle of two calls can take.
#   6. writes docs/perf/redis_semaphore.md: the targets (admit p99 wake-up <= 2 ms on loopback; the crowd case; the
#      cycles cases against redis-semaphore and the floors), the side-by-side table, the machine load.
# Raw outputs are kept in <build dir>/bench/redis_semaphore/ (raw.tsv: every case of every round; results.tsv: the
# medians; out-*.txt: each program's whole output).
set -euo pipefail

# shellcheck source=bench/redis_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"
parse_arguments 36 "$@"

if ((quick)); then rounds=1 duration=1 warmup=0.3 wakeups=100; else rounds=3 duration=3 warmup=0.5 wakeups=300; fi
# The cases, the same for every implementation: contenders:capacity of the cycles cases; the wake-up's release delay.
cycles_cases="1:1,64:8" settle_ms=2 jitter_ms=10 target_p99_us=2000
# The crowd case (contenders:capacity:hold ms) and its targets: admit's Redis CPU per grant at most a fifth of
# redis-semaphore's, its hand-off p99 at most 1 ms.
crowd_case="200:8:20" crowd_key=200/8 target_crowd_p99_us=1000

out="$build_dir/bench/redis_semaphore"  # relative to the repository (the script runs there)
report="$repo/docs/perf/redis_semaphore.md"

build_bench admit_redis_semaphore_bench
# The tree just built: the commit, and whether the semaphore's sources had uncommitted changes.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain -- src/redis/semaphore/ src/redis/lua/semaphore/ include/admit/redis/semaphore.hpp \
  2>/dev/null | wc -l)
tree="commit $commit"
((dirty == 0)) || tree="commit $commit with uncommitted changes to the semaphore's sources"
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.tsv

npm_install "redis-semaphore, bottleneck" semaphore_bench.js
rs_version=$(version_of redis-semaphore) bn_version=$(version_of bottleneck) ioredis_version=$(version_of ioredis)
node_version=$(node --version)

start_redis_server

raw="$out/raw.tsv"
: >"$raw"
loads=()

# measure LABEL CMD...: one program run (all the cases of one implementation); its data lines (impl variant case
# contenders capacity rep cycles/s p50 p99 mean max samples errors fairness) go to raw.tsv, its whole output to
# out-LABEL.txt; prints them.
measure() {
  local label=$1
  shift
  "${cli[@]}" flushall >/dev/null  # every run starts from an empty server
  "${client_cpu[@]}" "$@" >"$out/out-$label.txt"
  grep -q -v '^#' "$out/out-$label.txt" || { echo "redis_semaphore_compare.sh: no result from: $*" >&2; return 1; }
  grep -v '^#' "$out/out-$label.txt" | tee -a "$raw" >&2
  grep -E '^# admit (async )?cycles' "$out/out-$label.txt" >&2 || true
}

# measure_ping ROUND: two round trips of PING from one client (redis-benchmark -c 1, PING_MBULK: a command as clients
# send it), as a cycles line of raw.tsv (impl redis-benchmark, variant ping): cycles/s = requests/s ÷ 2, latencies
# (µs) twice a request's.
measure_ping() {
  local csv
  csv=$("${client_cpu[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c 1 -n 20000 -t ping --csv 2>/dev/null)
  printf '%s\n' "$csv" >"$out/out-ping-$1.txt"
  awk -F'","' -v OFS='\t' '$1 == "\"PING_MBULK" {
      gsub(/"/, "", $8)
      print "redis-benchmark", "ping", "cycles", 1, 1, 1, $2 / 2, $5 * 2000, $7 * 2000, $3 * 2000, $8 * 2000, 20000, 0, "-"
    }' <<<"$csv" | tee -a "$raw" >&2
}

step 5/7 "$rounds round(s): cycles $cycles_cases ($duration s each), $wakeups wake-ups; admit, redis-semaphore, bottleneck"
common=(--cycles "$cycles_cases" --duration "$duration" --warmup "$warmup" --wakeup-rounds "$wakeups"
  --settle-ms "$settle_ms" --jitter-ms "$jitter_ms" --crowd "$crowd_case")
for ((round = 1; round <= rounds; ++round)); do
  begin_round "$round"
  # One run per implementation and round (each program's "rep" column is 1; raw.tsv's lines are in round order).
  measure "admit-$round" "$bench_bin" --url "$url" "${common[@]}"
  measure_ping "$round"
  for impl in redis-semaphore bottleneck; do
    measure "$impl-$round" node "$out/node/semaphore_bench.js" --impl "$impl" --url "$url" "${common[@]}"
  done
done
end_rounds

step 6/7 "medians over the rounds: $out/results.tsv"
# <impl>:<variant>/<case>/<contenders>/<capacity> <cycles/s> <p50> <p99> <mean> <max> <samples> <errors> <fairness>
# — each the median over the rounds ("-" where not measured).
medians 5 14 -v CONVFMT=%.4f <"$raw" >"$out/results.tsv"

declare -A cps=() p50=() p99=() mean=() max=() samples=() err=() fair=()
while read -r key a b c d e f g h; do
  cps[$key]=$a p50[$key]=$b p99[$key]=$c mean[$key]=$d max[$key]=$e samples[$key]=$f err[$key]=$g fair[$key]=$h
done <"$out/results.tsv"

# two N: N with two decimals; "—" when not measured (fmt_int, us_to_ms, le and verdict: bench/redis_common.sh).
two() { if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.2f", a }'; fi; }
wake=admit:default/wakeup/1/1 floor=redis-floor:lpush-blpop/wakeup/1/1
# What the floor says about the verdict: whether the machine itself (no semaphore) stays within the target.
floor_note() {
  [[ "${p99[$floor]:--}" == - || "${p99[$wake]:--}" == - ]] && return
  if le "${p99[$floor]}" "$target_p99_us"; then
    local d50 d99 spread=''
    d50=$(awk -v a="${p50[$wake]}" -v b="${p50[$floor]}" 'BEGIN { print a - b }')
    d99=$(awk -v a="${p99[$wake]}" -v b="${p99[$floor]}" 'BEGIN { print a - b }')
    # Below the floor: the two tails are separate runs of a few hundred rounds, each as noisy as the other.
    awk -v a="$d50" -v b="$d99" 'BEGIN { exit !(a < 0 || b < 0) }' &&
      spread=' (below zero: the two are separate runs, and that difference is within their run-to-run spread)'
    printf 'The floor (no semaphore) has p99 %s ms on this run, within the target: admit minus the floor is %s ms at p50, %s ms at p99%s.' \
      "$(us_to_ms "${p99[$floor]}")" "$(us_to_ms "$d50")" "$(us_to_ms "$d99")" "$spread"
  else
    printf 'The floor (no semaphore: one LPUSH waking one BLPOP, through the same threads) has p99 %s ms on this run, itself above the target: at this load the machine, not the semaphore alone, sets the tail, and the verdict needs a quieter run. At p50, admit takes %s ms, the floor %s ms.' \
      "$(us_to_ms "${p99[$floor]}")" "$(us_to_ms "${p50[$wake]}")" "$(us_to_ms "${p50[$floor]}")"
  fi
}
crowd_ratio() {
  local a=${crowd_cpu[admit]:--} b=${crowd_cpu[redis-semaphore]:--}
  if [[ $a == - || $b == - ]]; then printf '—'; else awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f×", a / b }'; fi
}
check_crowd_cpu() {
  local a=${crowd_cpu[admit]:--} b=${crowd_cpu[redis-semaphore]:--}
  if [[ $a == - || $b == - ]]; then echo none; else awk -v a="$a" -v b="$b" 'BEGIN { print (a * 5 <= b) ? 1 : 0 }'; fi
}
check_crowd_p99() {
  local k="admit:default/crowd/$crowd_key"
  [[ "${p99[$k]:--}" == - ]] && { echo none; return; }
  if le "${p99[$k]}" "$target_crowd_p99_us"; then echo 1; else echo 0; fi
}
check_p99() {
  [[ "${p99[$wake]:--}" == - ]] && { echo none; return; }
  if le "${p99[$wake]}" "$target_p99_us"; then echo 1; else echo 0; fi
}
# The cycles cases' targets. quotient A B: A ÷ B with two decimals, "—" when either is not measured.
quotient() {
  if [[ "${1:--}" == - || "${2:--}" == - ]]; then printf '—'; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; fi
}
at_least() { [[ "$1" != — ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
minimal=minimal-fifo:async/cycles ping=redis-benchmark:ping/cycles/1/1
# cycles_row VARIANT NAME: the 64:8 target for admit's VARIANT contenders: >= 1.0x redis-semaphore's cycles/s with
# fairness 1.00 — or, when the minimal FIFO hand-off itself stays below redis-semaphore, within 10 % of it.
cycles_row() {
  local a="admit:$1/cycles/64/8" rs_q min_q min_rs verdict_code=none
  rs_q=$(quotient "${cps[$a]:--}" "${cps[redis-semaphore:default/cycles/64/8]:--}")
  min_q=$(quotient "${cps[$a]:--}" "${cps[$minimal/64/8]:--}")
  min_rs=$(quotient "${cps[$minimal/64/8]:--}" "${cps[redis-semaphore:default/cycles/64/8]:--}")
  if [[ $rs_q != — ]]; then
    verdict_code=0
    if at_least "$rs_q" 1 && at_least "$(two "${fair[$a]:--}")" 1; then verdict_code=1; fi
    if ! at_least "$min_rs" 1 && at_least "$min_q" 0.9; then verdict_code=1; fi
  fi
  printf '| 64:8, %s: ≥ 1.0× redis-semaphore with fairness 1.00, or within 10 %% of the minimal FIFO hand-off if that stays below redis-semaphore | %s cycles/s, fairness %s: %s× redis-semaphore (%s), %s× the minimal FIFO hand-off (%s cycles/s, itself %s× redis-semaphore) | %s |\n' \
    "$2" "$(fmt_int "${cps[$a]:-}")" "$(two "${fair[$a]:--}")" "$rs_q" "$(fmt_int "${cps[redis-semaphore:default/cycles/64/8]:-}")" \
    "$min_q" "$(fmt_int "${cps[$minimal/64/8]:-}")" "$min_rs" "$(verdict "$verdict_code")"
}
# ping_row VARIANT NAME: the 1:1 target: within 10 % of two round trips (PING from one client) — or, when the minimal
# FIFO hand-off (the least two calls of a FIFO semaphore cost, measured in the same rounds) is itself not within 10 %
# of them, within 10 % of the minimal hand-off: met at that floor.
ping_row() {
  local a="admit:$1/cycles/1/1" q min_q min_ping verdict_code=none
  q=$(quotient "${cps[$a]:--}" "${cps[$ping]:--}")
  min_q=$(quotient "${cps[$a]:--}" "${cps[$minimal/1/1]:--}")
  min_ping=$(quotient "${cps[$minimal/1/1]:--}" "${cps[$ping]:--}")
  if [[ $q != — ]]; then
    verdict_code=0
    if at_least "$q" 0.9; then
      verdict_code=1
    elif ! at_least "$min_ping" 0.9 && at_least "$min_q" 0.9; then
      verdict_code=floor
    fi
  fi
  # shellcheck disable=SC2016  # the backticks are Markdown's
  printf '| 1:1, %s: within 10 %% of two round trips, or of the minimal FIFO hand-off where that is not within 10 %% of them | %s cycles/s against %s for two PINGs from `redis-benchmark -c 1` (%s µs each): %s×; %s× the minimal FIFO hand-off (%s cycles/s, itself %s× the two PINGs) | %s |\n' \
    "$2" "$(fmt_int "${cps[$a]:-}")" "$(fmt_int "${cps[$ping]:-}")" "$(awk -v p="${p50[$ping]:-0}" 'BEGIN { printf "%.0f", p / 2 }')" "$q" \
    "$min_q" "$(fmt_int "${cps[$minimal/1/1]:-}")" "$min_ping" "$(verdict "$verdict_code")"
}
# Per-round values of one column of one case (raw.tsv), e.g. "1.31, 1.52, 1.40" ms.
per_round_ms() {
  awk -F'\t' -v i="$1" -v v="$2" -v c="$3" -v n="$4" -v k="$5" -v col="$6" '
    $1 == i && $2 == v && $3 == c && $4 == n && $5 == k { printf "%s%.2f", (m++ ? ", " : ""), $col / 1000 }' "$raw"
}
# The admit bench's notes on waits that ended only by the waiter's own poll (a wake-up that never came).
# "# admit cycles 64:8 rep 1: 13 of 6795 acquisitions waited >= ..." -> "round 1, 64:8: 13 of 6,795" (the
# asynchronous contenders' lines, "# admit async cycles ...": "round 1, async 64:8: ...").
lost_notes=$(for ((round = 1; round <= rounds; ++round)); do
  awk -v r="$round" '/^# admit (async )?cycles .* acquisitions waited/ {
    i = $3 == "async" ? 5 : 4
    printf "round %d, %s%s: %d of %d\n", r, (i == 5 ? "async " : ""), $i, $(i + 3), $(i + 5) }' "$out/out-admit-$round.txt"
done)
lost_total=$(printf '%s\n' "$lost_notes" | awk 'NF >= 3 { s += $(NF - 2) } END { print s + 0 }')

# Redis CPU µs per grant of the crowd case, per implementation: the median over the rounds of the programs' '#' lines
# ("# <impl> crowd 200:8 hold 20 ms rep 1: redis cpu 153.0 us per grant ...").
declare -A crowd_cpu=()
for impl in admit redis-semaphore bottleneck; do
  crowd_cpu[$impl]=$(cat "$out"/out-"$impl"-*.txt 2>/dev/null | awk -v i="$impl" '$2 == i && $3 == "crowd" {
      for (f = 1; f < NF; ++f) if ($f == "cpu") v[n++] = $(f + 1) }
    END {
      if (!n) { print "-"; exit }
      for (a = 1; a < n; ++a) for (b = a; b > 0 && v[b - 1] + 0 > v[b] + 0; --b) { t = v[b]; v[b] = v[b - 1]; v[b - 1] = t }
      print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }')
done

step 7/7 "report: $report"
describe_machine

# row KEY NAME HOW: one line of the side-by-side table.
row() {
  local k=$1
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$3" "$(fmt_int "${cps[$k]:-}")" \
    "$(us_to_ms "${p50[$k]:-}")" "$(us_to_ms "${p99[$k]:-}")" "$(us_to_ms "${mean[$k]:-}")" \
    "$(us_to_ms "${max[$k]:-}")" "$(fmt_int "${samples[$k]:-}")" "$(fmt_int "${err[$k]:-}")" "$(two "${fair[$k]:-}")"
}
name_of() {
  case $1 in
    admit) echo "**admit** \`redis::semaphore\`" ;;
    admit-async) echo "**admit** \`redis::semaphore\`, asynchronous" ;;
    redis-semaphore) echo "redis-semaphore $rs_version \`Semaphore\`" ;;
    bottleneck) echo "bottleneck $bn_version (Redis clustering)" ;;
  esac
}

# Whether other work competed for the CPUs: a 1-minute load above the bench's own (about 1: Redis plus the client).
if awk -v l="$load_max" 'BEGIN { exit !(l > 1.5) }'; then
  shared="Other work shared the machine (the load went above the bench's own, about 1): latencies' tails reflect it."
else
  shared="No other work ran on the machine (the load stayed at about the bench's own, 1 or less)."
fi

mkdir -p "$(dirname "$report")"
{
  cat <<EOF
## Redis: admit::redis::semaphore next to redis-semaphore and Bottleneck

- Run on $(date +%F) by \`$command_line\`: medians over $rounds round(s), every implementation one after the
  other in each round.
- Server: one redis-server $redis_version (127.0.0.1, persistence off) that the script started, emptied (FLUSHALL)
  before each implementation's run.
- Machine: $(nproc) × $cpu; $pinning.
- Load average before $load_before, after $load_after (1-minute value at the rounds: ${loads[*]}; max $load_max).
  $shared
- admit: $tree, Release build of \`admit_redis_semaphore_bench\`.
- References: redis-semaphore $rs_version and bottleneck $bn_version on ioredis $ioredis_version, Node $node_version.

The cases, the same for every implementation, each with its default options — admit: default
\`semaphore_options\` (poll_interval 1 s: wake-ups through the wake list, lease 10 s with auto-renewal);
redis-semaphore: \`new Semaphore(client, key, capacity)\` (retryInterval 10 ms: it polls, with no queue);
Bottleneck: \`{datastore: "ioredis", maxConcurrent: capacity}\`:

- **cycles 1:1** — 1 contender, capacity 1: acquire, release, again, for ${duration} s (after ${warmup} s of warm-up).
- **cycles 64:8** — 64 contenders, capacity 8, the same loop. admit: 64 threads blocking in \`try_acquire_for\` on
  one shared semaphore object and connection (one process); redis-semaphore: 64 async loops, a \`Semaphore\` object
  each (its identity), one ioredis client; Bottleneck: 64 async loops \`schedule()\`-ing on one limiter.
- **admit, asynchronous** — the two cycles cases again with admit's asynchronous API, as the references' contenders
  run: each contender a loop of \`async_acquire_for\` then \`lease::async_release\`, each step started from the
  previous one's completion handler, all on the connection's one io thread (no thread blocks).
- **wakeup** — capacity 1, $wakeups rounds: a holder holds the permit; a waiter with its own semaphore object (or
  limiter) and connections — another process, as far as Redis can tell — starts waiting; once the waiter waits in
  Redis (admit: \`inspect()\` shows it queued; Bottleneck: Redis counts one queued job for the waiter's client;
  redis-semaphore, which keeps no waiters in Redis: its first attempt was refused), ${settle_ms} ms + U(0, ${jitter_ms}) ms
  later the holder reads the clock and releases; the waiter reads the clock when it holds the permit. The latency
  includes the release call.
- **the floor** — not a semaphore: the wake-up case's parties and timing (same rounds, same delays) with plain
  commands on \`admit::redis::connection\`: the waiter blocks in BLPOP, the holder reads the clock and sends LPUSH.
  One command and one blocked reply through the same threads: the least any wake-up through Redis costs on this
  machine at its load during the run. admit's wake-up is this plus the semaphore's work (the release script, the
  wake-up loop handing the grant — the wake-up carries it — to the waiting thread).

Bottleneck has no acquire/release: "acquire" is its job starting, "release" its job's promise settling (the holder's
job is a promise resolved when the bench releases; a cycle's job resolves at once). Its waiting jobs queue in the
limiter object of their process; Redis holds the running count and each client's number of queued jobs, and a
release publishes the new capacity (Pub/Sub) to a client with queued jobs, which then runs its next job. That is the
closest faithful equivalent of holding and releasing a permit; \`schedule()\` settles after Bottleneck's \`free\`.

### The target

| target | measured | verdict |
| --- | --- | --- |
| admit wake-up p99 ≤ 2 ms on loopback (where a 10 ms poller averages 5 ms) | admit p99 $(us_to_ms "${p99[$wake]:-}") ms (per round: $(per_round_ms admit default wakeup 1 1 9) ms), p50 $(us_to_ms "${p50[$wake]:-}") ms, mean $(us_to_ms "${mean[$wake]:-}") ms; the 10 ms poller here (redis-semaphore): mean $(us_to_ms "${mean[redis-semaphore:default/wakeup/1/1]:-}") ms, p99 $(us_to_ms "${p99[redis-semaphore:default/wakeup/1/1]:-}") ms; the floor on this machine (LPUSH → BLPOP, no semaphore): p50 $(us_to_ms "${p50[$floor]:-}") ms, p99 $(us_to_ms "${p99[$floor]:-}") ms | $(verdict "$(check_p99)") |

$(floor_note)

### Many waiters: ${crowd_case%:*} (contenders:capacity), each holding ${crowd_case##*:} ms

Eight permits, each held ${crowd_case##*:} ms, 192 contenders waiting at every moment. *Redis CPU per grant*: the server's
CPU time over the window (\`INFO cpu\`) ÷ the grants in it — what the waiters cost Redis, polls included.
*hand-off*: from the start of a release call to the grant of the permit it freed (paired in order).

| implementation | grants/s | hand-off p50 ms | hand-off p99 ms | Redis CPU µs per grant | fairness |
| --- | --- | --- | --- | --- | --- |
$(for impl in admit redis-semaphore bottleneck; do
  k="$impl:default/crowd/$crowd_key"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$(name_of "$impl")" "$(fmt_int "${cps[$k]:-}")" "$(us_to_ms "${p50[$k]:-}")" \
    "$(us_to_ms "${p99[$k]:-}")" "$(two "${crowd_cpu[$impl]:--}")" "$(two "${fair[$k]:-}")"
done)

| target | measured | verdict |
| --- | --- | --- |
| admit's Redis CPU per grant ≤ 1/5 of redis-semaphore's | $(two "${crowd_cpu[admit]:--}") µs against $(two "${crowd_cpu[redis-semaphore]:--}") µs: $(crowd_ratio) | $(verdict "$(check_crowd_cpu)") |
| admit's hand-off p99 ≤ 1 ms | $(us_to_ms "${p99[admit:default/crowd/$crowd_key]:-}") ms | $(verdict "$(check_crowd_p99)") |

### The cycles cases

The floors, measured in the same rounds: the **minimal FIFO hand-off** — a Redis function with an acquire (a free
permit, else the caller joins the tail of a list) and a release that gives the permit to the head of the list, and
nothing else: no leases, expiry, fencing tokens, waiter expiry or wake lists, its grants reaching their waiters in the
releasing call's reply (its contenders all live in one process), driven by admit's asynchronous contenders over the
same connection class — the least a FIFO semaphore in Redis costs per cycle; and **two round trips** of a PING from
one client (\`redis-benchmark -c 1\`), the least any cycle of two calls can take.

| target | measured (medians) | verdict |
| --- | --- | --- |
$(cycles_row default "blocking threads")
$(cycles_row async "asynchronous contenders")
$(ping_row default "blocking thread")
$(ping_row async "asynchronous contender")

### Side by side (medians)

*cycles/s*: acquire+release cycles completed per second (a cycle counts when its release completes in the window).
Latencies: cycles cases — from the acquire call to holding the permit; wakeup — from just before the holder's release
to the waiter holding the permit. *samples*: cycles counted / wake-ups measured. *errors*: acquisitions that failed
(timeouts, Redis errors; not the waits cancelled at the end of a window) and failed releases. *fairness*: the fewest
cycles any one contender completed ÷ the mean per contender (1.00: evenly served).

| implementation | case | cycles/s | p50 ms | p99 ms | mean ms | max ms | samples | errors | fairness |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
EOF
  for impl in admit redis-semaphore bottleneck; do
    row "$impl:default/cycles/1/1" "$(name_of $impl)" "cycles, 1 contender, capacity 1"
    row "$impl:default/cycles/64/8" "$(name_of $impl)" "cycles, 64 contenders, capacity 8"
    if [[ $impl == admit ]]; then
      row "admit:async/cycles/1/1" "$(name_of admit-async)" "cycles, 1 contender, capacity 1"
      row "admit:async/cycles/64/8" "$(name_of admit-async)" "cycles, 64 contenders, capacity 8"
    fi
    row "$impl:default/wakeup/1/1" "$(name_of $impl)" "wake-up, capacity 1"
  done
  row "$minimal/1/1" "the floor: minimal FIFO hand-off" "cycles, 1 contender, capacity 1 (asynchronous)"
  row "$minimal/64/8" "the floor: minimal FIFO hand-off" "cycles, 64 contenders, capacity 8 (asynchronous)"
  row "$ping" "the floor: two round trips" "two PINGs from \`redis-benchmark -c 1\`"
  row "$floor" "the floor: no semaphore" "wake-up by LPUSH → BLPOP (admit::redis::connection)"
  errors=$(awk '$8 != "-" && $8 > 0 { printf "%s%s (%s per round)", (n++ ? ", " : ""), $1, $8 }' "$out/results.tsv")
  if [[ -n "$errors" ]]; then printf '\nRows with errors: %s.\n' "$errors"; fi
  # Same-run ratios of cycles/s: admit ÷ each reference (> 1: admit completes more cycles).
  ratio() { if [[ "${1:--}" == - || "${2:--}" == - ]]; then printf '—'; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f×", a / b }'; fi; }
  printf '\nSame-run ratios of cycles/s, admit ÷ the reference (medians of this run):\n\n'
  # per_round VARIANT C:K REF: admit's VARIANT ÷ REF in each round (raw.tsv holds the rounds in order).
  per_round() {
    awk -v a="admit:$1" -v c="$2" -v ref="$3:default" '$3 == "cycles" && $4 ":" $5 == c { k = $1 ":" $2; n[k]++; v[k, n[k]] = $7 }
      END { for (i = 1; i <= n[a]; ++i) if (v[ref, i] > 0) printf "%s%.2f", (i > 1 ? ", " : ""), v[a, i] / v[ref, i] }' "$raw"
  }
  printf '| case | ÷ redis-semaphore | per round | ÷ Bottleneck | per round |\n| --- | --- | --- | --- | --- |\n'
  for v in default async; do
    for c in 1/1 64/8; do
      printf '| cycles %s%s | %s | %s | %s | %s |\n' "${c/\//:}" "$([[ $v == async ]] && echo ', admit asynchronous')" \
        "$(ratio "${cps[admit:$v/cycles/$c]:--}" "${cps[redis-semaphore:default/cycles/$c]:--}")" \
        "$(per_round "$v" "${c/\//:}" redis-semaphore)" \
        "$(ratio "${cps[admit:$v/cycles/$c]:--}" "${cps[bottleneck:default/cycles/$c]:--}")" \
        "$(per_round "$v" "${c/\//:}" bottleneck)"
    done
  done
  cat <<EOF

Reading the table:

- admit's waiters queue in Redis in arrival order and a release hands the permit to the head waiter and wakes exactly
  it: a waiter of another semaphore object by an LPUSH of the grant on its process's wake list, on which one
  connection per semaphore object blocks in BLMPOP, taking every waiting grant at once; a waiter of the releasing
  object through the release's own reply. The wake-up carries the lease, so no further call. redis-semaphore's
  waiters retry every 10 ms, in no order, so its wake-up costs about half that period on average (plus the timer's
  lateness). Bottleneck wakes the waiting client by Pub/Sub and runs the job after its own scheduling steps (a
  \`register\` script, a timer).
- At 64:8, an admit contender that has to queue asks for two operations per cycle (acquire → queued, then granted
  by another thread's release, whose reply carries the grant; release), with 64 threads and the I/O thread sharing
  the one client CPU. Operations that come while one of the semaphore object's calls is unanswered wait for a flush
  on the I/O thread (or for an answer, while two are) and leave together in one script call (up to 32), so the 64
  threads' operations take far fewer calls than operations, but each still runs its own commands inside Redis. Each
  hand-off waits for the previous
  holder's release to reach Redis and come back: at most 8 hand-off chains run at once, each a round trip plus two
  thread wake-ups per cycle. A redis-semaphore contender that has just released re-acquires at once
  (one script call, then a ZREM) while the others sleep out their 10 ms: hence its high cycles/s next to its p99
  and fairness. Bottleneck's queue is local to the limiter; each job still costs its \`submit\`, \`register\` and
  \`free\` scripts.
- admit's asynchronous contenders do the same work in Redis without the thread wake-ups: no thread blocks, and the
  io thread runs every contender's next step as it reads the answers. At 64:8 the calls form two waves: what
  the completions of one reply ask for leaves together, once they have run, while Redis runs another wave's call
  (see *Against the floors* below); at 1:1 a cycle is still two round trips, each one script call.
- admit's acquisitions that waited ≥ 0.9 × poll_interval (1 s) in the cycles cases — waits that ended only by the
  waiter's own poll, i.e. wake-ups that never came (such a wait is then the *max* of its row) — across all rounds:
  **$lost_total**$( [[ -n "$lost_notes" ]] && printf ' (%s acquisitions)' "$(printf '%s' "$lost_notes" | paste -sd ';' | sed 's/;/; /g')" ).
- Raw outputs of this run: \`$out/\`
  (raw.tsv: every case of every round; results.tsv: the medians; out-*.txt: each program's output).
EOF
} >"$report"

show_report '### The target$'
