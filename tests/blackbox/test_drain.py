"""SIGTERM / SIGINT drain: readiness turns 503, no new connections, every
accepted request is answered in full, exit code 0."""
import signal
import socket
import threading
import time

import pytest

from normd_helpers import JSON, assert_problem, read_response

CLIENTS = 6
# Work that keeps the one worker busy for a while (~0.3 s each on a 2-core
# test machine) with a small body and answer: the Pre-Norm / Post-Norm
# simulation costs layers x tokens x d^2. A big tensor would not do: its
# cost is mostly decoding, which got fast enough to finish before SIGTERM.
SLOW_ROUTE = "/v1/residual/simulate"
SLOW_LAYERS = 16


def big_body():
    return ('{"tokens":64,"d":256,"layers":%d}' % SLOW_LAYERS).encode()


def test_sigterm_drains_in_flight_requests(make_daemon):
    d = make_daemon("--threads", 1)
    body = big_body()

    # A keep-alive connection opened before the signal, to ask /readyz during
    # the drain (the listening socket is closed by then).
    probe = d.connect(timeout=10)
    probe.request("GET", "/readyz")
    assert read_response(probe, "GET").status == 200

    sent = [threading.Event() for _ in range(CLIENTS)]
    results = [None] * CLIENTS

    def client(i):
        conn = d.connect(timeout=60)
        try:
            conn.putrequest("POST", SLOW_ROUTE)
            conn.putheader("Content-Type", JSON)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            conn.send(body)
            sent[i].set()
            results[i] = read_response(conn)
        except Exception as e:  # reported below
            results[i] = e
            sent[i].set()
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for e in sent:
        assert e.wait(30), "a client could not send its body"
    time.sleep(0.1)  # the bodies are read and the jobs queued
    t_signal = time.monotonic()
    d.signal(signal.SIGTERM)
    time.sleep(0.05)

    # During the drain: /readyz is 503 on the open connection ...
    probe.request("GET", "/readyz")
    ready = read_response(probe, "GET")
    doc = assert_problem(ready, 503, "draining")
    assert ready.header("Retry-After") == "1"
    assert doc["title"] == "Service Unavailable"
    # ... the process is still alive ...
    probe.request("GET", "/healthz")
    assert read_response(probe, "GET").status == 200
    # ... new compute work is refused, and the connection is closed ...
    probe.request("POST", "/v1/norm/layer", body=b'{"input": [1, 2]}',
                  headers={"Content-Type": JSON})
    late = read_response(probe)
    assert_problem(late, 503, "draining")
    assert late.header("Retry-After") == "1"
    assert (late.header("Connection") or "").lower() == "close"
    probe.close()
    # ... and new connections are refused (the listening socket is closed).
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", d.port), timeout=5).close()
    still_running = sum(1 for r in results if r is None)
    assert still_running > 0, "the requests finished before the drain began"

    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a client hung"
    for r in results:
        assert not isinstance(r, Exception), r
        assert r.status == 200, r
        doc = r.json()  # complete, parseable JSON
        assert len(doc["pre"]["rms"]) == SLOW_LAYERS + 1
        assert len(doc["post"]["rms"]) == SLOW_LAYERS + 1

    assert d.wait(timeout=30) == 0
    assert time.monotonic() - t_signal < 30
    log = d.log()
    assert "draining" in log and "drained, exiting" in log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_idle_daemon_exits_zero(make_daemon, sig):
    d = make_daemon()
    assert d.get("/healthz").status == 200
    t0 = time.monotonic()
    d.signal(sig)
    assert d.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 5


def wait_in_flight(d, n, timeout=10):
    """Waits until the daemon counts n requests in flight (its own gauge),
    so a signal cannot arrive before it has seen a request at all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = d.get("/metrics")
        for line in r.body.decode().splitlines():
            if line.startswith("normd_inflight_requests ") and \
                    float(line.split()[1]) >= n:
                return
        time.sleep(0.01)
    raise AssertionError("the daemon never had %d requests in flight" % n)


def test_drain_timeout_exits_nonzero(make_daemon):
    """With --drain-timeout-s 0 a request in flight is abandoned: exit 1."""
    d = make_daemon("--threads", 1, "--drain-timeout-s", 0)
    body = big_body()
    sent, done = threading.Event(), threading.Event()

    def client():
        conn = d.connect(timeout=30)
        try:
            conn.putrequest("POST", SLOW_ROUTE)
            conn.putheader("Content-Type", JSON)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            conn.send(body)
            sent.set()
            conn.getresponse().read()
        except Exception:
            pass  # the daemon exits under it: a reset is expected
        finally:
            sent.set()
            conn.close()
            done.set()

    t = threading.Thread(target=client, daemon=True)
    t.start()
    assert sent.wait(30)
    wait_in_flight(d, 2)  # the slow request, and the /metrics request itself
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=10) == 1
    assert done.wait(10)
    assert "drain timeout" in d.log()


def test_drain_is_not_held_by_clients_gone_mid_upload(make_daemon):
    d = make_daemon("--drain-timeout-s", 2)
    for _ in range(10):
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
            s.sendall(b"POST /v1/norm/rms HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"input\":[")
    assert d.get("/healthz").status == 200
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=10) == 0


def test_upload_in_progress_at_sigterm_is_answered(make_daemon):
    """A request whose headers and part of its body are in when SIGTERM comes
    is waited for: the rest of the body arrives during the drain, the request
    gets its 200, then the daemon exits 0."""
    d = make_daemon("--drain-timeout-s", 10)
    body = b'{"input": [[1, 2, 3, 4], [2, 4, 6, 8]], "return": ["stats"]}'
    half = len(body) // 2
    conn = d.connect(timeout=20)
    try:
        conn.putrequest("POST", "/v1/norm/layer")
        conn.putheader("Content-Type", JSON)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body[:half])
        time.sleep(0.2)  # headers handled, the first half read
        d.signal(signal.SIGTERM)
        time.sleep(0.3)
        assert d.alive(), "the daemon did not wait for the upload:\n" + d.log()
        conn.send(body[half:])
        r = read_response(conn)
    finally:
        conn.close()
    assert r.status == 200, r
    assert r.json()["stats"]["mean"] == [2.5, 5]
    assert d.wait(timeout=10) == 0
    log = d.log()
    assert "POST /v1/norm/layer 200" in log, log
    assert " 499 " not in log and "aborted" not in log, log


def test_drain_timeout_mid_upload_is_logged_as_a_drop(make_daemon):
    """A client that stops mid-body holds the drain only up to
    drain_timeout_s; the exit says requests were dropped, and no 499 (a
    client that left) is logged for them."""
    d = make_daemon("--drain-timeout-s", 1, "--request-timeout-s", 30)
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"input\":[")
        time.sleep(0.2)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        assert d.wait(timeout=10) == 1
        assert time.monotonic() - t0 >= 0.9
    log = d.log()
    assert "drain timeout" in log and "1 request" in log, log
    assert " 499 " not in log, log


def test_request_with_headers_arriving_at_sigterm_is_answered(make_daemon):
    """A request of which only part of the headers is in when SIGTERM comes
    holds the drain until its headers arrive; it is then refused with 503
    draining (the daemon takes no new work) instead of being reset by the
    exit, and the daemon exits 0."""
    d = make_daemon("--drain-timeout-s", 10)
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.2)
        d.signal(signal.SIGTERM)
        time.sleep(0.3)
        assert d.alive(), "the daemon did not wait for the request:\n" + d.log()
        body = b'{"input": [1, 2]}'
        s.sendall(b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        raw = b""
        while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
    assert raw.startswith(b"HTTP/1.1 503"), raw[:300]
    assert b'"code":"draining"' in raw, raw[:600]
    assert d.wait(timeout=10) == 0
