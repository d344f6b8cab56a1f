"""Which commit and which binaries a report names (harness.report.sysinfo.git_state, BuildResult.to_json)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.builder.cmake import BuildResult, PartResult
from harness.report.sysinfo import git_state


def _repo(tmp_path: Path) -> Path:
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    r = tmp_path / "r"
    r.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(r), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (r / "f").write_text("x\n")
    run("add", "f")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    return r


def test_named_commit_wins_over_a_stale_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _repo(tmp_path)
    head = subprocess.run(["git", "-C", str(r), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    monkeypatch.delenv("KITE_GIT_COMMIT", raising=False)
    (r / "f").write_text("changed\n")
    assert git_state(r) == {"commit": head, "short": head[:8], "dirty": True}
    monkeypatch.setenv("KITE_GIT_COMMIT", "0123456789abcdef")
    st = git_state(r)
    assert st["commit"] == "0123456789abcdef" and st["short"] == "01234567"
    assert st["dirty"] is None and st["source"] == "KITE_GIT_COMMIT"


def test_no_git_and_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITE_GIT_COMMIT", raising=False)
    assert git_state(tmp_path)["commit"] is None


def test_build_result_names_its_binaries(tmp_path: Path) -> None:
    exe = tmp_path / "kite"
    exe.write_bytes(b"\x7fELF engine bytes")
    doc = BuildResult("b", str(tmp_path), str(exe), str(tmp_path / "absent.so"),
                      PartResult("prebuilt"), PartResult("skipped")).to_json()
    assert doc["sha256"] == {"engine": hashlib.sha256(exe.read_bytes()).hexdigest(), "module": None}
