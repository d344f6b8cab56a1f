"""Self-check on the fake engine: each planted defect flips a verdict that passes without it.

(`nox -s selfcheck` runs these; the suite's own self-check against the real engine adds to them.)
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.selfcheck

EQ = """\
criteria:
  - id: SC
    title: graph vs stream
    kind: equivalence
    build: gpu
    args: [run, --model, "{model}", --prompt, "5,6,7,8", --steps, "3"]
    variants:
      - {name: graph, preconditions: {counters.graph_replays: ">0"}}
      - {name: stream, env: {KITE_CUDA_GRAPH: "0", %s}, preconditions: {counters.gpu_steps: ">0"}}
    compare: {dumps: [h_out, logits]}
"""

AB = """\
criteria:
  - id: SC
    title: A slower than B by 5%% or more
    kind: ab_timing
    args: [run, --model, "{model}", --prompt, "1,2,3,4,5", --steps, "5", --iters, "3"]
    a: {name: a, env: {FAKE_NOISE: "0.02", %s}}
    b: {name: b, env: {FAKE_NOISE: "0.02"}}
    pairs: 10
    warmups: 0
    pass_if: "ci_lower >= 1.05"
"""

RUN = """\
criteria:
  - id: SC
    title: a module missing an export is refused whole
    kind: run
    runs:
      - name: noexport
        layout: engine_only
        place: {libkite_cuda.so: "%s"}
        args: [info, --json]
        expect: {json: {cuda.bound: false, cuda.note: "~kcuda_step_m"}}
"""


def run_pair(fake_repo, template: str, good: str, bad: str) -> tuple[dict, dict]:
    p = fake_repo.criteria(template % good)
    fake_repo.register(p)
    assert fake_repo.verify() == 0, fake_repo.result("SC")["reason"]
    clean = fake_repo.result("SC")
    fake_repo.registry.unlink()
    p = fake_repo.criteria(template % bad)
    fake_repo.register(p)
    assert fake_repo.verify() == 1
    return clean, fake_repo.result("SC")


def test_one_ulp_logit(fake_repo):
    clean, bad = run_pair(fake_repo, EQ, 'X: "0"', 'FAKE_FLIP_ULP: "logits:100"')
    assert clean["verdict"] == "PASS"
    assert "first at index 100 (position 3, element 4)" in bad["reason"] and "max ULP 1" in bad["reason"]


def test_no_gpu_step_is_vacuous(fake_repo):
    clean, bad = run_pair(fake_repo, EQ, 'X: "0"', 'FAKE_NO_GPU_STEPS: "1"')
    assert clean["verdict"] == "PASS" and bad["reason"].startswith("vacuous:")


def test_ten_percent_slowdown_flagged_aa_not(fake_repo):
    """The claim is "A slower than B by >= 5%": an A/A run must not support it, a planted 10%
    slowdown (10 rows x 100 us on a 10 ms request window) must."""
    p = fake_repo.criteria(AB % 'X: "0"')
    fake_repo.register(p)
    assert fake_repo.verify() == 1
    aa = fake_repo.result("SC")
    assert aa["reason"].startswith("threshold not met") and aa["details"]["stats"]["ci_lower"] < 1.05
    fake_repo.registry.unlink()
    p = fake_repo.criteria(AB % 'KITE_DEBUG_STEP_DELAY_US: "100"')
    fake_repo.register(p)
    assert fake_repo.verify() == 0
    st = fake_repo.result("SC")["details"]["stats"]
    assert st["ci_lower"] >= 1.05 and 1.05 < st["median"] < 1.15


def test_edit_after_registration(fake_repo):
    p = fake_repo.criteria(EQ % 'X: "0"')
    fake_repo.register(p)
    assert fake_repo.verify() == 0
    p.write_text(p.read_text().replace('--steps, "3"', '--steps, "2"'))
    assert fake_repo.verify() == 1
    assert fake_repo.result("SC")["reason"].startswith("not as registered")


def test_missing_export_refused(fake_repo):
    clean_src = "{module}"
    p = fake_repo.criteria(RUN % clean_src)
    fake_repo.register(p)
    assert fake_repo.verify() == 1  # the real module is bound: the refusal criterion fails without the defect
    fake_repo.registry.unlink()
    p = fake_repo.criteria(RUN % "{testmods}/libkite_cuda_noexport.so")
    fake_repo.register(p)
    assert fake_repo.verify() == 0
