"""The offline install the README documents: a venv that sees the system's
numpy (--system-site-packages), `pip install --no-build-isolation` of
clients/python with Debian's setuptools as the build backend, no package
index, then the installed copy imported from outside the tree and used
against the live daemon."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


def venv_and_pip_available():
    try:
        import ensurepip  # noqa: F401  (Debian: python3-venv)
        import setuptools  # noqa: F401  (python3-setuptools)
    except ImportError as e:
        return "venv cannot bootstrap pip or build: %s (apt-get install " \
               "python3-venv python3-setuptools)" % e
    return None


@pytest.mark.skipif(venv_and_pip_available() is not None,
                    reason=str(venv_and_pip_available()))
def test_offline_pip_install_into_a_venv(tmp_path, daemon):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                    str(venv)], check=True, timeout=120)
    build = tmp_path / "src"  # pip builds in place: keep the tree clean
    shutil.copytree(PACKAGE, build, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "*.egg-info", "build"))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONPATH="")
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index",
                          "--no-build-isolation", str(build)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    script = textwrap.dedent("""
        import numpy as np, normd
        print(normd.__file__)
        r = normd.Client(%r).layer_norm(np.random.randn(4, 8))
        assert r.output.shape == (4, 8) and r.output.dtype == np.float64
        assert abs(r.output.mean()) < 1e-9
        print(normd.__version__)
    """ % daemon.base)
    run = subprocess.run([str(venv / "bin" / "python"), "-c", script],
                         capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    installed, version = run.stdout.split()
    assert installed.startswith(str(venv)), installed  # not the tree's copy
    assert version == "0.1.0"
