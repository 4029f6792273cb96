"""Tensor forms, dtypes, non-finite values, exact number text, the "return"
field, and batch norm's running statistics, through HTTP."""
import json
import math
import re
import struct

import pytest

from normd_helpers import (assert_close, bf16, f16, f32, floats, ref_batch,
                           ref_layer)

REL32 = 1e-6


def post_ok(daemon, path, obj):
    r = daemon.post_json(path, obj)
    assert r.status == 200, r
    return r


# ---- tensor forms ---------------------------------------------------------------

def test_object_and_nested_forms_agree(daemon):
    data = [1.0, 2.0, 4.0, 8.0, -1.0, 0.5]
    a = post_ok(daemon, "/v1/norm/layer",
                {"input": {"shape": [2, 3], "dtype": "float32", "data": data}})
    b = post_ok(daemon, "/v1/norm/layer",
                {"input": [[1, 2, 4], [8, -1, 0.5]]})
    assert a.body == b.body
    assert a.json()["output"]["shape"] == [2, 3]


def test_nested_rank3_shape_is_inferred(daemon):
    doc = post_ok(daemon, "/v1/norm/instance",
                  {"input": [[[1, 2, 3], [4, 5, 7]], [[0, 0, 1], [2, 2, 2]]]}).json()
    assert doc["output"]["shape"] == [2, 2, 3]
    assert doc["output"]["dtype"] == "float32"  # the default dtype
    assert doc["stats"]["shape"] == [2, 2]


def test_object_data_nested_as_the_shape_equals_flat(daemon):
    flat = post_ok(daemon, "/v1/norm/instance",
                   {"input": {"shape": [2, 2, 3],
                              "data": [1, 2, 3, 4, 5, 7, 0, 0, 1, 2, 2, 9]}})
    nested = post_ok(daemon, "/v1/norm/instance",
                     {"input": {"shape": [2, 2, 3],
                                "data": [[[1, 2, 3], [4, 5, 7]],
                                         [[0, 0, 1], [2, 2, 9]]]}})
    assert flat.body == nested.body


# data nested otherwise than the shape: refused on both decode paths (the
# fast scanner's, and jansson's, here reached by spelling NaN with an escape,
# which the scanner leaves to jansson)
@pytest.mark.parametrize("shape,data,nested_as", [
    ([2, 2], "[[1,2,3,4]]", "[1,4]"),
    ([2, 2], '[[1,2,3,"\\u004eaN"]]', "[1,4]"),
    ([4], "[[1,2],[3,4]]", "[2,2]"),
    ([4], '[[1,2],[3,"\\u004eaN"]]', "[2,2]"),
    ([2, 2], "[[[1,2],[3,4]]]", "[1,2,2]"),
    ([1, 2, 2], "[[1,2],[3,4]]", "[2,2]"),
])
def test_object_data_nested_otherwise_than_shape_is_422(daemon, shape, data,
                                                          nested_as):
    body = '{"input": {"shape": %s, "data": %s}}' % (json.dumps(shape), data)
    r = daemon.post_json("/v1/norm/layer", body.encode())
    assert r.status == 422, r
    doc = r.json()
    assert doc["code"] == "data_length" and doc["field"] == "input", doc
    assert ("data is nested as %s but shape is %s"
            % (nested_as, json.dumps(shape).replace(" ", ""))) in doc["detail"], doc


def test_object_data_ragged_is_422(daemon):
    r = daemon.post_json("/v1/norm/layer",
                         {"input": {"shape": [2, 2], "data": [[1, 2], [3]]}})
    assert r.status == 422 and r.json()["code"] == "ragged_tensor", r
    r = daemon.post_json("/v1/norm/layer",
                         {"input": {"shape": [2], "data": [1, [2]]}})
    assert r.status == 422 and r.json()["code"] == "ragged_tensor", r


def test_dtype_defaults_to_float32_in_object_form(daemon):
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": {"shape": [3], "data": [1, 2, 3]}}).json()
    assert doc["output"]["dtype"] == "float32"


# ---- dtypes ---------------------------------------------------------------------

def test_float64_in_and_out(daemon):
    x = [1.0 + 1e-12, 2.0, 3.0, 4.0 + 1e-9]  # not representable in float32
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": {"shape": [4], "dtype": "float64", "data": x}}).json()
    out, mean, var, rstd = ref_layer(x, [4])
    assert doc["output"]["dtype"] == "float64"
    assert_close(doc["output"]["data"], out, 1e-13)
    # float64 statistics are written as doubles
    assert_close(doc["stats"]["mean"], mean, 1e-15)
    assert_close(doc["stats"]["rstd"], rstd, 1e-13)


@pytest.mark.parametrize("dtype,rnd", [("float16", f16), ("bfloat16", bf16)])
def test_half_dtypes_in_and_out(daemon, dtype, rnd):
    x = [rnd(v) for v in (1.0, 2.5, -3.25, 0.125, 7.0, 6.5)]
    r = post_ok(daemon, "/v1/norm/layer",
                {"input": {"shape": [2, 3], "dtype": dtype, "data": x}})
    doc = r.json()
    assert doc["output"]["dtype"] == dtype
    out, mean, _, _ = ref_layer(x, [2, 3])
    got = doc["output"]["data"]
    # computed in double, rounded once to the half format: the text must
    # read back (rounded to the format) to exactly that value
    assert [rnd(float(g)) for g in got] == [rnd(w) for w in out]
    assert_close(doc["stats"]["mean"], mean, REL32)


@pytest.mark.parametrize("out_dtype", ["float64", "float16", "bfloat16",
                                       "float32"])
def test_output_dtype(daemon, out_dtype):
    x = [f32(v) for v in (0.1, 0.7, 2.3, -1.9, 5.5)]
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": x, "output_dtype": out_dtype}).json()
    assert doc["output"]["dtype"] == out_dtype
    out, _, _, rstd = ref_layer(x, [5])
    got = doc["output"]["data"]
    if out_dtype == "float64":
        assert_close(got, out, 1e-13)
    elif out_dtype == "float32":
        assert_close(got, out, REL32)
    else:
        rnd = f16 if out_dtype == "float16" else bf16
        assert [rnd(float(g)) for g in got] == [rnd(w) for w in out]
    # statistics follow the input dtype (float32 here), not output_dtype
    assert_close(doc["stats"]["rstd"], rstd, REL32)


def test_float64_input_float32_output(daemon):
    x = [1.0, 2.0, 3.0, 5.0]
    r = post_ok(daemon, "/v1/norm/layer", {
        "input": {"shape": [4], "dtype": "float64", "data": x},
        "output_dtype": "float32"})
    doc = r.json()
    out, mean, var, _ = ref_layer(x, [4])
    assert doc["output"]["dtype"] == "float32"
    assert_close(doc["output"]["data"], out, REL32)
    assert doc["stats"]["var"] == var  # 2.1875 exactly, as a double


# ---- non-finite values -------------------------------------------------------------

def test_nonfinite_strings_in_and_out(daemon):
    r = post_ok(daemon, "/v1/norm/layer", {"input": {
        "shape": [3, 3], "dtype": "float32",
        "data": [1, "NaN", 3, "Infinity", 1, 2, 1, 2, 3]}})
    doc = r.json()
    data = doc["output"]["data"]
    assert data[:6] == ["NaN"] * 6  # rows holding NaN / Infinity
    assert_close(floats(data[6:]), ref_layer([1.0, 2.0, 3.0], [3])[0], REL32)
    assert doc["stats"]["mean"][:2] == ["NaN", "NaN"]
    assert doc["stats"]["mean"][2] == 2
    # never the non-JSON tokens NaN / Infinity outside strings
    assert re.search(rb'[^"](NaN|-?Infinity)', r.body) is None


def test_infinity_written_as_strings(daemon):
    r = post_ok(daemon, "/v1/norm/layer", {
        "input": [1, 2, 3],
        "weight": ["Infinity", "-Infinity", "-Infinity"]})
    # (x - mean) * rstd = [-1.22, 0, 1.22]; times +-inf; 0 * inf = NaN
    assert r.json()["output"]["data"] == ["-Infinity", "NaN", "-Infinity"]


def test_overflow_to_infinity_in_float16_output(daemon):
    r = post_ok(daemon, "/v1/norm/layer", {
        "input": [1, 2, 3, 4], "weight": [1e5, 1e5, 1e5, 1e5],
        "output_dtype": "float16"})
    data = r.json()["output"]["data"]
    assert data[0] == "-Infinity" and data[3] == "Infinity"
    want = ref_layer([1.0, 2.0, 3.0, 4.0], [4], weight=[1e5] * 4)[0]
    assert [f16(v) for v in data[1:3]] == [f16(w) for w in want[1:3]]
    assert abs(want[0]) > 65504  # the float16 maximum


def test_constant_row_normalizes_to_zero(daemon):
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": [[5, 5, 5, 5], [1e6, 1e6, 1e6, 1e6]]}).json()
    assert doc["output"]["data"] == [0] * 8
    assert doc["stats"]["var"] == [0, 0]


def test_constant_row_with_zero_eps(daemon):
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": [5, 5, 5], "eps": 0}).json()
    assert doc["output"]["data"] == [0, 0, 0]
    assert doc["stats"]["rstd"] == ["Infinity"]


# ---- exact, shortest float32 text ----------------------------------------------

NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def significant_digits(tok):
    mant = re.split(r"[eE]", tok)[0].lstrip("-").replace(".", "")
    mant = mant.lstrip("0")
    return len(mant.rstrip("0")) or 1


def shortest_f32_digits(v):
    for p in range(1, 10):
        if f32(float("%.*g" % (p, v))) == v:
            return p
    raise AssertionError(v)


def output_tokens(body):
    """The raw number texts of output.data in a response body."""
    m = re.search(rb'"output":\{"shape":\[[\d,]*\],"dtype":"float32","data":\[([^\]]*)\]',
                  body)
    assert m, body[:200]
    return [t.decode() for t in m.group(1).split(b",")]


def test_layer_norm_1_to_5_exact_text(daemon):
    r = post_ok(daemon, "/v1/norm/layer", {"input": [1, 2, 3, 4, 5]})
    assert output_tokens(r.body) == ["-1.4142101", "-0.70710504", "0",
                                     "0.70710504", "1.4142101"]
    assert b'"stats":{"shape":[],"mean":[3],"var":[2],"rstd":[0.70710504]}' in r.body


def test_float32_output_is_shortest_round_trip(daemon):
    x = [f32(math.sin(i * 0.7) * 10 ** (i % 7 - 3)) for i in range(200)]
    r = post_ok(daemon, "/v1/norm/layer", {
        "input": {"shape": [8, 25], "data": x},
        "weight": [f32(1.0 + 0.37 * i) for i in range(25)]})
    toks = output_tokens(r.body)
    assert len(toks) == 200
    for tok in toks:
        assert NUMBER.fullmatch(tok.encode()), tok
        v = float(tok)
        v32 = struct.unpack("<f", struct.pack("<f", v))[0]
        digits = significant_digits(tok)
        assert digits <= 9, tok
        # no shorter text reads back to the same float32 ...
        assert digits == shortest_f32_digits(v32), tok
        # ... and the text is that float32 correctly rounded to its digits
        assert float("%.*g" % (digits, v32)) == v, tok
    # and the values are right
    want = ref_layer(x, [8, 25], weight=[f32(1.0 + 0.37 * i) for i in range(25)])[0]
    assert_close([float(t) for t in toks], want, REL32)


# ---- "return" subsets --------------------------------------------------------------

@pytest.mark.parametrize("ret,keys", [
    ("output", {"output"}),
    ("stats", {"stats"}),
    (["output", "stats"], {"output", "stats"}),
    ("output_stats", {"output_stats"}),
    (["stats", "output_stats"], {"stats", "output_stats"}),
    (["output", "stats", "output_stats"], {"output", "stats", "output_stats"}),
])
def test_return_subsets(daemon, ret, keys):
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": [[1, 2, 3, 4], [9, 7, 5, 2]], "return": ret}).json()
    assert set(doc) == keys


@pytest.mark.parametrize("path,extra,groups", [
    ("/v1/norm/layer", {}, 12),
    ("/v1/norm/rms", {}, 12),
    ("/v1/norm/batch", {}, 4),
    ("/v1/norm/group", {"num_groups": 2}, 6),
    ("/v1/norm/instance", {}, 12),
])
def test_output_stats_mean_zero_var_one(daemon, path, extra, groups):
    x = [f32(math.cos(i * 1.3) * 3 + i * 0.01) for i in range(3 * 4 * 5)]
    body = {"input": {"shape": [3, 4, 5], "data": x},
            "return": ["output_stats"], "eps": 0}
    body.update(extra)
    doc = post_ok(daemon, path, body).json()
    st = doc["output_stats"]
    if path.endswith("rms"):
        # rms does not center: what it brings to 1 is sqrt(mean(y^2))
        assert set(st) == {"shape", "mean", "var", "rms"}
        assert len(st["mean"]) == len(st["var"]) == len(st["rms"]) == groups
        for m, v, r in zip(st["mean"], st["var"], st["rms"]):
            assert abs(r - 1.0) < 1e-6
            assert abs(r * r - (v + m * m)) < 1e-6
        return
    assert set(st) == {"shape", "mean", "var"}
    assert len(st["mean"]) == len(st["var"]) == groups
    for m, v in zip(st["mean"], st["var"]):
        assert abs(m) < 1e-6
        assert abs(v - 1.0) < 1e-5


def test_rms_output_stats_rms_is_slightly_below_one(daemon):
    # y = x / sqrt(ms + eps), so sqrt(mean(y^2)) = sqrt(ms / (ms + eps))
    x = [[1, 2, 3, 4, 5], [0.5, -0.5, 0.25, 0, 1]]
    doc = post_ok(daemon, "/v1/norm/rms",
                  {"input": x, "eps": 0.01, "return": "output_stats"}).json()
    st = doc["output_stats"]
    assert st["shape"] == [2]
    for row, m, r in zip(x, st["mean"], st["rms"]):
        ms = sum(v * v for v in row) / len(row)
        assert abs(r - math.sqrt(ms / (ms + 0.01))) < 1e-6
        assert abs(m - sum(row) / len(row) / math.sqrt(ms + 0.01)) < 1e-6
        assert r < 1.0


def test_output_stats_with_eps_is_slightly_below_one(daemon):
    doc = post_ok(daemon, "/v1/norm/layer",
                  {"input": [1, 2, 3, 4, 5], "return": "output_stats"}).json()
    st = doc["output_stats"]
    assert st["shape"] == []
    assert abs(st["mean"][0]) < 1e-7
    assert abs(st["var"][0] - 2.0 / (2.0 + 1e-5)) < 1e-6
    assert st["var"][0] < 1.0


# ---- batch norm running statistics ------------------------------------------------

X_BATCH = [[1, 2], [3, 5], [4, 4]]  # N=3, C=2


def test_batch_train_momentum(daemon):
    rm, rv = [f32(0.5), f32(-1.0)], [f32(2.0), f32(0.5)]
    doc = post_ok(daemon, "/v1/norm/batch", {
        "input": X_BATCH, "running_mean": rm, "running_var": rv,
        "momentum": 0.25, "num_batches_tracked": 7}).json()
    x = [float(v) for row in X_BATCH for v in row]
    out, mean, var, rstd, unbiased = ref_batch(x, [3, 2])
    assert_close(floats(doc["output"]["data"]), out, REL32)
    assert_close(doc["stats"]["var"], var, REL32)  # biased in the stats
    want_rm = [0.75 * rm[c] + 0.25 * mean[c] for c in range(2)]
    want_rv = [0.75 * rv[c] + 0.25 * unbiased[c] for c in range(2)]
    assert doc["running_mean"]["shape"] == [2]
    assert doc["running_mean"]["dtype"] == "float32"
    assert_close(doc["running_mean"]["data"], want_rm, REL32)
    assert_close(doc["running_var"]["data"], want_rv, REL32)
    assert doc["num_batches_tracked"] == 8  # incremented, as torch's buffer


def test_batch_train_default_momentum(daemon):
    doc = post_ok(daemon, "/v1/norm/batch", {
        "input": X_BATCH, "running_mean": [0, 0], "running_var": [1, 1]}).json()
    # momentum 0.1: 0.1 * mean, 0.9 + 0.1 * unbiased var (7/3 for both)
    assert_close(doc["running_mean"]["data"], [0.1 * 8 / 3, 0.1 * 11 / 3], REL32)
    assert_close(doc["running_var"]["data"], [0.9 + 0.1 * 7 / 3] * 2, REL32)
    assert doc["num_batches_tracked"] == 1


@pytest.mark.parametrize("before", [0, 3])
def test_batch_train_momentum_null_is_cumulative(daemon, before):
    rm, rv = [f32(0.5), f32(-1.0)], [f32(2.0), f32(0.5)]
    doc = post_ok(daemon, "/v1/norm/batch", {
        "input": X_BATCH, "running_mean": rm, "running_var": rv,
        "momentum": None, "num_batches_tracked": before}).json()
    f = 1.0 / (before + 1)  # the cumulative average's factor, after counting
    mean = [8 / 3, 11 / 3]
    unbiased = [7 / 3, 7 / 3]
    assert_close(doc["running_mean"]["data"],
                 [(1 - f) * rm[c] + f * mean[c] for c in range(2)], REL32)
    assert_close(doc["running_var"]["data"],
                 [(1 - f) * rv[c] + f * unbiased[c] for c in range(2)], REL32)
    assert doc["num_batches_tracked"] == before + 1


def test_batch_running_stats_only(daemon):
    doc = post_ok(daemon, "/v1/norm/batch", {
        "input": X_BATCH, "running_mean": [0, 0], "running_var": [1, 1],
        "return": "running_stats"}).json()
    assert set(doc) == {"running_mean", "running_var", "num_batches_tracked"}


def test_batch_eval_uses_running_stats(daemon):
    rm, rv = [f32(1.5), f32(-2.0)], [f32(4.0), f32(0.25)]
    w, b = [f32(2.0), f32(0.5)], [f32(0.1), f32(-0.1)]
    doc = post_ok(daemon, "/v1/norm/batch", {
        "input": X_BATCH, "mode": "eval", "running_mean": rm,
        "running_var": rv, "weight": w, "bias": b, "eps": 1e-3}).json()
    want = []
    for row in X_BATCH:
        for c, v in enumerate(row):
            want.append((v - rm[c]) / math.sqrt(rv[c] + 1e-3) * w[c] + b[c])
    assert_close(floats(doc["output"]["data"]), want, REL32)
    assert doc["stats"]["mean"] == [1.5, -2]
    assert doc["stats"]["var"] == [4, 0.25]
    # eval does not update (or return) running statistics
    assert "running_mean" not in doc and "num_batches_tracked" not in doc


def test_batch_eval_one_value_per_channel_is_fine(daemon):
    doc = post_ok(daemon, "/v1/norm/batch", {
        "input": [[1, 2, 3]], "mode": "eval", "running_mean": [0, 0, 0],
        "running_var": [1, 1, 1], "eps": 0}).json()
    assert doc["output"]["data"] == [1, 2, 3]


def test_response_is_strict_json(daemon):
    r = post_ok(daemon, "/v1/norm/group", {
        "input": [[1, "NaN", 3, 4], [3, 5, 1, 1]], "num_groups": 2})

    def reject(name):
        raise ValueError("non-standard JSON constant " + name)

    json.loads(r.body, parse_constant=reject)
