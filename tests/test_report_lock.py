"""The report-folder lock on its own; two real verify processes are in test_harness_triage.py."""

from __future__ import annotations

import json
import os

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
