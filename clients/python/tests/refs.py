"""numpy references (float64) for the client's tests, written from the
formulas of api/openapi.yaml (PyTorch's / ONNX's definitions)."""
import numpy as np


def layer(x, ndim=1, eps=1e-5, weight=None, bias=None, unbiased=False,
          outside=False):
    axes = tuple(range(x.ndim - ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True, ddof=1 if unbiased else 0)
    rstd = 1 / (np.sqrt(var) + eps) if outside else 1 / np.sqrt(var + eps)
    y = (x - mean) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    lead = x.shape[:x.ndim - ndim]
    return y, mean.reshape(lead), var.reshape(lead), rstd.reshape(lead)


def rms(x, ndim=1, eps=1e-6, weight=None):
    axes = tuple(range(x.ndim - ndim, x.ndim))
    ms = (x * x).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(ms + eps)
    y = x * rstd * (1 if weight is None else weight)
    lead = x.shape[:x.ndim - ndim]
    return y, np.sqrt(ms).reshape(lead), rstd.reshape(lead)


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _affine(y, x, weight, bias):
    if weight is not None:
        y = y * weight.reshape(_channel_shape(x))
    if bias is not None:
        y = y + bias.reshape(_channel_shape(x))
    return y


def batch(x, eps=1e-5, weight=None, bias=None):
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = _affine((x - mean) / np.sqrt(var + eps), x, weight, bias)
    unbiased = x.var(axis=axes, ddof=1)
    return y, mean.ravel(), var.ravel(), unbiased


def batch_eval(x, mean, var, eps=1e-5, weight=None, bias=None):
    s = _channel_shape(x)
    y = (x - mean.reshape(s)) / np.sqrt(var.reshape(s) + eps)
    return _affine(y, x, weight, bias)


def group(x, num_groups, eps=1e-5, weight=None, bias=None):
    n = x.shape[0]
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(axis=2, keepdims=True)
    var = g.var(axis=2, keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
    return _affine(y, x, weight, bias), mean[..., 0], var[..., 0]


def instance(x, eps=1e-5, weight=None, bias=None):
    return group(x, x.shape[1], eps, weight, bias)


def lp(x, p=2.0, axis=-1, eps=1e-12):
    if p == np.inf:
        norm = np.abs(x).max(axis=axis, keepdims=True)
    else:
        norm = (np.abs(x) ** p).sum(axis=axis, keepdims=True) ** (1 / p)
    return x / np.maximum(norm, eps), np.squeeze(norm, axis=axis)


def lrn(x, size, alpha=1e-4, beta=0.75, k=1.0, convention="torch"):
    c = x.shape[1]
    sq = x * x
    out = np.empty_like(x)
    for ci in range(c):
        if convention == "torch":
            lo, hi = ci - size // 2, ci + (size - 1) // 2
        else:  # ONNX: [c - floor((size-1)/2), c + ceil((size-1)/2)]
            lo, hi = ci - (size - 1) // 2, ci + -(-(size - 1) // 2)
        window = sq[:, max(lo, 0):min(hi, c - 1) + 1].sum(axis=1)
        out[:, ci] = x[:, ci] / (k + alpha / size * window) ** beta
    return out


def mvn(x, axes=(0, 2, 3), eps=1e-9):
    axes = tuple(axes)
    mean = x.mean(axis=axes, keepdims=True)
    std = x.std(axis=axes, keepdims=True)
    return (x - mean) / (std + eps)
