"""The malformed-request corpus of the stress harness: every decoder's edges,
absurd shapes, deep nesting, a huge body of whitespace, NaN everywhere,
wrong methods and paths, header floods. Each case is a raw request and the
answer the contract documents for it (README "Errors", api/openapi.yaml):
the status, and the problem `code` when one is stable enough to pin.

cases() returns a list of Case; `status` may be a set when the contract
allows either (e.g. 413 by Content-Length or while reading).
"""
import struct

from traffic import npy, js

JSON = "application/json"
NPY = "application/x-npy"
OCTET = "application/octet-stream"

COMPUTE = ["/v1/norm/layer", "/v1/norm/rms", "/v1/norm/batch", "/v1/norm/group",
           "/v1/norm/instance", "/v1/moments", "/v1/moments/merge",
           "/v1/residual/simulate"]
NORMS = COMPUTE[:5]
MODELS = ["layer_norm", "rms_norm", "batch_norm", "group_norm", "instance_norm"]


class Case:
    """One malformed request. problem: the body must be a problem document
    (application/problem+json), or for /v2 an {"error": ...} object; None
    for answers without a body (HEAD) or from libmicrohttpd itself."""

    def __init__(self, name, wire, status, code=None, problem="rfc9457",
                 known=None):
        self.name = name
        self.wire = wire
        self.status = status if isinstance(status, (set, frozenset)) else {status}
        self.code = code
        self.problem = problem
        self.known = known  # a known deviation, reported but not failed


def request(method, path, body=b"", ctype=JSON, extra=(), length=True):
    head = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"]
    if ctype is not None:
        head.append("Content-Type: " + ctype)
    head += ["%s: %s" % kv for kv in extra]
    if length:
        head.append("Content-Length: %d" % len(body))
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def post(path, body, ctype=JSON, extra=()):
    if isinstance(body, str):
        body = body.encode()
    return request("POST", path, body, ctype, extra)


def npy_raw(header_text, data=b"", version=1):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + data


def cases():
    out = []

    def add(*args, **kw):
        out.append(Case(*args, **kw))

    # -- JSON syntax, on every compute route (400 malformed_json & co.) ----------
    syntax = [
        ("empty-body", b"", "malformed_json"),
        ("truncated", b'{"input": [1, 2', "malformed_json"),
        ("trailing-garbage", b'{"input": [1, 2]} x', "malformed_json"),
        ("single-quotes", b"{'input': [1, 2]}", "malformed_json"),
        ("bare-nan", b'{"input": [NaN, 1]}', "malformed_json"),
        ("invalid-utf8", b'{"input": [1, 2], "\xff": 1}', "malformed_json"),
        ("duplicate-key", b'{"input": [1, 2], "input": [3, 4]}', "duplicate_key"),
        ("nul-in-key", b'{"input": [1, 2], "a\\u0000b": 1}', "malformed_json"),
        ("too-deep-40", b'{"input":' + b"[" * 40 + b"1" + b"]" * 40 + b"}", "too_deep"),
    ]
    for path in COMPUTE:
        for name, body, code in syntax:
            add("%s %s" % (path, name), post(path, body), 400, code)
    # not an object / unknown field / wrong type: 422
    for path in COMPUTE:
        add(path + " array-body", post(path, b"[1, 2, 3]"), 422, "not_an_object")
        add(path + " string-body", post(path, b'"input"'), 400, "malformed_json")
        add(path + " typo-field", post(path, b'{"input": [1, 2], "epsilon": 1}'),
            422, "unknown_field")
    # -- tensors ------------------------------------------------------------------
    tensor_cases = [
        ("ragged", {"input": [[1, 2], [3]]}, 422, "ragged_tensor"),
        ("empty", {"input": []}, 422, None),
        ("string-element", {"input": [1, "x"]}, 422, "bad_number"),
        ("null-element", {"input": [1, None]}, 422, "bad_number"),
        ("bool-element", {"input": [1, True]}, 422, "bad_number"),
        ("shape-2^62x2^62", {"input": {"shape": [2 ** 62, 2 ** 62], "data": [1]}}, {413, 422}, None),
        ("shape-2^63-1", {"input": {"shape": [2 ** 63 - 1], "data": [1]}}, {413, 422}, None),
        ("shape-negative", {"input": {"shape": [-1, 4], "data": [1, 2, 3, 4]}}, 422, None),
        ("shape-zero", {"input": {"shape": [0, 4], "data": []}}, 422, None),
        ("shape-rank-9", {"input": {"shape": [1] * 9, "data": [1]}}, 422, None),
        ("shape-float", {"input": {"shape": [2.5], "data": [1, 2]}}, 422, "bad_shape"),
        ("shape-missing", {"input": {"data": [1, 2]}}, 422, "bad_tensor"),
        ("data-short", {"input": {"shape": [2, 3], "data": [1, 2]}}, 422, "data_length"),
        ("data-long", {"input": {"shape": [2], "data": [1, 2, 3]}}, 422, "data_length"),
        ("dtype-int8", {"input": {"shape": [2], "dtype": "int8", "data": [1, 2]}}, 422, "unknown_dtype"),
        ("tensor-extra-key", {"input": {"shape": [2], "data": [1, 2], "x": 1}}, 422, "unknown_field"),
        ("too-many-elements", {"input": {"shape": [4096, 8192], "data": [0]}}, 413, "too_many_elements"),
        ("binary-without-framing", {"input": {"shape": [2], "parameters": {"binary_data_size": 8}}}, 400, "binary_without_framing"),
    ]
    for path in NORMS + ["/v1/moments"]:
        for name, body, status, code in tensor_cases:
            add("%s %s" % (path, name), post(path, js(body)), status, code)
    # -- parameters ---------------------------------------------------------------
    x2 = [[1, 2, 3, 4], [5, 6, 7, 8]]
    x3 = {"shape": [2, 4, 3], "data": list(range(24))}
    params = [
        ("/v1/norm/layer", {"input": x2, "eps": "NaN"}, 422, "bad_field"),
        ("/v1/norm/layer", {"input": x2, "eps": -1}, 422, None),
        ("/v1/norm/layer", {"input": x2, "normalized_shape": [3]}, 422, None),
        ("/v1/norm/layer", {"input": x2, "normalized_shape": [1, 2, 4]}, 422, None),
        ("/v1/norm/layer", {"input": x2, "axis": 5}, 422, None),
        ("/v1/norm/layer", {"input": x2, "axis": 1, "normalized_shape": 4}, 422, "conflicting_fields"),
        ("/v1/norm/layer", {"input": x2, "variance": "sample"}, 422, "bad_field"),
        ("/v1/norm/layer", {"input": x2, "eps_placement": 1}, 422, "bad_field"),
        ("/v1/norm/layer", {"input": x2, "weight": [1, 2]}, 422, None),
        ("/v1/norm/layer", {"input": x2, "return": ["everything"]}, 422, "bad_field"),
        ("/v1/norm/layer", {"input": x2, "output_dtype": "int4"}, 422, "unknown_dtype"),
        ("/v1/norm/rms", {"input": x2, "bias": [1, 2, 3, 4]}, 422, "unknown_field"),
        ("/v1/norm/batch", {"input": x3, "mode": "eval"}, 422, None),
        ("/v1/norm/batch", {"input": x3, "running_mean": [0, 0], "running_var": [1, 1]}, 422, None),
        ("/v1/norm/batch", {"input": x3, "momentum": "fast"}, 422, "bad_field"),
        ("/v1/norm/batch", {"input": x3, "num_batches_tracked": -1}, 422, "bad_field"),
        ("/v1/norm/batch", {"input": x3, "mode": "given", "mean": [0] * 4}, 422, "missing_field"),
        ("/v1/norm/group", {"input": x3}, 422, "missing_field"),
        ("/v1/norm/group", {"input": x3, "num_groups": 3}, 422, None),
        ("/v1/norm/group", {"input": x3, "num_groups": 0}, 422, None),
        ("/v1/norm/group", {"input": x3, "num_groups": 2 ** 62}, 422, None),
        ("/v1/norm/instance", {"input": [1, 2, 3]}, 422, None),
        ("/v1/moments", {"input": x2, "layout": "columns"}, 422, "bad_field"),
        ("/v1/moments/merge", {"parts": []}, 422, "bad_field"),
        ("/v1/moments/merge", {"parts": [{"count": [1], "mean": [1], "m2": [-1]}]}, 422, "bad_moments"),
        ("/v1/moments/merge", {"parts": [{"count": [1, 2], "mean": [1], "m2": [0]}]}, 422, "bad_field"),
        ("/v1/moments/merge", {}, 422, "missing_field"),
        ("/v1/residual/simulate", {"tokens": 0}, 422, "bad_field"),
        ("/v1/residual/simulate", {"d": 4096, "tokens": 4096, "layers": 4096}, 422, None),
        ("/v1/residual/simulate", {"gain": "NaN"}, 422, "bad_field"),
        ("/v1/norm/layer", {}, 422, "missing_field"),
    ]
    for i, (path, body, status, code) in enumerate(params):
        add("%s param-%d" % (path, i), post(path, js(body)), status, code)
    # NaN everywhere: valid (NaN in, NaN out) -- and NaN where a number is a setting
    nan = {"shape": [2, 4, 3], "data": ["NaN"] * 24}
    for path in NORMS:
        body = {"input": nan}
        if path.endswith("group"):
            body["num_groups"] = 2
        add(path + " nan-everywhere", post(path, js(body)), 200, problem=None)
    add("/v1/norm/layer nan-eps", post("/v1/norm/layer", js({"input": nan, "eps": "NaN"})), 422, "bad_field")
    add("/v1/norm/batch nan-running", post("/v1/norm/batch", js(
        {"input": nan, "mode": "eval", "running_mean": ["NaN"] * 4,
         "running_var": ["-Infinity"] * 4})), {200, 422}, problem=None)
    # float32 overflow in the statistics stays valid JSON (a fuzzing find)
    add("/v1/norm/layer f32-var-overflow", post("/v1/norm/layer", js(
        {"input": [[1e30, -1e30]], "return": "stats"})), 200, problem=None)
    # -- .npy ---------------------------------------------------------------------
    good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"
    npys = [
        ("no-magic", b"NUMPY" + b"\x00" * 100, 400, "npy_bad_magic"),
        ("short", b"\x93NUMPY\x01", 400, None),
        ("version-9", npy_raw(good_dict, version=9), 400, "npy_bad_version"),
        ("header-past-end", b"\x93NUMPY\x01\x00\xff\xff{}", 400, "npy_truncated"),
        ("not-a-dict", npy_raw("[1, 2]\n"), 400, "npy_bad_header"),
        ("descr-i4", npy_raw("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", b"\0" * 8), 415, "npy_unsupported_dtype"),
        ("descr-object", npy_raw("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", b"\0" * 16), 415, "npy_unsupported_dtype"),
        ("shape-huge", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }\n"), {413, 422}, None),
        ("shape-negative", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 4), }\n"), 422, None),
        ("scalar", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", b"\0" * 4), 422, None),
        ("data-short", npy_raw(good_dict + "\n", b"\0" * 7), 400, "npy_size_mismatch"),
        ("data-long", npy_raw(good_dict + "\n", b"\0" * 40), 400, "npy_size_mismatch"),
        ("missing-key", npy_raw("{'descr': '<f4', 'shape': (2,), }\n", b"\0" * 8), 400, "npy_bad_header"),
        ("repeated-key", npy_raw("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", b"\0" * 8), 400, "npy_bad_header"),
        ("escape-in-string", npy_raw("{'descr': '<\\f4', 'fortran_order': False, 'shape': (2,), }\n", b"\0" * 8), 400, "npy_bad_header"),
    ]
    for name, body, status, code in npys:
        add("npy " + name, post("/v1/norm/layer", body, NPY), status, code)
    good = npy([2, 4], list(range(8)))
    query_cases = [
        ("?eps=abc", 422, "bad_field"),
        ("?eps=1&eps=2", 400, "duplicate_key"),
        ("?input=1", 422, None),
        ("?normalized_shape=3", 422, None),
        ("?unknown=1", 422, "unknown_field"),
        ("?" + "&".join("p%d=1" % i for i in range(65)), 400, "too_many_parameters"),
    ]
    for q, status, code in query_cases:
        add("npy query " + q[:40], request("POST", "/v1/norm/layer" + q, good, NPY,
                                            []),
            status, code)
    add("npy output bf16", request("POST", "/v1/norm/layer?output_dtype=bfloat16", good, NPY,
                                   [("Accept", NPY)]), 406, "not_acceptable")
    add("npy moments as npy", request("POST", "/v1/moments", good, NPY, [("Accept", NPY)]),
        406, "not_acceptable")
    # -- binary framing -------------------------------------------------------------
    hdr = js({"input": {"shape": [2, 4], "parameters": {"binary_data_size": 32}}})
    tail = struct.pack("<8f", *range(8))
    framed_cases = [
        ("no-header-length", hdr + tail, [], 400, "missing_header_length"),
        ("header-length-text", hdr + tail, [("Inference-Header-Content-Length", "abc")], 400, "bad_header_length"),
        ("header-length-negative", hdr + tail, [("Inference-Header-Content-Length", "-5")], 400, "bad_header_length"),
        ("header-length-huge", hdr + tail, [("Inference-Header-Content-Length", "99999999999999999999")], 400, None),
        ("header-length-past-body", hdr + tail, [("Inference-Header-Content-Length", str(len(hdr) + 100))], 400, "binary_truncated"),
        ("tail-short", hdr + tail[:-4], [("Inference-Header-Content-Length", str(len(hdr)))], 400, "binary_truncated"),
        ("tail-long", hdr + tail + b"xxxx", [("Inference-Header-Content-Length", str(len(hdr)))], 400, "binary_size_mismatch"),
        ("size-mismatch", js({"input": {"shape": [2, 4], "parameters": {"binary_data_size": 31}}}) + tail,
         [("Inference-Header-Content-Length", "%d" % len(js({"input": {"shape": [2, 4], "parameters": {"binary_data_size": 31}}})))],
         422, "binary_size_mismatch"),
        ("header-cut-mid-json", hdr + tail, [("Inference-Header-Content-Length", "10")], 400, "malformed_json"),
    ]
    for name, body, extra, status, code in framed_cases:
        add("framed " + name, post("/v1/norm/layer", body, OCTET, extra), status, code)
    # -- content negotiation ------------------------------------------------------------
    add("content-type text/csv", post("/v1/norm/layer", b"1,2,3", "text/csv"), 415, "unsupported_media_type")
    add("content-type form", post("/v1/norm/layer", b"a=1", "application/x-www-form-urlencoded"), 415, "unsupported_media_type")
    add("accept image/png", request("POST", "/v1/norm/layer", js({"input": [1, 2]}), JSON,
                                    [("Accept", "image/png")]), 406, "not_acceptable")
    add("accept json q=0", request("POST", "/v1/norm/layer", js({"input": [1, 2]}), JSON,
                                   [("Accept", "application/json;q=0")]), 406, "not_acceptable")
    # -- KServe v2 ({"error": ...} bodies) -------------------------------------------------
    v2 = [
        ("no-inputs", {"inputs": []}, 400),
        ("unknown-input", {"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}, 400),
        ("bad-datatype", {"inputs": [{"name": "input", "shape": [2], "datatype": "INT8", "data": [1, 2]}]}, 400),
        ("unknown-field", {"inputs": [{"name": "input", "shape": [2], "datatype": "FP32", "data": [1, 2]}], "x": 1}, 400),
        ("unknown-output", {"inputs": [{"name": "input", "shape": [2], "datatype": "FP32", "data": [1, 2]}],
                            "outputs": [{"name": "everything"}]}, 400),
        ("shape-huge", {"inputs": [{"name": "input", "shape": [2 ** 62, 2 ** 62], "datatype": "FP32", "data": [1]}]}, {413, 422}),
    ]
    for model in MODELS:
        for name, body, status in v2:
            if model == "group_norm":  # else its missing num_groups comes first
                body = dict(body, parameters={"num_groups": 1})
            add("v2 %s %s" % (model, name), post("/v2/models/%s/infer" % model, js(body)),
                status, problem="kserve")
        add("v2 %s malformed" % model, post("/v2/models/%s/infer" % model, b"{"), 400,
            problem="kserve")
    add("v2 unknown model", post("/v2/models/softmax/infer", js({"inputs": []})), 404, "unknown_model",
        problem="kserve")
    add("v2 unknown version", post("/v2/models/layer_norm/versions/7/infer", js({"inputs": []})), 404,
        "unknown_model", problem="kserve")
    # -- methods and paths ------------------------------------------------------------------
    for path in COMPUTE:
        for method in ("GET", "PUT", "DELETE", "PATCH"):
            add("%s %s" % (method, path), request(method, path, b"", None, length=method != "GET"),
                405, "method_not_allowed")
    for path in ("/healthz", "/metrics", "/v1/info"):
        add("POST " + path, post(path, b"{}"), 405, "method_not_allowed")
    for path in ("/nope", "/v1/norm", "/v1/norm/layer/", "/v1/norm/LAYER", "/healthz%00junk",
                 "/v1/norm/layer%2F..%2F..", "/" + "a" * 3000):
        add("404 " + path[:40], request("GET", path, b"", None, length=False), 404, "not_found")
    # -- sizes and headers -----------------------------------------------------------------
    add("body over max_body_bytes (by Content-Length)",
        request("POST", "/v1/norm/layer", b"", JSON,
                [("Content-Length", str(65 * 1024 * 1024))], length=False),
        413, "body_too_large")
    add("nesting depth 10^5", post("/v1/norm/layer", b'{"input":' + b"[" * 100000 + b"1" +
                                    b"]" * 100000 + b"}"), 400, "too_deep")
    add("60 MiB of whitespace", post("/v1/norm/layer", b" " * (60 * 1024 * 1024)),
        400, "malformed_json")
    # libmicrohttpd 0.9 answers headers that overflow its per-connection
    # buffer (431; 414 for a request line) before any callback of normd's,
    # with a fixed HTML body and no Content-Type; no option or callback lets
    # the application supply that answer. Documented in README's Limits.
    mhd_431 = ("answered by libmicrohttpd 0.9 itself: 431 with its built-in HTML "
               "body (no hook to replace it), not a problem document")
    add("header flood (4000 headers)",
        request("POST", "/v1/norm/layer", b"{}", JSON,
                [("X-Flood-%d" % i, "a" * 40) for i in range(4000)]),
        431, problem=None, known=mhd_431)
    add("one 200 KB header",
        request("POST", "/v1/norm/layer", b"{}", JSON, [("X-Big", "b" * 200000)]),
        431, problem=None, known=mhd_431)
    return out
