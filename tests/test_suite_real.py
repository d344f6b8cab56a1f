"""The registered suites against the real engine (the CPU part of `verify`), and the self-check
with defects planted in the real engine's outputs.

`verify` here runs the repository's own registered criteria files exactly as `nox -s verify`
does. On a machine without a GPU the GPU criteria must SKIP with the reason; everything else
must pass. The self-check plants one defect at a time and shows that a verdict which passes
without it flips: a 1-ULP change in a dump, a run whose counters show no GPU step, a slowdown
through the engine's documented debug knob (KITE_DEBUG_STEP_DELAY_US), an A/A comparison (not
flagged), a criterion edited after registration, a module missing an export.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
SUITES = ["regressions/suite.yaml", "regressions/graph-default.yaml", "regressions/determinism.yaml"]
GPU_IDS = {"E2c", "E5", "E6", "E7", "E8a", "E8b", "E8c", "G1", "G2", "G3", "D4", "D5", "D6"}

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("cc") is None,
                       reason="cmake and a host C compiler are needed to build the engine"),
]


def harness(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built() -> None:
    r = harness("build", "default", "stub")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def results(report_dir: Path) -> dict[str, dict]:
    doc = json.loads((report_dir / "latest" / "report.json").read_text())
    return {r["id"]: r for r in doc["results"]}


def gpu_present() -> bool:
    out = subprocess.run([str(REPO / "build" / "default" / "bin" / "kite"), "info", "--json"],
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)["cuda"]["available"] is True


def test_registered_suites_cpu_part(built, tmp_path):
    """`verify` over the registered files: non-GPU criteria pass, GPU criteria SKIP with a reason
    (or run and pass where a GPU exists)."""
    # --strict in a git checkout (CI's clone): every registration used must be in a commit already
    strict = ["--strict"] if (REPO / ".git").exists() else []
    r = harness("verify", "--no-build", *strict, "--reports", str(tmp_path), *SUITES)
    res = results(tmp_path)
    assert r.returncode == 0, "\n".join(f"{k}: {v['verdict']} {v['reason']}" for k, v in res.items()
                                        if v["verdict"] == "FAIL")
    assert {"E1", "E2a", "E3", "E4a", "E4b", "D1", "D2", "D3"} <= set(res)
    for cid in ("E3", "E4b", "D1", "D2", "D3"):
        assert res[cid]["verdict"] == "PASS", (cid, res[cid]["reason"])
    if not gpu_present():
        for cid in GPU_IDS:
            assert res[cid]["verdict"] == "SKIP", (cid, res[cid])
            assert res[cid]["reason"].startswith("no GPU"), res[cid]["reason"]
    for v in res.values():
        assert v.get("exploratory") in (None, False), "every criterion in the suites is registered"


# ---- self-check: planted defects flip verdicts -------------------------------------------------

EQ = """\
criteria:
  - id: SC
    title: two CPU runs give the same bytes
    kind: equivalence
    build: stub
    args: [run, --model, "{model}", --prompt, "3,1,4,1,5,9", --steps, "4"]
    variants:
      - {name: a, preconditions: {counters.cpu_steps: ">0"}}
      - {name: b, preconditions: {%s}}
    compare: {dumps: [h_out, logits], mode: memcmp}
"""

RUN = """\
criteria:
  - id: SC
    title: a module missing an export is refused whole, named in the note
    kind: run
    runs:
      - name: refused
        env: {KITE_CUDA_LIB: "%s"}
        args: [info, --json]
        expect: {json: {cuda.bound: false, cuda.note: "~kcuda_step_m"}}
"""


def verify_one(tmp_path: Path, name: str, text: str, register: bool = True) -> tuple[int, dict]:
    folder = tmp_path / name
    folder.mkdir()
    crit = folder / "sc.yaml"
    crit.write_text(textwrap.dedent(text))
    reg = folder / "registry.lock"
    if register:
        r = harness("register", str(crit), "--registry", str(reg))
        assert r.returncode == 0, r.stderr
    r = harness("verify", "--no-build", "--reports", str(folder / "reports"), "--registry", str(reg), str(crit))
    return r.returncode, results(folder / "reports")["SC"]


def test_selfcheck_vacuous_without_gpu_steps(built, tmp_path):
    rc, clean = verify_one(tmp_path, "clean", EQ % 'counters.cpu_steps: ">0"')
    assert rc == 0 and clean["verdict"] == "PASS", clean["reason"]
    rc, bad = verify_one(tmp_path, "bad", EQ % 'counters.gpu_steps: ">0"')
    assert rc == 1 and bad["reason"].startswith("vacuous"), bad["reason"]


def test_selfcheck_one_ulp_in_a_real_dump(built, tmp_path):
    """A real dump with one logit moved by 1 ULP: memcmp fails at that index, position and element."""
    from harness.run.dumpdiff import compare_bytes

    kite = REPO / "build" / "stub" / "bin" / "kite"
    model = sorted((REPO / "models").glob("tiny-*.gguf"))
    if not model:
        r = harness("models", "gen", "tiny")
        assert r.returncode == 0, r.stderr
        model = sorted((REPO / "models").glob("tiny-*.gguf"))
    d = tmp_path / "dump"
    subprocess.run([str(kite), "run", "--model", str(model[0]), "--prompt", "3,1,4", "--steps", "2",
                    "--dump", str(d)], check=True, capture_output=True, timeout=120)
    meta = json.loads((d / "meta.json").read_text())
    P, V = meta["shapes"]["logits"]
    good = (d / "logits.f32").read_bytes()
    arr = np.frombuffer(good, dtype="<f4").copy()
    idx = 2 * V + 17  # position 2, element 17
    arr.view("<u4")[idx] += 1
    assert compare_bytes(good, good, row_len=V).identical
    diff = compare_bytes(good, arr.tobytes(), row_len=V)
    assert not diff.identical and not diff.ok
    assert diff.first_index == idx and diff.differing == 1 and diff.max_ulp == 1
    assert (diff.first_position, diff.first_element) == (2, 17)


AB_COUNT = """\
criteria:
  - id: SC
    title: A processes more rows than B (a count, so the verdict has no timing noise)
    kind: ab_timing
    build: stub
    args: [run, --model, "{model}", --prompt, "3,1,4,1,5,9,2,6", --steps, "%s", --iters, "2"]
    a: {name: a}
    b: {name: b, args: [run, --model, "{model}", --prompt, "3,1,4,1,5,9,2,6", --steps, "12", --iters, "2"]}
    metric: {field: counters.cpu_steps, reduce: min}
    ratio: a/b
    pairs: 6
    warmups: 1
    order: ABBA
    pass_if: "ci_lower >= 1.02"
    bootstrap: {resamples: 500, seed: 3}
"""


def test_selfcheck_ab_verdict_through_the_real_engine(built, tmp_path):
    """The A/B verdict path on the real engine's --json output (run, metric, pairs, bootstrap,
    threshold), deterministic: the metric is a row count. A/A is not flagged; A doing 32 rows
    to B's 20 is (ratio 1.6 in every pair). A wall-clock version could fail by chance on a shared
    machine; test_harness_selfcheck's fake engine checks the statistics on seeded noise instead."""
    rc, aa = verify_one(tmp_path, "aa", AB_COUNT % "12")
    assert rc == 1 and aa["reason"].startswith("threshold not met: median a/b 1.0000"), aa["reason"]
    rc, more = verify_one(tmp_path, "more", AB_COUNT % "24")
    assert rc == 0 and more["verdict"] == "PASS", more["reason"]
    assert more["reason"].startswith("median a/b 1.6000, 95% CI [1.6000, 1.6000] over 6 pairs"), more["reason"]


def test_selfcheck_edit_after_registration(built, tmp_path):
    folder = tmp_path / "edit"
    folder.mkdir()
    crit = folder / "sc.yaml"
    crit.write_text(textwrap.dedent(EQ % 'counters.cpu_steps: ">0"'))
    reg = folder / "registry.lock"
    assert harness("register", str(crit), "--registry", str(reg)).returncode == 0
    crit.write_text(crit.read_text().replace('--steps, "4"', '--steps, "5"'))
    r = harness("verify", "--no-build", "--reports", str(folder / "reports"), "--registry", str(reg), str(crit))
    res = results(folder / "reports")["SC"]
    assert r.returncode == 1 and res["reason"].startswith("not as registered"), res["reason"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is needed to build the test modules")
def test_selfcheck_missing_export(built, tmp_path):
    """The refusal criterion fails with the real module and passes with the planted defect."""
    rc, clean = verify_one(tmp_path, "module", RUN % "{module}")
    assert rc == 1 and clean["verdict"] == "FAIL"
    rc, planted = verify_one(tmp_path, "noexport", RUN % "{testmods}/libkite_cuda_noexport.so")
    assert rc == 0 and planted["verdict"] == "PASS", planted["reason"]


for _t in (test_selfcheck_vacuous_without_gpu_steps, test_selfcheck_one_ulp_in_a_real_dump,
           test_selfcheck_ab_verdict_through_the_real_engine, test_selfcheck_edit_after_registration,
           test_selfcheck_missing_export):
    pytest.mark.selfcheck(_t)
