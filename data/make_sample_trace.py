#!/usr/bin/env python3
"""Generates data/sample_trace.txt, the bundled trace of `admit replay`.

Sixty seconds of bursty request traffic, built from three sources added together:
  * a Poisson background of 40 requests/s;
  * an on/off source (a client that syncs in batches): 6 s on at 160 requests/s, 9 s off, repeating — starting at 6 s;
  * ten flash bursts at random instants: 40 to 80 requests packed into 50 to 200 ms each.
About 1 request in 20 asks for several tokens (2 to 5: a batch API call). Times have microsecond resolution.

Only the Python standard library is used, with a fixed seed, so the output is the same on every run:
    python3 data/make_sample_trace.py > data/sample_trace.txt
"""

import random
import sys

SEED = 20240601
DURATION = 60.0


def poisson(rng, rate, start, end):
    t = start
    while True:
        t += rng.expovariate(rate)
        if t >= end:
            return
        yield t


def main():
    rng = random.Random(SEED)
    times = []
    times.extend(poisson(rng, 40.0, 0.0, DURATION))
    on_start = 6.0
    while on_start < DURATION:
        times.extend(poisson(rng, 160.0, on_start, min(on_start + 6.0, DURATION)))
        on_start += 15.0
    for _ in range(10):
        start = rng.uniform(1.0, DURATION - 1.0)
        length = rng.uniform(0.05, 0.2)
        times.extend(start + rng.uniform(0.0, length) for _ in range(rng.randint(40, 80)))
    # Microsecond resolution, as a tracing tool would record it.
    stamps = sorted(round(t * 1e6) for t in times)

    out = sys.stdout
    out.write("# admit replay sample trace: 60 s of bursty request traffic, one arrival a line: <seconds> [n].\n")
    out.write("# Made by data/make_sample_trace.py (Python standard library, seed %d):\n" % SEED)
    out.write("#   Poisson background 40 req/s; on/off source 160 req/s, 6 s on / 9 s off from t=6 s;\n")
    out.write("#   10 flash bursts of 40-80 requests in 50-200 ms; ~5% of requests ask for 2-5 tokens.\n")
    out.write("# Regenerate: python3 data/make_sample_trace.py > data/sample_trace.txt\n")
    out.write("# %d arrivals.\n" % len(stamps))
    for us in stamps:
        n = rng.randint(2, 5) if rng.random() < 0.05 else 1
        line = "%d.%06d" % (us // 1_000_000, us % 1_000_000)
        out.write(line + (" %d\n" % n if n > 1 else "\n"))


if __name__ == "__main__":
    main()
