"""verify end to end against the fake engine: verdicts, robustness, reports, resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"

EQ = """\
criteria:
  - id: EQ
    title: graph vs stream
    kind: equivalence
    build: gpu
    args: [run, --model, "{model}", --prompt, "1,2,3", --steps, "4"]
    variants:
      - name: graph
        preconditions: {counters.graph_replays: ">0"}
      - name: stream
        env: {KITE_CUDA_GRAPH: "0"%s}
        preconditions: {counters.gpu_steps: ">0"}
    compare: {dumps: [h_out, logits]}
"""


def eq(extra_env: str = "") -> str:
    return EQ % extra_env


def setup(fake_repo, text: str, name: str = "suite.yaml") -> Path:
    p = fake_repo.criteria(text, name)
    fake_repo.register(p)
    return p


def test_equivalence_pass(fake_repo):
    setup(fake_repo, eq())
    assert fake_repo.verify() == 0
    r = fake_repo.result("EQ")
    assert r["verdict"] == "PASS" and len(r["details"]["comparisons"]) == 2
    assert not (fake_repo.reports / "latest" / "work" / "EQ").exists()  # dumps removed on PASS


def test_one_ulp_flip_caught(fake_repo):
    setup(fake_repo, eq(', FAKE_FLIP_ULP: "logits:70"'))
    assert fake_repo.verify() == 1
    r = fake_repo.result("EQ")
    assert r["verdict"] == "FAIL"
    assert "stream vs graph, logits: 1 of 224 elements differ; first at index 70 (position 2, element 6)" in r["reason"]
    c = [x for x in r["details"]["comparisons"] if x["dump"] == "logits"][0]
    assert c["max_ulp"] == 1 and c["differing"] == 1
    kept = fake_repo.reports / "latest" / r["details"]["kept"]
    assert (kept / "stream" / "dump" / "logits.f32").exists()  # dumps of the failed comparison are kept


def test_vacuous_precondition(fake_repo):
    setup(fake_repo, eq(', FAKE_NO_GPU_STEPS: "1"'))
    assert fake_repo.verify() == 1
    r = fake_repo.result("EQ")
    assert r["reason"].startswith("vacuous: variant stream: precondition failed: counters.gpu_steps = 0, wanted >0")


@pytest.mark.parametrize("knob,expected", [
    ('FAKE_CRASH: "SIGSEGV"', "variant stream: engine killed by signal SIGSEGV"),
    ('FAKE_EXIT: "1"', "variant stream: engine exit status 1: kite: error: planted failure"),
    ('FAKE_TRUNCATE: "h_out"', "variant stream: dump h_out.f32: 224 bytes but meta.json shape [7, 16] of f32 needs 448"),
    ('FAKE_NO_META: "1"', "variant stream: meta.json missing from the dump folder"),
    ('FAKE_NAN: "h_out:17"', "stream vs graph, h_out: NaN in B (0 in A, 1 in B), first at index 17"),
    ('FAKE_HANG: "1"', "variant stream: engine timed out after"),
])
def test_engine_failures_fail_and_run_continues(fake_repo, knob, expected):
    text = eq(", " + knob).replace("    build: gpu\n", "    build: gpu\n    timeout_s: 1.5\n")
    ok = eq().replace("id: EQ", "id: EQ2")
    setup(fake_repo, text + ok.split("criteria:\n", 1)[1])
    assert fake_repo.verify() == 1
    r = fake_repo.result("EQ")
    assert r["verdict"] == "FAIL" and r["reason"].startswith(expected), r["reason"]
    assert fake_repo.result("EQ2")["verdict"] == "PASS"


def test_engine_missing(fake_repo):
    setup(fake_repo, eq())
    (fake_repo.root / "fakebin" / "gpu" / "kite").unlink()
    assert fake_repo.verify() == 1
    assert "build gpu failed" in fake_repo.result("EQ")["reason"]


def test_requires_skip(fake_repo):
    setup(fake_repo, eq().replace("    build: gpu\n", "    build: gpu\n    requires: [gpu]\n"))
    assert fake_repo.verify(gpu=False) == 0
    r = fake_repo.result("EQ")
    assert r["verdict"] == "SKIP" and r["reason"] == "no GPU: planted for the test"


def test_gpu_probe_from_engine_info(fake_repo):
    setup(fake_repo, eq().replace("    build: gpu\n", "    build: gpu\n    requires: [gpu]\n"))
    assert fake_repo.verify(gpu=None) == 0  # default build's module has no device
    assert fake_repo.result("EQ")["reason"] == "no GPU: no driver: cudart error 35 (cudaErrorInsufficientDriver)"
    cfg = fake_repo.root / "configs" / "engine.yaml"
    cfg.write_text(cfg.read_text().replace("default: {prebuilt: fakebin/default}", "default: {prebuilt: fakebin/gpu}"))
    assert fake_repo.verify(gpu=None) == 0
    assert fake_repo.result("EQ")["verdict"] == "PASS"


def test_example_suite_and_junit(fake_repo):
    p = fake_repo.root / "regressions" / "suite.yaml"
    shutil.copy(DATA / "example_suite.yaml", p)
    fake_repo.register(p)
    assert fake_repo.verify(gpu=False) == 0
    tree = ET.parse(fake_repo.reports / "latest" / "junit.xml")
    suite = tree.getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "6" and suite.get("skipped") == "2"
    assert suite.get("failures") == "0"
    cases = {tc.get("name").split(": ", 1)[0]: tc for tc in suite.iter("testcase")}
    assert set(cases) == {"X1", "X2", "X3", "X4", "X5", "X6"}
    assert cases["X3"].get("name") == "X3: graph on is at least 5% faster than graph off"
    assert cases["X2"].find("skipped").get("message") == "no GPU: planted for the test"
    assert cases["X1"].find("failure") is None and cases["X1"].get("classname") == "regressions.suite"


def test_junit_failure_parsed(fake_repo):
    setup(fake_repo, eq(', FAKE_FLIP_ULP: "h_out:3"'))
    assert fake_repo.verify() == 1
    suite = ET.parse(fake_repo.reports / "latest" / "junit.xml").getroot()
    assert suite.get("failures") == "1"
    tc = suite.find("testcase")
    assert tc.get("name") == "EQ: graph vs stream" and tc.get("classname") == "regressions.suite"
    f = tc.find("failure")
    assert "first at index 3 (position 0, element 3)" in f.get("message") and len(f.get("message")) <= 200
    body = f.text.splitlines()  # readable lines, not JSON
    assert body[0].startswith("stream vs graph, h_out: 1 of 112 elements differ")
    assert "criterion: regressions/suite.yaml:2" in body
    assert "reproduce: python -m harness verify regressions/suite.yaml --only EQ" in body
    assert "logs: logs/EQ/; kept dumps: failed/EQ/" in body
    assert any(x.startswith("compare stream vs graph, h_out: 1 of 112 elements differ") for x in body)
    with pytest.raises(ValueError):
        json.loads(f.text)


def test_example_suite_with_gpu(fake_repo):
    p = fake_repo.root / "regressions" / "suite.yaml"
    shutil.copy(DATA / "example_suite.yaml", p)
    fake_repo.register(p)
    msgs: list[str] = []
    assert fake_repo.verify(gpu=True, messages=msgs) == 0, fake_repo.report()
    x3 = fake_repo.result("X3")
    assert x3["verdict"] == "PASS" and len(x3["details"]["pairs"]) == 6 and "noise_floor" in x3["details"]
    assert any("[X3] pair 3/6 (AB)" in m for m in msgs)  # progress lines
    assert [p["order"] for p in x3["details"]["pairs"]][:2] == ["AB", "BA"]
    assert all(r["peak_rss_mb"] and r["cpu_s"] is not None for r in x3["details"]["runs"])
    assert len(fake_repo.result("X2")["details"]["comparisons"]) == 6  # 3 cases x 2 dumps


AB = """\
criteria:
  - id: AB
    title: planted slowdown is flagged
    kind: ab_timing
    args: [run, --model, "{model}", --prompt, "1,2,3,4", --steps, "6", --iters, "3"]
    a: {name: slow, env: {KITE_DEBUG_STEP_DELAY_US: "%s", FAKE_NOISE: "0.02"}}
    b: {name: base, env: {FAKE_NOISE: "0.02"}}
    pairs: 10
    warmups: 0
    pass_if: "ci_lower >= 1.05"
"""


def test_ab_vacuous(fake_repo):
    text = (AB % "0").replace("b: {name: base,", "b: {name: base, preconditions: {counters.graph_replays: \">0\"},")
    setup(fake_repo, text)
    assert fake_repo.verify() == 1
    assert "vacuous" in fake_repo.result("AB")["reason"]


def test_run_kind_failures(fake_repo):
    text = """\
criteria:
  - id: R1
    title: selftest green
    kind: run
    runs:
      - {name: st, args: [selftest], env: {FAKE_SELFTEST_FAIL: "2"}, expect: {passes_min: 3}}
  - id: R2
    title: info truthful
    kind: run
    runs:
      - {name: info, args: [info, --json], expect: {json: {cuda.available: true}}}
"""
    setup(fake_repo, text)
    assert fake_repo.verify() == 1
    assert fake_repo.result("R1")["reason"] == (
        "st: exit status 1 (expected 0); 2 failed: FAIL reader: planted | FAIL quant_q8_0: planted")
    assert fake_repo.result("R2")["reason"] == "info: cuda.available = false, wanted true"


def test_module_discovery_layouts(fake_repo):
    text = """\
criteria:
  - id: D
    title: discovery steps
    kind: run
    args: [info, --json]
    runs:
      - {name: explicit, layout: engine_only, env: {KITE_CUDA_LIB: "{module}"},
         expect: {json: {cuda.bound: true, cuda.search.0.result: loaded}}}
      - {name: exe_dir, expect: {json: {cuda.bound: true, cuda.search.1.result: loaded}}}
      - {name: system, layout: engine_only, env: {LD_LIBRARY_PATH: "{bin}"},
         expect: {json: {cuda.bound: true, cuda.search.2.how: system}}}
      - {name: absent, layout: engine_only, expect: {json: {cuda.bound: false, cuda.reason: "~not found"}}}
      - {name: noexport, layout: engine_only, place: {libkite_cuda.so: "{testmods}/libkite_cuda_noexport.so"},
         expect: {json: {cuda.bound: false, cuda.note: "~kcuda_step_m"}}}
"""
    setup(fake_repo, text)
    assert fake_repo.verify() == 0, fake_repo.result("D")["reason"]


def test_bad_criteria_file_exit_2(fake_repo, capsys):
    from harness.cli import main

    fake_repo.criteria("criteria:\n  - id: Z\n    kind: nope\n")
    rc = main(["--root", str(fake_repo.root), "verify"])
    err = capsys.readouterr().err
    assert rc == 2 and "regressions/suite.yaml:3" in err and "Traceback" not in err


def test_only_unknown_id(fake_repo, capsys):
    from harness.cli import main

    setup(fake_repo, eq())
    assert main(["--root", str(fake_repo.root), "verify", "--only", "NOPE"]) == 2
    assert "unknown id(s) NOPE" in capsys.readouterr().err


def test_internal_error_becomes_fail(fake_repo, monkeypatch):
    from harness.run import runner

    setup(fake_repo, eq() + eq().split("criteria:\n", 1)[1].replace("id: EQ", "id: EQ2"))

    real = runner.run_equivalence
    calls = []

    def boom(ctx, crit, work):
        calls.append(crit.id)
        if crit.id == "EQ":
            raise ZeroDivisionError("planted bug")
        return real(ctx, crit, work)

    monkeypatch.setitem(runner.RUNNERS, "equivalence", boom)
    assert fake_repo.verify() == 1
    assert fake_repo.result("EQ")["reason"].startswith("internal error: ZeroDivisionError: planted bug")
    assert fake_repo.result("EQ2")["verdict"] == "PASS"


def test_resume_after_kill(fake_repo, tmp_path):
    log = tmp_path / "engine.log"
    crits = ["criteria:"]
    for i in range(4):
        env = '{FAKE_LOG: "%s"%s}' % (log, ', FAKE_SLEEP_MARK: "1"' if i == 2 else "")
        crits.append(f"""\
  - id: C{i}
    title: c{i}
    kind: run
    runs: [{{name: st, args: [selftest], env: {env}}}]""")
    p = fake_repo.criteria("\n".join(crits) + "\n")
    fake_repo.register(p)
    # a hang planted in C2 through the environment of the whole run; kill verify while it hangs
    env = dict(os.environ, PYTHONPATH=str(REPO))
    hang_env = dict(env, FAKE_HANG_IF_MARK="1")
    proc = subprocess.Popen([sys.executable, "-m", "harness", "--root", str(fake_repo.root), "verify"],
                            env=hang_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        report = fake_repo.newest() / "report.json"
        if report.exists():
            doc = json.loads(report.read_text())
            if len(doc["results"]) == 2:
                break
        time.sleep(0.05)
    # C2's engine writes its log line before it hangs: kill once it has, never after a guessed delay
    while time.time() < deadline and (not log.exists() or log.read_text().count("selftest") < 3):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    doc = json.loads(report.read_text())
    assert [r["id"] for r in doc["results"]] == ["C0", "C1"] and doc["status"] == "running"
    runs_before = log.read_text().count("selftest")
    assert runs_before == 3  # C0, C1, and the hanging C2
    msgs: list[str] = []
    assert fake_repo.verify("--resume", messages=msgs) == 0
    doc = json.loads(report.read_text())
    assert [r["id"] for r in doc["results"]] == ["C0", "C1", "C2", "C3"] and doc["status"] == "complete"
    assert log.read_text().count("selftest") == runs_before + 2  # C0 and C1 were not run again
    assert any("C0: PASS (kept from the interrupted run)" in m for m in msgs)


def test_wrapper_prefix(fake_repo):
    import sys as _sys

    text = f"""\
criteria:
  - id: W
    title: run under a wrapper
    kind: run
    runs:
      - {{name: wrapped, wrapper: ["{_sys.executable}"], args: [selftest], expect: {{passes_min: 8}}}}
"""
    setup(fake_repo, text)
    assert fake_repo.verify() == 0
    assert fake_repo.result("W")["details"]["runs"][0]["argv"][0] == _sys.executable


def test_gpu_probe_trusts_nvidia_smi():
    """A GPU the engine cannot use must make GPU criteria run (and fail), not skip."""
    from harness.run.probes import Probes

    info = {"cuda": {"available": False, "reason": "init failed: cudart error 999"}}
    assert Probes(gpu_info=lambda: info, smi=lambda: []).check("gpu") == (
        False, "no GPU: init failed: cudart error 999")
    ok, why = Probes(gpu_info=lambda: info, smi=lambda: ["GPU 0: NVIDIA H200 (UUID: x)"]).check("gpu")
    assert ok and "although the engine says: init failed" in why
    assert Probes(gpu_info=lambda: None, smi=lambda: []).check("gpu")[0] is False


def test_ctrl_c_keeps_report_and_resumes(fake_repo, monkeypatch):
    from harness.run import suite as V  # the loop body verify and the matrix share

    text = "criteria:\n" + "".join(
        f"  - {{id: K{i}, title: k, kind: run, runs: [{{args: [selftest]}}]}}\n" for i in range(3))
    setup(fake_repo, text)
    real = V.evaluate

    def interrupt(ctx, crit):
        if crit.id == "K1":
            raise KeyboardInterrupt
        return real(ctx, crit)

    monkeypatch.setattr(V, "evaluate", interrupt)
    assert fake_repo.verify() == 130
    doc = fake_repo.report()
    assert doc["status"] == "interrupted" and [r["id"] for r in doc["results"]] == ["K0"]
    assert doc["not_run"] == ["K1", "K2"]
    monkeypatch.setattr(V, "evaluate", real)
    assert fake_repo.verify("--resume", "--only", "K2") == 0  # a filtered resume is not the whole suite
    doc = fake_repo.report()
    assert doc["status"] == "partial" and doc["not_run"] == ["K1"] and doc["filter"] == "--only K2"
    assert fake_repo.verify("--resume") == 0
    doc = fake_repo.report()
    assert doc["status"] == "complete" and [r["id"] for r in doc["results"]] == ["K0", "K2", "K1"]
    assert doc["not_run"] == [] and doc["filter"] == ""


def test_ab_stability_flag_in_row_and_json(fake_repo):
    """Without noise every A/A ratio is 1: a threshold of 1.0 is within the noise floor's reach
    (unstable), one of 1.05 is not (stable)."""
    base = AB.replace('FAKE_NOISE: "0.02"', 'FAKE_NOISE: "0"').replace("    pairs: 10\n", "    pairs: 4\n    noise_floor: true\n")
    text = (base % "2000").replace('"ci_lower >= 1.05"', '"ci_lower >= 1.0"').replace("id: AB", "id: AB1")
    text += (base % "2000").split("criteria:\n", 1)[1].replace("id: AB", "id: AB2")
    setup(fake_repo, text)
    assert fake_repo.verify() == 0
    r1, r2 = fake_repo.result("AB1"), fake_repo.result("AB2")
    assert r1["details"]["stability"] == {"stable": False, "spread": 0.0, "reasons": [
        "A/A noise floor CI [1.0000, 1.0000] reaches the threshold 1"]}
    assert r1["reason"].endswith("; unstable: A/A noise floor CI [1.0000, 1.0000] reaches the threshold 1")
    assert r2["details"]["stability"]["stable"] and "unstable" not in r2["reason"]
    md = (fake_repo.reports / "latest" / "report.md").read_text()
    assert next(x for x in md.splitlines() if x.startswith("| AB1 ")).split("|")[4].strip() == "PASS *(unstable)*"
    assert next(x for x in md.splitlines() if x.startswith("| AB2 ")).split("|")[4].strip() == "PASS"
    assert "stable: pair spread 0.0%" in md
