#!/usr/bin/env python3
"""kernel_table.py -- the "kernel GB/s" rows of `make bench`, in one table.

Runs build/kernel_bench (normd's kernels and the scale-copy memory ceiling,
measured in the same run, 1 and 2 threads) one case at a time, each run
followed at once by PyTorch (Debian's python3-torch) on the same case with
torch.set_num_threads(threads), then prints one table:

| case | normd | memory ceiling | PyTorch | ratio | vs PyTorch | target |

GB/s = (bytes of x read + bytes of y written) / best time; ratio = normd /
ceiling, the plain scale-copy loop (SSE2, 4 floats per instruction: the
memory's speed, not the core's; a scalar loop would be compute-bound). normd writes outputs of 16 MiB or more
with streaming stores (no read for ownership), which the plain loop does
not: for those rows the memory ceiling column also shows, in brackets, the
scale-copy with streaming stores, and the ratio against it. Targets (issue 8): float32 tensors >= 16 MiB on 1 thread reach 80%
of the ceiling; every row at least as fast as PyTorch; 2 threads >= 1.6x
the 1-thread figure for tensors >= 16 MiB. Issue 20 adds: bfloat16 rows
of 4096x4096 and 8x64x56x56 >= 0.5 of the ceiling, and float32 group,
batch (training) and instance norm at 8x64x56x56 (x and y fit in L3, so
the ceiling there is the L3's) >= 0.5 of it, at every thread count.

Then the backward passes (issue 20), in a second table:

| case | normd | 3-stream ceiling | PyTorch | ratio | vs PyTorch | target |

GB/s = (bytes of x and dy read + bytes of dx written) / best time, the
ceiling the three-stream loop z = a*x + b*y over the same bytes (plain, and
in brackets with streaming stores for tensors >= 16 MiB), PyTorch the
backward alone of torch.autograd.grad of the functional op w.r.t. the input,
weight and bias (the graph built once, the grad repeated on it). Batch eval
has no row: its backward is dx = rstd * w * dy, a scale. Targets: ahead of
PyTorch in every row; float32 tensors >= 16 MiB on 1 thread >= 0.6 of the
three-stream ceiling.

Usage: bench/kernel_table.py [path/to/kernel_bench]
"""
import os
import subprocess
import sys
import time

# OpenBLAS core-type overrides slow current builds down; the kernels here
# do not use BLAS, but unset them for this process alone (never in tests).
for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(var, None)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/kernel_bench"
SIXTEEN_MIB = 16 << 20

CASES = {
    "layer 4096x4096": ("layer", (4096, 4096)),
    "layer 64x768": ("layer", (64, 768)),
    "rms 4096x4096": ("rms", (4096, 4096)),
    "rms 64x768": ("rms", (64, 768)),
    "group G=32 8x64x56x56": ("group", (8, 64, 56, 56)),
    "batch train 8x64x56x56": ("batch_train", (8, 64, 56, 56)),
    "batch eval 8x64x56x56": ("batch_eval", (8, 64, 56, 56)),
    "instance 8x64x56x56": ("instance", (8, 64, 56, 56)),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# The channel norms that take their statistics (issue 20's L3 target).
CHANNEL_STATS = ("group", "batch_train", "instance")


def rms_norm(x, w, eps=1e-6):
    """Llama's RMSNorm: in float32, cast back to the input dtype."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * y.type_as(x)


def torch_fn(op, shape, dtype):
    g = torch.Generator().manual_seed(42)
    x = (torch.rand(shape, generator=g) * 5 - 2).to(dtype)
    n = shape[-1] if op in ("layer", "rms") else shape[1]
    w = (torch.rand(n, generator=g) + 0.5).to(dtype)
    b = (torch.rand(n, generator=g) - 0.5).to(dtype)
    rm = torch.zeros(n, dtype=dtype)
    rv = torch.ones(n, dtype=dtype)
    with torch.no_grad():
        if op == "layer":
            return lambda: F.layer_norm(x, (n,), w, b, 1e-5), x
        if op == "rms":
            return lambda: rms_norm(x, w), x
        if op == "group":
            return lambda: F.group_norm(x, 32, w, b, 1e-5), x
        if op == "batch_train":
            return (lambda: F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)), x
        if op == "batch_eval":
            return (lambda: F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)), x
        return (lambda: F.instance_norm(x, weight=w, bias=b, eps=1e-5)), x


def torch_backward_fn(op, shape, dtype):
    """The backward alone: the graph built once, grad repeated on it."""
    g = torch.Generator().manual_seed(42)
    x = (torch.rand(shape, generator=g) * 5 - 2).to(dtype).requires_grad_()
    n = shape[-1] if op in ("layer", "rms") else shape[1]
    w = (torch.rand(n, generator=g) + 0.5).to(dtype).requires_grad_()
    b = (torch.rand(n, generator=g) - 0.5).to(dtype).requires_grad_()
    dy = (torch.rand(shape, generator=g) * 2 - 1).to(dtype)
    rm = torch.zeros(n, dtype=dtype)
    rv = torch.ones(n, dtype=dtype)
    inputs = (x, w, b)
    if op == "layer":
        y = F.layer_norm(x, (n,), w, b, 1e-5)
    elif op == "rms":
        y, inputs = rms_norm(x, w), (x, w)
    elif op == "group":
        y = F.group_norm(x, 32, w, b, 1e-5)
    elif op == "batch_train":
        y = F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
    else:
        y = F.instance_norm(x, weight=w, bias=b, eps=1e-5)
    return (lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)), x


def best_time(fn):
    with torch.no_grad():
        fn()  # warm up
        best, start, reps = float("inf"), time.perf_counter(), 0
        while reps < 5 or time.perf_counter() - start < 0.3:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
            reps += 1
    return best


def torch_gbps(case, dtype, threads, backward=False):
    op, shape = CASES[case]
    torch.set_num_threads(threads)
    try:
        fn, x = (torch_backward_fn if backward else torch_fn)(
            op, shape, DTYPES[dtype])
        fn()
    except (RuntimeError, NotImplementedError) as e:  # e.g. no bf16 kernel
        return None, str(e).splitlines()[0][:40]
    nbytes = x.numel() * x.element_size()
    streams = 3 if backward else 2  # x, dy read and dx written; x and y
    return streams * nbytes / best_time(fn) / 1e9, None


def measure():
    """normd's rows from build/kernel_bench, one case, dtype and direction
    per run, each followed at once by PyTorch on the same case, dtype and
    threads: this host's speed drifts over minutes (the same row has moved
    by 2x between runs), so each comparison is made within seconds, not
    across the whole table. Rows: (case, dtype, threads, normd GB/s,
    ceiling, streaming ceiling, PyTorch GB/s or None, why not)."""
    simd = "?"
    rows, bw_rows = [], []
    for direction in ("forward", "backward"):
        for dtype in DTYPES:
            for case in CASES:
                out = subprocess.run(
                    [BIN, "2", "%s %s %s" % (case, dtype, direction)],
                    check=True, capture_output=True, text=True).stdout
                for line in out.splitlines():
                    if line.startswith("#simd|"):
                        simd = line.split("|")[1]
                        continue
                    backward = line.startswith("bw|")
                    fields = line.split("|")[backward:]
                    if fields[0] != case:
                        continue
                    threads = int(fields[2])
                    tgbps, why = torch_gbps(case, dtype, threads, backward)
                    (bw_rows if backward else rows).append(
                        (case, dtype, threads, float(fields[3]),
                         float(fields[4]), float(fields[5]), tgbps, why))
    return simd, rows, bw_rows


def main():
    simd, rows, bw_rows = measure()
    one = {(r[0], r[1]): r[3] for r in rows if r[2] == 1}
    one_ceil = {(r[0], r[1]): r[4] for r in rows if r[2] == 1}

    print("kernel GB/s (x read + y written): normd (simd=%s) vs scale-copy "
          "y = a*x + b vs PyTorch %s, same threads" % (simd, torch.__version__))

    def forward_checks(case, dtype, threads, normd, ceil, ceil_nt, nbytes, tgbps):
        checks = []
        if tgbps is not None:
            checks.append((">= PyTorch", normd >= tgbps))
        if dtype == "float32" and threads == 1 and nbytes >= SIXTEEN_MIB:
            checks.append((">= 80% ceiling", normd >= 0.8 * ceil))
            checks.append((">= 80% streaming ceiling", normd >= 0.8 * ceil_nt))
        if threads == 2 and nbytes >= SIXTEEN_MIB:
            # with what the host's memory gave: a ceiling that itself does
            # not scale 1.6x leaves the target out of reach on that run
            scale = normd / one[(case, dtype)]
            ceil_scale = ceil / one_ceil[(case, dtype)]
            checks.append((">= 1.6x 1 thread (%.2fx; the ceiling %.2fx)"
                           % (scale, ceil_scale), scale >= 1.6))
        shape = CASES[case][1]
        if dtype == "bfloat16" and shape in ((4096, 4096), (8, 64, 56, 56)):
            checks.append((">= 0.5 ceiling", normd >= 0.5 * ceil))
        if (dtype == "float32" and CASES[case][0] in CHANNEL_STATS
                and shape == (8, 64, 56, 56)):
            checks.append((">= 0.5 L3 ceiling", normd >= 0.5 * ceil))
        return checks

    print_table(rows, "memory ceiling", forward_checks, "targets")
    backward_table(simd, bw_rows)


def backward_table(simd, rows):
    """The backward rows against torch autograd and z = a*x + b*y."""
    print()
    print("backward GB/s (x and dy read + dx written): normd (simd=%s) vs "
          "three-stream z = a*x + b*y vs PyTorch %s autograd, same threads"
          % (simd, torch.__version__))

    def backward_checks(case, dtype, threads, normd, ceil, ceil_nt, nbytes, tgbps):
        checks = []
        if tgbps is not None:
            checks.append(("ahead of PyTorch", normd > tgbps))
        if dtype == "float32" and threads == 1 and nbytes >= SIXTEEN_MIB:
            checks.append((">= 0.6 ceiling", normd >= 0.6 * ceil))
            checks.append((">= 0.6 streaming ceiling", normd >= 0.6 * ceil_nt))
        return checks

    print_table(rows, "3-stream ceiling", backward_checks, "backward targets")


def print_table(rows, ceiling_name, checks_of, summary):
    """One markdown table of kernel rows (measure()'s) beside PyTorch, each
    row marked against the targets checks_of gives it (name, met), and the
    count of both."""
    print()
    print("| case | normd | %s | PyTorch | ratio | vs PyTorch | target |"
          % ceiling_name)
    print("|---|---|---|---|---|---|---|")
    met = missed = 0
    for case, dtype, threads, normd, ceil, ceil_nt, tgbps, why in rows:
        op, shape = CASES[case]
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * (4 if dtype == "float32" else 2)
        checks = checks_of(case, dtype, threads, normd, ceil, ceil_nt, nbytes,
                           tgbps)
        verdict = ", ".join("%s %s" % (n, "met" if ok else "MISSED")
                            for n, ok in checks)
        met += sum(ok for _, ok in checks)
        missed += sum(not ok for _, ok in checks)
        streamed = nbytes >= SIXTEEN_MIB
        print("| %s %s %dT | %.1f | %s | %s | %s | %s | %s |" % (
            case, dtype, threads, normd,
            "%.1f (%.1f)" % (ceil, ceil_nt) if streamed else "%.1f" % ceil,
            "%.1f" % tgbps if tgbps is not None else "n/a (%s)" % why,
            "%.2f (%.2f)" % (normd / ceil, normd / ceil_nt) if streamed
            else "%.2f" % (normd / ceil),
            "%.2fx" % (normd / tgbps) if tgbps else "-",
            verdict or "-"))
    print()
    print("%s: %d met, %d missed" % (summary, met, missed))


if __name__ == "__main__":
    main()
