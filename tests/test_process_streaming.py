"""Engine output is streamed to files; the harness keeps a bounded part of it in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness import process
from harness.process import KEEP_HEAD, KEEP_TAIL, KEEP_WHOLE, run_process

REPO = Path(__file__).resolve().parent.parent

# In a fresh interpreter (so that an earlier, higher peak of this test process cannot hide the
# growth): the harness's own peak RSS before and after running a child that prints MB megabytes.
MEASURE = """
import json, resource, sys
from pathlib import Path
from harness.process import run_process
mb = int(sys.argv[1])
child = ("import sys\\nline = b'x' * 1023 + b'\\\\n'\\nfor _ in range(%d * 1024):\\n    sys.stdout.buffer.write(line)\\n"
         "sys.stdout.buffer.write(b'7 passed, 0 failed\\\\n')\\n" % mb)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = run_process([sys.executable, "-c", child], timeout=300, log_prefix=Path(sys.argv[2]) / "big")
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kb": after - before, "bytes": r.stdout_bytes, "kept": len(r.stdout),
                  "tail": r.stdout[-40:], "ok": r.ok}))
"""


def test_200_mb_of_stdout_keeps_the_harness_small(tmp_path):
    out = subprocess.run([sys.executable, "-c", MEASURE, "200", str(tmp_path)], capture_output=True, text=True,
                         cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=600)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    assert m["ok"] and m["bytes"] == 200 * 2**20 + len("7 passed, 0 failed\n")
    assert (tmp_path / "big.stdout").stat().st_size == m["bytes"]  # nothing lost: all of it in the log
    assert m["kept"] < KEEP_HEAD + KEEP_TAIL + 200
    assert m["tail"].endswith("7 passed, 0 failed\n")
    # before: the whole output twice (bytes, then str): 200 MB of stdout grew the harness by ~400 MB
    assert m["growth_kb"] < 100 * 1024, m


def test_small_output_is_kept_whole(tmp_path):
    r = run_process([sys.executable, "-c", "print('{\"a\": 1}')"], timeout=60, log_prefix=tmp_path / "s")
    assert r.stdout_whole and json.loads(r.stdout) == {"a": 1} and r.stdout_bytes == len(r.stdout)


def test_kept_text_head_and_tail(tmp_path):
    f = tmp_path / "o"
    f.write_bytes(b"H" * KEEP_HEAD + b"M" * KEEP_WHOLE + b"T" * (KEEP_TAIL - 10) + b"P" * 10)
    with open(f, "rb") as fh:
        text, size = process.kept_text(fh)
    assert size == f.stat().st_size > KEEP_WHOLE
    head, _, rest = text.partition("\n[... ")
    assert head == "H" * KEEP_HEAD and "M" not in rest
    assert rest.endswith("\n" + "T" * (KEEP_TAIL - 10) + "P" * 10)
    assert f"{KEEP_WHOLE} bytes not kept in memory" in text


def test_huge_json_stdout_fails_with_a_reason(fake_repo):
    """A `run` criterion with a json expectation on 9 MiB of stdout: FAIL naming the size."""
    p = fake_repo.criteria("""\
        criteria:
          - id: J
            title: t
            kind: run
            runs: [{args: [selftest], env: {FAKE_SELFTEST_PAD: "9437184"}, expect: {json: {a: 1}}}]
        """)
    fake_repo.register(p)
    assert fake_repo.verify("--no-build") == 1
    reason = fake_repo.result("J")["reason"]
    assert "too large to read as JSON" in reason and "internal error" not in reason
