"""api/openapi.yaml against the live daemon.

Every request example is sent and its answer must carry the status, media
type and content of the response example of the same name, and validate
against that response's schema. Every error example is produced by the
request in its x-request (or by a staged scenario: overload, drain, out of
memory, oversized body, missing files) and checked the same way. The routes
the daemon lists in GET /v1/info must be exactly the document's, every
operation's CORS preflight, HEAD and 414 / 431 answers are checked, and the
last test proves that every ProblemCode was produced by some request.
"""
import json
import re
import resource
import signal
import socket
import threading
import time

import numpy as np
import pytest

import contractlib as cl
from contractlib import resolve

SPEC = cl.load_spec()
PROBLEM = "application/problem+json"
PRODUCED = set()  # problem codes seen on the wire by this module's tests
SENT = set()  # ids of the examples sent
VOLATILE = {"revision", "threads"}  # of GET /v1/info: the build and the host
PATH_EXAMPLES = {"model": "layer_norm", "version": "1", "region": "region0"}


def _id(*parts):
    return "-".join(str(p) for p in parts)


# ---- checking one answer -------------------------------------------------------

def content_for(resp_obj, resp):
    """The documented media type entry matching the answer's Content-Type."""
    content = resp_obj.get("content") or {}
    ct = cl.header(resp, "Content-Type")
    if ct in content:
        return ct, content[ct]
    mt = cl.media_type(resp)
    assert mt in content, "Content-Type %r is not documented (%s)" % (
        ct, sorted(content))
    return mt, content[mt]


def check_answer(o, resp, status, example=None, record=True):
    """resp is documented for operation o under status, validates against
    that response's schema, carries its headers, and (when given) matches
    the example; returns the decoded answer."""
    assert resp.status == status, "%s %s: want %s, got %s %r" % (
        o.method, o.path, status, resp.status, resp.body[:300])
    assert str(status) in o.op["responses"], \
        "%s %s answered %s, which is not documented" % (o.method, o.path,
                                                       status)
    resp_obj = resolve(SPEC, o.op["responses"][str(status)])
    for name, h in resp_obj.get("headers", {}).items():
        h = resolve(SPEC, h)
        value = cl.header(resp, name)
        if name == "Retry-After":
            assert value is not None and int(value) >= 1, resp
        if name == "X-Request-Id":
            assert value, "%s %s %s: no X-Request-Id" % (o.method, o.path,
                                                          status)
        if name == "Inference-Header-Content-Length":
            framed = cl.media_type(resp) == "application/octet-stream"
            assert (value is not None) == framed, resp
    if not resp_obj.get("content"):
        assert resp.body in (b"",) or resp.status in (414, 431), resp
        return None
    if o.method == "HEAD":
        return None
    media, mt = content_for(resp_obj, resp)
    decoded = cl.decoded_answer(resp) if (
        media.startswith("application/") and media != "application/yaml") \
        else resp.body.decode()
    if media in ("application/json", PROBLEM):
        errors = cl.schema_errors(SPEC, resolve(SPEC, mt["schema"]), decoded)
        assert not errors, "%s %s %s: %s\n%r" % (o.method, o.path, status,
                                                 errors, decoded)
    elif media == "application/octet-stream":
        # the JSON header has the JSON answer's schema (tensors as binary)
        js = resp_obj["content"].get("application/json")
        assert js, "no JSON schema to check the framed header against"
        errors = cl.schema_errors(SPEC, resolve(SPEC, js["schema"]),
                                  decoded["header"])
        assert not errors, errors
    if media == PROBLEM and record:
        assert decoded["type"] == "urn:normd:problem:" + decoded["code"]
        assert decoded["status"] == status
        PRODUCED.add(decoded["code"])
    if example is not None and not media.startswith("application/"):
        # text (metrics): the example's comment lines and series are there
        for line in example["value"].splitlines():
            want = line if line.startswith("#") else re.split(r"[{ ]", line)[0]
            assert want in decoded, "%r is not in the answer" % want
    elif example is not None:
        if "x-decoded" in example:
            want = example["x-decoded"]
        else:
            want = example["value"]
        # instance names the request (X-Request-Id): new each time
        skip = {"detail", "error", "instance"} | (VOLATILE if o.id == "info" else set())
        diff = cl.differences(want, decoded, skip=skip)
        assert not diff, "%s %s %s differs from the documented example:\n%s" \
            % (o.method, o.path, status, "\n".join(diff[:20]))
    return decoded


def op_by_id(op_id):
    for o in cl.operations(SPEC):
        if o.id == op_id:
            return o
    raise KeyError(op_id)


def concrete(path):
    return cl.fill_path(path, PATH_EXAMPLES)


def with_path_params(xreq):
    """x-request with the path parameters it leaves out set to examples."""
    xreq = dict(xreq or {})
    xreq["path_params"] = dict(PATH_EXAMPLES, **xreq.get("path_params", {}))
    return xreq


# ---- the document itself --------------------------------------------------------

def test_every_ref_resolves():
    def walk(node, where):
        if isinstance(node, dict):
            if "$ref" in node:
                resolve(SPEC, node)
            for k, v in node.items():
                walk(v, where + "/" + str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, "%s/%d" % (where, i))
    walk(SPEC, "#")


def test_examples_validate_against_their_schemas():
    bad = []
    for o, media, name, ex in cl.request_examples(SPEC):
        schema = resolve(SPEC, o.op["requestBody"])["content"][media]["schema"]
        if media == "application/json":
            bad += ["%s %s: %s" % (o.id, name, e)
                    for e in cl.schema_errors(SPEC, resolve(SPEC, schema),
                                              ex["value"])]
        else:
            assert "x-request" in ex, "%s %s %s: a binary request example " \
                "needs x-request (npy or framed)" % (o.id, media, name)
    for e in cl.response_examples(SPEC):
        if e.media in ("application/json", PROBLEM):
            schema = cl.response_schema(SPEC, e.op.op, e.status, e.media)
            bad += ["%s %s %s: %s" % (e.op.id, e.status, e.name, err)
                    for err in cl.schema_errors(SPEC, schema,
                                                e.example["value"])]
        elif e.media in ("application/octet-stream", "application/x-npy"):
            assert "x-decoded" in e.example, (e.op.id, e.status, e.name)
    assert not bad, "\n".join(bad)


def test_every_problem_code_has_an_example():
    codes = set(resolve(SPEC, SPEC["components"]["schemas"]["ProblemCode"])
                ["enum"])
    seen = set()
    for e in cl.response_examples(SPEC):
        if e.media == PROBLEM:
            seen.add(e.example["value"]["code"])
    for ex in SPEC["components"]["schemas"]["Problem"]["examples"]:
        seen.add(ex["code"])
    assert seen <= codes, "examples with undocumented codes: %s" % (seen - codes)
    assert codes <= seen, "codes without an example: %s" % (codes - seen)


# ---- routes -------------------------------------------------------------------------

def spec_routes():
    """{path as /v1/info lists it: methods} of the document (the
    /versions/{version} paths are the same routes)."""
    out = {}
    for path, item in SPEC["paths"].items():
        methods = {m.upper() for m in cl.METHODS if m in item}
        key = path.replace("/versions/{version}", "")
        assert out.get(key, methods) == methods, path
        out[key] = methods
    return out


def test_routes_match_v1_info(normd):
    info = json.loads(normd.get("/v1/info").body)
    served = {r["path"]: set(r["methods"].split(", ")) for r in info["routes"]}
    documented = spec_routes()
    assert sorted(set(served) - set(documented)) == [], \
        "served but not in api/openapi.yaml"
    assert sorted(set(documented) - set(served)) == [], \
        "in api/openapi.yaml but not served"
    for path, methods in served.items():
        assert documented[path] == methods, (path, methods, documented[path])


# ---- request examples and their answers -------------------------------------------

def request_cases():
    cases = []
    for o, media, name, ex in cl.request_examples(SPEC):
        found = [(st, m) for st, r in o.op["responses"].items()
                 for m, c in resolve(SPEC, r).get("content", {}).items()
                 if name in c.get("examples", {})]
        cases.append(pytest.param(o, media, name, ex, found,
                                  id=_id(o.id, media.split("/")[1], name)))
    return cases


@pytest.mark.parametrize("o,media,name,ex,found", request_cases())
def test_request_example(normd, o, media, name, ex, found):
    assert found, "no response example named %r for %s" % (name, o.id)
    # the answer's media type: the request's when documented, else the one
    # example of that name
    same = [f for f in found if f[1] == media]
    assert len(same) == 1 or len(found) == 1, (name, found)
    status, rmedia = same[0] if same else found[0]
    req = cl.build_request(o.path, o.method, with_path_params(ex.get("x-request")),
                           ex.get("value") if media == "application/json"
                           else None)
    resp = normd.send(req)
    assert cl.media_type(resp) == rmedia, (rmedia, resp)
    resp_obj = resolve(SPEC, o.op["responses"][status])
    check_answer(o, resp, int(status),
                 resolve(SPEC, resp_obj["content"][rmedia]["examples"][name]))
    SENT.add(("request", o.id, media, name))


# ---- response examples: errors and GET answers ------------------------------------

def response_cases():
    cases, seen = [], set()
    for e in cl.response_examples(SPEC):
        xreq = e.example.get("x-request")
        if xreq is None:
            if e.op.method != "GET":
                continue  # the answer to a request example
        elif "special" in xreq:
            continue  # staged below
        req = cl.build_request(e.op.path, e.op.method, with_path_params(xreq))
        key = (req.method, req.path, json.dumps(req.headers, sort_keys=True),
               req.body)
        if key in seen:
            continue
        seen.add(key)
        cases.append(pytest.param(e, req, id=_id(e.op.id, e.status, e.name)))
    return cases


@pytest.mark.parametrize("e,req", response_cases())
def test_response_example(normd, e, req):
    resp = normd.send(req)
    check_answer(e.op, resp, int(e.status), e.example)
    SENT.add(("response", e.ref or (e.op.id, e.status, e.name)))


# ---- 404 and 405 on any path -------------------------------------------------------

def test_unknown_path_is_404(normd):
    for path in ("/v1/norm/layers", "/healthz/", "/v1"):
        resp = normd.get(path)
        assert resp.status == 404 and cl.media_type(resp) == PROBLEM, resp
        doc = json.loads(resp.body)
        assert not cl.schema_errors(SPEC, SPEC["components"]["schemas"]
                                    ["Problem"], doc)
        assert doc["code"] == "not_found"
        PRODUCED.add(doc["code"])
    # under /v2 the protocol's error object, whatever the path
    for path in ("/v2/models", "/v2/", "/v2/nope", "/v2/models/layer_norm/x"):
        resp = normd.get(path)
        assert resp.status == 404 and cl.media_type(resp) == "application/json"
        assert not cl.schema_errors(SPEC, SPEC["components"]["schemas"]
                                    ["V2Error"], json.loads(resp.body)), resp


@pytest.mark.parametrize("path", sorted(SPEC["paths"]))
def test_other_methods_are_405_with_allow(normd, path):
    item = SPEC["paths"][path]
    allowed = sorted(m.upper() for m in cl.METHODS if m in item)
    allow = ", ".join(m for m in ("GET", "HEAD", "POST", "OPTIONS")
                      if m in allowed)
    kserve = path.startswith("/v2")
    for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
        if method in allowed:
            continue
        resp = normd.send(cl.Request(method, concrete(path), {}, None))
        assert resp.status == 405, (method, path, resp)
        assert cl.header(resp, "Allow") == allow, resp
        doc = json.loads(resp.body)
        if kserve:
            assert not cl.schema_errors(SPEC, SPEC["components"]["schemas"]
                                        ["V2Error"], doc), doc
        else:
            assert not cl.schema_errors(SPEC, SPEC["components"]["schemas"]
                                        ["Problem"], doc), doc
            assert doc["code"] == "method_not_allowed"
            PRODUCED.add(doc["code"])


# ---- every operation: HEAD, preflight, 414, 431 ---------------------------------------

ALL_OPS = [pytest.param(o, id=o.id) for o in cl.operations(SPEC)]


@pytest.mark.parametrize("o", [p for p in ALL_OPS
                               if p.values[0].method == "HEAD"])
def test_head_has_the_get_headers_and_no_body(normd, o):
    path = concrete(o.path)
    got = normd.send(cl.Request("HEAD", path, {}, None))
    full = normd.get(path)
    check_answer(o, got, full.status)
    assert got.body == b""
    assert cl.header(got, "Content-Type") == cl.header(full, "Content-Type")


@pytest.mark.parametrize("o", [p for p in ALL_OPS
                               if p.values[0].method == "OPTIONS"])
def test_preflight(normd, o):
    req = cl.Request("OPTIONS", concrete(o.path), {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, inference-header-content-length"},
        None)
    resp = normd.send(req)
    check_answer(o, resp, 204)
    assert resp.body == b""
    documented = resolve(SPEC, o.op["responses"]["204"])["headers"]
    for name, h in documented.items():
        value = cl.header(resp, name)
        assert value is not None, (name, resp.headers)
        if name == "Access-Control-Max-Age":
            value = int(value)
        errors = cl.schema_errors(SPEC, resolve(SPEC, h)["schema"], value)
        assert not errors, (name, value, errors)
    item = SPEC["paths"][o.path]
    methods = ", ".join(m for m in ("GET", "HEAD", "POST", "OPTIONS")
                        if m.lower() in item)
    assert cl.header(resp, "Access-Control-Allow-Methods") == methods
    assert cl.header(resp, "Access-Control-Allow-Headers") == \
        "content-type, inference-header-content-length"
    # without Access-Control-Request-Headers, the usual two
    req = cl.Request("OPTIONS", concrete(o.path), {"Origin": "https://x.example"},
                     None)
    resp = normd.send(req)
    assert cl.header(resp, "Access-Control-Allow-Headers") == \
        "Content-Type, Accept"


def raw_exchange(port, data, timeout=10.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except (socket.timeout, ConnectionResetError):
            pass
        return b"".join(chunks)


@pytest.mark.parametrize("o", ALL_OPS)
def test_request_line_and_headers_too_long(normd, o):
    path = concrete(o.path)
    for status, line, extra in (
            (414, "%s %s?pad=%s HTTP/1.1" % (o.method, path, "a" * 200000), ""),
            (431, "%s %s HTTP/1.1" % (o.method, path),
             "X-Pad: %s\r\n" % ("b" * 200000))):
        raw = raw_exchange(normd.port, ("%s\r\nHost: x\r\n%s\r\n"
                                         % (line, extra)).encode())
        m = re.match(rb"HTTP/1\.1 (\d{3}) ", raw)
        assert m and int(m.group(1)) == status, raw[:200]
        assert str(status) in o.op["responses"], (o.id, status)


# ---- the service routes' bodies ------------------------------------------------------

def test_openapi_route_serves_this_document(normd):
    resp = normd.get("/openapi.yaml")
    check_answer(op_by_id("openapi"), resp, 200)
    assert resp.body == cl.SPEC_PATH.read_bytes()


def test_visualizer_route_serves_html(normd):
    resp = normd.get("/")
    check_answer(op_by_id("visualizer"), resp, 200)
    assert resp.body.lstrip().lower().startswith(b"<!doctype html")


def test_metrics_route_lists_the_documented_series(normd):
    resp = normd.get("/metrics")
    check_answer(op_by_id("metrics"), resp, 200)
    names = set(re.findall(r"^# TYPE (\S+) ", resp.body.decode(), re.M))
    described = op_by_id("metrics").op["description"]
    for name in names:
        assert "`%s" % name in described, "%s is not documented" % name
    labels = set(re.findall(r'route="([^"]*)"', resp.body.decode()))
    assert labels <= set(spec_routes()) | {"other"}, labels


@pytest.mark.parametrize("path", ["/v2/health/live", "/v2/health/ready",
                                  "/v2/models/rms_norm/ready",
                                  "/v2/models/rms_norm/versions/1/ready"])
def test_v2_health_is_an_empty_200(normd, path):
    resp = normd.get(path)
    assert resp.status == 200 and resp.body == b"", resp


def test_cors_with_a_list_of_origins(start_normd):
    d = start_normd("--cors-origins", "https://a.example,http://localhost:3000")
    resp = d.get("/healthz", {"Origin": "https://a.example"})
    assert cl.header(resp, "Access-Control-Allow-Origin") == "https://a.example"
    assert "Origin" in [t.strip() for t in cl.header(resp, "Vary").split(",")]
    assert cl.header(resp, "Access-Control-Expose-Headers") == \
        "Retry-After, Inference-Header-Content-Length, X-Request-Id"
    resp = d.get("/healthz", {"Origin": "https://b.example"})
    assert cl.header(resp, "Access-Control-Allow-Origin") is None
    resp = d.get("/healthz")
    assert cl.header(resp, "Access-Control-Allow-Origin") is None


def test_cors_headers_on_errors_too(normd):
    resp = normd.send(cl.Request("POST", "/v1/norm/layer",
                                  {"Origin": "https://app.example",
                                   "Content-Type": "application/json"},
                                  b'{"input": [1, 2], "epsilon": 1}'))
    assert resp.status == 422
    assert cl.header(resp, "Access-Control-Allow-Origin") == "*"
    assert "Retry-After" in cl.header(resp, "Access-Control-Expose-Headers")


# ---- staged errors -------------------------------------------------------------------

def special_example(name):
    """The document's example for x-request {special: name}."""
    for e in cl.response_examples(SPEC):
        if e.example.get("x-request", {}).get("special") == name:
            return e
    raise AssertionError("no example with x-request special %s" % name)


def check_special(name, resp, op_id=None):
    e = special_example(name)
    o = op_by_id(op_id) if op_id else e.op
    check_answer(o, resp, int(e.status), e.example)
    SENT.add(("special", name))


def test_too_many_query_parameters(normd):
    query = "&".join("p%d=1" % i for i in range(65))
    resp = normd.send(cl.Request("POST", "/v1/norm/layer?" + query,
                                  {"Content-Type": "application/json"},
                                  b'{"input": [1, 2]}'))
    check_special("too_many_parameters", resp, "layerNorm")


def raw_response(raw):
    """A raw HTTP/1.1 answer (one, Content-Length framed) as a Response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = [tuple(x.strip() for x in h.split(":", 1)) for h in lines[1:]]
    return cl.Response(status, headers, body)


# Framing normd refuses on any route before reading the body (the
# connection closes): http.client cannot send these, hence raw sockets.
FRAMING = (
    ("bad_request", b"Content-Length: 13\r\nContent-Length: 5\r\n"
     b"Content-Type: application/json\r\n\r\n{\"input\": [1]}"),
    ("unsupported_transfer_encoding", b"Transfer-Encoding: gzip\r\n"
     b"Content-Type: application/json\r\n\r\n{\"input\": [1]}"),
)


@pytest.mark.parametrize("name,headers", FRAMING, ids=[f[0] for f in FRAMING])
def test_framing_refused(normd, name, headers):
    for method, path, op_id in (("POST", "/v1/norm/layer", "layerNorm"),
                                ("GET", "/healthz", "healthz"),
                                ("POST", "/v2/models/layer_norm/infer",
                                 "v2Infer")):
        raw = raw_exchange(normd.port, b"%s %s HTTP/1.1\r\nHost: x\r\n%s"
                           % (method.encode(), path.encode(), headers),
                           timeout=5)
        resp = raw_response(raw)
        assert (cl.header(resp, "Connection") or "").lower() == "close", raw
        if op_id == "layerNorm":
            check_special(name, resp, op_id)
        else:
            check_answer(op_by_id(op_id), resp, resp.status, record=False)
            assert resp.status == (400 if name == "bad_request" else 501), raw


def oversized(d, path):
    """Headers announcing a body over max_body_bytes; the answer comes before
    any body byte is sent."""
    conn = d.connect(10)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(64 * 1024 * 1024 + 1))
        conn.endheaders()
        return cl.read_response(conn)
    finally:
        conn.close()


def test_body_too_large(normd):
    resp = oversized(normd, "/v1/norm/batch")
    assert (cl.header(resp, "Connection") or "").lower() == "close"
    check_special("body_too_large", resp, "batchNorm")
    resp = oversized(normd, "/v2/models/layer_norm/infer")
    check_special("body_too_large_v2", resp, "v2Infer")


def test_missing_files_are_404(start_normd):
    d = start_normd("--openapi-path", "/nonexistent/openapi.yaml",
                    "--web-root", "/nonexistent")
    resp = d.get("/openapi.yaml")
    check_special("missing_file", resp, "openapi")
    resp = d.get("/")
    check_answer(op_by_id("visualizer"), resp, 404)
    for path, op in (("/openapi.yaml", "openapiHead"), ("/", "visualizerHead")):
        resp = d.send(cl.Request("HEAD", path, {}, None))
        check_answer(op_by_id(op), resp, 404)


def wait_jobs(d, n, timeout=10):
    """Waits until n jobs hold compute slots (the daemon's own gauge; a
    request counted in normd_inflight_requests may not have its slot yet:
    that gauge counts from the headers on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in d.get("/metrics").body.decode().splitlines():
            if line.startswith("normd_jobs_inflight ") and \
                    float(line.split()[1]) >= n:
                return
        time.sleep(0.01)
    raise AssertionError("the daemon never had %d jobs in flight" % n)


@pytest.mark.parametrize("path,body,special,op_id", [
    ("/v1/norm/layer", b'{"input": [1, 2, 3]}', "overloaded", "layerNorm"),
    ("/v2/models/layer_norm/infer",
     b'{"inputs": [{"name": "input", "shape": [3], "datatype": "FP32", '
     b'"data": [1, 2, 3]}]}', "overloaded_v2", "v2Infer"),
], ids=["v1", "v2"])
def test_overloaded(start_normd, path, body, special, op_id):
    """The one slot is held by a slow simulation (1-2 s); a request that
    comes meanwhile is refused with 503 + Retry-After."""
    d = start_normd("--threads", 1, "--max-inflight", 1)
    held = {}

    def hold():
        conn = d.connect(60)
        try:
            conn.request("POST", "/v1/residual/simulate",
                         body=slow_simulate_body(96),
                         headers={"Content-Type": "application/json"})
            held["r"] = cl.read_response(conn)
        finally:
            conn.close()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    wait_jobs(d, 1)  # the simulation holds the one slot
    conn = d.connect(30)
    try:
        conn.request("POST", path, body=body,
                     headers={"Content-Type": "application/json"})
        resp = cl.read_response(conn)
    finally:
        conn.close()
    check_special(special, resp, op_id)
    t.join(timeout=60)
    assert held["r"].status == 200, held


def slow_simulate_body(layers=16):
    """Work that keeps one worker busy for about 0.3 s with a small body:
    the Pre-Norm / Post-Norm simulation costs layers x tokens x d^2. (A big
    tensor would not do: decoding it got fast enough to finish before the
    signal arrives.)"""
    return ('{"tokens":64,"d":256,"layers":%d}' % layers).encode()


def test_draining(start_normd):
    d = start_normd("--threads", 1)
    body = slow_simulate_body()
    probes = [d.connect(30) for _ in range(3)]
    for p in probes:  # keep-alive connections opened before the signal
        p.request("GET", "/healthz")
        assert cl.read_response(p, "GET").status == 200

    done = []
    sent = [threading.Event() for _ in range(6)]

    def client(i):
        conn = d.connect(60)
        try:
            conn.request("POST", "/v1/residual/simulate", body=body,
                         headers={"Content-Type": "application/json"})
            sent[i].set()
            done.append(cl.read_response(conn).status)
        finally:
            sent[i].set()
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(6)]
    for t in threads:
        t.start()
    for e in sent:
        assert e.wait(30), "a client could not send its body"
    time.sleep(0.1)  # the bodies are read and the jobs queued
    d.proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    try:
        p = probes[0]
        for path, op_id in (("/readyz", "readyz"),
                            ("/v2/health/ready", "v2Ready"),
                            ("/v2/models/layer_norm/ready", "v2ModelReady"),
                            ("/v2/models/layer_norm/versions/1/ready",
                             "v2ModelVersionReady")):
            p.request("GET", path)
            resp = cl.read_response(p, "GET")
            if op_id == "readyz":
                check_special("draining", resp, "readyz")
            else:
                check_answer(op_by_id(op_id), resp, 503)
        p.request("HEAD", "/readyz")
        resp = cl.read_response(p, "HEAD")
        check_answer(op_by_id("readyzHead"), resp, 503)
        p.request("GET", "/healthz")  # alive while draining
        assert cl.read_response(p, "GET").status == 200
        # compute routes refuse new work and close the connection
        probes[1].request("POST", "/v1/norm/layer", body=b'{"input": [1, 2]}',
                          headers={"Content-Type": "application/json"})
        resp = cl.read_response(probes[1])
        assert (cl.header(resp, "Connection") or "").lower() == "close"
        check_special("draining", resp, "layerNorm")
        probes[2].request("POST", "/v2/models/layer_norm/infer",
                          body=b'{"inputs": []}',
                          headers={"Content-Type": "application/json"})
        check_special("draining_v2", cl.read_response(probes[2]), "v2Infer")
    finally:
        for p in probes:
            p.close()
    for t in threads:
        t.join(timeout=60)
    assert done == [200] * 6, done
    assert d.proc.wait(timeout=30) == 0


def test_out_of_memory(start_normd):
    """A tensor whose buffer cannot be allocated (16 GiB under a 1 GiB
    address-space cap) is a 500 out_of_memory, and the daemon carries on."""
    cap = 1 << 30

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    d = start_normd("--threads", 1, "--max-elements", 1 << 31,
                    preexec_fn=limit)
    huge = {"shape": [1 << 31], "dtype": "float64", "data": []}
    for path, body, special, op_id in (
            ("/v1/norm/layer", {"input": huge}, "out_of_memory", "layerNorm"),
            ("/v2/models/layer_norm/infer",
             {"inputs": [{"name": "input", "shape": [1 << 31],
                          "datatype": "FP64", "data": []}]},
             "out_of_memory_v2", "v2Infer")):
        resp = d.send(cl.Request("POST", path,
                                 {"Content-Type": "application/json"},
                                 json.dumps(body).encode()))
        check_special(special, resp, op_id)
    assert d.get("/healthz").status == 200  # and it still answers


KEY = "contract-test-key-0123456789"
OPEN_PATHS = {"/healthz", "/readyz", "/v2/health/live", "/v2/health/ready"}


@pytest.mark.parametrize("scope", ["compute", "all"])
def test_api_keys(start_normd, scope):
    """With keys configured, every documented 401 happens without a key and
    none with it; preflights and health never need one."""
    d = start_normd("--api-keys", KEY, "--api-key-scope", scope)
    for o in cl.operations(SPEC):
        path = concrete(o.path)
        headers = {"Content-Type": "application/json"}
        resp = d.send(cl.Request(o.method, path, headers,
                                 b"{}" if o.method == "POST" else None))
        needs = o.method == "POST" or (scope == "all" and o.method != "OPTIONS"
                                       and o.path not in OPEN_PATHS)
        if not needs:
            assert resp.status != 401, (o.id, resp)
            continue
        assert "401" in o.op["responses"], o.id
        assert cl.header(resp, "WWW-Authenticate") == 'Bearer realm="normd"'
        special = "unauthorized_v2" if o.path.startswith("/v2") \
            else "unauthorized"
        if o.method == "HEAD":
            check_answer(o, resp, 401)
        else:
            check_special(special, resp, o.id)
        headers["Authorization"] = "Bearer " + KEY
        resp = d.send(cl.Request(o.method, path, headers,
                                 b"{}" if o.method == "POST" else None))
        assert resp.status != 401, (o.id, resp)
        headers["Authorization"] = "Bearer not-" + KEY
        resp = d.send(cl.Request(o.method, path, headers,
                                 b"{}" if o.method == "POST" else None))
        assert resp.status == 401, (o.id, resp)


# ---- the proof ---------------------------------------------------------------------------

def test_every_problem_code_was_produced():
    """Runs last: every code of ProblemCode came back from the live daemon
    in a problem that validated against Problem."""
    codes = set(SPEC["components"]["schemas"]["ProblemCode"]["enum"])
    missing = codes - PRODUCED
    assert not missing, ("never produced (run the whole module): %s"
                         % sorted(missing))
    extra = PRODUCED - codes
    assert not extra, "produced but not documented: %s" % sorted(extra)


def test_every_example_was_sent():
    want = set()
    for o, media, name, ex in cl.request_examples(SPEC):
        want.add(("request", o.id, media, name))
    for e in cl.response_examples(SPEC):
        xreq = e.example.get("x-request")
        if xreq and "special" in xreq:
            want.add(("special", xreq["special"]))
        elif xreq or e.op.method == "GET":
            want.add(("response", e.ref or (e.op.id, e.status, e.name)))
    missing = want - SENT
    assert not missing, "examples never sent (run the whole module): %s" % (
        sorted(map(str, missing))[:20])
