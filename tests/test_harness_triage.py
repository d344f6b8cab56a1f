"""Failures a CI user can act on: compiler errors of a failed build, a reproduce command and the
log/dump folders of each failed criterion, readable JUnit, GitHub Actions annotations and step
summary, partial runs, and one writer per report folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.builder.diagnostics import first_errors
from test_harness_verify import eq
from harness.report import github

REPO = Path(__file__).resolve().parent.parent

def _suite(n: int, prefix: str = "K") -> str:
    return "criteria:\n" + "".join(
        f"  - {{id: {prefix}{i}, title: k{i}, kind: run, runs: [{{args: [selftest]}}]}}\n" for i in range(n))


def setup(fake_repo, text: str) -> Path:
    p = fake_repo.criteria(text)
    fake_repo.register(p)
    return p


# ---- compiler errors ---------------------------------------------------------------------------

LOG = """\
[1/3] Building C object CMakeFiles/kite.dir/engine/model.c.o
FAILED: CMakeFiles/kite.dir/engine/model.c.o
/src/native/engine/model.c:41:12: error: use of undeclared identifier 'rows_per_chunk'
   41 |     return rows_per_chunk;
/src/native/engine/model.c:41:12: error: use of undeclared identifier 'rows_per_chunk'
native/engine/gemm.c:7:1: fatal error: quant.h: No such file or directory
kite_cuda.cu(120): error: identifier "warp_rows" is undefined
C:\\k\\native\\engine\\main.c(12,5): error C2065: 'x': undeclared identifier
main.c.o: in function `main': undefined reference to `kt_forward'
CMake Error at CMakeLists.txt:9 (message):
  KITE_CUDA=ON is not supported on aarch64
ninja: build stopped: subcommand failed.
"""


def test_first_errors_of_each_toolchain():
    errs = [str(e) for e in first_errors(LOG, Path("/src"), limit=10)]
    assert errs == [
        "native/engine/model.c:41: error: use of undeclared identifier 'rows_per_chunk'",  # once, relative
        "native/engine/gemm.c:7: error: quant.h: No such file or directory",
        'kite_cuda.cu:120: error: identifier "warp_rows" is undefined',
        "C:\\k\\native\\engine\\main.c:12: error: C2065: 'x': undeclared identifier",
        "main.c.o: in function `main': undefined reference to `kt_forward'",
        "CMakeLists.txt:9: error: KITE_CUDA=ON is not supported on aarch64",
    ]
    assert len(first_errors(LOG, None, limit=2)) == 2


@pytest.mark.skipif(not (shutil.which("cmake") and (shutil.which("cc") or shutil.which("gcc"))),
                    reason="needs cmake and a host C compiler")
def test_planted_build_error_reaches_console_report_and_junit(fake_repo):
    src = fake_repo.root / "broken"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(kite C)\n"
                                        "add_executable(kite main.c)\n")
    (src / "main.c").write_text("int main(void) {\n  return undeclared_thing;\n}\n")
    cfg = fake_repo.root / "configs" / "engine.yaml"
    cfg.write_text(cfg.read_text().replace("  gpu: {prebuilt: fakebin/gpu}\n",
                                           "  gpu: {prebuilt: fakebin/gpu}\n  broken: {engine: {source: broken}}\n"))
    setup(fake_repo, "criteria:\n  - {id: B1, title: built, kind: run, build: broken, runs: [{args: [selftest]}]}\n")
    msgs: list[str] = []
    assert fake_repo.verify(messages=msgs) == 1
    first = "broken/main.c:2: error: "  # gcc and clang quote the name differently
    console = [m.strip() for m in msgs]
    assert any(m.startswith(first) and "undeclared_thing" in m for m in console), msgs
    r = fake_repo.result("B1")
    assert r["reason"].startswith(f"build broken failed (engine): {first}")
    error = fake_repo.report()["builds"]["broken"]["engine"]["errors"][0]
    assert error.startswith(first) and error in r["reason"]
    md = (fake_repo.reports / "latest" / "report.md").read_text()
    assert "First errors of build `broken` (engine;" in md and error in md
    body = ET.parse(fake_repo.reports / "latest" / "junit.xml").getroot().find("testcase").find("failure").text
    assert error in body


# ---- reproduce command, folders, JUnit -------------------------------------------------------------

def test_failed_and_vacuous_criteria_carry_reproduce_and_folders(fake_repo):
    text = eq(', FAKE_FLIP_ULP: "logits:5"')
    text += eq(', FAKE_NO_GPU_STEPS: "1"').split("criteria:\n", 1)[1].replace("id: EQ", "id: VAC")
    setup(fake_repo, text)
    msgs: list[str] = []
    assert fake_repo.verify(messages=msgs) == 1
    rdir = fake_repo.reports / "latest"
    for cid in ("EQ", "VAC"):
        r = fake_repo.result(cid)
        assert r["verdict"] == "FAIL" and r["reproduce"] == (
            f"python -m harness verify regressions/suite.yaml --only {cid}")
        assert r["log_dir"] == f"logs/{cid}" and r["kept"] == f"failed/{cid}"
        assert r["model"] == "models/tiny.gguf"  # relative to the project
        assert f"    model: {r['model']}" in msgs
        assert (rdir / r["kept"]).is_dir() and (rdir / r["log_dir"]).is_dir()
        assert f"    reproduce: python -m harness verify regressions/suite.yaml --only {cid}" in msgs
        rel = rdir.resolve().relative_to(fake_repo.root.resolve())  # console paths are the project's
        assert f"    logs: {rel / 'logs' / cid}/; kept dumps: {rel / 'failed' / cid}/" in msgs
    assert fake_repo.result("VAC")["reason"].startswith("vacuous:")
    assert fake_repo.result("EQ")["line"] == 2 and fake_repo.result("VAC")["line"] == 14
    md = (rdir / "report.md").read_text()
    row = next(x for x in md.splitlines() if x.startswith("| EQ "))
    assert row.rstrip(" |").endswith("`python -m harness verify regressions/suite.yaml --only EQ`")
    assert "- criterion: `regressions/suite.yaml:14`" in md and "- logs: logs/VAC/; kept dumps: failed/VAC/" in md


def test_passing_criterion_has_no_reproduce(fake_repo):
    setup(fake_repo, _suite(1) + "  - {id: F1, title: f, kind: run, runs: [{args: [selftest], env: "
                                 "{FAKE_SELFTEST_FAIL: '1'}}]}\n")
    assert fake_repo.verify() == 1
    r = fake_repo.result("K0")
    assert r["reproduce"] == "" and r["kept"] is None and r["model"] is None
    assert fake_repo.result("F1")["reproduce"] and fake_repo.result("F1")["model"] is None  # it ran no model


# ---- GitHub Actions ------------------------------------------------------------------------------

def test_github_summary_and_annotations(fake_repo, monkeypatch, capsys, tmp_path):
    setup(fake_repo, eq(', FAKE_FLIP_ULP: "logits:5"'))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert fake_repo.verify() == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n### kite verify: 1 failed") and "| EQ: graph vs stream |" in text
    assert "`regressions/suite.yaml:2`" in text and "Full report: `reports/" in text
    out = capsys.readouterr().out.splitlines()
    ann = [x for x in out if x.startswith("::error ")]
    assert len(ann) == 1
    assert ann[0].startswith("::error file=regressions/suite.yaml,line=2,title=EQ%3A graph vs stream::"
                             "stream vs graph, logits: 1 of 224 elements differ")
    assert ann[0].endswith("(reproduce: python -m harness verify regressions/suite.yaml --only EQ)")


def test_no_github_output_elsewhere(fake_repo, monkeypatch, capsys):
    setup(fake_repo, eq(', FAKE_FLIP_ULP: "logits:5"'))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert fake_repo.verify() == 1
    assert "::error" not in capsys.readouterr().out


def test_annotation_escaping_and_build_errors():
    assert github.annotation("a,b:c.yaml", 3, "X: t", "50% done\nnext") == (
        "::error file=a%2Cb%3Ac.yaml,line=3,title=X%3A t::50%25 done%0Anext")
    doc = {"results": [], "builds": {"b": {"engine": {"status": "failed", "errors": [
        "native/x.c:12: error: expected ';'", "undefined reference to `f'"]}, "module": {"status": "skipped"}}}}
    assert github.annotations(doc) == ["::error file=native/x.c,line=12,title=build b (engine)::error: expected ';'",
                                       "::error title=build b (engine)::undefined reference to `f'"]


# ---- partial runs -----------------------------------------------------------------------------------

def _latest(fake_repo) -> Path | None:
    link = fake_repo.reports / "latest"
    return link.resolve() if link.exists() else None


def test_only_is_partial_and_leaves_latest(fake_repo):
    setup(fake_repo, _suite(3))
    assert fake_repo.verify() == 0
    full = _latest(fake_repo)
    msgs: list[str] = []
    assert fake_repo.verify("--only", "K1", messages=msgs) == 0
    assert _latest(fake_repo) == full  # a filtered run does not move reports/latest
    part = max(p for p in fake_repo.reports.iterdir() if p.name != "latest")
    doc = json.loads((part / "report.json").read_text())
    assert doc["status"] == "partial" and doc["filter"] == "--only K1" and doc["not_run"] == ["K0", "K2"]
    md = (part / "report.md").read_text()
    assert "status **partial** (--only K1)" in md and "- not run: K0, K2" in md
    assert "of 1; partial (--only K1): 2 not run" in md
    assert msgs[-1].endswith("report.md; partial (--only K1): 2 not run: K0, K2")
    assert json.loads((full / "report.json").read_text())["status"] == "complete"


def test_ab_run_is_partial(fake_repo):
    from harness.cli import main

    text = """\
criteria:
  - id: AB
    title: a/b
    kind: ab_timing
    args: [run, --model, "{model}", --prompt, "1,2", --steps, "2"]
    a: {name: a}
    b: {name: b}
    pairs: 3
    warmups: 0
    pass_if: "ci_upper <= 1.5"
""" + _suite(1).split("criteria:\n", 1)[1]
    setup(fake_repo, text)
    assert main(["--root", str(fake_repo.root), "ab", "AB"]) == 0
    assert _latest(fake_repo) is None
    (rdir,) = [p for p in fake_repo.reports.iterdir()]
    doc = json.loads((rdir / "report.json").read_text())
    assert doc["status"] == "partial" and doc["not_run"] == ["K0"]


# ---- one writer per report folder -----------------------------------------------------------------

def _verify_proc(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "--root", str(root), "verify", *args], cwd=REPO,
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


GATED = """\
criteria:
  - id: K0
    title: k0
    kind: run
    runs:
      - args: [selftest]
        wrapper:
          - /bin/sh
          - -c
          - 'if [ -n "$KITE_TEST_GATE" ]; then echo held > "$KITE_TEST_GATE/ready"; read go < "$KITE_TEST_GATE/go"; fi; exec "$0" "$@"'
  - {id: K1, title: k1, kind: run, runs: [{args: [selftest]}]}
"""


def _hold_in_engine(fake_repo, tmp_path):
    """Start a verify whose first criterion waits on a FIFO; return (process, gate folder) once it
    waits there, i.e. while that verify holds the report folder's lock."""
    gate = tmp_path / "gate"
    gate.mkdir()
    os.mkfifo(gate / "ready")
    os.mkfifo(gate / "go")
    first = _verify_proc(fake_repo.root, env={"KITE_TEST_GATE": str(gate)})
    got: dict = {}

    def wait_ready() -> None:
        with open(gate / "ready") as f:  # returns once the wrapper opened it: the run is inside K0
            got["line"] = f.read()

    t = threading.Thread(target=wait_ready, daemon=True)
    t.start()
    t.join(120)
    assert got.get("line") == "held\n", first.communicate(timeout=5)
    return first, gate


def test_two_real_writers_second_refused(fake_repo, tmp_path):
    setup(fake_repo, GATED)
    first, gate = _hold_in_engine(fake_repo, tmp_path)
    rdir = fake_repo.newest()  # the run in progress (reports/latest moves once it has finished)
    second = _verify_proc(fake_repo.root, "--resume", str(rdir))
    out, err = second.communicate(timeout=120)
    assert second.returncode == 2, err
    started = json.loads((rdir / ".lock").read_text())["started"]
    assert f"{rdir} is being written by another verify run (pid {first.pid}, started {started}, " in err
    with open(gate / "go", "w") as f:  # let the first run go on
        f.write("go\n")
    assert first.wait(timeout=120) == 0, first.communicate()
    doc = json.loads((rdir / "report.json").read_text())
    assert doc["status"] == "complete" and [r["id"] for r in doc["results"]] == ["K0", "K1"]


def test_stale_lock_of_a_killed_run_is_taken_over(fake_repo, tmp_path):
    setup(fake_repo, GATED)
    first, gate = _hold_in_engine(fake_repo, tmp_path)
    rdir = fake_repo.newest()  # the run in progress (reports/latest moves once it has finished)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=60)
    second = _verify_proc(fake_repo.root, "--resume", str(rdir))
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"took over a stale lock of {rdir.name}: its holder (pid {first.pid}, started " in err
    doc = json.loads((rdir / "report.json").read_text())
    assert doc["status"] == "complete" and [r["id"] for r in doc["results"]] == ["K0", "K1"]
    assert (rdir / ".lock").read_text() == ""  # released
