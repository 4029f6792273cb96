"""Regressions: server bugs the black-box tests found, each pinned by the
behaviour the contract asks for (valid problem bodies for any client bytes,
long headers, 413 for oversized chunked bodies, %00 in paths)."""
import pytest

from normd_helpers import JSON, Response, assert_problem



def test_problem_body_for_non_utf8_path(daemon):
    # curl -i 'http://127.0.0.1:8080/%ff'  -> 404 with Content-Length: 0
    r = daemon.get("/%ff")
    assert_problem(r, 404, "not_found")


def test_problem_body_for_long_utf8_path(daemon):
    # a valid UTF-8 path whose detail is truncated inside a character
    r = daemon.get("/" + "%C3%A9" * 300)
    assert_problem(r, 404, "not_found")


def test_problem_body_for_non_utf8_content_type(daemon):
    r = daemon.request("POST", "/v1/norm/layer", body=b'{"input": [1, 2]}',
                       headers={"Content-Type": "text/\xff"})
    assert_problem(r, 415, "unsupported_media_type")


def test_problem_body_for_non_utf8_accept(daemon):
    r = daemon.post_json("/v1/norm/layer", {"input": [1, 2]},
                         headers={"Accept": "text/\xe9"})
    assert_problem(r, 406, "not_acceptable")


def test_problem_for_long_multibyte_unknown_field(daemon):
    key = "x" + "\u00e9" * 400
    r = daemon.post_json("/v1/norm/layer", {"input": [1, 2], key: 1})
    doc = assert_problem(r, 422, "unknown_field")
    assert key.startswith(doc["field"])


def test_problem_field_for_multibyte_unknown_field(daemon):
    key = "\u00e9" * 40  # 80 bytes of UTF-8
    r = daemon.post_json("/v1/norm/layer", {"input": [1, 2], key: 1})
    doc = assert_problem(r, 422, "unknown_field")
    assert "field" in doc and key.startswith(doc["field"])


def test_long_accept_header(daemon):
    accept = ", ".join("text/x-type-%d" % i for i in range(20)) + ", application/json"
    assert len(accept) > 300
    r = daemon.post_json("/v1/norm/layer", {"input": [1, 2]},
                         headers={"Accept": accept})
    assert r.status == 200, r


def test_413_for_chunked_body_far_over_the_limit(make_daemon):
    d = make_daemon("--max-body-bytes", 4096)
    body = [b'{"input": [1, 2, 3]'] + [b" " * 1000] * 64 + [b"}"]
    conn = d.connect(timeout=10)
    try:
        try:
            conn.request("POST", "/v1/norm/layer", body=iter(body),
                         headers={"Content-Type": JSON}, encode_chunked=True)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the answer may already be waiting: read it
        resp = conn.getresponse()
        r = Response(resp.status, resp.reason, resp.headers, resp.read())
    finally:
        conn.close()
    assert_problem(r, 413, "body_too_large")


@pytest.mark.parametrize("path", ["/%00", "/healthz%00junk"])
def test_nul_in_path_is_not_a_route(daemon, path):
    r = daemon.get(path)
    assert r.status in (400, 404), r
