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
OUT_AFTER_WAIT = REPO / "bench" / "candidates" / "out-trigger-after-wait.patch"

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
    """A copy of native/, bench/ and the module's static tests under root with the patch applied."""
    for part in ("native", "bench"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").mkdir()
    for test in ("test_kernel_fit.py", "test_cuda_module.py", "test_hip_module.py"):  # those a patch may touch
        shutil.copy2(REPO / "tests" / test, root / "tests")
    res = subprocess.run(["git", "apply", str(patch)], cwd=root, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return root


@pytest.fixture(scope="module", params=CANDIDATES, ids=lambda p: p.stem)
def patched(request, tmp_path_factory) -> tuple[Path, Path]:
    return request.param, applied_tree(tmp_path_factory.mktemp(request.param.stem), request.param)


@needs_nvcc
def test_the_kernel_fit_gates_hold_with_the_candidate(patched):
    # tests/test_kernel_fit.py's pairs, spill, register and trigger gates (as the patch leaves
    # them), run on the patched copy
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel_fit.py"],
                         cwd=patched[1], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


def test_only_the_m1_out_products_trigger_past_their_wait(tmp_path):
    # the candidate's claim: k_gemv's trigger comes from its arguments, past the wait for the
    # products that do not add and for the M=1 out products (DeltaNet and attention), at the start
    # for the down product; the glu and the LM head are as in the tree
    cuda = applied_tree(tmp_path, OUT_AFTER_WAIT) / "native" / "cuda"
    matvec, forward = (cuda / "matvec.cu").read_text(), (cuda / "forward.cu").read_text()
    assert "KC_KERNEL_BODY(a.trigger_after_wait, a, gemv_block<MT, RPW, PRO>);" in matvec
    assert "ga.trigger_after_wait = !js.j[0].add;" in matvec
    assert "KC_PRODUCT_KERNEL(a, gemv_glu_block);" in matvec and "KC_PRODUCT_KERNEL(a, lm_head_block<" in matvec
    marks = [forward.index(f"tag(ops, from, {role});") for role in ("ROLE_DN_OUT", "ROLE_ATT_OUT", "ROLE_FFN_DOWN")]
    calls = [i for i in range(len(forward)) if forward.startswith("out_trigger_after_wait(ops, from, m);", i)]
    assert len(calls) == 2 and marks[0] < calls[0] < marks[1] < calls[1] < marks[2]
