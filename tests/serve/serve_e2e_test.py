#!/usr/bin/python3
"""End-to-end test of `admit serve` with clients admit did not write: Python's grpcio (stubs generated here, at test
time, by protoc and grpc_python_plugin from proto/), http.client and prometheus_client.

usage: serve_e2e_test.py ADMIT PROTO_DIR CONFIG_DIR PROTOC GRPC_PYTHON_PLUGIN
Exit status: 0 passed, 1 failed, 77 skipped (a Python module this test needs is missing).
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import (HITS, OVER, RELOADS, REQUESTS, WAIT, check, descriptor, finish, generate_stubs,  # noqa
                               run_in_scratch, no_config_env, redis_server, server)

try:
    import grpc
    from google.protobuf import json_format
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

ADMIT, PROTO_DIR, CONFIG_DIR, PROTOC, GRPC_PYTHON_PLUGIN = sys.argv[1:6]


def port_free(port):
    """Whether a TCP port can be bound on every address now."""
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False



def main(tmp):
    generate_stubs(PROTO_DIR, os.path.join(tmp, "stubs"), PROTOC, GRPC_PYTHON_PLUGIN)
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    from grpc.health.v1 import health_pb2, health_pb2_grpc
    Code = rls_pb2.RateLimitResponse.Code
    Unit = rls_pb2.RateLimitResponse.RateLimit.Unit

    config = os.path.join(tmp, "config dir")
    shutil.copytree(CONFIG_DIR, config)
    s = server(ADMIT, config, "--lease-ttl", "7s")
    rls = rls_pb2_grpc.RateLimitServiceStub(s.channel)
    health = health_pb2_grpc.HealthStub(s.channel)

    def call(domain, *descriptors, hits_addend=0):
        return rls.ShouldRateLimit(rls_pb2.RateLimitRequest(domain=domain, descriptors=list(descriptors),
                                                            hits_addend=hits_addend), timeout=WAIT)

    # Health: the standard service, for the whole server and for the rate-limit service by name.
    for name in ("", "envoy.service.ratelimit.v3.RateLimitService"):
        r = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=WAIT)
        check(r.status == health_pb2.HealthCheckResponse.SERVING, f"health of {name!r} is SERVING")
    check(s.http("GET", "/healthcheck") == (200, b"OK"), "GET /healthcheck answers 200 OK")

    # README example 1: 500 per second for database=users.
    r = call("mongo_cps", descriptor(("database", "users")))
    st = r.statuses[0]
    check(r.overall_code == Code.OK and st.code == Code.OK, "example 1: OK")
    check(st.current_limit.requests_per_unit == 500 and st.current_limit.unit == Unit.SECOND,
          "example 1: the current limit is 500 per second")
    check(st.HasField("duration_until_reset") and 0 < st.duration_until_reset.seconds <= 1,
          f"example 1: resets within the second ({st.duration_until_reset})")

    # hits_addend: the request's, and a descriptor's own (which wins). Within one second window: retried once if
    # the window turned between the calls (the remaining count then starts over).
    for _ in range(2):
        a = call("mongo_cps", descriptor(("database", "default")), hits_addend=5).statuses[0]
        b = call("mongo_cps", descriptor(("database", "default"), hits=7), hits_addend=5).statuses[0]
        if a.limit_remaining >= b.limit_remaining:
            break
    check(a.limit_remaining - b.limit_remaining == 7,
          f"hits_addend: a descriptor's own hits_addend counts ({a.limit_remaining} then {b.limit_remaining})")

    # README example 2, nested descriptors: 1 per minute for proxy → mock; the second call is over the limit
    # (retried once when the minute turned between them, which the reset duration shows).
    mock = descriptor(("source_cluster", "proxy"), ("destination_cluster", "mock"))
    mock_calls = 0
    for _ in range(2):
        first = call("rl", mock)
        second = call("rl", mock)
        mock_calls += 2
        if second.statuses[0].duration_until_reset.seconds <= first.statuses[0].duration_until_reset.seconds:
            break
    check(first.overall_code in (Code.OK, Code.OVER_LIMIT), "example 2: the first call is decided")
    check(second.overall_code == Code.OVER_LIMIT and second.statuses[0].code == Code.OVER_LIMIT
          and second.statuses[0].limit_remaining == 0, "example 2: the second call in a minute is OVER_LIMIT")
    check(second.statuses[0].current_limit.unit == Unit.MINUTE, "example 2: the limit is per minute")

    # A request of two descriptors: over the limit if either is.
    both = call("rl", descriptor(("source_cluster", "proxy"), ("destination_cluster", "bar")), mock)
    mock_calls += 1
    check(both.overall_code == Code.OVER_LIMIT and both.statuses[0].code == Code.OK
          and both.statuses[1].code == Code.OVER_LIMIT, "two descriptors: OVER_LIMIT overall, OK for the other")

    # Unknown domain, a descriptor with no rule, a whitelisted key: OK with no limit. Each right after a call whose
    # answer had two statuses with their limits: the server reuses its messages from call to call, and nothing of
    # the earlier answer or request may show.
    for domain, d, what in (("no_such_domain", descriptor(("k", "v")), "unknown domain"),
                            ("rl", descriptor(("source_cluster", "other")), "a descriptor with no rule"),
                            ("rl", descriptor(("whitelisted", "x")), "a key without a rate limit")):
        before = call("rl", descriptor(("source_cluster", "proxy"), ("destination_cluster", "bar")), mock)
        mock_calls += 1
        check(len(before.statuses) == 2 and before.statuses[1].HasField("current_limit"),
              f"before {what}: two statuses, with limits")
        r = call(domain, d)
        check(r.overall_code == Code.OK and len(r.statuses) == 1 and r.statuses[0].code == Code.OK
              and not r.statuses[0].HasField("current_limit") and not r.statuses[0].HasField("duration_until_reset"),
              f"{what}: OK with no current limit ({r})")

    # /json gives the same answers as gRPC (protobuf's JSON mapping, as envoyproxy/ratelimit).
    for req in (rls_pb2.RateLimitRequest(domain="rl", descriptors=[mock]),
                rls_pb2.RateLimitRequest(domain="no_such_domain", descriptors=[descriptor(("k", "v"))])):
        g = json_format.MessageToDict(rls.ShouldRateLimit(req, timeout=WAIT))
        status, body = s.http("POST", "/json", json_format.MessageToJson(req))
        j = json.loads(body)
        for st in g.get("statuses", []) + j.get("statuses", []):
            st.pop("durationUntilReset", None)
        check(g == j, f"/json answers as gRPC does: {g} vs {j}")
        check(status == (429 if g["overallCode"] == "OVER_LIMIT" else 200), f"/json status {status} for {g}")
        if req.domain == "rl":
            mock_calls += 2

    # The example from envoyproxy/ratelimit's /json comment, as written (original field names).
    status, body = s.http("POST", "/json", '{"domain": "rl", "descriptors": [{"entries": [{"key": "perday"}]}]}')
    check(status == 200 and json.loads(body)["statuses"][0]["currentLimit"]["unit"] == "DAY",
          f"/json with the README's request: {status} {body!r}")

    # Malformed input: a clear status, and the server keeps serving.
    def refused(req_or_bytes, code, words, what):
        try:
            if isinstance(req_or_bytes, bytes):
                raw = s.channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                            request_serializer=lambda b: b, response_deserializer=lambda b: b)
                raw(req_or_bytes, timeout=WAIT)
            else:
                rls.ShouldRateLimit(req_or_bytes, timeout=WAIT)
            check(False, f"{what}: refused")
        except grpc.RpcError as e:
            check(e.code() == code and re.search(words, e.details() or ""),
                  f"{what}: {code} naming the problem ({e.code()}: {e.details()})")

    refused(rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("k", str(i))) for i in range(10000)]),
            grpc.StatusCode.INVALID_ARGUMENT, r"10000 descriptors; at most \d+", "10,000 descriptors")
    refused(rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("k", "v" * (1 << 20)))]),
            grpc.StatusCode.INVALID_ARGUMENT, r"value is 1048576 bytes long; at most \d+", "a 1 MB value")
    refused(rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("k", "v" * (5 << 20)))]),
            grpc.StatusCode.RESOURCE_EXHAUSTED, r".", "a 5 MB message")
    # Hand-encoded RateLimitRequest{domain: "rl", descriptors: [{entries: [{key: "\xff\xfe", value: "v"}]}]}.
    entry = b"\x0a\x02\xff\xfe\x12\x01v"
    desc = b"\x0a" + bytes([len(entry)]) + entry
    bad_utf8 = b"\x0a\x02rl\x12" + bytes([len(desc)]) + desc
    refused(bad_utf8, grpc.StatusCode.INVALID_ARGUMENT, r"Entry\.key is not valid UTF-8", "an invalid UTF-8 key")
    good = rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("database", "users"))]).SerializeToString()
    refused(good[:-3], grpc.StatusCode.INVALID_ARGUMENT, r"not a valid RateLimitRequest", "a truncated message")
    refused(rls_pb2.RateLimitRequest(domain="rl"), grpc.StatusCode.INVALID_ARGUMENT, r"descriptor",
            "no descriptors")
    status, body = s.http("POST", "/json", "{not json")
    check(status == 400 and b"not a RateLimitRequest" in body, f"/json with bad JSON: 400 ({status} {body!r})")
    status, body = s.http("POST", "/json", b'{"domain": "rl", "descriptors": [{"entries": [{"key": "\xff"}]}]}')
    check(status == 400, f"/json with invalid UTF-8: 400 ({status} {body!r})")
    # A body announced larger than the limit is answered at once, before it is sent.
    with socket.create_connection(("127.0.0.1", s.http_port), timeout=WAIT) as sock:
        sock.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n{")
        answer = sock.recv(4096)
    check(answer.startswith(b"HTTP/1.1 413"), f"/json with a 2 MB body: 413 ({answer[:40]!r})")
    status, body = s.http("GET", "/json")
    check(status == 405, f"GET /json: 405 ({status})")
    status, body = s.http("GET", "/nothing-here")
    check(status == 404, f"an unknown path: 404 ({status})")
    # Truncated frames, the peer then gone: an HTTP/2 frame on the gRPC port that announces 4 KiB and brings 2
    # bytes; an HTTP body that announces 100 bytes and brings 10.
    with socket.create_connection(("127.0.0.1", s.grpc_port), timeout=WAIT) as sock:
        settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame, as a client begins
        headers_4k = b"\x00\x10\x00\x01\x04\x00\x00\x00\x01"  # HEADERS, 4096 bytes announced, stream 1
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings + headers_4k + b"\x82\x86")
    with socket.create_connection(("127.0.0.1", s.http_port), timeout=WAIT) as sock:
        sock.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"domain\":")
    r = call("mongo_cps", descriptor(("database", "users")))
    check(r.overall_code == Code.OK, "after the malformed calls, the server still decides")
    check(s.http("GET", "/healthcheck") == (200, b"OK"), "after the truncated frames, HTTP still answers")
    status, body = s.http("GET", "/metrics")
    invalid = [sample.value for family in text_string_to_metric_families(body.decode())
               for sample in family.samples if sample.name == REQUESTS and sample.labels.get("code") == "invalid"]
    # gRPC: 10,000 descriptors, 1 MB value, invalid UTF-8, truncated, no descriptors (the 5 MB message never
    # reaches the server's code); HTTP: bad JSON, invalid UTF-8, the 2 MB body (413).
    check(invalid == [8], f"/metrics counts the 8 refused requests as invalid ({invalid})")

    # While hostile peers keep their connections open mid-frame (8 of each kind above, not closed), others are
    # answered on both ports.
    held = []
    try:
        for _ in range(8):
            g = socket.create_connection(("127.0.0.1", s.grpc_port), timeout=WAIT)
            g.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings + headers_4k + b"\x82\x86")
            h = socket.create_connection(("127.0.0.1", s.http_port), timeout=WAIT)
            h.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"domain\":")
            held += [g, h]
        r = call("mongo_cps", descriptor(("database", "users")))
        check(r.overall_code == Code.OK, "with 16 connections held open mid-frame, gRPC callers are answered")
        check(s.http("GET", "/healthcheck") == (200, b"OK"),
              "with 16 connections held open mid-frame, HTTP callers are answered")
    finally:
        for sock in held:
            sock.close()

    # Memory stays bounded under hostile input: the server's resident size after 200 more refused requests
    # (1 MB values and 10,000 descriptors, alternating) grows by less than what keeping even a tenth of them
    # would take (about 20 MB); the first 20 warm the allocator up.
    def resident_kib():
        with open(f"/proc/{s.proc.pid}/status") as status_file:
            return next(int(line.split()[1]) for line in status_file if line.startswith("VmRSS:"))

    big_value = rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("k", "v" * (1 << 20)))])
    many = rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("k", str(i))) for i in range(10000)])

    def hostile(count):
        for i in range(count):
            try:
                rls.ShouldRateLimit(big_value if i % 2 == 0 else many, timeout=WAIT)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise

    hostile(20)
    before = resident_kib()
    hostile(200)
    grown = resident_kib() - before
    if os.environ.get("ADMIT_TEST_UNDER_ASAN"):  # set by CMake for an AddressSanitizer build: its quarantine
        print("note: the server runs under AddressSanitizer; its resident size is not checked")
    else:
        check(grown < 16 * 1024, f"200 refused hostile requests grew the server by {grown} KiB (bound 16 MiB)")
    r = call("mongo_cps", descriptor(("database", "users")))
    check(r.overall_code == Code.OK, "after the hostile requests, the server still decides")

    # A concurrency rule: the gRPC answer carries the lease (x-admit-lease), POST /release ends it.
    export = descriptor(("export", "nightly"))
    r = call("jobs", export)
    leases = [h.value for h in r.response_headers_to_add if h.key == "x-admit-lease"]
    check(r.overall_code == Code.OK and len(leases) == 1, f"a concurrency rule admits with a lease ({r})")
    check(r.statuses[0].duration_until_reset.seconds == 7,
          f"the lease lives --lease-ttl (7s) unless released ({r.statuses[0].duration_until_reset})")
    check(call("jobs", export).overall_code == Code.OVER_LIMIT, "a second export while the lease is held: "
                                                                "OVER_LIMIT")
    if leases:
        status, body = s.http("POST", "/release", json.dumps({"lease": leases[0]}))
        check(status == 200 and json.loads(body)["released"] is True, f"/release of the lease: 200 ({body!r})")
        status, body = s.http("POST", "/release", json.dumps({"lease": leases[0]}))
        check(status == 404, f"/release of the same lease again: 404 ({status})")
    r = call("jobs", export)
    check(r.overall_code == Code.OK, "after the release, the next export is admitted")

    # POST /release: a lease nobody holds is 404; a body without a lease is 400.
    status, body = s.http("POST", "/release", '{"lease": "no-such-lease"}')
    check(status == 404 and json.loads(body)["released"] is False, f"/release of an unknown lease: 404 ({status})")
    status, body = s.http("POST", "/release", '{"leese": "x"}')
    check(status == 400, f"/release without a lease: 400 ({status} {body!r})")

    # /rules and /metrics.
    status, body = s.http("GET", "/rules")
    check(status == 200 and "destination_cluster" in body.decode(), "GET /rules lists the loaded rules")
    status, body = s.http("GET", "/metrics")
    check(status == 200, "GET /metrics answers 200")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    key = "rl.source_cluster_proxy.destination_cluster_mock"
    hits = [v for (n, labels), v in samples.items() if n == HITS and ("rule", key) in labels]
    over = [v for (n, labels), v in samples.items() if n == OVER and ("rule", key) in labels]
    check(hits == [mock_calls], f"/metrics: {HITS} for {key} is {mock_calls} ({hits})")
    check(over and 1 <= over[0] < mock_calls, f"/metrics: {OVER} for {key} counts the refusals ({over})")

    # Hot reload: a new file takes effect; a bad one is refused, logged, and the old configuration stays.
    with open(os.path.join(config, "added.yaml"), "w") as f:
        f.write("domain: added\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n"
                "      requests_per_unit: 7\n")
    s.wait_for("configuration reloaded")
    r = call("added", descriptor(("k", "x")))
    check(r.statuses[0].current_limit.requests_per_unit == 7, "a file added to the directory takes effect")
    with open(os.path.join(config, "broken.yaml"), "w") as f:
        f.write("domain: broken\ndescriptors:\n  - key: k\n    frobnicate: 1\n")
    refused_line = s.wait_for("configuration refused; the previous one stays")
    check(refused_line.get("file", "").endswith("broken.yaml") and refused_line.get("line") == 4,
          f"the refused reload names the file and line: {refused_line}")
    r = call("added", descriptor(("k", "x")))
    check(r.statuses[0].current_limit.requests_per_unit == 7, "after a bad reload the old configuration stays")
    os.remove(os.path.join(config, "broken.yaml"))
    s.wait_for("configuration reloaded")

    # Reloads while 8 clients call: no call fails, and each answer is from one configuration or the other (the
    # limit of domain "added" is 7 or 8, never a mix or a missing rule).
    stop_calling = threading.Event()
    seen, errors = set(), []

    def client():
        stub = rls_pb2_grpc.RateLimitServiceStub(s.channel)
        while not stop_calling.is_set():
            try:
                r = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(
                    domain="added", descriptors=[descriptor(("k", "x"))]), timeout=WAIT)
                seen.add(r.statuses[0].current_limit.requests_per_unit)
            except grpc.RpcError as err:
                errors.append(err)

    clients = [threading.Thread(target=client) for _ in range(8)]
    for t in clients:
        t.start()
    for n in (8, 7, 8, 7):
        with open(os.path.join(tmp, "added.yaml"), "w") as f:
            f.write(f"domain: added\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n"
                    f"      requests_per_unit: {n}\n")
        os.rename(os.path.join(tmp, "added.yaml"), os.path.join(config, "added.yaml"))  # atomic
        s.wait_for("configuration reloaded")
    stop_calling.set()
    for t in clients:
        t.join()
    check(not errors, f"no call fails during reloads ({errors[:1]})")
    check(seen <= {7, 8} and seen, f"every answer during reloads is from a whole configuration ({seen})")
    s.proc.send_signal(signal.SIGHUP)
    s.wait_for("configuration reloaded")
    status, body = s.http("GET", "/metrics")
    failures_metric = [sample.value for family in text_string_to_metric_families(body.decode())
                       for sample in family.samples
                       if sample.name == RELOADS and sample.labels.get("result") == "failure"]
    check(failures_metric and failures_metric[0] >= 1, f"/metrics counts the refused reload ({failures_metric})")

    # SIGTERM: drains and exits 0, without waiting for idle connections (an idle HTTP keep-alive connection and
    # an idle gRPC channel are open): well before its 60 s --drain-timeout, which the wait below is shorter than.
    check(s.stop() == 0, "SIGTERM: exit status 0")
    s.wait_for("stopped")
    d = server(ADMIT, config, "--drain-timeout", "60s", "--response-headers", "ietf")
    r = rls_pb2_grpc.RateLimitServiceStub(d.channel).ShouldRateLimit(
        rls_pb2.RateLimitRequest(domain="mongo_cps", descriptors=[descriptor(("database", "users"))]), timeout=WAIT)
    headers = {h.key: h.value for h in r.response_headers_to_add}
    check(headers.get("RateLimit-Limit", "").startswith("500") and headers.get("RateLimit-Remaining") == "499",
          f"--response-headers ietf: RateLimit-* headers in the answer ({headers})")
    idle = http.client.HTTPConnection("127.0.0.1", d.http_port, timeout=WAIT)
    idle.request("GET", "/healthcheck")
    check(idle.getresponse().read() == b"OK", "a keep-alive connection is answered")
    d.proc.send_signal(signal.SIGTERM)
    try:
        status = d.proc.wait(timeout=WAIT)
        check(status == 0, f"SIGTERM with idle connections: exit status 0 ({status}; log: {d.log})")
    except subprocess.TimeoutExpired:
        check(False, f"SIGTERM with idle connections: exits before {WAIT}s")
    idle.close()
    d.channel.close()

    # The environment, where the command line says nothing: envoyproxy/ratelimit's names.
    env = dict(os.environ, GRPC_PORT="0", PORT="0", ADMIT_SERVE_CONFIG=config, LOG_LEVEL="info")
    e = server(ADMIT, None, env=env)
    r = rls_pb2_grpc.RateLimitServiceStub(e.channel).ShouldRateLimit(
        rls_pb2.RateLimitRequest(domain="added", descriptors=[descriptor(("k", "v"))]), timeout=WAIT)
    check(r.statuses[0].current_limit.requests_per_unit == 7, "started from the environment: serves its config")
    check(e.stop() == 0, "started from the environment, and stopped by SIGTERM")
    p = subprocess.run([ADMIT, "serve"], env=dict(env, GRPC_PORT="eighty"), capture_output=True, text=True,
                       timeout=WAIT)
    check(p.returncode == 2 and 'GRPC_PORT "eighty"' in p.stderr,
          f"a bad GRPC_PORT: exit 2 naming it ({p.returncode}: {p.stderr!r})")
    # envoyproxy/ratelimit's RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config layout, and its
    # LIMIT_RESPONSE_HEADERS_ENABLED: the RateLimit-* headers in the answer.
    root = os.path.join(tmp, "runtime root")
    shutil.copytree(config, os.path.join(root, "ratelimit", "config"))
    runtime_env = dict(no_config_env(), GRPC_PORT="0", PORT="0", RUNTIME_ROOT=root,
                       RUNTIME_SUBDIRECTORY="ratelimit", LIMIT_RESPONSE_HEADERS_ENABLED="true")
    rt = server(ADMIT, None, env=runtime_env)
    r = rls_pb2_grpc.RateLimitServiceStub(rt.channel).ShouldRateLimit(
        rls_pb2.RateLimitRequest(domain="added", descriptors=[descriptor(("k", "v"))]), timeout=WAIT)
    check(r.statuses[0].current_limit.requests_per_unit == 7,
          "RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config: serves the files there")
    headers = {h.key.lower(): h.value for h in r.response_headers_to_add}
    check(headers.get("ratelimit-limit", "").startswith("7") and "ratelimit-remaining" in headers,
          f"LIMIT_RESPONSE_HEADERS_ENABLED=true: RateLimit-* headers in the answer ({headers})")
    check(rt.stop() == 0, "started from RUNTIME_ROOT, and stopped by SIGTERM")
    # --config (or ADMIT_SERVE_CONFIG, as the systemd unit sets) over a RUNTIME_ROOT left in the environment: the log
    # says which directory it reads, and that RUNTIME_ROOT is not it.
    both = server(ADMIT, None, "--config", config, env=runtime_env)
    unused = both.wait_for("RUNTIME_ROOT is set but not used")
    check(unused.get("config") == config and unused.get("because") == "--config is given",
          f"--config with RUNTIME_ROOT set: a warning names the directory read ({unused})")
    check(both.stop() == 0, "--config with RUNTIME_ROOT set: stopped by SIGTERM")
    p = subprocess.run([ADMIT, "serve"], env=dict(runtime_env, LIMIT_RESPONSE_HEADERS_ENABLED="maybe"),
                       capture_output=True, text=True, timeout=WAIT)
    check(p.returncode == 2 and 'LIMIT_RESPONSE_HEADERS_ENABLED "maybe"' in p.stderr,
          f"a bad LIMIT_RESPONSE_HEADERS_ENABLED: exit 2 naming it ({p.returncode}: {p.stderr!r})")
    p = subprocess.run([ADMIT, "serve", "--grpc-port", "0", "--http-port", "0"], env=no_config_env(),
                       capture_output=True, text=True, timeout=WAIT)
    check(p.returncode == 2 and "--config" in p.stderr,
          f"no configuration directory given: exit 2 naming --config ({p.returncode}: {p.stderr!r})")

    # Without port flags: envoyproxy/ratelimit's ports, gRPC 8081 and HTTP 8080 (when this machine has them free).
    if all(port_free(port) for port in (8080, 8081)):
        dflt = server(ADMIT, None, "--config", config, env=no_config_env())
        check((dflt.grpc_port, dflt.http_port) == (8081, 8080),
              f"the default ports are gRPC 8081 and HTTP 8080 ({dflt.grpc_port}, {dflt.http_port})")
        conn = http.client.HTTPConnection("127.0.0.1", 8080, timeout=WAIT)
        conn.request("GET", "/healthcheck")
        check(conn.getresponse().read() == b"OK", "the default HTTP port answers /healthcheck")
        conn.close()
        check(dflt.stop() == 0, "started on the default ports, and stopped by SIGTERM")
    else:
        print("note: port 8080 or 8081 is in use on this machine: the default ports were not tried")

    # --redis: the same answers from a real redis-server; when Redis is gone, the failure policy answers.
    redis_binary = shutil.which("redis-server")
    if redis_binary:
        redis = redis_server(redis_binary)
        url, redis_port = redis.url, redis.port
        r_s = server(ADMIT, config, "--redis", url, "--redis-required")
        stub = rls_pb2_grpc.RateLimitServiceStub(r_s.channel)
        req = rls_pb2.RateLimitRequest(domain="rl", descriptors=[descriptor(("source_cluster", "proxy"),
                                                                            ("destination_cluster", "mock"))])
        for _ in range(2):  # retried once when the minute turned between the two calls
            first, second = stub.ShouldRateLimit(req, timeout=WAIT), stub.ShouldRateLimit(req, timeout=WAIT)
            if second.statuses[0].duration_until_reset.seconds <= first.statuses[0].duration_until_reset.seconds:
                break
        check(second.overall_code == Code.OVER_LIMIT, f"--redis: the second call in a minute is OVER_LIMIT")
        # A concurrency rule on Redis: one limit for the fleet. The lease one instance grants holds the other's
        # calls back, and the other instance releases it by its id.
        other = server(ADMIT, config, "--redis", url, "--redis-required")
        export_req = rls_pb2.RateLimitRequest(domain="jobs", descriptors=[descriptor(("export", "nightly"))])
        r = stub.ShouldRateLimit(export_req, timeout=WAIT)
        leases = [h.value for h in r.response_headers_to_add if h.key == "x-admit-lease"]
        check(r.overall_code == Code.OK and len(leases) == 1, f"--redis: a concurrency rule admits with a lease ({r})")
        other_stub = rls_pb2_grpc.RateLimitServiceStub(other.channel)
        check(other_stub.ShouldRateLimit(export_req, timeout=WAIT).overall_code == Code.OVER_LIMIT,
              "--redis: while one instance's lease is held, the other's export is OVER_LIMIT")
        if leases:
            status, body = other.http("POST", "/release", json.dumps({"lease": leases[0]}))
            check(status == 200 and json.loads(body)["released"] is True,
                  f"--redis: the other instance releases the lease: 200 ({status} {body!r})")
            status, body = r_s.http("POST", "/release", json.dumps({"lease": leases[0]}))
            check(status == 404, f"--redis: released once only: 404 ({status})")
        r = other_stub.ShouldRateLimit(export_req, timeout=WAIT)
        check(r.overall_code == Code.OK, "--redis: after the release, the other instance's export is admitted")
        check(other.stop() == 0, "--redis: the second instance exits 0 on SIGTERM")
        redis.kill()
        r = stub.ShouldRateLimit(req, timeout=WAIT)
        check(r.overall_code == Code.OK, "--redis, Redis gone: fail open answers OK")
        if leases:
            # Not 404 "no such lease": Redis could not be asked, and a lease may still be held.
            status, body = r_s.http("POST", "/release", json.dumps({"lease": leases[0]}))
            check(status == 503 and json.loads(body)["released"] is False and "unknown" in json.loads(body)["error"],
                  f"--redis, Redis gone: /release cannot tell: 503 ({status} {body!r})")
        check(r_s.stop() == 0, "--redis: SIGTERM exits 0")
        closed = server(ADMIT, config, "--redis", url, "--fail-closed")
        check(closed.listening.get("failure_policy") == "closed" and closed.listening.get("shadow_mode") is False,
              f"--fail-closed: the listening line says so ({closed.listening})")
        r = rls_pb2_grpc.RateLimitServiceStub(closed.channel).ShouldRateLimit(req, timeout=WAIT)
        check(r.overall_code == Code.OVER_LIMIT, "--redis --fail-closed, Redis unreachable: OVER_LIMIT")
        check(closed.stop() == 0, "--fail-closed: SIGTERM exits 0")
        p = subprocess.run([ADMIT, "serve", "--config", config, "--redis", url, "--redis-required"],
                           capture_output=True, text=True, timeout=WAIT)
        check(p.returncode == 69 and str(redis_port) in p.stderr,
              f"--redis-required, Redis unreachable: exit 69 naming it ({p.returncode}: {p.stderr!r})")
        p = subprocess.run([ADMIT, "serve", "--config", config, "--redis-required"],
                           env=dict(os.environ, ADMIT_SERVE_REDIS=url), capture_output=True, text=True,
                           timeout=WAIT)
        check(p.returncode == 69 and str(redis_port) in p.stderr,
              f"ADMIT_SERVE_REDIS is --redis: exit 69 naming it ({p.returncode}: {p.stderr!r})")
        # The failure policy and --redis-required from the environment (a packaged service has no command line).
        p = subprocess.run([ADMIT, "serve", "--config", config, "--redis", url],
                           env=dict(os.environ, ADMIT_SERVE_REDIS_REQUIRED="true"), capture_output=True, text=True,
                           timeout=WAIT)
        check(p.returncode == 69, f"ADMIT_SERVE_REDIS_REQUIRED=true is --redis-required: exit 69 ({p.returncode})")
        ports = ("--config", config, "--grpc-port", "0", "--http-port", "0", "--redis", url)
        closed = server(ADMIT, None, *ports, env=dict(no_config_env(), ADMIT_SERVE_FAIL_CLOSED="true"))
        r = rls_pb2_grpc.RateLimitServiceStub(closed.channel).ShouldRateLimit(req, timeout=WAIT)
        check(r.overall_code == Code.OVER_LIMIT, "ADMIT_SERVE_FAIL_CLOSED=true, Redis unreachable: OVER_LIMIT")
        check(closed.stop() == 0, "ADMIT_SERVE_FAIL_CLOSED=true: SIGTERM exits 0")
        opened = server(ADMIT, None, *ports, "--fail-open", env=dict(no_config_env(), ADMIT_SERVE_FAIL_CLOSED="1"))
        r = rls_pb2_grpc.RateLimitServiceStub(opened.channel).ShouldRateLimit(req, timeout=WAIT)
        check(r.overall_code == Code.OK, "--fail-open over ADMIT_SERVE_FAIL_CLOSED=1: the command line wins, OK")
        check(opened.stop() == 0, "--fail-open: SIGTERM exits 0")
        p = subprocess.run([ADMIT, "serve", "--config", config],
                           env=dict(os.environ, ADMIT_SERVE_FAIL_CLOSED="sometimes"), capture_output=True, text=True,
                           timeout=WAIT)
        check(p.returncode == 2 and 'ADMIT_SERVE_FAIL_CLOSED "sometimes"' in p.stderr,
              f"a bad ADMIT_SERVE_FAIL_CLOSED: exit 2 naming it ({p.returncode}: {p.stderr!r})")

    # A configuration refused at start: exit 2, naming file and line.
    bad = os.path.join(tmp, "bad config")
    os.mkdir(bad)
    with open(os.path.join(bad, "bad.yaml"), "w") as f:
        f.write("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n"
                "      requests_per_unit: 1\n")
    p = subprocess.run([ADMIT, "serve", "--config", bad, "--grpc-port", "0", "--http-port", "0"],
                       capture_output=True, text=True, timeout=WAIT)
    check(p.returncode == 2 and re.search(r"bad\.yaml:5: .*fortnight", p.stderr),
          f"a bad configuration at start: exit 2 naming file:line ({p.returncode}: {p.stderr!r})")
    # Bad flags: exit 2 naming the flag.
    for args, words in ((["--grpc-port", "eighty"], r"--grpc-port \"eighty\""),
                        (["--response-headers", "loud"], r"--response-headers \"loud\""),
                        (["--log-level", "chatty"], r"--log-level \"chatty\""),
                        (["--drain-timeout", "soon"], r"--drain-timeout \"soon\""),
                        (["--frobnicate"], r"frobnicate")):
        p = subprocess.run([ADMIT, "serve", "--config", config, *args], capture_output=True, text=True,
                           timeout=WAIT)
        check(p.returncode == 2 and re.search(words, p.stderr), f"{args}: exit 2 naming it ({p.returncode}: "
                                                                f"{p.stderr!r})")


if __name__ == "__main__":
    sys.exit(run_in_scratch("admit serve e2e ", main))  # a space in the path, on purpose
