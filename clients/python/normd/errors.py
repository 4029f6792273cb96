"""normd's errors as exceptions.

Every /v1 error is an RFC 9457 problem document with a stable ``code``
(the ProblemCode schema of api/openapi.yaml). :func:`from_problem` picks
the exception class from that code, so ``except normd.ShapeError`` catches
every shape problem whichever route raised it; codes normd may add later
fall back to the class of their HTTP status. Match on the class or on
``code``; ``detail`` is for humans and its wording may change.
"""


class Error(Exception):
    """An error answered by normd (or met on the way to it).

    Attributes:
        status: the HTTP status (None when no answer arrived).
        code: the problem's machine-readable code, e.g. ``"shape_mismatch"``
            (None for answers that are not problem documents).
        detail: the human-readable explanation.
        field: the request field to blame (e.g. ``"weight"``), or None.
        request_id: the answer's X-Request-Id header (None when it has none).
    """

    def __init__(self, status, code, detail, field=None, request_id=None):
        super().__init__(status, code, detail, field)
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.request_id = request_id

    def __str__(self):
        where = " (field %s)" % self.field if self.field else ""
        return "%s %s: %s%s" % (self.status, self.code, self.detail, where)


class TransportError(Error):
    """No answer: the connection failed, was closed, or timed out
    (``__cause__`` holds the socket or http.client error)."""

    def __init__(self, detail):
        super().__init__(None, None, detail)


class ProtocolError(Error):
    """An answer that is not what the contract promises (e.g. a framed
    answer whose tensors do not fit its body)."""


class BadRequest(Error):
    """400: the body cannot be read (malformed JSON, duplicate key, too
    deep, broken binary framing or .npy)."""


class Unauthorized(Error):
    """401 ``unauthorized``: API keys are configured and the request has
    none or a wrong one (give ``api_key`` to :class:`normd.Client`)."""


class NotFound(Error):
    """404 ``not_found``: no such route."""


class MethodNotAllowed(Error):
    """405 ``method_not_allowed``."""


class NotAcceptable(Error):
    """406 ``not_acceptable``: the answer cannot be given in the format
    asked for."""


class TooLarge(Error):
    """413 ``body_too_large`` / ``too_many_elements``: over max_body_bytes
    or max_elements (see ``Client.info()["limits"]``)."""


class UnsupportedMediaType(Error):
    """415 ``unsupported_media_type`` / ``npy_unsupported_dtype``."""


class InvalidRequest(Error):
    """422: valid syntax but not a valid request for this operation."""


class FieldError(InvalidRequest):
    """422 about a request field: unknown, missing, of the wrong type or
    value, given twice, or conflicting with another (``field`` names it)."""


class TensorError(InvalidRequest):
    """422 about a tensor's encoding: dtype, rank, shape, data length,
    empty or ragged, a value that is not a number."""


class ShapeError(InvalidRequest):
    """422 about shapes that do not fit together: normalized_shape or axis
    vs the input, weight / bias / grad_output / running stats / residual
    shapes, num_groups not dividing C, a rank too small for channels."""


class ServerError(Error):
    """5xx other than 503: ``out_of_memory`` (500),
    ``unsupported_transfer_encoding`` (501)."""


class Unavailable(Error):
    """503: normd cannot take the request now. ``retry_after`` is the
    Retry-After delay in seconds (None if the answer had none). The client
    has already retried as many times as it was told to."""

    def __init__(self, status, code, detail, field=None, request_id=None,
                 retry_after=None):
        super().__init__(status, code, detail, field, request_id)
        self.retry_after = retry_after


class Overloaded(Unavailable):
    """503 ``overloaded``: max_inflight jobs are already queued or running."""


class Draining(Unavailable):
    """503 ``draining``: the daemon is shutting down."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 404: NotFound,
              405: MethodNotAllowed, 406: NotAcceptable, 413: TooLarge,
              415: UnsupportedMediaType, 422: InvalidRequest, 503: Unavailable}

# Every ProblemCode of api/openapi.yaml (tests/test_errors.py checks both
# ways); a code's class refines its status's.
CODE_CLASSES = {
    # 400
    "malformed_json": BadRequest, "duplicate_key": BadRequest,
    "too_deep": BadRequest, "too_many_parameters": BadRequest,
    "bad_request": BadRequest, "missing_header_length": BadRequest,
    "bad_content_encoding": BadRequest,  # a corrupt or cut gzip / deflate body
    "bad_header_length": BadRequest, "binary_truncated": BadRequest,
    "binary_size_mismatch": BadRequest,  # 400 leftover bytes; 422 below
    "binary_without_framing": BadRequest, "npy_bad_magic": BadRequest,
    "npy_bad_version": BadRequest, "npy_bad_header": BadRequest,
    "npy_truncated": BadRequest, "npy_size_mismatch": BadRequest,
    # 401 .. 415
    "unauthorized": Unauthorized, "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed, "not_acceptable": NotAcceptable,
    "unsupported_media_type": UnsupportedMediaType,
    "npy_unsupported_dtype": UnsupportedMediaType,
    "body_too_large": TooLarge, "too_many_elements": TooLarge,
    # 422, request structure
    "not_an_object": FieldError, "unknown_field": FieldError,
    "missing_field": FieldError, "bad_field": FieldError,
    "conflicting_fields": FieldError, "bad_moments": FieldError,
    "bad_eps": FieldError, "bad_momentum": FieldError,
    "explain_too_large": FieldError, "simulation_too_large": FieldError,
    "too_few_values": FieldError,
    # 422, tensors
    "bad_tensor": TensorError, "ragged_tensor": TensorError,
    "bad_number": TensorError, "bad_shape": TensorError,
    "data_length": TensorError, "unknown_dtype": TensorError,
    "bad_rank": TensorError, "negative_dim": TensorError,
    "empty_tensor": TensorError, "size_overflow": TensorError,
    # 422, shapes that do not fit together
    "residual_mismatch": ShapeError, "shape_mismatch": ShapeError,
    "bad_axis": ShapeError, "weight_shape": ShapeError,
    "bias_shape": ShapeError, "grad_output_shape": ShapeError,
    "running_stats_shape": ShapeError, "bad_num_groups": ShapeError,
    "needs_channels": ShapeError,
    # 5xx
    "out_of_memory": ServerError, "unsupported_transfer_encoding": ServerError,
    "overloaded": Overloaded, "draining": Draining,
}


def error_class(status, code):
    """The exception class for an answer's status and problem code."""
    cls = CODE_CLASSES.get(code)
    if cls is not None:
        # binary_size_mismatch is 400 (bytes left over) or 422 (a tensor's
        # binary_data_size is not shape x dtype): the status decides.
        base = _BY_STATUS.get(status)
        if base is not None and not issubclass(cls, base):
            return base
        return cls
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status is not None and status >= 500 else Error


def from_problem(status, problem, request_id=None, retry_after=None):
    """The exception for an answer of ``status`` whose body is the problem
    document ``problem`` (a dict; None when the body was not one)."""
    problem = problem if isinstance(problem, dict) else {}
    code = problem.get("code")
    detail = problem.get("detail") or problem.get("title") or "HTTP %d" % status
    cls = error_class(status, code)
    if issubclass(cls, Unavailable):
        return cls(status, code, detail, problem.get("field"), request_id,
                   retry_after)
    return cls(status, code, detail, problem.get("field"), request_id)
