"""make prometheus-test: the monitoring files in docker/ against the real
thing, so that the dashboard and the alerts cannot drift from the metric
names normd exports.

  1. promtool: `check config` on docker/prometheus/prometheus.yml, `check
     rules` on alerts.yml, `test rules` on alerts_test.yml (the alerts' unit
     tests);
  2. docker/grafana: the dashboard JSON's structure (unique panel ids, a
     gridPos inside the 24-column grid with no overlaps, targets with a
     PromQL expr and a refId, every datasource the provisioned one) and the
     provisioning files that load it (Grafana itself is not a Debian package:
     compose runs its official image, so it is not run here);
  3. live: two normd replicas on loopback (the second with max_inflight 1, to
     shed) scraped every second by Debian's prometheus running alerts.yml;
     traffic in two rounds (2xx on every kind of route including KServe, 4xx,
     503s from overloading the small replica); then every panel's every
     expression, with Grafana's variables put in, must return at least one
     finite sample through /api/v1/query, the replica variable must list both
     replicas, every alert rule must evaluate without error, and killing a
     replica must make NormdReplicaDown pending for it.

Standard library only. Last line: "prometheus: N passed, M failed".
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deploylib import Checks, free_port, healthy, request, wait_until  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
NORMD = os.path.join(REPO, os.environ.get("NORMD_BIN", "build/normd"))
PROMETHEUS = os.environ.get("PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("PROMTOOL", "/usr/bin/promtool")
PROM_DIR = os.path.join(REPO, "docker/prometheus")
GRAFANA_DIR = os.path.join(REPO, "docker/grafana")
DASHBOARD = os.path.join(GRAFANA_DIR, "dashboards/normd.json")
DATASOURCES = os.path.join(GRAFANA_DIR, "provisioning/datasources/prometheus.yaml")
DASHBOARD_PROVIDERS = os.path.join(GRAFANA_DIR, "provisioning/dashboards/normd.yaml")
COMPOSE = os.path.join(REPO, "docker/compose.yaml")

SCRAPE_S = 1
# What Grafana would put for its own variables. The window covers the whole
# run (traffic starts a few seconds after Prometheus), so a counter that
# moved at any point has a rate.
GRAFANA_BUILTINS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1m"}
# The small replica: one worker, one job at a time, so concurrent large
# requests are shed with 503.
SHED_FLAGS = ["--threads", "1", "--max-inflight", "1"]
SHED_CLIENTS = 6
SHED_ROWS, SHED_COLS = 256, 4096   # 1M float32 elements, 4 MiB as .npy


def run(*argv, timeout=60):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    out = (p.stdout + p.stderr).strip()
    assert p.returncode == 0, "%s exited %d:\n%s" % (" ".join(argv), p.returncode, out)
    return out


# ---- 1. promtool ------------------------------------------------------------------

def check_config():
    run(PROMTOOL, "check", "config", os.path.join(PROM_DIR, "prometheus.yml"))
    return "docker/prometheus/prometheus.yml"


def check_rules():
    out = run(PROMTOOL, "check", "rules", os.path.join(PROM_DIR, "alerts.yml"))
    m = re.search(r"SUCCESS: (\d+) rules found", out)
    assert m and int(m.group(1)) > 0, out
    return "%s rules" % m.group(1)


def test_rules():
    # promtool resolves rule_files relative to the test file.
    out = run(PROMTOOL, "test", "rules", os.path.join(PROM_DIR, "alerts_test.yml"))
    assert "SUCCESS" in out, out
    with open(os.path.join(PROM_DIR, "alerts_test.yml")) as f:
        cases = len(re.findall(r"(?m)^\s+- eval_time:", f.read()))
    return "%d alert / expression cases" % cases


# ---- 2. the dashboard's structure -------------------------------------------------

def provisioned_uid():
    """The uid in the datasource provisioning file (read without a YAML
    parser: one `uid:` line)."""
    with open(DATASOURCES) as f:
        uids = re.findall(r"(?m)^\s+uid:\s*(\S+)\s*$", f.read())
    assert len(uids) == 1, "want one datasource uid in %s, got %r" % (DATASOURCES, uids)
    return uids[0]


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(dash):
    """Panels, with those nested in collapsed rows."""
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []):
            yield q


def dashboard_structure():
    uid = provisioned_uid()
    dash = load_dashboard()
    assert dash.get("uid") and dash.get("title"), "dashboard without uid or title"
    assert isinstance(dash.get("schemaVersion"), int), "no schemaVersion"
    panels = list(all_panels(dash))
    assert panels, "no panels"
    ids, cells, exprs = set(), {}, 0
    for p in panels:
        name = "panel %r (%s)" % (p.get("title"), p.get("id"))
        assert isinstance(p.get("id"), int), "%s: id is not an integer" % name
        assert p["id"] not in ids, "%s: duplicate id" % name
        ids.add(p["id"])
        assert p.get("title"), "%s: no title" % name
        g = p.get("gridPos") or {}
        assert all(isinstance(g.get(k), int) for k in "hwxy"), "%s: gridPos %r" % (name, g)
        assert g["w"] > 0 and g["h"] > 0 and g["x"] >= 0 and g["y"] >= 0 \
            and g["x"] + g["w"] <= 24, "%s: gridPos %r outside the 24-column grid" % (name, g)
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "%s overlaps panel %s" % (name, cells[(x, y)])
                cells[(x, y)] = p["id"]
        if p.get("type") == "row":
            continue
        assert (p.get("datasource") or {}).get("uid") == uid, \
            "%s: datasource %r, provisioned uid %r" % (name, p.get("datasource"), uid)
        targets = p.get("targets") or []
        assert targets, "%s: no targets" % name
        refs = [t.get("refId") for t in targets]
        assert all(refs) and len(set(refs)) == len(refs), "%s: refIds %r" % (name, refs)
        for t in targets:
            assert isinstance(t.get("expr"), str) and t["expr"].strip(), \
                "%s: target %s has no expr" % (name, t.get("refId"))
            assert (t.get("datasource") or {}).get("uid", uid) == uid, \
                "%s: target %s datasource %r" % (name, t["refId"], t.get("datasource"))
            exprs += 1
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            assert (v.get("datasource") or {}).get("uid") == uid, \
                "variable %s: datasource %r" % (v.get("name"), v.get("datasource"))
    return "%d panels, %d expressions, datasource uid %s" % (len(panels), exprs, uid)


def provisioning_fits_compose():
    """The provider loads the directory compose mounts the dashboards at, and
    the datasource points at compose's prometheus service."""
    with open(COMPOSE) as f:
        compose = f.read()
    with open(DASHBOARD_PROVIDERS) as f:
        providers = f.read()
    with open(DATASOURCES) as f:
        datasources = f.read()
    m = re.search(r"(?m)^\s+path:\s*(\S+)\s*$", providers)
    assert m, "no options.path in %s" % DASHBOARD_PROVIDERS
    assert "./grafana/dashboards:%s" % m.group(1) in compose, \
        "compose does not mount docker/grafana/dashboards at %s" % m.group(1)
    assert "./grafana/provisioning:/etc/grafana/provisioning" in compose, \
        "compose does not mount docker/grafana/provisioning"
    url = re.search(r"(?m)^\s+url:\s*(\S+)\s*$", datasources).group(1)
    host = urllib.parse.urlsplit(url).hostname
    assert re.search(r"(?m)^  %s:\s*$" % re.escape(host), compose), \
        "datasource url %s: no compose service %r" % (url, host)
    for f in ("prometheus.yml", "alerts.yml"):
        assert "./prometheus/%s:/etc/prometheus/%s" % (f, f) in compose, \
            "compose does not mount docker/prometheus/%s" % f
    return "dashboards at %s, datasource %s" % (m.group(1), url)


def expand(expr, variables):
    """expr with Grafana's variables ($name, ${name}) replaced; an unknown one
    is an error (Prometheus would reject the query anyway)."""
    def sub(m):
        name = m.group(1) or m.group(2)
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        if name in variables:
            return variables[name]
        raise AssertionError("unknown variable $%s in %s" % (name, expr))
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, expr)


def dashboard_variables(dash):
    """Each template variable's value when "All" is picked (its allValue)."""
    out = {}
    for v in dash.get("templating", {}).get("list", []):
        assert v.get("includeAll") and v.get("allValue"), \
            "variable %s: the test puts in its allValue, and it has none" % v.get("name")
        out[v["name"]] = v["allValue"]
    return out


# ---- 3. live --------------------------------------------------------------------

class Normd:
    def __init__(self, tmp, name, flags):
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.log_path = os.path.join(tmp, "normd-%s.log" % name)
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [NORMD, "--config", "config/normd.json", "--host", "127.0.0.1",
                 "--port", str(self.port), "--log-level", "warn"] + flags,
                cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        if not wait_until(lambda: healthy(self.port) or self.proc.poll() is not None, 10) \
                or self.proc.poll() is not None:
            raise AssertionError("normd %s did not start: %s" % (name, self.log()))

    def log(self):
        with open(self.log_path) as f:
            return f.read()[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


class Prometheus:
    def __init__(self, tmp, targets):
        self.port = free_port()
        self.log_path = os.path.join(tmp, "prometheus.log")
        config = os.path.join(tmp, "prometheus.yml")
        # docker/prometheus/prometheus.yml's normd job finds the replicas by
        # compose's DNS; here they are static loopback targets, same job name
        # (the alerts and the dashboard select job="normd") and the same rules.
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: %ds\n  evaluation_interval: %ds\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: normd\n    static_configs:\n"
                    "      - targets: [%s]\n"
                    % (SCRAPE_S, SCRAPE_S, json.dumps(os.path.join(PROM_DIR, "alerts.yml")),
                       ", ".join(json.dumps(t) for t in targets)))
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [PROMETHEUS, "--config.file", config,
                 "--storage.tsdb.path", os.path.join(tmp, "tsdb"),
                 "--web.listen-address", "127.0.0.1:%d" % self.port],
                cwd=tmp, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        ready = wait_until(lambda: self.proc.poll() is None and
                           request(self.port, "GET", "/-/ready", timeout=2)[0] == 200, 30, 0.2)
        if not ready:
            raise AssertionError("prometheus did not get ready:\n%s" % self.log())

    def log(self):
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def api(self, path, **params):
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (self.port, path,
                                                    urllib.parse.urlencode(params, doseq=True))
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc.get("status") == "success", doc
        return doc["data"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def npy_float32(rows, cols):
    """A C-order float32 .npy (format 1.0) of rows x cols ramps."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    import array
    data = array.array("f", (float(i % 97) for i in range(cols))) * rows
    if sys.byteorder != "little":
        data.byteswap()
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() \
        + data.tobytes()


X = [[1, 2, 3, 4], [2, 4, 6, 8]]
SUCCESSES = [
    ("POST", "/v1/norm/layer", {"input": X}),
    ("POST", "/v1/norm/rms", {"input": X}),
    ("POST", "/v1/norm/batch", {"input": X}),
    ("POST", "/v1/norm/group", {"input": [[[1, 2], [3, 4], [5, 6], [7, 8]]], "num_groups": 2}),
    ("POST", "/v1/norm/instance", {"input": [[[1, 2, 3], [4, 5, 7]]]}),
    ("POST", "/v1/moments", {"input": X}),
    ("POST", "/v2/models/layer_norm/infer",
     {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
                  "data": [1, 2, 3, 4, 2, 4, 6, 8]}]}),
    ("GET", "/v1/info", None),
]
CLIENT_ERRORS = [
    ("POST", "/v1/norm/layer", b'{"input": [[1, 2'),          # 400 malformed_json
    ("POST", "/v1/norm/layer", {"inptu": X}),                # 422 unknown_field
    ("GET", "/v1/no-such-route", None),                      # 404
]


def send_round(replicas, statuses):
    for r in replicas:
        for method, path, body in SUCCESSES + CLIENT_ERRORS:
            headers = {"Content-Type": "application/json"} if body is not None else None
            status, _, _ = request(r.port, method, path, body, headers=headers)
            statuses[status] = statuses.get(status, 0) + 1


def overload(replica, body, statuses):
    """SHED_CLIENTS concurrent large requests at a replica with max_inflight 1;
    returns how many were shed."""
    got = []

    def one():
        try:
            got.append(request(replica.port, "POST", "/v1/norm/layer", body,
                               headers={"Content-Type": "application/x-npy",
                                        "Accept": "application/x-npy"})[0])
        except OSError as e:
            got.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(SHED_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for s in got:
        statuses[s] = statuses.get(s, 0) + 1
    return got.count(503)


def finite_samples(result):
    """Samples of an instant-query result (vector or scalar) that are numbers."""
    if result["resultType"] == "scalar":
        values = [result["result"][1]]
    else:
        values = [s["value"][1] for s in result["result"]]
    return [v for v in values if math.isfinite(float(v))]


class Live:
    """The replicas, Prometheus and the traffic, shared by the live checks."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="normd-prometheus-")
        self.replicas = []
        self.prom = None
        self.statuses = {}

    def start(self):
        self.replicas = [Normd(self.tmp, "a", []), Normd(self.tmp, "shed", SHED_FLAGS)]
        self.prom = Prometheus(self.tmp, [r.addr for r in self.replicas])

        def all_up():
            active = self.prom.api("targets")["activeTargets"]
            return len(active) == len(self.replicas) and all(t["health"] == "up" for t in active)
        if not wait_until(all_up, 15, 0.25):
            raise AssertionError("targets not up: %s\n%s" % (self.prom.api("targets"),
                                                            self.prom.log()))
        return "normd at %s; prometheus at 127.0.0.1:%d, scrape every %d s" % (
            ", ".join(r.addr for r in self.replicas), self.prom.port, SCRAPE_S)

    def traffic(self):
        # Two rounds, each followed by scrapes: a series a round creates has
        # moved by the next one, so its rate is not zero.
        body = npy_float32(SHED_ROWS, SHED_COLS)
        shed = 0
        for _ in range(2):
            send_round(self.replicas, self.statuses)
            for _ in range(5):
                shed += overload(self.replicas[1], body, self.statuses)
                if shed:
                    break
            time.sleep(2.5 * SCRAPE_S)
        assert shed, "no 503 from a replica with max_inflight 1: %r" % self.statuses
        for code in (200, 400, 404, 422, 503):
            assert self.statuses.get(code), "no %d answered: %r" % (code, self.statuses)
        time.sleep(2 * SCRAPE_S)
        return "statuses %s" % ", ".join("%s: %d" % kv for kv in sorted(
            self.statuses.items(), key=lambda kv: str(kv[0])))

    def stop(self):
        if self.prom:
            self.prom.stop()
        for r in self.replicas:
            r.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def panel_queries(live):
    dash = load_dashboard()
    variables = dashboard_variables(dash)
    empty, n = [], 0
    for p in all_panels(dash):
        for t in p.get("targets", []):
            expr = expand(t["expr"], variables)
            n += 1
            try:
                samples = finite_samples(live.prom.api("query", query=expr))
            except urllib.error.HTTPError as e:  # 400: the query does not parse
                empty.append("%r %s: %s %s" % (p["title"], t["refId"], e, e.read()[:300]))
                continue
            if not samples:
                empty.append("%r %s: no finite sample for %s" % (p["title"], t["refId"], expr))
    assert not empty, "%d of %d expressions:\n  %s" % (len(empty), n, "\n  ".join(empty))
    return "%d expressions, each with at least one finite sample" % n


def variable_values(live):
    """Grafana's label_values(metric, label) is the label-values API with a
    match[]: every replica must be listed."""
    dash = load_dashboard()
    got = []
    for v in dash.get("templating", {}).get("list", []):
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q.strip())
        assert m, "variable %s: query %r is not label_values(metric, label)" % (v["name"], q)
        values = live.prom.api("label/%s/values" % m.group(2), **{"match[]": m.group(1)})
        missing = [r.addr for r in live.replicas if r.addr not in values]
        assert not missing, "variable %s: %s missing from %r" % (v["name"], missing, values)
        got.append("%s = %s" % (v["name"], values))
    return "; ".join(got)


def rules_evaluate(live):
    with open(os.path.join(PROM_DIR, "alerts.yml")) as f:
        want = set(re.findall(r"(?m)^\s+- alert:\s*(\w+)", f.read()))

    def evaluated():
        # Loaded, and each evaluated at least once (a rule not yet evaluated
        # has Go's zero time, year 0001, as its lastEvaluation).
        rules = [r for g in live.prom.api("rules")["groups"] for r in g["rules"]]
        done = len(rules) == len(want) and \
            all(not r.get("lastEvaluation", "0001").startswith("0001") for r in rules)
        return rules if done else None
    rules = wait_until(evaluated, 10, 0.25)
    assert rules, "rules not loaded: %s" % live.prom.api("rules")
    assert {r["name"] for r in rules} == want, (sorted(r["name"] for r in rules), sorted(want))
    bad = ["%s: %s %s" % (r["name"], r.get("health"), r.get("lastError")) for r in rules
           if r.get("health") != "ok"]
    assert not bad, "rules that do not evaluate: %s" % bad
    firing = [r["name"] for r in rules if r.get("state") == "firing"]
    assert not firing, "firing with every replica up: %s" % firing
    return "%d rules evaluate (health ok), none firing" % len(rules)


def replica_down_alert(live):
    victim = live.replicas[1]
    victim.stop()

    def pending():
        for a in live.prom.api("alerts")["alerts"]:
            if a["labels"].get("alertname") == "NormdReplicaDown" and \
                    a["labels"].get("instance") == victim.addr:
                return a["state"]
        return None
    state = wait_until(pending, 10, 0.25)
    assert state in ("pending", "firing"), "NormdReplicaDown not raised for %s" % victim.addr
    no_ready = [a for a in live.prom.api("alerts")["alerts"]
                if a["labels"].get("alertname") == "NormdNoReadyReplica"]
    assert not no_ready, "NormdNoReadyReplica with one replica still up: %s" % no_ready
    return "NormdReplicaDown %s for %s; NormdNoReadyReplica not raised" % (state, victim.addr)


def main():
    checks = Checks("prometheus")
    for tool in (PROMETHEUS, PROMTOOL):
        if not os.access(tool, os.X_OK):
            print("FAIL %s not found (Debian package prometheus: "
                  "scripts/install-deps.sh prometheus)" % tool)
            checks.failed += 1
            return checks.summary()
    checks.run("promtool check config docker/prometheus/prometheus.yml", check_config)
    checks.run("promtool check rules docker/prometheus/alerts.yml", check_rules)
    checks.run("promtool test rules docker/prometheus/alerts_test.yml", test_rules)
    checks.run("dashboard JSON structure", dashboard_structure)
    checks.run("Grafana provisioning fits docker/compose.yaml", provisioning_fits_compose)
    live = Live()
    try:
        checks.run("two replicas and prometheus up", live.start, fatal=True)
        checks.run("traffic: 2xx on every route kind, 4xx, 503 shed", live.traffic, fatal=True)
        checks.run("every dashboard expression returns data", lambda: panel_queries(live))
        checks.run("the replica variable lists every replica", lambda: variable_values(live))
        checks.run("every alert rule evaluates", lambda: rules_evaluate(live))
        checks.run("a killed replica raises NormdReplicaDown", lambda: replica_down_alert(live))
    finally:
        if checks.failed and live.prom:
            print("--- prometheus log (tail) ---\n%s" % live.prom.log())
        live.stop()
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
