"""A regression corpus of hostile GGUF files: each, run as `kite run --model FILE`, exits 1 with
exactly one line `kite: error: 'FILE': MESSAGE`, never a crash, a hang or a sanitizer report.

The files are generated (tests/gguf_corpus.py: one change each to a valid two-layer model), so
the corpus is reviewed here as the table of what each one must say. A new refusal or a changed
message shows as a failure naming the case.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine_build import kite_asan_bin, kite_bin, run_kite  # noqa: F401
from gguf_corpus import T_F32, base_model, hostile_cases

pytestmark = pytest.mark.native  # builds and runs the real engine

EXPECTED = {
    "empty": "not a GGUF file: 0 bytes",
    "three_bytes": "not a GGUF file: 3 bytes",
    "bad_magic": "not a GGUF file: bad magic 47 47 55 58",
    "version_1": "unsupported GGUF version 1 (2 and 3 are supported)",
    "version_4": "unsupported GGUF version 4 (2 and 3 are supported)",
    "huge_tensor_count": "tensor count 1152921504606846976 does not fit in a file of 101440 bytes",
    "huge_kv_count": "metadata count 18446744073709551615 does not fit in a file of 101440 bytes",
    "kv_count_too_small": "tensor 'qwen35.embedding_length': dimensions overflow",
    "cut_in_header": "truncated file: metadata count needs 8 bytes at offset 16, file has 20",
    "cut_in_first_key": "metadata count 18 does not fit in a file of 30 bytes",
    "cut_in_metadata": "tensor count 28 does not fit in a file of 300 bytes",
    "cut_in_tensor_infos": "tensor count 28 does not fit in a file of 900 bytes",
    "cut_in_data": "tensor 'blk.0.attn_qkv.weight': data [41088, +8704) lies outside the file (data section 48288 bytes)",
    "cut_last_byte": "tensor 'blk.1.attn_k_norm.weight': data [98880, +128) lies outside the file (data section 99007 bytes)",
    "unknown_kv_type": "metadata 'qwen35.block_count': unknown value type 99",
    "kv_as_nested_array": "metadata 'qwen35.attention.recurrent_layers': nested arrays are not supported",
    "array_unknown_type": "metadata 'qwen35.attention.recurrent_layers': unknown array element type 77",
    "array_count_huge": "metadata 'qwen35.attention.recurrent_layers': array count 1099511627776 does not fit in the file",
    "empty_key": "metadata key #2: empty key",
    "key_with_nul": "metadata key #2: key contains a NUL byte",
    "duplicate_key": "duplicate metadata key 'qwen35.block_count'",
    "alignment_not_power_of_two": "general.alignment must be a power of two",
    "tensor_zero_dims": "tensor 'output_norm.weight': 0 dimensions (1 to 4 supported)",
    "tensor_five_dims": "tensor 'output_norm.weight': 5 dimensions (1 to 4 supported)",
    "tensor_dim_zero": "tensor 'output_norm.weight': dimension 0 is zero",
    "tensor_dims_overflow": "tensor 'output_norm.weight': dimensions overflow",
    "tensor_type_q4_k": "tensor 'output.weight': unsupported tensor type 12 (supported: f32, f16, bf16, q8_0, q4_0)",
    "tensor_type_unknown": "tensor 'output.weight': unsupported tensor type 99 (supported: f32, f16, bf16, q8_0, q4_0)",
    "q8_0_row_not_blocks": "tensor 'output.weight': row of 48 values is not a whole number of q8_0 blocks or is too large",
    "tensor_offset_unaligned": "tensor 'output.weight': offset 8 is not a multiple of the alignment 32",
    "tensor_offset_past_end": "tensor 'output.weight': data [1073741824, +4352) lies outside the file (data section 99008 bytes)",
    "tensor_offset_wraps": "tensor 'output.weight': data [18446744073709551584, +4352) lies outside the file (data section 99008 bytes)",
    "duplicate_tensor": "duplicate tensor name 'token_embd.weight'",
    "empty_tensor_name": "tensor #1: empty name",
    "no_architecture": "missing or bad metadata 'general.architecture'",
    "architecture_llama": "architecture 'llama' is not supported (only qwen35)",
    "architecture_not_string": "missing or bad metadata 'general.architecture'",
    "no_block_count": "missing metadata 'qwen35.block_count'",
    "block_count_zero": "block_count 0 leaves no main layer",
    "embedding_length_string": "metadata 'qwen35.embedding_length' is not a non-negative integer",
    "embedding_length_huge": "metadata 'qwen35.embedding_length' = 1073741824 is out of range",
    "head_count_zero": "bad head counts: 0 query heads, 1 KV heads",
    "head_count_kv_not_divisor": "bad head counts: 2 query heads, 3 KV heads",
    "value_length_differs": "attention.value_length 16 differs from key_length 32",
    "rope_dims_odd": "bad rotary dims 7 for head dim 32",
    "rope_dims_above_head": "bad rotary dims 64 for head dim 32",
    "conv_kernel_zero": "bad linear-attention shape: K 0, dk 16, Hk 2, Hv 4, inner 64",
    "inner_size_not_divisible": "bad linear-attention shape: K 4, dk 16, Hk 2, Hv 4, inner 65",
    "no_rms_epsilon": "missing metadata 'qwen35.attention.layer_norm_rms_epsilon'",
    "rope_base_negative": "bad rope.freq_base",
    "interval_zero": "full_attention_interval is 0",
    "recurrent_layers_short": "'qwen35.attention.recurrent_layers' has no integer entry for layer 1",
    "too_many_layers": "5000 layers (at most 4096 supported)",
    "head_shapes_too_large": "the model's head shapes are too large",
    "no_token_embd": "missing tensor 'token_embd.weight'",
    "no_ffn_up": "missing tensor 'blk.0.ffn_up.weight'",
    "no_ssm_a": "missing tensor 'blk.0.ssm_a'",
    "attn_norm_wrong_shape": "tensor 'blk.0.attn_norm.weight': shape [32, 2], expected [64, 1]",
    "ffn_up_wrong_shape": "tensor 'blk.0.ffn_up.weight': shape [96, 64, 1, 1], expected [64, 96]",
    "nan_in_f32_vector": "tensor 'output_norm.weight' holds a non-finite value (NaN or infinity) at element 5",
    "neg_inf_in_ssm_a": "tensor 'blk.0.ssm_a' holds a non-finite value (NaN or infinity) at element 2",
    "inf_in_f32_matrix": "tensor 'token_embd.weight' holds a non-finite value (NaN or infinity) at element 300",
    "nan_in_f32_matrix": "tensor 'blk.1.attn_q.weight' holds a non-finite value (NaN or infinity) at element 7",
    "inf_in_f16_matrix": "tensor 'blk.0.ffn_down.weight' holds a non-finite value (NaN or infinity) at element 1000",
    "nan_in_f16_matrix": "tensor 'output.weight' holds a non-finite value (NaN or infinity) at element 3",
    "nan_in_bf16_matrix": "tensor 'blk.1.ffn_gate.weight' holds a non-finite value (NaN or infinity) at element 64",
    "inf_in_bf16_matrix": "tensor 'blk.0.attn_qkv.weight' holds a non-finite value (NaN or infinity) at element 9",
    "inf_q8_0_scale": "tensor 'blk.0.ffn_up.weight' holds a non-finite block scale (NaN or infinity) at block 4",
    "nan_q8_0_scale": "tensor 'output.weight' holds a non-finite block scale (NaN or infinity) at block 0",
    "inf_q4_0_scale": "tensor 'blk.1.attn_output.weight' holds a non-finite block scale (NaN or infinity) at block 11",
    "nan_q4_0_scale": "tensor 'blk.0.ssm_out.weight' holds a non-finite block scale (NaN or infinity) at block 1",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gguf-corpus")
    paths = {}
    for name, data in hostile_cases().items():
        paths[name] = folder / f"{name}.gguf"
        paths[name].write_bytes(data)
    return paths


def _refusal(exe, path: Path) -> tuple[int, str]:
    res = run_kite(exe, "run", "--model", path, "--prompt", "1", timeout=30)
    assert res.stdout == "", res.stdout
    return res.returncode, res.stderr


def test_corpus_is_the_reviewed_table():
    assert len(EXPECTED) >= 50
    assert list(hostile_cases()) == list(EXPECTED)


def test_base_model_runs(kite_bin, tmp_path):
    path = tmp_path / "base.gguf"
    path.write_bytes(base_model().to_bytes())
    res = run_kite(kite_bin, "run", "--model", path, "--prompt", "1,2,3", "--steps", "2", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["nonfinite"] == {"h_out": 0, "logits": 0}


def test_each_file_gets_its_line(kite_bin, corpus):
    wrong = {}
    for name, path in corpus.items():
        rc, err = _refusal(kite_bin, path)
        want = f"kite: error: '{path}': {EXPECTED[name]}\n"
        if (rc, err) != (1, want):
            wrong[name] = (rc, err)
    assert not wrong, wrong


def test_each_file_under_sanitizers(kite_asan_bin, corpus):
    wrong = {}
    for name, path in corpus.items():
        rc, err = _refusal(kite_asan_bin, path)
        if (rc, err) != (1, f"kite: error: '{path}': {EXPECTED[name]}\n"):
            wrong[name] = (rc, err[-2000:])
    assert not wrong, wrong


def test_nonfinite_outputs_are_counted(kite_bin, tmp_path):
    """Finite weights large enough to overflow (ffn_up times 1e38: its dot products leave
    float's range) give NaN and infinities downstream; meta.json counts them in the dumps."""
    model = base_model(T_F32)
    up = model.tensor("blk.0.ffn_up.weight")
    up.data = (np.frombuffer(up.data, dtype="<f4") * np.float32(1e38)).astype("<f4").tobytes()
    path = tmp_path / "overflow.gguf"
    path.write_bytes(model.to_bytes())
    out = tmp_path / "dump"
    res = run_kite(kite_bin, "run", "--model", path, "--prompt", "1,2,3", "--steps", "2", "--dump", out)
    assert res.returncode == 0, res.stderr
    meta = json.loads((out / "meta.json").read_text())
    h = np.fromfile(out / "h_out.f32", dtype="<f4")
    lg = np.fromfile(out / "logits.f32", dtype="<f4")
    counts = {"h_out": int((~np.isfinite(h)).sum()), "logits": int((~np.isfinite(lg)).sum())}
    assert counts["h_out"] > 0 and counts["logits"] > 0, counts
    assert meta["nonfinite"] == counts
