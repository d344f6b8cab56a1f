"""No link is followed when the harness writes or removes inside a report folder (issue 35,
medium 9): links planted there before a `verify --resume` (as `.lock`, `work/<id>`, `logs/`,
`logs/<id>`, `failed/<id>`, a report's temporary file) made it truncate a file and delete a folder
outside. harness/confined.py does every such write; these check it alone, then through verify."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness import confined
from harness.report import document

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")


@pytest.fixture(params=["by descriptor", "by lstat"], autouse=True)
def walk(request, monkeypatch):
    """Each case both ways confined walks a folder: openat (POSIX) and lstat per part (where
    descriptors cannot name folders, e.g. Windows)."""
    if request.param == "by lstat":
        monkeypatch.setattr(confined, "_BY_FD", False)
    return request.param


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the report folder, with a file and a sub-folder that must survive."""
    out = tmp_path / "outside"
    (out / "a" / "dump").mkdir(parents=True)
    (out / "a" / "dump" / "keep.f32").write_text("precious")
    (out / "a.stdout").write_text("precious")
    (out / "file").write_text("precious")
    return out


def _intact(out: Path) -> None:
    assert (out / "a" / "dump" / "keep.f32").read_text() == "precious"
    assert (out / "a.stdout").read_text() == "precious"
    assert (out / "file").read_text() == "precious"


# ---- confined alone ----------------------------------------------------------------------------

def test_makedirs_refuses_a_link_on_the_way(tmp_path, outside):
    rep = tmp_path / "rep"
    (rep / "work").mkdir(parents=True)
    (rep / "work" / "C1").symlink_to(outside, target_is_directory=True)
    with pytest.raises(confined.LinkRefused, match=r"/rep/work/C1: is a symbolic link; nothing in a report folder"):
        confined.makedirs(rep, "work/C1/a/dump")
    assert not (outside / "a" / "dump" / "x").exists()
    assert confined.makedirs(rep, "work/C2/a") == rep / "work" / "C2" / "a" and (rep / "work" / "C2" / "a").is_dir()


def test_write_refuses_a_link_a_fifo_and_a_hard_link(tmp_path, outside):
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "l").symlink_to(outside / "file")
    with pytest.raises(confined.LinkRefused, match=r"/rep/l: is a symbolic link"):
        confined.write_text(rep, "l", "x")
    (rep / "d").symlink_to(outside, target_is_directory=True)
    with pytest.raises(confined.LinkRefused, match=r"/rep/d: is a symbolic link"):
        confined.write_text(rep, "d/file", "x")
    os.link(outside / "file", rep / "h")
    with pytest.raises(confined.LinkRefused, match=r"/rep/h: has 1 other hard link\(s\)"):
        confined.write_text(rep, "h", "x")
    with pytest.raises(confined.LinkRefused, match=r"/rep/h: has 1 other hard link\(s\)"):
        confined.open_text(rep, "h", os.O_RDWR | os.O_CREAT, "r+")
    if hasattr(os, "mkfifo"):
        os.mkfifo(rep / "f")
        with pytest.raises(confined.LinkRefused, match=r"/rep/f: is a FIFO"):
            confined.write_text(rep, "f", "x")
    _intact(outside)
    confined.write_text(rep, "new/file", "ok")
    assert (rep / "new" / "file").read_text() == "ok"


def test_rmtree_removes_links_inside_but_not_their_targets(tmp_path, outside):
    rep = tmp_path / "rep"
    (rep / "work" / "C1").mkdir(parents=True)
    (rep / "work" / "C1" / "to-outside").symlink_to(outside, target_is_directory=True)
    confined.rmtree(rep, "work/C1")
    assert not (rep / "work" / "C1").exists()
    _intact(outside)
    confined.rmtree(rep, "work/C1")  # absent: nothing to do
    confined.rmtree(rep, "nowhere/C1")


@pytest.mark.parametrize("planted", ["work/C1", "work"])
def test_rmtree_refuses_a_link_at_or_above_its_root(tmp_path, outside, planted):
    rep = tmp_path / "rep"
    (rep / planted).parent.mkdir(parents=True, exist_ok=True)
    (rep / planted).symlink_to(outside / "a" if planted == "work/C1" else outside, target_is_directory=True)
    if planted == "work":
        (outside / "C1").mkdir()
        (outside / "C1" / "x").write_text("precious")
    with pytest.raises(confined.LinkRefused, match=rf"/rep/{planted}: is a symbolic link"):
        confined.rmtree(rep, "work/C1/dump" if planted == "work/C1" else "work/C1")
    _intact(outside)
    assert planted == "work/C1" or (outside / "C1" / "x").read_text() == "precious"


def test_move_refuses_a_link(tmp_path, outside):
    rep = tmp_path / "rep"
    (rep / "work").mkdir(parents=True)
    (rep / "work" / "C1").symlink_to(outside, target_is_directory=True)
    with pytest.raises(confined.LinkRefused):
        confined.move(rep, "work/C1", "failed/C1")
    (rep / "failed").symlink_to(outside, target_is_directory=True)
    (rep / "work" / "C2").mkdir()
    with pytest.raises(confined.LinkRefused):
        confined.move(rep, "work/C2", "failed/C2")
    assert not (outside / "C2").exists()


def test_paths_that_climb_out_are_refused(tmp_path):
    for rel in ("../x", "/etc/passwd", "a/../../x", ""):
        with pytest.raises(ValueError):
            confined.makedirs(tmp_path, rel)


def test_atomic_write_refuses_a_link_as_its_temporary(tmp_path, outside):
    """Before: the report was written through the link into the outside file, and report.json
    became a link to it."""
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / f".report.json.tmp{os.getpid()}").symlink_to(outside / "file")
    with pytest.raises(confined.LinkRefused):
        document.atomic_write(rep / "report.json", "{}\n")
    _intact(outside)
    assert not (rep / "report.json").exists()


# ---- through verify --resume -------------------------------------------------------------------

SUITE = """\
criteria:
  - id: C1
    title: two identical runs
    kind: equivalence
    args: [run, --model, "{model}", --prompt, "1,2", --steps, "1"]
    variants: [{name: a}, {name: b}]
    compare: {dumps: [h_out]}
"""
SECOND = """\
  - id: C2
    title: two identical runs, again
    kind: equivalence
    args: [run, --model, "{model}", --prompt, "1,2", --steps, "1"]
    variants: [{name: a}, {name: b%s}]
    compare: {dumps: [h_out]}
"""


def _resume_with(fake_repo, outside: Path, plant, failing: bool = False) -> tuple[int, list[str]]:
    """A report with C1 done; C2 added (and registered); plant(report folder); `verify --resume`."""
    f = fake_repo.criteria(SUITE)
    fake_repo.register(f)
    assert fake_repo.verify() == 0
    f = fake_repo.criteria(SUITE + SECOND % (", env: {FAKE_FLIP_ULP: 'h_out:0'}" if failing else ""))
    fake_repo.register(f)
    rdir = (fake_repo.reports / "latest").resolve()
    plant(rdir)
    said: list[str] = []
    try:
        rc = fake_repo.verify("--resume", messages=said)
    except Exception as e:  # noqa: BLE001 - the refusal of a planted .lock is a HarnessError
        rc, said = 2, [str(e)]
    _intact(outside)
    return rc, said


def test_resume_refuses_a_linked_lock(fake_repo, outside):
    """Before: the outside file was truncated and overwritten with the lock's holder."""
    rc, said = _resume_with(fake_repo, outside, lambda r: (r / ".lock").unlink() or (r / ".lock").symlink_to(
        outside / "file"))
    assert rc == 2 and said and ".lock: is a symbolic link; nothing in a report folder is followed" in said[-1], said


@pytest.mark.parametrize("where", ["work/C2", "work", "logs/C2", "logs"])
def test_resume_refuses_a_linked_work_or_log_folder(fake_repo, outside, where):
    """Before: work/C2 -> outside: outside/a/dump was deleted (the dump folder is emptied before
    each run); logs/C2 -> outside: outside/a.stdout (the engine's log) was truncated."""
    def plant(r: Path) -> None:
        (r / where).parent.mkdir(parents=True, exist_ok=True)
        if (r / where).exists():
            shutil.rmtree(r / where)
        if where in ("work", "logs"):  # so that work/C2/a/dump, logs/C2/a.stdout lead out too
            (outside / "C2").mkdir()
            (outside / "C2" / "a").symlink_to(outside / "a", target_is_directory=True)
            (outside / "C2" / "a.stdout").symlink_to(outside / "a.stdout")
        (r / where).symlink_to(outside, target_is_directory=True)

    rc, said = _resume_with(fake_repo, outside, plant)
    assert rc == 1
    r = fake_repo.result("C2")
    assert r["verdict"] == "FAIL"
    assert r["reason"].startswith(f"report folder: {(fake_repo.reports / 'latest').resolve() / where}: is a symbolic "
                                  "link; nothing in a report folder is followed"), r["reason"]
    assert fake_repo.result("C1")["verdict"] == "PASS"


def test_resume_keeps_a_failure_without_following_a_linked_failed_folder(fake_repo, outside):
    """Before: shutil.rmtree on the link: an internal error ended verify."""
    def plant(r: Path) -> None:
        (r / "failed").mkdir(exist_ok=True)
        (r / "failed" / "C2").symlink_to(outside / "a", target_is_directory=True)

    rc, _ = _resume_with(fake_repo, outside, plant, failing=True)
    assert rc == 1
    r = fake_repo.result("C2")
    assert r["verdict"] == "FAIL" and r["reason"].startswith("b vs a, h_out: 1 of "), r["reason"]
    assert "[evidence not kept: " in r["reason"] and "failed/C2: is a symbolic link" in r["reason"], r["reason"]
    assert json.loads((fake_repo.reports / "latest" / "report.json").read_text())["status"] == "complete"
