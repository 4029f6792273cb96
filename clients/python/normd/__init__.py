"""normd: a Python client of the normd tensor-normalization service.

    >>> import numpy as np, normd
    >>> c = normd.Client("http://localhost:8080")
    >>> r = c.layer_norm(np.random.randn(4, 8).astype(np.float32), eps=1e-5)
    >>> r.output.dtype, r.output.shape, r.stats.mean.shape
    (dtype('float32'), (4, 8), (4,))

One method per operation of the /v1 API (the five norms, Lp / LRN / MVN,
every backward, moments and their merge, the residual experiment), numpy
arrays in and out with their dtype kept (float32, float64, float16;
bfloat16 as ml_dtypes.bfloat16 when that package is importable, else
answered as float32 and sent with :func:`bfloat16`), JSON for small
requests and the KServe v2 binary tensor framing for large ones, and
normd's problem codes as exceptions (:class:`Error` and its subclasses).
Standard library and numpy only.
"""
from ._tensors import BFLOAT16, BFloat16Values, bfloat16
from .client import Client
from .errors import (CODE_CLASSES, BadRequest, Draining, Error, FieldError,
                     InvalidRequest, MethodNotAllowed, NotAcceptable, NotFound,
                     Overloaded, ProtocolError, ServerError, ShapeError,
                     TensorError, TooLarge, TransportError, Unauthorized,
                     Unavailable, UnsupportedMediaType)
from .results import (BackwardResult, Histogram, Histograms, Moments,
                      NormResult, ResidualCurves, ResidualResult, Stats, Step)

__version__ = "0.1.0"

__all__ = [
    "Client", "bfloat16", "BFLOAT16", "BFloat16Values",
    "Error", "TransportError", "ProtocolError", "BadRequest", "Unauthorized",
    "NotFound", "MethodNotAllowed", "NotAcceptable", "TooLarge",
    "UnsupportedMediaType", "InvalidRequest", "FieldError", "TensorError",
    "ShapeError", "ServerError", "Unavailable", "Overloaded", "Draining",
    "CODE_CLASSES",
    "NormResult", "BackwardResult", "Stats", "Step", "Histogram",
    "Histograms", "Moments", "ResidualCurves", "ResidualResult",
]
