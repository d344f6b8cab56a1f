"""`harness merge`: two partial reports (one matrix entry each, as CI runners make them) become
one report whose counts add up, whose cross-entry criteria are evaluated over both, and whose
JUnit parses."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import HarnessError
from harness.matrix.cross import merge_reports
from harness.report import merge as MG
from harness.report.document import Report, Result

ROOT = Path(__file__).resolve().parent.parent

MATRIX = """\
version: 1
defaults:
  dump: {model: tiny, prompt: [1, 2], steps: 1, variants: {cpu: {}}}
entries:
  a-gcc: {toolchain: gcc, runner: native, checks: [dump], requires: [gcc]}
  b-mingw: {toolchain: mingw, runner: wine, checks: [dump], requires: [mingw, wine]}
  c-sm80:
    toolchain: gcc
    engine: false
    module: {archs: [80-real], expect_elf: [sm_80], expect_ptx: []}
    runner: native
    checks: [embedded-code]
    requires: [nvcc]
cross:
  X1: {title: same bytes, entries: [a-gcc:cpu, b-mingw:cpu]}
"""


def R(rid: str, title: str, kind: str, digest: str, verdict: str, reason: str, **kw) -> Result:
    return Result(id=rid, title=title, kind=kind, file="configs/matrix.yaml", digest=digest, verdict=verdict,
                  reason=reason, **kw)


def floats(*xs: float) -> bytes:
    return struct.pack(f"<{len(xs)}f", *xs)


def make_report(d: Path, entry: str, checks: list[tuple[str, str]], dumps: dict[str, bytes] | None,
                verdict: str = "PASS", seconds: float = 5.0, extra: list[Result] | None = None) -> Path:
    rep = Report(d)
    rep.doc["git"] = {"commit": "abc123", "dirty": False}
    rep.doc["system"] = {"os": "Linux 6.1", "cpu": "test cpu", "cores": 2}
    files = {}
    if dumps is not None:
        dd = d / "dumps" / entry / "cpu"
        dd.mkdir(parents=True)
        for name, data in dumps.items():
            (dd / f"{name}.f32").write_bytes(data)
            files[name] = {"file": f"{name}.f32", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    rep.doc["matrix"] = {"file": "configs/matrix.yaml", "selected": [entry], "wall_s": seconds, "entries": [{
        "entry": entry, "verdict": verdict, "reason": "r", "seconds": seconds, "build_seconds": 1.0,
        "checks": [], "builds": {},
        "dumps": ({"cpu": {"files": files, "dir": f"dumps/{entry}/cpu"}} if dumps is not None else {})}]}
    rep.add(R(entry, f"matrix entry {entry}", "matrix-entry", "sha256:e", verdict, "r", duration_s=seconds))
    for name, v in checks:
        rep.add(R(f"{entry}/{name}", f"{entry}: {name}", "matrix", "sha256:e", v, f"{name} {v.lower()}",
                       duration_s=1.0))
    for r in extra or []:
        rep.add(r)
    rep.write(final=True)
    return d


@pytest.fixture
def matrix_file(tmp_path: Path) -> Path:
    p = tmp_path / "matrix.yaml"
    p.write_text(MATRIX)
    return p


def test_two_partial_reports_merge(tmp_path, matrix_file):
    same = {"h_out": floats(1.0, 2.0), "logits": floats(0.5, -0.25, 3.0)}
    a = make_report(tmp_path / "a", "a-gcc", [("info", "PASS"), ("dump", "PASS")], same, seconds=10.0)
    b = make_report(tmp_path / "b", "b-mingw", [("info", "PASS"), ("dump", "PASS")], dict(same), seconds=30.0)
    out = tmp_path / "merged"
    rc, rep = merge_reports([a, b], out, root=ROOT, matrix_path=matrix_file)
    assert rc == 0
    doc = json.loads((out / "report.json").read_text())
    ids = [r["id"] for r in doc["results"]]
    assert ids[:6] == ["a-gcc", "a-gcc/info", "a-gcc/dump", "b-mingw", "b-mingw/info", "b-mingw/dump"]
    x1 = next(r for r in doc["results"] if r["id"] == "X1")
    assert x1["verdict"] == "PASS", x1["reason"]
    assert all(c["how"] == "memcmp" and c["identical"] for c in x1["details"]["comparisons"])
    assert doc["summary"] == {"total": 7, "passed": 7, "failed": 0, "skipped": 0, "exploratory": 0}
    assert [m["source"] for m in doc["merged_from"]] == ["a-gcc", "b-mingw"]
    assert doc["matrix"]["selected"] == ["a-gcc", "b-mingw"]
    assert doc["matrix"]["wall_s"] == 40.0 and doc["matrix"]["wall_s_max_source"] == 30.0
    assert (out / "dumps" / "b-mingw" / "cpu" / "logits.f32").read_bytes() == same["logits"]
    # JUnit parses and counts agree
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("7", "0", "0")
    assert len(suite.findall("testcase")) == 7
    md = (out / "report.md").read_text()
    assert "**7 passed, 0 failed, 0 skipped** of 7" in md


def test_merge_finds_a_one_ulp_difference(tmp_path, matrix_file):
    a = make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], {"h_out": floats(1.0), "logits": floats(2.0)})
    b_logits = bytearray(floats(2.0))
    b_logits[0] ^= 1  # one ULP
    b = make_report(tmp_path / "b", "b-mingw", [("dump", "PASS")], {"h_out": floats(1.0), "logits": bytes(b_logits)})
    rc, rep = merge_reports([a, b], tmp_path / "m", root=ROOT, matrix_path=matrix_file)
    assert rc == 1
    x1 = rep.result_for("X1")
    assert x1["verdict"] == "FAIL"
    assert "a-gcc:cpu vs b-mingw:cpu logits" in x1["reason"] and "max ULP 1" in x1["reason"]
    junit = ET.parse(tmp_path / "m" / "junit.xml").getroot()
    failed = [tc.get("name") for tc in junit.findall("testcase") if tc.find("failure") is not None]
    assert failed == ["X1: same bytes"]


def test_merge_uses_digests_when_files_are_missing(tmp_path, matrix_file):
    same = {"h_out": floats(1.0), "logits": floats(2.0)}
    a = make_report(tmp_path / "a", "a-gcc", [], same)
    b = make_report(tmp_path / "b", "b-mingw", [], same)
    import shutil

    shutil.rmtree(b / "dumps")  # e.g. the CI artifact kept report.json only
    rc, rep = merge_reports([a, b], tmp_path / "m", root=ROOT, matrix_path=matrix_file)
    x1 = rep.result_for("X1")
    assert x1["verdict"] == "PASS"
    assert {c["how"] for c in x1["details"]["comparisons"]} == {"sha256"}


def test_skipped_entry_makes_cross_skip(tmp_path, matrix_file):
    a = make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], {"h_out": floats(1.0), "logits": floats(2.0)})
    b = make_report(tmp_path / "b", "b-mingw", [("dump", "SKIP")], None, verdict="SKIP")
    rc, rep = merge_reports([a, b], tmp_path / "m", root=ROOT, matrix_path=matrix_file)
    assert rc == 0
    x1 = rep.result_for("X1")
    assert x1["verdict"] == "SKIP" and "only 1 of 2" in x1["reason"]
    s = rep.summarize()
    assert (s["passed"], s["skipped"]) == (2, 3)


def test_conflicting_ids_are_kept_per_source(tmp_path, matrix_file):
    e1 = R("E1", "exports", "artifact", "sha256:1", "PASS", "ok")
    e1b = R("E1", "exports", "artifact", "sha256:1", "FAIL", "extra export foo")
    a = make_report(tmp_path / "a", "a-gcc", [], None, extra=[e1])
    b = make_report(tmp_path / "b", "b-mingw", [], None, extra=[e1b])
    rc, rep = merge_reports([a, b], tmp_path / "m", root=ROOT, matrix_path=matrix_file)
    ids = [r["id"] for r in rep.results]
    assert "E1@a-gcc" in ids and "E1@b-mingw" in ids and "E1" not in ids
    assert rc == 1


def test_identical_results_are_not_duplicated_and_skip_yields_to_outcome(tmp_path, matrix_file):
    e2 = R("E2", "found", "run", "sha256:2", "PASS", "ok")
    e5_skip = R("E5", "force cpu", "equivalence", "sha256:5", "SKIP", "no GPU")
    e5_pass = R("E5", "force cpu", "equivalence", "sha256:5", "PASS", "identical")
    a = make_report(tmp_path / "a", "a-gcc", [], None, extra=[e2, e5_skip])
    b = make_report(tmp_path / "b", "b-mingw", [], None, extra=[e2, e5_pass])
    rc, rep = merge_reports([a, b], tmp_path / "m", root=ROOT, matrix_path=matrix_file)
    e2s = [r for r in rep.results if r["id"].startswith("E2")]
    assert len(e2s) == 1 and e2s[0]["source"] == "a-gcc,b-mingw"
    assert rep.result_for("E5")["verdict"] == "PASS"


def test_bad_inputs(tmp_path):
    with pytest.raises(HarnessError, match="no report.json"):
        MG.merge([tmp_path / "nothing"], tmp_path / "m")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "report.json").write_text("{not json")
    with pytest.raises(HarnessError, match="not a readable report"):
        MG.merge([tmp_path / "x"], tmp_path / "m")
    (tmp_path / "x" / "report.json").write_text(json.dumps({"schema": "other/1", "results": []}))
    with pytest.raises(HarnessError, match="not a kite report"):
        MG.merge([tmp_path / "x"], tmp_path / "m")
    with pytest.raises(HarnessError, match="at least one"):
        MG.merge([], tmp_path / "m")


def test_a_report_named_twice_is_refused(tmp_path, matrix_file, capsys):
    """Before: `merge reports/X reports/latest` after a partial run (which leaves reports/latest at
    X) merged X with itself, exit 0, and the partial run's report was missing without a word."""
    import shutil
    a = make_report(tmp_path / "a", "a-gcc", [("info", "PASS")], None)
    shutil.copytree(a, tmp_path / "copy")
    (tmp_path / "latest").symlink_to(a)
    for second, says in ((tmp_path / "latest", "the same folder as"), (tmp_path / "copy", "the same run (a copy?) as"),
                         (a / "report.json", "the same folder as")):
        assert main(["merge", str(a), str(second), "-o", str(tmp_path / "m"), "--matrix", str(matrix_file)]) == 2
        assert f"merge: {second} is {says} {a}: name each report once" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_cli_exit_codes(tmp_path, matrix_file, capsys):
    a = make_report(tmp_path / "a", "a-gcc", [("info", "PASS")], None)
    assert main(["merge", str(a), "-o", str(tmp_path / "m"), "--matrix", str(matrix_file), "--format", "junit"]) == 0
    assert capsys.readouterr().out.startswith('<?xml version="1.0"')
    assert main(["merge", str(tmp_path / "missing"), "-o", str(tmp_path / "m2")]) == 2
    assert "no report.json" in capsys.readouterr().err


def _edit_report(d: Path, change) -> None:
    """Rewrite d/report.json after change(doc) has edited it in place (a hand-edited report)."""
    doc = json.loads((d / "report.json").read_text())
    change(doc)
    (d / "report.json").write_text(json.dumps(doc))


def _first_dumps(doc: dict) -> dict:
    return doc["matrix"]["entries"][0]["dumps"]


@pytest.mark.parametrize("change, field", [
    (lambda doc: doc.update(git=["x"]), "`git` is not an object"),
    (lambda doc: doc.update(system=["x"]), "`system` is not an object"),
    (lambda doc: doc.update(builds=["x"]), "`builds` is not an object"),
    (lambda doc: doc.update(criteria_files=["x"]), "`criteria_files` is not an object"),
    (lambda doc: doc.update(started=5), "`started`"),
    (lambda doc: doc["git"].update(commit=["x"]), "git.commit"),
    (lambda doc: doc["results"][0].update(verdict=["PASS"]), "results[0]: verdict"),
    (lambda doc: doc["results"][0].update(details=["x"]), "results[0]: details"),
    (lambda doc: doc["results"][0].pop("kind"), "results[0]: kind"),
    (lambda doc: doc.update(matrix=["x"]), "`matrix` is not an object"),
    (lambda doc: doc["matrix"].update(selected=[1]), "matrix.selected"),
    (lambda doc: doc["matrix"].update(entries={"a": 1}), "matrix.entries is not a list"),
    (lambda doc: doc["matrix"]["entries"][0].pop("entry"), "matrix.entries[0].entry: missing"),
    (lambda doc: doc["matrix"]["entries"][0].update(dumps=["cpu"]), "matrix.entries[0].dumps is not"),
    (lambda doc: _first_dumps(doc)["cpu"].update(dir=5), "matrix.entries[0].dumps.cpu.dir is not text"),
    (lambda doc: _first_dumps(doc)["cpu"].update(files=["x"]), "matrix.entries[0].dumps.cpu.files"),
    (lambda doc: _first_dumps(doc)["cpu"]["files"]["h_out"].update(sha256=1), "dumps.cpu.files"),
], ids=["git", "system", "builds", "criteria_files", "started", "git-commit", "verdict", "details", "kind",
        "matrix", "selected", "entries", "entry", "dumps", "dir", "files", "sha256"])
def test_damaged_report_is_a_clean_error(tmp_path, matrix_file, capsys, change, field):
    """A hand-edited or foreign report.json: exit 2 naming the file and the field, nothing written."""
    same = {"h_out": floats(1.0), "logits": floats(2.0)}
    a = make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], same)
    b = make_report(tmp_path / "b", "b-mingw", [("dump", "PASS")], same)
    _edit_report(b, change)
    out = tmp_path / "m"
    assert main(["merge", str(a), str(b), "-o", str(out), "--matrix", str(matrix_file)]) == 2
    err = capsys.readouterr().err
    assert f"{b / 'report.json'} is damaged" in err and field in err, err
    assert "internal error" not in err
    assert not out.exists()


def _tree(d: Path) -> set[Path]:
    return set(d.rglob("*"))


@pytest.mark.parametrize("entry, variant, dump_dir, field", [
    ("../../../../victim/dumps/zz", "cpu", "d1", "matrix.entries[1].entry: '../../../../victim/dumps/zz'"),
    ("b", "../../../../../victim/dumps/zz/cpu", "d1", "matrix.entries[1].dumps: '../../../../../victim"),
    ("b", "cpu", "{secret}", "matrix.entries[1].dumps.cpu.dir"),
    ("b", "cpu", "../secret", "matrix.entries[1].dumps.cpu.dir"),
    ("b", "cpu", "link", "matrix.entries[1].dumps.cpu.dir"),  # a link in the report folder, to outside
    ("b", "cpu", ".", "matrix.entries[1].dumps.cpu.dir"),  # the report folder itself
], ids=["entry-dotdot", "variant-dotdot", "dir-absolute", "dir-dotdot", "dir-link", "dir-self"])
def test_merge_never_leaves_the_output_folder(tmp_path, entry, variant, dump_dir, field):
    """Names in report.json become folders under OUT/dumps and dump dirs are copied: a name or dir
    leading elsewhere is refused (exit 2, the file and field named); nothing outside OUT changes."""
    src = tmp_path / "r"
    (src / "d1").mkdir(parents=True)
    (src / "d1" / "h_out.f32").write_bytes(floats(1.0))
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "h_out.f32").write_bytes(floats(9.0))
    (src / "link").symlink_to(tmp_path / "secret", target_is_directory=True)
    victim = tmp_path / "victim" / "dumps" / "zz" / "cpu" / "keep"
    victim.parent.mkdir(parents=True)
    victim.write_text("keep")
    entries = [{"entry": "a", "dumps": {"cpu": {"dir": "d1"}}},
               {"entry": entry, "dumps": {variant: {"dir": dump_dir.format(secret=tmp_path / "secret")}}}]
    (src / "report.json").write_text(json.dumps({"schema": "kite-report/1", "results": [],
                                                 "matrix": {"entries": entries}}))
    before = _tree(tmp_path)
    out = tmp_path / "x" / "mout" / "o"
    p = subprocess.run([sys.executable, "-m", "harness", "merge", str(src), "-o", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert f"{src / 'report.json'} is damaged: {field}" in p.stderr, p.stderr
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr
    assert victim.read_text() == "keep"
    assert {q for q in _tree(tmp_path) - before if not q.is_relative_to(out)} <= set(out.parents)


def test_merge_deletes_and_writes_only_inside_the_output_folder(tmp_path, matrix_file, capsys):
    """OUT/dumps already a link to another report's dumps: merge refuses rather than replace them;
    a link inside a dump folder is not followed into the copy."""
    a = make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], {"h_out": floats(1.0), "logits": floats(2.0)})
    (tmp_path / "secret.f32").write_bytes(floats(9.0))
    (a / "dumps" / "a-gcc" / "cpu" / "extra.f32").symlink_to(tmp_path / "secret.f32")
    victim = tmp_path / "victim" / "a-gcc" / "cpu" / "keep"
    victim.parent.mkdir(parents=True)
    victim.write_text("keep")
    out = tmp_path / "m"
    out.mkdir()
    (out / "dumps").symlink_to(tmp_path / "victim", target_is_directory=True)
    assert main(["merge", str(a), "-o", str(out), "--matrix", str(matrix_file)]) == 2
    err = capsys.readouterr().err
    assert "leads outside the output folder" in err and "internal error" not in err
    assert victim.read_text() == "keep" and sorted(victim.parent.iterdir()) == [victim]
    (out / "dumps").unlink()
    assert main(["merge", str(a), "-o", str(out), "--matrix", str(matrix_file)]) == 0
    copied = out / "dumps" / "a-gcc" / "cpu"
    assert (copied / "h_out.f32").exists() and not (copied / "extra.f32").exists()


# ---- a merged report is complete only when every part is (issue 44, N01, N21) -------------------

def verify_report(d: Path, results: list[tuple[str, str]], status: str = "complete", commit: str = "abc123",
                  file: str = "regressions/s.yaml", ids: list[str] | None = None, **doc) -> Path:
    """A verify report of criteria file `file` (holding ids), with results (id, verdict) and status."""
    rep = Report(d)
    rep.doc["git"] = {"commit": commit, "dirty": False}
    rep.doc["system"] = {"os": "Linux 6.1", "cpu": "test cpu", "cores": 2}
    rep.doc["criteria_files"] = {f"/runner/{d.name}/{file}": ids or [i for i, _ in results]}
    rep.doc.update(doc)
    for rid, v in results:
        rep.add(Result(id=rid, title=rid, kind="run", file=file, digest="sha256:d", verdict=v, reason="r"))
    rep.write(final=True, status=status)
    return d


@pytest.mark.parametrize("status, doc, shown", [
    ("interrupted", {"interrupted_by": "SIGTERM", "not_run": ["A2"]}, "interrupted, interrupted by SIGTERM, not run: A2"),
    ("running", {"not_run": ["A2"]}, "running, not run: A2"),
    ("partial", {"filter": "--only A1", "not_run": ["A2"]}, "partial, filter --only A1, not run: A2"),
], ids=["interrupted", "killed", "only"])
def test_a_partial_part_makes_a_partial_merge_that_fails(tmp_path, capsys, status, doc, shown):
    """e338b56: an interrupted, killed or `--only` verify merged into a report marked complete,
    exit 0, and A2, which never ran, disappeared."""
    a = verify_report(tmp_path / "a", [("A1", "PASS")], status, ids=["A1", "A2"], **doc)
    b = verify_report(tmp_path / "b", [("B1", "PASS")], file="regressions/t.yaml")
    out = tmp_path / "m"
    assert main(["--root", str(ROOT), "merge", str(a), str(b), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "PARTIAL, not a complete run" in err and f"part a: {shown}" in err
    merged = json.loads((out / "report.json").read_text())
    assert merged["status"] == "partial" and merged["not_run"] == ["A2"]
    assert merged["partial_sources"] == [f"a: {shown}"]


def test_complete_parts_missing_a_registered_id_make_a_partial_merge(tmp_path, capsys):
    """Each part complete, but the project's registered E2a (regressions/suite.yaml) has no result
    in any: the merge is partial and names it."""
    a = verify_report(tmp_path / "a", [("E1", "PASS")], file="regressions/suite.yaml")
    assert main(["--root", str(ROOT), "merge", str(a), "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "not answered for by any part: " in err and "E2a" in err
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert merged["status"] == "partial" and "E2a" in merged["not_run"] and "E1" not in merged["not_run"]


def test_complete_parts_that_answer_for_every_id_merge_complete(tmp_path):
    a = verify_report(tmp_path / "a", [("A1", "PASS"), ("A2", "SKIP")])
    b = verify_report(tmp_path / "b", [("B1", "PASS")], file="regressions/t.yaml")
    assert main(["--root", str(ROOT), "merge", str(a), str(b), "-o", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert (merged["status"], merged["not_run"], merged["partial_sources"]) == ("complete", [], [])


def test_reports_of_two_commits_are_refused(tmp_path, capsys):
    """e338b56 (N21): reports of two commits merged under the first one's commit alone."""
    a = verify_report(tmp_path / "a", [("A1", "PASS")], commit="1111111aaaa")
    b = verify_report(tmp_path / "b", [("B1", "PASS")], commit="2222222bbbb", file="regressions/t.yaml")
    assert main(["--root", str(ROOT), "merge", str(a), str(b), "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "the reports were made from different commits: 1111111aaaa (" in err and "2222222bbbb (" in err
    assert not (tmp_path / "m" / "report.json").exists()
