"""The answers of normd's operations as small typed objects.

Tensors (``output``, ``residual_out``, ``running_mean``, the gradients)
are numpy arrays in the dtype normd answered them in (bfloat16 as
ml_dtypes.bfloat16 when importable, else float32). Statistics, moments and
curves are float64 arrays: they hold the numbers normd wrote, in float32
precision unless the input was float64 (moments always float64). A member
the answer did not carry (see the ``return_`` argument) is None.
"""
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from ._tensors import from_json_tensor, number_array


@dataclass
class Stats:
    """The statistics a norm used, one entry per normalized group, shaped
    as ``shape`` (the leading dims for layer / RMS norm, ``(C,)`` for batch,
    ``(N, num_groups)`` for group, ``(N, C)`` for instance norm).

    ``mean``, ``var`` and ``rstd`` (1 / sqrt(var + eps)) for the centering
    norms and MVN; ``rms`` and ``rstd`` for RMS norm; ``norm`` (||x||_p
    before the clamp) for Lp norm.
    """
    shape: tuple
    mean: Optional[np.ndarray] = None
    var: Optional[np.ndarray] = None
    rstd: Optional[np.ndarray] = None
    rms: Optional[np.ndarray] = None
    norm: Optional[np.ndarray] = None

    @classmethod
    def from_json(cls, obj):
        """From the answer's ``stats`` or ``output_stats`` object."""
        if obj is None:
            return None
        shape = tuple(obj["shape"])
        values = {k: number_array(v, shape) for k, v in obj.items()
                  if k != "shape"}
        return cls(shape=shape, **values)


@dataclass
class Step:
    """One intermediate tensor of ``explain``: its ``name`` (``mean``,
    ``centered``, ``var``, ``std``, ``normalized``, ``scaled``, ``output``,
    ``mean_square``, ``rms``; for a backward ``g``, ``xhat``, ``mean_g``,
    ``mean_g_xhat``, ``grad_input``) and its values as a float64 array."""
    name: str
    data: np.ndarray

    @classmethod
    def list_from_json(cls, items):
        """The answer's ``steps`` list, or None."""
        if items is None:
            return None
        return [cls(s["name"], number_array(s["data"], tuple(s["shape"])))
                for s in items]


@dataclass
class Histogram:
    """``counts[i]`` values fell in [edges[i], edges[i + 1]); non-finite
    values are counted apart in ``nonfinite``."""
    edges: np.ndarray
    counts: np.ndarray
    nonfinite: int


@dataclass
class Histograms:
    """Histograms of the input and the output over ``bins`` bins, on one
    range (``range == "shared"``) or each on its own (``"separate"``)."""
    bins: int
    range: str
    input: Histogram
    output: Histogram

    @classmethod
    def from_json(cls, obj):
        """From the answer's ``histograms`` object, or None."""
        if obj is None:
            return None

        def one(h):
            return Histogram(number_array(h["edges"]),
                             np.array(h["counts"], dtype=np.int64),
                             int(h["nonfinite"]))
        return cls(obj["bins"], obj["range"], one(obj["input"]),
                   one(obj["output"]))


def _tensor(obj, tensors, name):
    """A tensor member: decoded from the framed answer's binary part
    (``tensors``) or from its JSON object form."""
    if name in tensors:
        return tensors[name]
    value = obj.get(name)
    return from_json_tensor(value) if value is not None else None


@dataclass
class NormResult:
    """The answer of a forward norm (layer, RMS, batch, group, instance,
    Lp, LRN, MVN).

    Attributes:
        output: the normalized tensor, the input's shape, in output_dtype.
        stats: the :class:`Stats` used (LRN has none).
        residual_out: with a fused ``residual`` - h = input + residual, the
            tensor that was normalized, in the input's dtype.
        running_mean, running_var: batch norm in train mode with running
            statistics - their updated values, in the dtype they were sent.
        num_batches_tracked: with them - the given count plus one.
        output_stats: with ``"output_stats"`` in ``return_`` - the output's
            :class:`Stats` over the same groups (mean, var; rms for RMS).
        steps: with ``explain`` - the list of :class:`Step`.
        histograms: with ``"histograms"`` in ``return_``.
    """
    output: Optional[np.ndarray] = None
    stats: Optional[Stats] = None
    residual_out: Optional[np.ndarray] = None
    running_mean: Optional[np.ndarray] = None
    running_var: Optional[np.ndarray] = None
    num_batches_tracked: Optional[int] = None
    output_stats: Optional[Stats] = None
    steps: Optional[List[Step]] = None
    histograms: Optional[Histograms] = None

    @classmethod
    def from_answer(cls, obj, tensors):
        """From a decoded answer: its JSON (or framed header) object and
        the tensors of its binary part by name."""
        return cls(output=_tensor(obj, tensors, "output"),
                   stats=Stats.from_json(obj.get("stats")),
                   residual_out=_tensor(obj, tensors, "residual_out"),
                   running_mean=_tensor(obj, tensors, "running_mean"),
                   running_var=_tensor(obj, tensors, "running_var"),
                   num_batches_tracked=obj.get("num_batches_tracked"),
                   output_stats=Stats.from_json(obj.get("output_stats")),
                   steps=Step.list_from_json(obj.get("steps")),
                   histograms=Histograms.from_json(obj.get("histograms")))


@dataclass
class BackwardResult:
    """The answer of a ``*_backward`` operation.

    Attributes:
        grad_input: d loss / d input, the input's shape, in output_dtype.
        grad_weight: d loss / d weight (only when a weight was sent).
        grad_bias: d loss / d bias (only when a bias was sent).
        stats: the forward's :class:`Stats`.
        steps: with ``explain`` - the list of :class:`Step`.
    """
    grad_input: Optional[np.ndarray] = None
    grad_weight: Optional[np.ndarray] = None
    grad_bias: Optional[np.ndarray] = None
    stats: Optional[Stats] = None
    steps: Optional[List[Step]] = None

    @classmethod
    def from_answer(cls, obj, tensors):
        """As :meth:`NormResult.from_answer`."""
        return cls(grad_input=_tensor(obj, tensors, "grad_input"),
                   grad_weight=_tensor(obj, tensors, "grad_weight"),
                   grad_bias=_tensor(obj, tensors, "grad_bias"),
                   stats=Stats.from_json(obj.get("stats")),
                   steps=Step.list_from_json(obj.get("steps")))


@dataclass
class Moments:
    """Raw moments per group, float64 arrays shaped ``shape``: ``count``,
    ``mean``, ``m2`` (the sum of squared deviations from the mean) and
    ``var`` = m2 / count (biased; NaN for an empty group). Pass several to
    :meth:`normd.Client.merge_moments` to combine shards."""
    shape: tuple
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    var: np.ndarray

    @classmethod
    def from_answer(cls, obj, tensors=None):
        """From the answer of /v1/moments or /v1/moments/merge."""
        shape = tuple(obj["shape"])
        return cls(shape, *(number_array(obj[k], shape)
                            for k in ("count", "mean", "m2", "var")))


@dataclass
class ResidualCurves:
    """One residual placement's curves (float64 arrays): ``rms`` of
    x_0 .. x_L, ``rel_update`` ||x_{t+1} - x_t|| / ||x_t||, ``cosine``
    between x_t and x_{t+1}, ``cos_to_input`` between x_0 and x_t; with
    gradients also ``loss`` (a float) and the gradient norms ``grad_w1``,
    ``grad_w2`` (per block) and ``grad_stream`` (at each depth)."""
    rms: np.ndarray
    rel_update: np.ndarray
    cosine: np.ndarray
    cos_to_input: np.ndarray
    loss: Optional[float] = None
    grad_w1: Optional[np.ndarray] = None
    grad_w2: Optional[np.ndarray] = None
    grad_stream: Optional[np.ndarray] = None

    @classmethod
    def from_json(cls, obj):
        """From one placement's object, or None."""
        if obj is None:
            return None
        arrays = {k: number_array(v) for k, v in obj.items() if k != "loss"}
        loss = obj.get("loss")
        return cls(loss=None if loss is None else float(number_array(loss)),
                   **arrays)


@dataclass
class ResidualResult:
    """The answer of :meth:`normd.Client.simulate_residual`: the settings
    used and the curves of each placement that ran (``pre``, ``post``,
    ``deepnorm``; None for those that did not)."""
    tokens: int
    d: int
    layers: int
    norm: str
    seed: int
    classes: Optional[int] = None
    pre: Optional[ResidualCurves] = None
    post: Optional[ResidualCurves] = None
    deepnorm: Optional[ResidualCurves] = None
    placements: list = field(default_factory=list)

    @classmethod
    def from_answer(cls, obj, tensors=None):
        """From the answer of /v1/residual/simulate."""
        names = [p for p in ("pre", "post", "deepnorm") if p in obj]
        return cls(obj["tokens"], obj["d"], obj["layers"], obj["norm"],
                   obj["seed"], obj.get("classes"),
                   *(ResidualCurves.from_json(obj.get(p))
                     for p in ("pre", "post", "deepnorm")),
                   placements=names)
