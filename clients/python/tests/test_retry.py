"""503 handling against a scripted local HTTP server (http.server): the
client retries a bounded number of times, waits what Retry-After says
(capped by max_retry_wait; doubling from 0.25 s without one), and raises
Overloaded / Draining with retry_after when the tries run out."""
import email.utils
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import normd
import normd.client

OK = {"output": {"shape": [2], "dtype": "float32", "data": [-1, 1]},
      "stats": {"shape": [], "mean": [1.5], "var": [0.25], "rstd": [1.9999]}}


def problem(code, detail="busy"):
    return {"type": "urn:normd:problem:" + code, "title": "Service Unavailable",
            "status": 503, "detail": detail, "code": code}


class Scripted:
    """A server answering the scripted (status, headers, body) in turn
    (the last one again once the script is used up)."""

    def __init__(self, script):
        self.script, self.requests = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers), body))
                status, headers, doc = outer.script[
                    min(len(outer.requests), len(outer.script)) - 1]
                data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    servers = []

    def start(*script):
        s = Scripted(script)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


@pytest.fixture
def sleeps(monkeypatch):
    """The waits the client asks for (without waiting them)."""
    recorded = []
    monkeypatch.setattr(normd.client.time, "sleep", recorded.append)
    return recorded


BUSY = (503, {"Content-Type": "application/problem+json", "Retry-After": "3"},
        problem("overloaded"))
FINE = (200, {"Content-Type": "application/json"}, OK)


def test_retried_until_answered_honouring_retry_after(scripted, sleeps):
    s = scripted(BUSY, BUSY, FINE)
    r = normd.Client(s.url).layer_norm(np.array([1.0, 2.0], np.float32))
    assert r.output.tolist() == [-1, 1] and r.output.dtype == np.float32
    assert len(s.requests) == 3 and sleeps == [3, 3]
    # the same request each time
    assert s.requests[0][2] == s.requests[2][2]
    assert s.requests[0][0] == "/v1/norm/layer"


def test_retry_really_waits(scripted):
    s = scripted((503, {"Retry-After": "1",
                        "Content-Type": "application/problem+json"},
                  problem("overloaded")), FINE)
    start = time.monotonic()
    normd.Client(s.url).layer_norm([1.0, 2.0])
    assert time.monotonic() - start >= 1.0
    assert len(s.requests) == 2


def test_bounded_then_overloaded(scripted, sleeps):
    s = scripted(BUSY)
    c = normd.Client(s.url, retries=2)
    with pytest.raises(normd.Overloaded) as info:
        c.layer_norm([1.0, 2.0])
    e = info.value
    assert (e.status, e.code, e.retry_after, e.detail) == (503, "overloaded", 3,
                                                           "busy")
    assert isinstance(e, normd.Unavailable)
    assert len(s.requests) == 3 and sleeps == [3, 3]


def test_no_retries(scripted, sleeps):
    s = scripted(BUSY, FINE)
    with pytest.raises(normd.Overloaded):
        normd.Client(s.url, retries=0).layer_norm([1.0, 2.0])
    assert len(s.requests) == 1 and sleeps == []


def test_wait_capped_and_backoff_without_retry_after(scripted, sleeps):
    long_wait = (503, {"Retry-After": "3600",
                       "Content-Type": "application/problem+json"},
                 problem("overloaded"))
    s = scripted(long_wait, FINE)
    normd.Client(s.url, max_retry_wait=5).layer_norm([1.0, 2.0])
    assert sleeps == [5]
    del sleeps[:]
    bare = (503, {"Content-Type": "application/problem+json"},
            problem("overloaded"))
    s = scripted(bare, bare, bare, FINE)
    normd.Client(s.url).layer_norm([1.0, 2.0])
    assert sleeps == [0.25, 0.5, 1.0]


def test_http_date_retry_after(scripted, sleeps):
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    s = scripted((503, {"Retry-After": when,
                        "Content-Type": "application/problem+json"},
                  problem("draining")), FINE)
    normd.Client(s.url).layer_norm([1.0, 2.0])
    assert len(sleeps) == 1 and 17 <= sleeps[0] <= 20


def test_draining_and_a_503_that_is_no_problem_document(scripted, sleeps):
    s = scripted((503, {"Content-Type": "application/problem+json",
                        "Retry-After": "2"}, problem("draining", "shutting down")))
    with pytest.raises(normd.Draining) as info:
        normd.Client(s.url, retries=1).layer_norm([1.0])
    assert info.value.retry_after == 2 and info.value.detail == "shutting down"
    s = scripted((503, {"Content-Type": "text/html"}, b"<h1>proxy busy</h1>"))
    with pytest.raises(normd.Unavailable) as info:
        normd.Client(s.url, retries=0).layer_norm([1.0])
    assert type(info.value) is normd.Unavailable
    assert info.value.code is None and "proxy busy" in info.value.detail


def test_other_errors_are_not_retried(scripted, sleeps):
    s = scripted((422, {"Content-Type": "application/problem+json"},
                  {"type": "urn:normd:problem:shape_mismatch", "status": 422,
                   "title": "Unprocessable Content", "detail": "no",
                   "code": "shape_mismatch", "field": "normalized_shape"}))
    with pytest.raises(normd.ShapeError):
        normd.Client(s.url).layer_norm([1.0])
    assert len(s.requests) == 1 and sleeps == []


def test_api_key_and_path_prefix_are_sent(scripted):
    s = scripted(FINE)
    normd.Client(s.url + "/normd/", api_key="k" * 20).layer_norm([1.0, 2.0])
    path, headers, _ = s.requests[0]
    assert path == "/normd/v1/norm/layer"
    assert headers["Authorization"] == "Bearer " + "k" * 20


def test_live_daemon_overloaded_then_retried(make_daemon):
    """One worker, one in-flight slot: concurrent calls get 503 +
    Retry-After from the real daemon, and the client's retries get every
    one answered (the simulation keeps the worker busy ~0.3 s)."""
    d = make_daemon("--threads", 1, "--max-inflight", 1)
    n = 3
    ready = threading.Barrier(n, timeout=30)
    results, clients = [None] * n, []

    def call(i):
        c = normd.Client(d.base, retries=20)
        c.statuses, inner = [], c._exchange_once

        def once(*args):  # every try, retries included
            answer = inner(*args)
            c.statuses.append(answer[0])
            return answer
        c._exchange_once = once
        clients.append(c)
        ready.wait()
        try:
            results[i] = c.simulate_residual(tokens=64, d=256, layers=16)
        except Exception as e:  # reported below
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(r, normd.ResidualResult) for r in results), results
    for r in results[1:]:
        np.testing.assert_array_equal(r.pre.rms, results[0].pre.rms)
    statuses = sorted(s for c in clients for s in c.statuses)
    assert statuses.count(200) == n and 503 in statuses, statuses
    assert set(statuses) == {200, 503}
    with pytest.raises(normd.Overloaded) as info:
        # the slot taken by a slow call, a second call with no retries is shed
        slow = threading.Thread(target=lambda: normd.Client(d.base)
                                .simulate_residual(tokens=64, d=256, layers=64))
        slow.start()
        time.sleep(0.2)
        try:
            normd.Client(d.base, retries=0).simulate_residual(layers=1)
        finally:
            slow.join(60)
    assert info.value.retry_after == 1 and info.value.code == "overloaded"
