"""Byte-identical dumps: thread counts, M-row prefill vs one row at a time, repeated runs."""

from __future__ import annotations

import json

import pytest

from engine_build import kite_bin, qwen35_fixtures, run_kite, tokens_of  # noqa: F401

pytestmark = pytest.mark.native  # builds and runs the real engine


def _dump(kite_bin, model, prompt, out, *extra, env=None):
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", prompt, "--dump", out, *extra, env=env)
    assert res.returncode == 0, res.stderr
    return (
        (out / "h_out.f32").read_bytes(),
        (out / "logits.f32").read_bytes(),
        json.loads((out / "meta.json").read_text()),
    )


@pytest.mark.parametrize("name", ["tiny-a-q8_0", "tiny-b-f32", "tiny-a-f16"])
def test_threads_and_rows_identical(kite_bin, qwen35_fixtures, tmp_path, name):
    fx = qwen35_fixtures / ("tiny-" + name.split("-")[1])
    model = fx / f"{name}.gguf"
    prompt = tokens_of(fx)  # 24 tokens
    base = _dump(kite_bin, model, prompt, tmp_path / "t1", "--steps", "6", env={"KITE_THREADS": "1"})
    assert base[2]["request"]["threads"] == 1
    variants = {
        "threads2": (["--steps", "6"], {"KITE_THREADS": "2"}),
        "threads3": (["--steps", "6"], {"KITE_THREADS": "3"}),
        "flag_threads3": (["--steps", "6", "--threads", "3"], {"KITE_THREADS": "1"}),
        "mt4": (["--steps", "6", "--mt", "4"], {"KITE_THREADS": "2"}),
        "mt5": (["--steps", "6", "--mt", "5"], {"KITE_THREADS": "3"}),  # 24 = 4*5 + 4
        "repeat": (["--steps", "6"], {"KITE_THREADS": "1"}),
        "iters3": (["--steps", "6", "--iters", "3"], {"KITE_THREADS": "2"}),
    }
    for tag, (extra, env) in variants.items():
        h, lg, meta = _dump(kite_bin, model, prompt, tmp_path / tag, *extra, env=env)
        assert h == base[0], f"h_out differs for {tag}"
        assert lg == base[1], f"logits differ for {tag}"
        assert meta["tokens"] == base[2]["tokens"], tag
    _, _, meta = _dump(kite_bin, model, prompt, tmp_path / "mt5b", "--mt", "5")
    assert meta["counters"]["cpu_mrow_calls"] == 5  # 5+5+5+5+4
    assert meta["counters"]["cpu_steps"] == 24
