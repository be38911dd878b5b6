#!/usr/bin/env python3
"""Generates data/sample_concurrency_trace.txt, the bundled trace of `admit replay --algorithm concurrency`.

Sixty seconds of requests to a service, one line per request: `<arrival seconds> <duration seconds> [n]`.
  * arrivals are Poisson; the rate is 40 requests/s, except a surge of 110 requests/s from 20 s to 35 s;
  * each request holds its permit for a log-normal time: median 120 ms, a long tail (sigma 0.6, mean ~144 ms), so the
    service needs about 5.8 permits on average at 40/s and about 16 during the surge;
  * about 1 request in 50 is a batch call that needs 4 permits at once (head-of-line blocking shows in the queue).
Times have microsecond resolution.

Only the Python standard library is used, with a fixed seed, so the output is the same on every run:
    python3 data/make_sample_concurrency_trace.py > data/sample_concurrency_trace.txt
"""

import math
import random
import sys

SEED = 20240602
DURATION = 60.0


def rate_at(t):
    return 110.0 if 20.0 <= t < 35.0 else 40.0


def main():
    rng = random.Random(SEED)
    # Thinning (Lewis-Shedler) for the piecewise-constant rate.
    peak = 110.0
    t = 0.0
    arrivals = []
    while True:
        t += rng.expovariate(peak)
        if t >= DURATION:
            break
        if rng.random() < rate_at(t) / peak:
            arrivals.append(t)

    out = sys.stdout
    out.write("# admit replay --algorithm concurrency sample trace: 60 s of requests, one a line: "
              "<arrival seconds> <duration seconds> [n].\n")
    out.write("# Made by data/make_sample_concurrency_trace.py (Python standard library, seed %d):\n" % SEED)
    out.write("#   Poisson arrivals at 40/s with a surge of 110/s from 20 s to 35 s; log-normal durations, median 120 ms\n")
    out.write("#   (sigma 0.6); ~2% of requests need 4 permits at once.\n")
    out.write("# Regenerate: python3 data/make_sample_concurrency_trace.py > data/sample_concurrency_trace.txt\n")
    out.write("# %d requests.\n" % len(arrivals))
    for a in arrivals:
        us = round(a * 1e6)
        d_us = max(1, round(rng.lognormvariate(math.log(0.120), 0.6) * 1e6))
        n = 4 if rng.random() < 0.02 else 1
        line = "%d.%06d %d.%06d" % (us // 1_000_000, us % 1_000_000, d_us // 1_000_000, d_us % 1_000_000)
        out.write(line + (" %d\n" % n if n > 1 else "\n"))


if __name__ == "__main__":
    main()
