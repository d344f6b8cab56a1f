"""The trust boundary of criteria files: paths built from {work} stay inside it (checked when the
file is loaded and again after substitution), and `wrapper` / `place` from a criteria file outside
the repository need an explicit opt-in."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.cli import main
from harness.errors import SchemaErrors
from harness.contract import criteria as C

RUN = """\
criteria:
  - id: T1
    title: t
    kind: run
    runs:
      - args: [run, --model, "{model}", --dump, %s]
"""


@pytest.mark.parametrize("arg", ['"{work}/../../../x"', '"{work}/a/../../x"', '"--out={work}/../x"',
                                 '"{work}\\\\..\\\\x"'])
def test_climbing_out_of_work_is_refused_at_load(arg, fake_repo, capsys):
    p = fake_repo.criteria(RUN % arg)
    with pytest.raises(SchemaErrors, match=r"^regressions/suite.yaml:6: criteria\[0\] \(T1\)\.runs\[0\]\.args\[4\]: "
                                           r"'.*' climbs out of \{work\}: a path built from \{work\} must stay "
                                           r"inside it$"):
        fake_repo.verify("--exploratory", "--no-build")
    assert main(["--root", str(fake_repo.root), "verify", "--exploratory", "--no-build", str(p)]) == 2
    assert "climbs out of {work}" in capsys.readouterr().err


def test_env_value_climbing_out_is_refused(fake_repo):
    fake_repo.criteria(RUN.replace("--dump, %s]", "--json]\n        env: {OUT: \"{work}/../../y\"}"))
    with pytest.raises(SchemaErrors, match=r"runs\[0\]\.env\.OUT: '\{work\}/\.\./\.\./y' climbs out of \{work\}"):
        fake_repo.verify("--exploratory", "--no-build")


def test_a_case_value_cannot_smuggle_the_climb(fake_repo):
    """Statically `{work}/{sub}` is fine; after substitution it must still be inside {work}."""
    fake_repo.criteria("""\
        criteria:
          - id: T2
            title: t
            kind: run
            cases: [{sub: ../../../escaped}]
            runs:
              - args: [run, --model, "{model}", --dump, "{work}/{sub}"]
        """)
    assert fake_repo.verify("--exploratory", "--no-build") == 1
    r = fake_repo.result("T2")
    assert r["verdict"] == "FAIL" and "outside its work folder" in r["reason"], r["reason"]
    assert "a path built from {work} must stay inside it" in r["reason"]
    assert not any(fake_repo.root.rglob("escaped")) and not (fake_repo.root.parent / "escaped").exists()


def test_paths_inside_work_still_run(fake_repo):
    fake_repo.criteria(RUN % '"{work}/sub/../dumps"')
    assert fake_repo.verify("--exploratory", "--no-build") == 0


def test_segments_and_static_check():
    assert C.work_segments("a:{work}/b:{work}/../..") == ["{work}/b", "{work}/../.."]
    assert [C.climbs_out_of_work(s) for s in C.work_segments("a:{work}/b:{work}/../..")] == [False, True]
    assert not C.climbs_out_of_work("{work}/..x") and not C.climbs_out_of_work("{work}")
    assert C.outside_work("{work}/{s}", {"work": "/tmp/w", "s": "../../etc"}) == "/etc"
    assert C.outside_work("{work}/{s}", {"work": "/tmp/w", "s": "x/y"}) is None


WRAPPED = f"""\
criteria:
  - id: W1
    title: t
    kind: run
    runs:
      - args: [selftest]
        wrapper: [{sys.executable}]
"""
PLACED = """\
criteria:
  - id: W2
    title: t
    kind: run
    runs:
      - args: [selftest]
        layout: engine_only
        place: {extra.txt: "{root}/configs/engine.yaml"}
"""


@pytest.mark.parametrize("text, cid", [(WRAPPED, "W1"), (PLACED, "W2")])
def test_wrapper_and_place_outside_the_repository_need_opt_in(text, cid, fake_repo, tmp_path, capsys,
                                                               monkeypatch):
    outside = tmp_path / "elsewhere" / "crit.yaml"
    outside.parent.mkdir()
    outside.write_text(textwrap.dedent(text))
    base = ["--root", str(fake_repo.root), "verify", "--exploratory", "--no-build", str(outside)]
    monkeypatch.delenv("KITE_TRUST_OUTSIDE_CRITERIA", raising=False)
    assert main(base) == 2
    err = capsys.readouterr().err
    assert f"{outside}:2: {cid}: `wrapper` runs a command and `place` copies files, and this criteria file is " \
           f"outside the repository" in err and "--trust-outside-criteria" in err
    assert main(base + ["--trust-outside-criteria"]) == 0
    monkeypatch.setenv("KITE_TRUST_OUTSIDE_CRITERIA", "1")
    assert main(base) == 0
    capsys.readouterr()


def test_inside_the_repository_no_opt_in_needed(fake_repo, monkeypatch):
    monkeypatch.delenv("KITE_TRUST_OUTSIDE_CRITERIA", raising=False)
    fake_repo.criteria(WRAPPED)
    assert fake_repo.verify("--exploratory", "--no-build") == 0
    assert fake_repo.result("W1")["verdict"] == "PASS"


def test_outside_file_without_wrapper_or_place_runs(fake_repo, tmp_path, monkeypatch):
    monkeypatch.delenv("KITE_TRUST_OUTSIDE_CRITERIA", raising=False)
    outside = tmp_path / "plain.yaml"
    outside.write_text(RUN.replace("--dump, %s]", "--json]"))
    assert main(["--root", str(fake_repo.root), "verify", "--exploratory", "--no-build", str(outside)]) == 0
