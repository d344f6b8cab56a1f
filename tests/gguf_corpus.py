"""A small qwen35 GGUF built in Python, and hostile variants of it, for the engine's regression
corpus (tests/test_engine_gguf_corpus.py). Deterministic: the same bytes on every run.

The base model has two layers (one Gated DeltaNet, one full attention) with the engine's
smallest legal shapes; every variant changes one thing, at the byte, metadata or tensor level.
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass, field

import numpy as np

# GGUF value types and tensor types (the subset the engine reads)
V_U32, V_I32, V_F32, V_BOOL, V_STRING, V_ARRAY = 4, 5, 6, 7, 8, 9
T_F32, T_F16, T_Q4_0, T_Q8_0, T_BF16 = 0, 1, 2, 8, 30

E, H, HKV, D, F, HK, HV, DK, DV, K, V = 64, 2, 1, 32, 96, 2, 4, 16, 16, 4, 64
C = 2 * HK * DK + HV * DV
LAYERS = [True, False]  # recurrent?


def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


@dataclass
class Kv:
    key: str
    vtype: int
    value: bytes  # encoded, without the type field


def kv_u32(key: str, v: int) -> Kv:
    return Kv(key, V_U32, struct.pack("<I", v))


def kv_f32(key: str, v: float) -> Kv:
    return Kv(key, V_F32, struct.pack("<f", v))


def kv_str(key: str, v: str) -> Kv:
    return Kv(key, V_STRING, _str(v))


def kv_bools(key: str, v: list[bool]) -> Kv:
    return Kv(key, V_ARRAY, struct.pack("<IQ", V_BOOL, len(v)) + bytes(int(b) for b in v))


def _f16_bits(x: np.ndarray) -> np.ndarray:
    return x.astype("<f2").view("<u2")


def encode(values: np.ndarray, ttype: int) -> bytes:
    """Rows of float values as the tensor type (Q8_0 / Q4_0 rounded like the usual writers)."""
    x = np.asarray(values, dtype=np.float32)
    if ttype == T_F32:
        return x.astype("<f4").tobytes()
    if ttype == T_F16:
        return _f16_bits(x).tobytes()
    if ttype == T_BF16:
        return (x.view("<u4") >> 16).astype("<u2").tobytes()
    blocks = x.reshape(-1, 32)
    out = bytearray()
    for b in blocks:
        amax = float(np.abs(b).max())
        if ttype == T_Q8_0:
            d = amax / 127.0
            q = np.rint(b / d).astype(np.int8) if d else np.zeros(32, np.int8)
            out += _f16_bits(np.float32(d)).tobytes() + q.tobytes()
        else:  # Q4_0
            d = -amax / 8.0
            q = np.clip(np.floor(b / d + 8.5), 0, 15).astype(np.uint8) if d else np.full(32, 8, np.uint8)
            out += _f16_bits(np.float32(d)).tobytes() + (q[:16] | (q[16:] << 4)).astype(np.uint8).tobytes()
    return bytes(out)


@dataclass
class Tensor:
    name: str
    ttype: int
    dims: list[int]
    data: bytes
    n_dims: int | None = None  # written instead of len(dims) when set
    offset: int | None = None  # written instead of the computed offset when set


@dataclass
class Gguf:
    kvs: list[Kv]
    tensors: list[Tensor]
    magic: bytes = b"GGUF"
    version: int = 3
    n_tensors: int | None = None  # written instead of the real counts when set
    n_kv: int | None = None
    kv_type_override: dict[str, int] = field(default_factory=dict)

    def kv(self, key: str) -> Kv:
        return next(k for k in self.kvs if k.key == key)

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    def to_bytes(self) -> bytes:
        out = bytearray(self.magic + struct.pack("<I", self.version))
        out += struct.pack(
            "<QQ",
            len(self.tensors) if self.n_tensors is None else self.n_tensors,
            len(self.kvs) if self.n_kv is None else self.n_kv,
        )
        for kv in self.kvs:
            out += _str(kv.key) + struct.pack("<I", self.kv_type_override.get(kv.key, kv.vtype)) + kv.value
        offset = 0
        for t in self.tensors:
            n_dims = len(t.dims) if t.n_dims is None else t.n_dims
            out += _str(t.name) + struct.pack("<I", n_dims) + b"".join(struct.pack("<Q", d) for d in t.dims)
            out += struct.pack("<IQ", t.ttype, offset if t.offset is None else t.offset)
            offset += (len(t.data) + 31) // 32 * 32
        out += b"\0" * (-len(out) % 32)
        for t in self.tensors:
            out += t.data + b"\0" * (-len(t.data) % 32)
        return bytes(out)


def base_model(matrix_type: int = T_Q8_0, seed: int = 0) -> Gguf:
    """A valid two-layer qwen35 model (the engine loads and runs it)."""
    rng = np.random.default_rng(seed)
    kvs = [
        kv_str("general.architecture", "qwen35"),
        kv_u32("qwen35.block_count", len(LAYERS)),
        kv_u32("qwen35.context_length", 64),
        kv_u32("qwen35.embedding_length", E),
        kv_u32("qwen35.feed_forward_length", F),
        kv_u32("qwen35.attention.head_count", H),
        kv_u32("qwen35.attention.head_count_kv", HKV),
        kv_u32("qwen35.attention.key_length", D),
        kv_u32("qwen35.attention.value_length", D),
        kv_u32("qwen35.rope.dimension_count", 8),
        kv_f32("qwen35.rope.freq_base", 1.0e7),
        kv_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6),
        kv_u32("qwen35.ssm.conv_kernel", K),
        kv_u32("qwen35.ssm.state_size", DK),
        kv_u32("qwen35.ssm.group_count", HK),
        kv_u32("qwen35.ssm.time_step_rank", HV),
        kv_u32("qwen35.ssm.inner_size", HV * DV),
        kv_bools("qwen35.attention.recurrent_layers", LAYERS),
    ]
    tensors: list[Tensor] = []

    def add(name: str, ttype: int, ne0: int, ne1: int, lo: float, hi: float) -> None:
        values = rng.uniform(lo, hi, size=(ne1, ne0)).astype(np.float32)
        dims = [ne0, ne1] if ne1 > 1 else [ne0]
        tensors.append(Tensor(name, ttype, dims, encode(values, ttype)))

    add("token_embd.weight", T_F32, E, V, -1.0, 1.0)
    add("output_norm.weight", T_F32, E, 1, 0.8, 1.2)
    add("output.weight", matrix_type, E, V, -0.3, 0.3)
    for il, recurrent in enumerate(LAYERS):

        def blk(name, ttype, ne0, ne1, lo, hi, il=il):
            add(f"blk.{il}.{name}", ttype, ne0, ne1, lo, hi)

        blk("attn_norm.weight", T_F32, E, 1, 0.8, 1.2)
        blk("post_attention_norm.weight", T_F32, E, 1, 0.8, 1.2)
        blk("ffn_gate.weight", matrix_type, E, F, -0.3, 0.3)
        blk("ffn_up.weight", matrix_type, E, F, -0.3, 0.3)
        blk("ffn_down.weight", matrix_type, F, E, -0.3, 0.3)
        if recurrent:
            blk("attn_qkv.weight", matrix_type, E, C, -0.3, 0.3)
            blk("attn_gate.weight", matrix_type, E, HV * DV, -0.3, 0.3)
            blk("ssm_beta.weight", matrix_type, E, HV, -0.3, 0.3)
            blk("ssm_alpha.weight", matrix_type, E, HV, -0.3, 0.3)
            blk("ssm_a", T_F32, HV, 1, -2.0, -0.1)
            blk("ssm_dt.bias", T_F32, HV, 1, -0.5, 0.5)
            blk("ssm_conv1d.weight", T_F32, K, C, -0.5, 0.5)
            blk("ssm_norm.weight", T_F32, DV, 1, 0.5, 1.5)
            blk("ssm_out.weight", matrix_type, HV * DV, E, -0.3, 0.3)
        else:
            blk("attn_q.weight", matrix_type, E, 2 * H * D, -0.3, 0.3)
            blk("attn_k.weight", matrix_type, E, HKV * D, -0.3, 0.3)
            blk("attn_v.weight", matrix_type, E, HKV * D, -0.3, 0.3)
            blk("attn_output.weight", matrix_type, H * D, E, -0.3, 0.3)
            blk("attn_q_norm.weight", T_F32, D, 1, 0.8, 1.2)
            blk("attn_k_norm.weight", T_F32, D, 1, 0.8, 1.2)
    return Gguf(kvs, tensors)


def with_value(model: Gguf, name: str, index: int, bits: int) -> Gguf:
    """A copy whose tensor `name` has element `index` replaced by raw bits (f32: 4 bytes, f16 and
    bf16: 2 bytes) or, for Q8_0 / Q4_0, block `index`'s scale replaced by f16 bits."""
    m = copy.deepcopy(model)
    t = m.tensor(name)
    data = bytearray(t.data)
    if t.ttype == T_F32:
        data[4 * index : 4 * index + 4] = struct.pack("<I", bits)
    elif t.ttype in (T_F16, T_BF16):
        data[2 * index : 2 * index + 2] = struct.pack("<H", bits)
    else:
        start = index * (34 if t.ttype == T_Q8_0 else 18)
        data[start : start + 2] = struct.pack("<H", bits)
    t.data = bytes(data)
    return m


# raw bits of NaN and infinities: f32, f16, bf16
NAN32, INF32, NINF32 = 0x7FC00000, 0x7F800000, 0xFF800000
NAN16, INF16 = 0x7E00, 0x7C00
BF_NAN, BF_INF = 0x7FC0, 0x7F80


def _mod(fn) -> bytes:
    """base_model() changed in place by fn, as bytes."""
    m = base_model()
    fn(m)
    return m.to_bytes()


def _set_kv(key: str, kv: Kv):
    def f(m):
        i = next(i for i, k in enumerate(m.kvs) if k.key == key)
        m.kvs[i] = kv

    return f


def _drop_kv(key: str):
    def f(m):
        m.kvs = [k for k in m.kvs if k.key != key]

    return f


def _drop_tensor(name: str):
    def f(m):
        m.tensors = [t for t in m.tensors if t.name != name]

    return f


def _tensor_attr(tname: str, **kw):
    def f(m):
        t = m.tensor(tname)
        for k, v in kw.items():
            setattr(t, k, v)

    return f


def _attrs(**kw):
    def f(m):
        for k, v in kw.items():
            setattr(m, k, v)

    return f


def hostile_cases() -> dict[str, bytes]:
    """Each a one-change variant of base_model() (or of a few plain byte strings), by name."""
    BASE = base_model().to_bytes()
    return {
        # the reader: sizes, header fields, truncation
        "empty": b"",
        "three_bytes": b"GGU",
        "bad_magic": _mod(_attrs(magic=b"GGUX")),
        "version_1": _mod(_attrs(version=1)),
        "version_4": _mod(_attrs(version=4)),
        "huge_tensor_count": _mod(_attrs(n_tensors=1 << 60)),
        "huge_kv_count": _mod(_attrs(n_kv=(1 << 64) - 1)),
        "kv_count_too_small": _mod(_attrs(n_kv=3)),
        "cut_in_header": BASE[:20],
        "cut_in_first_key": BASE[:30],
        "cut_in_metadata": BASE[:300],
        "cut_in_tensor_infos": BASE[:900],
        "cut_in_data": BASE[: len(BASE) // 2],
        "cut_last_byte": BASE[:-1],
        "unknown_kv_type": _mod(lambda m: m.kv_type_override.update({"qwen35.block_count": 99})),
        "kv_as_nested_array": _mod(
            _set_kv(
                "qwen35.attention.recurrent_layers",
                Kv("qwen35.attention.recurrent_layers", V_ARRAY, struct.pack("<IQ", V_ARRAY, 2)),
            )
        ),
        "array_unknown_type": _mod(
            _set_kv(
                "qwen35.attention.recurrent_layers",
                Kv("qwen35.attention.recurrent_layers", V_ARRAY, struct.pack("<IQ", 77, 2) + b"\1\0"),
            )
        ),
        "array_count_huge": _mod(
            _set_kv(
                "qwen35.attention.recurrent_layers",
                Kv("qwen35.attention.recurrent_layers", V_ARRAY, struct.pack("<IQ", V_BOOL, 1 << 40)),
            )
        ),
        "empty_key": _mod(_set_kv("qwen35.context_length", kv_u32("", 64))),
        "key_with_nul": _mod(_set_kv("qwen35.context_length", kv_u32("qwen35.context\0length", 64))),
        "duplicate_key": _mod(_set_kv("qwen35.context_length", kv_u32("qwen35.block_count", 2))),
        "alignment_not_power_of_two": _mod(lambda m: m.kvs.append(kv_u32("general.alignment", 48))),
        "tensor_zero_dims": _mod(_tensor_attr("output_norm.weight", n_dims=0)),
        "tensor_five_dims": _mod(_tensor_attr("output_norm.weight", n_dims=5)),
        "tensor_dim_zero": _mod(_tensor_attr("output_norm.weight", dims=[0])),
        "tensor_dims_overflow": _mod(_tensor_attr("output_norm.weight", dims=[1 << 40, 1 << 40])),
        "tensor_type_q4_k": _mod(_tensor_attr("output.weight", ttype=12)),
        "tensor_type_unknown": _mod(_tensor_attr("output.weight", ttype=99)),
        "q8_0_row_not_blocks": _mod(_tensor_attr("output.weight", dims=[48, 64])),
        "tensor_offset_unaligned": _mod(_tensor_attr("output.weight", offset=8)),
        "tensor_offset_past_end": _mod(_tensor_attr("output.weight", offset=1 << 30)),
        "tensor_offset_wraps": _mod(_tensor_attr("output.weight", offset=(1 << 64) - 32)),
        "duplicate_tensor": _mod(_tensor_attr("output.weight", name="token_embd.weight")),
        "empty_tensor_name": _mod(_tensor_attr("output_norm.weight", name="")),
        # the model: metadata
        "no_architecture": _mod(_drop_kv("general.architecture")),
        "architecture_llama": _mod(_set_kv("general.architecture", kv_str("general.architecture", "llama"))),
        "architecture_not_string": _mod(_set_kv("general.architecture", kv_u32("general.architecture", 35))),
        "no_block_count": _mod(_drop_kv("qwen35.block_count")),
        "block_count_zero": _mod(_set_kv("qwen35.block_count", kv_u32("qwen35.block_count", 0))),
        "embedding_length_string": _mod(_set_kv("qwen35.embedding_length", kv_str("qwen35.embedding_length", "64"))),
        "embedding_length_huge": _mod(_set_kv("qwen35.embedding_length", kv_u32("qwen35.embedding_length", 1 << 30))),
        "head_count_zero": _mod(_set_kv("qwen35.attention.head_count", kv_u32("qwen35.attention.head_count", 0))),
        "head_count_kv_not_divisor": _mod(
            _set_kv("qwen35.attention.head_count_kv", kv_u32("qwen35.attention.head_count_kv", 3))
        ),
        "value_length_differs": _mod(
            _set_kv("qwen35.attention.value_length", kv_u32("qwen35.attention.value_length", 16))
        ),
        "rope_dims_odd": _mod(_set_kv("qwen35.rope.dimension_count", kv_u32("qwen35.rope.dimension_count", 7))),
        "rope_dims_above_head": _mod(_set_kv("qwen35.rope.dimension_count", kv_u32("qwen35.rope.dimension_count", 64))),
        "conv_kernel_zero": _mod(_set_kv("qwen35.ssm.conv_kernel", kv_u32("qwen35.ssm.conv_kernel", 0))),
        "inner_size_not_divisible": _mod(_set_kv("qwen35.ssm.inner_size", kv_u32("qwen35.ssm.inner_size", 65))),
        "no_rms_epsilon": _mod(_drop_kv("qwen35.attention.layer_norm_rms_epsilon")),
        "rope_base_negative": _mod(_set_kv("qwen35.rope.freq_base", kv_f32("qwen35.rope.freq_base", -1.0))),
        "interval_zero": _mod(
            lambda m: (
                _drop_kv("qwen35.attention.recurrent_layers")(m),
                m.kvs.append(kv_u32("qwen35.full_attention_interval", 0)),
            )
        ),
        "recurrent_layers_short": _mod(
            _set_kv("qwen35.attention.recurrent_layers", kv_bools("qwen35.attention.recurrent_layers", [True]))
        ),
        "too_many_layers": _mod(_set_kv("qwen35.block_count", kv_u32("qwen35.block_count", 5000))),
        "head_shapes_too_large": _mod(_set_kv("qwen35.ssm.state_size", kv_u32("qwen35.ssm.state_size", 1 << 23))),
        # the model: tensors
        "no_token_embd": _mod(_drop_tensor("token_embd.weight")),
        "no_ffn_up": _mod(_drop_tensor("blk.0.ffn_up.weight")),
        "no_ssm_a": _mod(_drop_tensor("blk.0.ssm_a")),
        "attn_norm_wrong_shape": _mod(_tensor_attr("blk.0.attn_norm.weight", dims=[32, 2])),
        "ffn_up_wrong_shape": _mod(_tensor_attr("blk.0.ffn_up.weight", dims=[96, 64])),
        # non-finite weights
        "nan_in_f32_vector": with_value(base_model(), "output_norm.weight", 5, NAN32).to_bytes(),
        "neg_inf_in_ssm_a": with_value(base_model(), "blk.0.ssm_a", 2, NINF32).to_bytes(),
        "inf_in_f32_matrix": with_value(base_model(), "token_embd.weight", 300, INF32).to_bytes(),
        "nan_in_f32_matrix": with_value(base_model(T_F32), "blk.1.attn_q.weight", 7, NAN32).to_bytes(),
        "inf_in_f16_matrix": with_value(base_model(T_F16), "blk.0.ffn_down.weight", 1000, INF16).to_bytes(),
        "nan_in_f16_matrix": with_value(base_model(T_F16), "output.weight", 3, NAN16).to_bytes(),
        "nan_in_bf16_matrix": with_value(base_model(T_BF16), "blk.1.ffn_gate.weight", 64, BF_NAN).to_bytes(),
        "inf_in_bf16_matrix": with_value(base_model(T_BF16), "blk.0.attn_qkv.weight", 9, BF_INF).to_bytes(),
        "inf_q8_0_scale": with_value(base_model(T_Q8_0), "blk.0.ffn_up.weight", 4, INF16).to_bytes(),
        "nan_q8_0_scale": with_value(base_model(T_Q8_0), "output.weight", 0, NAN16).to_bytes(),
        "inf_q4_0_scale": with_value(base_model(T_Q4_0), "blk.1.attn_output.weight", 11, INF16).to_bytes(),
        "nan_q4_0_scale": with_value(base_model(T_Q4_0), "blk.0.ssm_out.weight", 1, NAN16).to_bytes(),
    }
