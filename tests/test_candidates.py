"""Candidate kernel steps kept as patches until a GPU judges them (bench/candidates/, issue 48;
docs/PERFORMANCE.md says how each is judged): each still applies to the tree, and what it claims
on the CPU side holds when it is applied to a copy, compiled with the module's flags."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = sorted((REPO / "bench" / "candidates").glob("*.patch"))
GLU = REPO / "bench" / "candidates" / "glu-eight-rows.patch"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ptxas") is None
                                or shutil.which("git") is None, reason="nvcc or git is not installed")


def test_there_is_a_candidate_to_check():
    assert CANDIDATES, "bench/candidates/ holds no patch: delete this test with the folder"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("patch", CANDIDATES, ids=lambda p: p.stem)
def test_a_candidate_applies_to_the_tree(patch):
    res = subprocess.run(["git", "apply", "--check", str(patch)], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, f"{patch.name} no longer applies: {res.stderr.strip()}"


def applied_tree(root: Path, patch: Path) -> Path:
    """A copy of native/, bench/ and the kernel-fit test under root with the patch applied."""
    for part in ("native", "bench"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").mkdir()
    shutil.copy2(REPO / "tests" / "test_kernel_fit.py", root / "tests")
    res = subprocess.run(["git", "apply", str(patch)], cwd=root, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return root


@pytest.fixture(scope="module")
def glu_tree(tmp_path_factory) -> Path:
    return applied_tree(tmp_path_factory.mktemp("glu-eight-rows"), GLU)


@needs_nvcc
def test_the_eight_row_glu_fits_beside_four_residual_blocks(glu_tree):
    # the candidate's claims, from ptxas: k_gemv_glu in 256-thread blocks without spills, whose
    # registers and four residual blocks' fit in an SM's 65,536; no pair of the step left where only
    # some down-product blocks fit beside the glu; nothing read before the wait that an op before
    # may write
    fit = subprocess.run([sys.executable, str(glu_tree / "bench" / "kernel_fit.py")], cwd=glu_tree,
                         capture_output=True, text=True, timeout=900)
    assert fit.returncode == 0, fit.stdout[-2000:] + fit.stderr[-2000:]
    out = fit.stdout
    row = re.search(r"^\| gate/up \+ SwiGLU \| `k_gemv_glu` \| 112 \| 256 \| (\d+) \| (\d+) \| (\d+) \|", out, re.M)
    assert row, out
    registers, cta_registers, spills = (int(g) for g in row.groups())
    residual = re.search(r"^\| down \+ residual \| `k_gemv<1, 1, false>` \| 512 \| 64 \| \d+ \| (\d+) \|", out, re.M)
    assert residual, out
    assert spills == 0 and cta_registers + 4 * int(residual.group(1)) <= 65536, (row.group(0), residual.group(0))
    assert "- gate/up + SwiGLU -> down + residual" not in out
    assert "kernels reading possibly-written memory before their wait: 0" in out


@needs_nvcc
def test_the_kernel_fit_gates_hold_with_the_candidate(glu_tree):
    # the patch's own expectations of tests/test_kernel_fit.py (the pairs, the spill and register
    # gates, the defines tied to kernel_fit's constants), run on the patched copy
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel_fit.py"],
                         cwd=glu_tree, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
