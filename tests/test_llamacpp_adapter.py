"""kite-llama (native/llamacpp) against llama.cpp's own reference logits of the fixtures.

The fixtures' `logits_llamacpp_f32.f32` were made by a separate caller of `llama.h` (one decode of
all 24 tokens, 1 thread, KV cache f32, flash attention off; see tests/data/qwen35/*/PROVENANCE.md).
The adapter run the same way must give the same bytes: proof that it drives llama.cpp as
documented, before any criterion compares it with kite. Builds llama.cpp (`nox -s llamacpp`).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine_build import build_engine, qwen35_fixtures, run_kite, tokens_of  # noqa: F401

pytestmark = [pytest.mark.native, pytest.mark.llamacpp]


@pytest.fixture(scope="module")
def llama_bin():
    return build_engine("llamacpp")


@pytest.mark.parametrize("tiny", ["tiny-a", "tiny-b"])
def test_adapter_reproduces_llamacpp_reference(llama_bin, qwen35_fixtures, tmp_path, tiny):
    fx = qwen35_fixtures / tiny
    res = run_kite(llama_bin, "run", "--model", fx / f"{tiny}-f32.gguf", "--prompt", tokens_of(fx),
                   "--threads", "1", "--mt", "256", "--dump", tmp_path)
    assert res.returncode == 0, res.stderr
    ours = (tmp_path / "logits.f32").read_bytes()
    ref = (fx / "logits_llamacpp_f32.f32").read_bytes()
    assert len(ours) == len(ref)
    if ours != ref:
        diff = np.abs(np.frombuffer(ours, "<f4") - np.frombuffer(ref, "<f4")).max()
        pytest.fail(f"logits differ from llama.cpp's reference (max abs {diff:.3g})")
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["backend"]["engine"] == "llama.cpp" and meta["backend"]["gpu_layers"] == 0
    assert meta["options"] == {"kv_type": "f32", "flash_attn": "off"}
    assert meta["nonfinite"] == {"h_out": 0, "logits": 0}


def test_adapter_usage_and_runtime_errors(llama_bin, tmp_path):
    assert run_kite(llama_bin, "run", "--prompt", "1").returncode == 2
    assert run_kite(llama_bin, "run", "--model", "m", "--prompt", "1", "--kv-type", "q4").returncode == 2
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf")
    res = run_kite(llama_bin, "run", "--model", bad, "--prompt", "1")
    assert res.returncode == 1 and "kite-llama: error:" in res.stderr
