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

import dataclasses
import math
import mmap
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import yaml

from .gguf_out import write_gguf
from .hfjson import (ConvertError, expect_bool, expect_int, expect_int_list, expect_number, expect_object,
                     expect_str_list, fail, is_int, load_json, read_json, show)
from .recipes import Qwen35Config, RecipeError, TensorSpec, validate_config
from .vocab import byte_level_vocab, hf_vocab


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
            hdr = load_json(f.read(n), f"{self.path}: header")
        if not isinstance(hdr, dict):
            raise fail(f"{self.path}: header", "a JSON object (tensor name -> entry)", hdr)
        base = 8 + n
        self.tensors: dict[str, StTensor] = {}
        for name, info in hdr.items():
            if name == "__metadata__":
                continue
            self.tensors[name] = self._entry(name, info, base, size)
        self._mm: mmap.mmap | None = None

    def _entry(self, name: str, info: object, base: int, size: int) -> StTensor:
        """One header entry, checked: ``{"dtype": str, "shape": [int, ...], "data_offsets": [begin, end]}``."""
        where = f"{self.path}: header entry {show(name, 200)}"
        if not isinstance(info, dict):
            raise fail(where, 'an object with "dtype", "shape" and "data_offsets"', info)
        dt = info.get("dtype")
        if not isinstance(dt, str) or dt not in _ST_DTYPES:
            raise ConvertError(f"{where}: unsupported dtype {show(dt)} (supported: {', '.join(_ST_DTYPES)})")
        shape = info.get("shape")
        if not isinstance(shape, list) or len(shape) > 64 or not all(is_int(x) and x >= 0 for x in shape):
            raise ConvertError(f"{where}: shape must be a list of at most 64 non-negative integers, "
                               f"got {show(shape)}")
        offs = info.get("data_offsets")
        if not isinstance(offs, list) or len(offs) != 2 or not all(is_int(x) for x in offs):
            raise ConvertError(f"{where}: data_offsets must be two integers, got {show(offs)}")
        b, e = offs
        want = math.prod(shape) * np.dtype(_ST_DTYPES[dt]).itemsize
        if not (0 <= b <= e and e - b == want and base + e <= size):
            raise ConvertError(f"{where}: bad data_offsets {b}..{e} (shape {shape} of {dt} takes {want} bytes; "
                               f"the data section has {size - base})")
        return StTensor(name, dt, tuple(shape), self.path, base + b, base + e)

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
            parts = [hf_dir / p for p in _index_shards(index)]
        else:
            parts = sorted(p for p in hf_dir.glob("model*.safetensors") if p.is_file())
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


def _index_shards(index: Path) -> list[str]:
    """The shard file names of ``model.safetensors.index.json``'s weight_map (tensor -> file name)."""
    doc = expect_object(read_json(index), str(index))
    if "weight_map" not in doc:
        raise ConvertError(f"{index}: missing weight_map")
    wm = doc["weight_map"]
    if not isinstance(wm, dict):
        raise fail(f"{index}: weight_map", "an object (tensor name -> shard file name)", wm)
    names = set()
    for tensor, shard in wm.items():
        if not isinstance(shard, str) or shard in ("", ".", "..") or "/" in shard or "\\" in shard:
            raise fail(f"{index}: weight_map[{show(tensor, 200)}]", "a file name in the checkpoint folder", shard)
        names.add(shard)
    for shard in names:
        if not (index.parent / shard).is_file():
            raise ConvertError(f"{index}: weight_map names {shard!r}, which is not a file in {index.parent}")
    return sorted(names)


# ---- config --------------------------------------------------------------------------------------

# Upper bounds of the size fields, far above any real model: they keep a hostile config.json from
# building huge layer lists (or tensor specs) before the checkpoint's tensors are looked at.
MAX_LAYERS = 100_000
MAX_DIM = 10_000_000
MAX_CONTEXT = 2**31 - 1  # GGUF stores it as uint32 (struct.error above); int32 range to be safe

_SIZE_FIELDS = {  # config.json key -> upper bound (the lower bound is 1)
    "vocab_size": MAX_DIM, "hidden_size": MAX_DIM, "num_hidden_layers": MAX_LAYERS, "intermediate_size": MAX_DIM,
    "num_attention_heads": MAX_DIM, "num_key_value_heads": MAX_DIM, "head_dim": MAX_DIM,
    "linear_num_key_heads": MAX_DIM, "linear_num_value_heads": MAX_DIM, "linear_key_head_dim": MAX_DIM,
    "linear_value_head_dim": MAX_DIM, "linear_conv_kernel_dim": MAX_DIM, "max_position_embeddings": MAX_CONTEXT,
    "full_attention_interval": MAX_LAYERS,
}
_OPTIONAL_SIZES = {"num_key_value_heads", "head_dim", "linear_conv_kernel_dim", "full_attention_interval"}
_SPECIAL_TOKENS = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
_HF_LAYER_TYPES = {"linear_attention": "linear", "full_attention": "full"}


def config_from_hf(cfg: object, where: str = "config.json") -> Qwen35Config:
    """Qwen35Config from a HF config.json (``Qwen3_5ForCausalLM`` or the text half of
    ``Qwen3_5ForConditionalGeneration``). Every field used is type- and range-checked first:
    `ConvertError` names `where` and the field."""
    top = expect_object(cfg, where)
    t, tp = top, ""  # the text model's fields and their path prefix in messages
    if "text_config" in top:  # gguf's SpecialVocab reads it too, as an object
        t, tp = expect_object(top["text_config"], f"{where}: text_config"), "text_config."
    rope, rp = {}, ""
    for key in ("rope_parameters", "rope_scaling"):
        if t.get(key) is not None:
            rope, rp = expect_object(t[key], f"{where}: {tp}{key}"), f"{tp}{key}."
            break

    def present(d: dict, k: str) -> bool:
        return k in d and d[k] is not None

    def size(k: str) -> int:
        """A size or count, checked to be in [1, _SIZE_FIELDS[k]]; 0 for an absent optional one."""
        if present(t, k):
            return expect_int(t[k], f"{where}: {tp}{k}", 1, _SIZE_FIELDS[k])
        if k not in _OPTIONAL_SIZES:
            raise ConvertError(f"{where}: missing {tp}{k}")
        return 0

    def number(k: str, default: float) -> float:
        """A rope field: in rope_parameters / rope_scaling, else at the text model's top level."""
        for d, pre in ((rope, rp), (t, tp)):
            if present(d, k):
                return expect_number(d[k], f"{where}: {pre}{k}")
        return default

    sz = {k: size(k) for k in _SIZE_FIELDS}
    n_layer, interval, H = sz["num_hidden_layers"], sz["full_attention_interval"] or 4, sz["num_attention_heads"]
    if present(t, "layer_types"):
        lts = expect_str_list(t["layer_types"], f"{where}: {tp}layer_types")
        bad = [x for x in lts if x not in _HF_LAYER_TYPES]
        if bad:
            raise ConvertError(f"{where}: {tp}layer_types: unknown layer type {show(bad[0])} "
                               f"(expected {' or '.join(_HF_LAYER_TYPES)})")
        layer_types = tuple(_HF_LAYER_TYPES[x] for x in lts)
    else:
        layer_types = tuple("linear" if (i + 1) % interval else "full" for i in range(n_layer))
    sections: list[int] = [11, 11, 10]
    for d, pre in ((rope, rp), (t, tp)):
        if d.get("mrope_section"):  # as before: a missing, null or empty list falls through
            sections = expect_int_list(d["mrope_section"], f"{where}: {pre}mrope_section", 0, MAX_DIM, 4)
            break
    for d, pre in [(top, "")] + ([(t, tp)] if t is not top else []):
        for typ in _SPECIAL_TOKENS:  # read by gguf's SpecialVocab, written as uint32 (it reports negative ones)
            v = d.get(f"{typ}_token_id")
            if v is not None and not all(is_int(x) and x < 2**32 for x in (v if isinstance(v, list) else [v])):
                raise fail(f"{where}: {pre}{typ}_token_id", "a token id (or a list of them) below 2^32", v)
    eps = expect_number(t["rms_norm_eps"], f"{where}: {tp}rms_norm_eps") if present(t, "rms_norm_eps") else 1e-6
    tie = top.get("tie_word_embeddings", t.get("tie_word_embeddings"))
    tie_where = f"{where}: {'' if 'tie_word_embeddings' in top else tp}tie_word_embeddings"
    c = Qwen35Config(
        vocab_size=sz["vocab_size"],
        hidden_size=sz["hidden_size"],
        num_hidden_layers=n_layer,
        layer_types=layer_types,
        intermediate_size=sz["intermediate_size"],
        num_attention_heads=H,
        num_key_value_heads=sz["num_key_value_heads"] or H,
        head_dim=sz["head_dim"] or sz["hidden_size"] // H,
        linear_num_key_heads=sz["linear_num_key_heads"],
        linear_num_value_heads=sz["linear_num_value_heads"],
        linear_key_head_dim=sz["linear_key_head_dim"],
        linear_value_head_dim=sz["linear_value_head_dim"],
        linear_conv_kernel_dim=sz["linear_conv_kernel_dim"] or 4,
        partial_rotary_factor=number("partial_rotary_factor", 0.25),
        rope_theta=number("rope_theta", 10000.0),
        rope_sections=tuple((sections + [0, 0, 0, 0])[:4]),
        rms_norm_eps=eps,
        tie_word_embeddings=False if tie is None else expect_bool(tie, tie_where),
        context_length=sz["max_position_embeddings"],
        full_attention_interval=interval,
        eos_token_id=None,
    )
    try:
        validate_config(c, where)
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
_LAYER_RE = re.compile(r"^model\.layers\.([0-9]{1,9})\.(.+)$")  # longer indices: "unexpected tensor"
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


_META_SOURCES = "README.md front matter, generation_config.json or config.json"


def _metadata(hf_dir: Path, total: int) -> gguf.Metadata:
    """gguf-py's general.* / sampling metadata (name, license, base models, sampling defaults...), as
    the converter loads it, with its values checked against the dataclass's annotated types: gguf-py
    takes them from README.md, generation_config.json and config.json as they are, and a wrong type
    would only fail while the GGUF is written."""
    where = f"{hf_dir}: {_META_SOURCES}"
    try:
        meta = gguf.Metadata.load(None, hf_dir.resolve(), None, total)
    except RecursionError:
        raise ConvertError(f"{where}: nested too deeply") from None
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
        # the third-party reader's failures on malformed content (README front matter YAML,
        # generation_config.json that is not an object, ...)
        raise ConvertError(f"{where}: cannot be read: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    for f in dataclasses.fields(meta):
        v, kind = getattr(meta, f.name), _META_TYPES.get(str(f.type))
        if v is not None and kind is not None and not _meta_value_ok(kind, f.name, v):
            raise ConvertError(f"{where}: metadata {f.name}: expected {kind}, got {show(v)}")
    return meta


# gguf-py 0.19's annotations of gguf.Metadata's fields (strings: the module defers annotations)
_META_TYPES = {"Optional[str]": "a string", "Optional[int]": "a 32-bit integer", "Optional[float]": "a number",
               "Optional[list[str]]": "a list of strings", "Optional[list[dict]]": "a list of objects of strings"}
_META_ENTRY_KEYS = ("name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url")


def _meta_value_ok(kind: str, name: str, v: object) -> bool:
    if kind == "a string":
        return isinstance(v, str) or (name == "license" and isinstance(v, list)  # gguf-py joins a list
                                      and all(isinstance(x, str) for x in v))
    if kind == "a 32-bit integer":
        return is_int(v) and -2**31 <= v < 2**31
    if kind == "a number":  # written as float32
        return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= 3.4e38
    if kind == "a list of strings":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    return isinstance(v, list) and all(  # base_models, datasets: the keys gguf-py writes must be strings
        isinstance(x, dict) and all(isinstance(x[k], str) for k in _META_ENTRY_KEYS if k in x) for x in v)


def convert(hf_dir: Path, out: Path, outtype: str = "f32", tokenizer_pre: str = "qwen35") -> Path:
    hf_dir = Path(hf_dir)
    cfg_path = hf_dir / "config.json"
    if not cfg_path.exists():
        raise ConvertError(f"{hf_dir}: no config.json")
    c = config_from_hf(read_json(cfg_path), str(cfg_path))
    order, files = open_checkpoint(hf_dir)
    tensors = plan_tensors(c, order, files)
    total = sum(s.n_elements for s, _ in tensors)
    meta = _metadata(hf_dir, total)
    if meta.size_label is None:
        meta.size_label = gguf.size_label(total, total, 0, 0)
    vocab = hf_vocab(hf_dir, c.vocab_size, pre=tokenizer_pre)
    if vocab is None:
        vocab = byte_level_vocab(c.vocab_size, pre=tokenizer_pre)
    return write_gguf(Path(out), c, outtype, meta, vocab, tensors)
