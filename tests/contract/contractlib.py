"""The contract test's toolbox: the OpenAPI document as data, the requests its
examples describe, a daemon to send them to, and the comparisons.

api/openapi.yaml is the single source of truth. A request example's `value`
is a JSON body; an example may add `x-request` to say more:

  method, path          default: the operation's (path_params fill {model}...)
  query                 {name: text}; query_string is sent verbatim instead
  headers               added to (and overriding) Content-Type: application/json
  body | raw            a JSON value | text, as the body
  npy                   a .npy body: descr, shape, data (plus version,
                        header, header_length, data_bytes to break it)
  framed                binary framing: header (JSON) + binary: [{dtype,
                        data}], Inference-Header-Content-Length computed
                        (header_length overrides it)
  special               a staged scenario the tests run themselves

Only Python's standard library, numpy, PyYAML and jsonschema (Debian's
python3-numpy, python3-yaml, python3-jsonschema) are used.
"""
import collections
import copy
import http.client
import io
import json
import math
import os
import re
import struct
import subprocess
import threading
from pathlib import Path

import numpy as np
import yaml
from jsonschema import Draft202012Validator, RefResolver

REPO_ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = REPO_ROOT / "api" / "openapi.yaml"
NORMD_BIN = REPO_ROOT / os.environ.get("NORMD_BIN", "build/normd")
CONFIG = "config/normd.json"
STARTUP_TIMEOUT = 10.0
HTTP_TIMEOUT = 30.0
METHODS = ("get", "head", "post", "put", "delete", "options", "patch", "trace")
LISTEN_RE = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")

NPY_DESCR = {"float32": "<f4", "float64": "<f8", "float16": "<f2"}
NP_DTYPE = {"float32": "<f4", "float64": "<f8", "float16": "<f2",
            "FP32": "<f4", "FP64": "<f8", "FP16": "<f2"}

# Numbers in examples are what normd printed when the example was written;
# kernels may round the last bits differently (SIMD, summation order).
REL_TOL = 1e-5
ABS_TOL = 1e-6


# ---- the document ------------------------------------------------------------

def load_spec():
    with open(SPEC_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def resolve(spec, node):
    """node, or what its local $ref points at (followed repeatedly)."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), "only local refs: %s" % ref
        node = spec
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


Operation = collections.namedtuple("Operation", "path method op id")


def operations(spec):
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                op = item[method]
                yield Operation(path, method.upper(), op, op["operationId"])


def validator(spec, schema):
    """A JSON Schema 2020-12 validator for schema, whose local refs resolve
    against the whole document."""
    return Draft202012Validator(schema, resolver=RefResolver("", spec))


def schema_errors(spec, schema, instance):
    v = validator(spec, schema)
    return ["%s at %s" % (e.message[:300], "/".join(map(str, e.absolute_path)))
            for e in v.iter_errors(instance)]


# ---- examples ----------------------------------------------------------------

Example = collections.namedtuple(
    "Example", "op status media name example ref")


def request_examples(spec):
    """(operation, media type, name, example) for every request example."""
    for o in operations(spec):
        body = resolve(spec, o.op.get("requestBody", {}))
        for media, mt in body.get("content", {}).items():
            for name, ex in mt.get("examples", {}).items():
                yield o, media, name, resolve(spec, ex)


def response_examples(spec):
    """Example(op, status, media, name, example, ref) for every response
    example; ref is the $ref of a shared example or response (so a shared
    one can be told apart from the operation's own)."""
    for o in operations(spec):
        for status, resp in o.op.get("responses", {}).items():
            rref = resp.get("$ref") if isinstance(resp, dict) else None
            resp = resolve(spec, resp)
            for media, mt in resp.get("content", {}).items():
                for name, ex in mt.get("examples", {}).items():
                    ref = ex.get("$ref") if isinstance(ex, dict) else None
                    yield Example(o, status, media, name, resolve(spec, ex),
                                  ref or (rref and "%s/%s" % (rref, name)))


def response_schema(spec, op, status, media):
    resp = resolve(spec, op["responses"][status])
    return resolve(spec, resp["content"][media].get("schema", {}))


# ---- building requests ---------------------------------------------------------

Request = collections.namedtuple("Request", "method path headers body")


def fill_path(template, params):
    def sub(m):
        name = m.group(1)
        assert name in params, "no value for {%s} in %s" % (name, template)
        return str(params[name])
    return re.sub(r"\{(\w+)\}", sub, template)


def npy_bytes(spec):
    """A .npy file from an x-request npy description (see module doc)."""
    descr = spec.get("descr", "<f4")
    data = spec.get("data", [])
    version = spec.get("version", 1)
    if "header" in spec:
        header = spec["header"]
    else:
        shape = tuple(spec["shape"])
        header = "{'descr': '%s', 'fortran_order': %s, 'shape': %r, }" % (
            descr, "True" if spec.get("fortran_order") else "False", shape)
    prefix = 10 if version == 1 else 12
    pad = (64 - (prefix + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    hlen = spec.get("header_length", len(header))
    out = b"\x93NUMPY" + bytes([version, 0])
    out += struct.pack("<H" if version == 1 else "<I", hlen)
    out += header.encode("latin-1")
    if "data_bytes" in spec:
        out += bytes(spec["data_bytes"])
    else:
        out += np.asarray(data, dtype=np.dtype(descr)).tobytes()
    return out


def framed_bytes(spec):
    """(body, header length) of an x-request framed description."""
    header = json.dumps(spec["header"], separators=(",", ":")).encode()
    tail = b"".join(np.asarray(t["data"], dtype=NP_DTYPE[t["dtype"]]).tobytes()
                    for t in spec.get("binary", []))
    return header + tail, len(header)


def build_request(op_path, op_method, xreq=None, value=None,
                  content_type=None):
    """The Request an example describes; value is a request example's JSON
    body (x-request's body / raw / npy / framed take precedence)."""
    xreq = xreq or {}
    method = xreq.get("method", op_method)
    path = xreq.get("path") or fill_path(op_path, xreq.get("path_params", {}))
    if "query_string" in xreq:
        path += "?" + xreq["query_string"]
    elif xreq.get("query"):
        from urllib.parse import urlencode
        path += "?" + urlencode(xreq["query"])
    headers = {}
    body = None
    if "npy" in xreq:
        body = npy_bytes(xreq["npy"])
        headers["Content-Type"] = "application/x-npy"
    elif "framed" in xreq:
        body, hlen = framed_bytes(xreq["framed"])
        headers["Content-Type"] = "application/octet-stream"
        hl = xreq["framed"].get("header_length", hlen)
        if hl is not None:
            headers["Inference-Header-Content-Length"] = str(hl)
    elif "raw" in xreq:
        body = xreq["raw"].encode()
        headers["Content-Type"] = "application/json"
    elif "body" in xreq:
        body = json.dumps(xreq["body"]).encode()
        headers["Content-Type"] = "application/json"
    elif value is not None and method == "POST":
        body = json.dumps(value).encode()
        headers["Content-Type"] = content_type or "application/json"
    headers.update({k: str(v) for k, v in xreq.get("headers", {}).items()})
    return Request(method, path, headers, body)


# ---- the daemon ----------------------------------------------------------------

Response = collections.namedtuple("Response", "status headers body")


def header(resp, name):
    for k, v in resp.headers:
        if k.lower() == name.lower():
            return v
    return None


class Daemon:
    """One normd on 127.0.0.1 and an ephemeral port; kill() always works."""

    def __init__(self, *extra, env=None, preexec_fn=None):
        if not NORMD_BIN.is_file():
            raise RuntimeError("%s does not exist: run `make build/normd`"
                               % NORMD_BIN)
        args = [str(NORMD_BIN), "--port", "0", "--host", "127.0.0.1",
                "--config", CONFIG] + [str(a) for a in extra]
        self.lines = collections.deque(maxlen=2000)
        self.port = None
        self._started = threading.Event()
        self.proc = subprocess.Popen(
            args, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=dict(os.environ, **(env or {})), preexec_fn=preexec_fn,
            start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._started.wait(STARTUP_TIMEOUT) or self.port is None:
            self.kill()
            raise RuntimeError("normd did not start: %s\n%s"
                               % (args, "\n".join(self.lines)))

    def _read(self):
        try:
            for raw in iter(self.proc.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                m = self.port is None and LISTEN_RE.search(line)
                if m:
                    self.port = int(m.group(1))
                    self._started.set()
        except (OSError, ValueError):
            pass
        finally:
            self._started.set()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def connect(self, timeout=HTTP_TIMEOUT):
        return http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=timeout)

    def send(self, req, timeout=HTTP_TIMEOUT):
        conn = self.connect(timeout)
        try:
            conn.request(req.method, req.path, body=req.body,
                         headers=req.headers)
            return read_response(conn, req.method)
        finally:
            conn.close()

    def get(self, path, headers=None):
        return self.send(Request("GET", path, headers or {}, None))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self._reader.join(timeout=2)
        if self.proc.stderr:
            self.proc.stderr.close()


def read_response(conn, method="POST"):
    r = conn.getresponse()
    body = r.read()  # b"" for HEAD; reading closes the response either way
    return Response(r.status, r.getheaders(), body)


# ---- reading answers -----------------------------------------------------------

def media_type(resp):
    ct = header(resp, "Content-Type")
    return ct.split(";")[0].strip().lower() if ct else None


def split_framed(resp):
    """(JSON header, binary tail) of a framed answer."""
    n = header(resp, "Inference-Header-Content-Length")
    assert n is not None and n.isdigit(), \
        "framed answer without Inference-Header-Content-Length: %r" % (resp,)
    n = int(n)
    return json.loads(resp.body[:n]), resp.body[n:]


def framed_tensors(head):
    """(dtype, count, bytes) of each binary tensor of a header, in order."""
    out = []

    def visit(node):
        if isinstance(node, dict):
            params = node.get("parameters")
            if isinstance(params, dict) and "binary_data_size" in params:
                dtype = node.get("dtype") or node.get("datatype")
                out.append((dtype, params["binary_data_size"]))
            for k, v in node.items():
                if k != "parameters":
                    visit(v)
        elif isinstance(node, list):
            for v in node:
                visit(v)
    visit(head)
    return out


def decode_framed(resp):
    """{"header": ..., "binary": [{dtype, data}]} of a framed answer (the form
    of x-decoded in the document)."""
    head, tail = split_framed(resp)
    binary, pos = [], 0
    for dtype, nbytes in framed_tensors(head):
        name = {"FP32": "float32", "FP64": "float64", "FP16": "float16",
                "BF16": "bfloat16"}.get(dtype, dtype)
        chunk = tail[pos:pos + nbytes]
        pos += nbytes
        if name == "bfloat16":
            words = np.frombuffer(chunk, dtype="<u2").astype("<u4") << 16
            values = words.view("<f4").astype(float)
        else:
            values = np.frombuffer(chunk, dtype=NP_DTYPE[name]).astype(float)
        binary.append({"dtype": name, "data": [json_number(v) for v in values]})
    assert pos == len(tail), "binary tail has %d bytes, tensors use %d" % (
        len(tail), pos)
    return {"header": head, "binary": binary}


def decode_npy(body):
    """{descr, shape, data} of a .npy answer (the form of x-decoded)."""
    arr = np.load(io.BytesIO(body), allow_pickle=False)
    return {"descr": arr.dtype.str, "shape": list(arr.shape),
            "data": [json_number(v) for v in arr.reshape(-1).astype(float)]}


def json_number(v):
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return int(v) if v == int(v) and abs(v) < 2 ** 53 else v


def decoded_answer(resp):
    """The answer as data: JSON, or x-decoded form for binary ones."""
    mt = media_type(resp)
    if mt == "application/octet-stream":
        return decode_framed(resp)
    if mt == "application/x-npy":
        return decode_npy(resp.body)
    return json.loads(resp.body)


# ---- comparing -----------------------------------------------------------------

def _num(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if v in ("NaN", "Infinity", "-Infinity"):
        return {"NaN": math.nan, "Infinity": math.inf,
                "-Infinity": -math.inf}[v]
    return None


def differences(want, got, where="", rel=REL_TOL, abs_=ABS_TOL, skip=()):
    """Where got differs from want: numbers within rel/abs tolerance (NaN
    equals NaN), everything else exactly; keys in skip are not compared."""
    out = []
    wn, gn = _num(want), _num(got)
    if wn is not None and gn is not None:
        if math.isnan(wn) or math.isnan(gn):
            ok = math.isnan(wn) and math.isnan(gn)
        elif math.isinf(wn) or math.isinf(gn):
            ok = wn == gn
        else:
            ok = abs(wn - gn) <= max(abs_, rel * abs(wn))
        if not ok:
            out.append("%s: want %r, got %r" % (where or "/", want, got))
    elif isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k in skip:
                continue
            if k not in got:
                out.append("%s/%s missing" % (where, k))
            elif k not in want:
                out.append("%s/%s unexpected (%r)" % (where, k, got[k]))
            else:
                out += differences(want[k], got[k], "%s/%s" % (where, k), rel,
                                   abs_, skip)
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            out.append("%s: want %d items, got %d" % (where or "/", len(want),
                                                      len(got)))
        else:
            for i, (w, g) in enumerate(zip(want, got)):
                out += differences(w, g, "%s/%d" % (where, i), rel, abs_, skip)
    elif want != got:
        out.append("%s: want %r, got %r" % (where or "/", want, got))
    return out


def deep_copy(x):
    return copy.deepcopy(x)
