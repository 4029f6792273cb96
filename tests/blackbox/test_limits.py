"""413 limits: body size (by Content-Length and for chunked bodies) and tensor
size (max_elements), each on a daemon started with a small limit."""
import http.client
import json
import socket

import pytest

from normd_helpers import JSON, assert_problem, Response

LIMIT = 4096


@pytest.fixture(scope="module")
def small(request):
    """One daemon with --max-body-bytes 4096 --max-elements 100."""
    from normd_helpers import Daemon
    d = Daemon("--max-body-bytes", LIMIT, "--max-elements", 100)
    request.addfinalizer(d.kill)
    return d


def padded_body(size):
    """A valid layer request of exactly `size` bytes (spaces pad it)."""
    core = b'{"input": [1, 2, 3]}'
    assert size >= len(core)
    return core[:-1] + b" " * (size - len(core)) + b"}"


def test_body_at_the_limit_is_accepted(small):
    r = small.post_json("/v1/norm/layer", padded_body(LIMIT))
    assert r.status == 200, r


def test_413_content_length_before_the_body_is_sent(small):
    """The answer comes from the headers alone: the client has not sent (and
    need not send) a single body byte."""
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (LIMIT + 1))
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        body = resp.read()
    r = Response(resp.status, resp.reason, resp.headers, body)
    doc = assert_problem(r, 413, "body_too_large")
    assert doc["title"] == "Content Too Large"
    assert str(LIMIT) in doc["detail"]
    assert (r.header("Connection") or "").lower() == "close"


def test_413_instead_of_100_continue(small):
    """A client that asks to continue is told 413 before sending the body."""
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % (LIMIT * 2))
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        body = resp.read()
    assert_problem(Response(resp.status, resp.reason, resp.headers, body), 413,
                   "body_too_large")


def test_100_continue_under_the_limit(small):
    body = padded_body(LIMIT - 10)
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            chunk = s.recv(1)
            assert chunk, interim
            interim += chunk
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        data = resp.read()
    assert resp.status == 200, data
    assert json.loads(data)["output"]["shape"] == [3]


def test_413_content_length_huge(small):
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/rms HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 99999999999\r\n\r\n")
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        body = resp.read()
    assert_problem(Response(resp.status, resp.reason, resp.headers, body), 413,
                   "body_too_large")


def test_413_content_length_with_body(small):
    """An ordinary client that sends headers and body together."""
    try:
        r = small.post_json("/v1/norm/layer", padded_body(LIMIT + 200))
    except (ConnectionResetError, BrokenPipeError):
        pytest.fail("the connection was reset before the 413 was read")
    assert_problem(r, 413, "body_too_large")


def test_413_chunked_body_over_the_limit(small):
    chunk = b" " * 1000
    body = [b'{"input": [1, 2, 3]'] + [chunk] * 6 + [b"}"]  # ~6 KB
    conn = small.connect(timeout=10)
    try:
        conn.request("POST", "/v1/norm/layer", body=iter(body),
                     headers={"Content-Type": JSON}, encode_chunked=True)
        resp = conn.getresponse()
        r = Response(resp.status, resp.reason, resp.headers, resp.read())
    finally:
        conn.close()
    assert_problem(r, 413, "body_too_large")


def test_chunked_body_under_the_limit_is_accepted(small):
    body = [b'{"input": ', b"[1, 2, ", b"3, 4]}"]
    conn = small.connect(timeout=10)
    try:
        conn.request("POST", "/v1/norm/layer", body=iter(body),
                     headers={"Content-Type": JSON}, encode_chunked=True)
        resp = conn.getresponse()
        status, data = resp.status, resp.read()
    finally:
        conn.close()
    assert status == 200, data
    assert json.loads(data)["output"]["shape"] == [4]


def test_daemon_fine_after_413s(small):
    assert small.get("/healthz").status == 200
    assert small.post_json("/v1/norm/rms", {"input": [3, 4]}).status == 200


def test_max_elements_at_the_limit(small):
    r = small.post_json("/v1/norm/layer", {"input": [float(i) for i in range(100)]})
    assert r.status == 200, r


@pytest.mark.parametrize("body,field", [
    ({"input": [float(i) for i in range(101)]}, "input"),
    ({"input": {"shape": [11, 10], "data": []}}, "input"),  # before reading data
    ({"input": {"shape": [100000, 100000], "data": []}}, "input"),
    ({"input": [1, 2], "weight": [0.5] * 101}, "weight"),
])
def test_413_too_many_elements(small, body, field):
    r = small.post_json("/v1/norm/layer", body)
    doc = assert_problem(r, 413, "too_many_elements", field)
    assert "100" in doc["detail"]


def test_moments_merge_over_max_elements_is_422(small):
    parts = [{"count": [1] * 20, "mean": [0] * 20, "m2": [0] * 20}] * 6
    r = small.post_json("/v1/moments/merge", {"parts": parts})
    # 120 partial moments > max_elements: refused before allocating
    assert_problem(r, 422, "bad_field", "parts")


def test_info_reports_the_limits(small):
    lim = small.get("/v1/info").json()["limits"]
    assert lim["max_body_bytes"] == LIMIT
    assert lim["max_elements"] == 100


def test_overflowing_shape_is_refused(daemon):
    r = daemon.post_json("/v1/norm/layer", {
        "input": {"shape": [2 ** 40, 2 ** 40], "data": [1]}})
    assert_problem(r, 422, "size_overflow", "input")


def test_413_chunked_comes_when_the_upload_ends(small):
    """libmicrohttpd 0.9 cannot answer while a body is arriving: a chunked
    body past the limit is read and dropped (not kept in memory) and the 413
    goes out once the client ends the upload, on a connection then closed."""
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b" " * 1000
        for _ in range(2 * LIMIT // len(chunk)):  # twice the limit
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(1)  # nothing yet: the upload has not ended
        s.settimeout(10)
        s.sendall(b"0\r\n\r\n")
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        r = Response(resp.status, resp.reason, resp.headers, resp.read())
    assert_problem(r, 413, "body_too_large")
    assert (r.header("Connection") or "").lower() == "close"
