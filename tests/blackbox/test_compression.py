"""Compression against the real daemon, with Python's zlib and gzip as the
reference: request bodies in gzip and deflate (zlib and raw) on JSON, .npy,
framed /v1 and /v2 bodies answer exactly as uncompressed ones; answers are
compressed when Accept-Encoding asks (q-values, identity;q=0) and inflate to
the uncompressed answer's bytes; small answers and a daemon started with
--compression false are not compressed; a bomb gets 413 with the daemon's
memory bounded; corrupt, truncated and unknown or stacked codings are
refused."""
import gzip
import json
import socket
import zlib

import numpy as np
import pytest

from normd_helpers import (JSON, Daemon, assert_problem, raw_exchange,
                           status_of)
from numpy_refs import binary_tensor, framed_body, npy_bytes

OCTET = "application/octet-stream"
NPY = "application/x-npy"
LAYER = "/v1/norm/layer"
V2_LAYER = "/v2/models/layer_norm/infer"


def deflate_zlib(data):
    return zlib.compress(data, 6)


def deflate_raw(data):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def gzip_bytes(data):
    return gzip.compress(data, 6)


# (Content-Encoding value, compressor): raw deflate is sent as "deflate" by
# some clients, and names are case-insensitive
CODINGS = [("gzip", gzip_bytes), ("x-gzip", gzip_bytes), ("GZip", gzip_bytes),
           ("deflate", deflate_zlib), ("deflate", deflate_raw),
           ("Deflate, identity", deflate_zlib)]
CODING_IDS = ["gzip", "x-gzip", "GZip", "deflate-zlib", "deflate-raw",
              "deflate-identity"]


def sample(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype("<f4")


def json_case():
    x = sample((16, 64), 1)
    body = json.dumps({"input": {"shape": list(x.shape),
                                 "data": x.ravel().tolist()},
                       "weight": sample(64, 2).tolist()}).encode()
    return LAYER, {"Content-Type": JSON}, body


def npy_case():
    x = sample((8, 32), 3)
    return LAYER + "?eps=0.001", {"Content-Type": NPY}, npy_bytes(x)


def framed_v1_case():
    x = sample((4, 100), 4)
    body, hl = framed_body({"input": binary_tensor(x.shape, "float32", x)},
                           [x])
    return LAYER, {"Content-Type": OCTET, "Accept": OCTET,
                   "Inference-Header-Content-Length": str(hl)}, body


def framed_v2_case():
    x = sample((4, 100), 5)
    header = {"inputs": [{"name": "input", "shape": list(x.shape),
                          "datatype": "FP32",
                          "parameters": {"binary_data_size": x.nbytes}}],
              "outputs": [{"name": "output",
                           "parameters": {"binary_data": True}}]}
    body, hl = framed_body(header, [x])
    return V2_LAYER, {"Content-Type": OCTET,
                      "Inference-Header-Content-Length": str(hl)}, body


def v2_json_case():
    x = sample((3, 50), 6)
    body = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape),
                                   "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    return V2_LAYER, {"Content-Type": JSON}, body


CASES = {"json": json_case, "npy": npy_case, "framed_v1": framed_v1_case,
         "framed_v2": framed_v2_case, "v2_json": v2_json_case}


# ---- compressed requests ---------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("coding,compress", CODINGS, ids=CODING_IDS)
def test_compressed_request_answers_as_uncompressed(daemon, case, coding,
                                                    compress):
    """Inference-Header-Content-Length of the framed cases counts the JSON
    header of the decompressed body; Content-Length the compressed bytes."""
    path, headers, body = CASES[case]()
    plain = daemon.request("POST", path, body=body, headers=headers)
    assert plain.status == 200, plain
    packed = compress(body)
    assert packed != body
    r = daemon.request("POST", path, body=packed,
                       headers=dict(headers, **{"Content-Encoding": coding}))
    assert r.status == 200, r
    assert r.body == plain.body
    assert r.header("Content-Type") == plain.header("Content-Type")
    assert (r.header("Inference-Header-Content-Length")
            == plain.header("Inference-Header-Content-Length"))


def test_gzip_members_in_a_row_are_one_body(daemon):
    path, headers, body = json_case()
    half = len(body) // 2
    packed = gzip.compress(body[:half]) + gzip.compress(body[half:])
    plain = daemon.request("POST", path, body=body, headers=headers)
    r = daemon.request("POST", path, body=packed,
                       headers=dict(headers, **{"Content-Encoding": "gzip"}))
    assert r.status == 200, r
    assert r.body == plain.body


def test_chunked_compressed_request(daemon):
    """Transfer-Encoding: chunked, the compressed stream cut in many small
    chunks (inflated as each arrives)."""
    path, headers, body = json_case()
    packed = deflate_raw(body)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(packed[i:i + 7]), packed[i:i + 7])
                      for i in range(0, len(packed), 7))
    head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n" % path).encode()
    raw = raw_exchange(daemon.port, head + chunks + b"0\r\n\r\n")
    assert status_of(raw) == 200, raw[:300]
    plain = daemon.request("POST", path, body=body, headers=headers)
    assert raw.split(b"\r\n\r\n", 1)[1].endswith(plain.body)


# ---- refused request bodies ------------------------------------------------------

def test_corrupt_stream_is_400(daemon):
    path, headers, body = json_case()
    packed = bytearray(gzip_bytes(body))
    for i in range(20, 60):  # inside the deflate data
        packed[i] ^= 0x5a
    r = daemon.request("POST", path, body=bytes(packed),
                       headers=dict(headers, **{"Content-Encoding": "gzip"}))
    doc = assert_problem(r, 400, "bad_content_encoding")
    assert "gzip" in doc["detail"], doc


def test_not_compressed_at_all_is_400(daemon):
    path, headers, body = json_case()
    r = daemon.request("POST", path, body=body,
                       headers=dict(headers, **{"Content-Encoding": "deflate"}))
    assert_problem(r, 400, "bad_content_encoding")


@pytest.mark.parametrize("compress", [gzip_bytes, deflate_zlib, deflate_raw],
                         ids=["gzip", "zlib", "raw"])
def test_truncated_stream_is_400(daemon, compress):
    path, headers, body = json_case()
    packed = compress(body)
    coding = "gzip" if compress is gzip_bytes else "deflate"
    r = daemon.request("POST", path, body=packed[:len(packed) - 9],
                       headers=dict(headers, **{"Content-Encoding": coding}))
    assert_problem(r, 400, "bad_content_encoding")


def test_bytes_after_the_stream_are_400(daemon):
    path, headers, body = json_case()
    r = daemon.request("POST", path, body=deflate_zlib(body) + b"{}",
                       headers=dict(headers, **{"Content-Encoding": "deflate"}))
    assert_problem(r, 400, "bad_content_encoding")


def test_v2_corrupt_stream_is_v2_error(daemon):
    r = daemon.request("POST", V2_LAYER, body=b"not gzip at all",
                       headers={"Content-Type": JSON,
                                "Content-Encoding": "gzip"})
    assert r.status == 400, r
    assert set(r.json()) == {"error"}, r


@pytest.mark.parametrize("coding", ["br", "compress", "zstd"])
def test_unknown_coding_is_415(daemon, coding):
    path, headers, body = json_case()
    r = daemon.request("POST", path, body=body,
                       headers=dict(headers, **{"Content-Encoding": coding}))
    doc = assert_problem(r, 415, "unsupported_media_type")
    assert coding in doc["detail"], doc


def test_stacked_codings_are_refused_with_415(daemon):
    """normd decodes one coding per body: "gzip, gzip" (and two header
    lines) are refused cleanly from the headers, the connection closed."""
    path, headers, body = json_case()
    twice = gzip_bytes(gzip_bytes(body))
    r = daemon.request("POST", path, body=twice,
                       headers=dict(headers, **{"Content-Encoding": "gzip, gzip"}))
    doc = assert_problem(r, 415, "unsupported_media_type")
    assert "stacked" in doc["detail"], doc
    assert (r.header("Connection") or "").lower() == "close"
    head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Encoding: gzip\r\nContent-Encoding: gzip\r\n"
            "Content-Length: %d\r\n\r\n" % (path, len(twice))).encode()
    raw = raw_exchange(daemon.port, head + twice)
    assert status_of(raw) == 415, raw[:300]


# ---- the bomb ----------------------------------------------------------------------

def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_bomb_is_413_with_memory_bounded(make_daemon):
    """10 MiB of zeros in ~10 KiB of gzip, max_body_bytes 1 MiB: 413 once
    1 MiB is out, and the daemon's peak RSS grows by far less than the
    10 MiB the body would inflate to."""
    limit = 1 << 20
    d = make_daemon("--max-body-bytes", limit)
    bomb = gzip.compress(b"\0" * (10 << 20), 9)
    assert len(bomb) < 16 << 10
    # a first request so that the connection and worker machinery is warm
    path, headers, body = json_case()
    assert d.request("POST", path, body=body, headers=headers).status == 200
    before = vm_hwm_kib(d.proc.pid)
    for coding, data in [("gzip", bomb),
                         ("deflate", zlib.compress(b"\0" * (10 << 20), 9))]:
        r = d.request("POST", LAYER, body=data,
                      headers={"Content-Type": JSON,
                               "Content-Encoding": coding})
        doc = assert_problem(r, 413, "body_too_large")
        assert str(limit) in doc["detail"], doc
    grown = vm_hwm_kib(d.proc.pid) - before
    # at most the 1 MiB body, half of it again while doubling, and zlib's
    # window: about 2.4 MiB (5.6 MiB under ASan, its redzones and
    # quarantine); inflating it all would take the 10 MiB, in a 16 MiB
    # buffer after doubling
    assert grown < 8 << 10, "VmHWM grew by %d KiB" % grown
    assert d.alive()


def test_body_inflating_to_exactly_the_limit_is_read(make_daemon):
    limit = 4096
    d = make_daemon("--max-body-bytes", limit)
    core = b'{"input": [1, 2, 3]}'
    body = core[:-1] + b" " * (limit - len(core)) + b"}"
    r = d.request("POST", LAYER, body=gzip_bytes(body),
                  headers={"Content-Type": JSON, "Content-Encoding": "gzip"})
    assert r.status == 200, r
    r = d.request("POST", LAYER, body=gzip_bytes(body + b" "),
                  headers={"Content-Type": JSON, "Content-Encoding": "gzip"})
    assert_problem(r, 413, "body_too_large")


# ---- compressed answers ------------------------------------------------------------

def big_request():
    """A layer norm whose JSON answer is well over 1 KiB."""
    x = sample((8, 128), 7)
    return json.dumps({"input": {"shape": list(x.shape),
                                 "data": x.ravel().tolist()}}).encode()


def decode(coding, data):
    if coding == "gzip":
        return gzip.decompress(data)
    assert coding == "deflate"
    return zlib.decompress(data)  # the zlib format, as RFC 9110 says


@pytest.mark.parametrize("accept,want", [
    ("gzip", "gzip"),
    ("deflate", "deflate"),
    ("gzip, deflate", "gzip"),        # a tie goes to gzip
    ("deflate, gzip", "gzip"),
    ("gzip;q=0.5, deflate", "deflate"),
    ("gzip;q=0.5, deflate;q=0.8", "deflate"),
    ("*", "gzip"),
    ("br, *;q=0.1", "gzip"),
    ("deflate;q=0, *", "gzip"),
    ("GZIP", "gzip"),
    ("x-gzip", "gzip"),
    ("gzip;q=0.1, identity", None),   # identity preferred
    ("gzip;q=0", None),
    ("br", None),
    ("identity", None),
    ("identity;q=0, *;q=0", None),    # nothing acceptable: identity anyway
    ("identity;q=0", None),
])
def test_answer_coding_follows_accept_encoding(daemon, accept, want):
    body = big_request()
    plain = daemon.post_json(LAYER, body)
    assert plain.status == 200, plain
    assert plain.header("Content-Encoding") is None
    assert plain.header("Vary") == "Accept-Encoding"
    r = daemon.post_json(LAYER, body, headers={"Accept-Encoding": accept})
    assert r.status == 200, r
    assert r.header("Vary") == "Accept-Encoding"
    assert r.header("Content-Encoding") == want
    got = decode(want, r.body) if want else r.body
    assert got == plain.body
    if want:
        assert len(r.body) < len(plain.body) // 2


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
@pytest.mark.parametrize("case", ["npy", "framed_v1", "framed_v2"])
def test_binary_answer_compressed_as_a_whole(daemon, case, coding):
    """Header and binary tensors in one stream; Inference-Header-Content-
    Length still counts the uncompressed JSON header (as Triton)."""
    path, headers, body = CASES[case]()
    plain = daemon.request("POST", path, body=body, headers=headers)
    assert plain.status == 200, plain
    assert len(plain.body) >= 1024
    r = daemon.request("POST", path, body=body,
                       headers=dict(headers, **{"Accept-Encoding": coding}))
    assert r.status == 200, r
    assert r.header("Content-Encoding") == coding
    assert decode(coding, r.body) == plain.body
    assert (r.header("Inference-Header-Content-Length")
            == plain.header("Inference-Header-Content-Length"))


def test_compressed_both_ways(daemon):
    body = big_request()
    plain = daemon.post_json(LAYER, body)
    r = daemon.post_json(LAYER, gzip_bytes(body),
                         headers={"Content-Encoding": "gzip",
                                  "Accept-Encoding": "gzip"})
    assert r.status == 200, r
    assert gzip.decompress(r.body) == plain.body


def test_small_answers_are_not_compressed(daemon):
    r = daemon.post_json(LAYER, {"input": [1, 2, 3]},
                         headers={"Accept-Encoding": "gzip"})
    assert r.status == 200, r
    assert len(r.body) < 1024
    assert r.header("Content-Encoding") is None
    assert r.header("Vary") == "Accept-Encoding"
    r = daemon.post_json(LAYER, {"input": [1, 2]}, headers={
        "Accept-Encoding": "gzip", "Content-Type": "text/plain"})
    assert r.status == 415 and r.header("Content-Encoding") is None, r


def test_get_routes_are_compressed_too(daemon):
    plain = daemon.get("/openapi.yaml")
    r = daemon.get("/openapi.yaml", headers={"Accept-Encoding": "gzip"})
    assert r.status == 200, r
    assert r.header("Content-Encoding") == "gzip"
    assert gzip.decompress(r.body) == plain.body
    r = daemon.get("/v1/info", headers={"Accept-Encoding": "deflate"})
    assert r.header("Content-Encoding") == "deflate"
    json.loads(zlib.decompress(r.body))


def test_compression_off_by_config(make_daemon):
    d = make_daemon("--compression", "false")
    body = big_request()
    r = d.post_json(LAYER, body, headers={"Accept-Encoding": "gzip"})
    assert r.status == 200, r
    assert r.header("Content-Encoding") is None
    assert r.header("Vary") is None
    json.loads(r.body)
    r = d.get("/openapi.yaml", headers={"Accept-Encoding": "gzip"})
    assert r.header("Content-Encoding") is None
    # compressed requests are still decoded
    r = d.post_json(LAYER, gzip_bytes(body),
                    headers={"Content-Encoding": "gzip"})
    assert r.status == 200, r
