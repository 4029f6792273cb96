"""The daemon's stderr: a startup line with the address (an IPv6 one in
brackets, as in a URL) and the effective limits, and libmicrohttpd's own
messages as ordinary timestamped, leveled lines; the access line in both
formats (log_format text and json: one JSON object a line, with its
documented keys), and what a client sends (path, user agent, request id)
escaped so that it can neither end nor forge a line in either."""
import contextlib
import http.client
import json
import re
import socket
import subprocess
import time

import pytest

from normd_helpers import (CONFIG, NORMD_BIN, REPO_ROOT, raw_exchange,
                           read_response, status_of, wait_until)

LINE_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn|info|debug) ")


def test_startup_line_has_the_limits(make_daemon):
    d = make_daemon("--max-inflight", 7, "--request-timeout-s", 11,
                    "--drain-timeout-s", 13, "--max-connections", 99)
    line = next(l for l in d.lines if "listening on" in l)
    for kv in ("max_inflight=7", "request_timeout_s=11", "drain_timeout_s=13",
               "max_connections=99", "connection_timeout_s=",
               "per_ip_connections=", "max_body_bytes=", "max_elements=",
               "max_json_depth="):
        assert kv in line, line


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_address_in_brackets():
    p = subprocess.Popen([str(NORMD_BIN), "--port", "0", "--host", "::1",
                          "--config", CONFIG], cwd=REPO_ROOT,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = p.stderr.readline().decode()
        m = re.search(r"listening on http://\[::1\]:(\d+) ", line)
        assert m, line
        with socket.create_connection(("::1", int(m.group(1))), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(64).startswith(b"HTTP/1.1 200 ")
    finally:
        p.kill()
        p.wait(timeout=10)
        p.stderr.close()


def held_connection(port):
    """A connection the daemon has surely accepted, and counts against
    per_ip_connections: it has answered a keep-alive request on it. Two
    connects in a row race otherwise: each of the polling threads may
    accept one, and the second one's may be counted first, so that the
    first is the one refused (seen once in CI, under ASan: the test's
    second connection stayed open and its recv timed out)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/healthz")
    assert read_response(conn, "GET").status == 200
    return contextlib.closing(conn)


def test_libmicrohttpd_messages_go_through_the_logger(make_daemon):
    """MHD's "connection limit" message, once per refused connection, comes
    out as a timestamped warn line, and every line the daemon writes has
    the same form."""
    d = make_daemon("--per-ip-connections", 1)
    with held_connection(d.port):
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s2:
            s2.settimeout(5)
            try:
                assert s2.recv(1) == b""  # closed by the server
            except ConnectionResetError:
                pass
    assert wait_until(lambda: "libmicrohttpd:" in d.log(), 5), d.log()
    mhd = [l for l in d.lines if "libmicrohttpd:" in l]
    assert all(re.match(LINE_RE.pattern + "libmicrohttpd: ", l) for l in mhd), mhd
    assert not any(l.endswith(" ") or l == "" for l in mhd), mhd
    assert all(LINE_RE.match(l) for l in d.lines), d.log()


# ---- formats: text and json ---------------------------------------------------------

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ACCESS_KEYS = {"ts": str, "level": str, "msg": str, "method": str, "path": str,
               "status": int, "bytes_in": int, "bytes_out": int,
               "duration_ms": (int, float), "request_id": str, "remote": str,
               "user_agent": str}


def json_lines(d):
    """Every line the daemon wrote, each parsed: one JSON object a line."""
    out = []
    for line in d.lines:
        assert "\ufffd" not in line, "not UTF-8: %r" % line
        doc = json.loads(line)
        assert isinstance(doc, dict), line
        assert TS_RE.match(doc["ts"]), line
        assert doc["level"] in ("error", "warn", "info", "debug"), line
        assert isinstance(doc["msg"], str), line
        out.append(doc)
    return out


def test_json_lines_have_the_documented_keys(make_daemon):
    d = make_daemon("--log-format", "json")
    assert d.get("/healthz", headers={"User-Agent": "probe/1.0"}).status == 200
    assert d.post_json("/v1/norm/layer", {"input": [1, 2, 3]}).status == 200
    assert d.get("/nope").status == 404
    assert wait_until(lambda: '"/nope"' in d.log(), 5), d.log()
    docs = json_lines(d)
    assert any("listening on http://127.0.0.1:" in doc["msg"] for doc in docs)
    access = [doc for doc in docs if doc["msg"] == "request"]
    assert len(access) == 3, access
    for a in access:
        assert set(a) == set(ACCESS_KEYS), a
        for key, kind in ACCESS_KEYS.items():
            assert isinstance(a[key], kind), (key, a)
        assert a["level"] == "info" and a["remote"] == "127.0.0.1"
        assert a["duration_ms"] >= 0
    by_path = {a["path"]: a for a in access}
    assert by_path["/healthz"]["user_agent"] == "probe/1.0"
    layer = by_path["/v1/norm/layer"]
    assert (layer["method"], layer["status"]) == ("POST", 200)
    assert layer["bytes_in"] == len(b'{"input": [1, 2, 3]}')
    assert layer["bytes_out"] > 0
    assert by_path["/nope"]["status"] == 404


def test_json_unanswered_requests_say_why(make_daemon):
    """A request cut at request_timeout_s is logged with its 408 and a note."""
    d = make_daemon("--log-format", "json", "--request-timeout-s", 1)
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 100\r\n\r\n{")
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except (ConnectionResetError, socket.timeout):
            pass
    assert wait_until(lambda: '"status":408' in d.log(), 5), d.log()
    cut = next(doc for doc in json_lines(d) if doc.get("status") == 408)
    assert cut["note"] == "closed: request_timeout_s", cut


def test_libmicrohttpd_messages_in_json(make_daemon):
    d = make_daemon("--log-format", "json", "--per-ip-connections", 1)
    with held_connection(d.port):
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s2:
            s2.settimeout(5)
            try:
                assert s2.recv(1) == b""
            except ConnectionResetError:
                pass
    assert wait_until(lambda: "libmicrohttpd:" in d.log(), 5), d.log()
    mhd = [doc for doc in json_lines(d) if doc["msg"].startswith("libmicrohttpd: ")]
    assert mhd and all(doc["level"] == "warn" for doc in mhd), mhd
    assert not any(doc["msg"].endswith(("\n", " ")) for doc in mhd), mhd


def test_text_access_line_form(make_daemon):
    d = make_daemon()
    r = d.get("/healthz", headers={"User-Agent": "probe/1.0 (x)"})
    assert wait_until(lambda: " GET /healthz " in d.log(), 5), d.log()
    line = next(l for l in d.lines if " GET /healthz " in l)
    assert re.match(LINE_RE.pattern + r"GET /healthz 200 in=0 out=\d+ [0-9.]+ms "
                    r"id=%s remote=127\.0\.0\.1 ua=\"probe/1\.0 \(x\)\"$"
                    % r.header("X-Request-Id"), line), line


# What the client sends: a path with CR, LF, ESC, a quote, a backslash, a
# byte that is not UTF-8, NEL (U+0085) and U+2028 (both line ends to some
# readers), percent-encoded as it must be on the request line; a user
# agent with a control byte, quotes, a backslash and bytes that are not
# UTF-8; an id (valid: visible ASCII) with a quote and a backslash. Raw CR
# and LF cannot be in a header value: they end it.
INJECT_PATH = (b"/a%0d%0a2025-01-01T00:00:00.000Z info GET /forged 200"
               b"%1b[31m%22%5c%ff%c2%85%e2%80%a8end")
INJECT_UA = b'ua\x01"}\\{"forged":1\xff\xc3'
INJECT_ID = b'id"\\n{"x":1}'


def send_injection(d):
    raw = raw_exchange(d.port, b"GET " + INJECT_PATH + b" HTTP/1.1\r\nHost: x\r\n"
                       b"User-Agent: " + INJECT_UA + b"\r\n"
                       b"X-Request-Id: " + INJECT_ID + b"\r\n"
                       b"Connection: close\r\n\r\n")
    assert status_of(raw) == 404, raw[:300]
    assert wait_until(lambda: "forged" in d.log(), 5), d.log()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_injection_is_escaped(make_daemon, fmt):
    d = make_daemon("--log-format", fmt)
    send_injection(d)
    log = d.log()
    assert "\x1b" not in log and "\r" not in log and "\x01" not in log
    assert "\x85" not in log and "\u2028" not in log
    assert "\ufffd" not in log  # every line is valid UTF-8
    # no line begins with what the client wrote
    assert not any("forged" in l and not l.startswith(("20", "{"))
                   for l in d.lines), log
    access = [l for l in d.lines if "forged" in l]
    assert len(access) == 1, access
    line = access[0]
    if fmt == "text":
        assert LINE_RE.match(line), line
        assert ("GET /a\\x0d\\x0a2025-01-01T00:00:00.000Z info GET /forged 200"
                "\\x1b[31m\\x22\\x5c\\xff\\xc2\\x85\\xe2\\x80\\xa8end 404 ") in line
        assert 'id=id\\x22\\x5cn{\\x22x\\x22:1} ' in line, line
        assert line.endswith(' ua="ua\\x01\\x22}\\x5c{\\x22forged\\x22:1\\xff\\xc3"')
    else:
        docs = json_lines(d)
        a = next(doc for doc in docs if doc["msg"] == "request")
        # the bytes come back: UTF-8 as itself, the others as U+00XX
        assert a["path"] == ("/a\r\n2025-01-01T00:00:00.000Z info GET /forged 200"
                             "\x1b[31m\"\\\xff\x85\u2028end"), a
        assert a["user_agent"] == 'ua\x01"}\\{"forged":1\xff\xc3', a
        assert a["request_id"] == 'id"\\n{"x":1}', a
        assert "forged" not in {k for doc in docs for k in doc}
