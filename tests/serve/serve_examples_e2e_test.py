#!/usr/bin/python3
"""End-to-end test of `admit serve` against envoyproxy/ratelimit's README: each of its configuration examples
(tests/serve/readme_examples/, one file per example) gives, over a real gRPC client (Python's grpcio, stubs generated
at test time), the answers the README describes; then a fixed window's boundary, hits_addend, and the same on the
Redis backend (a redis-server and a 3-master Redis Cluster, started here), with Redis killed and restarted while the
service runs: the failure policy answers while it is down, and decisions are counted again after it is back.

The only waits are for a window of the wall clock (which the service's fixed windows follow, as envoyproxy/ratelimit's
do): the window-boundary case sleeps for the duration_until_reset the service returned, and a check that needs all
its calls in one window is retried when the window turned in the middle or a Redis call missed its deadline (with
fresh values, in the next second, or with Redis emptied).

usage: serve_examples_e2e_test.py ADMIT PROTO_DIR CONFIG_DIR PROTOC GRPC_PYTHON_PLUGIN
Exit status: 0 passed, 1 failed, 77 skipped (a Python module or redis-server/redis-cli is missing).
"""
import itertools
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (BACKEND_ERRORS, HITS, OVER, SHADOW, WAIT, check, descriptor, finish,  # noqa: E402
                               generate_stubs, run_in_scratch, redis_cluster, redis_server, server)

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

ADMIT, PROTO_DIR, CONFIG_DIR, PROTOC, GRPC_PYTHON_PLUGIN = sys.argv[1:6]
MAX_U32 = 2**32 - 1
tags = itertools.count(1)  # fresh descriptor values: a counter nobody has touched


def sleep_until_next_window(unit_s):
    """Sleeps until the wall clock enters the next window of unit_s seconds."""
    now = time.time()
    time.sleep((now // unit_s + 1) * unit_s - now + 0.001)


def backend_errors(c):
    return metrics(c.s).get((BACKEND_ERRORS, None), 0)


def in_one_window(c, unit_s, what, attempt, fixed_values=False):
    """Runs attempt(tag), which returns a list of (condition, message), and checks its conditions when all its calls
    fell in one window of unit_s seconds and the backend decided every one (on a loaded machine a Redis call can miss
    its deadline: the failure policy answers then, which is not what the attempt checks). Otherwise retried: with a
    new tag at once, or, when the attempt's counters are fixed (fixed_values), once the next window has begun (unit_s
    of 1), or after c.reset() emptied Redis (longer windows, whose callers keep away from the window's end; in process
    there are no backend errors)."""
    for _ in range(5):
        if fixed_values and unit_s == 1 and time.time() % 1 > 0.5:
            sleep_until_next_window(1)
        errors = backend_errors(c)
        t0 = time.time()
        results = attempt(next(tags))
        t1 = time.time()
        turned, failed = t0 // unit_s != t1 // unit_s, backend_errors(c) != errors
        if not turned and not failed:
            for cond, message in results:
                check(cond, f"{what}: {message}")
            return
        print(f"{what}: {'the window turned during the calls' if turned else 'a backend error'}; again", flush=True)
        if fixed_values:
            if unit_s == 1:
                sleep_until_next_window(1)
            elif c.reset:
                c.reset()
            else:
                break
    check(False, f"{what}: its calls never fell in one window, all decided by the backend")


def metrics(s):
    """{(name, rule): value} of the server's /metrics (parsed as Prometheus text), summed over other labels."""
    status, body = s.http("GET", "/metrics")
    check(status == 200, f"GET /metrics: 200 ({status})")
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            key = (sample.name, sample.labels.get("rule"))
            out[key] = out.get(key, 0) + sample.value
    return out


class client:
    def __init__(self, s, name, reset=None):
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
        self.s, self.name, self.pb, self.reset = s, name, rls_pb2, reset
        self.stub = rls_pb2_grpc.RateLimitServiceStub(s.channel)
        self.Code = rls_pb2.RateLimitResponse.Code
        self.Unit = rls_pb2.RateLimitResponse.RateLimit.Unit

    def call(self, domain, *descriptors, hits_addend=0):
        return self.stub.ShouldRateLimit(self.pb.RateLimitRequest(domain=domain, descriptors=list(descriptors),
                                                                  hits_addend=hits_addend), timeout=WAIT)

    def limited(self, st, n, unit, code=None, remaining=None, name=None):
        """Whether status `st` carries the limit n per unit (and the code, remaining count and rule name when given)."""
        return (st.HasField("current_limit") and st.current_limit.requests_per_unit == n
                and st.current_limit.unit == getattr(self.Unit, unit.upper())
                and (code is None or st.code == getattr(self.Code, code))
                and (remaining is None or st.limit_remaining == remaining)
                and (name is None or st.current_limit.name == name))

    def unlimited(self, st):
        """Whether `st` is OK without a limit (no rule, or the descriptor was replaced)."""
        return st.code == self.Code.OK and not st.HasField("current_limit")


def readme_examples(c):
    """Each example of envoyproxy/ratelimit's README section "Examples", with the answers it describes."""
    Code, d, w = c.Code, descriptor, c.name

    # Example 1: ("database", "users") and ("database", "default") get 500 per second each.
    def example1(_):
        users = [c.call("mongo_cps", d(("database", "users"))) for _ in range(3)]
        default = c.call("mongo_cps", d(("database", "default")))
        other = c.call("mongo_cps", d(("database", "other")))
        return [(all(r.overall_code == Code.OK for r in users), "OK"),
                ([r.statuses[0].limit_remaining for r in users] == [499, 498, 497]
                 and c.limited(users[0].statuses[0], 500, "second"), f"users: 500 per second ({users[-1]})"),
                (c.limited(default.statuses[0], 500, "second", "OK", 499), f"default: its own 500 ({default})"),
                (c.unlimited(other.statuses[0]), f"another value has no rule ({other})")]
    in_one_window(c, 1, f"{w} example 1", example1, fixed_values=True)

    # Example 2: marketing messages to one number, 5 a day; any message to one number, 100 a day; a request with both
    # descriptors is OVER_LIMIT when either is (a logical OR), and each descriptor counts.
    def example2(tag):
        first, second = f"206{tag:07}1", f"206{tag:07}2"
        both = lambda number: c.call("messaging", d(("message_type", "marketing"), ("to_number", number)),
                                     d(("to_number", number)))
        rs = [both(first) for _ in range(6)]
        other = both(second)
        plain = c.call("messaging", d(("to_number", first)))
        return [(all(r.overall_code == Code.OK for r in rs[:5]), "the first 5 marketing messages: OK"),
                ([r.statuses[0].limit_remaining for r in rs[:5]] == [4, 3, 2, 1, 0]
                 and all(c.limited(r.statuses[0], 5, "day", "OK") for r in rs[:5]), f"5 a day ({rs[4]})"),
                ([r.statuses[1].limit_remaining for r in rs] == list(range(99, 93, -1))
                 and all(c.limited(r.statuses[1], 100, "day", "OK") for r in rs), f"100 a day ({rs[5]})"),
                (rs[5].overall_code == Code.OVER_LIMIT and c.limited(rs[5].statuses[0], 5, "day", "OVER_LIMIT", 0),
                 f"the 6th marketing message: OVER_LIMIT, the other descriptor OK ({rs[5]})"),
                (other.overall_code == Code.OK and other.statuses[0].limit_remaining == 4
                 and other.statuses[1].limit_remaining == 99, f"another number has its own limits ({other})"),
                (c.limited(plain.statuses[0], 100, "day", "OK", 93), f"any message to the number: 100 a day ({plain})")]
    in_one_window(c, 86400, f"{w} example 2", example2)

    # Example 3: 10 per second for each address; 50.0.0.5 always refused (the more specific match wins).
    def example3(tag):
        address = f"10.{tag // 256 % 256}.{tag % 256}.1"
        rs = [c.call("edge_proxy_per_ip", d(("remote_address", address))) for _ in range(11)]
        return [([r.statuses[0].limit_remaining for r in rs[:10]] == list(range(9, -1, -1))
                 and all(c.limited(r.statuses[0], 10, "second", "OK") for r in rs[:10]), f"{address}: 10 per second"),
                (rs[10].overall_code == Code.OVER_LIMIT, f"{address}: the 11th in a second is OVER_LIMIT ({rs[10]})")]
    in_one_window(c, 1, f"{w} example 3", example3)
    blocked = c.call("edge_proxy_per_ip", d(("remote_address", "50.0.0.5")))
    check(blocked.overall_code == Code.OVER_LIMIT and c.limited(blocked.statuses[0], 0, "second", "OVER_LIMIT", 0),
          f"{w} example 3: 50.0.0.5 is refused by its own limit of 0 ({blocked})")

    # Example 4: a descriptor matches rules at its own depth only.
    r = c.call("example4", d(("key", "value"), ("subkey", "subvalue")))
    check(r.overall_code == Code.OK and c.unlimited(r.statuses[0]),
          f"{w} example 4: two entries do not match the one-level rule ({r})")
    r = c.call("example4", d(("key", "value")))
    check(c.limited(r.statuses[0], 300, "second", "OK"), f"{w} example 4: one entry matches it ({r})")

    def example4(tag):
        r = c.call("example4_nested", d(("key", "value"), ("subkey", f"subvalue{tag}")))
        return [(c.limited(r.statuses[0], 300, "second", "OK", 299), f"two entries match the nested rule ({r})")]
    in_one_window(c, 1, f"{w} example 4", example4)

    # Example 5: ldap is unlimited (OK, remaining MaxUint32, nothing counted); azure 100 a minute.
    rs = [c.call("internal", d(("ldap", "x"))) for _ in range(3)]
    check(all(r.overall_code == Code.OK and r.statuses[0].code == Code.OK and not r.statuses[0].HasField(
        "current_limit") and r.statuses[0].limit_remaining == MAX_U32 for r in rs),
          f"{w} example 5: unlimited: OK with limit_remaining {MAX_U32} ({rs[-1]})")

    def example5(tag):
        rs = [c.call("internal", d(("azure", f"a{tag}"))) for _ in range(2)]
        none = c.call("internal", d(("nothing", "x")))
        return [([r.statuses[0].limit_remaining for r in rs] == [99, 98]
                 and c.limited(rs[0].statuses[0], 100, "minute", "OK"), f"azure: 100 a minute ({rs[-1]})"),
                (c.unlimited(none.statuses[0]) and none.statuses[0].limit_remaining == 0,
                 f"a key with no rule is told apart from an unlimited one ({none})")]
    in_one_window(c, 60, f"{w} example 5", example5)

    # Example 6: user-a's 10 per second in shadow mode: never refused, the breaches counted in the shadow-mode metric;
    # user-b's 20 per second enforced.
    user_a, user_b = "example6.service.user_user-a", "example6.service.user_user-b"

    def example6(_):
        before = metrics(c.s)
        a = [c.call("example6", d(("service", "auth-service"), ("user", "user-a"))) for _ in range(15)]
        b = [c.call("example6", d(("service", "auth-service"), ("user", "user-b"))) for _ in range(22)]
        after = metrics(c.s)
        delta = lambda name, rule: after.get((name, rule), 0) - before.get((name, rule), 0)
        return [
            (all(r.overall_code == Code.OK and c.limited(r.statuses[0], 10, "second", "OK") for r in a),
             f"user-a: OK 15 times in a second, the limit 10 per second ({a[-1]})"),
            ([r.statuses[0].limit_remaining for r in a[:10]] == list(range(9, -1, -1)),
             f"user-a: counted ({[r.statuses[0].limit_remaining for r in a]})"),
            (delta(SHADOW, user_a) == 5, f"user-a: {SHADOW} counts the 5 breaches ({delta(SHADOW, user_a)})"),
            (delta(HITS, user_a) == 15, f"user-a: {HITS} counts 15 ({delta(HITS, user_a)})"),
            (all(r.overall_code == Code.OK for r in b[:20]) and all(r.overall_code == Code.OVER_LIMIT
                                                                      and c.limited(r.statuses[0], 20, "second",
                                                                                    "OVER_LIMIT", 0) for r in b[20:]),
             f"user-b: 20 per second, then OVER_LIMIT ({b[-1]})"),
            (delta(OVER, user_b) == 2 and delta(SHADOW, user_b) == 0,
             f"user-b: {OVER} counts 2, {SHADOW} none ({delta(OVER, user_b)}, {delta(SHADOW, user_b)})")]

    in_one_window(c, 1, f"{w} example 6", example6, fixed_values=True)

    # Example 7: with both descriptors in a request, key_2's rule replaces specific_limit (key_1's), whose counter is
    # then left alone.
    def example7(_):
        one = lambda: d(("key_1", "value_1"), ("user", "bkthomps"))
        two = lambda: d(("key_2", "value_2"), ("user", "bkthomps"))
        a = c.call("example7", one())
        both = c.call("example7", one(), two())
        b = c.call("example7", two())
        a2 = c.call("example7", one())
        return [(c.limited(a.statuses[0], 5, "second", "OK", 4, "specific_limit"), f"key_1 alone: 5 per second ({a})"),
                (both.overall_code == Code.OK and c.unlimited(both.statuses[0])
                 and c.limited(both.statuses[1], 10, "second", "OK", 9), f"both: only key_2's 10 per second ({both})"),
                (c.limited(b.statuses[0], 10, "second", "OK", 8), f"key_2 alone: 10 per second ({b})"),
                (c.limited(a2.statuses[0], 5, "second", "OK", 3), f"the replaced counter was not touched ({a2})")]
    in_one_window(c, 1, f"{w} example 7", example7, fixed_values=True)

    # Example 8: detailed_metric: each value of key1 its own metric series, the limits as usual.
    def example8(tag):
        x, y = f"x{tag}", f"y{tag}"
        rx, ry, rv = (c.call("example8", d(("key1", v))) for v in (x, y, "value1"))
        m = metrics(c.s)
        return [(c.limited(rx.statuses[0], 10, "minute", "OK", 9) and c.limited(ry.statuses[0], 10, "minute", "OK", 9),
                 f"any other value: 10 a minute each ({rx}, {ry})"),
                (c.limited(rv.statuses[0], 20, "minute", "OK"), f"value1: 20 a minute ({rv})"),
                (m.get((HITS, f"example8.key1_{x}")) == 1 and m.get((HITS, f"example8.key1_{y}")) == 1
                 and m.get((HITS, "example8.key1_value1"), 0) >= 1 and (HITS, "example8.key1") not in m,
                 f"a series per value ({sorted(k[1] for k in m if k[0] == HITS and 'example8' in (k[1] or ''))})")]
    in_one_window(c, 60, f"{w} example 8", example8)

    # Example 9: wildcards, trailing, in the middle, twice; each value matched counts on its own.
    def example9(tag):
        r1, r2 = (c.call("example9", d(("key1", f"value{tag}{n}"))) for n in (1, 2))
        rs = {v: c.call("example9", d((k, v))).statuses[0] for k, v in (
            ("key1", "value"), ("key1", f"other{tag}"), ("path", f"/api/{tag}/action"), ("path", f"/api/{tag}/other"),
            ("route", f"/api/v1/resource/{tag}/action"), ("route", f"/api/v1/resource/{tag}/other"))}
        return [(all(c.limited(r.statuses[0], 20, "minute", "OK", 19) for r in (r1, r2)),
                 f"value*: matches, each value counted apart ({r1}, {r2})"),
                (c.limited(rs["value"], 20, "minute", "OK"), "value*: matches value itself"),
                (c.unlimited(rs[f"other{tag}"]), "value*: not other values"),
                (c.limited(rs[f"/api/{tag}/action"], 20, "minute", "OK", 19), "/api/*/action matches"),
                (c.unlimited(rs[f"/api/{tag}/other"]), "/api/*/action does not match /api/x/other"),
                (c.limited(rs[f"/api/v1/resource/{tag}/action"], 20, "minute", "OK", 19), "two wildcards match"),
                (c.unlimited(rs[f"/api/v1/resource/{tag}/other"]), "two wildcards: not another suffix")]
    in_one_window(c, 60, f"{w} example 9", example9)

    # Example 10: value_to_metric: the request's route and http_method values name the metric series.
    def example10(tag):
        rs = [c.call("example10", d(("route", route), ("http_method", method), ("subject_id", f"{tag}")))
              for route, method in (("api", "GET"), ("web", "POST"))]
        m = metrics(c.s)
        return [(all(c.limited(r.statuses[0], 60, "minute", "OK", 59) for r in rs), f"60 a minute ({rs})"),
                (m.get((HITS, "example10.route_api.http_method_GET.subject_id"), 0) >= 1
                 and m.get((HITS, "example10.route_web.http_method_POST.subject_id"), 0) >= 1
                 and (HITS, "example10.route.http_method.subject_id") not in m,
                 f"the series name the values ({sorted(k[1] for k in m if 'example10' in (k[1] or ''))})")]
    in_one_window(c, 60, f"{w} example 10", example10)

    def example10_wildcard(tag):
        r = c.call("example10_wildcard", d(("user", "alice"), ("action", "readfile"), ("resource", f"{tag}")))
        m = metrics(c.s)
        return [(c.limited(r.statuses[0], 100, "minute", "OK", 99), f"read*: 100 a minute ({r})"),
                (m.get((HITS, "example10_wildcard.user_alice.action_readfile.resource"), 0) >= 1,
                 f"the series names the whole value ({sorted(k[1] for k in m if 'example10_' in (k[1] or ''))})")]
    in_one_window(c, 60, f"{w} example 10 with a wildcard", example10_wildcard)

    # Example 11: files/* share one counter of 10 an hour: 5 for a.pdf and 5 for b.csv leave none for c.txt; each
    # files_no_share/* value has its own 10.
    if 3600 - time.time() % 3600 < 10:  # the shared counter is fixed: keep its calls away from the hour's end
        sleep_until_next_window(3600)

    def example11(tag):
        shared = [c.call("example11", d(("files", f"files/{name}"))) for name in ["a.pdf"] * 5 + ["b.csv"] * 5]
        c_txt = c.call("example11", d(("files", "files/c.txt")))
        apart = [c.call("example11", d(("files_no_share", f"files_no_share/{tag}a.pdf"))) for _ in range(11)]
        b_csv = c.call("example11", d(("files_no_share", f"files_no_share/{tag}b.csv")))
        return [([r.statuses[0].limit_remaining for r in shared] == list(range(9, -1, -1))
                 and all(c.limited(r.statuses[0], 10, "hour", "OK") for r in shared), "files/*: one counter"),
                (c_txt.overall_code == Code.OVER_LIMIT, f"files/c.txt after 5 + 5: OVER_LIMIT ({c_txt})"),
                ([r.overall_code for r in apart] == [Code.OK] * 10 + [Code.OVER_LIMIT], "files_no_share/a.pdf: 10"),
                (c.limited(b_csv.statuses[0], 10, "hour", "OK", 9), f"files_no_share/b.csv: its own 10 ({b_csv})")]
    in_one_window(c, 3600, f"{w} example 11", example11, fixed_values=True)

    # Example 11 with value_to_metric: api/v1 and api/v2 share one counter, and one series named by the wildcard. The
    # README writes that series "route_api.method_GET"; envoyproxy/ratelimit's code (its config tests) names it
    # "route_api/*.method", as admit does.
    def example11_metrics(_):
        rs = [c.call("example11_metrics", d(("route", route), ("method", "GET"))) for route in ("api/v1", "api/v2")]
        m = metrics(c.s)
        return [([r.statuses[0].limit_remaining for r in rs] == [59, 58]
                 and all(c.limited(r.statuses[0], 60, "minute", "OK") for r in rs), f"api/*: one counter ({rs})"),
                (m.get((HITS, "example11_metrics.route_api/*.method")) == 2,
                 f"one series for api/* ({sorted(k[1] for k in m if 'example11_' in (k[1] or ''))})")]
    if 60 - time.time() % 60 < 5:  # a fixed counter again: keep its calls away from the minute's end
        sleep_until_next_window(60)
    in_one_window(c, 60, f"{w} example 11 with value_to_metric", example11_metrics, fixed_values=True)


def window_boundary(c):
    """A fixed window (3 per second): the limit reached in one window is whole again at the start of the next, which
    the over-limit answer's duration_until_reset says when: slept for, then 3 more are admitted. Retried (with a fresh
    counter) when either group of calls straddled a window boundary or met a backend error."""
    Code = c.Code
    for _ in range(5):
        tag = next(tags)
        errors = backend_errors(c)
        t0 = time.time()
        first = [c.call("window", descriptor(("per_second", f"w{tag}"))) for _ in range(4)]
        t1 = time.time()
        reset = first[3].statuses[0].duration_until_reset
        wait = reset.seconds + reset.nanos / 1e9
        if t0 // 1 != t1 // 1 or backend_errors(c) != errors:
            print(f"{c.name} window: the window turned during the first calls, or a backend error; again", flush=True)
            continue
        check([r.overall_code for r in first] == [Code.OK] * 3 + [Code.OVER_LIMIT]
              and [r.statuses[0].limit_remaining for r in first[:3]] == [2, 1, 0],
              f"{c.name} window: 3 admitted, the 4th OVER_LIMIT ({first[3]})")
        check(first[3].statuses[0].HasField("duration_until_reset") and 0 < wait <= 1 and wait >= 1 - (t1 % 1) - 0.05,
              f"{c.name} window: duration_until_reset {wait}s is what is left of the second ({1 - t1 % 1:.3f}s)")
        time.sleep(wait)
        t2 = time.time()
        second = [c.call("window", descriptor(("per_second", f"w{tag}"))) for _ in range(4)]
        t3 = time.time()
        if t2 // 1 != t3 // 1 or backend_errors(c) != errors:
            print(f"{c.name} window: the window turned during the calls, or a backend error; again", flush=True)
            continue
        check(t2 // 1 > t1 // 1, f"{c.name} window: after duration_until_reset, the next window ({t1}, {t2})")
        check([r.overall_code for r in second] == [Code.OK] * 3 + [Code.OVER_LIMIT]
              and [r.statuses[0].limit_remaining for r in second[:3]] == [2, 1, 0],
              f"{c.name} window: the next window admits 3 again, then OVER_LIMIT ({second})")
        return
    check(False, f"{c.name} window: the calls never fell in one window, all decided by the backend")


def hits_addend(c):
    """hits_addend: the request's counts for each descriptor, a descriptor's own wins, 0 counts as 1; a request that
    would go over the limit is refused (and counted, as envoyproxy/ratelimit's fixed window counts every hit)."""
    Code = c.Code

    def attempt(tag):
        k = lambda: descriptor(("per_hour", f"h{tag}"))
        a = c.call("window", k(), hits_addend=4)
        b = c.call("window", descriptor(("per_hour", f"h{tag}"), hits=6), hits_addend=4)
        z = c.call("window", k(), hits_addend=0)
        big = c.call("window", descriptor(("per_hour", f"big{tag}")), hits_addend=11)
        after = c.call("window", descriptor(("per_hour", f"big{tag}"), hits=0))
        two = c.call("window", descriptor(("per_hour", f"x{tag}")), descriptor(("per_hour", f"y{tag}")), hits_addend=3)
        return [(c.limited(a.statuses[0], 10, "hour", "OK", 6), f"hits_addend 4 of 10: 6 left ({a})"),
                (c.limited(b.statuses[0], 10, "hour", "OK", 0), f"a descriptor's own 6 wins over 4: 0 left ({b})"),
                (z.overall_code == Code.OVER_LIMIT, f"hits_addend 0 counts 1: over the limit ({z})"),
                (big.overall_code == Code.OVER_LIMIT, f"hits_addend 11 of 10: OVER_LIMIT at once ({big})"),
                (after.overall_code == Code.OVER_LIMIT, f"the refused 11 were counted ({after})"),
                ([s.limit_remaining for s in two.statuses] == [7, 7],
                 f"each descriptor counts the request's 3 ({two})")]
    in_one_window(c, 3600, f"{c.name} hits_addend", attempt)


def run_all(s, name, reset=None):
    c = client(s, name, reset)
    readme_examples(c)
    window_boundary(c)
    hits_addend(c)
    return c


def until(what, fn):
    """Calls fn() until it returns a true value (at most WAIT seconds); returns that value or None."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    check(False, f"{what}: not within {WAIT}s")
    return None


def redis_cli(cli_binary, node, *command):
    """A command to one Redis node (its reply is not looked at: a failure shows in the checks that follow)."""
    subprocess.run([cli_binary, "-p", str(node.port), *command], stdout=subprocess.DEVNULL, timeout=WAIT)


def redis_down_and_back(open_c, closed_c, kill, restart, what):
    """Redis killed while both services run: the fail-open one answers OK, the fail-closed one OVER_LIMIT, and the
    backend errors are counted; restarted: both count decisions again, by themselves."""
    Code = open_c.Code
    for c in (open_c, closed_c):
        def before(tag):
            r = c.call("window", descriptor(("per_hour", f"before{tag}")))
            return [(c.limited(r.statuses[0], 10, "hour", "OK", 9), f"counted ({r})")]
        in_one_window(c, 3600, f"{what} {c.name} before", before)
    errors_before = [metrics(c.s).get((BACKEND_ERRORS, None), 0) for c in (open_c, closed_c)]
    kill()
    many = lambda tag: [descriptor(("per_hour", f"down{tag}-{i}")) for i in range(32)]
    r = open_c.call("window", *many(next(tags)))
    check(r.overall_code == Code.OK, f"{what} down, fail open: OK ({r.overall_code})")
    r = closed_c.call("window", *many(next(tags)))
    check(r.overall_code == Code.OVER_LIMIT, f"{what} down, fail closed: OVER_LIMIT ({r.overall_code})")
    r = closed_c.call("internal", descriptor(("ldap", "x")))
    check(r.overall_code == Code.OK and r.statuses[0].limit_remaining == MAX_U32,
          f"{what} down, fail closed: an unlimited descriptor (README example 5) never asks Redis: OK ({r})")
    errors_after = [metrics(c.s).get((BACKEND_ERRORS, None), 0) for c in (open_c, closed_c)]
    check(all(a > b for a, b in zip(errors_after, errors_before)),
          f"{what} down: {BACKEND_ERRORS} counts the failures ({errors_before} then {errors_after})")
    restart()
    for c in (open_c, closed_c):
        def counted():
            r = c.call("window", *many(next(tags)))
            return r if all(st.limit_remaining == 9 and st.code == Code.OK for st in r.statuses) else None
        if until(f"{what} {c.name}: decisions counted again after the restart", counted):
            def again(tag):
                rs = [c.call("window", descriptor(("per_hour", f"again{tag}"))) for _ in range(2)]
                return [([r.statuses[0].limit_remaining for r in rs] == [9, 8], f"counting ({rs})")]
            in_one_window(c, 3600, f"{what} {c.name} after the restart", again)


def main(tmp):
    generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
    config = os.path.join(tmp, "config dir")
    shutil.copytree(CONFIG_DIR, config)

    # In process.
    s = server(ADMIT, config)
    run_all(s, "in process")
    check(s.stop() == 0, "in process: SIGTERM exits 0")

    redis_binary, cli_binary = shutil.which("redis-server"), shutil.which("redis-cli")
    if not (redis_binary and cli_binary):
        print("the Redis cases skipped: they need redis-server and redis-cli", flush=True)
        return finish() or 77

    # One redis-server: the examples, then killed and restarted on its port under a fail-open and a fail-closed
    # service.
    redis = redis_server(redis_binary)
    s = server(ADMIT, config, "--redis", redis.url, "--redis-required")
    open_c = run_all(s, "redis", lambda: redis_cli(cli_binary, redis, "FLUSHALL"))
    closed = server(ADMIT, config, "--redis", redis.url, "--fail-closed")
    closed_c = client(closed, "redis --fail-closed")
    redis_down_and_back(open_c, closed_c, redis.kill, lambda: check(redis.start(), "redis-server restarted"),
                        "redis")
    check(s.stop() == 0 and closed.stop() == 0, "redis: SIGTERM exits 0")

    # A Redis Cluster of 3 masters: the examples, then one master killed and restarted (its node file kept, so it
    # takes its slots back).
    nodes_dir = os.path.join(tmp, "cluster")
    os.mkdir(nodes_dir)
    cluster = redis_cluster(redis_binary, cli_binary, nodes_dir)
    s = server(ADMIT, config, "--redis", cluster.url, "--redis-required")
    open_c = run_all(s, "cluster", lambda: [redis_cli(cli_binary, n, "FLUSHALL") for n in cluster.nodes])
    closed = server(ADMIT, config, "--redis", cluster.url, "--fail-closed")
    closed_c = client(closed, "cluster --fail-closed")
    victim = cluster.nodes[1]
    redis_down_and_back(open_c, closed_c, victim.kill, lambda: check(victim.start(), "cluster node restarted"),
                        "cluster")
    check(s.stop() == 0 and closed.stop() == 0, "cluster: SIGTERM exits 0")


if __name__ == "__main__":
    sys.exit(run_in_scratch("admit serve examples ", main))  # a space in the path, on purpose
