#!/usr/bin/env bash
# Measures admit's rate limiters next to the reference implementations, in one run on one machine, and writes
# docs/PERFORMANCE.md (the side-by-side table of median ns/op and the issue's targets, met or not).
#
#   bench/compare.sh            the full run (~4 minutes on 2 cores)
#   bench/compare.sh --quick    a short run to try the script (fewer, shorter repetitions); still writes the report
#
# What it runs:
#   1. scripts/install-deps.sh --bench (does nothing when the packages are there);
#   2. the `release` preset's `admit_bench` target (bench/rate_limiters_bench.cpp, Google Benchmark), with
#      --benchmark_repetitions=5 --benchmark_report_aggregates_only=true: the median of the repetitions is reported;
#   3. bench/reference/go (golang.org/x/time/rate and github.com/juju/ratelimit from Debian's packages, GOPATH mode,
#      offline), -count 5: the median of the 5 runs;
#   4. bench/reference/java (Guava's RateLimiter from Debian's libguava-java; a plain harness, JMH is not packaged):
#      the median of 7 timed rounds after warm-up rounds.
# Raw outputs are kept in build/release/bench/compare/.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="bench/compare.sh${*:+ $*}"

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help)
      sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "compare.sh: unknown argument '$arg' (expected --quick or --help)" >&2
      exit 2
      ;;
  esac
done

if ((quick)); then
  reps=3 min_time=0.05 go_benchtime=50ms go_count=3 java_rounds=3 java_round_ms=50
else
  reps=5 min_time=0.2 go_benchtime=200ms go_count=5 java_rounds=7 java_round_ms=150
fi

out=build/release/bench/compare  # relative to the repository (the script runs there)
report="$repo/docs/PERFORMANCE.md"
started=$SECONDS
step() { printf '\n==> [%s, %ds] %s\n' "$1" $((SECONDS - started)) "$2" >&2; }

load_before=$(cut -d" " -f1-3 /proc/loadavg)
step 1/6 "dependencies: scripts/install-deps.sh --bench"
scripts/install-deps.sh --bench

step 2/6 "build: cmake --preset release && cmake --build --preset release --target admit_bench"
cmake --preset release >/dev/null
cmake --build --preset release --target admit_bench -j 2
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.csv "$out"/*.tsv

admit_cmd=(build/release/bench/admit_bench "--benchmark_repetitions=$reps" --benchmark_report_aggregates_only=true
  "--benchmark_min_time=$min_time" "--benchmark_out=$out/admit.csv" --benchmark_out_format=csv)
step 3/6 "admit: ${admit_cmd[*]}"
"${admit_cmd[@]}" 2>&1 | tee "$out/admit.txt"

go_cmd=(go test -run '^$' -bench . -benchtime "$go_benchtime" -count "$go_count")
step 4/6 "Go references: (cd bench/reference/go && GO111MODULE=off GOPATH=/usr/share/gocode ${go_cmd[*]})"
(cd bench/reference/go &&
  GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS='' GOCACHE="$repo/$out/gocache" "${go_cmd[@]}") | tee "$out/go.txt"

java_cmd=(java -cp "/usr/share/java/guava.jar:$repo/$out/java" GuavaRateLimiterBench "$java_rounds" "$java_round_ms")
step 5/6 "Java reference: javac bench/reference/java/GuavaRateLimiterBench.java && ${java_cmd[*]}"
mkdir -p "$out/java"
javac -nowarn -cp /usr/share/java/guava.jar -d "$out/java" bench/reference/java/GuavaRateLimiterBench.java
"${java_cmd[@]}" | tee "$out/java.txt"

load_after=$(cut -d" " -f1-3 /proc/loadavg)
step 6/6 "report: $report"

# --- Normalize every measurement to "<key> <median ns/op>" ------------------------------------------------------------
# admit:<algorithm>/<path>/<time>/<threads>, admit:clock/<clock>; go:xtime|juju/<path>/<at|now>/<goroutines>,
# go:clock; guava:<path>/now/<threads>, java:clock.
{
  # Google Benchmark CSV: "name_median",iterations,real_time,...; names carry /process_time, /real_time, /threads:n.
  awk -F, '$1 ~ /_median"$/ {
      name = $1; gsub(/"/, "", name); sub(/_median$/, "", name)
      gsub(/\/process_time/, "", name); gsub(/\/real_time/, "", name)
      sub(/\/threads:/, "/", name)
      if ($9 != "true") print "admit:" name, $3
      if ($9 != "true" && name ~ /\/2$/ && $3 > 0) print "cores:" name, $4 / $3
    }' "$out/admit.csv"
  # Go: BenchmarkXTimeAllowNAtAdmit/g=2-2  N  79.21 ns/op — the median of the -count runs.
  awk '$1 ~ /^Benchmark/ && $4 == "ns/op" {
      name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
      g = "1"; if (match(name, /\/g=[0-9]+$/)) { g = substr(name, RSTART + 3); name = substr(name, 1, RSTART - 1) }
      lib = name ~ /^XTime/ ? "xtime" : name ~ /^Juju/ ? "juju" : "clock"
      path = name ~ /Admit$/ ? "admit" : "reject"
      at = name ~ /At(Admit|Reject)$/ ? "at" : "now"
      key = lib == "clock" ? "go:clock" : "go:" lib "/" path "/" at "/" g
      print key, $3
    }' "$out/go.txt" | sort -k1,1 -k2,2g |
    awk '{ if ($1 != k) { if (k != "") emit(); k = $1; n = 0 } v[++n] = $2 }
      function emit() { print k, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) }
      END { if (k != "") emit() }'
  # Java: "<admit|reject|nanotime> <threads> <median ns/op>".
  awk '$1 == "nanotime" { print "java:clock", $3; next } NF == 3 { print "guava:" $1 "/now/" $2, $3 }' "$out/java.txt"
} >"$out/results.tsv"

declare -A m=()
while read -r key value; do m[$key]=$value; done <"$out/results.tsv"

# v KEY: the value with one decimal, or "—" when not measured.
v() { if [[ -n "${m[$1]:-}" ]]; then LC_ALL=C printf '%.1f' "${m[$1]}"; else printf '—'; fi; }
# le A B: true when both exist and A <= B.
le() { [[ -n "$1" && -n "$2" ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# calc EXPR with a and b bound.
calc() { awk -v a="$2" -v b="${3:-0}" "BEGIN { printf \"%.1f\", $1 }"; }

algorithms=()
for a in token_bucket gcra pacer fixed_window sliding_window sliding_log warmup; do
  [[ -n "${m[admit:$a/admit/at/1]:-}${m[admit:$a/reject/at/1]:-}" ]] && algorithms+=("$a")
done
# Cases with a repetition that got a wrong answer: one line each, with the number of such repetitions and a message.
missing_cases=$(awk -F, '$9 == "true" {
    name = $1; gsub(/"/, "", name); gsub(/\/process_time|\/real_time/, "", name)
    if (!(name in n)) { order[++k] = name; msg[name] = $10 }
    n[name]++
  }
  END { for (i = 1; i <= k; i++) printf "- `%s`: %d repetition(s), e.g. %s\n", order[i], n[order[i]], msg[order[i]] }' "$out/admit.csv")

# Parallelism the 2-thread cases actually got: process CPU time / wall time (2.0 = both threads ran all the time).
cores_2=$(grep '^cores:' "$out/results.tsv" | sort -k2,2g | awk '{ v[++n] = $2 } END { if (n) printf "%.2f (from %.2f to %.2f over %d cases)", (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[1], v[n], n }')
clock=${m[admit:clock/steady_clock]:-}
coarse_res=$(sed -n 's/^coarse_steady_clock_resolution_ns: *//p' "$out/admit.txt" | head -1)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
cores=$(nproc)
sockets_cores=$(awk -F: '/^cpu cores/ { c = $2 } /^physical id/ { p[$2] = 1 } END { n = 0; for (i in p) n++; print (n ? n : 1) " socket(s), " (c ? c + 0 : "?") " core(s) per socket" }' /proc/cpuinfo)
clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)

# --- Targets (issue 2, "Performance") ---------------------------------------------------------------------------------
# verdict OK: "met" / "not met" / "not measured".
verdict() {
  case "$1" in
    none) echo "not measured" ;;
    1) echo "**met**" ;;
    skew1) echo "met, but inconclusive: the 2 threads did not run in parallel (see parallelism)" ;;
    skew0) echo "**not met**, but inconclusive: the 2 threads did not run in parallel (see parallelism)" ;;
    *) echo "**not met**" ;;
  esac
}
# par KEY: the parallelism (process CPU / wall) a 2-thread case got, or empty.
par() { printf '%s' "${m[cores:$1]:-}"; }
# check_* ALGO: prints "1", "0" or "none".
check_at() {
  local a=${m[admit:$1/admit/at/1]:-} r=${m[admit:$1/reject/at/1]:-}
  [[ -z "$a" || -z "$r" ]] && { echo none; return; }
  le "$a" 8 && le "$r" 8 && echo 1 || echo 0
}
check_clock() {
  local a=${m[admit:$1/admit/now/1]:-} r=${m[admit:$1/reject/now/1]:-}
  [[ -z "$a" || -z "$r" || -z "$clock" ]] && { echo none; return; }
  local bound; bound=$(calc 'a + 8' "$clock")
  le "$a" "$bound" && le "$r" "$bound" && echo 1 || echo 0
}
check_coarse() {
  local a=${m[admit:$1/admit/coarse/1]:-} r=${m[admit:$1/reject/coarse/1]:-}
  [[ -z "$a" || -z "$r" ]] && { echo none; return; }
  le "$a" 15 && le "$r" 15 && echo 1 || echo 0
}
# At 2 threads, every case (admit/reject x at/now) at most half of x/time/rate's at 2 goroutines. Inconclusive when a
# case's two threads did not really run in parallel (process CPU / wall below 1.5): they then took turns on one core
# and did not contend.
check_two() {
  local ok=1 any=0 skew=0 p t x g c
  for p in admit reject; do
    for t in at now; do
      x=${m[admit:$1/$p/$t/2]:-} g=${m[go:xtime/$p/$t/2]:-} c=$(par "$1/$p/$t/2")
      [[ -z "$x" || -z "$g" ]] && continue
      any=1
      le "$x" "$(calc 'a / 2' "$g")" || ok=0
      [[ -n "$c" ]] && ! le 1.5 "$c" && skew=1
    done
  done
  if ((!any)); then echo none; elif ((skew)); then echo "skew$ok"; else echo $ok; fi
}
# No collapse: at 8 threads (4 per core here), per-operation time at most twice the 2-thread time in every case, i.e.
# the throughput of one limiter stays above half of what 2 threads get.
check_eight() {
  local ok=1 any=0 p t x2 x8
  for p in admit reject; do
    for t in at now; do
      x2=${m[admit:$1/$p/$t/2]:-} x8=${m[admit:$1/$p/$t/8]:-}
      [[ -z "$x2" || -z "$x8" ]] && continue
      any=1
      le "$x8" "$(calc 'a * 2' "$x2")" || ok=0
    done
  done
  ((any)) && echo $ok || echo none
}

tb=token_bucket
{
  cat <<EOF
# Performance

Nanoseconds per \`try_acquire\` of admit's rate limiters, measured next to the libraries they are compared against
(Go's \`golang.org/x/time/rate\` and \`juju/ratelimit\`, Guava's \`RateLimiter\`), **in the same run on the same machine**.
This file is written by \`bench/compare.sh\`; do not edit it by hand — run the script again.

- Date: $(date -u '+%Y-%m-%d %H:%M UTC')
- Machine: ${cpu:-unknown CPU}, ${cores} logical CPU(s) (${sockets_cores}); Linux $(uname -r), clock source \`${clocksource}\`
- Load average (1/5/15 min) before the run: ${load_before}; after: ${load_after} (other work on the machine disturbs most the threaded cases)
- Compilers: $(g++ --version | head -1) (the \`release\` preset: \`-O3 -DNDEBUG\`, CMake Release); $(go version | sed 's/^go version //'); $(java -version 2>&1 | head -1)
- Command: \`${command_line}\` — which ran:
  - \`${admit_cmd[*]}\`
  - \`cd bench/reference/go && GO111MODULE=off GOPATH=/usr/share/gocode go test -run '^\$' -bench . -benchtime ${go_benchtime} -count ${go_count}\`
  - \`javac -cp /usr/share/java/guava.jar bench/reference/java/GuavaRateLimiterBench.java && java -cp /usr/share/java/guava.jar:$out/java GuavaRateLimiterBench ${java_rounds} ${java_round_ms}\`
- Every number is a **median** (of ${reps} Google Benchmark repetitions, of ${go_count} \`go test -count\` runs, of ${java_rounds} timed Java
  rounds after warm-up), in **wall-clock ns per operation**: with several threads, the wall time divided by the
  operations of all threads (the inverse of the throughput on one shared limiter), as Go's \`b.RunParallel\` reports it.

How each case is set up (the same for every implementation):

- **admit path**: a finite, huge rate (1e9 tokens/s) and a burst (or window limit) of 1e12, so that every call is
  admitted and the limiter runs its arithmetic (\`rate::inf()\` is not used: it is a shortcut).
- **reject path**: one token an hour (or a long window), the limiter drained before timing, so that every call is refused.
- **at**: the caller supplies the time (\`try_acquire_at(now)\`; x/time/rate \`AllowN(t, 1)\`; juju through a \`Clock\`
  that returns a fixed time — its only way to take the caller's time). Guava has no such form.
- **now**: the limiter reads the clock (\`try_acquire()\` on \`std::chrono::steady_clock\`; \`Allow()\`; \`TakeAvailable(1)\`;
  Guava \`tryAcquire()\`, which reads \`System.nanoTime\`).
- **coarse**: \`try_acquire()\` on \`basic_x<admit::coarse_steady_clock>\` (\`CLOCK_MONOTONIC_COARSE\`; resolution here:
  ${coarse_res:-?} ns, one kernel tick: within a tick time stands still, so at most the tokens accrued by the tick's start are
  admitted, and rates above one token per tick are served in tick-sized bursts — see \`include/admit/clock.hpp\`).
- Threads: 1, 2 and 8 threads (goroutines, with \`GOMAXPROCS\` set to their number) on **one** limiter. This machine
  has ${cores} logical CPUs, so 8 threads oversubscribe it: that case shows whether contention collapses the throughput.
- Every call's answer is checked (admitted on the admit path, refused on the reject path); a case that got a wrong
  answer is reported as an error, not as a number.

## The targets of issue 2

| target | measured (median ns/op) | verdict |
| --- | --- | --- |
| \`try_acquire_at\` ≤ 8 ns single-threaded | token_bucket admit $(v admit:$tb/admit/at/1), reject $(v admit:$tb/reject/at/1); x/time/rate \`AllowN\` $(v go:xtime/admit/at/1) / $(v go:xtime/reject/at/1) | $(verdict "$(check_at $tb)") |
| \`try_acquire()\` ≤ clock read + 8 ns | steady_clock::now $(v admit:clock/steady_clock) (+ 8 = $(if [[ -n "$clock" ]]; then calc 'a + 8' "$clock"; else echo —; fi)); token_bucket admit $(v admit:$tb/admit/now/1), reject $(v admit:$tb/reject/now/1); x/time/rate \`Allow()\` $(v go:xtime/admit/now/1); Guava \`tryAcquire()\` $(v guava:admit/now/1) | $(verdict "$(check_clock $tb)") |
| fast clock: \`try_acquire()\` ≤ 15 ns | coarse_steady_clock::now $(v admit:clock/coarse_steady_clock); token_bucket admit $(v admit:$tb/admit/coarse/1), reject $(v admit:$tb/reject/coarse/1) | $(verdict "$(check_coarse $tb)") |
| 2 threads: ≤ half of x/time/rate at 2 goroutines | token_bucket at: $(v admit:$tb/admit/at/2) / $(v admit:$tb/reject/at/2) vs $(v go:xtime/admit/at/2) / $(v go:xtime/reject/at/2); now: $(v admit:$tb/admit/now/2) / $(v admit:$tb/reject/now/2) vs $(v go:xtime/admit/now/2) / $(v go:xtime/reject/now/2) (admit / reject) | $(verdict "$(check_two $tb)") |
| no collapse at 8 threads (8-thread time ≤ 2 × 2-thread time) | token_bucket admit at $(v admit:$tb/admit/at/8) (2 threads $(v admit:$tb/admit/at/2)), admit now $(v admit:$tb/admit/now/8) ($(v admit:$tb/admit/now/2)); reject at $(v admit:$tb/reject/at/8) ($(v admit:$tb/reject/at/2)), reject now $(v admit:$tb/reject/now/8) ($(v admit:$tb/reject/now/2)) | $(verdict "$(check_eight $tb)") |

For scale: the issue's figures were taken on another machine (x/time/rate \`AllowN\` ~27 ns, \`Allow()\` ~75 ns, Guava
~33 ns, x/time/rate at 2 goroutines ~77 ns); here, in this run, they are $(v go:xtime/admit/at/1), $(v go:xtime/admit/now/1), $(v guava:admit/now/1)
and $(v go:xtime/admit/at/2) ns. One uncontended compare-and-swap on an aligned atomic, with nothing else in the loop — the floor
of any limiter that commits an admission with one CAS — costs $(v admit:baseline/cas/1) ns here ($(v admit:baseline/cas/2) ns per operation with 2
threads on it).

The same targets for every algorithm (each verdict covers both the admit and the reject path):

| algorithm | \`try_acquire_at\` ≤ 8 ns | \`try_acquire()\` ≤ clock + 8 ns | coarse ≤ 15 ns | 2 threads ≤ ½ x/time/rate | no collapse at 8 |
| --- | --- | --- | --- | --- | --- |
EOF
  for a in "${algorithms[@]}"; do
    echo "| $a | $(verdict "$(check_at "$a")") | $(verdict "$(check_clock "$a")") | $(verdict "$(check_coarse "$a")") | $(verdict "$(check_two "$a")") | $(verdict "$(check_eight "$a")") |"
  done

  cat <<EOF

## Token bucket vs the references (median ns/op)

The last column is the parallelism the admit case got with 2 threads: process CPU time ÷ wall time (2.0 = both
threads ran the whole time; near 1.0 = other work on the machine left them one core, so they took turns and hardly
contended — that 2-thread number is then too optimistic).

| case | threads | admit \`token_bucket\` | x/time/rate | juju/ratelimit | Guava | parallelism |
| --- | --- | --- | --- | --- | --- | --- |
EOF
  for p in admit reject; do
    for t in at now coarse; do
      for n in 1 2 8; do
        [[ $t == coarse && $n == 8 ]] && continue
        c=$(par "$tb/$p/$t/$n")
        label="$p, $t"
        [[ $t == coarse ]] && label="$p, coarse clock"
        echo "| $label | $n | $(v admit:$tb/$p/$t/$n) | $(v go:xtime/$p/$t/$n) | $(v go:juju/$p/$t/$n) | $(v guava:$p/$t/$n) | ${c:+×$(calc a "$c")} |"
      done
    done
  done
  echo "| one bare CAS (floor) | 1 | $(v admit:baseline/cas/1) | — | — | — | |"
  c=$(par baseline/cas/2)
  echo "| one bare CAS (floor) | 2 | $(v admit:baseline/cas/2) | — | — | — | ${c:+×$(calc a "$c")} |"
  echo "| clock read alone | 1 | steady_clock $(v admit:clock/steady_clock), coarse $(v admit:clock/coarse_steady_clock) | \`time.Now()\` $(v go:clock) | (same) | \`System.nanoTime()\` $(v java:clock) | |"

  cat <<EOF

## Every algorithm (median ns/op)

One thread:

| algorithm | admit, at | reject, at | admit, now | reject, now | admit, coarse | reject, coarse |
| --- | --- | --- | --- | --- | --- | --- |
EOF
  for a in "${algorithms[@]}"; do
    echo "| $a | $(v admit:"$a"/admit/at/1) | $(v admit:"$a"/reject/at/1) | $(v admit:"$a"/admit/now/1) | $(v admit:"$a"/reject/now/1) | $(v admit:"$a"/admit/coarse/1) | $(v admit:"$a"/reject/coarse/1) |"
  done
  cat <<EOF

Several threads on one limiter (2 / 8 threads; coarse: 2 threads):

| algorithm | admit, at | reject, at | admit, now | reject, now | admit, coarse | reject, coarse |
| --- | --- | --- | --- | --- | --- | --- |
EOF
  for a in "${algorithms[@]}"; do
    echo "| $a | $(v admit:"$a"/admit/at/2) / $(v admit:"$a"/admit/at/8) | $(v admit:"$a"/reject/at/2) / $(v admit:"$a"/reject/at/8) | $(v admit:"$a"/admit/now/2) / $(v admit:"$a"/admit/now/8) | $(v admit:"$a"/reject/now/2) / $(v admit:"$a"/reject/now/8) | $(v admit:"$a"/admit/coarse/2) | $(v admit:"$a"/reject/coarse/2) |"
  done
  if [[ -n "$missing_cases" ]]; then
    printf '\nCases that stopped with an error — a call got the other answer than its path expects (a refusal on the admit
path, where every call fits, or an admission on the reject path); their numbers are left out:\n\n%s\n' "$missing_cases"
    if grep -q '^- `warmup/admit/now' <<<"$missing_cases"; then
      cat <<'NOTE'

The warm-up limiter refuses some calls on the admit path when several threads read the clock: `try_acquire()` reads
the clock before its compare-and-swap, and a thread whose reading is older than the next free time another thread has
just committed (at a later reading) is refused — although the rate (1e9/s) admits every call. Guava reads its clock
under its lock, so it never refuses such a call. The token bucket avoids it by treating a `now` older than the latest
seen as the latest seen.
NOTE
    fi
  fi
  cat <<EOF

## Notes

- Google Benchmark's own console header says the Debian library "was built as DEBUG": that is the library's timing
  loop, not the code under test, which is built \`-O3 -DNDEBUG\`; the loop's overhead is ~1 ns and is included in
  every admit number.
- No JMH is packaged in Debian 12, so the Guava numbers come from a plain harness (warm-up rounds, then timed rounds of
  a fixed number of calls; median). They are comparable in kind, not to the last nanosecond.
- The machine is shared and virtualized; numbers move by ~10% between runs, more in the threaded cases when other
  work competes for the cores. Parallelism the 2-thread cases actually got (process CPU time ÷ wall time; 2.0 = both
  threads ran the whole time, 1.0 = they took turns on one core): median ${cores_2:-not measured}.
  Compare columns of one run, not runs.
- Raw outputs of this run: \`build/release/bench/compare/\` (admit.csv, go.txt, java.txt, results.tsv).
EOF
} >"$report"

echo >&2
sed -n '/^## The targets/,/^## Token bucket/p' "$report" | sed '$d' >&2
printf '==> wrote %s in %ds\n' "$report" $((SECONDS - started)) >&2
