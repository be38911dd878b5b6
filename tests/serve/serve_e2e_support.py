"""Helpers shared by the end-to-end tests of `admit serve` (serve_e2e_test.py, serve_examples_e2e_test.py): checks
that are counted and reported, gRPC stubs generated at test time from proto/ by protoc and grpc_python_plugin, an
`admit serve` process with its JSON log read on a thread, redis-server processes on free ports, and a Redis Cluster
of 3 masters. Every process started here is killed by kill_started(), whatever happened.

Needs Debian's python3 (/usr/bin/python3) with python3-grpcio; a missing module makes the importing test exit 77
(skipped).
"""
import http.client
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import grpc
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

WAIT = 30  # seconds: the longest any expected event (a log line, an exit) may take on a loaded machine

# The service's metric names (engine/serve_metrics.hpp): the hits decided and those over the limit, by domain and
# rule, the shadow-mode overrides, the requests by code, the backend's errors, and the reloads by result.
HITS = "admit_serve_hits_total"
OVER = "admit_serve_over_limit_total"
SHADOW = "admit_serve_shadow_mode_total"
RELOADS = "admit_serve_config_reloads_total"
REQUESTS = "admit_serve_requests_total"
BACKEND_ERRORS = "admit_serve_backend_errors_total"

failures = []
checks = 0
started = []  # every process started, killed by kill_started()


def check(cond, what):
    """Counts one check; a failed one is printed and remembered (the test goes on)."""
    global checks
    checks += 1
    if not cond:
        what = " ".join(what.split())  # a protobuf message in it, on one line
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


def finish():
    """The exit status of a test: 1 when a check failed, else 0."""
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        return 1
    print(f"all {checks} checks passed", flush=True)
    return 0


def kill_started():
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def run_in_scratch(prefix, body):
    """A test's main: body(tmp) in a scratch directory of its own (`prefix` with a space in it, on purpose), then the
    exit status: body's when it returns one (77: skipped), else finish()'s. Every process started is killed and the
    directory removed, whatever happened."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        status = body(tmp)
    finally:
        kill_started()
        shutil.rmtree(tmp, ignore_errors=True)
    return status if status is not None else finish()


def generate_stubs(proto_dir, out, protoc, grpc_python_plugin):
    """Python stubs of every .proto under proto_dir, generated into `out` and importable afterwards."""
    protos = []
    for root, _, files in os.walk(proto_dir):
        for f in files:
            if f.endswith(".proto"):
                protos.append(os.path.relpath(os.path.join(root, f), proto_dir))
    os.makedirs(out)
    subprocess.run([protoc, "-I", proto_dir, f"--python_out={out}", f"--grpc_python_out={out}",
                    f"--plugin=protoc-gen-grpc_python={grpc_python_plugin}"] + sorted(protos), check=True)
    sys.path.insert(0, out)
    # grpc.health.v1 lives under the package `grpc`, which grpcio already is: its stubs join that package's path.
    grpc.__path__.append(os.path.join(out, "grpc"))


class server:
    """`admit serve --grpc-port 0 --http-port 0` and its log, read line by line on a thread."""

    def __init__(self, admit, config_dir, *extra, env=None):
        # With `env`, only `extra` is given on the command line: the rest comes from the environment.
        args = list(extra) if env else ["--config", config_dir, "--grpc-port", "0", "--http-port", "0",
                                        "--log-level", "debug", *extra]
        self.proc = subprocess.Popen([admit, "serve", *args], stderr=subprocess.PIPE, text=True, errors="replace",
                                     env=env)
        started.append(self.proc)
        self.lines = queue.Queue()
        self.log = []
        threading.Thread(target=self._read, daemon=True).start()
        listening = self.wait_for("listening")
        self.listening = listening
        self.grpc_port = listening["grpc_port"]
        self.http_port = listening["http_port"]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")

    def _read(self):
        for line in self.proc.stderr:
            self.lines.put(line)

    def wait_for(self, msg, within=WAIT):
        """The next log entry whose msg is `msg` (a dict), reading at most `within` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.log.append(line)
            try:
                entry = json.loads(line)
            except ValueError:
                raise AssertionError(f"a log line that is not JSON: {line!r}")
            if entry.get("msg") == msg:
                return entry
        raise AssertionError(f"no log line {msg!r} within {within}s; log so far: {''.join(self.log)}")

    def http(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=WAIT)
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        res = conn.getresponse()
        data = res.read()
        conn.close()
        return res.status, data

    def stop(self):
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=WAIT)


def no_config_env():
    """The environment without the variables that name a configuration directory, ports, their sharing or Redis."""
    names = ("ADMIT_SERVE_CONFIG", "RUNTIME_ROOT", "GRPC_PORT", "PORT", "ADMIT_SERVE_GRPC_PORT",
             "ADMIT_SERVE_HTTP_PORT", "ADMIT_SERVE_REUSE_PORT", "ADMIT_SERVE_REDIS", "REDIS_URL", "BACKEND_TYPE")
    return {k: v for k, v in os.environ.items() if k not in names}


def descriptor(*pairs, hits=None):
    """A RateLimitDescriptor of (key, value) entries, with its own hits_addend when `hits` is given."""
    from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
    d = ratelimit_pb2.RateLimitDescriptor()
    for k, v in pairs:
        e = d.entries.add()
        e.key = k
        e.value = v
    if hits is not None:
        d.hits_addend.value = hits
    return d


def free_port(taken=()):
    """A loopback TCP port free now (another process may still take it: callers retry)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in taken:
            return port


def wait_accepting(port, proc=None):
    """Until something accepts TCP connections on the loopback `port`; False when `proc` exited or WAIT passed."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.01)
    return False


class redis_server:
    """A redis-server on a loopback port (free_port() unless given), persistence off; restartable on the same port."""

    def __init__(self, binary, port=None, extra=(), workdir=None):
        self.binary, self.extra, self.workdir = binary, list(extra), workdir
        for _ in range(20):
            self.port = port or free_port()
            if self.start():
                return
            if port:
                break
        raise AssertionError(f"could not start redis-server on port {self.port}")

    def start(self):
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                *self.extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, cwd=self.workdir)
        started.append(self.proc)
        return wait_accepting(self.port, self.proc)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def kill(self):
        self.proc.kill()
        self.proc.wait()


class redis_cluster:
    """3 redis-servers with cluster mode on, joined into a cluster of 3 masters (no replicas) by
    `redis-cli --cluster create ... --cluster-yes`, ready once every node reports cluster_state:ok."""

    def __init__(self, server_binary, cli_binary, workdir):
        self.cli = cli_binary
        self.nodes = []
        taken = set()
        for _ in range(3):
            for _ in range(20):
                port, bus = free_port(taken), free_port(taken)
                taken.update((port, bus))
                # The bus port is `--cluster-port` (Redis 7); the node's file of the cluster's shape goes to workdir.
                try:
                    node = redis_server(server_binary, port, ["--cluster-enabled", "yes", "--cluster-port", str(bus),
                                                              "--cluster-config-file", f"nodes-{port}.conf",
                                                              "--cluster-node-timeout", "5000"], workdir)
                except AssertionError:
                    continue
                self.nodes.append(node)
                break
            else:
                raise AssertionError("could not start a cluster node")
        subprocess.run([cli_binary, "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, stdout=subprocess.DEVNULL,
                       timeout=60)
        deadline = time.monotonic() + WAIT
        while not all("cluster_state:ok" in self.admin(n, "CLUSTER", "INFO") for n in self.nodes):
            if time.monotonic() > deadline:
                raise AssertionError("the cluster's state never became ok")
            time.sleep(0.05)

    def admin(self, node, *command):
        p = subprocess.run([self.cli, "-p", str(node.port), *command], capture_output=True, text=True, timeout=WAIT)
        return p.stdout

    @property
    def url(self):
        return self.nodes[0].url


def unread_bytes(port):
    """The bytes received and not yet read on the loopback connections whose local port is `port` (the server's side
    of them), from /proc/net/tcp."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "01":  # ESTABLISHED
                total += int(queues.split(":")[1], 16)
    return total
