"""Dtypes in and out on both transports: float32, float64 and float16 kept;
bfloat16 as ml_dtypes.bfloat16 when importable, else float32 (and sent
with normd.bfloat16); other inputs widened to float64; non-finite values."""
import numpy as np
import pytest

import normd
import refs
from conftest import TRANSPORTS, check_transport

# Relative bound of one rounding to each dtype (half an ulp is 2^-p; the
# daemon computes in double and rounds once), with room for the stats.
ROUNDING = {"float64": 1e-12, "float32": 2 ** -23, "float16": 2 ** -10,
            "bfloat16": 2 ** -7}
BF16_RESULT = normd.BFLOAT16 if normd.BFLOAT16 is not None else np.dtype(np.float32)


def bf16_round(values):
    """float32 values rounded to bfloat16 (nearest even), as float64:
    written here from the format (the top 16 bits of a float32)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def sample(shape=(3, 8), seed=1):
    return np.random.default_rng(seed).standard_normal(shape) * 2 + 0.5


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_dtype_kept(client, dtype):
    x = sample().astype(dtype)
    w = np.linspace(0.5, 1.5, 8).astype(dtype)
    r = client.layer_norm(x, w)
    check_transport(client)
    assert r.output.dtype == np.dtype(dtype)
    want = refs.layer(x.astype(np.float64), weight=w.astype(np.float64))[0]
    np.testing.assert_allclose(r.output.astype(np.float64), want,
                               rtol=ROUNDING[dtype], atol=ROUNDING[dtype])
    # the answer is exactly representable in its dtype (no stray widening)
    assert np.array_equal(r.output, r.output.astype(dtype))


@pytest.mark.parametrize("output_dtype", ["float32", "float64", "float16",
                                          "bfloat16"])
def test_output_dtype(client, output_dtype):
    x = sample().astype(np.float32)
    r = client.rms_norm(x, output_dtype=output_dtype)
    check_transport(client)
    want = refs.rms(x.astype(np.float64))[0]
    if output_dtype == "bfloat16":
        assert r.output.dtype == BF16_RESULT
        got = r.output.astype(np.float64)
        # every value is a bfloat16: its float32 has 16 zero low bits
        low = got.astype(np.float32).view(np.uint32) & 0xFFFF
        assert not low.any()
    else:
        assert r.output.dtype == np.dtype(output_dtype)
        got = r.output.astype(np.float64)
    tol = max(ROUNDING[output_dtype], ROUNDING["float32"])
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_bfloat16_input_same_on_both_transports(daemon):
    """A bfloat16 tensor (normd.bfloat16) rounds to the same values whether
    the daemon rounds the JSON text or the client rounds the framed bits."""
    x = sample((4, 16), seed=2).astype(np.float32)
    answers = {}
    for name, threshold in TRANSPORTS.items():
        with normd.Client(daemon.base, binary_threshold=threshold) as c:
            answers[name] = c.layer_norm(normd.bfloat16(x))
    for r in answers.values():
        assert r.output.dtype == BF16_RESULT
    assert np.array_equal(answers["json"].output.astype(np.float64),
                          answers["binary"].output.astype(np.float64))
    assert np.array_equal(answers["json"].stats.mean, answers["binary"].stats.mean)
    want = refs.layer(bf16_round(x))[0]
    np.testing.assert_allclose(answers["binary"].output.astype(np.float64),
                               want, rtol=2 ** -7, atol=2 ** -7)
    # the statistics are those of the rounded input
    np.testing.assert_allclose(answers["json"].stats.mean,
                               bf16_round(x).mean(axis=1), rtol=1e-6)


def test_bfloat16_helper_without_ml_dtypes():
    if normd.BFLOAT16 is not None:
        assert normd.bfloat16([1.0]).dtype == normd.BFLOAT16
    else:
        v = normd.bfloat16([[1.0, 2.5]])
        assert isinstance(v, normd.BFloat16Values) and v.shape == (1, 2)


@pytest.mark.skipif(normd.BFLOAT16 is None,
                    reason="ml_dtypes is not importable: bfloat16 answers are "
                           "float32 (tested above)")
def test_ml_dtypes_bfloat16_round_trip(client):
    x = np.asarray(sample(), dtype=normd.BFLOAT16)
    r = client.layer_norm(x)
    assert r.output.dtype == normd.BFLOAT16


def test_mixed_dtypes_backward_and_running_stats(client):
    x = sample((4, 3, 2), seed=3).astype(np.float32)
    dy = sample((4, 3, 2), seed=4).astype(np.float16)
    w = np.ones(3, np.float64)
    r = client.batch_norm_backward(x, dy, w)
    check_transport(client)
    assert r.grad_input.dtype == np.float32  # the input's
    assert r.grad_weight.dtype == np.float64  # the weight's
    rm, rv = np.zeros(3, np.float16), np.ones(3, np.float16)
    f = client.batch_norm(x, running_mean=rm, running_var=rv)
    assert f.output.dtype == np.float32
    assert f.running_mean.dtype == np.float16 and f.running_var.dtype == np.float16


def test_lists_and_integers_become_float64(client):
    r = client.layer_norm([[1, 2, 3, 4]])
    assert r.output.dtype == np.float64
    np.testing.assert_allclose(r.output, refs.layer(np.array([[1., 2, 3, 4]]))[0],
                               rtol=1e-12)
    r = client.layer_norm(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert r.output.dtype == np.float64


def test_non_finite_values(client):
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0], [np.inf, 0.0, 1.0]],
                 dtype=np.float32)
    r = client.layer_norm(x)
    check_transport(client)
    assert np.isnan(r.output[0]).all() and np.isnan(r.stats.mean[0])
    assert np.isfinite(r.output[1]).all()
    assert np.isnan(r.stats.var[2])
    r = client.lp_norm(np.array([[np.inf, 1.0], [-np.inf, 2.0]]), p=np.inf,
                       eps=0.0)
    assert np.isinf(r.stats.norm).all()


def test_unsupported_dtype_is_refused_before_sending(client):
    with pytest.raises(TypeError, match="complex"):
        client.layer_norm(np.ones(3, dtype=np.complex64))
