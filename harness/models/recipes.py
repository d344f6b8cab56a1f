"""Model recipes: the hyper-parameters of a Qwen3.5 text model ("qwen35" in GGUF).

A recipe is a YAML file: a project's own under ``configs/models/`` (next to its engine.yaml),
else one shipped with the package (``harness/models/builtin/``). `Qwen35Config` is the single description of a
model's shape used by both the random-weight generator (`gen.py`) and the Hugging Face converter
(`convert.py`), so the two write the same metadata and the same tensor names and shapes.

Tensor shapes are given as ggml ``ne`` (``ne[0]`` is the contiguous axis): a linear map with HF
weight shape (out, in) has ``ne = (in, out)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.contract import inputs
from harness.contract.project import find_recipe, recipe_folders

ARCH = "qwen35"

TENSOR_TYPES = ("f32", "f16", "q8_0", "q4_0")


class RecipeError(ValueError):
    """A recipe file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class InitSpec:
    """How random weights are drawn (generator only; converted models carry their own weights)."""

    logit_std: float = 3.0  # token_embd / output ~ N(0, logit_std / sqrt(E)): logits std ~ logit_std
    matrix_gain: float = 1.0  # projections ~ N(0, gain / sqrt(fan_in))
    out_gain: float | None = None  # attn_output, ssm_out, ffn_down; None: 1 / sqrt(2 * n_layer)
    norm_std: float = 0.1  # RMSNorm weights = 1 + N(0, norm_std) (as after the converter's +1)
    ssm_a_min: float = 0.1  # ssm_a = -exp(log(U(min, max))) = -U(min, max)
    ssm_a_max: float = 2.0
    dt_bias_std: float = 0.5
    conv_gain: float = 1.0  # ssm_conv1d ~ N(0, gain / sqrt(kernel))


@dataclass(frozen=True)
class Qwen35Config:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    layer_types: tuple[str, ...]  # "linear" / "full", one per layer
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int = 4
    partial_rotary_factor: float = 0.25
    rope_theta: float = 10000000.0
    rope_sections: tuple[int, ...] = (11, 11, 10, 0)
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    context_length: int = 4096
    full_attention_interval: int = 4
    eos_token_id: int | None = None  # default: vocab_size - 1
    init: InitSpec = field(default_factory=InitSpec)

    # ---- derived -------------------------------------------------------------------------------
    @property
    def n_rot(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def conv_dim(self) -> int:
        return (2 * self.linear_num_key_heads * self.linear_key_head_dim
                + self.linear_num_value_heads * self.linear_value_head_dim)

    @property
    def recurrent_layers(self) -> list[bool]:
        return [t == "linear" for t in self.layer_types]

    def tensor_specs(self) -> list[TensorSpec]:
        return tensor_specs(self)

    def n_params(self) -> int:
        return sum(math.prod(s.ne) for s in self.tensor_specs())

    def validate(self, where: str = "recipe") -> None:
        validate_config(self, where)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    ne: tuple[int, ...]
    kind: str  # embed, output, matrix, out_proj, norm, ssm_norm, ssm_a, ssm_dt, conv

    @property
    def n_elements(self) -> int:
        return math.prod(self.ne)


def tensor_specs(c: Qwen35Config) -> list[TensorSpec]:
    """GGUF tensors of a model, in the order llama.cpp's converter writes them for one layer
    (sorted HF names), layers in numeric order, then the final norm and the LM head."""
    E, F = c.hidden_size, c.intermediate_size
    H, Hkv, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    Hv, dv = c.linear_num_value_heads, c.linear_value_head_dim
    out: list[TensorSpec] = [TensorSpec("token_embd.weight", (E, c.vocab_size), "embed")]
    for i, lt in enumerate(c.layer_types):
        p = f"blk.{i}."
        out.append(TensorSpec(p + "attn_norm.weight", (E,), "norm"))
        if lt == "linear":
            out += [
                TensorSpec(p + "ssm_a", (Hv,), "ssm_a"),
                TensorSpec(p + "ssm_conv1d.weight", (c.linear_conv_kernel_dim, c.conv_dim), "conv"),
                TensorSpec(p + "ssm_dt.bias", (Hv,), "ssm_dt"),
                TensorSpec(p + "ssm_alpha.weight", (E, Hv), "matrix"),
                TensorSpec(p + "ssm_beta.weight", (E, Hv), "matrix"),
                TensorSpec(p + "attn_qkv.weight", (E, c.conv_dim), "matrix"),
                TensorSpec(p + "attn_gate.weight", (E, Hv * dv), "matrix"),
                TensorSpec(p + "ssm_norm.weight", (dv,), "ssm_norm"),
                TensorSpec(p + "ssm_out.weight", (Hv * dv, E), "out_proj"),
            ]
        out += [
            TensorSpec(p + "ffn_down.weight", (F, E), "out_proj"),
            TensorSpec(p + "ffn_gate.weight", (E, F), "matrix"),
            TensorSpec(p + "ffn_up.weight", (E, F), "matrix"),
            TensorSpec(p + "post_attention_norm.weight", (E,), "norm"),
        ]
        if lt == "full":
            out += [
                TensorSpec(p + "attn_k_norm.weight", (D,), "norm"),
                TensorSpec(p + "attn_k.weight", (E, Hkv * D), "matrix"),
                TensorSpec(p + "attn_output.weight", (H * D, E), "out_proj"),
                TensorSpec(p + "attn_q_norm.weight", (D,), "norm"),
                TensorSpec(p + "attn_q.weight", (E, 2 * H * D), "matrix"),
                TensorSpec(p + "attn_v.weight", (E, Hkv * D), "matrix"),
            ]
    out.append(TensorSpec("output_norm.weight", (E,), "norm"))
    if not c.tie_word_embeddings:
        out.append(TensorSpec("output.weight", (E, c.vocab_size), "output"))
    return out


# ---- validation ----------------------------------------------------------------------------------

_INT_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
    "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "context_length",
    "full_attention_interval",
)


def validate_config(c: Qwen35Config, where: str = "recipe") -> None:
    def fail(msg: str) -> None:
        raise RecipeError(f"{where}: {msg}")

    for name in _INT_FIELDS:
        v = getattr(c, name)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            fail(f"{name} must be a positive integer, got {v!r}")
    if len(c.layer_types) != c.num_hidden_layers:
        fail(f"layer_types has {len(c.layer_types)} entries, num_hidden_layers is {c.num_hidden_layers}")
    bad = [t for t in c.layer_types if t not in ("linear", "full")]
    if bad:
        fail(f"layer_types entries must be 'linear' or 'full', got {bad[0]!r}")
    if c.linear_num_value_heads % c.linear_num_key_heads:
        fail(f"linear_num_value_heads ({c.linear_num_value_heads}) must be a multiple of "
             f"linear_num_key_heads ({c.linear_num_key_heads})")
    if c.linear_key_head_dim != c.linear_value_head_dim:
        fail("linear_key_head_dim must equal linear_value_head_dim (llama.cpp's qwen35 loader assumes it)")
    if c.num_attention_heads % c.num_key_value_heads:
        fail(f"num_attention_heads ({c.num_attention_heads}) must be a multiple of "
             f"num_key_value_heads ({c.num_key_value_heads})")
    if not (0.0 < c.partial_rotary_factor <= 1.0):
        fail(f"partial_rotary_factor must be in (0, 1], got {c.partial_rotary_factor}")
    if c.n_rot < 2 or c.n_rot % 2:
        fail(f"head_dim * partial_rotary_factor = {c.n_rot} must be an even number >= 2")
    if len(c.rope_sections) != 4 or any((not isinstance(s, int)) or s < 0 for s in c.rope_sections):
        fail(f"rope_sections must be up to 4 non-negative integers, got {list(c.rope_sections)}")
    if sum(c.rope_sections) > c.head_dim:
        fail(f"sum(rope_sections) = {sum(c.rope_sections)} exceeds head_dim {c.head_dim} "
             "(llama.cpp's CPU rope asserts it); e.g. use [n_rot/4, n_rot/4, n_rot/2 - 2*(n_rot/4), 0]")
    if not (c.rope_theta > 0):
        fail(f"rope_theta must be > 0, got {c.rope_theta}")
    if not (0 < c.rms_norm_eps < 1):
        fail(f"rms_norm_eps must be in (0, 1), got {c.rms_norm_eps}")
    if c.eos_token_id is not None and not (0 <= c.eos_token_id < c.vocab_size):
        fail(f"eos_token_id {c.eos_token_id} outside [0, vocab_size)")
    i = c.init
    if not (0 < i.ssm_a_min <= i.ssm_a_max):
        fail("init.ssm_a_min must be > 0 and <= init.ssm_a_max")
    for name in ("logit_std", "matrix_gain", "norm_std", "dt_bias_std", "conv_gain"):
        v = getattr(i, name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            fail(f"init.{name} must be a non-negative number, got {v!r}")
    if i.out_gain is not None and (not isinstance(i.out_gain, (int, float)) or i.out_gain < 0):
        fail(f"init.out_gain must be a non-negative number or null, got {i.out_gain!r}")


# ---- recipe files --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    text: str  # exact file text: part of the generated model's digest
    config: Qwen35Config
    type: str  # default tensor type
    seed: int
    description: str = ""


_RECIPE_KEYS = {
    "name", "description", "arch", "type", "seed", "layer_types", "layer_pattern", "init",
    "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
    "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "partial_rotary_factor",
    "rope_theta", "rope_sections", "rms_norm_eps", "tie_word_embeddings", "context_length",
    "full_attention_interval", "eos_token_id",
}
_REQUIRED = (
    "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
    "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim",
)
_LAYER_ALIASES = {"linear": "linear", "linear_attention": "linear", "full": "full", "full_attention": "full"}


def _number(v: Any, key: str, where: str) -> float:
    """A float field; YAML 1.1 reads ``1.0e7`` (no exponent sign) as a string, so accept that too."""
    if isinstance(v, bool):
        raise RecipeError(f"{where}: {key} must be a number, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    raise RecipeError(f"{where}: {key} must be a number, got {v!r}")


def resolve_recipe_path(recipe: str | Path, search: Sequence[Path] = ()) -> Path:
    """A recipe name (``tiny`` -> NAME.yaml in the first of `search` holding it, else the built-in
    one) or a path to a YAML file. `search`: the project's recipe folders, ahead of the built-ins."""
    p = Path(recipe)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise RecipeError(f"recipe file not found: {p}")
        return p
    found = find_recipe(str(recipe), search)
    if found is None:
        known = ", ".join(list_recipes(search)) or "none"
        raise RecipeError(f"unknown recipe {str(recipe)!r} (no {recipe}.yaml in "
                          f"{', '.join(map(str, recipe_folders(search)))}); known: {known}")
    return found


def list_recipes(search: Sequence[Path] = ()) -> list[str]:
    return sorted({p.stem for folder in recipe_folders(search) if folder.is_dir() for p in folder.glob("*.yaml")})


def load_recipe(recipe: str | Path, search: Sequence[Path] = ()) -> Recipe:
    path = resolve_recipe_path(recipe, search)
    try:
        text = inputs.read_text(path, inputs.MAX_CONFIG)  # a FIFO refused unopened, binary data named
    except inputs.FileRefused as e:
        raise RecipeError(str(e)) from None
    return parse_recipe(text, path)


def parse_recipe(text: str, path: Path | str = "<recipe>") -> Recipe:
    path = Path(path)
    where = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RecipeError(f"{where}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{where}: a recipe must be a YAML mapping")
    unknown = sorted(set(data) - _RECIPE_KEYS)
    if unknown:
        raise RecipeError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_RECIPE_KEYS))}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise RecipeError(f"{where}: missing required key(s) {', '.join(missing)}")
    arch = data.get("arch", ARCH)
    if arch != ARCH:
        raise RecipeError(f"{where}: arch must be {ARCH!r}, got {arch!r}")
    qtype = data.get("type", "q8_0")
    if qtype not in TENSOR_TYPES:
        raise RecipeError(f"{where}: type must be one of {', '.join(TENSOR_TYPES)}, got {qtype!r}")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise RecipeError(f"{where}: seed must be a non-negative integer, got {seed!r}")

    n_layer = data["num_hidden_layers"]
    if "layer_types" in data and "layer_pattern" in data:
        raise RecipeError(f"{where}: give layer_types or layer_pattern, not both")
    if "layer_types" in data:
        lt = data["layer_types"]
    elif "layer_pattern" in data:
        pat = data["layer_pattern"]
        if not isinstance(pat, list) or not pat:
            raise RecipeError(f"{where}: layer_pattern must be a non-empty list")
        if not isinstance(n_layer, int) or n_layer % len(pat):
            raise RecipeError(f"{where}: num_hidden_layers ({n_layer}) is not a multiple of the "
                              f"layer_pattern length ({len(pat)})")
        lt = pat * (n_layer // len(pat))
    else:
        raise RecipeError(f"{where}: missing layer_types (one per layer) or layer_pattern (repeated)")
    if not isinstance(lt, list):
        raise RecipeError(f"{where}: layer_types must be a list")
    try:
        layer_types = tuple(_LAYER_ALIASES[str(t)] for t in lt)
    except KeyError as e:
        raise RecipeError(f"{where}: layer type {e.args[0]!r} is not one of linear, full") from None

    init_d = data.get("init") or {}
    if not isinstance(init_d, dict):
        raise RecipeError(f"{where}: init must be a mapping")
    init_d = {k: (None if v is None else _number(v, f"init.{k}", where)) for k, v in init_d.items()}
    bad_init = sorted(set(init_d) - set(InitSpec.__dataclass_fields__))
    if bad_init:
        raise RecipeError(f"{where}: unknown init key(s) {', '.join(bad_init)}; allowed: "
                          f"{', '.join(InitSpec.__dataclass_fields__)}")

    sections = data.get("rope_sections", [11, 11, 10, 0])
    if not isinstance(sections, list) or len(sections) > 4:
        raise RecipeError(f"{where}: rope_sections must be a list of at most 4 integers")
    sections = tuple(list(sections) + [0] * (4 - len(sections)))

    kw: dict[str, Any] = {k: data[k] for k in _REQUIRED}
    for k in ("linear_conv_kernel_dim", "partial_rotary_factor", "rope_theta", "rms_norm_eps",
              "tie_word_embeddings", "context_length", "full_attention_interval", "eos_token_id"):
        if k in data:
            kw[k] = data[k]
    for k in ("partial_rotary_factor", "rope_theta", "rms_norm_eps"):
        if k in kw:
            kw[k] = _number(kw[k], k, where)
    if "tie_word_embeddings" in kw and not isinstance(kw["tie_word_embeddings"], bool):
        raise RecipeError(f"{where}: tie_word_embeddings must be true or false")
    cfg = Qwen35Config(layer_types=layer_types, rope_sections=sections, init=InitSpec(**init_d), **kw)
    validate_config(cfg, where)
    if cfg.vocab_size < 258:
        raise RecipeError(f"{where}: vocab_size must be at least 258 (the generated tokenizer has 256 byte "
                          f"tokens, at least one merge and an end token), got {cfg.vocab_size}")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name or any(ch in name for ch in "/\\ "):
        raise RecipeError(f"{where}: name must be a non-empty string without spaces or slashes")
    return Recipe(name=name, path=path, text=text, config=cfg, type=qtype, seed=seed,
                  description=str(data.get("description", "")))
