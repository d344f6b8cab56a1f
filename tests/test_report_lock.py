"""The report-folder lock on its own; two real verify processes are in test_harness_triage.py."""

from __future__ import annotations

import json
import os
import re

import pytest

from harness.errors import HarnessError
from harness.report.lock import ReportLock


def test_lock_refuses_a_second_holder_in_process(tmp_path):
    first = ReportLock(tmp_path).acquire("2026-12-01T10:00:00Z", ["verify"])
    with pytest.raises(HarnessError, match=rf"pid {os.getpid()}, started 2026-12-01T10:00:00Z, `verify`"):
        ReportLock(tmp_path).acquire("later", ["verify", "--resume"])
    first.release()
    again = ReportLock(tmp_path).acquire("later", [])
    assert again.notice == ""  # released cleanly: nothing stale
    again.release()


def test_stale_lock_file_is_taken_over_with_a_notice(tmp_path):
    """A lock file naming a holder but not locked by anyone: that holder is gone."""
    (tmp_path / ".lock").write_text(json.dumps({"pid": 999999, "started": "2026-12-01T09:00:00Z",
                                                "argv": ["verify", "--resume"]}) + "\n")
    lock = ReportLock(tmp_path).acquire("now", ["verify"])
    assert lock.notice == (f"took over a stale lock of {tmp_path.name}: its holder (pid 999999, started "
                           "2026-12-01T09:00:00Z, `verify --resume`) is gone")
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    lock.release()


UNKNOWN = "unknown: the lock file's content is not understood"


@pytest.mark.parametrize("content, holder", [
    (b'{"argv": 5}', "pid ?, started ?"),
    (b'{"argv": ["verify", 5], "pid": 7}', "pid 7, started ?"),
    (b'{"pid": {"a": 1}, "host": ["h"], "started": null}', "pid ?, started ?"),
    (b"[1, 2]", UNKNOWN),
    (b'"verify"', UNKNOWN),
    (b'{"foo": 1}', UNKNOWN),
    (b"not json at all", UNKNOWN),
    (b"\xff\xfe{", UNKNOWN),  # not UTF-8
    (b"[" * 100_000 + b"]" * 100_000, UNKNOWN),  # nested past the parser's depth
], ids=["argv-int", "argv-mixed", "fields-wrong-type", "list", "string", "foreign-keys", "not-json",
        "not-utf8", "deep"])
def test_lock_file_of_any_shape_is_described_not_a_crash(tmp_path, content, holder):
    """A hand-edited or foreign .lock: a stale one is taken over naming what it says it can, and a
    live holder whose file says something else still stops a second run with a clear message."""
    (tmp_path / ".lock").write_bytes(content)
    lock = ReportLock(tmp_path).acquire("now", ["verify"])
    assert lock.notice == f"took over a stale lock of {tmp_path.name}: its holder ({holder}) is gone"
    (tmp_path / ".lock").write_bytes(content)  # the live holder's file rewritten behind its back
    with pytest.raises(HarnessError, match=rf"being written by another verify run \({re.escape(holder)}\)"):
        ReportLock(tmp_path).acquire("later", ["verify", "--resume"])
    lock.release()


def test_a_deleted_lock_file_lets_no_second_run_in(tmp_path):
    """Issue 35 (low): deleting `.lock` during a run let a second run create a new one and lock it,
    so two runs wrote one folder. The folder itself is locked too."""
    if os.name == "nt":
        pytest.skip("folders are not lockable on Windows: a known limit (docs/RELIABILITY.md)")
    first = ReportLock(tmp_path).acquire("2026-12-01T10:00:00Z", ["verify"])
    (tmp_path / ".lock").unlink()
    with pytest.raises(HarnessError, match="being written by another verify run"):
        ReportLock(tmp_path).acquire("later", ["verify", "--resume"])
    first.release()
    ReportLock(tmp_path).acquire("later", []).release()  # free again once the first one ends


HOLD = """import sys, time
from pathlib import Path
from harness.report.lock import build_lock
lock = build_lock(Path(sys.argv[1])).acquire("2026-12-04T10:00:00Z", ["harness", "verify"])
Path(sys.argv[2]).write_text("held")
time.sleep(float(sys.argv[3]))
lock.release()
"""


def test_a_second_command_waits_for_the_build_folder(fake_repo, tmp_path):
    """Two commands in one clone: the second waits for the first's build folder, says whose it is,
    then runs (two verifies rebuilding one engine while it ran ended as 'Text file busy')."""
    import subprocess  # noqa: PLC0415 - test-local
    import sys  # noqa: PLC0415
    import time  # noqa: PLC0415

    from tests.conftest import REPO  # noqa: PLC0415

    held = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(fake_repo.root / "build"), str(held), "3"], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "harness", "--root", str(fake_repo.root), "build", "default"],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
        waited = time.monotonic() - t0
    finally:
        holder.wait(timeout=60)
    assert f"waiting: {fake_repo.root / 'build'} is in use by another command of this clone (pid {holder.pid}, " \
           "started 2026-12-04T10:00:00Z, `harness verify`)" in r.stderr
    assert r.returncode == 0, r.stderr
    assert waited > 1.0  # it waited for the holder (3 s after it took the lock)


def test_build_lock_refuses_without_wait(tmp_path):
    from harness.report.lock import build_lock  # noqa: PLC0415 - test-local

    first = build_lock(tmp_path / "build").acquire("t0", ["verify"])
    with pytest.raises(HarnessError, match="is in use by another command of this clone .*work in another clone"):
        build_lock(tmp_path / "build").acquire("t1", ["verify"])
    first.release()
