"""api/openapi.yaml passes a real OpenAPI linter: @redocly/cli, pinned in
tests/contract/package.json and package-lock.json and installed here with
`npm ci` into tests/contract/node_modules (not committed) when missing or
out of date. Needs node and npm (Debian: nodejs npm); fails, never skips,
when they or the npm registry are missing."""
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent.parent / "api" / "openapi.yaml"
REDOCLY = HERE / "node_modules" / ".bin" / "redocly"
STAMP = HERE / "node_modules" / ".normd-lock-sha256"

# Warnings accepted, each with its reason; any other problem fails.
ALLOWED_WARNINGS = {
    # normd has no license yet; add info.license once it has one.
    "info-license",
}

# Operations that never succeed, by design: Triton's extensions normd
# refuses (model load / unload: the models are built in; trace, logging,
# shared memory: not implemented). Their only answers are v2 errors.
REFUSED_OPERATIONS = ("/v2/repository/models/", "/v2/trace/", "/trace/setting",
                      "/v2/logging", "/v2/systemsharedmemory/",
                      "/v2/cudasharedmemory/")


def allowed(p):
    if p["severity"] != "warn":
        return False
    if p["ruleId"] in ALLOWED_WARNINGS:
        return True
    pointer = (p["location"][0].get("pointer") or "").replace("~1", "/")
    return p["ruleId"] == "operation-2xx-response" and any(
        r in pointer for r in REFUSED_OPERATIONS)


ENV = dict(os.environ, REDOCLY_TELEMETRY="off",
           REDOCLY_SUPPRESS_UPDATE_NOTICE="true", NO_UPDATE_NOTIFIER="1",
           npm_config_update_notifier="false", npm_config_fund="false",
           npm_config_audit="false")


def lock_digest():
    return hashlib.sha256((HERE / "package-lock.json").read_bytes()
                          + (HERE / "package.json").read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def redocly():
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail("%s is needed for the OpenAPI lint (Debian: apt-get "
                        "install nodejs npm; `make test` installs them)" % tool)
    if not (REDOCLY.exists() and STAMP.exists()
            and STAMP.read_text().strip() == lock_digest()):
        r = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit",
                            "--no-fund"], cwd=HERE, env=ENV,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not REDOCLY.exists():
            pytest.fail("npm ci in tests/contract failed (exit %d); the lint "
                        "needs the npm registry once:\n%s\n%s"
                        % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        STAMP.write_text(lock_digest())
    return REDOCLY


def test_redocly_lint_is_clean(redocly):
    r = subprocess.run([str(redocly), "lint", "--format=json", str(SPEC)],
                       cwd=HERE, env=ENV, capture_output=True, text=True,
                       timeout=300)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        pytest.fail("redocly lint said (exit %d):\n%s\n%s"
                    % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    problems = ["%s %s: %s at %s" % (p["severity"], p["ruleId"], p["message"],
                                     p["location"][0].get("pointer"))
                for p in report["problems"] if not allowed(p)]
    assert report["totals"]["errors"] == 0 and not problems, \
        "redocly lint api/openapi.yaml:\n" + "\n".join(problems)
