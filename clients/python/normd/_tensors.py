"""Tensors on normd's two wire formats (api/openapi.yaml, "Tensors" and
"Three wire formats"): the JSON object form ``{"shape", "dtype", "data"}``
with non-finite values spelled as the proto3 strings, and the binary
tensor framing of the KServe v2 / Triton HTTP protocol (a JSON header of
Inference-Header-Content-Length bytes, then each tensor's raw
little-endian bytes in header order).

numpy has no bfloat16. When the ``ml_dtypes`` package is importable its
``bfloat16`` is used in both directions; otherwise bfloat16 answers are
widened to float32 (exactly: a bfloat16 is the top half of a float32) and
a bfloat16 request tensor is written with :func:`bfloat16`.
"""
import json
import math

import numpy as np

try:  # optional: the only non-stdlib dependency besides numpy, never required
    import ml_dtypes as _ml_dtypes
    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the host
    _ml_dtypes = None
    BFLOAT16 = None

# The wire dtypes (the Dtype schema) and their little-endian numpy forms;
# bfloat16 travels as its 16 raw bits.
_WIRE = {
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype("<u2"),
}
DTYPES = tuple(_WIRE)

_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


class BFloat16Values:
    """Values to be sent as a bfloat16 tensor when ml_dtypes is missing.

    ``values`` is a float32 array; normd rounds each value to bfloat16 when
    it reads a JSON tensor, and the binary framing sends the bits rounded
    here the same way (to nearest, ties to even).
    """

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)

    @property
    def shape(self):
        """The shape of the values."""
        return self.values.shape

    def __repr__(self):
        return "bfloat16(%r)" % (self.values,)


def bfloat16(values):
    """Marks ``values`` as a bfloat16 tensor for a request.

    With ml_dtypes importable this is ``np.asarray(values,
    dtype=ml_dtypes.bfloat16)``; without it, a :class:`BFloat16Values`
    wrapper around the float32 values, which the client sends with dtype
    ``"bfloat16"``.
    """
    if BFLOAT16 is not None:
        return np.asarray(values, dtype=BFLOAT16)
    return BFloat16Values(values)


def _float32_to_bfloat16_bits(values):
    """Round-to-nearest-even of float32 values to bfloat16 bit patterns
    (the rounding normd applies when it reads a bfloat16 JSON value); NaN
    stays a quiet NaN."""
    bits = np.ascontiguousarray(values, dtype="<f4").view("<u4")
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    nan = np.isnan(values)
    rounded[nan] = (bits[nan] >> 16) | 0x0040
    return rounded.astype("<u2")


def _bfloat16_bits_to_float32(bits):
    return (bits.astype("<u4") << 16).view("<f4").astype(np.float32)


def wire_array(value, name):
    """(array, wire dtype name) for a request tensor.

    Arrays of float32, float64, float16 (and ml_dtypes.bfloat16) keep
    their dtype; :class:`BFloat16Values` is bfloat16; anything else that
    numpy reads as numbers (lists, integers, booleans) becomes float64.
    """
    if isinstance(value, BFloat16Values):
        return value.values, "bfloat16"
    array = np.asarray(value)
    if BFLOAT16 is not None and array.dtype == BFLOAT16:
        return array, "bfloat16"
    if array.dtype.kind == "f":
        for dtype_name in ("float32", "float64", "float16"):
            if array.dtype == np.dtype(dtype_name):
                return array, dtype_name
        raise TypeError("%s: dtype %s is not one normd takes (%s)"
                        % (name, array.dtype, ", ".join(DTYPES)))
    if array.dtype.kind in "iub":
        return array.astype(np.float64), "float64"
    raise TypeError("%s: expected an array of numbers, got dtype %s"
                    % (name, array.dtype))


def json_numbers(array):
    """A flat list of JSON-ready numbers: every value exactly (as the
    double it widens to) and the non-finite ones as proto3 strings."""
    flat = np.asarray(array, dtype=np.float64).ravel()
    values = flat.tolist()
    if not np.isfinite(flat).all():
        values = [v if math.isfinite(v) else _NONFINITE.get(v, "NaN")
                  for v in values]
    return values


def json_tensor(value, name):
    """The JSON object form of a request tensor."""
    array, dtype_name = wire_array(value, name)
    return {"shape": list(array.shape), "dtype": dtype_name,
            "data": json_numbers(array)}


def binary_tensor(value, name):
    """(header object, raw little-endian bytes) of a request tensor for
    the binary framing."""
    array, dtype_name = wire_array(value, name)
    if dtype_name == "bfloat16":
        if BFLOAT16 is not None and array.dtype == BFLOAT16:
            raw = np.ascontiguousarray(array).view(np.uint16).astype("<u2")
        else:
            raw = _float32_to_bfloat16_bits(array)
    else:
        raw = np.ascontiguousarray(array, dtype=_WIRE[dtype_name])
    data = raw.tobytes()
    return ({"shape": list(array.shape), "dtype": dtype_name,
             "parameters": {"binary_data_size": len(data)}}, data)


def nbytes(value):
    """How many bytes a request tensor's values take in the binary framing."""
    array, dtype_name = wire_array(value, "tensor")
    return array.size * _WIRE[dtype_name].itemsize


def result_dtype(dtype_name):
    """The numpy dtype an answer tensor of this wire dtype is returned in:
    its own, and for bfloat16 ml_dtypes.bfloat16 or else float32."""
    if dtype_name == "bfloat16":
        return BFLOAT16 if BFLOAT16 is not None else np.dtype(np.float32)
    if dtype_name not in _WIRE:
        raise ValueError("normd answered an unknown dtype %r" % (dtype_name,))
    return np.dtype(dtype_name)


def number_array(values, shape=None):
    """A float64 array of JSON numbers (the proto3 strings read as the
    values they name), reshaped when a shape is given."""
    array = np.array(values, dtype=np.float64)
    return array.reshape(shape) if shape is not None else array


def from_json_tensor(obj):
    """The numpy array of an answer tensor in JSON object form."""
    shape = tuple(obj["shape"])
    values = number_array(obj["data"], shape)
    if obj["dtype"] == "bfloat16" and BFLOAT16 is None:
        # The text has the fewest digits that read back to the bfloat16
        # value *in bfloat16*: round to it (via float32, an innocuous
        # double rounding: 24 >= 2 * 8 + 2 bits) rather than keep the
        # nearest float32 to the text.
        bits = _float32_to_bfloat16_bits(values.astype(np.float32))
        return _bfloat16_bits_to_float32(bits).reshape(shape)
    return values.astype(result_dtype(obj["dtype"]))


def from_binary_tensor(obj, buffer, offset):
    """(array, next offset) for an answer tensor whose bytes are at
    ``offset`` in ``buffer`` (the binary part of a framed answer)."""
    size = obj["parameters"]["binary_data_size"]
    dtype_name = obj["dtype"]
    wire = _WIRE.get(dtype_name)
    if wire is None:
        raise ValueError("normd answered an unknown dtype %r" % (dtype_name,))
    shape = tuple(obj["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    if size != count * wire.itemsize or offset + size > len(buffer):
        raise ValueError("framed answer: tensor of shape %s and dtype %s does "
                         "not fit its %d bytes at offset %d of %d"
                         % (list(shape), dtype_name, size, offset, len(buffer)))
    raw = np.frombuffer(buffer, dtype=wire, count=count, offset=offset)
    if dtype_name == "bfloat16":
        if BFLOAT16 is not None:
            array = raw.astype(np.uint16).view(BFLOAT16)
        else:
            array = _bfloat16_bits_to_float32(raw)
    else:
        array = raw.astype(wire.newbyteorder("="), copy=False)
    return array.reshape(shape), offset + size


def framed_body(header, blobs):
    """The request body of the binary framing and its header length."""
    head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    return head + b"".join(blobs), len(head)
