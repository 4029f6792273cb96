"""make docker-test: runs the image built from docker/Dockerfile (by
scripts/docker-build.sh) the way an engine would, without a Docker engine.

1. `buildah run --isolation chroot` starts the image's ENTRYPOINT (read from
   the image config) as the image's USER in its WORKDIR with its ENV, plus
   NORMD_PORT=<a non-default port>; checks /healthz, the HEALTHCHECK command,
   a layer norm, /metrics, the non-root uid, and a SIGTERM drain.
2. The same entrypoint as PID 1 of a new PID namespace (unshare --pid over
   the image's mounted rootfs, dropped to the image's USER): a process that
   is PID 1 only gets signals it handles or blocks, so this checks that
   `docker stop` (SIGTERM to PID 1) drains and exits 0.

Usage: python3 tests/deploy/docker_test.py [IMAGE]  (default localhost/normd:latest)
Every wait is bounded; the last line is "docker: N passed, M failed".
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import (Checks, free_port, healthy, listener_pid, post_json,  # noqa: E402
                       proc_status, request, wait_until)

IMAGE = sys.argv[1] if len(sys.argv) > 1 else "localhost/normd:latest"
BUILDAH_RUN = ["buildah", "run", "--isolation", "chroot", "--network", "host"]
STARTUP_TIMEOUT = 20.0
CLIENTS = 4  # slow requests queued on one worker
# Work that keeps a worker busy for a while (~0.3 s on a 2-core machine)
# with a small body and answer: the Pre-Norm / Post-Norm simulation costs
# layers x tokens x d^2. A big tensor would not do: it decodes too fast now
# to be still in flight at SIGTERM.
SLOW_ROUTE, SLOW_LAYERS = "/v1/residual/simulate", 16


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def image_config():
    doc = json.loads(sh("buildah", "inspect", "--type", "image", IMAGE))
    return doc["Docker"]["config"]


class Container:
    """A started entrypoint: the launcher process, its log, the daemon's pid."""

    def __init__(self, argv, port):
        self.port = port
        self.logf = tempfile.NamedTemporaryFile("w+", prefix="normd-docker-", suffix=".log")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        self.pid = None

    def started(self):
        if not wait_until(lambda: healthy(self.port) or self.proc.poll() is not None,
                          STARTUP_TIMEOUT) or self.proc.poll() is not None:
            raise AssertionError("the entrypoint did not serve /healthz on port %d: %s"
                                 % (self.port, self.log()[-500:]))
        self.pid = listener_pid(self.port)
        assert self.pid, "no pid listens on port %d" % self.port

    def log(self):
        self.logf.seek(0)
        return self.logf.read()

    def stop(self):
        if self.proc.poll() is None:
            if self.pid:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.logf.close()


def check_config(cfg):
    user = cfg.get("User") or ""
    assert user and user.split(":")[0] not in ("0", "root"), "USER is %r" % user
    assert "8080/tcp" in (cfg.get("ExposedPorts") or {}), "no EXPOSE 8080"
    ep = cfg.get("Entrypoint") or []
    assert ep and ep[0].startswith("/"), "ENTRYPOINT is not exec form: %r" % ep
    hc = (cfg.get("Healthcheck") or {}).get("Test") or []
    assert hc and hc[0] in ("CMD", "CMD-SHELL"), "no HEALTHCHECK"
    return "user %s, entrypoint %s, healthcheck %s" % (user, ep, hc[1:])


def check_serving(c, cfg):
    listen = sh("ss", "-Hltn", "sport = :%d" % c.port).split()
    assert "0.0.0.0:%d" % c.port in listen or "*:%d" % c.port in listen, \
        "not listening on all addresses: %s" % listen
    assert not healthy(8080) or listener_pid(8080) != c.pid, "also on port 8080"
    status, _, body = request(c.port, "GET", "/readyz")
    assert status == 200, (status, body)
    return "NORMD_PORT=%d honoured, host 0.0.0.0" % c.port


def check_healthcheck_cmd(ctr, c, cfg):
    test = cfg["Healthcheck"]["Test"]
    argv = test[1:] if test[0] == "CMD" else ["/bin/sh", "-c", test[1]]
    run = lambda port: subprocess.run(  # noqa: E731
        BUILDAH_RUN + ["--env", "NORMD_PORT=%d" % port, ctr, "--"] + argv,
        capture_output=True, timeout=30).returncode
    assert run(c.port) == 0, "HEALTHCHECK fails against a healthy daemon"
    assert run(free_port()) != 0, "HEALTHCHECK passes with nothing listening"
    return "exit 0 when up, non-zero when down"


def check_layer_norm(c):
    status, doc = post_json(c.port, "/v1/norm/layer",
                            {"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]]})
    assert status == 200, (status, doc)
    assert doc["stats"]["mean"] == [3, 6] and doc["stats"]["var"] == [2, 8], doc["stats"]
    out = doc["output"]["data"]
    want = [-1.4142101, -0.70710504, 0, 0.70710504, 1.4142101]
    assert all(abs(a - b) < 1e-6 for a, b in zip(out[:5], want)), out
    return "stats mean [3, 6], var [2, 8]"


def check_metrics(c):
    def scrape():
        status, headers, body = request(c.port, "GET", "/metrics")
        assert status == 200 and headers["content-type"].startswith("text/plain"), status
        text = body.decode()
        return text, [ln for ln in text.splitlines()
                      if ln.startswith("normd_requests_total{") and
                      'route="/v1/norm/layer"' in ln]
    # A request is counted when its connection completes, which may be just
    # after the client has read the answer: poll briefly.
    wait_until(lambda: scrape()[1], 5)
    text, lines = scrape()
    body = text.encode()
    assert lines, "no normd_requests_total for /v1/norm/layer:\n" + text[:800]
    assert "normd_build_info" in text
    return "%d bytes, %s" % (len(body), lines[0])


def check_non_root(c, cfg):
    st = proc_status(c.pid)
    uids, gids = st["Uid"].split(), st["Gid"].split()
    want = cfg["User"].split(":")
    assert all(u == want[0] for u in uids), "uids %s, want %s" % (uids, want[0])
    if len(want) > 1:
        assert all(g == want[1] for g in gids), "gids %s, want %s" % (gids, want[1])
    assert st["CapEff"].strip("0") == "", "effective capabilities %s" % st["CapEff"]
    return "pid %d runs as uid %s gid %s, no capabilities" % (c.pid, uids[0], gids[0])


def big_body():
    return ('{"tokens":64,"d":256,"layers":%d}' % SLOW_LAYERS).encode()


def check_drain(c, body):
    """Requests accepted before SIGTERM all finish with 200; new connections
    are refused; the entrypoint exits 0 after "drained, exiting"."""
    import http.client
    results = [None] * CLIENTS
    sent = [threading.Event() for _ in range(CLIENTS)]

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=60)
        try:
            conn.putrequest("POST", SLOW_ROUTE)
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            conn.send(body)
            sent[i].set()
            r = conn.getresponse()
            results[i] = (r.status, r.read())
        except Exception as e:  # reported below
            results[i] = e
        finally:
            sent[i].set()
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for e in sent:
        assert e.wait(30), "a client could not send its body"
    time.sleep(0.2)  # the bodies are read and the jobs queued
    os.kill(c.pid, signal.SIGTERM)
    t_signal = time.monotonic()
    in_flight = sum(1 for r in results if r is None)
    refused = wait_until(lambda: not _connects(c.port), 10)
    for t in threads:
        t.join(60)
    assert in_flight > 0, "every request finished before SIGTERM: the drain was not exercised"
    assert refused, "new connections still accepted during the drain"
    for r in results:
        assert not isinstance(r, Exception) and r is not None, r
        assert r[0] == 200, r[:1] + (r[1][:200],)
        assert len(json.loads(r[1])["pre"]["rms"]) == SLOW_LAYERS + 1
    rc = c.proc.wait(30)
    assert rc == 0, "exit code %d" % rc
    log = c.log()
    assert "draining" in log and "drained, exiting" in log, log[-500:]
    return ("%d of %d requests in flight at SIGTERM, all 200; exit 0 after %.1f s"
            % (in_flight, CLIENTS, time.monotonic() - t_signal))


def _connects(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def user_ids(cfg, rootfs):
    """The image's USER as numeric uid, gid (looked up in its /etc/passwd)."""
    user, _, group = cfg["User"].partition(":")
    if not user.isdigit() or (group and not group.isdigit()):
        with open(os.path.join(rootfs, "etc/passwd")) as f:
            for line in f:
                fields = line.split(":")
                if fields[0] == user or fields[2] == user:
                    user, group = fields[2], group if group.isdigit() else fields[3]
    return user, group or user


def pid1_argv(cfg, rootfs, port):
    uid, gid = user_ids(cfg, rootfs)
    env = [e for e in cfg.get("Env") or [] if not e.startswith("NORMD_PORT=")]
    env += ["NORMD_PORT=%d" % port, "NORMD_THREADS=1"]
    return (["unshare", "--pid", "--fork", "--mount-proc", "--root", rootfs,
             "--wd", cfg.get("WorkingDir") or "/", "--setuid", uid, "--setgid", gid,
             "/usr/bin/env", "-i"] + env + cfg["Entrypoint"] + (cfg.get("Cmd") or []))


def check_pid1(c):
    nspid = proc_status(c.pid)["NSpid"].split()
    assert nspid[-1] == "1", "NSpid %s: the daemon is not PID 1" % nspid
    return "host pid %s is PID 1 in its namespace" % nspid[0]


def main():
    checks = Checks("docker")
    cfg = image_config()
    checks.run("image config: non-root USER, EXPOSE 8080, exec ENTRYPOINT, HEALTHCHECK",
               lambda: check_config(cfg), fatal=True)
    body = big_body()
    ctrs = []
    try:
        # 1. buildah run: the engine's view (USER, WORKDIR, ENV from the image).
        ctr = checks.run("buildah from", lambda: sh("buildah", "from", IMAGE), fatal=True)
        if ctr:
            ctrs.append(ctr)
            port = free_port()
            argv = (BUILDAH_RUN + ["--env", "NORMD_PORT=%d" % port, "--env", "NORMD_THREADS=1",
                                   ctr, "--"] + cfg["Entrypoint"] + (cfg.get("Cmd") or []))
            c = Container(argv, port)
            try:
                checks.run("entrypoint starts under buildah run", c.started, fatal=True)
                checks.run("serves on NORMD_PORT, host 0.0.0.0", lambda: check_serving(c, cfg))
                checks.run("HEALTHCHECK command", lambda: check_healthcheck_cmd(ctr, c, cfg))
                checks.run("POST /v1/norm/layer", lambda: check_layer_norm(c))
                checks.run("GET /metrics", lambda: check_metrics(c))
                checks.run("runs as the non-root USER", lambda: check_non_root(c, cfg))
                checks.run("SIGTERM drains in-flight requests, exit 0",
                           lambda: check_drain(c, body))
            finally:
                c.stop()

        # 2. The entrypoint as PID 1 (what `docker run` does).
        ctr2 = checks.run("buildah from + mount", lambda: sh("buildah", "from", IMAGE), fatal=True)
        if ctr2:
            ctrs.append(ctr2)
            rootfs = sh("buildah", "mount", ctr2)
            port = free_port()
            c = Container(pid1_argv(cfg, rootfs, port), port)
            try:
                checks.run("entrypoint starts as PID 1", c.started, fatal=True)
                checks.run("the daemon is PID 1", lambda: check_pid1(c))
                checks.run("PID 1: layer norm", lambda: check_layer_norm(c))
                checks.run("PID 1: runs as the non-root USER", lambda: check_non_root(c, cfg))
                checks.run("PID 1: SIGTERM (docker stop) drains, exit 0",
                           lambda: check_drain(c, body))
            finally:
                c.stop()
    finally:
        for ctr in ctrs:
            subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
