"""Fixtures for the contract tests: the OpenAPI document, and real normd
daemons (killed by pid at teardown, whatever the test did)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contractlib  # noqa: E402


@pytest.fixture(scope="session")
def openapi_doc():
    return contractlib.load_spec()


@pytest.fixture(scope="module")
def normd():
    d = contractlib.Daemon()
    try:
        yield d
    finally:
        d.kill()


@pytest.fixture
def start_normd():
    started = []

    def start(*flags, **kw):
        d = contractlib.Daemon(*flags, **kw)
        started.append(d)
        return d

    try:
        yield start
    finally:
        for d in started:
            d.kill()
