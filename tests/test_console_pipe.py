"""A console that cannot be written (the reader of a pipe went away: `verify | true`,
`verify 2>&1 | head -1`, `report DIR | true`) never changes a command's exit status: the run
completes, writes its report, and exits with its verdict (issue 35, High 1: it exited 0)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX pipes")

RUN = 'args: [run, --model, "{model}", --prompt, "1,2,3", --steps, "2"]'


def _crit(cid: str, env: str = "{}") -> str:
    return f"""
  - id: {cid}
    title: two runs
    kind: equivalence
    {RUN}
    variants: [{{name: a}}, {{name: b, env: {env}}}]
    compare: {{dumps: [h_out, logits]}}
"""


def _closed_pipe_run(argv: list[str], stderr_too: bool = True) -> tuple[int, str]:
    """Run the harness with stdout (and stderr) a pipe whose reader is gone before it starts:
    every console write fails with EPIPE. Returns the exit status and stderr (when kept)."""
    r, w = os.pipe()
    os.close(r)  # no reader at all: deterministic, unlike a reader that leaves "soon"
    try:
        p = subprocess.run([sys.executable, *argv], cwd=REPO, stdout=w,
                           stderr=w if stderr_too else subprocess.PIPE, timeout=300)
    finally:
        os.close(w)
    return p.returncode, "" if stderr_too else p.stderr.decode(errors="replace")


def _suite(fake_repo, failing: bool) -> None:
    f = fake_repo.criteria("criteria:\n" + _crit("P1") + (_crit("F1", "{FAKE_FLIP_ULP: 'logits:3'}")
                                                            if failing else ""))
    fake_repo.register(f)


@pytest.mark.parametrize("stderr_too", [True, False], ids=["2>&1", "stdout"])
def test_verify_into_a_closed_pipe_exits_with_its_verdict(fake_repo, stderr_too):
    _suite(fake_repo, failing=True)
    rc, err = _closed_pipe_run(["-m", "harness", "--root", str(fake_repo.root), "verify"], stderr_too)
    assert rc == 1, err
    doc = fake_repo.report()
    assert doc["status"] == "complete"  # the run went on after the first failed write
    assert {r["id"]: r["verdict"] for r in doc["results"]} == {"P1": "PASS", "F1": "FAIL"}
    assert "Traceback" not in err and "internal error" not in err


def test_verify_passing_into_a_closed_pipe_exits_0(fake_repo):
    _suite(fake_repo, failing=False)
    rc, _ = _closed_pipe_run(["-m", "harness", "--root", str(fake_repo.root), "verify"])
    assert rc == 0
    assert fake_repo.report()["status"] == "complete"


def test_verify_into_head_under_pipefail(fake_repo):
    """The attack as written: `set -o pipefail; verify 2>&1 | head -1`."""
    _suite(fake_repo, failing=True)
    cmd = (f"set -o pipefail; {sys.executable} -m harness --root {fake_repo.root} verify 2>&1 | head -1 "
           ">/dev/null")
    p = subprocess.run(["bash", "-c", cmd], cwd=REPO, timeout=300)
    assert p.returncode == 1
    assert fake_repo.report()["status"] == "complete"


@pytest.mark.parametrize("fmt", ["md", "json", "junit"])
def test_report_into_a_closed_pipe_exits_with_its_verdict(fake_repo, fmt):
    _suite(fake_repo, failing=True)
    assert fake_repo.verify() == 1
    d = fake_repo.reports / "latest"
    rc, err = _closed_pipe_run(["-m", "harness", "report", str(d), "--format", fmt], stderr_too=False)
    assert rc == 1 and err == "", err


def test_models_list_into_a_closed_pipe(tmp_path):
    for argv in (["-m", "harness", "models", "list"], ["-m", "harness.models", "list"]):
        rc, err = _closed_pipe_run(argv, stderr_too=False)
        assert (rc, err) == (0, ""), argv


def test_a_failed_console_write_is_dropped_not_raised():
    from harness import console

    class Broken(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    saved = sys.stdout
    sys.stdout = Broken()
    try:
        with console.guarded():
            print("lost")  # no exception
            print("lost again", flush=True)
            assert isinstance(sys.stdout, console.Guarded)
    finally:
        sys.stdout = saved
    assert sys.stdout is saved


def test_console_text_is_printable_and_bytes_pass():
    """Text on the console is escaped (an engine's colour or bidi control never reaches the
    terminal); bytes through .buffer (`harness run` copying the engine's output) are not."""
    from harness import console

    class Out(io.StringIO):
        buffer = io.BytesIO()

    saved = sys.stdout
    sys.stdout = out = Out()
    try:
        with console.guarded():
            print("a\x1b[31mb\u202ec é")
            sys.stdout.buffer.write(b"\x1b[0m")
    finally:
        sys.stdout = saved
    assert out.getvalue() == "a\\x1b[31mb\\u202ec é\n"
    assert Out.buffer.getvalue() == b"\x1b[0m"


def test_report_json_of_a_closed_pipe_run_is_whole(fake_repo):
    _suite(fake_repo, failing=False)
    _closed_pipe_run(["-m", "harness", "--root", str(fake_repo.root), "verify"])
    doc = json.loads((fake_repo.reports / "latest" / "report.json").read_text())
    assert doc["summary"]["passed"] == 1 and doc["finished"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_report_into_a_full_disk_warns_and_keeps_its_verdict(fake_repo):
    """Not a reader that left but a write error (ENOSPC): said once on stderr; the status is the verdict's."""
    _suite(fake_repo, failing=True)
    assert fake_repo.verify() == 1
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "harness", "report", str(fake_repo.reports / "latest")], cwd=REPO,
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr == ("harness: warning: cannot write to stdout ([Errno 28] No space left on device); "
                        "the rest of the output is dropped\n")


def test_ctrl_c_while_the_harness_starts_prints_no_traceback(tmp_path):
    """e338b56 (F26): Ctrl-C in the first second or so, while the harness imports numpy and scipy,
    printed a KeyboardInterrupt traceback. A planted numpy that waits holds the import there."""
    import signal
    import time

    fake = tmp_path / "numpy"
    fake.mkdir()
    ready = tmp_path / "importing"
    (fake / "__init__.py").write_text(f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    p = subprocess.Popen([sys.executable, "-m", "harness", "--help"], env=env, cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert "Traceback" not in err and err == "harness: error: interrupted\n", err
    assert p.returncode == 130
