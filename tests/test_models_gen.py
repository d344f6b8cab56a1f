"""Random-weight model generation: determinism, size, layout, the model cache, the command line."""

from __future__ import annotations

import argparse
import os

import gguf
import numpy as np
import pytest

from harness.models import cli, ensure_model
from harness.models.gen import generate, model_filename
from harness.models.recipes import load_recipe
from harness.models.reference import forward


@pytest.fixture(scope="module")
def tiny_q8(tmp_path_factory):
    return generate(load_recipe("tiny"), tmp_path_factory.mktemp("gen") / "tiny.gguf")


def test_same_seed_same_bytes(tmp_path, tiny_q8):
    again = generate(load_recipe("tiny"), tmp_path / "again.gguf")
    assert again.read_bytes() == tiny_q8.read_bytes()
    other = generate(load_recipe("tiny"), tmp_path / "other.gguf", seed=1)
    assert other.read_bytes() != tiny_q8.read_bytes()
    assert other.stat().st_size == tiny_q8.stat().st_size


@pytest.mark.parametrize("qtype", ["f32", "f16", "q8_0", "q4_0"])
def test_tiny_is_small_and_typed_like_the_converter(tmp_path, qtype):
    p = generate(load_recipe("tiny"), tmp_path / f"t-{qtype}.gguf", qtype)
    assert p.stat().st_size < 2_000_000
    r = gguf.GGUFReader(p)
    want = {"f32": "F32", "f16": "F16", "q8_0": "Q8_0", "q4_0": "Q4_0"}[qtype]
    for t in r.tensors:
        if len(t.shape) == 1 or t.name.endswith("ssm_conv1d.weight"):
            assert t.tensor_type.name == "F32", t.name
        else:
            assert t.tensor_type.name == want, t.name
    ft = r.fields["general.file_type"].contents()
    assert ft == {"f32": 0, "f16": 1, "q8_0": 7, "q4_0": 2}[qtype]


def test_tiny_metadata_and_shapes(tiny_q8):
    r = gguf.GGUFReader(tiny_q8)
    kv = {k: f.contents() for k, f in r.fields.items()}
    assert kv["general.architecture"] == "qwen35"
    rec = kv["qwen35.attention.recurrent_layers"]
    assert rec == [True, True, True, False]  # both layer types
    assert kv["qwen35.block_count"] == 4
    assert kv["qwen35.embedding_length"] == 64
    assert kv["qwen35.rope.dimension_count"] == 4
    assert kv["qwen35.rope.dimension_sections"] == [1, 1, 0, 0]
    assert kv["qwen35.ssm.group_count"] == 2 and kv["qwen35.ssm.time_step_rank"] == 4
    assert kv["qwen35.ssm.inner_size"] == 64 and kv["qwen35.ssm.state_size"] == 16
    assert kv["qwen35.attention.key_length"] == 16
    assert abs(kv["qwen35.rope.freq_base"] - 1e7) < 1
    assert kv["tokenizer.ggml.model"] == "gpt2"
    assert len(kv["tokenizer.ggml.tokens"]) == 512 == len(kv["tokenizer.ggml.token_type"])
    assert len(set(kv["tokenizer.ggml.tokens"])) == 512
    assert kv["tokenizer.ggml.tokens"][511] == "<|endoftext|>" and kv["tokenizer.ggml.eos_token_id"] == 511
    assert len(kv["tokenizer.ggml.merges"]) == 255
    t = {x.name: x for x in r.tensors}
    specs = {s.name: s.ne for s in load_recipe("tiny").config.tensor_specs()}
    assert set(t) == set(specs)
    for name, ne in specs.items():
        assert tuple(int(n) for n in t[name].shape) == ne, name
    assert np.all(np.asarray(t["blk.0.ssm_a"].data) < 0)
    assert np.all(np.asarray(t["blk.3.attn_q_norm.weight"].data) > 0.3)


def test_generated_model_gives_finite_well_spread_logits(tiny_q8):
    tokens = list(np.random.default_rng(1).integers(0, 512, 16))
    hidden, logits = forward(tiny_q8, tokens)
    assert np.isfinite(logits).all() and np.isfinite(hidden).all()
    assert 1.0 < logits.std() < 10.0
    assert len(set(logits.argmax(1).tolist())) >= 8  # not one token everywhere


def test_ensure_model_caches_by_digest(tmp_path):
    p = ensure_model("tiny", tmp_path)
    r = load_recipe("tiny")
    assert p.name == model_filename(r, "q8_0", 0) and p.name.startswith("tiny-q8_0-")
    mtime = p.stat().st_mtime_ns
    assert ensure_model("tiny", tmp_path) == p and p.stat().st_mtime_ns == mtime
    p4 = ensure_model("tiny", tmp_path, "q4_0")
    assert p4 != p and "q4_0" in p4.name
    assert ensure_model("tiny", tmp_path, seed=3) not in (p, p4)
    assert sorted(os.listdir(tmp_path)) == sorted([p.name, p4.name, model_filename(r, "q8_0", 3)])  # no temporaries


def _cli(*argv: str) -> int:
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return cli.run(p.parse_args(list(argv)))


def test_cli_gen_out_and_errors(tmp_path, capsys, tiny_q8):
    out = tmp_path / "x.gguf"
    assert _cli("gen", "tiny", "--out", str(out)) == 0
    assert out.read_bytes() == tiny_q8.read_bytes()
    assert capsys.readouterr().out.strip() == str(out)
    assert _cli("gen", "no-such-recipe", "--out", str(out)) == 2  # bad input: usage-class exit status
    assert "unknown recipe" in capsys.readouterr().err
    assert _cli("list") == 0
    assert "qwen35-0.8b" in capsys.readouterr().out
    assert _cli("info", str(out)) == 0
    assert "bytes_per_token" in capsys.readouterr().out
    assert _cli("convert", str(tmp_path / "nothing"), "--out", str(tmp_path / "y.gguf")) == 2
    assert "no config.json" in capsys.readouterr().err


def test_failed_write_leaves_nothing(tmp_path):
    import gguf as g

    from harness.models.gguf_out import write_gguf
    from harness.models.vocab import byte_level_vocab

    c = load_recipe("tiny").config
    specs = c.tensor_specs()

    def boom():
        raise RuntimeError("producer failed")

    tensors = [(s, (lambda s=s: np.zeros(tuple(reversed(s.ne)), np.float32))) for s in specs[:-1]]
    tensors.append((specs[-1], boom))
    with pytest.raises(RuntimeError, match="producer failed"):
        write_gguf(tmp_path / "m.gguf", c, "q8_0", g.Metadata(name="x"), byte_level_vocab(512), tensors)
    assert os.listdir(tmp_path) == []
