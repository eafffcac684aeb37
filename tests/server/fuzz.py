"""Schema-driven fuzzing with schemathesis against GET /openapi.json: every generated request
(valid and invalid) must get an answer below 500. ULTRA_FUZZ_EXAMPLES sets the examples per
operation (default 25, 8 under CI=true); the server should run with a small --ctx so that
generated completions stay short."""

import os
import re
import subprocess
import sys
import tempfile

from common import API_KEY, CI, URL, get, run

EXAMPLES = int(os.environ.get("ULTRA_FUZZ_EXAMPLES", "8" if CI else "25"))


def schemathesis(seed):
    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    cmd = [exe, "run", URL + "/openapi.json", "--checks", "not_a_server_error", "-n", str(EXAMPLES),
           "--seed", str(seed), "--no-shrink", "--generation-database", "none", "--workers", "1",
           "--request-timeout", "120", "--no-color", "--suppress-health-check", "all"]
    if API_KEY:
        cmd += ["-H", f"Authorization: Bearer {API_KEY}"]
    # Its caches (.schemathesis, .hypothesis) go to a scratch directory, not the repository.
    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)


def test_fuzz_finds_no_server_error():
    # One worker: hypothesis in several threads trips a CPython 3.11 bug ("AST constructor
    # recursion depth mismatch"). Should schemathesis still fail inside itself (a runtime error,
    # not a finding), the run is repeated with another seed; a server error always fails.
    for seed in (1, 2, 3):
        r = schemathesis(seed)
        out = r.stdout + r.stderr
        cases = re.search(r"(\d+) generated", out)
        print(f"  seed {seed}: exit {r.returncode}, {cases.group(0) if cases else '?'} test cases")
        if "Server error" in out or "not_a_server_error" in out.split("SUMMARY")[-1]:
            raise AssertionError("a 5xx answer:\n" + out[-6000:])
        if r.returncode == 0:
            assert cases and int(cases.group(1)) >= 100, f"a few hundred requests, got {out[-2000:]}"
            assert get("/health")[0] == 200, "/health after the fuzz run"
            return
        if "Runtime Error" not in out and "Errors:" not in out:
            raise AssertionError(out[-6000:])
    raise AssertionError("schemathesis failed on three seeds:\n" + out[-6000:])


if __name__ == "__main__":
    run([test_fuzz_finds_no_server_error])
