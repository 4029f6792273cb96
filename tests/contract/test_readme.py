"""README.md's "The API by example" has no numbers of its own: every curl
body there is an example of api/openapi.yaml for that route, every JSON
answer shown is that example's documented answer, and every command, run
against the live daemon, answers as documented. Its Python blocks run too
(with /usr/bin/python3, the daemon's URL for http://localhost:8080) and
must exit 0."""
import json
import re
import shlex
import subprocess
from urllib.parse import parse_qsl, urlsplit

import pytest

import contractlib as cl

README = cl.REPO_ROOT / "README.md"
SPEC = cl.load_spec()


def api_section():
    text = README.read_text(encoding="utf-8")
    m = re.search(r"^## The API by example\n(.*?)(?=^## )", text, re.M | re.S)
    assert m, "README.md has no '## The API by example' section"
    return m.group(1)


def blocks(section):
    """[(language, text)] of the fenced code blocks, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", section, re.M | re.S)


def curl_commands(text):
    """Each curl command of a sh block as its argument list."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        args = shlex.split(line, comments=True)
        if not args:
            continue
        assert args[0] == "curl", "the API section runs only curl: %r" % line
        out.append(args)
    return out


def parse_curl(args):
    method, headers, body, url = None, {}, None, None
    it = iter(args[1:])
    for a in it:
        if a == "-X":
            method = next(it)
        elif a == "-H":
            k, _, v = next(it).partition(":")
            headers[k.strip()] = v.strip()
        elif a in ("-d", "--data", "--data-raw"):
            body = next(it)
        elif a.startswith("-"):
            assert a in ("-s", "-sS"), "unexpected curl option %s" % a
        else:
            url = a
    parts = urlsplit(url if "://" in url else "http://" + url)
    assert parts.netloc == "localhost:8080", url
    return (method or ("POST" if body is not None else "GET"), parts.path,
            dict(parse_qsl(parts.query)), headers, body)


def operation(method, path):
    for o in cl.operations(SPEC):
        pattern = "^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(o.path)) + "$"
        if o.method == method and re.match(pattern, path):
            return o
    raise AssertionError("%s %s is not in api/openapi.yaml" % (method, path))


def documented(o, body):
    """(status, example) that the JSON body is in the document for o: a
    request example (answered by its namesake) or an error's x-request."""
    for op, media, name, ex in cl.request_examples(SPEC):
        if op.id == o.id and media == "application/json" \
                and ex.get("value") == body:
            for status, r in o.op["responses"].items():
                content = cl.resolve(SPEC, r).get("content", {})
                if name in content.get("application/json", {}).get(
                        "examples", {}):
                    return int(status), cl.resolve(
                        SPEC, content["application/json"]["examples"][name])
    for e in cl.response_examples(SPEC):
        if e.op.id == o.id and e.example.get("x-request", {}).get("body") == body:
            return int(e.status), e.example
    raise AssertionError("README body for %s %s is not an example of "
                         "api/openapi.yaml: %s" % (o.method, o.path, body))


def commands():
    """(curl args, the JSON block shown after it or None) for the section."""
    out = []
    bl = blocks(api_section())
    for i, (lang, text) in enumerate(bl):
        if lang != "sh":
            continue
        cmds = curl_commands(text)
        shown = None
        if i + 1 < len(bl) and bl[i + 1][0] == "json":
            shown = json.loads(bl[i + 1][1])
        for k, c in enumerate(cmds):
            out.append((c, shown if k == len(cmds) - 1 else None))
    return out


CASES = commands()


def test_the_section_has_examples():
    assert len(CASES) >= 10
    assert all(lang in ("sh", "json", "python")
               for lang, _ in blocks(api_section()))


PYTHON = [text for lang, text in blocks(api_section()) if lang == "python"]


@pytest.mark.parametrize("code", PYTHON,
                         ids=["python-%d" % i for i in range(len(PYTHON))])
def test_readme_python(normd, code):
    assert "http://localhost:8080" in code, "a Python block that calls no daemon"
    r = subprocess.run(["/usr/bin/python3", "-"], input=code.replace(
        "http://localhost:8080", normd.url), capture_output=True, text=True,
        timeout=120, cwd=cl.REPO_ROOT)
    assert r.returncode == 0, "README Python block exited %d:\n%s\n%s" % (
        r.returncode, r.stdout[-3000:], r.stderr[-3000:])


@pytest.mark.parametrize("args,shown", CASES,
                         ids=["%d-%s" % (i, parse_curl(c)[1])
                              for i, (c, _) in enumerate(CASES)])
def test_readme_command(normd, args, shown):
    method, path, query, headers, body = parse_curl(args)
    o = operation(method, path)
    for name in query:
        params = [cl.resolve(SPEC, p)["name"] for p in o.op.get("parameters", [])]
        assert name in params, "query parameter %s is not documented" % name
    status, example = 200, None
    if body is not None:
        status, example = documented(o, json.loads(body))
        if shown is not None:
            diff = cl.differences(example["value"], shown)
            assert not diff, "README's answer differs from api/openapi.yaml:" \
                "\n%s" % "\n".join(diff[:10])
    else:
        assert shown is None, "a JSON answer after a GET: compare it by hand"
    target = path + ("?" + "&".join("%s=%s" % kv for kv in query.items())
                     if query else "")
    resp = normd.send(cl.Request(method, target, headers,
                                  body.encode() if body is not None else None))
    assert resp.status == status, (args, resp)
    if example is not None:
        # instance names this request (X-Request-Id): new each time
        diff = cl.differences(example["value"], cl.decoded_answer(resp),
                              skip={"detail", "instance"})
        assert not diff, "\n".join(diff[:10])
