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
AHEAD = [REPO / "bench" / "candidates" / "glu-early-down-weights-ahead.patch"]
EARLY = [REPO / "bench" / "candidates" / f"{name}.patch" for name in ("glu-early-after-deltanet", "glu-early-down-weights-ahead")]

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


# run in a tree (kernel_fit caches what it compiled by file name): how many instructions of one
# opcode a kernel of matvec.cu's SASS has before its wait, and in all
SASS_COUNT = """
import sys
sys.path.insert(0, "bench")
import kernel_fit
kernel, opcode = sys.argv[1], sys.argv[2]
lines = kernel_fit.sass_kernels("matvec.cu")[kernel]
print(len(kernel_fit.sass_before_wait(lines, (opcode,))), sum(opcode in ln for ln in lines))
"""


def sass_count(tree: Path, kernel: str, opcode: str) -> tuple[int, int]:
    res = subprocess.run([sys.executable, "-c", SASS_COUNT, kernel, opcode], cwd=tree, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    before, total = map(int, res.stdout.split())
    return before, total



@needs_nvcc
@pytest.mark.parametrize("patch", AHEAD, ids=lambda p: p.stem)
def test_the_out_products_ask_l2_for_a_range_more_before_their_wait(tmp_path, patch):
    # the candidates' claim: L2Ahead gains a sixth range (the down product's quants), so that
    # k_gemv<1, 1> has more prefetches before its wait than the tree's (as unrolled), none after it
    tree_before, tree_total = sass_count(REPO, "k_gemv<1, 1, false>", "CCTL")
    tree = applied_tree(tmp_path, patch)
    before, total = sass_count(tree, "k_gemv<1, 1, false>", "CCTL")
    assert tree_total == tree_before and total == before and before > tree_before



@needs_nvcc
@pytest.mark.parametrize("patch", EARLY, ids=lambda p: p.stem)
def test_the_early_glu_schedules_the_next_kernel_at_its_start(tmp_path, patch):
    # the candidates' claim: k_gemv_glu_early is k_gemv_glu with the trigger at its start (the
    # product kernel triggers past its wait), and k_gemv_glu itself is unchanged
    tree = applied_tree(tmp_path, patch)
    assert sass_count(tree, "k_gemv_glu_early", "PREEXIT")[0] >= 1
    assert sass_count(tree, "k_gemv_glu", "PREEXIT") == sass_count(REPO, "k_gemv_glu", "PREEXIT")
    assert sass_count(REPO, "k_gemv_glu", "PREEXIT")[0] == 0
    assert sass_count(tree, "k_gemv_glu", "LDG") == sass_count(REPO, "k_gemv_glu", "LDG")
