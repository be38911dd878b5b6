#!/usr/bin/python3
"""Python `limits` (Debian python3-limits, with python3-redis) with Redis storage: decisions/s and p50/p99 latency on
one hot key and on many keys, sequentially (1 caller) and with threads (each thread loops hit(); redis-py gives each
its own connection from the pool) — for bench/redis_compare.sh, next to admit_redis_bench. It never starts Redis.

    /usr/bin/python3 limits_bench.py --url redis://127.0.0.1:6379 --strategies moving,fixed --callers 1,8

limits has no GCRA: its moving window (a Redis list of timestamps per key, one Lua script per hit) and fixed window
(INCR + EXPIRE in one script) strategies are measured, with the nominal limit admit's GCRA gets: "1000/second".

Output: tab-separated lines, as admit_redis_bench's:
    limits <moving|fixed> <hot|many> <callers> <repetition> <decisions/s> <p50 us> <p99 us> <admitted share>
    <errors> - <client CPU us per decision>
"""
import argparse
import math
import os
import random
import resource
import sys
import threading
import time

import limits
from limits import parse, storage, strategies


def percentile_us(sorted_ns, q):
    if not sorted_ns:
        return 0.0
    rank = max(1, math.ceil(q * len(sorted_ns)))
    return sorted_ns[min(len(sorted_ns), rank) - 1] / 1000.0


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def run_case(args, limiter, item, strategy, key_mode, callers, rep):
    if key_mode == "hot":
        keys = ["hot"]
    else:
        keys = ["k%012d" % i for i in range(args.key_count)]
    start = time.monotonic_ns()
    window_from = start + int(args.warmup * 1e9)
    window_until = window_from + int(args.duration * 1e9)
    results = []  # per thread: (decisions, admitted, errors, latencies)
    first_error = []

    def caller(seed):
        rng = random.Random(seed)
        decisions = admitted = errors = 0
        latency = []
        n = len(keys)
        while True:
            key = keys[0] if n == 1 else keys[rng.randrange(n)]
            t0 = time.monotonic_ns()
            try:
                ok = limiter.hit(item, strategy, key)
                failed = False
            except Exception as e:  # noqa: BLE001 - a Redis error is counted, not a decision
                ok = False
                failed = True
                if not first_error:
                    first_error.append(repr(e))
            end = time.monotonic_ns()
            if window_from <= end < window_until:
                if failed:
                    errors += 1
                else:
                    decisions += 1
                    admitted += 1 if ok else 0
                    latency.append(end - t0)
            if end >= window_until:
                break
        results.append((decisions, admitted, errors, latency))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    cpu_before = cpu_seconds()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu = cpu_seconds() - cpu_before
    decisions = sum(r[0] for r in results)
    admitted = sum(r[1] for r in results)
    errors = sum(r[2] for r in results)
    latency = sorted(x for r in results for x in r[3])
    if first_error:
        print("limits_bench: %d error(s), the first: %s" % (errors, first_error[0]), file=sys.stderr, flush=True)
    total = args.warmup + args.duration
    # CPU over warm-up and window, per decision over the same span (decisions/s times the whole run).
    rate = decisions / args.duration
    cpu_us = cpu * 1e6 / (rate * total) if rate > 0 else 0.0
    print("\t".join(str(x) for x in [
        "limits", strategy.split(":")[0], key_mode, callers, rep, round(rate),
        "%.1f" % percentile_us(latency, 0.5), "%.1f" % percentile_us(latency, 0.99),
        "%.4f" % (admitted / decisions if decisions else 0.0), errors, "-", "%.2f" % cpu_us]), flush=True)


class Limiters:
    def __init__(self, store):
        self.by_name = {
            "moving": strategies.MovingWindowRateLimiter(store),
            "fixed": strategies.FixedWindowRateLimiter(store),
        }

    def hit(self, item, strategy, key):
        # One namespace per strategy: the moving window keeps a list where the fixed window keeps a counter, under
        # the same key name otherwise (WRONGTYPE when one runs right after the other).
        return self.by_name[strategy].hit(item, "bench-" + strategy, key)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("ADMIT_REDIS_URL", "redis://127.0.0.1:6379"))
    p.add_argument("--strategies", default="moving,fixed")
    p.add_argument("--keys", default="hot,many")
    p.add_argument("--callers", default="1,8")
    p.add_argument("--key-count", type=int, default=100000)
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--repetitions", type=int, default=1)
    args = p.parse_args()

    store = storage.storage_from_string(args.url)
    if not store.check():
        raise SystemExit("limits_bench: cannot reach redis at " + args.url)
    limiter = Limiters(store)
    item = parse("1000/second")
    print("# python limits %s, redis storage, %s, url %s" % (limits.__version__, item, args.url), flush=True)
    for rep in range(1, args.repetitions + 1):
        for strategy in args.strategies.split(","):
            for key_mode in args.keys.split(","):
                for callers in (int(c) for c in args.callers.split(",")):
                    run_case(args, limiter, item, strategy, key_mode, callers, rep)


if __name__ == "__main__":
    main()
