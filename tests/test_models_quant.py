"""Quantizers: byte-identical to ggml's reference quantizers and to llama.cpp's converter output."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from harness.models import quant
from harness.models.convert import open_checkpoint, config_from_hf, plan_tensors

from engine_build import FIXTURES



def _scalar_q8_0(block: np.ndarray) -> bytes:
    """quantize_row_q8_0_ref, one block, scalar float32 (an independent port)."""
    f = np.float32
    amax = f(0)
    for v in block:
        amax = max(amax, f(abs(v)))
    d = f(amax / f(127))
    inv = f(f(1) / d) if d else f(0)
    out = np.float16(d).tobytes()
    for v in block:
        x = f(v * inv)
        a = abs(float(x))
        r = np.floor(a) + (1.0 if a - np.floor(a) >= 0.5 else 0.0)  # roundf: half away from zero
        out += int(np.copysign(r, float(x))).to_bytes(1, "little", signed=True)
    return out


def _scalar_q4_0(block: np.ndarray) -> bytes:
    """quantize_row_q4_0_ref, one block, scalar float32."""
    f = np.float32
    amax, mx = f(0), f(0)
    for v in block:
        if amax < abs(v):
            amax, mx = f(abs(v)), f(v)
    d = f(mx / f(-8))
    inv = f(f(1) / d) if d else f(0)
    q = [min(15, int(f(f(v * inv) + f(8.5)))) for v in block]
    return np.float16(d).tobytes() + bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def _edge_blocks() -> np.ndarray:
    rng = np.random.default_rng(7)
    b = rng.standard_normal((12, 32)).astype(np.float32)
    b[0] = 0
    b[1] = np.arange(32) - 15.5  # x/d lands on .5 ties
    b[2] = np.linspace(-127, 127, 32)
    b[3] = 1
    b[3, [0, 9]] = -1  # equal magnitudes of both signs: the first one wins in Q4_0
    b[4] = 0.5 * np.arange(32)
    b[5] = rng.integers(-3, 4, 32) * 0.25
    b[6] = 1e-30 * rng.standard_normal(32)  # tiny scale (f16 underflow of d)
    b[7] = 6e4 * rng.standard_normal(32) / 4
    b[8, 31] = 100.0
    b[9] = -b[9]
    return b


@pytest.mark.parametrize("qt", [QT.Q8_0, QT.Q4_0])
def test_matches_scalar_port_of_the_c_reference(qt):
    blocks = _edge_blocks()
    ref = _scalar_q8_0 if qt == QT.Q8_0 else _scalar_q4_0
    got = quant.quantize(blocks, qt)
    for i, b in enumerate(blocks):
        assert got[i].tobytes() == ref(b), f"block {i}"


@pytest.mark.parametrize("qt", [QT.Q8_0, QT.Q4_0])
def test_matches_gguf_py(qt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 256)).astype(np.float32) * rng.uniform(0.01, 10, (300, 1)).astype(np.float32)
    x[:12, :32] = _edge_blocks()
    assert np.array_equal(quant.quantize(x, qt), gguf.quants.quantize(x, qt))


@pytest.mark.parametrize("qt", [QT.Q8_0, QT.Q4_0])
def test_round_trip_error_is_bounded(qt):
    x = np.random.default_rng(5).standard_normal((64, 128)).astype(np.float32)
    y = quant.dequantize(quant.quantize(x, qt), qt, 128)
    amax = np.abs(x.reshape(-1, 32)).max(1)
    err = np.abs(x - y).reshape(-1, 32).max(1)
    step = amax / (127 if qt == QT.Q8_0 else 8)
    # half a step, plus the f16 rounding of d over 127 (Q8_0) steps; Q4_0 clamps -max to 15: a full step
    bound = step * (0.5 + 127 * 2.0**-11) if qt == QT.Q8_0 else step * (1 + 8 * 2.0**-11)
    assert np.all(err <= bound)


def test_type_rules():
    assert quant.tensor_type("blk.0.attn_norm.weight", (64,), "q8_0") == QT.F32
    assert quant.tensor_type("blk.0.ssm_a", (4,), "f16") == QT.F32
    assert quant.tensor_type("blk.0.ssm_conv1d.weight", (4, 128), "q4_0") == QT.F32
    assert quant.tensor_type("blk.0.ffn_up.weight", (64, 128), "q4_0") == QT.Q4_0
    assert quant.tensor_type("blk.0.ffn_down.weight", (96, 64), "q8_0") == QT.Q8_0  # 96 % 32 == 0
    assert quant.tensor_type("blk.0.ffn_down.weight", (80, 64), "q8_0") == QT.F16
    assert quant.tensor_type("blk.0.ffn_down.weight", (64, 80), "q8_0") == QT.Q8_0
    assert quant.tensor_type("blk.0.ffn_down.weight", (80, 64), "f32") == QT.F32
    assert quant.nbytes((64, 128), QT.Q8_0) == 128 * 2 * 34
    assert quant.nbytes((64, 128), QT.Q4_0) == 128 * 2 * 18


@pytest.mark.parametrize("model", ["tiny-a", "tiny-b"])
def test_quantized_hf_weights_equal_llama_cpp_blocks(model):
    """Quantize the HF weights after the converter's transforms; compare with the stored Q8_0."""
    d = FIXTURES / model
    c = config_from_hf(json.loads((d / "hf" / "config.json").read_text()))
    order, files = open_checkpoint(d / "hf")
    ours = {spec.name: produce for spec, produce in plan_tensors(c, order, files)}
    r = gguf.GGUFReader(d / f"{model}-q8_0.gguf")
    n = 0
    for t in r.tensors:
        if t.tensor_type != QT.Q8_0:
            continue
        blocks = quant.quantize(ours[t.name](), QT.Q8_0)
        assert blocks.tobytes() == np.asarray(t.data).tobytes(), t.name
        n += 1
    assert n >= 30
