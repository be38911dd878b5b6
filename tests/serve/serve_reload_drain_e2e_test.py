#!/usr/bin/python3
"""End-to-end test of `admit serve`'s reloads that follow the configuration directory's path, its drain's deadline, and
the environment as envoyproxy/ratelimit's deployments set it, with real processes and clients admit did not write
(Python's grpcio, stubs generated here at test time; http.client; a redis-server started here):

- the directory replaced (`mv new dir`) and a symbolic link on its path swapped (RUNTIME_ROOT pointing at a link that
  a deployment renames over) are reloaded, and later edits too; a change beside it (the old directory) is not;
- the last rule removed at run time warns, as an empty directory does at start;
- SHADOW_MODE=True, LOG_LEVEL=trace (Go's and logrus's spellings) are taken; at --log-level error the line that says
  where the service listens is still written;
- a drain ends at --drain-timeout even while Redis does not answer a call in flight, and an open health Watch stream
  does not hold it at all.

usage: serve_reload_drain_e2e_test.py ADMIT PROTO_DIR PROTOC GRPC_PYTHON_PLUGIN
Exit status: 0 passed, 1 failed, 77 skipped (a Python module or redis-server is missing).
"""
import json
import os
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (WAIT, check, descriptor, finish, generate_stubs, no_config_env, redis_server,  # noqa
                               run_in_scratch, server, unread_bytes)

ADMIT, PROTO_DIR, PROTOC, GRPC_PYTHON_PLUGIN = sys.argv[1:5]
RULE = "domain: edge\ndescriptors:\n  - key: client_ip\n    rate_limit: {unit: second, requests_per_unit: %d}\n"


def write_rule(directory, limit, name="edge.yaml"):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "w") as f:
        f.write(RULE % limit)


def limit_of(s):
    """The limit of the one rule loaded (None when none is)."""
    _, body = s.http("GET", "/rules")
    domains = json.loads(body)["domains"]
    return domains[0]["descriptors"][0]["rate_limit"]["requests_per_unit"] if domains else None


def reaches(s, want):
    """Waits (reload by reload) until the limit loaded is `want`; whether it got there."""
    deadline = time.monotonic() + WAIT
    while limit_of(s) != want and time.monotonic() < deadline:
        try:
            s.wait_for("configuration reloaded", within=max(0.01, deadline - time.monotonic()))
        except AssertionError:
            break
    return limit_of(s) == want


def directory_replaced(tmp):
    d = os.path.join(tmp, "replaced dir")
    write_rule(d, 7)
    s = server(ADMIT, d)
    os.rename(d, d + ".old")
    write_rule(d, 8)
    check(reaches(s, 8), "replaced: the directory now at the path is loaded")
    write_rule(d, 9)
    check(reaches(s, 9), "replaced: an edit in the new directory is reloaded")
    write_rule(d + ".old", 3, "other.yaml")  # the directory watched at first, now elsewhere
    time.sleep(0.5)
    check(limit_of(s) == 9, "replaced: a change in the old directory changes nothing")
    with open(os.path.join(d, "packed.yaml"), "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00")  # a gzip header: refused as a whole file, at no line
    refused = s.wait_for("configuration refused; the previous one stays")
    check(refused.get("file", "").endswith("packed.yaml") and "line" not in refused,
          f"a file that is not text is refused naming it, with no line 0: {refused}")
    check(limit_of(s) == 9, "replaced: the previous configuration stayed")
    os.remove(os.path.join(d, "packed.yaml"))
    s.wait_for("configuration reloaded")
    check(limit_of(s) == 9, "replaced: without the file, the directory loads again")
    os.remove(os.path.join(d, "edge.yaml"))
    s.wait_for("no rule in the configuration directory: every request is answered OK until a *.yaml or *.yml file "
               "with a rule is added")
    check(limit_of(s) is None, "replaced: the last rule removed leaves none, with a warning")
    check(s.stop() == 0, "replaced: exits 0")


def runtime_root_swapped(tmp):
    """envoyproxy/ratelimit's layout: RUNTIME_ROOT a symbolic link, swapped by renaming a new link over it."""
    root = os.path.join(tmp, "runtime")
    write_rule(os.path.join(root, "v1", "ratelimit", "config"), 3)
    write_rule(os.path.join(root, "v2", "ratelimit", "config"), 4)
    os.symlink("v1", os.path.join(root, "current"))
    env = dict(no_config_env(), RUNTIME_ROOT=os.path.join(root, "current"), RUNTIME_SUBDIRECTORY="ratelimit",
               SHADOW_MODE="True", LOG_LEVEL="trace")
    s = server(ADMIT, None, "--grpc-port", "0", "--http-port", "0", env=env)
    check(limit_of(s) == 3, "runtime root: the link's directory is loaded")
    # Global shadow mode: 10 calls on a limit of 3 a second, all answered OK (one second holds at least 5 of them).
    call = json.dumps({"domain": "edge", "descriptors": [{"entries": [{"key": "client_ip", "value": "1"}]}]})
    codes = {json.loads(s.http("POST", "/json", call)[1])["overallCode"] for _ in range(10)}
    check(codes == {"OK"}, f"SHADOW_MODE=True is taken: every call OK ({codes})")
    os.symlink("v2", os.path.join(root, "next"))
    os.rename(os.path.join(root, "next"), os.path.join(root, "current"))  # atomic, as a deployment does
    check(reaches(s, 4), "runtime root: the swapped link is reloaded")
    write_rule(os.path.join(root, "v2", "ratelimit", "config"), 5)
    check(reaches(s, 5), "runtime root: an edit behind the new link is reloaded")
    check(s.stop() == 0, "runtime root: exits 0")


def listening_at_every_level(tmp):
    d = os.path.join(tmp, "quiet dir")
    write_rule(d, 7)
    s = server(ADMIT, None, "--config", d, "--grpc-port", "0", "--http-port", "0", "--log-level", "error",
               env=no_config_env())
    check(s.grpc_port > 0 and s.http_port > 0, "--log-level error: the ports chosen are still written")
    check(s.stop() == 0, "--log-level error: exits 0")


def watch_does_not_hold_drain(tmp, health_pb2, health_pb2_grpc):
    d = os.path.join(tmp, "watched dir")
    write_rule(d, 7)
    s = server(ADMIT, d, "--drain-timeout", "10s")
    watch = health_pb2_grpc.HealthStub(s.channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=WAIT)
    statuses = []
    threading.Thread(target=lambda: [statuses.append(r.status) for r in watch], daemon=True).start()
    deadline = time.monotonic() + WAIT
    while not statuses and time.monotonic() < deadline:
        time.sleep(0.01)
    began = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    status = s.proc.wait(timeout=WAIT)
    took = time.monotonic() - began
    print(f"drain with only a health watch open: exit {status} after {took:.2f}s", flush=True)
    check(status == 0 and took < 5, f"a health watch does not hold the drain's 10 s ({took:.2f}s, exit {status})")
    check(statuses[:1] == [health_pb2.HealthCheckResponse.SERVING], f"the watch saw SERVING first: {statuses}")


def drain_bounded(tmp, redis, rls_pb2, rls_pb2_grpc, health_pb2, health_pb2_grpc):
    d = os.path.join(tmp, "drain dir")
    write_rule(d, 100)
    s = server(ADMIT, d, "--redis", redis.url, "--redis-timeout", "20s", "--drain-timeout", "1s")
    rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)
    request = rls_pb2.RateLimitRequest(domain="edge", descriptors=[descriptor(("client_ip", "1"))])
    check(rls.ShouldRateLimit(request, timeout=WAIT).overall_code == rls_pb2.RateLimitResponse.Code.OK,
          "drain: a first call is decided")
    # A health watch, as gRPC clients with health checking keep one open.
    watch = health_pb2_grpc.HealthStub(s.channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=WAIT)
    statuses = []
    threading.Thread(target=lambda: [statuses.append(r.status) for r in watch], daemon=True).start()
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        pending = rls.ShouldRateLimit.future(request, timeout=WAIT)
        time.sleep(0.3)  # the call waits for the stopped Redis
        began = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        status = s.proc.wait(timeout=WAIT)
        took = time.monotonic() - began
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    print(f"drain with Redis stopped and a health watch open: exit {status} after {took:.2f}s", flush=True)
    check(status == 0, f"drain: exits 0 (got {status})")
    check(took < 1.0 + 1.5, f"drain: ends at --drain-timeout 1s, not at --redis-timeout 20s ({took:.2f}s)")
    check(health_pb2.HealthCheckResponse.NOT_SERVING in statuses, f"drain: the watch was told NOT_SERVING: {statuses}")


def second_signal_ends_drain(tmp, redis, rls_pb2, rls_pb2_grpc):
    """A second SIGTERM during a drain does what its deadline would: the call waiting for a stopped Redis is answered
    by the failure policy at once (it waited for --drain-timeout, 30 s here), and the process exits 0."""
    d = os.path.join(tmp, "second signal dir")
    write_rule(d, 100)
    s = server(ADMIT, d, "--redis", redis.url, "--redis-timeout", "60s", "--drain-timeout", "30s")
    rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)
    request = rls_pb2.RateLimitRequest(domain="edge", descriptors=[descriptor(("client_ip", "1"))])
    check(rls.ShouldRateLimit(request, timeout=WAIT).overall_code == rls_pb2.RateLimitResponse.Code.OK,
          "second signal: a first call is decided")
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        pending = rls.ShouldRateLimit.future(request, timeout=WAIT)
        reached = time.monotonic() + WAIT
        while unread_bytes(redis.port) == 0 and time.monotonic() < reached:
            time.sleep(0.01)  # until the call waits in the stopped Redis's socket
        check(unread_bytes(redis.port) > 0, "second signal: the call reached the stopped Redis")
        s.proc.send_signal(signal.SIGTERM)
        s.wait_for("draining")
        began = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        status = s.proc.wait(timeout=WAIT)
        took = time.monotonic() - began
        answer = pending.result(timeout=WAIT)
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    print(f"a second SIGTERM during the drain: exit {status} {took:.2f}s after it", flush=True)
    check(status == 0, f"second signal: exits 0 (got {status})")
    check(took < 5.0, f"second signal: the drain ends then, not at --drain-timeout 30s ({took:.2f}s)")
    check(answer.overall_code == rls_pb2.RateLimitResponse.Code.OK, "second signal: the call waiting is answered by "
          f"the failure policy (open: OK), not left unanswered ({answer.overall_code})")
    said = s.wait_for("second signal: what waits for the backend is answered now")
    check(said.get("signal") == "SIGTERM", f"second signal: said, naming it ({said})")


def main(tmp):
    generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    from grpc.health.v1 import health_pb2, health_pb2_grpc
    directory_replaced(tmp)
    runtime_root_swapped(tmp)
    listening_at_every_level(tmp)
    watch_does_not_hold_drain(tmp, health_pb2, health_pb2_grpc)
    redis_binary = shutil.which("redis-server")
    if not redis_binary:
        print("the Redis case skipped: it needs redis-server", flush=True)
        return finish() or 77
    drain_bounded(tmp, redis_server(redis_binary), rls_pb2, rls_pb2_grpc, health_pb2, health_pb2_grpc)
    second_signal_ends_drain(tmp, redis_server(redis_binary), rls_pb2, rls_pb2_grpc)
    return None


if __name__ == "__main__":
    sys.exit(run_in_scratch("admit serve reload ", main))
