"""make cluster-test: three normd replicas on loopback ports behind Debian's
nginx running docker/nginx.conf -- the file docker/compose.yaml uses, with
the upstream addresses and the listen port substituted -- and traffic
through nginx while replicas die and come back:

  1. all three up: requests spread over every replica;
  2. one replica SIGKILLed mid-run: nginx retries on the others, no client
     request fails; restarted, it takes traffic again;
  3. one replica SIGTERMed mid-run (a rolling update): it drains, nginx
     retries its 503s and refused connections, no client request fails;
     restarted, it takes traffic again;
  4. nginx's body limit is normd's max_body_bytes;
  5. examples/sync_batchnorm.py through nginx (moments per shard, merge,
     normalize each shard, compare with the whole batch).

Clients are POSTs on keep-alive connections (python stdlib) and never retry
themselves: any failure is counted. Retries are read from nginx's access log
($upstream_addr lists every replica tried). Bounded: each phase has a request
count and a time limit. Last line: "cluster: N passed, M failed".
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
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deploylib import Checks, free_port, healthy, request, wait_until  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
NORMD = os.path.join(REPO, os.environ.get("NORMD_BIN", "build/normd"))
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
NGINX_CONF = os.path.join(REPO, "docker/nginx.conf")
REPLICAS = 3
CLIENTS = 4
PHASE_TIMEOUT = 30.0       # seconds any one phase may take
TOTAL_CAP = 200000         # requests, whatever happens (a bound, not a
                           # budget: unthrottled clients send thousands a
                           # second, and a replica nginx has marked failed
                           # waits out fail_timeout before it gets any)
ROWS, COLS = 16, 1024      # one request: 16K elements, ~100 KB of JSON


class Replica:
    """One normd process on a fixed loopback port (restartable)."""

    def __init__(self, index, tmp):
        self.index = index
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.log_path = os.path.join(tmp, "normd-%d.log" % index)
        self.proc = None

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [NORMD, "--config", "config/normd.json", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warn", "--threads", "1",
             "--drain-timeout-s", "10"],
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if not wait_until(lambda: healthy(self.port) or self.proc.poll() is not None, 10) \
                or self.proc.poll() is not None:
            raise AssertionError("replica %d did not start on %s" % (self.index, self.addr))

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout=15):
        return self.proc.wait(timeout)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Nginx:
    """Debian's nginx with docker/nginx.conf included in a minimal main
    config (pid, temp paths and error log in a temporary directory)."""

    def __init__(self, tmp, replicas):
        self.port = free_port()
        self.tmp = tmp
        self.access_log = os.path.join(tmp, "access.log")
        self.error_log = os.path.join(tmp, "error.log")
        with open(NGINX_CONF) as f:
            conf = f.read()
        conf, n = re.subn(r"(?m)^(\s*)server\s+normd:8080(\s[^;]*)?;",
                          lambda m: "\n".join("%sserver %s%s;" % (m.group(1), r.addr, m.group(2) or "")
                                              for r in replicas), conf)
        assert n == 1, "docker/nginx.conf: expected one 'server normd:8080 ...;' line"
        conf, n = re.subn(r"(?m)^(\s*)listen\s+8080;", r"\1listen 127.0.0.1:%d;" % self.port, conf)
        assert n == 1, "docker/nginx.conf: expected one 'listen 8080;' line"
        with open(os.path.join(tmp, "normd.conf"), "w") as f:
            f.write(conf)
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write("""# cluster_test.py: the main context around docker/nginx.conf
worker_processes 2;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/normd.conf;
}}
""".format(tmp=tmp))
        self.proc = None

    def argv(self, *extra):
        return [NGINX, "-p", self.tmp, "-c", os.path.join(self.tmp, "nginx.conf")] + list(extra)

    def test_config(self):
        r = subprocess.run(self.argv("-t"), capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stderr.strip().splitlines()[-1]

    def start(self):
        # access_log /dev/stdout in docker/nginx.conf lands in this file.
        out = open(self.access_log, "w")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT)
        out.close()
        if not wait_until(lambda: healthy(self.port) or self.proc.poll() is not None, 10) \
                or self.proc.poll() is not None:
            raise AssertionError("nginx did not start: %s" % self.errors()[-800:])

    def errors(self):
        try:
            with open(self.error_log) as f:
                return f.read()
        except OSError:
            return ""

    def log_lines(self):
        with open(self.access_log) as f:
            return f.read().splitlines()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


LOG_RE = re.compile(r'"(\S+) (\S+) [^"]*" (\d+) upstream=\[([^\]]*)\] upstream_status=\[([^\]]*)\]')


def parse_log(lines):
    """Access-log lines as (method, path, status, [replicas tried], [statuses])."""
    out = []
    for ln in lines:
        m = LOG_RE.search(ln)
        if m:
            tried = [a.strip() for a in m.group(4).split(",")]
            out.append((m.group(1), m.group(2), int(m.group(3)), tried,
                        [s.strip() for s in m.group(5).split(",")]))
    return out


def make_body(seed):
    """A (ROWS, COLS) layer-norm request whose row means are known exactly."""
    data = [float((seed + r * 7 + c) % 97) for r in range(ROWS) for c in range(COLS)]
    means = [sum(data[r * COLS:(r + 1) * COLS]) / COLS for r in range(ROWS)]
    body = json.dumps({"input": {"shape": [ROWS, COLS], "data": data},
                       "return": ["stats"]}).encode()
    return body, means


class Traffic:
    """CLIENTS threads POSTing layer norms through nginx until stopped; every
    answer is checked (status 200 and the right row means)."""

    def __init__(self, port):
        self.port = port
        self.bodies = [make_body(s) for s in range(8)]
        self.lock = threading.Lock()
        self.sent = self.ok = 0
        self.failures = []
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True)
                        for i in range(CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def client(self, i):
        conn = None
        k = i
        while not self.stop_event.is_set():
            with self.lock:
                if self.sent >= TOTAL_CAP:
                    return
                self.sent += 1
            body, means = self.bodies[k % len(self.bodies)]
            k += 1
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("POST", "/v1/norm/layer", body=body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                payload = r.read()
                if r.status != 200:
                    raise AssertionError("HTTP %d: %s" % (r.status, payload[:200]))
                got = json.loads(payload)["stats"]["mean"]
                if any(abs(a - b) > 1e-3 for a, b in zip(got, means)) or len(got) != ROWS:
                    raise AssertionError("wrong stats: %s" % got[:4])
                with self.lock:
                    self.ok += 1
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except Exception as e:  # counted: a client never retries
                with self.lock:
                    self.failures.append(repr(e))
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def count(self):
        with self.lock:
            return self.sent

    def run_until(self, pred, at_least, timeout=PHASE_TIMEOUT):
        """Waits until `at_least` more requests were sent and pred() holds."""
        target = self.count() + at_least
        ok = wait_until(lambda: self.count() >= target and pred(), timeout, 0.02)
        assert ok, "phase did not complete in %.0f s (sent %d)" % (timeout, self.count())

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(60)


def served_by(nginx, addr, since=0):
    """Requests answered 200 by the replica at addr, after log line `since`."""
    return sum(1 for (_m, _p, status, tried, sts) in parse_log(nginx.log_lines()[since:])
               if status == 200 and tried[-1] == addr and sts[-1] == "200")


def main():
    checks = Checks("cluster")
    tmp = tempfile.mkdtemp(prefix="normd-cluster-")
    os.chmod(tmp, 0o755)  # nginx workers (nobody) reach the temp paths
    replicas = [Replica(i, tmp) for i in range(REPLICAS)]
    nginx = Nginx(tmp, replicas)
    traffic = None
    counts = {}
    try:
        def start_replicas():
            for r in replicas:
                r.start()
            return ", ".join(r.addr for r in replicas)
        checks.run("3 normd replicas start on loopback", start_replicas, fatal=True)
        checks.run("nginx -t accepts docker/nginx.conf", nginx.test_config, fatal=True)
        def start_nginx():
            nginx.start()
            return "listening on 127.0.0.1:%d" % nginx.port
        checks.run("nginx proxies to the replicas", start_nginx, fatal=True)

        traffic = Traffic(nginx.port)
        traffic.start()
        victim, drained = replicas[1], replicas[2]

        def spread():
            traffic.run_until(lambda: all(served_by(nginx, r.addr) > 0 for r in replicas), 150)
            per = {r.addr: served_by(nginx, r.addr) for r in replicas}
            assert all(per.values()), per
            assert not traffic.failures, traffic.failures[:3]
            return "per replica %s" % per
        checks.run("requests spread over all replicas", spread, fatal=True)

        def kill_replica():
            before = traffic.count()
            mark = len(nginx.log_lines())
            err_mark = len(nginx.errors())
            victim.signal(signal.SIGKILL)
            victim.wait()
            traffic.run_until(lambda: True, 300)
            assert not traffic.failures, "%d client failures: %s" % (
                len(traffic.failures), traffic.failures[:3])
            entries = parse_log(nginx.log_lines()[mark:])
            retried = [e for e in entries if len(e[3]) > 1]
            to_victim = sum(1 for e in entries if victim.addr in e[3])
            sent_after = traffic.count() - before
            counts["kill"] = (sent_after, len(retried))
            assert retried, "nginx never retried: the dead replica was not tried"
            errors = nginx.errors()[err_mark:]
            in_flight = errors.count("prematurely closed") + errors.count("reset by peer")
            refused = errors.count("Connection refused")
            return ("SIGKILL %s: %d requests after, %d retried by nginx (%d tried the dead "
                    "replica; nginx error log: %d cut off in flight, %d refused "
                    "connections), 0 failed" % (victim.addr, sent_after, len(retried),
                                            to_victim, in_flight, refused))
        checks.run("SIGKILL a replica mid-run: nginx retries, no request fails", kill_replica)

        def restart_replica():
            mark = len(nginx.log_lines())
            victim.start()
            # nginx takes the replica back after fail_timeout (5 s).
            traffic.run_until(lambda: served_by(nginx, victim.addr, mark) >= 20, 50)
            assert not traffic.failures, traffic.failures[:3]
            return "%s served %d requests after its restart" % (
                victim.addr, served_by(nginx, victim.addr, mark))
        checks.run("the restarted replica takes traffic again", restart_replica)

        def drain_replica():
            before = traffic.count()
            mark = len(nginx.log_lines())
            drained.signal(signal.SIGTERM)
            rc = drained.wait(20)
            traffic.run_until(lambda: True, 200)
            assert rc == 0, "drained replica exited %d" % rc
            assert not traffic.failures, "%d client failures: %s" % (
                len(traffic.failures), traffic.failures[:3])
            entries = parse_log(nginx.log_lines()[mark:])
            retried = [e for e in entries if len(e[3]) > 1]
            statuses = sorted({s for e in retried for s in e[4][:-1]})
            sent_after = traffic.count() - before
            counts["drain"] = (sent_after, len(retried))
            return ("SIGTERM %s: exit 0; %d requests after, %d retried by nginx "
                    "(upstream statuses %s), 0 failed"
                    % (drained.addr, sent_after, len(retried), statuses))
        checks.run("SIGTERM (drain) a replica mid-run: no request fails", drain_replica)

        def restart_drained():
            mark = len(nginx.log_lines())
            drained.start()
            traffic.run_until(lambda: served_by(nginx, drained.addr, mark) >= 20, 50)
            assert not traffic.failures, traffic.failures[:3]
            return "%s served %d requests after its restart" % (
                drained.addr, served_by(nginx, drained.addr, mark))
        checks.run("the drained replica, restarted, takes traffic again", restart_drained)

        def finish_traffic():
            traffic.run_until(lambda: True, 100)
            traffic.stop()
            assert not traffic.failures, traffic.failures[:3]
            entries = parse_log(nginx.log_lines())
            posts = [e for e in entries if e[0] == "POST" and e[1] == "/v1/norm/layer"]
            retried = sum(1 for e in posts if len(e[3]) > 1)
            counts["total"] = (traffic.sent, traffic.ok, len(traffic.failures), retried)
            assert traffic.ok == traffic.sent, (traffic.ok, traffic.sent)
            per = {r.addr: sum(1 for e in posts if e[3][-1] == r.addr and e[2] == 200)
                   for r in replicas}
            return "per replica over the run %s" % per
        checks.run("every client request answered 200", finish_traffic)

        def body_limit():
            limit = 67108864  # config/normd.json max_body_bytes
            with open(os.path.join(REPO, "config/normd.json")) as f:
                assert json.load(f)["max_body_bytes"] == limit
            # One byte over: refused by nginx from Content-Length alone.
            with socket.create_connection(("127.0.0.1", nginx.port), timeout=10) as s:
                s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % (limit + 1))
                head = s.recv(4096).decode(errors="replace")
            assert head.startswith("HTTP/1.1 413"), head[:200]
            assert "application/problem+json" in head and "body_too_large" in head, head
            # Exactly the limit: passed on to normd (which answers, not nginx).
            body = b"[" + b" " * (limit - 2) + b"]"
            status, headers, payload = request(nginx.port, "POST", "/v1/norm/layer", body,
                                               {"Content-Type": "application/json"},
                                               timeout=60)
            assert status != 413 and headers.get("content-type") == "application/problem+json", \
                (status, payload[:200])
            return "%d bytes -> 413 problem from nginx; %d bytes -> normd's %d %s" % (
                limit + 1, limit, status, json.loads(payload)["code"])
        checks.run("nginx's body limit is normd's max_body_bytes", body_limit)

        def sync_batchnorm():
            mark = len(nginx.log_lines())
            r = subprocess.run([sys.executable, os.path.join(REPO, "examples/sync_batchnorm.py"),
                                "--url", "http://127.0.0.1:%d" % nginx.port],
                               capture_output=True, text=True, timeout=120)
            print("\n".join("    " + ln for ln in r.stdout.splitlines()), flush=True)
            assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
            used = sorted({e[3][-1] for e in parse_log(nginx.log_lines()[mark:])})
            assert len(used) >= 2, "the shards all went to one replica: %s" % used
            return "%d requests through nginx, answered by %s" % (
                len(parse_log(nginx.log_lines()[mark:])), used)
        checks.run("examples/sync_batchnorm.py through nginx", sync_batchnorm)
    finally:
        if traffic:
            traffic.stop()
        nginx.stop()
        for r in replicas:
            r.signal(signal.SIGTERM)
        for r in replicas:
            try:
                r.wait(15)
            except (subprocess.TimeoutExpired, AttributeError):
                r.kill()
    if "total" in counts:
        sent, ok, failed, retried = counts["total"]
        print("cluster traffic: sent %d, succeeded %d, failed %d, retried by nginx %d "
              "(after SIGKILL: %s of %s; during drain: %s of %s)"
              % (sent, ok, failed, retried, counts.get("kill", ("?", "?"))[1],
                 counts.get("kill", ("?", "?"))[0], counts.get("drain", ("?", "?"))[1],
                 counts.get("drain", ("?", "?"))[0]), flush=True)
    if checks.failed:
        print("logs kept in %s" % tmp, flush=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
