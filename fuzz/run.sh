#!/bin/sh
# Builds the libFuzzer targets with the `fuzz` preset (clang++) and runs each for a bounded time.
#   fuzz/run.sh [seconds per fuzzer, default 60]
# A crash or a broken invariant stops with a non-zero status and leaves the input in build/fuzz/artifacts/.
set -eu
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j2 --target rate_parse_fuzz trace_parse_fuzz
artifacts="$root/build/fuzz/artifacts"
mkdir -p "$artifacts"
failed=""
for name in rate_parse trace_parse; do
  # Work on a copy of the seed corpus so that a run never rewrites the committed seeds.
  work="$root/build/fuzz/corpus/$name"
  mkdir -p "$work"
  echo "== $name: ${seconds}s"
  if ! "$root/build/fuzz/fuzz/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/${name}-" "$work" "$root/fuzz/corpus/$name"; then
    failed="$failed $name"
  fi
done
if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed (inputs in $artifacts)" >&2
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a failure"
