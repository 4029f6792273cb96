"""Every route answers, and the compute routes agree with a double-precision
Python reference (float32 results within 1e-6 relative)."""
import json
import math
import random

import pytest

from normd_helpers import (JSON, REPO_ROOT, assert_close, assert_problem, f32, floats,
                           ref_batch, ref_group, ref_instance, ref_layer,
                           ref_rms)

REL32 = 1e-6   # float32 results against the double reference
REL64 = 1e-12  # double results (moments, float64 tensors)


def rand_f32(n, seed, scale=2.0, offset=0.0):
    rng = random.Random(seed)
    return [f32(offset + scale * rng.uniform(-1, 1)) for _ in range(n)]


def tensor(shape, data, dtype=None):
    t = {"shape": list(shape), "data": data}
    if dtype:
        t["dtype"] = dtype
    return t


def ok_json(resp):
    assert resp.status == 200, resp
    assert resp.content_type == JSON, resp
    return resp.json()


# ---- compute routes -------------------------------------------------------------

def test_layer_matches_reference(daemon):
    shape = [3, 4, 5]
    x = rand_f32(60, 1, offset=3.0)
    w = rand_f32(20, 2)
    b = rand_f32(20, 3)
    doc = ok_json(daemon.post_json("/v1/norm/layer", {
        "input": tensor(shape, x), "normalized_shape": [4, 5],
        "weight": tensor([4, 5], w), "bias": tensor([4, 5], b)}))
    out, mean, var, rstd = ref_layer(x, shape, ndim=2, weight=w, bias=b)
    assert doc["output"]["shape"] == shape
    assert doc["output"]["dtype"] == "float32"
    assert_close(floats(doc["output"]["data"]), out, REL32, what="output")
    st = doc["stats"]
    assert st["shape"] == [3]
    assert set(st) == {"shape", "mean", "var", "rstd"}
    assert_close(st["mean"], mean, REL32, what="mean")
    assert_close(st["var"], var, REL32, what="var")
    assert_close(st["rstd"], rstd, REL32, what="rstd")


def test_layer_axis_unbiased_outside_sqrt(daemon):
    shape = [2, 3, 4]
    x = rand_f32(24, 4)
    doc = ok_json(daemon.post_json("/v1/norm/layer", {
        "input": tensor(shape, x), "axis": -2, "eps": 1e-3,
        "variance": "unbiased", "eps_placement": "outside_sqrt"}))
    out, mean, var, rstd = ref_layer(x, shape, ndim=2, eps=1e-3,
                                     unbiased=True, outside=True)
    assert_close(floats(doc["output"]["data"]), out, REL32, what="output")
    assert doc["stats"]["shape"] == [2]
    assert_close(doc["stats"]["var"], var, REL32, what="var")
    assert_close(doc["stats"]["rstd"], rstd, REL32, what="rstd")


def test_layer_default_is_last_dim(daemon):
    x = rand_f32(12, 5)
    doc = ok_json(daemon.post_json("/v1/norm/layer",
                                   {"input": tensor([3, 4], x)}))
    out, mean, _, _ = ref_layer(x, [3, 4])
    assert doc["stats"]["shape"] == [3]
    assert_close(floats(doc["output"]["data"]), out, REL32)
    assert_close(doc["stats"]["mean"], mean, REL32)


def test_rms_matches_reference(daemon):
    shape = [4, 6]
    x = rand_f32(24, 6)
    w = rand_f32(6, 7)
    doc = ok_json(daemon.post_json("/v1/norm/rms", {
        "input": tensor(shape, x), "weight": tensor([6], w)}))
    out, rms, rstd = ref_rms(x, shape, weight=w)
    assert_close(floats(doc["output"]["data"]), out, REL32, what="output")
    st = doc["stats"]
    assert set(st) == {"shape", "rms", "rstd"}  # no mean / var for RMS
    assert st["shape"] == [4]
    assert_close(st["rms"], rms, REL32, what="rms")
    assert_close(st["rstd"], rstd, REL32, what="rstd")


def test_batch_matches_reference(daemon):
    shape = [3, 2, 4]
    x = rand_f32(24, 8, offset=1.0)
    w, b = [f32(1.5), f32(-0.5)], [f32(0.25), f32(2.0)]
    doc = ok_json(daemon.post_json("/v1/norm/batch", {
        "input": tensor(shape, x), "weight": w, "bias": b}))
    out, mean, var, rstd, _ = ref_batch(x, shape, weight=w, bias=b)
    assert_close(floats(doc["output"]["data"]), out, REL32, what="output")
    assert doc["stats"]["shape"] == [2]
    assert_close(doc["stats"]["mean"], mean, REL32, what="mean")
    assert_close(doc["stats"]["var"], var, REL32, what="var")
    assert_close(doc["stats"]["rstd"], rstd, REL32, what="rstd")
    assert "running_mean" not in doc  # none given, none returned


def test_group_matches_reference(daemon):
    shape = [2, 6, 3]
    x = rand_f32(36, 9)
    w, b = rand_f32(6, 10), rand_f32(6, 11)
    doc = ok_json(daemon.post_json("/v1/norm/group", {
        "input": tensor(shape, x), "num_groups": 3, "weight": w, "bias": b,
        "eps": 1e-4}))
    out, mean, var, rstd = ref_group(x, shape, 3, eps=1e-4, weight=w, bias=b)
    assert_close(floats(doc["output"]["data"]), out, REL32, what="output")
    assert doc["stats"]["shape"] == [2, 3]
    assert_close(doc["stats"]["mean"], mean, REL32, what="mean")
    assert_close(doc["stats"]["var"], var, REL32, what="var")
    assert_close(doc["stats"]["rstd"], rstd, REL32, what="rstd")


def test_instance_matches_reference(daemon):
    shape = [2, 3, 2, 2]
    x = rand_f32(24, 12)
    doc = ok_json(daemon.post_json("/v1/norm/instance",
                                   {"input": tensor(shape, x)}))
    out, mean, var, rstd = ref_instance(x, shape)
    assert_close(floats(doc["output"]["data"]), out, REL32, what="output")
    assert doc["stats"]["shape"] == [2, 3]
    assert_close(doc["stats"]["mean"], mean, REL32, what="mean")
    assert_close(doc["stats"]["var"], var, REL32, what="var")
    assert_close(doc["stats"]["rstd"], rstd, REL32, what="rstd")


def py_moments(vals):
    n = len(vals)
    mean = math.fsum(vals) / n
    m2 = math.fsum((v - mean) ** 2 for v in vals)
    return n, mean, m2


def test_moments_rows(daemon):
    x = rand_f32(12, 13, offset=1e4)  # |mean| >> std: no E[x^2]-E[x]^2
    doc = ok_json(daemon.post_json("/v1/moments",
                                   {"input": tensor([3, 4], x)}))
    assert doc["shape"] == [3]
    want = [py_moments(x[r * 4:(r + 1) * 4]) for r in range(3)]
    assert doc["count"] == [4, 4, 4]
    assert_close(doc["mean"], [m for _, m, _ in want], REL64, what="mean")
    assert_close(doc["m2"], [m2 for _, _, m2 in want], 1e-9, what="m2")
    assert_close(doc["var"], [m2 / n for n, _, m2 in want], 1e-9, what="var")


def test_moments_channels(daemon):
    shape = [2, 3, 2]
    x = rand_f32(12, 14)
    doc = ok_json(daemon.post_json("/v1/moments", {
        "input": tensor(shape, x), "layout": "channels"}))
    assert doc["shape"] == [3]
    for c in range(3):
        vals = [x[(n * 3 + c) * 2 + s] for n in range(2) for s in range(2)]
        cnt, mean, m2 = py_moments(vals)
        assert doc["count"][c] == cnt
        assert_close([doc["mean"][c], doc["m2"][c]], [mean, m2], 1e-12)


def test_moments_merge_equals_whole(daemon):
    x = rand_f32(20, 15, offset=5.0)
    a, b = x[:7], x[7:]
    pa = ok_json(daemon.post_json("/v1/moments", {"input": a}))
    pb = ok_json(daemon.post_json("/v1/moments", {"input": b}))
    # a /v1/moments answer (with shape and var) may be passed back as a part
    doc = ok_json(daemon.post_json("/v1/moments/merge", {"parts": [pa, pb]}))
    n, mean, m2 = py_moments(x)
    assert doc["shape"] == [1]
    assert doc["count"] == [n]
    assert_close(doc["mean"], [mean], REL64, what="mean")
    assert_close(doc["m2"], [m2], 1e-10, what="m2")
    assert_close(doc["var"], [m2 / n], 1e-10, what="var")


def test_moments_merge_hand_numbers(daemon):
    # {1,2,3} (mean 2, m2 2) + {4.5,5.5} (mean 5, m2 0.5) = {1,2,3,4.5,5.5}
    doc = ok_json(daemon.post_json("/v1/moments/merge", {"parts": [
        {"count": [3, 0], "mean": [2, 0], "m2": [2, 0]},
        {"count": [2, 4], "mean": [5, -1], "m2": [0.5, 8]}]}))
    n, mean, m2 = py_moments([1, 2, 3, 4.5, 5.5])
    assert doc["count"] == [5, 4]
    assert_close(doc["mean"], [mean, -1.0], REL64)
    assert_close(doc["m2"], [m2, 8.0], REL64)
    assert_close(doc["var"], [m2 / 5, 2.0], REL64)


# ---- GET routes -------------------------------------------------------------

def test_healthz(daemon):
    r = daemon.get("/healthz")
    assert r.status == 200 and r.content_type == JSON
    assert r.json() == {"status": "ok"}


def test_readyz(daemon):
    r = daemon.get("/readyz")
    assert r.status == 200 and r.content_type == JSON
    assert r.json() == {"status": "ready"}


def test_info(daemon):
    r = daemon.get("/v1/info")
    assert r.status == 200 and r.content_type == JSON
    doc = r.json()
    assert doc["name"] == "normd"
    assert isinstance(doc["version"], str) and doc["version"]
    assert sorted(doc["dtypes"]) == sorted(
        ["float32", "float64", "float16", "bfloat16"])
    assert doc["norms"] == ["layer", "rms", "batch", "group", "instance",
                            "lp", "lrn", "mvn"]
    lim = doc["limits"]
    cfg = json.loads((REPO_ROOT / "config" / "normd.json").read_text())
    for key in ("max_body_bytes", "max_elements", "max_inflight",
                "max_json_depth"):
        assert lim[key] == cfg[key], key
    assert lim["max_rank"] == 8
    paths = {r["path"]: r["methods"] for r in doc["routes"]}
    for op in ("layer", "rms", "batch", "group", "instance", "lp", "lrn",
               "mvn"):
        assert paths["/v1/norm/" + op] == "POST, OPTIONS"
        assert paths["/v1/norm/%s/backward" % op] == "POST, OPTIONS"
    for p in ("/healthz", "/readyz", "/metrics", "/v1/info", "/openapi.yaml",
              "/", "/normd.js", "/normd.mjs"):
        assert paths[p] == "GET, HEAD, OPTIONS"


def test_metrics_route(daemon):
    r = daemon.get("/metrics")
    assert r.status == 200
    assert r.content_type.startswith("text/plain")
    assert "version=0.0.4" in r.content_type
    assert b"normd_build_info" in r.body


def test_openapi(daemon):
    spec = REPO_ROOT / "api" / "openapi.yaml"
    if not spec.is_file():
        pytest.skip("api/openapi.yaml is not in the repository yet")
    r = daemon.get("/openapi.yaml")
    assert r.status == 200, r
    assert r.content_type in ("application/yaml", "application/x-yaml",
                              "text/yaml"), r.content_type
    assert r.body == spec.read_bytes()
    assert b"openapi:" in r.body


def test_web_root(daemon):
    r = daemon.get("/")
    assert r.status == 200
    assert r.content_type == "text/html; charset=utf-8"
    assert r.body == (REPO_ROOT / "web" / "index.html").read_bytes()
    assert b"<html" in r.body.lower()


@pytest.mark.parametrize("name", ["normd.js", "normd.mjs"])
def test_javascript_client(daemon, name):
    # the JavaScript client and its ES-module wrapper, from web_root, with
    # CORS so that a page on another origin can load and import them
    r = daemon.get("/" + name, headers={"Origin": "http://elsewhere.example"})
    assert r.status == 200
    assert r.content_type == "text/javascript; charset=utf-8"
    assert r.body == (REPO_ROOT / "web" / name).read_bytes()
    assert r.header("Access-Control-Allow-Origin") in ("*", "http://elsewhere.example")


@pytest.mark.parametrize("path", ["/healthz", "/v1/info", "/", "/normd.js"])
def test_head_on_get_route(daemon, path):
    get = daemon.get(path)
    head = daemon.request("HEAD", path)
    assert head.status == 200
    assert head.body == b""
    assert head.content_type == get.content_type
    assert int(head.header("Content-Length")) == len(get.body)


def test_query_string_is_not_part_of_the_route(daemon):
    # the query carries request fields (as for .npy bodies), not the route
    r = daemon.post_json("/v1/norm/layer?eps=1e-5", {"input": [1, 2]})
    assert r.status == 200
    assert r.json()["output"]["data"] == [-0.99998, 0.99998]
    r = daemon.post_json("/v1/norm/layer?explain=true", {"input": [1, 2]})
    assert [s["name"] for s in r.json()["steps"]][-1] == "output"


def test_query_fields_are_checked_like_body_fields(daemon):
    r = daemon.post_json("/v1/norm/layer?trace=1", {"input": [1, 2]})
    assert_problem(r, 422, "unknown_field", field="trace")
    r = daemon.post_json("/v1/norm/layer?eps=0.1", {"input": [1, 2], "eps": 0.1})
    assert_problem(r, 422, "conflicting_fields", field="eps")


def test_keep_alive_serves_several_requests(daemon):
    conn = daemon.connect()
    try:
        for i in range(3):
            conn.request("POST", "/v1/norm/rms",
                         body=json.dumps({"input": [3.0, 4.0]}),
                         headers={"Content-Type": JSON})
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200, body
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read() == b'{"status":"ok"}'
    finally:
        conn.close()
