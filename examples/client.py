#!/usr/bin/env python3
"""client.py -- normd from Python: the standard library for HTTP, numpy for
the arrays. Sends a layer norm as JSON and a batch of activations as a .npy
file, prints what comes back, and checks it against numpy.

  python3 examples/client.py                    # a daemon on localhost:8080
  NORMD_URL=http://host:9000 python3 examples/client.py
  NORMD_API_KEY=... python3 examples/client.py  # when the daemon has API keys
"""
import io
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

URL = os.environ.get("NORMD_URL", "http://localhost:8080").rstrip("/")


def call(path, body, content_type, accept=None, query=None):
    """POSTs body and returns (Content-Type, bytes) of the answer; an error
    answer (RFC 9457 problem details) is raised with its code."""
    if query:
        path += "?" + urllib.parse.urlencode(query)
    headers = {"Content-Type": content_type}
    if accept:
        headers["Accept"] = accept
    if os.environ.get("NORMD_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["NORMD_API_KEY"]
    req = urllib.request.Request(URL + path, data=body, headers=headers,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as e:
        problem = json.loads(e.read() or b"{}")
        raise SystemExit("normd said %s %s: %s" % (
            e.code, problem.get("code"), problem.get("detail")))


def layer_norm_reference(x, eps=1e-5):
    """torch.nn.LayerNorm over the last dim, in float64."""
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def main():
    # 1. JSON: the textbook example, with the statistics behind the result
    x = np.array([[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]], dtype=np.float32)
    _, body = call("/v1/norm/layer", json.dumps({"input": x.tolist()}).encode(),
                   "application/json")
    answer = json.loads(body)
    out = np.array(answer["output"]["data"], dtype=np.float32)
    out = out.reshape(answer["output"]["shape"])
    print("layer norm (JSON) of\n%s\n->\n%s" % (x, out))
    print("mean %s, var %s, rstd %s" % (answer["stats"]["mean"],
                                        answer["stats"]["var"],
                                        answer["stats"]["rstd"]))
    np.testing.assert_allclose(out, layer_norm_reference(x), rtol=1e-5,
                               atol=1e-6)

    # 2. .npy: a (4, 8) float32 batch as the body, settings in the query
    # string; the answer is the output as .npy (numpy.load reads it back)
    rng = np.random.default_rng(0)
    batch = rng.normal(3.0, 2.0, size=(4, 8)).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, batch)
    content_type, body = call("/v1/norm/layer", buf.getvalue(),
                              "application/x-npy", query={"eps": "1e-5"})
    assert content_type == "application/x-npy", content_type
    y = np.load(io.BytesIO(body))
    print("layer norm (.npy) of a %s %s batch -> %s %s; row means %s, "
          "row stds %s" % (batch.shape, batch.dtype, y.shape, y.dtype,
                           np.round(y.mean(axis=1), 6),
                           np.round(y.std(axis=1), 4)))
    np.testing.assert_allclose(y, layer_norm_reference(batch), rtol=1e-4,
                               atol=1e-5)

    # 3. .npy in, JSON out: RMS norm of the same batch, statistics only
    _, body = call("/v1/norm/rms", buf.getvalue(), "application/x-npy",
                   accept="application/json", query={"return": "stats"})
    stats = json.loads(body)["stats"]
    np.testing.assert_allclose(stats["rms"],
                               np.sqrt((batch.astype(np.float64) ** 2)
                                       .mean(axis=1)), rtol=1e-5)
    print("rms norm (.npy in, JSON out): rms per row %s" % stats["rms"])
    print("client.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
