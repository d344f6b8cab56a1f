"""HF -> GGUF converter: byte identity with llama.cpp's converter on the conformance fixtures, a
round trip through a generated model (no fixtures needed), the safetensors reader, and a numpy
reference forward pass against transformers' logits."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from harness.models import convert as conv
from harness.models.gen import generate
from harness.models.recipes import load_recipe, parse_recipe
from harness.models.reference import forward

from engine_build import FIXTURES


def _fixture(model: str) -> Path:
    return FIXTURES / model


def _fields(r: gguf.GGUFReader) -> dict:
    return {k: (f.types, [bytes(p) for p in f.parts]) for k, f in r.fields.items()}


def _compare(ours: Path, ref: Path) -> None:
    a, b = gguf.GGUFReader(ours), gguf.GGUFReader(ref)
    fa, fb = _fields(a), _fields(b)
    assert list(fa) == list(fb), "metadata keys (or their order) differ"
    for k in fb:
        assert fa[k] == fb[k], f"metadata {k} differs"
    assert [t.name for t in a.tensors] == [t.name for t in b.tensors]
    for x, y in zip(a.tensors, b.tensors, strict=True):
        assert x.tensor_type == y.tensor_type, x.name
        assert list(x.shape) == list(y.shape), x.name
        assert np.asarray(x.data).tobytes() == np.asarray(y.data).tobytes(), f"tensor {x.name} differs"
    assert ours.read_bytes() == ref.read_bytes()  # so the whole file is identical too


@pytest.mark.parametrize("model, qtype", [
    ("tiny-a", "f32"), ("tiny-a", "q8_0"), ("tiny-a", "f16"), ("tiny-b", "f32"), ("tiny-b", "q8_0"),
])
def test_convert_is_byte_identical_to_llama_cpp(tmp_path, model, qtype):
    d = _fixture(model)
    ref = d / f"{model}-{qtype}.gguf"
    if not ref.is_file():
        pytest.skip(f"{ref.name} not present")
    out = conv.convert(d / "hf", tmp_path / "out.gguf", qtype)
    _compare(out, ref)


@pytest.mark.parametrize("model, vocab", [("tiny-a", 512), ("tiny-b", 384)])
def test_reference_forward_matches_transformers(model, vocab):
    d = _fixture(model)
    tokens = [int(t) for t in (d / "tokens.txt").read_text().strip().split(",")]
    hidden, logits = forward(d / f"{model}-f32.gguf", tokens)
    ref = np.fromfile(d / "logits_hf.f32", dtype=np.float32).reshape(len(tokens), vocab)
    href = np.fromfile(d / "hidden_hf.f32", dtype=np.float32).reshape(len(tokens), -1)
    assert np.abs(logits - ref).max() <= 1e-4 * np.abs(ref).max()
    assert np.abs(hidden - href).max() <= 1e-4 * np.abs(href).max()
    assert np.array_equal(logits.argmax(1), ref.argmax(1))


# ---- round trip: generated GGUF -> HF checkpoint -> convert -> same tensors ---------------------

def _write_safetensors(path: Path, tensors: dict[str, np.ndarray], dtype: str = "F32") -> None:
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "BF16":
            a = conv.f32_to_bf16(a)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def _unconvert(gguf_path: Path, hf_dir: Path, c, dtype: str = "F32") -> dict[str, np.ndarray]:
    """Undo the converter's transforms (the +1 and the value-head reorder are exact inverses here)."""
    inv_layer = {v: k for k, v in conv._LAYER.items()}
    inv_global = {v: k for k, v in conv._GLOBAL.items()}
    hk, hv, dk, dv = c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim
    inv = np.argsort(conv.vhead_perm(hk, hv))
    qk = 2 * hk * dk
    out = {}
    for t in gguf.GGUFReader(gguf_path).tensors:
        x = np.asarray(t.data, dtype=np.float32).reshape(tuple(reversed([int(n) for n in t.shape]))).copy()
        if t.name in inv_global:
            name = inv_global[t.name]
            suffix = name
        else:
            _, i, rest = t.name.split(".", 2)
            suffix = inv_layer[rest]
            name = f"model.layers.{i}.{suffix}"
        if suffix.endswith("norm.weight") and suffix != "linear_attn.norm.weight":
            x = x - np.float32(1)
        if suffix == "linear_attn.A_log":
            x = np.log(-x.astype(np.float64)).astype(np.float32)
        if suffix in ("linear_attn.in_proj_qkv.weight", "linear_attn.conv1d.weight"):
            x = np.concatenate([x[:qk], conv._reorder(x[qk:], inv, dv, 0)])
        elif suffix == "linear_attn.in_proj_z.weight":
            x = conv._reorder(x, inv, dv, 0)
        elif suffix in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight",
                        "linear_attn.A_log", "linear_attn.dt_bias"):
            x = conv._reorder(x, inv, 1, 0)
        elif suffix == "linear_attn.out_proj.weight":
            x = conv._reorder(x, inv, dv, 1)
        if suffix == "linear_attn.conv1d.weight":
            x = x[:, None, :]
        out[name] = x
    _write_safetensors(hf_dir / "model.safetensors", out, dtype)
    cfg = {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
        "vocab_size": c.vocab_size, "hidden_size": c.hidden_size, "num_hidden_layers": c.num_hidden_layers,
        "layer_types": [f"{t}_attention" for t in c.layer_types], "intermediate_size": c.intermediate_size,
        "num_attention_heads": c.num_attention_heads, "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim, "linear_num_key_heads": hk, "linear_num_value_heads": hv,
        "linear_key_head_dim": dk, "linear_value_head_dim": dv, "linear_conv_kernel_dim": c.linear_conv_kernel_dim,
        "max_position_embeddings": c.context_length, "rms_norm_eps": c.rms_norm_eps,
        "tie_word_embeddings": c.tie_word_embeddings,
        "rope_parameters": {"rope_theta": c.rope_theta, "partial_rotary_factor": c.partial_rotary_factor,
                            "mrope_section": list(c.rope_sections[:3]), "rope_type": "default"},
    }
    (hf_dir / "config.json").write_text(json.dumps(cfg))
    return out


@pytest.mark.parametrize("variant", ["tiny", "tied-no-reorder"])
def test_round_trip_through_hf_layout(tmp_path, variant):
    r = load_recipe("tiny")
    if variant != "tiny":
        text = (r.text.replace("tie_word_embeddings: false", "tie_word_embeddings: true")
                .replace("linear_num_value_heads: 4", "linear_num_value_heads: 2"))
        r = parse_recipe(text, "variant.yaml")
    g = generate(r, tmp_path / "gen.gguf", "f32")
    hf = tmp_path / "hf"
    hf.mkdir()
    _unconvert(g, hf, r.config)
    out = conv.convert(hf, tmp_path / "conv.gguf", "f32")
    a = {t.name: t for t in gguf.GGUFReader(g).tensors}
    b = {t.name: t for t in gguf.GGUFReader(out).tensors}
    assert set(a) == set(b)
    for name, t in a.items():
        x, y = np.asarray(t.data), np.asarray(b[name].data)
        assert list(t.shape) == list(b[name].shape), name
        if name.endswith("ssm_a"):  # log then exp: within an ulp
            assert np.allclose(x, y, rtol=3e-7, atol=0), name
        else:
            assert x.tobytes() == y.tobytes(), name
    kv_g, kv_c = gguf.GGUFReader(g).fields, gguf.GGUFReader(out).fields
    for k in kv_g:
        if k.startswith("qwen35.") and k != "qwen35.context_length":
            assert kv_g[k].contents() == kv_c[k].contents(), k


# ---- reader errors ------------------------------------------------------------------------------

def test_safetensors_reader_rejects_bad_files(tmp_path):
    p = tmp_path / "model.safetensors"
    p.write_bytes(b"\x01\x02")
    with pytest.raises(conv.ConvertError, match="too short"):
        conv.SafetensorsFile(p)
    p.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(conv.ConvertError, match="not plausible"):
        conv.SafetensorsFile(p)
    h = json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 8)  # 8 of 16 data bytes
    with pytest.raises(conv.ConvertError, match="bad data_offsets"):
        conv.SafetensorsFile(p)
    h = json.dumps({"x": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}}).encode()
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 4)
    with pytest.raises(conv.ConvertError, match="unsupported dtype"):
        conv.SafetensorsFile(p)


def test_16_bit_source_arithmetic_follows_the_converter():
    # bf16 is widened to float32 before the +1 (no rounding back to bf16)
    x = np.array([0.00390625, -0.5, 1e-3, 3.0], dtype=np.float32)
    u = conv.f32_to_bf16(x)
    st = conv.StTensor("n", "BF16", (4,), Path("-"), 0, 8)
    y = conv.SrcTensor(st, u).elementwise(lambda v: v + np.float32(1))
    assert y.tolist() == (conv.bf16_to_f32(u) + np.float32(1)).tolist()
    assert y[0] == np.float32(1.00390625)
    # f16 stays f16: 1 + 2^-11 is a tie at f16 precision and rounds to even (1.0)
    h = np.array([2.0**-11, 0.25], dtype=np.float16)
    st = conv.StTensor("n", "F16", (2,), Path("-"), 0, 4)
    assert conv.SrcTensor(st, h).elementwise(lambda v: v + np.float32(1)).tolist() == [1.0, 1.25]
    assert conv.bf16_to_f32(conv.f32_to_bf16(np.float32([1.5, -2.25]))).tolist() == [1.5, -2.25]


def test_bf16_checkpoint(tmp_path):
    """bf16 weights: widened exactly; the +1 of norms is done in float32 after widening."""
    r = load_recipe("tiny")
    g = generate(r, tmp_path / "gen.gguf", "f32")
    hf = tmp_path / "hf"
    hf.mkdir()
    src = _unconvert(g, hf, r.config, "BF16")
    out = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(conv.convert(hf, tmp_path / "c.gguf", "f32")).tensors}
    bf = {k: conv.bf16_to_f32(conv.f32_to_bf16(v)) for k, v in src.items()}
    assert out["token_embd.weight"].tobytes() == bf["model.embed_tokens.weight"].tobytes()
    assert out["blk.3.attn_q.weight"].tobytes() == bf["model.layers.3.self_attn.q_proj.weight"].tobytes()
    want = (bf["model.layers.0.input_layernorm.weight"] + np.float32(1)).astype(np.float32)
    assert out["blk.0.attn_norm.weight"].tobytes() == want.tobytes()
    ssm_norm = bf["model.layers.0.linear_attn.norm.weight"]
    assert out["blk.0.ssm_norm.weight"].tobytes() == ssm_norm.tobytes()  # no +1
