"""KITE_CUDA_FLOPS_MIN decides which weight products go to the device one by one: a product of
2 m n k flops is offloaded when that is at least the threshold, else the CPU runs it
(cuda_host.c, kc_gemm_gw). The fake module's device variant takes every offload it is given and
names its size on stderr, so the test sees both sides: what the module received and the engine's
offload_gpu / offload_cpu counters."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine_build import build_engine, run_kite
from gguf_corpus import base_model

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(sys.platform == "win32", reason="the fake module is loaded as a .so here"),
]

LINE = "kite fake module: gemm_gw "


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, Path, Path]:
    exe = build_engine("default")
    module = exe.parent / "testmods" / "libkite_cuda_fake_device.so"
    assert module.exists(), f"the testmod build did not produce {module}"
    model = tmp_path_factory.mktemp("flops") / "model.gguf"
    model.write_bytes(base_model().to_bytes())  # every matrix Q8_0: each product may be offloaded
    return exe, module, model


def _run(setup, flops_min: str) -> tuple[list[int], dict]:
    exe, module, model = setup
    env = {"KITE_CUDA_LIB": str(module), "KITE_CUDA_FLOPS_MIN": flops_min}
    res = run_kite(
        exe, "run", "--model", model, "--prompt", "1,2,3,4,5", "--mt", "3", "--steps", "2", "--json", env=env
    )
    assert res.returncode == 0, res.stderr
    meta = json.loads(res.stdout)
    assert meta["backend"]["available"] and not meta["backend"]["resident"], meta["backend"]
    taken = [int(ln[len(LINE) :]) for ln in res.stderr.splitlines() if ln.startswith(LINE)]
    return taken, meta["counters"]


def test_offloads_move_with_the_threshold(setup):
    everything, counters = _run(setup, "0")
    assert counters["offload_gpu"] == len(everything) > 0 and counters["offload_cpu"] == 0
    sizes = sorted(set(everything))
    assert len(sizes) >= 3, sizes  # prompt passes and single steps give several product sizes
    middle = sizes[len(sizes) // 2]
    for threshold in (sizes[0], sizes[0] + 1, middle, sizes[-1], sizes[-1] + 1):
        taken, counters = _run(setup, str(threshold))
        want = [f for f in everything if f >= threshold]  # at the threshold: offloaded
        assert taken == want, threshold
        assert counters["offload_gpu"] == len(want), (threshold, counters)
        assert counters["offload_cpu"] == len(everything) - len(want), (threshold, counters)
    assert _run(setup, str(sizes[-1] + 1))[0] == []


def test_default_threshold_keeps_small_products_on_the_cpu(setup):
    everything, _ = _run(setup, "0")
    assert max(everything) < 1000000  # the tiny model's products are all below the default
    for value in ("", "abc", "-5"):  # unset or refused: the default, 1000000
        taken, counters = _run(setup, value)
        assert taken == [] and counters["offload_cpu"] == len(everything), value
