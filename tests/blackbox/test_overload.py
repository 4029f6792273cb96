"""Backpressure: with one worker and one in-flight slot, concurrent requests
beyond the slot get 503 + Retry-After at once; the rest succeed."""
import http.client
import json
import threading
import time

from normd_helpers import JSON, Response, assert_problem

CLIENTS = 8
# Work that keeps the one worker busy for a while (~0.3 s on a 2-core test
# machine) with a small body: the Pre-Norm / Post-Norm simulation costs
# layers x tokens x d^2. A big tensor would not do: it decodes too fast.
SLOW_ROUTE = "/v1/residual/simulate"


def slow_body(layers=16):
    return ('{"tokens":64,"d":256,"layers":%d}' % layers).encode()


def test_503_when_the_queue_is_full(make_daemon):
    d = make_daemon("--threads", 1, "--max-inflight", 1)
    body = slow_body()

    # One request alone: it must take long enough on the worker for the
    # others to arrive while it runs (they arrive within a few ms, below).
    t0 = time.monotonic()
    r = d.post_json(SLOW_ROUTE, body)
    alone = time.monotonic() - t0
    assert r.status == 200, r
    assert len(r.json()["pre"]["rms"]) == 17
    assert alone > 0.02, "request too fast (%.3fs) to overlap reliably" % alone

    # Every client sends all but the last byte, waits for the others, then
    # sends its last byte: the bodies complete within about a millisecond.
    ready = threading.Barrier(CLIENTS, timeout=30)
    results = [None] * CLIENTS

    def client(i):
        conn = d.connect(timeout=30)
        try:
            conn.putrequest("POST", SLOW_ROUTE)
            conn.putheader("Content-Type", JSON)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            conn.send(body[:-1])
            ready.wait()
            conn.send(body[-1:])
            resp = conn.getresponse()
            results[i] = Response(resp.status, resp.reason, resp.headers,
                                  resp.read())
        except Exception as e:  # reported below
            results[i] = e
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a client hung"
    errors = [r for r in results if not isinstance(r, Response)]
    assert not errors, errors

    statuses = sorted(r.status for r in results)
    overloaded = [r for r in results if r.status == 503]
    ok = [r for r in results if r.status == 200]
    assert overloaded, "no 503 among %s (one request took %.3fs)" % (statuses, alone)
    assert ok, statuses
    assert len(ok) + len(overloaded) == CLIENTS, statuses
    for r in overloaded:
        doc = assert_problem(r, 503, "overloaded")
        assert doc["title"] == "Service Unavailable"
        assert r.header("Retry-After") == "1"
    for r in ok:
        assert len(r.json()["pre"]["rms"]) == 17

    # the slot is given back: the daemon serves again
    r = d.post_json("/v1/norm/layer", {"input": [1, 2, 3]})
    assert r.status == 200
    assert d.get("/readyz").status == 200


def test_retry_after_follows_config(make_daemon):
    d = make_daemon("--threads", 1, "--max-inflight", 1, "--retry-after-s", 7)
    body = slow_body()
    ready = threading.Barrier(3, timeout=30)
    results = []
    lock = threading.Lock()

    def client():
        conn = d.connect(timeout=30)
        try:
            conn.putrequest("POST", SLOW_ROUTE)
            conn.putheader("Content-Type", JSON)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            conn.send(body[:-1])
            ready.wait()
            conn.send(body[-1:])
            resp = conn.getresponse()
            with lock:
                results.append((resp.status, resp.getheader("Retry-After"),
                                resp.read()))
        finally:
            conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 3
    refused = [(s, ra, b) for s, ra, b in results if s == 503]
    assert refused, [s for s, _, _ in results]
    for s, ra, b in refused:
        assert ra == "7"
        assert json.loads(b)["code"] == "overloaded"


def test_503_from_the_headers_when_the_pool_is_full(make_daemon):
    """With the one slot taken, a request announcing a big body is refused
    from its headers alone: 503 + Retry-After + Connection: close arrive
    before a single body byte is sent (and while the slot is still busy)."""
    import socket
    from normd_helpers import read_response
    d = make_daemon("--threads", 1, "--max-inflight", 1)
    slow = b'{"tokens":64,"d":256,"layers":96}'  # ~1-2 s on one worker
    busy = {}

    def occupy():
        conn = d.connect(timeout=60)
        try:
            conn.request("POST", "/v1/residual/simulate", body=slow,
                         headers={"Content-Type": JSON})
            busy["r"] = read_response(conn)
        finally:
            conn.close()

    t = threading.Thread(target=occupy, daemon=True)
    t.start()
    # the slot is taken once its job is queued or running
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if "normd_jobs_inflight 1" in d.get("/metrics").body.decode():
            break
        time.sleep(0.01)
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: 50000000\r\n\r\n")
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        r = Response(resp.status, resp.reason, resp.headers, resp.read())
    assert "r" not in busy, "the slow request ended first: %r" % busy
    doc = assert_problem(r, 503, "overloaded")
    assert r.header("Retry-After") == "1"
    assert (r.header("Connection") or "").lower() == "close"
    assert "retry" in doc["detail"]

    t.join(timeout=60)
    assert busy["r"].status == 200, busy["r"]
    # the slot is free again: a normal request goes through
    assert d.post_json("/v1/norm/layer", {"input": [1, 2, 3]}).status == 200
    assert "POST /v1/norm/layer 503 in=0" in d.log()
