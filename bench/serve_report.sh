# bench/serve_compare.sh's report, sourced by it once the medians are read: write_report writes docs/perf/serve.md
# from the script's globals (dps, p50, p90, p99, pmax, over, errs, ccpu, cmds, rusec, rcpu, scpu: the medians by
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

check_inprocess() {
  local k=admit-serve:grpc/many/16
  [[ "${dps[$k]:--}" == - ]] && { echo none; return; }
  if clean "$k" && ge "${dps[$k]}" 100000 && le "${p99[$k]}" 2000; then echo 1; else echo 0; fi
}
# check_redis IMPL:VARIANT: admit on Redis (the service over gRPC, or the library call) at 16 and 256 streams, many
# keys and the hot key, against envoyproxy/ratelimit's Redis work at the same concurrency: met when all four are.
check_redis() {
  local ok=1 s k e keys
  for keys in many hot; do
    for s in 16 256; do
      k=$1/$keys/$s e=envoy-redis:incr-expire/$keys/$s
      [[ "${dps[$k]:--}" == - || "${dps[$e]:--}" == - ]] && { echo none; return; }
      { clean "$k" && ge "$(ratio "${dps[$k]}" "${dps[$e]}")" 1; } || ok=0
    done
  done
  echo $ok
}
# vs IMPL:VARIANT KEYS STREAMS: "admit's decisions/s vs envoyproxy/ratelimit's (ratio×)".
vs() {
  local k=$1/$2/$3 e=envoy-redis:incr-expire/$2/$3
  printf '%s vs %s (%s×)' "$(fmt_int "${dps[$k]:-}")" "$(fmt_int "${dps[$e]:-}")" "$(ratio "${dps[$k]:--}" "${dps[$e]:--}")"
}
# added_us: gRPC p50 at 1 stream minus the library call's p50 at 1 stream (in process, many keys).
added_us() {
  local g=${p50[admit-serve:grpc/many/1]:--} l=${p50[admit-library:in-process/many/1]:--}
  [[ "$g" == - || "$l" == - ]] && return
  awk -v g="$g" -v l="$l" 'BEGIN { printf "%.1f", g - l }'
}
# over_floor: admit serve's gRPC p50 at 1 stream minus the floor's (an empty gRPC server), many keys.
over_floor() {
  local g=${p50[admit-serve:grpc/many/1]:--} f=${p50[grpc-floor:empty/many/1]:--}
  [[ "$g" == - || "$f" == - ]] && return
  awk -v g="$g" -v f="$f" 'BEGIN { printf "%.1f", g - f }'
}
check_added() {
  local a
  a=$(added_us)
  [[ -z "$a" ]] && { echo none; return; }
  if le "$a" 30; then echo 1; else echo 0; fi
}

# row KEY NAME HOW STREAMS: one line of the side-by-side table.
row() {
  local k=$1
  [[ "${dps[$k]:--}" == - ]] && return
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$3" "$4" \
    "$(fmt_int "${dps[$k]}")" "$(us "${p50[$k]}")" "$(us "${p90[$k]}")" "$(us "${p99[$k]}")" "$(us "${pmax[$k]}")" \
    "$(fmt_int "$(errors "$k")")" "$(one "${ccpu[$k]}")" "$(one "${scpu[$k]}")" "$(two "${scalls[$k]}")" \
    "$(two "${cmds[$k]}")" "$(one "${rusec[$k]}")" "$(one "${rcpu[$k]}")"
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
  {
    cat <<EOF
## admit serve: decisions over gRPC

Run on $(date +%F) by \`$command_line\`, medians over $rounds round(s) of ${duration} s per case (after ${warmup} s of
warm-up), every case one after the other in each round. Machine: $(nproc) × $cpu; $pinning; \`admit serve\` not
pinned. Load average before $load_before, after $load_after (1-minute value at the rounds: ${loads[*]}; max
$load_max). gRPC $grpc_version (Debian), redis-server $redis_version (127.0.0.1, persistence off).
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
| in process ≥ 100,000 decisions/s at 16 streams, p99 ≤ 2 ms | many keys: $(fmt_int "${dps[admit-serve:grpc/many/16]:-}")/s, p99 $(us_to_ms "${p99[admit-serve:grpc/many/16]:-}") ms (hot key: $(fmt_int "${dps[admit-serve:grpc/hot/16]:-}")/s, p99 $(us_to_ms "${p99[admit-serve:grpc/hot/16]:-}") ms); the floor, a gRPC server that decides nothing: $(fmt_int "${dps[grpc-floor:empty/many/16]:-}")/s, p99 $(us_to_ms "${p99[grpc-floor:empty/many/16]:-}") ms | $(verdict "$(check_inprocess)") |
| on Redis ≥ the decisions/s of envoyproxy/ratelimit's INCRBY + EXPIRE per decision on the same server, same concurrency: \`admit serve --redis\` over gRPC | many keys, 16 streams: $(vs admit-serve-redis:grpc many 16); 256: $(vs admit-serve-redis:grpc many 256); hot key, 16: $(vs admit-serve-redis:grpc hot 16); 256: $(vs admit-serve-redis:grpc hot 256) | $(verdict "$(check_redis admit-serve-redis:grpc)") |
| the same, the decision alone (\`service::should_rate_limit\` on the Redis backend, no gRPC) | many keys, 16 streams: $(vs admit-library:redis many 16); 256: $(vs admit-library:redis many 256); hot key, 16: $(vs admit-library:redis hot 16); 256: $(vs admit-library:redis hot 256) | $(verdict "$(check_redis admit-library:redis)") |
| Redis work per decision (many keys, 256 streams) | admit: $(two "${scalls[admit-serve-redis:grpc/many/256]:-}") script calls, $(two "${cmds[admit-serve-redis:grpc/many/256]:-}") commands (those inside the script included), $(one "${rusec[admit-serve-redis:grpc/many/256]:-}") µs in commands, $(one "${rcpu[admit-serve-redis:grpc/many/256]:-}") µs of Redis CPU; envoyproxy/ratelimit's: $(two "${cmds[envoy-redis:incr-expire/many/256]:-}") commands, $(one "${rusec[envoy-redis:incr-expire/many/256]:-}") µs, $(one "${rcpu[envoy-redis:incr-expire/many/256]:-}") µs | (for information) |
| the service adds ≤ 30 µs at p50 over the library call it makes | gRPC p50 at 1 stream $(one "${p50[admit-serve:grpc/many/1]:-}") µs − \`service::should_rate_limit\` p50 $(one "${p50[admit-library:in-process/many/1]:-}") µs = $(added_us) µs; over the floor, a gRPC server that decides nothing (p50 $(one "${p50[grpc-floor:empty/many/1]:-}") µs): $(over_floor) µs | $(verdict "$(check_added)") |

Each Redis verdict needs many keys and the hot key, at 16 and at 256 streams.

The Redis rows compare admit — the whole service over gRPC, and the decision alone — with envoyproxy/ratelimit's
Redis commands alone, driven by a C++ client with no gRPC or decision work in front (admit_serve_load --mode
redis-incr-expire: per decision an \`INCRBY\` and an \`EXPIRE\` of \`bench_user_<value>_<window>\`, written
together; all outstanding decisions' commands pipelined on one connection): the most envoyproxy/ratelimit's Redis
layout can give on this server at that concurrency, not envoyproxy/ratelimit itself, which has gRPC and its own work
in front too. The service's added latency is the gRPC round trip on loopback (client and server), the conversions to and
from protobuf and the server's threads; the library call is the decision alone (matching the rule, the backend, the
response).

### Side by side (medians)

*streams*: calls outstanding. Latency per call in µs, from issuing it to its completion. *errors*: failed calls, wrong
answers and OVER_LIMIT answers in the window (the limit is never reached: an OVER_LIMIT is a backend failure answered
fail-closed). *client CPU*: the load generator's CPU µs per decision;
*serve CPU*: \`admit serve\`'s CPU µs per decision (all its threads; gRPC rows). Redis, per decision (all calls of
the case, warm-up included, ÷ its answers): *scripts*: script calls (EVALSHA: admit's round trips); *cmds*: commands
(INFO commandstats: every command but the script's INFO/CONFIG, those a script calls included); *Redis µs*: the
server's time inside commands (commandstats usec, a script's commands counted in it and again on their own); *Redis
CPU*: redis-server's CPU (INFO cpu: commands, network, event loop).

| implementation | how | streams | decisions/s | p50 | p90 | p99 | max | errors | client CPU | serve CPU | scripts | cmds | Redis µs | Redis CPU |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
EOF
    local keys s
    for keys in many hot; do
      local label
      label="*$(fmt_int "$key_count") keys*"
      [[ $keys == hot ]] && label="*one hot key*"
      printf '| %s | | | | | | | | | | | | | | |\n' "$label"
      for s in 1 16 256; do row "admit-serve:grpc/$keys/$s" "**admit serve**, in process" "gRPC" "$s"; done
      if [[ $keys == many ]]; then
        for s in 1 16 256; do row "grpc-floor:empty/many/$s" "the floor: a gRPC server that decides nothing" "gRPC, a fixed answer" "$s"; done
      fi
      for s in 1 16; do row "admit-library:in-process/$keys/$s" "admit's library call, in process" "\`service::should_rate_limit\`" "$s"; done
      for s in 1 16 256; do row "admit-serve-redis:grpc/$keys/$s" "**admit serve --redis**" "gRPC, fail-closed" "$s"; done
      for s in 1 16 256; do row "admit-library:redis/$keys/$s" "admit's library call, on Redis" "\`service::should_rate_limit\`" "$s"; done
      for s in 1 16 256; do row "envoy-redis:incr-expire/$keys/$s" "envoyproxy/ratelimit's Redis work" "INCRBY + EXPIRE, pipelined" "$s"; done
    done
    printf '| %s | | | | | | | | | | | | | | |\n' "*GCRA (admit's extension), $(fmt_int "$key_count") keys*"
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
  (bench/serve_grpc_floor.cpp), reaches $(fmt_int "${dps[grpc-floor:empty/many/16]:-}") calls/s at 16 streams with
  $(one "${scpu[grpc-floor:empty/many/16]:-}") µs of server CPU per call, and a p50 of $(one "${p50[grpc-floor:empty/many/1]:-}") µs at 1 stream. No
  decision service on gRPC can be faster here than that; \`admit serve\` adds $(over_floor) µs at p50 over it (the
  decision, the protobuf conversions both ways, the request's checks).
- On Redis, admit sends one script call for a batch of decisions: $(two "${scalls[$r256]:-}") script calls per decision
  over gRPC at 256 streams, $(two "${scalls[$l256]:-}") for the library call at 256 (batches grow with the decisions
  waiting). envoyproxy/ratelimit's layout sends two commands per descriptor (pipelined: one write for both, but two
  commands for the server to read, run and answer).
- Raw outputs of this run: \`$out/\` (raw.tsv: every case of every round; results.tsv: the medians; the servers'
  logs).
EOF
  } >"$report"
}
