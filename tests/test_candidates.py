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
TRIGGER = REPO / "bench" / "candidates" / "products-trigger-after-wait.patch"

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
def trigger_tree(tmp_path_factory) -> Path:
    return applied_tree(tmp_path_factory.mktemp("products-trigger-after-wait"), TRIGGER)


def test_only_the_products_schedule_the_next_kernel_past_their_wait(trigger_tree):
    # the candidate's claim: the products' kernels (gemv, glu, LM head) run the trigger right after
    # their wait and not at their start; every other pass kernel still runs it at its start
    cuda = trigger_tree / "native" / "cuda"
    common = (cuda / "kc_common.cuh").read_text()
    product = common[common.index("#define KC_PRODUCT_KERNEL("):common.index("#define CK(x)")]
    assert "KC_PDL_TRIGGER" not in product and "KC_TL_WAIT(true)" in product
    assert "if (trigger_after) KC_PDL_TRIGGER();" in common
    matvec = (cuda / "matvec.cu").read_text()
    assert matvec.count("KC_PRODUCT_KERNEL(a, ") == 3 and "KC_PASS_KERNEL(" not in matvec
    others = [f for f in cuda.glob("*.cu") if f.name != "matvec.cu" and "KC_PASS_KERNEL(a, " in f.read_text()]
    assert {f.name for f in others} == {"activation.cu", "attention.cu", "deltanet.cu"}
    assert all("KC_PRODUCT_KERNEL" not in f.read_text() for f in others)


@needs_nvcc
def test_the_kernel_fit_gates_hold_with_the_candidate(trigger_tree):
    # tests/test_kernel_fit.py's pairs, spill and register gates and the defines tied to
    # kernel_fit's constants, run on the patched copy
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel_fit.py"],
                         cwd=trigger_tree, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
