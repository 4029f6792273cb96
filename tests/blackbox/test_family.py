"""The rest of the normalization family against the real daemon:
POST /v1/norm/lp (torch F.normalize, ONNX LpNormalization), /v1/norm/lrn
(F.local_response_norm, ONNX LRN), /v1/norm/mvn (ONNX
MeanVarianceNormalization), their /backward routes, and the KServe v2
models lp_norm, lrn, mvn and their _backward models.

The references are torch in float64 on the values the daemon sees (each
tensor rounded to its dtype first): F.normalize's formula with
torch.linalg.vector_norm for p = 1, 2, 0.5, 3 and inf over one dim, several
(non-contiguous, negative) and all; F.local_response_norm for the torch
window and, for ONNX's, a numpy reference written from the operator's
definition (and the same sum in torch for autograd), odd and even sizes;
MVN as ONNX's function body computes it over several axes sets. Gradients
are torch.autograd in float64. Every dtype in and out, the query string,
.npy and framed bodies, v2 JSON and binary, the zero-slice / constant-group
conventions, and every bad value (after each the daemon still answers).
Tests that need torch (Debian's python3-torch, under /usr/bin/python3)
skip without it; the others run anyway.
"""
import json
import math

import numpy as np
import pytest

from normd_helpers import assert_problem
from numpy_refs import (DTYPES, Framed, as_dtype, binary_tensor, framed_body,
                        npy_bytes, npy_load, values_of)
from wire_tensors import (V2_TYPE, arr, assert_close, num, rounded, sample,
                          tensor)

try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is missing
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not importable "
                                 "(Debian: apt-get install python3-torch)")

JSON = "application/json"
OCTET = "application/octet-stream"
NPY = "application/x-npy"
ROUTE = {"lp": "/v1/norm/lp", "lrn": "/v1/norm/lrn", "mvn": "/v1/norm/mvn"}
MODEL = {"lp": "lp_norm", "lrn": "lrn", "mvn": "mvn"}
V1_TYPE = {v2: name for name, v2 in V2_TYPE.items()}



# ---- helpers -------------------------------------------------------------------








def post(daemon, path, body, status=200, query=""):
    resp = daemon.post_json(path + query, body)
    assert resp.status == status, resp
    return resp


def answer(daemon, path, body, query=""):
    resp = post(daemon, path, body, 200, query)
    assert resp.content_type == JSON, resp
    return resp.json()


def assert_alive(daemon):
    """A good request still works (the daemon survived what came before)."""
    assert daemon.alive(), daemon.log()[-3000:]
    doc = answer(daemon, ROUTE["lp"], {"input": [[3, 4], [0, 0]]})
    assert doc["output"]["data"] == [0.6, 0.8, 0, 0], doc
    assert doc["stats"] == {"shape": [2], "norm": [5, 0]}, doc


def dims_of(axes, rank):
    axes = [axes] if isinstance(axes, int) else list(axes)
    return tuple(sorted(a % rank for a in axes))


def kept_shape(shape, dims):
    return [d for i, d in enumerate(shape) if i not in dims]


# ---- references ----------------------------------------------------------------------

def t64(a, grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64,
                        requires_grad=grad)


def torch_lp(x, p, dims, eps):
    """F.normalize over a dims tuple: x / vector_norm(x).clamp_min(eps), and
    the norm (torch's own norm_backward for the gradient)."""
    n = torch.linalg.vector_norm(x, ord=p, dim=dims, keepdim=True)
    return x / n.clamp_min(eps), n


def lrn_window(c, size, C, convention):
    if convention == "torch":
        lo, hi = c - size // 2, c + (size - 1) // 2
    else:  # ONNX: [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]
        lo, hi = c - (size - 1) // 2, c + -(-(size - 1) // 2)
    return max(lo, 0), min(hi, C - 1)


def numpy_onnx_lrn(x, size, alpha=1e-4, beta=0.75, k=1.0):
    """ONNX LRN, written from the operator's definition:
    square_sum[n, c, ...] = sum(X[n, i, ...]^2) for i in
    [max(0, c - floor((size - 1) / 2)), min(C - 1, c + ceil((size - 1) / 2))],
    Y = X / (bias + alpha / size * square_sum)^beta."""
    x = np.asarray(x, dtype=np.float64)
    C = x.shape[1]
    sq = np.zeros_like(x)
    for c in range(C):
        lo = max(0, c - int(math.floor((size - 1) / 2)))
        hi = min(C - 1, c + int(math.ceil((size - 1) / 2)))
        sq[:, c] = np.sum(x[:, lo:hi + 1] ** 2, axis=1)
    return x / (k + alpha / size * sq) ** beta


def torch_lrn(x, size, alpha, beta, k, convention):
    """The window sum in torch (either convention), for autograd."""
    C = x.shape[1]
    sq = x * x
    sums = []
    for c in range(C):
        lo, hi = lrn_window(c, size, C, convention)
        sums.append(sq[:, lo:hi + 1].sum(1))
    s = torch.stack(sums, 1)
    return x / (k + alpha / size * s) ** beta


def torch_mvn(x, dims, eps):
    """ONNX MeanVarianceNormalization's function body in torch."""
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    std = torch.sqrt(var)
    return (x - mean) / (std + eps), mean, var, 1 / (std + eps)


# ---- Lp normalization ----------------------------------------------------------------

LP_CASES = [  # (shape, p, axis)
    ((3, 5), 2, None),
    ((3, 5), 1, 0),
    ((3, 5), 0.5, -1),
    ((3, 5), 3, [0, 1]),
    ((3, 5), "Infinity", 1),
    ((2, 3, 4), 2, 1),            # F.normalize's default dim
    ((2, 3, 4), 1, [0, 2]),       # non-contiguous
    ((2, 3, 4), 3, [-1, 0]),      # negative, unordered
    ((2, 3, 4), "Infinity", [0, -1]),
    ((2, 3, 4), 0.5, [0, 1, 2]),  # every dim: one slice
    ((2, 3, 2, 2), 2, [1, 3]),
    ((6,), 3, 0),
]


def p_value(p):
    return math.inf if p == "Infinity" else p


@needs_torch
@pytest.mark.parametrize("shape,p,axis", LP_CASES,
                         ids=["%s-p%s-%s" % ("x".join(map(str, s)), p, a)
                              for s, p, a in LP_CASES])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_lp_forward_and_backward(daemon, shape, p, axis, dtype):
    x = rounded(sample(shape, 1, offset=0.3), dtype)
    dy = rounded(sample(shape, 2), dtype)
    body = {"input": tensor(x, dtype), "p": p}
    if axis is not None:
        body["axis"] = axis
    dims = dims_of(-1 if axis is None else axis, len(shape))
    xt = t64(x, grad=True)
    y, n = torch_lp(xt, p_value(p), dims, 1e-12)
    doc = answer(daemon, ROUTE["lp"], body)
    assert doc["output"]["dtype"] == dtype
    assert_close(arr(doc["output"]), y.detach().numpy(), dtype, "output")
    assert doc["stats"]["shape"] == kept_shape(shape, dims)
    want_n = n.detach().numpy().reshape(-1)
    assert_close(np.array([num(v) for v in doc["stats"]["norm"]]), want_n,
                 "float64" if dtype == "float64" else "float32", "norm")
    y.backward(t64(dy))
    back = answer(daemon, ROUTE["lp"] + "/backward",
                  dict(body, grad_output=tensor(dy, dtype)))
    assert set(back) == {"grad_input", "stats"}, back
    assert_close(arr(back["grad_input"]), xt.grad.numpy(), dtype, "grad_input")
    assert back["stats"] == doc["stats"]


@needs_torch
def test_lp_matches_f_normalize(daemon):
    """torch.nn.functional.normalize itself, with its dim=1 spelled out."""
    x = sample((2, 3, 4), 3)
    for p in (1, 2, 3):
        want = torch.nn.functional.normalize(t64(x), p=p, dim=1).numpy()
        doc = answer(daemon, ROUTE["lp"], {"input": tensor(x, "float64"),
                                           "p": p, "axis": 1})
        assert_close(arr(doc["output"]), want, "float64")
    # normd's default is the last dim, not F.normalize's dim 1
    doc = answer(daemon, ROUTE["lp"], {"input": tensor(x, "float64")})
    want = torch.nn.functional.normalize(t64(x), dim=-1).numpy()
    assert_close(arr(doc["output"]), want, "float64")


@needs_torch
def test_lp_edges(daemon):
    # zero slices: y = 0, also with eps = 0; the gradient below eps is dy / eps
    x = np.array([[0.0, 0, 0], [3, 0, 4]])
    dy = np.array([[1.0, 2, 3], [1, 1, 1]])
    doc = answer(daemon, ROUTE["lp"], {"input": tensor(x, "float64")})
    assert arr(doc["output"]).tolist() == [[0, 0, 0], [0.6, 0, 0.8]]
    assert doc["stats"]["norm"] == [0, 5]
    back = answer(daemon, ROUTE["lp"] + "/backward",
                  {"input": tensor(x, "float64"), "grad_output": tensor(dy, "float64")})
    xt = t64(x, grad=True)
    torch_lp(xt, 2, (1,), 1e-12)[0].backward(t64(dy))
    assert_close(arr(back["grad_input"]), xt.grad.numpy(), "float64")
    assert arr(back["grad_input"])[0].tolist() == [1e12, 2e12, 3e12]
    doc = answer(daemon, ROUTE["lp"], {"input": tensor(x, "float64"), "eps": 0})
    assert arr(doc["output"]).tolist() == [[0, 0, 0], [0.6, 0, 0.8]]
    back = answer(daemon, ROUTE["lp"] + "/backward",
                  {"input": tensor(x, "float64"), "grad_output": tensor(dy, "float64"),
                   "eps": 0})
    assert arr(back["grad_input"])[0].tolist() == [0, 0, 0]  # torch: NaN
    # zero elements with p < 2 (torch masks x * |x|^(p-2) at 0)
    for p in (0.5, 1, 3):
        x = np.array([[0.0, 1.5, -2, 0.25]])
        dy = np.array([[0.5, -1, 2, 1]])
        xt = t64(x, grad=True)
        torch_lp(xt, p, (1,), 1e-12)[0].backward(t64(dy))
        back = answer(daemon, ROUTE["lp"] + "/backward",
                      {"input": tensor(x, "float64"), "p": p,
                       "grad_output": tensor(dy, "float64")})
        assert_close(arr(back["grad_input"]), xt.grad.numpy(), "float64", p)
    # p = inf ties share the gradient evenly (as amax)
    x = np.array([[2.0, -2, 1, 2]])
    dy = np.array([[1.0, 0, 0, 0]])
    xt = t64(x, grad=True)
    torch_lp(xt, math.inf, (1,), 1e-12)[0].backward(t64(dy))
    back = answer(daemon, ROUTE["lp"] + "/backward",
                  {"input": tensor(x, "float64"), "p": "Infinity",
                   "grad_output": tensor(dy, "float64")})
    assert_close(arr(back["grad_input"]), xt.grad.numpy(), "float64")
    # NaN makes its slice NaN
    doc = answer(daemon, ROUTE["lp"], {"input": [[1, "NaN"], [3, 4]]})
    out = arr(doc["output"])
    assert np.isnan(out[0]).all() and out[1].tolist() == [0.6, 0.8]
    assert_alive(daemon)


# ---- local response norm -------------------------------------------------------------

LRN_CASES = [  # (shape, size, alpha, beta, k)
    ((2, 5, 3), 1, 1e-4, 0.75, 1.0),
    ((2, 5, 3), 2, 1e-4, 0.75, 1.0),
    ((2, 5, 3), 3, 0.5, 0.75, 1.0),
    ((2, 5, 3), 4, 2.0, 0.5, 2.0),
    ((1, 6, 2, 2), 5, 1.0, 0.75, 1.0),
    ((1, 6, 2, 2), 6, 3.0, 1.5, 0.5),
    ((3, 4), 2, 1.0, 0.75, 1.0),
    ((1, 5, 2), 9, 1.0, 0.75, 1.0),   # a window wider than C
]


@needs_torch
@pytest.mark.parametrize("shape,size,alpha,beta,k", LRN_CASES,
                         ids=["%s-size%d" % ("x".join(map(str, c[0])), c[1])
                              for c in LRN_CASES])
@pytest.mark.parametrize("convention", ["torch", "onnx"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_lrn_forward_and_backward(daemon, shape, size, alpha, beta, k,
                                  convention, dtype):
    x = rounded(sample(shape, 4, scale=2.0), dtype)
    dy = rounded(sample(shape, 5), dtype)
    body = {"input": tensor(x, dtype), "size": size, "alpha": alpha,
            "beta": beta, "k": k}
    if convention == "onnx" or size % 2:
        body["convention"] = convention  # torch is the default: sent for odd sizes
    if convention == "onnx":
        want = numpy_onnx_lrn(x, size, alpha, beta, k)
    elif len(shape) >= 3:
        want = torch.nn.functional.local_response_norm(
            t64(x), size, alpha, beta, k).numpy()
    else:  # F.local_response_norm wants rank >= 3
        want = torch.nn.functional.local_response_norm(
            t64(x[:, :, None]), size, alpha, beta, k).numpy()[:, :, 0]
    doc = answer(daemon, ROUTE["lrn"], body)
    assert set(doc) == {"output"}, doc  # no stats
    assert_close(arr(doc["output"]), want, dtype, "output")
    xt = t64(x, grad=True)
    y = torch_lrn(xt, size, alpha, beta, k, convention)
    assert_close(y.detach().numpy(), want, "float64", "the torch sum")
    y.backward(t64(dy))
    back = answer(daemon, ROUTE["lrn"] + "/backward",
                  dict(body, grad_output=tensor(dy, dtype)))
    assert set(back) == {"grad_input"}, back
    assert_close(arr(back["grad_input"]), xt.grad.numpy(), dtype, "grad_input")


def test_lrn_conventions_differ_for_even_sizes(daemon):
    x = {"shape": [1, 4, 1], "dtype": "float64", "data": [1, 2, 3, 4]}
    out = {}
    for conv in ("torch", "onnx"):
        for size in (2, 3):
            doc = answer(daemon, ROUTE["lrn"], {"input": x, "size": size,
                                                "alpha": size, "beta": 1,
                                                "convention": conv})
            out[conv, size] = arr(doc["output"]).ravel()
    # alpha = size, beta = 1: y_c = x_c / (1 + sum of the window's squares)
    assert out["torch", 2].tolist() == [1 / 2, 2 / 6, 3 / 14, 4 / 26]
    assert out["onnx", 2].tolist() == [1 / 6, 2 / 14, 3 / 26, 4 / 17]
    assert out["torch", 3].tolist() == out["onnx", 3].tolist()
    doc = answer(daemon, ROUTE["lrn"], {"input": x, "size": 2})  # default torch
    want = numpy_onnx_lrn(np.array([[[1.0], [2], [3], [4]]]), 2)
    assert not np.allclose(arr(doc["output"]), want, rtol=1e-12, atol=0)


def test_lrn_wide_window(daemon):
    """More than 4096 channels: a window of up to 4096 works, a wider one is
    a 422 bad_field (not a 500)."""
    C = 4097
    x = {"shape": [1, C], "data": [1] * C}
    doc = answer(daemon, ROUTE["lrn"], {"input": x, "size": 4096, "alpha": 4096})
    out = arr(doc["output"]).ravel()
    assert out.shape == (C,) and np.all(np.isfinite(out))
    assert abs(out[C // 2] - (1 + 4096) ** -0.75) < 1e-7
    for size in (4097, 10 ** 6):
        assert_problem(post(daemon, ROUTE["lrn"], {"input": x, "size": size}, 422),
                       422, "bad_field", "size")
        assert_problem(post(daemon, ROUTE["lrn"] + "/backward",
                            {"input": x, "grad_output": x, "size": size}, 422),
                       422, "bad_field", "size")
    # with C <= 4096 any size works (the window is clipped to the channels)
    doc = answer(daemon, ROUTE["lrn"], {"input": {"shape": [1, 3], "data": [1, 2, 3]},
                                        "size": 10 ** 6, "alpha": 0})
    assert arr(doc["output"]).ravel().tolist() == [1, 2, 3]
    assert_alive(daemon)


# ---- mean-variance normalization -----------------------------------------------------

MVN_CASES = [  # (shape, axes or None for the default)
    ((2, 3, 2, 2), None),
    ((2, 3, 2, 2), [0, 2, 3]),
    ((2, 3, 2, 2), [1]),
    ((2, 3, 2, 2), [-1, -2]),
    ((2, 3, 2, 2), [0, 1, 2, 3]),
    ((4, 5), [1]),
    ((4, 5), 0),
    ((2, 3, 4), [0, 2]),
    ((7,), [0]),
]


@needs_torch
@pytest.mark.parametrize("shape,axes", MVN_CASES,
                         ids=["%s-%s" % ("x".join(map(str, s)), a) for s, a in MVN_CASES])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_mvn_forward_and_backward(daemon, shape, axes, dtype):
    x = rounded(sample(shape, 6, offset=1.0, scale=3.0), dtype)
    dy = rounded(sample(shape, 7), dtype)
    body = {"input": tensor(x, dtype)}
    if axes is not None:
        body["axes"] = axes
    dims = dims_of([0, 2, 3] if axes is None else axes, len(shape))
    xt = t64(x, grad=True)
    y, mean, var, rstd = torch_mvn(xt, dims, 1e-9)
    doc = answer(daemon, ROUTE["mvn"], body)
    assert_close(arr(doc["output"]), y.detach().numpy(), dtype, "output")
    st = doc["stats"]
    assert st["shape"] == kept_shape(shape, dims)
    sdt = "float64" if dtype == "float64" else "float32"
    for name, want in (("mean", mean), ("var", var), ("rstd", rstd)):
        assert_close(np.array(st[name]), want.detach().numpy().reshape(-1), sdt, name)
    y.backward(t64(dy))
    back = answer(daemon, ROUTE["mvn"] + "/backward",
                  dict(body, grad_output=tensor(dy, dtype)))
    assert set(back) == {"grad_input", "stats"}, back
    assert_close(arr(back["grad_input"]), xt.grad.numpy(), dtype, "grad_input")


def test_mvn_constant_group(daemon):
    x = {"shape": [2, 3], "dtype": "float64", "data": [5, 5, 5, 1, 2, 3]}
    dy = {"shape": [2, 3], "dtype": "float64", "data": [1, 2, 6, 0, 0, 0]}
    doc = answer(daemon, ROUTE["mvn"], {"input": x, "axes": 1})
    assert arr(doc["output"])[0].tolist() == [0, 0, 0]
    assert doc["stats"]["var"][0] == 0
    assert doc["stats"]["rstd"][0] == pytest.approx(1e9, rel=1e-15)
    back = answer(daemon, ROUTE["mvn"] + "/backward",
                  {"input": x, "grad_output": dy, "axes": 1})
    # the std term is taken as 0: (dy - mean(dy)) / eps
    assert_close(arr(back["grad_input"])[0], [-2e9, -1e9, 3e9], "float64")
    back = answer(daemon, ROUTE["mvn"] + "/backward",
                  {"input": x, "grad_output": dy, "axes": 1, "eps": 0})
    assert arr(back["grad_input"])[0].tolist() == [0, 0, 0]
    doc = answer(daemon, ROUTE["mvn"], {"input": x, "axes": 1, "eps": 0})
    assert arr(doc["output"])[0].tolist() == [0, 0, 0]


# ---- dtypes out, query string, .npy, framing ----------------------------------------

FORWARD = {
    "lp": ({"p": 3, "axis": [0, 2]}, "p=3&axis=0,2"),
    "lrn": ({"size": 2, "alpha": 1.0, "convention": "onnx"}, "size=2&alpha=1.0&convention=onnx"),
    "mvn": ({"axes": [0, 2, 3]}, "axes=0,2,3"),
}


def shape_for(norm):
    return (2, 3, 2, 2)


@pytest.mark.parametrize("norm", list(FORWARD))
@pytest.mark.parametrize("out_dtype", list(DTYPES))
def test_output_dtype_and_query(daemon, norm, out_dtype):
    x = sample(shape_for(norm), 8, offset=0.5)
    fields, query = FORWARD[norm]
    ref = answer(daemon, ROUTE[norm], dict(fields, input=tensor(x, "float64")))
    doc = answer(daemon, ROUTE[norm], {"input": tensor(x, "float64"),
                                       "output_dtype": out_dtype}, "?" + query)
    assert doc["output"]["dtype"] == out_dtype
    assert_close(arr(doc["output"]), arr(ref["output"]), out_dtype)
    if norm != "lrn":
        assert doc["stats"] == ref["stats"]  # stats in the input's precision
    back = answer(daemon, ROUTE[norm] + "/backward",
                  {"input": tensor(x, "float64"), "grad_output": tensor(x, "bfloat16"),
                   "output_dtype": out_dtype}, "?" + query)
    assert back["grad_input"]["dtype"] == out_dtype


@pytest.mark.parametrize("norm", list(FORWARD))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_npy_bodies(daemon, norm, dtype):
    x = sample(shape_for(norm), 9, offset=0.5)
    raw, seen = as_dtype(x, dtype)
    fields, query = FORWARD[norm]
    ref = answer(daemon, ROUTE[norm], dict(fields, input=tensor(seen, "float64")))
    resp = daemon.request("POST", ROUTE[norm] + "?" + query, npy_bytes(raw),
                          {"Content-Type": NPY})
    assert resp.status == 200 and resp.content_type == NPY, resp
    got = npy_load(resp.body)
    assert got.dtype == raw.dtype and got.shape == raw.shape
    assert_close(got.astype(np.float64), arr(ref["output"]), dtype)
    # JSON answer to a .npy body carries the stats too
    resp = daemon.request("POST", ROUTE[norm] + "?" + query, npy_bytes(raw),
                          {"Content-Type": NPY, "Accept": JSON})
    assert resp.status == 200 and resp.content_type == JSON, resp
    if norm != "lrn":
        assert resp.json()["stats"]["shape"] == ref["stats"]["shape"]
    # the backward routes take no .npy body
    resp = daemon.request("POST", ROUTE[norm] + "/backward?" + query,
                          npy_bytes(raw), {"Content-Type": NPY})
    assert_problem(resp, 415, "unsupported_media_type")


@pytest.mark.parametrize("norm", list(FORWARD))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_framed_bodies(daemon, norm, dtype):
    shape = shape_for(norm)
    x = sample(shape, 10, offset=0.5)
    dy = sample(shape, 11)
    raw, seen = as_dtype(x, dtype)
    graw, gseen = as_dtype(dy, dtype)
    fields, _ = FORWARD[norm]
    ref = answer(daemon, ROUTE[norm], dict(fields, input=tensor(seen, "float64")))
    header = dict(fields, input=binary_tensor(shape, dtype, raw),
                  binary_data_output=True)
    body, hl = framed_body(header, [raw])
    resp = daemon.request("POST", ROUTE[norm], body, {
        "Content-Type": OCTET, "Inference-Header-Content-Length": str(hl)})
    f = Framed(resp)
    out = values_of(f.take(f.header["output"], dtype), dtype)
    f.done()
    assert_close(out, arr(ref["output"]), dtype)
    if norm != "lrn":
        assert f.header["stats"]["shape"] == ref["stats"]["shape"]
    else:
        assert "stats" not in f.header
    # backward: both tensors binary, the gradient comes back binary
    bref = answer(daemon, ROUTE[norm] + "/backward",
                  dict(fields, input=tensor(seen, "float64"),
                       grad_output=tensor(gseen, "float64")))
    header = dict(fields, input=binary_tensor(shape, dtype, raw),
                  grad_output=binary_tensor(shape, dtype, graw),
                  binary_data_output=True)
    body, hl = framed_body(header, [raw, graw])
    resp = daemon.request("POST", ROUTE[norm] + "/backward", body, {
        "Content-Type": OCTET, "Inference-Header-Content-Length": str(hl)})
    f = Framed(resp)
    gi = values_of(f.take(f.header["grad_input"], dtype), dtype)
    f.done()
    assert_close(gi, arr(bref["grad_input"]), dtype)


# ---- KServe v2 -------------------------------------------------------------------------

V2_OUTPUTS = {"lp_norm": ["output", "norm"], "lrn": ["output"],
              "mvn": ["output", "mean", "var", "rstd"],
              "lp_norm_backward": ["grad_input"], "lrn_backward": ["grad_input"],
              "mvn_backward": ["grad_input"]}


@pytest.mark.parametrize("model", list(V2_OUTPUTS))
def test_v2_metadata(daemon, model):
    resp = daemon.get("/v2/models/" + model)
    assert resp.status == 200, resp
    meta = resp.json()
    assert meta["name"] == model
    want_in = ["input", "grad_output"] if model.endswith("_backward") else ["input"]
    assert [i["name"] for i in meta["inputs"]] == want_in
    assert [o["name"] for o in meta["outputs"]] == V2_OUTPUTS[model]
    assert daemon.get("/v2/models/%s/ready" % model).status == 200


@pytest.mark.parametrize("norm", list(FORWARD))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_v2_json(daemon, norm, dtype):
    shape = shape_for(norm)
    x = sample(shape, 12, offset=0.5)
    dy = sample(shape, 13)
    raw, seen = as_dtype(x, dtype)
    _, gseen = as_dtype(dy, dtype)
    fields, _ = FORWARD[norm]
    ref = answer(daemon, ROUTE[norm], dict(fields, input=tensor(seen, "float64")))
    inp = {"name": "input", "shape": list(shape), "datatype": V2_TYPE[dtype],
           "data": [float(v) for v in seen.ravel()]}
    resp = daemon.post_json("/v2/models/%s/infer" % MODEL[norm],
                            {"id": "f-1", "inputs": [inp], "parameters": fields})
    assert resp.status == 200, resp
    doc = resp.json()
    assert doc["model_name"] == MODEL[norm] and doc["id"] == "f-1"
    outs = {o["name"]: o for o in doc["outputs"]}
    assert list(outs) == V2_OUTPUTS[MODEL[norm]]
    assert outs["output"]["datatype"] == V2_TYPE[dtype]
    assert_close(arr(outs["output"]), arr(ref["output"]), dtype)
    for name in V2_OUTPUTS[MODEL[norm]][1:]:
        assert_close(np.array(outs[name]["data"]), np.array(ref["stats"][name]),
                     "float64" if dtype == "float64" else "float32", name)
        assert outs[name]["shape"] == ref["stats"]["shape"]
    # only some outputs, binary
    if norm == "lp":
        resp = daemon.post_json("/v2/models/lp_norm/infer", {
            "inputs": [inp], "parameters": fields,
            "outputs": [{"name": "norm", "parameters": {"binary_data": True}}]})
        f = Framed(resp)
        assert [o["name"] for o in f.header["outputs"]] == ["norm"]
        sdt = "float64" if dtype == "float64" else "float32"
        n = values_of(f.take(f.header["outputs"][0], sdt), sdt)
        f.done()
        assert_close(n.ravel(), np.array(ref["stats"]["norm"]), sdt)
    # backward model
    bref = answer(daemon, ROUTE[norm] + "/backward",
                  dict(fields, input=tensor(seen, "float64"),
                       grad_output=tensor(gseen, "float64")))
    g = dict(inp, name="grad_output", data=[float(v) for v in gseen.ravel()])
    resp = daemon.post_json("/v2/models/%s_backward/infer" % MODEL[norm],
                            {"inputs": [inp, g], "parameters": fields})
    assert resp.status == 200, resp
    outs = resp.json()["outputs"]
    assert [o["name"] for o in outs] == ["grad_input"]
    assert_close(arr(outs[0]), arr(bref["grad_input"]), dtype)


# ---- bad values ------------------------------------------------------------------------

X23 = {"shape": [2, 3], "data": [3, 4, 0, 1, 2, 2]}
L141 = {"shape": [1, 4, 1], "data": [1, 2, 3, 4]}
M4 = {"shape": [2, 2, 1, 2], "data": [1, 2, 3, 4, 5, 6, 7, 9]}

BAD = [  # (norm, extra fields, input, code, field)
    ("lp", {"p": 0}, X23, "bad_field", "p"),
    ("lp", {"p": -1}, X23, "bad_field", "p"),
    ("lp", {"p": "NaN"}, X23, "bad_field", "p"),
    ("lp", {"p": "inf"}, X23, "bad_field", "p"),
    ("lp", {"p": "-Infinity"}, X23, "bad_field", "p"),
    ("lp", {"p": True}, X23, "bad_field", "p"),
    ("lp", {"p": [2]}, X23, "bad_field", "p"),
    ("lp", {"axis": 2}, X23, "bad_axis", "axis"),
    ("lp", {"axis": -3}, X23, "bad_axis", "axis"),
    ("lp", {"axis": [0, 5]}, X23, "bad_axis", "axis"),
    ("lp", {"axis": [1, -1]}, X23, "bad_field", "axis"),
    ("lp", {"axis": [0, 0]}, X23, "bad_field", "axis"),
    ("lp", {"axis": []}, X23, "bad_field", "axis"),
    ("lp", {"axis": 0.5}, X23, "bad_field", "axis"),
    ("lp", {"axis": "0"}, X23, "bad_field", "axis"),
    ("lp", {"axis": [0, "1"]}, X23, "bad_field", "axis"),
    ("lp", {"eps": -1}, X23, "bad_eps", "eps"),
    ("lp", {"eps": "1e-12"}, X23, "bad_field", "eps"),
    ("lp", {"weight": [1, 1, 1]}, X23, "unknown_field", "weight"),
    ("lp", {"bias": [1, 1, 1]}, X23, "unknown_field", "bias"),
    ("lp", {"axes": [0]}, X23, "unknown_field", "axes"),
    ("lp", {"size": 3}, X23, "unknown_field", "size"),
    ("lrn", {}, L141, "missing_field", "size"),
    ("lrn", {"size": 0}, L141, "bad_field", "size"),
    ("lrn", {"size": -3}, L141, "bad_field", "size"),
    ("lrn", {"size": 2.5}, L141, "bad_field", "size"),
    ("lrn", {"size": "3"}, L141, "bad_field", "size"),
    ("lrn", {"size": 2 ** 31}, L141, "bad_field", "size"),
    ("lrn", {"size": 2, "alpha": "x"}, L141, "bad_field", "alpha"),
    ("lrn", {"size": 2, "alpha": "Infinity"}, L141, "bad_field", "alpha"),
    ("lrn", {"size": 2, "beta": "NaN"}, L141, "bad_field", "beta"),
    ("lrn", {"size": 2, "k": None}, L141, "bad_field", "k"),
    ("lrn", {"size": 2, "convention": "caffe"}, L141, "bad_field", "convention"),
    ("lrn", {"size": 2, "convention": 1}, L141, "bad_field", "convention"),
    ("lrn", {"size": 2, "eps": 1e-5}, L141, "unknown_field", "eps"),
    ("lrn", {"size": 2, "axis": 1}, L141, "unknown_field", "axis"),
    ("lrn", {"size": 2, "weight": [1, 1, 1, 1]}, L141, "unknown_field", "weight"),
    ("lrn", {"size": 2}, [1, 2, 3], "needs_channels", "input"),
    ("mvn", {}, X23, "missing_field", "axes"),
    ("mvn", {}, {"shape": [2, 2, 2], "data": [1] * 8}, "missing_field", "axes"),
    ("mvn", {"axes": 4}, M4, "bad_axis", "axes"),
    ("mvn", {"axes": [0, -5]}, M4, "bad_axis", "axes"),
    ("mvn", {"axes": [0, -4]}, M4, "bad_field", "axes"),
    ("mvn", {"axes": []}, M4, "bad_field", "axes"),
    ("mvn", {"axes": "0,2,3"}, M4, "bad_field", "axes"),
    ("mvn", {"eps": -1e-9}, M4, "bad_eps", "eps"),
    ("mvn", {"axis": 1}, M4, "unknown_field", "axis"),
    ("mvn", {"p": 2}, M4, "unknown_field", "p"),
    ("mvn", {"weight": [1, 1]}, M4, "unknown_field", "weight"),
]


# ---- explain and histograms ----------------------------------------------------------
# Each step against numpy in float64 on a float64 input (so the answer's
# doubles are exact), the last step against the answer's own output.

def numpy_lp_steps(x, p, dims, eps):
    a = np.abs(x)
    n = a.max(axis=dims) if math.isinf(p) else (a ** p).sum(axis=dims) ** (1 / p)
    return [("norm", n), ("output", x / np.maximum(np.expand_dims(n, dims), eps))]


def numpy_lrn_steps(x, size, alpha, beta, k, convention):
    C = x.shape[1]
    sq = np.zeros_like(x)
    for c in range(C):
        lo, hi = lrn_window(c, size, C, convention)
        sq[:, c] = np.sum(x[:, lo:hi + 1] ** 2, axis=1)
    den = (k + alpha / size * sq) ** beta
    return [("square_sum", sq), ("denominator", den), ("output", x / den)]


def numpy_mvn_steps(x, dims, eps):
    mean = x.mean(axis=dims, keepdims=True)
    centered = x - mean
    var = (centered ** 2).mean(axis=dims, keepdims=True)
    std = np.sqrt(var)
    normalized = centered / (std + eps)
    return [("mean", np.squeeze(mean, dims)), ("centered", centered),
            ("var", np.squeeze(var, dims)), ("std", np.squeeze(std, dims)),
            ("normalized", normalized), ("output", normalized)]


EXPLAIN = [  # (norm, shape, fields, numpy reference of the steps)
    ("lp", (2, 3, 4), {"p": 3, "axis": [0, 2]},
     lambda x: numpy_lp_steps(x, 3, (0, 2), 1e-12)),
    ("lp", (3, 5), {"p": "Infinity", "axis": 0},
     lambda x: numpy_lp_steps(x, math.inf, (0,), 1e-12)),
    ("lp", (2, 3, 4), {"p": 0.5, "axis": [-1, 0, 1]},
     lambda x: numpy_lp_steps(x, 0.5, (0, 1, 2), 1e-12)),
    ("lrn", (2, 5, 3), {"size": 4, "alpha": 0.3, "beta": 0.6, "k": 1.5},
     lambda x: numpy_lrn_steps(x, 4, 0.3, 0.6, 1.5, "torch")),
    ("lrn", (2, 5, 3), {"size": 4, "alpha": 0.3, "beta": 0.6, "k": 1.5,
                        "convention": "onnx"},
     lambda x: numpy_lrn_steps(x, 4, 0.3, 0.6, 1.5, "onnx")),
    ("lrn", (1, 4, 2, 2), {"size": 3, "alpha": 1.0},
     lambda x: numpy_lrn_steps(x, 3, 1.0, 0.75, 1.0, "torch")),
    ("mvn", (2, 3, 2, 2), {}, lambda x: numpy_mvn_steps(x, (0, 2, 3), 1e-9)),
    ("mvn", (2, 3, 4), {"axes": [0, -1], "eps": 0.01},
     lambda x: numpy_mvn_steps(x, (0, 2), 0.01)),
    ("mvn", (2, 3, 4), {"axes": [1]}, lambda x: numpy_mvn_steps(x, (1,), 1e-9)),
]


@pytest.mark.parametrize("norm,shape,fields,ref", EXPLAIN,
                         ids=["%s-%s-%s" % (n, "x".join(map(str, s)), json.dumps(f)[:40])
                              for n, s, f, _ in EXPLAIN])
def test_explain_steps(daemon, norm, shape, fields, ref):
    x = sample(shape, 21, offset=0.25)
    doc = answer(daemon, ROUTE[norm], dict(fields, input=tensor(x, "float64"),
                                           explain=True))
    want = ref(rounded(x, "float64"))
    assert [s["name"] for s in doc["steps"]] == [n for n, _ in want]
    for got, (name, value) in zip(doc["steps"], want):
        assert got["shape"] == list(value.shape), (name, got["shape"])
        assert_close(arr(got), value, "float64", name)
    # the last step is the answer's own output, bit for bit
    assert doc["steps"][-1]["data"] == doc["output"]["data"]
    # explain: true adds steps to the default answer (output, stats)
    assert "output" in doc and ("stats" in doc) == (norm != "lrn")
    # return: steps alone, and the same steps from the query string
    only = answer(daemon, ROUTE[norm], dict(fields, input=tensor(x, "float64"),
                                            **{"return": "steps"}))
    assert set(only) == {"steps"} and only["steps"] == doc["steps"]
    query = answer(daemon, ROUTE[norm], dict(fields, input=tensor(x, "float64")),
                   "?explain=true")
    assert query["steps"] == doc["steps"]


def histogram_counts(values, lo, hi, bins):
    """explain.c's binning: equal bins over [lo, hi], the maximum in the last."""
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(max(int((v - lo) / width), 0), bins - 1)] += 1
    return counts


@pytest.mark.parametrize("norm", list(ROUTE))
@pytest.mark.parametrize("separate", [False, True])
def test_histograms(daemon, norm, separate):
    fields = FORWARD[norm][0]
    x = sample((2, 3, 2, 2), 22, offset=1.0, scale=3.0)
    body = dict(fields, input=tensor(x, "float64"), histogram_bins=7,
                **{"return": ["output", "histograms"]})
    if separate:
        body["histogram_range"] = "separate"
    doc = answer(daemon, ROUTE[norm], body)
    assert set(doc) == {"output", "histograms"}
    h = doc["histograms"]
    assert h["bins"] == 7 and h["range"] == ("separate" if separate else "shared")
    xin = rounded(x, "float64").ravel()
    yout = arr(doc["output"]).ravel()
    for side, values in (("input", xin), ("output", yout)):
        both = values if separate else np.concatenate([xin, yout])
        lo, hi = float(both.min()), float(both.max())
        got = h[side]
        assert len(got["edges"]) == 8 and got["nonfinite"] == 0
        assert got["edges"][0] == pytest.approx(lo) and got["edges"][-1] == pytest.approx(hi)
        assert got["counts"] == histogram_counts(values, lo, hi, 7), side
        assert sum(got["counts"]) == values.size


def test_histograms_at_the_ends_of_float64(daemon):
    """A range wider than DBL_MAX (hi - lo overflows) and one huge value
    alone (+-0.5 is below its precision): finite, increasing edges and every
    value counted (fuzz_json found the second: 0/0 converted to int64_t)."""
    for data, lo, hi in (([-1e308, 1e308, 0.0], -1e308, 1e308),
                         ([3.3e35], 3.3e35 * (1 - 2**-20), 3.3e35 * (1 + 2**-20))):
        body = {"input": {"shape": [1, len(data)], "dtype": "float64", "data": data},
                "histogram_bins": 4, "histogram_range": "separate",
                "return": "histograms"}
        got = answer(daemon, "/v1/norm/layer", body)["histograms"]["input"]
        edges = got["edges"]
        assert all(isinstance(e, (int, float)) and math.isfinite(e) for e in edges), edges
        assert edges == sorted(edges) and edges[0] < edges[-1]
        assert edges[0] == pytest.approx(lo) and edges[-1] == pytest.approx(hi)
        assert sum(got["counts"]) == len(data) and got["nonfinite"] == 0
    assert_alive(daemon)


@pytest.mark.parametrize("norm", list(ROUTE))
def test_explain_refusals(daemon, norm):
    fields = FORWARD[norm][0]
    x = tensor(sample((2, 3, 2, 2), 23), "float32")
    # output_stats: the output's moments over rows or channels, not these groups
    assert_problem(post(daemon, ROUTE[norm], dict(fields, input=x,
                                                  **{"return": "output_stats"}), 422),
                   422, "bad_field", "return")
    # the backwards answer grad_input and stats only
    for extra, field in (({"explain": True}, "explain"),
                         ({"return": "grad_input"}, "return"),
                         ({"histogram_bins": 4}, "histogram_bins")):
        body = dict(fields, input=x, grad_output=x, **extra)
        assert_problem(post(daemon, ROUTE[norm] + "/backward", body, 422), 422,
                       "unknown_field", field)
    # steps are capped like the five norms' (max_explain_elements)
    big = {"shape": [1, 2, 256, 129], "data": [1.0] * (2 * 256 * 129)}
    assert_problem(post(daemon, ROUTE[norm], dict(fields, input=big, explain=True), 422),
                   422, "explain_too_large", "explain")
    assert_alive(daemon)


def grad_like(t):
    if isinstance(t, list):
        return [0 for _ in t]
    return {"shape": t["shape"], "data": [0] * len(t["data"])}


@pytest.mark.parametrize("norm,extra,inp,code,field", BAD,
                         ids=["%s-%s-%s" % (b[0], b[4], json.dumps(b[1])[:30]) for b in BAD])
def test_bad_values(daemon, norm, extra, inp, code, field):
    body = dict(extra, input=inp)
    assert_problem(post(daemon, ROUTE[norm], body, 422), 422, code, field)
    # the backward takes the forward's fields and checks
    body["grad_output"] = grad_like(inp)
    assert_problem(post(daemon, ROUTE[norm] + "/backward", body, 422), 422, code, field)
    # and v2 refuses it with {"error"}
    params = {k: v for k, v in extra.items()}
    shape = [3] if isinstance(inp, list) else inp["shape"]
    data = inp if isinstance(inp, list) else inp["data"]
    resp = daemon.post_json("/v2/models/%s/infer" % MODEL[norm], {
        "inputs": [{"name": "input", "shape": shape, "datatype": "FP32", "data": data}],
        "parameters": params})
    assert resp.status in (400, 422), resp
    assert set(resp.json()) == {"error"}, resp
    assert_alive(daemon)


@pytest.mark.parametrize("query,code,field", [
    ("?p=0", "bad_field", "p"), ("?p=NaN", "bad_field", "p"),
    ("?p=Infinity&axis=0,0", "bad_field", "axis"), ("?axis=9", "bad_axis", "axis"),
])
def test_bad_query_values(daemon, query, code, field):
    raw, _ = as_dtype(np.ones((2, 3)), "float32")
    resp = daemon.request("POST", ROUTE["lp"] + query, npy_bytes(raw),
                          {"Content-Type": NPY})
    assert_problem(resp, 422, code, field)
    assert_alive(daemon)


@pytest.mark.parametrize("norm,extra,inp", [
    ("lp", {}, X23), ("lrn", {"size": 2}, L141), ("mvn", {}, M4)])
def test_backward_grad_output_errors(daemon, norm, extra, inp):
    assert_problem(post(daemon, ROUTE[norm] + "/backward", dict(extra, input=inp), 422),
                   422, "missing_field", "grad_output")
    bad = {"shape": [len(inp["data"])], "data": inp["data"]}
    assert_problem(post(daemon, ROUTE[norm] + "/backward",
                        dict(extra, input=inp, grad_output=bad), 422),
                   422, "grad_output_shape", "grad_output")
    assert_alive(daemon)
