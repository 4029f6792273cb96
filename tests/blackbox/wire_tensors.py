"""Tensors as normd's wire carries them, for the black-box suites that
compare answers with torch or numpy references in float64 (test_backward.py,
test_family.py): KServe v2 datatype names, tolerances by the answer's dtype
(the daemon computes in double and rounds once), seeded samples, x as the
daemon sees it once sent in a dtype, JSON tensor objects and back."""
import math

import numpy as np

from numpy_refs import DTYPES, as_dtype

V2_TYPE = {name: v2 for name, (v2, _) in DTYPES.items()}

# |got - want| <= rtol * |want| + atol * max|want|, by the answer's dtype: the
# daemon computes in double and rounds once, so this is about one rounding.
TOL = {"float64": (1e-10, 1e-12), "float32": (2e-6, 1e-6),
       "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 8e-3)}


def sample(shape, seed, offset=0.0, scale=1.0):
    rng = np.random.default_rng(seed)
    return offset + scale * rng.standard_normal(shape)


def rounded(x, dtype):
    """x as the daemon sees it once sent in dtype (float64 values)."""
    return as_dtype(np.asarray(x, dtype=np.float64), dtype)[1]


def tensor(x, dtype="float32"):
    """A JSON tensor object of x's values rounded to dtype (exactly what the
    daemon will hold)."""
    v = rounded(x, dtype)
    return {"shape": list(v.shape), "dtype": dtype,
            "data": [jnum(float(e)) for e in v.ravel()]}


def jnum(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def num(v):
    return {"NaN": math.nan, "Infinity": math.inf,
            "-Infinity": -math.inf}.get(v, v) if isinstance(v, str) else v


def arr(t):
    """A response tensor object -> float64 array of its shape."""
    return np.array([num(v) for v in t["data"]], dtype=np.float64).reshape(
        t["shape"])


def assert_close(got, want, dtype="float32", what="values"):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    rtol, atol = TOL[dtype]
    finite = want[np.isfinite(want)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale + 1e-300,
                               equal_nan=True, err_msg=what)
