"""A matrix run's and a merge's report: the registry read as verify reads it (checked against git
HEAD), reports/latest moved only by a finished full run, and an interrupted run that says so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import git, register_command
from harness.cli import main
from harness.errors import HarnessError
from harness.matrix import run as MR
from harness.matrix.cross import merge_reports
from harness.matrix.entry import EntryRun, EntryRunner
from test_merge_reports import MATRIX, floats, make_report

REPO = Path(__file__).resolve().parent.parent


def _project(tmp_path: Path, register: bool = True) -> Path:
    """The project's configs with a two-entry matrix, its cross criterion X1 registered (or not),
    in a git checkout."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "configs", root / "configs")
    (root / "configs" / "matrix.yaml").write_text(MATRIX)
    (root / "regressions").mkdir()
    if register:
        assert main(["--root", str(root), "register", str(root / "configs" / "matrix.yaml")]) == 0
    else:  # the registry's header only
        header = (REPO / "regressions" / "registry.lock").read_text().split("\n")[:2]
        (root / "regressions" / "registry.lock").write_text("\n".join(header) + "\n")
    (root / ".gitignore").write_text("/reports/\n/build/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "registered")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _project(tmp_path)


def _edit_committed_line(root: Path) -> None:
    """Rewrite X1's committed registration for another digest (a hand edit, not an event)."""
    reg = root / "regressions" / "registry.lock"
    lines = reg.read_text().split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith("X1\t"))
    fields = lines[i].split("\t")
    fields = [("sha256:" + "0" * 64) if f.startswith("sha256:") else f for f in fields]
    lines[i] = "\t".join(fields)
    reg.write_text("\n".join(lines))


def _skip_entries(monkeypatch) -> None:
    """Entries that SKIP at once: the run's own bookkeeping is what is tested, not a build."""
    monkeypatch.setattr(EntryRunner, "execute", lambda self: EntryRun(self.ent.name, "SKIP", "not built in tests"))


def test_merge_reads_the_registry_checked_against_git_head(project, tmp_path):
    """Was: a merge read the registry as it was, so a committed line rewritten by hand counted."""
    same = {"h_out": floats(1.0, 2.0), "logits": floats(0.5, -0.25, 3.0)}
    a = make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], same)
    b = make_report(tmp_path / "b", "b-mingw", [("dump", "PASS")], dict(same))
    _edit_committed_line(project)
    with pytest.raises(HarnessError, match="differs from the committed registry"):
        merge_reports([a, b], tmp_path / "merged", root=project)


def test_matrix_reads_the_registry_checked_against_git_head(project, monkeypatch):
    """Was: the matrix read the registry as it was, and ran its entries."""
    _skip_entries(monkeypatch)
    _edit_committed_line(project)
    with pytest.raises(HarnessError, match="differs from the committed registry"):
        MR.run_matrix(project, ["a-gcc"], progress=lambda s: None)
    assert not (project / "reports").exists() or not any((project / "reports").iterdir())


def test_latest_moves_only_when_a_full_matrix_run_has_finished(project, monkeypatch):
    """Was: reports/latest pointed at a matrix report from its start, while it was "running"."""
    from harness.report.document import resolve_latest

    reports = project / "reports"
    seen = []

    def execute(self):
        seen.append(resolve_latest(reports) if reports.exists() else None)
        return EntryRun(self.ent.name, "SKIP", "not built in tests")

    monkeypatch.setattr(EntryRunner, "execute", execute)
    _, narrowed = MR.run_matrix(project, ["a-gcc"], progress=lambda s: None)
    assert seen == [None] and resolve_latest(reports) is None  # a narrowed run never moves it
    _, full = MR.run_matrix(project, None, progress=lambda s: None)
    assert full not in seen  # not while it ran
    assert resolve_latest(reports) == full.resolve()


@pytest.mark.parametrize("stop", ["full disk", "SIGINT"])
def test_a_stopped_matrix_run_leaves_its_report_interrupted(project, monkeypatch, stop):
    """Was: a full disk (RunStopped) or Ctrl-C left the matrix report "running"."""
    import json

    from harness.run.runner import RunStopped

    def criteria(*args, **kwargs):
        if stop == "SIGINT":
            raise KeyboardInterrupt("SIGINT")
        raise RunStopped("cannot write the engine's log: No space left on device")

    _skip_entries(monkeypatch)
    monkeypatch.setattr(MR, "entry_criteria", criteria)
    with pytest.raises(KeyboardInterrupt if stop == "SIGINT" else HarnessError) as e:
        MR.run_matrix(project, None, progress=lambda s: None)
    [rdir] = [d for d in (project / "reports").iterdir() if d.name.startswith("2")]
    doc = json.loads((rdir / "report.json").read_text())
    assert doc["status"] == "interrupted"
    assert "status **interrupted**" in (rdir / "report.md").read_text()
    assert not (project / "reports" / "latest").exists()
    if stop == "full disk":
        assert "No space left on device" in doc["interrupted_by"]
        assert f"the matrix report {rdir} is marked interrupted" in str(e.value)


def test_merge_hint_for_an_unregistered_cross_criterion_runs_as_printed(tmp_path):
    """Was: "run `harness register configs/matrix.yaml`": no `harness` command exists."""
    import json
    import sys

    _project(tmp_path, register=False)
    same = {"h_out": floats(1.0, 2.0), "logits": floats(0.5, -0.25, 3.0)}
    make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], same)
    make_report(tmp_path / "b", "b-mingw", [("dump", "PASS")], dict(same))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    merge = [sys.executable, "-m", "harness", "--root", "repo", "merge", "a", "b", "-o"]
    assert run([*merge, "m1"]).returncode == 1
    x1 = next(r for r in json.loads((tmp_path / "m1" / "report.json").read_text())["results"] if r["id"] == "X1")
    hint = register_command(x1["reason"])
    assert hint[1:] == ["-m", "harness", "--root", "repo", "register", "repo/configs/matrix.yaml"], hint
    done = run(hint)
    assert done.returncode == 0, done.stderr
    assert run([*merge, "m2"]).returncode == 0


def test_exploratory_reuse_of_a_registered_id_hints_a_command_that_runs(fake_repo):
    """Was: "amend the registered one: harness register --amend ID --reason TEXT": no `harness`
    command, and no file."""
    import sys

    f = fake_repo.criteria("criteria:\n  - {id: H3, title: one, kind: run, runs: [{args: [selftest]}]}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=fake_repo.root, env=env, capture_output=True, text=True, timeout=300)

    assert run(sys.executable, "-m", "harness", "register", "regressions/suite.yaml").returncode == 0
    f.write_text(f.read_text().replace("title: one", "title: two"))
    r = run(sys.executable, "-m", "harness", "verify", "--exploratory")
    assert r.returncode == 2 and "exploratory criteria need an id of their own" in r.stderr, r.stderr
    hint = register_command(r.stderr)
    assert hint[1:6] == ["-m", "harness", "register", "regressions/suite.yaml", "--amend"], hint
    done = run(*hint)
    assert done.returncode == 0 and "amended    H3" in done.stdout, done.stderr


def test_a_bare_resume_never_continues_a_matrix_report(project, monkeypatch):
    """A stopped matrix run, newer than an interrupted verify run: a bare `verify --resume` goes
    on with the verify report (was: the newest folder, the matrix report)."""
    import json

    from harness.report.resume import target as resume_target

    reports = project / "reports"
    older = reports / "20260101T000000Z-aaaaaaa"
    older.mkdir(parents=True)
    (older / "report.json").write_text(json.dumps({"status": "interrupted", "results": []}))

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt("SIGINT")

    monkeypatch.setattr(MR, "entry_criteria", interrupt)
    _skip_entries(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        MR.run_matrix(project, None, progress=lambda s: None)
    assert resume_target(reports) == older


def test_a_bare_resume_passes_over_a_folder_without_a_report(project, capsys):
    """e338b56 (N15): a refused compare left an empty `reports/<time>-compare` folder; being the
    newest, it hid the interrupted verify run from a bare `verify --resume`. The refused compare
    now leaves nothing, and a folder without a report is passed over."""
    import json

    from harness.cli import main
    from harness.report.resume import target as resume_target

    reports = project / "reports"
    older = reports / "20260101T000000Z-aaaaaaa"
    older.mkdir(parents=True)
    (older / "report.json").write_text(json.dumps({"status": "interrupted", "results": []}))
    (reports / "20260101T000001Z-bbbbbbb").mkdir()  # a run killed before its first write
    assert resume_target(reports) == older
    before = sorted(p.name for p in reports.iterdir())
    assert main(["--root", str(project), "compare", "no-such-revision"]) == 2
    assert "harness: error: " in capsys.readouterr().err  # refused: no workload here
    assert sorted(p.name for p in reports.iterdir()) == before
