"""X-Request-Id: a client's id (1-128 visible ASCII characters) is echoed on
every answer -- every route and status, problems, 404s, 503s, preflights,
/v2 -- and anything else is replaced by one normd makes (32 hex digits);
problem documents name the request as RFC 9457 `instance`, and the access
log line carries the id. The KServe body `id` is a different thing and
keeps its own meaning."""
import json
import re
import signal
import socket
import time

import pytest

from normd_helpers import (GENERATED_ID_RE, JSON, assert_problem,
                           raw_exchange, request_instance, status_of,
                           wait_until)

LAYER = {"input": [[1, 2, 3], [4, 5, 6]]}
V2_INFER = {"inputs": [{"name": "input", "shape": [2, 3], "datatype": "FP32",
                        "data": [1, 2, 3, 4, 5, 6]}]}


def rid(tag):
    """A distinct id per test, with the characters ids commonly use."""
    return "test-%s_%d.%s:ok" % (tag, time.monotonic_ns(), "x" * 3)


def raw_headers(raw):
    """The header lines of a raw answer, names lower-cased."""
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip()
            for k, v in (line.split(":", 1) for line in head)}


def raw_get(port, path, header_lines=b""):
    raw = raw_exchange(port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n"
                       + header_lines + b"Connection: close\r\n\r\n")
    return status_of(raw), raw_headers(raw), raw.split(b"\r\n\r\n", 1)[1]


# ---- echo -----------------------------------------------------------------------

@pytest.mark.parametrize("method, path, body, status", [
    ("GET", "/healthz", None, 200),
    ("GET", "/readyz", None, 200),
    ("GET", "/v1/info", None, 200),
    ("GET", "/metrics", None, 200),
    ("GET", "/openapi.yaml", None, 200),
    ("GET", "/", None, 200),
    ("HEAD", "/healthz", None, 200),
    ("POST", "/v1/norm/layer", LAYER, 200),
    ("GET", "/v2", None, 200),
    ("GET", "/v2/health/ready", None, 200),
    ("GET", "/v2/models/layer_norm", None, 200),
    ("POST", "/v2/models/layer_norm/infer", V2_INFER, 200),
    ("GET", "/no/such/route", None, 404),
    ("GET", "/v1/norm/layer", None, 405),
    ("POST", "/v2/models/no_such_model/infer", V2_INFER, 404),
])
def test_a_valid_id_is_echoed(daemon, method, path, body, status):
    want = rid("echo")
    headers = {"X-Request-Id": want}
    data = None
    if body is not None:
        headers["Content-Type"] = JSON
        data = json.dumps(body).encode()
    r = daemon.request(method, path, body=data, headers=headers)
    assert r.status == status, r
    assert r.header("X-Request-Id") == want, r.headers


def test_problems_name_the_request_on_both_threads(daemon):
    """instance is urn:normd:request:<id> for a problem made on the HTTP
    thread (404, 405: http_reply.c) and one made on a worker (422, 415:
    service.c)."""
    for method, path, body, ctype, status, code in [
            ("GET", "/nope", None, None, 404, "not_found"),
            ("DELETE", "/v1/norm/layer", None, None, 405, "method_not_allowed"),
            ("POST", "/v1/norm/layer", b'{"input": [1, 2], "epsilon": 1}',
             JSON, 422, "unknown_field"),
            ("POST", "/v1/norm/rms", b"x", "text/plain", 415,
             "unsupported_media_type")]:
        want = rid(code)
        headers = {"X-Request-Id": want}
        if ctype:
            headers["Content-Type"] = ctype
        r = daemon.request(method, path, body=body, headers=headers)
        doc = assert_problem(r, status, code)
        assert r.header("X-Request-Id") == want
        assert doc["instance"] == "urn:normd:request:" + want, doc


def test_generated_ids_name_problems_too(daemon):
    r = daemon.get("/nope")
    got = r.header("X-Request-Id")
    assert GENERATED_ID_RE.match(got), got
    assert assert_problem(r, 404, "not_found")["instance"] == \
        "urn:normd:request:" + got


def test_instance_percent_encodes_what_a_urn_cannot_hold(daemon):
    """Visible ASCII such as '"', '%', '#', '?' or '\\' is a valid id and
    echoed as it is; in the URN it is percent-encoded (RFC 3986)."""
    want = 'a"b%c#d?e\\f<g>[h]{i}|^`'
    status, headers, body = raw_get(daemon.port, b"/nope",
                                    b"X-Request-Id: " + want.encode() + b"\r\n")
    assert status == 404
    assert headers["x-request-id"] == want
    doc = json.loads(body)
    assert doc["instance"] == request_instance(want)
    assert doc["instance"] == ("urn:normd:request:a%22b%25c%23d%3Fe%5Cf%3Cg%3E"
                               "%5Bh%5D%7Bi%7D%7C%5E%60"), doc


def test_v2_errors_keep_their_shape(daemon):
    """A /v2 error stays {"error": ...}: the id is in the header only."""
    want = rid("v2")
    r = daemon.post_json("/v2/models/layer_norm/infer", {"inputs": []},
                         headers={"X-Request-Id": want})
    assert 400 <= r.status < 500, r
    assert set(r.json()) == {"error"}, r.json()
    assert r.header("X-Request-Id") == want


def test_kserve_body_id_is_not_the_request_id(daemon):
    want = rid("kserve")
    body = dict(V2_INFER, id="my-inference-7")
    r = daemon.post_json("/v2/models/layer_norm/infer", body,
                         headers={"X-Request-Id": want})
    assert r.status == 200, r
    assert r.json()["id"] == "my-inference-7"
    assert r.header("X-Request-Id") == want
    r = daemon.post_json("/v2/models/layer_norm/infer", V2_INFER)
    assert "id" not in r.json()
    assert GENERATED_ID_RE.match(r.header("X-Request-Id"))


def test_preflight_echoes_and_cors_exposes_it(daemon):
    want = rid("cors")
    r = daemon.request("OPTIONS", "/v1/norm/layer",
                       headers={"Origin": "https://x.example",
                                "Access-Control-Request-Method": "POST",
                                "X-Request-Id": want})
    assert r.status == 204, r
    assert r.header("X-Request-Id") == want
    r = daemon.get("/healthz", headers={"Origin": "https://x.example"})
    exposed = [h.strip() for h in
               r.header("Access-Control-Expose-Headers").split(",")]
    assert "X-Request-Id" in exposed, exposed


def test_413_from_content_length_echoes(daemon):
    want = rid("413")
    raw = raw_exchange(daemon.port,
                       b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/json\r\n"
                       b"Content-Length: 999999999999\r\n"
                       b"X-Request-Id: " + want.encode() + b"\r\n\r\n")
    assert status_of(raw) == 413, raw[:300]
    assert raw_headers(raw)["x-request-id"] == want
    doc = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    assert doc["code"] == "body_too_large"
    assert doc["instance"] == "urn:normd:request:" + want


def test_401_without_a_key_echoes(make_daemon):
    d = make_daemon("--api-keys", "request-id-test-key-0123456789")
    want = rid("401")
    r = d.post_json("/v1/norm/layer", LAYER, headers={"X-Request-Id": want})
    doc = assert_problem(r, 401, "unauthorized")
    assert r.header("X-Request-Id") == want
    assert doc["instance"] == "urn:normd:request:" + want


def test_503_while_draining_echoes(make_daemon):
    """A request whose headers finish arriving after SIGTERM is refused with
    503 draining (as test_drain.py shows), and names its id."""
    d = make_daemon("--drain-timeout-s", 10)
    want = rid("503")
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.2)
        d.signal(signal.SIGTERM)
        time.sleep(0.3)
        body = b'{"input": [1, 2]}'
        s.sendall(b"X-Request-Id: " + want.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        raw = b""
        while not raw.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
    assert status_of(raw) == 503, raw[:300]
    assert raw_headers(raw)["x-request-id"] == want
    doc = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    assert doc["code"] == "draining"
    assert doc["instance"] == "urn:normd:request:" + want
    assert d.wait(timeout=10) == 0


# ---- sanitizing -------------------------------------------------------------------

def test_128_visible_characters_are_kept(daemon):
    want = "".join(chr(0x21 + i % 94) for i in range(128))
    status, headers, _ = raw_get(daemon.port, b"/healthz",
                                 b"X-Request-Id: " + want.encode() + b"\r\n")
    assert status == 200
    assert headers["x-request-id"] == want


@pytest.mark.parametrize("value", [
    b"a" * 129,                # too long
    b"",                       # empty
    b"abc def",                # a space inside
    b"abc\tdef",               # a tab inside
    b"abc\x01def",             # a control character
    b"abc\x7fdef",             # DEL
    b"caf\xc3\xa9",            # non-ASCII (UTF-8)
    b"\xff\xfe",               # not even UTF-8
], ids=["129", "empty", "space", "tab", "control", "del", "utf8", "bytes"])
def test_anything_else_is_replaced(daemon, value):
    status, headers, body = raw_get(daemon.port, b"/nope",
                                    b"X-Request-Id: " + value + b"\r\n")
    assert status == 404
    got = headers["x-request-id"]
    assert GENERATED_ID_RE.match(got), (value, got)
    assert json.loads(body)["instance"] == "urn:normd:request:" + got


def test_generated_ids_are_unique(daemon):
    """Over many requests on several connections, and across two daemons
    (replicas): each process draws its own random half."""
    ids = []
    for _ in range(4):
        conn = daemon.connect()
        try:
            for _ in range(100):
                conn.request("GET", "/healthz")
                resp = conn.getresponse()
                resp.read()
                ids.append(resp.getheader("X-Request-Id"))
        finally:
            conn.close()
    assert all(GENERATED_ID_RE.match(i) for i in ids), ids[:5]
    assert len(set(ids)) == len(ids)
    from normd_helpers import Daemon
    other = Daemon()
    try:
        theirs = {other.get("/healthz").header("X-Request-Id")
                  for _ in range(20)}
    finally:
        other.kill()
    assert len(theirs) == 20 and not theirs & set(ids)
    assert {i[:16] for i in theirs} != {i[:16] for i in ids}


# ---- the access log ------------------------------------------------------------------

def test_access_line_carries_the_id(make_daemon):
    for fmt in ("text", "json"):
        d = make_daemon("--log-format", fmt)
        want = rid("log-" + fmt)
        r = d.post_json("/v1/norm/layer", LAYER, headers={"X-Request-Id": want})
        assert r.status == 200
        generated = d.get("/healthz").header("X-Request-Id")
        assert wait_until(lambda: generated in d.log(), 5), d.log()
        if fmt == "text":
            line = next(l for l in d.lines if " POST /v1/norm/layer " in l)
            assert re.search(r" 200 in=\d+ out=\d+ [0-9.]+ms id=%s remote=127\.0\.0\.1 "
                             % re.escape(want), line), line
            assert any(("id=%s " % generated) in l and " GET /healthz " in l
                       for l in d.lines)
        else:
            access = [json.loads(l) for l in d.lines
                      if '"msg":"request"' in l]
            by_path = {a["path"]: a for a in access}
            assert by_path["/v1/norm/layer"]["request_id"] == want
            assert by_path["/healthz"]["request_id"] == generated
