"""Candidate kernel steps kept as patches until a GPU judges them (bench/candidates/, issue 48;
docs/PERFORMANCE.md says how each is judged): each still applies to the tree, and what it claims
on the CPU side holds when it is applied to a copy, compiled with the module's flags."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = sorted((REPO / "bench" / "candidates").glob("*.patch"))


def test_there_is_a_candidate_to_check():
    assert CANDIDATES, "bench/candidates/ holds no patch: delete this test with the folder"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("patch", CANDIDATES, ids=lambda p: p.stem)
def test_a_candidate_applies_to_the_tree(patch):
    res = subprocess.run(["git", "apply", "--check", str(patch)], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, f"{patch.name} no longer applies: {res.stderr.strip()}"


@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ptxas") is None or shutil.which("git") is None,
                    reason="nvcc or git is not installed")
def test_the_spread_head_leaves_no_pair_of_the_step_that_cannot_share_an_sm(tmp_path):
    # the candidate's claim, from ptxas: with it applied, every pair of consecutive M=1 ops fits
    # on one SM (the module at HEAD has one pair left, in-proj -> head)
    for part in ("native", "bench"):
        shutil.copytree(REPO / part, tmp_path / part)
    (tmp_path / "tests").mkdir()
    shutil.copy2(REPO / "tests" / "test_kernel_fit.py", tmp_path / "tests")
    patch = REPO / "bench" / "candidates" / "deltanet-head-spread.patch"
    res = subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    fit = subprocess.run([sys.executable, str(tmp_path / "bench" / "kernel_fit.py")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert fit.returncode == 0, fit.stdout[-2000:] + fit.stderr[-2000:]
    assert "op pairs of the step that cannot share an SM: 0\n" in fit.stdout
    assert "| deltanet head | `k_deltanet_head` | 128 | 288 |" in fit.stdout
