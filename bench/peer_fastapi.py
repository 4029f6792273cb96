"""peer_fastapi.py -- the peer normd's HTTP bench compares with: layer norm
over the last dim as a Python user would deploy it (FastAPI + numpy on
uvicorn with uvloop and httptools), answering normd's JSON request shape
with normd's answer fields (output, and stats mean / var / rstd).

    /usr/bin/python3 -m uvicorn --app-dir bench peer_fastapi:app \
        --workers 2 --loop uvloop --http httptools --port 8080

Debian packages: python3-fastapi python3-uvicorn python3-uvloop
python3-httptools python3-numpy. The numbers are float32 as in normd
(statistics in float64, as torch's CPU kernel accumulates); the body is
parsed with the standard json module, as FastAPI's Request.json() does.
"""
import json

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

app = FastAPI()


@app.post("/v1/norm/layer")
async def layer(request: Request):
    try:
        body = await request.json()
        t = body["input"]
        x = np.asarray(t["data"], dtype=np.float32).reshape(t["shape"])
        eps = float(body.get("eps", 1e-5))
    except (ValueError, KeyError, TypeError) as e:
        return Response(json.dumps({"detail": str(e)}), status_code=400,
                        media_type="application/problem+json")
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = x64.var(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = ((x64 - mean) * rstd).astype(np.float32)
    rows = list(x.shape[:-1])
    return JSONResponse({
        "output": {"shape": list(x.shape), "dtype": "float32",
                   "data": y.ravel().tolist()},
        "stats": {"shape": rows,
                  "mean": mean.astype(np.float32).ravel().tolist(),
                  "var": var.astype(np.float32).ravel().tolist(),
                  "rstd": rstd.astype(np.float32).ravel().tolist()},
    })


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}
