"""normd.Client: one method per operation of normd's /v1 API.

Transport: a request whose tensors take at least ``binary_threshold``
bytes is sent with the binary tensor framing of the KServe v2 / Triton HTTP
protocol (Content-Type application/octet-stream, a JSON header of
Inference-Header-Content-Length bytes, then the raw little-endian tensors)
and answered the same way; a smaller one travels as JSON. normd's /v1
routes take both (api/openapi.yaml, "Three wire formats"), so every
operation, error code and field name is the same whichever is used.
(The /v2 inference routes speak the same framing but answer errors as a
bare ``{"error": ...}`` without the problem ``code``, and serve only the
five norms and their backwards, so the client stays on /v1.)
"""
import email.utils
import http.client
import json
import math
import threading
import time
import urllib.parse

import numpy as np

from . import _tensors
from .errors import ProtocolError, TransportError, from_problem
from .results import (BackwardResult, Moments, NormResult, ResidualResult)

__all__ = ["Client"]

_JSON = "application/json"
_OCTET = "application/octet-stream"
_PROBLEM = "application/problem+json"

# Errors of a kept-alive connection the server closed between two
# requests: the request is sent again once on a fresh connection.
_STALE = (http.client.RemoteDisconnected, http.client.CannotSendRequest,
          BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Param:
    """A request setting: sent only when it differs from the API's default
    (so the server's documented default applies); ``nullable`` settings
    send None as JSON null."""
    __slots__ = ("name", "value", "default", "nullable")

    def __init__(self, name, value, default=None, nullable=False):
        self.name, self.value = name, value
        self.default, self.nullable = default, nullable


def _plain(value):
    """A setting as JSON takes it (numpy scalars and arrays as Python
    numbers and lists, infinite floats as the proto3 strings)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else (
            "Infinity" if value > 0 else "-Infinity")
    if isinstance(value, tuple):
        return list(value)
    return value


def _retry_after_seconds(value):
    """Retry-After as seconds: delay-seconds or an HTTP-date (RFC 9110
    section 10.2.3); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Client:
    """A client of one normd daemon.

    Args:
        url: the daemon's base URL (``http://`` or ``https://``; a path
            prefix such as ``http://proxy/normd`` is kept).
        api_key: sent as ``Authorization: Bearer <api_key>`` when the
            daemon has API keys configured (else 401, :class:`Unauthorized`).
        timeout: socket timeout in seconds for each exchange.
        binary_threshold: requests whose tensors take at least this many
            bytes use the binary framing, smaller ones JSON; 0 always uses
            the framing, None never. The default, 2048, lies between
            256 bytes (JSON a little faster: 2.3 vs 2.6 ms a layer norm on
            loopback) and 4 KiB (framing 3.2 ms, JSON 8.9 ms; at 1 MiB
            23 ms vs 1.2 s), measured on a loaded 2-core test host.
        retries: how many times a 503 (overloaded or draining) is retried
            before :class:`Overloaded` / :class:`Draining` is raised.
        max_retry_wait: the longest wait between two tries, in seconds
            (Retry-After is honoured up to this; without one the waits
            double from 0.25 s).
        ssl_context: an ``ssl.SSLContext`` for https URLs (default: the
            system's verification).

    A Client keeps one connection per thread and may be shared by threads.
    Every method raises :class:`normd.Error` (a subclass picked from the
    problem's ``code``) when normd refuses the request.
    """

    def __init__(self, url="http://localhost:8080", api_key=None, timeout=30,
                 binary_threshold=2048, retries=3, max_retry_wait=30.0,
                 ssl_context=None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be http://host[:port] or https://..., "
                             "got %r" % (url,))
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.binary_threshold = binary_threshold
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._ssl_context = ssl_context
        self._local = threading.local()

    def __repr__(self):
        return "normd.Client(%r)" % (self.url,)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes this thread's connection (a later call opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ---- HTTP ----------------------------------------------------------------

    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout,
                    context=self._ssl_context)
            else:
                conn = http.client.HTTPConnection(self._host, self._port,
                                                  timeout=self.timeout)
            self._local.conn = conn
            self._local.used = False
        return conn

    def _exchange_once(self, method, path, body, headers):
        conn = self._connection()
        reused = self._local.used
        try:
            conn.request(method, self._prefix + path, body=body,
                         headers=headers)
            resp = conn.getresponse()
            length = resp.getheader("Content-Length")
            if length is not None and length.isdigit():
                # Read into a bytearray so the arrays numpy makes over a
                # framed answer are writable without a copy.
                data = bytearray(int(length))
                view, got = memoryview(data), 0
                while got < len(data):
                    n = resp.readinto(view[got:])
                    if not n:
                        raise http.client.IncompleteRead(bytes(data[:got]),
                                                         len(data) - got)
                    got += n
                resp.read()  # let http.client finish (and close on EOF)
            else:
                data = bytearray(resp.read())
            self._local.used = True
            if resp.will_close:
                self.close()
            return resp.status, resp.headers, data
        except _STALE:
            self.close()
            if reused:
                return None
            raise
        except BaseException:
            self.close()
            raise

    def _exchange(self, method, path, body=None, headers=()):
        """One answered exchange, retrying 503 as configured: (status,
        headers, body bytearray)."""
        headers = dict(headers)
        headers.setdefault("User-Agent", "normd-python/%s" % _version())
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        wait = 0.25
        for attempt in range(self.retries + 1):
            try:
                answer = self._exchange_once(method, path, body, headers)
                if answer is None:  # a stale kept-alive connection: once more
                    answer = self._exchange_once(method, path, body, headers)
            except (OSError, http.client.HTTPException) as e:
                err = TransportError("%s %s: %s" % (method, path, e))
                raise err from e
            status, resp_headers, data = answer
            if status != 503 or attempt == self.retries:
                return answer
            delay = _retry_after_seconds(resp_headers.get("Retry-After"))
            if delay is None:
                delay, wait = wait, wait * 2
            time.sleep(min(delay, self.max_retry_wait))
        raise AssertionError("unreachable")  # pragma: no cover

    def _raise_for(self, status, headers, data):
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        problem = None
        if ctype in (_PROBLEM, _JSON):
            try:
                problem = json.loads(bytes(data))
            except ValueError:
                problem = None
        if problem is None:
            text = bytes(data[:200]).decode("utf-8", "replace").strip()
            problem = {"detail": text or "HTTP %d" % status}
        raise from_problem(status, problem,
                           request_id=headers.get("X-Request-Id"),
                           retry_after=_retry_after_seconds(
                               headers.get("Retry-After")))

    def _get_json(self, path):
        status, headers, data = self._exchange("GET", path,
                                               headers={"Accept": _JSON})
        if status != 200:
            self._raise_for(status, headers, data)
        return json.loads(bytes(data))

    # ---- one operation ---------------------------------------------------------

    def _call(self, path, tensors, params, result):
        """POSTs one operation: ``tensors`` (name, array or None) in
        order, then the settings (``_Param``); decodes the answer with
        ``result.from_answer``."""
        tensors = [(n, v) for n, v in tensors if v is not None]
        settings = {}
        for p in params:
            value = _plain(p.value)
            if value is None and not p.nullable:
                continue
            if value == _plain(p.default):
                continue
            settings[p.name] = value
        size = sum(_tensors.nbytes(v) for _, v in tensors)
        binary = (tensors and self.binary_threshold is not None
                  and size >= self.binary_threshold)
        if binary:
            header, blobs = {}, []
            for name, value in tensors:
                header[name], blob = _tensors.binary_tensor(value, name)
                blobs.append(blob)
            header.update(settings)
            body, header_length = _tensors.framed_body(header, blobs)
            req_headers = {"Content-Type": _OCTET, "Accept": _OCTET,
                           "Inference-Header-Content-Length": str(header_length)}
        else:
            doc = {name: _tensors.json_tensor(value, name)
                   for name, value in tensors}
            doc.update(settings)
            body = json.dumps(doc, separators=(",", ":"),
                              allow_nan=False).encode()
            req_headers = {"Content-Type": _JSON, "Accept": _JSON}
        status, headers, data = self._exchange("POST", path, body, req_headers)
        if status != 200:
            self._raise_for(status, headers, data)
        obj, decoded = self._decode(headers, data)
        return result.from_answer(obj, decoded)

    @staticmethod
    def _decode(headers, data):
        """(answer object, {name: array} of the binary part) of a 200."""
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype != _OCTET:
            return json.loads(bytes(data)), {}
        length = headers.get("Inference-Header-Content-Length")
        if length is None or not length.isdigit() or int(length) > len(data):
            raise ProtocolError(200, None, "framed answer without a valid "
                                "Inference-Header-Content-Length: %r" % length)
        header_length = int(length)
        obj = json.loads(bytes(data[:header_length]))
        tail = memoryview(data)[header_length:]
        decoded, offset = {}, 0
        try:
            for name, value in obj.items():
                if isinstance(value, dict) and "binary_data_size" in (
                        value.get("parameters") or {}):
                    decoded[name], offset = _tensors.from_binary_tensor(
                        value, tail, offset)
        except ValueError as e:
            raise ProtocolError(200, None, str(e)) from e
        if offset != len(tail):
            raise ProtocolError(200, None, "framed answer: %d bytes left over"
                                % (len(tail) - offset))
        return obj, decoded

    # ---- service ---------------------------------------------------------------

    def info(self):
        """``GET /v1/info``: version, limits in force (max_body_bytes,
        max_elements, max_inflight, ...), dtypes and routes, as a dict."""
        return self._get_json("/v1/info")

    def ready(self):
        """``GET /readyz``: True when the daemon takes traffic (False while
        it starts or drains). Not retried."""
        saved, self.retries = self.retries, 0
        try:
            status, _, _ = self._exchange("GET", "/readyz")
        finally:
            self.retries = saved
        return status == 200

    # ---- the five norms ----------------------------------------------------------

    def layer_norm(self, input, weight=None, bias=None, *, normalized_shape=None,
                   axis=None, eps=1e-5, variance="biased",
                   eps_placement="inside_sqrt", residual=None,
                   output_dtype=None, return_=None, explain=False,
                   histogram_bins=32, histogram_range="shared"):
        """Layer norm over the trailing dims (``POST /v1/norm/layer``;
        torch.nn.functional.layer_norm with the defaults).

        ``y = (x - mean) / sqrt(var + eps) * weight + bias`` per row.

        Args:
            input: any rank >= 1.
            weight, bias: optional, of the normalized shape (default 1 / 0).
            normalized_shape: the trailing dims of a row (int or list; must
                equal the input's last dims). Default: the last dim.
            axis: ONNX-style alternative: dims ``axis..`` form a row.
                Give ``normalized_shape`` or ``axis``, not both.
            eps: added to the variance before the square root (1e-5).
            variance: ``"biased"`` (divide by n, default) or ``"unbiased"``.
            eps_placement: ``"inside_sqrt"`` (default) or
                ``"outside_sqrt"``: ``(x - mean) / (sqrt(var) + eps)``.
            residual: fused residual add: normalize ``h = input + residual``
                (same shape and dtype) and get h back as ``residual_out``.
            output_dtype: ``"float32"``, ``"float64"``, ``"float16"`` or
                ``"bfloat16"``; default the input's dtype.
            return_: what to answer (the API's ``return``): a name or a
                list of ``"output"``, ``"stats"``, ``"output_stats"``,
                ``"steps"``, ``"histograms"``. Default output and stats.
            explain: True adds the intermediate ``steps``.
            histogram_bins: bins of the histograms (32; 1..1024).
            histogram_range: ``"shared"`` (default) or ``"separate"``.

        Returns:
            :class:`NormResult` (``.output``, ``.stats.mean`` / ``.var`` /
            ``.rstd``, ``.residual_out``, ...).
        """
        return self._call("/v1/norm/layer",
                          [("input", input), ("residual", residual),
                           ("weight", weight), ("bias", bias)],
                          [_Param("normalized_shape", normalized_shape),
                           _Param("axis", axis), _Param("eps", eps, 1e-5),
                           _Param("variance", variance, "biased"),
                           _Param("eps_placement", eps_placement, "inside_sqrt"),
                           *_common(output_dtype, return_, explain,
                                    histogram_bins, histogram_range)],
                          NormResult)

    def rms_norm(self, input, weight=None, *, normalized_shape=None, axis=None,
                 eps=1e-6, residual=None, output_dtype=None, return_=None,
                 explain=False, histogram_bins=32, histogram_range="shared"):
        """RMS norm over the trailing dims (``POST /v1/norm/rms``;
        torch.nn.RMSNorm, Llama's RMSNorm).

        ``y = x / sqrt(mean(x^2) + eps) * weight`` per row, computed in
        float32 or wider and rounded once to the output dtype.

        Args:
            input: any rank >= 1.
            weight: optional gain of the normalized shape (RMS norm has no
                bias).
            normalized_shape, axis: as :meth:`layer_norm` (default the last
                dim).
            eps: added to the mean square (1e-6).
            residual: fused residual add (vLLM's fused_add_rms_norm): the
                answer's ``residual_out`` is h = input + residual.
            output_dtype, return_, explain, histogram_bins,
            histogram_range: as :meth:`layer_norm`.

        Returns:
            :class:`NormResult`; ``.stats`` has ``rms`` and ``rstd``.
        """
        return self._call("/v1/norm/rms",
                          [("input", input), ("residual", residual),
                           ("weight", weight)],
                          [_Param("normalized_shape", normalized_shape),
                           _Param("axis", axis), _Param("eps", eps, 1e-6),
                           *_common(output_dtype, return_, explain,
                                    histogram_bins, histogram_range)],
                          NormResult)

    def batch_norm(self, input, weight=None, bias=None, *, running_mean=None,
                   running_var=None, mean=None, var=None, eps=1e-5,
                   mode="train", momentum=0.1, num_batches_tracked=0,
                   output_dtype=None, return_=None, explain=False,
                   histogram_bins=32, histogram_range="shared"):
        """Batch norm per channel of an (N, C, *) input
        (``POST /v1/norm/batch``; torch.nn.functional.batch_norm).

        Args:
            input: shape (N, C, *), rank >= 2.
            weight, bias: optional per-channel scale and shift, shape (C,).
            running_mean, running_var: shape (C,). Required with
                ``mode="eval"``; optional in train mode, where the answer
                carries them updated (``.running_mean``, ``.running_var``,
                ``.num_batches_tracked``). Give both or neither.
            mean, var: ``mode="given"`` only (then required): the
                per-channel mean and biased variance to normalize with.
            eps: added to the variance (1e-5).
            mode: ``"train"`` (batch statistics, default), ``"eval"``
                (the running statistics) or ``"given"`` (``mean`` / ``var``).
            momentum: weight of this batch in the running-statistics update
                (0.1, PyTorch's convention, unbiased batch variance); None
                for a cumulative average over ``num_batches_tracked + 1``
                batches.
            num_batches_tracked: batches seen so far (0); the answer has it
                plus one in train mode with running statistics.
            output_dtype, return_, explain, histogram_bins,
            histogram_range: as :meth:`layer_norm`; ``return_`` may also
                name ``"running_stats"``.

        Returns:
            :class:`NormResult`; ``.stats`` is per channel.
        """
        return self._call("/v1/norm/batch",
                          [("input", input), ("weight", weight), ("bias", bias),
                           ("running_mean", running_mean),
                           ("running_var", running_var), ("mean", mean),
                           ("var", var)],
                          [_Param("eps", eps, 1e-5),
                           _Param("mode", mode, "train"),
                           _Param("momentum", momentum, 0.1, nullable=True),
                           _Param("num_batches_tracked", num_batches_tracked, 0),
                           *_common(output_dtype, return_, explain,
                                    histogram_bins, histogram_range)],
                          NormResult)

    def group_norm(self, input, num_groups, weight=None, bias=None, *,
                   eps=1e-5, output_dtype=None, return_=None, explain=False,
                   histogram_bins=32, histogram_range="shared"):
        """Group norm (``POST /v1/norm/group``; torch.nn.GroupNorm): each
        sample's channels split into ``num_groups`` groups, each normalized
        over its channels and positions.

        Args:
            input: shape (N, C, *), rank >= 2.
            num_groups: required, >= 1 and dividing C.
            weight, bias: optional per-channel scale and shift, shape (C,).
            eps: added to the variance (1e-5).
            output_dtype, return_, explain, histogram_bins,
            histogram_range: as :meth:`layer_norm`.

        Returns:
            :class:`NormResult`; ``.stats`` has shape (N, num_groups).
        """
        return self._call("/v1/norm/group",
                          [("input", input), ("weight", weight), ("bias", bias)],
                          [_Param("num_groups", num_groups),
                           _Param("eps", eps, 1e-5),
                           *_common(output_dtype, return_, explain,
                                    histogram_bins, histogram_range)],
                          NormResult)

    def instance_norm(self, input, weight=None, bias=None, *, eps=1e-5,
                      output_dtype=None, return_=None, explain=False,
                      histogram_bins=32, histogram_range="shared"):
        """Instance norm (``POST /v1/norm/instance``;
        torch.nn.functional.instance_norm): each (sample, channel)
        normalized over its positions.

        Args:
            input: shape (N, C, *), rank >= 2.
            weight, bias: optional per-channel scale and shift, shape (C,).
            eps: added to the variance (1e-5).
            output_dtype, return_, explain, histogram_bins,
            histogram_range: as :meth:`layer_norm`.

        Returns:
            :class:`NormResult`; ``.stats`` has shape (N, C).
        """
        return self._call("/v1/norm/instance",
                          [("input", input), ("weight", weight), ("bias", bias)],
                          [_Param("eps", eps, 1e-5),
                           *_common(output_dtype, return_, explain,
                                    histogram_bins, histogram_range)],
                          NormResult)

    # ---- the family: Lp, LRN, MVN ------------------------------------------------

    def lp_norm(self, input, *, p=2, axis=-1, eps=1e-12, output_dtype=None):
        """Lp normalization (``POST /v1/norm/lp``; torch's F.normalize):
        ``x / max(||x||_p, eps)`` over the ``axis`` dims.

        Args:
            input: any rank.
            p: the order, a positive number or ``math.inf`` (max norm); 2.
            axis: one dim or a list of dims (default -1, the last; torch's
                F.normalize defaults to dim 1).
            eps: the norm is clamped to at least eps (1e-12).
            output_dtype: default the input's dtype.

        Returns:
            :class:`NormResult`; ``.stats.norm`` is ||x||_p per slice.
        """
        return self._call("/v1/norm/lp", [("input", input)],
                          [_Param("p", p, 2), _Param("axis", axis, -1),
                           _Param("eps", eps, 1e-12),
                           _Param("output_dtype", output_dtype)],
                          NormResult)

    def lrn(self, input, size, *, alpha=1e-4, beta=0.75, k=1.0,
            convention="torch", output_dtype=None):
        """Local response normalization across channels
        (``POST /v1/norm/lrn``; torch.nn.LocalResponseNorm, ONNX LRN):
        ``x / (k + alpha / size * sum of x^2 over the window) ** beta``.

        Args:
            input: shape (N, C, *), rank >= 2.
            size: the channel window, >= 1 (required).
            alpha: scale of the window's sum of squares (1e-4).
            beta: the exponent (0.75).
            k: the additive constant (1.0; ONNX's ``bias``).
            convention: where the window lies, ``"torch"`` (default) or
                ``"onnx"`` (they differ for even sizes).
            output_dtype: default the input's dtype.

        Returns:
            :class:`NormResult` with ``.output`` only (LRN has no stats).
        """
        return self._call("/v1/norm/lrn", [("input", input)],
                          [_Param("size", size), _Param("alpha", alpha, 1e-4),
                           _Param("beta", beta, 0.75), _Param("k", k, 1.0),
                           _Param("convention", convention, "torch"),
                           _Param("output_dtype", output_dtype)],
                          NormResult)

    def mvn(self, input, *, axes=None, eps=1e-9, output_dtype=None):
        """Mean-variance normalization (``POST /v1/norm/mvn``; ONNX
        MeanVarianceNormalization): ``(x - mean) / (std + eps)`` over
        ``axes``.

        Args:
            input: any rank; a rank other than 4 needs ``axes``.
            axes: the dims of each group; default ``[0, 2, 3]`` (ONNX's) for
                a rank-4 input.
            eps: added to the (biased) standard deviation (1e-9).
            output_dtype: default the input's dtype.

        Returns:
            :class:`NormResult`; ``.stats`` has mean, var and rstd =
            1 / (std + eps).
        """
        return self._call("/v1/norm/mvn", [("input", input)],
                          [_Param("axes", axes), _Param("eps", eps, 1e-9),
                           _Param("output_dtype", output_dtype)],
                          NormResult)

    # ---- backward passes ------------------------------------------------------------

    def layer_norm_backward(self, input, grad_output, weight=None, bias=None, *,
                            normalized_shape=None, axis=None, eps=1e-5,
                            variance="biased", eps_placement="inside_sqrt",
                            output_dtype=None, return_=None, explain=False):
        """The gradients of :meth:`layer_norm`
        (``POST /v1/norm/layer/backward``), exactly as torch.autograd.

        Args:
            input, weight, bias, normalized_shape, axis, eps, variance,
            eps_placement: the forward's (see :meth:`layer_norm`). For a
                fused add send h (the forward's ``residual_out``) as input.
            grad_output: d loss / d output, the input's shape (any dtype).
            output_dtype: dtype of grad_input (default the input's).
            return_: a name or list of ``"grad_input"``, ``"grad_weight"``,
                ``"grad_bias"``, ``"stats"``, ``"steps"`` (default all but
                steps).
            explain: True adds the gradient's intermediate ``steps``.

        Returns:
            :class:`BackwardResult` (``.grad_input``, ``.grad_weight`` and
            ``.grad_bias`` when a weight / bias was sent, ``.stats``).
        """
        return self._call("/v1/norm/layer/backward",
                          [("input", input), ("grad_output", grad_output),
                           ("weight", weight), ("bias", bias)],
                          [_Param("normalized_shape", normalized_shape),
                           _Param("axis", axis), _Param("eps", eps, 1e-5),
                           _Param("variance", variance, "biased"),
                           _Param("eps_placement", eps_placement, "inside_sqrt"),
                           *_common(output_dtype, return_, explain)],
                          BackwardResult)

    def rms_norm_backward(self, input, grad_output, weight=None, *,
                          normalized_shape=None, axis=None, eps=1e-6,
                          output_dtype=None, return_=None, explain=False):
        """The gradients of :meth:`rms_norm` (``POST /v1/norm/rms/backward``).

        Args:
            input, weight, normalized_shape, axis, eps: the forward's.
            grad_output, output_dtype, return_, explain: as
                :meth:`layer_norm_backward` (no grad_bias: RMS norm has no
                bias).

        Returns:
            :class:`BackwardResult`.
        """
        return self._call("/v1/norm/rms/backward",
                          [("input", input), ("grad_output", grad_output),
                           ("weight", weight)],
                          [_Param("normalized_shape", normalized_shape),
                           _Param("axis", axis), _Param("eps", eps, 1e-6),
                           *_common(output_dtype, return_, explain)],
                          BackwardResult)

    def batch_norm_backward(self, input, grad_output, weight=None, bias=None, *,
                            running_mean=None, running_var=None, mean=None,
                            var=None, eps=1e-5, mode="train", momentum=0.1,
                            num_batches_tracked=0, output_dtype=None,
                            return_=None, explain=False):
        """The gradients of :meth:`batch_norm`
        (``POST /v1/norm/batch/backward``): through the batch statistics in
        train mode, ``rstd * weight * grad_output`` with constant
        statistics (eval, given).

        Args:
            input, weight, bias, running_mean, running_var, mean, var, eps,
            mode, momentum, num_batches_tracked: the forward's (see
                :meth:`batch_norm`).
            grad_output, output_dtype, return_, explain: as
                :meth:`layer_norm_backward`.

        Returns:
            :class:`BackwardResult`.
        """
        return self._call("/v1/norm/batch/backward",
                          [("input", input), ("grad_output", grad_output),
                           ("weight", weight), ("bias", bias),
                           ("running_mean", running_mean),
                           ("running_var", running_var), ("mean", mean),
                           ("var", var)],
                          [_Param("eps", eps, 1e-5),
                           _Param("mode", mode, "train"),
                           _Param("momentum", momentum, 0.1, nullable=True),
                           _Param("num_batches_tracked", num_batches_tracked, 0),
                           *_common(output_dtype, return_, explain)],
                          BackwardResult)

    def group_norm_backward(self, input, grad_output, num_groups, weight=None,
                            bias=None, *, eps=1e-5, output_dtype=None,
                            return_=None, explain=False):
        """The gradients of :meth:`group_norm`
        (``POST /v1/norm/group/backward``).

        Args:
            input, num_groups, weight, bias, eps: the forward's.
            grad_output, output_dtype, return_, explain: as
                :meth:`layer_norm_backward`.

        Returns:
            :class:`BackwardResult`.
        """
        return self._call("/v1/norm/group/backward",
                          [("input", input), ("grad_output", grad_output),
                           ("weight", weight), ("bias", bias)],
                          [_Param("num_groups", num_groups),
                           _Param("eps", eps, 1e-5),
                           *_common(output_dtype, return_, explain)],
                          BackwardResult)

    def instance_norm_backward(self, input, grad_output, weight=None, bias=None,
                               *, eps=1e-5, output_dtype=None, return_=None,
                               explain=False):
        """The gradients of :meth:`instance_norm`
        (``POST /v1/norm/instance/backward``).

        Args:
            input, weight, bias, eps: the forward's.
            grad_output, output_dtype, return_, explain: as
                :meth:`layer_norm_backward`.

        Returns:
            :class:`BackwardResult`.
        """
        return self._call("/v1/norm/instance/backward",
                          [("input", input), ("grad_output", grad_output),
                           ("weight", weight), ("bias", bias)],
                          [_Param("eps", eps, 1e-5),
                           *_common(output_dtype, return_, explain)],
                          BackwardResult)

    def lp_norm_backward(self, input, grad_output, *, p=2, axis=-1, eps=1e-12,
                         output_dtype=None):
        """The gradient of :meth:`lp_norm` (``POST /v1/norm/lp/backward``).

        Args:
            input, p, axis, eps: the forward's.
            grad_output: d loss / d output, the input's shape.
            output_dtype: dtype of grad_input (default the input's).

        Returns:
            :class:`BackwardResult` with ``.grad_input``.
        """
        return self._call("/v1/norm/lp/backward",
                          [("input", input), ("grad_output", grad_output)],
                          [_Param("p", p, 2), _Param("axis", axis, -1),
                           _Param("eps", eps, 1e-12),
                           _Param("output_dtype", output_dtype)],
                          BackwardResult)

    def lrn_backward(self, input, grad_output, size, *, alpha=1e-4, beta=0.75,
                     k=1.0, convention="torch", output_dtype=None):
        """The gradient of :meth:`lrn` (``POST /v1/norm/lrn/backward``).

        Args:
            input, size, alpha, beta, k, convention: the forward's.
            grad_output: d loss / d output, the input's shape.
            output_dtype: dtype of grad_input (default the input's).

        Returns:
            :class:`BackwardResult` with ``.grad_input``.
        """
        return self._call("/v1/norm/lrn/backward",
                          [("input", input), ("grad_output", grad_output)],
                          [_Param("size", size), _Param("alpha", alpha, 1e-4),
                           _Param("beta", beta, 0.75), _Param("k", k, 1.0),
                           _Param("convention", convention, "torch"),
                           _Param("output_dtype", output_dtype)],
                          BackwardResult)

    def mvn_backward(self, input, grad_output, *, axes=None, eps=1e-9,
                     output_dtype=None):
        """The gradient of :meth:`mvn` (``POST /v1/norm/mvn/backward``).

        Args:
            input, axes, eps: the forward's.
            grad_output: d loss / d output, the input's shape.
            output_dtype: dtype of grad_input (default the input's).

        Returns:
            :class:`BackwardResult` with ``.grad_input``.
        """
        return self._call("/v1/norm/mvn/backward",
                          [("input", input), ("grad_output", grad_output)],
                          [_Param("axes", axes), _Param("eps", eps, 1e-9),
                           _Param("output_dtype", output_dtype)],
                          BackwardResult)

    # ---- moments and the residual experiment ---------------------------------------

    def moments(self, input, *, layout="rows", normalized_shape=None, axis=None):
        """Raw moments per group (``POST /v1/moments``): count, mean and M2
        (sum of squared deviations), which merge exactly across shards.

        Args:
            input: any rank >= 1 for ``"rows"``; (N, C, *) for
                ``"channels"``.
            layout: ``"rows"`` (per row of the trailing dims, as layer
                norm; default) or ``"channels"`` (per channel, as batch
                norm).
            normalized_shape, axis: ``"rows"`` only, as :meth:`layer_norm`.

        Returns:
            :class:`Moments` (float64).
        """
        return self._call("/v1/moments", [("input", input)],
                          [_Param("layout", layout, "rows"),
                           _Param("normalized_shape", normalized_shape),
                           _Param("axis", axis)],
                          Moments)

    def merge_moments(self, parts):
        """Merges partial moments (``POST /v1/moments/merge``; Chan et
        al.'s parallel update), e.g. of the shards of a batch.

        Args:
            parts: a non-empty list of :class:`Moments` (or dicts with
                ``count``, ``mean`` and ``m2``), each listing the same
                groups in the same order.

        Returns:
            :class:`Moments` of the whole, shape ``(groups,)``.
        """
        doc = []
        for part in parts:
            get = part.get if isinstance(part, dict) else (
                lambda k, _p=part: getattr(_p, k))
            doc.append({k: _tensors.json_numbers(get(k))
                        for k in ("count", "mean", "m2")})
        return self._call("/v1/moments/merge", [], [_Param("parts", doc)],
                          Moments)

    def simulate_residual(self, *, tokens=16, d=64, layers=24, norm="layer",
                          placement="both", seed=1, eps=1e-5, gain=1.0,
                          gradients=False, classes=16):
        """The residual-stream experiment (``POST /v1/residual/simulate``):
        a random stack of residual blocks with the norm before (``pre``),
        after (``post``) or DeepNorm-style (``deepnorm``) the residual add.

        Args:
            tokens: rows of the stream (16; 1..4096).
            d: width of the stream (64; 2..4096).
            layers: residual blocks (24; 1..4096).
            norm: ``"layer"`` (default) or ``"rms"`` in each block.
            placement: ``"pre"``, ``"post"``, ``"deepnorm"``, ``"both"``
                (pre and post, default) or a list of them.
            seed: seeds the weights and the input (1).
            eps: the norms' eps (1e-5).
            gain: scale of each sublayer's output (1.0; 0..100).
            gradients: True also backpropagates a random readout's loss
                (``loss``, ``grad_w1``, ``grad_w2``, ``grad_stream``).
            classes: classes of that readout (16; 2..1024).

        Returns:
            :class:`ResidualResult` (``.pre.rms``, ``.post.cosine``, ...).
        """
        return self._call("/v1/residual/simulate", [],
                          [_Param("tokens", tokens, 16), _Param("d", d, 64),
                           _Param("layers", layers, 24),
                           _Param("norm", norm, "layer"),
                           _Param("placement", placement, "both"),
                           _Param("seed", seed, 1), _Param("eps", eps, 1e-5),
                           _Param("gain", gain, 1.0),
                           _Param("gradients", gradients, False),
                           _Param("classes", classes, 16)],
                          ResidualResult)


def _common(output_dtype, return_, explain, histogram_bins=None,
            histogram_range=None):
    """The settings the norms and backwards share (their API defaults)."""
    params = [_Param("output_dtype", output_dtype),
              _Param("return", return_), _Param("explain", explain, False)]
    if histogram_bins is not None:
        params += [_Param("histogram_bins", histogram_bins, 32),
                   _Param("histogram_range", histogram_range, "shared")]
    return params


def _version():
    from . import __version__
    return __version__
