"""Evaluating criteria in-process, with the engine's runs planned by the test: the verdict of each
kind against an oracle (identical bytes PASS, one flipped byte FAIL, a NaN FAIL; a planted ratio
passes its threshold and A/A does not), the warm-up runs, and what is kept of a failure.

These are the fast tests that the mutation run (nox -s mutation) uses for harness/run/runner.py."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import textwrap
import time
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from conftest import planted_context
from harness.builder.binfmt import BinaryFormatError, BinaryInfo, Symbol, read_binary
from harness.builder.cmake import BuildResult, PartResult
from harness.process import ProcResult
from harness.run import runner, timing
from harness.contract import schema
from harness.contract.criteria import FileCheck

BUILDS = ["default", "stub", "gpu"]
DUMPS = ["h_out", "logits"]


class Engine:
    """Stands in for run_process. Each call is recorded (its log name, argv, env); what it
    returns comes from `plan(name, argv, env)`: a dict with stdout, rc, signal, and files for
    the dump folder."""

    def __init__(self, plan):
        self.plan = plan
        self.calls: list[tuple[str, list[str], dict[str, str]]] = []
        self.timeouts: list[float] = []

    def __call__(self, argv, env=None, *, timeout=120.0, log_prefix=None, **kw):
        name = Path(log_prefix).name
        self.calls.append((name, list(argv), dict(env or {})))
        self.timeouts.append(timeout)
        out = self.plan(name, list(argv), dict(env or {})) or {}
        if "--dump" in argv:
            d = Path(argv[argv.index("--dump") + 1])
            d.mkdir(parents=True, exist_ok=True)
            for fname, data in out.get("files", {}).items():
                (d / fname).write_bytes(data)
        return ProcResult(list(argv), dict(env or {}), out.get("rc", 0), out.get("signal"), False, 0.01, 0.01,
                          1.0, None, None, stdout=out.get("stdout", ""), stderr=out.get("stderr", ""))

    @property
    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.fixture
def ctx(tmp_path: Path) -> runner.Context:
    return planted_context(tmp_path)


def evaluate(ctx: runner.Context, text: str, engine: Engine, monkeypatch) -> runner.Outcome:
    (crit,) = schema.load_text(text, "regressions/t.yaml", BUILDS, DUMPS)
    monkeypatch.setattr(runner, "run_process", engine)
    return runner.evaluate(ctx, crit)


def f32(*xs: float) -> bytes:
    return struct.pack(f"<{len(xs)}f", *xs)


# ---- A/B timing ---------------------------------------------------------------------------

AB = """\
criteria:
  - id: T1
    title: A is slower than B
    kind: ab_timing
    args: [run, --model, "{model}"]
    a: {name: a, env: {SIDE: a}}
    b: {name: b, env: {SIDE: b}, preconditions: {counters.steps: ">0"}}
    metric: {field: timings.request_ms, reduce: min}
    ratio: a/b
    pairs: 3
    EXTRA
    pass_if: "ci_lower >= 1.1"
    bootstrap: {resamples: 200, seed: 1}
"""


def timed(ms_by_side: dict[str, Any], steps: int = 1):
    def plan(name, argv, env):
        return {"stdout": json.dumps({"timings": {"request_ms": ms_by_side[env["SIDE"]]}, "counters": {"steps": steps}})}
    return plan


def test_ab_warmups_run_before_the_pairs_for_both_variants(ctx, monkeypatch):
    eng = Engine(timed({"a": [13.0, 12.0], "b": [10.0, 11.0]}))
    out = evaluate(ctx, AB.replace("EXTRA", "warmups: 2"), eng, monkeypatch)
    assert eng.names == ["warmup1.A", "warmup1.B", "warmup2.A", "warmup2.B", "pair1.A", "pair1.B",
                         "pair2.B", "pair2.A", "pair3.A", "pair3.B"]
    assert [c[2]["SIDE"] for c in eng.calls] == ["a", "b", "a", "b", "a", "b", "b", "a", "a", "b"]
    assert all(c[1][-1] == "--json" and c[1].count("--json") == 1 for c in eng.calls)
    assert out.verdict == "PASS", out.reason
    assert out.reason == "median a/b 1.2000, 95% CI [1.2000, 1.2000] over 3 pairs; pass if ci_lower >= 1.1"
    assert [(p["pair"], p["order"], p["a"], p["b"], p["ratio"]) for p in out.details["pairs"]] == [
        (1, "AB", 12.0, 10.0, 1.2), (2, "BA", 12.0, 10.0, 1.2), (3, "AB", 12.0, 10.0, 1.2)]
    assert [(r["pair"], r["side"], r["metric"]) for r in out.details["runs"]] == [
        (1, "A", 12.0), (1, "B", 10.0), (2, "B", 10.0), (2, "A", 12.0), (3, "A", 12.0), (3, "B", 10.0)]


def test_ab_progress_lines(ctx, monkeypatch):
    lines: list[str] = []
    ctx.progress = lines.append
    evaluate(ctx, AB.replace("EXTRA", "warmups: 0\n    noise_floor: true").replace("pairs: 3", "pairs: 2"),
             Engine(timed({"a": 12.0, "b": 10.0})), monkeypatch)
    assert lines == ["  [T1] pair 1/2 (AB): A 12  B 10  ratio 1.2000", "  [T1] pair 2/2 (BA): A 12  B 10  ratio 1.2000",
                     "  [T1] A/A noise floor", "  [T1] aa.pair 1/2 (AB): A 12  B 12  ratio 1.0000",
                     "  [T1] aa.pair 2/2 (BA): A 12  B 12  ratio 1.0000"]
    lines.clear()
    evaluate(ctx, SAME.replace("EXTRA", "warmups: 0").replace("pairs: 3", "pairs: 2"),
             Engine(timed({"a": [10.5, 10.0, 9.0, 11.0]})), monkeypatch)
    assert lines == ["  [T2] run 1/2: A 10.5  B 10  ratio 1.0500", "  [T2] run 2/2: A 10.5  B 10  ratio 1.0500"]


def test_ab_default_one_warmup_and_zero(ctx, monkeypatch):
    eng = Engine(timed({"a": 12.0, "b": 10.0}))
    evaluate(ctx, AB.replace("EXTRA", "order: AB"), eng, monkeypatch)
    assert eng.names == ["warmup1.A", "warmup1.B", "pair1.A", "pair1.B", "pair2.A", "pair2.B", "pair3.A", "pair3.B"]
    eng = Engine(timed({"a": 12.0, "b": 10.0}))
    evaluate(ctx, AB.replace("EXTRA", "warmups: 0"), eng, monkeypatch)
    assert eng.names[0] == "pair1.A" and len(eng.names) == 6


def test_ab_aa_is_not_flagged_and_b_over_a(ctx, monkeypatch):
    out = evaluate(ctx, AB.replace("EXTRA", "warmups: 0"), Engine(timed({"a": 10.0, "b": 10.0})), monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith("threshold not met: median a/b 1.0000")
    text = AB.replace("EXTRA", "warmups: 0").replace("ratio: a/b", "ratio: b/a")
    out = evaluate(ctx, text, Engine(timed({"a": 10.0, "b": 12.0})), monkeypatch)
    assert out.verdict == "PASS" and out.details["stats"]["median"] == 1.2


def test_ab_noise_floor_runs_a_against_a(ctx, monkeypatch):
    eng = Engine(timed({"a": 12.0, "b": 10.0}))
    out = evaluate(ctx, AB.replace("EXTRA", "warmups: 0\n    noise_floor: true"), eng, monkeypatch)
    assert eng.names[6:] == ["aa.pair1.A", "aa.pair1.B", "aa.pair2.B", "aa.pair2.A", "aa.pair3.A", "aa.pair3.B"]
    assert all(c[2]["SIDE"] == "a" for c in eng.calls[6:])
    nf = out.details["noise_floor"]
    assert (nf["median"], nf["ci_lower"], nf["ci_upper"], nf["n"]) == (1.0, 1.0, 1.0, 3)
    assert out.verdict == "PASS"


def test_ab_noise_floor_reads_a_metric_on_both_sides(ctx, monkeypatch):
    # A and B report their times in different fields; the A/A floor runs A twice, so both of its
    # sides must read A's field (B's field is absent from A's output)
    def plan(name, argv, env):
        field = "prefill_ms" if env["SIDE"] == "a" else "decode_ms"
        return {"stdout": json.dumps({"timings": {field: 12.0 if env["SIDE"] == "a" else 10.0},
                                      "counters": {"steps": 1}})}
    text = AB.replace("EXTRA", "warmups: 0\n    noise_floor: true").replace(
        "    metric: {field: timings.request_ms, reduce: min}\n",
        "    metric_a: {field: timings.prefill_ms, reduce: min}\n    metric_b: {field: timings.decode_ms, reduce: min}\n")
    out = evaluate(ctx, text, Engine(plan), monkeypatch)
    assert out.verdict == "PASS", out.reason
    assert [p["ratio"] for p in out.details["pairs"]] == [1.2, 1.2, 1.2]
    assert [(p["a"], p["b"]) for p in out.details["noise_floor"]["pairs"]] == [(12.0, 12.0)] * 3


@pytest.mark.parametrize("plan,words", [
    (lambda n, a, e: {"stdout": "not json"}, "pair1.A: stdout is not the JSON meta object (--json)"),
    (lambda n, a, e: {"rc": 3, "stderr": "boom"}, "warmup1.A: engine exit status 3: boom"),
    (lambda n, a, e: {"stdout": json.dumps({"counters": {"steps": 1}})},
     "pair 1 A: metric field timings.request_ms missing from meta.json"),
    (lambda n, a, e: {"stdout": json.dumps({"timings": {"request_ms": "x"}, "counters": {"steps": 1}})},
     "pair 1 A: metric timings.request_ms: metric field must be a number"),
    (lambda n, a, e: {"stdout": json.dumps({"timings": {"request_ms": 0.0}, "counters": {"steps": 1}})},
     "pair 1: metric is 0.0 (not positive): cannot form a ratio"),
    (timed({"a": 12.0, "b": 10.0}, steps=0), "vacuous: pair1.B (variant b): precondition failed"),
])
def test_ab_failures_name_the_run(ctx, monkeypatch, plan, words):
    text = AB.replace("EXTRA", "warmups: 0" if "warmup" not in words else "warmups: 1")
    out = evaluate(ctx, text, Engine(plan), monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith(words), out.reason
    assert out.details["pass_if"] == "ci_lower >= 1.1" and "runs" in out.details


SAME = """\
criteria:
  - id: T2
    title: first request not slower than the rest
    kind: ab_timing
    args: [run, --model, "{model}", --json]
    same_run: true
    a: {name: a, env: {SIDE: a}}
    metric_a: {field: timings.request_ms, reduce: first}
    metric_b: {field: timings.request_ms, reduce: rest_median}
    pairs: 3
    EXTRA
    pass_if: "ci_upper <= 1.10"
"""


def test_same_run_warmups_then_runs(ctx, monkeypatch):
    eng = Engine(timed({"a": [10.5, 10.0, 9.0, 11.0]}))
    out = evaluate(ctx, SAME.replace("EXTRA", "warmups: 2"), eng, monkeypatch)
    assert eng.names == ["warmup1", "warmup2", "run1", "run2", "run3"]
    assert all(c[1].count("--json") == 1 for c in eng.calls), "the flag is not added twice"
    assert out.verdict == "PASS", out.reason
    assert [(p["a"], p["b"], p["ratio"], p["order"]) for p in out.details["pairs"]] == [(10.5, 10.0, 1.05,
                                                                                         "same run")] * 3
    assert [r["side"] for r in out.details["runs"]] == ["AB"] * 3
    eng = Engine(timed({"a": [13.0, 10.0, 10.0]}))
    out = evaluate(ctx, SAME.replace("EXTRA", "warmups: 0"), eng, monkeypatch)
    assert eng.names == ["run1", "run2", "run3"]
    assert out.verdict == "FAIL" and "median a/b 1.3000" in out.reason
    out = evaluate(ctx, SAME.replace("EXTRA", ""), Engine(timed({"a": [1.0, 0.0, 0.0]})), monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith("run 1: metric is 0.0 (not positive)"), out.reason


# ---- equivalence ----------------------------------------------------------------------------

EQ = """\
criteria:
  - id: Q1
    title: two variants give the same bytes
    kind: equivalence
    args: [run, --model, "{model}", --steps, "2"]
    variants:
      - {name: a, env: {SIDE: a}, preconditions: {counters.steps: ">0"}}
      - {name: b, env: {SIDE: b}}
    compare: {dumps: [h_out, logits], MODE}
"""

H = f32(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
L = f32(0.5, 0.25, -1.0, 8.0)


def dumps(h: dict[str, bytes] | None = None, meta: Any = None):
    """Plan: each side writes meta.json and both dumps; h overrides h_out.f32 per side."""
    def plan(name, argv, env):
        m = meta if meta is not None else {"shapes": {"h_out": [2, 3], "logits": [2, 2]}, "counters": {"steps": 2}}
        files = {"meta.json": m if isinstance(m, bytes) else json.dumps(m).encode(), "h_out.f32": H,
                 "logits.f32": L}
        if h and env["SIDE"] in h:
            files["h_out.f32"] = h[env["SIDE"]]
        return {"files": files}
    return plan


def flipped(data: bytes, byte: int) -> bytes:
    b = bytearray(data)
    b[byte] ^= 1
    return bytes(b)


def test_equivalence_oracle_identical_flipped_nan(ctx, monkeypatch):
    text = EQ.replace("MODE", "mode: memcmp")
    eng = Engine(dumps())
    out = evaluate(ctx, text, eng, monkeypatch)
    assert out.verdict == "PASS" and out.reason == "2 comparisons: identical bytes"
    assert eng.names == ["a", "b"] and all(c[1][-2] == "--dump" for c in eng.calls)
    for byte in (0, 13, len(H) - 1):
        out = evaluate(ctx, text, Engine(dumps({"b": flipped(H, byte)})), monkeypatch)
        assert out.verdict == "FAIL", byte
        assert out.reason.startswith(f"b vs a, h_out: 1 of 6 elements differ; first at index {byte // 4} "
                                     f"(position {byte // 12}, element {byte // 4 % 3})"), out.reason
    nan = f32(1.0, 2.0, float("nan"), 4.0, 5.0, 6.0)
    out = evaluate(ctx, text, Engine(dumps({"a": nan, "b": nan})), monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith("b vs a, h_out: NaN in A"), out.reason


def test_equivalence_tolerance_and_counts(ctx, monkeypatch):
    near = f32(1.0, 2.0, 3.0, 4.0, 5.0, 6.5)
    out = evaluate(ctx, EQ.replace("MODE", "mode: tolerance, max_abs: 0.5"), Engine(dumps({"b": near})), monkeypatch)
    assert out.verdict == "PASS" and out.reason == "2 comparisons: within tolerance"
    out = evaluate(ctx, EQ.replace("MODE", "mode: tolerance, max_abs: 0.4"), Engine(dumps({"b": near})), monkeypatch)
    assert out.verdict == "FAIL" and "outside tolerance (max abs 0.5 > 0.4)" in out.reason
    text = EQ.replace("MODE", "mode: memcmp").replace("dumps: [h_out, logits]", "dumps: [logits]")
    text = text.replace("      - {name: b, env: {SIDE: b}}", "      - {name: b, env: {SIDE: b}}\n"
                        "      - {name: c, env: {SIDE: c}}")
    out = evaluate(ctx, text, Engine(dumps()), monkeypatch)
    assert out.reason == "2 comparisons: identical bytes"
    assert [(c["a"], c["b"], c["dump"]) for c in out.details["comparisons"]] == [("a", "b", "logits"),
                                                                               ("a", "c", "logits")]
    out = evaluate(ctx, text.replace("      - {name: c, env: {SIDE: c}}\n", ""), Engine(dumps()), monkeypatch)
    assert out.reason == "1 comparison: identical bytes"


def test_equivalence_failures_counted_and_cases(ctx, monkeypatch):
    text = EQ.replace("MODE", "mode: memcmp").replace('--steps, "2"', '--steps, "{n}"') + \
        '    cases: [{n: "1"}, {n: "2"}, {n: "3"}]\n'
    eng = Engine(dumps({"b": flipped(H, 0)}))
    out = evaluate(ctx, text, eng, monkeypatch)
    assert eng.names == ["a.case0", "b.case0", "a.case1", "b.case1", "a.case2", "b.case2"]
    assert [c[1][c[1].index("--steps") + 1] for c in eng.calls] == ["1", "1", "2", "2", "3", "3"]
    assert out.verdict == "FAIL" and out.reason.startswith("b vs a [n=1], h_out: 1 of 6")
    assert out.reason.endswith(" (+2 more)")
    assert [c["case"] for c in out.details["comparisons"]] == ["n=1", "n=1", "n=2", "n=2", "n=3", "n=3"]


@pytest.mark.parametrize("meta,words", [
    (b"\x80", "variant a: meta.json: not UTF-8 text (byte 0"),
    (b"{", "variant a: meta.json is not valid JSON"),
    ({"shapes": {"h_out": [2, 3], "logits": [2, 2]}, "counters": {"steps": 0}},
     "vacuous: variant a: precondition failed: counters.steps"),
    ({"shapes": {"h_out": [2, "3"], "logits": [2, 2]}, "counters": {"steps": 1}},
     "variant a: meta.json shapes.h_out = [2, '3'] is not a list of non-negative integers"),
    ({"shapes": {"h_out": [2, -3], "logits": [2, 2]}, "counters": {"steps": 1}},
     "variant a: meta.json shapes.h_out = [2, -3] is not a list"),
    ({"shapes": {"h_out": [2, True], "logits": [2, 2]}, "counters": {"steps": 1}},
     "variant a: meta.json shapes.h_out = [2, True] is not a list"),
    ({"shapes": {"h_out": 6, "logits": [2, 2]}, "counters": {"steps": 1}},
     "variant a: meta.json shapes.h_out = 6 is not a list"),
    ({"shapes": {"h_out": [2, 4], "logits": [2, 2]}, "counters": {"steps": 1}},
     "variant a: dump h_out.f32: 24 bytes but meta.json shape [2, 4] of f32 needs 32 (truncated or stale dump)"),
])
def test_equivalence_bad_meta(ctx, monkeypatch, meta, words):
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps(meta=meta)), monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith(words), out.reason
    assert out.details["runs"]


def test_equivalence_row_length_from_shape_and_missing_shape(ctx, monkeypatch):
    meta = {"shapes": {"h_out": [3, 2], "logits": None}, "counters": {"steps": 1}}
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps({"b": flipped(H, 12)}, meta=meta)),
                   monkeypatch)
    assert "first at index 3 (position 1, element 1)" in out.reason, out.reason
    (cmp_h, cmp_l) = out.details["comparisons"]
    assert (cmp_h["row_len"], cmp_l["row_len"], cmp_l["ok"]) == (2, 4, True)


def test_equivalence_missing_outputs(ctx, monkeypatch):
    def no_meta(name, argv, env):
        return {"files": {"h_out.f32": H, "logits.f32": L}}

    def no_dump(name, argv, env):
        return {"files": {"meta.json": b'{"counters": {"steps": 1}}', "h_out.f32": H}}
    text = EQ.replace("MODE", "mode: memcmp")
    out = evaluate(ctx, text, Engine(no_meta), monkeypatch)
    assert out.reason == "variant a: meta.json missing from the dump folder"
    out = evaluate(ctx, text, Engine(no_dump), monkeypatch)
    assert out.reason == "variant a: dump logits.f32 missing"
    out = evaluate(ctx, text, Engine(lambda n, a, e: {"signal": "SIGSEGV"}), monkeypatch)
    assert out.reason == "variant a: engine killed by signal SIGSEGV"


def test_equivalence_stale_dump_is_removed(ctx, monkeypatch):
    """A dump folder left by an earlier run is emptied first: a run that writes nothing fails."""
    text = EQ.replace("MODE", "mode: memcmp")
    evaluate(ctx, text, Engine(dumps()), monkeypatch)
    work = ctx.report_dir / "work" / "Q1" / "a" / "dump"
    work.mkdir(parents=True)
    (work / "meta.json").write_text("{}")
    out = evaluate(ctx, text, Engine(lambda n, a, e: {}), monkeypatch)
    assert out.reason == "variant a: meta.json missing from the dump folder"


# ---- run and artifact -----------------------------------------------------------------------

RUN = """\
criteria:
  - id: R1
    title: selftest and info
    kind: run
    runs:
      - name: selftest
        args: [selftest]
        expect: {exit: 0, passes_min: 3, must_match: ["^ok$"], must_not_match: ["error"]}
      - name: info
        args: [info, --json]
        preconditions: {cuda.compiled: true}
        expect: {exit: 1, json: {cuda.bound: false}}
"""


def test_run_kind(ctx, monkeypatch):
    good = {"selftest": {"stdout": "ok\n3 passed, 0 failed\n"},
            "info": {"rc": 1, "stdout": json.dumps({"cuda": {"compiled": True, "bound": False}})}}
    eng = Engine(lambda n, a, e: good[n])
    out = evaluate(ctx, RUN, eng, monkeypatch)
    assert out.verdict == "PASS" and out.reason == "2 runs as expected", out.reason
    assert [c[1][1:] for c in eng.calls] == [["selftest"], ["info", "--json"]]
    assert [(r["name"], r["ended"], r["ok"]) for r in out.details["runs"]] == [
        ("selftest", "exit status 0", True), ("info", "exit status 1", True)]
    bad = {"selftest": {"stdout": "FAIL gemm\nerror here\n2 passed, 1 failed\n"},
           "info": {"rc": 0, "stdout": json.dumps({"cuda": {"compiled": False, "bound": True}})}}
    out = evaluate(ctx, RUN, Engine(lambda n, a, e: bad[n]), monkeypatch)
    assert out.verdict == "FAIL"
    assert out.reason == ("selftest: 1 failed: FAIL gemm; only 2 passed (at least 3 expected); output lacks /^ok$/; "
                          "output has /error/: 'error here' (+1 more)")
    assert out.details["runs"][1]["reason"].startswith("exit status 0 (expected 1); ")


@pytest.mark.parametrize("res,problems", [
    ({"stdout": "ok"}, ["no closing line 'N passed, M failed'"]),
    ({"stdout": "ok\n3 passed, 0 failed", "signal": "SIGABRT"}, ["killed by signal SIGABRT"]),
    ({"stdout": "ok\n", "stderr": "5 passed, 0 failed"}, []),
])
def test_check_run(res, problems):
    from harness.contract import criteria as C

    r = ProcResult(["kite"], {}, res.get("rc", 0), res.get("signal"), False, 0.1, 0.1, 1.0, None, None,
                   stdout=res.get("stdout", ""), stderr=res.get("stderr", ""))
    ex = C.Expect(exit=0, passes_min=3, must_match=["^ok"])
    assert runner.check_run(r, ex, {}) == problems


def test_check_run_json_needs_json_stdout():
    from harness.contract import criteria as C

    r = ProcResult(["kite"], {}, 0, None, False, 0.1, 0.1, 1.0, None, None, stdout="ok")
    need = ["stdout is not JSON (needed by `json` / `preconditions`)"]
    assert runner.check_run(r, C.Expect(json={"a": 1}), {}) == need
    assert runner.check_run(r, C.Expect(), {"a": 1}) == need
    assert runner.check_run(r, C.Expect(), {}) == []


ART = """\
criteria:
  - id: F1
    title: files
    kind: artifact
    files:
      - {path: "{bin}/kite", exists: true, text_match: ["^eng"], text_not_match: ["secret"]}
      - {path: "{bin}/nothing", exists: false}
"""


def test_artifact_kind(ctx, monkeypatch):
    out = evaluate(ctx, ART, Engine(lambda n, a, e: {}), monkeypatch)
    assert out.verdict == "PASS" and out.reason == "2 file checks hold", out.reason
    assert [f["facts"] for f in out.details["files"]] == [[], ["absent"]]
    bins = Path(ctx.ensure_build("default").bin_dir)
    assert [(f["path"], f["ok"], f["problems"]) for f in out.details["files"]] == [
        (str(bins / "kite"), True, []), (str(bins / "nothing"), True, [])]
    out = evaluate(ctx, ART.replace("^eng", "^motor").replace("/nothing", "/libkite_cuda.so"),
                   Engine(lambda n, a, e: {}), monkeypatch)
    assert out.verdict == "FAIL"
    assert out.reason == "kite: text lacks /^motor/ (+1 more)"
    assert out.details["files"][1]["problems"][0].endswith("libkite_cuda.so exists but must not")


# ---- evaluate: skips, internal errors, what is kept -----------------------------------------

def test_requires_unmet_is_skip(ctx, monkeypatch):
    eng = Engine(dumps())
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp").replace("kind: equivalence",
                                                                   "kind: equivalence\n    requires: [gpu]"),
                   eng, monkeypatch)
    assert out.verdict == "SKIP" and out.reason.startswith("no GPU") and eng.calls == []


def test_failure_keeps_its_work_and_pass_removes_it(ctx, monkeypatch):
    text = EQ.replace("MODE", "mode: memcmp")
    out = evaluate(ctx, text, Engine(dumps({"b": flipped(H, 3)})), monkeypatch)
    kept = ctx.report_dir / "failed" / "Q1"
    assert out.details["kept"] == "failed/Q1" and (kept / "b" / "dump" / "h_out.f32").read_bytes() == flipped(H, 3)
    assert not (ctx.report_dir / "work" / "Q1").exists()
    out = evaluate(ctx, text, Engine(dumps({"b": flipped(H, 5)})), monkeypatch)
    assert (kept / "b" / "dump" / "h_out.f32").read_bytes() == flipped(H, 5), "the older failure is replaced"
    out = evaluate(ctx, text, Engine(dumps()), monkeypatch)
    assert out.verdict == "PASS" and "kept" not in out.details and not (ctx.report_dir / "work" / "Q1").exists()
    assert out.details["seconds"] >= 0


def test_internal_error_is_a_fail_with_a_log(ctx, monkeypatch):
    def broken(name, argv, env):
        raise RuntimeError("planted")
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(broken), monkeypatch)
    assert out.verdict == "FAIL" and out.reason == "internal error: RuntimeError: planted (see internal-error.txt)"
    assert "RuntimeError: planted" in (ctx.report_dir / "logs" / "Q1" / "internal-error.txt").read_text()


def test_timeout_and_placeholders_reach_the_engine(ctx, monkeypatch):
    """A criterion's timeout_s, else engine.yaml's run timeout (20 s here), and the placeholders'
    values, as the engine's argv."""
    text = RUN.replace("args: [selftest]", 'args: [selftest, "{engine_dir}", "{engine}", "{work}"]')
    good = {"selftest": {"stdout": "ok\n3 passed, 0 failed\n"},
            "info": {"rc": 1, "stdout": json.dumps({"cuda": {"compiled": True, "bound": False}})}}
    eng = Engine(lambda n, a, e: good[n])
    evaluate(ctx, text, eng, monkeypatch)
    bins = Path(ctx.ensure_build("default").bin_dir)
    work = ctx.report_dir / "work" / "R1" / "selftest"
    assert eng.calls[0][1] == [str(bins / "kite"), "selftest", str(bins), str(bins / "kite"), str(work)]
    assert eng.timeouts == [20, 20]
    eng = Engine(lambda n, a, e: good[n])
    evaluate(ctx, text.replace("    kind: run", "    kind: run\n    timeout_s: 7"), eng, monkeypatch)
    assert eng.timeouts == [7, 7]


@pytest.mark.parametrize("text,problem", [
    # the whole line of the match, not the match alone: it names the claim that failed
    ("model m.gguf\nFAIL q4_over_q8: 1.040 < 1.5 (rounds 1.09, 1.02)\nPASS tok_s: 2700 >= 2600\n",
     "out has /^FAIL /: 'FAIL q4_over_q8: 1.040 < 1.5 (rounds 1.09, 1.02)'"),
    ("last line FAIL here", "out has /FAIL/: 'last line FAIL here'"),
    ("x\n" + "FAIL " + "y" * 300 + "\n", "out has /^FAIL /: 'FAIL " + "y" * 155 + "'"),
    # the line starts after the last newline before the match, not the first
    ("a\nb\nsecret on line 3\nd", "out has /secret/: 'secret on line 3'"),
    # an empty first line: the quote is that line, empty, not the next one
    ("\nsecond line", "out has /^$/: ''"),
])
def test_pattern_problems_quote_the_matching_line(text, problem):
    must_not = [problem.split("/")[1]]
    assert runner.pattern_problems(text, [], must_not, "out") == [problem]
    assert runner.pattern_problems(text, [r"^nothing$"], [], "out") == ["out lacks /^nothing$/"]


# ---- what the report keeps, exactly (details, labels, messages) -------------------------------

def test_ab_details_name_everything(ctx, monkeypatch):
    """Each side's metric read from its own field; details hold the spec, each run's costs, and the
    interval and stability computed from the pairs with the criterion's confidence, resamples and seed."""
    ms = {"a": [12.0, 13.0, 11.0, 12.5, 14.0, 12.2], "b": [10.0, 10.5, 9.5, 10.1, 10.9, 9.9]}
    calls = {"a": 0, "b": 0}

    def plan(name, argv, env):
        side = env["SIDE"]
        i = calls[side]
        calls[side] += 1
        other = "b" if side == "a" else "a"
        return {"stdout": json.dumps({"timings": {f"{side}_ms": ms[side][i], f"{other}_ms": 999.0},
                                      "counters": {"steps": 1}})}
    text = AB.replace("EXTRA", "warmups: 0\n    order: AB").replace("pairs: 3", "pairs: 6")
    text = text.replace("    metric: {field: timings.request_ms, reduce: min}\n",
                        "    metric_a: {field: timings.a_ms, reduce: min}\n    metric_b: {field: timings.b_ms}\n")
    text = text.replace("bootstrap: {resamples: 200, seed: 1}", "bootstrap: {resamples: 300, seed: 7}")
    out = evaluate(ctx, text, Engine(plan), monkeypatch)
    d = out.details
    assert (d["pass_if"], d["ratio"], d["order"]) == ("ci_lower >= 1.1", "a/b", "AB")
    assert (d["metric_a"], d["metric_b"]) == ({"field": "timings.a_ms", "reduce": "min"},
                                              {"field": "timings.b_ms", "reduce": "median"})
    cost = {"wall_s": 0.01, "cpu_s": 0.01, "peak_rss_mb": 1.0}
    assert d["runs"][:2] == [{"pair": 1, "side": "A", "metric": 12.0, **cost},
                             {"pair": 1, "side": "B", "metric": 10.0, **cost}]
    ratios = [p["ratio"] for p in d["pairs"]]
    assert ratios == [a / b for a, b in zip(ms["a"], ms["b"], strict=True)]
    st = timing.bootstrap_median_ci(ratios, 0.95, 300, 7)
    assert d["stats"] == vars(st)
    assert st != timing.bootstrap_median_ci(ratios, 0.95, 300, 8), "the seed moves this interval"
    assert d["stability"] == vars(timing.stability(ratios, 1.1, None))


def test_ab_unstable_note_in_the_reason(ctx, monkeypatch):
    """Pairs that spread more than the limit, and an A/A floor that reaches the threshold, are named;
    the floor's interval uses the criterion's resamples and seed."""
    seq = iter([30.0, 10.0, 10.0, 14.0, 11.0, 10.0] + [10.0, 9.0, 10.0, 11.5, 10.0, 10.2])

    def plan(name, argv, env):
        return {"stdout": json.dumps({"timings": {"request_ms": next(seq)}, "counters": {"steps": 1}})}
    text = AB.replace("EXTRA", "warmups: 0\n    noise_floor: true\n    order: AB").replace('"ci_lower >= 1.1"',
                                                                                       '"median >= 1.0"')
    out = evaluate(ctx, text, Engine(plan), monkeypatch)
    ratios = [p["ratio"] for p in out.details["pairs"]]
    assert ratios == [3.0, 10.0 / 14.0, 1.1]
    aa = [p["ratio"] for p in out.details["noise_floor"]["pairs"]]
    assert aa == [10.0 / 9.0, 10.0 / 11.5, 10.0 / 10.2]
    floor = timing.bootstrap_median_ci(aa, 0.95, 200, 1)
    assert floor != timing.bootstrap_median_ci(aa, 0.95, 200, 2), "the seed moves this interval"
    assert out.details["noise_floor"] == {**vars(floor), "pairs": out.details["noise_floor"]["pairs"]}
    stab = timing.stability(ratios, 1.0, floor)
    assert not stab.stable and len(stab.reasons) == 2
    assert out.verdict == "PASS"
    assert out.reason.endswith(f"pass if median >= 1; {stab.note()}"), out.reason
    assert out.details["stability"] == vars(stab)


def test_same_run_details_and_labels(ctx, monkeypatch):
    eng = Engine(timed({"a": [10.5, 10.0, 9.0, 11.0]}))
    out = evaluate(ctx, SAME.replace("EXTRA", "warmups: 0"), eng, monkeypatch)
    assert out.details["runs"] == [{"pair": i, "side": "AB", "wall_s": 0.01, "cpu_s": 0.01, "peak_rss_mb": 1.0}
                                   for i in (1, 2, 3)]
    assert [p["pair"] for p in out.details["pairs"]] == [1, 2, 3]
    for metric, label in (("metric_a", "run 1 A"), ("metric_b", "run 1 B")):
        text = SAME.replace("EXTRA", "warmups: 0").replace(f"{metric}: {{field: timings.request_ms",
                                                           f"{metric}: {{field: timings.absent")
        out = evaluate(ctx, text, Engine(timed({"a": [10.5, 10.0]})), monkeypatch)
        assert out.reason == f"{label}: metric field timings.absent missing from meta.json"


def test_timed_run_messages(ctx, monkeypatch):
    big = runner.KEEP_WHOLE + 1

    def huge(name, argv, env):
        return {"stdout": "{}"}
    real = Engine(huge)

    def engine(argv, env=None, **kw):
        r = real(argv, env, **kw)
        r.stdout_bytes = big
        return r
    (crit,) = schema.load_text(AB.replace("EXTRA", "warmups: 0"), "regressions/t.yaml", BUILDS, DUMPS)
    monkeypatch.setattr(runner, "run_process", engine)
    out = runner.evaluate(ctx, crit)
    assert out.reason == (f"pair1.A: stdout is {big} bytes, too large to be the JSON meta object (at most "
                          f"{runner.KEEP_WHOLE} bytes are read; the whole output is in the log)")
    text = AB.replace("EXTRA", "warmups: 0").replace('preconditions: {counters.steps: ">0"}',
                                                     'preconditions: {counters.steps: ">0", counters.x: 1}')
    out = evaluate(ctx, text, Engine(timed({"a": 12.0, "b": 10.0}, steps=0)), monkeypatch)
    assert out.reason == ("vacuous: pair1.B (variant b): precondition failed: counters.steps = 0, wanted >0; "
                          "counters.x: field missing"), out.reason


def _proc(stdout="", stderr="", rc=0, **kw) -> ProcResult:
    return ProcResult(["kite"], {}, rc, kw.pop("signal", None), kw.pop("timed_out", False), 0.1, 0.1, 1.0, None, None,
                      stdout=stdout, stderr=stderr, **kw)


def test_check_run_messages_exact():
    from harness.contract import criteria as C

    six = "".join(f"FAIL t{i}\n" for i in range(6))
    assert runner.check_run(_proc(six + "0 passed, 6 failed\n"), C.Expect(passes_min=0), {}) == [
        "6 failed: FAIL t0 | FAIL t1 | FAIL t2 | FAIL t3 | FAIL t4"]
    assert runner.check_run(_proc("0 passed, 1 failed\n"), C.Expect(passes_min=0), {}) == ["1 failed"]
    # stdout and stderr are matched as two blocks of lines
    assert runner.check_run(_proc("ok", "done"), C.Expect(must_match=["^ok$", "^done$"]), {}) == []
    assert runner.check_run(_proc(error="cannot start kite: not found"), C.Expect(), {}) == [
        "cannot start kite: not found"]
    assert runner.check_run(_proc(timed_out=True), C.Expect(), {}) == ["timed out after 0.1 s (killed)"]
    cut = runner.KEEP_WHOLE + 5
    for out_bytes, err_bytes in ((cut, 3), (3, cut)):
        r = _proc("head", "", stdout_bytes=out_bytes, stderr_bytes=err_bytes)
        assert runner.check_run(r, C.Expect(must_match=["^a", "^b"]), {}) == [
            "output lacks /^a/",
            f"output lacks /^b/ (output of {out_bytes + err_bytes} bytes: matched against the first and last "
            "megabytes of each stream kept in memory)"]
    assert runner.check_run(_proc("{}", stdout_bytes=cut), C.Expect(json={"a": 1}), {}) == [
        f"stdout is {cut} bytes, too large to read as JSON (at most {runner.KEEP_WHOLE})"]


def test_pattern_problems_search_every_line():
    assert runner.pattern_problems("ok\nsecret here", [], ["^secret"], "text") == [
        "text has /^secret/: 'secret here'"]


def test_run_kind_names_cases_and_counts(ctx, monkeypatch):
    text = RUN.replace('args: [selftest]', 'args: [selftest, --model, "{model}", "{n}"]') + \
        '    cases: [{n: "1"}, {n: "2"}]\n'
    good = {"selftest": {"stdout": "ok\n3 passed, 0 failed\n"},
            "info": {"rc": 1, "stdout": json.dumps({"cuda": {"compiled": True, "bound": False}})}}
    eng = Engine(lambda n, a, e: good[n.split(".")[0]])
    out = evaluate(ctx, text, eng, monkeypatch)
    assert eng.names == ["selftest.case0", "info.case0", "selftest.case1", "info.case1"]
    assert eng.calls[0][1][1:] == ["selftest", "--model", str(ctx.cfg.root / "models" / "tiny.gguf"), "1"]
    assert out.reason == "4 runs as expected"
    one = RUN.split("      - name: info")[0]
    out = evaluate(ctx, one, Engine(lambda n, a, e: good["selftest"]), monkeypatch)
    assert out.reason == "1 run as expected"
    out = evaluate(ctx, one, Engine(lambda n, a, e: {"rc": 3, "stderr": "boom: at x: y"}), monkeypatch)
    assert out.reason == ("selftest: exit status 3: boom: at x: y (expected 0); no closing line 'N passed, M failed'; "
                          "output lacks /^ok$/")
    assert out.details["runs"][0]["ended"] == "exit status 3"


def test_artifact_build_cases_and_no_model(ctx, monkeypatch):
    """An artifact criterion uses its own build, never asks for a model, and counts its checks."""
    asked = []
    b = ctx.ensure_build("default")
    ctx.ensure_build = lambda name: asked.append(name) or b

    def no_model(spec):
        raise AssertionError("an artifact criterion needs no model")
    ctx.model_path = no_model
    text = ART.replace("kind: artifact", "kind: artifact\n    build: stub").replace(
        "      - {path: \"{bin}/nothing\", exists: false}\n", "")
    out = evaluate(ctx, text, Engine(lambda n, a, e: {}), monkeypatch)
    assert asked == ["stub"] and out.verdict == "PASS" and out.reason == "1 file check hold"
    out = evaluate(ctx, text.replace("^eng", "^motor"), Engine(lambda n, a, e: {}), monkeypatch)
    assert out.reason == "kite: text lacks /^motor/"


@pytest.mark.parametrize("shape, words", [
    ([0, 3], "variant a: dump h_out.f32: 24 bytes but meta.json shape [0, 3] of f32 needs 0 (truncated"),
    ([2**53 - 1, 1], f"variant a: dump h_out.f32: 24 bytes but meta.json shape [{2**53 - 1}, 1] of f32 needs "
     f"{(2**53 - 1) * 4} (truncated"),
    ([2**53, 1], f"variant a: meta.json shapes.h_out = [{2**53}, 1] is not a list of non-negative integers"),
])
def test_equivalence_shape_bounds(ctx, monkeypatch, shape, words):
    meta = {"shapes": {"h_out": shape, "logits": [2, 2]}, "counters": {"steps": 1}}
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps(meta=meta)), monkeypatch)
    assert out.reason.startswith(words), out.reason


# ---- check_file against planned binary facts (every message exact) ----------------------------

def _sym(name: str, defined: bool = True, binding: str = "GLOBAL", vis: str = "DEFAULT") -> Symbol:
    return Symbol(name, defined, binding, "FUNC", vis)


PLANNED = BinaryInfo("elf", needed=["libm.so.6", "libcudart.so.13", "libc.so.6"], symbols=[
    _sym("kcuda_a"), _sym("kcuda_b"), _sym("_init"), _sym("zeta_x"), _sym("kcuda_w", binding="WEAK", vis="PROTECTED"),
    _sym("hidden_h", vis="HIDDEN"), _sym("local_l", binding="LOCAL"), _sym(""), _sym("", defined=False),
    *[_sym(n, defined=False) for n in ("cudaSync", "cudaMalloc", "cudaFree", "cudaStream", "cudaMemcpy",
                                       "cudaLaunch", "printf")]])
PLANNED_FACTS = ["elf; needed: libm.so.6, libcudart.so.13, libc.so.6", "4 exports"]
CUDA5 = "cudaFree, cudaLaunch, cudaMalloc, cudaMemcpy, cudaStream"


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """A file whose binary facts are PLANNED (read_binary planted), with two lines of text."""
    p = tmp_path / "libplanned.so"
    p.write_text("engine v1\nsecret key\n")
    monkeypatch.setattr(runner, "read_binary", lambda path: PLANNED if Path(path) == p else read_binary(path))
    return p


def test_check_file_planned_all_hold(planned):
    fc = FileCheck(path="x", needed_match=["^libc\\.", "^libm\\."], needed_not_match=["^libvulkan"],
                     symbols_not_match=["^secret"], undefined_not_match=["^nccl"],
                     exports_exactly=["kcuda_a", "kcuda_b", "kcuda_w", "zeta_x"], exports_match="^(kcuda_|zeta_)",
                     text_match=["^engine"], text_not_match=["^public"])
    assert runner.check_file(fc, planned, ["_init"]) == ([], PLANNED_FACTS)


def test_check_file_planned_every_problem(planned):
    fc = FileCheck(path="x", needed_match=["^libvulkan", "^libc\\."], needed_not_match=["^lib(m|c)\\.", "^libcuda"],
                     symbols_not_match=["^cuda", "^(hidden|local)_"], undefined_not_match=["^cuda", "^print", "^x"],
                     exports_exactly=["kcuda_a", "kcuda_gone"], exports_match="^kcuda_",
                     text_match=["^engine v2"], text_not_match=["^secret"])
    assert runner.check_file(fc, planned, ["_init"]) == ([
        "no dependency matches /^libvulkan/",
        "depends on libm.so.6, libc.so.6 (must not match /^lib(m|c)\\./)",
        "depends on libcudart.so.13 (must not match /^libcuda/)",
        f"dynamic symbol(s) {CUDA5} match /^cuda/",
        "dynamic symbol(s) hidden_h, local_l match /^(hidden|local)_/",
        f"undefined symbol(s) {CUDA5} match /^cuda/",
        "undefined symbol(s) printf match /^print/",
        "unexpected exports: kcuda_b, kcuda_w, zeta_x",
        "missing exports: kcuda_gone",
        "exports not matching /^kcuda_/: zeta_x",
        "text lacks /^engine v2/",
        "text has /^secret/: 'secret key'",
    ], PLANNED_FACTS)
    # _init is an export unless ignored; no exports expected at all is a check too
    assert runner.check_file(FileCheck(path="x", exports_exactly=[]), planned, []) == (
        ["unexpected exports: _init, kcuda_a, kcuda_b, kcuda_w, zeta_x"],
        [PLANNED_FACTS[0], "5 exports"])


@pytest.mark.parametrize("field, value", [
    ("needed_match", ["^libm"]), ("needed_not_match", ["^nothing"]), ("symbols_not_match", ["^nothing"]),
    ("undefined_not_match", ["^nothing"]), ("exports_exactly", ["kcuda_a", "kcuda_b", "kcuda_w", "zeta_x"]),
    ("exports_match", "^(kcuda|zeta)_")])
def test_check_file_any_binary_check_reads_the_binary(planned, field, value):
    assert runner.check_file(FileCheck(path="x", **{field: value}), planned, ["_init"]) == ([], PLANNED_FACTS)
    # without a binary check, the binary is not read at all
    assert runner.check_file(FileCheck(path="x", text_match=["^engine"]), planned, ["_init"]) == ([], [])


def test_check_file_lists_at_most_ten_names(tmp_path, monkeypatch):
    p = tmp_path / "many.so"
    p.write_bytes(b"x")
    names = [f"e{i:02d}" for i in range(12)]
    info = BinaryInfo("pe", needed=[], symbols=[_sym(n) for n in names] + [_sym(f"u{i}", defined=False)
                                                                            for i in range(7)])
    monkeypatch.setattr(runner, "read_binary", lambda path: info)
    fc = FileCheck(path="x", exports_exactly=[], exports_match="^nothing$", undefined_not_match=["^u"])
    assert runner.check_file(fc, p, []) == ([
        "undefined symbol(s) u0, u1, u2, u3, u4 match /^u/",
        f"unexpected exports: {', '.join(names[:10])}",
        f"exports not matching /^nothing$/: {', '.join(names[:10])}",
    ], ["pe; needed: -", "12 exports"])


@pytest.mark.parametrize("error", [BinaryFormatError("neither ELF nor PE"), OSError("planted read error")])
def test_check_file_unreadable_binary(tmp_path, monkeypatch, error):
    p = tmp_path / "lib.so"
    p.write_bytes(b"x")

    def fail(path):
        raise error
    monkeypatch.setattr(runner, "read_binary", fail)
    assert runner.check_file(FileCheck(path="x", needed_match=["x"]), p, []) == (
        [f"lib.so: cannot read as a binary: {error}"], [])


def test_check_file_presence(tmp_path):
    p = tmp_path / "f"
    assert runner.check_file(FileCheck(path="x"), p, []) == ([f"{p} does not exist"], ["absent"])
    assert runner.check_file(FileCheck(path="x", exists=False), p, []) == ([], ["absent"])
    p.write_text("x")
    assert runner.check_file(FileCheck(path="x", exists=False), p, []) == ([f"{p} exists but must not"], ["present"])
    assert runner.check_file(FileCheck(path="x"), p, []) == ([], [])


# ---- equivalence: cases, each side's shape, what a failure keeps --------------------------------

def test_equivalence_case_tags_folders_and_runs(ctx, monkeypatch):
    text = EQ.replace("MODE", "mode: memcmp") + '    cases: [{n: "1", m: x}]\n'
    out = evaluate(ctx, text, Engine(dumps({"b": flipped(H, 0)})), monkeypatch)
    assert out.reason.startswith("b vs a [n=1,m=x], h_out: 1 of 6"), out.reason
    assert [(r["variant"], r["case"]) for r in out.details["runs"]] == [("a", "n=1,m=x"), ("b", "n=1,m=x")]
    assert out.details["kept"] == "failed/Q1"
    assert (ctx.report_dir / "failed" / "Q1" / "case0" / "b" / "dump" / "h_out.f32").read_bytes() == flipped(H, 0)
    out = evaluate(ctx, text, Engine(lambda n, a, e: {"rc": 2, "stderr": "no"}), monkeypatch)
    assert out.reason == "variant a [n=1,m=x]: engine exit status 2: no"


def test_equivalence_each_side_has_its_shape(ctx, monkeypatch):
    def plan(b_meta):
        base = dumps()

        def p(name, argv, env):
            out = base(name, argv, env)
            if env["SIDE"] == "b":
                out["files"]["meta.json"] = json.dumps(b_meta).encode()
            return out
        return p
    text = EQ.replace("MODE", "mode: memcmp")
    out = evaluate(ctx, text, Engine(plan({"shapes": {"h_out": [2, 4], "logits": [2, 2]}})), monkeypatch)
    assert out.reason.startswith("variant b: dump h_out.f32: 24 bytes but meta.json shape [2, 4] of f32 needs 32"), \
        out.reason
    out = evaluate(ctx, text, Engine(plan({"shapes": {"h_out": [2, "x"], "logits": [2, 2]}})), monkeypatch)
    assert out.reason == "variant b: meta.json shapes.h_out = [2, 'x'] is not a list of non-negative integers"
    assert [r["variant"] for r in out.details["runs"]] == ["a", "b"]


def test_equivalence_row_is_the_last_dimension(ctx, monkeypatch):
    meta = {"shapes": {"h_out": [1, 2, 3], "logits": [2, 2]}, "counters": {"steps": 1}}
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps({"b": flipped(H, 16)}, meta=meta)),
                   monkeypatch)
    assert "first at index 4 (position 1, element 1)" in out.reason, out.reason


def test_equivalence_max_ulp_is_applied(ctx, monkeypatch):
    out = evaluate(ctx, EQ.replace("MODE", "mode: tolerance, max_ulp: 0"), Engine(dumps({"b": flipped(H, 0)})),
                   monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith("b vs a, h_out: outside tolerance (max ULP 1 > 0)")


def test_equivalence_failures_keep_the_runs(ctx, monkeypatch):
    def meta_dir(name, argv, env):
        d = Path(argv[argv.index("--dump") + 1])
        (d / "meta.json").mkdir(parents=True)
        return {}

    def no_dump(name, argv, env):
        return {"files": {"meta.json": b'{"counters": {"steps": 1}}', "h_out.f32": H}}
    text = EQ.replace("MODE", "mode: memcmp")
    for plan, reason in ((meta_dir, "variant a: meta.json: is a directory, not a regular file"),
                         (lambda n, a, e: {"files": {"h_out.f32": H}}, "variant a: meta.json missing from the dump folder"),
                         (no_dump, "variant a: dump logits.f32 missing"),
                         (dumps(meta=b"{"), None)):
        out = evaluate(ctx, text, Engine(plan), monkeypatch)
        if reason:
            assert out.reason == reason
        assert [r["variant"] for r in out.details["runs"]] == ["a"], out.reason


def test_engine_only_layout_copies_the_engine_and_its_files(ctx, tmp_path):
    bins = Path(ctx.ensure_build("default").bin_dir)
    (bins / "libextra.so").write_text("extra")
    var = runner.C.Variant("solo", layout="engine_only", args=["run"], place={"libkite_cuda.so": "{bin}/libextra.so"})
    crit = schema.load_text(RUN, "regressions/t.yaml", BUILDS, DUMPS)[0]
    work = tmp_path / "w"
    (work / "engine").mkdir(parents=True)
    (work / "engine" / "stale").write_text("left by an earlier run")
    p = runner.prepare(ctx, crit, var, work, {})
    assert p.argv == [str(work / "engine" / "kite"), "run"] and p.engine == work / "engine" / "kite"
    assert sorted(f.name for f in (work / "engine").iterdir()) == ["kite", "libkite_cuda.so"]
    assert (work / "engine" / "kite").read_text() == "engine"
    assert (work / "engine" / "libkite_cuda.so").read_text() == "extra"
    missing = runner.C.Variant("solo", layout="engine_only", args=["run"], place={"x.so": "{bin}/nothing.so"})
    with pytest.raises(runner.CriterionFail) as e:
        runner.prepare(ctx, crit, missing, work, {})
    assert e.value.reason == f"variant solo: `place` source {bins / 'nothing.so'} not found"
    (bins / "kite").unlink()
    with pytest.raises(runner.CriterionFail) as e:
        runner.prepare(ctx, crit, var, work, {})
    assert e.value.reason == f"variant solo: engine {bins / 'kite'} not found"


def test_model_is_resolved_only_when_an_argument_uses_it(ctx, monkeypatch):
    def no_model(spec):
        raise AssertionError("no argument names {model}")
    ctx.model_path = no_model
    text = EQ.replace("MODE", "mode: memcmp").replace('args: [run, --model, "{model}", --steps, "2"]',
                                                      'args: [run, --steps, "2"]')
    out = evaluate(ctx, text, Engine(dumps()), monkeypatch)
    assert out.verdict == "PASS", out.reason


def test_equivalence_nmse_nan_and_failure_count(ctx, monkeypatch):
    near = f32(1.0, 2.0, 3.0, 4.0, 5.0, 6.5)
    out = evaluate(ctx, EQ.replace("MODE", "mode: tolerance, nmse: 0.001"), Engine(dumps({"b": near})), monkeypatch)
    assert out.verdict == "FAIL" and out.reason.startswith("b vs a, h_out: outside tolerance (NMSE 0.00275 > 0.001)")
    assert out.reason.endswith("NMSE 0.00275"), "one failure: no count"
    nan = f32(1.0, 2.0, float("nan"), 4.0, 5.0, 6.0)
    text = EQ.replace("MODE", "mode: memcmp, allow_nan: true")
    assert evaluate(ctx, text, Engine(dumps({"a": nan, "b": nan})), monkeypatch).verdict == "PASS"
    two = EQ.replace("MODE", "mode: memcmp").replace("      - {name: b, env: {SIDE: b}}",
                                                     "      - {name: b, env: {SIDE: b}}\n      - {name: c, env: {SIDE: c}}")
    out = evaluate(ctx, two, Engine(dumps({"b": flipped(H, 0), "c": flipped(H, 4)})), monkeypatch)
    assert out.reason.startswith("b vs a, h_out: 1 of 6") and out.reason.endswith(" (+1 more)"), out.reason


def test_run_timeout_and_log_place(ctx, monkeypatch):
    seen = []

    def engine(argv, env=None, *, timeout=0.0, log_prefix=None, **kw):
        seen.append((timeout, log_prefix))
        return ProcResult(list(argv), {}, 0, None, False, 0.01, 0.01, 1.0, None, None, stdout="ok\n3 passed, 0 failed\n")
    monkeypatch.setattr(runner, "run_process", engine)
    one = RUN.split("      - name: info")[0]
    runner.evaluate(ctx, schema.load_text(one, "regressions/t.yaml", BUILDS, DUMPS)[0])
    assert seen == [(20.0, ctx.report_dir / "logs" / "R1" / "selftest")], "engine.yaml's run timeout"
    ctx.cfg = dataclasses.replace(ctx.cfg, timeouts={})
    runner.evaluate(ctx, schema.load_text(one, "regressions/t.yaml", BUILDS, DUMPS)[0])
    assert seen[-1][0] == 180.0, "the default when engine.yaml names none"
    runner.evaluate(ctx, schema.load_text(one.replace("kind: run", "kind: run\n    timeout_s: 5"),
                                          "regressions/t.yaml", BUILDS, DUMPS)[0])
    assert seen[-1][0] == 5.0


def test_a_case_value_that_climbs_out_of_work_fails(ctx, monkeypatch):
    text = RUN.split("      - name: info")[0].replace("args: [selftest]", 'args: [selftest, "{work}/{n}"]') + \
        '    cases: [{n: "../../escape"}]\n'
    out = evaluate(ctx, text, Engine(lambda n, a, e: {}), monkeypatch)
    work = ctx.report_dir / "work" / "R1" / "selftest.case0"
    assert out.reason == (f"variant selftest: '{{work}}/{{n}}' resolves to {(work / '../../escape').resolve()}, "
                          f"outside its work folder {work}: a path built from {{work}} must stay inside it")


def test_launcher_maps_paths_but_not_case_values(ctx, monkeypatch):
    ctx.launcher = runner.Launcher(["wine"], lambda p: "Z:" + p)
    eng = Engine(lambda n, a, e: {"stdout": "ok\n3 passed, 0 failed\n"})
    text = RUN.split("      - name: info")[0].replace("args: [selftest]", 'args: [selftest, "{bin}", "{n}"]') + \
        '    cases: [{n: "/plain"}]\n'
    out = evaluate(ctx, text, eng, monkeypatch)
    bins = ctx.ensure_build("default").bin_dir
    assert out.verdict == "PASS", out.reason
    assert eng.calls[0][1] == ["wine", f"{bins}/kite", "selftest", f"Z:{bins}", "/plain"]


def test_wrapper_and_env_are_substituted(ctx, monkeypatch):
    eng = Engine(lambda n, a, e: {"stdout": "ok\n3 passed, 0 failed\n"})
    text = RUN.split("      - name: info")[0].replace(
        "args: [selftest]", 'args: [selftest]\n        wrapper: [vg, "--log={work}/vg.log"]\n'
                            '        env: {OUT: "{work}/o", "{env.graph}": "1"}')
    ctx.cfg = dataclasses.replace(ctx.cfg, env_names={"graph": "KITE_GRAPH"})
    (crit,) = schema.load_text(text, "regressions/t.yaml", BUILDS, DUMPS, env_names=["graph"])
    monkeypatch.setattr(runner, "run_process", eng)
    assert runner.evaluate(ctx, crit).verdict == "PASS"
    work = ctx.report_dir / "work" / "R1" / "selftest"
    assert eng.calls[0][1] == ["vg", f"--log={work}/vg.log", f"{ctx.ensure_build('default').bin_dir}/kite", "selftest"]
    assert eng.calls[0][2] == {"OUT": f"{work}/o", "KITE_GRAPH": "1"}


def test_internal_error_log_beside_existing_logs_and_seconds(ctx, monkeypatch):
    (ctx.report_dir / "logs" / "Q1").mkdir(parents=True)

    def broken(name, argv, env):
        raise RuntimeError("planted")
    t0 = time.perf_counter()
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(broken), monkeypatch)
    took = time.perf_counter() - t0
    assert out.reason == "internal error: RuntimeError: planted (see internal-error.txt)"
    assert 0 <= out.details["seconds"] <= took


def test_a_failed_cleanup_does_not_change_the_verdict(ctx, monkeypatch):
    real = shutil.rmtree

    def rmtree(path, ignore_errors=False, **kw):
        if Path(path).name == "Q1" and not ignore_errors:
            raise OSError("planted: cannot remove")
        return real(path, ignore_errors=ignore_errors, **kw)
    monkeypatch.setattr(runner.shutil, "rmtree", rmtree)
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps()), monkeypatch)
    assert out.verdict == "PASS", out.reason


def test_internal_error_log_is_utf8_under_an_ascii_locale(ctx, monkeypatch, tmp_path):
    """The log of an internal error is written as UTF-8 whatever the locale: a non-ASCII message
    is kept, in a Python whose locale encoding is ASCII."""
    def broken(name, argv, env):
        raise RuntimeError("na\u00efve")
    # the same call in this process first (so that the mutation run sees this test reach it)
    evaluate(ctx, RUN, Engine(broken), monkeypatch)
    assert "naïve" in (ctx.report_dir / "logs" / "R1" / "internal-error.txt").read_text(encoding="utf-8")
    code = textwrap.dedent(f"""
        import sys; from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from conftest import ENGINE_YAML
        from harness.builder.cmake import BuildResult, PartResult
        from harness.run import runner
        from harness.run.probes import Probes
        from harness.contract import schema
        from harness.contract.config import load_config
        root = Path(sys.argv[1]); (root / "configs").mkdir(parents=True)
        (root / "configs" / "engine.yaml").write_text(ENGINE_YAML)
        b = BuildResult("default", str(root), str(root / "kite"), str(root / "m.so"), PartResult("prebuilt"),
                        PartResult("skipped"))
        ctx = runner.Context(cfg=load_config(root), report_dir=root / "report", probes=Probes(gpu_info=lambda: None),
                             ensure_build=lambda name: b, model_path=lambda spec: root / "m.gguf",
                             progress=lambda s: None)
        def broken(*a, **k):
            raise RuntimeError("na\\u00efve")
        runner.run_process = broken
        (crit,) = schema.load_text({RUN!r}, "regressions/t.yaml", {BUILDS!r}, {DUMPS!r})
        print(ascii(runner.evaluate(ctx, crit).reason))
    """)
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ascii")], env=env, capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parent.parent, timeout=60)
    assert r.returncode == 0, r.stderr[-1500:]
    assert r.stdout.strip() == "'internal error: RuntimeError: na\\xefve (see internal-error.txt)'"
    log = tmp_path / "ascii" / "report" / "logs" / "R1" / "internal-error.txt"
    assert "RuntimeError: naïve" in log.read_text(encoding="utf-8")


PLACES = ["{bin}", "{module}", "{testmods}", "{build}", "{root}", "{work}", "{nonexistent}", "{engine}",
          "{engine_dir}", "{model}"]


@pytest.mark.parametrize("status", ["built", "up-to-date", "prebuilt"])
def test_every_placeholder_value(ctx, monkeypatch, status):
    b = ctx.ensure_build("default")
    bins = Path(b.bin_dir)
    built = BuildResult("default", str(bins), str(bins / "kite"), str(bins / "libkite_cuda.so"), PartResult(status),
                        PartResult("skipped"))
    ctx.ensure_build = lambda name: built
    eng = Engine(lambda n, a, e: {"stdout": "ok\n3 passed, 0 failed\n"})
    text = RUN.split("      - name: info")[0].replace("args: [selftest]", f"args: [{', '.join(map(repr, PLACES))}]")
    out = evaluate(ctx, text, eng, monkeypatch)
    assert out.verdict == "PASS", out.reason
    root, work = ctx.cfg.root, ctx.report_dir / "work" / "R1" / "selftest"
    build = root / "build" / "default" if status == "prebuilt" else bins.parent
    assert eng.calls[0][1][1:] == [str(bins), str(bins / "libkite_cuda.so"), str(bins / "testmods"), str(build),
                                   str(root), str(work), str(work / "nonexistent" / "no-such-file"), str(bins / "kite"),
                                   str(bins), str(root / "models" / "tiny.gguf")]


@pytest.mark.parametrize("log, reason", [(None, "build 'default' failed: cmake said no"),
                                         ("/b/build.log", "build 'default' failed: cmake said no (log: /b/build.log)")])
def test_a_failed_build_fails_the_criterion(ctx, monkeypatch, log, reason):
    b = ctx.ensure_build("default")
    ctx.ensure_build = lambda name: BuildResult("default", b.bin_dir, b.engine_path, b.module_path,
                                                PartResult("failed", "cmake said no", log), PartResult("skipped"))
    eng = Engine(lambda n, a, e: {})
    out = evaluate(ctx, RUN, eng, monkeypatch)
    assert (out.verdict, out.reason, eng.calls) == ("FAIL", reason, [])


def test_engine_only_placeholders_name_the_copy(ctx, tmp_path):
    var = runner.C.Variant("solo", layout="engine_only", args=["run", "{engine}", "{engine_dir}"])
    crit = schema.load_text(RUN, "regressions/t.yaml", BUILDS, DUMPS)[0]
    p = runner.prepare(ctx, crit, var, tmp_path / "w", {})
    edir = tmp_path / "w" / "engine"
    assert p.argv == [str(edir / "kite"), "run", str(edir / "kite"), str(edir)]


def test_model_and_binary_of_the_criterion_and_build(ctx, monkeypatch):
    ctx.model_path = lambda spec: Path("/models") / (spec["path"] if spec else "default.gguf")
    ctx.cfg.builds["default"] = dataclasses.replace(ctx.cfg.builds["default"], binary="kite.exe")
    eng = Engine(lambda n, a, e: {"stdout": "ok\n3 passed, 0 failed\n"})
    text = RUN.split("      - name: info")[0].replace("args: [selftest]", 'args: [selftest, "{model}"]').replace(
        "kind: run", "kind: run\n    model: m/x.gguf")
    evaluate(ctx, text, eng, monkeypatch)
    bins = ctx.ensure_build("default").bin_dir
    assert eng.calls[0][1] == [f"{bins}/kite.exe", "selftest", "/models/m/x.gguf"]


def test_equivalence_more_kept_facts(ctx, monkeypatch):
    text = EQ.replace("MODE", "mode: memcmp")
    out = evaluate(ctx, text, Engine(lambda n, a, e: {"rc": 3}), monkeypatch)
    assert out.reason == "variant a: engine exit status 3" and [r["variant"] for r in out.details["runs"]] == ["a"]
    two = text.replace('preconditions: {counters.steps: ">0"}', 'preconditions: {counters.steps: ">0", counters.x: 1}')
    meta = {"shapes": {"h_out": [2, 3], "logits": [2, 2]}, "counters": {"steps": 0}}
    out = evaluate(ctx, two, Engine(dumps(meta=meta)), monkeypatch)
    assert out.reason == ("vacuous: variant a: precondition failed: counters.steps = 0, wanted >0; counters.x: field "
                          "missing")
    long = list(range(1000, 1030))
    meta = {"shapes": {"h_out": long + ["x"], "logits": [2, 2]}, "counters": {"steps": 1}}
    out = evaluate(ctx, text, Engine(dumps(meta=meta)), monkeypatch)
    assert out.reason == (f"variant a: meta.json shapes.h_out = {str(long + ['x'])[:60]} is not a list of "
                          "non-negative integers")


def test_equivalence_reads_each_dump_as_its_dtype(ctx, monkeypatch):
    ctx.cfg.dumps["h_out"] = dataclasses.replace(ctx.cfg.dumps["h_out"], dtype="i32")
    nan = f32(1.0, 2.0, float("nan"), 4.0, 5.0, 6.0)
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps({"a": nan, "b": nan})), monkeypatch)
    assert out.verdict == "PASS", "a NaN's bits are an ordinary i32"


def test_check_run_names_the_last_pattern_of_cut_output():
    from harness.contract import criteria as C

    cut = runner.KEEP_WHOLE + 5
    r = _proc("head", "", stdout_bytes=cut)
    assert runner.check_run(r, C.Expect(must_match=["^a", "^b", "^c"]), {}) == [
        "output lacks /^a/", "output lacks /^b/",
        f"output lacks /^c/ (output of {cut} bytes: matched against the first and last megabytes of each stream kept "
        "in memory)"]


def test_check_file_text_alone_and_undecodable(planned):
    planned.write_bytes(b"engine \xff\xfe v1\n")
    assert runner.check_file(FileCheck(path="x", text_match=["^motor"]), planned, []) == (["text lacks /^motor/"], [])
    assert runner.check_file(FileCheck(path="x", text_not_match=["\ufffd"]), planned, []) == (
        ["text has /\ufffd/: 'engine \ufffd\ufffd v1'"], [])
    assert runner.check_file(FileCheck(path="x", exports_exactly=["kcuda_a", "x", "y"]), planned, ["_init"])[0] == [
        "unexpected exports: kcuda_b, kcuda_w, zeta_x", "missing exports: x, y"]


def test_artifact_ignores_engine_yaml_exports(ctx, monkeypatch):
    bins = Path(ctx.ensure_build("default").bin_dir)
    monkeypatch.setattr(runner, "read_binary", lambda path: PLANNED)
    text = ART.replace('{path: "{bin}/kite", exists: true, text_match: ["^eng"], text_not_match: ["secret"]}',
                       '{path: "{bin}/kite", exports_exactly: [kcuda_a, kcuda_b, kcuda_w, zeta_x]}')
    out = evaluate(ctx, text, Engine(lambda n, a, e: {}), monkeypatch)
    assert out.verdict == "PASS" and (bins / "kite").exists(), out.reason


@pytest.mark.parametrize("shape", [[0, 3], None], ids=["shape [0, 3]", "no shape"])
def test_equivalence_empty_dumps_are_vacuous(ctx, monkeypatch, shape):
    """Two empty dumps compare no element: a FAIL, never "identical bytes" (issue 35)."""
    meta = {"shapes": {"h_out": shape, "logits": [2, 2]}, "counters": {"steps": 1}}
    out = evaluate(ctx, EQ.replace("MODE", "mode: memcmp"), Engine(dumps({"a": b"", "b": b""}, meta=meta)), monkeypatch)
    assert out.verdict == "FAIL"
    assert out.reason == ("vacuous: variant a: dump h_out.f32 is empty" + (" (meta.json shape [0, 3])" if shape else "")
                          + ": no element to compare"), out.reason


# ---- A/B against another program of the same build (llama-bench beside the llama.cpp adapter) ----

AB_PROGRAM = """\
criteria:
  - id: T9
    title: the adapter within 5% of llama-bench
    kind: ab_timing
    a: {name: adapter, args: [run, --model, "{model}"]}
    b: {name: bench, program: llama-bench, args: [-m, "{model}", -o, json], preconditions: {0.n_gen: 16}}
    metric_a: {field: timings.decode_ms, reduce: median}
    metric_b: {field: 0.samples_ns, reduce: median, scale: 1.0e-6}
    ratio: b/a
    pairs: 2
    warmups: 0
    pass_if: "median >= 0.95"
    bootstrap: {resamples: 200, seed: 1}
"""


def test_ab_program_runs_the_builds_other_program_and_scales_its_metric(ctx, monkeypatch):
    bins = Path(ctx.ensure_build("default").bin_dir)
    (bins / "llama-bench").write_text("bench")

    def plan(name, argv, env):
        if Path(argv[0]).name == "llama-bench":
            return {"stdout": json.dumps([{"n_gen": 16, "samples_ns": [9.0e6, 10.0e6, 11.0e6]}])}
        return {"stdout": json.dumps({"timings": {"decode_ms": [10.0, 10.5]}})}

    eng = Engine(plan)
    out = evaluate(ctx, AB_PROGRAM, eng, monkeypatch)
    bench_calls = [c[1] for c in eng.calls if c[0].endswith(".B")]
    assert bench_calls and all(a[0] == str(bins / "llama-bench") and "--json" not in a for a in bench_calls)
    assert all(c[1][0] == str(bins / "kite") and c[1][-1] == "--json" for c in eng.calls if c[0].endswith(".A"))
    assert [(p["a"], p["b"]) for p in out.details["pairs"]] == [(10.25, 10.0), (10.25, 10.0)]
    assert out.verdict == "PASS", out.reason


def test_ab_program_missing_fails_with_its_path(ctx, monkeypatch):
    out = evaluate(ctx, AB_PROGRAM, Engine(lambda *a: {}), monkeypatch)
    assert out.verdict == "FAIL" and "program" in out.reason and "llama-bench not found" in out.reason
