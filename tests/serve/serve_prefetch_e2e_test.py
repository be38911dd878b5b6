#!/usr/bin/python3
"""End-to-end test of `prefetch: N` in `admit serve`: three instances on one redis-server (real processes), three gRPC
clients (Python's grpcio, stubs generated here at test time) calling as fast as they can for 3 s, one per instance.

- A fixed window of 200 a second with prefetch 20: no second admits more than 200 (prefetched hits are counted in
  Redis when taken), each whole second at least 200 − 3 × 20 (each instance leaves at most 19 unspent), and Redis
  runs at most one command per 5 decisions (INFO commandstats).
- A token bucket of 200 a second (burst 200) with prefetch 20: within its bound — at most rate × t + burst + 19 × 3
  over the run — and the same command ratio.

A call is counted in the second it was sent and answered in; a call that straddles a second counts toward that
second's lower bound only (its second is not known).

usage: serve_prefetch_e2e_test.py ADMIT PROTO_DIR PROTOC GRPC_PYTHON_PLUGIN
Exit status: 0 passed, 1 failed, 77 skipped (a Python module or redis-server is missing).
"""
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (check, descriptor, generate_stubs, run_in_scratch, redis_server,  # noqa: E402
                               server)

ADMIT, PROTO_DIR, PROTOC, GRPC_PYTHON_PLUGIN = sys.argv[1:5]
RATE, N, INSTANCES, SECONDS = 200, 20, 3, 3.0

CONFIG = f"""domain: prefetch
descriptors:
  - key: fixed
    rate_limit: {{unit: second, requests_per_unit: {RATE}, prefetch: {N}}}
  - key: bucket
    rate_limit: {{unit: second, requests_per_unit: {RATE}, algorithm: token_bucket, prefetch: {N}}}
"""


def script_calls(redis):
    """Calls of admit's scripts: FCALL of their function library, or EVALSHA where functions are not used."""
    import subprocess
    out = subprocess.run(["redis-cli", "-p", str(redis.port), "INFO", "commandstats"], capture_output=True,
                         text=True).stdout
    calls = 0
    for line in out.splitlines():
        if line.startswith("cmdstat_evalsha:") or line.startswith("cmdstat_fcall:"):
            calls += int(line.split("calls=")[1].split(",")[0])
    return calls


def load(servers, rls_pb2, rls_pb2_grpc, key):
    """Each client calls its instance as fast as it can for SECONDS: [(sent, answered, ok)] of all."""
    calls, lock = [], threading.Lock()
    start = time.time()
    # Start at a whole second and a quarter, so the run covers whole seconds.
    time.sleep((1.25 - (start % 1.0)) % 1.0)
    end = time.time() + SECONDS

    def client(s):
        stub = rls_pb2_grpc.RateLimitServiceStub(s.channel)
        request = rls_pb2.RateLimitRequest(domain="prefetch", descriptors=[descriptor((key, "user"))])
        mine = []
        while True:
            sent = time.time()
            if sent >= end:
                break
            ok = stub.ShouldRateLimit(request, timeout=30).overall_code == rls_pb2.RateLimitResponse.Code.OK
            mine.append((sent, time.time(), ok))
        with lock:
            calls.extend(mine)

    threads = [threading.Thread(target=client, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return calls


def fixed_window(servers, redis, rls_pb2, rls_pb2_grpc):
    before = script_calls(redis)
    calls = load(servers, rls_pb2, rls_pb2_grpc, "fixed")
    commands = script_calls(redis) - before
    first, last = min(c[0] for c in calls), max(c[1] for c in calls)
    print(f"fixed window: {len(calls)} calls in {last - first:.2f}s, {sum(c[2] for c in calls)} admitted, "
          f"{commands} script calls ({commands / len(calls):.3f} a decision)", flush=True)
    for second in range(int(first) + 1, int(last)):  # the whole seconds of the run
        certain = sum(1 for s, a, ok in calls if ok and int(s) == int(a) == second)
        touching = sum(1 for s, a, ok in calls if ok and int(s) <= second <= int(a))
        offered = sum(1 for s, a, ok in calls if int(s) == second)
        print(f"  second {second % 100}: {certain} admitted surely in it, {touching} possibly; {offered} calls",
              flush=True)
        check(certain <= RATE, f"fixed window: second {second}: at most {RATE} admitted ({certain})")
        if offered > RATE + INSTANCES * N:
            check(touching >= RATE - INSTANCES * N,
                  f"fixed window: second {second}: at least {RATE - INSTANCES * N} admitted ({touching})")
        else:
            print(f"  (the machine offered only {offered} calls: the lower bound is not checked)", flush=True)
    check(commands * 5 <= len(calls), f"fixed window: at most one Redis command per 5 decisions ({commands})")


def token_bucket(servers, redis, rls_pb2, rls_pb2_grpc):
    before = script_calls(redis)
    calls = load(servers, rls_pb2, rls_pb2_grpc, "bucket")
    commands = script_calls(redis) - before
    first, last = min(c[0] for c in calls), max(c[1] for c in calls)
    admitted = sum(c[2] for c in calls)
    bound = RATE * (last - first) + RATE + (N - 1) * INSTANCES
    print(f"token bucket: {len(calls)} calls in {last - first:.2f}s, {admitted} admitted (bound {bound:.0f}), "
          f"{commands} script calls ({commands / len(calls):.3f} a decision)", flush=True)
    check(admitted <= bound, f"token bucket: at most rate x t + burst + (N - 1) x instances ({admitted} > {bound})")
    check(commands * 5 <= len(calls), f"token bucket: at most one Redis command per 5 decisions ({commands})")


def main(tmp):
    redis_binary = shutil.which("redis-server")
    if not redis_binary or not shutil.which("redis-cli"):
        print("skipped: needs redis-server and redis-cli", flush=True)
        return 77
    generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    config = os.path.join(tmp, "config dir")
    os.mkdir(config)
    with open(os.path.join(config, "prefetch.yaml"), "w") as f:
        f.write(CONFIG)
    redis = redis_server(redis_binary)
    servers = [server(ADMIT, config, "--redis", redis.url, "--redis-required")
               for _ in range(INSTANCES)]
    fixed_window(servers, redis, rls_pb2, rls_pb2_grpc)
    token_bucket(servers, redis, rls_pb2, rls_pb2_grpc)
    for s in servers:
        check(s.stop() == 0, "exits 0")


if __name__ == "__main__":
    sys.exit(run_in_scratch("admit serve prefetch ", main))  # a space in the path, on purpose
