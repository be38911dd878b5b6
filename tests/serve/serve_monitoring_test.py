#!/usr/bin/python3
"""The monitoring examples of `admit serve` (examples/serve/monitoring/) against a running `admit serve`: every metric
the Grafana dashboard and the Prometheus alerting rules name is one its /metrics exports (a histogram's _bucket, _sum
and _count included), the dashboard is JSON whose panels each query something, and the rules are Prometheus's rule
file format with an alert for each thing an operator is paged for.

usage: serve_monitoring_test.py ADMIT CONFIG_DIR MONITORING_DIR
Exit status: 0 passed, 1 failed, 77 skipped (a Python module is missing).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_e2e_support import check, finish, kill_started, server  # noqa: E402

try:
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

ADMIT, CONFIG_DIR, MONITORING = sys.argv[1:4]
NAME = re.compile(r"\badmit_serve_[a-z_]+")


def exported(s):
    """The metric names /metrics exports: each family of a `# TYPE` line, with a histogram's three series."""
    status, body = s.http("GET", "/metrics")
    check(status == 200, f"/metrics answers 200 ({status})")
    names = set()
    for line in body.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names.update(name + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


def dashboard_exprs():
    with open(os.path.join(MONITORING, "grafana-dashboard.json")) as f:
        dash = json.load(f)
    exprs = []
    for p in dash["panels"]:
        targets = [t["expr"] for t in p.get("targets", [])]
        check(targets and all(NAME.search(e) for e in targets), f"dashboard panel {p['title']!r} queries admit's metrics")
        exprs += targets
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            exprs.append(v["definition"])
    return exprs


def alert_exprs():
    with open(os.path.join(MONITORING, "alerts.yaml")) as f:
        rules = yaml.safe_load(f)
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    for want in ("AdmitServeBackendFailing", "AdmitServeFailurePolicyDeciding", "AdmitServeOverLimitRatioHigh",
                 "AdmitServeConfigReloadFailed", "AdmitServeSlowDecisions"):
        check(want in alerts, f"an alert {want}")
    for name, r in alerts.items():
        check(r.get("expr") and r.get("labels", {}).get("severity") and r.get("annotations", {}).get("summary"),
              f"alert {name} has an expression, a severity and a summary")
    return [r["expr"] for r in alerts.values()]


def main():
    try:
        s = server(ADMIT, CONFIG_DIR)
        names = exported(s)
        for where, exprs in (("the dashboard", dashboard_exprs()), ("the alerts", alert_exprs())):
            named = {n for e in exprs for n in NAME.findall(e)}
            check(named, f"{where} name admit's metrics")
            for n in sorted(named):
                check(n in names, f"{where}: {n} is a metric /metrics exports")
        check(s.stop() == 0, "exits 0")
    finally:
        kill_started()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
