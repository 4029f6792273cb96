"""Helpers for normd's black-box tests: start the real daemon on an ephemeral
port, talk HTTP to it with the standard library only, and reference
implementations of the norms in double precision.

Every wait here is bounded: daemon startup (STARTUP_TIMEOUT), each HTTP
exchange (HTTP_TIMEOUT, a socket timeout), and process exit (wait timeouts),
so a broken daemon fails a test instead of hanging the suite.
"""
import collections
import http.client
import json
import math
import os
import re
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# NORMD_BIN overrides the binary (e.g. a sanitizer build); paths are taken
# relative to the repository root, where the daemon also runs (it serves
# web/ and api/openapi.yaml relative to its working directory).
NORMD_BIN = REPO_ROOT / os.environ.get("NORMD_BIN", "build/normd")
CONFIG = "config/normd.json"
STARTUP_TIMEOUT = 10.0
HTTP_TIMEOUT = 20.0
EXIT_TIMEOUT = 10.0

LISTEN_RE = re.compile(r"listening on https?://127\.0\.0\.1:(\d+)")
JSON = "application/json"
PROBLEM = "application/problem+json"


class Response:
    """A complete HTTP answer: status, headers (case-insensitive), body."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name)

    @property
    def content_type(self):
        return self.headers.get("Content-Type")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %d %s %r>" % (self.status, self.content_type,
                                        self.body[:300])


def read_response(conn, method="POST"):
    resp = conn.getresponse()
    body = resp.read() if method != "HEAD" else b""
    return Response(resp.status, resp.reason, resp.headers, body)


class Daemon:
    """One normd process on 127.0.0.1 and an ephemeral port."""

    def __init__(self, *extra_args, env=None):
        if not NORMD_BIN.is_file():
            raise RuntimeError("%s does not exist: build it with `make build/normd`"
                               % NORMD_BIN)
        self.args = [str(NORMD_BIN), "--port", "0", "--host", "127.0.0.1",
                     "--config", CONFIG] + [str(a) for a in extra_args]
        self.lines = collections.deque(maxlen=20000)
        self.port = None
        self._started = threading.Event()
        self.proc = subprocess.Popen(
            self.args, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=dict(os.environ, **(env or {})), start_new_session=True)
        # The reader drains stderr for the daemon's whole life (the access
        # log would otherwise fill the pipe and block the daemon).
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._started.wait(STARTUP_TIMEOUT) or self.port is None:
            self.kill()
            raise RuntimeError("normd did not report its port within %.0fs "
                               "(exit code %r); stderr:\n%s"
                               % (STARTUP_TIMEOUT, self.proc.returncode,
                                  self.log()))

    def _read_stderr(self):
        try:
            for raw in iter(self.proc.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                if self.port is None:
                    m = LISTEN_RE.search(line)
                    if m:
                        self.port = int(m.group(1))
                        self._started.set()
        except (OSError, ValueError):
            pass
        finally:
            self._started.set()  # EOF: the process is gone

    def log(self):
        return "\n".join(self.lines)

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.port

    def connect(self, timeout=HTTP_TIMEOUT):
        return http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=timeout)

    def request(self, method, path, body=None, headers=None,
                timeout=HTTP_TIMEOUT):
        conn = self.connect(timeout)
        try:
            conn.request(method, path, body=body, headers=dict(headers or {}))
            return read_response(conn, method)
        finally:
            conn.close()

    def get(self, path, headers=None, timeout=HTTP_TIMEOUT):
        return self.request("GET", path, headers=headers, timeout=timeout)

    def post_json(self, path, obj, headers=None, timeout=HTTP_TIMEOUT):
        body = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": JSON}
        h.update(headers or {})
        return self.request("POST", path, body=body, headers=h,
                            timeout=timeout)

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout=EXIT_TIMEOUT):
        """The exit code; raises subprocess.TimeoutExpired when still up.
        Returns once the reader has taken the last of stderr too (EOF), so
        log() then holds every line: the process can be gone while its
        final lines still wait in the pipe."""
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=EXIT_TIMEOUT)
        return code

    def kill(self):
        """Always safe; SIGKILL by pid if still running, then reap."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self._reader.join(timeout=2.0)
        if self.proc.stderr:
            self.proc.stderr.close()


# What an X-Request-Id is echoed as when normd makes it (request_id.h).
GENERATED_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def request_instance(request_id):
    """A problem's `instance` for the request of this X-Request-Id: the
    URN, with what a URN may not hold raw percent-encoded (RFC 3986)."""
    from urllib.parse import quote
    return "urn:normd:request:" + quote(request_id, safe="-._~!$&'()*+,;=:@/")


def assert_problem(resp, status, code, field=None):
    """The response is an RFC 9457 problem with this status and code."""
    assert resp.status == status, resp
    assert resp.content_type == PROBLEM, resp
    assert resp.body, "empty problem body: %r" % resp
    doc = resp.json()
    assert doc["status"] == status, doc
    assert doc["code"] == code, doc
    assert doc["type"] == "urn:normd:problem:" + code, doc
    assert isinstance(doc["title"], str) and doc["title"], doc
    assert isinstance(doc["detail"], str) and doc["detail"], doc
    assert set(doc) <= {"type", "title", "status", "detail", "code", "field",
                        "instance"}, doc
    # RFC 9457 instance: this request, as its X-Request-Id names it
    assert doc.get("instance") == request_instance(resp.header("X-Request-Id")), \
        (doc, resp.headers)
    if field is not None:
        assert doc.get("field") == field, doc
    return doc


# ---- numbers -----------------------------------------------------------------

def f32(x):
    """x rounded to float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def bf16(x):
    """x rounded once (nearest even) to bfloat16; normal range only."""
    if x == 0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)  # 0.5 <= |m| < 1
    return math.ldexp(round(m * 256.0), e - 8)


def close(got, want, rel, floor=1e-12):
    """|got - want| <= rel * max(|want|, floor); NaN only matches NaN."""
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if got == want:
        return True
    return abs(got - want) <= rel * max(abs(want), floor)


def assert_close(got, want, rel, floor=1e-12, what="value"):
    assert len(got) == len(want), "%s: %d values, want %d" % (what, len(got),
                                                             len(want))
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want))
           if not close(g, w, rel, floor)]
    assert not bad, "%s: %d mismatches (index, got, want), first: %r" % (
        what, len(bad), bad[:5])


def nonfinite(v):
    """A JSON value as a float, reading the proto3 non-finite spellings."""
    if isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf,
                "-Infinity": -math.inf}[v]
    return float(v)


def floats(values):
    return [nonfinite(v) for v in values]


def prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


# ---- reference norms in double precision --------------------------------------
# Each returns (output, mean, var, rstd) as flat lists; inputs are flat,
# row-major, already rounded to their dtype.

def _moments(vals):
    n = len(vals)
    mean = math.fsum(vals) / n
    m2 = math.fsum((v - mean) ** 2 for v in vals)
    return mean, m2


def ref_layer(x, shape, ndim=1, eps=1e-5, weight=None, bias=None,
              unbiased=False, outside=False):
    row = prod(shape[len(shape) - ndim:])
    out, means, vars_, rstds = [], [], [], []
    for r in range(len(x) // row):
        vals = x[r * row:(r + 1) * row]
        mean, m2 = _moments(vals)
        var = m2 / (row - 1 if unbiased else row)
        rstd = 1.0 / (math.sqrt(var) + eps) if outside else 1.0 / math.sqrt(var + eps)
        for i, v in enumerate(vals):
            y = (v - mean) * rstd
            if weight is not None:
                y *= weight[i]
            if bias is not None:
                y += bias[i]
            out.append(y)
        means.append(mean)
        vars_.append(var)
        rstds.append(rstd)
    return out, means, vars_, rstds


def ref_rms(x, shape, ndim=1, eps=1e-6, weight=None):
    row = prod(shape[len(shape) - ndim:])
    out, rmss, rstds = [], [], []
    for r in range(len(x) // row):
        vals = x[r * row:(r + 1) * row]
        ms = math.fsum(v * v for v in vals) / row
        rstd = 1.0 / math.sqrt(ms + eps)
        out.extend(v * rstd * (weight[i] if weight else 1.0)
                   for i, v in enumerate(vals))
        rmss.append(math.sqrt(ms))
        rstds.append(rstd)
    return out, rmss, rstds


def _per_channel_apply(x, shape, groups_of, stats, weight, bias):
    n, c = shape[0], shape[1]
    s = prod(shape[2:])
    out = [0.0] * len(x)
    for ni in range(n):
        for ci in range(c):
            mean, rstd = stats[groups_of(ni, ci)]
            for si in range(s):
                i = (ni * c + ci) * s + si
                y = (x[i] - mean) * rstd
                if weight is not None:
                    y *= weight[ci]
                if bias is not None:
                    y += bias[ci]
                out[i] = y
    return out


def ref_batch(x, shape, eps=1e-5, weight=None, bias=None):
    n, c = shape[0], shape[1]
    s = prod(shape[2:])
    means, vars_, rstds, unbiased = [], [], [], []
    for ci in range(c):
        vals = [x[(ni * c + ci) * s + si] for ni in range(n) for si in range(s)]
        mean, m2 = _moments(vals)
        means.append(mean)
        vars_.append(m2 / len(vals))
        unbiased.append(m2 / (len(vals) - 1))
        rstds.append(1.0 / math.sqrt(m2 / len(vals) + eps))
    stats = list(zip(means, rstds))
    out = _per_channel_apply(x, shape, lambda ni, ci: ci, stats, weight, bias)
    return out, means, vars_, rstds, unbiased


def ref_group(x, shape, num_groups, eps=1e-5, weight=None, bias=None):
    n, c = shape[0], shape[1]
    block = len(x) // (n * num_groups)
    means, vars_, rstds = [], [], []
    for gi in range(n * num_groups):
        mean, m2 = _moments(x[gi * block:(gi + 1) * block])
        means.append(mean)
        vars_.append(m2 / block)
        rstds.append(1.0 / math.sqrt(m2 / block + eps))
    stats = list(zip(means, rstds))
    per = c // num_groups
    out = _per_channel_apply(x, shape,
                             lambda ni, ci: ni * num_groups + ci // per,
                             stats, weight, bias)
    return out, means, vars_, rstds


def ref_instance(x, shape, eps=1e-5, weight=None, bias=None):
    n, c = shape[0], shape[1]
    block = prod(shape[2:])
    means, vars_, rstds = [], [], []
    for gi in range(n * c):
        mean, m2 = _moments(x[gi * block:(gi + 1) * block])
        means.append(mean)
        vars_.append(m2 / block)
        rstds.append(1.0 / math.sqrt(m2 / block + eps))
    stats = list(zip(means, rstds))
    out = _per_channel_apply(x, shape, lambda ni, ci: ni * c + ci, stats,
                             weight, bias)
    return out, means, vars_, rstds


# ---- raw sockets ---------------------------------------------------------------

def raw_exchange(port, data, timeout=10.0, shutdown_write=False):
    """Sends raw bytes, returns everything the server sends until it closes
    (or the timeout passes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if shutdown_write:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)


def status_of(raw):
    """The status code of a raw HTTP response, or None."""
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", raw)
    return int(m.group(1)) if m else None


def wait_until(pred, timeout, interval=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()

