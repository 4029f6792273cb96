"""Every PyTorch fixture case (tests/fixtures/torch_fixtures.json) through
HTTP, compared like tests/unit/check_torch_fixtures.c does:
|got - want| <= 1e-5 * max(|want|, floor), floor 1e-2 for dtype-rounded
tensors (output, running stats) and 1e-8 for the statistics."""
import json
import math

import pytest

from normd_helpers import REPO_ROOT, floats

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "torch_fixtures.json"
REL_TOL = 1e-5
FLOOR_TENSOR = 1e-2
FLOOR_STATS = 1e-8

CASES = json.loads(FIXTURES.read_text())["cases"]


def request_for(case):
    """The HTTP request body for a fixture case."""
    kind, p = case["kind"], case["params"]
    body = {"input": case["input"]}
    for name in ("weight", "bias", "running_mean", "running_var"):
        if name in case:
            body[name] = case[name]
    if kind == "layer":
        body.update(normalized_shape=p["normalized_shape"], eps=p["eps"],
                    variance=p["variance"], eps_placement=p["eps_placement"])
    elif kind == "rms":
        body.update(normalized_shape=p["normalized_shape"], eps=p["eps"])
    elif kind == "batch":
        body.update(mode=p["mode"], eps=p["eps"], momentum=p["momentum"])
        if "num_batches_tracked" in p:
            # the count BEFORE this batch, like torch's buffer: the server
            # increments it (the fixture's num_batches_tracked_after)
            body["num_batches_tracked"] = p["num_batches_tracked"]
    elif kind == "group":
        body.update(num_groups=p["num_groups"], eps=p["eps"])
    elif kind == "instance":
        body.update(eps=p["eps"])
    else:
        raise AssertionError("unknown kind " + kind)
    return body


def compare(what, got, want, floor):
    assert len(got) == len(want), "%s: %d values, want %d" % (what, len(got), len(want))
    bad = []
    for i, (g, w) in enumerate(zip(floats(got), want)):
        if math.isnan(g) or math.isnan(w):
            err = math.inf
        elif g == w:
            err = 0.0
        else:
            err = abs(g - w) / max(abs(w), floor)
        if not err <= REL_TOL:
            bad.append((i, g, w, err))
    assert not bad, "%s: %d mismatches (index, got, want, rel err), first %r" % (
        what, len(bad), bad[:5])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_torch_fixture(daemon, case):
    kind = case["kind"]
    r = daemon.post_json("/v1/norm/" + kind, request_for(case))
    assert r.status == 200, r
    doc = r.json()
    exp = case["expected"]

    out = doc["output"]
    assert out["shape"] == exp["output"]["shape"]
    assert out["dtype"] == exp["output"]["dtype"] == case["input"]["dtype"]
    compare("output", out["data"], exp["output"]["data"], FLOOR_TENSOR)

    stats = doc["stats"]
    stat_keys = {"mean", "var", "rstd", "rms"} & set(exp)
    assert set(stats) == stat_keys | {"shape"}
    for key in sorted(stat_keys):
        compare(key, stats[key], exp[key], FLOOR_STATS)
    assert math.prod(stats["shape"]) == len(exp["rstd"])

    train_with_running = (kind == "batch" and case["params"]["mode"] == "train"
                          and "running_mean" in case)
    if train_with_running:
        for key in ("running_mean", "running_var"):
            assert doc[key]["shape"] == case[key]["shape"]
            assert doc[key]["dtype"] == case[key]["dtype"]
            want = exp[key]["data"] if isinstance(exp[key], dict) else exp[key]
            compare(key, doc[key]["data"], want, FLOOR_TENSOR)
        assert doc["num_batches_tracked"] == case["params"]["num_batches_tracked_after"]
    else:
        # eval leaves running statistics alone (and does not return them)
        assert "running_mean" not in doc and "num_batches_tracked" not in doc


def test_every_kind_is_covered():
    assert {c["kind"] for c in CASES} == {"layer", "rms", "batch", "group",
                                          "instance"}
