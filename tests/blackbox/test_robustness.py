"""Bad input never crashes the daemon: truncated bodies, random bytes, long
URLs, clients that go away mid-request. After each, the daemon still answers."""
import random
import socket
import threading
import time

import pytest

from normd_helpers import assert_problem, raw_exchange, status_of


def healthy(d):
    assert d.alive(), d.log()[-2000:]
    r = d.get("/healthz", timeout=10)
    assert r.status == 200 and r.json() == {"status": "ok"}
    r = d.post_json("/v1/norm/layer", {"input": [1, 2, 3, 4, 5]}, timeout=10)
    assert r.status == 200
    assert r.json()["output"]["data"][0] == -1.4142101


def test_truncated_body_then_close(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                  b'{"input": [1, 2,')
    healthy(daemon)


def test_truncated_body_half_close(daemon):
    """The client says it has sent everything (FIN) 10 bytes into a
    1000-byte body: no answer is owed, and other clients are served.
    (test_slow_clients.py checks that such a connection is let go at
    once, so the wait here is short.)"""
    raw = raw_exchange(daemon.port,
                       b"POST /v1/norm/rms HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                       b'{"input":[', timeout=1.0, shutdown_write=True)
    assert status_of(raw) in (None, 400), raw[:200]
    healthy(daemon)


def test_truncated_chunked_body(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"10\r\n{\"input\": [1, 2\r\n400\r\n[[[[")
    healthy(daemon)


def test_bad_chunk_framing(daemon):
    raw = raw_exchange(daemon.port,
                       b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                       timeout=5.0)
    assert status_of(raw) in (None, 400), raw[:200]
    healthy(daemon)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes_body_is_400(daemon, seed):
    body = bytes(random.Random(seed).getrandbits(8) for _ in range(4096))
    r = daemon.post_json("/v1/norm/layer", body)
    assert_problem(r, 400, "malformed_json")
    healthy(daemon)


@pytest.mark.parametrize("body", [
    b'{"input": [1e400, 2, 3]}',            # number overflow
    b'{"input": {"shape": [99999999999999999999999], "data": [1]}}',
    b'{"input": [1, 2], "\xff\xfe": 1}',    # invalid UTF-8
    b'{"input": [1, 2, 3]}\x00',            # trailing NUL
    b'{"input": [1, 2], "x\\u0000y": 1}',   # NUL in a key
    b"\xef\xbb\xbf{\"input\": [1, 2]}",     # BOM
    b"[" * 20000,                            # deep, unterminated
    b"{" * 20000,
])
def test_hostile_json_is_400(daemon, body):
    r = daemon.post_json("/v1/norm/layer", body)
    assert r.status == 400, r
    assert r.json()["code"] in ("malformed_json", "too_deep")


def test_long_integers_in_tensor_data_are_numbers(daemon):
    """An integer of any length in tensor data is the number it writes (read
    as strtod would), in a short array as in a long one."""
    for data in ([1, 2, 10 ** 23], [1, 2, 10 ** 23] + list(range(40))):
        body = ('{"input": %s, "return": ["stats"]}' % data).encode()
        r = daemon.post_json("/v1/norm/layer", body)
        assert r.status == 200, r
        mean = r.json()["stats"]["mean"][0]
        assert abs(mean - (3 + 1e23 + sum(range(40)) * (len(data) > 3)) / len(data)) \
            <= 1e-6 * mean, (data[:4], mean)


def test_random_bytes_instead_of_http(daemon):
    rng = random.Random(7)
    for _ in range(3):
        junk = bytes(rng.getrandbits(8) for _ in range(2000))
        raw = raw_exchange(daemon.port, junk, timeout=5.0, shutdown_write=True)
        assert status_of(raw) in (None, 400), raw[:200]
    healthy(daemon)


@pytest.mark.parametrize("length", [2000, 20000])
def test_long_url_is_404(daemon, length):
    r = daemon.get("/" + "a" * length)
    assert_problem(r, 404, "not_found")
    healthy(daemon)


@pytest.mark.parametrize("length", [100000, 1000000])
def test_very_long_url_is_414_or_404(daemon, length):
    raw = raw_exchange(daemon.port,
                       b"GET /" + b"a" * length + b" HTTP/1.1\r\nHost: x\r\n"
                       b"Connection: close\r\n\r\n", timeout=10.0)
    assert status_of(raw) in (404, 414), raw[:200]
    healthy(daemon)


def test_huge_header(daemon):
    raw = raw_exchange(daemon.port,
                       b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 200000 +
                       b"\r\nConnection: close\r\n\r\n", timeout=10.0)
    assert status_of(raw) in (400, 413, 414, 431), raw[:200]
    healthy(daemon)


def test_client_gone_before_the_answer(daemon):
    """The client closes while its request is computed; the answer has
    nowhere to go, and the daemon carries on."""
    row = ",".join(str(i % 10) for i in range(1000))
    body = ('{"input":{"shape":[300,1000],"data":[%s]}}'
            % ",".join([row] * 300)).encode()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
            s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    time.sleep(0.2)
    healthy(daemon)


def test_many_idle_connections_then_traffic(daemon):
    socks = []
    try:
        for _ in range(50):
            socks.append(socket.create_connection(("127.0.0.1", daemon.port),
                                                  timeout=5))
        healthy(daemon)
    finally:
        for s in socks:
            s.close()
    healthy(daemon)


def test_concurrent_mixed_traffic(daemon):
    """Good and bad requests interleaved from several threads: every good
    request gets its right answer."""
    failures = []

    def worker(k):
        try:
            for i in range(10):
                if (i + k) % 3 == 0:
                    r = daemon.post_json("/v1/norm/layer", b'{"input": [1,', timeout=10)
                    if r.status != 400:
                        failures.append(r)
                else:
                    x = [float(k), float(i), float(k + i + 1)]
                    r = daemon.post_json("/v1/moments", {"input": x}, timeout=10)
                    doc = r.json()
                    if r.status != 200 or doc["count"] != [3] or \
                            abs(doc["mean"][0] - sum(x) / 3) > 1e-12:
                        failures.append(r)
        except Exception as e:
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True)
               for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:3]
    healthy(daemon)
