#!/usr/bin/python3
"""End-to-end test of what `admit serve` tells the people who run it, with real processes and clients admit did not
write (Python's grpcio, stubs generated here at test time; http.client; a redis-server started here): a busy port is an
error naming it (unless --reuse-port), a Redis outage is one log line at its start and one at its end (and the gauge
admit_serve_backend_failing 1 between them), /healthcheck answers 500 while a drain lasts, an empty configuration
directory starts with a warning, a file that is not text is refused as such, and a Kubernetes ConfigMap's swap of its
files is reloaded.

usage: serve_operations_e2e_test.py ADMIT PROTO_DIR CONFIG_DIR PROTOC GRPC_PYTHON_PLUGIN
Exit status: 0 passed, 1 failed, 77 skipped (a Python module or redis-server is missing).
"""
import datetime
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (WAIT, check, descriptor, finish, generate_stubs, run_in_scratch, no_config_env,  # noqa
                               redis_server, server, unread_bytes)

ADMIT, PROTO_DIR, CONFIG_DIR, PROTOC, GRPC_PYTHON_PLUGIN = sys.argv[1:6]
FAILING = "backend failing: decisions answer by the failure policy"
COUNTING = "backend counting again"



def refused_start(config, *args):
    """Runs `admit serve` expecting it to refuse to start: (exit status, stderr, seconds it took)."""
    began = time.monotonic()
    p = subprocess.run([ADMIT, "serve", "--config", config, *args], capture_output=True, text=True, timeout=WAIT,
                       env=no_config_env())
    return p.returncode, p.stderr, time.monotonic() - began


def busy_ports(config):
    a = server(ADMIT, config)
    for option, port, other in (("--grpc-port", a.grpc_port, "--http-port"), ("--http-port", a.http_port,
                                                                                "--grpc-port")):
        status, err, took = refused_start(config, option, str(port), other, "0")
        print(f"a second instance on the busy {option} {port} exited {status} after {took:.2f}s", flush=True)
        check(status == 1, f"busy {option}: exit 1 (got {status}: {err})")
        check(str(port) in err and "Address already in use" in err, f"busy {option}: names the port and why: {err}")
        check("another admit serve, or another program" in err, f"busy {option}: says who may hold it: {err}")
        check(err.count("Address already in use") == 1, f"busy {option}: said once: {err}")
        check(took < WAIT, f"busy {option}: exits at once ({took:.2f}s)")
        # gRPC's own account of the failed bind (a 1.5 KB error tree) is not the first thing an operator reads.
        check('"msg":"grpc"' not in err, f"busy {option}: gRPC's own error tree is not logged: {err}")
    check(a.stop() == 0, "the first instance drains and exits 0")

    # Asked for: two instances share both ports.
    one = server(ADMIT, config, "--reuse-port")
    two = server(ADMIT, None, "--config", config, "--grpc-port", str(one.grpc_port), "--http-port", str(one.http_port),
                 "--reuse-port", "--log-level", "debug", env=no_config_env())
    check(two.proc.poll() is None and two.grpc_port == one.grpc_port, "--reuse-port: a second instance shares them")
    check(one.stop() == 0 and two.stop() == 0, "--reuse-port: both exit 0")


def host_names(config):
    """--host takes a host name, as gRPC did and HTTP did not ("not an IP address", exit 1): both ports listen on the
    name's first address. An empty --host is refused as bad input (exit 2) before anything starts."""
    s = server(ADMIT, config, "--host", "localhost")
    listening = next(json.loads(line) for line in s.log if json.loads(line).get("msg") == "listening")
    first = socket.getaddrinfo("localhost", s.http_port, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)[0]
    check(listening.get("address") == first[4][0], f"--host localhost: listens on its first address: {listening}")
    conn = http.client.HTTPConnection(first[4][0], s.http_port, timeout=WAIT)
    conn.request("GET", "/healthcheck")
    status = conn.getresponse().status
    conn.close()
    check(status == 200, f"--host localhost: HTTP answers on {first[4][0]} ({status})")
    check(s.stop() == 0, "--host localhost: drains and exits 0")
    status, err, took = refused_start(config, "--host", "")
    check(status == 2 and "invalid --host" in err, f"--host '': exit 2 naming it (got {status}: {err})")


def failing_gauge(s):
    """admit_serve_backend_failing from /metrics (None when absent)."""
    status, body = s.http("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("admit_serve_backend_failing "):
            return int(line.split()[1])
    return None


def redis_outage(config, redis, rls_pb2, rls_pb2_grpc):
    s = server(ADMIT, config, "--redis", redis.url, "--redis-timeout", "200ms", "--redis-required")
    rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)

    def call():
        return rls.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="mongo_cps",
                                                            descriptors=[descriptor(("database", "users"))]),
                                   timeout=WAIT)

    check(call().overall_code == rls_pb2.RateLimitResponse.Code.OK, "redis: a first call is decided")
    # --log-level debug: each decision is a line, with what it was decided against.
    decided = s.wait_for("decision")
    check(decided.get("level") == "debug" and decided.get("domain") == "mongo_cps" and decided.get("code") == "OK",
          f"debug: the decision is logged: {decided}")
    first = (decided.get("descriptors") or [{}])[0]
    check(first.get("entries") == ["database=users"] and "limit" in first and "remaining" in first,
          f"debug: its descriptor, limit and what remains: {decided}")
    redis.kill()
    for i in range(20):
        check(call().overall_code == rls_pb2.RateLimitResponse.Code.OK, "redis down: fail open answers OK")
        if i == 0:
            first_failed = time.time()  # the first call after the kill failed (fail open) by now
    line = s.wait_for(FAILING)
    logged = datetime.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    took = logged - first_failed
    print(f"the outage was logged {took:+.3f}s from the first failed call's answer: {line}", flush=True)
    check(took < 1.0, f"the outage is logged within a second of the first failed call ({took:.3f}s)")
    check(line.get("level") == "error" and line.get("backend") == redis.url, f"the line names the URL: {line}")
    check("127.0.0.1" in line.get("error", ""), f"the line says why: {line}")
    check(failing_gauge(s) == 1, "redis down: /metrics says the backend is failing")
    check(redis.start(), "redis-server restarted on its port")
    deadline = time.monotonic() + WAIT
    back = None
    while back is None and time.monotonic() < deadline:
        call()  # fails (fail open) until the service has reconnected
        try:
            back = s.wait_for(COUNTING, within=0.5)
        except AssertionError:
            pass
    check(back is not None, "redis back: one line says so")
    if back is not None:
        check(back.get("decided_open", 0) >= 20, f"the end of the outage counts the calls decided open: {back}")
    check(sum(FAILING in x for x in s.log) == 1, f"one line for the whole outage, not one per call: {s.log}")
    check(failing_gauge(s) == 0, "redis back: /metrics says the backend counts again")
    check(s.stop() == 0, "redis: SIGTERM exits 0")


def envoy_redis_variables(config, redis_binary):
    """envoyproxy/ratelimit's REDIS_* variables, as a migrated environment file sets them, count in that Redis (they
    were ignored: counted in the process); what admit cannot do as they ask is refused, naming the variable."""
    password = "p@ss word"  # (a ":" would split it: "user:password", as envoyproxy/ratelimit reads REDIS_AUTH)
    locked = redis_server(redis_binary, extra=["--requirepass", password])
    env = dict(no_config_env(), REDIS_SOCKET_TYPE="tcp", REDIS_URL=f"127.0.0.1:{locked.port}", REDIS_AUTH=password)
    s = server(ADMIT, None, "--config", config, "--grpc-port", "0", "--http-port", "0", env=env)
    check(s.listening.get("backend") == f"redis://:***@127.0.0.1:{locked.port}",
          f"REDIS_URL with REDIS_SOCKET_TYPE tcp and REDIS_AUTH: the backend is that Redis ({s.listening})")
    status, body = s.http("POST", "/json", json.dumps(
        {"domain": "mongo_cps", "descriptors": [{"entries": [{"key": "database", "value": "users"}]}]}))
    check(status == 200 and json.loads(body).get("overallCode") == "OK", f"decided: {status} {body!r}")
    keys = subprocess.run(["redis-cli", "-p", str(locked.port), "--no-auth-warning", "-a", password, "dbsize"],
                          capture_output=True, text=True, timeout=WAIT).stdout.strip()
    check(keys not in ("", "0"), f"the decision counted in that Redis (dbsize {keys!r})")
    check(s.stop() == 0, "REDIS_URL: SIGTERM exits 0")
    locked.kill()
    # A unix socket's password (a query parameter) is hidden in the log too.
    socket_env = dict(no_config_env(), REDIS_URL="/nonexistent/redis.sock", REDIS_AUTH=password)
    u = server(ADMIT, None, "--config", config, "--grpc-port", "0", "--http-port", "0", env=socket_env)
    check(u.listening.get("backend") == "unix:///nonexistent/redis.sock?password=***",
          f"REDIS_URL of a socket: its password hidden in the log ({u.listening})")
    check(u.stop() == 0, "REDIS_URL of a socket: SIGTERM exits 0")
    for extra, says in ((dict(BACKEND_TYPE="memcache"), 'BACKEND_TYPE "memcache" is not offered'),
                        (dict(REDIS_URL="127.0.0.1:6379"), "REDIS_SOCKET_TYPE is unix (its default)"),
                        (dict(REDIS_SOCKET_TYPE="udp", REDIS_URL="127.0.0.1:6379"), 'invalid REDIS_SOCKET_TYPE "udp"'),
                        (dict(REDIS_SOCKET_TYPE="tcp", REDIS_URL="127.0.0.1:6379", REDIS_TLS="true",
                              REDIS_TLS_SKIP_HOSTNAME_VERIFICATION="true"), "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"),
                        (dict(REDIS_SOCKET_TYPE="tcp"), "REDIS_SOCKET_TYPE is set but REDIS_URL is not")):
        p = subprocess.run([ADMIT, "serve", "--config", config, "--grpc-port", "0", "--http-port", "0"],
                           env=dict(no_config_env(), **extra), capture_output=True, text=True, timeout=WAIT)
        check(p.returncode == 2 and says in p.stderr, f"{extra}: exit 2 naming it ({p.returncode}: {p.stderr!r})")


def healthcheck_while_draining(config, redis, rls_pb2, rls_pb2_grpc):
    # A call held in flight by a paused Redis keeps the drain open for up to --redis-timeout.
    s = server(ADMIT, config, "--redis", redis.url, "--redis-timeout", "5000ms", "--redis-required")
    rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)
    request = rls_pb2.RateLimitRequest(domain="mongo_cps", descriptors=[descriptor(("database", "users"))])
    check(rls.ShouldRateLimit(request, timeout=WAIT).overall_code == rls_pb2.RateLimitResponse.Code.OK,
          "drain: a first call is decided")
    check(s.http("GET", "/healthcheck") == (200, b"OK"), "drain: /healthcheck 200 while serving")
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        pending = rls.ShouldRateLimit.future(request, timeout=WAIT)
        # The call is in flight once its command waits, unread, in the stopped Redis's socket.
        deadline = time.monotonic() + WAIT
        while unread_bytes(redis.port) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        check(unread_bytes(redis.port) > 0, "drain: the call reached Redis")
        s.proc.send_signal(signal.SIGTERM)
        s.wait_for("draining")
        status, body = s.http("GET", "/healthcheck")
        check(status == 500, f"drain: /healthcheck answers 500 while the call is in flight ({status} {body!r})")
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    check(pending.result().overall_code == rls_pb2.RateLimitResponse.Code.OK, "drain: the call in flight is answered")
    check(s.proc.wait(timeout=WAIT) == 0, "drain: exits 0")


def empty_and_binary_directories(tmp):
    empty = os.path.join(tmp, "empty dir")
    os.mkdir(empty)
    e = server(ADMIT, empty)
    check(any("no rule in the configuration directory" in line for line in e.log),
          f"an empty directory starts with a warning: {e.log}")
    check(e.stop() == 0, "empty directory: exits 0")

    binary = os.path.join(tmp, "binary dir")
    os.mkdir(binary)
    with open(os.path.join(binary, "rules.yaml"), "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00")  # a gzip header
    status, err, _ = refused_start(binary, "--grpc-port", "0", "--http-port", "0")
    check(status == 2 and "rules.yaml" in err and "not a text file" in err, f"a binary file is refused: {err}")


def configmap_reload(tmp):
    """A Kubernetes ConfigMap volume: each file a symlink through ..data to a timestamped directory, replaced at once by
    swapping ..data. The swap is reloaded, as an edit of a plain file is."""
    cm = os.path.join(tmp, "configmap")
    os.makedirs(os.path.join(cm, "..2026_a"))
    rule = "domain: edge\ndescriptors:\n  - key: client_ip\n    rate_limit: {unit: second, requests_per_unit: %d}\n"
    with open(os.path.join(cm, "..2026_a", "edge.yaml"), "w") as f:
        f.write(rule % 20)
    os.symlink("..2026_a", os.path.join(cm, "..data"))
    os.symlink("..data/edge.yaml", os.path.join(cm, "edge.yaml"))
    s = server(ADMIT, cm)

    def limit():
        status, body = s.http("GET", "/rules")
        return json.loads(body)["domains"][0]["descriptors"][0]["rate_limit"]["requests_per_unit"]

    check(limit() == 20, "configmap: the rules load through the symlinks")
    os.makedirs(os.path.join(cm, "..2026_b"))
    with open(os.path.join(cm, "..2026_b", "edge.yaml"), "w") as f:
        f.write(rule % 7)
    # The new directory alone is a change in the watched one: it is reloaded, and the rules are those of ..data still.
    s.wait_for("configuration reloaded")
    check(limit() == 20, "configmap: a new directory beside ..data changes nothing")
    os.symlink("..2026_b", os.path.join(cm, "..data_tmp"))
    os.rename(os.path.join(cm, "..data_tmp"), os.path.join(cm, "..data"))  # atomic, as the kubelet does
    shutil.rmtree(os.path.join(cm, "..2026_a"))
    # A reload may start between the link's creation and its rename (on a loaded machine they can be further apart
    # than the 100 ms the service lets changes settle); the rename triggers the next one.
    deadline = time.monotonic() + WAIT
    while limit() != 7 and time.monotonic() < deadline:
        try:
            s.wait_for("configuration reloaded", within=max(0.01, deadline - time.monotonic()))
        except AssertionError:
            break
    check(limit() == 7, "configmap: swapping ..data reloads the rules")
    check(s.stop() == 0, "configmap: exits 0")


def main(tmp):
    generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    config = os.path.join(tmp, "config dir")
    shutil.copytree(CONFIG_DIR, config)
    busy_ports(config)
    host_names(config)
    empty_and_binary_directories(tmp)
    configmap_reload(tmp)
    redis_binary = shutil.which("redis-server")
    if not redis_binary:
        print("the Redis cases skipped: they need redis-server", flush=True)
        return finish() or 77
    envoy_redis_variables(config, redis_binary)
    redis = redis_server(redis_binary)
    redis_outage(config, redis, rls_pb2, rls_pb2_grpc)
    healthcheck_while_draining(config, redis, rls_pb2, rls_pb2_grpc)


if __name__ == "__main__":
    sys.exit(run_in_scratch("admit serve operations ", main))  # a space in the path, on purpose
