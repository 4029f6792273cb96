"""The access log is written by its own thread in batches (log.c): nothing
is lost when the daemon exits. N requests -- small ones computed on the
HTTP thread, pool jobs, GETs -- then SIGTERM while some are still running:
exit 0 and exactly one access line per request, in both log formats. And
where requests are computed (inline_body_bytes): a small one while the only
slot is taken is shed with 503, as a pool job is."""
import json
import signal
import threading
import time

import pytest

from normd_helpers import JSON, assert_problem, read_response, wait_until

CLIENTS = 4
PER_CLIENT = 150
# a pool job that takes a while (the drain tests' slow route)
SLOW = ("/v1/residual/simulate", b'{"tokens":64,"d":256,"layers":16}')
SMALL = json.dumps({"input": {"shape": [2, 4], "dtype": "float32",
                              "data": [1, 2, 3, 4, 5, 6, 7, 8]}}).encode()


def request_ids(d, fmt):
    """The request ids of the access lines, in the order written."""
    ids = []
    for line in list(d.lines):
        if fmt == "json":
            doc = json.loads(line)
            if doc.get("msg") == "request":
                ids.append(doc["request_id"])
        elif " id=" in line:
            ids.append(line.split(" id=", 1)[1].split(" ", 1)[0])
    return ids


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_every_access_line_is_written_by_exit(make_daemon, fmt):
    d = make_daemon("--log-format", fmt, "--threads", 1)
    sent, errors = [], []

    def client(c):
        conn = d.connect(timeout=30)
        try:
            for i in range(PER_CLIENT):
                rid = "c%d-%d" % (c, i)
                if i % 3 == 2:
                    conn.request("GET", "/healthz", headers={"X-Request-Id": rid})
                    method = "GET"
                else:
                    conn.request("POST", "/v1/norm/layer", body=SMALL,
                                 headers={"Content-Type": JSON,
                                          "X-Request-Id": rid})
                    method = "POST"
                r = read_response(conn, method)
                if r.status != 200:
                    errors.append((rid, r.status))
                sent.append(rid)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]

    # two pool jobs still running when SIGTERM comes: the drain answers
    # them, and their lines are written too
    slow = []

    def slow_client(i):
        conn = d.connect(timeout=60)
        try:
            conn.request("POST", SLOW[0], body=SLOW[1],
                         headers={"Content-Type": JSON,
                                  "X-Request-Id": "slow-%d" % i})
            slow.append(read_response(conn).status)
        finally:
            conn.close()

    slow_threads = [threading.Thread(target=slow_client, args=(i,))
                    for i in range(2)]
    for t in slow_threads:
        t.start()
    assert wait_until(lambda: d.get("/metrics").body.decode().count(
        "normd_inflight_requests 3") == 1, 10)  # both, and this GET
    d.signal(signal.SIGTERM)
    for t in slow_threads:
        t.join()
    assert d.wait() == 0
    d._reader.join(timeout=5)  # stderr read to its end
    assert slow == [200, 200]
    ids = request_ids(d, fmt)
    want = sent + ["slow-0", "slow-1"]
    logged = [i for i in ids if i in set(want)]
    assert sorted(logged) == sorted(want), (
        "%d of %d lines; missing %s" % (len(logged), len(want),
                                        sorted(set(want) - set(logged))[:5]))
    assert "log buffer full" not in d.log()


def test_small_request_is_shed_while_the_only_slot_is_taken(make_daemon):
    """max_inflight counts requests computed on the HTTP thread as it counts
    pool jobs: with a slow job holding the one slot, a small layer norm
    (computed inline otherwise) gets 503 overloaded."""
    d = make_daemon("--threads", 1, "--max-inflight", 1)
    done = []

    def slow_client():
        conn = d.connect(timeout=60)
        try:
            conn.request("POST", SLOW[0], body=SLOW[1],
                         headers={"Content-Type": JSON})
            done.append(read_response(conn).status)
        finally:
            conn.close()

    t = threading.Thread(target=slow_client)
    t.start()
    try:
        assert wait_until(lambda: "normd_inflight_requests 2" in
                          d.get("/metrics").body.decode(), 10)
        r = d.post_json("/v1/norm/layer", SMALL)
        assert_problem(r, 503, "overloaded")
    finally:
        t.join()
    assert done == [200]
    r = d.post_json("/v1/norm/layer", SMALL)  # the slot is free again
    assert r.status == 200, r


def test_inline_and_pool_give_the_same_answer(make_daemon):
    """inline_body_bytes 0 sends every request to the pool: the same bytes
    come back either way."""
    inline = make_daemon()
    pooled = make_daemon("--inline-body-bytes", 0)
    for body in (SMALL, b'{"input": [1, 2, "x"]}', b"{"):
        a = inline.post_json("/v1/norm/layer", body,
                             headers={"X-Request-Id": "same"})
        b = pooled.post_json("/v1/norm/layer", body,
                             headers={"X-Request-Id": "same"})
        assert (a.status, a.body) == (b.status, b.body)
