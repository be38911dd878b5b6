#!/usr/bin/env bash
# Measures `admit recommend` on a 1,000,000-request trace next to its floor, one `admit replay` of the same trace (a
# recommendation is a search of replays, so its time is about the number of replays times one replay), in one run.
# Prints a Markdown table (medians of 3 rounds; each row's user + system CPU, wall time and peak resident set, by
# /usr/bin/time) for docs/PERFORMANCE.md.
#
#   bench/recommend_time.sh [BUILD_DIR]     default build/release (configured with the release preset)
#
# The traces: 1,000,000 arrivals of bursty traffic (a Poisson background of 800/s, and every ~10 s a burst of 400 to
# 2,000 requests in 100 to 500 ms; 1 in 20 asks for 2 to 5 tokens), and the same arrivals with durations (log-normal,
# median 20 ms) for the concurrency rows; both generated with a fixed seed into a temporary directory.
set -euo pipefail

build_dir=${1:-build/release}
admit="$build_dir/tools/admit/admit"
cmake --build "$build_dir" --target admit_cli >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import math, random, sys
rng = random.Random(20261202)
t, lines, next_burst = 0.0, [], 5.0
while len(lines) < 1_000_000:
    t += rng.expovariate(800)
    if t >= next_burst:
        count, width = rng.randint(400, 2000), rng.uniform(0.1, 0.5)
        lines.extend(t + width * i / count for i in range(count))
        t += width
        next_burst = t + rng.uniform(5, 15)
    else:
        lines.append(t)
lines = lines[:1_000_000]
with open(sys.argv[1] + "/rate.txt", "w") as rate, open(sys.argv[1] + "/concurrency.txt", "w") as conc:
    for at in lines:
        n = rng.randint(2, 5) if rng.random() < 0.05 else 1
        rate.write(f"{at:.6f} {n}\n" if n > 1 else f"{at:.6f}\n")
        conc.write(f"{at:.6f} {math.exp(rng.gauss(math.log(0.02), 0.8)):.6f}\n")
PY

# One measurement: "<user+sys s> <wall s> <peak MB>" of the command, its output to $work/out.
measure() {
  /usr/bin/time -f "%U %S %e %M" -o "$work/time" "$@" >"$work/out" || [ $? -eq 1 ]
  awk '{ printf "%.2f %.2f %.1f\n", $1 + $2, $3, $4 / 1024 }' "$work/time"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

row() {
  local label=$1
  shift
  local cpu=() wall=() mem=() replays="-"
  for _ in 1 2 3; do
    read -r c w m < <(measure "$@")
    cpu+=("$c") wall+=("$w") mem+=("$m")
    if grep -q '"replays"' "$work/out"; then replays=$(grep '"replays"' "$work/out" | tr -dc 0-9); fi
  done
  printf '| %s | %s | %s s | %s s | %s MB |\n' "$label" "$replays" \
    "$(printf '%s\n' "${cpu[@]}" | median)" "$(printf '%s\n' "${wall[@]}" | median)" "$(printf '%s\n' "${mem[@]}" | median)"
}

echo "| command (1,000,000 requests) | replays | CPU (user + system) | wall | peak resident set |"
echo "| --- | --- | --- | --- | --- |"
row "\`admit replay -a token-bucket --rate 1000/s --burst 20\` (the floor: one replay)" "$admit" replay -a token-bucket --rate 1000/s --burst 20 --json "$work/rate.txt"
row "\`admit recommend -a token-bucket --burst 20 --max-rejected 1%\`" "$admit" recommend -a token-bucket --burst 20 --max-rejected 1% --json "$work/rate.txt"
row "\`admit recommend -a gcra --burst 20 --mode reserve --max-delay-p99 100ms\`" "$admit" recommend -a gcra --burst 20 --mode reserve --max-delay-p99 100ms --json "$work/rate.txt"
row "\`admit recommend -a sliding-window --max-rejected 1%\`" "$admit" recommend -a sliding-window --max-rejected 1% --json "$work/rate.txt"
row "\`admit recommend -a token-bucket --max-rejected 1%\` (the frontier)" "$admit" recommend -a token-bucket --max-rejected 1% --json "$work/rate.txt"
row "\`admit replay -a concurrency --limit 32\` (the floor: one replay)" "$admit" replay -a concurrency --limit 32 --json "$work/concurrency.txt"
row "\`admit recommend -a concurrency --max-wait-p99 50ms\`" "$admit" recommend -a concurrency --max-wait-p99 50ms --json "$work/concurrency.txt"
