"""One registry gate for every command (issue 44, N02, N03, N22, N27): registry.lock's whole
committed history is append-only (a merge keeps each parent's lines in order), compare and bisect
read it through the same checks as verify, the matrix and compare check what a criterion depends
on, `--strict` covers withdraw lines, and a linked registry is refused."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import git
from harness.cli import main
from harness.contract import registry
from harness.verify import load_criteria
from test_registry_contract import SUITE, _commit, _drop_r2, _registered

TWO = SUITE.split("  - id: R3\n")[0]  # R1 and R2


def test_a_line_removed_in_one_commit_and_registered_again_in_the_next_is_refused(fake_repo, capsys):
    """e338b56 (N03): R1's lines removed in one commit, its edited text registered afresh in the
    next: `verify --strict` judged it "registered", exit 0, with no amendment."""
    p = _registered(fake_repo, TWO)
    _commit(fake_repo.root, "registered")
    kept = [line for line in fake_repo.registry.read_text().split("\n") if not line.startswith("R1\t")]
    fake_repo.registry.write_text("\n".join(kept))
    p.write_text(TWO.replace("passes_min: 1", "passes_min: 0"))  # R1 loosened
    _commit(fake_repo.root, "drop R1's registration")
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2  # refused: history rewritten
    assert "drops or edits a line that its parent" in capsys.readouterr().err
    # written as the tool would have written it, and committed: the history still tells
    fake_repo.register(p)
    assert any(e.id == "R1" and e.event == "register" for e in registry.load(fake_repo.registry))
    bad = _commit(fake_repo.root, "register R1 afresh")
    assert main(["--root", str(fake_repo.root), "verify", "--strict", "--no-build"]) == 2
    err = capsys.readouterr().err
    assert "registry.lock: commit " in err and "drops or edits a line that its parent" in err
    assert "append-only over its whole history" in err
    assert git(fake_repo.root, "rev-parse", "HEAD") == bad


def test_a_merge_of_two_branches_that_each_appended_is_accepted(fake_repo):
    """Two branches each register their own file; their merge keeps both parents' lines, in order."""
    _registered(fake_repo, TWO)
    _commit(fake_repo.root, "base")
    main_branch = git(fake_repo.root, "rev-parse", "--abbrev-ref", "HEAD")
    git(fake_repo.root, "checkout", "-q", "-b", "side")
    time.sleep(1.1)  # the side's registration is dated after the base's
    _registered(fake_repo, TWO.replace("R1", "S1").replace("R2", "S2"), "side.yaml")
    _commit(fake_repo.root, "side registers S1, S2")
    git(fake_repo.root, "checkout", "-q", main_branch)
    time.sleep(1.1)
    _registered(fake_repo, TWO.replace("R1", "M1").replace("R2", "M2"), "mine.yaml")
    _commit(fake_repo.root, "main registers M1, M2")
    side = git(fake_repo.root, "show", "side:regressions/registry.lock").split("\n")
    mine = fake_repo.registry.read_text().split("\n")
    merged = mine[:-1] + [line for line in side if line and line not in mine] + [""]
    git(fake_repo.root, "merge", "-q", "--no-commit", "-s", "ours", "side")
    fake_repo.registry.write_text("\n".join(merged))
    git(fake_repo.root, "checkout", "side", "--", "regressions/side.yaml")
    _commit(fake_repo.root, "merge side")
    assert len(git(fake_repo.root, "rev-list", "--merges", "HEAD").split()) == 1
    from harness.contract import gate

    assert gate.history_problem(fake_repo.root, fake_repo.registry) is None
    assert {e.id for e in gate.load(fake_repo.root)} >= {"R1", "S1", "M1"}


def test_the_project_registry_history_is_append_only():
    """This repository's own registry.lock passes the rule over all of its history."""
    from harness.contract import gate

    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    t0 = time.perf_counter()
    assert gate.history_problem(root, gate.default_path(root)) is None
    assert time.perf_counter() - t0 < 30  # three git commands, whatever the number of commits


def test_lost_line_is_a_subsequence_check():
    from harness.contract import gate

    assert gate.lost_line("a\nb\n", "a\nx\nb\ny\n") is None
    assert gate.lost_line("a\nb\n", "b\na\n") == "b"
    assert gate.lost_line("a\nb\n", "a\n") == "b"
    assert gate.lost_line("a\nb\n", "a\nb2\n") == "b"


def test_strict_does_not_count_an_uncommitted_withdrawal(fake_repo):
    """e338b56 (N22): with R2's criterion deleted and its withdraw line in no commit, `verify
    --strict` showed R2 withdrawn and passed."""
    p = _registered(fake_repo, SUITE)
    _commit(fake_repo.root, "registered")
    p.write_text(_drop_r2(SUITE))
    assert main(["--root", str(fake_repo.root), "register", "--withdraw", "R2", "--reason", "gone"]) == 0
    assert fake_repo.verify("--strict") == 1
    r = fake_repo.result("R2")
    assert r["verdict"] == "FAIL" and "no criteria file of this run has it" in r["reason"]
    assert fake_repo.report()["withdrawn"] == []
    _commit(fake_repo.root, "withdraw R2")
    assert fake_repo.verify("--strict") == 0  # once committed, the withdrawal counts
    assert [w["id"] for w in fake_repo.report()["withdrawn"]] == ["R2"]


@pytest.mark.parametrize("command", ["register", "verify"])
def test_a_registry_linked_out_of_the_project_is_refused(fake_repo, tmp_path, capsys, command):
    """e338b56 (N27): a registry.lock linking out of the repository was read and appended to."""
    p = fake_repo.criteria(TWO)
    outside = tmp_path / "outside.lock"
    outside.write_text(registry.HEADER)
    fake_repo.registry.symlink_to(outside)
    before = outside.read_text()
    argv = [str(p)] if command == "register" else ["--no-build"]
    assert main(["--root", str(fake_repo.root), command, *argv]) == 2
    assert "registry.lock is a symbolic link" in capsys.readouterr().err
    assert outside.read_text() == before and fake_repo.registry.is_symlink()


def test_the_matrix_checks_what_a_criterion_depends_on(fake_repo):
    """e338b56: a matrix entry's criterion judged a changed model file "registered"; the gate
    checks a criterion's dependencies wherever it is judged."""
    from harness.run.suite import Judged, Models, judge
    from harness.run.probes import Probes
    from harness.run.runner import Context
    from harness.contract import gate

    p = _registered(fake_repo, SUITE)
    cfg = fake_repo.config()
    r3 = next(c for c in load_criteria(cfg, [p]) if c.id == "R3")
    g = gate.open_gate(fake_repo.root, cfg=cfg)
    assert g.status(r3).ok
    (fake_repo.root / "models" / "tiny.gguf").write_bytes(b"GGUF another model")
    st = gate.open_gate(fake_repo.root, cfg=cfg).status(r3)
    assert st.state == "changed" and "what it depends on changed" in st.why
    models = Models(cfg, lambda s: None)
    ctx = Context(cfg=cfg, report_dir=fake_repo.root / "reports" / "m", probes=Probes(gpu_info=lambda: None),
                  ensure_build=lambda n: None, model_path=models.path, progress=lambda s: None)
    res = judge(ctx, r3, Judged(gate.open_gate(fake_repo.root, cfg=cfg), False, "register it"))
    assert res.verdict == "FAIL" and "what it depends on changed" in res.reason


needs_build = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("cc") and shutil.which("git")),
                                 reason="needs cmake, a C compiler and git")


@needs_build
@pytest.mark.parametrize("command", ["compare", "bisect"])
def test_compare_and_bisect_refuse_a_rewritten_committed_line(tmp_path, capsys, command):
    """e338b56 (N02): compare and bisect read registry.lock unchecked: a committed line rewritten
    for a loosened workload (margin 2 % -> 50 %) counted as registered."""
    from tests.compare_repo import make_repo

    repo = tmp_path / "repo"
    c = make_repo(repo)
    work = repo / "regressions" / "work.yaml"
    assert main(["--root", str(repo), "register", str(work)]) == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "register W1")
    old = next(e.digest for e in registry.load(repo / "regressions" / "registry.lock") if e.id == "W1")
    work.write_text(work.read_text().replace("margin: 0.02", "margin: 0.5"))
    new = next(x.digest for x in load_criteria(__import__("harness.contract.config", fromlist=["x"]).load_config(repo),
                                                [work]) if x.id == "W1")
    lock = repo / "regressions" / "registry.lock"
    lock.write_text(lock.read_text().replace(old, new))
    args = ([c[0], c[1]] if command == "compare" else [c[0], c[1], "--workload", "W1"])
    rc = main(["--root", str(repo), command, *args, "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "differs from the committed registry (git HEAD)" in err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("eng"))  # nothing built


@needs_build
def test_compare_checks_what_a_workload_depends_on(tmp_path, capsys):
    """e338b56: compare judged a workload whose build entry changed since registration as
    registered; now it is not run, as verify would not run it."""
    from tests.compare_repo import make_repo

    repo = tmp_path / "repo"
    c = make_repo(repo)
    assert main(["--root", str(repo), "register", str(repo / "regressions" / "work.yaml")]) == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "register W1")
    eng = repo / "configs" / "engine.yaml"
    eng.write_text(eng.read_text().replace("engine: {source: src}", "engine: {source: src, options: {X: \"1\"}}"))
    assert eng.read_text() != git(repo, "show", "HEAD:configs/engine.yaml") + "\n"
    rc = main(["--root", str(repo), "compare", c[0], c[1], "--cache", str(tmp_path / "cache"),
               "--out", str(tmp_path / "o")])
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    w = doc["workloads"][0]
    assert rc == 1 and w["speed"] == "error", w
    assert "what it depends on changed since registration: build:default" in w["reason"]


def test_a_clone_with_autocrlf_reads_its_registry(tmp_path):
    """e338b56 (N14): a clone made with core.autocrlf=true got registry.lock with CRLF line ends,
    which the registry refuses, and the suggested `git checkout HEAD -- regressions/registry.lock`
    wrote the CRs again. The project's .gitattributes keeps LF on every checkout."""
    from harness.contract import gate

    root = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"
    (src / "regressions").mkdir(parents=True)
    shutil.copy(root / ".gitattributes", src / ".gitattributes")
    shutil.copy(root / "regressions" / "registry.lock", src / "regressions" / "registry.lock")
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "registry")
    clone = tmp_path / "clone"
    git(tmp_path, "-c", "core.autocrlf=true", "clone", "-q", "--config", "core.autocrlf=true", str(src), str(clone))
    lock = clone / "regressions" / "registry.lock"
    assert b"\r" not in lock.read_bytes()
    assert gate.load(clone) == registry.load(root / "regressions" / "registry.lock")
    lock.write_bytes(lock.read_bytes().replace(b"\n", b"\r\n"))
    git(clone, "checkout", "HEAD", "--", "regressions/registry.lock")  # the remedy the message names
    assert b"\r" not in lock.read_bytes()
