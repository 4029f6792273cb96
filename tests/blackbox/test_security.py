"""TLS (tls_cert/tls_key) and API keys (api_keys, api_keys_file,
api_key_scope): who gets in, what they see when they do not, and that keys
never reach the logs or --print-config."""
import hashlib
import http.client
import json
import shutil
import ssl
import subprocess

import pytest

from normd_helpers import JSON, REPO_ROOT, NORMD_BIN, Daemon, assert_problem

KEY = "k3y-for-tests-0123456789"
OTHER = "another-valid-key-987654321"


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is a test dependency (Debian package openssl)")
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", str(key), "-out", str(crt), "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60)
    return crt, key


def https(daemon, crt, method, path, body=None, headers=None):
    ctx = ssl.create_default_context(cafile=str(crt))
    conn = http.client.HTTPSConnection("127.0.0.1", daemon.port, context=ctx,
                                       timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def test_tls_serves_https_and_refuses_plain_http(make_daemon, cert):
    crt, key = cert
    d = make_daemon("--tls-cert", crt, "--tls-key", key)
    assert "listening on https://" in d.log()
    status, _, body = https(d, crt, "GET", "/healthz")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    status, headers, body = https(
        d, crt, "POST", "/v1/norm/layer", json.dumps({"input": [1, 2, 3]}),
        {"Content-Type": JSON})
    assert status == 200
    assert json.loads(body)["stats"]["mean"] == [2]
    # a plain-HTTP client gets no HTTP answer from a TLS port
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        conn.request("GET", "/healthz")
        conn.getresponse().read()
    conn.close()
    assert d.alive()


def test_tls_needs_both_files(cert):
    crt, _ = cert
    r = subprocess.run([str(NORMD_BIN), "--port", "0", "--tls-cert", str(crt)],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    assert r.returncode != 0
    assert "tls_cert and tls_key go together" in r.stderr


def test_api_key_required_on_compute_routes(make_daemon):
    d = make_daemon("--api-keys", KEY + "," + OTHER)
    body = {"input": [1, 2, 3]}
    r = d.post_json("/v1/norm/layer", body)
    assert_problem(r, 401, "unauthorized")
    assert r.header("WWW-Authenticate") == 'Bearer realm="normd"'
    r = d.post_json("/v1/norm/layer", body, headers={"Authorization": "Bearer nope-nope-nope-nope"})
    assert_problem(r, 401, "unauthorized")
    r = d.post_json("/v1/norm/layer", body, headers={"Authorization": "Basic " + KEY})
    assert_problem(r, 401, "unauthorized")
    for key in (KEY, OTHER):
        r = d.post_json("/v1/norm/layer", body, headers={"Authorization": "Bearer " + key})
        assert r.status == 200, r
    r = d.post_json("/v1/norm/layer", body, headers={"Authorization": "bearer " + KEY})
    assert r.status == 200, r
    # v2 inference too, with the protocol's error form
    r = d.post_json("/v2/models/rms_norm/infer", {"inputs": []})
    assert r.status == 401 and set(r.json()) == {"error"}
    # health, metrics, info stay open; preflight needs no key
    for path in ("/healthz", "/readyz", "/metrics", "/v1/info", "/v2/health/ready"):
        assert d.get(path).status == 200, path
    assert d.request("OPTIONS", "/v1/norm/layer",
                     headers={"Origin": "http://x.example"}).status == 204
    assert KEY not in d.log() and OTHER not in d.log()


def test_api_key_scope_all(make_daemon):
    d = make_daemon("--api-keys", KEY, "--api-key-scope", "all")
    assert_problem(d.get("/metrics"), 401, "unauthorized")
    assert_problem(d.get("/v1/info"), 401, "unauthorized")
    assert d.get("/metrics", headers={"Authorization": "Bearer " + KEY}).status == 200
    assert d.get("/healthz").status == 200
    assert d.get("/readyz").status == 200


def test_api_keys_file_plain_and_hashed(make_daemon, tmp_path):
    hashed = "hashed-key-for-tests-42"
    f = tmp_path / "keys"
    f.write_text("# team keys\n%s\nsha256:%s  # ci\n\n" % (
        KEY, hashlib.sha256(hashed.encode()).hexdigest()))
    d = make_daemon("--api-keys-file", f)
    for key in (KEY, hashed):
        r = d.post_json("/v1/moments", {"input": [1, 2]},
                        headers={"Authorization": "Bearer " + key})
        assert r.status == 200, r
    assert_problem(d.post_json("/v1/moments", {"input": [1, 2]}), 401, "unauthorized")


def test_keys_never_printed():
    r = subprocess.run([str(NORMD_BIN), "--api-keys", KEY, "--print-config"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert KEY not in r.stdout
    assert json.loads(r.stdout)["api_keys"] == "(set, hidden)"


@pytest.mark.parametrize("flags, message", [
    (["--tls-cert", "cert.pem"], "tls_cert and tls_key go together"),
    (["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.pem"],
     "tls_cert: cannot read /nonexistent.pem"),
    (["--api-keys", "short"], "at least 16 characters"),
    (["--host", "no-such-host.invalid"], "cannot resolve host"),
])
def test_print_config_makes_the_startup_checks(flags, message):
    """--print-config refuses what startup would refuse (exit 2, one line),
    instead of printing a config the daemon cannot run with."""
    r = subprocess.run([str(NORMD_BIN), "--print-config"] + flags,
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r
    assert r.stdout == ""
    assert r.stderr.startswith("normd: ") and message in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.parametrize("bad, message", [
    ("short", "at least 16 characters"),
    ("sha256:abcd", "64 hex digits"),
])
def test_bad_keys_stop_startup(tmp_path, bad, message):
    f = tmp_path / "keys"
    f.write_text(bad + "\n")
    r = subprocess.run([str(NORMD_BIN), "--port", "0", "--api-keys-file", str(f)],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and message in r.stderr


def test_access_log_escapes_what_the_client_chose(make_daemon):
    """A percent-encoded newline or escape in the path (or a quote, or bytes
    that are not UTF-8) cannot start a forged line or colour the terminal:
    the access log writes them as \\xHH."""
    import socket
    import time
    from normd_helpers import raw_exchange, status_of
    d = make_daemon()
    raw = raw_exchange(d.port, b"GET /a%0a%1b[31mred%22%ff HTTP/1.1\r\n"
                               b"Host: x\r\nConnection: close\r\n\r\n")
    assert status_of(raw) == 404
    deadline = time.monotonic() + 5
    while "31mred" not in d.log() and time.monotonic() < deadline:
        time.sleep(0.02)
    log = d.log()
    assert "GET /a\\x0a\\x1b[31mred\\x22\\xff 404" in log, log
    assert "\x1b" not in log
    assert not any(line.startswith("[31mred") or line.startswith("\x1b")
                   for line in d.lines)
