"""Traffic for the stress harness: the request mix (every route, JSON and
binary, small and large), a small HTTP/1.1 client on raw sockets, and
closed-loop (as fast as possible) and open-loop (fixed rate) drivers that
record every answer's status and latency.

Standard library only. Every socket has a timeout and every loop a deadline.
"""
import json
import random
import socket
import struct
import threading
import time

JSON = "application/json"
PROBLEM = "application/problem+json"
IO_TIMEOUT = 30.0


# ---- request bodies ----------------------------------------------------------

def npy(shape, values, descr="<f4"):
    """A version 1.0 .npy file of float32 (or descr) values."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header = d.encode() + b" " * ((-(10 + len(d) + 1)) % 64) + b"\n"
    fmt = {"<f4": "<%df", "<f8": "<%dd", "<f2": "<%de"}[descr]
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header +
            struct.pack(fmt % len(values), *values))


def framed(header, tail):
    """A binary-framed body and its Inference-Header-Content-Length."""
    h = json.dumps(header, separators=(",", ":")).encode()
    return h + tail, len(h)


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def matrix(rows, cols, seed=1):
    rnd = random.Random(seed)
    return [round(rnd.uniform(-3, 3), 3) for _ in range(rows * cols)]


class Req:
    """One request of the mix. `check(status, headers, body)` returns None
    when the answer is right, else what is wrong."""

    def __init__(self, name, method, path, body=b"", headers=None,
                 weight=1, expect=200, ctype=JSON):
        self.name = name
        self.method = method
        self.path = path
        self.body = body
        self.headers = dict(headers or {})
        self.weight = weight
        self.expect = expect
        self.ctype = ctype
        head = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"]
        head += ["%s: %s" % kv for kv in self.headers.items()]
        if method in ("POST", "PUT") or body:
            head.append("Content-Length: %d" % len(body))
        self.wire = ("\r\n".join(head) + "\r\n\r\n").encode() + body

    def check(self, status, headers, body):
        if status != self.expect:
            return "status %d, want %d: %r" % (status, self.expect, body[:200])
        if self.ctype is None:
            return None
        ctype = headers.get("content-type", "")
        if not ctype.startswith(self.ctype):
            return "content-type %r, want %r" % (ctype, self.ctype)
        if self.ctype == JSON and body:
            try:
                json.loads(body)
            except ValueError as e:
                return "invalid JSON (%s): %r" % (e, body[:200])
        return None


def compute_mix():
    """Every compute route and format, small and large, weighted so that
    most requests are small (as real traffic is)."""
    small = {"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]]}
    nchw = {"shape": [2, 4, 3], "data": matrix(2 * 4, 3)}
    big_rows, big_cols = 256, 1024  # 256K elements: ~1.5 MB of JSON, 1 MB .npy
    big_data = matrix(big_rows, big_cols)
    mix = [
        Req("layer-json", "POST", "/v1/norm/layer", js(small), {"Content-Type": JSON}, 8),
        Req("rms-json", "POST", "/v1/norm/rms",
            js({"input": [[1, 2, 3, 4]], "weight": [1, 1, 2, 2]}), {"Content-Type": JSON}, 4),
        Req("batch-json", "POST", "/v1/norm/batch",
            js({"input": nchw, "running_mean": [0] * 4, "running_var": [1] * 4}),
            {"Content-Type": JSON}, 3),
        Req("group-json", "POST", "/v1/norm/group",
            js({"input": nchw, "num_groups": 2}), {"Content-Type": JSON}, 3),
        Req("instance-json", "POST", "/v1/norm/instance",
            js({"input": nchw, "weight": [1, 2, 3, 4], "bias": [0, 0, 1, 1]}),
            {"Content-Type": JSON}, 3),
        Req("moments-json", "POST", "/v1/moments", js(small), {"Content-Type": JSON}, 2),
        Req("merge-json", "POST", "/v1/moments/merge",
            js({"parts": [{"count": [5], "mean": [3], "m2": [10]},
                          {"count": [5], "mean": [6], "m2": [40]}]}),
            {"Content-Type": JSON}, 2),
        Req("residual-json", "POST", "/v1/residual/simulate",
            js({"tokens": 4, "d": 16, "layers": 4}), {"Content-Type": JSON}, 1),
        Req("layer-npy", "POST", "/v1/norm/layer?eps=0.001",
            npy([4, 8], matrix(4, 8)),
            {"Content-Type": "application/x-npy", "Accept": "application/x-npy"}, 4,
            ctype="application/x-npy"),
        Req("layer-framed", "POST", "/v1/norm/layer",
            *_framed_req({"input": {"shape": [4, 8], "dtype": "float32",
                                    "parameters": {"binary_data_size": 128}}},
                          f32(matrix(4, 8))), weight=4,
            ctype="application/octet-stream"),
        Req("v2-layer-json", "POST", "/v2/models/layer_norm/infer",
            js({"inputs": [{"name": "input", "shape": [2, 5], "datatype": "FP32",
                            "data": small["input"]}]}), {"Content-Type": JSON}, 3),
        Req("v2-rms-binary", "POST", "/v2/models/rms_norm/infer",
            *_framed_req({"inputs": [{"name": "input", "shape": [4, 8],
                                      "datatype": "FP32",
                                      "parameters": {"binary_data_size": 128}}],
                          "parameters": {"binary_data_output": True}},
                         f32(matrix(4, 8))), weight=2,
            ctype="application/octet-stream"),
        # large ones: about one request in 30
        Req("layer-json-large", "POST", "/v1/norm/layer",
            js({"input": {"shape": [big_rows, big_cols], "data": big_data},
                "return": "stats"}), {"Content-Type": JSON}, 1),
        Req("layer-npy-large", "POST", "/v1/norm/layer",
            npy([big_rows, big_cols], big_data),
            {"Content-Type": "application/x-npy", "Accept": "application/x-npy"}, 1,
            ctype="application/x-npy"),
        Req("batch-framed-large", "POST", "/v1/norm/batch",
            *_framed_req({"input": {"shape": [64, 16, 256], "dtype": "float32",
                                    "parameters": {"binary_data_size": 64 * 16 * 256 * 4}}},
                         f32(matrix(64 * 16, 256))), weight=1,
            ctype="application/octet-stream"),
    ]
    return mix


def get_mix():
    """The GET routes, answered on the HTTP threads."""
    plain = [("/healthz", JSON), ("/readyz", JSON), ("/v1/info", JSON),
             ("/metrics", "text/plain"), ("/openapi.yaml", "application/yaml"),
             ("/", "text/html"), ("/v2", JSON),
             ("/v2/models/layer_norm", JSON)]
    out = [Req("get" + p, "GET", p, weight=1, ctype=c) for p, c in plain]
    out.append(Req("get/v2/health/ready", "GET", "/v2/health/ready", ctype=None))
    return out


def full_mix():
    return compute_mix() + get_mix()


def _framed_req(header, tail):
    body, hl = framed(header, tail)
    return body, {"Content-Type": "application/octet-stream",
                  "Inference-Header-Content-Length": str(hl)}


def js(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


class Picker:
    """Weighted random choice, reproducible per seed."""

    def __init__(self, reqs, seed):
        self.reqs = reqs
        self.cum = []
        total = 0
        for r in reqs:
            total += r.weight
            self.cum.append(total)
        self.total = total
        self.rnd = random.Random(seed)

    def pick(self):
        x = self.rnd.uniform(0, self.total)
        for r, c in zip(self.reqs, self.cum):
            if x <= c:
                return r
        return self.reqs[-1]


# ---- a minimal HTTP/1.1 client ---------------------------------------------------

class Conn:
    """One keep-alive connection; reconnects when the server closed it."""

    def __init__(self, port, timeout=IO_TIMEOUT):
        self.port = port
        self.timeout = timeout
        self.sock = None
        self.buf = b""

    def _connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port),
                                             timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def _read_until(self, marker):
        while marker not in self.buf:
            chunk = self.sock.recv(262144)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buf += chunk

    def _read_exact(self, n):
        parts = [self.buf[:n]]
        have = len(parts[0])
        self.buf = self.buf[n:]
        while have < n:
            chunk = self.sock.recv(min(1 << 20, max(65536, n - have)))
            if not chunk:
                raise ConnectionError("closed mid-body")
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self.buf = data[n:] + self.buf
        return data[:n]

    def exchange(self, wire, head_only=False):
        """Sends one request; returns (status, headers, body)."""
        if self.sock is None:
            self._connect()
        self.sock.sendall(wire)
        self._read_until(b"\r\n\r\n")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if head_only:
            n = 0
        elif "content-length" in headers:
            n = int(headers["content-length"])
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            return status, headers, self._read_chunked()
        else:
            n = 0
        body = self._read_exact(n)
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body

    def _read_chunked(self):
        out = []
        while True:
            self._read_until(b"\r\n")
            size_line, self.buf = self.buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            data = self._read_exact(size + 2)
            if size == 0:
                return b"".join(out)
            out.append(data[:-2])


def one_shot(port, req, timeout=IO_TIMEOUT):
    """One request on its own connection; (status, headers, body)."""
    c = Conn(port, timeout)
    try:
        return c.exchange(req.wire if isinstance(req, Req) else req)
    finally:
        c.close()


# ---- drivers -----------------------------------------------------------------------

class Results:
    """Thread-safe tally: per-status counts, latencies of answers by status,
    transport errors and wrong answers (first few kept)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.status = {}
        self.lat = {}          # status -> [seconds]
        self.lat_by_name = {}  # request name -> [seconds] (200s only)
        self.errors = []       # transport errors
        self.wrong = []        # answers that failed their check
        self.nerrors = 0
        self.nwrong = 0
        self.retry_after_missing = 0
        self.timeline = []     # (t, status) for recovery checks

    def add(self, req, status, headers, body, lat, t_end):
        problem = None
        if status == 503:
            if "retry-after" not in headers:
                problem = "503 without Retry-After"
        else:
            problem = req.check(status, headers, body)
        with self.lock:
            self.status[status] = self.status.get(status, 0) + 1
            self.lat.setdefault(status, []).append(lat)
            if status == 200:
                self.lat_by_name.setdefault(req.name, []).append(lat)
            self.timeline.append((t_end, status))
            if problem:
                self.nwrong += 1
                if len(self.wrong) < 5:
                    self.wrong.append("%s: %s" % (req.name, problem))

    def error(self, req, exc, t_end):
        with self.lock:
            self.nerrors += 1
            self.timeline.append((t_end, None))
            if len(self.errors) < 5:
                self.errors.append("%s: %r" % (req.name, exc))

    @property
    def total(self):
        return sum(self.status.values()) + self.nerrors

    def count(self, status):
        return self.status.get(status, 0)

    def latencies(self, status=200):
        return sorted(self.lat.get(status, []))


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def _send(conn, req, results):
    t0 = time.monotonic()
    try:
        status, headers, body = conn.exchange(req.wire)
    except (OSError, ValueError, IndexError, ConnectionError) as e:
        conn.close()
        results.error(req, e, time.monotonic())
        return
    t1 = time.monotonic()
    results.add(req, status, headers, body, t1 - t0, t1)


def closed_loop(port, reqs, clients, seconds, seed=1):
    """`clients` connections sending back to back for `seconds`."""
    results = Results()
    deadline = time.monotonic() + seconds

    def worker(i):
        picker = Picker(reqs, seed * 1000 + i)
        conn = Conn(port)
        try:
            while time.monotonic() < deadline:
                _send(conn, picker.pick(), results)
        finally:
            conn.close()

    _run_threads(worker, clients, seconds + IO_TIMEOUT + 5)
    return results


def open_loop(port, reqs, rate, seconds, clients=32, seed=2, stop=None):
    """Requests at `rate` per second for `seconds` (open loop: the schedule
    does not wait for answers; `clients` connections share it, each taking
    the next slot). Late slots are sent at once (counted in `late`)."""
    results = Results()
    start = time.monotonic()
    interval = 1.0 / rate
    slot = [0]
    lock = threading.Lock()
    late = [0]

    def worker(i):
        picker = Picker(reqs, seed * 1000 + i)
        conn = Conn(port)
        try:
            while True:
                with lock:
                    k = slot[0]
                    slot[0] += 1
                at = start + k * interval
                now = time.monotonic()
                # the run ends on time: slots a late client could not send
                # by then are dropped (counted in `missed`)
                if (at - start >= seconds or now - start >= seconds or
                        (stop is not None and stop.is_set())):
                    return
                if at > now:
                    time.sleep(at - now)
                elif now - at > 0.05:
                    with lock:
                        late[0] += 1
                _send(conn, picker.pick(), results)
        finally:
            conn.close()

    _run_threads(worker, clients, seconds + IO_TIMEOUT + 5)
    results.late = late[0]
    results.elapsed = time.monotonic() - start
    results.missed = max(0, int(rate * seconds) - results.total)
    results.start = start
    return results


def throughput_by_window(results, window):
    """Answers per second in consecutive windows of `window` seconds."""
    counts = {}
    for t, _ in results.timeline:
        k = int((t - results.start) // window)
        counts[k] = counts.get(k, 0) + 1
    return [counts.get(k, 0) / window for k in range(max(counts, default=-1) + 1)]


def _run_threads(target, n, join_timeout):
    threads = [threading.Thread(target=target, args=(i,), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + join_timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)
