"""Fixtures for the client's tests: the real daemon (./build/normd, started
by tests/blackbox/normd_helpers.py's Daemon on an ephemeral port) and
clients forced onto each transport.

The package is imported from the tree (clients/python), as with
PYTHONPATH=clients/python; test_install.py checks the pip-installed copy.
"""
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(REPO_ROOT / "tests" / "blackbox"))

import normd  # noqa: E402
from normd_helpers import Daemon  # noqa: E402

# binary_threshold forcing each transport: None never frames, 0 always.
TRANSPORTS = {"json": None, "binary": 0}


@pytest.fixture(scope="session")
def daemon():
    d = Daemon()
    try:
        yield d
    finally:
        d.kill()


@pytest.fixture
def make_daemon():
    started = []

    def start(*flags):
        d = Daemon(*flags)
        started.append(d)
        return d

    try:
        yield start
    finally:
        for d in started:
            d.kill()


@pytest.fixture(params=sorted(TRANSPORTS))
def client(request, daemon):
    """A client of the session's daemon on one transport (the test id says
    which)."""
    c = normd.Client(daemon.base, binary_threshold=TRANSPORTS[request.param])
    c.transport = request.param
    spy_on_exchanges(c)
    yield c
    c.close()


def spy_on_exchanges(c):
    """Records (request Content-Type, answer Content-Type) of each exchange
    in c.exchanges, so a test can check which transport carried it."""
    c.exchanges = []
    inner = c._exchange

    def exchange(method, path, body=None, headers=()):
        answer = inner(method, path, body, headers)
        c.exchanges.append((dict(headers).get("Content-Type"),
                            answer[1].get("Content-Type")))
        return answer
    c._exchange = exchange
    return c


def check_transport(c, framed_answer=True):
    """The last exchange went the way c's transport says: JSON both ways,
    or the framing out (and back, when the route answers framed)."""
    sent, answered = c.exchanges[-1]
    if c.transport == "json":
        assert (sent, answered) == ("application/json", "application/json")
    else:
        assert sent == "application/octet-stream"
        assert answered == ("application/octet-stream" if framed_answer
                            else "application/json")
