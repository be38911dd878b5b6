#!/usr/bin/python3
"""End-to-end test of token budgets (`over_limit_hits`) in `admit serve`, with real processes and a gRPC client admit
did not write (Python's grpcio, stubs generated here at test time), in process and on a redis-server started here.

An LLM gateway asks with a cost of 0 when a request arrives and charges the tokens the response used afterwards. With
`over_limit_hits: count` a cost above what is left is charged all the same: the fixed window counts it, a token bucket
or GCRA goes into debt. Either way the next cost-0 check is OVER_LIMIT, and the bucket admits again once the rate has
repaid the debt (not before). With `drop` (the smoother algorithms' default) a refused cost is not charged. At a
window boundary the fixed window passes a second whole budget at once, the token bucket does not. And the bundled
example for Envoy Gateway (examples/serve/token-budgets/config) answers the descriptors Envoy Gateway sends.

usage: serve_budgets_e2e_test.py ADMIT PROTO_DIR PROTOC GRPC_PYTHON_PLUGIN EXAMPLE_CONFIG_DIR
Exit status: 0 passed, 1 failed, 77 skipped (a Python module or redis-server is missing; the in-process half still
runs before a skip).
"""
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (WAIT, check, descriptor, finish, generate_stubs, run_in_scratch, redis_server,  # noqa
                               server)

ADMIT, PROTO_DIR, PROTOC, GRPC_PYTHON_PLUGIN, EXAMPLE = sys.argv[1:6]

CONFIG = """domain: budgets
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: fixed_drop
    rate_limit: {unit: hour, requests_per_unit: 1000, over_limit_hits: drop}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket, over_limit_hits: count}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: gcra, over_limit_hits: count}
  - key: dropping
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
  - key: boundary_fixed
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: boundary_bucket
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket, over_limit_hits: count}
"""


class budgets:
    def __init__(self, s, rls_pb2, rls_pb2_grpc, where):
        self.rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)
        self.pb = rls_pb2
        self.where = where
        self.user = f"user {where}"  # each run its own counters

    def status(self, key, cost):
        r = self.rls.ShouldRateLimit(self.pb.RateLimitRequest(domain="budgets",
                                                              descriptors=[descriptor((key, self.user), hits=cost)]),
                                     timeout=WAIT)
        return r.statuses[0]

    def ok(self, key, cost):
        return self.status(key, cost).code == self.pb.RateLimitResponse.Code.OK

    def fixed_window(self, key, count):
        # An hour window: a run that would cross its end waits for the next one (at most 30 s, rarely).
        first = self.status(key, 0)
        if first.duration_until_reset.seconds < 30:
            time.sleep(first.duration_until_reset.seconds + 1)
        check(not self.ok(key, 1500), f"{self.where} {key}: a cost of 1.5x the budget is OVER_LIMIT")
        if count:
            check(not self.ok(key, 0), f"{self.where} {key}: it was counted, so the next cost-0 check is OVER_LIMIT")
            check(not self.ok(key, 1), f"{self.where} {key}: and so is a cost of 1")
        else:
            check(self.ok(key, 0), f"{self.where} {key}: drop: the cost was not counted, a cost-0 check is OK")
            check(self.ok(key, 1000), f"{self.where} {key}: drop: the whole budget is still there")
            check(not self.ok(key, 1), f"{self.where} {key}: drop: and then it is spent")
            check(self.ok(key, 0), f"{self.where} {key}: drop: exactly spent is not over: a cost-0 check is OK")

    def debt(self, key):
        # 100 a second, a burst of 100: a cost of 150 leaves a debt of 50 tokens, repaid in 0.5 s.
        charged_at = time.monotonic()
        check(not self.ok(key, 150), f"{self.where} {key}: a cost of 1.5x the budget is OVER_LIMIT")
        owing = self.status(key, 0)
        check(owing.code == self.pb.RateLimitResponse.Code.OVER_LIMIT,
              f"{self.where} {key}: in debt: the next cost-0 check is OVER_LIMIT")
        reset = owing.duration_until_reset.seconds + owing.duration_until_reset.nanos / 1e9
        check(reset == 1, f"{self.where} {key}: it resets when the debt is repaid: 0.5 s, in whole seconds 1 (the "
                          f"bucket is full again only after 1.5 s), got {reset}")
        deadline = charged_at + WAIT
        while not self.ok(key, 0):  # a check of 0 charges nothing, however often it is asked
            if time.monotonic() > deadline:
                return check(False, f"{self.where} {key}: the debt is repaid within {WAIT}s")
            time.sleep(0.01)
        repaid = time.monotonic() - charged_at
        print(f"{self.where} {key}: the debt of 50 tokens at 100/s was repaid after {repaid:.3f}s", flush=True)
        check(repaid >= 0.45, f"{self.where} {key}: not before the rate repays it ({repaid:.3f}s < 0.5s)")
        # Out of debt, the bucket is empty; a refused cost of 1 would be charged too, so wait for two tokens first.
        time.sleep(0.02)
        check(self.ok(key, 1), f"{self.where} {key}: a token refilled after the debt is admitted")

    def dropping(self, key):
        never = self.status(key, 150)
        check(never.code == self.pb.RateLimitResponse.Code.OVER_LIMIT,
              f"{self.where} {key}: a cost above the burst is OVER_LIMIT")
        check(never.duration_until_reset.seconds == 1,
              f"{self.where} {key}: it never passes: reset in one unit, 1 s, not 0 ({never.duration_until_reset})")
        check(self.ok(key, 0), f"{self.where} {key}: drop: nothing was charged, a cost-0 check is OK")
        check(self.ok(key, 100), f"{self.where} {key}: drop: the whole burst is still there")

    def boundary(self):
        # 100 at the end of one second and 100 at the start of the next: the fixed window passes both (twice its budget
        # within a fifth of a second), the token bucket only the first. A stalled machine that lets a pair of calls
        # straddle the wrong instant is retried with another user.
        def at_fraction(f):
            now = time.time()
            wait = (int(now) + f - now) % 1.0
            time.sleep(wait)

        user = self.user
        for attempt in range(5):
            self.user = f"{user} boundary {attempt}"
            at_fraction(0.85)
            t1 = time.time()
            end_fixed, end_bucket = self.ok("boundary_fixed", 100), self.ok("boundary_bucket", 100)
            t1e = time.time()
            at_fraction(0.05)
            t2 = time.time()
            start_fixed, start_bucket = self.ok("boundary_fixed", 100), self.ok("boundary_bucket", 100)
            t2e = time.time()
            if int(t1) == int(t1e) and int(t2) == int(t2e) == int(t1) + 1:
                break
        else:
            return check(False, f"{self.where}: five tries at a window boundary were all disturbed")
        check(end_fixed and end_bucket, f"{self.where}: the first 100 pass, at the end of a second")
        check(start_fixed, f"{self.where}: the fixed window passes 100 more at the start of the next second")
        check(not start_bucket, f"{self.where}: the token bucket does not ({t2 - t1e:.2f}s refilled too little)")
        self.user = user

    def run(self):
        self.boundary()
        self.fixed_window("fixed", count=True)
        self.fixed_window("fixed_drop", count=False)
        self.debt("bucket")
        self.debt("gcra")
        self.dropping("dropping")


def envoy_gateway_example(rls_pb2, rls_pb2_grpc):
    """The descriptors Envoy Gateway sends for the example's BackendTrafficPolicy: a check of 0 on arrival, the tokens
    the response used when it ends (two calls, the same descriptor)."""
    s = server(ADMIT, EXAMPLE)
    rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)
    route = "httproute/default/llm/rule/0/match/0/*"
    OK = rls_pb2.RateLimitResponse.Code.OK

    def code(user, cost):
        r = rls.ShouldRateLimit(rls_pb2.RateLimitRequest(
            domain="default/eg/http", descriptors=[descriptor((route, route), ("rule-0-match-0", user), hits=cost)]),
            timeout=WAIT)
        return r.overall_code

    check(code("alice", 0) == OK, "example: alice's first request passes its check")
    check(code("alice", 99_000) == OK, "example: its response's 99,000 tokens are charged")
    check(code("alice", 0) == OK, "example: 1,000 tokens left: the next request passes its check")
    check(code("alice", 51_000) != OK, "example: its response used 51,000: more than was left, charged all the same")
    check(code("alice", 0) != OK, "example: alice owes 50,000 tokens: her next request is refused at its check")
    check(code("bob", 0) == OK, "example: bob's budget is his own")
    check(s.stop() == 0, "example: exits 0")


def main(tmp):
    generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    config = os.path.join(tmp, "config dir")
    os.mkdir(config)
    with open(os.path.join(config, "budgets.yaml"), "w") as f:
        f.write(CONFIG)
    s = server(ADMIT, config)
    budgets(s, rls_pb2, rls_pb2_grpc, "in process").run()
    check(s.stop() == 0, "in process: exits 0")
    envoy_gateway_example(rls_pb2, rls_pb2_grpc)
    redis_binary = shutil.which("redis-server")
    if not redis_binary:
        print("the Redis half skipped: it needs redis-server", flush=True)
        return finish() or 77
    redis = redis_server(redis_binary)
    s = server(ADMIT, config, "--redis", redis.url, "--redis-required")
    budgets(s, rls_pb2, rls_pb2_grpc, "redis").run()
    check(s.stop() == 0, "redis: exits 0")


if __name__ == "__main__":
    sys.exit(run_in_scratch("admit serve budgets ", main))  # a space in the path, on purpose
