#!/usr/bin/env python3
"""Generates data/sample_access.log, the bundled nginx access log of `admit replay` and `admit recommend`.

Ten minutes of a small web API's traffic in nginx's combined log format, one line a request, written in the order the
requests arrived (times to the second, as nginx writes $time_local):
  * 40 browsers (IPv4 and IPv6), each a Poisson source of page views (one view every 10 to 60 s) that fetch 1 to 6
    requests within the same second;
  * 3 API clients that poll steadily, one request every 0.5 to 2 s;
  * one scraper that fetches 10 pages a second for 30 s, twice, and one client that retries a failed call 12 times in
    a second, every minute.

Only the Python standard library is used, with a fixed seed, so the output is the same on every run:
    python3 data/make_sample_access_log.py > data/sample_access.log
"""

import random
import sys

SEED = 20261202
DURATION = 600  # seconds
START = 1_790_000_000  # 2026-09-21, a Monday; written in +0200

PAGES = ["/", "/products", "/products/42", "/cart", "/search?q=lamp", "/account", "/help"]
ASSETS = ["/static/app.js", "/static/app.css", "/static/logo.svg", "/api/cart", "/api/user", "/favicon.ico"]
AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def stamp(second):
    # $time_local in +0200, computed without time zone data: days since 1970-01-01 to a civil date.
    t = START + 7200 + second
    days, rest = divmod(t, 86400)
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return "%02d/%s/%04d:%02d:%02d:%02d +0200" % (day, MONTHS[month - 1], year, rest // 3600, rest // 60 % 60, rest % 60)


def main():
    rng = random.Random(SEED)
    requests = []  # (second, order, client, request line, status, bytes, agent)

    def add(second, client, path, agent, status=200):
        if 0 <= second < DURATION:
            requests.append((second, len(requests), client, "GET %s HTTP/1.1" % path, status,
                             rng.randint(200, 40000), agent))

    for i in range(40):
        client = "2001:db8:%x::%x" % (i, i + 1) if i % 5 == 0 else "198.51.100.%d" % (i + 10)
        agent = rng.choice(AGENTS)
        t = rng.uniform(0, 60)
        mean_gap = rng.uniform(10, 60)
        while t < DURATION:
            second = int(t)
            add(second, client, rng.choice(PAGES), agent)
            for _ in range(rng.randint(0, 5)):
                add(second, client, rng.choice(ASSETS), agent)
            t += rng.expovariate(1 / mean_gap)
    for i in range(3):
        client, t, gap = "203.0.113.%d" % (i + 1), rng.uniform(0, 2), rng.uniform(0.5, 2)
        while t < DURATION:
            add(int(t), client, "/api/orders?since=%d" % int(t), "orders-sync/2.1")
            t += gap
    for start in (120, 420):
        for second in range(start, start + 30):
            for k in range(10):
                add(second, "192.0.2.66", "/products/%d" % rng.randint(1, 5000), "Scrapy/2.11 (+https://scrapy.org)")
    for minute in range(0, DURATION, 60):
        second = minute + rng.randint(5, 50)
        for _ in range(12):
            add(second, "198.51.100.200", "/api/checkout", "okhttp/4.12.0", 502)

    requests.sort()
    out = sys.stdout
    for second, _, client, line, status, size, agent in requests:
        referer = "-" if line.startswith("GET /api") else "https://shop.example/"
        out.write('%s - - [%s] "%s" %d %d "%s" "%s"\n' % (client, stamp(second), line, status, size, referer, agent))


if __name__ == "__main__":
    main()
