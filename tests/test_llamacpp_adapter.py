"""kite-llama (native/llamacpp) against llama.cpp's own reference logits of the fixtures.

The fixtures' `logits_llamacpp_f32.f32` were made by a separate caller of `llama.h` (one decode of
all 24 tokens, 1 thread, KV cache f32, flash attention off; see tests/data/qwen35/*/PROVENANCE.md).
The adapter run the same way must give the same bytes: proof that it drives llama.cpp as
documented, before any criterion compares it with kite. Builds llama.cpp (`nox -s llamacpp`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine_build import REPO, build_engine, qwen35_fixtures, run_kite, tokens_of  # noqa: F401

pytestmark = [pytest.mark.native, pytest.mark.llamacpp]


@pytest.fixture(scope="module")
def llama_bin():
    return build_engine("llamacpp")


def _native_isa_beyond_the_reference() -> str:
    """Why this host's llama.cpp build cannot give the reference's bytes, or "" (it can). The
    references came from llama.cpp's AVX2 variant (PROVENANCE.md); the `llamacpp` build is
    GGML_NATIVE=ON, and on a host with AVX-512 its f32 dot products sum 16 lanes, not 8."""
    from harness.contract.config import load_config

    options = dict(load_config(REPO).builds["llamacpp"].engine.options)
    try:
        flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("flags")), [])
    except OSError:
        flags = []
    if options.get("GGML_NATIVE") == "ON" and "avx512f" in flags:
        return ("the reference logits are llama.cpp's AVX2 variant's (PROVENANCE.md); this host's "
                "GGML_NATIVE=ON build takes AVX-512 paths, whose f32 sums differ by design")
    return ""


@pytest.mark.parametrize("tiny", ["tiny-a", "tiny-b"])
def test_adapter_reproduces_llamacpp_reference(llama_bin, qwen35_fixtures, tmp_path, tiny):
    if why := _native_isa_beyond_the_reference():
        pytest.skip(why)
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


def _run_json(llama_bin, *args):
    res = run_kite(llama_bin, "run", *args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_timed_run_pays_for_no_dump_and_picks_the_same_tokens(llama_bin, qwen35_fixtures, tmp_path):
    """Without --dump: no embeddings, the last prompt row's logits only, nothing copied, a thread
    pool; the greedy tokens are those of the dump run (issue 36)."""
    fx = qwen35_fixtures / "tiny-a"
    common = ("--model", fx / "tiny-a-q8_0.gguf", "--prompt", tokens_of(fx), "--steps", "6", "--threads", "2")
    timed = _run_json(llama_bin, *common)
    dumped = _run_json(llama_bin, *common, "--dump", tmp_path)
    assert timed["outputs"] == {"embeddings": False, "keep_rows": False, "prompt_logits": "last",
                                "threadpool": True, "sampler": "host", "logits_rows_checked": 1}
    assert dumped["outputs"] == {"embeddings": True, "keep_rows": True, "prompt_logits": "all",
                                 "threadpool": True, "sampler": "host", "logits_rows_checked": 24 + 6}
    assert timed["tokens"] == dumped["tokens"] and len(timed["tokens"]) == 6
    assert timed["nonfinite"]["logits"] == 0
    assert all(len(timed["timings"][k]) == 1 for k in ("step_decode_ms", "step_greedy_ms", "step_copy_ms"))


@pytest.mark.parametrize("gguf", ["tiny-a-q8_0.gguf", "tiny-a-f32.gguf"])
def test_backend_sampler_picks_the_host_s_tokens(llama_bin, qwen35_fixtures, gguf):
    """`--sampler backend`: llama.cpp's greedy sampler in its own graph (the argmax, first largest
    logit) gives the tokens of the adapter's host pick; no logits reach the host, so none are
    checked, and the run says so rather than counting zero non-finite values (L18, issue 47)."""
    info = run_kite(llama_bin, "info", "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["backend_sampling"] is True, info.stderr
    fx = qwen35_fixtures / "tiny-a"
    common = ("--model", fx / gguf, "--prompt", tokens_of(fx), "--steps", "12", "--threads", "2")
    host = _run_json(llama_bin, *common)
    backend = _run_json(llama_bin, *common, "--sampler", "backend")
    assert backend["tokens"] == host["tokens"] and len(set(host["tokens"])) > 1
    assert (host["outputs"]["sampler"], backend["outputs"]["sampler"]) == ("host", "backend")
    assert backend["outputs"]["logits_rows_checked"] == 0 and backend["nonfinite"]["logits"] is None
    assert host["nonfinite"]["logits"] == 0


def test_backend_sampler_refuses_to_keep_rows(llama_bin, qwen35_fixtures, tmp_path):
    model = qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf"
    for extra in (("--dump", tmp_path), ("--keep-rows", "on")):
        res = run_kite(llama_bin, "run", "--model", model, "--prompt", "1,2", "--sampler", "backend", *extra)
        assert res.returncode == 2 and "--sampler backend leaves the logits on the device" in res.stderr, extra
    res = run_kite(llama_bin, "run", "--model", model, "--prompt", "1", "--sampler", "gpu")
    assert res.returncode == 2 and "bad value" in res.stderr


def test_dump_refuses_a_switch_that_drops_rows(llama_bin, qwen35_fixtures, tmp_path):
    fx = qwen35_fixtures / "tiny-a"
    for switch in (("--embeddings", "off"), ("--keep-rows", "off"), ("--prompt-logits", "last")):
        res = run_kite(llama_bin, "run", "--model", fx / "tiny-a-q8_0.gguf", "--prompt", "1,2", "--dump", tmp_path,
                       *switch)
        assert res.returncode == 2 and "--dump keeps every row" in res.stderr, switch
    res = run_kite(llama_bin, "run", "--model", fx / "tiny-a-q8_0.gguf", "--prompt", "1", "--threadpool", "maybe")
    assert res.returncode == 2


def test_llama_bench_is_built_beside_the_adapter(llama_bin, qwen35_fixtures):
    """The same build makes llama.cpp's llama-bench (the timing reference of L12-L15) from the same source."""
    bench = llama_bin.with_name("llama-bench" + llama_bin.suffix)
    fx = qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf"
    res = run_kite(bench, "-m", fx, "-p", "0", "-n", "4", "-d", "3", "-r", "2", "-t", "1", "-o", "json")
    assert res.returncode == 0, res.stderr
    (test,) = json.loads(res.stdout)
    assert (test["backends"], test["n_prompt"], test["n_gen"], test["n_depth"]) == ("CPU", 0, 4, 3)
    assert len(test["samples_ns"]) == 2 and min(test["samples_ns"]) > 0
