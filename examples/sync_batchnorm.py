#!/usr/bin/env python3
"""Batch norm over a batch split across normd replicas (SyncBatchNorm over HTTP).

Batch norm needs per-channel statistics of the *whole* batch. When the batch
is too big for one request, or is spread over replicas behind a load
balancer, each shard is reduced to partial moments, the moments are merged,
and every shard is normalized with the merged statistics -- what PyTorch's
SyncBatchNorm does across GPUs:

  1. POST /v1/moments        {"input": shard, "layout": "channels"}
                             -> per channel: count, mean, m2 (sum of squared
                                deviations), one request per shard, in parallel
  2. POST /v1/moments/merge  {"parts": [the three answers]}
                             -> count, mean, m2 of the whole batch (Chan et al.)
  3. POST /v1/norm/batch     {"input": shard, "mode": "given",
                              "mean": mean, "var": m2 / count, ...}
                             -> each shard normalized, in parallel

var is the biased variance m2 / count, as batch norm uses in training.
mean and var are sent as float64 tensors: as bare JSON arrays they would be
float32 (the default dtype) and lose digits when |mean| >> std.

The script then makes one /v1/norm/batch call on the whole batch and checks
that both answers agree to float32 rounding and the float32 apply's bound
(the API's numerics note). Python standard library only.

  python3 examples/sync_batchnorm.py --url http://localhost:8080
  python3 examples/sync_batchnorm.py --shape 12,8,16,16 --shards 4

To keep running statistics as PyTorch does, update running_mean with mean
and running_var with the unbiased m2 / (count - 1); this example keeps none.
"""
import argparse
import json
import os
import random
import struct
import sys
import threading
import urllib.error
import urllib.request

F32_EPS = 2.0 ** -23


def f32(x):
    """x rounded to the nearest float32 (what the server sees for float32)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def post(url, path, obj, timeout=60):
    """POSTs obj as JSON; returns the decoded answer or raises with the problem."""
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(obj).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError("%s -> %d %s" % (path, e.code, e.read().decode(errors="replace")))


def parallel(fn, items):
    """fn(item) for every item on its own thread; answers in order."""
    out, errs = [None] * len(items), []

    def run(i, item):
        try:
            out[i] = fn(item)
        except Exception as e:  # re-raised below, on the caller's thread
            errs.append(e)

    threads = [threading.Thread(target=run, args=(i, it)) for i, it in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errs:
        raise errs[0]
    return out


def make_batch(n, c, h, w, seed):
    """An (N, C, H, W) float32 batch whose channels have large, different
    means and small spreads (the case E[x^2] - E[x]^2 gets wrong)."""
    rng = random.Random(seed)
    centre = [rng.uniform(-1000, 1000) for _ in range(c)]
    spread = [rng.uniform(0.1, 5.0) for _ in range(c)]
    return [f32(rng.gauss(centre[ch], spread[ch]))
            for _ in range(n) for ch in range(c) for _ in range(h * w)]


def split(n, shards):
    """Shard sizes along N, as even as possible (like numpy.array_split)."""
    return [n // shards + (1 if i < n % shards else 0) for i in range(shards)]


def tensor(shape, data, dtype="float32"):
    return {"shape": list(shape), "dtype": dtype, "data": data}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("NORMD_URL", "http://127.0.0.1:8080"),
                    help="normd, or the load balancer in front of the replicas")
    ap.add_argument("--shape", default="6,3,8,8", help="N,C,H,W (default 6,3,8,8)")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    n, c, h, w = (int(v) for v in args.shape.split(","))
    if not 1 <= args.shards <= n:
        ap.error("--shards must be between 1 and N")
    x = make_batch(n, c, h, w, args.seed)
    rng = random.Random(args.seed + 1)
    weight = [f32(rng.uniform(0.5, 2.0)) for _ in range(c)]
    bias = [f32(rng.uniform(-1.0, 1.0)) for _ in range(c)]

    per_sample = c * h * w
    shards, start = [], 0
    for size in split(n, args.shards):
        shards.append(tensor([size, c, h, w], x[start * per_sample:(start + size) * per_sample]))
        start += size

    # 1. Partial moments per shard (each request may land on another replica).
    parts = parallel(lambda s: post(args.url, "/v1/moments",
                                    {"input": s, "layout": "channels"}), shards)
    # 2. Merged moments of the whole batch.
    merged = post(args.url, "/v1/moments/merge", {"parts": parts})
    mean = merged["mean"]
    var = [m2 / count for m2, count in zip(merged["m2"], merged["count"])]
    # 3. Every shard normalized with the merged statistics.
    given = {"mode": "given", "eps": args.eps, "weight": weight, "bias": bias,
             "mean": tensor([c], mean, "float64"), "var": tensor([c], var, "float64")}
    outs = parallel(lambda s: post(args.url, "/v1/norm/batch", dict(given, input=s)), shards)
    y_sharded = [v for o in outs for v in o["output"]["data"]]

    # The reference: the whole batch in one request (train mode).
    whole = post(args.url, "/v1/norm/batch",
                 {"input": tensor([n, c, h, w], x), "eps": args.eps,
                  "weight": weight, "bias": bias})
    y_whole = whole["output"]["data"]

    failures = []
    if len(y_sharded) != len(y_whole):
        failures.append("output sizes differ: %d vs %d" % (len(y_sharded), len(y_whole)))
    # Outputs: float32 values. The sharded ones (given statistics) are the
    # double result rounded once; the whole batch in training mode does its
    # final scale and shift in float32 (the API's numerics note: within
    # 5.4e-7 * max(1, |y|) of that). Allow both, plus two float32 roundings
    # of the larger value.
    worst, worst_excess = 0.0, 0.0
    for a, b in zip(y_sharded, y_whole):
        d = abs(a - b)
        allowed = 5.4e-7 * max(1.0, abs(a), abs(b)) + 2 * F32_EPS * max(abs(a), abs(b), 2.0 ** -20)
        worst, worst_excess = max(worst, d), max(worst_excess, d / allowed)
    if worst_excess > 1.0:
        failures.append("outputs differ by up to %.3g (%.2f x the allowed difference)"
                        % (worst, worst_excess))
    # Statistics: the whole-batch stats are float32; the merged ones float64.
    stats = whole["stats"]
    for name, got, want in (("mean", mean, stats["mean"]), ("var", var, stats["var"])):
        for ch, (g, wv) in enumerate(zip(got, want)):
            if abs(f32(g) - wv) > F32_EPS * abs(wv):
                failures.append("channel %d %s: merged %r, whole batch %r" % (ch, name, g, wv))
    if sum(merged["count"]) != n * h * w * c:
        failures.append("merged counts %r do not add up to N*H*W" % merged["count"])

    print("sync_batchnorm: (N,C,H,W)=(%d,%d,%d,%d) in %d shards %s via %s"
          % (n, c, h, w, args.shards, split(n, args.shards), args.url))
    for ch in range(c):
        print("  channel %d: mean %.6f var %.6f (count %d)"
              % (ch, mean[ch], var[ch], merged["count"][ch]))
    print("  sharded vs whole batch: max |diff| %.3g over %d values (%.2f x the allowed)"
          % (worst, len(y_whole), worst_excess))
    for f in failures:
        print("  MISMATCH: " + f)
    print("sync_batchnorm: %s" % ("FAILED" if failures else "OK, equal within float32 rounding"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
