"""Shared pieces of the deployment tests (docker_test.py, cluster_test.py):
HTTP over the standard library with bounded timeouts, a free-port picker,
waits that give up, and a tiny check runner that ends with one plain summary
line ("docker: 9 passed, 0 failed") so CI can read it like pytest's.
"""
import http.client
import json
import socket
import subprocess
import sys
import time
import traceback

HTTP_TIMEOUT = 20.0


def free_port():
    """A TCP port nobody listens on right now (bind to 0, read, close)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT,
            host="127.0.0.1"):
    """One exchange on a fresh connection: (status, headers dict, body bytes)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = dict(headers or {}, **{"Content-Type": "application/json"})
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def post_json(port, path, obj, timeout=HTTP_TIMEOUT):
    """POST a JSON body; returns (status, decoded JSON or None)."""
    status, _, body = request(port, "POST", path, obj, timeout=timeout)
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def wait_until(pred, timeout, interval=0.05):
    """Polls pred() until it is truthy or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
            if v:
                return v
        except OSError:
            pass
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def healthy(port):
    try:
        return request(port, "GET", "/healthz", timeout=2)[0] == 200
    except OSError:
        return False


def listener_pid(port):
    """The pid of the process listening on 127.0.0.1/0.0.0.0:port (ss -ltnp)."""
    out = subprocess.run(["ss", "-Hltnp", "sport = :%d" % port],
                         capture_output=True, text=True, check=False).stdout
    for part in out.split("pid=")[1:]:
        return int(part.split(",")[0])
    return None


def proc_status(pid):
    """/proc/<pid>/status as a dict of field -> value string."""
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


class Checks:
    """Runs named checks in order; a failed check is reported with its
    reason and the run goes on, unless it was marked fatal (the rest then
    count as failed: they could not run)."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.stopped = None

    def run(self, title, fn, fatal=False):
        if self.stopped:
            print("FAIL %s: not run (%s failed)" % (title, self.stopped), flush=True)
            self.failed += 1
            return None
        t0 = time.monotonic()
        try:
            detail = fn()
        except Exception as e:  # reported, and counted as a failure
            print("FAIL %s: %s" % (title, e or type(e).__name__), flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc(file=sys.stdout)
            self.failed += 1
            if fatal:
                self.stopped = title
            return None
        extra = (": %s" % detail) if isinstance(detail, str) and detail else ""
        print("ok   %s (%.1f s)%s" % (title, time.monotonic() - t0, extra), flush=True)
        self.passed += 1
        return detail

    def summary(self):
        """Prints the closing line and returns the process exit code."""
        print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed),
              flush=True)
        return 1 if self.failed else 0
