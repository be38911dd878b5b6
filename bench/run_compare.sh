#!/usr/bin/env bash
# Measures `admit run` next to flock(1) and GNU parallel's `sem`, in one run on this machine: what one invocation of
# a command that does nothing costs, and the hand-off latency from one command's exit to the next queued command's
# start. Writes docs/perf/run.md and puts it into docs/PERFORMANCE.md (its section replaced, or added at the end).
#
#   bench/run_compare.sh                  the full run (~3 minutes): 7 batches per tool, 3 × 100 hand-offs per tool
#   bench/run_compare.sh --quick          3 batches of fewer runs, 3 × 20 hand-offs per tool; still writes the report
#   bench/run_compare.sh --build-dir DIR  use an already configured Release build directory instead of build/release
#
# What it runs:
#   1. scripts/install-deps.sh --bench (flock is util-linux's; `sem` is Debian's package parallel);
#   2. builds admit_cli (the `admit` binary) and admit_run_handoff (bench/run_handoff.cpp, the timing helper) in Release;
#   3. a temporary directory for the local limits (--lock-dir), flock's lock file and sem's PARALLEL_HOME;
#   4. redis-server on a free loopback port (--save "" --appendonly no), pinned to CPU 0 (bench/redis_common.sh);
#   5. overhead: batches of N sequential runs (posix_spawn + waitpid) of each of
#        /usr/bin/true                                                     (the baseline: starting a process)
#        admit run --lock-dir DIR --concurrency 1 --name bench -- true
#        admit run --redis URL --concurrency 1 --name bench -- true
#        flock DIR/lock true
#        sem --fg --will-cite --id bench -j1 true   (--fg: wait for the command, as the others do; sem's default
#                                                     runs it in the background once admitted)
#      the tools one after the other in each batch; the report gives the median over the batches of the wall time per
#      run;
#   6. hand-off: with one permit, a holder's command exits at a moment the helper picks (2 ms + U(0, 10) ms after the
#      waiter is seen queued) and the waiter's command records when it starts; both read CLOCK_MONOTONIC. 3 rounds,
#      the tools one after the other in each, of 100 hand-offs (20 with --quick) after 5 warm-up hand-offs; the
#      percentiles are over all the rounds' hand-offs. The floor: no limiter, the next command started by its parent
#      as soon as the previous one has exited (what starting a process after another costs here);
#   7. writes the report.
# Raw outputs are kept in <build dir>/bench/run/ (overhead.tsv: every batch; handoff-<tool>-<round>.txt: every hand-off
# in ns).
set -euo pipefail

# shellcheck source=bench/redis_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"
parse_arguments 30 "$@"

if ((quick)); then
  batches=3 n_fast=50 n_admit=25 n_sem=5 handoff_rounds=3 handoffs=20
else
  batches=7 n_fast=200 n_admit=100 n_sem=20 handoff_rounds=3 handoffs=100
fi
settle_ms=2 jitter_ms=10 target_local_ms=5 target_redis_ms=10

out="$build_dir/bench/run"  # relative to the repository (the script runs there)
report="$repo/docs/perf/run.md"
performance="$repo/docs/PERFORMANCE.md"

build_bench admit_run_handoff
if [[ "$build_dir" == build/release ]]; then
  cmake --build --preset release --target admit_cli -j 2
else
  cmake --build "$build_dir" --target admit_cli -j 2
fi
admit="$repo/$build_dir/tools/admit/admit"
[[ -x "$admit" ]] || { echo "$script: $admit was not built" >&2; exit 1; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.tsv

step 3/7 "a temporary directory for the lock directory, flock's file and sem's PARALLEL_HOME"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/admit-run-compare.XXXXXX")
mkdir -p "$tmp/parallel"
export PARALLEL_HOME="$tmp/parallel"
sem_version=$(parallel --version 2>/dev/null | head -1)
flock_version=$(flock --version 2>/dev/null | head -1)

start_redis_server
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# The tools, each a command-line prefix after which the command's words follow.
tools=(true admit-local admit-redis flock sem)
prefix() {
  case $1 in
    admit-local) printf '%s\0' "$admit" run --lock-dir "$tmp" --concurrency 1 --name bench "${@:2}" -- ;;
    admit-redis) printf '%s\0' "$admit" run --redis "$url" --concurrency 1 --name bench "${@:2}" -- ;;
    flock) printf '%s\0' flock "$tmp/lock" ;;
    sem) printf '%s\0' sem --fg --will-cite --id bench -j1 ;;
  esac
}
runs_of() {
  case $1 in
    true | flock) echo "$n_fast" ;;
    admit-local | admit-redis) echo "$n_admit" ;;
    sem) echo "$n_sem" ;;
  esac
}
helper="$repo/$build_dir/bench/admit_run_handoff"
loads=()

step 5/7 "overhead: $batches batch(es) of N sequential runs of a command that does nothing, per tool"
: >"$out/overhead.tsv"
rounds=$batches  # for begin_round
for ((b = 1; b <= batches; ++b)); do
  begin_round "$b"
  for t in "${tools[@]}"; do
    if [[ $t == true ]]; then cmd=(/usr/bin/true); else mapfile -d '' cmd < <(prefix "$t"); cmd+=(true); fi
    ns=$("$helper" overhead "$(runs_of "$t")" -- "${cmd[@]}")
    printf '%s\t%s\t%s\t%s\n' "$t" "$b" "$(runs_of "$t")" "$ns" | tee -a "$out/overhead.tsv" >&2
  done
done

step 6/7 "hand-off: $handoff_rounds round(s) of $handoffs hand-offs per tool (settle $settle_ms ms + U(0, $jitter_ms) ms)"
rounds=$handoff_rounds
for ((r = 1; r <= handoff_rounds; ++r)); do
  begin_round "$r"
  for t in floor admit-local admit-redis flock sem; do
    case $t in
      floor) args=(--floor --) ;;
      admit-local | admit-redis) mapfile -d '' p < <(prefix "$t" --json); args=(--probe admit-json -- "${p[@]}") ;;
      *) mapfile -d '' p < <(prefix "$t"); args=(--probe syscall -- "${p[@]}") ;;
    esac
    summary=$("$helper" handoff --rounds "$handoffs" --warmup 5 --settle-ms "$settle_ms" --jitter-ms "$jitter_ms" \
      --samples "$out/handoff-$t-$r.txt" "${args[@]}")
    printf '  %-12s p50 p90 p99 max mean (µs) n: %s\n' "$t" "$summary" >&2
  done
done
end_rounds

step 7/7 "report: $report"
describe_machine
declare -A over=() p50=() p90=() p99=() pmax=() count=() p99s=()
# The median over the batches of ns per run.
while read -r t v; do over[$t]=$v; done < <(
  sort -t$'\t' -k1,1 -k4,4g "$out/overhead.tsv" | awk -F'\t' '
    { if ($1 != k) { if (k != "") emit(); k = $1; n = 0 } v[++n] = $4 }
    function emit() { print k, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) }
    END { if (k != "") emit() }')
# Nearest-rank percentiles over every hand-off of every round, in ns; and each round's p99.
for t in floor admit-local admit-redis flock sem; do
  read -r "p50[$t]" "p90[$t]" "p99[$t]" "pmax[$t]" "count[$t]" < <(cat "$out"/handoff-"$t"-*.txt | sort -g | awk '
    { v[++n] = $1 }
    function pct(p,   k) { k = int(p * n); if (k < p * n) ++k; if (k < 1) k = 1; return v[k] }
    END { print pct(0.5), pct(0.9), pct(0.99), v[n], n }')
  p99s[$t]=$(for f in "$out"/handoff-"$t"-*.txt; do
    sort -g "$f" | awk '{ v[++n] = $1 } END { k = int(0.99 * n); if (k < 0.99 * n) ++k; printf "%.2f\n", v[k] / 1e6 }'
  done | paste -sd, - | sed 's/,/, /g')
done
ms() { if [[ -z "${1:-}" ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.2f", a / 1e6 }'; fi; }
# added TOOL [SIGN]: the tool's overhead minus the baseline's, in ms ("+" SIGN: with its sign).
added() { awk -v a="${over[$1]}" -v b="${over[true]}" -v f="%${2:-}.2f" 'BEGIN { printf f, (a - b) / 1e6 }'; }
target() {
  local limit=$2
  awk -v a="${p99[$1]}" -v l="$limit" 'BEGIN { exit !(a <= l * 1e6) }' && echo "≤ $limit ms: **met**" ||
    echo "≤ $limit ms: **not met**"
}
# (Markdown: the backquotes are meant literally.)
# shellcheck disable=SC2016
name_of() {
  case $1 in
    true) echo '`/usr/bin/true` alone (the baseline)' ;;
    floor) echo 'no limiter: the next command started as the previous one exits (the floor)' ;;
    admit-local) echo '**`admit run`**, this host (`--lock-dir`)' ;;
    admit-redis) echo '**`admit run --redis`** (loopback)' ;;
    flock) echo "\`flock FILE\` ($flock_version)" ;;
    sem) echo "GNU \`sem --fg --id X -j1\` ($sem_version)" ;;
  esac
}
row() {
  local t=$1 o='—' a='—' h50='—' h90='—' h99='—' hmax='—' per='—' tg=$2
  [[ -n "${over[$t]:-}" ]] && o=$(ms "${over[$t]}") && a=$(added "$t" +)
  [[ $t == true ]] && a='—'
  if [[ -n "${p50[$t]:-}" ]]; then
    h50=$(ms "${p50[$t]}") h90=$(ms "${p90[$t]}") h99=$(ms "${p99[$t]}") hmax=$(ms "${pmax[$t]}") per=${p99s[$t]}
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(name_of "$t")" "$o" "$a" "$h50" "$h90" "$h99" "$per" \
    "$hmax" "$tg"
}

mkdir -p "$(dirname "$report")"
{
  cat <<EOF
## admit run: overhead and hand-off

- Run on $(date +%F) by \`$command_line\`, commit $commit, Release build of \`admit\` (\`admit_cli\`) and of the
  timing helper \`admit_run_handoff\` (bench/run_handoff.cpp).
- Machine: $(nproc) × $cpu; redis-server $redis_version on 127.0.0.1, pinned to CPU 0, persistence off; the tools
  not pinned. The machine is shared: other work (builds) ran during the run. Load average before $load_before,
  after $load_after (1-minute value at each batch and round: ${loads[*]}; max $load_max). Every number below is a
  median or a percentile: compare the rows of one run, not runs.
- **Overhead**: $batches batches, the tools one after the other in each, of N runs one after the other (N =
  $n_fast for \`true\` and flock, $n_admit for admit, $n_sem for sem) of the command with \`true\` as the command, started
  with posix_spawn and waited for; wall time per run, the median over the batches. *Added*: minus the baseline.
- **Hand-off**: capacity 1. A holder's command runs; a waiter is started and, once it is seen queued (admit: its
  \`--json\` "waiting" event; flock: blocked in flock(2); sem: asleep between its polls), $settle_ms ms + U(0, $jitter_ms) ms
  later the holder's command reads CLOCK_MONOTONIC and exits; the waiter's command reads CLOCK_MONOTONIC first thing
  in \`main\`. The latency is the difference: the holder's exit, the tool's release and hand-off, the start of the
  waiter's command (fork, exec, the dynamic loader of a small C++ program, which the floor row shows alone).
  $handoff_rounds rounds of $handoffs hand-offs per tool, the tools one after the other in each round; percentiles over all
  ${count[admit-local]:-0} hand-offs of a tool (p99: per round too).

| tool | overhead per run, ms | added, ms | hand-off p50, ms | p90, ms | p99, ms | p99 per round, ms | max, ms | target (p99) |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
$(row true '')
$(row floor '')
$(row admit-local "$(target admit-local "$target_local_ms")")
$(row admit-redis "$(target admit-redis "$target_redis_ms")")
$(row flock '')
$(row sem '')

What this means: \`admit run\` adds $(added admit-local) ms per invocation on this host and $(added admit-redis) ms
with Redis on loopback to starting the command itself (flock: $(added flock) ms; sem, a Perl script: $(added sem) ms):
nothing next to a command that runs for seconds, but the cost to count when wrapping thousands of tiny commands in a
loop. When a permit frees, the next queued command starts $(ms "${p50[admit-local]}") ms later at the median and
$(ms "${p99[admit-local]}") ms at p99 on this host, $(ms "${p50[admit-redis]}") / $(ms "${p99[admit-redis]}") ms through Redis on
loopback (add the network's round trips on a real network), where flock takes $(ms "${p50[flock]}") / $(ms "${p99[flock]}") ms
and starting a process after another at all takes $(ms "${p50[floor]}") / $(ms "${p99[floor]}") ms. GNU sem polls with
growing random sleeps, so its hand-off ($(ms "${p50[sem]}") / $(ms "${p99[sem]}") ms here, after a wait of a few ms) grows
with how long its waiter has waited; admit and flock wake the next waiter when the permit is released.

- Raw outputs of this run: \`$out/\` (overhead.tsv: every batch, ns per run; handoff-<tool>-<round>.txt:
  every hand-off, ns).
EOF
} >"$report"

# docs/PERFORMANCE.md: this section replaced (up to the next "## " heading), or added at the end.
awk -v section="$report" '
  /^## / { skipping = 0 }
  /^## admit run: overhead and hand-off$/ {
    while ((getline line < section) > 0) print line
    print ""
    done = 1; skipping = 1; next
  }
  !skipping { print }
  END { if (!done) { print ""; while ((getline line < section) > 0) print line } }' "$performance" >"$out/PERFORMANCE.md"
mv "$out/PERFORMANCE.md" "$performance"

echo >&2
cat "$report" >&2
printf '==> wrote %s and %s in %ds\n' "$report" "$performance" $((SECONDS - started)) >&2
