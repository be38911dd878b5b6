#!/usr/bin/python3
"""End-to-end test of token budgets (`over_limit_hits`) in `admit serve`, with real processes and a gRPC client admit
did not write (Python's grpcio, stubs generated here at test time), in process and on a redis-server started here.

An LLM gateway asks with a cost of 0 when a request arrives and charges the tokens the response used afterwards. With
`over_limit_hits: count` a cost above what is left is charged all the same: the fixed window counts it, a token bucket
or GCRA goes into debt. Either way the next cost-0 check is OVER_LIMIT, and the bucket admits again once the rate has
repaid the debt (not before). With `drop` (the smoother algorithms' default) a refused cost is not charged.

usage: serve_budgets_e2e_test.py ADMIT PROTO_DIR PROTOC GRPC_PYTHON_PLUGIN
Exit status: 0 passed, 1 failed, 77 skipped (a Python module or redis-server is missing; the in-process half still
runs before a skip).
"""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (WAIT, check, descriptor, finish, generate_stubs, kill_started, redis_server,  # noqa
                               server)

ADMIT, PROTO_DIR, PROTOC, GRPC_PYTHON_PLUGIN = sys.argv[1:5]

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
        check(not self.ok(key, 0), f"{self.where} {key}: in debt: the next cost-0 check is OVER_LIMIT")
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
        check(not self.ok(key, 150), f"{self.where} {key}: a cost above the burst is OVER_LIMIT")
        check(self.ok(key, 0), f"{self.where} {key}: drop: nothing was charged, a cost-0 check is OK")
        check(self.ok(key, 100), f"{self.where} {key}: drop: the whole burst is still there")

    def run(self):
        self.fixed_window("fixed", count=True)
        self.fixed_window("fixed_drop", count=False)
        self.debt("bucket")
        self.debt("gcra")
        self.dropping("dropping")


def main():
    tmp = tempfile.mkdtemp(prefix="admit serve budgets ")  # a space in the path, on purpose
    try:
        generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
        config = os.path.join(tmp, "config dir")
        os.mkdir(config)
        with open(os.path.join(config, "budgets.yaml"), "w") as f:
            f.write(CONFIG)
        s = server(ADMIT, config)
        budgets(s, rls_pb2, rls_pb2_grpc, "in process").run()
        check(s.stop() == 0, "in process: exits 0")
        redis_binary = shutil.which("redis-server")
        if not redis_binary:
            print("the Redis half skipped: it needs redis-server", flush=True)
            return finish() or 77
        redis = redis_server(redis_binary)
        s = server(ADMIT, config, "--redis", redis.url, "--redis-required")
        budgets(s, rls_pb2, rls_pb2_grpc, "redis").run()
        check(s.stop() == 0, "redis: exits 0")
    finally:
        kill_started()
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
