#!/usr/bin/env bash
# Measures admit's rate limiters (issue 2) and its semaphore (issue 3) next to the reference implementations, in one
# run on one machine, and writes docs/PERFORMANCE.md (side-by-side tables of medians and the issues' targets, met or
# not).
#
#   bench/compare.sh            the full run (~6 minutes on 2 cores)
#   bench/compare.sh --quick    a short run to try the script (fewer, shorter repetitions); still writes the report
#
# What it runs:
#   1. scripts/install-deps.sh --bench (does nothing when the packages are there);
#   2. the `release` preset's `admit_bench` (bench/rate_limiters_bench.cpp) and `admit_semaphore_bench`
#      (bench/semaphore_bench.cpp, with std::counting_semaphore) targets, Google Benchmark, with
#      --benchmark_repetitions=5 --benchmark_report_aggregates_only=true: the median of the repetitions is reported;
#   3. bench/reference/go (golang.org/x/time/rate, github.com/juju/ratelimit and golang.org/x/sync/semaphore from
#      Debian's packages, GOPATH mode, offline), -count 5: the median of the 5 runs;
#   4. bench/reference/java (Guava's RateLimiter from Debian's libguava-java, java.util.concurrent.Semaphore; a plain
#      harness, JMH is not packaged): the median of 7 timed rounds after warm-up rounds;
#   5. bench/reference/rust (tokio's Semaphore from Debian's librust-tokio-dev, built offline with Debian's cargo and
#      rustc — a source replacement to /usr/share/cargo/registry — in a copy under the output directory): the median
#      of 7 timed rounds after warm-up rounds;
#   6. 3 more rounds (1 with --quick) of only the uncontended semaphore cases, admit, x/sync, Java and tokio one right
#      after the other, on which the issue-3 targets (ratios between them) are judged.
# Hand-off latencies are percentiles over 2000 rounds (300 with --quick) per run.
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
      sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "compare.sh: unknown argument '$arg' (expected --quick or --help)" >&2
      exit 2
      ;;
  esac
done

if ((quick)); then
  reps=3 min_time=0.05 go_benchtime=50ms go_count=3 java_rounds=3 java_round_ms=50 handoff_rounds=300
  interleave_rounds=1
else
  reps=5 min_time=0.2 go_benchtime=200ms go_count=5 java_rounds=7 java_round_ms=150 handoff_rounds=2000
  interleave_rounds=3
fi

out=build/release/bench/compare  # relative to the repository (the script runs there)
report="$repo/docs/PERFORMANCE.md"
started=$SECONDS
step() { printf '\n==> [%s, %ds] %s\n' "$1" $((SECONDS - started)) "$2" >&2; }

load_before=$(cut -d" " -f1-3 /proc/loadavg)
step 1/9 "dependencies: scripts/install-deps.sh --bench"
scripts/install-deps.sh --bench

step 2/9 "build: cmake --preset release && cmake --build --preset release --target admit_bench admit_semaphore_bench"
cmake --preset release >/dev/null
cmake --build --preset release --target admit_bench admit_semaphore_bench -j 2
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.csv "$out"/*.tsv

admit_cmd=(build/release/bench/admit_bench "--benchmark_repetitions=$reps" --benchmark_report_aggregates_only=true
  "--benchmark_min_time=$min_time" "--benchmark_out=$out/admit.csv" --benchmark_out_format=csv)
step 3/9 "admit rate limiters: ${admit_cmd[*]}"
"${admit_cmd[@]}" 2>&1 | tee "$out/admit.txt"

sem_cmd=(build/release/bench/admit_semaphore_bench "--benchmark_repetitions=$reps"
  --benchmark_report_aggregates_only=true "--benchmark_min_time=$min_time" "--handoff_rounds=$handoff_rounds"
  "--benchmark_out=$out/semaphore.csv" --benchmark_out_format=csv)
step 4/9 "admit semaphore and std::counting_semaphore: ${sem_cmd[*]}"
"${sem_cmd[@]}" 2>&1 | tee "$out/semaphore.txt"

go_cmd=(go test -run '^$' -bench . -benchtime "$go_benchtime" -count "$go_count")
step 5/9 "Go references: (cd bench/reference/go && GO111MODULE=off GOPATH=/usr/share/gocode SEMAPHORE_HANDOFF_ROUNDS=$handoff_rounds ${go_cmd[*]})"
(cd bench/reference/go &&
  GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS='' GOCACHE="$repo/$out/gocache" \
    SEMAPHORE_HANDOFF_ROUNDS="$handoff_rounds" "${go_cmd[@]}") | tee "$out/go.txt"

java_cmd=(java -cp "/usr/share/java/guava.jar:$repo/$out/java" GuavaRateLimiterBench "$java_rounds" "$java_round_ms")
java_sem_cmd=(java -cp "$repo/$out/java" SemaphoreBench "$java_rounds" "$java_round_ms" "$handoff_rounds")
step 6/9 "Java references: javac bench/reference/java/*.java && ${java_cmd[*]} && ${java_sem_cmd[*]}"
mkdir -p "$out/java"
javac -nowarn -cp /usr/share/java/guava.jar -d "$out/java" bench/reference/java/GuavaRateLimiterBench.java \
  bench/reference/java/SemaphoreBench.java
"${java_cmd[@]}" | tee "$out/java.txt"
"${java_sem_cmd[@]}" | tee "$out/java-semaphore.txt"

# Debian's cargo and rustc (not a rustup toolchain that may come first on PATH), offline, in a copy of the project so
# that the Cargo.lock it resolves against /usr/share/cargo/registry stays out of the source tree.
rust_src="$out/rust"
rust_cmd=("$rust_src/target/release/admit-semaphore-reference" "$java_rounds" "$java_round_ms" "$handoff_rounds")
step 7/9 "tokio reference: RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --offline (bench/reference/rust) && ${rust_cmd[*]}"
mkdir -p "$rust_src"
cp -r bench/reference/rust/Cargo.toml bench/reference/rust/src bench/reference/rust/.cargo "$rust_src/"
(cd "$rust_src" && RUSTC=/usr/bin/rustc CARGO_HOME="$repo/$out/cargo-home" CARGO_TARGET_DIR="$repo/$rust_src/target" \
  /usr/bin/cargo build --release --offline --quiet)
"${rust_cmd[@]}" | tee "$out/tokio.txt"

# The issue-3 targets are ratios between languages whose runs above lie minutes apart, and the load of a shared machine
# moves in minutes: measure the uncontended cases once more, one implementation right after the other, in rounds.
step 8/9 "uncontended semaphores side by side: $interleave_rounds rounds of admit (and the floor), x/sync, Java, tokio"
for ((r = 1; r <= interleave_rounds; r++)); do
  printf '  round %d of %d\n' "$r" "$interleave_rounds" >&2
  build/release/bench/admit_semaphore_bench '--benchmark_filter=^semaphore/uncontended/(admit|floor)/' \
    "--benchmark_min_time=$min_time" --benchmark_format=csv 2>/dev/null |
    awk -F, '$1 ~ /^"semaphore\/uncontended\// { n = $1; gsub(/"/, "", n); split(n, p, "/"); print p[3], $3 }'
  (cd bench/reference/go &&
    GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS='' GOCACHE="$repo/$out/gocache" \
      go test -run '^$' -bench '^BenchmarkSemaphoreUncontended$' -benchtime "$go_benchtime") |
    awk '$1 ~ /^BenchmarkSemaphoreUncontended/ && $4 == "ns/op" { print "xsync", $3 }'
  java -cp "$repo/$out/java" SemaphoreBench "$java_rounds" "$java_round_ms" 0 uncontended | awk '{ print "java", $3 }'
  "${rust_cmd[0]}" "$java_rounds" "$java_round_ms" 0 uncontended | awk '{ print "tokio", $3 }'
done | tee "$out/interleaved.txt"

load_after=$(cut -d" " -f1-3 /proc/loadavg)
step 9/9 "report: $report"

# shellcheck source=bench/compare_report.sh
source "$repo/bench/compare_report.sh"
