#!/usr/bin/env bash
# Counts the instructions redis-server runs for admit::redis::semaphore's cycles, next to the minimal FIFO hand-off:
# a measure that does not move with the machine's load, where cycles/s on a shared machine move by 10 % from run to
# run. Prints one line per case: the instructions Redis runs per cycle (an acquire and its release: one grant) and
# per script call.
#
#   bench/redis_semaphore_instructions.sh                    the four cases below
#   bench/redis_semaphore_instructions.sh --build-dir DIR    an already configured build directory (Release, with
#                                                            ADMIT_BUILD_BENCHMARKS=ON) instead of build/release
#   bench/redis_semaphore_instructions.sh --redis-server P   another redis-server binary (one built with symbols, for
#                                                            callgrind_annotate on the dumps kept)
#   bench/redis_semaphore_instructions.sh --case NAME        only that case (admit-64x8, admit-1x1, minimal-64x8 or
#                                                            minimal-1x1); repeat it for several
#
# Each case starts its own redis-server under `valgrind --tool=callgrind` (on CPU 0 when there are 2+ CPUs, the bench
# on CPU 1) and runs admit_redis_semaphore_bench against it for 30 s: admit's asynchronous contenders at 64:8 and 1:1
# (`--api async --minimal off`) and the minimal FIFO hand-off alone (`--api none --minimal on`). The counting is zeroed
# 8 s into the run (the connection made and the function library loaded, slowly, under valgrind) and dumped 4 s later,
# well inside the one case that runs; the cycles completed in the same window are the bench's own count (its
# --progress file, read at both moments), the calls `INFO commandstats`'s `FCALL`. User space only: the kernel's part
# of a call is not counted.
# The dumps stay in <build dir>/bench/redis_semaphore_instructions/.
# shellcheck source=bench/redis_common.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"

build_dir=build/release redis_server=redis-server
all_cases=(admit-64x8 admit-1x1 minimal-64x8 minimal-1x1) cases=()
while (($#)); do
  case "$1" in
    --build-dir | --redis-server | --case)
      [[ $# -ge 2 ]] || { echo "$script: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --build-dir) build_dir=$(realpath -m --relative-to="$repo" "$2") ;;
        --redis-server) redis_server=$2 ;;
        *)
          [[ " ${all_cases[*]} " == *" $2 "* ]] ||
            { echo "$script: no case '$2' (expected one of ${all_cases[*]})" >&2; exit 2; }
          cases+=("$2")
          ;;
      esac
      shift
      ;;
    -h | --help)
      sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "$script: unknown argument '$1' (expected --build-dir DIR, --redis-server PATH, --case NAME or --help)" >&2
      exit 2
      ;;
  esac
  shift
done
command -v valgrind >/dev/null || { echo "$script: valgrind is not installed (scripts/install-deps.sh --bench)" >&2; exit 1; }
out="$build_dir/bench/redis_semaphore_instructions"
build_bench admit_redis_semaphore_bench 3
mkdir -p "$out"
server_cpu=() client_cpu=()
if (($(nproc) >= 2)) && command -v taskset >/dev/null; then server_cpu=(taskset -c 0) client_cpu=(taskset -c 1); fi

# count LABEL BENCH_ARGS...: one case; prints "LABEL per-cycle per-call cycles calls".
count() {
  local label=$1
  shift
  local port dump="$repo/$out/$label.callgrind" progress="$repo/$out/$label.progress" server bench
  port=$(free_port)
  rm -f "$dump" "$dump".* "$progress"
  "${server_cpu[@]}" valgrind --tool=callgrind --callgrind-out-file="$dump" "$redis_server" --port "$port" \
    --bind 127.0.0.1 --save "" --appendonly no >"$repo/$out/$label.valgrind.log" 2>&1 &
  server=$!
  local cli=(redis-cli -h 127.0.0.1 -p "$port")
  await_redis "$server" 300  # under valgrind: up to 30 s
  "${client_cpu[@]}" "$bench_bin" --url "redis://127.0.0.1:$port" --wakeup-rounds 0 --floor off --warmup 0.5 \
    --duration 30 --timeout-ms 60000 --progress "$progress" "$@" >"$repo/$out/$label.bench.txt" 2>&1 &
  bench=$!
  sleep 8  # the window's start: wall time, not the bench's progress, which valgrind slows
  callgrind_control -z "$server" >/dev/null 2>&1
  "${cli[@]}" config resetstat >/dev/null
  local first last
  first=$(cat "$progress" 2>/dev/null || echo 0)
  sleep 4
  callgrind_control -d "$server" >/dev/null 2>&1
  last=$(cat "$progress" 2>/dev/null || echo 0)
  local stats
  stats=$("${cli[@]}" info commandstats)
  kill "$bench" 2>/dev/null || true
  wait "$bench" 2>/dev/null || true
  "${cli[@]}" shutdown nosave >/dev/null 2>&1 || true
  wait "$server" 2>/dev/null || true
  local instructions cycles calls
  instructions=$(sed -n 's/^summary: //p' "$dump".1)
  cycles=$((last - first))
  calls=$(sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),.*/\1/p' <<<"$stats")
  [[ -n "$instructions" && "${cycles:-0}" -gt 0 && "${calls:-0}" -gt 0 ]] ||
    { echo "$script: $label: nothing counted (see $out/$label.*)" >&2; exit 1; }
  printf '%s\t%d\t%d\t%d\t%d\n' "$label" $((instructions / cycles)) $((instructions / calls)) "$cycles" "$calls"
}

((${#cases[@]})) || cases=("${all_cases[@]}")
step 3/3 "counting: ${#cases[@]} case(s) of about 15 s each ($("$redis_server" --version | cut -d' ' -f3))"
printf 'case\tinstructions per cycle\tper call\tcycles\tcalls\n'
for c in "${cases[@]}"; do
  case "$c" in
    admit-64x8) count admit-64x8 --cycles 64:8 --api async --minimal off ;;
    admit-1x1) count admit-1x1 --cycles 1:1 --api async --minimal off ;;
    minimal-64x8) count minimal-64x8 --cycles 64:8 --api none --minimal on ;;
    minimal-1x1) count minimal-1x1 --cycles 1:1 --api none --minimal on ;;
  esac
done
