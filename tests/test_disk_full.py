"""A full disk is never a verdict, and what verify says about it is true (issue 35, low): the
report write names the folder to resume (or says there is nothing to resume), and a model that
cannot be generated, or an engine log that cannot be written, stops the run with no FAIL recorded,
so that `verify --resume DIR` runs those criteria once there is room. Before, such a FAIL was kept
by every resume: the failure stuck."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from harness import confined
from harness.errors import HarnessError
from harness.report import document as report_mod
from harness.run import runner, suite

SUITE = """\
criteria:
  - id: D1
    title: two identical runs
    kind: equivalence
    args: [run, --model, "{model}", --prompt, "1,2", --steps, "1"]
    variants: [{name: a}, {name: b}]
    compare: {dumps: [h_out]}
  - id: D2
    title: two identical runs, on a generated model
    kind: equivalence
    args: [run, --model, "{model}", --prompt, "1,2", --steps, "1"]
    model: {recipe: tiny}
    variants: [{name: a}, {name: b}]
    compare: {dumps: [h_out]}
"""


def _full(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "somewhere/file")


def _folders(fake_repo) -> list[Path]:
    return sorted(p for p in fake_repo.reports.iterdir() if p.name[0].isdigit())


def test_first_report_write_on_a_full_disk_promises_no_resume(fake_repo, monkeypatch):
    """Before: "continue with `verify --resume`", which then resumed the previous report, or
    found no report.json."""
    f = fake_repo.criteria(SUITE.split("  - id: D2")[0])
    fake_repo.register(f)
    monkeypatch.setattr(report_mod, "atomic_write", _full)
    with pytest.raises(HarnessError) as e:
        fake_repo.verify()
    (rdir,) = _folders(fake_repo)
    assert str(e.value) == (f"cannot write the report in {rdir}: No space left on device; nothing was recorded there "
                            "(run verify again once there is room)")


def test_report_write_on_a_full_disk_names_the_folder_to_resume(fake_repo, monkeypatch):
    """A narrowed run (--only) is not reports/latest, so `--resume` alone would continue another
    report: the message names this one, and resuming it works."""
    f = fake_repo.criteria(SUITE.split("  - id: D2")[0])
    fake_repo.register(f)
    assert fake_repo.verify() == 0  # reports/latest: this first, full run
    real = report_mod.atomic_write
    writes = {"n": 0}

    def fills_up(path, text):
        writes["n"] += 1
        if writes["n"] > 3:  # report.json, .md, .xml once: then the disk is full
            _full()
        real(path, text)

    monkeypatch.setattr(report_mod, "atomic_write", fills_up)
    with pytest.raises(HarnessError) as e:
        fake_repo.verify("--only", "D1")
    rdir = _folders(fake_repo)[-1]
    assert str(e.value) == (f"cannot write the report in {rdir}: No space left on device; what was written before is "
                            f"intact (continue with `verify --resume {rdir}` once there is room)")
    monkeypatch.setattr(report_mod, "atomic_write", real)
    assert fake_repo.verify("--resume", str(rdir), "--only", "D1") == 0
    assert [r["verdict"] for r in json.loads((rdir / "report.json").read_text())["results"]] == ["PASS"]


def _model_fails_then_works(monkeypatch, tmp_path: Path) -> dict[str, int]:
    calls = {"n": 0}
    model = tmp_path / "generated.gguf"
    model.write_bytes(b"GGUF generated")

    def ensure_model(recipe, out_dir, qtype=None, search=()):
        calls["n"] += 1
        if calls["n"] == 1:
            _full()
        return model
    monkeypatch.setattr(suite, "ensure_model", ensure_model)
    return calls


def test_a_model_that_cannot_be_written_leaves_no_verdict(fake_repo, monkeypatch, tmp_path):
    """Before: D2 was recorded as FAIL ("model tiny:None: OSError: No space left on device"), the
    report "complete", and `verify --resume` kept that FAIL after space was freed."""
    f = fake_repo.criteria(SUITE)
    fake_repo.register(f)
    calls = _model_fails_then_works(monkeypatch, tmp_path)
    with pytest.raises(HarnessError) as e:
        fake_repo.verify()
    (rdir,) = _folders(fake_repo)
    assert str(e.value) == (f"model tiny:None: cannot write it in {fake_repo.root / 'models'}: No space left on device "
                            f"(somewhere/file); no verdict was recorded for it: free some space, then continue with "
                            f"`python -m harness verify --resume {rdir}`")
    doc = json.loads((rdir / "report.json").read_text())
    assert [(r["id"], r["verdict"]) for r in doc["results"]] == [("D1", "PASS")]
    assert doc["status"] == "interrupted" and doc["not_run"] == ["D2"]
    assert fake_repo.verify("--resume", str(rdir)) == 0
    assert [(r["id"], r["verdict"]) for r in fake_repo.report()["results"]] == [("D1", "PASS"), ("D2", "PASS")]
    assert calls["n"] == 2


def test_an_engine_log_that_cannot_be_written_leaves_no_verdict(fake_repo, monkeypatch):
    """Before: "internal error: OSError: [Errno 28] No space left on device", a FAIL kept by resume."""
    f = fake_repo.criteria(SUITE.split("  - id: D2")[0])
    fake_repo.register(f)
    real = runner.run_process
    monkeypatch.setattr(runner, "run_process", _full)
    with pytest.raises(HarnessError, match=r"^D1: No space left on device \(somewhere/file\); no verdict was recorded"):
        fake_repo.verify()
    (rdir,) = _folders(fake_repo)
    assert json.loads((rdir / "report.json").read_text())["results"] == []
    monkeypatch.setattr(runner, "run_process", real)
    assert fake_repo.verify("--resume", str(rdir)) == 0
    assert fake_repo.result("D1")["verdict"] == "PASS"


def test_a_lock_that_cannot_be_written_says_nothing_ran(fake_repo, monkeypatch):
    """Before: "internal error: OSError: [Errno 28] No space left on device"."""
    f = fake_repo.criteria(SUITE.split("  - id: D2")[0])
    fake_repo.register(f)
    real = confined.open_text

    class Full:  # the lock file opens; writing its holder does not
        def __init__(self, f):
            self.f = f

        def __getattr__(self, name):
            return getattr(self.f, name)

        def flush(self):
            _full()

    monkeypatch.setattr(confined, "open_text", lambda *a: Full(real(*a)))
    with pytest.raises(HarnessError) as e:
        fake_repo.verify()
    (rdir,) = _folders(fake_repo)
    assert str(e.value) == (f"cannot write the lock file of {rdir}: No space left on device; nothing was run "
                            "(run verify again once there is room)")


def test_a_full_disk_error_without_an_errno_leaves_no_verdict(fake_repo, monkeypatch, tmp_path):
    """e338b56 (F25): on a truly full disk numpy's write error has no errno ("4096 requested and 0
    written"), so the model's FAIL was recorded and kept by every --resume."""
    import shutil as sh
    from collections import namedtuple

    f = fake_repo.criteria(SUITE)
    fake_repo.register(f)
    model = tmp_path / "generated.gguf"
    model.write_bytes(b"GGUF generated")
    calls = {"n": 0}

    def ensure_model(recipe, out_dir, qtype=None, search=()):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("4096 requested and 0 written")
        return model

    usage = namedtuple("usage", "total used free")
    real = sh.disk_usage
    monkeypatch.setattr(suite, "ensure_model", ensure_model)
    monkeypatch.setattr(sh, "disk_usage", lambda p: usage(1 << 30, 1 << 30, 0))
    with pytest.raises(HarnessError, match="4096 requested and 0 written; no verdict was recorded"):
        fake_repo.verify()
    (rdir,) = _folders(fake_repo)
    assert json.loads((rdir / "report.json").read_text())["not_run"] == ["D2"]
    monkeypatch.setattr(sh, "disk_usage", real)
    assert fake_repo.verify("--resume", str(rdir)) == 0
    assert [(r["id"], r["verdict"]) for r in fake_repo.report()["results"]] == [("D1", "PASS"), ("D2", "PASS")]
