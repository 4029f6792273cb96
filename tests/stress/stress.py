#!/usr/bin/env python3
"""normd under load, faults and slow clients, on loopback only.

    make stress      # the full run (soak 10 minutes; about 14 minutes in all)
    make stress-ci   # the CI run (under 3 minutes)
    tests/stress/stress.py --normd build/normd --ci --only soak,drain

Scenarios (each starts its own daemon on an ephemeral port):
  calibrate  the mixed traffic's maximum throughput (closed loop)
  soak       mixed traffic (every route, JSON and binary, small and large)
             at 80% of that: no 5xx but intended 503s, no wrong answer,
             RSS within the memory budget under load and, once idle, back
             to its level after a warm-up; fd count back to idle
  overload   4x the sustainable rate of a CPU-bound request: 503 +
             Retry-After for the excess, accepted latency bounded, and no
             503 soon after the load drops back
  slowloris  500 connections trickling or stalling headers and bodies while
             normal clients keep their latency; stalled ones are cut by
             connection_timeout_s, trickling ones by request_timeout_s
  abrupt     clients that vanish mid-upload, mid-response and while their
             job runs: daemon healthy, fds and memory back to their level
  drain      SIGTERM with 100 requests in flight: all answered in full,
             exit 0
  badinput   >= 200 malformed requests, each answered with its documented
             status and a valid problem body; daemon healthy after

Every wait is bounded. Prints a table of figures, then (CI) one line
"stress: N passed, N failed". Exit status 1 on any failed check.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import traffic  # noqa: E402
import badinputs  # noqa: E402
from traffic import Conn, Req, percentile, js, JSON, PROBLEM  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def free_port():
    """A TCP port nobody listens on right now (bind to 0, read, close)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Durations (seconds) and sizes: full run, CI run.
PROFILES = {
    "full": dict(calibrate=15, soak=600, sample=5, overload=30, recover=10,
                 slow_conns=500, slow_timeout=10, slow_deadline=20, slow_hold=35,
                 abrupt_rounds=5, abrupt_clients=201, abrupt_timeout=10, drain=100),
    "ci": dict(calibrate=5, soak=45, sample=1, overload=8, recover=4,
               slow_conns=500, slow_timeout=3, slow_deadline=6, slow_hold=11,
               abrupt_rounds=4, abrupt_clients=99, abrupt_timeout=4, drain=100),
}

# How long the drain scenario's requests keep the workers busy, one after
# another: the signal comes within ~0.5 s of the first, so most are queued.
DRAIN_BUSY_S = 3.0
# The most the simulation takes at 32 tokens of d = 64
# (NORM_RESIDUAL_MAX_WORK = 2^30 >= tokens * layers * d^2).
DRAIN_MAX_LAYERS = (1 << 30) // (32 * 64 * 64)


def timed(fn):
    """Seconds fn() takes."""
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


# ---- the daemon ------------------------------------------------------------------

class Daemon:
    """normd on 127.0.0.1 and a free port; stderr drained to a ring. The port
    is picked here rather than with --port 0: at --log-level warn the daemon
    does not print its startup line (it is an info line), so there is no
    "listening on" to read the port from."""

    def __init__(self, binary, *flags, env=None):
        self.port = free_port()
        args = [str(binary), "--config", "config/normd.json", "--host", "127.0.0.1",
                "--port", str(self.port), "--log-level", "warn"] + [str(f) for f in flags]
        self.lines = deque(maxlen=2000)
        self.proc = subprocess.Popen(args, cwd=REPO, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=dict(os.environ, **(env or {})),
                                     start_new_session=True)

        def reader():
            for raw in iter(self.proc.stderr.readline, b""):
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

        self.reader = threading.Thread(target=reader, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 15
        while not self._answers_healthz():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("normd did not start on port %d: %s"
                                   % (self.port, "\n".join(self.lines)))
            time.sleep(0.05)

    def _answers_healthz(self):
        try:
            return self.get("/healthz", timeout=2)[0] == 200
        except OSError:
            return False

    @property
    def pid(self):
        return self.proc.pid

    def rss_kb(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def alive(self):
        return self.proc.poll() is None

    def get(self, path, timeout=10):
        return traffic.one_shot(self.port, Req("get", "GET", path), timeout)

    def healthy(self):
        try:
            s, _, _ = self.get("/healthz")
            t, _, body = traffic.one_shot(self.port, Req(
                "probe", "POST", "/v1/norm/layer", js({"input": [[1, 2, 3]]}),
                {"Content-Type": JSON}), 10)
            return s == 200 and t == 200 and b"output" in body
        except OSError:
            return False

    def metric(self, name):
        """A gauge or counter summed over its label sets, from /metrics."""
        _, _, body = self.get("/metrics")
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith(name) and (line[len(name)] in " {"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.reader.join(2)


# ---- bookkeeping ------------------------------------------------------------------

class Report:
    def __init__(self):
        self.checks = []   # (scenario, what, ok, detail, known)
        self.figures = []  # (scenario, text)

    def check(self, scenario, what, ok, detail="", known=None):
        ok = bool(ok)
        self.checks.append((scenario, what, ok, detail, known))
        mark = "ok" if ok else ("KNOWN" if known else "FAIL")
        print("  [%s] %s%s" % (mark, what, (": " + detail) if detail else ""),
              flush=True)
        if not ok and known:
            print("         known issue: %s" % known, flush=True)

    def figure(self, scenario, text):
        self.figures.append((scenario, text))

    def passed(self):
        return sum(1 for c in self.checks if c[2])

    def failed(self, strict=False):
        return sum(1 for c in self.checks if not c[2] and (strict or not c[4]))


def ms(x):
    return "%.1f ms" % (x * 1e3)


def status_summary(res):
    return ", ".join("%s: %d" % (k, v) for k, v in sorted(res.status.items())) + (
        ", transport errors: %d" % res.nerrors if res.nerrors else "")


def sampler(d, every, stop, out):
    """Samples (t, rss_kb, fds) every `every` seconds until stop is set."""
    t0 = time.monotonic()
    while not stop.wait(every):
        try:
            out.append((time.monotonic() - t0, d.rss_kb(), d.fds()))
        except OSError:
            return


# ---- scenarios -----------------------------------------------------------------------

def calibrate(args, prof, rep, state):
    d = Daemon(args.normd)
    try:
        mix = traffic.full_mix()
        traffic.closed_loop(d.port, mix, 8, 1.0)  # warm up
        res = traffic.closed_loop(d.port, mix, 16, prof["calibrate"])
        rps = res.count(200) / prof["calibrate"]
        state["max_rps"] = rps
        lat = res.latencies()
        # light-load latency of a small request, the yardstick of later checks
        light = traffic.closed_loop(d.port, [traffic.compute_mix()[0]], 1, 2.0)
        small = light.latencies()
        state["small_p50"] = percentile(small, 50)
        state["small_p99"] = percentile(small, 99)
        rep.figure("calibrate", "max throughput %.0f req/s (16 connections, mixed); "
                   "p50 %s p99 %s; small request alone p50 %s p99 %s"
                   % (rps, ms(percentile(lat, 50)), ms(percentile(lat, 99)),
                      ms(state["small_p50"]), ms(state["small_p99"])))
        rep.check("calibrate", "every answer right while calibrating",
                  res.nwrong == 0 and res.nerrors == 0 and set(res.status) <= {200, 503},
                  status_summary(res) + ("; " + "; ".join(res.wrong + res.errors)
                                         if res.wrong or res.errors else ""))
    finally:
        d.kill()


def idle_rss_kb(d, settle=1.5):
    """RSS once the daemon has been idle long enough to give its free heap
    back: normd keeps freed buffers in one malloc heap while it is busy (no
    page faults per request; server/main.c) and calls malloc_trim after 1 s
    without compute requests (server/http_clock.c). What is measured then is
    what the daemon still holds, not the heap's high-water mark."""
    time.sleep(settle)
    return d.rss_kb()


def soak(args, prof, rep, state):
    rate = 0.8 * state.get("max_rps", 200)
    warm_s = 0.2 * prof["soak"]
    d = Daemon(args.normd)
    try:
        samples, stop = [], threading.Event()
        rss0, fd0 = d.rss_kb(), d.fds()
        # the first fifth warms the allocator and the connection pool up;
        # what the daemon holds once idle after it is the yardstick
        warm = traffic.open_loop(d.port, traffic.full_mix(), rate, warm_s, clients=32, seed=3)
        rss_warm = idle_rss_kb(d)
        sam = threading.Thread(target=sampler, args=(d, prof["sample"], stop, samples),
                               daemon=True)
        sam.start()
        res = traffic.open_loop(d.port, traffic.full_mix(), rate, prof["soak"] - warm_s,
                                clients=32)
        stop.set()
        sam.join(5)
        rss_end = idle_rss_kb(d)
        fd1 = d.fds()
        lat = res.latencies()
        five = sum(v for run in (warm, res) for k, v in run.status.items()
                   if k >= 500 and k != 503)
        window = max(5, prof["soak"] // 10)
        rep.figure("soak", "%d requests in %.0f s at %.0f req/s target (%.0f achieved; "
                   "%d sent late, %d not sent) after %d warm-up requests in %.0f s: %s; "
                   "p50 %s p99 %s max %s; req/s per %d s: %s"
                   % (res.total, res.elapsed, rate, res.total / res.elapsed, res.late,
                      res.missed, warm.total, warm.elapsed, status_summary(res),
                      ms(percentile(lat, 50)), ms(percentile(lat, 99)),
                      ms(lat[-1] if lat else 0), window,
                      " ".join("%.0f" % x for x in
                               traffic.throughput_by_window(res, window))))
        peak_rss = max((s[1] for s in samples), default=rss_end)
        under_load = sorted(s[1] for s in samples)
        fd_peak = max((s[2] for s in samples), default=fd1)
        rep.figure("soak", "RSS start %.1f MB, idle after warm-up %.1f MB, under load median "
                   "%.1f MB peak %.1f MB (%d samples), idle after the run %.1f MB; fds start "
                   "%d, peak %d, idle after %d"
                   % (rss0 / 1024, rss_warm / 1024,
                      (under_load[len(under_load) // 2] if under_load else 0) / 1024,
                      peak_rss / 1024, len(samples), rss_end / 1024, fd0, fd_peak, fd1))
        state["soak"] = dict(requests=res.total, errors=res.nerrors + res.nwrong + five,
                             rss=(rss0, peak_rss, rss_end))
        rep.check("soak", "no 5xx other than 503", five == 0,
                  status_summary(res) + "; warm-up " + status_summary(warm))
        rep.check("soak", "no transport error, every answer right",
                  all(r.nerrors == 0 and r.nwrong == 0 for r in (warm, res)),
                  "; ".join(warm.errors + warm.wrong + res.errors + res.wrong) or
                  "%d answers checked" % (warm.total + res.total))
        # a leak stays after malloc_trim; the heap's free pages do not
        rep.check("soak", "RSS once idle back to its post-warm-up level (<= +10% + 4 MB)",
                  rss_end <= rss_warm * 1.10 + 4 * 1024,
                  "%.1f -> %.1f MB" % (rss_warm / 1024, rss_end / 1024))
        # while busy the heap holds up to its high-water mark of requests in
        # flight: bounded by the memory budget (40 MiB + 3x the bytes in
        # flight: 32 clients, each at most one of the mix's largest bodies)
        biggest = max(len(r.body) for r in traffic.full_mix())
        budget = 40 * 1024 + 3 * 32 * biggest / 1024
        rep.check("soak", "RSS under load within 40 MiB + 3x the bytes in flight",
                  peak_rss <= budget, "peak %.1f MB, budget %.1f MB (32 x %.1f MB bodies)"
                  % (peak_rss / 1024, budget / 1024, biggest / 2**20))
        rep.check("soak", "fds back to their idle level",
                  fd1 <= fd0 + 2, "start %d, after %d" % (fd0, fd1))
        rep.check("soak", "daemon healthy after", d.healthy())
    finally:
        d.kill()


def overload(args, prof, rep, state):
    threads, inflight = 2, 16
    d = Daemon(args.normd, "--threads", threads, "--max-inflight", inflight)
    # CPU-bound and small on the wire: the daemon, not the client, is the limit
    heavy = Req("residual-heavy", "POST", "/v1/residual/simulate",
                js({"tokens": 16, "d": 64, "layers": 24}), {"Content-Type": JSON})
    try:
        base = traffic.closed_loop(d.port, [heavy], inflight, 3.0)
        sustainable = base.count(200) / 3.0
        service = percentile(base.latencies(), 50) / (inflight / threads)
        target = 4 * sustainable
        res = traffic.open_loop(d.port, [heavy], target, prof["overload"], clients=64)
        ok_lat = res.latencies(200)
        shed = res.count(503) / max(1, res.total)
        p99 = percentile(ok_lat, 99)
        # bound: a full queue ahead (inflight / threads service times), x3 slack
        bound = 3 * (inflight / threads) * service + 0.1
        rep.figure("overload", "sustainable %.0f req/s (one request %s of CPU); offered "
                   "%.0f req/s for %d s: %s; shed rate %.0f%%; accepted p50 %s p99 %s "
                   "max %s (bound %s)"
                   % (sustainable, ms(service), res.total / res.elapsed, prof["overload"],
                      status_summary(res), 100 * shed, ms(percentile(ok_lat, 50)), ms(p99),
                      ms(ok_lat[-1] if ok_lat else 0), ms(bound)))
        state["overload"] = dict(shed=shed, p99=p99)
        rep.check("overload", "excess shed with 503 + Retry-After",
                  res.count(503) > 0 and res.nwrong == 0,
                  "%d x 503%s" % (res.count(503), "; " + "; ".join(res.wrong) if res.wrong else ""))
        rep.check("overload", "only 200 and 503, no transport error",
                  set(res.status) <= {200, 503} and res.nerrors == 0,
                  status_summary(res) + ("; " + "; ".join(res.errors) if res.errors else ""))
        rep.check("overload", "accepted requests' p99 bounded", p99 <= bound,
                  "p99 %s <= %s" % (ms(p99), ms(bound)))
        rep.check("overload", "throughput kept while overloaded (>= 70% of sustainable)",
                  res.count(200) / res.elapsed >= 0.7 * sustainable,
                  "%.0f req/s" % (res.count(200) / res.elapsed))
        # load drops to half the sustainable rate: no 503 after the first 0.5 s
        t_drop = time.monotonic()
        rec = traffic.open_loop(d.port, [heavy], 0.5 * sustainable, prof["recover"], clients=16)
        late503 = sum(1 for t, s in rec.timeline if s == 503 and t - t_drop > 0.5)
        first_ok = min((t - t_drop for t, s in rec.timeline if s == 200), default=float("nan"))
        rep.figure("overload", "after the load drops to %.0f req/s: %s; first 200 after %s"
                   % (0.5 * sustainable, status_summary(rec), ms(first_ok)))
        rep.check("overload", "recovers at once (no 503 0.5 s after the drop)",
                  late503 == 0 and rec.nerrors == 0 and rec.nwrong == 0,
                  "%d late 503s" % late503)
    finally:
        d.kill()


def slowloris(args, prof, rep, state):
    n, timeout, deadline = prof["slow_conns"], prof["slow_timeout"], prof["slow_deadline"]
    d = Daemon(args.normd, "--connection-timeout-s", timeout, "--request-timeout-s", deadline)
    socks = []  # (kind, socket, opened_at)
    try:
        fd0 = d.fds()
        base = traffic.closed_loop(d.port, traffic.compute_mix()[:8], 4, 2.0)
        base_p99 = percentile(base.latencies(), 99)
        kinds = ["stall-headers", "stall-body", "trickle-headers", "trickle-body"]
        for i in range(n):
            kind = kinds[i % 4]
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            if kind.endswith("headers"):
                s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            else:
                s.sendall(b"POST /v1/norm/layer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nContent-Length: 100000\r\n\r\n{\"input\":[")
            socks.append((kind, s, time.monotonic()))
        opened = time.monotonic()
        closed_at = {}
        stop = threading.Event()

        def trickler():
            # one byte per connection every timeout/2: never idle long enough
            while not stop.wait(timeout / 2.0):
                for kind, s, _ in socks:
                    if kind.startswith("trickle") and s not in closed_at:
                        try:
                            s.send(b"a" if kind.endswith("headers") else b"1,")
                        except OSError:
                            closed_at[s] = time.monotonic() - opened

        def watcher():
            import select
            poll = select.poll()
            by_fd = {}
            for _, s, _ in socks:
                poll.register(s, select.POLLIN)
                by_fd[s.fileno()] = s
            while not stop.is_set() and len(closed_at) < len(socks):
                for fd, _ in poll.poll(200):
                    s = by_fd[fd]
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if not data:  # closed by the daemon (an answer is fine too)
                        closed_at.setdefault(s, time.monotonic() - opened)
                        poll.unregister(fd)

        th = [threading.Thread(target=trickler, daemon=True),
              threading.Thread(target=watcher, daemon=True)]
        for t in th:
            t.start()
        # normal clients while the slow ones hold their connections (all 500
        # for the first connection_timeout_s, the trickling half until
        # request_timeout_s)
        during = traffic.closed_loop(d.port, traffic.compute_mix()[:8], 4,
                                     min(prof["slow_hold"], deadline - 0.5))
        fds_during = d.fds()
        time.sleep(max(0, prof["slow_hold"] - (time.monotonic() - opened)))
        stop.set()
        for t in th:
            t.join(5)
        p99 = percentile(during.latencies(), 99)
        bound = max(3 * base_p99, base_p99 + 0.05)
        cut = {k: sum(1 for kk, s, _ in socks if kk == k and s in closed_at) for k in kinds}
        per = n // 4
        # how long each lived, from its own first byte (sent as it opened)
        lived = {k: sorted(opened + closed_at[s] - t0 for kk, s, t0 in socks
                           if kk == k and s in closed_at) for k in kinds}
        stalled_times = sorted(lived["stall-headers"] + lived["stall-body"])
        trickled_times = sorted(lived["trickle-headers"] + lived["trickle-body"])

        def span(times):
            return "%.1f..%.1f s" % (times[0], times[-1]) if times else "-"

        rep.figure("slowloris", "%d slow connections (%d each: %s), connection_timeout_s %d, "
                   "request_timeout_s %d; normal clients meanwhile: %s, p99 %s (alone %s); "
                   "fds with them open %d; cut by the daemon within %d s: %s; stalled ones "
                   "lived %s, trickling ones %s"
                   % (n, per, ", ".join(kinds), timeout, deadline, status_summary(during),
                      ms(p99), ms(base_p99), fds_during, prof["slow_hold"],
                      ", ".join("%s %d" % (k, v) for k, v in cut.items()),
                      span(stalled_times), span(trickled_times)))
        state["slowloris"] = dict(p99=p99, base=base_p99, cut=cut,
                                  trickled=trickled_times[-1] if trickled_times else None)
        rep.check("slowloris", "normal clients all served meanwhile",
                  set(during.status) == {200} and during.nerrors == 0 and during.nwrong == 0,
                  status_summary(during))
        rep.check("slowloris", "normal clients keep their latency (p99 <= max(3x, +50 ms))",
                  p99 <= bound, "p99 %s, alone %s" % (ms(p99), ms(base_p99)))
        rep.check("slowloris", "stalled connections cut by connection_timeout_s",
                  cut["stall-headers"] == per and cut["stall-body"] == per and
                  (not stalled_times or stalled_times[-1] <= timeout + 3),
                  "%d + %d of %d" % (cut["stall-headers"], cut["stall-body"], 2 * per))
        # each trickled byte resets the idle timeout: only the request
        # deadline cuts these, never before it and within a sweep or two after
        rep.check("slowloris", "trickling connections cut by request_timeout_s "
                  "(after %d s, within +2 s)" % deadline,
                  cut["trickle-headers"] == per and cut["trickle-body"] == per and
                  trickled_times[0] >= deadline - 0.1 and
                  trickled_times[-1] <= deadline + 2,
                  "%d + %d of %d cut, after %s" % (
                      cut["trickle-headers"], cut["trickle-body"], 2 * per,
                      span(trickled_times)))
        for _, s, _ in socks:
            s.close()
        time.sleep(0.5)
        rep.check("slowloris", "fds back to their level and daemon healthy",
                  d.fds() <= fd0 + 2 and d.healthy(), "fds %d -> %d" % (fd0, d.fds()))
    finally:
        for _, s, _ in socks:
            try:
                s.close()
            except OSError:
                pass
        d.kill()


def abrupt(args, prof, rep, state):
    timeout = prof["abrupt_timeout"]
    d = Daemon(args.normd, "--connection-timeout-s", timeout)
    import struct
    try:
        big_npy = traffic.npy([512, 1024], traffic.matrix(512, 1024))
        big_req = Req("big", "POST", "/v1/norm/layer", big_npy,
                      {"Content-Type": "application/x-npy", "Accept": "application/json"})
        heavy = Req("heavy", "POST", "/v1/residual/simulate",
                    js({"tokens": 16, "d": 64, "layers": 24}), {"Content-Type": JSON})
        linger0 = struct.pack("ii", 1, 0)  # close with RST

        def vanish(kind, i):
            try:
                s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
                if i % 2:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger0)
                if kind == "mid-upload":
                    s.sendall(big_req.wire[:len(big_req.wire) // 2])
                elif kind == "mid-response":
                    s.sendall(big_req.wire)
                    s.recv(1000)  # the first bytes of a ~10 MB JSON answer
                else:  # while its job is queued or running (suspended connection)
                    s.sendall(heavy.wire)
                    time.sleep(0.002 * (i % 10))
                s.close()
            except OSError:
                pass

        fd0 = d.fds()
        rounds = []  # (rss_kb, fds, inflight gauge, seconds until released)
        # round 0 warms the allocator up; rounds 1.. are compared
        for r in range(prof["abrupt_rounds"] + 1):
            for kind in ("mid-upload", "mid-response", "in-the-pool"):
                threads = [threading.Thread(target=vanish, args=(kind, i), daemon=True)
                           for i in range(prof["abrupt_clients"] // 3)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(30)
            # until every vanished client's request is over (the scrape that
            # asks counts itself: 1 means none left), at most the timeout + 5 s
            t_end = time.monotonic()
            deadline = t_end + timeout + 5
            while time.monotonic() < deadline and d.metric("normd_inflight_requests") > 1:
                time.sleep(0.05)
            released = time.monotonic() - t_end
            # normd keeps freed buffers in its heap while busy and gives
            # them back after 1 s idle (malloc_trim): sample after that, so
            # what a round leaves behind is what is measured, not the heap's
            # high-water mark
            time.sleep(1.5)
            rounds.append((d.rss_kb(), d.fds(), d.metric("normd_inflight_requests"),
                           released))
        rss = [r[0] for r in rounds]
        slowest = max(r[3] for r in rounds)
        rep.figure("abrupt", "%d rounds of %d vanishing clients (mid-upload, mid-response, "
                   "in the pool; half close with RST), connection_timeout_s %d: released "
                   "after %s s; RSS after each round %s MB; fds %d -> %s"
                   % (len(rounds), prof["abrupt_clients"], timeout,
                      ", ".join("%.1f" % r[3] for r in rounds),
                      ", ".join("%.0f" % (x / 1024) for x in rss), fd0,
                      ",".join(str(r[1]) for r in rounds)))
        state["abrupt"] = dict(rss=rss, released=slowest)
        rep.check("abrupt", "daemon alive and healthy", d.alive() and d.healthy())
        rep.check("abrupt", "every vanished client's request ends (in-flight gauge back to 0)",
                  all(r[2] == 1 for r in rounds),
                  "gauge after each round (the scrape counts itself): %s"
                  % ",".join("%g" % r[2] for r in rounds))
        rep.check("abrupt", "fds back to their level after every round",
                  all(r[1] <= fd0 + 2 for r in rounds), "start %d, rounds %s" % (
                      fd0, [r[1] for r in rounds]))
        rep.check("abrupt", "RSS does not grow round over round (last <= first + 8 MB)",
                  rss[-1] <= rss[1] + 8 * 1024,
                  "%.1f -> %.1f MB" % (rss[1] / 1024, rss[-1] / 1024))
        # A FIN right behind the last data used to wait for connection_timeout_s
        # (libmicrohttpd's edge-triggered epoll raised no event for it after its
        # short read of that data); with its poll loop it is read at once.
        rep.check("abrupt", "vanished clients released at once (within 2 s)", slowest <= 2.0,
                  "slowest round %.1f s" % slowest)
    finally:
        d.kill()


def drain(args, prof, rep, state):
    n = prof["drain"]
    d = Daemon(args.normd, "--max-inflight", 2 * n, "--drain-timeout-s", 60)

    def simulation(layers):
        return Req("drain", "POST", "/v1/residual/simulate",
                   js({"tokens": 32, "d": 64, "layers": layers}), {"Content-Type": JSON})

    probe_layers = 24
    results = [None] * n
    sent = [threading.Event() for _ in range(n)]
    done_at = [None] * n
    try:
        # The work is sized on this machine: n requests should keep the
        # workers (one per CPU) busy for DRAIN_BUSY_S, so that most are still
        # queued when the signal comes after every body is sent (a fixed 24
        # layers took ~16 ms here and less on a faster CI machine, where only
        # 44 of 100 were left). The simulation's cost is linear in its layers.
        best = min(timed(lambda: traffic.one_shot(d.port, simulation(probe_layers)))
                   for _ in range(3))
        workers = os.cpu_count() or 1
        layers = max(probe_layers, int(probe_layers * DRAIN_BUSY_S * workers / n / best + 1))
        layers = min(layers, DRAIN_MAX_LAYERS)
        req = simulation(layers)

        def client(i):
            c = Conn(d.port, timeout=90)
            try:
                c._connect()
                c.sock.sendall(req.wire)
                sent[i].set()
                c.buf = b""
                results[i] = c.exchange(b"")  # the request is already sent
                done_at[i] = time.monotonic()
            except Exception as e:  # reported below
                results[i] = e
                sent[i].set()
            finally:
                c.close()

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for e in sent:
            e.wait(30)
        time.sleep(0.2)  # bodies read, jobs queued
        t_sig = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        # a new connection after the signal: refused (listener closed) or 503
        late = "refused"
        time.sleep(0.1)
        try:
            s, h, _ = traffic.one_shot(d.port, Req("late", "POST", "/v1/norm/layer",
                                                   js({"input": [1, 2]}), {"Content-Type": JSON}), 5)
            late = str(s)
        except OSError:
            pass
        for t in threads:
            t.join(90)
        try:
            code = d.proc.wait(60)
        except subprocess.TimeoutExpired:
            code = None
        t_exit = time.monotonic() - t_sig
        in_flight = sum(1 for t in done_at if t is None or t > t_sig)
        full = 0
        bad = []
        for r in results:
            if isinstance(r, tuple) and r[0] == 200:
                try:
                    full += isinstance(json.loads(r[2]), dict)
                except ValueError:
                    bad.append("invalid JSON")
            else:
                bad.append(repr(r)[:120])
        rep.figure("drain", "%d requests sent (%d layers each: %.0f ms alone for %d), %d still "
                   "in flight at SIGTERM; %d answered 200 in full; a new request after the "
                   "signal: %s; exit code %s after %.1f s"
                   % (n, layers, best * 1000, probe_layers, in_flight, full, late, code, t_exit))
        state["drain"] = dict(in_flight=in_flight, full=full, code=code)
        rep.check("drain", "requests in flight at SIGTERM (>= %d)" % (n // 2),
                  in_flight >= n // 2, "%d" % in_flight)
        rep.check("drain", "every accepted request answered in full", full == n and not bad,
                  "%d of %d%s" % (full, n, "; " + "; ".join(bad[:3]) if bad else ""))
        rep.check("drain", "new work refused after SIGTERM", late in ("refused", "503"), late)
        rep.check("drain", "exit code 0", code == 0, str(code))
    finally:
        d.kill()


def badinput(args, prof, rep, state):
    d = Daemon(args.normd)
    try:
        rss0, fd0 = d.rss_kb(), d.fds()
        cases = badinputs.cases()
        wrong, known = [], []
        lock = threading.Lock()
        idx = [0]

        def check(case):
            try:
                status, headers, body = traffic.one_shot(d.port, case.wire, 60)
            except OSError as e:
                return "no answer: %r" % e
            if status not in case.status:
                return "status %d, want %s: %r" % (status, sorted(case.status), body[:160])
            if case.problem is None:
                return None
            try:
                doc = json.loads(body)
            except ValueError:
                return "body is not JSON: %r" % body[:160]
            if case.problem == "kserve":
                if not isinstance(doc.get("error"), str) or not doc["error"]:
                    return "no {\"error\": ...}: %r" % body[:160]
                return None
            if headers.get("content-type") != PROBLEM:
                return "content-type %r" % headers.get("content-type")
            for k in ("type", "title", "detail", "code"):
                if not isinstance(doc.get(k), str) or not doc[k]:
                    return "problem without %s: %r" % (k, body[:160])
            if doc.get("status") != status or doc["type"] != "urn:normd:problem:" + doc["code"]:
                return "inconsistent problem: %r" % body[:160]
            if case.code and doc["code"] != case.code:
                return "code %s, want %s: %s" % (doc["code"], case.code, doc["detail"][:120])
            if status == 405 and "allow" not in headers:
                return "405 without Allow"
            return None

        def worker():
            while True:
                with lock:
                    if idx[0] >= len(cases):
                        return
                    case = cases[idx[0]]
                    idx[0] += 1
                problem = check(case)
                if problem:
                    with lock:
                        (known if case.known else wrong).append((case, problem))
                elif case.known:
                    with lock:
                        known.append((case, None))

        t0 = time.monotonic()
        traffic._run_threads(lambda i: worker(), 8, 600)
        secs = time.monotonic() - t0
        healthy = d.alive() and d.healthy()
        # the last clients' connections close as the daemon reads their FIN:
        # on a loaded machine that can come a moment after the answers (the
        # abrupt scenario checks how soon); a leak stays
        deadline = time.monotonic() + 3
        while d.fds() > fd0 + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        rss1, fd1 = d.rss_kb(), d.fds()
        rep.figure("badinput", "%d malformed requests in %.1f s: %d answered as documented, "
                   "%d not; %d with known deviations; RSS %.0f -> %.0f MB, fds %d -> %d"
                   % (len(cases), secs, len(cases) - len(wrong) - len(known), len(wrong),
                      len(known), rss0 / 1024, rss1 / 1024, fd0, fd1))
        state["badinput"] = dict(n=len(cases), wrong=len(wrong))
        rep.check("badinput", "corpus has >= 200 cases", len(cases) >= 200, str(len(cases)))
        rep.check("badinput", "each answered with its documented status and problem body",
                  not wrong, "".join("\n         %s: %s" % (c.name, p) for c, p in wrong[:40]))
        for c, p in known:
            rep.check("badinput", c.name, False, p or "as expected", known=c.known)
        rep.check("badinput", "daemon healthy after", healthy)
        rep.check("badinput", "fds back to their level", fd1 <= fd0 + 2, "%d -> %d" % (fd0, fd1))
    finally:
        d.kill()


SCENARIOS = [("calibrate", calibrate), ("soak", soak), ("overload", overload),
             ("slowloris", slowloris), ("abrupt", abrupt), ("drain", drain),
             ("badinput", badinput)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--normd", default="build/normd")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--full", action="store_true", help="the full run (default)")
    g.add_argument("--ci", action="store_true", help="the short CI run")
    ap.add_argument("--only", help="comma-separated scenarios")
    ap.add_argument("--soak-seconds", type=float, help="override the soak duration")
    ap.add_argument("--strict", action="store_true",
                    help="count known issues as failures")
    args = ap.parse_args()
    args.normd = (REPO / args.normd).resolve()
    prof = dict(PROFILES["ci" if args.ci else "full"])
    if args.soak_seconds:
        prof["soak"] = args.soak_seconds
    only = set(args.only.split(",")) if args.only else None
    rep, state = Report(), {}
    t0 = time.monotonic()
    for name, fn in SCENARIOS:
        if only and name not in only and not (name == "calibrate" and "soak" in only):
            continue
        print("== %s" % name, flush=True)
        ts = time.monotonic()
        try:
            fn(args, prof, rep, state)
        except Exception as e:  # a harness or daemon failure: reported as one
            import traceback
            traceback.print_exc()
            rep.check(name, "scenario ran to the end", False, repr(e))
        print("   (%.1f s)" % (time.monotonic() - ts), flush=True)
    print("\n%-10s %s" % ("scenario", "figures"))
    for scenario, text in rep.figures:
        print("%-10s %s" % (scenario, text))
    failed = rep.failed(args.strict)
    knowns = sum(1 for c in rep.checks if not c[2] and c[4])
    print("\n%d checks in %.0f s: %d passed, %d failed, %d known issues%s"
          % (len(rep.checks), time.monotonic() - t0, rep.passed(), failed, knowns,
             " (counted as failures: --strict)" if args.strict and knowns else ""))
    for c in rep.checks:
        if not c[2] and (args.strict or not c[4]):
            print("FAILED %s: %s: %s" % (c[0], c[1], c[3]))
    print("stress: %d passed, %d failed" % (rep.passed(), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
