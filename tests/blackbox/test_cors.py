"""CORS: preflight, "*" (the default config) and an explicit origin list."""
import pytest

from normd_helpers import JSON

ALLOWED = "https://a.example"


def vary(r):
    """The tokens of an answer's Vary header (Origin, Accept-Encoding)."""
    return {t.strip() for t in (r.header("Vary") or "").split(",") if t.strip()}


def preflight(d, path, origin, req_headers=None, method="POST"):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if req_headers:
        h["Access-Control-Request-Headers"] = req_headers
    return d.request("OPTIONS", path, headers=h)


def test_preflight_any_origin(daemon):
    r = preflight(daemon, "/v1/norm/layer", "https://x.example",
                  "content-type, accept")
    assert r.status == 204
    assert r.body == b""
    assert r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Allow-Methods") == "POST, OPTIONS"
    assert r.header("Access-Control-Allow-Headers") == "content-type, accept"
    assert r.header("Access-Control-Max-Age") == "600"
    assert "Origin" not in vary(r)  # "*" does not depend on the origin


def test_preflight_default_allow_headers(daemon):
    r = preflight(daemon, "/v1/norm/group", "https://x.example")
    assert r.status == 204
    assert r.header("Access-Control-Allow-Headers") == "Content-Type, Accept"


def test_preflight_on_get_route(daemon):
    r = preflight(daemon, "/metrics", "https://x.example", method="GET")
    assert r.status == 204
    assert r.header("Access-Control-Allow-Methods") == "GET, HEAD, OPTIONS"


def test_options_without_origin_has_no_cors_headers(daemon):
    r = daemon.request("OPTIONS", "/v1/norm/layer")
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") is None
    assert r.header("Access-Control-Allow-Methods") is None


def test_options_unknown_path_is_404(daemon):
    r = preflight(daemon, "/v1/norm/nope", "https://x.example")
    assert r.status == 404


def test_simple_requests_carry_acao(daemon):
    r = daemon.post_json("/v1/norm/layer", {"input": [1, 2]},
                         headers={"Origin": "https://x.example"})
    assert r.status == 200
    assert r.header("Access-Control-Allow-Origin") == "*"
    assert "Retry-After" in r.header("Access-Control-Expose-Headers")
    err = daemon.post_json("/v1/norm/layer", {"input": []},
                           headers={"Origin": "https://x.example"})
    assert err.status == 422
    assert err.header("Access-Control-Allow-Origin") == "*"
    assert daemon.get("/healthz").header("Access-Control-Allow-Origin") is None


@pytest.fixture(scope="module")
def listed(request):
    from normd_helpers import Daemon
    d = Daemon("--cors-origins", ALLOWED + ",http://localhost:3000")
    request.addfinalizer(d.kill)
    return d


def test_listed_origin_is_echoed_with_vary(listed):
    r = preflight(listed, "/v1/norm/layer", ALLOWED, "content-type")
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") == ALLOWED
    assert "Origin" in vary(r)
    assert r.header("Access-Control-Allow-Methods") == "POST, OPTIONS"
    assert r.header("Access-Control-Allow-Headers") == "content-type"
    r = listed.post_json("/v1/norm/layer", {"input": [1, 2]},
                         headers={"Origin": "http://localhost:3000"})
    assert r.status == 200
    assert r.header("Access-Control-Allow-Origin") == "http://localhost:3000"
    assert "Origin" in vary(r)


@pytest.mark.parametrize("origin", ["https://b.example", "http://a.example",
                                    "https://a.example.evil", "https://a.exampl",
                                    "null"])
def test_other_origins_get_no_acao(listed, origin):
    r = preflight(listed, "/v1/norm/layer", origin, "content-type")
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") is None
    assert r.header("Access-Control-Allow-Methods") is None
    r = listed.post_json("/v1/norm/layer", {"input": [1, 2]},
                         headers={"Origin": origin})
    assert r.status == 200  # CORS is the browser's business; we just don't allow
    assert r.header("Access-Control-Allow-Origin") is None
    assert "Origin" in vary(r)  # the answer depends on it


def test_vary_origin_on_every_answer_with_a_list(listed):
    """With a list of origins every response varies with Origin: refused,
    missing, errors and GET routes included, so a shared cache cannot serve
    one origin's answer to another."""
    assert "Origin" in vary(listed.get("/healthz"))
    assert "Origin" in vary(listed.get("/healthz",
                                       headers={"Origin": "https://x.example"}))
    r = listed.get("/nope", headers={"Origin": ALLOWED})
    assert r.status == 404 and "Origin" in vary(r)
    r = listed.post_json("/v1/norm/layer", b"{", headers={"Origin": "null"})
    assert r.status == 400 and "Origin" in vary(r)
    r = preflight(listed, "/v1/norm/layer", "https://x.example", "content-type")
    assert r.status == 204 and "Origin" in vary(r)


def test_one_vary_names_origin_and_accept_encoding(listed):
    """A compressible answer under an origin list depends on both: one Vary
    header names them (two headers would leave a cache reading one)."""
    r = listed.post_json("/v1/norm/layer", {"input": [1, 2]},
                         headers={"Origin": ALLOWED})
    assert r.status == 200
    assert r.header("Vary") == "Origin, Accept-Encoding"


def test_cors_disabled(make_daemon):
    d = make_daemon("--cors-origins", "")
    r = preflight(d, "/v1/norm/layer", ALLOWED)
    assert r.status == 204
    assert r.header("Access-Control-Allow-Origin") is None
    r = d.post_json("/v1/norm/layer", {"input": [1, 2]},
                    headers={"Origin": ALLOWED, "Content-Type": JSON})
    assert r.status == 200 and r.header("Access-Control-Allow-Origin") is None
