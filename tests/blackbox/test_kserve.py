"""The KServe v2 / Open Inference Protocol endpoints against the real
daemon, with requests written from the protocol's text:

  GET  v2                                   server metadata {name, version, extensions}
  GET  v2/health/live, v2/health/ready      200 when true, empty bodies
  GET  v2/models/{m}[/versions/{v}]         model metadata {name, versions,
                                            platform, inputs, outputs}
  GET  v2/models/{m}[/versions/{v}]/ready   200 when ready, empty bodies
  POST v2/models/{m}[/versions/{v}]/infer   {id, parameters, inputs: [{name,
       shape, datatype, parameters, data}], outputs: [{name, parameters}]}
       -> {model_name, model_version, id, parameters, outputs: [{name, shape,
       datatype, parameters, data}]}
  errors: {"error": "<message>"}

plus the binary data extension (Inference-Header-Content-Length; inputs with
"binary_data_size", outputs with "binary_data": true or the request
parameter "binary_data_output"). Every model is checked against a numpy
float64 reference; FP16 and BF16 round trip (BF16 as uint16 bit patterns)."""
import json

import numpy as np
import pytest

from numpy_refs import (DTYPES, V2_TO_V1, as_dtype, assert_close, bf16_bits,
                        ref_batch, ref_group, ref_instance,
                        ref_layer, ref_rms, values_of)

MODELS = ["layer_norm", "rms_norm", "batch_norm", "group_norm", "instance_norm"]
JSON = "application/json"
OCTET = "application/octet-stream"


def v2_error(resp, status):
    """The protocol's error form: JSON {"error": "..."} and nothing else."""
    assert resp.status == status, resp
    assert resp.content_type == JSON, resp
    doc = resp.json()
    assert list(doc) == ["error"], doc
    assert isinstance(doc["error"], str) and doc["error"], doc
    return doc["error"]


def infer(daemon, model, request, path=None):
    return daemon.post_json(path or "/v2/models/%s/infer" % model, request)


def infer_ok(daemon, model, request, path=None):
    resp = infer(daemon, model, request, path)
    assert resp.status == 200, resp
    assert resp.content_type == JSON, resp
    doc = resp.json()
    assert doc["model_name"] == model
    assert doc["model_version"] == "1"
    return doc


def outputs_by_name(doc):
    names = [o["name"] for o in doc["outputs"]]
    assert len(names) == len(set(names)), names
    return {o["name"]: o for o in doc["outputs"]}


def v2_input(name, a, datatype="FP32", nested=False):
    a = np.asarray(a)
    data = a.tolist() if nested else a.ravel().tolist()
    return {"name": name, "shape": list(a.shape), "datatype": datatype, "data": data}


def sample(shape, seed, offset=0.0):
    rng = np.random.default_rng(seed)
    return (offset + rng.standard_normal(shape)).astype(np.float32).astype(np.float64)


# One case per model: its inputs, parameters and float64 reference.
def model_case(model, seed=0):
    x = sample((2, 4, 3), seed, offset=1.0)
    wl, bl = sample(3, seed + 1) + 1.0, sample(3, seed + 2)
    wc, bc = sample(4, seed + 3) + 1.0, sample(4, seed + 4)
    rm, rv = sample(4, seed + 5), np.abs(sample(4, seed + 6)) + 0.5
    if model == "layer_norm":
        return {"input": x, "weight": wl, "bias": bl}, {"eps": 1e-3}, \
            ref_layer(x, eps=1e-3, weight=wl, bias=bl)
    if model == "rms_norm":
        return {"input": x, "weight": wl}, {"eps": 1e-3}, ref_rms(x, eps=1e-3, weight=wl)
    if model == "batch_norm":
        return ({"input": x, "weight": wc, "bias": bc, "running_mean": rm,
                 "running_var": rv}, {"momentum": 0.2},
                ref_batch(x, weight=wc, bias=bc, running_mean=rm, running_var=rv,
                          momentum=0.2))
    if model == "group_norm":
        return {"input": x, "weight": wc, "bias": bc}, {"num_groups": 2}, \
            ref_group(x, 2, weight=wc, bias=bc)
    return {"input": x, "weight": wc, "bias": bc}, {}, ref_instance(x, weight=wc, bias=bc)


# ---- server, health, model metadata ------------------------------------------------

def test_server_metadata(daemon):
    resp = daemon.get("/v2")
    assert resp.status == 200, resp
    assert resp.content_type == JSON
    doc = resp.json()
    assert doc["name"] == "normd"
    assert isinstance(doc["version"], str) and doc["version"]
    assert "binary_tensor_data" in doc["extensions"]


@pytest.mark.parametrize("path", ["/v2/health/live", "/v2/health/ready"])
def test_health(daemon, path):
    resp = daemon.get(path)
    assert resp.status == 200, resp
    assert resp.body == b""


@pytest.mark.parametrize("model", MODELS)
def test_model_metadata_and_ready(daemon, model):
    for path in ("/v2/models/" + model, "/v2/models/%s/versions/1" % model):
        resp = daemon.get(path)
        assert resp.status == 200, resp
        assert resp.content_type == JSON
        meta = resp.json()
        assert meta["name"] == model
        assert "1" in meta["versions"]
        assert isinstance(meta["platform"], str)
        names = [t["name"] for t in meta["inputs"]]
        assert names[0] == "input"
        want = {"layer_norm": ["input", "residual", "weight", "bias"],
                "rms_norm": ["input", "residual", "weight"],
                "batch_norm": ["input", "weight", "bias", "running_mean", "running_var"],
                "group_norm": ["input", "weight", "bias"],
                "instance_norm": ["input", "weight", "bias"]}[model]
        assert names == want
        outs = [t["name"] for t in meta["outputs"]]
        assert "output" in outs and "rstd" in outs
        for t in meta["inputs"] + meta["outputs"]:
            assert t["datatype"] in ("FP32", "FP64", "FP16", "BF16")
            assert t["shape"] and all(d == -1 for d in t["shape"]), t
    for path in ("/v2/models/%s/ready" % model, "/v2/models/%s/versions/1/ready" % model):
        resp = daemon.get(path)
        assert resp.status == 200, resp
        assert resp.body == b""


@pytest.mark.parametrize("model", MODELS)
def test_metadata_ranks_match_inference(daemon, model):
    """Each output's declared rank is the rank an inference returns for an
    input of the declared rank."""
    meta = daemon.get("/v2/models/" + model).json()
    rank = len(meta["inputs"][0]["shape"])
    x = sample((2, 4) if rank == 2 else (2, 4, 3), 90)
    inputs = [v2_input("input", x)]
    if model == "batch_norm":
        inputs += [v2_input("running_mean", np.zeros(4)), v2_input("running_var", np.ones(4))]
    if model in ("layer_norm", "rms_norm"):  # the fused add's residual_out too
        inputs += [v2_input("residual", sample(x.shape, 91))]
    params = {"num_groups": 2} if model == "group_norm" else {}
    doc = infer_ok(daemon, model, {"inputs": inputs, "parameters": params})
    got = outputs_by_name(doc)
    assert set(got) == {t["name"] for t in meta["outputs"]}
    for t in meta["outputs"]:
        assert len(got[t["name"]]["shape"]) == len(t["shape"]), (t, got[t["name"]])


def test_unknown_model_and_version(daemon):
    for path in ("/v2/models/nope", "/v2/models/nope/ready",
                 "/v2/models/layer_norm/versions/2",
                 "/v2/models/layer_norm/versions/2/ready",
                 "/v2/models/Layer_Norm"):
        v2_error(daemon.get(path), 404)
    request = {"inputs": [v2_input("input", [[1.0, 2.0]])]}
    v2_error(infer(daemon, "nope", request), 404)
    v2_error(infer(daemon, "layer_norm", request,
                   path="/v2/models/layer_norm/versions/2/infer"), 404)
    v2_error(infer(daemon, "layer_norm", request,
                   path="/v2/models/layer_norm/versions/0/infer"), 404)


def test_wrong_method_is_405_in_error_form(daemon):
    resp = daemon.get("/v2/models/layer_norm/infer")
    v2_error(resp, 405)
    assert "POST" in resp.header("Allow")
    resp = daemon.post_json("/v2/models/layer_norm", {})
    v2_error(resp, 405)


# ---- inference, JSON ---------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_infer_json_every_model(daemon, model):
    tensors, params, ref = model_case(model, seed=MODELS.index(model) * 10)
    request = {"id": "req-" + model, "parameters": params,
               "inputs": [v2_input(name, a) for name, a in tensors.items()]}
    for path in (None, "/v2/models/%s/versions/1/infer" % model):
        doc = infer_ok(daemon, model, request, path)
        assert doc["id"] == "req-" + model
        outs = outputs_by_name(doc)
        out = outs["output"]
        assert out["datatype"] == "FP32"
        assert out["shape"] == [2, 4, 3]
        assert_close(out["data"], ref["output"].ravel(), what=model + " output")
        stats = ["rms", "rstd"] if model == "rms_norm" else ["mean", "var", "rstd"]
        for k in stats:
            assert outs[k]["datatype"] == "FP32"
            assert outs[k]["shape"] == list(ref[k].shape), (k, outs[k]["shape"])
            assert_close(outs[k]["data"], ref[k].ravel(), what="%s %s" % (model, k))
        if model == "batch_norm":
            assert doc["parameters"]["num_batches_tracked"] == 1
            for k in ("running_mean", "running_var"):
                assert_close(outs[k]["data"], ref[k], what=k)
        else:
            assert "running_mean" not in outs


def test_nested_data_equals_flat(daemon):
    x = sample((2, 3, 4), 5)
    flat = infer_ok(daemon, "instance_norm", {"inputs": [v2_input("input", x)]})
    nested = infer_ok(daemon, "instance_norm",
                      {"inputs": [v2_input("input", x, nested=True)]})
    assert flat == nested


def test_outputs_subset(daemon):
    x = sample((3, 5), 6)
    doc = infer_ok(daemon, "layer_norm", {
        "inputs": [v2_input("input", x)],
        "outputs": [{"name": "rstd"}, {"name": "output"}]})
    assert sorted(o["name"] for o in doc["outputs"]) == ["output", "rstd"]
    ref = ref_layer(x)
    outs = outputs_by_name(doc)
    assert_close(outs["rstd"]["data"], ref["rstd"])
    assert_close(outs["output"]["data"], ref["output"].ravel())
    # no "outputs": all of them
    doc = infer_ok(daemon, "layer_norm", {"inputs": [v2_input("input", x)]})
    assert sorted(o["name"] for o in doc["outputs"]) == ["mean", "output", "rstd", "var"]
    assert "id" not in doc


@pytest.mark.parametrize("datatype", ["FP32", "FP64", "FP16", "BF16"])
def test_datatypes_json(daemon, datatype):
    name = V2_TO_V1[datatype]
    raw, xv = as_dtype(sample((4, 6), 7, offset=2.0) * 2, name)
    doc = infer_ok(daemon, "layer_norm",
                   {"inputs": [{"name": "input", "shape": [4, 6], "datatype": datatype,
                                "data": xv.ravel().tolist()}]})
    outs = outputs_by_name(doc)
    assert outs["output"]["datatype"] == datatype
    assert outs["mean"]["datatype"] == ("FP64" if datatype == "FP64" else "FP32")
    ref = ref_layer(xv)
    assert_close(outs["output"]["data"], ref["output"].ravel(), name)
    if datatype in ("FP16", "BF16"):
        # the JSON numbers are the shortest text of 16-bit values: read back
        # and rounded to the format, they are the reference rounded once
        # (one ulp of slack)
        got = np.array(outs["output"]["data"])
        want = ref["output"].ravel()
        if datatype == "FP16":
            g, w = got.astype("<f2").view("<i2"), want.astype("<f2").view("<i2")
        else:
            g, w = bf16_bits(got).view("<i2"), bf16_bits(want).view("<i2")
        assert np.abs(g.astype(np.int32) - w.astype(np.int32)).max() <= 1, (got, want)


# ---- inference, binary data extension ----------------------------------------------

def post_binary(daemon, model, header, tensors, path=None):
    h = json.dumps(header).encode()
    body = h + b"".join(np.ascontiguousarray(t).tobytes() for t in tensors)
    return daemon.request("POST", path or "/v2/models/%s/infer" % model, body=body,
                          headers={"Content-Type": OCTET,
                                   "Inference-Header-Content-Length": str(len(h))})


class Binary:
    """A v2 response with binary outputs: header JSON, then their bytes in
    the order of the header's outputs."""

    def __init__(self, resp):
        assert resp.status == 200, resp
        assert resp.content_type == OCTET, resp
        self.hl = int(resp.header("Inference-Header-Content-Length"))
        self.doc = json.loads(resp.body[:self.hl])
        self.outputs = {}
        pos = self.hl
        for o in self.doc["outputs"]:
            if "data" in o:
                self.outputs[o["name"]] = np.array(o["data"], dtype=np.float64)
                continue
            size = o["parameters"]["binary_data_size"]
            dt = DTYPES[V2_TO_V1[o["datatype"]]][1]
            assert size == int(np.prod(o["shape"])) * dt.itemsize, o
            raw = np.frombuffer(resp.body, dtype=dt, count=size // dt.itemsize, offset=pos)
            self.outputs[o["name"]] = values_of(raw, V2_TO_V1[o["datatype"]]).reshape(o["shape"])
            pos += size
        assert pos == len(resp.body), (pos, len(resp.body))


@pytest.mark.parametrize("model", MODELS)
def test_infer_binary_every_model(daemon, model):
    tensors, params, ref = model_case(model, seed=100 + MODELS.index(model))
    inputs, raws = [], []
    for name, a in tensors.items():
        raw = np.asarray(a, dtype="<f4")
        inputs.append({"name": name, "shape": list(raw.shape), "datatype": "FP32",
                       "parameters": {"binary_data_size": raw.nbytes}})
        raws.append(raw)
    header = {"id": "bin", "parameters": dict(params, binary_data_output=True),
              "inputs": inputs}
    b = Binary(post_binary(daemon, model, header, raws))
    assert b.doc["id"] == "bin"
    assert b.doc["model_name"] == model
    assert all("parameters" in o and "data" not in o for o in b.doc["outputs"])
    assert_close(b.outputs["output"], ref["output"], what=model)
    for k in ("mean", "var", "rms", "rstd", "running_mean", "running_var"):
        if k in ref:
            assert_close(b.outputs[k], ref[k], what=k)


def test_binary_outputs_chosen_per_output(daemon):
    x = sample((3, 4), 8)
    ref = ref_layer(x)
    resp = infer(daemon, "layer_norm", {
        "inputs": [v2_input("input", x)],
        "outputs": [{"name": "output", "parameters": {"binary_data": True}},
                    {"name": "mean", "parameters": {"binary_data": False}},
                    {"name": "rstd", "parameters": {"binary_data": True}}]})
    b = Binary(resp)
    by = {o["name"]: o for o in b.doc["outputs"]}
    assert set(by) == {"output", "mean", "rstd"}
    assert "data" in by["mean"] and "data" not in by["output"] and "data" not in by["rstd"]
    assert_close(b.outputs["output"], ref["output"])
    assert_close(b.outputs["mean"], ref["mean"])
    assert_close(b.outputs["rstd"], ref["rstd"])


def test_spec_example_request(daemon):
    """The binary data extension's own example, with normd's names: a
    "model_name" beside the inputs, inputs as binary data, one output asked
    as binary; the answer is the JSON header then the output's bytes."""
    x = sample((2, 2), 12, offset=1.0).astype("<f4")
    w = np.array([1.5, 0.5], dtype="<f4")
    header = {
        "model_name": "rms_norm",
        "inputs": [
            {"name": "input", "shape": [2, 2], "datatype": "FP32",
             "parameters": {"binary_data_size": 16}},
            {"name": "weight", "shape": [2], "datatype": "FP32",
             "parameters": {"binary_data_size": 8}}],
        "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}
    resp = post_binary(daemon, "rms_norm", header, [x, w])
    assert resp.status == 200, resp
    assert resp.content_type == OCTET
    hl = int(resp.header("Inference-Header-Content-Length"))
    assert len(resp.body) == hl + 16
    doc = json.loads(resp.body[:hl])
    assert doc["model_name"] == "rms_norm"
    assert doc["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [2, 2],
                               "parameters": {"binary_data_size": 16}}]
    y = np.frombuffer(resp.body, dtype="<f4", offset=hl).reshape(2, 2)
    assert_close(y, ref_rms(x.astype(float), weight=w)["output"])
    # a model_name that is not the URL's model
    header["model_name"] = "layer_norm"
    v2_error(post_binary(daemon, "rms_norm", header, [x, w]), 400)


def test_binary_data_false_overrides_binary_data_output(daemon):
    """"binary_data_output": true makes every output binary "unless
    overridden by binary_data on a specific output"."""
    x = sample((3, 4), 13)
    ref = ref_layer(x)
    resp = infer(daemon, "layer_norm", {
        "parameters": {"binary_data_output": True},
        "inputs": [v2_input("input", x)],
        "outputs": [{"name": "output", "parameters": {"binary_data": False}},
                    {"name": "var"}]})
    b = Binary(resp)
    by = {o["name"]: o for o in b.doc["outputs"]}
    assert "data" in by["output"], by["output"]
    assert "binary_data_size" in by["var"]["parameters"]
    assert_close(b.outputs["output"], ref["output"].ravel())
    assert_close(b.outputs["var"], ref["var"])
    # every output JSON: a plain JSON answer
    resp = infer(daemon, "layer_norm", {
        "parameters": {"binary_data_output": True},
        "inputs": [v2_input("input", x)],
        "outputs": [{"name": "output", "parameters": {"binary_data": False}}]})
    assert resp.status == 200, resp
    assert resp.content_type == JSON
    assert resp.header("Inference-Header-Content-Length") is None


@pytest.mark.parametrize("datatype", ["FP16", "BF16", "FP64"])
def test_half_precision_binary_round_trip(daemon, datatype):
    name = V2_TO_V1[datatype]
    raw, xv = as_dtype(sample((4, 8), 9, offset=-1.0) * 3, name)
    wraw, wv = as_dtype(np.linspace(0.25, 2.0, 8), name)
    header = {"inputs": [
        {"name": "input", "shape": [4, 8], "datatype": datatype,
         "parameters": {"binary_data_size": raw.nbytes}},
        {"name": "weight", "shape": [8], "datatype": datatype,
         "parameters": {"binary_data_size": wraw.nbytes}}],
        "outputs": [{"name": "output", "parameters": {"binary_data": True}},
                    {"name": "rms"}]}
    b = Binary(post_binary(daemon, "rms_norm", header, [raw, wraw]))
    o = b.doc["outputs"][0]
    assert o["datatype"] == datatype
    assert o["parameters"]["binary_data_size"] == raw.nbytes
    ref = ref_rms(xv, weight=wv)
    assert_close(b.outputs["output"], ref["output"], name)
    assert_close(b.outputs["rms"], ref["rms"], "float64" if name == "float64" else "float32")


def test_bf16_bit_patterns_exact(daemon):
    """BF16 in binary: the 16-bit patterns that come back are the reference
    rounded to bfloat16 (one ulp of slack)."""
    raw, xv = as_dtype(sample((2, 16), 11, offset=3.0), "bfloat16")
    header = {"parameters": {"binary_data_output": True},
              "inputs": [{"name": "input", "shape": [2, 16], "datatype": "BF16",
                          "parameters": {"binary_data_size": raw.nbytes}}],
              "outputs": [{"name": "output"}]}
    resp = post_binary(daemon, "layer_norm", header, [raw])
    assert resp.status == 200, resp
    hl = int(resp.header("Inference-Header-Content-Length"))
    got = np.frombuffer(resp.body, dtype="<u2", offset=hl)
    assert got.size == 32
    want = bf16_bits(ref_layer(xv)["output"].ravel())
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


# ---- errors ------------------------------------------------------------------------

def test_errors_in_protocol_form(daemon):
    x = v2_input("input", [[1.0, 2.0, 3.0]])
    cases = [
        ("layer_norm", {"inputs": [dict(x, name="x")]}, 400),
        ("layer_norm", {"inputs": [x], "outputs": [{"name": "y"}]}, 400),
        ("rms_norm", {"inputs": [x], "outputs": [{"name": "mean"}]}, 400),
        ("layer_norm", {"inputs": [x, x]}, 400),
        ("layer_norm", {"inputs": [dict(x, datatype="INT32")]}, 400),
        ("layer_norm", {"inputs": []}, 400),
        ("layer_norm", {"input": [1, 2, 3]}, 400),
        ("layer_norm", {"inputs": [x], "id": 5}, 400),
        ("layer_norm", b"{not json", 400),
        ("layer_norm", {"inputs": [{"name": "input", "shape": [3], "datatype": "FP32",
                                    "parameters": {"binary_data_size": 12}}]}, 400),
        ("layer_norm", {"inputs": [dict(x, shape=[1, 4])]}, 422),
        ("layer_norm", {"inputs": [x], "parameters": {"eps": -1}}, 422),
        ("layer_norm", {"inputs": [x], "parameters": {"epsilon": 1}}, 422),
        ("group_norm", {"inputs": [v2_input("input", np.ones((1, 4, 2)))]}, 422),
        ("group_norm", {"inputs": [v2_input("input", np.ones((1, 4, 2)))],
                        "parameters": {"num_groups": 3}}, 422),
        ("batch_norm", {"inputs": [v2_input("input", np.ones((2, 2)))],
                        "parameters": {"mode": "eval"}}, 422),
    ]
    for model, request, status in cases:
        msg = v2_error(infer(daemon, model, request), status)
        assert len(msg) < 1000, msg
    # the messages say what is wrong
    assert "x" in v2_error(infer(daemon, "layer_norm", {"inputs": [dict(x, name="x")]}), 400)
    assert "y" in v2_error(infer(daemon, "layer_norm",
                                 {"inputs": [x], "outputs": [{"name": "y"}]}), 400)


def test_transport_errors_in_protocol_form(daemon):
    x = np.arange(3, dtype="<f4")
    header = {"inputs": [{"name": "input", "shape": [3], "datatype": "FP32",
                          "parameters": {"binary_data_size": 12}}]}
    h = json.dumps(header).encode()
    path = "/v2/models/layer_norm/infer"
    # truncated, extra bytes, header length past the body, not a number
    for body, hl in [(h + x.tobytes()[:8], len(h)), (h + x.tobytes() + b"\0", len(h)),
                     (h + x.tobytes(), len(h) + 100), (h + x.tobytes(), "twelve")]:
        v2_error(daemon.request("POST", path, body=body, headers={
            "Content-Type": OCTET, "Inference-Header-Content-Length": str(hl)}), 400)
    # binary size against shape x datatype: 422
    bad = {"inputs": [dict(header["inputs"][0], datatype="FP64")]}
    hb = json.dumps(bad).encode()
    v2_error(daemon.request("POST", path, body=hb + x.tobytes(), headers={
        "Content-Type": OCTET, "Inference-Header-Content-Length": str(len(hb))}), 422)
    # v2 speaks JSON and the framing only
    v2_error(daemon.request("POST", path, body=b"\x93NUMPY", headers={
        "Content-Type": "application/x-npy"}), 415)
