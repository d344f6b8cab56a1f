"""Hugging Face Qwen3.5 checkpoint -> qwen35 GGUF, with llama.cpp's converter conventions.

Reads ``config.json`` and ``model.safetensors`` (or sharded ``model-*.safetensors`` with
``model.safetensors.index.json``) with a small safetensors reader (header JSON + numpy views of a
memory map; no torch, no safetensors package). Value transforms, as llama.cpp's converter:

1. +1 on zero-centred RMSNorm weights (every ``*norm.weight`` except ``linear_attn.norm.weight``);
2. ``ssm_a = -exp(A_log)`` (exp evaluated in double, then rounded to float32: numpy's float32 exp
   is off by one ulp on some of the fixture values, torch's is not);
3. ``conv1d.weight`` (C, 1, K) -> (C, K);
4. ``dt_bias`` renamed to ``ssm_dt.bias``;
5. when Hv != Hk, value heads reordered from HF's grouped order (j = g*r + s) to the tiled order
   (j' = s*Hk + g) along every value-head axis;
6. nothing else: no transposes, no Q/K permutation, no splitting.

Like the converter, bf16 sources are widened to float32 before the transforms; f16 sources keep
f16 arithmetic (each result rounded to f16, as torch does); the result is then widened to float32 and
encoded
(`quant.tensor_type` picks F32/F16/Q8_0/Q4_0 per tensor). Tensors are written in the converter's
order (HF names sorted, file by file).
"""

from __future__ import annotations

import json
import mmap
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from .gguf_out import write_gguf
from .recipes import Qwen35Config, RecipeError, TensorSpec, validate_config
from .vocab import byte_level_vocab, hf_vocab


class ConvertError(ValueError):
    pass


# ---- safetensors ---------------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
              "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
              "BOOL": np.bool_}


@dataclass(frozen=True)
class StTensor:
    name: str
    dtype: str  # safetensors dtype string
    shape: tuple[int, ...]
    file: Path
    begin: int  # absolute byte offset in the file
    end: int


class SafetensorsFile:
    """A memory-mapped safetensors file: ``header()`` entries and ``load(name)`` as float32."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ConvertError(f"{self.path}: too short for a safetensors file")
            (n,) = struct.unpack("<Q", head)
            size = self.path.stat().st_size
            if n > min(size - 8, 100 << 20):
                raise ConvertError(f"{self.path}: header length {n} is not plausible")
            try:
                hdr = json.loads(f.read(n))
            except ValueError as e:
                raise ConvertError(f"{self.path}: header is not valid JSON: {e}") from None
        base = 8 + n
        self.tensors: dict[str, StTensor] = {}
        for name, info in hdr.items():
            if name == "__metadata__":
                continue
            dt = info.get("dtype")
            if dt not in _ST_DTYPES:
                raise ConvertError(f"{self.path}: tensor {name}: unsupported dtype {dt!r}")
            b, e = info["data_offsets"]
            shape = tuple(int(x) for x in info["shape"])
            want = int(np.prod(shape, dtype=np.int64)) * np.dtype(_ST_DTYPES[dt]).itemsize
            if not (0 <= b <= e and e - b == want and base + e <= size):
                raise ConvertError(f"{self.path}: tensor {name}: bad data_offsets {b}..{e}")
            self.tensors[name] = StTensor(name, dt, shape, self.path, base + b, base + e)
        self._mm: mmap.mmap | None = None

    def _map(self) -> mmap.mmap:
        if self._mm is None:
            with open(self.path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mm

    def raw(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        a = np.frombuffer(self._map(), dtype=np.dtype(_ST_DTYPES[t.dtype]).newbyteorder("<"),
                          count=(t.end - t.begin) // np.dtype(_ST_DTYPES[t.dtype]).itemsize, offset=t.begin)
        return a.reshape(t.shape)


def bf16_to_f32(u: np.ndarray) -> np.ndarray:
    return (u.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even, as torch's float -> bfloat16 (NaN kept NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


class SrcTensor:
    """A tensor in its source dtype; `f32()` widens, `elementwise(fn)` computes like torch does."""

    def __init__(self, st: StTensor, data: np.ndarray):
        self.st = st
        self.data = data

    def f32(self) -> np.ndarray:
        if self.st.dtype == "BF16":
            return bf16_to_f32(self.data)
        return self.data.astype(np.float32)

    def elementwise(self, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` as the converter computes it: it widens every dtype but f16 and f32 to float32
        first, so bf16 sources get float32 arithmetic; f16 sources stay f16 (torch rounds each
        f16 result to f16)."""
        y = fn(self.f32()).astype(np.float32)
        if self.st.dtype == "F16":
            return y.astype(np.float16).astype(np.float32)
        return y


def open_checkpoint(hf_dir: Path) -> tuple[list[str], dict[str, SafetensorsFile]]:
    """Tensor names in the converter's order, and the file holding each."""
    hf_dir = Path(hf_dir)
    single = hf_dir / "model.safetensors"
    if single.is_file():
        parts = [single]
    else:
        index = hf_dir / "model.safetensors.index.json"
        if index.is_file():
            wm = json.loads(index.read_text())["weight_map"]
            parts = [hf_dir / p for p in sorted(set(wm.values()))]
        else:
            parts = sorted(hf_dir.glob("model*.safetensors"))
        if not parts:
            raise ConvertError(f"{hf_dir}: no model.safetensors (or shards) found")
    order: list[str] = []
    where: dict[str, SafetensorsFile] = {}
    for p in parts:
        f = SafetensorsFile(p)
        for name in sorted(f.tensors):
            if name in where:
                raise ConvertError(f"tensor {name} appears in both {where[name].path.name} and {p.name}")
            order.append(name)
            where[name] = f
    return order, where


# ---- config --------------------------------------------------------------------------------------

def config_from_hf(cfg: dict) -> Qwen35Config:
    """Qwen35Config from a HF config.json (``Qwen3_5ForCausalLM`` or the text half of
    ``Qwen3_5ForConditionalGeneration``)."""
    t = cfg.get("text_config", cfg)
    if "rope_parameters" in t and isinstance(t["rope_parameters"], dict):
        rope = t["rope_parameters"]
    else:
        rope = t.get("rope_scaling") or {}
    def get(k, default=None, required=False):
        if k in t and t[k] is not None:
            return t[k]
        if required:
            raise ConvertError(f"config.json: missing {k}")
        return default
    n_layer = get("num_hidden_layers", required=True)
    interval = get("full_attention_interval", 4)
    lts = get("layer_types")
    if lts is None:
        layer_types = tuple("linear" if (i + 1) % interval else "full" for i in range(n_layer))
    else:
        m = {"linear_attention": "linear", "full_attention": "full"}
        try:
            layer_types = tuple(m[x] for x in lts)
        except KeyError as e:
            raise ConvertError(f"config.json: unknown layer type {e.args[0]!r}") from None
    H = get("num_attention_heads", required=True)
    sections = list(rope.get("mrope_section") or t.get("mrope_section") or [11, 11, 10])
    sections = tuple(int(s) for s in (sections + [0, 0, 0, 0])[:4])
    theta = rope.get("rope_theta", t.get("rope_theta", 10000.0))
    prf = rope.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25))
    c = Qwen35Config(
        vocab_size=get("vocab_size", required=True),
        hidden_size=get("hidden_size", required=True),
        num_hidden_layers=n_layer,
        layer_types=layer_types,
        intermediate_size=get("intermediate_size", required=True),
        num_attention_heads=H,
        num_key_value_heads=get("num_key_value_heads", H),
        head_dim=get("head_dim", get("hidden_size", required=True) // H),
        linear_num_key_heads=get("linear_num_key_heads", required=True),
        linear_num_value_heads=get("linear_num_value_heads", required=True),
        linear_key_head_dim=get("linear_key_head_dim", required=True),
        linear_value_head_dim=get("linear_value_head_dim", required=True),
        linear_conv_kernel_dim=get("linear_conv_kernel_dim", 4),
        partial_rotary_factor=float(prf),
        rope_theta=float(theta),
        rope_sections=sections,
        rms_norm_eps=float(get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", t.get("tie_word_embeddings", False))),
        context_length=get("max_position_embeddings", required=True),
        full_attention_interval=interval,
        eos_token_id=None,
    )
    try:
        validate_config(c, "config.json")
    except RecipeError as e:
        raise ConvertError(str(e)) from None
    return c


# ---- tensor mapping ------------------------------------------------------------------------------

_GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "linear_attn.in_proj_qkv.weight": "attn_qkv.weight",
    "linear_attn.in_proj_z.weight": "attn_gate.weight",
    "linear_attn.in_proj_b.weight": "ssm_beta.weight",
    "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
    "linear_attn.A_log": "ssm_a",
    "linear_attn.dt_bias": "ssm_dt.bias",
    "linear_attn.conv1d.weight": "ssm_conv1d.weight",
    "linear_attn.norm.weight": "ssm_norm.weight",
    "linear_attn.out_proj.weight": "ssm_out.weight",
}
_LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_SKIP_PREFIXES = ("model.visual.", "visual.", "mtp.", "model.mtp.")


def _canonical(name: str) -> str | None:
    """HF name as in Qwen3_5ForCausalLM; None for tensors the text model does not use."""
    if name.startswith("model.language_model."):
        name = "model." + name[len("model.language_model."):]
    if name.startswith(_SKIP_PREFIXES):
        return None
    return name


def vhead_perm(hk: int, hv: int) -> np.ndarray:
    """GGUF value-head position j' -> HF value head (g*r + s, with s = j' // Hk, g = j' % Hk)."""
    r = hv // hk
    return np.array([(j % hk) * r + j // hk for j in range(hv)], dtype=np.int64)


def _reorder(x: np.ndarray, perm: np.ndarray, block: int, axis: int) -> np.ndarray:
    hv = len(perm)
    shape = x.shape
    y = x.reshape(*shape[:axis], hv, block, *shape[axis + 1:])
    return np.ascontiguousarray(np.take(y, perm, axis=axis)).reshape(shape)


def plan_tensors(c: Qwen35Config, order: list[str], files: dict[str, SafetensorsFile]
                 ) -> list[tuple[TensorSpec, Callable[[], np.ndarray]]]:
    hk, hv = c.linear_num_key_heads, c.linear_num_value_heads
    dk, dv = c.linear_key_head_dim, c.linear_value_head_dim
    perm = vhead_perm(hk, hv) if hv != hk else None
    qk_rows = 2 * hk * dk
    expected = {s.name: s for s in c.tensor_specs()}
    out: list[tuple[TensorSpec, Callable[[], np.ndarray]]] = []
    seen: set[str] = set()
    for hf_name in order:
        canon = _canonical(hf_name)
        if canon is None:
            continue
        if canon in _GLOBAL:
            gname, suffix, layer = _GLOBAL[canon], canon, None
        else:
            m = _LAYER_RE.match(canon)
            if not m or m.group(2) not in _LAYER:
                raise ConvertError(f"unexpected tensor {hf_name!r} (not part of a Qwen3.5 text model)")
            layer, suffix = int(m.group(1)), m.group(2)
            if layer >= c.num_hidden_layers:
                continue  # MTP blocks stored as extra layers: not exported (as --no-mtp)
            gname = f"blk.{layer}.{_LAYER[suffix]}"
        if gname == "output.weight" and c.tie_word_embeddings:
            continue  # tied: llama.cpp uses token_embd.weight as the LM head
        if gname not in expected:
            raise ConvertError(f"tensor {hf_name!r} -> {gname!r} does not belong to this config "
                               f"(layer type {c.layer_types[layer] if layer is not None else '-'})")
        st = files[hf_name].tensors[hf_name]
        f = files[hf_name]

        def producer(hf_name=hf_name, suffix=suffix, st=st, f=f) -> np.ndarray:
            src = SrcTensor(st, f.raw(hf_name))
            if suffix.endswith("norm.weight") and suffix != "linear_attn.norm.weight":
                return src.elementwise(lambda x: x + np.float32(1))
            if suffix == "linear_attn.A_log":
                # float32 result of exp computed in double (correctly rounded, as torch's exp gives here)
                x = src.elementwise(lambda x: -np.exp(x.astype(np.float64)).astype(np.float32))
            else:
                x = src.f32()
            if suffix == "linear_attn.conv1d.weight":
                x = x.reshape(x.shape[0], x.shape[-1])
            if perm is not None:
                if suffix in ("linear_attn.in_proj_qkv.weight", "linear_attn.conv1d.weight"):
                    x = np.concatenate([x[:qk_rows], _reorder(x[qk_rows:], perm, dv, 0)], axis=0)
                elif suffix == "linear_attn.in_proj_z.weight":
                    x = _reorder(x, perm, dv, 0)
                elif suffix in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight",
                                "linear_attn.A_log", "linear_attn.dt_bias"):
                    x = _reorder(x, perm, 1, 0)
                elif suffix == "linear_attn.out_proj.weight":
                    x = _reorder(x, perm, dv, 1)
            return np.ascontiguousarray(x, dtype=np.float32)

        shape = st.shape
        if suffix == "linear_attn.conv1d.weight":
            if len(shape) != 3 or shape[1] != 1:
                raise ConvertError(f"{hf_name}: expected shape (C, 1, K), got {shape}")
            shape = (shape[0], shape[2])
        ne = tuple(reversed(shape))
        spec = expected[gname]
        if ne != spec.ne:
            raise ConvertError(f"{hf_name}: shape {st.shape} gives ne {list(ne)}, config implies {list(spec.ne)}")
        if st.dtype not in ("F32", "F16", "BF16"):
            raise ConvertError(f"{hf_name}: unsupported dtype {st.dtype}")
        seen.add(gname)
        out.append((spec, producer))
    missing = [n for n in expected if n not in seen]
    if missing:
        raise ConvertError(f"checkpoint lacks {len(missing)} tensor(s), e.g. {missing[:3]}")
    return out


def convert(hf_dir: Path, out: Path, outtype: str = "f32", tokenizer_pre: str = "qwen35") -> Path:
    hf_dir = Path(hf_dir)
    cfg_path = hf_dir / "config.json"
    if not cfg_path.is_file():
        raise ConvertError(f"{hf_dir}: no config.json")
    c = config_from_hf(json.loads(cfg_path.read_text()))
    order, files = open_checkpoint(hf_dir)
    tensors = plan_tensors(c, order, files)
    total = sum(s.n_elements for s, _ in tensors)
    meta = gguf.Metadata.load(None, hf_dir.resolve(), None, total)
    if meta.size_label is None:
        meta.size_label = gguf.size_label(total, total, 0, 0)
    vocab = hf_vocab(hf_dir, c.vocab_size, pre=tokenizer_pre)
    if vocab is None:
        vocab = byte_level_vocab(c.vocab_size, pre=tokenizer_pre)
    return write_gguf(Path(out), c, outtype, meta, vocab, tensors)
