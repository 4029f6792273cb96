"""The daemon's stderr: a startup line with the address (an IPv6 one in
brackets, as in a URL) and the effective limits, and libmicrohttpd's own
messages as ordinary timestamped, leveled lines."""
import re
import socket
import subprocess
import time

import pytest

from normd_helpers import CONFIG, NORMD_BIN, REPO_ROOT, wait_until

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


def test_libmicrohttpd_messages_go_through_the_logger(make_daemon):
    """MHD's "connection limit" message, once per refused connection, comes
    out as a timestamped warn line, and every line the daemon writes has
    the same form."""
    d = make_daemon("--per-ip-connections", 1)
    with socket.create_connection(("127.0.0.1", d.port), timeout=5):
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
