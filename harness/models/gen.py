"""Deterministic random-weight qwen35 GGUFs from recipes, and the model cache (`ensure_model`).

Every tensor is drawn from its own stream, ``PCG64(SeedSequence([seed, *sha256(name)]))``, so the
bytes depend only on (recipe, type, seed, GENERATOR_VERSION) and tensors can be produced one at a
time (streamed to disk). Values are drawn in float32 and stored as the GGUF holds them after
llama.cpp's converter transforms (norms around 1, ``ssm_a`` negative):

- token_embd / output: N(0, logit_std / sqrt(E)), so logits have a standard deviation of about
  logit_std whatever the width;
- projections: N(0, matrix_gain / sqrt(fan_in)); the ones that feed the residual stream
  (attn_output, ssm_out, ffn_down) use out_gain (default 1 / sqrt(2 * n_layer)) so the residual
  stays O(1) over many layers;
- RMSNorm weights (attn_norm, post_attention_norm, output_norm, q/k norms, ssm_norm):
  1 + N(0, norm_std);
- ssm_a = -exp(log(U(a_min, a_max))) (decays exp(ssm_a * softplus(.)) well inside (0, 1));
  ssm_dt.bias ~ N(0, dt_bias_std); ssm_conv1d ~ N(0, conv_gain / sqrt(kernel)).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path

import gguf
import numpy as np

from .gguf_out import write_gguf
from .quant import GGML_TYPES
from .recipes import Qwen35Config, Recipe, TensorSpec, load_recipe
from .vocab import byte_level_vocab

# Bump when the bytes written for a given (recipe, type, seed) change.
GENERATOR_VERSION = 1
DEFAULT_MODELS_DIR = Path("models")  # relative to the working directory


def _rng(seed: int, name: str) -> np.random.Generator:
    h = hashlib.sha256(name.encode()).digest()
    words = [int.from_bytes(h[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, *words])))


def _normal(rng: np.random.Generator, ne: tuple[int, ...], std: float) -> np.ndarray:
    x = rng.standard_normal(math.prod(ne), dtype=np.float32)
    x *= np.float32(std)
    return x.reshape(tuple(reversed(ne)))


def init_tensor(c: Qwen35Config, spec: TensorSpec, seed: int) -> np.ndarray:
    """float32 values of one tensor, numpy shape = reversed(ne)."""
    i = c.init
    rng = _rng(seed, spec.name)
    ne = spec.ne
    E = c.hidden_size
    if spec.kind in ("embed", "output"):
        return _normal(rng, ne, i.logit_std / math.sqrt(E))
    if spec.kind == "matrix":
        return _normal(rng, ne, i.matrix_gain / math.sqrt(ne[0]))
    if spec.kind == "out_proj":
        gain = i.out_gain if i.out_gain is not None else 1.0 / math.sqrt(2 * c.num_hidden_layers)
        return _normal(rng, ne, gain / math.sqrt(ne[0]))
    if spec.kind in ("norm", "ssm_norm"):
        x = _normal(rng, ne, i.norm_std)
        x += np.float32(1)
        return x
    if spec.kind == "ssm_a":
        u = rng.uniform(i.ssm_a_min, i.ssm_a_max, size=ne).astype(np.float32)
        a_log = np.log(u.astype(np.float64)).astype(np.float32)
        return (-np.exp(a_log.astype(np.float64))).astype(np.float32)
    if spec.kind == "ssm_dt":
        return _normal(rng, ne, i.dt_bias_std)
    if spec.kind == "conv":
        return _normal(rng, ne, i.conv_gain / math.sqrt(c.linear_conv_kernel_dim))
    raise ValueError(f"{spec.name}: unknown tensor kind {spec.kind!r}")


def generate(recipe: Recipe, out: Path, qtype: str | None = None, seed: int | None = None) -> Path:
    """Write the recipe's model to ``out`` (atomically)."""
    qtype = qtype or recipe.type
    if qtype not in GGML_TYPES:
        raise ValueError(f"unknown type {qtype!r}; use one of {', '.join(GGML_TYPES)}")
    seed = recipe.seed if seed is None else seed
    c = recipe.config
    specs = c.tensor_specs()
    total = sum(s.n_elements for s in specs)
    meta = gguf.Metadata(name=recipe.name, size_label=gguf.size_label(total, total, 0, 0))
    if recipe.description:
        meta.description = recipe.description
    vocab = byte_level_vocab(c.vocab_size, c.eos_token_id)
    tensors = [(s, (lambda s=s: init_tensor(c, s, seed))) for s in specs]
    return write_gguf(Path(out), c, qtype, meta, vocab, tensors)


def model_digest(recipe: Recipe, qtype: str, seed: int) -> str:
    h = hashlib.sha256()
    for part in (recipe.text, qtype, str(seed), f"kite-gen-v{GENERATOR_VERSION}"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def model_filename(recipe: Recipe, qtype: str, seed: int) -> str:
    return f"{recipe.name}-{qtype}-{model_digest(recipe, qtype, seed)[:12]}.gguf"


def ensure_model(recipe: str, out_dir: Path | None = None, qtype: str | None = None,
                 seed: int | None = None, search: Sequence[Path] = ()) -> Path:
    """Path of the recipe's generated model in ``out_dir`` (default ``models/``), generating it
    first if absent. The name holds a digest of (recipe text, type, seed, generator version), so
    any change makes a new file; writes are atomic (temporary name, then rename). `search`: the
    project's recipe folders, looked in before the built-in recipes."""
    r = load_recipe(recipe, search)
    qtype = qtype or r.type
    if qtype not in GGML_TYPES:
        raise ValueError(f"unknown type {qtype!r}; use one of {', '.join(GGML_TYPES)}")
    seed = r.seed if seed is None else seed
    out_dir = Path(out_dir) if out_dir is not None else DEFAULT_MODELS_DIR
    path = out_dir / model_filename(r, qtype, seed)
    if path.is_file():
        return path
    return generate(r, path, qtype, seed)
