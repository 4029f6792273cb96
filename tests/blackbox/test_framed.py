"""The binary tensor framing of /v1 (the KServe v2 binary data extension)
against the real daemon: Content-Type application/octet-stream with
Inference-Header-Content-Length N, the first N bytes a JSON request whose
tensors may say "parameters": {"binary_data_size": bytes} instead of "data",
the raw little-endian tensors after it in header order. Round trips with
every tensor binary, binary answers, half precision, and the size errors."""
import numpy as np
import pytest

from normd_helpers import assert_problem
from numpy_refs import (Framed, as_dtype, assert_close, binary_tensor,
                        framed_body, ref_batch, ref_group, ref_instance,
                        ref_layer, ref_rms, values_of)

OCTET = "application/octet-stream"


def post_framed(daemon, path, header, tensors, accept=None, header_length=None,
                content_type=OCTET, extra=b""):
    body, hl = framed_body(header, tensors)
    h = {"Content-Type": content_type,
         "Inference-Header-Content-Length": str(hl if header_length is None
                                                else header_length)}
    if header_length == "":
        del h["Inference-Header-Content-Length"]
    if accept:
        h["Accept"] = accept
    return daemon.request("POST", path, body=body + extra, headers=h)


def f32(shape, seed, offset=0.0):
    rng = np.random.default_rng(seed)
    return (offset + rng.standard_normal(shape)).astype("<f4")


# ---- every tensor binary -----------------------------------------------------------

def test_batch_train_all_tensors_binary(daemon):
    x = f32((8, 3, 5), 1, offset=2.0)
    w, b = f32(3, 2) + 1.5, f32(3, 3)
    rm, rv = f32(3, 4), np.abs(f32(3, 5)) + 0.5
    header = {"input": binary_tensor(x.shape, "float32", x),
              "weight": binary_tensor(w.shape, "float32", w),
              "bias": binary_tensor(b.shape, "float32", b),
              "running_mean": binary_tensor(rm.shape, "float32", rm),
              "running_var": binary_tensor(rv.shape, "float32", rv),
              "momentum": 0.25}
    f = Framed(post_framed(daemon, "/v1/norm/batch", header, [x, w, b, rm, rv]))
    ref = ref_batch(x.astype(float), weight=w, bias=b, running_mean=rm,
                    running_var=rv, momentum=0.25)
    # output, then running_mean and running_var, binary in that order
    y = f.take(f.header["output"], "float32")
    nrm = f.take(f.header["running_mean"], "float32")
    nrv = f.take(f.header["running_var"], "float32")
    f.done()
    assert list(f.header) == ["output", "stats", "running_mean", "running_var",
                              "num_batches_tracked"]
    assert_close(y, ref["output"], what="output")
    assert_close(nrm, ref["running_mean"], what="running_mean")
    assert_close(nrv, ref["running_var"], what="running_var")
    st = f.header["stats"]
    assert st["shape"] == [3]
    assert_close(st["mean"], ref["mean"], what="mean")
    assert_close(st["var"], ref["var"], what="var")
    assert_close(st["rstd"], ref["rstd"], what="rstd")
    assert f.header["num_batches_tracked"] == 1


def test_batch_eval_binary_running_stats(daemon):
    x = f32((4, 2, 3), 6)
    rm, rv = f32(2, 7), np.abs(f32(2, 8)) + 0.25
    header = {"input": binary_tensor(x.shape, "float32", x), "mode": "eval",
              "running_mean": binary_tensor(rm.shape, "float32", rm),
              "running_var": binary_tensor(rv.shape, "float32", rv)}
    f = Framed(post_framed(daemon, "/v1/norm/batch", header, [x, rm, rv]))
    y = f.take(f.header["output"], "float32")
    f.done()
    assert "running_mean" not in f.header
    assert_close(y, ref_batch(x.astype(float), mode="eval", running_mean=rm,
                              running_var=rv)["output"])


@pytest.mark.parametrize("op", ["layer", "rms", "group", "instance"])
def test_affine_norms_all_binary(daemon, op):
    x = f32((3, 4, 6), 10 + len(op), offset=-1.0)
    per_l = op in ("layer", "rms")
    w = f32(6 if per_l else 4, 11) + 1.0
    b = f32(6 if per_l else 4, 12)
    header = {"input": binary_tensor(x.shape, "float32", x),
              "weight": binary_tensor(w.shape, "float32", w)}
    tensors = [x, w]
    if op != "rms":
        header["bias"] = binary_tensor(b.shape, "float32", b)
        tensors.append(b)
    if op == "group":
        header["num_groups"] = 2
    f = Framed(post_framed(daemon, "/v1/norm/" + op, header, tensors))
    y = f.take(f.header["output"], "float32")
    f.done()
    xd = x.astype(float)
    ref = {"layer": lambda: ref_layer(xd, weight=w, bias=b),
           "rms": lambda: ref_rms(xd, weight=w),
           "group": lambda: ref_group(xd, 2, weight=w, bias=b),
           "instance": lambda: ref_instance(xd, weight=w, bias=b)}[op]()
    assert_close(y, ref["output"], what=op)
    for k in ("mean", "var", "rms", "rstd"):
        if k in ref:
            assert_close(f.header["stats"][k], ref[k].ravel(), what=k)


def test_mixed_json_and_binary_tensors(daemon):
    x = f32((2, 5), 20)
    b = f32(5, 21)
    w = [0.5, 1.0, 1.5, 2.0, 2.5]
    # bias first in the header, so its bytes come first in the tail
    header = {"bias": binary_tensor(b.shape, "float32", b),
              "weight": {"shape": [5], "data": w},
              "input": binary_tensor(x.shape, "float32", x)}
    resp = post_framed(daemon, "/v1/norm/layer", header, [b, x], accept="application/json")
    assert resp.status == 200, resp
    assert resp.content_type == "application/json"
    assert resp.header("Inference-Header-Content-Length") is None
    doc = resp.json()
    ref = ref_layer(x.astype(float), weight=np.array(w), bias=b)
    assert_close(doc["output"]["data"], ref["output"].ravel())


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "float32"])
def test_dtypes_round_trip(daemon, dtype):
    raw, xv = as_dtype(np.random.default_rng(30).standard_normal((6, 8)) * 3, dtype)
    wraw, wv = as_dtype(np.linspace(0.5, 2.0, 8), dtype)
    header = {"input": binary_tensor(raw.shape, dtype, raw),
              "weight": binary_tensor(wraw.shape, dtype, wraw)}
    f = Framed(post_framed(daemon, "/v1/norm/layer", header, [raw, wraw]))
    out = f.header["output"]
    assert out["dtype"] == dtype
    assert out["shape"] == [6, 8]
    y = values_of(f.take(out, dtype), dtype)
    f.done()
    assert_close(y, ref_layer(xv, weight=wv)["output"], dtype)


def test_large_round_trip(daemon):
    x = f32((512, 2048), 31)
    f = Framed(post_framed(daemon, "/v1/norm/layer",
                           {"input": binary_tensor(x.shape, "float32", x)}, [x]))
    y = f.take(f.header["output"], "float32")
    f.done()
    assert_close(y, ref_layer(x.astype(float))["output"])


# ---- binary answers ------------------------------------------------------------------

def test_binary_data_output_true(daemon):
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]]
    resp = daemon.post_json("/v1/norm/layer", {"input": x, "binary_data_output": True})
    f = Framed(resp)
    assert resp.body[f.header_length - 1:f.header_length] == b"}"
    y = f.take(f.header["output"], "float32")
    f.done()
    assert_close(y, ref_layer(np.array(x))["output"])
    # the same answer with Accept: application/octet-stream
    resp2 = daemon.post_json("/v1/norm/layer", {"input": x}, headers={"Accept": OCTET})
    assert resp2.body == resp.body
    assert resp2.header("Inference-Header-Content-Length") == str(f.header_length)


def test_framed_request_answered_json_when_asked(daemon):
    x = f32((2, 4), 40)
    resp = post_framed(daemon, "/v1/norm/rms",
                       {"input": binary_tensor(x.shape, "float32", x)}, [x],
                       accept="application/json")
    assert resp.status == 200, resp
    assert resp.content_type == "application/json"
    assert_close(resp.json()["output"]["data"],
                 ref_rms(x.astype(float))["output"].ravel())


def test_binary_answer_layout_with_output_dtype(daemon):
    x = f32((3, 4), 41)
    resp = post_framed(daemon, "/v1/norm/layer",
                       {"input": binary_tensor(x.shape, "float32", x),
                        "output_dtype": "bfloat16",
                        "return": ["output", "stats", "output_stats"]}, [x])
    f = Framed(resp)
    out = f.header["output"]
    assert out["dtype"] == "bfloat16"
    assert out["parameters"]["binary_data_size"] == 12 * 2
    y = values_of(f.take(out, "bfloat16"), "bfloat16")
    f.done()
    assert len(resp.body) == f.header_length + 24
    assert_close(y, ref_layer(x.astype(float))["output"], "bfloat16")
    assert set(f.header) == {"output", "stats", "output_stats"}


# ---- errors ------------------------------------------------------------------------

def test_size_errors(daemon):
    x = f32((2, 3), 50)
    good = {"input": binary_tensor(x.shape, "float32", x)}
    wrong = {"input": {"shape": [2, 3], "parameters": {"binary_data_size": 20}}}
    # binary_data_size != shape x dtype
    assert_problem(post_framed(daemon, "/v1/norm/layer", wrong, [x[:, :]]), 422,
                   "binary_size_mismatch", field="input")
    # tail shorter than the tensors: truncated
    body, hl = framed_body(good, [x])
    for cut in (1, 4, 24):
        r = daemon.request("POST", "/v1/norm/layer", body=body[:-cut],
                           headers={"Content-Type": OCTET,
                                    "Inference-Header-Content-Length": str(hl)})
        assert_problem(r, 400, "binary_truncated")
    # bytes after the tensors
    for extra in (b"\x00", b"\x00" * 24):
        assert_problem(post_framed(daemon, "/v1/norm/layer", good, [x], extra=extra),
                       400, "binary_size_mismatch")
    # header length past the body
    assert_problem(post_framed(daemon, "/v1/norm/layer", good, [x],
                               header_length=len(body) + 1), 400, "binary_truncated")
    # header length that cuts the JSON
    assert_problem(post_framed(daemon, "/v1/norm/layer", good, [x],
                               header_length=hl - 3), 400, "malformed_json")


def test_header_length_errors(daemon):
    x = f32((2, 3), 51)
    good = {"input": binary_tensor(x.shape, "float32", x)}
    assert_problem(post_framed(daemon, "/v1/norm/layer", good, [x], header_length=""),
                   400, "missing_header_length")
    for bad in ("abc", "-5", "12x", "1e3", "0x20"):
        assert_problem(post_framed(daemon, "/v1/norm/layer", good, [x],
                                   header_length=bad), 400, "bad_header_length")


def test_binary_data_size_without_framing(daemon):
    resp = daemon.post_json("/v1/norm/layer", {
        "input": {"shape": [2], "parameters": {"binary_data_size": 8}}})
    assert_problem(resp, 400, "binary_without_framing", field="input")


def test_bad_binary_parameters(daemon):
    x = f32((2, 3), 52)
    for params, code in [({"binary_data_size": -24}, "bad_field"),
                         ({"binary_data_size": "24"}, "bad_field"),
                         ({"binary_data_size": 24, "binary_data": True}, "unknown_field")]:
        header = {"input": {"shape": [2, 3], "parameters": params}}
        assert_problem(post_framed(daemon, "/v1/norm/layer", header, [x]), 422, code,
                       field="input")
    header = {"input": {"shape": [2, 3], "data": x.ravel().tolist(),
                        "parameters": {"binary_data_size": 24}}}
    assert_problem(post_framed(daemon, "/v1/norm/layer", header, [x]), 422,
                   "bad_tensor", field="input")


def test_daemon_survives_garbage_framing(daemon):
    x = f32((4, 3, 2), 53)
    header = {"input": binary_tensor(x.shape, "float32", x),
              "running_mean": binary_tensor((3,), "float32", x[0, :, 0]),
              "running_var": {"shape": [3], "data": [1, 1, 1]}}
    body, hl = framed_body(header, [x, x[0, :, 0]])
    rng = np.random.default_rng(54)
    for i in range(150):
        b = bytearray(body)
        for _ in range(i % 4):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        if i % 6 == 0:
            b = b[:int(rng.integers(0, len(b)))]
        h = str(int(rng.integers(0, len(b) + 5))) if i % 3 == 0 else str(hl)
        r = daemon.request("POST", "/v1/norm/batch", body=bytes(b),
                           headers={"Content-Type": OCTET,
                                    "Inference-Header-Content-Length": h})
        assert r.status in (200, 400, 413, 422), r
    assert daemon.alive()
    assert Framed(daemon.request("POST", "/v1/norm/batch", body=body, headers={
        "Content-Type": OCTET, "Inference-Header-Content-Length": str(hl)})).header


# ---- routes without tensors: the JSON header alone -----------------------------------

@pytest.mark.parametrize("path,header,key", [
    ("/v1/moments/merge", {"parts": [{"count": [2], "mean": [1], "m2": [2]},
                                     {"count": [2], "mean": [3], "m2": [2]}]},
     "count"),
    ("/v1/residual/simulate", {"tokens": 2, "d": 4, "layers": 1}, "pre"),
])
def test_framed_header_without_tensors(daemon, path, header, key):
    """merge and the experiment take no tensors, so their framed body is a
    JSON header and nothing after it; the answer is JSON, also to
    Accept: application/octet-stream; a binary part is left over (400)."""
    want = daemon.post_json(path, header)
    assert want.status == 200, want
    for accept in (None, OCTET):
        r = post_framed(daemon, path, header, [], accept=accept)
        assert r.status == 200 and r.content_type == "application/json", r
        assert key in r.json() and r.json() == want.json()
    assert_problem(post_framed(daemon, path, header, [np.ones(1, "<f4")]),
                   400, "binary_size_mismatch")
