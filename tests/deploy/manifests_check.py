"""Checks docker/k8s/*.yaml and docker/compose.yaml without a cluster or an
engine (part of make docker-test):

- kubectl apply --dry-run=client --validate=false -o json -f docker/k8s/.
  kubectl needs an API server even then (for discovery, and to look up the
  objects it would patch), so it talks to a stub on a loopback port that
  serves only the discovery documents of the kinds used and 404 for every
  object; nothing else of a cluster is involved.
- Every object kubectl produced validated against the Kubernetes OpenAPI
  schema (types, required fields, enums) with the npm package
  kubernetes-models (tests/deploy/k8s_validate.js), when node is present.
- Consistency: the Service and the HPA find the Deployment, the probes and
  the ports line up, the ConfigMap's normd.json is accepted by normd itself
  (--print-config), and the grace period covers preStop + drain_timeout_s.
- compose.yaml: replicas behind nginx with docker/nginx.conf, port 8080, a
  stop grace period above the drain timeout.

Last line: "manifests: N passed, M failed".
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deploylib import Checks  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
K8S = os.path.join(REPO, "docker/k8s")
NORMD = os.path.join(REPO, os.environ.get("NORMD_BIN", "build/normd"))
SCHEMA_DIR = os.environ.get("NORMD_K8S_SCHEMA_DIR", "/var/cache/normd-docker/k8s-schema")
KUBERNETES_MODELS = "kubernetes-models@4.5.1"

# The discovery documents of the kinds docker/k8s uses: (group, version) ->
# [(resource, kind)].
RESOURCES = {
    ("", "v1"): [("configmaps", "ConfigMap"), ("services", "Service")],
    ("apps", "v1"): [("deployments", "Deployment")],
    ("autoscaling", "v2"): [("horizontalpodautoscalers", "HorizontalPodAutoscaler")],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget")],
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


class StubAPI(http.server.BaseHTTPRequestHandler):
    """Discovery only; every object is "not found"."""

    def log_message(self, *args):
        pass

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": []})
        if path == "/apis":
            groups = [{"name": g, "versions": [{"groupVersion": "%s/%s" % (g, v), "version": v}],
                       "preferredVersion": {"groupVersion": "%s/%s" % (g, v), "version": v}}
                      for (g, v) in RESOURCES if g]
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": groups})
        for (g, v), res in RESOURCES.items():
            if path == ("/api/%s" % v if not g else "/apis/%s/%s" % (g, v)):
                return self.send_json(200, {
                    "kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": "%s/%s" % (g, v) if g else v,
                    "resources": [{"name": r, "singularName": k.lower(), "namespaced": True,
                                   "kind": k, "verbs": VERBS} for r, k in res]})
        self.send_json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404, "message": "not found"})


def kubectl_dry_run():
    """Objects as kubectl apply --dry-run=client renders them (a list)."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl not found (scripts/install-deps.sh docker installs it)"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = os.path.join(tmp, "kubeconfig")
            with open(kubeconfig, "w") as f:
                json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "stub",
                           "clusters": [{"name": "stub", "cluster": {
                               "server": "http://127.0.0.1:%d" % server.server_address[1]}}],
                           "contexts": [{"name": "stub", "context": {"cluster": "stub",
                                                                     "namespace": "default"}}],
                           "users": []}, f)
            r = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "--cache-dir",
                                os.path.join(tmp, "cache"), "apply", "--dry-run=client",
                                "--validate=false", "-o", "json", "-f", K8S],
                               capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, HOME=tmp))
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr.strip()
    doc = json.loads(r.stdout)
    items = doc["items"] if doc.get("kind") == "List" else [doc]
    version = subprocess.run([kubectl, "version", "--client"], capture_output=True,
                             text=True).stdout.split("\n")[0].strip()
    return items, version


def find(items, kind):
    found = [o for o in items if o["kind"] == kind]
    assert len(found) == 1, "want one %s, found %d" % (kind, len(found))
    return found[0]


def schema_validate(items):
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "node/npm not found (scripts/install-deps.sh docker installs them)"
    if not os.path.isdir(os.path.join(SCHEMA_DIR, "node_modules", "kubernetes-models")):
        os.makedirs(SCHEMA_DIR, exist_ok=True)
        r = subprocess.run([npm, "install", "--prefix", SCHEMA_DIR, "--no-audit", "--no-fund",
                            "--loglevel=error", KUBERNETES_MODELS],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "npm install %s: %s" % (KUBERNETES_MODELS, r.stderr[-500:])
    r = subprocess.run([node, os.path.join(HERE, "k8s_validate.js")], input=json.dumps(items),
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, NODE_PATH=os.path.join(SCHEMA_DIR, "node_modules")))
    assert r.returncode == 0, (r.stdout + r.stderr).strip()
    return r.stdout.strip()


def consistency(items):
    dep, svc = find(items, "Deployment"), find(items, "Service")
    hpa, cm = find(items, "HorizontalPodAutoscaler"), find(items, "ConfigMap")
    pdb = find(items, "PodDisruptionBudget")
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), "selector"
    for what, sel in (("Service", svc["spec"]["selector"]),
                      ("PodDisruptionBudget", pdb["spec"]["selector"]["matchLabels"])):
        assert sel.items() <= labels.items(), "%s selector %s misses the pods" % (what, sel)
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("Deployment", dep["metadata"]["name"]), ref
    assert hpa["spec"]["minReplicas"] <= dep["spec"]["replicas"] <= hpa["spec"]["maxReplicas"]

    (c,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert svc["spec"]["ports"][0]["targetPort"] in ports, "Service targetPort"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "cpu" in c["resources"]["requests"], "the CPU HPA needs a CPU request"
    sc = pod["spec"]["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] == 10001, "runAsUser != the image's USER"

    # The ConfigMap's normd.json, as normd itself reads it.
    vol = next(v for v in pod["spec"]["volumes"] if v.get("configMap"))
    assert vol["configMap"]["name"] == cm["metadata"]["name"], "ConfigMap name"
    mount = next(m for m in c["volumeMounts"] if m["name"] == vol["name"])
    env = {e["name"]: e.get("value", "") for e in c.get("env", [])}
    assert env.get("NORMD_CONFIG", "").startswith(mount["mountPath"] + "/"), "NORMD_CONFIG"
    key = env["NORMD_CONFIG"][len(mount["mountPath"]) + 1:]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        f.write(cm["data"][key])
        f.flush()
        r = subprocess.run([NORMD, "--config", f.name, "--print-config"],
                           capture_output=True, text=True, timeout=10, cwd=REPO,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("NORMD_")})
    assert r.returncode == 0, "normd rejects the ConfigMap: " + r.stderr.strip()
    cfg = json.loads(r.stdout)
    assert cfg["port"] == ports[svc["spec"]["ports"][0]["targetPort"]], "port"
    assert cfg["host"] in ("0.0.0.0", "::"), "host %s is not reachable" % cfg["host"]

    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    sleep_s = int(pre_stop[-1]) if "sleep" in pre_stop[0] else 0
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    assert grace > sleep_s + cfg["drain_timeout_s"], \
        "grace %d <= preStop %d + drain %d" % (grace, sleep_s, cfg["drain_timeout_s"])
    return ("selectors, HPA target, ports, probes, runAsUser 10001; normd accepts the "
            "ConfigMap; grace %ds > preStop %ds + drain %ds"
            % (grace, sleep_s, cfg["drain_timeout_s"]))


def compose_check():
    try:
        import yaml
    except ImportError:
        raise AssertionError("python3-yaml is missing (scripts/install-deps.sh docker)")
    with open(os.path.join(REPO, "docker/compose.yaml")) as f:
        doc = yaml.safe_load(f)
    normd, nginx = doc["services"]["normd"], doc["services"]["nginx"]
    assert normd["build"]["dockerfile"] == "docker/Dockerfile"
    replicas = re.sub(r"\$\{[A-Z_]+:-(\d+)\}", r"\1", str(normd["deploy"]["replicas"]))
    assert int(replicas) >= 2, "replicas %s" % replicas
    assert "./nginx.conf:/etc/nginx/conf.d/default.conf:ro" in nginx["volumes"]
    assert "8080:8080" in nginx["ports"]
    assert nginx["depends_on"]["normd"]["condition"] == "service_healthy"
    grace = int(normd["stop_grace_period"].rstrip("s"))
    drain = int(normd["environment"].get("NORMD_DRAIN_TIMEOUT_S", 30))
    assert grace > drain, "stop_grace_period %ds <= drain_timeout_s %ds" % (grace, drain)
    with open(os.path.join(REPO, "docker/nginx.conf")) as f:
        conf = f.read()
    assert re.search(r"(?m)^\s*server\s+normd:8080\b", conf), "upstream is not the service"
    assert re.search(r"(?m)^\s*listen\s+8080;", conf)
    with open(os.path.join(REPO, "config/normd.json")) as f:
        limit = json.load(f)["max_body_bytes"]
    m = re.search(r"client_max_body_size\s+(\d+)([kKmMgG]?);", conf)
    size = int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    assert size == limit, "client_max_body_size %d != max_body_bytes %d" % (size, limit)
    return "%s replicas behind nginx on 8080; grace %ds > drain %ds; body limit %d" % (
        replicas, grace, drain, limit)


def main():
    checks = Checks("manifests")
    got = {}

    def dry_run():
        got["items"], version = kubectl_dry_run()
        return "%s: %s" % (version, ", ".join("%s/%s" % (o["kind"], o["metadata"]["name"])
                                              for o in got["items"]))
    checks.run("kubectl apply --dry-run=client -f docker/k8s/", dry_run, fatal=True)
    checks.run("docker/k8s objects match the Kubernetes OpenAPI schema",
               lambda: schema_validate(got["items"]))
    checks.run("docker/k8s objects fit together and normd accepts the ConfigMap",
               lambda: consistency(got["items"]))
    checks.run("docker/compose.yaml: replicas behind docker/nginx.conf", compose_check)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
