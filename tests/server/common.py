"""What the server tests share: the server's address, the binary, and small HTTP helpers.

tests/server.rs starts `ultra serve` and runs each script with ULTRA_URL (the server),
ULTRA_BIN (the ultra binary) and ULTRA_API_KEY (when the server has one) set.
"""

import json
import os
import re
import subprocess
import sys
import urllib.request

URL = os.environ["ULTRA_URL"].rstrip("/")
BIN = os.environ.get("ULTRA_BIN", "ultra")
API_KEY = os.environ.get("ULTRA_API_KEY", "")
CI = os.environ.get("CI") == "true"


def client():
    import openai

    return openai.OpenAI(base_url=URL + "/v1", api_key=API_KEY or "none", max_retries=0, timeout=600)


def get(path, headers=None):
    """(status, body text, headers) of a GET."""
    return request("GET", path, None, headers)


def request(method, path, body, headers=None):
    """(status, body text, headers); body is bytes, a str, or an object sent as JSON."""
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    all_headers = {"Content-Type": "application/json"}
    if API_KEY:
        all_headers["Authorization"] = "Bearer " + API_KEY
    all_headers.update(headers or {})
    all_headers = {k: v for k, v in all_headers.items() if v is not None}
    req = urllib.request.Request(URL + path, data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def metrics():
    """The /metrics samples as floats; `name{outcome="x"}` becomes `name_x`."""
    status, text, _ = get("/metrics")
    assert status == 200, text
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-z_]+)(?:\{outcome="([a-z]+)"\})? ([0-9.e+-]+)$', line)
        if m:
            name = m.group(1) + ("_" + m.group(2) if m.group(2) else "")
            out[name] = float(m.group(3))
    return out


def generate_json(prompt, max_tokens):
    """`ultra generate --chat --json`: the CLI's greedy tokens for a chat prompt."""
    out = subprocess.run(
        [BIN, "generate", "--chat", "--json", "--prompt", prompt, "--max-tokens", str(max_tokens)],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run(tests):
    """Runs each test function, reports, exits non-zero if any failed."""
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the run fails
            failed += 1
            print(f"FAIL {t.__name__}: {type(e).__name__}: {e}", flush=True)
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
