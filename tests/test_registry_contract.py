"""The registry is the contract (issue 35, High 3-4, Medium 7-8 and 10, the registry lows; issue 34
item 3): a resumed report never mixes commits or engines and re-judges what it keeps; every
registered id is judged, reported missing or shown withdrawn; ids are unique across the project;
`register` is one writer at a time, writes whole files, and the registry accepts only what the
tool writes (committed lines stay a prefix, no comments, no CR, depends lines only with their
amendment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, write_engine
from harness.cli import main
from harness.errors import HarnessError, SchemaErrors
from harness.contract import registry, schema
from harness.contract.depends import dependency_digests
from harness.contract.digest import canonical_json
from harness.verify import load_criteria

SUITE = """\
criteria:
  - id: R1
    title: selftest one
    kind: run
    runs: [{args: [selftest], expect: {passes_min: 1}}]
  - id: R2
    title: selftest two
    kind: run
    runs: [{args: [selftest], expect: {passes_min: 2}}]
  - id: R3
    title: selftest with the model named
    kind: run
    runs: [{args: [selftest, --model, "{model}"], expect: {passes_min: 3}}]
"""


def _commit(root: Path, message: str) -> str:
    if not (root / ".git").exists():
        git(root, "init", "-q")
        (root / ".gitignore").write_text("/reports/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def _registered(fake_repo, text: str = SUITE, name: str = "suite.yaml") -> Path:
    p = fake_repo.criteria(text, name)
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    return p


def _verdicts(fake_repo) -> dict[str, str]:
    return {r["id"]: r["verdict"] for r in fake_repo.report()["results"]}


# ---- --resume: one commit, one engine, judged as a fresh run (High 3, Medium 7) ----------------

def test_resume_never_keeps_results_of_another_engine(fake_repo):
    """690ea7b: a report of 3 PASS, resumed after the engine changed so that a fresh run FAILs,
    showed the new engine's hash over 3 kept PASS, exit 0."""
    _registered(fake_repo)
    assert fake_repo.verify() == 0
    write_engine(fake_repo.root / "fakebin" / "default", forced_env={"FAKE_SELFTEST_FAIL": "9"},
                 module={"abi": 1, "device": False})
    msgs: list[str] = []
    assert fake_repo.verify("--resume", messages=msgs) == 1
    assert set(_verdicts(fake_repo).values()) == {"FAIL"}
    assert any("not kept from the interrupted run: the engine or module binaries changed" in m for m in msgs), msgs
    doc = fake_repo.report()
    for r in doc["results"]:  # each result names the binaries it ran with: the report's own
        assert r["details"]["ran_with"]["builds"]["default"]["engine"] == doc["builds"]["default"]["sha256"]["engine"]


def test_resume_never_shows_a_new_commit_over_old_results(fake_repo):
    _registered(fake_repo)
    first = _commit(fake_repo.root, "one")
    assert fake_repo.verify() == 0
    assert {r["details"]["ran_with"]["commit"] for r in fake_repo.report()["results"]} == {first}
    (fake_repo.root / "notes.txt").write_text("another commit\n")
    second = _commit(fake_repo.root, "two")
    msgs: list[str] = []
    assert fake_repo.verify("--resume", messages=msgs) == 0
    doc = fake_repo.report()
    assert doc["git"]["commit"] == second
    assert {r["details"]["ran_with"]["commit"] for r in doc["results"]} == {second}
    assert "not kept from the interrupted run, as they ran on another commit or engine: R1, R2, R3" in msgs, msgs


def test_a_narrowed_resume_drops_what_another_commit_ran(fake_repo):
    """Results the resumed run does not select may not stand under the new commit either."""
    _registered(fake_repo)
    _commit(fake_repo.root, "one")
    assert fake_repo.verify() == 0
    (fake_repo.root / "notes.txt").write_text("another commit\n")
    _commit(fake_repo.root, "two")
    assert fake_repo.verify("--resume", "--only", "R1") == 0
    doc = fake_repo.report()
    assert [r["id"] for r in doc["results"]] == ["R1"] and doc["not_run"] == ["R2", "R3"]
    assert doc["status"] == "partial"


def test_resumed_exploratory_run_does_not_pass_strict(fake_repo):
    """690ea7b: `verify --exploratory`, then `verify --resume --strict`, kept the exploratory PASS."""
    fake_repo.criteria(SUITE)
    _commit(fake_repo.root, "criteria, not registered")
    assert fake_repo.verify("--exploratory") == 0
    assert all(r["exploratory"] for r in fake_repo.report()["results"])
    assert fake_repo.verify("--resume", "--strict") == 1
    doc = fake_repo.report()
    assert set(_verdicts(fake_repo).values()) == {"FAIL"}
    assert not any(r["exploratory"] for r in doc["results"])
    assert all("not pre-registered" in r["reason"] for r in doc["results"])


def test_resume_strict_refuses_an_uncommitted_registration_it_kept(fake_repo):
    fake_repo.criteria(SUITE)
    _commit(fake_repo.root, "criteria")
    _registered(fake_repo)  # registered, not committed
    assert fake_repo.verify() == 0
    assert fake_repo.verify("--resume", "--strict") == 1
    assert all(r["reason"].startswith("registration not committed") for r in fake_repo.report()["results"])


def test_resume_rejudges_a_changed_model_file(fake_repo):
    """690ea7b: a kept PASS survived a changed model file; a fresh run says it is not as registered."""
    _registered(fake_repo)
    assert fake_repo.verify() == 0
    (fake_repo.root / "models" / "tiny.gguf").write_bytes(b"GGUF another model")
    assert fake_repo.verify("--resume") == 1
    r = fake_repo.result("R3")
    assert r["verdict"] == "FAIL" and "what it depends on changed since registration: model-file:" in r["reason"]


def test_resume_rejudges_against_the_registry(fake_repo, tmp_path):
    _registered(fake_repo)
    assert fake_repo.verify() == 0
    empty = tmp_path / "empty.lock"
    empty.write_text(registry.HEADER)
    assert fake_repo.verify("--resume", "--registry", str(empty)) == 1
    assert all("not pre-registered" in r["reason"] for r in fake_repo.report()["results"])


def test_resume_keeps_what_a_fresh_run_would_judge_alike(fake_repo):
    log = fake_repo.root / "engine.log"
    _registered(fake_repo, SUITE.replace("[selftest]", '[selftest], env: {FAKE_LOG: "%s"}' % log))
    assert fake_repo.verify() == 0
    runs = log.read_text().count("selftest")
    msgs: list[str] = []
    assert fake_repo.verify("--resume", messages=msgs) == 0
    assert log.read_text().count("selftest") == runs
    assert any("R1: PASS (kept from the interrupted run)" in m for m in msgs)


# ---- every registered id is judged, missing, or withdrawn (High 4) ------------------------------

def _drop_r2(text: str) -> str:
    head, rest = text.split("  - id: R2\n")
    return head + "  - id: R3\n" + rest.split("  - id: R3\n")[1]


def _r2(text: str) -> str:
    return "criteria:\n  - id: R2\n" + text.split("  - id: R2\n")[1].split("  - id: R3\n")[0]


@pytest.mark.parametrize("how", ["deleted", "moved-to-subfolder", "moved-to-another-file", "file-renamed-yml"])
def test_a_registered_criterion_never_vanishes(fake_repo, how):
    """690ea7b: with R2 deleted or moved, `verify --strict` said "complete", exit 0."""
    p = _registered(fake_repo)
    _commit(fake_repo.root, "registered")
    if how == "deleted":
        p.write_text(_drop_r2(SUITE))
    elif how == "moved-to-subfolder":
        p.write_text(_drop_r2(SUITE))
        (p.parent / "sub").mkdir()
        (p.parent / "sub" / "more.yaml").write_text(_r2(SUITE))
    elif how == "moved-to-another-file":
        p.write_text(_drop_r2(SUITE))
        fake_repo.criteria(_r2(SUITE), "more.yaml")
    else:
        p.rename(p.with_suffix(".yml"))
    assert fake_repo.verify("--strict") == 1
    r = fake_repo.result("R2")
    assert r["verdict"] == "FAIL"
    if how == "moved-to-another-file":  # the moved criterion is judged: its id belongs to the registered file
        assert r["file"] == "regressions/more.yaml"
        assert r["reason"].startswith("id R2 belongs to regressions/suite.yaml (now without it) (registry.lock:4)")
    else:
        assert r["file"] == "regressions/suite.yaml"
        assert r["reason"].startswith("R2 is registered to regressions/suite.yaml (registry.lock:4), but no "
                                      "criteria file of this run has it")
        assert "python -m harness register --withdraw R2 --reason TEXT" in r["reason"]
    assert fake_repo.report()["status"] == "complete"


def test_withdraw_retires_an_id_with_its_reason(fake_repo, capsys):
    p = _registered(fake_repo)
    p.write_text(_drop_r2(SUITE))
    assert fake_repo.verify() == 1
    assert main(["--root", str(fake_repo.root), "register", "--withdraw", "R2"]) == 2
    assert "--withdraw needs --reason TEXT" in capsys.readouterr().err
    assert main(["--root", str(fake_repo.root), "register", "--withdraw", "R2", "--reason",
                 "selftest two duplicated R1"]) == 0
    assert "withdrew   R2  (regressions/suite.yaml; selftest two duplicated R1)" in capsys.readouterr().out
    assert fake_repo.verify() == 0
    doc = fake_repo.report()
    assert "R2" not in _verdicts(fake_repo)
    assert doc["withdrawn"] == [{"id": "R2", "file": "regressions/suite.yaml", "time": doc["withdrawn"][0]["time"],
                                 "reason": "selftest two duplicated R1", "line": doc["withdrawn"][0]["line"]}]
    md = (fake_repo.reports / "latest" / "report.md").read_text()
    assert "## Withdrawn criteria" in md and "selftest two duplicated R1" in md
    # its history stays readable: the register, depends and withdraw lines are all there
    assert [e.event for e in registry.load(fake_repo.registry) if e.id == "R2"] == ["register", "depends", "withdraw"]
    # the id is never reused: not by a criterion, not by a registration
    p.write_text(SUITE)
    assert fake_repo.verify() == 1
    assert fake_repo.result("R2")["reason"].startswith("id R2 was withdrawn (registry.lock:")
    capsys.readouterr()
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2
    assert "R2: refused: id R2 was withdrawn" in capsys.readouterr().err
    assert main(["--root", str(fake_repo.root), "register", "--withdraw", "R2", "--reason", "again"]) == 2
    assert "already withdrawn" in capsys.readouterr().err


# ---- ids are unique across the project (issue 34, item 3) ---------------------------------------

OTHER = """\
criteria:
  - id: X1
    title: the other file's X1
    kind: run
    runs: [{args: [selftest]}]
"""


def test_register_refuses_an_id_of_another_file(fake_repo, capsys):
    """690ea7b: X1 registered to one file, then X1 in a new file, showed as "changed" and
    `--amend` moved the registration silently."""
    _registered(fake_repo, OTHER, "other.yaml")
    mine = fake_repo.criteria(OTHER.replace("the other file's", "my"), "mine.yaml")
    before = fake_repo.registry.read_bytes()
    for extra in ([], ["--amend", "X1", "--reason", "take it over"]):
        capsys.readouterr()
        assert main(["--root", str(fake_repo.root), "register", str(mine), *extra]) == 2
        err = capsys.readouterr().err
        assert ("regressions/mine.yaml:2: X1: refused: id X1 belongs to regressions/other.yaml:2 (registry.lock:3); "
                "ids are unique across the project: give this criterion a free id (e.g. X2)") in err, err
    assert fake_repo.registry.read_bytes() == before
    assert fake_repo.verify(str(mine)) == 1
    r = fake_repo.result("X1")
    assert r["registration"] == "elsewhere" and r["reason"].startswith("id X1 belongs to regressions/other.yaml:2")
    with pytest.raises(SchemaErrors, match=r"regressions/mine.yaml:2: X1: id X1 belongs to regressions/other.yaml:2"):
        fake_repo.verify(str(mine), "--exploratory")  # an exploratory run may not use it either


def test_free_id_skips_every_taken_id():
    assert registry.free_id("X1", {"X1", "X2", "X4"}) == "X3"
    assert registry.free_id("L3f", {"L1", "L2", "L3"}) == "L4"
    assert registry.free_id("run", {"run", "run2"}) == "run3"


def test_an_amendment_naming_another_file_is_not_trusted():
    t = "2026-01-01T00:00:00Z"
    rows = [registry.Entry("X1", "configs/matrix.yaml", "sha256:1", t, "register", "", 1),
            registry.Entry("X1", "regressions/new.yaml", "sha256:2", t, "amend", "moved", 2)]
    assert registry.problems(rows)["X1"] == ("registry.lock:2: `amend` names regressions/new.yaml, but X1 is "
                                            "registered to configs/matrix.yaml (line 1); a registration never moves "
                                            "between files")


# ---- only the tool writes the registry (Medium 10) ----------------------------------------------

def test_a_hand_appended_depends_line_does_not_rebaseline(fake_repo):
    """690ea7b: after the model file changed, one appended depends line made R3 PASS again."""
    _registered(fake_repo)
    model = fake_repo.root / "models" / "tiny.gguf"
    model.write_bytes(b"GGUF another model")
    assert fake_repo.verify() == 1
    c = next(c for c in load_criteria(fake_repo.config(), [fake_repo.root / "regressions" / "suite.yaml"])
             if c.id == "R3")
    deps = dependency_digests(fake_repo.config(), c)
    last_time = registry.load(fake_repo.registry)[-1].time
    with open(fake_repo.registry, "a") as f:
        f.write("\t".join([c.id, c.file, registry.dependency_digest(deps), last_time, "depends",
                           json.dumps(canonical_json(deps))]) + "\n")
    assert fake_repo.verify() == 1
    r = fake_repo.result("R3")
    assert r["verdict"] == "FAIL" and "re-records R3's dependencies" in r["reason"], r["reason"]


@pytest.mark.parametrize("edit,message", [
    ("comment", "a comment line outside the header"),
    ("cr", "a carriage return (CR)"),
    ("crlf", "a carriage return (CR)"),
])
def test_a_hidden_registration_cannot_be_registered_afresh(fake_repo, capsys, edit, message):
    """690ea7b: with R1's lines turned into comments (or the file in CR-only line ends), an edited R1
    was registered afresh, without --amend."""
    p = _registered(fake_repo)
    text = fake_repo.registry.read_text()
    if edit == "comment":
        text = "".join("#" + ln if ln.startswith("R1\t") else ln for ln in text.splitlines(keepends=True))
    else:
        text = text.replace("\n", "\r" if edit == "cr" else "\r\n")
    fake_repo.registry.write_bytes(text.encode())
    p.write_text(SUITE.replace("selftest one", "selftest one, edited"))
    capsys.readouterr()
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2
    assert message in capsys.readouterr().err
    assert fake_repo.registry.read_bytes() == text.encode()
    with pytest.raises(HarnessError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fake_repo.verify()


def test_committed_registry_lines_never_change(fake_repo, capsys):
    """690ea7b: a committed registry line rewritten for an edited criterion made it PASS."""
    p = _registered(fake_repo)
    _commit(fake_repo.root, "registered")
    p.write_text(SUITE.replace("selftest one", "selftest one, edited"))
    new = next(c.digest for c in load_criteria(fake_repo.config(), [p]) if c.id == "R1")
    old = next(e.digest for e in registry.load(fake_repo.registry) if e.id == "R1")
    fake_repo.registry.write_text(fake_repo.registry.read_text().replace(old, new))
    assert main(["--root", str(fake_repo.root), "verify", "--no-build"]) == 2
    err = capsys.readouterr().err
    assert "registry.lock:3: differs from the committed registry (git HEAD) at this line" in err
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2
    assert "differs from the committed registry" in capsys.readouterr().err
    # appending through the tool keeps the committed file a prefix
    git(fake_repo.root, "checkout", "--", "regressions/registry.lock")
    assert main(["--root", str(fake_repo.root), "register", str(p), "--amend", "R1", "--reason", "title"]) == 0
    assert fake_repo.verify() == 0


# ---- two `register` runs at once (Medium 8) -----------------------------------------------------

def test_register_holds_a_lock_from_its_check_to_its_append(fake_repo, monkeypatch, capsys):
    """690ea7b: two `register` runs at once both found R1 new and both appended it; R1 was then
    "not trusted" for good. Here a second `register` starts while the first is between its check
    and its append: it waits for the lock, and gives up (nothing written) as the first holds it."""
    p = fake_repo.criteria(SUITE)
    real = registry.plan
    inner: list[int] = []
    started: list[bool] = []

    def plan_then_another_register(*args, **kwargs):
        out = real(*args, **kwargs)
        if not started:  # once: the second run's own plan (690ea7b) must not start a third
            started.append(True)
            inner.append(main(["--root", str(fake_repo.root), "register", str(p)]))
        return out

    monkeypatch.setattr(registry, "plan", plan_then_another_register)
    monkeypatch.setattr(registry, "WRITER_WAIT_S", 0.2, raising=False)
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    assert inner == [2]
    assert "is being written by another `register`" in capsys.readouterr().err
    entries = registry.load(fake_repo.registry)
    assert [e.id for e in entries if e.event == "register"] == ["R1", "R2", "R3"]
    assert registry.problems(entries) == {}


def test_two_register_processes_append_each_id_once(fake_repo):
    """Two real processes at once: each id registered exactly once (the one that comes second sees
    them as unchanged)."""
    p = fake_repo.criteria(SUITE)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    cmd = [sys.executable, "-m", "harness", "--root", str(fake_repo.root), "register", str(p)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [pr.communicate(timeout=120) for pr in procs]
    assert [pr.returncode for pr in procs] == [0, 0], outs
    entries = registry.load(fake_repo.registry)
    assert [e.id for e in entries if e.event == "register"] == ["R1", "R2", "R3"]
    assert registry.problems(entries) == {}


# ---- the registry lows ----------------------------------------------------------------------------

def test_a_killed_register_leaves_the_whole_old_registry(fake_repo, monkeypatch):
    """690ea7b appended in place: a kill during a write of over 8 KiB left half a line. Now the new
    registry is written beside the old one and renamed over it: until the rename the old file is
    untouched, so a kill at any point leaves the old file or the new one."""
    _registered(fake_repo, OTHER, "other.yaml")
    before = fake_repo.registry.read_bytes()
    many = "criteria:\n" + "".join(f"  - {{id: B{i}, title: selftest {i}, kind: run, runs: [{{args: [selftest]}}]}}\n"
                                   for i in range(100))
    p = fake_repo.criteria(many, "many.yaml")
    seen: list[bytes] = []

    def killed_at_the_rename(src, dst):
        seen.append(Path(dst).read_bytes())
        assert len(Path(src).read_bytes()) > len(before) + 8192  # the new file is whole, over 8 KiB more
        raise KeyboardInterrupt  # as if killed here

    monkeypatch.setattr(os, "replace", killed_at_the_rename)
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 130
    assert seen == [before] and fake_repo.registry.read_bytes() == before
    monkeypatch.undo()
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0  # the stale new file is no obstacle
    assert len([e for e in registry.load(fake_repo.registry) if e.event == "register"]) == 101


def test_a_byte_order_mark_is_named(fake_repo, capsys):
    """690ea7b: "registry.lock:1: expected 6 tab-separated fields, found 1"."""
    p = _registered(fake_repo)
    fake_repo.registry.write_bytes(b"\xef\xbb\xbf" + fake_repo.registry.read_bytes())
    capsys.readouterr()
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2
    assert "registry.lock:1: starts with a UTF-8 byte-order mark (U+FEFF)" in capsys.readouterr().err


def test_a_future_dated_line_does_not_block_register(fake_repo, capsys):
    """690ea7b: one line dated in the future made every later `register` fail."""
    _registered(fake_repo, OTHER, "other.yaml")
    text = fake_repo.registry.read_text()
    fake_repo.registry.write_text(text.replace(registry.load(fake_repo.registry)[0].time, "2099-01-01T00:00:00Z"))
    p = fake_repo.criteria(SUITE)
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    bad = registry.problems(registry.load(fake_repo.registry))
    assert list(bad) == ["X1"] and "dated 2099-01-01T00:00:00Z, later than now" in bad["X1"]
    assert fake_repo.verify(str(p)) == 0


def test_the_issue_34_collision_names_the_matrix_line():
    """Issue 34: a new file with X1 (registered to configs/matrix.yaml's cross:) showed "changed"."""
    repo = Path(__file__).resolve().parent.parent
    entries = registry.load(repo / "regressions" / "registry.lock")
    (mine,) = _load(OTHER.replace("the other file's", "my"), "regressions/mine.yaml")
    st = registry.status(entries, mine, root=repo)
    line = 1 + next(n for n, t in enumerate((repo / "configs" / "matrix.yaml").read_text().split("\n"))
                    if t.strip() == "X1:")
    assert st.state == "elsewhere" and st.why.startswith(f"id X1 belongs to configs/matrix.yaml:{line} (registry.lock:")
    assert registry.refusal(st, True, "hint") == st.why


def _load(text: str, name: str) -> list:
    return schema.load_text(text, name, ["default"], [])


def test_a_full_resume_judges_missing_and_withdrawn_ids_afresh(fake_repo):
    p = _registered(fake_repo)
    p.write_text(_drop_r2(SUITE))
    assert fake_repo.verify() == 1
    assert fake_repo.result("R2")["registration"] == "missing"
    assert main(["--root", str(fake_repo.root), "register", "--withdraw", "R2", "--reason", "not needed"]) == 0
    assert fake_repo.verify("--resume") == 0
    doc = fake_repo.report()
    assert [r["id"] for r in doc["results"]] == ["R1", "R3"] and [w["id"] for w in doc["withdrawn"]] == ["R2"]


def test_only_naming_a_registered_id_without_its_criterion_says_it_is_missing(fake_repo, capsys):
    """`verify --only R2` with R2 registered but gone from its file: a FAIL naming the file and
    the registry line, as a full run reports it (was: "--only: unknown id(s) R2", exit 2)."""
    p = _registered(fake_repo)
    p.write_text(_drop_r2(SUITE))
    assert fake_repo.verify("--only", "R2") == 1
    r = fake_repo.result("R2")
    assert r["verdict"] == "FAIL" and r["file"] == "regressions/suite.yaml"
    assert r["reason"].startswith("R2 is registered to regressions/suite.yaml (registry.lock:4), but no "
                                  "criteria file of this run has it")
    assert main(["--root", str(fake_repo.root), "verify", "--only", "NOPE"]) == 2
    assert "unknown id(s) NOPE" in capsys.readouterr().err
