"""The clients in examples/ run against a live daemon (NORMD_URL), exit 0,
and print what they say they print -- so the code a newcomer copies keeps
working. build/examples/client is built by `make` (blackbox-test); run alone,
this test builds it."""
import os
import re
import shutil
import subprocess

import pytest

import contractlib as cl

EXAMPLES = cl.REPO_ROOT / "examples"
CLIENT_C = cl.REPO_ROOT / os.environ.get("BUILD", "build") / "examples" / "client"


def run(normd, argv, timeout=120, env=None):
    r = subprocess.run(argv, cwd=cl.REPO_ROOT, capture_output=True, text=True,
                       timeout=timeout,
                       env=dict(os.environ, NORMD_URL=normd.url, **(env or {})))
    assert r.returncode == 0, "%s exited %d:\n%s\n%s" % (
        argv, r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def test_curl_sh_calls_every_route(normd, openapi_doc):
    out = run(normd, ["bash", str(EXAMPLES / "curl.sh")])
    # every documented path is called (the /versions/1 forms included)
    script = (EXAMPLES / "curl.sh").read_text()
    for path in openapi_doc["paths"]:
        if path == "/":
            assert '"$URL/"' in script, "examples/curl.sh never calls /"
            continue
        pattern = re.escape(path).replace(r"\{model\}", "[a-z_]+") \
            .replace(r"\{version\}", "1").replace(r"\{region\}", "[a-z0-9_]+")
        assert re.search(r"(?<![\w/])(\$URL)?%s(?![\w/])" % pattern, script), \
            "examples/curl.sh never calls %s" % path
    # and the answers are there: the textbook means, the framed output,
    # a problem, the v2 answer
    assert '"mean":[3,6]' in out
    assert "output:  -1.4142101 -0.70710504 0 0.70710504 1.4142101" in out
    assert '"code":"unknown_field"' in out and "(HTTP 422)" in out
    assert '"model_name":"layer_norm"' in out and '"id":"textbook-1"' in out
    assert "live 200, ready 200, model ready 200, version 1 ready 200" in out
    assert '"model_stats":[' in out and '"max_batch_size":0' in out
    assert '(HTTP 501)' in out and '(HTTP 400)' in out


def test_client_py(normd):
    out = run(normd, ["/usr/bin/python3", str(EXAMPLES / "client.py")])
    assert "mean [3, 6], var [2, 8]" in out
    assert "layer norm (.npy)" in out and "-> (4, 8) float32" in out
    assert out.rstrip().endswith("client.py: ok"), out


def test_client_js(normd):
    if shutil.which("node") is None:
        pytest.fail("node is needed (Debian: apt-get install nodejs)")
    out = run(normd, ["node", str(EXAMPLES / "client.js")])
    assert "mean [3,6] var [2,8]" in out
    assert "running_mean [0.30000001,0.5] running_var [1.3,2.2]" in out
    assert out.rstrip().endswith("client.js: ok"), out


def test_client_c(normd):
    if not CLIENT_C.exists():
        r = subprocess.run(["make", "--no-print-directory",
                            str(CLIENT_C.relative_to(cl.REPO_ROOT))],
                           cwd=cl.REPO_ROOT, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, "make %s failed:\n%s%s" % (
            CLIENT_C, r.stdout, r.stderr)
    out = run(normd, [str(CLIENT_C)])
    assert "layer norm, output shape [2, 5] float32" in out
    assert "  mean: [3, 6]" in out and "  mean: [2.5, 6.5]" in out
    assert out.rstrip().endswith("client.c: ok"), out


@pytest.mark.parametrize("argv", [
    ["bash", "examples/curl.sh"],
    ["/usr/bin/python3", "examples/client.py"],
    ["node", "examples/client.js"],
], ids=["curl.sh", "client.py", "client.js"])
def test_clients_send_the_api_key(start_normd, argv):
    """With NORMD_API_KEY the clients authenticate (here every route needs
    a key but health and readiness)."""
    key = "examples-test-key-0123456789"
    d = start_normd("--api-keys", key, "--api-key-scope", "all")
    run(d, argv, env={"NORMD_API_KEY": key})


def test_client_c_sends_the_api_key(start_normd):
    key = "examples-test-key-0123456789"
    d = start_normd("--api-keys", key)
    if not CLIENT_C.exists():
        pytest.fail("%s is missing (make %s)" % (CLIENT_C, CLIENT_C))
    run(d, [str(CLIENT_C)], env={"NORMD_API_KEY": key})
