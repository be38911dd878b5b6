# bench/serve_compare.sh's report, sourced by it once the medians are read: write_report writes docs/perf/serve.md
# from the script's globals (dps, p50, p90, p99, pmax, over, errs, ccpu, cmds, rusec, rcpu, scpu, cpr: the medians by
# "<impl>:<variant>/<keys>/<streams>"; command_line, rounds, duration, warmup, loads, failures, redis_version, ...).
# shellcheck shell=bash disable=SC2154  # those globals are set by bench/serve_compare.sh

# Number formats (fmt_int, us_to_ms, le, verdict: bench/redis_common.sh).
one() { if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.1f", a }'; fi; }
two() { if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf "%.2f", a }'; fi; }
# us X: µs, one decimal below 100, none above.
us() {
  if [[ -z "${1:-}" || "$1" == - ]]; then printf '—'; else awk -v a="$1" 'BEGIN { printf (a < 100 ? "%.1f" : "%.0f"), a }'; fi
}
ratio() {
  [[ -n "${1:-}" && "$1" != - && -n "${2:-}" && "$2" != - ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b }'
}
ge() { [[ -n "${1:-}" && "$1" != - ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
# errors KEY: failed calls, wrong answers and OVER_LIMIT answers (the configuration's limit is never reached, so every
# OVER_LIMIT is a backend failure answered fail-closed), medians.
errors() { awk -v a="${errs[$1]:-0}" -v b="${over[$1]:-0}" 'BEGIN { print (a == "-" ? 0 : a) + (b == "-" ? 0 : b) }'; }
# clean KEY: whether a case ran without any of those.
clean() { [[ "$(errors "$1")" == 0 ]]; }

# at_least A B FACTOR: 1 when A >= FACTOR x B, 0 when not, "none" when either is missing.
at_least() {
  [[ -z "${1:-}" || "$1" == - || -z "${2:-}" || "$2" == - ]] && { echo none; return; }
  awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { print (a >= f * b) ? 1 : 0 }'
}
# all VERDICT...: 1 when every one is 1, none when one is none, else 0.
all() {
  local v out=1
  for v in "$@"; do
    [[ "$v" == none ]] && { echo none; return; }
    [[ "$v" == 1 ]] || out=0
  done
  echo $out
}
# vs A B: "a vs b (ratio×)" of the decisions/s of the cases A and B.
vs() { printf '%s vs %s (%s×)' "$(fmt_int "${dps[$1]:-}")" "$(fmt_int "${dps[$2]:-}")" "$(ratio "${dps[$1]:--}" "${dps[$2]:--}")"; }
# cpu_vs A B: "a vs b µs" of the server CPU per call of the cases A and B.
cpu_vs() { printf '%s vs %s µs' "$(one "${scpu[$1]:-}")" "$(one "${scpu[$2]:-}")"; }
# rcpu_vs A B: "a vs b µs (ratio×)" of Redis's CPU per decision of the cases A and B.
rcpu_vs() {
  printf '%s vs %s µs (%s×)' "$(one "${rcpu[$1]:-}")" "$(one "${rcpu[$2]:-}")" "$(ratio "${rcpu[$1]:--}" "${rcpu[$2]:--}")"
}
# Each target's verdict (a case with errors fails it).
clean_all() {
  local k
  for k in "$@"; do clean "$k" || { echo 0; return; }; done
  echo 1
}
check_floor_rate() {
  all "$(at_least "${dps[admit-serve:grpc/many/16]:--}" "${dps[grpc-floor:empty/many/16]:--}" 0.9)" \
    "$(at_least "${dps[admit-serve:grpc/many/256]:--}" "${dps[grpc-floor:empty/many/256]:--}" 0.9)" \
    "$(clean_all admit-serve:grpc/many/16 admit-serve:grpc/many/256)"
}
# server CPU per call <= the floor's + 2 µs: the floor's + 2 >= admit's, as at_least with a factor of 1.
check_floor_cpu() {
  local s v=()
  for s in 16 256; do
    local f=${scpu[grpc-floor:empty/many/$s]:--}
    [[ "$f" == - ]] && { echo none; return; }
    v+=("$(at_least "$(awk -v f="$f" 'BEGIN { print f + 2 }')" "${scpu[admit-serve:grpc/many/$s]:--}" 1)")
  done
  all "${v[@]}"
}
check_redis_rate() {
  all "$(at_least "${dps[admit-serve-redis:grpc/many/16]:--}" "${dps[admit-serve:grpc/many/16]:--}" 0.9)" \
    "$(clean_all admit-serve-redis:grpc/many/16)"
}
check_redis_floor() {
  local keys s v=()
  for keys in many hot; do
    for s in 16 256; do
      v+=("$(at_least "${dps[admit-serve-redis:grpc/$keys/$s]:--}" "${dps[grpc-floor-redis:empty/$keys/$s]:--}" 0.9)")
      v+=("$(clean_all "admit-serve-redis:grpc/$keys/$s")")
    done
  done
  all "${v[@]}"
}
# Redis CPU per decision at most envoyproxy/ratelimit's (factor 1), or a quarter of it with prefetch.
check_redis_cpu() {
  local keys s v=()
  for keys in many hot; do
    for s in 16 256; do
      v+=("$(at_least "${rcpu[envoy-redis:incr-expire/$keys/$s]:--}" "${rcpu[admit-serve-redis:grpc/$keys/$s]:--}" 1)")
    done
  done
  all "${v[@]}"
}
# Redis CPU per decision at most 1.1x the floor of a call that goes to Redis (the floor server's), at each concurrency.
check_redis_cpu_floor() {
  local keys s v=()
  for keys in many hot; do
    for s in 16 256; do
      local f=${rcpu[grpc-floor-redis:empty/$keys/$s]:--}
      [[ "$f" == - ]] && { echo none; return; }
      v+=("$(at_least "$(awk -v f="$f" 'BEGIN { print 1.1 * f }')" "${rcpu[admit-serve-redis:grpc/$keys/$s]:--}" 1)")
    done
  done
  all "${v[@]}"
}
# cpr_of KEY: "N commands per read" of a case.
cpr_of() { printf '%s' "$(one "${cpr[$1]:-}")"; }
check_prefetch_cpu() {
  all "$(at_least "${rcpu[envoy-redis:incr-expire/hot/16]:--}" "${rcpu[admit-serve-redis:grpc/prefetch/16]:--}" 4)" \
    "$(at_least "${rcpu[envoy-redis:incr-expire/hot/256]:--}" "${rcpu[admit-serve-redis:grpc/prefetch/256]:--}" 4)" \
    "$(clean_all admit-serve-redis:grpc/prefetch/16 admit-serve-redis:grpc/prefetch/256)"
}
# over_floor: admit serve's gRPC p50 at 1 stream minus the floor's (an empty gRPC server), many keys.
over_floor() {
  local g=${p50[admit-serve:grpc/many/1]:--} f=${p50[grpc-floor:empty/many/1]:--}
  [[ "$g" == - || "$f" == - ]] && return
  awk -v g="$g" -v f="$f" 'BEGIN { printf "%.1f", g - f }'
}

# row KEY NAME HOW STREAMS: one line of the side-by-side table.
row() {
  local k=$1
  [[ "${dps[$k]:--}" == - ]] && return
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$3" "$4" \
    "$(fmt_int "${dps[$k]}")" "$(us "${p50[$k]}")" "$(us "${p90[$k]}")" "$(us "${p99[$k]}")" "$(us "${pmax[$k]}")" \
    "$(fmt_int "$(errors "$k")")" "$(one "${ccpu[$k]}")" "$(one "${scpu[$k]}")" "$(two "${scalls[$k]}")" \
    "$(two "${cmds[$k]}")" "$(one "${cpr[$k]:-}")" "$(one "${rusec[$k]}")" "$(one "${rcpu[$k]}")"
}

# loaded_note: a warning when other work loaded the machine during the rounds (1-minute load above the cores).
loaded_note() {
  if awk -v l="$load_max" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    printf '\n**The machine was busy with other work during this run** (1-minute load up to %s on %s cores): every\n' \
      "$load_max" "$(nproc)"
    printf 'process here got a share of the cores, so rates are lower and tail latencies higher than on an idle machine.\n'
  fi
}

write_report() {
  describe_machine
  local grpc_version
  grpc_version=$(dpkg-query -W -f='${Version}' libgrpc++-dev 2>/dev/null || echo unknown)
  mkdir -p "$(dirname "$report")"
  local server_pinning="; \`admit serve\` not pinned"
  if ((${#server_cpu[@]})); then
    server_pinning="; the in-process cases' servers (\`admit serve\` and the gRPC floor) on CPU 0 too, the Redis cases' not pinned"
  fi
  {
    cat <<EOF
## admit serve: decisions over gRPC

Run on $(date +%F) by \`$command_line\`, medians over $rounds round(s) of ${duration} s per case (after ${warmup} s of
warm-up), every case one after the other in each round. Machine: $(nproc) × $cpu; $pinning$server_pinning.
Load average before $load_before, after $load_after (1-minute value at the rounds: ${loads[*]}; max $load_max). gRPC $grpc_version (Debian), redis-server $redis_version (127.0.0.1, persistence off).
$(loaded_note)

The load: admit_serve_load (bench/serve_load.cpp) keeps N \`ShouldRateLimit\` calls outstanding on gRPC's asynchronous
client API (one thread, one HTTP/2 connection), each call one descriptor \`{user: <value>}\` of domain \`bench\`
(bench/serve_config: a fixed window of 1,000,000,000 a second per value, so every decision is counted and answered
OK): *many keys* draws the value from $(fmt_int "$key_count") per call, *hot* sends one value. Every answer is checked (overall code,
one status per descriptor with its limit); failed calls and wrong answers are counted apart, never as decisions.
\`admit serve --redis\` runs fail-closed, so a Redis failure would show as an error here, not as throughput.

### Targets: admit serve

| target | measured | verdict |
| --- | --- | --- |
| in process ≥ 0.9× the calls/s of the floor (a gRPC server built the same way that decides nothing), at 16 and at 256 streams | many keys, 16 streams: $(vs admit-serve:grpc/many/16 grpc-floor:empty/many/16); 256: $(vs admit-serve:grpc/many/256 grpc-floor:empty/many/256) | $(verdict "$(check_floor_rate)") |
| in process, server CPU per call ≤ the floor's + 2 µs | 16 streams: $(cpu_vs admit-serve:grpc/many/16 grpc-floor:empty/many/16); 256: $(cpu_vs admit-serve:grpc/many/256 grpc-floor:empty/many/256) | $(verdict "$(check_floor_cpu)") |
| on Redis ≥ 0.9× the in-process calls/s at 16 streams | many keys: $(vs admit-serve-redis:grpc/many/16 admit-serve:grpc/many/16); the floor of a call that goes to Redis (the floor server sending INCRBY + EXPIRE NX per call, on keys as long as admit serve's) reaches $(vs grpc-floor-redis:empty/many/16 admit-serve:grpc/many/16) of it | $(verdict "$(check_redis_rate)") |
| on Redis ≥ 0.9× the floor of a call that goes to Redis, at 16 and 256 streams | many keys, 16: $(vs admit-serve-redis:grpc/many/16 grpc-floor-redis:empty/many/16); 256: $(vs admit-serve-redis:grpc/many/256 grpc-floor-redis:empty/many/256); hot key, 16: $(vs admit-serve-redis:grpc/hot/16 grpc-floor-redis:empty/hot/16); 256: $(vs admit-serve-redis:grpc/hot/256 grpc-floor-redis:empty/hot/256) | $(verdict "$(check_redis_floor)") |
| Redis CPU per decision ≤ envoyproxy/ratelimit's INCRBY + EXPIRE at the same concurrency (no prefetch) | many keys, 16: $(rcpu_vs admit-serve-redis:grpc/many/16 envoy-redis:incr-expire/many/16); 256: $(rcpu_vs admit-serve-redis:grpc/many/256 envoy-redis:incr-expire/many/256); hot key, 16: $(rcpu_vs admit-serve-redis:grpc/hot/16 envoy-redis:incr-expire/hot/16); 256: $(rcpu_vs admit-serve-redis:grpc/hot/256 envoy-redis:incr-expire/hot/256) | $(verdict "$(check_redis_cpu)") |
| below that floor: Redis CPU per decision ≤ 1.1× the floor of a call that goes to Redis (the floor server's) at the same concurrency | many keys, 16: $(rcpu_vs admit-serve-redis:grpc/many/16 grpc-floor-redis:empty/many/16); 256: $(rcpu_vs admit-serve-redis:grpc/many/256 grpc-floor-redis:empty/many/256); hot key, 16: $(rcpu_vs admit-serve-redis:grpc/hot/16 grpc-floor-redis:empty/hot/16); 256: $(rcpu_vs admit-serve-redis:grpc/hot/256 grpc-floor-redis:empty/hot/256) | $(verdict "$(check_redis_cpu_floor)") |
| with \`prefetch: 20\`, Redis CPU per decision ≤ ¼ of envoyproxy/ratelimit's (hot key) | 16 streams: $(rcpu_vs admit-serve-redis:grpc/prefetch/16 envoy-redis:incr-expire/hot/16), $(two "${cmds[admit-serve-redis:grpc/prefetch/16]:-}") commands per decision; 256: $(rcpu_vs admit-serve-redis:grpc/prefetch/256 envoy-redis:incr-expire/hot/256) | $(verdict "$(check_prefetch_cpu)") |

The envoyproxy/ratelimit rows are its Redis commands alone, driven by a C++ client with no gRPC or decision work in
front (admit_serve_load --mode redis-incr-expire: per decision an \`INCRBY\` and an \`EXPIRE\` of
\`bench_user_<value>_<window>\`, written together; all outstanding decisions' commands pipelined on one connection):
the least Redis work envoyproxy/ratelimit's layout can cost on this server at that concurrency. The floor of a call that
goes to Redis is what any decision service that counts in Redis pays here: gRPC's work, a hand-off to the Redis
client's thread, a round trip, the reply handed back.

### Side by side (medians)

*streams*: calls outstanding. Latency per call in µs, from issuing it to its completion. *errors*: failed calls, wrong
answers and OVER_LIMIT answers in the window (the limit is never reached: an OVER_LIMIT is a backend failure answered
fail-closed). *client CPU*: the load generator's CPU µs per decision;
*serve CPU*: \`admit serve\`'s CPU µs per decision (all its threads; gRPC rows). Redis, per decision (all calls of
the case, warm-up included, ÷ its answers): *scripts*: script calls (EVALSHA: admit's round trips); *cmds*: commands
(INFO commandstats: every command but the script's INFO/CONFIG, those a script calls included); *cmds/read*: the
commands each read of a client's socket brought Redis (INFO stats; a script's own calls counted too): how full the
clients' writes were; *Redis µs*: the
server's time inside commands (commandstats usec, a script's commands counted in it and again on their own); *Redis
CPU*: redis-server's CPU (INFO cpu: commands, network, event loop).

| implementation | how | streams | decisions/s | p50 | p90 | p99 | max | errors | client CPU | serve CPU | scripts | cmds | cmds/read | Redis µs | Redis CPU |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
EOF
    local keys s
    for keys in many hot; do
      local label
      label="*$(fmt_int "$key_count") keys*"
      [[ $keys == hot ]] && label="*one hot key*"
      printf '| %s | | | | | | | | | | | | | | | |\n' "$label"
      for s in 1 16 256; do row "admit-serve:grpc/$keys/$s" "**admit serve**, in process" "gRPC" "$s"; done
      if [[ $keys == many ]]; then
        for s in 1 16 256; do row "grpc-floor:empty/many/$s" "the floor: a gRPC server that decides nothing" "gRPC, a fixed answer" "$s"; done
      fi
      for s in 1 16; do row "admit-library:in-process/$keys/$s" "admit's library call, in process" "\`service::should_rate_limit\`" "$s"; done
      for s in 1 16 256; do row "admit-serve-redis:grpc/$keys/$s" "**admit serve --redis**" "gRPC, fail-closed" "$s"; done
      for s in 1 16 256; do row "grpc-floor-redis:empty/$keys/$s" "the floor of a call that goes to Redis" "gRPC, INCRBY + EXPIRE NX per call, keys as long as admit's" "$s"; done
      if [[ $keys == hot ]]; then
        for s in 16 256; do row "admit-serve-redis:grpc/prefetch/$s" "**admit serve --redis**, \`prefetch: 20\`" "gRPC, fail-closed" "$s"; done
      fi
      for s in 1 16 256; do row "admit-library:redis/$keys/$s" "admit's library call, on Redis" "\`service::should_rate_limit\`" "$s"; done
      for s in 1 16 256; do row "envoy-redis:incr-expire/$keys/$s" "envoyproxy/ratelimit's Redis work" "INCRBY + EXPIRE, pipelined" "$s"; done
    done
    printf '| %s | | | | | | | | | | | | | | | |\n' "*GCRA (admit's extension), $(fmt_int "$key_count") keys*"
    row "admit-serve:grpc/gcra/16" "**admit serve**, in process" "gRPC, \`algorithm: gcra\`" 16
    row "admit-serve-redis:grpc/gcra/16" "**admit serve --redis**" "gRPC, \`algorithm: gcra\`" 16
    if ((${#failures[@]})); then
      printf '\nRuns with failed calls or wrong answers (see %s/load.log): %s.\n' "$out" "$(printf '%s; ' "${failures[@]}" | sed 's/; $//')"
    fi
    local k16=admit-serve:grpc/many/16 r256=admit-serve-redis:grpc/many/256 l256=admit-library:redis/many/256
    cat <<EOF

Reading the table:

- On this machine the load generator and the server share the same $(nproc) cores. At 16 streams in process a call cost
  $(one "${scpu[$k16]:-}") µs of \`admit serve\`'s CPU and $(one "${ccpu[$k16]:-}") µs of the client's: together about
  $(fmt_int "$(awk -v a="${scpu[$k16]:-0}" -v b="${ccpu[$k16]:-0}" -v n="$(nproc)" 'BEGIN { if (a + b > 0) print n * 1e6 / (a + b) }')") calls/s on $(nproc) idle cores at best, whatever the decision costs — and the decision itself,
  the library call, takes $(one "${p50[admit-library:in-process/many/1]:-}") µs (p50, many keys). Most of a call's CPU is gRPC's
  (HTTP/2 framing, hand-offs between its threads, protobuf), on both sides.
- The floor row shows it: a server built as \`admit serve\`'s gRPC server (gRPC's callback API, the same method and
  health service), whose handler neither parses the request nor decides, answering every call with the same bytes
  (bench/serve_grpc_floor.cpp), with admit serve's limits and resource quota, reaches $(fmt_int "${dps[grpc-floor:empty/many/16]:-}") calls/s at 16 streams with
  $(one "${scpu[grpc-floor:empty/many/16]:-}") µs of server CPU per call, and a p50 of $(one "${p50[grpc-floor:empty/many/1]:-}") µs at 1 stream. No
  decision service on gRPC can be faster here than that; \`admit serve\` adds $(over_floor) µs at p50 over it (the
  decision, the protobuf conversions both ways, the request's checks).
- On Redis, the fixed window's hits of the decisions waiting at the same moment leave together: per counter of the
  batch one \`INCRBY\` (of its hits together) and one \`EXPIRE ... NX\`, in one pipeline — the commands
  envoyproxy/ratelimit sends per descriptor, fewer of them when descriptors share a counter. At 256 streams over gRPC
  that is $(two "${cmds[$r256]:-}") commands per decision on many keys and $(two "${cmds[admit-serve-redis:grpc/hot/256]:-}") on the hot key; the library call alone
  at 256: $(two "${cmds[$l256]:-}"). A rule with \`prefetch\` (or \`over_limit_hits: drop\`) goes through a script instead.
- Redis's CPU per decision falls as each read of a client's socket brings it more commands (each read costs a
  read, a write and a turn of the event loop, whatever it carries). envoyproxy/ratelimit's rows are its commands
  sent by a client that does nothing else: at 16 outstanding it reaches $(fmt_int "${dps[envoy-redis:incr-expire/many/16]:-}") decisions/s, and each read brings
  Redis $(one "${cpr[envoy-redis:incr-expire/many/16]:-}") commands (256: $(fmt_int "${dps[envoy-redis:incr-expire/many/256]:-}") and $(one "${cpr[envoy-redis:incr-expire/many/256]:-}")). Behind gRPC the same 16 calls arrive at
  $(fmt_int "${dps[grpc-floor-redis:empty/many/16]:-}") a second here, and the floor server's reads bring $(one "${cpr[grpc-floor-redis:empty/many/16]:-}") ($(one "${cpr[grpc-floor-redis:empty/many/256]:-}") at 256), \`admit serve\`'s
  $(one "${cpr[admit-serve-redis:grpc/many/16]:-}") ($(one "${cpr[admit-serve-redis:grpc/many/256]:-}")): no decision service on gRPC fills its writes as that client does on this machine,
  which puts the target of Redis CPU per decision ≤ envoyproxy/ratelimit's rows below what such a service can
  reach; the floor of a call that goes to Redis is the figure to hold admit serve to (the row after it).
- Raw outputs of this run: \`$out/\` (raw.tsv: every case of every round; results.tsv: the medians; the servers'
  logs).
EOF
  } >"$report"
}
