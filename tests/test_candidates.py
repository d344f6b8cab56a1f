"""Candidate kernel steps kept as patches until a GPU judges them (bench/candidates/, issue 48;
docs/PERFORMANCE.md says how each is judged): each still applies to the tree, and what it claims
on the CPU side holds when it is applied to a copy, compiled with the module's flags."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = sorted((REPO / "bench" / "candidates").glob("*.patch"))
RESIDUAL = REPO / "bench" / "candidates" / "residual-trigger-at-start.patch"
TAPS = REPO / "bench" / "candidates" / "head-taps-after-wait.patch"
sys.path.insert(0, str(REPO / "bench"))
import kernel_fit  # noqa: E402

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


@pytest.fixture(scope="module")
def residual_tree(tmp_path_factory) -> Path:
    return applied_tree(tmp_path_factory.mktemp("residual-trigger-at-start"), RESIDUAL)


@pytest.fixture(scope="module")
def taps_tree(tmp_path_factory) -> Path:
    return applied_tree(tmp_path_factory.mktemp("head-taps-after-wait"), TAPS)


def test_the_residual_products_schedule_the_next_kernel_at_their_start(residual_tree):
    # the candidate's claim: a gemv triggers at its start exactly when its first job adds into
    # its output, and the jobs that add are exactly the products into the residual stream x
    cuda = residual_tree / "native" / "cuda"
    matvec = (cuda / "matvec.cu").read_text()
    assert "KC_KERNEL_BODY(!a.js.j[0].add, a, gemv_block<MT, RPW, PRO>);" in matvec
    assert matvec.count("KC_PRODUCT_KERNEL(a, ") == 2  # glu and LM head unchanged
    jobs = re.findall(r"job\(l\.w\[KCUDA_W_(\w+)\], md->(\w+), [^;]*?, ([01])\);", (cuda / "forward.cu").read_text())
    adding = {(w, y) for w, y, add in jobs if add == "1"}
    assert adding == {("SSM_OUT", "x"), ("ATTN_OUTPUT", "x"), ("FFN_DOWN", "x")}, jobs
    assert all(add == "0" for w, y, add in jobs if y != "x")


@needs_nvcc
def test_the_kernel_fit_gates_hold_with_the_residual_candidate(residual_tree):
    # tests/test_kernel_fit.py's pairs, spill and register gates and the defines tied to
    # kernel_fit's constants, run on the patched copy
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel_fit.py"],
                         cwd=residual_tree, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


# run in the patched copy (kernel_fit caches what it compiled by file name)
HEAD_BEFORE_WAIT = """
import json, sys
sys.path.insert(0, "bench")
import kernel_fit
lines = kernel_fit.sass_kernels("deltanet.cu")["k_deltanet_head"]
res = kernel_fit.compiled_resources(("deltanet.cu",))["k_deltanet_head"]
print(json.dumps({"before": lines[:lines.index("ACQBULK")], "registers": res.registers, "spills": res.spill_bytes}))
"""


@needs_nvcc
def test_the_head_reaches_its_wait_with_every_load_in_flight(taps_tree):
    # the candidate's claim, read from the SASS of the patched copy (the module's flags): before
    # its wait k_deltanet_head issues its state rows' and history taps' loads and computes nothing
    # from them; it keeps 56 registers and no spills, so the out product's blocks still fit beside it
    res = subprocess.run([sys.executable, "-c", HEAD_BEFORE_WAIT], cwd=taps_tree, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    before = got["before"]
    assert not [ln for ln in before if ln.split()[0] in ("FMUL", "FADD", "FFMA")], before
    loads = [ln for ln in before if "LDG" in ln]
    state = [ln for ln in loads if re.match(r"LDG\.E R\d+, desc\[UR\d+\]\[R\d+\.64(\+0x[0-9a-f]+)?\]$", ln)]
    taps = [ln for ln in loads if re.match(r"@!?P\d LDG\.E ", ln)]
    assert len(state) >= 16 and len(taps) >= 4, loads
    assert got["registers"] <= 56 and got["spills"] == 0, got


@needs_nvcc
def test_the_kernel_fit_gates_hold_with_the_taps_candidate(taps_tree):
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel_fit.py"],
                         cwd=taps_tree, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
