"""Errors become exceptions with the problem's fields, on both transports;
every ProblemCode of api/openapi.yaml has its class (and nothing else is
mapped); 401 with and without an API key."""
from pathlib import Path

import numpy as np
import pytest

import normd
from normd.errors import CODE_CLASSES, from_problem

OPENAPI = Path(__file__).resolve().parents[3] / "api" / "openapi.yaml"


def problem_codes():
    yaml = pytest.importorskip("yaml", reason="PyYAML (python3-yaml) reads "
                               "api/openapi.yaml")
    doc = yaml.safe_load(OPENAPI.read_text())
    return doc["components"]["schemas"]["ProblemCode"]["enum"]


def test_every_problem_code_has_a_class():
    codes = problem_codes()
    assert sorted(CODE_CLASSES) == sorted(codes)
    assert all(issubclass(cls, normd.Error) for cls in CODE_CLASSES.values())


def test_status_decides_between_two_classes_of_one_code():
    assert isinstance(from_problem(400, {"code": "binary_size_mismatch"}),
                      normd.BadRequest)
    e = from_problem(422, {"code": "binary_size_mismatch", "field": "input"})
    assert isinstance(e, normd.InvalidRequest) and e.field == "input"
    # a code a later normd adds falls back to its status's class
    assert type(from_problem(422, {"code": "brand_new"})) is normd.InvalidRequest
    assert type(from_problem(418, {"code": "teapot"})) is normd.Error


def raised(call):
    with pytest.raises(normd.Error) as info:
        call()
    return info.value


CASES = [
    # (call, class, status, code, field)
    (lambda c: c.layer_norm(np.ones((2, 3)), normalized_shape=2),
     normd.ShapeError, 422, "shape_mismatch", "normalized_shape"),
    (lambda c: c.layer_norm(np.ones((2, 3)), np.ones(2)),
     normd.ShapeError, 422, "weight_shape", "weight"),
    (lambda c: c.layer_norm(np.ones((2, 3)), residual=np.ones((3, 2))),
     normd.ShapeError, 422, "residual_mismatch", "residual"),
    (lambda c: c.group_norm(np.ones((2, 6, 2)), 4),
     normd.ShapeError, 422, "bad_num_groups", "num_groups"),
    (lambda c: c.layer_norm_backward(np.ones((2, 3)), np.ones((3, 2))),
     normd.ShapeError, 422, "grad_output_shape", "grad_output"),
    (lambda c: c.batch_norm(np.ones((2, 3)), mode="eval"),
     normd.ShapeError, 422, "running_stats_shape", "running_mean"),
    (lambda c: c.layer_norm(np.ones(3), eps=-1.0),
     normd.FieldError, 422, "bad_eps", "eps"),
    (lambda c: c.layer_norm(np.ones(3), variance="population"),
     normd.FieldError, 422, "bad_field", "variance"),
    (lambda c: c.batch_norm(np.ones((2, 3)), momentum=2.0),
     normd.FieldError, 422, "bad_momentum", "momentum"),
    (lambda c: c.mvn(np.ones((2, 3))),
     normd.FieldError, 422, "missing_field", "axes"),
    (lambda c: c.layer_norm(np.ones(3), output_dtype="int8"),
     normd.TensorError, 422, "unknown_dtype", "output_dtype"),
    (lambda c: c.layer_norm(np.float32(1.0)),
     normd.TensorError, 422, "bad_rank", "input"),
    (lambda c: c.instance_norm(np.ones(4)),
     normd.ShapeError, 422, "needs_channels", "input"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_errors_carry_the_problem(client, case):
    call, cls, status, code, field = CASES[case]
    e = raised(lambda: call(client))
    assert type(e) is cls, e
    assert (e.status, e.code, e.field) == (status, code, field), e
    assert isinstance(e.detail, str) and e.detail
    assert code in str(e)
    # the daemon names every answer; the error keeps the name (logs match)
    assert e.request_id and len(e.request_id) >= 16, e.request_id


def test_error_on_a_route_without_tensors(daemon):
    c = normd.Client(daemon.base)
    e = raised(lambda: c.simulate_residual(layers=4096, tokens=4096, d=4096))
    assert (type(e), e.code) == (normd.FieldError, "simulation_too_large")
    e = raised(lambda: c.merge_moments([{"count": [1], "mean": [0],
                                         "m2": [-1]}]))
    assert (e.code, e.field) == ("bad_moments", "parts")


def test_too_large(make_daemon):
    d = make_daemon("--max-elements", 100)
    for threshold in (None, 0):
        c = normd.Client(d.base, binary_threshold=threshold)
        e = raised(lambda: c.layer_norm(np.ones((11, 10), np.float32)))
        assert (type(e), e.status, e.code) == (normd.TooLarge, 413,
                                               "too_many_elements")


def test_api_key(make_daemon):
    key = "client-test-key-0123456789"
    d = make_daemon("--api-keys", key)
    e = raised(lambda: normd.Client(d.base).layer_norm(np.ones(3)))
    assert (type(e), e.status, e.code) == (normd.Unauthorized, 401,
                                           "unauthorized")
    e = raised(lambda: normd.Client(d.base, api_key="wrong-key-0123456789")
               .layer_norm(np.ones(3)))
    assert isinstance(e, normd.Unauthorized)
    for threshold in (None, 0):
        r = normd.Client(d.base, api_key=key,
                         binary_threshold=threshold).layer_norm(np.ones((2, 3)))
        assert r.output.shape == (2, 3)


def test_no_daemon_is_a_transport_error(daemon):
    import socket
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = normd.Client("http://127.0.0.1:%d" % port, timeout=2)
    e = raised(lambda: c.layer_norm(np.ones(3)))
    assert type(e) is normd.TransportError and e.status is None
    assert isinstance(e.__cause__, OSError)


def test_bad_url():
    with pytest.raises(ValueError):
        normd.Client("localhost:8080")
