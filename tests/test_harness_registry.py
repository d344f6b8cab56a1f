"""Digests are canonical (whitespace, comments, key order do not matter); tampering is caught;
the registry is append-only; amendments need a reason and show in reports."""

from __future__ import annotations

import pytest

from harness.errors import SchemaErrors
from harness.spec import registry
from harness.spec import schema
from harness.cli import main
from harness.spec.digest import canonical_json, criterion_digest

BUILDS = ["default", "stub", "gpu"]
DUMPS = ["h_out", "logits"]

A = """\
criteria:
  - id: A1
    title: graph equals stream
    kind: equivalence
    args: [run, --model, "{model}", --steps, "8"]
    variants:
      - {name: graph, preconditions: {counters.graph_replays: ">0"}}
      - {name: stream, env: {KITE_CUDA_GRAPH: "0"}}
    compare: {dumps: [h_out, logits], mode: memcmp}
"""

# the same criterion: other key order, block style, comments, extra blank lines, 1.0 vs 1
B = """\
# reformatted
criteria:

  - kind: equivalence      # same thing
    compare:
      mode: memcmp
      dumps:
        - h_out
        - logits
    variants:
      - preconditions:
          counters.graph_replays: ">0"
        name: graph
      - env:
          KITE_CUDA_GRAPH: "0"
        name: stream
    args: [run, --model, "{model}", --steps, "8"]
    title: graph equals stream
    id: A1
"""


def load(text):
    (c,) = schema.load_text(text, "regressions/s.yaml", BUILDS, DUMPS)
    return c


def test_digest_independent_of_formatting():
    assert load(A).digest == load(B).digest


def test_digest_changes_with_content():
    base = load(A).digest
    assert load(A.replace('"8"', '"9"')).digest != base
    assert load(A.replace("graph equals stream", "graph equals stream!")).digest != base
    assert load(A.replace('">0"', '">=0"')).digest != base


def test_numbers_normalized():
    assert criterion_digest({"x": 1.0}) == criterion_digest({"x": 1})
    assert criterion_digest({"x": 1.5}) != criterion_digest({"x": 1})
    assert canonical_json({"b": 1, "a": [True, None]}) == '{"a":[true,null],"b":1}'


def test_status_and_tamper(tmp_path):
    reg = tmp_path / "registry.lock"
    c = load(A)
    assert registry.status(registry.load(reg), c).state == "unregistered"
    registry.append(reg, [(c, "register", "")])
    assert registry.status(registry.load(reg), c).ok
    assert registry.status(registry.load(reg), load(B)).ok
    tampered = load(A.replace('">0"', '">=0"'))
    st = registry.status(registry.load(reg), tampered)
    assert st.state == "changed" and "not as registered" in st.reason()


def _repo(fake_repo, text):
    p = fake_repo.criteria(text)
    return p


def test_register_cli_refuses_change_without_amend(fake_repo, capsys):
    p = _repo(fake_repo, A)
    root = ["--root", str(fake_repo.root)]
    assert main(root + ["register", str(p)]) == 0
    assert "registered A1" in capsys.readouterr().out
    assert main(root + ["register", str(p)]) == 0
    assert "unchanged  A1" in capsys.readouterr().out
    p.write_text(A.replace('"8"', '"16"'))
    before = fake_repo.registry.read_text()
    assert main(root + ["register", str(p)]) == 2
    err = capsys.readouterr().err
    assert "A1: refused: changed since registration" in err and "--amend A1 --reason" in err
    assert fake_repo.registry.read_text() == before
    assert main(root + ["register", str(p), "--amend", "A1"]) == 2
    assert "--amend needs --reason" in capsys.readouterr().err
    assert main(root + ["register", str(p), "--amend", "A1", "--reason", "longer sequence"]) == 0
    after = fake_repo.registry.read_text()
    assert after.startswith(before), "append-only"
    entries = registry.load(fake_repo.registry)
    # each registration and amendment records what the criterion depends on beside it
    assert [e.event for e in entries] == ["register", "depends", "amend", "depends"]
    assert entries[2].reason == "longer sequence"


def test_verify_fails_unregistered_and_changed(fake_repo):
    p = fake_repo.criteria(A.replace("{name: graph, preconditions: {counters.graph_replays: \">0\"}}",
                                     "{name: graph}"))
    assert fake_repo.verify() == 1
    r = fake_repo.result("A1")
    assert r["verdict"] == "FAIL" and "not pre-registered" in r["reason"]
    fake_repo.register(p)
    assert fake_repo.verify() == 0
    p.write_text(p.read_text().replace('"8"', '"7"'))
    assert fake_repo.verify() == 1
    r = fake_repo.result("A1")
    assert r["verdict"] == "FAIL" and "not as registered" in r["reason"] and r["registration"] == "changed"
    # an exploratory run may not report under a registered id with other content
    with pytest.raises(SchemaErrors, match=r"^regressions/suite.yaml:2: A1: exploratory criteria need an id of "
                                           r"their own: this id is registered with another digest"):
        fake_repo.verify("--exploratory")
    assert main(["--root", str(fake_repo.root), "verify", "--exploratory", "--no-build"]) == 2
    p.write_text(p.read_text().replace("id: A1", "id: A1try"))
    assert fake_repo.verify("--exploratory") == 0
    r = fake_repo.result("A1try")
    assert r["verdict"] == "PASS" and r["exploratory"] is True
    md = (fake_repo.reports / "latest" / "report.md").read_text()
    assert "exploratory: not pre-registered" in md
    junit = (fake_repo.reports / "latest" / "junit.xml").read_text()
    assert "exploratory: not pre-registered" in junit


def test_amendment_shown_in_report(fake_repo):
    text = A.replace("{name: graph, preconditions: {counters.graph_replays: \">0\"}}", "{name: graph}")
    p = fake_repo.criteria(text)
    fake_repo.register(p)
    p.write_text(text.replace('"8"', '"6"'))
    assert main(["--root", str(fake_repo.root), "register", str(p), "--amend", "A1", "--reason", "shorter"]) == 0
    assert fake_repo.verify() == 0
    r = fake_repo.result("A1")
    assert r["amendments"][0]["reason"] == "shorter"
    assert "Amendments" in (fake_repo.reports / "latest" / "report.md").read_text()


def test_refusal_of_a_reused_id_for_matrix_and_verify():
    """registry.refusal (used by verify and by the matrix's criteria) refuses a changed criterion
    even when exploratory; an unregistered one still runs, labelled."""
    changed = registry.Status("changed", "sha256:x", [])
    assert registry.refusal(changed, True, "hint") == registry.REUSED
    assert "not as registered" in registry.refusal(changed, False, "hint")
    assert registry.refusal(registry.Status("unregistered", None, []), True, "hint") is None
    assert registry.refusal(registry.Status("registered", "sha256:x", []), False, "hint") is None
