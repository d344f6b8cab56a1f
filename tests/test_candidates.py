"""Candidate kernel steps kept as patches until a GPU judges them (bench/candidates/, issue 48;
docs/PERFORMANCE.md says how each is judged): each still applies to the tree, and what it claims
on the CPU side holds when it is applied to a copy, compiled with the module's flags. The probe
that measures the LM-head candidate (P6, bench/probe_lmhead.cu) builds with and without it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = sorted((REPO / "bench" / "candidates").glob("*.patch"))
LM_HEAD = REPO / "bench" / "candidates" / "lm-head-stream.patch"

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
        shutil.copytree(REPO / part, root / part)
    (root / "tests").mkdir()
    shutil.copy2(REPO / "tests" / "test_kernel_fit.py", root / "tests")
    res = subprocess.run(["git", "apply", str(patch)], cwd=root, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return root


def kernel_fit_output(tree: Path) -> str:
    """bench/kernel_fit.py's output on a tree (it must exit 0)."""
    fit = subprocess.run([sys.executable, str(tree / "bench" / "kernel_fit.py")], cwd=tree,
                         capture_output=True, text=True, timeout=900)
    assert fit.returncode == 0, fit.stdout[-2000:] + fit.stderr[-2000:]
    return fit.stdout


@pytest.fixture(scope="module")
def lm_head_tree(tmp_path_factory) -> Path:
    return applied_tree(tmp_path_factory.mktemp("lm-head-stream"), LM_HEAD)


@pytest.fixture(scope="module")
def lm_head_fit(lm_head_tree) -> str:
    return kernel_fit_output(lm_head_tree)


@needs_nvcc
def test_the_streamed_lm_head_fits_beside_itself_without_spills(lm_head_fit):
    # the candidate's claims, from ptxas: the LM head's pieces run k_lm_head<1> on two CTAs an SM,
    # both in the register file; no spills; nothing read before the wait that an op before may
    # write; the only new pairs that cannot share an SM are the pieces' own (the next piece's CTAs
    # start as this piece's leave: the price of the second CTA, which P6 measured faster alone)
    row = re.search(r"^\| LM head piece 0 \| `k_lm_head<1>` \| 264 \| 256 \| (\d+) \| (\d+) \| (\d+) \|", lm_head_fit,
                    re.M)
    assert row, lm_head_fit
    registers, cta_registers, spills = (int(g) for g in row.groups())
    assert registers <= 128 and 2 * cta_registers <= 65536 and spills == 0, row.group(0)
    pairs = re.search(r"^op pairs of the step that cannot share an SM: \d+\n((?:- .*\n)*)", lm_head_fit, re.M)
    assert pairs, lm_head_fit
    assert [line.split(":")[0] for line in pairs.group(1).splitlines()] == [
        "- in-proj -> deltanet head", *(f"- LM head piece {p} -> LM head piece {p + 1}" for p in range(3))]
    assert "kernels reading possibly-written memory before their wait: 0" in lm_head_fit


@needs_nvcc
def test_the_streamed_lm_head_loads_its_first_groups_before_the_wait(lm_head_fit):
    # docs/PERFORMANCE.md's claim, from the SASS: all 24 loads of the first 4 groups (2 rows of
    # two 16-byte halves and a scale each) are issued ahead of ACQBULK
    if "SASS: nvdisasm not found" in lm_head_fit:
        pytest.skip("nvdisasm is not installed (pyproject's test extras: nvidia-cuda-nvdisasm)")
    loads = re.search(r"^- `k_lm_head<1>`: (\d+)$", lm_head_fit, re.M)
    assert loads and int(loads.group(1)) >= 24, lm_head_fit[-1500:]


@needs_nvcc
@pytest.mark.parametrize("applied", [False, True], ids=["main", "with-candidate"])
def test_p6_builds_with_and_without_the_candidate(applied, lm_head_tree, tmp_path):
    # the next GPU session's first call builds this probe: it must build on main (rows (a)-(c))
    # and with the patch applied (rows (d) as well)
    tree = lm_head_tree if applied else REPO
    exe = tmp_path / "probe_lmhead"
    res = subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(exe), str(tree / "bench" / "probe_lmhead.cu")],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert exe.stat().st_size > 0
    strings = exe.read_bytes()
    # the (d) rows are in the binary exactly when the candidate is applied
    assert (b"k_lm_candidate" in strings) == applied
