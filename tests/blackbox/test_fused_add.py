"""The fused residual add of layer and RMS norm (vLLM's fused_add_rms_norm,
FlashAttention's dropout_add_layer_norm without dropout) against the real
daemon: with a `residual` of the input's shape and dtype, normd computes
h = input + residual, each sum rounded once to the input's dtype, normalizes
h, and answers `residual_out` = h right after `output`.

The checks: residual_out is numpy's add in the dtype (float32, float64,
float16) or the exact sum rounded once (bfloat16), ties and overflow
included; output, stats, steps and histograms are bit for bit those of a
second request that sends h as the input; residual_out comes only with
output, in the input's dtype; the binary framing both ways, .npy answers,
KServe v2 (JSON and binary); and the refusals (shape, dtype, the routes
that take no residual, the query string), with the daemon alive after
each."""
import io
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from normd_helpers import assert_problem
from numpy_refs import (DTYPES, Framed, assert_close, bf16_bits, bf16_values,
                        binary_tensor, framed_body, ref_layer, ref_rms)

OCTET = "application/octet-stream"
JSON = "application/json"
ROUTE = {"layer": "/v1/norm/layer", "rms": "/v1/norm/rms"}
MODEL = {"layer": "layer_norm", "rms": "rms_norm"}
V2 = {"float32": "FP32", "float64": "FP64", "float16": "FP16", "bfloat16": "BF16"}
# significand bits (hidden one included), smallest and largest normal exponent
FORMAT = {"float64": (53, -1022, 1023), "float32": (24, -126, 127),
          "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}
NORMS = ["layer", "rms"]
DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16"]


# ---- numbers ---------------------------------------------------------------------------

def round_exact(q, dtype):
    """The rational q rounded once (to nearest, ties to even) to dtype, as
    a float (every value of the four dtypes is a double): subnormals, and
    overflow to infinity at the midpoint past the largest finite value."""
    p, emin, emax = FORMAT[dtype]
    if q == 0:
        return 0.0
    sign, a = (-1.0 if q < 0 else 1.0), abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1  # now 2^e <= a < 2^(e+1)
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    n = a / ulp
    k = n.numerator // n.denominator
    rest = n - k
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and k % 2 == 1):
        k += 1
    v = k * ulp
    if v >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(v)


def raw_of(values, dtype):
    """Exact values of dtype (floats) -> the raw array that travels."""
    if dtype == "bfloat16":
        return bf16_bits(np.asarray(values, dtype=np.float64))
    return np.asarray(values, dtype=np.float64).astype(DTYPES[dtype][1])


def values(raw, dtype):
    """Raw array of dtype -> float64 values (exact)."""
    if dtype == "bfloat16":
        return bf16_values(raw).astype(np.float64)
    return np.asarray(raw).astype(np.float64)


def expected_h(x_raw, r_raw, dtype):
    """h = input + residual, rounded once to dtype: numpy's add in float32,
    float64 and float16 (numpy adds float16 in float32, which holds the sum
    closely enough that the second rounding changes nothing); for bfloat16
    the exact sum rounded once."""
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):
            return (x_raw + r_raw).astype(DTYPES[dtype][1])
    xs, rs = values(x_raw, dtype).ravel(), values(r_raw, dtype).ravel()
    h = []
    for a, b in zip(xs, rs):
        if not (math.isfinite(a) and math.isfinite(b)):
            h.append(a + b)
        else:
            h.append(round_exact(Fraction(a) + Fraction(b), dtype))
    return raw_of(np.array(h).reshape(x_raw.shape), dtype)


def bits(raw):
    """The bit patterns of a raw array (NaN compared as bits too)."""
    a = np.ascontiguousarray(raw)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def json_values(tensor):
    """A JSON answer's tensor data as floats ("NaN", "Infinity" spelled out)."""
    out = []
    for v in tensor["data"]:
        out.append({"NaN": math.nan, "Infinity": math.inf,
                    "-Infinity": -math.inf}.get(v, v) if isinstance(v, str) else float(v))
    return np.array(out, dtype=np.float64).reshape(tensor["shape"])


def text_to_raw(tensor, dtype):
    """A JSON answer's tensor as the raw array of dtype: each number's text
    rounded once, exactly, from its decimal (no double rounding)."""
    out = []
    for v in tensor["data"]:
        if isinstance(v, str):
            out.append({"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v])
        else:
            out.append(round_exact(v, dtype))
    return raw_of(np.array(out).reshape(tensor["shape"]), dtype)


def exact_json(raw, dtype):
    """Raw values as JSON numbers that are exactly the values (repr of a
    double), non-finite in normd's spelling."""
    out = []
    for v in values(raw, dtype).ravel():
        if math.isnan(v):
            out.append("NaN")
        elif math.isinf(v):
            out.append("Infinity" if v > 0 else "-Infinity")
        else:
            out.append(float(v))
    return {"shape": list(raw.shape), "dtype": dtype, "data": out}


def post(daemon, norm, body, headers=None):
    resp = daemon.post_json(ROUTE[norm], body, headers=headers)
    assert resp.status == 200, resp
    assert resp.content_type == JSON, resp
    return json.loads(resp.body, parse_float=Fraction)


def post_framed(daemon, path, header, tensors, accept=None):
    body, hl = framed_body(header, tensors)
    h = {"Content-Type": OCTET, "Inference-Header-Content-Length": str(hl)}
    if accept:
        h["Accept"] = accept
    return daemon.request("POST", path, body=body, headers=h)


def plain(doc):
    """A document parsed with Fractions, back to floats (for comparisons)."""
    if isinstance(doc, dict):
        return {k: plain(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [plain(v) for v in doc]
    return float(doc) if isinstance(doc, Fraction) else doc


def assert_alive(daemon):
    """A good fused request still works (the daemon survived what came before)."""
    assert daemon.alive(), daemon.log()[-3000:]
    doc = plain(post(daemon, "rms", {"input": [[1, 2, 3, 4.1]],
                                      "residual": [[0.5, -1, 0.25, 0.1]]}))
    assert doc["residual_out"]["data"] == [1.5, 1, 3.25, 4.2]


# ---- the cases ---------------------------------------------------------------------------

# Pairs whose sum is a tie, an overflow, a cancellation or tiny, per dtype
EDGES = {
    "float32": [(1.0, 2.0 ** -24), (1.0 + 2.0 ** -23, 2.0 ** -24), (3.4028234663852886e38, 3.4028234663852886e38),
                (0.1, -0.1), (2.0 ** -149, 2.0 ** -149), (1e30, 1.0), (-2.5, 0.75), (16777216.0, 1.0)],
    "float64": [(1.0, 2.0 ** -53), (1.0 + 2.0 ** -52, 2.0 ** -53), (1.7976931348623157e308, 1.7976931348623157e308),
                (0.1, -0.1), (5e-324, 5e-324), (1e300, 1.0), (-2.5, 0.75), (9007199254740992.0, 1.0)],
    "float16": [(1.0, 2.0 ** -11), (1.0 + 2.0 ** -10, 2.0 ** -11), (65504.0, 16.0),
                (0.5, -0.5), (2.0 ** -24, 2.0 ** -24), (2048.0, 1.0), (-2.5, 0.75), (65504.0, 8.0)],
    "bfloat16": [(1.0, 2.0 ** -8), (1.0 + 2.0 ** -7, 2.0 ** -8), (3.3895313892515355e38, 3.3895313892515355e38),
                 (0.5, -0.5), (2.0 ** -133, 2.0 ** -133), (2.0 ** 100, 2.0 ** -100), (-2.5, 0.75), (256.0, 1.0)],
}


def case(dtype, seed, rows=4, cols=8, edges=True):
    """(input raw, residual raw) of shape (rows, cols) in dtype: random
    values, plus a last row of EDGES (its overflow makes that row NaN)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * 2 + 0.5
    r = rng.standard_normal((rows, cols))
    if edges:
        e = np.array(EDGES[dtype], dtype=np.float64)
        x[-1, :len(e)], r[-1, :len(e)] = e[:, 0], e[:, 1]
    return raw_of(x, dtype), raw_of(r, dtype)


def affine(norm, cols):
    w = np.linspace(0.5, 2.0, cols).astype("<f4")
    b = np.linspace(-1.0, 1.0, cols).astype("<f4")
    return {"weight": w.tolist()} if norm == "rms" else {"weight": w.tolist(), "bias": b.tolist()}


# ---- output is the norm of residual_out, bit for bit ---------------------------------------

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("norm", NORMS)
def test_framed_residual_out_is_the_add_and_output_its_norm(daemon, norm, dtype):
    """Every tensor binary both ways: residual_out's bits are the sum
    rounded once, and output's (and stats') bits are those of h sent as
    the input."""
    x, r = case(dtype, seed=NORMS.index(norm) * 10 + DTYPE_NAMES.index(dtype))
    extra = affine(norm, x.shape[1])
    header = dict({"input": binary_tensor(x.shape, dtype, x),
                   "residual": binary_tensor(r.shape, dtype, r),
                   "binary_data_output": True}, **extra)
    f = Framed(post_framed(daemon, ROUTE[norm], header, [x, r]))
    assert list(f.header) == ["output", "residual_out", "stats"], f.header
    assert f.header["residual_out"]["dtype"] == dtype
    y = f.take(f.header["output"], dtype)
    h = f.take(f.header["residual_out"], dtype)
    f.done()
    want = expected_h(x, r, dtype)
    assert (bits(h) == bits(want)).all(), (values(h, dtype), values(want, dtype))
    # the last row overflowed to infinity: its output is NaN; others finite
    assert np.isinf(values(h, dtype)[-1]).any()
    assert np.isfinite(values(y, dtype)[:-1]).all()
    # the same norm of h, sent as the input
    header2 = dict({"input": binary_tensor(h.shape, dtype, h),
                    "binary_data_output": True}, **extra)
    f2 = Framed(post_framed(daemon, ROUTE[norm], header2, [h]))
    assert list(f2.header) == ["output", "stats"]
    y2 = f2.take(f2.header["output"], dtype)
    f2.done()
    assert (bits(y) == bits(y2)).all(), (values(y, dtype), values(y2, dtype))
    assert f.header["stats"] == f2.header["stats"]
    # and close to the float64 norm of h (finite rows)
    hv = values(h, dtype)[:-1]
    ref = (ref_rms(hv, weight=extra["weight"]) if norm == "rms" else
           ref_layer(hv, weight=extra["weight"], bias=extra["bias"]))
    assert_close(values(y, dtype)[:-1], ref["output"], dtype, what="output")


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("norm", NORMS)
def test_json_residual_out_is_the_add_and_output_its_norm(daemon, norm, dtype):
    """The same in JSON: residual_out's numbers read back (rounded once
    from their text) to the sum's bits, and the answer equals, number for
    number, that of h sent as the input."""
    x, r = case(dtype, seed=100 + NORMS.index(norm) * 10 + DTYPE_NAMES.index(dtype))
    extra = affine(norm, x.shape[1])
    doc = post(daemon, norm, dict({"input": exact_json(x, dtype),
                                   "residual": exact_json(r, dtype)}, **extra))
    assert list(doc) == ["output", "residual_out", "stats"], list(doc)
    ro = doc["residual_out"]
    assert ro["dtype"] == dtype and ro["shape"] == list(x.shape)
    want = expected_h(x, r, dtype)
    got = text_to_raw(ro, dtype)
    assert (bits(got) == bits(want)).all(), (values(got, dtype), values(want, dtype))
    doc2 = post(daemon, norm, dict({"input": exact_json(want, dtype)}, **extra))
    assert list(doc2) == ["output", "stats"]
    assert plain(doc["output"]) == plain(doc2["output"])  # NaN is "NaN": equal
    assert plain(doc["stats"]) == plain(doc2["stats"])


@pytest.mark.parametrize("norm", NORMS)
def test_nested_arrays_and_the_readme_numbers(daemon, norm):
    """Nested arrays (float32); 4.1 + 0.1 is 4.2 in float32 (4.2000003 in
    float64, which normd does not use for float32)."""
    doc = plain(post(daemon, norm, {"input": [[1, 2, 3, 4.1]],
                                     "residual": [[0.5, -1, 0.25, 0.1]],
                                     "weight": [1, 1, 2, 2]}))
    assert doc["residual_out"] == {"shape": [1, 4], "dtype": "float32",
                                   "data": [1.5, 1, 3.25, 4.2]}
    want = (np.float32([1, 2, 3, 4.1]) + np.float32([0.5, -1, 0.25, 0.1])).astype(float)
    assert np.array_equal(np.float32(doc["residual_out"]["data"]), np.float32(want))
    doc2 = plain(post(daemon, norm, {"input": [[1.5, 1, 3.25, 4.2]], "weight": [1, 1, 2, 2]}))
    assert doc["output"] == doc2["output"] and doc["stats"] == doc2["stats"]


# ---- with weight, bias, normalized_shape, axis, output_dtype --------------------------------

@pytest.mark.parametrize("rows", [{"normalized_shape": [3, 4]}, {"axis": 1}, {"axis": -2}])
@pytest.mark.parametrize("norm", NORMS)
def test_trailing_dims_with_weight_and_bias(daemon, norm, rows):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 4)).astype("<f4")
    r = (rng.standard_normal((2, 3, 4)) * 3).astype("<f4")
    w = (rng.standard_normal((3, 4)) + 1).astype("<f4")
    b = rng.standard_normal((3, 4)).astype("<f4")
    extra = {"weight": {"shape": [3, 4], "data": w.ravel().tolist()}}
    if norm == "layer":
        extra["bias"] = {"shape": [3, 4], "data": b.ravel().tolist()}
    body = dict(rows, input=exact_json(x, "float32"), residual=exact_json(r, "float32"), **extra)
    doc = plain(post(daemon, norm, body))
    h = x + r
    assert np.array_equal(np.float32(json_values(doc["residual_out"])), h)
    assert doc["stats"]["shape"] == [2]
    doc2 = plain(post(daemon, norm, dict(rows, input=exact_json(h, "float32"), **extra)))
    assert doc["output"] == doc2["output"] and doc["stats"] == doc2["stats"]
    ref = (ref_rms(h.astype(float), ndim=2, weight=w) if norm == "rms" else
           ref_layer(h.astype(float), ndim=2, weight=w, bias=b))
    assert_close(json_values(doc["output"]), ref["output"], what="output")


@pytest.mark.parametrize("out_dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("norm", NORMS)
def test_residual_out_keeps_the_input_dtype(daemon, norm, out_dtype):
    """output_dtype is output's; residual_out (h, what the next layer adds
    to) stays in the input's dtype, JSON and framed."""
    x, r = case("float16", seed=31, edges=False)
    body = {"input": exact_json(x, "float16"), "residual": exact_json(r, "float16"),
            "output_dtype": out_dtype}
    doc = post(daemon, norm, body)
    assert doc["output"]["dtype"] == out_dtype
    assert doc["residual_out"]["dtype"] == "float16"
    h = expected_h(x, r, "float16")
    assert (bits(text_to_raw(doc["residual_out"], "float16")) == bits(h)).all()
    doc2 = post(daemon, norm, {"input": exact_json(h, "float16"), "output_dtype": out_dtype})
    assert plain(doc["output"]) == plain(doc2["output"])
    # framed: output's bytes in out_dtype, then residual_out's in float16
    header = {"input": binary_tensor(x.shape, "float16", x),
              "residual": binary_tensor(r.shape, "float16", r),
              "output_dtype": out_dtype, "return": "output"}
    resp = post_framed(daemon, ROUTE[norm], header, [x, r], accept=OCTET)
    f = Framed(resp)
    assert list(f.header) == ["output", "residual_out"]
    y = f.take(f.header["output"], out_dtype)
    hb = f.take(f.header["residual_out"], "float16")
    f.done()
    assert len(resp.body) == f.header_length + y.nbytes + hb.nbytes
    assert (bits(hb) == bits(h)).all()
    assert (bits(y) == bits(text_to_raw(doc2["output"], out_dtype))).all()


# ---- explain and histograms --------------------------------------------------------------

@pytest.mark.parametrize("norm", NORMS)
def test_explain_steps_are_those_of_h(daemon, norm):
    x = np.array([[1, 2, 3, 4.1], [0.5, -2, 7, 1]], dtype="<f4")
    r = np.array([[0.5, -1, 0.25, 0.1], [3, 3, -6, 0]], dtype="<f4")
    h = x + r
    extra = {"weight": [1, 1, 2, 2]}
    doc = plain(post(daemon, norm, dict(extra, input=x.tolist(), residual=r.tolist(),
                                        explain=True)))
    assert list(doc) == ["output", "residual_out", "stats", "steps"]
    doc2 = plain(post(daemon, norm, dict(extra, input=h.tolist(), explain=True)))
    assert doc["steps"] == doc2["steps"]
    assert doc["output"] == doc2["output"]
    first = doc["steps"][0]
    hv = h.astype(float)
    if norm == "layer":
        assert first["name"] == "mean"
        assert_close(first["data"], hv.mean(axis=1), what="mean of h")
        assert doc["steps"][1]["name"] == "centered"
        assert_close(doc["steps"][1]["data"],
                     (hv - hv.mean(axis=1, keepdims=True)).ravel(), what="h - mean")
    else:
        assert first["name"] == "mean_square"
        assert_close(first["data"], (hv * hv).mean(axis=1), what="mean square of h")
    # not the input's
    xv = x.astype(float)
    not_x = xv.mean(axis=1) if norm == "layer" else (xv * xv).mean(axis=1)
    assert not np.allclose(first["data"], not_x)
    # steps only (return: []) still come from h
    doc3 = plain(post(daemon, norm, dict(extra, input=x.tolist(), residual=r.tolist(),
                                         explain=True, **{"return": []})))
    assert doc3 == {"steps": doc["steps"]}


@pytest.mark.parametrize("separate", ["shared", "separate"])
@pytest.mark.parametrize("norm", NORMS)
def test_histograms_are_of_h(daemon, norm, separate):
    x = np.array([[1, 2, 3, 4.1], [0.5, -2, 7, 1]], dtype="<f4")
    r = np.array([[0.5, -1, 0.25, 0.1], [30, 3, -6, 0]], dtype="<f4")
    body = {"return": ["output", "histograms"], "histogram_bins": 5, "histogram_range": separate}
    doc = plain(post(daemon, norm, dict(body, input=x.tolist(), residual=r.tolist())))
    doc2 = plain(post(daemon, norm, dict(body, input=(x + r).tolist())))
    assert list(doc) == ["output", "residual_out", "histograms"]
    assert doc["histograms"] == doc2["histograms"]
    if separate == "separate":
        edges = doc["histograms"]["input"]["edges"]
        assert np.float32(edges[0]) == (x + r).min() and np.float32(edges[-1]) == (x + r).max()


# ---- return --------------------------------------------------------------------------------

@pytest.mark.parametrize("ret,keys", [
    (None, ["output", "residual_out", "stats"]),
    ("output", ["output", "residual_out"]),
    (["stats", "output"], ["output", "residual_out", "stats"]),
    ("stats", ["stats"]),
    (["stats", "output_stats"], ["stats", "output_stats"]),
    (["output_stats", "output"], ["output", "residual_out", "output_stats"]),
    ("histograms", ["histograms"]),
    ([], []),
])
@pytest.mark.parametrize("norm", NORMS)
def test_residual_out_only_with_output(daemon, norm, ret, keys):
    body = {"input": [[1, 2, 3, 4]], "residual": [[4, 3, 2, 1.5]]}
    if ret is not None:
        body["return"] = ret
    doc = plain(post(daemon, norm, body))
    assert list(doc) == keys, doc
    if "residual_out" in doc:
        assert doc["residual_out"]["data"] == [5, 5, 5, 5.5]
    # what does come back is that of h
    h = dict(body, input=[[5, 5, 5, 5.5]])
    del h["residual"]
    want = plain(post(daemon, norm, h))
    assert {k: v for k, v in doc.items() if k != "residual_out"} == want
    # framed: residual_out binary exactly when output is
    resp = daemon.post_json(ROUTE[norm], dict(body, binary_data_output=True))
    f = Framed(resp)
    assert list(f.header) == keys
    if "output" in keys:
        f.take(f.header["output"], "float32")
        hb = f.take(f.header["residual_out"], "float32")
        assert hb.tolist() == [[5, 5, 5, 5.5]]
    f.done()


@pytest.mark.parametrize("norm", NORMS)
def test_output_stats_are_of_the_norm_of_h(daemon, norm):
    body = {"input": [[1, 2, 3, 4]], "residual": [[4, 3, 2, 1.5]],
            "return": ["output", "stats", "output_stats"]}
    doc = plain(post(daemon, norm, body))
    doc2 = plain(post(daemon, norm, {"input": [[5, 5, 5, 5.5]],
                                      "return": ["output", "stats", "output_stats"]}))
    assert doc["output_stats"] == doc2["output_stats"]


# ---- framed requests and answers, .npy --------------------------------------------------

@pytest.mark.parametrize("norm", NORMS)
def test_framed_mixed_json_and_binary(daemon, norm):
    """The residual binary and the input JSON (and the other way round) in
    one framed body; the framed answer's tail is output then residual_out;
    Accept: application/json answers JSON."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5)).astype("<f4")
    r = rng.standard_normal((3, 5)).astype("<f4")
    want = plain(post(daemon, norm, {"input": exact_json(x, "float32"),
                                     "residual": exact_json(r, "float32")}))
    for header, tensors in [
            ({"input": exact_json(x, "float32"), "residual": binary_tensor(r.shape, "float32", r)}, [r]),
            ({"residual": exact_json(r, "float32"), "input": binary_tensor(x.shape, "float32", x)}, [x]),
            ({"residual": binary_tensor(r.shape, "float32", r), "input": binary_tensor(x.shape, "float32", x)}, [r, x])]:
        resp = post_framed(daemon, ROUTE[norm], header, tensors)
        f = Framed(resp)
        y = f.take(f.header["output"], "float32")
        h = f.take(f.header["residual_out"], "float32")
        f.done()
        assert np.array_equal(h, x + r)
        assert np.array_equal(y, np.float32(json_values(want["output"])))
        assert f.header["stats"] == want["stats"]
        resp = post_framed(daemon, ROUTE[norm], header, tensors, accept=JSON)
        assert resp.status == 200 and resp.content_type == JSON, resp
        assert resp.json() == want
    # a JSON request asking for the framing by Accept
    resp = daemon.post_json(ROUTE[norm], {"input": exact_json(x, "float32"),
                                          "residual": exact_json(r, "float32")},
                            headers={"Accept": OCTET})
    f = Framed(resp)
    assert f.header["residual_out"] == {"shape": [3, 5], "dtype": "float32",
                                        "parameters": {"binary_data_size": 60}}
    assert len(resp.body) == f.header_length + 120


@pytest.mark.parametrize("norm", NORMS)
def test_npy_answer_is_the_output_alone(daemon, norm):
    """A .npy answer holds one array, the output (as without a residual,
    where it leaves out the stats): the norm of h."""
    body = {"input": [[1, 2, 3, 4]], "residual": [[4, 3, 2, 1.5]]}
    resp = daemon.post_json(ROUTE[norm], body, headers={"Accept": "application/x-npy"})
    assert resp.status == 200 and resp.content_type == "application/x-npy", resp
    y = np.load(io.BytesIO(resp.body), allow_pickle=False)
    want = plain(post(daemon, norm, {"input": [[5, 5, 5, 5.5]]}))
    assert np.array_equal(y, np.float32(json_values(want["output"])))


# ---- KServe v2 ---------------------------------------------------------------------------

def v2_tensor(name, raw, dtype, binary=False):
    t = {"name": name, "shape": list(raw.shape), "datatype": V2[dtype]}
    if binary:
        t["parameters"] = {"binary_data_size": int(raw.nbytes)}
    else:
        t["data"] = exact_json(raw, dtype)["data"]
    return t


def v2_outputs(resp):
    """{name: (output object, raw array)} of a v2 answer, JSON or binary."""
    assert resp.status == 200, resp
    if resp.content_type == JSON:
        doc, tail = json.loads(resp.body, parse_float=Fraction), b""
    else:
        assert resp.content_type == OCTET, resp
        hl = int(resp.header("Inference-Header-Content-Length"))
        doc, tail = json.loads(resp.body[:hl], parse_float=Fraction), resp.body[hl:]
    out, pos = {}, 0
    name_of = {v: k for k, v in V2.items()}
    for o in doc["outputs"]:
        dtype = name_of[o["datatype"]]
        if "data" in o:
            raw = text_to_raw(o, dtype)
        else:
            dt = DTYPES[dtype][1]
            n = o["parameters"]["binary_data_size"]
            raw = np.frombuffer(tail, dtype=dt, count=n // dt.itemsize, offset=pos).reshape(o["shape"])
            pos += n
        out[o["name"]] = (o, raw)
    assert pos == len(tail)
    return doc, out


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("norm", NORMS)
def test_v2_json(daemon, norm, dtype):
    x, r = case(dtype, seed=200 + DTYPE_NAMES.index(dtype), edges=False)
    model = MODEL[norm]
    path = "/v2/models/%s/infer" % model
    doc, out = v2_outputs(daemon.post_json(path, {"inputs": [
        v2_tensor("input", x, dtype), v2_tensor("residual", r, dtype)]}))
    names = [o["name"] for o in doc["outputs"]]
    assert names == (["output", "residual_out", "mean", "var", "rstd"] if norm == "layer"
                     else ["output", "residual_out", "rms", "rstd"])
    o, h = out["residual_out"]
    assert o["datatype"] == V2[dtype] and o["shape"] == list(x.shape)
    want = expected_h(x, r, dtype)
    assert (bits(h) == bits(want)).all()
    doc2, out2 = v2_outputs(daemon.post_json(path, {"inputs": [v2_tensor("input", want, dtype)]}))
    assert [o for o in doc["outputs"] if o["name"] != "residual_out"] == doc2["outputs"]
    # residual_out alone, and the order of outputs stays the model's
    doc3, _ = v2_outputs(daemon.post_json(path, {
        "inputs": [v2_tensor("input", x, dtype), v2_tensor("residual", r, dtype)],
        "outputs": [{"name": "rstd"}, {"name": "residual_out"}]}))
    assert [o["name"] for o in doc3["outputs"]] == ["residual_out", "rstd"]
    assert doc3["outputs"][0] == out["residual_out"][0]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("norm", NORMS)
def test_v2_binary(daemon, norm, dtype):
    x, r = case(dtype, seed=300 + DTYPE_NAMES.index(dtype))
    w = raw_of(values(raw_of(np.linspace(0.5, 2, x.shape[1]), dtype), dtype), dtype)
    model = MODEL[norm]
    header = {"inputs": [v2_tensor("input", x, dtype, True), v2_tensor("residual", r, dtype, True),
                         v2_tensor("weight", w, dtype, True)],
              "parameters": {"binary_data_output": True}}
    body = json.dumps(header).encode()
    resp = daemon.request("POST", "/v2/models/%s/infer" % model,
                          body=body + x.tobytes() + r.tobytes() + w.tobytes(),
                          headers={"Content-Type": OCTET,
                                   "Inference-Header-Content-Length": str(len(body))})
    doc, out = v2_outputs(resp)
    assert resp.content_type == OCTET
    assert [o["name"] for o in doc["outputs"]][:2] == ["output", "residual_out"]
    assert all("data" not in o for o in doc["outputs"])
    assert (bits(out["residual_out"][1]) == bits(expected_h(x, r, dtype))).all()
    # output: the /v1 answer of the same request, bit for bit
    h = out["residual_out"][1]
    v1 = Framed(post_framed(daemon, ROUTE[norm], {
        "input": binary_tensor(h.shape, dtype, h), "weight": binary_tensor(w.shape, dtype, w),
        "binary_data_output": True}, [h, w]))
    y1 = v1.take(v1.header["output"], dtype)
    assert (bits(out["output"][1]) == bits(y1)).all()


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", NORMS)
def test_residual_mismatch(daemon, norm):
    x = [[1.0, 2.0, 3.0, 4.0]]
    bad = [
        [[1.0, 2.0]],                      # fewer elements
        [1.0, 2.0, 3.0, 4.0],              # the same elements, another shape
        [[1.0], [2.0], [3.0], [4.0]],      # transposed
        [[1.0, 2.0, 3.0, 4.0]] * 2,        # more rows
        {"shape": [1, 4], "dtype": "float64", "data": [1, 2, 3, 4]},   # dtype
        {"shape": [1, 4], "dtype": "float16", "data": [1, 2, 3, 4]},
        {"shape": [1, 4], "dtype": "bfloat16", "data": [1, 2, 3, 4]},
    ]
    for residual in bad:
        resp = daemon.post_json(ROUTE[norm], {"input": x, "residual": residual})
        doc = assert_problem(resp, 422, "residual_mismatch", "residual")
        assert "float32" in doc["detail"], doc
    # float16 input, bfloat16 residual (the same size, another dtype)
    resp = daemon.post_json(ROUTE[norm], {
        "input": {"shape": [4], "dtype": "float16", "data": [1, 2, 3, 4]},
        "residual": {"shape": [4], "dtype": "bfloat16", "data": [1, 2, 3, 4]}})
    assert_problem(resp, 422, "residual_mismatch", "residual")
    # framed: a binary residual of the wrong dtype, and one whose size lies
    xa = np.ones((2, 3), dtype="<f4")
    ra = np.ones((2, 3), dtype="<f8")
    resp = post_framed(daemon, ROUTE[norm], {"input": binary_tensor(xa.shape, "float32", xa),
                                             "residual": binary_tensor(ra.shape, "float64", ra)},
                       [xa, ra])
    assert_problem(resp, 422, "residual_mismatch", "residual")
    resp = post_framed(daemon, ROUTE[norm], {"input": binary_tensor(xa.shape, "float32", xa),
                                             "residual": binary_tensor((2, 3), "float32", xa[:1])},
                       [xa, xa[:1]])
    assert_problem(resp, 422, "binary_size_mismatch", "residual")
    # a residual that is no tensor
    for residual, code in [(None, "bad_tensor"), ("x", "bad_tensor"), ([[1, 2, "a", 4]], "bad_number"),
                           ([[1, 2], [3]], "ragged_tensor")]:
        resp = daemon.post_json(ROUTE[norm], {"input": x, "residual": residual})
        assert_problem(resp, 422, code, "residual")
    # a residual and no input
    assert_problem(daemon.post_json(ROUTE[norm], {"residual": x}), 422, "missing_field", "input")
    assert_alive(daemon)


@pytest.mark.parametrize("path,body", [
    ("/v1/norm/layer/backward", {"input": [[1, 2, 3]], "grad_output": [[1, 0, 0]]}),
    ("/v1/norm/rms/backward", {"input": [[1, 2, 3]], "grad_output": [[1, 0, 0]]}),
    ("/v1/norm/batch", {"input": [[1, 2, 3], [3, 4, 6]]}),
    ("/v1/norm/group", {"input": [[1, 2, 3, 4]], "num_groups": 2}),
    ("/v1/norm/instance", {"input": [[[1, 2, 3]]]}),
    ("/v1/norm/batch/backward", {"input": [[1, 2, 3], [3, 4, 6]], "grad_output": [[1, 0, 0], [0, 0, 1]]}),
    ("/v1/moments", {"input": [[1, 2, 3]]}),
])
def test_routes_without_residual(daemon, path, body):
    shape = np.array(body["input"]).shape
    resp = daemon.post_json(path, dict(body, residual=np.ones(shape).tolist()))
    doc = assert_problem(resp, 422, "unknown_field", "residual")
    assert "residual" in doc["detail"]
    assert_alive(daemon)


@pytest.mark.parametrize("norm", NORMS)
def test_residual_not_in_the_query_string(daemon, norm):
    for q in ["?residual=1", "?residual=%5B1,2,3%5D"]:
        resp = daemon.post_json(ROUTE[norm] + q, {"input": [1, 2, 3]})
        assert_problem(resp, 422, "bad_field", "residual")
        # nor beside a .npy input
        f = io.BytesIO()
        np.save(f, np.array([1, 2, 3], dtype="<f4"))
        resp = daemon.request("POST", ROUTE[norm] + q, body=f.getvalue(),
                              headers={"Content-Type": "application/x-npy"})
        assert_problem(resp, 422, "bad_field", "residual")
    # a tensor name in the query string is refused as such on any route
    # (as bias on rms), whether the route takes it or not
    assert_problem(daemon.post_json("/v1/norm/layer/backward?residual=1",
                                    {"input": [1, 2, 3], "grad_output": [1, 0, 0]}),
                   422, "bad_field", "residual")
    assert_alive(daemon)


def test_v2_errors(daemon):
    x = {"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}
    res = dict(x, name="residual")
    cases = [
        ("layer_norm", {"inputs": [x, dict(res, shape=[4])]}, 422, "residual"),
        ("rms_norm", {"inputs": [x, dict(res, datatype="FP64")]}, 422, "residual"),
        ("rms_norm", {"inputs": [x, res, res]}, 400, "twice"),
        # residual_out without the residual it comes from: 422 naming the input
        ("layer_norm", {"inputs": [x], "outputs": [{"name": "residual_out"}]}, 422,
         'output "residual_out" needs the input "residual"'),
        ("layer_norm_backward", {"inputs": [x, dict(x, name="grad_output")],
                                 "outputs": [{"name": "grad_weight"}]}, 422,
         'output "grad_weight" needs the input "weight"'),
        ("batch_norm", {"inputs": [dict(x, shape=[2, 2]), dict(res, shape=[2, 2])]}, 422, "residual"),
        ("group_norm", {"inputs": [dict(x, shape=[1, 4]), res], "parameters": {"num_groups": 2}},
         422, "residual"),
        ("layer_norm_backward", {"inputs": [x, dict(x, name="grad_output"), res]}, 422, "residual"),
        ("rms_norm_backward", {"inputs": [x, dict(x, name="grad_output"), res]}, 422, "residual"),
        ("rms_norm_backward", {"inputs": [x, dict(x, name="grad_output")],
                               "outputs": [{"name": "residual_out"}]}, 400, "residual_out"),
    ]
    for model, request, status, word in cases:
        resp = daemon.post_json("/v2/models/%s/infer" % model, request)
        assert resp.status == status, (model, request, resp)
        assert resp.content_type == JSON, resp
        doc = resp.json()
        assert list(doc) == ["error"] and word in doc["error"], (model, doc)
    assert_alive(daemon)


@pytest.mark.parametrize("model,inputs,outputs", [
    ("layer_norm", ["input", "residual", "weight", "bias"],
     ["output", "mean", "var", "rstd", "residual_out"]),
    ("rms_norm", ["input", "residual", "weight"], ["output", "rstd", "rms", "residual_out"]),
])
def test_v2_metadata(daemon, model, inputs, outputs):
    resp = daemon.get("/v2/models/%s" % model)
    assert resp.status == 200, resp
    meta = resp.json()
    assert [t["name"] for t in meta["inputs"]] == inputs
    assert [t["name"] for t in meta["outputs"]] == outputs
    by = {t["name"]: t for t in meta["inputs"] + meta["outputs"]}
    assert by["residual"]["shape"] == by["input"]["shape"] == [-1, -1]
    assert by["residual_out"]["shape"] == by["output"]["shape"]
