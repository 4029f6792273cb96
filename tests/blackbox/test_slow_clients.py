"""Slow and vanished clients: request_timeout_s cuts a request whose line,
headers or body trickle in (each byte resets libmicrohttpd's idle timeout,
so connection_timeout_s alone never would), leaves clients that are in
time or idle between requests alone, and a client that sends its FIN
mid-upload is let go at once rather than at connection_timeout_s.

The daemon runs with request_timeout_s 2 and connection_timeout_s 30, so
anything cut here was cut by the deadline. The sweeper looks four times a
second, so a cut comes between 2 s and about 2.5 s after the first byte;
SLACK allows for a loaded machine."""
import socket
import threading
import time

import pytest

from normd_helpers import Daemon, status_of, wait_until

DEADLINE = 2.0
SLACK = 1.0
STEP = 0.25  # seconds between trickled bytes: far below the idle timeout

HEADERS = (b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
           b"Content-Type: application/json\r\n")
LAYER = b'{"input": [1, 2, 3]}'


@pytest.fixture(scope="module")
def strict(request):
    d = Daemon("--request-timeout-s", int(DEADLINE), "--connection-timeout-s", 30)
    request.addfinalizer(d.kill)
    return d


def trickle_on(s, first, rest, step=STEP, limit=DEADLINE + 4 * SLACK):
    """On a connected socket, sends `first`, then `rest` one byte every
    `step` s, reading all the while. Returns (seconds from the first byte
    until the daemon closed the connection, or None if it answered or
    stayed open for `limit` s; everything the daemon sent)."""
    got = []
    t0 = time.monotonic()
    s.sendall(first)
    s.settimeout(step)
    i = 0
    while time.monotonic() - t0 < limit:
        try:
            b = s.recv(65536)
            if not b:
                return time.monotonic() - t0, b"".join(got)
            got.append(b)
            if i == len(rest) and status_of(b"".join(got)):
                return None, b"".join(got)  # answered
        except socket.timeout:
            if i < len(rest):
                try:
                    s.send(rest[i:i + 1])
                except OSError:  # cut while sending
                    return time.monotonic() - t0, b"".join(got)
                i += 1
        except ConnectionResetError:
            return time.monotonic() - t0, b"".join(got)
    return None, b"".join(got)


def trickle(port, first, rest, step=STEP, silent=0.0):
    """trickle_on() a new connection, after `silent` seconds connected and
    quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        time.sleep(silent)
        return trickle_on(s, first, rest, step)


def in_parallel(*calls):
    out = [None] * len(calls)

    def run(i, fn, args):
        out[i] = fn(*args)

    threads = [threading.Thread(target=run, args=(i, fn, args))
               for i, (fn, args) in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_trickled_requests_are_cut_at_the_deadline(strict):
    """A request line, headers and a body trickled one byte at a time are
    closed, unanswered, between request_timeout_s and a sweep later; a
    client that connects and waits before sending has its clock start at
    its first byte."""
    line = b"POST /v1/norm/layer HTTP/1.1\r\n" + b"X" * 200
    headers = HEADERS + b"X-Slow: " + b"a" * 200
    body = HEADERS + b"Content-Length: 1000\r\n\r\n"

    results = in_parallel(
        (trickle, (strict.port, line[:1], line[1:])),
        (trickle, (strict.port, headers[:40], headers[40:])),
        (trickle, (strict.port, body + b'{"input": [', b"1, " * 300)),
        (trickle, (strict.port, headers[:10], headers[10:], STEP, 1.5)))
    for (name, (cut, got)) in zip(["request line", "headers", "body",
                                   "headers after 1.5 s of silence"], results):
        assert cut is not None, "%s: not cut within %.1f s" % (
            name, DEADLINE + 4 * SLACK)
        assert DEADLINE - 0.05 <= cut <= DEADLINE + SLACK, (name, cut)
        assert got == b"", (name, got[:200])  # closed without an answer
    assert strict.alive()
    # a body cut at the deadline is logged (and counted) as 408
    assert wait_until(lambda: any(" 408 " in l and "request_timeout_s" in l
                                  for l in strict.lines), 2), strict.log()[-2000:]


def test_slow_but_in_time_request_is_answered(strict):
    """Headers and body trickled over about 1.3 s, under the deadline: 200."""
    wire = HEADERS + b"Content-Length: %d\r\n\r\n" % len(LAYER) + LAYER
    cut, got = trickle(strict.port, wire[:-20], wire[-20:], step=0.06)
    assert cut is None and status_of(got) == 200, got[:300]


def test_idle_keep_alive_connection_is_not_cut(strict):
    """The deadline counts from a request's first byte, not from the
    previous answer: a kept-alive connection idle for longer than
    request_timeout_s (but under connection_timeout_s) still serves."""
    conn = strict.connect(timeout=10)
    try:
        conn.request("POST", "/v1/norm/layer", body=LAYER,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        time.sleep(DEADLINE + 0.75)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_trickled_request_on_a_kept_alive_connection_is_cut(strict):
    """After an answer and a second of quiet, the next request trickled in
    is cut request_timeout_s after its own first byte (not after the
    answer)."""
    with socket.create_connection(("127.0.0.1", strict.port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(s.recv(65536)) == 200
        time.sleep(1.0)
        cut, got = trickle_on(s, b"G", b"ET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100)
    assert cut is not None and DEADLINE - 0.05 <= cut <= DEADLINE + SLACK, cut
    assert got == b"", got[:200]


def test_info_reports_the_deadline(strict, daemon):
    assert strict.get("/v1/info").json()["limits"]["request_timeout_s"] == 2
    assert daemon.get("/v1/info").json()["limits"]["request_timeout_s"] == 30


def test_zero_turns_the_deadline_off(make_daemon):
    d = make_daemon("--request-timeout-s", 0, "--connection-timeout-s", 30)
    wire = HEADERS + b"Content-Length: %d\r\n\r\n" % len(LAYER) + LAYER
    cut, got = trickle(d.port, wire[:-12], wire[-12:])  # about 3 s
    assert cut is None and status_of(got) == 200, got[:300]


def inflight(d):
    body = d.get("/metrics").body.decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
               if l.startswith("normd_inflight_requests"))


def test_client_leaving_mid_upload_is_let_go_at_once(strict):
    """Half of a 1 MB body, then close (FIN) right behind the data: the
    request ends within a second, not at connection_timeout_s (30 s).
    With epoll, libmicrohttpd missed such a FIN (its edge-triggered loop
    raised no event after the short read of the last data); its poll loop,
    which normd runs, sees it."""
    body = b'{"input": [' + b"1, " * 350000 + b"1]}"
    wire = HEADERS + b"Content-Length: %d\r\n\r\n" % len(body) + body
    for _ in range(8):
        with socket.create_connection(("127.0.0.1", strict.port), timeout=5) as s:
            s.sendall(wire[:len(wire) // 2])
    t0 = time.monotonic()
    # the scrape itself is one request in flight
    assert wait_until(lambda: inflight(strict) <= 1, 1.5, 0.05), \
        "still in flight after %.1f s: %g" % (time.monotonic() - t0,
                                              inflight(strict))
