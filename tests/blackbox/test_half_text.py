"""float16 and bfloat16 tensors read from JSON number text exactly: a
decimal that lies within half a float64 ulp of a half-precision midpoint
(its double *is* the midpoint) must still round to the side the text is on,
not tie to even as the double would. Each element goes in as a row of one,
and a route whose answer keeps the parsed value exactly gives it back: the
moments' mean (float64) and KServe v2 layer_norm's mean (float32 stats,
which hold any half value). An infinity only shows as a NaN mean, and -0
as 0; the unit tests (check_fmt_half.c) hold those to the bit. The reference rounds the text's exact rational
value (fractions), independently of the daemon."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from normd_helpers import f32, nonfinite

FORMATS = {"float16": (11, 15), "bfloat16": (8, 127)}  # sig bits, bias
V2 = {"float16": "FP16", "bfloat16": "BF16"}


def round_text(text, dtype):
    """The value of decimal `text` correctly rounded to dtype (ties to
    even), as a float (+-inf past the largest finite value)."""
    p, bias = FORMATS[dtype]
    x = Fraction(Decimal(text))
    neg, x = x < 0, abs(x)
    if x == 0:
        return -0.0 if neg else 0.0
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1  # now 2^e <= x < 2^(e + 1)
    quantum = Fraction(2) ** (max(e, 1 - bias) - (p - 1))
    m, rest = divmod(x, quantum)
    if rest > quantum / 2 or (rest == quantum / 2 and m % 2):
        m += 1
    v = m * quantum
    v = math.inf if v >= Fraction(2) ** (bias + 1) else float(v)
    return -v if neg else v


def midpoint_texts(dtype):
    """Midpoints between neighbours (normal, subnormal, the overflow one),
    each exactly and with a tail of 10^-40 relative below and above."""
    p, bias = FORMATS[dtype]
    two = Fraction(2)
    mids = [
        1 + two ** -p,                      # 1 and the next: tie to 1
        1 + 3 * two ** -p,                  # tie to the upper, even one
        two ** (1 - bias - p),              # 0 and the smallest subnormal
        3 * two ** (1 - bias - p),          # two subnormals
        two ** (1 - bias) - two ** (1 - bias - p),       # to the smallest normal
        two ** (bias + 1) - two ** (bias - p),           # past the largest finite
        Fraction(3, 2) * two ** 7 + two ** (7 - p),      # 192 and the next
    ]
    texts = []
    with localcontext() as ctx:
        ctx.prec = 400  # exact: every midpoint has fewer digits
        for mid in mids:
            exact = Decimal(mid.numerator) / Decimal(mid.denominator)
            tail = Decimal(1).scaleb(exact.adjusted() - 40)
            texts += [format(v, "f") for v in (exact, exact + tail, exact - tail)]
    return texts + ["-" + t for t in texts]


def body_rows(texts, dtype):
    return ('{"input": {"shape": [%d, 1], "dtype": "%s", "data": [%s]}}'
            % (len(texts), dtype, ", ".join(texts)))


@pytest.mark.parametrize("dtype", sorted(FORMATS))
def test_moments_mean_is_the_exactly_rounded_text(daemon, dtype):
    texts = midpoint_texts(dtype)
    r = daemon.post_json("/v1/moments", body_rows(texts, dtype))
    assert r.status == 200, r
    means = [nonfinite(v) for v in r.json()["mean"]]
    got = dict(zip(texts, means))
    want = {t: round_text(t, dtype) for t in texts}
    for t, v in want.items():  # the mean of a row of one infinity is NaN
        if math.isinf(v) and math.isnan(got[t]):
            got[t] = v
    assert got == want
    # the tails decide: no text ties to even but the exact midpoints
    assert len({round_text(t, dtype) for t in texts}) > len(texts) // 3


def test_known_float16_edges(daemon):
    texts = ["65520.000000000000000000000000001", "65519.99999999999999999999",
             "65520", "1.00048828125000000000000000001", "1.00048828125",
             "2.98023223876953125000000000000000001e-8"]
    r = daemon.post_json("/v1/moments", body_rows(texts, "float16"))
    assert r.status == 200, r
    means = [nonfinite(v) for v in r.json()["mean"]]
    assert math.isnan(means[0]) and math.isnan(means[2])  # infinity's mean
    assert means[1] == 65504.0 and means[3:5] == [1 + 2 ** -10, 1.0]
    assert means[5] == 2.0 ** -24  # just above half the smallest subnormal


def v2_request(texts, dtype, request_id=None):
    doc = ('{"inputs": [{"name": "input", "shape": [%d, 1], "datatype": "%s", '
           '"data": [%s]}]' % (len(texts), V2[dtype], ", ".join(texts)))
    if request_id is not None:
        doc += ', "id": "%s"' % request_id
    return doc + "}"


def v2_means(daemon, body):
    r = daemon.post_json("/v2/models/layer_norm/infer", body)
    assert r.status == 200, r
    out = {o["name"]: o for o in r.json()["outputs"]}
    assert out["mean"]["datatype"] == "FP32"
    return [f32(nonfinite(v)) for v in out["mean"]["data"]]  # float32 text


@pytest.mark.parametrize("dtype", sorted(FORMATS))
def test_kserve_v2_mean_is_the_exactly_rounded_text(daemon, dtype):
    texts = [t for t in midpoint_texts(dtype)
             if math.isfinite(round_text(t, dtype))]  # a row of inf: NaN mean
    got = v2_means(daemon, v2_request(texts, dtype))
    assert got == [round_text(t, dtype) for t in texts]


# Bodies the numeric-array fast path once refused, so that jansson gave
# the numbers as doubles and a text whose double is a midpoint tied to
# even whatever its tail said: a string holding the escape \u0001 (the
# placeholders' mark; here the v2 request id, three in a row), a key
# spelled with an escape, an escaped non-finite spelling beside it. Each
# must round the text, as the plain body does.
SLOW_TEXTS = ["1.00048828125000000000000000001", "1.00048828125",
              "1.00146484375000000000000000001"]


@pytest.mark.parametrize("request_id", ["\\u0001", "\\u0001\\u0001\\u00010",
                                        "x\\u00011"])
def test_a_marked_string_keeps_the_text_exact(daemon, request_id):
    got = v2_means(daemon, v2_request(SLOW_TEXTS, "float16",
                                      request_id=request_id))
    assert got == [round_text(t, "float16") for t in SLOW_TEXTS]
    assert got[0] == 1 + 2 ** -10  # the tail rounds up, not to even


@pytest.mark.parametrize("dtype", sorted(FORMATS))
def test_escaped_keys_and_spellings_keep_the_text_exact(daemon, dtype):
    texts = midpoint_texts(dtype)[:9]
    body = ('{"\\u0069nput": {"shape": [%d, 1], "dtype": "%s", '
            '"d\\u0061ta": [%s, "\\u004eaN"]}}'
            % (len(texts) + 1, dtype, ", ".join(texts)))
    r = daemon.post_json("/v1/moments", body)
    assert r.status == 200, r
    means = [nonfinite(v) for v in r.json()["mean"]]
    assert means[:-1] == [round_text(t, dtype) for t in texts]
    assert math.isnan(means[-1])
