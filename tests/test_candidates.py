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
ATTENTION = REPO / "bench" / "candidates" / "attention-one-trip.patch"

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
def attention_tree(tmp_path_factory) -> Path:
    return applied_tree(tmp_path_factory.mktemp("attention-one-trip"), ATTENTION)


@needs_nvcc
def test_the_short_attention_path_keeps_its_kernels_within_their_gates(attention_tree):
    # the candidate's claims, from ptxas: k_attn_scores, which now also runs a short context's
    # weighted sum of v with every load in flight at once, keeps its 256 threads without spills, at
    # most 96 registers (so that a CTA still fits beside qkprep's before it and values' after it)
    # and 8 KB of static shared memory (its 128 scores, the 32 x 32 partials); k_attn_values keeps
    # its 1024 threads at 32 registers; nothing read before the wait that an op before may write
    fit = subprocess.run([sys.executable, str(attention_tree / "bench" / "kernel_fit.py")], cwd=attention_tree,
                         capture_output=True, text=True, timeout=900)
    assert fit.returncode == 0, fit.stdout[-2000:] + fit.stderr[-2000:]
    out = fit.stdout
    row = re.search(r"^\| scores \| `k_attn_scores` \| 128 \| 256 \| (\d+) \| \d+ \| (\d+) \| (\d+) \|", out, re.M)
    assert row, out
    registers, spills, smem = (int(g) for g in row.groups())
    assert spills == 0 and registers <= 96 and 4096 + 4 * 128 <= smem <= 8192, row.group(0)
    assert re.search(r"^\| values \| `k_attn_values` \| 64 \| 1024 \| 32 \| 32768 \| 0 \|", out, re.M), out
    assert "- qkprep -> scores" not in out and "- scores -> values" not in out and "- values -> attn out" not in out
    assert "kernels reading possibly-written memory before their wait: 0" in out


def test_the_short_path_rule_is_one_function_read_by_both_kernels():
    # k_attn_scores takes the short path and k_attn_values leaves the row alone on the same test,
    # attn_short_row: one function, so the two can never disagree about who writes a row
    text = ATTENTION.read_text()
    assert text.count("+#define KC_ATT_SHORT ") == 1
    assert text.count("+__device__ __forceinline__ bool attn_short_row(") == 1
    assert "+    if (attn_short_row(n, D)) {" in text
    assert "+    if (n > a.max_pos || attn_short_row(n, D)) return;" in text


@needs_nvcc
def test_the_kernel_fit_gates_hold_with_the_candidate(attention_tree):
    # tests/test_kernel_fit.py's pairs, spill and register gates and the defines tied to
    # kernel_fit's constants, run on the patched copy
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_kernel_fit.py"],
                         cwd=attention_tree, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
