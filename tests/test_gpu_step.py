"""scripts/gpu-step.sh's A/B summary (its ab.md), which a kernel candidate is kept or dropped by
(docs/PERFORMANCE.md): the table of rounds, the medians, how many rounds the new module was
faster in, and the host's greedy pick of each side. The script itself needs a GPU; its summary
is the Python it runs over gpu-ab.sh's JSON files, run here on files written for the test.
scripts/gpu-ab.sh's sides (which module, which environment) run with a stand-in for python3."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def summary_code() -> str:
    text = (REPO / "scripts" / "gpu-step.sh").read_text()
    m = re.search(r"<<'EOF2'\n(.*?)\nEOF2\n", text, re.S)
    assert m, "gpu-step.sh no longer holds its summary as a heredoc"
    return m.group(1)


def write_round(work: Path, r: int, side: str, q8: float, q4: float, pick: tuple[float, float] | None) -> None:
    def model(name: str, tok_s: float) -> dict:
        graph = {"tokens_per_s": tok_s}
        if pick:
            graph.update(greedy_ms=pick[0], greedy_share=pick[1])
        return {"model": name, "graph": graph}

    d = work / f"ab-r{r}"
    d.mkdir(exist_ok=True)
    (d / f"ab-1-{side}.json").write_text(json.dumps(
        {"results": [model("qwen35-0.8b-q8_0-x.gguf", q8), model("qwen35-0.8b-q4_0-x.gguf", q4)]}))


def test_summary_counts_the_rounds_the_new_module_wins_and_prints_each_sides_pick(tmp_path):
    base_q8, new_q8 = [1500, 1480, 1510, 1490], [1560, 1470, 1550, 1530]
    for r, (b, n) in enumerate(zip(base_q8, new_q8, strict=True), start=1):
        write_round(tmp_path, r, "base", b, 1550, (0.080, 0.12))
        write_round(tmp_path, r, "new", n, 1540, (0.060 + r / 1000, 0.09))
    out = subprocess.run([sys.executable, "-c", summary_code(), str(tmp_path), "4"], capture_output=True, text=True,
                         check=True).stdout
    assert "| 2 | 1480 | 1470 | 0.993 | 1550 | 1540 | 0.994 |" in out
    assert "Q8_0: base median 1495, new median 1540 tok/s; new / base median 1.027, new faster in 3 of 4 rounds" in out
    assert "Q4_0: base median 1550, new median 1540 tok/s; new / base median 0.994, new faster in 0 of 4 rounds" in out
    assert "host greedy pick, base, Q8_0: 0.080 ms a step, 12.0 % of the decode window (medians over 4 rounds)" in out
    assert "host greedy pick, new, Q8_0: 0.062 ms a step, 9.0 % of the decode window (medians over 4 rounds)" in out


def test_summary_without_the_picks_says_nothing_of_them(tmp_path):
    # a base tree whose engine does not report its picks
    write_round(tmp_path, 1, "base", 1500, 1550, None)
    write_round(tmp_path, 1, "new", 1510, 1560, None)
    out = subprocess.run([sys.executable, "-c", summary_code(), str(tmp_path), "1"], capture_output=True, text=True,
                         check=True).stdout
    assert "new faster in 1 of 1 rounds" in out and "greedy pick" not in out


# ---- gpu-ab.sh's sides, with a stand-in for python3 (no GPU, no model, no engine run) --------------

FAKE_PYTHON = r"""#!/usr/bin/env bash
# python3 as gpu-ab.sh calls it: the model generator prints a path; bench/gpu_decode.py records its
# module and KITE_CUDA_GRAPH_M, and writes its JSON (1530 tok/s with the setting, else 1500); the rest is
# the real interpreter (the summary)
if [ "$1 $2 $3" = "-m harness models" ]; then echo "models/qwen35-0.8b-$7.gguf"; exit 0; fi
if [ "$1" = bench/gpu_decode.py ]; then
  json= prev=
  for a in "$@"; do [ "$prev" = --json ] && json=$a; prev=$a; done
  echo "$KITE_CUDA_LIB ${KITE_CUDA_GRAPH_M:-unset}" >> "$FAKE_LOG"
  tok=1500; [ "${KITE_CUDA_GRAPH_M:-}" = 1 ] && tok=1530
  printf '{"results": [{"model": "qwen35-0.8b-q8_0.gguf", "graph": {"tokens_per_s": %s}},
    {"model": "qwen35-0.8b-q4_0.gguf", "graph": {"tokens_per_s": %s}}]}' "$tok" "$tok" > "$json"
  echo "graph decode $tok tok/s"
  exit 0
fi
exec REAL_PYTHON "$@"
"""


def run_ab(tmp_path: Path, base: str, new_env: str | None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """scripts/gpu-ab.sh OUT BASE 2 --no-build with the stand-in first on PATH; its result and the
    runs it made, one line each: the module and KITE_CUDA_GRAPH_M."""
    if shutil.which("bash") is None or sys.platform == "win32":
        pytest.skip("gpu-ab.sh is a bash script")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text(FAKE_PYTHON.replace("REAL_PYTHON", sys.executable))
    (fake / "python3").chmod(0o755)
    log = tmp_path / "runs.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    env.update(PATH=f"{fake}{os.pathsep}{env['PATH']}", FAKE_LOG=str(log))
    if new_env is not None:
        env["KITE_AB_NEW_ENV"] = new_env
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu-ab.sh"), str(tmp_path / "out"), base, "2", "--no-build"],
                         capture_output=True, text=True, env=env, timeout=120)
    return res, log.read_text().splitlines() if log.exists() else []


def test_gpu_ab_one_setting_on_this_trees_module(tmp_path):
    """BASEDIR `.`: this tree's module on both sides; KITE_AB_NEW_ENV on the new side's runs alone."""
    res, runs = run_ab(tmp_path, ".", "KITE_CUDA_GRAPH_M=1")
    assert res.returncode == 0, res.stderr
    lib = str(REPO / "build" / "default" / "bin" / "libkite_cuda.so")
    assert runs == [f"{lib} unset", f"{lib} 1"] * 2
    ab = (tmp_path / "out" / "ab.md").read_text()
    assert f"base: {lib}; new: {lib}, with KITE_CUDA_GRAPH_M=1" in ab
    assert "new / base within a round: 1.020, 1.020 (median 1.020)" in ab
    assert "== round 1 new () KITE_CUDA_GRAPH_M=1" in (tmp_path / "out" / "ab.log").read_text()


def test_gpu_ab_default_is_two_modules_in_one_environment(tmp_path):
    res, runs = run_ab(tmp_path, str(tmp_path / "base"), None)
    assert res.returncode == 0, res.stderr
    base, new = (str(REPO / "build" / d / "bin" / "libkite_cuda.so") for d in ("ab-base", "default"))
    assert runs == [f"{base} unset", f"{new} unset"] * 2
    assert "new / base within a round: 1.000, 1.000" in (tmp_path / "out" / "ab.md").read_text()


def test_gpu_ab_refuses_a_setting_that_is_not_name_value(tmp_path):
    res, runs = run_ab(tmp_path, ".", "KITE_CUDA_GRAPH_M=1 oops")
    assert res.returncode == 2 and "KITE_AB_NEW_ENV: 'oops' is not NAME=VALUE" in res.stderr
    assert runs == []


@pytest.mark.parametrize("env", [{"KITE_STEP_BUDGET": "235"}, {"KITE_STEP_BUDGET": "5m"}, {"KITE_STEP_ROUNDS": "four"}])
def test_gpu_step_refuses_a_budget_its_build_cannot_run_in(tmp_path, env):
    # 235 s timed the build out at 1 s on a GPU machine and ran the later steps on no module: the
    # script now refuses before it writes or builds anything
    out = tmp_path / "out"
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu-step.sh"), str(out)], capture_output=True, text=True,
                         env={**os.environ, **env, "KITE_STEP_WORK": str(tmp_path / "work")}, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "at least 300 s" in res.stderr
    assert not out.exists() and not (tmp_path / "work").exists()


def test_gpu_step_refuses_a_model_type_it_does_not_make(tmp_path):
    # KITE_STEP_MODEL picks the file of the sanitizers and the timeline among the two it generates
    out = tmp_path / "out"
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu-step.sh"), str(out)], capture_output=True, text=True,
                         env={**os.environ, "KITE_STEP_MODEL": "f16", "KITE_STEP_WORK": str(tmp_path / "work")},
                         timeout=60)
    assert res.returncode == 2, res.stderr
    assert "KITE_STEP_MODEL=f16: q8_0 or q4_0" in res.stderr
    assert not out.exists() and not (tmp_path / "work").exists()
