"""Fixtures that run the real normd daemon for the black-box tests.

`daemon` is one default daemon per test module; `make_daemon(*flags)` starts
a daemon with extra command-line flags for one test. Both always kill their
processes at teardown (SIGKILL by pid), whatever the test did.
"""
import pytest

from normd_helpers import Daemon


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    try:
        yield d
    finally:
        d.kill()


@pytest.fixture
def make_daemon():
    started = []

    def start(*flags, env=None):
        d = Daemon(*flags, env=env)
        started.append(d)
        return d

    try:
        yield start
    finally:
        for d in started:
            d.kill()


def pytest_report_header(config):
    from normd_helpers import NORMD_BIN
    return "normd binary: %s" % NORMD_BIN
