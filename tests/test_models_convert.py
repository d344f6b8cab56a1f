"""HF -> GGUF converter: byte identity with llama.cpp's converter on the conformance fixtures, a
round trip through a generated model (no fixtures needed), the safetensors reader, and a numpy
reference forward pass against transformers' logits."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
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


# ---- hostile checkpoints: a clean error naming the file and the field, never a crash or a hang -----

REPO = Path(__file__).resolve().parent.parent
TINY_HF_CONFIG = {
    "architectures": ["Qwen3_5ForCausalLM"], "vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 4,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"], "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "max_position_embeddings": 4096, "rope_parameters": {"rope_theta": 1e7, "mrope_section": [1, 1, 0]},
}
_DROP = object()  # as a value: remove the key


def _edit(base: dict, **changes) -> dict:
    d = json.loads(json.dumps(base))
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def _no_layer_types(**changes) -> dict:
    return _edit(TINY_HF_CONFIG, layer_types=_DROP, **changes)


def _rope(**changes) -> dict:
    return _edit(TINY_HF_CONFIG, rope_parameters=_edit(TINY_HF_CONFIG["rope_parameters"], **changes))


@pytest.mark.parametrize("config, field, message", [
    pytest.param(_edit(TINY_HF_CONFIG, layer_types=5), "layer_types", "expected a list of strings, got 5",
                 id="layer_types-int"),
    pytest.param(_edit(TINY_HF_CONFIG, layer_types=[["x"]]), "layer_types", "expected a list of strings",
                 id="layer_types-nested"),
    pytest.param(_edit(TINY_HF_CONFIG, rope_parameters=_DROP, rope_scaling=[1]), "rope_scaling",
                 "expected a JSON object", id="rope_scaling-list"),
    pytest.param(_edit(TINY_HF_CONFIG, rope_parameters=5), "rope_parameters", "expected a JSON object",
                 id="rope_parameters-int"),
    pytest.param(_edit(TINY_HF_CONFIG, text_config=5), "text_config", "expected a JSON object, got 5",
                 id="text_config-int"),
    pytest.param(_edit(TINY_HF_CONFIG, text_config=None), "text_config", "expected a JSON object, got None",
                 id="text_config-null"),
    pytest.param({"text_config": _edit(TINY_HF_CONFIG, num_hidden_layers="4")}, "text_config.num_hidden_layers",
                 "expected an integer in [1, 100000]", id="text_config-layers-string"),
    pytest.param([TINY_HF_CONFIG], "config.json", "expected a JSON object", id="top-level-list"),
    pytest.param(_no_layer_types(full_attention_interval=0), "full_attention_interval",
                 "expected an integer in [1, 100000], got 0", id="full_attention_interval-0"),
    pytest.param(_no_layer_types(num_hidden_layers=10**12), "num_hidden_layers",
                 "expected an integer in [1, 100000]", id="num_hidden_layers-1e12"),
    pytest.param(_no_layer_types(num_hidden_layers=2.5), "num_hidden_layers", "expected an integer",
                 id="num_hidden_layers-float"),
    pytest.param(_edit(TINY_HF_CONFIG, head_dim=_DROP, num_attention_heads=0), "num_attention_heads",
                 "expected an integer", id="num_attention_heads-0"),
    pytest.param(_edit(TINY_HF_CONFIG, head_dim=_DROP, hidden_size="64"), "hidden_size", "expected an integer",
                 id="hidden_size-string"),
    pytest.param(_edit(TINY_HF_CONFIG, vocab_size=10**12), "vocab_size", "expected an integer in [1, 10000000]",
                 id="vocab_size-1e12"),
    pytest.param(_edit(TINY_HF_CONFIG, max_position_embeddings=2**40), "max_position_embeddings",
                 "expected an integer in", id="max_position_embeddings-2^40"),
    pytest.param(_rope(rope_theta="x"), "rope_parameters.rope_theta", "expected a finite number, got 'x'",
                 id="rope_theta-string"),
    pytest.param(_rope(mrope_section=5), "rope_parameters.mrope_section", "expected a list of at most 4 integers",
                 id="mrope_section-int"),
    pytest.param(_rope(mrope_section=["a"]), "rope_parameters.mrope_section",
                 "expected a list of at most 4 integers", id="mrope_section-strings"),
    pytest.param(_edit(TINY_HF_CONFIG, rms_norm_eps=[1]), "rms_norm_eps", "expected a finite number",
                 id="rms_norm_eps-list"),
    pytest.param(_edit(TINY_HF_CONFIG, tie_word_embeddings="yes"), "tie_word_embeddings", "expected true or false",
                 id="tie_word_embeddings-string"),
    pytest.param(_edit(TINY_HF_CONFIG, eos_token_id=2**40), "eos_token_id", "expected a token id",
                 id="eos_token_id-2^40"),
    pytest.param("{", "config.json", "not valid JSON", id="invalid-json"),
    pytest.param("[" * 100_000, "config.json", "not valid JSON: nested too deeply", id="nested-json"),
])
def test_cli_convert_rejects_bad_config_json(tmp_path, config, field, message):
    """Each was a TypeError / AttributeError / ZeroDivisionError ("internal error"), an error not
    naming the file, a hang (10^12 layers) or a value accepted until the GGUF writer failed."""
    assert conv.config_from_hf(TINY_HF_CONFIG).num_hidden_layers == 4  # the base is valid
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    r = subprocess.run([sys.executable, "-m", "harness", "models", "convert", str(hf), "--out", str(tmp_path / "o.gguf")],
                       capture_output=True, text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip()
    assert err.startswith(f"models convert: error: {hf / 'config.json'}: "), err
    assert field in err and message in err, err
    assert len(err.splitlines()) == 1 and len(err) < 400, err
    assert not (tmp_path / "o.gguf").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("kind, message", [("fifo", "is a FIFO (named pipe), not a regular file"),
                                           ("folder", "is a directory, not a regular file")])
def test_cli_convert_names_a_config_json_that_is_not_a_file(tmp_path, kind, message):
    """Such a config.json was reported as missing ("no config.json"); a FIFO is never opened."""
    hf = tmp_path / "hf"
    hf.mkdir()
    if kind == "fifo":
        os.mkfifo(hf / "config.json")
    else:
        (hf / "config.json").mkdir()
    r = subprocess.run([sys.executable, "-m", "harness", "models", "convert", str(hf), "--out", str(tmp_path / "o.gguf")],
                       capture_output=True, text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert r.returncode == 2 and f"{hf / 'config.json'}: {message}" in r.stderr, r.stderr


def _st_file(path: Path, header: object, data: bytes = b"") -> None:
    h = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


_GOOD_ENTRY = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}


_ST, _INDEX = "model.safetensors", "model.safetensors.index.json"


@pytest.mark.parametrize("files, message", [
    pytest.param({_ST: []}, r"model\.safetensors: header: expected a JSON object", id="header-list"),
    pytest.param({_ST: {"x": 5}}, r"model\.safetensors: header entry 'x': expected an object with", id="entry-int"),
    pytest.param({_ST: {"x": {"dtype": "F32", "shape": [1]}}},
                 r"model\.safetensors: header entry 'x': data_offsets must be two integers, got None",
                 id="no-data_offsets"),
    pytest.param({_ST: {"x": _edit(_GOOD_ENTRY, data_offsets=4)}}, "entry 'x': data_offsets must be two integers",
                 id="data_offsets-int"),
    pytest.param({_ST: {"x": _edit(_GOOD_ENTRY, data_offsets=["0", "4"])}}, "data_offsets must be two integers",
                 id="data_offsets-strings"),
    pytest.param({_ST: {"x": _edit(_GOOD_ENTRY, shape=None)}}, "entry 'x': shape must be a list of at most 64",
                 id="shape-null"),
    pytest.param({_ST: {"x": _edit(_GOOD_ENTRY, shape=[2.0])}}, "entry 'x': shape must be a list",
                 id="shape-float"),
    pytest.param({_ST: {"x": _edit(_GOOD_ENTRY, dtype=["F32"])}}, r"entry 'x': unsupported dtype \['F32'\]",
                 id="dtype-list"),
    pytest.param({_ST: {"x": _edit(_GOOD_ENTRY, shape=[2**32, 2**32], data_offsets=[0, 0])}},
                 "entry 'x': bad data_offsets 0..0", id="element-count-overflow"),  # int64 product wrapped to 0
    pytest.param({_ST: "[" * 100_000}, r"model\.safetensors: header: not valid JSON: nested too deeply",
                 id="header-nested"),
    pytest.param({_INDEX: []}, r"index\.json: expected a JSON object, got \[\]", id="index-list"),
    pytest.param({_INDEX: {}}, r"index\.json: missing weight_map", id="index-no-weight_map"),
    pytest.param({_INDEX: {"weight_map": [1]}}, r"index\.json: weight_map: expected an object",
                 id="weight_map-list"),
    pytest.param({_INDEX: {"weight_map": {"x": 1}}},
                 r"index\.json: weight_map\['x'\]: expected a file name in the checkpoint folder, got 1",
                 id="weight_map-int-value"),
    pytest.param({_INDEX: {"weight_map": {"x": "../model-1.safetensors"}}},
                 r"weight_map\['x'\]: expected a file name in the checkpoint folder", id="weight_map-outside"),
    pytest.param({_INDEX: {"weight_map": {"x": "model-2.safetensors"}}},
                 r"index\.json: weight_map names 'model-2\.safetensors', which is not a file",
                 id="weight_map-missing-shard"),
    pytest.param({_INDEX: "{"}, r"index\.json: not valid JSON", id="index-invalid-json"),
])
def test_checkpoint_reader_rejects_bad_headers_and_index(tmp_path, files, message):
    """Each was a KeyError / TypeError / AttributeError / RecursionError, an OSError or JSON error
    not naming the file, or (the int64 overflow) a header accepted as describing 0 bytes."""
    hf = tmp_path / "hf"
    hf.mkdir()
    _st_file(tmp_path / "model-1.safetensors", {"x": _GOOD_ENTRY}, b"\0" * 4)  # outside hf/
    for name, content in files.items():
        if name.endswith(".safetensors"):
            _st_file(hf / name, content)
        else:
            (hf / name).write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(conv.ConvertError, match=message) as e:
        conv.open_checkpoint(hf)
    assert str(hf) in str(e.value) and len(str(e.value)) < 400


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory) -> Path:
    """A valid tiny checkpoint with a minimal BPE tokenizer.json."""
    d = tmp_path_factory.mktemp("tiny_hf")
    r = load_recipe("tiny")
    _unconvert(generate(r, d / "gen.gguf", "f32"), d, r.config)
    (d / "gen.gguf").unlink()
    (d / "tokenizer.json").write_text(json.dumps(
        {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
         "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": True}]}))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    return d


_BPE = {"type": "BPE", "vocab": {"a": 0}}


@pytest.mark.parametrize("name, content, message", [
    pytest.param("tokenizer.json", [], r"tokenizer\.json: expected a JSON object", id="tokenizer-list"),
    pytest.param("tokenizer.json", {"model": _edit(_BPE, vocab={"a": "x"})},
                 r"tokenizer\.json: model\.vocab\['a'\]: token id must be an integer", id="vocab-id-string"),
    pytest.param("tokenizer.json", {"model": _BPE, "added_tokens": [5]},
                 r"tokenizer\.json: added_tokens\[0\]: expected an object", id="added-token-int"),
    pytest.param("tokenizer.json", {"model": _edit(_BPE, merges=["a b", 5])},
                 r"tokenizer files .*: merges must be strings", id="merges-mixed"),
    pytest.param("tokenizer.json", {"model": _edit(_BPE, merges=[[1, 2]])},
                 r"tokenizer files .*: cannot be read: ValueError", id="merges-int-pairs"),
    pytest.param("tokenizer_config.json", "{", r"tokenizer files .*: cannot be read: JSONDecodeError",
                 id="tokenizer_config-invalid-json"),
    pytest.param("tokenizer_config.json", {"eos_token": "<|endoftext|>", "chat_template": [5]},
                 r"tokenizer files .*: chat_template must be a string or a list", id="chat_template-list-of-int"),
    pytest.param("README.md", "---\nfoo: [\n---\n", r"README\.md front matter.*: cannot be read: ParserError",
                 id="readme-bad-yaml"),
    pytest.param("README.md", "---\nlicense: 5\n---\n", "metadata license: expected a string, got 5",
                 id="readme-license-int"),
    pytest.param("generation_config.json", [1], "generation_config.json.*: cannot be read: AttributeError",
                 id="generation_config-list"),
    pytest.param("generation_config.json", {"top_k": "x"}, "metadata sampling_top_k: expected a 32-bit integer",
                 id="generation_config-top_k-string"),
    pytest.param("generation_config.json", {"temperature": 1e39}, "metadata sampling_temp: expected a number",
                 id="generation_config-temperature-too-large"),
])
def test_convert_rejects_bad_tokenizer_and_metadata_files(tmp_path, tiny_hf, name, content, message):
    """Files read through gguf-py (SpecialVocab, Metadata): each was an AttributeError / TypeError /
    YAML error / struct.error, or a JSON error not naming the file."""
    hf = tmp_path / "hf"
    shutil.copytree(tiny_hf, hf)
    (hf / name).write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(conv.ConvertError, match=message) as e:
        conv.convert(hf, tmp_path / "o.gguf")
    assert str(hf) in str(e.value)
    assert not (tmp_path / "o.gguf").exists()


def test_tiny_checkpoint_with_tokenizer_converts(tmp_path, tiny_hf):
    out = conv.convert(tiny_hf, tmp_path / "o.gguf")
    fields = gguf.GGUFReader(out).fields
    assert fields["tokenizer.ggml.eos_token_id"].contents() == 3
    assert fields["tokenizer.ggml.tokens"].contents()[:4] == ["a", "b", "ab", "<|endoftext|>"]
