"""Registrations you can trust: registry.lock's own rules (one register per id, times never go
backwards) are checked, each registration is shown with the commit that added it, `--strict`
requires it committed, and what a criterion depends on (model, build entry) is registered beside
it so that a change there shows as "not as registered"."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import git
from harness.cli import main
from harness.contract import registry, schema
from harness.contract.config import load_config
from harness.contract.depends import dependency_digests
from harness.verify import default_files, load_criteria

REPO = Path(__file__).resolve().parent.parent

SUITE = """\
criteria:
  - id: A1
    title: two runs agree
    kind: equivalence
    args: [run, --model, "{model}", --steps, "4"]
    variants: [{name: one}, {name: two}]
    compare: {dumps: [h_out]}
  - id: S1
    title: selftest
    kind: run
    runs: [{args: [selftest], expect: {passes_min: 1}}]
"""


def _line(cid: str, digest: str, time: str, event: str = "register", reason: str = '""') -> str:
    return "\t".join([cid, "regressions/suite.yaml", digest, time, event, reason]) + "\n"


def _digest(fake_repo, cid: str) -> str:
    return next(c.digest for c in load_criteria(fake_repo.config(), [fake_repo.root / "regressions" / "suite.yaml"])
                if c.id == cid)


# ---- the registry's own rules -------------------------------------------------------------------

def test_hand_appended_back_dated_register_line_is_detected_and_shown(fake_repo, capsys):
    """The attack of issue 24: edit a registered criterion, then append a register line for its new
    digest dated before the real one. It used to show as "registered" with no amendment."""
    p = fake_repo.criteria(SUITE)
    fake_repo.register(p)
    p.write_text(SUITE.replace('"4"', '"5"'))
    with open(fake_repo.registry, "a") as f:
        f.write(_line("A1", _digest(fake_repo, "A1"), "2026-01-01T00:00:00Z"))
    n = len(fake_repo.registry.read_text().splitlines())
    for extra in ((), ("--exploratory",)):
        assert fake_repo.verify(*extra) == 1
        r = fake_repo.result("A1")
        assert r["verdict"] == "FAIL" and r["registration"] == "suspect"
        assert r["reason"].startswith(f"registration not trusted: registry.lock:{n}: time 2026-01-01T00:00:00Z is "
                                      "earlier than line"), r["reason"]
        assert "back-dated or moved" in r["reason"]
        assert fake_repo.result("S1")["verdict"] == "PASS"  # the other criteria are not affected
    assert "registration not trusted" in (fake_repo.reports / "latest" / "report.md").read_text()
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2
    assert f"A1: refused: registry.lock:{n}: time 2026-01-01T00:00:00Z" in capsys.readouterr().err


def test_second_register_event_is_refused(fake_repo, capsys):
    p = fake_repo.criteria(SUITE)
    fake_repo.register(p)
    p.write_text(SUITE.replace('"4"', '"5"'))
    now = datetime.now(timezone.utc).strftime(registry.TIME_FORMAT)
    with open(fake_repo.registry, "a") as f:  # dated honestly, but a register, not an amend
        f.write(_line("A1", _digest(fake_repo, "A1"), now))
    assert fake_repo.verify() == 1
    r = fake_repo.result("A1")
    assert "a second `register` for A1 (first at line 3); a change after registration is an `amend`" in r["reason"]


@pytest.mark.parametrize("lines, problem", [
    ([_line("X", "d", "2026-01-02T00:00:00Z"), _line("Y", "d", "2026-01-01T00:00:00Z")],
     "registry.lock:2: time 2026-01-01T00:00:00Z is earlier than line 1's (2026-01-02T00:00:00Z)"),
    ([_line("Y", "d", "2026-01-01T00:00:00Z", "amend", '"why"')],
     "registry.lock:1: `amend` for Y, which is not registered before it"),
    ([_line("Y", "d", "2026-01-01T00:00:00Z"), _line("Y", "e", "2026-01-01T00:00:00Z", "amend")],
     "registry.lock:2: an amendment of Y without a reason"),
    ([_line("Y", "d", "2026-01-01T00:00:00Z"), _line("Y", "d", "2026-01-01T00:00:00Z", "withdraw")],
     "registry.lock:2: a withdrawal of Y without a reason"),
    ([_line("Y", "d", "yesterday")], "registry.lock:1: time 'yesterday' is not in the format"),
    ([_line("Y", "d", "2026-01-01T00:00:00Z", "rename")], "registry.lock:1: unknown event 'rename'"),
])
def test_registry_rules(lines, problem):
    got = registry.problems(registry.parse("".join(lines)))
    assert got["Y"].startswith(problem), got


def test_the_real_registry_breaks_no_rule():
    assert registry.problems(registry.load(REPO / "regressions" / "registry.lock")) == {}


def test_a_line_written_with_a_clock_behind_is_flagged(fake_repo):
    p = fake_repo.criteria(SUITE)
    fake_repo.register(p)
    c = load_criteria(fake_repo.config(), [p])[0]
    registry.append(fake_repo.registry, [(c, "amend", "x")], now=datetime(2000, 1, 1, tzinfo=timezone.utc))
    why = registry.problems(registry.load(fake_repo.registry))[c.id]
    assert "time 2000-01-01T00:00:00Z is earlier than line" in why and "back-dated" in why


# ---- dependencies -------------------------------------------------------------------------------

def test_model_and_build_changes_show_as_not_registered(fake_repo, capsys):
    p = fake_repo.criteria(SUITE)
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    capsys.readouterr()
    assert fake_repo.verify() == 0
    (fake_repo.root / "models" / "tiny.gguf").write_bytes(b"GGUF another model")
    assert fake_repo.verify() == 1
    r = fake_repo.result("A1")
    assert r["registration"] == "changed" and r["reason"].startswith(
        "not as registered: what it depends on changed since registration: model-file:models/tiny.gguf")
    assert fake_repo.result("S1")["verdict"] == "PASS"  # S1 runs no model
    # amending records the new dependencies
    assert main(["--root", str(fake_repo.root), "register", str(p), "--amend", "A1", "--reason", "new model"]) == 0
    assert fake_repo.verify() == 0
    # a build entry's options
    eng = fake_repo.root / "configs" / "engine.yaml"
    eng.write_text(eng.read_text().replace("default: {prebuilt: fakebin/default}",
                                           "default: {prebuilt: fakebin/./default}"))
    assert fake_repo.verify() == 1
    for cid in ("A1", "S1"):
        assert "what it depends on changed since registration: build:default" in fake_repo.result(cid)["reason"]
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 2
    assert "A1: refused: what it depends on (model recipe, build entry) changed" in capsys.readouterr().err


def test_recipe_digest_follows_its_meaning(tmp_path):
    (tmp_path / "configs" / "models").mkdir(parents=True)
    (tmp_path / "configs" / "engine.yaml").write_text("builds: {default: {prebuilt: bin}}\nmodels: {default: r}\n")
    recipe = tmp_path / "configs" / "models" / "r.yaml"
    crit = 'criteria: [{id: A, title: t, kind: run, runs: [{args: [run, "{model}"]}]}]\n'
    (tmp_path / "c.yaml").write_text(crit)

    def digests():
        cfg = load_config(tmp_path)
        (c,) = schema.load_file(tmp_path / "c.yaml", tmp_path, list(cfg.builds), [])
        return dependency_digests(cfg, c)

    assert digests()["recipe:r"] == "absent"
    recipe.write_text("hidden_size: 64\nlayers: 2\n")
    first = digests()
    recipe.write_text("# a comment\nlayers: 2\nhidden_size:   64\n")
    assert digests() == first  # the recipe's meaning, not its spelling
    recipe.write_text("hidden_size: 64\nlayers: 3\n")
    assert digests()["recipe:r"] != first["recipe:r"] and digests()["build:default"] == first["build:default"]


def test_registered_criteria_stay_registered_with_their_dependencies():
    """Existing lines keep their meaning (the criterion digest is unchanged) and every registered
    criterion of the repository has its dependencies recorded and unchanged."""
    cfg = load_config(REPO)
    entries = registry.load(REPO / "regressions" / "registry.lock")
    recorded = registry.current_depends(entries)
    files = default_files(cfg) + sorted((REPO / "regressions" / "engines").glob("*.yaml"))
    for c in load_criteria(cfg, files):
        st = registry.status(entries, c, dependency_digests(cfg, c))
        assert st.state == "registered", (c.id, st.reason())
        assert c.id in recorded, f"{c.id}: no depends line"


# ---- git provenance and --strict ------------------------------------------------------------------

def test_commit_shown_and_strict_requires_it(fake_repo, capsys):
    root = fake_repo.root
    p = fake_repo.criteria(SUITE)
    fake_repo.register(p)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "register")
    sha = git(root, "rev-parse", "HEAD")
    assert fake_repo.verify("--strict") == 0
    r = fake_repo.result("A1")
    assert r["registration"] == f"registered @ {sha[:10]}"
    assert r["details"]["registration"]["commit"] == sha and r["details"]["registration"]["uncommitted"] == []
    assert f"registered @ {sha[:10]}" in (fake_repo.reports / "latest" / "report.md").read_text()
    # a registration not committed yet: labelled, and refused by --strict
    p2 = fake_repo.criteria(SUITE.replace("A1", "A2").replace("S1", "S2"), "more.yaml")
    fake_repo.register(p2)
    assert fake_repo.verify() == 0
    assert fake_repo.result("A2")["registration"] == "registered (uncommitted)"
    assert fake_repo.verify("--strict") == 1
    r = fake_repo.result("A2")
    assert r["verdict"] == "FAIL" and r["reason"].startswith("registration not committed: registry.lock line(s) ")
    assert fake_repo.result("A1")["verdict"] == "PASS"
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "register more")
    assert fake_repo.verify("--strict") == 0


def test_strict_needs_a_git_checkout(fake_repo, capsys):
    fake_repo.register(fake_repo.criteria(SUITE))
    assert main(["--root", str(fake_repo.root), "verify", "--strict", "--no-build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: --strict: ") and "is not a git checkout" in err
