"""KServe v2 answers in the protocol's shape, and Triton's extensions.

Every error under /v2 is the Open Inference Protocol's `{"error": "..."}`
(what tritonclient.http's _get_error reads: json.loads(body)["error"]),
with the status and headers a /v1 problem would have; /v1 keeps RFC 9457.
The extensions are those of triton-inference-server/server
docs/protocol/extension_model_repository.md, extension_model_configuration.md
and extension_statistics.md, in the forms tritonclient.http returns
(json.loads of the body: a list for the index, dicts for config and stats).
"""
import http.client
import json
import re
import socket
import threading
import time

import pytest

from normd_helpers import JSON, PROBLEM, Response, read_response

KEY = "kserve-extensions-key-0123456789"


def assert_v2_error(resp, status):
    """The answer is exactly {"error": <non-empty string>} with status."""
    assert resp.status == status, resp
    assert resp.content_type == JSON, resp
    doc = json.loads(resp.body)
    assert isinstance(doc, dict) and list(doc) == ["error"], doc
    assert isinstance(doc["error"], str) and doc["error"], doc
    return doc["error"]


def infer_body(model="layer_norm", data=(1.0, 2.0, 4.0)):
    return {"inputs": [{"name": "input", "shape": [len(data)],
                        "datatype": "FP32", "data": list(data)}]}


def raw(daemon, data):
    """Sends raw bytes; returns the one answer."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        s.sendall(data)
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        return Response(resp.status, resp.reason, resp.headers, resp.read())


def models_of(daemon):
    """The models, in OPS_MAP order, as the unknown-model error lists them
    (codec_kserve.c builds that list from the operation list)."""
    msg = assert_v2_error(daemon.get("/v2/models/nope"), 404)
    m = re.search(r"\(models: ([^;]*); version 1\)", msg)
    assert m, msg
    return m.group(1).split(", ")


# ---- every /v2 error in the protocol's shape --------------------------------------

INFER = "/v2/models/layer_norm/infer"

ERRORS = [
    # (name, method, path, headers, body, status, headers the answer carries)
    ("unknown_route", "GET", "/v2/nope", {}, None, 404, {}),
    ("unknown_route_models", "GET", "/v2/models", {}, None, 404, {}),
    ("unknown_route_trailing_slash", "GET", "/v2/", {}, None, 404, {}),
    ("unknown_route_under_model", "GET", "/v2/models/layer_norm/x", {}, None,
     404, {}),
    ("unknown_model", "GET", "/v2/models/softmax", {}, None, 404, {}),
    ("unknown_model_config", "GET", "/v2/models/softmax/config", {}, None,
     404, {}),
    ("unknown_model_stats", "GET", "/v2/models/softmax/stats", {}, None, 404,
     {}),
    ("unknown_version", "GET", "/v2/models/layer_norm/versions/2/config", {},
     None, 404, {}),
    ("unknown_model_infer", "POST", "/v2/models/softmax/infer",
     {"Content-Type": JSON}, b"{}", 404, {}),
    ("method_not_allowed", "DELETE", "/v2/models/layer_norm/config", {}, None,
     405, {"Allow": "GET, HEAD, OPTIONS"}),
    ("method_not_allowed_post", "GET", INFER, {}, None, 405,
     {"Allow": "POST, OPTIONS"}),
    ("method_not_allowed_index", "GET", "/v2/repository/index", {}, None, 405,
     {"Allow": "POST, OPTIONS"}),
    ("malformed_json", "POST", INFER, {"Content-Type": JSON}, b'{"inputs": [',
     400, {}),
    ("empty_body", "POST", INFER, {"Content-Type": JSON}, b"", 400, {}),
    ("bad_header_length", "POST", INFER,
     {"Content-Type": "application/octet-stream",
      "Inference-Header-Content-Length": "twelve"}, b"{}", 400, {}),
    ("unsupported_media_type", "POST", INFER, {"Content-Type": "text/plain"},
     b"{}", 415, {}),
    ("unprocessable", "POST", INFER, {"Content-Type": JSON},
     json.dumps({"inputs": [{"name": "input", "shape": [3, 5],
                             "datatype": "FP32", "data": [1, 2]}]}).encode(),
     422, {}),
    ("unknown_parameter", "POST", INFER, {"Content-Type": JSON},
     json.dumps(dict(infer_body(), parameters={"epsilon": 1e-5})).encode(),
     422, {}),
    ("models_built_in_load", "POST", "/v2/repository/models/rms_norm/load",
     {}, b"", 400, {}),
    ("models_built_in_unload", "POST", "/v2/repository/models/rms_norm/unload",
     {"Content-Type": JSON}, b'{"parameters":{"unload_dependents":false}}',
     400, {}),
    ("unknown_model_load", "POST", "/v2/repository/models/softmax/load", {},
     b"", 404, {}),
    ("unsupported_extension", "GET", "/v2/trace/setting", {}, None, 501, {}),
]


@pytest.mark.parametrize("name,method,path,headers,body,status,want",
                         ERRORS, ids=[e[0] for e in ERRORS])
def test_v2_error_is_protocol_shaped(daemon, name, method, path, headers,
                                     body, status, want):
    resp = daemon.request(method, path, body=body, headers=headers)
    assert_v2_error(resp, status)
    for header, value in want.items():
        assert resp.header(header) == value, (header, resp)


def test_v1_errors_stay_problem_json(daemon):
    for method, path in (("GET", "/v1/nope"), ("DELETE", "/v1/norm/layer"),
                         ("GET", "/v2x")):
        resp = daemon.request(method, path)
        assert resp.content_type == PROBLEM, resp
        assert "code" in json.loads(resp.body)


def test_framing_errors_are_protocol_shaped(daemon):
    # Content-Length twice, differing: 400 before routing, closed
    r = raw(daemon, b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 2\r\n"
            b"Content-Length: 3\r\n\r\n{}")
    assert_v2_error(r, 400)
    assert (r.header("Connection") or "").lower() == "close"
    # a Transfer-Encoding other than one chunked: 501
    r = raw(daemon, b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n"
            b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
    assert_v2_error(r, 501)
    # an unknown /v2 path gets the v2 form before anything else is known
    r = raw(daemon, b"GET /v2/repository HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_v2_error(r, 404)


def test_body_too_large_is_protocol_shaped(make_daemon):
    d = make_daemon("--max-body-bytes", 1024)
    # by Content-Length, before the body is read
    r = raw(d, b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n")
    assert_v2_error(r, 413)
    assert (r.header("Connection") or "").lower() == "close"
    # chunked past the limit: read, dropped, answered at the end
    body = json.dumps(infer_body(data=[1.0] * 600)).encode()
    conn = d.connect()
    try:
        conn.putrequest("POST", INFER)
        conn.putheader("Content-Type", JSON)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for i in range(0, len(body), 512):
            part = body[i:i + 512]
            conn.send(b"%x\r\n%s\r\n" % (len(part), part))
        conn.send(b"0\r\n\r\n")
        assert_v2_error(read_response(conn), 413)
    finally:
        conn.close()


def test_unauthorized_is_protocol_shaped(make_daemon):
    d = make_daemon("--api-keys", KEY)
    for path in (INFER, "/v2/repository/index",
                 "/v2/repository/models/layer_norm/load"):
        r = d.post_json(path, infer_body())
        assert_v2_error(r, 401)
        assert r.header("WWW-Authenticate") == 'Bearer realm="normd"'
        ok = d.post_json(path, infer_body(),
                         headers={"Authorization": "Bearer " + KEY})
        assert ok.status != 401, ok
    # the GET extensions stay open with the default scope, and keyed with "all"
    assert d.get("/v2/models/layer_norm/stats").status == 200
    d_all = make_daemon("--api-keys", KEY, "--api-key-scope", "all")
    for path in ("/v2/models/layer_norm/config", "/v2/models/stats", "/v2",
                 "/v2/nope"):
        r = d_all.get(path)
        if path == "/v2/nope":  # no route: 404 before the key is asked for
            assert_v2_error(r, 404)
            continue
        assert_v2_error(r, 401)
        assert r.header("WWW-Authenticate") == 'Bearer realm="normd"'


def test_overloaded_is_protocol_shaped(make_daemon):
    """One worker, one slot, taken by a slow /v1 request: a v2 request
    announcing its body is refused from its headers with 503 + Retry-After
    (the pattern of test_overload.py)."""
    d = make_daemon("--threads", 1, "--max-inflight", 1, "--retry-after-s", 3)
    slow = b'{"tokens":64,"d":256,"layers":96}'
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
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the simulation holds the slot
        if "normd_jobs_inflight 1" in d.get("/metrics").body.decode():
            break
        time.sleep(0.01)
    r = raw(d, b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 50000\r\n\r\n")
    t.join(timeout=60)
    assert "r" in busy and busy["r"].status == 200, busy
    assert_v2_error(r, 503)
    assert r.header("Retry-After") == "3"


# ---- server metadata -----------------------------------------------------------------

def test_server_metadata_lists_the_implemented_extensions(daemon):
    doc = daemon.get("/v2").json()
    assert doc["extensions"] == ["binary_tensor_data", "model_repository",
                                 "model_configuration", "statistics",
                                 "parameters"]


# ---- model repository --------------------------------------------------------------

def test_repository_index_lists_every_model(daemon):
    models = models_of(daemon)
    assert "layer_norm" in models and "layer_norm_backward" in models
    want = [{"name": m, "version": "1", "state": "READY"} for m in models]
    # tritonclient.http posts an empty body; {"ready": ...} gives the same
    for body in (b"", b'{"ready": true}', b'{"ready": false}'):
        r = daemon.request("POST", "/v2/repository/index", body=body,
                           headers={"Content-Type": JSON} if body else {})
        assert r.status == 200 and r.content_type == JSON, r
        assert r.json() == want
    # every listed model answers its metadata
    for m in models:
        assert daemon.get("/v2/models/" + m).status == 200, m


# ---- model configuration ------------------------------------------------------------

def test_config_matches_metadata_for_every_model(daemon):
    for m in models_of(daemon):
        meta = daemon.get("/v2/models/" + m).json()
        for path in ("/v2/models/%s/config" % m,
                     "/v2/models/%s/versions/1/config" % m):
            r = daemon.get(path)
            assert r.status == 200 and r.content_type == JSON, (path, r)
            cfg = r.json()
            assert cfg["name"] == m
            assert cfg["platform"] == meta["platform"] == "normd"
            assert cfg["backend"] == "normd"
            assert cfg["max_batch_size"] == 0
            for kind, meta_kind in (("input", "inputs"), ("output", "outputs")):
                got = [(t["name"], t["data_type"], t["dims"])
                       for t in cfg[kind]]
                want = [(t["name"], "TYPE_" + t["datatype"], t["shape"])
                        for t in meta[meta_kind]]
                assert got == want, (m, kind, got, want)
            # the input is required; the others may be left out
            flags = {t["name"]: t["optional"] for t in cfg["input"]}
            assert flags["input"] is False
            if "grad_output" in flags:
                assert flags["grad_output"] is False
            for name in ("weight", "bias", "residual", "running_mean",
                         "running_var"):
                if name in flags:
                    assert flags[name] is True, (m, name)


# ---- statistics -------------------------------------------------------------------

def stat_of(daemon, model):
    doc = daemon.get("/v2/models/%s/stats" % model).json()
    assert len(doc["model_stats"]) == 1
    s = doc["model_stats"][0]
    assert s["name"] == model and s["version"] == "1"
    return s


def test_stats_count_exactly_the_requests_sent(make_daemon):
    d = make_daemon()
    before = stat_of(d, "layer_norm")
    other_before = stat_of(d, "rms_norm")
    t0 = int(time.time() * 1000)
    n_v1, n_v2 = 3, 4
    for i in range(n_v1):
        assert d.post_json("/v1/norm/layer", {"input": [1, 2, 4 + i]}).status \
            == 200
    for i in range(n_v2):
        assert d.post_json(INFER, infer_body(data=(1, 2, 3 + i))).status == 200
    bad = {"inputs": [{"name": "input", "shape": [3, 5], "datatype": "FP32",
                       "data": [1, 2]}]}
    assert d.post_json(INFER, bad).status == 422
    assert d.post_json("/v1/norm/layer", {"input": [1, 2], "epsilon": 1}) \
        .status == 422
    # refused before decoding: not counted
    assert d.request("DELETE", INFER).status == 405
    after = stat_of(d, "layer_norm")
    ok = n_v1 + n_v2
    assert after["inference_count"] - before["inference_count"] == ok
    assert after["execution_count"] - before["execution_count"] == ok
    bi, ai = before["inference_stats"], after["inference_stats"]
    assert ai["success"]["count"] - bi["success"]["count"] == ok
    assert ai["fail"]["count"] - bi["fail"]["count"] == 2
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert ai[stage]["count"] - bi[stage]["count"] == ok, stage
        assert ai[stage]["ns"] > bi[stage]["ns"], stage
    assert ai["success"]["ns"] > bi["success"]["ns"]
    assert ai["fail"]["ns"] > bi["fail"]["ns"]
    # the stages add up to no more than the whole
    stages = sum(ai[s]["ns"] for s in ("queue", "compute_input",
                                       "compute_infer", "compute_output"))
    assert stages == ai["success"]["ns"]
    assert ai["cache_hit"] == {"count": 0, "ns": 0}
    assert after["batch_stats"] == []
    assert t0 <= after["last_inference"] <= int(time.time() * 1000) + 1
    # another model saw nothing
    assert stat_of(d, "rms_norm") == other_before
    # the version path and the all-models list say the same
    v1 = d.get("/v2/models/layer_norm/versions/1/stats").json()
    assert v1["model_stats"][0] == after
    every = d.get("/v2/models/stats").json()["model_stats"]
    assert [s["name"] for s in every] == models_of(d)
    assert [s for s in every if s["name"] == "layer_norm"] == [after]


def test_stats_count_backward_models_apart(make_daemon):
    d = make_daemon()
    before = stat_of(d, "layer_norm_backward")["inference_stats"]
    r = d.post_json("/v1/norm/layer/backward",
                    {"input": [1, 2, 4], "grad_output": [1, 0, 0]})
    assert r.status == 200, r
    after = stat_of(d, "layer_norm_backward")["inference_stats"]
    assert after["success"]["count"] - before["success"]["count"] == 1
    assert stat_of(d, "layer_norm")["inference_stats"]["success"]["count"] == 0


# ---- the extensions normd does not have ---------------------------------------------

UNSUPPORTED = [
    ("GET", "/v2/trace/setting"), ("POST", "/v2/trace/setting"),
    ("GET", "/v2/models/layer_norm/trace/setting"),
    ("POST", "/v2/models/layer_norm/trace/setting"),
    ("GET", "/v2/logging"), ("POST", "/v2/logging"),
    ("GET", "/v2/systemsharedmemory/status"),
    ("GET", "/v2/systemsharedmemory/region/r0/status"),
    ("POST", "/v2/systemsharedmemory/region/r0/register"),
    ("POST", "/v2/systemsharedmemory/region/r0/unregister"),
    ("POST", "/v2/systemsharedmemory/unregister"),
    ("GET", "/v2/cudasharedmemory/status"),
    ("GET", "/v2/cudasharedmemory/region/r0/status"),
    ("POST", "/v2/cudasharedmemory/region/r0/register"),
    ("POST", "/v2/cudasharedmemory/region/r0/unregister"),
    ("POST", "/v2/cudasharedmemory/unregister"),
]


@pytest.mark.parametrize("method,path", UNSUPPORTED,
                         ids=["%s %s" % u for u in UNSUPPORTED])
def test_unimplemented_extension_is_a_v2_501(daemon, method, path):
    body = b'{"trace_level":["TIMESTAMPS"]}' if method == "POST" else None
    r = daemon.request(method, path, body=body,
                       headers={"Content-Type": JSON} if body else {})
    msg = assert_v2_error(r, 501)
    assert "does not implement" in msg


def test_unimplemented_extension_for_unknown_model_is_404(daemon):
    assert_v2_error(daemon.get("/v2/models/softmax/trace/setting"), 404)
