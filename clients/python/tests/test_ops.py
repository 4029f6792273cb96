"""Every Client method against the live daemon, on both transports (the
`client` fixture runs each test once on JSON and once on the binary
framing), compared with numpy references in float64 (refs.py)."""
import math

import numpy as np
import pytest

import normd
import refs
from conftest import check_transport

TIGHT = dict(rtol=1e-12, atol=1e-12)  # float64 in, double arithmetic


def rng(seed):
    return np.random.default_rng(seed)


def close(got, want, **tol):
    np.testing.assert_allclose(got, want, **(tol or TIGHT))


# ---- the five norms ------------------------------------------------------------------

def test_layer_norm_defaults_and_affine(client):
    x = rng(1).standard_normal((3, 4, 6)) * 3 + 2
    w, b = rng(2).standard_normal(6), rng(3).standard_normal(6)
    r = client.layer_norm(x, w, b)
    check_transport(client)
    y, mean, var, rstd = refs.layer(x, weight=w, bias=b)
    assert r.output.dtype == np.float64 and r.output.shape == x.shape
    close(r.output, y)
    assert r.stats.shape == (3, 4)
    close(r.stats.mean, mean)
    close(r.stats.var, var)
    close(r.stats.rstd, rstd)
    assert r.residual_out is None and r.running_mean is None


def test_layer_norm_variants(client):
    x = rng(4).standard_normal((2, 3, 5))
    r = client.layer_norm(x, normalized_shape=[3, 5], eps=1e-3)
    y, mean, _, _ = refs.layer(x, ndim=2, eps=1e-3)
    close(r.output, y)
    close(r.stats.mean, mean)
    r = client.layer_norm(x, axis=1, variance="unbiased",
                          eps_placement="outside_sqrt", eps=1e-6)
    y, _, var, rstd = refs.layer(x, ndim=2, eps=1e-6, unbiased=True,
                                 outside=True)
    close(r.output, y)
    close(r.stats.var, var)
    close(r.stats.rstd, rstd)
    check_transport(client)


def test_layer_norm_fused_residual(client):
    x, res = rng(5).standard_normal((4, 8)), rng(6).standard_normal((4, 8))
    r = client.layer_norm(x, residual=res)
    check_transport(client)
    close(r.residual_out, x + res)
    close(r.output, refs.layer(x + res)[0])


def test_rms_norm(client):
    x, w = rng(7).standard_normal((5, 16)), rng(8).standard_normal(16)
    r = client.rms_norm(x, w, eps=1e-5)
    check_transport(client)
    y, rms, rstd = refs.rms(x, eps=1e-5, weight=w)
    close(r.output, y)
    close(r.stats.rms, rms)
    close(r.stats.rstd, rstd)
    assert r.stats.mean is None
    res = rng(9).standard_normal((5, 16))
    r = client.rms_norm(x, residual=res)
    close(r.residual_out, x + res)
    close(r.output, refs.rms(x + res)[0])


def test_batch_norm_train_updates_running_stats(client):
    x = rng(10).standard_normal((6, 3, 4)) + 1
    w, b = rng(11).standard_normal(3), rng(12).standard_normal(3)
    rm, rv = rng(13).standard_normal(3), rng(14).random(3) + 0.5
    r = client.batch_norm(x, w, b, running_mean=rm, running_var=rv,
                          momentum=0.25, num_batches_tracked=4)
    check_transport(client)
    y, mean, var, unbiased = refs.batch(x, weight=w, bias=b)
    close(r.output, y)
    close(r.stats.mean, mean)
    close(r.stats.var, var)
    close(r.running_mean, 0.75 * rm + 0.25 * mean)
    close(r.running_var, 0.75 * rv + 0.25 * unbiased)
    assert r.num_batches_tracked == 5


def test_batch_norm_cumulative_momentum(client):
    """momentum=None is the API's null: a cumulative average over
    num_batches_tracked + 1 batches."""
    x = rng(15).standard_normal((4, 2, 3))
    rm, rv = np.array([1.0, -1.0]), np.array([2.0, 0.5])
    r = client.batch_norm(x, running_mean=rm, running_var=rv, momentum=None,
                          num_batches_tracked=3)
    _, mean, _, unbiased = refs.batch(x)
    close(r.running_mean, (3 * rm + mean) / 4)
    close(r.running_var, (3 * rv + unbiased) / 4)
    assert r.num_batches_tracked == 4


def test_batch_norm_eval_and_given(client):
    x = rng(16).standard_normal((3, 4, 2, 2))
    rm, rv = rng(17).standard_normal(4), rng(18).random(4) + 0.1
    r = client.batch_norm(x, running_mean=rm, running_var=rv, mode="eval")
    close(r.output, refs.batch_eval(x, rm, rv))
    assert r.running_mean is None
    r = client.batch_norm(x, mean=rm, var=rv, mode="given", eps=1e-3)
    close(r.output, refs.batch_eval(x, rm, rv, eps=1e-3))
    check_transport(client)


def test_group_norm(client):
    x = rng(19).standard_normal((2, 6, 5))
    w, b = rng(20).standard_normal(6), rng(21).standard_normal(6)
    r = client.group_norm(x, 3, w, b)
    check_transport(client)
    y, mean, var = refs.group(x, 3, weight=w, bias=b)
    close(r.output, y)
    assert r.stats.shape == (2, 3)
    close(r.stats.mean, mean)
    close(r.stats.var, var)


def test_instance_norm(client):
    x = rng(22).standard_normal((2, 3, 4, 4))
    w = rng(23).standard_normal(3)
    r = client.instance_norm(x, w, eps=1e-4)
    check_transport(client)
    y, mean, var = refs.instance(x, eps=1e-4, weight=w)
    close(r.output, y)
    assert r.stats.shape == (2, 3)
    close(r.stats.var, var)


def test_return_explain_and_histograms(client):
    x = rng(24).standard_normal((2, 5))
    r = client.layer_norm(x, return_=["output", "output_stats", "histograms"],
                          histogram_bins=4, histogram_range="separate")
    assert r.stats is None
    close(r.output_stats.mean, np.zeros(2), atol=1e-12)
    close(r.output_stats.var, np.ones(2), rtol=1e-4)
    h = r.histograms
    assert (h.bins, h.range) == (4, "separate")
    assert h.input.counts.sum() == 10 and len(h.input.edges) == 5
    assert h.output.nonfinite == 0
    r = client.layer_norm(x, return_="stats", explain=True)
    assert r.output is None
    names = [s.name for s in r.steps]
    assert names == ["mean", "centered", "var", "std", "normalized", "output"]
    close(r.steps[1].data, x - x.mean(axis=1, keepdims=True))


# ---- Lp, LRN, MVN -------------------------------------------------------------------------

@pytest.mark.parametrize("p,axis", [(2, -1), (1, [0, 2]), (math.inf, 1)])
def test_lp_norm(client, p, axis):
    x = rng(25).standard_normal((3, 4, 5))
    r = client.lp_norm(x, p=p, axis=axis)
    check_transport(client)
    ax = tuple(axis) if isinstance(axis, list) else axis
    y, norm = refs.lp(x, p, ax)
    close(r.output, y, rtol=1e-12, atol=1e-15)
    close(r.stats.norm, norm, rtol=1e-12)


@pytest.mark.parametrize("size,convention", [(3, "torch"), (4, "torch"),
                                             (4, "onnx")])
def test_lrn(client, size, convention):
    x = rng(26).standard_normal((2, 7, 3))
    r = client.lrn(x, size, alpha=0.5, beta=0.6, k=2.0, convention=convention)
    check_transport(client)
    close(r.output, refs.lrn(x, size, 0.5, 0.6, 2.0, convention))
    assert r.stats is None


def test_mvn(client):
    x = rng(27).standard_normal((2, 3, 4, 5)) * 2 + 1
    r = client.mvn(x)
    close(r.output, refs.mvn(x))
    r = client.mvn(x[0], axes=[1, 2], eps=1e-6)
    check_transport(client)
    close(r.output, refs.mvn(x[0], (1, 2), 1e-6))
    assert r.stats.shape == (3,)


# ---- backward: against central differences of the daemon's own forward -------------------

def directional(forward, x, dy, v, h=1e-6):
    """d/dt sum(dy * forward(x + t v)) at t = 0, by central differences."""
    plus = forward(x + h * v).output
    minus = forward(x - h * v).output
    return float((dy * (plus - minus)).sum() / (2 * h))


BACKWARD = {
    # name: (shape, forward(c, x, w, b), backward(c, x, dy, w, b), affine)
    "layer": ((3, 6), lambda c, x, w, b: c.layer_norm(x, w, b),
              lambda c, x, dy, w, b: c.layer_norm_backward(x, dy, w, b), 2),
    "rms": ((3, 6), lambda c, x, w, b: c.rms_norm(x, w),
            lambda c, x, dy, w, b: c.rms_norm_backward(x, dy, w), 1),
    "batch": ((4, 6, 2), lambda c, x, w, b: c.batch_norm(x, w, b),
              lambda c, x, dy, w, b: c.batch_norm_backward(x, dy, w, b), 2),
    "group": ((2, 6, 3), lambda c, x, w, b: c.group_norm(x, 2, w, b),
              lambda c, x, dy, w, b: c.group_norm_backward(x, dy, 2, w, b), 2),
    "instance": ((2, 6, 3), lambda c, x, w, b: c.instance_norm(x, w, b),
                 lambda c, x, dy, w, b: c.instance_norm_backward(x, dy, w, b), 2),
    "lp": ((3, 6), lambda c, x, w, b: c.lp_norm(x, p=3),
           lambda c, x, dy, w, b: c.lp_norm_backward(x, dy, p=3), 0),
    "lrn": ((2, 6, 3), lambda c, x, w, b: c.lrn(x, 3, alpha=0.3),
            lambda c, x, dy, w, b: c.lrn_backward(x, dy, 3, alpha=0.3), 0),
    "mvn": ((2, 6, 3), lambda c, x, w, b: c.mvn(x, axes=[0, 2]),
            lambda c, x, dy, w, b: c.mvn_backward(x, dy, axes=[0, 2]), 0),
}


@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward_matches_finite_differences(client, name):
    shape, forward, backward, affine = BACKWARD[name]
    g = rng(28)
    x, dy, v = (g.standard_normal(shape) for _ in range(3))
    c_dim = shape[-1] if name in ("layer", "rms") else shape[1]
    w = g.standard_normal(c_dim) if affine >= 1 else None
    b = g.standard_normal(c_dim) if affine >= 2 else None
    r = backward(client, x, dy, w, b)
    check_transport(client)
    assert r.grad_input.shape == x.shape and r.grad_input.dtype == np.float64
    want = directional(lambda xx: forward(client, xx, w, b), x, dy, v)
    assert float((r.grad_input * v).sum()) == pytest.approx(want, rel=1e-6,
                                                            abs=1e-8)
    if w is not None:
        u = g.standard_normal(w.shape)
        want = directional(lambda ww: forward(client, x, ww, b), w, dy, u)
        assert float((r.grad_weight * u).sum()) == pytest.approx(want, rel=1e-6)
    else:
        assert r.grad_weight is None
    if b is not None:
        axes = tuple(i for i in range(dy.ndim)
                     if i != (dy.ndim - 1 if name == "layer" else 1))
        close(r.grad_bias, dy.sum(axis=axes))
    else:
        assert r.grad_bias is None


def test_layer_norm_backward_closed_form(client):
    """grad_input = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = w dy."""
    g = rng(29)
    x, dy, w = g.standard_normal((4, 7)), g.standard_normal((4, 7)), g.standard_normal(7)
    r = client.layer_norm_backward(x, dy, w, return_=["grad_input", "stats"],
                                   explain=True)
    _, mean, var, rstd = refs.layer(x)
    xhat = (x - mean[:, None]) * rstd[:, None]
    gw = w * dy
    want = rstd[:, None] * (gw - gw.mean(1, keepdims=True)
                            - xhat * (gw * xhat).mean(1, keepdims=True))
    close(r.grad_input, want, rtol=1e-10, atol=1e-12)
    close(r.stats.rstd, rstd)
    assert r.grad_weight is None  # not in return_
    assert [s.name for s in r.steps] == ["g", "xhat", "mean_g", "mean_g_xhat",
                                         "grad_input"]


# ---- moments, merge, the residual experiment -------------------------------------------------

def test_moments_rows_and_channels(client):
    x = rng(30).standard_normal((3, 4, 5)) + 100
    m = client.moments(x)
    check_transport(client, framed_answer=False)
    assert m.shape == (3, 4)
    close(m.count, np.full((3, 4), 5.0))
    close(m.mean, x.mean(axis=2))
    close(m.m2, ((x - x.mean(axis=2, keepdims=True)) ** 2).sum(axis=2),
          rtol=1e-10)
    close(m.var, x.var(axis=2), rtol=1e-10)
    m = client.moments(x, layout="channels")
    assert m.shape == (4,)
    close(m.mean, x.mean(axis=(0, 2)))


def test_merge_moments_equals_moments_of_the_whole(client):
    x = rng(31).standard_normal((6, 4)) * 5 - 3
    parts = [client.moments(x[:2], layout="channels"),
             client.moments(x[2:], layout="channels")]
    merged = client.merge_moments(parts)
    assert merged.shape == (4,)
    close(merged.count, np.full(4, 6.0))
    close(merged.mean, x.mean(axis=0), rtol=1e-12)
    close(merged.var, x.var(axis=0), rtol=1e-10)
    as_dicts = client.merge_moments([{"count": p.count, "mean": p.mean,
                                      "m2": p.m2} for p in parts])
    close(as_dicts.m2, merged.m2)


def test_simulate_residual(client):
    r = client.simulate_residual(tokens=8, d=16, layers=5, norm="rms",
                                 placement=["pre", "deepnorm"], seed=7,
                                 gradients=True, classes=4)
    assert (r.tokens, r.d, r.layers, r.norm, r.seed, r.classes) == (
        8, 16, 5, "rms", 7, 4)
    assert r.placements == ["pre", "deepnorm"] and r.post is None
    for curves in (r.pre, r.deepnorm):
        assert curves.rms.shape == (6,) and curves.cosine.shape == (5,)
        assert curves.grad_stream.shape == (6,) and curves.grad_w2.shape == (5,)
        assert curves.cos_to_input[0] == pytest.approx(1.0)
        assert math.isfinite(curves.loss) and curves.loss > 0
    # DeepNorm normalizes after every block: the stream's RMS is ~1 there.
    np.testing.assert_allclose(r.deepnorm.rms[1:], 1.0, rtol=1e-3)
    again = client.simulate_residual(tokens=8, d=16, layers=5, norm="rms",
                                     placement=["pre", "deepnorm"], seed=7,
                                     gradients=True, classes=4)
    close(again.pre.rms, r.pre.rms, rtol=0, atol=0)
    default = client.simulate_residual(layers=2)
    assert default.placements == ["pre", "post"] and default.pre.loss is None
    assert (default.tokens, default.d) == (16, 64)


def test_info_and_ready(daemon):
    c = normd.Client(daemon.base)
    info = c.info()
    assert "version" in info and info["limits"]["max_inflight"] >= 1
    assert c.ready() is True


def test_transport_chosen_by_size(daemon):
    """The default client frames a request once its tensors reach
    binary_threshold bytes, and sends JSON below."""
    from conftest import spy_on_exchanges
    c = spy_on_exchanges(normd.Client(daemon.base, binary_threshold=4096))
    c.layer_norm(np.ones((1, 1023), np.float32))   # 4092 bytes
    c.layer_norm(np.ones((1, 1024), np.float32))   # 4096 bytes
    assert [sent for sent, _ in c.exchanges] == ["application/json",
                                                 "application/octet-stream"]
    assert normd.Client().binary_threshold == 2048
