"""Digests are canonical (whitespace, comments, key order do not matter); tampering is caught;
the registry is append-only; amendments need a reason and show in reports."""

from __future__ import annotations

import shlex
import pytest

from harness.errors import HarnessError, SchemaErrors
from harness.contract import looks, registry
from harness.contract import schema
from harness.cli import main
from harness.contract.digest import canonical_json, criterion_digest

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


def test_numbers_keep_their_type():
    assert criterion_digest({"x": 1.0}) != criterion_digest({"x": 1})  # the engine gets "1.0" or "1"
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


# a compare workload whose budget (8 pairs, a look every 4) allows 2 looks: no speed verdict can fail
SHORT = """\
criteria:
  - id: W1
    title: decode speed, head against base
    kind: compare
    build: stub
    args: [run, --model, "{model}"]
    dumps: [h_out]
    bytes: same
    metric: {field: timings.decode_ms, reduce: median}
    margin: 0.02
    block: 4
    budget: {pairs: 8, seconds: 60}
"""
ENOUGH = SHORT.replace("block: 4", "block: 2").replace("pairs: 8,", "pairs: 48,")  # 24 looks


def test_register_refuses_a_compare_budget_that_cannot_give_a_speed_verdict(fake_repo, capsys):
    """looks.unfit, the rule compare warns with: a workload registers only with the looks a bisect
    step needs (18 at alpha 0.05 / 3). Nothing of the file is registered; withdrawing still works."""
    root = ["--root", str(fake_repo.root)]
    p = fake_repo.criteria(SHORT + A.removeprefix("criteria:\n"))
    assert main(root + ["register", str(p)]) == 2
    err = capsys.readouterr().err
    assert ("regressions/suite.yaml:2: W1: refused: its budget (8 pairs, a look every 4) allows 2 looks; a change "
            "needs 18 at alpha 0.0167 (a bisect step's: 0.05 / 3): regressed or improved cannot be shown; register "
            "it with budget pairs of at least 72 at block 4, or a smaller block") in err
    assert "nothing registered" in err and "--amend" not in err and not fake_repo.registry.exists()
    p.write_text(ENOUGH)
    assert main(root + ["register", str(p)]) == 0
    assert "registered W1" in capsys.readouterr().out
    before = fake_repo.registry.read_text()
    p.write_text(SHORT)  # an amendment is held to the same rule
    assert main(root + ["register", str(p), "--amend", "W1", "--reason", "a shorter budget"]) == 2
    assert "W1: refused: its budget (8 pairs, a look every 4) allows 2 looks" in capsys.readouterr().err
    assert fake_repo.registry.read_text() == before
    assert main(root + ["register", "--withdraw", "W1", "--reason", "no longer measured"]) == 0
    assert [e.event for e in registry.load(fake_repo.registry)][-1] == "withdraw"


def test_the_budget_rule_at_the_edge():
    """18 looks at a bisect step's level is enough, 17 is not; compare's own level needs 15."""
    assert (looks.looks_needed(looks.ALPHA), looks.looks_needed(looks.BISECT_ALPHA)) == (15, 18)
    assert looks.budget_looks(36, 2, looks.BISECT_ALPHA).enough
    assert not looks.budget_looks(34, 2, looks.BISECT_ALPHA).enough
    assert looks.unfit(load(ENOUGH)) is None and looks.unfit(load(A)) is None
    assert looks.unfit(load(SHORT.replace("pairs: 8,", "pairs: 68,"))) is not None  # 17 looks
    assert looks.unfit(load(SHORT.replace("pairs: 8,", "pairs: 72,"))) is None  # 18 looks


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
    assert fake_repo.verify("--exploratory") == 1  # the registered A1 is gone from its file: reported missing
    assert fake_repo.result("A1")["registration"] == "missing"
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
    assert registry.refusal(changed, True, "hint") == registry.reused("hint")
    assert "not as registered" in registry.refusal(changed, False, "hint")
    assert registry.refusal(registry.Status("unregistered", None, []), True, "hint") is None
    assert registry.refusal(registry.Status("registered", "sha256:x", []), False, "hint") is None
# ---- registry.lock: what it refuses, and what it records -------------------------------------

import json  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

import pytest  # noqa: E402

from harness.errors import HarnessError  # noqa: E402
from pathlib import Path  # noqa: E402

DIGEST = "sha256:" + "ab" * 32


def line(cid="A1", file="regressions/s.yaml", digest=DIGEST, event="register", reason='""'):
    return "\t".join([cid, file, digest, "2026-01-01T00:00:00Z", event, reason])


def test_parse_fields_and_line_numbers():
    text = registry.HEADER + line() + "\n" + line(event="amend", reason='"why é"') + "\n"
    (a, b) = registry.parse(text)
    assert a == registry.Entry("A1", "regressions/s.yaml", DIGEST, "2026-01-01T00:00:00Z", "register", "", 3)
    assert b.line == 4
    assert (b.event, b.reason) == ("amend", "why é")


@pytest.mark.parametrize("text,message", [
    # issue 35: a registration turned into a comment, or hidden behind CR-only line ends
    (registry.HEADER + "#" + line() + "\n", r"^registry.lock:3: a comment line outside the header"),
    (registry.HEADER + line() + "\n# note\n", r"^registry.lock:4: a comment line outside the header"),
    ("# other header\n" + line() + "\n", r"^registry.lock:1: a comment line outside the header"),
    (registry.HEADER.replace("\n", "\r") + line() + "\r", r"^registry.lock:1: a carriage return \(CR\)"),
    (registry.HEADER + line() + "\r\n", r"^registry.lock:3: a carriage return \(CR\)"),
    (registry.HEADER + "\n" + line() + "\n", r"^registry.lock:3: an empty line"),
    (registry.HEADER + line() + "\n   \n", r"^registry.lock:4: an empty line"),
    # issue 35 (low): a byte-order mark was reported as a line with 1 field
    ("\ufeff" + registry.HEADER + line() + "\n", r"^registry.lock:1: starts with a UTF-8 byte-order mark"),
    # issue 35 (low): a torn last line (a kill during a write) is named as such
    (registry.HEADER + line() + "\n" + line()[:40], r"^registry.lock:4: the last line has no line end: a "
                                                     r"`register` was cut off"),
])
def test_parse_refuses_what_the_tool_never_writes(text, message):
    with pytest.raises(HarnessError, match=message):
        registry.parse(text)


@pytest.mark.parametrize("reason", ["why", "'why'", '"open', "", "{"])
def test_parse_refuses_a_reason_that_is_not_json(reason):
    with pytest.raises(HarnessError, match=r"^registry.lock:4: reason is not a JSON string$"):
        registry.parse(registry.HEADER + line() + "\n" + line(reason=reason) + "\n")


@pytest.mark.parametrize("fields", [5, 7])
def test_parse_refuses_a_wrong_number_of_fields(fields):
    parts = line().split("\t")
    bad = "\t".join((parts + ["extra"])[:fields])
    with pytest.raises(HarnessError, match=rf"^registry.lock:2: expected 6 tab-separated fields, found {fields}$"):
        registry.parse(line() + "\n" + bad + "\n")


def test_load_refuses_a_registry_that_is_not_utf8(tmp_path):
    p = tmp_path / "registry.lock"
    p.write_bytes((registry.HEADER + line(reason='"caf')).encode() + b"\xe9\"\n")
    with pytest.raises(HarnessError, match=r"^registry.lock: not UTF-8 text \(byte \d+: invalid continuation"):
        registry.load(p)
    assert registry.load(tmp_path / "absent.lock") == []


def _crit(cid="A1", file="regressions/s.yaml", digest=DIGEST):
    c = load(A)
    return type(c)(**{**vars(c), "id": cid, "file": file, "digest": digest})


@pytest.mark.parametrize("cid,file", [("A\t1", "regressions/s.yaml"), ("A1", "regressions/s\n.yaml"),
                                      ("A1\t", "x"), ("A\n1", "regressions/s.yaml"),
                                      ("A1", "regressions/s\t.yaml")])
def test_append_refuses_a_tab_or_newline_in_id_or_file(tmp_path, cid, file):
    p = tmp_path / "registry.lock"
    with pytest.raises(HarnessError, match="tab or newline in id/file"):
        registry.append(p, [(_crit(), "register", ""), (_crit(cid, file), "register", "")])
    assert not p.exists(), "nothing is written when one line is refused"


def test_append_writes_header_once_and_exact_lines(tmp_path):
    p = tmp_path / "new" / "folders" / "registry.lock"
    t = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    registry.append(p, [(_crit(), "register", "")], now=t)
    registry.append(p, [(_crit("B2"), "amend", "naïve \"quote\"")], now=t)
    text = p.read_text(encoding="utf-8")
    assert text == (registry.HEADER
                    + "A1\tregressions/s.yaml\t" + DIGEST + "\t2026-03-04T05:06:07Z\tregister\t\"\"\n"
                    + "B2\tregressions/s.yaml\t" + DIGEST + "\t2026-03-04T05:06:07Z\tamend\t"
                    + json.dumps("naïve \"quote\"", ensure_ascii=False) + "\n")
    assert "naïve" in text
    (_, b) = registry.load(p)
    assert b.reason == "naïve \"quote\""


def test_append_writes_depends_lines_as_utf8(tmp_path):
    """A depends line holds the canonical JSON of the dependency digests as a JSON string, its
    non-ASCII characters written as they are (like a reason), and reads back to the same mapping."""
    p = tmp_path / "registry.lock"
    t = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    c, deps = _crit(), {"build:défaut": "sha256:b1"}
    registry.append(p, [(c, "register", "")], now=t, deps=[(c, deps)])
    last = p.read_text(encoding="utf-8").splitlines()[-1]
    assert last == ("A1\tregressions/s.yaml\t" + registry.dependency_digest(deps) + "\t2026-03-04T05:06:07Z\tdepends\t"
                    + '"{\\"build:défaut\\":\\"sha256:b1\\"}"')
    assert registry.depends_map(registry.load(p)[-1]) == deps


def test_append_stamps_the_current_utc_time(tmp_path, monkeypatch):
    """UTC, also where local time is not: the time zone is set far from UTC for the test."""
    import time

    p = tmp_path / "registry.lock"
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14
    time.tzset()
    try:
        before = datetime.now(timezone.utc).replace(microsecond=0)
        registry.append(p, [(_crit(), "register", "")])
        after = datetime.now(timezone.utc)
    finally:
        monkeypatch.undo()
        time.tzset()
    (e,) = registry.load(p)
    stamp = datetime.strptime(e.time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= stamp <= after


F = "regressions/s.yaml"  # the file of _crit()


def test_status_current_digest_and_amendments():
    t1, t2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
    e1 = registry.Entry("A1", F, "sha256:1", t1, "register", "", 1)
    e2 = registry.Entry("B2", F, "sha256:2", t1, "register", "", 2)
    e3 = registry.Entry("A1", F, "sha256:3", t2, "amend", "longer", 3)
    entries = [e1, e2, e3]
    assert registry.current(entries) == {"A1": e3, "B2": e2}
    st = registry.status(entries, _crit(digest="sha256:3"))
    assert (st.state, st.registered_digest, st.amendments, st.ok, st.reason()) == \
        ("registered", "sha256:3", [e3], True, "registered")
    st = registry.status(entries, _crit(digest="sha256:1"))
    assert (st.state, st.registered_digest, st.ok) == ("changed", "sha256:3", False)
    assert st.reason() == "not as registered: digest differs from the registered sha256:3"
    st = registry.status(entries, _crit("C3"))
    assert (st.state, st.registered_digest, st.amendments, st.ok) == ("unregistered", None, [], False)
    assert st.reason() == "not pre-registered (no entry in the registry)"
    assert registry.status(entries, _crit("B2", digest="sha256:2")).amendments == []


def test_refusal():
    ok = registry.Status("registered", "d", [])
    changed = registry.Status("changed", "sha256:9", [])
    assert registry.refusal(ok, False, "hint") is None and registry.refusal(ok, True, "hint") is None
    assert registry.refusal(changed, True, "hint") == registry.reused("hint")
    assert registry.refusal(registry.Status("unregistered", None, []), True, "hint") is None
    assert registry.refusal(changed, False, "run register") == \
        "not as registered: digest differs from the registered sha256:9 (run register)"


def test_plan_sorts_each_criterion():
    T0 = "2026-01-01T00:00:00Z"
    entries = [registry.Entry("A1", F, "sha256:1", T0, "register", "", 1),
               registry.Entry("B2", F, "sha256:2", T0, "register", "", 2),
               registry.Entry("C3", F, "sha256:3", T0, "register", "", 3)]
    a, b, c, d = _crit("A1", digest="sha256:1"), _crit("B2", digest="sha256:x"), \
        _crit("C3", digest="sha256:y"), _crit("D4")
    p = registry.plan(entries, [a, b, c, d], ["B2"], "why")
    assert (p.new, p.unchanged, p.amended) == ([d], [a], [b])
    assert p.refused == [(c, f"changed since registration ({T0}); re-registering needs --amend C3 --reason TEXT")]
    p = registry.plan(entries, [b], ["B2"], "")
    assert p.refused == [(b, "an amendment needs --reason TEXT")] and p.amended == []
    p = registry.plan(entries, [b], ["B2"], None)
    assert p.refused == [(b, "an amendment needs --reason TEXT")]


def test_registry_is_utf8_under_an_ascii_locale(tmp_path):
    """The registry is read and written as UTF-8 whatever the locale: a non-ASCII reason round-trips
    in a Python whose locale encoding is ASCII (C locale, no coercion, no UTF-8 mode)."""
    import os
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from harness.contract import registry, schema\n"
            f"(c,) = schema.load_text({A!r}, 'regressions/s.yaml', {BUILDS!r}, {DUMPS!r})\n"
            "p = Path(sys.argv[1]); registry.append(p, [(c, 'amend', 'na\\u00efve')])\n"
            "print(ascii(registry.load(p)[0].reason))")
    # the same calls in this process first (so that the mutation run sees this test reach them)
    registry.append(tmp_path / "here.lock", [(load(A), "amend", "naïve")])
    assert registry.load(tmp_path / "here.lock")[0].reason == "naïve"
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "registry.lock")], env=env, capture_output=True,
                       text=True, cwd=Path(__file__).resolve().parent.parent, timeout=60)
    assert r.returncode == 0, r.stderr[-1500:]
    assert r.stdout.strip() == "'na\\xefve'"
    assert "naïve" in (tmp_path / "registry.lock").read_text(encoding="utf-8")


def test_status_names_the_dependencies_that_changed(tmp_path):
    p = tmp_path / "registry.lock"
    c = load(A)
    registry.append(p, [(c, "register", "")], deps=[(c, {"model": "sha256:m1", "build:default": "sha256:b1"})])
    entries = registry.load(p)
    assert registry.status(entries, c, {"model": "sha256:m1", "build:default": "sha256:b1"}).ok
    st = registry.status(entries, c, {"model": "sha256:m2", "build:default": "sha256:b1", "build:gpu": "x"})
    assert st.state == "changed"
    assert st.why == "what it depends on changed since registration: build:gpu, model (registry.lock:4)"


def _entries(*rows):
    return [registry.Entry(cid, F, digest, time, event, reason, n) for n, (cid, digest, time, event, reason)
            in enumerate(rows, 1)]


T1, T2, T3 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"


def test_status_fields_of_suspect_and_changed():
    c = _crit("A1", digest="sha256:1")
    twice = _entries(("A1", "sha256:1", T1, "register", ""), ("A1", "sha256:1", T2, "register", ""))
    st = registry.status(twice, c)
    assert (st.state, st.registered_digest, st.entry) == ("suspect", "sha256:1", twice[1])
    assert st.why == ("registry.lock:2: a second `register` for A1 (first at line 1); a change after "
                      "registration is an `amend` with a reason")
    assert registry.status(twice, c, suspect={}).state == "registered", "the caller's problems() are used"
    orphan = _entries(("A1", "sha256:1", T1, "amend", "why"))
    assert registry.status(orphan, _crit("B2")).registered_digest is None
    st = registry.status(orphan, c)
    assert (st.state, st.registered_digest) == ("suspect", "sha256:1")
    one = _entries(("A1", "sha256:1", T1, "register", ""))
    st = registry.status(one, _crit("A1", digest="sha256:2"))
    assert (st.state, st.why, st.entry, st.registered_digest) == \
        ("changed", "digest differs from the registered sha256:1", one[0], "sha256:1")


def test_status_fields_when_dependencies_changed():
    c = _crit("A1", digest="sha256:1")
    dep = registry.dependency_digest({"model": "m1"})
    rows = _entries(("A1", "sha256:1", T1, "register", ""), ("A1", dep, T1, "depends", '{"model":"m1"}'))
    st = registry.status(rows, c, {"model": "m2"})
    assert (st.state, st.registered_digest, st.entry) == ("changed", "sha256:1", rows[0])
    assert st.why == "what it depends on changed since registration: model (registry.lock:2)"
    bad = _entries(("A1", "sha256:1", T1, "register", ""), ("A1", "sha256:x", T1, "depends", '"not a mapping"'))
    assert registry.status(bad, c, {"model": "m2"}, suspect={}).why == \
        "what it depends on changed since registration: model (registry.lock:2)"
    empty = _entries(("A1", "sha256:1", T1, "register", ""), ("A1", "sha256:x", T1, "depends", '"{}"'))
    assert registry.status(empty, c, {}, suspect={}).why == \
        "what it depends on changed since registration: the recorded digests (registry.lock:2)"
    for rows in (bad, empty):  # a depends line that is not the tool's: its digest is not its mapping's
        assert registry.problems(rows)["A1"].startswith("registry.lock:2: the depends line's digest is not")


def test_problems_messages():
    rows = _entries(("A1", "d", T2, "register", ""), ("B2", "d", T1, "register", ""),
                    ("C3", "d", T3, "frobnicate", ""))
    p = registry.problems(rows)
    assert p["B2"] == ("registry.lock:2: time 2026-01-01T00:00:00Z is earlier than line 1's (2026-01-02T00:00:00Z); "
                       "lines are only ever appended, so this one was back-dated or moved")
    assert p["C3"] == "registry.lock:3: unknown event 'frobnicate'; events: register, amend, depends, withdraw"


def test_a_future_dated_line_blocks_no_other_register(tmp_path):
    """Issue 35 (low): a line dated later than now made every later `register` fail. Now that line
    is a problem of its own id, and the others register and stay trusted."""
    p = tmp_path / "registry.lock"
    registry.append(p, [(_crit(), "register", "")], now=datetime(2026, 5, 1, tzinfo=timezone.utc))
    registry.append(p, [(_crit("B2"), "register", "")], now=datetime(2026, 4, 1, tzinfo=timezone.utc))
    registry.append(p, [(_crit("C3"), "register", "")], now=datetime(2026, 4, 2, tzinfo=timezone.utc))
    got = registry.problems(registry.load(p), now="2026-04-03T00:00:00Z")
    assert got == {"A1": "registry.lock:3: dated 2026-05-01T00:00:00Z, later than now (2026-04-03T00:00:00Z): "
                         "written with a wrong clock, or by hand"}


def test_plan_records_missing_dependencies():
    rows = _entries(("A1", "sha256:1", T1, "register", ""))
    a, n = _crit("A1", digest="sha256:1"), _crit("N1")
    p = registry.plan(rows, [a, n], [], None, {"A1": {"model": "m"}, "N1": {"model": "m"}})
    assert (p.unchanged, p.new, p.depends) == ([a], [n], [a, n])
    p = registry.plan(rows, [a], [], None, {})
    assert p.depends == []


def test_problems_a_malformed_time_is_not_the_last_line():
    """A line whose time is malformed is not the reference for the next line's order."""
    rows = _entries(("A1", "d", T1, "register", ""), ("B2", "d", "zzz", "register", ""),
                    ("C3", "d", T2, "register", ""))
    assert registry.problems(rows) == {
        "B2": "registry.lock:2: time 'zzz' is not in the format YYYY-MM-DDTHH:MM:SSZ"}


def test_status_of_an_id_with_only_a_depends_line():
    rows = _entries(("A1", "sha256:dep", T1, "depends", '"{}"'))
    st = registry.status(rows, _crit("A1", digest="sha256:1"))
    assert (st.state, st.registered_digest, st.entry) == ("suspect", None, None)
    assert st.why == "registry.lock:1: `depends` for A1, which is not registered before it"


def test_a_second_depends_line_without_its_register_names_the_way_out():
    dep1, dep2 = registry.dependency_digest({"model": "m1"}), registry.dependency_digest({"model": "m2"})
    rows = _entries(("A1", "sha256:1", T1, "register", ""), ("A1", dep1, T1, "depends", '{"model":"m1"}'),
                    ("A1", dep2, T2, "depends", '{"model":"m2"}'))
    assert registry.problems(rows)["A1"] == (
        "registry.lock:3: re-records A1's dependencies (recorded at line 2) without a register or amend written "
        "with it; a changed dependency is accepted only by `register --amend ID --reason TEXT`")


def test_id_line_finds_an_id_or_a_mapping_key(tmp_path):
    (tmp_path / "m.yaml").write_text("criteria:\n  - id: A1\n    title: t\ncross:\n  X9:  # a cross criterion\n")
    assert registry.id_line(tmp_path, "m.yaml", "A1") == 2
    assert registry.id_line(tmp_path, "m.yaml", "X9") == 5
    assert registry.id_line(tmp_path, "m.yaml", "B2") is None


def test_an_id_registered_to_another_file_names_its_line(tmp_path):
    (tmp_path / "regressions").mkdir()
    (tmp_path / "regressions" / "other.yaml").write_text("criteria:\n  - id: A1\n")
    rows = [registry.Entry("A1", "regressions/other.yaml", "sha256:1", T1, "register", "", 1)]
    st = registry.status(rows, _crit("A1", file="regressions/s.yaml", digest="sha256:1"), root=tmp_path)
    assert st.state == "elsewhere"
    assert st.why.startswith("id A1 belongs to regressions/other.yaml:2 (registry.lock:1); ids are unique")
    assert st.entry == rows[0]  # the line in force is the other file's register, which reports name


def test_a_line_after_a_withdrawal_breaks_the_rule_and_a_second_withdrawal_is_refused():
    rows = _entries(("A1", "sha256:1", T1, "register", ""), ("A1", "sha256:1", T2, "withdraw", "gone"),
                    ("A1", "sha256:2", T3, "amend", "back"))
    assert registry.problems(rows)["A1"] == ("registry.lock:3: `amend` for A1 after its withdrawal (line 2); "
                                             "ids are never reused")
    with pytest.raises(HarnessError) as e:
        registry.withdrawal(rows[:2], ["A1"], "again")
    assert "--withdraw A1: already withdrawn at registry.lock:2" in str(e.value)


def test_withdrawal_names_each_id_once():
    rows = _entries(("A1", "sha256:1", T1, "register", ""), ("B2", "sha256:2", T1, "register", ""))
    got = registry.withdrawal(rows, ["A1", "B2", "A1"], "gone")
    assert [(e.id, event, why) for e, event, why in got] == [("A1", "withdraw", "gone"), ("B2", "withdraw", "gone")]


def test_the_printed_amend_hint_for_several_criteria_runs_as_printed(fake_repo, capsys):
    # the refusal prints one `register FILE --amend ID ID --reason ...` line: it must parse and
    # amend every refused id in one go (it once named several ids that --amend took one at a time)
    two = A + A.replace("id: A1", "id: A2").replace("criteria:\n", "")
    p = _repo(fake_repo, two)
    root = ["--root", str(fake_repo.root)]
    assert main(root + ["register", str(p)]) == 0
    p.write_text(two.replace('"8"', '"16"'))
    capsys.readouterr()
    assert main(root + ["register", str(p)]) == 2
    hint = capsys.readouterr().err.split("if the changes are intended: ")[1].strip()
    argv = shlex.split(hint)
    argv = argv[argv.index("register"):]
    argv[argv.index("--reason") + 1] = "longer sequence"
    assert "--amend" in argv and {"A1", "A2"} <= set(argv)
    assert main(root + argv) == 0
    assert sorted(e.id for e in registry.load(fake_repo.registry) if e.event == "amend") == ["A1", "A2"]
