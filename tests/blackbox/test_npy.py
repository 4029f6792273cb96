""".npy request and response bodies against the real daemon: files written
by numpy itself (every supported descr, format versions 1.0/2.0/3.0, C and
Fortran order), parameters in the query string, the .npy that comes back
read by numpy and compared with a float64 reference, the other answers
(JSON, binary framing) to a .npy request, and the files that must be
refused."""
import urllib.parse

import numpy as np
import pytest

from normd_helpers import assert_problem
from numpy_refs import (Framed, assert_close, npy_bytes, npy_load, ref_batch,
                        ref_group, ref_instance, ref_layer, ref_rms)

NPY = "application/x-npy"
# descr -> (the little-endian descr the answer has, /v1 dtype name)
DESCRS = {"<f4": ("<f4", "float32"), ">f4": ("<f4", "float32"),
          "<f8": ("<f8", "float64"), ">f8": ("<f8", "float64"),
          "<f2": ("<f2", "float16"), ">f2": ("<f2", "float16")}


def post_npy(daemon, path, body, query=None, accept=None, headers=None):
    url = path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    h = {"Content-Type": NPY}
    if accept:
        h["Accept"] = accept
    h.update(headers or {})
    return daemon.request("POST", url, body=body, headers=h)


def npy_ok(resp, descr, shape):
    """The .npy of a 200 answer, read by numpy."""
    assert resp.status == 200, resp
    assert resp.content_type == NPY, resp
    # what numpy writes: version 1.0, data 64-byte aligned
    assert resp.body[:8] == b"\x93NUMPY\x01\x00", resp.body[:16]
    header_len = int.from_bytes(resp.body[8:10], "little")
    assert (10 + header_len) % 64 == 0
    a = npy_load(resp.body)
    assert a.dtype.str == descr, a.dtype
    assert a.shape == tuple(shape)
    assert a.flags.c_contiguous
    assert not np.isfortran(a) or a.ndim < 2
    return a


def sample(shape, seed, scale=2.0, offset=0.5):
    rng = np.random.default_rng(seed)
    return offset + scale * rng.standard_normal(shape)


# ---- every descr, version and order ---------------------------------------------

@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("descr", sorted(DESCRS))
def test_descr_version_order(daemon, descr, version, order):
    out_descr, name = DESCRS[descr]
    x = sample((3, 4, 5), seed=len(descr) + version[0])
    a = np.array(x, dtype=np.dtype(descr), order=order)
    assert a.dtype.str == descr
    body = npy_bytes(a, version=version)
    assert body[6] == version[0]
    assert (b"'fortran_order': True" in body) == (order == "F")
    resp = post_npy(daemon, "/v1/norm/layer", body,
                    query={"normalized_shape": "4,5"})
    y = npy_ok(resp, out_descr, (3, 4, 5))
    ref = ref_layer(a.astype(np.float64), ndim=2)
    assert_close(y, ref["output"], name, what="%s v%d %s" % (descr, version[0], order))


def test_big_endian_and_fortran_agree_with_plain(daemon):
    """Byte order and memory order change nothing in the answer."""
    x = sample((4, 3, 6), seed=7).astype("<f4")
    plain = post_npy(daemon, "/v1/norm/instance", npy_bytes(x)).body
    for variant in (x.astype(">f4"), np.asfortranarray(x),
                    np.asfortranarray(x.astype(">f4"))):
        resp = post_npy(daemon, "/v1/norm/instance", npy_bytes(variant))
        assert resp.status == 200, resp
        assert resp.body == plain


def test_fortran_rank2_transposes(daemon):
    """A transposed view saved by numpy is written in Fortran order; the
    server sees the logical array, not the memory."""
    base = sample((6, 4), seed=8).astype("<f4")
    t = base.T  # (4, 6), Fortran-contiguous
    assert np.isfortran(t)
    body = npy_bytes(t)
    assert b"'fortran_order': True" in body
    y = npy_ok(post_npy(daemon, "/v1/norm/layer", body), "<f4", (4, 6))
    assert_close(y, ref_layer(t.astype(np.float64))["output"])


def test_float16_in_and_out(daemon):
    x = sample((8, 16), seed=9).astype("<f2")
    y = npy_ok(post_npy(daemon, "/v1/norm/rms", npy_bytes(x)), "<f2", (8, 16))
    ref = ref_rms(x.astype(np.float64))["output"]
    # computed wide, rounded once to float16: within one float16 ulp
    want = ref.astype(np.float16)
    ulps = np.abs(y.view(np.int16).astype(np.int32) - want.view(np.int16).astype(np.int32))
    assert ulps.max() <= 1, (y, want)


# ---- every norm, parameters in the query ----------------------------------------

def test_every_norm_with_query_parameters(daemon):
    x = sample((4, 6, 5), seed=10).astype("<f4")
    x64 = x.astype(np.float64)
    body = npy_bytes(x)
    cases = [
        ("layer", {"normalized_shape": "6,5", "eps": "0.01"},
         ref_layer(x64, ndim=2, eps=0.01)),
        ("layer", {"normalized_shape": "[6,5]"}, ref_layer(x64, ndim=2)),
        ("layer", {"axis": "-1", "eps": "1e-3"}, ref_layer(x64, eps=1e-3)),
        ("rms", {"eps": "1e-4"}, ref_rms(x64, eps=1e-4)),
        ("rms", {"normalized_shape": "6,5"}, ref_rms(x64, ndim=2)),
        ("batch", {"momentum": "0.3"}, ref_batch(x64)),
        ("batch", {"mode": "train", "eps": "0.5"}, ref_batch(x64, eps=0.5)),
        ("group", {"num_groups": "3"}, ref_group(x64, 3)),
        ("group", {"num_groups": "2", "eps": "1e-2"}, ref_group(x64, 2, eps=1e-2)),
        ("instance", {}, ref_instance(x64)),
    ]
    for op, query, ref in cases:
        resp = post_npy(daemon, "/v1/norm/" + op, body, query=query)
        y = npy_ok(resp, "<f4", x.shape)
        assert_close(y, ref["output"], what="%s %s" % (op, query))


def test_accept_json_answers_the_usual_document(daemon):
    x = sample((3, 8), seed=11).astype("<f8")
    resp = post_npy(daemon, "/v1/norm/layer", npy_bytes(x), accept="application/json")
    assert resp.status == 200, resp
    assert resp.content_type == "application/json"
    doc = resp.json()
    ref = ref_layer(x)
    assert doc["output"]["shape"] == [3, 8]
    assert doc["output"]["dtype"] == "float64"
    assert_close(np.array(doc["output"]["data"]), ref["output"].ravel(), "float64")
    assert doc["stats"]["shape"] == [3]
    assert_close(doc["stats"]["mean"], ref["mean"], "float64", what="mean")
    assert_close(doc["stats"]["var"], ref["var"], "float64", what="var")
    assert_close(doc["stats"]["rstd"], ref["rstd"], "float64", what="rstd")


def test_return_stats_with_json(daemon):
    x = sample((2, 5, 4), seed=12).astype("<f4")
    resp = post_npy(daemon, "/v1/norm/group", npy_bytes(x),
                    query={"num_groups": "5", "return": "stats"},
                    accept="application/json")
    assert resp.status == 200, resp
    doc = resp.json()
    assert "output" not in doc
    ref = ref_group(x.astype(np.float64), 5)
    assert doc["stats"]["shape"] == [2, 5]
    assert_close(doc["stats"]["mean"], ref["mean"].ravel(), what="mean")
    assert_close(doc["stats"]["rstd"], ref["rstd"].ravel(), what="rstd")


def test_accept_octet_stream_answers_framed(daemon):
    x = sample((2, 6), seed=13).astype("<f2")
    resp = post_npy(daemon, "/v1/norm/layer", npy_bytes(x),
                    accept="application/octet-stream")
    f = Framed(resp)
    out = f.header["output"]
    assert out["dtype"] == "float16"
    y = f.take(out, "float16")
    f.done()
    assert_close(y, ref_layer(x.astype(np.float64))["output"], "float16")
    assert f.header["stats"]["shape"] == [2]


@pytest.mark.parametrize("dtype,descr", [("float64", "<f8"), ("float16", "<f2"),
                                         ("float32", "<f4")])
def test_output_dtype(daemon, dtype, descr):
    x = sample((3, 7), seed=14).astype("<f4")
    resp = post_npy(daemon, "/v1/norm/layer", npy_bytes(x),
                    query={"output_dtype": dtype})
    y = npy_ok(resp, descr, (3, 7))
    assert_close(y, ref_layer(x.astype(np.float64))["output"], dtype)


def test_bfloat16_output_as_npy_is_406(daemon):
    x = sample((3, 7), seed=15).astype("<f4")
    resp = post_npy(daemon, "/v1/norm/layer", npy_bytes(x),
                    query={"output_dtype": "bfloat16"}, accept=NPY)
    assert_problem(resp, 406, "not_acceptable")
    # the same request answered as JSON works
    resp = post_npy(daemon, "/v1/norm/layer", npy_bytes(x),
                    query={"output_dtype": "bfloat16"}, accept="application/json")
    assert resp.status == 200, resp
    assert resp.json()["output"]["dtype"] == "bfloat16"


def test_json_request_answered_as_npy(daemon):
    resp = daemon.post_json("/v1/norm/layer", {"input": [[1, 2, 3], [4, 5, 7]]},
                            headers={"Accept": NPY})
    y = npy_ok(resp, "<f4", (2, 3))
    assert_close(y, ref_layer(np.array([[1, 2, 3], [4, 5, 7]], float))["output"])


def test_large_file_round_trip(daemon):
    """A 512 x 2048 float32 file, as in the bench."""
    x = sample((512, 2048), seed=16).astype("<f4")
    y = npy_ok(post_npy(daemon, "/v1/norm/layer", npy_bytes(x)), "<f4", x.shape)
    assert_close(y, ref_layer(x.astype(np.float64))["output"])


def test_chunked_upload(daemon):
    x = sample((64, 33), seed=17).astype(">f8")
    body = npy_bytes(x)
    conn = daemon.connect()
    try:
        conn.request("POST", "/v1/norm/layer", body=iter([body[:7], body[7:100], body[100:]]),
                     headers={"Content-Type": NPY}, encode_chunked=True)
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, data
    finally:
        conn.close()
    y = npy_load(data)
    assert y.dtype.str == "<f8"
    assert_close(y, ref_layer(x.astype(np.float64))["output"], "float64")


# ---- refused files and parameters --------------------------------------------------

@pytest.mark.parametrize("dtype", ["<i4", "|u1", "|i1", "<i8", "<c8", "<c16", "|b1",
                                   "<U3", "|S4", "<M8[s]", "<m8[ns]", "<u2"])
def test_unsupported_dtypes_are_415(daemon, dtype):
    a = np.zeros((2, 3), dtype=np.dtype(dtype))
    body = npy_bytes(a)
    assert ("'descr': '%s'" % dtype).encode() in body
    assert_problem(post_npy(daemon, "/v1/norm/layer", body), 415,
                   "npy_unsupported_dtype", field="input")


def test_long_double_is_415(daemon):
    a = np.zeros((2, 3), dtype=np.longdouble)
    if a.dtype.itemsize == 8:  # pragma: no cover (no long double here)
        a = np.zeros((2, 3), dtype="<c8")
    assert_problem(post_npy(daemon, "/v1/norm/layer", npy_bytes(a)), 415,
                   "npy_unsupported_dtype")


def test_object_and_structured_arrays_are_refused(daemon):
    obj = np.array([[1.0, None]], dtype=object)
    assert_problem(post_npy(daemon, "/v1/norm/layer", npy_bytes(obj)), 415,
                   "npy_unsupported_dtype")
    rec = np.zeros(3, dtype=[("a", "<f4"), ("b", "<f4")])
    resp = post_npy(daemon, "/v1/norm/layer", npy_bytes(rec))
    assert resp.status in (400, 415), resp
    assert resp.json()["code"] in ("npy_bad_header", "npy_unsupported_dtype")


def test_scalar_and_empty_arrays_are_422(daemon):
    assert_problem(post_npy(daemon, "/v1/norm/layer", npy_bytes(np.array(3.0, dtype="<f4"))),
                   422, "bad_rank", field="input")
    assert_problem(post_npy(daemon, "/v1/norm/layer",
                            npy_bytes(np.zeros((0, 3), "<f4"))),
                   422, "empty_tensor", field="input")


def test_bad_magic_version_and_lengths(daemon):
    good = npy_bytes(sample((2, 3), seed=18).astype("<f4"))
    cases = [
        (b"\x93NUMPZ" + good[6:], 400, "npy_bad_magic"),
        (b'{"input": [1, 2, 3]}', 400, "npy_bad_magic"),
        (b"", 400, "npy_bad_magic"),
        (good[:9], 400, "npy_bad_magic"),
        (good[:6] + b"\x04\x00" + good[8:], 400, "npy_bad_version"),
        (good[:6] + b"\x00\x00" + good[8:], 400, "npy_bad_version"),
        (good[:8] + b"\xff\xff" + good[10:], 400, "npy_truncated"),
        (good[:40], 400, "npy_truncated"),
        (good[:-1], 400, "npy_size_mismatch"),
        (good[:-24], 400, "npy_size_mismatch"),
        (good + b"\x00" * 4, 400, "npy_size_mismatch"),
    ]
    for body, status, code in cases:
        assert_problem(post_npy(daemon, "/v1/norm/layer", body), status, code)
    v2 = npy_bytes(sample((2, 3), seed=18).astype("<f4"), version=(2, 0))
    assert_problem(post_npy(daemon, "/v1/norm/layer",
                            v2[:8] + b"\xff\xff\xff\xff" + v2[12:]),
                   400, "npy_truncated")


def _with_header(text, data=b"\x00" * 24):
    h = text.encode()
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + data


@pytest.mark.parametrize("header,status,code", [
    ("{'descr': '<f4', 'fortran_order': False}\n", 400, "npy_bad_header"),
    ("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n",
     400, "npy_bad_header"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}\n",
     400, "npy_bad_header"),
    ("{descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", 400, "npy_bad_header"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}\n", 400, "npy_bad_header"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} junk\n", 400,
     "npy_bad_header"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}\n", 422, "negative_dim"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d)}\n" % (2**62, 2**62),
     422, "size_overflow"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,)}\n" % 2**64, 422,
     "size_overflow"),
])
def test_bad_headers(daemon, header, status, code):
    assert_problem(post_npy(daemon, "/v1/norm/layer", _with_header(header)),
                   status, code)


def test_query_cannot_carry_the_input_or_other_tensors(daemon):
    body = npy_bytes(sample((2, 3), seed=19).astype("<f4"))
    assert_problem(post_npy(daemon, "/v1/norm/layer", body, query={"input": "1,2,3"}),
                   422, "conflicting_fields", field="input")
    for op, key, value in [("layer", "weight", "1,2,3"), ("layer", "bias", "[0,0,1]"),
                           ("batch", "running_mean", "0,0,0"),
                           ("batch", "running_var", "1,1,1")]:
        assert_problem(post_npy(daemon, "/v1/norm/" + op, body, query={key: value}),
                       422, "bad_field", field=key)
    # eval needs running statistics, which only JSON or the framing carry
    assert_problem(post_npy(daemon, "/v1/norm/batch", body, query={"mode": "eval"}),
                   422, "running_stats_shape")


def test_query_errors(daemon):
    body = npy_bytes(sample((2, 3), seed=20).astype("<f4"))
    assert_problem(post_npy(daemon, "/v1/norm/layer?eps=1e-5&eps=1e-3", body),
                   400, "duplicate_key", field="eps")
    assert_problem(post_npy(daemon, "/v1/norm/layer", body, query={"epsilon": "1"}),
                   422, "unknown_field", field="epsilon")
    assert_problem(post_npy(daemon, "/v1/norm/layer", body, query={"eps": "tiny"}),
                   422, "bad_field", field="eps")
    assert_problem(post_npy(daemon, "/v1/norm/layer", body,
                            query={"normalized_shape": "4"}),
                   422, "shape_mismatch", field="normalized_shape")
    assert_problem(post_npy(daemon, "/v1/norm/group", body), 422, "missing_field",
                   field="num_groups")
    assert_problem(post_npy(daemon, "/v1/norm/layer", body,
                            query={"output_dtype": "int8"}),
                   422, "unknown_dtype", field="output_dtype")


def test_daemon_survives_garbage_files(daemon):
    rng = np.random.default_rng(21)
    good = bytearray(npy_bytes(sample((4, 6), seed=21).astype(">f8"), version=(3, 0)))
    for i in range(200):
        b = bytearray(good)
        for _ in range(1 + i % 4):
            b[int(rng.integers(0, 90))] = int(rng.integers(0, 256))
        if i % 5 == 0:
            b = b[:int(rng.integers(0, len(b)))]
        resp = post_npy(daemon, "/v1/norm/layer", bytes(b))
        assert resp.status in (200, 400, 413, 415, 422), resp
    assert daemon.alive()
    npy_ok(post_npy(daemon, "/v1/norm/layer", bytes(good)), "<f8", (4, 6))


# ---- routes without an input tensor, and the JSON-only answers -----------------

@pytest.mark.parametrize("path", ["/v1/moments/merge", "/v1/residual/simulate"])
@pytest.mark.parametrize("accept", [None, "application/json", NPY])
def test_npy_body_without_an_input_is_415(daemon, path, accept):
    """A .npy body is an input tensor: the routes that take none refuse it
    (before decoding or running anything), whatever Accept says."""
    body = npy_bytes(sample((2, 4), seed=30).astype("<f4"))
    doc = assert_problem(post_npy(daemon, path, body, accept=accept),
                         415, "unsupported_media_type")
    assert path in doc["detail"] and NPY in doc["detail"], doc


def test_moments_answer_json_to_a_npy_request(daemon):
    """Moments have no .npy form: a .npy request is answered in JSON unless
    Accept allows nothing else, and the 406 names the route."""
    x = sample((3, 2), seed=31).astype("<f4")
    for accept in (None, "*/*", "application/json",
                   NPY + ", application/json"):
        resp = post_npy(daemon, "/v1/moments", npy_bytes(x), accept=accept,
                        query={"layout": "channels"})
        assert resp.status == 200 and resp.content_type == "application/json", \
            (accept, resp)
        assert_close(resp.json()["mean"], x.astype(np.float64).mean(axis=0),
                     "float64")
    doc = assert_problem(post_npy(daemon, "/v1/moments", npy_bytes(x),
                                  accept=NPY), 406, "not_acceptable")
    assert "/v1/moments answers application/json only" in doc["detail"], doc
    doc = assert_problem(daemon.post_json("/v1/residual/simulate",
                                          {"tokens": 2, "d": 4, "layers": 1},
                                          headers={"Accept": NPY}),
                         406, "not_acceptable")
    assert "/v1/residual/simulate" in doc["detail"], doc
