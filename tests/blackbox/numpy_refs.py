"""numpy helpers for the binary black-box tests (.npy, the binary tensor
framing, KServe v2): float64 reference norms, .npy bytes in and out,
bfloat16 as uint16 bit patterns, and reading framed bodies.

numpy is a declared test dependency (Debian's python3-numpy, installed by
`scripts/install-deps.sh test`), so it is imported unconditionally.
"""
import io
import json

import numpy as np

# ---- dtypes ----------------------------------------------------------------------

# /v1 dtype name, KServe v2 datatype, numpy dtype of the raw little-endian
# bytes (bfloat16 travels as uint16 bit patterns)
DTYPES = {
    "float32": ("FP32", np.dtype("<f4")),
    "float64": ("FP64", np.dtype("<f8")),
    "float16": ("FP16", np.dtype("<f2")),
    "bfloat16": ("BF16", np.dtype("<u2")),
}
V2_TO_V1 = {v2: name for name, (v2, _) in DTYPES.items()}


def bf16_bits(a):
    """float values -> bfloat16 bit patterns (uint16), round to nearest even,
    as normd rounds (via float32; NaN kept quiet)."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_values(bits):
    """bfloat16 bit patterns (uint16) -> float32 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def as_dtype(x, name):
    """x (float64) rounded to a /v1 dtype; returns (raw array to send,
    float64 values the server sees)."""
    if name == "bfloat16":
        bits = bf16_bits(x)
        return bits, bf16_values(bits).astype(np.float64)
    raw = np.asarray(x, dtype=np.float64).astype(DTYPES[name][1])
    return raw, raw.astype(np.float64)


def values_of(raw, name):
    """Raw array of a /v1 dtype -> float64 values."""
    if name == "bfloat16":
        return bf16_values(raw).astype(np.float64)
    return np.asarray(raw).astype(np.float64)


# tolerances against the float64 reference, by the output's dtype
TOL = {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-6),
       "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def assert_close(got, want, dtype="float32", what="values"):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64),
                               np.asarray(want, dtype=np.float64),
                               rtol=rtol, atol=atol, err_msg=what)


# ---- reference norms in float64 ---------------------------------------------------
# Each returns a dict: output, and the statistics normd reports.

def ref_layer(x, ndim=1, eps=1e-5, weight=None, bias=None):
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x.ndim - ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    lead = x.shape[:x.ndim - ndim]
    return {"output": y, "mean": mean.reshape(lead), "var": var.reshape(lead),
            "rstd": rstd.reshape(lead)}


def ref_rms(x, ndim=1, eps=1e-6, weight=None):
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x.ndim - ndim, x.ndim))
    ms = (x * x).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(ms + eps)
    y = x * rstd
    if weight is not None:
        y = y * weight
    lead = x.shape[:x.ndim - ndim]
    return {"output": y, "rms": np.sqrt(ms).reshape(lead),
            "rstd": rstd.reshape(lead)}


def _channel(v, ndim):
    """A (C,) vector shaped to broadcast over (N, C, *)."""
    return np.asarray(v, dtype=np.float64).reshape((1, -1) + (1,) * (ndim - 2))


def ref_batch(x, eps=1e-5, weight=None, bias=None, mode="train",
              running_mean=None, running_var=None, momentum=0.1):
    x = np.asarray(x, dtype=np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    out = {}
    if mode == "train":
        mean = x.mean(axis=axes)
        var = ((x - _channel(mean, x.ndim)) ** 2).mean(axis=axes)
        if running_mean is not None:
            out["running_mean"] = (1 - momentum) * np.asarray(running_mean) + momentum * mean
            out["running_var"] = ((1 - momentum) * np.asarray(running_var)
                                  + momentum * var * n / (n - 1))
    else:
        mean = np.asarray(running_mean, dtype=np.float64)
        var = np.asarray(running_var, dtype=np.float64)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - _channel(mean, x.ndim)) * _channel(rstd, x.ndim)
    if weight is not None:
        y = y * _channel(weight, x.ndim)
    if bias is not None:
        y = y + _channel(bias, x.ndim)
    out.update(output=y, mean=mean, var=var, rstd=rstd)
    return out


def ref_group(x, num_groups, eps=1e-5, weight=None, bias=None):
    x = np.asarray(x, dtype=np.float64)
    n, c = x.shape[:2]
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(axis=2, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=2, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = ((g - mean) * rstd).reshape(x.shape)
    if weight is not None:
        y = y * _channel(weight, x.ndim)
    if bias is not None:
        y = y + _channel(bias, x.ndim)
    return {"output": y, "mean": mean.reshape(n, num_groups),
            "var": var.reshape(n, num_groups), "rstd": rstd.reshape(n, num_groups)}


def ref_instance(x, eps=1e-5, weight=None, bias=None):
    x = np.asarray(x, dtype=np.float64)
    n, c = x.shape[:2]
    r = ref_group(x.reshape((n, c, -1)), c, eps, weight, bias)
    r["output"] = r["output"].reshape(x.shape)
    return r


# ---- .npy ---------------------------------------------------------------------------

def npy_bytes(a, version=None):
    """The .npy file numpy writes for a (fortran_order follows a's layout)."""
    f = io.BytesIO()
    np.lib.format.write_array(f, a, version=version, allow_pickle=True)
    return f.getvalue()


def npy_load(body):
    return np.load(io.BytesIO(body), allow_pickle=False)


# ---- binary framing ----------------------------------------------------------------

def framed_body(header, tensors):
    """JSON header (a dict) + the raw bytes of each array in order; returns
    (body, header length)."""
    h = json.dumps(header).encode()
    return h + b"".join(np.ascontiguousarray(t).tobytes() for t in tensors), len(h)


def binary_tensor(shape, dtype, raw, extra=None):
    """A /v1 tensor object whose bytes travel in the tail."""
    t = {"shape": list(shape), "dtype": dtype,
         "parameters": {"binary_data_size": int(np.asarray(raw).nbytes)}}
    t.update(extra or {})
    return t


class Framed:
    """A framed response: the JSON header and a cursor over the tail."""

    def __init__(self, resp):
        assert resp.status == 200, resp
        assert resp.content_type == "application/octet-stream", resp
        hl = resp.header("Inference-Header-Content-Length")
        assert hl is not None and hl.isdigit(), resp.headers
        self.header_length = int(hl)
        assert 0 < self.header_length <= len(resp.body), (hl, len(resp.body))
        self.header = json.loads(resp.body[:self.header_length])
        self.tail = resp.body[self.header_length:]
        self.pos = 0

    def take(self, tensor, dtype_name, shape=None):
        """The next tensor of the tail, described by a header object with
        parameters.binary_data_size; returns the raw numpy array."""
        size = tensor["parameters"]["binary_data_size"]
        assert "data" not in tensor, tensor
        dt = DTYPES[dtype_name][1]
        shape = tensor["shape"] if shape is None else shape
        assert size == int(np.prod(shape)) * dt.itemsize, (size, shape, dt)
        assert self.pos + size <= len(self.tail), "tail too short"
        raw = np.frombuffer(self.tail, dtype=dt, count=size // dt.itemsize,
                            offset=self.pos).reshape(shape)
        self.pos += size
        return raw

    def done(self):
        assert self.pos == len(self.tail), "%d tail bytes, tensors use %d" % (
            len(self.tail), self.pos)
