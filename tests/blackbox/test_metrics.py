"""GET /metrics: Prometheus text format 0.0.4 that counts what happened and
passes `promtool check metrics`."""
import os
import re
import subprocess

import pytest

from normd_helpers import wait_until

PROMTOOL = "/usr/bin/promtool"
# label values may hold any character ("{" and "}" in route templates);
# quotes and backslashes inside them are escaped
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)$')


def parse(text):
    """{(name, frozenset(labels)): value} for every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def sample(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def metrics_text(d):
    r = d.get("/metrics")
    assert r.status == 200
    assert r.content_type == "text/plain; version=0.0.4; charset=utf-8"
    return r.body.decode()


@pytest.fixture(scope="module")
def busy(daemon):
    """The module daemon after a known set of requests."""
    for _ in range(3):
        assert daemon.post_json("/v1/norm/layer", {"input": [1, 2, 3, 4]}).status == 200
    assert daemon.post_json("/v1/norm/layer", {"input": []}).status == 422
    assert daemon.post_json("/v1/norm/rms", {"input": [[1, 2], [3, 4]]}).status == 200
    assert daemon.get("/no/such/path").status == 404
    assert daemon.get("/healthz").status == 200
    # requests are counted when they complete, just after the answer is sent
    expected = [("/v1/norm/layer", "200", 3), ("/v1/norm/layer", "422", 1),
                ("/v1/norm/rms", "200", 1), ("other", "404", 1),
                ("/healthz", "200", 1)]

    def counted():
        s = parse(metrics_text(daemon))
        return all(sample(s, "normd_requests_total", route=route, code=code) == n
                   for route, code, n in expected)

    assert wait_until(counted, 5), metrics_text(daemon)
    return daemon


def test_request_counters(busy):
    s = parse(metrics_text(busy))
    assert sample(s, "normd_requests_total", route="/v1/norm/layer", code="200") == 3
    assert sample(s, "normd_requests_total", route="/v1/norm/layer", code="422") == 1
    assert sample(s, "normd_requests_total", route="/v1/norm/rms", code="200") == 1
    assert sample(s, "normd_requests_total", route="other", code="404") == 1
    assert sample(s, "normd_requests_total", route="/healthz", code="200") == 1


def test_elements_counter(busy):
    s = parse(metrics_text(busy))
    assert sample(s, "normd_elements_normalized_total", kind="layer") == 12
    assert sample(s, "normd_elements_normalized_total", kind="rms") == 4


def test_duration_histogram(busy):
    s = parse(metrics_text(busy))
    count = sample(s, "normd_request_duration_seconds_count", route="/v1/norm/layer")
    assert count == 4
    assert sample(s, "normd_request_duration_seconds_bucket",
                  route="/v1/norm/layer", le="+Inf") == 4
    assert sample(s, "normd_request_duration_seconds_sum", route="/v1/norm/layer") > 0


def test_build_info_and_process_metrics(busy):
    text = metrics_text(busy)
    s = parse(text)
    info = busy.get("/v1/info").json()
    assert sample(s, "normd_build_info", version=info["version"],
                  revision=info["revision"]) == 1
    assert "# TYPE normd_requests_total counter" in text
    rss = sample(s, "process_resident_memory_bytes")
    assert rss is not None and rss > 1e5
    assert sample(s, "process_open_fds") >= 3
    assert sample(s, "process_start_time_seconds") > 1.5e9
    assert sample(s, "normd_inflight_requests") is not None
    assert sample(s, "normd_queue_depth") == 0
    assert sample(s, "normd_jobs_inflight") == 0


def test_metrics_head(busy):
    r = busy.request("HEAD", "/metrics")
    assert r.status == 200 and r.body == b""


@pytest.mark.skipif(not os.access(PROMTOOL, os.X_OK),
                    reason="promtool (Debian package prometheus) not installed")
def test_promtool_check_metrics(busy):
    body = busy.get("/metrics").body
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=body,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    assert p.returncode == 0, p.stdout.decode()
