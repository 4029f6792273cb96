#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (tests/fuzz/corpus/<target>/):
a few valid requests per route and format, and a few near misses, in each
target's input layout (see the comment at the top of each fuzz_<target>.c).
The output is committed; rerun after changing a layout:

    /usr/bin/python3 tests/fuzz/gen_corpus.py

Deterministic: the same files every time (names are the seed's purpose).
"""
import json
import re
import shutil
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus"

# op_t values: the rows of OPS_MAP in server/ops.h, in order (the targets'
# op byte is taken modulo OP_COUNT, so each value below names its op)
OPS_MAP = re.search(r"#define OPS_MAP\(X\)(.*?)\n\n",
                    (HERE.parent.parent / "server" / "ops.h").read_text(), re.S)
OP = {name: i for i, name in enumerate(re.findall(r"X\((\w+),", OPS_MAP.group(1)))}
(LAYER, RMS, BATCH, GROUP, INSTANCE, MOMENTS, MERGE, RESIDUAL, LP, LRN, MVN) = (
    OP[n] for n in ("LAYER", "RMS", "BATCH", "GROUP", "INSTANCE", "MOMENTS",
                    "MOMENTS_MERGE", "RESIDUAL", "LP", "LRN", "MVN"))
(LAYER_BW, RMS_BW, BATCH_BW, GROUP_BW, INSTANCE_BW, LP_BW, LRN_BW, MVN_BW) = (
    OP[n + "_BACKWARD"] for n in ("LAYER", "RMS", "BATCH", "GROUP", "INSTANCE",
                                  "LP", "LRN", "MVN"))
BACKWARD = {LAYER_BW: LAYER, RMS_BW: RMS, BATCH_BW: BATCH, GROUP_BW: GROUP,
            INSTANCE_BW: INSTANCE, LP_BW: LP, LRN_BW: LRN,
            MVN_BW: MVN}  # backward op -> its forward
FAMILY = (LP, LRN, MVN)  # no weight: their backwards answer grad_input alone
V2 = 0x08  # the selector byte's /v2 bit (json, framed)


def sel(op, flags=0):
    """The op byte and the selector byte every layout starts with."""
    return bytes([op, flags])

PATHS = {LAYER: "/v1/norm/layer", RMS: "/v1/norm/rms", BATCH: "/v1/norm/batch",
         GROUP: "/v1/norm/group", INSTANCE: "/v1/norm/instance",
         MOMENTS: "/v1/moments", MERGE: "/v1/moments/merge",
         RESIDUAL: "/v1/residual/simulate", LP: "/v1/norm/lp",
         LRN: "/v1/norm/lrn", MVN: "/v1/norm/mvn"}
PATHS.update({bw: PATHS[fw] + "/backward" for bw, fw in BACKWARD.items()})
MODELS = {LAYER: "layer_norm", RMS: "rms_norm", BATCH: "batch_norm",
          GROUP: "group_norm", INSTANCE: "instance_norm", LP: "lp_norm",
          LRN: "lrn", MVN: "mvn"}
MODELS.update({bw: MODELS[fw] + "_backward" for bw, fw in BACKWARD.items()})


def js(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


# ---- /v1 JSON bodies, per op -------------------------------------------------
V1 = {
    LAYER: [
        {"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]]},
        {"input": {"shape": [2, 3], "dtype": "float16",
                   "data": [1, 2, 3, "NaN", "Infinity", "-Infinity"]},
         "normalized_shape": [3], "weight": [1, 1, 1], "bias": [0, 0, 0],
         "variance": "unbiased", "eps_placement": "outside_sqrt",
         "return": ["output", "stats", "output_stats"]},
        {"input": {"shape": [2, 2, 2], "dtype": "float64",
                   "data": [1, 2, 3, 4, 5, 6, 7, 8]}, "axis": -2,
         "eps": 1e-3, "output_dtype": "bfloat16", "explain": True,
         "histogram_bins": 4, "histogram_range": "separate"},
        {"input": [1, 2], "epsilon": 1},
    ],
    RMS: [
        {"input": [[1, 2, 3, 4]], "weight": [1, 1, 2, 2], "eps": 1e-6},
        {"input": {"shape": [1, 4], "dtype": "bfloat16", "data": [1, -2, 3, -4]},
         "normalized_shape": 4, "return": "stats", "binary_data_output": True},
    ],
    BATCH: [
        {"input": [[1, 2], [3, 4], [5, 9]], "running_mean": [0, 0],
         "running_var": [1, 1], "momentum": None, "num_batches_tracked": 3,
         "return": ["output", "running_stats"]},
        {"input": [[1, 2], [3, 4]], "mode": "eval", "running_mean": [2, 3],
         "running_var": [1, 1], "weight": [1, 2], "bias": [0, 1]},
        {"input": {"shape": [2, 2, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
         "mode": "given", "mean": [1, 2], "var": [1, 4]},
    ],
    GROUP: [
        {"input": {"shape": [1, 4, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
         "num_groups": 2, "weight": [1, 1, 1, 1], "bias": [0, 0, 0, 0]},
        {"input": [[[1, 2]], [[3, 4]]], "num_groups": 3},
    ],
    INSTANCE: [
        {"input": {"shape": [1, 2, 3], "data": [1, 2, 3, 10, 20, 30]},
         "weight": [1, 2], "bias": [0, 1], "return": "output_stats"},
    ],
    MOMENTS: [
        {"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]]},
        {"input": {"shape": [2, 3, 2], "data": list(range(12))},
         "layout": "channels"},
    ],
    MERGE: [
        {"parts": [{"count": [5], "mean": [3], "m2": [10]},
                   {"count": [5], "mean": [6], "m2": [40]}]},
        {"parts": [{"shape": [2], "count": [0, 2], "mean": [0, 1],
                    "m2": [0, "NaN"], "var": [1, 1]}]},
    ],
    RESIDUAL: [
        {"tokens": 4, "d": 8, "layers": 3, "norm": "rms", "placement": "both",
         "seed": 7, "gain": 1.5, "eps": 1e-5},
    ],
    # the backward passes: the forward's fields plus grad_output
    LAYER_BW: [
        {"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]],
         "grad_output": [[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]],
         "weight": [1, 2, 3, 4, 5], "bias": [0, 0, 0, 0, 0.5]},
        {"input": {"shape": [2, 3], "dtype": "float16",
                   "data": [1, 2, 3, "NaN", 5, 5]},
         "grad_output": {"shape": [2, 3], "dtype": "bfloat16",
                         "data": [1, "Infinity", 0, 1, 2, 3]},
         "variance": "unbiased", "eps_placement": "outside_sqrt", "eps": 0,
         "output_dtype": "float64", "explain": True,
         "return": ["grad_input", "steps"]},
        {"input": [[1, 2, 3]], "grad_output": [1, 0, 0]},
        {"input": [[1, 2, 3]], "grad_output": [[1, 0, 0]], "weight": [1, 2]},
    ],
    RMS_BW: [
        {"input": {"shape": [1, 2, 2], "data": [0, 0, 0, 0]},
         "grad_output": {"shape": [1, 2, 2], "dtype": "float64",
                         "data": [1, 2, 3, 4]},
         "normalized_shape": [2, 2], "weight": [[1, 2], [3, 4]], "eps": 0,
         "return": "grad_weight"},
    ],
    BATCH_BW: [
        {"input": [[1, 2], [3, 4], [5, 9]],
         "grad_output": [[1, 0], [0, 1], [0, 0]], "weight": [2, 3],
         "bias": [0, 1], "running_mean": [0, 0], "running_var": [1, 1],
         "momentum": None},
        {"input": [[1, 2], [3, 4]], "grad_output": [[1, 0], [0, 1]],
         "mode": "eval", "running_mean": [2, 3], "running_var": [1, 1],
         "explain": True},
        {"input": {"shape": [2, 2, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
         "grad_output": {"shape": [2, 2, 2], "data": [1, 0, 0, 0, 0, 0, 0, 1]},
         "mode": "given", "mean": [1, 2], "var": [1, 4], "bias": [1, 0]},
    ],
    GROUP_BW: [
        {"input": {"shape": [1, 4, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
         "grad_output": {"shape": [1, 4, 2], "data": [1, 0, 0, 0, 0, 0, 0, 1]},
         "num_groups": 2, "weight": [1, 1, 2, 2], "bias": [0, 0, 0, 1],
         "binary_data_output": True},
        {"input": [[[1, 2]], [[3, 4]]], "grad_output": [[[1, 0]], [[0, 1]]]},
    ],
    INSTANCE_BW: [
        {"input": {"shape": [1, 2, 3], "data": [1, 2, 3, 10, 20, 30]},
         "grad_output": {"shape": [1, 2, 3], "data": [1, 0, 0, 0, 1, 0]},
         "weight": [1, 2], "bias": [0, 1], "return": ["grad_weight", "stats"]},
    ],
    # the rest of the family, forward (with explain and histograms) and back
    LP: [
        {"input": {"shape": [2, 3, 2], "data": [3, 4, 0, 0, 1, 2, 2, 0, 0, 0, 5, "NaN"]},
         "p": 3, "axis": [0, -1], "eps": 0, "explain": True},
        {"input": [[1, -2], [0, 0]], "p": "Infinity", "return": ["histograms", "stats"],
         "histogram_bins": 3, "output_dtype": "float16"},
    ],
    LRN: [
        {"input": {"shape": [1, 4, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
         "size": 2, "alpha": 1, "beta": 0.5, "k": 2, "convention": "onnx",
         "return": ["output", "steps"]},
        {"input": [[1, 2, 3]], "size": 9, "histogram_range": "separate",
         "return": "histograms"},
    ],
    MVN: [
        {"input": {"shape": [2, 2, 1, 2], "data": [1, 2, 3, 4, 5, 6, 7, 9]},
         "explain": True},
        {"input": [[2, 2], [1, 3]], "axes": [1], "eps": 0,
         "return": ["output", "output_stats"]},
    ],
    LP_BW: [
        {"input": [[3, 4], [0, 0]], "grad_output": [[1, 0], [0, 1]], "p": 0.5},
    ],
    LRN_BW: [
        {"input": {"shape": [1, 3, 1], "data": [1, 2, 2]},
         "grad_output": {"shape": [1, 3, 1], "dtype": "float16", "data": [1, 0, 1]},
         "size": 4, "convention": "torch"},
    ],
    MVN_BW: [
        {"input": [[1, 2, 4], [3, 3, 3]], "grad_output": [[1, 0, 0], [0, 1, 0]],
         "axes": [-1], "eps": 0},
    ],
}

# Long numeric arrays in the number forms the JSON fast path parses
# (exponents, signed zero, the proto3 strings, a float32 overflow).
NUMS = b'1.5,-0.25,3e-2,-4E+1,0,-0,12345.678,"NaN","-Infinity",1e39'
FAST = {
    "v1_fast_data": sel(LAYER) + b'{"input":{"shape":[2,10],"dtype":"float32","data":[' +
        NUMS + b"," + NUMS + b']},"weight":[' + NUMS + b"]}",
    "v1_fast_f64": sel(LAYER) + b'{"input":{"shape":[20],"dtype":"float64","data":[' +
        NUMS + b"," + NUMS + b"]}}",
    "v1_fast_nested": sel(LAYER) + b'{"input":[[' + NUMS + b"],[" + NUMS +
        b']],"eps":1e-3}',
    "v2_fast_data": sel(LAYER, V2) + b'{"inputs":[{"name":"input","shape":[2,10],'
        b'"datatype":"FP16","data":[' + NUMS + b"," + NUMS + b"]}]}",
    "v1_fast_backward": sel(LAYER_BW) + b'{"input":{"shape":[2,10],"data":[' + NUMS +
        b"," + NUMS + b']},"grad_output":{"shape":[2,10],"dtype":"float16","data":[' +
        NUMS + b"," + NUMS + b"]}}",
}

# ---- /v2 (KServe v2) JSON bodies ---------------------------------------------
def v2_body(op):
    if op in BACKWARD:
        body = v2_body(BACKWARD[op])
        x = body["inputs"][0]
        body["inputs"].insert(1, dict(x, name="grad_output", datatype="FP32"))
        body["outputs"] = [{"name": "grad_input"},
                           {"name": "grad_weight" if op != LAYER_BW else "grad_input",
                            "parameters": {"binary_data": True}}]
        if BACKWARD[op] in FAMILY:
            body["outputs"] = [{"name": "grad_input",
                                "parameters": {"binary_data": True}}]
        return body
    inputs = [{"name": "input", "shape": [2, 3], "datatype": "FP32",
               "data": [1, 2, 3, 4, 5, 6]}]
    params = {"eps": 1e-5}
    if op in (BATCH, GROUP, INSTANCE):
        inputs = [{"name": "input", "shape": [1, 2, 3], "datatype": "FP64",
                   "data": [[[1, 2, 3], [4, 5, 6]]]},
                  {"name": "weight", "shape": [2], "datatype": "FP16",
                   "data": [1, 2]}]
    if op == GROUP:
        params["num_groups"] = 2
    if op == BATCH:
        inputs.append({"name": "running_mean", "shape": [2], "datatype": "FP32",
                       "data": [0, 0]})
        inputs.append({"name": "running_var", "shape": [2], "datatype": "FP32",
                       "data": [1, 1]})
    if op in FAMILY:  # no weight; LRN needs (N, C, *) and a size
        inputs = [{"name": "input", "shape": [1, 2, 3], "datatype": "FP32",
                   "data": [1, 2, 3, 4, 5, 6]}]
        params = {LP: {"p": 1, "axis": [0, 2]}, LRN: {"size": 2},
                  MVN: {"axes": [1, 2], "eps": 1e-3}}[op]
    outputs = [{"name": "output"},
               {"name": {LP: "norm", LRN: "output", MVN: "rstd"}.get(op, "rstd"),
                "parameters": {"binary_data": True}}]
    return {"id": "seed-%d" % op, "inputs": inputs, "parameters": params,
            "outputs": outputs}


# ---- .npy files --------------------------------------------------------------
def npy(descr, shape, values, fortran=False, version=1, pad_to=64):
    shape_text = "(%s)" % (", ".join(str(d) for d in shape) +
                           ("," if len(shape) == 1 else ""))
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape_text)
    pre = 10 if version == 1 else 12
    header = d.encode() + b" " * ((-(pre + len(d) + 1)) % pad_to) + b"\n"
    magic = b"\x93NUMPY" + bytes([version, 0])
    magic += struct.pack("<H" if version == 1 else "<I", len(header))
    fmt = {"f4": "f", "f8": "d", "f2": "e"}[descr[1:]]
    data = struct.pack(descr[0] + fmt * len(values), *values)
    return magic + header + data


NPYS = {
    "f4_2x4": npy("<f4", [2, 4], [1, 2, 3, 4, 5, 6, 7, 8]),
    "f4_2x2x3": npy("<f4", [2, 2, 3], list(range(12))),
    "f8_be_6": npy(">f8", [6], [0.5, 1, 2, 4, 8, 16]),
    "f2_fortran_3x2": npy("<f2", [3, 2], [1, 2, 3, 4, 5, 6], fortran=True),
    "f4_v2_1x2x2": npy("<f4", [1, 2, 2], [1, -1, 2, -2], version=2),
    "f8_v3_2x3": npy("<f8", [2, 3], [1, 2, 3, 4, 5, 6], version=3),
    "f2_be_fortran_2x2x2": npy(">f2", [2, 2, 2], list(range(8)), fortran=True),
}

# ---- framed bodies: (op, selector, JSON header, binary tail) -----------------
def framed(op, flags, header, tail):
    h = js(header)
    return sel(op, flags) + struct.pack("<H", len(h)) + h + tail


F32 = lambda *v: struct.pack("<%df" % len(v), *v)
FRAMED = {
    "layer_binary_input": framed(LAYER, 0, {
        "input": {"shape": [2, 3], "dtype": "float32",
                  "parameters": {"binary_data_size": 24}},
        "weight": [1, 2, 3]}, F32(1, 2, 3, 4, 5, 6)),
    "batch_binary_running": framed(BATCH, 0, {
        "input": {"shape": [2, 2], "parameters": {"binary_data_size": 16}},
        "running_mean": {"shape": [2], "parameters": {"binary_data_size": 8}},
        "running_var": {"shape": [2], "parameters": {"binary_data_size": 8}},
        "return": ["output", "running_stats"]},
        F32(1, 2, 3, 4) + F32(0, 0) + F32(1, 1)),
    "layer_json_only": framed(LAYER, 0, {"input": [[1, 2], [3, 4]]}, b""),
    "v2_rms_binary": framed(RMS, V2, {
        "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32",
                    "parameters": {"binary_data_size": 16}}],
        "parameters": {"binary_data_output": True}}, F32(1, 2, 3, 4)),
    "v2_group_f16": framed(GROUP, V2, {
        "inputs": [{"name": "input", "shape": [1, 2, 2], "datatype": "FP16",
                    "parameters": {"binary_data_size": 8}}],
        "parameters": {"num_groups": 1}},
        struct.pack("<4e", 1, 2, 3, 4)),
    "header_as_text": sel(LAYER, 0x02) + b"\0\0" + b"27\n" +
        js({"input": [[1, 2], [3, 4]]}) + b"xx",
    "no_header_length": sel(INSTANCE, 0x01) + b"\0\0" +
        js({"input": [[[1, 2]]]}),
    # the backward passes: input, grad_output, weight, bias binary
    "layer_backward_binary": framed(LAYER_BW, 0, {
        "input": {"shape": [2, 3], "dtype": "float32",
                  "parameters": {"binary_data_size": 24}},
        "grad_output": {"shape": [2, 3], "dtype": "float16",
                        "parameters": {"binary_data_size": 12}},
        "weight": {"shape": [3], "parameters": {"binary_data_size": 12}},
        "bias": [0, 0, 1]},
        F32(1, 2, 3, 4, 5, 6) + struct.pack("<6e", 1, 0, 0, 0, 0, 1) +
        F32(1, 2, 3)),
    "batch_backward_eval_binary": framed(BATCH_BW, 0, {
        "input": {"shape": [2, 2], "parameters": {"binary_data_size": 16}},
        "grad_output": {"shape": [2, 2], "parameters": {"binary_data_size": 16}},
        "running_mean": {"shape": [2], "parameters": {"binary_data_size": 8}},
        "running_var": {"shape": [2], "parameters": {"binary_data_size": 8}},
        "mode": "eval", "return": ["grad_input", "steps"]},
        F32(1, 2, 3, 4) + F32(1, 0, 0, 1) + F32(0, 0) + F32(1, 1)),
    "group_backward_short": framed(GROUP_BW, 0, {
        "input": {"shape": [1, 2, 2], "parameters": {"binary_data_size": 16}},
        "grad_output": {"shape": [1, 2, 2], "parameters": {"binary_data_size": 16}},
        "num_groups": 1}, F32(1, 2, 3, 4) + F32(1, 0)),
    "v2_instance_backward_binary": framed(INSTANCE_BW, V2, {
        "inputs": [{"name": "input", "shape": [1, 2, 2], "datatype": "FP32",
                    "parameters": {"binary_data_size": 16}},
                   {"name": "grad_output", "shape": [1, 2, 2], "datatype": "BF16",
                    "parameters": {"binary_data_size": 8}},
                   {"name": "weight", "shape": [2], "datatype": "FP64",
                    "data": [1, 2]}],
        "parameters": {"binary_data_output": True}},
        F32(1, 2, 3, 5) + struct.pack("<4H", 0x3F80, 0, 0, 0x3F80)),
    "lp_binary_explain": framed(LP, 0, {
        "input": {"shape": [2, 3], "parameters": {"binary_data_size": 24}},
        "p": 1, "axis": 0, "explain": True, "binary_data_output": True},
        F32(3, 4, 0, 1, 2, 2)),
    "v2_mvn_backward_binary": framed(MVN_BW, V2, {
        "inputs": [{"name": "input", "shape": [2, 2], "datatype": "FP32",
                    "parameters": {"binary_data_size": 16}},
                   {"name": "grad_output", "shape": [2, 2], "datatype": "FP32",
                    "parameters": {"binary_data_size": 16}}],
        "parameters": {"axes": [0]}}, F32(1, 2, 3, 5) + F32(1, 0, 0, 1)),
}

# ---- query strings (op, selector: body | 0x08 for Accept .npy) --------------
NPY_ACCEPT = 0x08
QUERIES = {
    "layer_eps": (LAYER, 0, "eps=0.001&normalized_shape=4&return=output,stats"),
    "layer_axis": (LAYER, 1, "axis=-2&variance=unbiased&explain=true"),
    "rms_weight": (RMS, 0, "weight=1,1,2,2&output_dtype=float16"),
    "batch_running": (BATCH, 1, "running_mean=0,0&running_var=1,1&momentum=null"),
    "batch_eval": (BATCH, 1, "mode=eval&running_mean=0,0&running_var=1,1&weight=1,2"),
    "group": (GROUP, 1 | NPY_ACCEPT, "num_groups=2"),
    "group_bad": (GROUP, 1, "num_groups=3&num_groups=1"),
    "instance": (INSTANCE, 3, "bias=%30,1&eps=1e-5"),
    "moments": (MOMENTS, 2, "layout=rows&normalized_shape=6"),
    "escapes": (LAYER, 0, "%65ps=%31e-3&return=%00&x&=1&return"),
    # a backward takes no .npy body (415), whatever the query says
    "layer_backward": (LAYER_BW, 0, "eps=0.5&return=grad_input,steps&grad_output=1,0"),
    "lp": (LP, 1, "p=Infinity&axis=0,-1&explain=true&histogram_bins=5"),
    "lrn": (LRN, 1, "size=2&convention=onnx&return=steps,histograms"),
    "mvn": (MVN, 2, "axes=0&eps=0&return=output_stats"),
    "mvn_backward": (MVN_BW, 1, "axes=1,2"),
}

# ---- config (selector: mode) ----------------------------------------------
CONFIGS = {
    "file_small": b"\x00" + js({"port": 9000, "port_doc": "x",
                                 "max_inflight": 8, "cors_origins": "*",
                                 "log_level": "warn"}),
    "file_bad_type": b"\x00" + js({"threads": "4"}),
    "file_dup": b'\x00{"port": 1, "port": 2}',
    "set": b"\x01port=0\nmax_inflight=8\ncors_origins=http://a.example,https://b.example:8443\nlog_level=debug\nhost=::",
    "env": b"\x02NORMD_PORT=9000\nNORMD_MAX_BODY_BYTES=4096\nNORMD_WEB_ROOT=web\nNORMD_DRAIN_TIMEOUT_S=-1",
    "args": b"\x03--port\n9000\n--max-inflight=8\n-p1\n--print-config",
    "args_help": b"\x03-h",
}
if (HERE.parent.parent / "config" / "normd.json").is_file():
    CONFIGS["file_default"] = b"\x00" + (
        HERE.parent.parent / "config" / "normd.json").read_bytes()

# ---- raw HTTP requests ---------------------------------------------------------
def http(path, body=b"", headers=()):
    head = ["POST %s HTTP/1.1" % path, "Host: localhost"]
    head += ["%s: %s" % h for h in headers]
    head.append("Content-Length: %d" % len(body))
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def requests():
    out = {}
    for op, bodies in V1.items():
        out["v1_op%d" % op] = http(PATHS[op], js(bodies[0]),
                                   [("Content-Type", "application/json")])
    for op, model in MODELS.items():
        out["v2_" + model] = http("/v2/models/%s/infer" % model,
                                  js(v2_body(op)),
                                  [("Content-Type", "application/json")])
    out["npy_query"] = http(
        "/v1/norm/layer?eps=0.001&normalized_shape=2,4", NPYS["f4_2x4"],
        [("Content-Type", "application/x-npy"), ("Accept", "application/x-npy")])
    f = FRAMED["layer_binary_input"]
    hl = struct.unpack("<H", f[2:4])[0]
    out["framed"] = http("/v1/norm/layer", f[4:], [
        ("Content-Type", "application/octet-stream"),
        ("Inference-Header-Content-Length", str(hl)),
        ("Accept", "application/json;q=0.5, application/octet-stream")])
    out["v2_versioned"] = http("/v2/models/rms_norm/versions/1/infer",
                               js(v2_body(RMS)),
                               [("Content-Type", "application/json; charset=utf-8")])
    out["unsupported_type"] = http("/v1/norm/layer", b"a,b",
                                   [("Content-Type", "text/csv")])
    out["escaped_path"] = http("/v1/norm/%6Cayer", js(V1[LAYER][0]), [])
    return out


def inflates():
    """fuzz_inflate seeds: selector byte (bit 0 deflate, bits 1-3 chunk
    size, bits 4-7 alignment) + a compressed body: each wrapper, gzip
    members, a small bomb, cut and trailing streams."""
    import gzip
    import zlib
    body = js(V1[LAYER][0])
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = {"gzip": bytes([0x00]) + gzip.compress(body, mtime=0),
           "gzip_1byte_chunks": bytes([0x30]) + gzip.compress(body, mtime=0),
           "zlib": bytes([0x01 | 3 << 1]) + zlib.compress(body),
           "raw": bytes([0x01 | 2 << 1]) + raw.compress(body) + raw.flush(),
           "gzip_members": bytes([0x04]) + gzip.compress(body[:9], mtime=0) + gzip.compress(body[9:], mtime=0),
           "bomb": bytes([0x0a]) + gzip.compress(b"\0" * (1 << 20), 9, mtime=0),
           "cut": bytes([0x01]) + zlib.compress(body)[:-5],
           "trailing": bytes([0x01]) + zlib.compress(body) + b"{}",
           "accept_encoding": bytes([0x00]) + b"gzip;q=0.5, deflate, identity;q=0, *;q=0.1"}
    return out


def write(target, files):
    d = OUT / target
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for name, data in sorted(files.items()):
        (d / name).write_bytes(data)


def main():
    json_seeds = {}
    for op, bodies in V1.items():
        for i, b in enumerate(bodies):
            json_seeds["v1_op%d_%d" % (op, i)] = sel(op) + js(b)
    json_seeds["v1_accept_framed"] = sel(LAYER, 1) + js(V1[LAYER][1])
    json_seeds["v1_accept_npy"] = sel(RMS, 2) + js(V1[RMS][0])
    json_seeds["v1_misaligned"] = sel(BATCH, 0x04) + js(V1[BATCH][0])
    for op in MODELS:
        json_seeds["v2_op%d" % op] = sel(op, V2) + js(v2_body(op))
    json_seeds["malformed"] = sel(LAYER) + b'{"input": [1, 2,'
    json_seeds["deep"] = sel(LAYER) + b'{"input":' + b"[" * 40 + b"1" + b"]" * 40 + b"}"
    json_seeds["v1_backward_accept_framed"] = sel(GROUP_BW, 1) + js(V1[GROUP_BW][0])
    json_seeds["v1_backward_accept_npy"] = sel(LAYER_BW, 2) + js(V1[LAYER_BW][0])
    json_seeds["v1_family_accept_npy"] = sel(MVN, 2) + js(V1[MVN][0])
    json_seeds.update(FAST)
    write("json", json_seeds)
    write("npy", NPYS)
    write("framed", FRAMED)
    write("query", {k: sel(op, f) + q.encode() for k, (op, f, q) in QUERIES.items()})
    write("config", CONFIGS)
    write("request", requests())
    write("inflate", inflates())


if __name__ == "__main__":
    main()
