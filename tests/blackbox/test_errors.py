"""Every error status, as an RFC 9457 problem (application/problem+json with
type, title, status, detail, code and, where it applies, field)."""
import json

import pytest

from normd_helpers import (JSON, assert_problem, raw_exchange, status_of)

LAYER = "/v1/norm/layer"


# ---- 400 -----------------------------------------------------------------------

def test_400_malformed_json(daemon):
    r = daemon.post_json(LAYER, b'{"input": [1, 2')
    doc = assert_problem(r, 400, "malformed_json")
    assert doc["title"] == "Bad Request"
    assert "field" not in doc


@pytest.mark.parametrize("body", [b"", b"   ", b"nul", b'{"input": [1, 2]} x',
                                  b"{'input': [1]}", b'{"input": [1,,2]}'])
def test_400_not_json(daemon, body):
    assert_problem(daemon.post_json(LAYER, body), 400, "malformed_json")


@pytest.mark.parametrize("body", [b"", b"  \r\n\t "])
def test_400_empty_body_says_so(daemon, body):
    doc = assert_problem(daemon.post_json(LAYER, body), 400, "malformed_json")
    assert doc["detail"].startswith("the request body is empty"), doc
    assert "line -1" not in doc["detail"] and "wrong arguments" not in doc["detail"]


def test_400_post_without_content_length(daemon):
    """No Content-Length and no chunked encoding: an empty body, said so."""
    raw = raw_exchange(daemon.port, b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\n"
                                    b"Content-Type: application/json\r\n"
                                    b"Connection: close\r\n\r\n")
    assert status_of(raw) == 400, raw
    doc = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    assert doc["code"] == "malformed_json"
    assert doc["detail"].startswith("the request body is empty"), doc


@pytest.mark.parametrize("body, field, where, why", [
    (b'{"input": {"shape": [99999999999999999999], "data": [1]}}', "input",
     "input.shape[0]: too big integer", "64 bits"),
    (b'{"input": [[1, 2]], "normalized_shape": [2, 99999999999999999999]}',
     "normalized_shape", "normalized_shape[1]: too big integer", "64 bits"),
    (b'{"input": [1, 2], "eps": 1e999}', "eps",
     "eps: real number overflow", "float64"),
    (b'{"input": [1, 2], "weight": {"shape": [2], "data": [1, -1e400]}}',
     "weight", "weight.data[1]: real number overflow", "float64"),
])
def test_400_number_out_of_range_names_the_field(daemon, body, field, where,
                                                  why):
    doc = assert_problem(daemon.post_json(LAYER, body), 400, "malformed_json",
                         field=field)
    assert doc["detail"].startswith(where), doc
    assert why in doc["detail"] and "line 1, column" in doc["detail"], doc


def test_400_duplicate_key(daemon):
    r = daemon.post_json(LAYER, b'{"input": [1, 2], "input": [3, 4]}')
    assert_problem(r, 400, "duplicate_key")


def test_400_duplicate_key_nested(daemon):
    r = daemon.post_json(
        LAYER, b'{"input": {"shape": [2], "data": [1, 2], "shape": [2]}}')
    assert_problem(r, 400, "duplicate_key")


def test_400_too_deep(daemon):
    body = '{"input": %s1%s}' % ("[" * 40, "]" * 40)
    r = daemon.post_json(LAYER, body)
    doc = assert_problem(r, 400, "too_deep")
    assert "32" in doc["detail"]


@pytest.mark.parametrize("depth,status", [(32, 422), (33, 400)])
def test_max_json_depth_boundary(daemon, depth, status):
    # the body object is level 1; an unknown field holds the rest
    body = '{"x": %s%s}' % ("[" * (depth - 1), "]" * (depth - 1))
    r = daemon.post_json(LAYER, body)
    assert_problem(r, status, "unknown_field" if status == 422 else "too_deep")


def test_deep_nesting_within_the_limit_is_fine(daemon):
    # rank 8 nested arrays inside the body object: depth 9 <= 32
    body = '{"input": %s1, 2%s}' % ("[" * 8, "]" * 8)
    r = daemon.post_json(LAYER, body)
    assert r.status == 200, r
    assert r.json()["output"]["shape"] == [1] * 7 + [2]


def test_brackets_inside_strings_do_not_count_as_nesting(daemon):
    body = '{"input": [1, 2], "epsilon%s": 1}' % ("[" * 100)
    assert_problem(daemon.post_json(LAYER, body), 422, "unknown_field")


# ---- 404 / 405 --------------------------------------------------------------------

@pytest.mark.parametrize("method,path", [
    ("GET", "/nope"), ("GET", "/v1/norm"), ("GET", "/v1/norm/layer/"),
    ("POST", "/v1/norm/softmax"), ("GET", "/healthz/"), ("GET", "/V1/INFO"),
])
def test_404_unknown_path(daemon, method, path):
    body = b"{}" if method == "POST" else None
    r = daemon.request(method, path, body=body,
                       headers={"Content-Type": JSON} if body else None)
    doc = assert_problem(r, 404, "not_found")
    assert doc["title"] == "Not Found"


@pytest.mark.parametrize("method,path,allow", [
    ("GET", "/v1/norm/layer", "POST, OPTIONS"),
    ("PUT", "/v1/norm/rms", "POST, OPTIONS"),
    ("DELETE", "/v1/moments", "POST, OPTIONS"),
    ("HEAD", "/v1/norm/batch", "POST, OPTIONS"),
    ("POST", "/healthz", "GET, HEAD, OPTIONS"),
    ("DELETE", "/metrics", "GET, HEAD, OPTIONS"),
    ("PATCH", "/", "GET, HEAD, OPTIONS"),
])
def test_405_wrong_method_with_allow(daemon, method, path, allow):
    body = b'{"input": [1, 2]}' if method in ("POST", "PUT", "PATCH") else None
    r = daemon.request(method, path, body=body,
                       headers={"Content-Type": JSON} if body else None)
    assert r.status == 405, r
    assert r.header("Allow") == allow
    if method != "HEAD":
        assert_problem(r, 405, "method_not_allowed")


# ---- 406 / 415 --------------------------------------------------------------------

def test_406_not_acceptable(daemon):
    r = daemon.post_json(LAYER, {"input": [1, 2]}, headers={"Accept": "text/csv"})
    doc = assert_problem(r, 406, "not_acceptable")
    assert "text/csv" in doc["detail"]


@pytest.mark.parametrize("accept", ["application/json", "*/*", "application/*",
                                    "text/csv, application/json;q=0.5",
                                    "application/json; charset=utf-8"])
def test_acceptable_accept_headers(daemon, accept):
    r = daemon.post_json(LAYER, {"input": [1, 2]}, headers={"Accept": accept})
    assert r.status == 200, r
    assert r.content_type == JSON


def test_406_when_json_has_q_zero(daemon):
    r = daemon.post_json(LAYER, {"input": [1, 2]},
                         headers={"Accept": "application/json;q=0, text/csv"})
    assert_problem(r, 406, "not_acceptable")


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded",
                                   "application/xml"])
def test_415_unsupported_content_type(daemon, ctype):
    r = daemon.request("POST", LAYER, body=b'{"input": [1, 2]}',
                       headers={"Content-Type": ctype})
    doc = assert_problem(r, 415, "unsupported_media_type")
    assert ctype in doc["detail"]


@pytest.mark.parametrize("ctype", ["application/json; charset=utf-8",
                                   "Application/JSON"])
def test_json_content_type_variants(daemon, ctype):
    r = daemon.request("POST", LAYER, body=b'{"input": [1, 2]}',
                       headers={"Content-Type": ctype})
    assert r.status == 200, r


@pytest.mark.parametrize("encoding", ["br", "compress", "zstd, identity",
                                      "gzip, deflate"])
def test_415_content_encoding(daemon, encoding):
    """A coding normd does not decode (gzip and deflate it does:
    test_compression.py), or two stacked: refused from the headers, before
    the body is read, and the connection closes."""
    r = daemon.request("POST", LAYER, body=b'{"input": [1, 2]}',
                       headers={"Content-Type": JSON,
                                "Content-Encoding": encoding})
    doc = assert_problem(r, 415, "unsupported_media_type")
    assert "Content-Encoding" in doc["detail"], doc
    assert (r.header("Connection") or "").lower() == "close", r


@pytest.mark.parametrize("encoding", ["identity", "Identity", ""])
def test_content_encoding_identity_is_read(daemon, encoding):
    r = daemon.request("POST", LAYER, body=b'{"input": [1, 2]}',
                       headers={"Content-Type": JSON,
                                "Content-Encoding": encoding})
    assert r.status == 200, r


# ---- request framing (raw sockets: http.client cannot send these) -----------

BODY = b'{"input": [1, 2, 3]}'


def framed(method, path, headers, body=b""):
    return (b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            % (method, path)) + headers + b"\r\n" + body


def problem_of(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"\r\ncontent-type: application/problem+json" in head.lower(), raw
    assert b"\r\nconnection: close" in head.lower(), raw
    return json.loads(body)


@pytest.mark.parametrize("path", [LAYER.encode(), b"/healthz", b"/nowhere"])
def test_400_two_content_lengths_that_disagree(daemon, path):
    """Which of them a proxy in front used cannot be known (request
    smuggling): refused before the body is read, and the connection closes,
    so the rest of the bytes are never read as a next request."""
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    raw = raw_exchange(daemon.port, framed(
        b"POST", path, b"Content-Length: %d\r\nContent-Length: 5\r\n"
        % len(BODY), BODY + smuggled), timeout=5)
    assert status_of(raw) == 400, raw
    doc = problem_of(raw)
    assert doc["code"] == "bad_request" and doc["status"] == 400, doc
    assert "Content-Length" in doc["detail"], doc
    assert raw.count(b"HTTP/1.1 ") == 1, raw  # nothing answered after it


def test_two_equal_content_lengths_are_read(daemon):
    raw = raw_exchange(daemon.port, framed(
        b"POST", LAYER.encode(), b"Content-Length: %d\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n" % (len(BODY), len(BODY)), BODY), timeout=5)
    assert status_of(raw) == 200, raw


@pytest.mark.parametrize("te", [b"Transfer-Encoding: gzip\r\n",
                                b"Transfer-Encoding: gzip, chunked\r\n",
                                b"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
                                b"Transfer-Encoding: identity\r\n"])
@pytest.mark.parametrize("method,path", [(b"POST", LAYER.encode()),
                                         (b"GET", b"/healthz")])
def test_501_unknown_transfer_encoding(daemon, te, method, path):
    """libmicrohttpd would read such a body until the client closes (a hang
    until the timeout); normd answers from the headers."""
    raw = raw_exchange(daemon.port, framed(method, path, te, b"14\r\n" + BODY +
                                           b"\r\n0\r\n\r\n"), timeout=5)
    assert status_of(raw) == 501, raw
    doc = problem_of(raw)
    assert doc["code"] == "unsupported_transfer_encoding", doc
    assert doc["title"] == "Not Implemented", doc


def test_chunked_is_read(daemon):
    raw = raw_exchange(daemon.port, framed(
        b"POST", LAYER.encode(), b"Transfer-Encoding: Chunked\r\nConnection: close\r\n",
        b"14\r\n" + BODY + b"\r\n0\r\n\r\n"), timeout=5)
    assert status_of(raw) == 200, raw


# ---- 422 ------------------------------------------------------------------------

T = {"shape": [2, 3], "data": [1, 2, 3, 4, 5, 7]}  # a valid (N=2, C=3) input

CASES_422 = [
    # id, path, body, code, field
    ("unknown_field", LAYER, {"input": [1, 2], "epsilon": 1e-5},
     "unknown_field", "epsilon"),
    ("field_of_another_op", LAYER, {"input": [1, 2], "num_groups": 1},
     "unknown_field", "num_groups"),
    ("unknown_tensor_field", LAYER,
     {"input": {"shape": [2], "data": [1, 2], "strides": [1]}},
     "unknown_field", "input"),
    ("missing_input", LAYER, {"eps": 1e-5}, "missing_field", "input"),
    ("missing_input_empty_body", "/v1/norm/rms", {}, "missing_field", "input"),
    ("missing_parts", "/v1/moments/merge", {}, "missing_field", "parts"),
    ("not_an_object", LAYER, [1, 2, 3], "not_an_object", None),
    ("ragged", LAYER, {"input": [[1, 2], [3]]}, "ragged_tensor", "input"),
    ("ragged_deeper", LAYER, {"input": [[1, 2], [3, [4]]]}, "bad_number", "input"),
    ("ragged_scalar_vs_list", LAYER, {"input": [[1, 2], 3]}, "ragged_tensor", "input"),
    ("data_length", LAYER, {"input": {"shape": [2, 3], "data": [1, 2, 3, 4, 5]}},
     "data_length", "input"),
    ("negative_dim", LAYER, {"input": {"shape": [2, -3], "data": []}},
     "negative_dim", "input"),
    ("zero_dim", LAYER, {"input": {"shape": [2, 0], "data": []}},
     "empty_tensor", "input"),
    ("empty_nested", LAYER, {"input": []}, "empty_tensor", "input"),
    ("rank_9", LAYER, {"input": {"shape": [1] * 9, "data": [1]}}, "bad_rank", "input"),
    ("rank_9_nested", LAYER, {"input": [[[[[[[[[1]]]]]]]]]}, "bad_rank", "input"),
    ("rank_0", LAYER, {"input": {"shape": [], "data": [1]}}, "bad_rank", "input"),
    ("bad_dtype", LAYER, {"input": {"shape": [2], "dtype": "int8", "data": [1, 2]}},
     "unknown_dtype", "input"),
    ("bad_output_dtype", LAYER, {"input": [1, 2], "output_dtype": "float8"},
     "unknown_dtype", "output_dtype"),
    ("non_number", LAYER, {"input": [1, "two"]}, "bad_number", "input"),
    ("bad_nonfinite_spelling", LAYER, {"input": {"shape": [2], "data": [1, "nan"]}},
     "bad_number", "input"),
    ("shape_not_integer", LAYER, {"input": {"shape": [2.5], "data": [1, 2]}},
     "bad_shape", "input"),
    ("normalized_shape_mismatch", LAYER,
     {"input": T, "normalized_shape": [2]}, "shape_mismatch", "normalized_shape"),
    ("normalized_shape_too_long", LAYER,
     {"input": T, "normalized_shape": [1, 2, 3]}, "shape_mismatch", "normalized_shape"),
    ("axis_out_of_range", LAYER, {"input": T, "axis": 2}, "bad_axis", "axis"),
    ("axis_negative_out_of_range", "/v1/norm/rms", {"input": T, "axis": -3},
     "bad_axis", "axis"),
    ("axis_and_normalized_shape", LAYER,
     {"input": T, "axis": -1, "normalized_shape": [3]}, "conflicting_fields", "axis"),
    ("missing_num_groups", "/v1/norm/group", {"input": T},
     "missing_field", "num_groups"),
    ("num_groups_not_integer", "/v1/norm/group", {"input": T, "num_groups": 1.5},
     "bad_field", "num_groups"),
    ("eval_without_running_stats", "/v1/norm/batch", {"input": T, "mode": "eval"},
     "running_stats_shape", "running_mean"),
    ("running_mean_without_var", "/v1/norm/batch",
     {"input": T, "running_mean": [0, 0, 0]}, "running_stats_shape", "running_mean"),
    ("running_var_wrong_shape", "/v1/norm/batch",
     {"input": T, "running_mean": [0, 0, 0], "running_var": [1, 1]},
     "running_stats_shape", "running_mean"),
    ("bad_mode", "/v1/norm/batch", {"input": T, "mode": "training"},
     "bad_field", "mode"),
    ("weight_wrong_shape", LAYER, {"input": T, "weight": [1, 2]},
     "weight_shape", "weight"),
    ("bias_wrong_shape", "/v1/norm/instance", {"input": T, "bias": [1, 2, 3, 4]},
     "bias_shape", "bias"),
    ("channel_weight_wrong_shape", "/v1/norm/group",
     {"input": T, "num_groups": 3, "weight": [1, 2]}, "weight_shape", "weight"),
    ("negative_eps", LAYER, {"input": T, "eps": -1e-5}, "bad_eps", "eps"),
    ("eps_string", LAYER, {"input": T, "eps": "1e-5"}, "bad_field", "eps"),
    ("momentum_over_1", "/v1/norm/batch",
     {"input": T, "running_mean": [0, 0, 0], "running_var": [1, 1, 1],
      "momentum": 1.5}, "bad_momentum", "momentum"),
    ("momentum_negative", "/v1/norm/batch", {"input": T, "momentum": -0.1},
     "bad_momentum", "momentum"),
    ("num_batches_tracked_negative", "/v1/norm/batch",
     {"input": T, "num_batches_tracked": -1}, "bad_field", "num_batches_tracked"),
    ("too_few_values", "/v1/norm/batch", {"input": [[1, 2, 3]]},
     "too_few_values", "input"),
    ("too_few_values_spatial", "/v1/norm/batch",
     {"input": {"shape": [1, 2, 1], "data": [1, 2]}}, "too_few_values", "input"),
    ("needs_channels", "/v1/norm/instance", {"input": [1, 2, 3]},
     "needs_channels", "input"),
    ("bad_variance", LAYER, {"input": T, "variance": "sample"}, "bad_field", "variance"),
    ("bad_eps_placement", LAYER, {"input": T, "eps_placement": "outside"},
     "bad_field", "eps_placement"),
    ("bad_return", LAYER, {"input": T, "return": ["output", "everything"]},
     "bad_field", "return"),
    ("bad_layout", "/v1/moments", {"input": T, "layout": "columns"},
     "bad_field", "layout"),
    ("moments_axis_with_channels", "/v1/moments",
     {"input": T, "layout": "channels", "axis": -1}, "conflicting_fields", "axis"),
    ("merge_empty_parts", "/v1/moments/merge", {"parts": []}, "bad_field", "parts"),
    ("merge_length_mismatch", "/v1/moments/merge",
     {"parts": [{"count": [1, 2], "mean": [0, 0], "m2": [0, 0]},
                {"count": [1], "mean": [0], "m2": [0]}]}, "bad_field", "parts"),
    ("merge_negative_m2", "/v1/moments/merge",
     {"parts": [{"count": [2], "mean": [0], "m2": [-1]}]}, "bad_moments", "parts"),
    ("merge_fractional_count", "/v1/moments/merge",
     {"parts": [{"count": [1.5], "mean": [0], "m2": [0]}]}, "bad_moments", "parts"),
    ("merge_unknown_part_field", "/v1/moments/merge",
     {"parts": [{"count": [1], "mean": [0], "m2": [0], "n": [1]}]},
     "unknown_field", "parts"),
]


@pytest.mark.parametrize("path,body,code,field",
                         [c[1:] for c in CASES_422], ids=[c[0] for c in CASES_422])
def test_422(daemon, path, body, code, field):
    r = daemon.post_json(path, body)
    doc = assert_problem(r, 422, code, field)
    assert doc["title"] == "Unprocessable Content"
    if field is None:
        assert "field" not in doc


def test_422_num_groups_not_dividing_c(daemon):
    r = daemon.post_json("/v1/norm/group", {"input": T, "num_groups": 2})
    doc = assert_problem(r, 422, "bad_num_groups", "num_groups")
    assert "divide" in doc["detail"]


@pytest.mark.parametrize("groups", [0, -1, 6])
def test_422_num_groups_not_positive_or_too_many(daemon, groups):
    r = daemon.post_json("/v1/norm/group", {"input": T, "num_groups": groups})
    assert_problem(r, 422, "bad_num_groups", "num_groups")


# ---- the daemon survives every error ------------------------------------------------

def test_errors_do_not_disturb_later_requests(daemon):
    for c in CASES_422[:10]:
        daemon.post_json(c[1], c[2])
    r = daemon.post_json(LAYER, {"input": [1, 2, 3, 4, 5]})
    assert r.status == 200
    assert r.json()["output"]["data"][0] == -1.4142101
    assert daemon.get("/healthz").status == 200


def test_error_on_keep_alive_connection_keeps_it_usable(daemon):
    conn = daemon.connect()
    try:
        conn.request("POST", LAYER, body=b'{"input": [1,', headers={"Content-Type": JSON})
        resp = conn.getresponse()
        assert resp.status == 400
        assert json.loads(resp.read())["code"] == "malformed_json"
        conn.request("POST", LAYER, body=b'{"input": [1, 3]}',
                     headers={"Content-Type": JSON})
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
    finally:
        conn.close()


def test_http10_request_gets_an_answer(daemon):
    raw = raw_exchange(daemon.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert status_of(raw) == 200
    assert raw.endswith(b'{"status":"ok"}')


def test_garbage_request_line(daemon):
    raw = raw_exchange(daemon.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
                       timeout=5.0, shutdown_write=True)
    assert status_of(raw) in (None, 400)
    assert daemon.get("/healthz").status == 200
