# What bench/redis_compare.sh and bench/redis_semaphore_compare.sh share, sourced by both first thing: their command
# line, building their program, the Node references' `npm ci`, the redis-server they start, the machine load, the
# medians over their rounds and the report's number formats. The functions read and set the scripts' globals (quick,
# build_dir, out, report, raw, bench_bin, cli, port, url, ...), as the scripts' own code does.
# shellcheck shell=bash disable=SC2034,SC2154  # those globals: set here and read there, or the other way round

# The scripts run in the repository (their paths are relative to it).
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit
script=${0##*/}  # the running script's name, which starts its messages
started=$SECONDS
step() { printf '\n==> [%s, %ds] %s\n' "$1" $((SECONDS - started)) "$2" >&2; }

# parse_arguments HELP_LAST_LINE ARG...: sets quick and build_dir from --quick and --build-dir DIR, and command_line
# (for the report); --help prints the script's header comment, lines 2 to HELP_LAST_LINE.
parse_arguments() {
  local help_last_line=$1
  shift
  command_line="bench/$script${*:+ $*}"
  quick=0
  build_dir=build/release
  while (($#)); do
    case "$1" in
      --quick) quick=1 ;;
      --build-dir)
        [[ $# -ge 2 ]] || { echo "$script: --build-dir needs a directory" >&2; exit 2; }
        build_dir=$(realpath -m --relative-to="$repo" "$2")  # (the scripts' paths are "$repo/$build_dir/...")
        shift
        ;;
      -h | --help)
        sed -n "2,${help_last_line}p" "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
      *)
        echo "$script: unknown argument '$1' (expected --quick, --build-dir DIR or --help)" >&2
        exit 2
        ;;
    esac
    shift
  done
}

# build_bench TARGET [STEPS]: steps 1 and 2 (of STEPS, 7 by default), the dependencies then TARGET, in the `release`
# preset or in --build-dir; sets load_before (before the build loads the machine) and bench_bin.
build_bench() {
  local target=$1 steps=${2:-7}
  load_before=$(cut -d" " -f1-3 /proc/loadavg)
  step "1/$steps" "dependencies: scripts/install-deps.sh --bench"
  scripts/install-deps.sh --bench

  if [[ "$build_dir" == build/release ]]; then
    step "2/$steps" "build: cmake --preset release && cmake --build --preset release --target $target"
    cmake --preset release >/dev/null
    cmake --build --preset release --target "$target" -j 2
  else
    step "2/$steps" "build: cmake --build $build_dir --target $target"
    cmake --build "$build_dir" --target "$target" -j 2
  fi
  bench_bin="$repo/$build_dir/bench/$target"
  [[ -x "$bench_bin" ]] || { echo "$script: $bench_bin was not built (is hiredis installed?)" >&2; exit 1; }
}

# npm_install WHAT BENCH_JS: step 3, `npm ci` of bench/reference/redis/node (versions pinned by its package-lock.json)
# in a copy in $out/node, with BENCH_JS, the script the run calls there.
npm_install() {
  step 3/7 "$1: npm ci (bench/reference/redis/node, copied to $out/node)"
  mkdir -p "$out/node"
  cp bench/reference/redis/node/package.json bench/reference/redis/node/package-lock.json \
    "bench/reference/redis/node/$2" "$out/node/"
  (cd "$out/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
# version_of PACKAGE: the version of the npm package npm_install installed.
version_of() { (cd "$out/node" && node -p "require('$1/package.json').version"); }

# free_port: a loopback TCP port nobody listens on now.
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# await_redis PID TRIES: waits until the redis-server of process PID answers PING on "${cli[@]}", polling every 0.1 s
# at most TRIES times (a real process starting: a bounded poll); exits the script when it stops or never answers.
await_redis() {
  local pid=$1 tries=$2 i
  for ((i = 0; i < tries; ++i)); do
    [[ "$("${cli[@]}" ping 2>/dev/null)" == PONG ]] && return 0
    kill -0 "$pid" 2>/dev/null || { echo "$script: redis-server exited" >&2; exit 1; }
    sleep 0.1
  done
  [[ "$("${cli[@]}" ping 2>/dev/null)" == PONG ]] || { echo "$script: redis-server did not answer" >&2; exit 1; }
}

# start_redis_server: step 4, a redis-server on a free loopback port, without persistence, pinned to CPU 0 when there
# are 2+ CPUs (every client then on CPU 1: "${client_cpu[@]}" CMD), stopped when the script exits. Sets server_cpu,
# client_cpu, port, cli (redis-cli on it), url and redis_version.
start_redis_server() {
  server_cpu=() client_cpu=()
  if (($(nproc) >= 2)) && command -v taskset >/dev/null; then server_cpu=(taskset -c 0) client_cpu=(taskset -c 1); fi
  port=$(free_port)
  mkdir -p "$out/redis-server"
  step 4/7 "redis-server on 127.0.0.1:$port (--save \"\" --appendonly no${server_cpu:+, ${server_cpu[*]}})"
  "${server_cpu[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$repo/$out/redis-server" --logfile "$repo/$out/redis-server/redis.log" &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
  cli=(redis-cli -h 127.0.0.1 -p "$port")
  await_redis "$server_pid" 50
  url="redis://127.0.0.1:$port"
  redis_version=$("${cli[@]}" info server | sed -n 's/^redis_version:\([^\r]*\).*/\1/p')
}

# medians KEY_FIELDS LAST [AWK_OPTION...] <raw.tsv >results.tsv: raw.tsv's lines are KEY_FIELDS fields naming the
# case (impl, variant, then the case's own), the round's repetition, then values up to column LAST. Writes a line per
# case, "<impl>:<variant>/<field 3>/.../<field KEY_FIELDS>" then the median over the rounds of each value ("-" where
# not measured).
medians() {
  local key_fields=$1 last=$2
  shift 2
  sort -t$'\t' -k1,"$key_fields" | awk -F'\t' -v key_fields="$key_fields" -v last="$last" "$@" '
  function median(col,   n, i, j, t, v) {
    n = 0
    for (i = 1; i <= cnt; ++i) if (val[i, col] != "-" && val[i, col] != "") v[++n] = val[i, col] + 0
    if (n == 0) return "-"
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  function emit(   c, line) {
    line = key
    for (c = key_fields + 2; c <= last; ++c) line = line " " median(c)
    print line
  }
  { k = $1 ":" $2
    for (c = 3; c <= key_fields; ++c) k = k "/" $c
    if (k != key) { if (key != "") emit(); key = k; cnt = 0 }
    ++cnt; for (c = key_fields + 2; c <= last; ++c) val[cnt, c] = $c }
  END { if (key != "") emit() }'
}

# begin_round ROUND: says which round starts (of $rounds) at what machine load; adds the load to loads.
begin_round() {
  printf '  round %d of %d (load %s)\n' "$1" "$rounds" "$(cut -d" " -f1-3 /proc/loadavg)" >&2
  loads+=("$(cut -d" " -f1 /proc/loadavg)")
}
# end_rounds: sets load_after, and adds the load to loads.
end_rounds() {
  load_after=$(cut -d" " -f1-3 /proc/loadavg)
  loads+=("$(cut -d" " -f1 /proc/loadavg)")
}

# describe_machine: for the report, sets cpu (the model), load_max (the highest 1-minute load of the rounds, in
# loads) and pinning (where server and clients ran).
describe_machine() {
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  load_max=$(printf '%s\n' "${loads[@]}" | sort -g | tail -1)
  pinning="redis-server on CPU 0, every client on CPU 1 (taskset)"
  ((${#server_cpu[@]})) || pinning="no CPU pinning (fewer than 2 CPUs or no taskset)"
}

# fmt_int N: 12345 -> 12,345; "—" when not measured.
fmt_int() {
  if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; return; fi
  awk -v a="$1" 'BEGIN { s = sprintf("%.0f", a); r = ""
    while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
    printf "%s%s", s, r }'
}
# us_to_ms US: µs as ms with two decimals; "—" when not measured.
us_to_ms() {
  if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.2f", a / 1000 }'; fi
}
# le A B: whether A (measured) <= B.
le() { [[ -n "${1:-}" && "$1" != - ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# verdict 1|0|floor|none: a target's verdict cell (floor: within 10 % of a floor measured in the same run that is
# itself below the target).
verdict() {
  if [[ "$1" == none ]]; then echo "not measured"
  elif [[ "$1" == 1 ]]; then echo "**met**"
  elif [[ "$1" == floor ]]; then echo "**met at the floor** (the floor itself below the target)"
  else echo "**not met**"; fi
}

# show_report TARGETS_HEADING: after the report is written, its targets section (from the line matching
# ^TARGETS_HEADING to the side-by-side table) on stderr, and the time the run took.
show_report() {
  echo >&2
  sed -n "/^$1/,/^### Side by side/p" "$report" | sed '$d' >&2
  printf '==> wrote %s in %ds\n' "$report" $((SECONDS - started)) >&2
}
