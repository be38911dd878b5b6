#!/bin/sh
# Builds the libFuzzer targets with the `fuzz` preset (clang++) and runs them side by side (one core each) for a
# bounded time.
#   fuzz/run.sh [seconds per fuzzer, default 60]
# A crash or a broken invariant stops with a non-zero status and leaves the input in build/fuzz/artifacts/; each
# fuzzer's output is in build/fuzz/<name>.log, and its end is printed here.
set -eu
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j2 --target rate_parse_fuzz trace_parse_fuzz
artifacts="$root/build/fuzz/artifacts"
mkdir -p "$artifacts"
names="rate_parse trace_parse"
for name in $names; do
  # Work on a copy of the seed corpus so that a run never rewrites the committed seeds.
  work="$root/build/fuzz/corpus/$name"
  mkdir -p "$work"
  echo "== $name: ${seconds}s"
  "$root/build/fuzz/fuzz/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/${name}-" "$work" "$root/fuzz/corpus/$name" \
    >"$root/build/fuzz/$name.log" 2>&1 &
  eval "pid_$name=$!"
done
failed=""
for name in $names; do
  if ! wait "$(eval echo "\$pid_$name")"; then
    failed="$failed $name"
  fi
  echo "== $name:"
  tail -n 15 "$root/build/fuzz/$name.log"
done
if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed (inputs in $artifacts, output in build/fuzz/<name>.log)" >&2
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a failure"
