"""/v1/residual/simulate with "gradients": true and the deepnorm placement,
against the running daemon.

The experiment's random parts are rebuilt here from its documented
generator (splitmix64 and Box-Muller, core/residual.c) and the stack is run
again in torch (float64 autograd), so every gradient norm the daemon sends
is checked against an independent backward pass. Skipped without torch.
"""
import math

import pytest

from normd_helpers import assert_problem

ROUTE = "/v1/residual/simulate"
MASK = (1 << 64) - 1


def mix(state):
    """splitmix64: returns (value, new state)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31), state


def gaussians(state, n):
    out = []
    for _ in range(n):
        a, state = mix(state)
        b, state = mix(state)
        u1 = ((a >> 11) + 0.5) * 2.0 ** -53
        u2 = (b >> 11) * 2.0 ** -53
        out.append(math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2))
    return out, state


def rebuild(tokens, d, layers, placement, seed, classes, gain=1.0):
    """x_0, the blocks' (W1, W2), W_out and the labels, as core draws them."""
    x0, _ = gaussians(seed, tokens * d)
    beta = (8.0 * layers) ** -0.25 if placement == "deepnorm" else 1.0
    s1, s2 = math.sqrt(2.0 / d) * beta, gain / math.sqrt(d) * beta
    blocks = []
    for t in range(layers):
        ws = seed ^ ((0xD1B54A32D192ED03 * (t + 1)) & MASK)
        g, ws = gaussians(ws, 2 * d * d)
        blocks.append(([s1 * v for v in g[:d * d]], [s2 * v for v in g[d * d:]]))
    rs = seed ^ 0x5851F42D4C957F2D
    w_out, rs = gaussians(rs, classes * d)
    w_out = [v / math.sqrt(d) for v in w_out]
    labels = []
    for _ in range(tokens):
        v, rs = mix(rs)
        labels.append(v % classes)
    return x0, blocks, w_out, labels


def torch_gradients(torch, tokens, d, layers, placement, norm, seed, classes,
                    eps=1e-5):
    x0, blocks, w_out, labels = rebuild(tokens, d, layers, placement, seed, classes)
    f64 = torch.float64

    def normalize(x):
        if norm == "layer":
            x = x - x.mean(dim=1, keepdim=True)
        return x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + eps)

    alpha = (2.0 * layers) ** 0.25 if placement == "deepnorm" else 1.0
    xs = [torch.tensor(x0, dtype=f64).reshape(tokens, d).requires_grad_()]
    weights = []
    for w1, w2 in blocks:
        w1 = torch.tensor(w1, dtype=f64).reshape(d, d).requires_grad_()
        w2 = torch.tensor(w2, dtype=f64).reshape(d, d).requires_grad_()
        weights.append((w1, w2))
        x = xs[-1]
        sub = lambda h: torch.relu(h @ w1.T) @ w2.T  # noqa: E731
        nxt = x + sub(normalize(x)) if placement == "pre" else normalize(alpha * x + sub(x))
        nxt.retain_grad()
        xs.append(nxt)
    z = normalize(xs[-1]) if placement == "pre" else xs[-1]
    logits = z @ torch.tensor(w_out, dtype=f64).reshape(classes, d).T
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(labels))
    xs[0].retain_grad()
    loss.backward()
    return {"loss": loss.item(),
            "grad_w1": [w1.grad.norm().item() for w1, _ in weights],
            "grad_w2": [w2.grad.norm().item() for _, w2 in weights],
            "grad_stream": [x.grad.norm().item() for x in xs]}


def test_default_answer_has_no_gradients(daemon):
    doc = daemon.post_json(ROUTE, {"tokens": 4, "d": 8, "layers": 3}).json()
    assert set(doc) == {"tokens", "d", "layers", "norm", "seed", "pre", "post"}
    assert set(doc["pre"]) == {"rms", "rel_update", "cosine", "cos_to_input"}


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_gradients_match_torch(daemon, norm):
    torch = pytest.importorskip("torch")
    body = {"tokens": 5, "d": 8, "layers": 4, "norm": norm, "seed": 11,
            "classes": 7, "gradients": True,
            "placement": ["pre", "post", "deepnorm"]}
    doc = daemon.post_json(ROUTE, body).json()
    assert doc["classes"] == 7
    for placement in ("pre", "post", "deepnorm"):
        got = doc[placement]
        assert len(got["grad_w1"]) == len(got["grad_w2"]) == 4
        assert len(got["grad_stream"]) == 5
        want = torch_gradients(torch, 5, 8, 4, placement, norm, 11, 7)
        # the answer is float32 text: 1e-6 relative covers its rounding
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-6), placement
        for key in ("grad_w1", "grad_w2", "grad_stream"):
            assert got[key] == pytest.approx(want[key], rel=1e-6), (placement, key)


def test_deepnorm_alone_and_deterministic(daemon):
    body = {"tokens": 4, "d": 8, "layers": 6, "placement": "deepnorm",
            "gradients": True}
    a = daemon.post_json(ROUTE, body).json()
    b = daemon.post_json(ROUTE, body).json()
    assert a == b
    assert set(a) == {"tokens", "d", "layers", "norm", "seed", "classes", "deepnorm"}
    # DeepNorm ends normalized: the stream's RMS is 1 after every block
    assert all(abs(r - 1) < 1e-4 for r in a["deepnorm"]["rms"][1:])


def test_query_string_and_depth_trend(daemon):
    """Xiong et al. 2020: the last block's gradient falls with depth for
    Pre-LN and does not for Post-LN (mean of 3 seeds, d 64)."""
    def last(placement, layers):
        total = 0.0
        for seed in (1, 2, 3):
            path = "%s?gradients=true&placement=%s&layers=%d&seed=%d" % (
                ROUTE, placement, layers, seed)
            total += daemon.post_json(path, {}).json()[placement]["grad_w2"][-1]
        return total / 3
    pre = last("pre", 48) / last("pre", 6)
    post = last("post", 48) / last("post", 6)
    assert 0.2 < pre < 0.7, pre
    assert 0.7 < post < 2.0, post


@pytest.mark.parametrize("body, code, field", [
    ({"placement": "sideways"}, "bad_field", "placement"),
    ({"placement": []}, "bad_field", "placement"),
    ({"placement": ["pre", 3]}, "bad_field", "placement"),
    ({"gradients": "yes"}, "bad_field", "gradients"),
    ({"gradients": True, "classes": 1}, "bad_field", "classes"),
    ({"classes": 1025}, "bad_field", "classes"),
    ({"classes": 2.5}, "bad_field", "classes"),
    ({"gradients": True, "layers": 4096, "tokens": 4096, "d": 8},
     "simulation_too_large", "layers"),
])
def test_bad_requests(daemon, body, code, field):
    assert_problem(daemon.post_json(ROUTE, body), 422, code, field)
    assert daemon.post_json(ROUTE, {"tokens": 2, "d": 4, "layers": 1}).status == 200
