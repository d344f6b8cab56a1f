"""Conformance of the engine with transformers and llama.cpp on the qwen35 fixtures (tests/data/qwen35).

F32 GGUF: at every position max|logit - transformers| <= 1e-4 * max|transformers logit| and the
same argmax; h_out likewise against hidden_hf.f32. F16 and Q8_0 GGUFs: NMSE against
transformers no worse than 2x llama.cpp's NMSE on the same file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine_build import kite_bin, qwen35_fixtures, run_kite, tokens_of  # noqa: F401

pytestmark = pytest.mark.native  # builds and runs the real engine


def _run(kite_bin, fx: Path, gguf: str, out: Path, n: int):
    res = run_kite(kite_bin, "run", "--model", fx / gguf, "--prompt", tokens_of(fx), "--steps", "0", "--dump", out)
    assert res.returncode == 0, res.stderr
    logits = np.fromfile(out / "logits.f32", dtype="<f4").reshape(n, -1)
    hidden = np.fromfile(out / "h_out.f32", dtype="<f4").reshape(n, -1)
    return logits, hidden


def _ref(fx: Path, name: str, n: int):
    return np.fromfile(fx / name, dtype="<f4").reshape(n, -1)


def _nmse(test, ref) -> float:
    test = test.astype(np.float64)
    ref = ref.astype(np.float64)
    return float(((test - ref) ** 2).sum() / (ref**2).sum())


@pytest.mark.parametrize("tiny", ["tiny-a", "tiny-b"])
def test_f32_matches_transformers(kite_bin, qwen35_fixtures, tmp_path, tiny):
    fx = qwen35_fixtures / tiny
    n = len(tokens_of(fx).split(","))
    logits, hidden = _run(kite_bin, fx, f"{tiny}-f32.gguf", tmp_path, n)
    ref = _ref(fx, "logits_hf.f32", n)
    ref_h = _ref(fx, "hidden_hf.f32", n)
    assert logits.shape == ref.shape and hidden.shape == ref_h.shape
    for p in range(n):
        tol = 1e-4 * np.abs(ref[p]).max()
        err = np.abs(logits[p] - ref[p]).max()
        assert err <= tol, f"position {p}: max |logit diff| {err:.3g} > {tol:.3g}"
        assert logits[p].argmax() == ref[p].argmax(), f"position {p}: argmax differs"
        tol_h = 1e-4 * np.abs(ref_h[p]).max()
        err_h = np.abs(hidden[p] - ref_h[p]).max()
        assert err_h <= tol_h, f"position {p}: max |h_out diff| {err_h:.3g} > {tol_h:.3g}"


@pytest.mark.parametrize("tiny,kind", [("tiny-a", "f16"), ("tiny-a", "q8_0"), ("tiny-b", "q8_0")])
def test_quantized_nmse_within_2x_llamacpp(kite_bin, qwen35_fixtures, tmp_path, tiny, kind):
    fx = qwen35_fixtures / tiny
    gguf = fx / f"{tiny}-{kind}.gguf"
    if not gguf.exists():
        pytest.skip(f"{gguf.name} is not among the fixtures")
    n = len(tokens_of(fx).split(","))
    logits, _ = _run(kite_bin, fx, gguf.name, tmp_path, n)
    ref = _ref(fx, "logits_hf.f32", n)
    llama = _ref(fx, f"logits_llamacpp_{kind}.f32", n)
    ours, theirs = _nmse(logits, ref), _nmse(llama, ref)
    assert ours <= 2.0 * theirs, f"NMSE {ours:.3g} > 2 x llama.cpp's {theirs:.3g}"
