"""Oracle: the engine against Hugging Face transformers on random Qwen3.5 text configs.

For each of N seeded random configs (hidden size, layer count and linear/full mix, heads with
H*D != E, linear key heads != value heads so the value-head reorder is exercised, tied or untied
LM head, partial rotary factor, conv kernel, vocabulary), with random float32 weights in the spirit
of the conformance fixtures (tests/data/qwen35):

1. build ``Qwen3_5ForCausalLM`` and ``save_pretrained`` it to a temporary folder;
2. convert it with the harness converter (``harness.models.convert``) to an F32 and a Q8_0 GGUF;
3. run the engine (``kite run --steps 0 --dump``) on a random token sequence;
4. run transformers (eager attention, float32, ``torch.no_grad``) for the logits and the
   final-norm hidden state, and compare.

Bars (the conformance bars of the engine issue):

- F32 GGUF: at every position max|logit - ref| <= 1e-4 * max|ref logit| and the same argmax;
  h_out against the final-norm hidden state likewise.
- Q8_0 GGUF: NMSE against transformers reported. The reference of f32 arithmetic on Q8_0 weights is
  transformers run with every Q8_0 tensor of the GGUF dequantised and mapped back to HF layout
  (``hf_q8w``). It is checked at f32 level: that model is saved, converted to F32 and run by the
  engine, and must meet the F32 bars against ``hf_q8w``. The engine's own Q8_0 run also quantises
  activations to 8 bits, so its NMSE against ``hf_q8w`` is reported, not held to f32 level; it is
  held only to a sanity bound (NMSE vs transformers <= 0.2), which catches a broken quantised path
  (NMSE near 1 or above), not a loss of precision.

torch and transformers are optional dependencies, imported only when the oracle runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from harness.models.convert import _GLOBAL, _LAYER, _reorder, convert, vhead_perm
from harness.models.reference import forward as reference_forward

F32_REL_TOL = 1e-4  # max |diff| per position <= this x max |ref| at that position
Q8_NMSE_SANITY = 0.2  # engine Q8_0 NMSE vs transformers above this = a broken quantised path


# ---- configs -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OracleConfig:
    """One random Qwen3.5 text configuration and its token sequence."""

    index: int
    seed: int
    vocab_size: int
    hidden_size: int
    layer_types: tuple[str, ...]  # "linear_attention" | "full_attention"
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    partial_rotary_factor: float
    rope_theta: float
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_head_dim: int  # key and value head dim (equal in every Qwen3.5 checkpoint)
    linear_conv_kernel_dim: int
    tie_word_embeddings: bool
    tokens: tuple[int, ...]

    @property
    def n_rot(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def mrope_section(self) -> list[int]:
        """Sections summing to the rotary pairs (text positions: no numeric effect; the sum must not
        exceed head_dim for llama.cpp's conventions)."""
        pairs = self.n_rot // 2
        a = max(1, pairs // 4) if pairs >= 2 else 0
        return [a, a, pairs - 2 * a]

    def hf_kwargs(self) -> dict:
        """Keyword arguments for ``transformers.Qwen3_5TextConfig``."""
        return {
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size, "num_hidden_layers": len(self.layer_types),
            "layer_types": list(self.layer_types), "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "head_dim": self.head_dim,
            "linear_num_key_heads": self.linear_num_key_heads,
            "linear_num_value_heads": self.linear_num_value_heads,
            "linear_key_head_dim": self.linear_head_dim, "linear_value_head_dim": self.linear_head_dim,
            "linear_conv_kernel_dim": self.linear_conv_kernel_dim, "rms_norm_eps": 1e-6,
            "max_position_embeddings": 4096, "tie_word_embeddings": self.tie_word_embeddings,
            "eos_token_id": self.vocab_size - 1, "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta,
                                "partial_rotary_factor": self.partial_rotary_factor,
                                "mrope_section": self.mrope_section, "mrope_interleaved": True},
        }

    def summary(self) -> str:
        pat = "".join("L" if t == "linear_attention" else "F" for t in self.layer_types)
        return (f"E{self.hidden_size} {pat} F{self.intermediate_size} "
                f"H{self.num_attention_heads}/{self.num_key_value_heads}xD{self.head_dim} "
                f"rot{self.n_rot} Hk{self.linear_num_key_heads}/Hv{self.linear_num_value_heads}"
                f"xd{self.linear_head_dim} K{self.linear_conv_kernel_dim} V{self.vocab_size} "
                f"{'tied' if self.tie_word_embeddings else 'untied'} P{len(self.tokens)}")


def _pick(rng: np.random.Generator, xs):
    return xs[int(rng.integers(len(xs)))]


def random_config(seed: int, index: int) -> OracleConfig:
    """A random small config; every matrix's input dim (E, F, H*D, Hv*dv) is a multiple of 32 so
    the Q8_0 GGUF quantises every matrix."""
    rng = np.random.default_rng([seed, index])
    E = int(_pick(rng, [32, 64, 96, 128]))
    n_layer = int(rng.integers(2, 6))
    lt = ["linear_attention" if rng.random() < 0.6 else "full_attention" for _ in range(n_layer)]
    a, b = (int(i) for i in rng.permutation(n_layer)[:2])  # both kinds in every model
    lt[a], lt[b] = "full_attention", "linear_attention"
    while True:
        H = int(_pick(rng, [1, 2, 3, 4, 6, 8]))
        D = int(_pick(rng, [16, 32, 64]))
        if (H * D) % 32 == 0 and H * D != E and H * D <= 4 * E:
            break
    Hkv = int(_pick(rng, [d for d in (1, 2, 3, 4, 6, 8) if H % d == 0]))
    prf = float(_pick(rng, [f for f in (0.25, 0.5, 1.0) if int(D * f) >= 4]))
    while True:
        # mostly Hk >= 2 and Hv > Hk: the value-head reorder is a real permutation only then
        hk, ratio = _pick(rng, [(2, 2), (2, 3), (4, 2), (2, 2), (4, 3), (1, 2), (2, 1)])
        dv = int(_pick(rng, [16, 32]))
        hv = hk * ratio
        if (hv * dv) % 32 == 0:
            break
    F = int(_pick(rng, [64, 96, 128, 192, 256]))
    V = int(_pick(rng, [256, 320, 384, 512]))
    P = int(rng.integers(24, 81))
    tokens = tuple(int(t) for t in rng.integers(0, V, P))
    return OracleConfig(
        index=index, seed=seed, vocab_size=V, hidden_size=E, layer_types=tuple(lt), intermediate_size=F,
        num_attention_heads=H, num_key_value_heads=Hkv, head_dim=D, partial_rotary_factor=prf,
        rope_theta=float(_pick(rng, [1e4, 1e6, 1e7])), linear_num_key_heads=hk, linear_num_value_heads=hv,
        linear_head_dim=dv, linear_conv_kernel_dim=int(_pick(rng, [2, 3, 4, 4])),
        tie_word_embeddings=bool(rng.random() < 0.5), tokens=tokens)


def random_configs(n: int, seed: int) -> list[OracleConfig]:
    return [random_config(seed, i) for i in range(n)]


# ---- comparison ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Compare:
    """Engine output against a reference, both [P, N]."""

    rel: float  # max over positions of max|diff| / max|ref|
    max_abs: float
    nmse: float
    argmax_same: int  # positions whose argmax agrees
    positions: int

    @property
    def f32_ok(self) -> bool:
        return self.rel <= F32_REL_TOL and self.argmax_same == self.positions


def compare(test: np.ndarray, ref: np.ndarray) -> Compare:
    if test.shape != ref.shape:
        raise ValueError(f"shape {test.shape} vs reference {ref.shape}")
    t = test.astype(np.float64)
    r = ref.astype(np.float64)
    d = np.abs(t - r)
    per_pos = d.max(axis=1) / np.maximum(np.abs(r).max(axis=1), np.finfo(np.float64).tiny)
    return Compare(rel=float(per_pos.max()), max_abs=float(d.max()),
                   nmse=float((d**2).sum() / max((r**2).sum(), np.finfo(np.float64).tiny)),
                   argmax_same=int((t.argmax(axis=1) == r.argmax(axis=1)).sum()), positions=int(r.shape[0]))


@dataclass
class ConfigResult:
    config: OracleConfig
    f32_logits: Compare | None = None
    f32_hidden: Compare | None = None
    q8w_f32_logits: Compare | None = None  # engine on an F32 GGUF of the dequantised weights vs hf_q8w
    q8w_f32_hidden: Compare | None = None
    q8_logits: Compare | None = None  # engine Q8_0 GGUF vs transformers
    q8_vs_q8w: Compare | None = None  # engine Q8_0 GGUF vs hf_q8w
    q8w_vs_hf: Compare | None = None  # hf_q8w vs transformers (the weights' own quantisation error)
    # diagnostics, no bar: float64 numpy forward pass (harness.models.reference) on the F32 GGUF,
    # to tell whose rounding dominates when the engine and transformers differ
    f32_vs_f64: Compare | None = None  # engine F32 logits vs float64
    hf_vs_f64: Compare | None = None  # transformers float32 vs float64
    error: str = ""
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def judge(self) -> None:
        f = self.failures
        f.clear()
        if self.error:
            f.append(self.error)
            return
        for name, c in (("f32 logits", self.f32_logits), ("f32 h_out", self.f32_hidden),
                        ("q8w-f32 logits", self.q8w_f32_logits), ("q8w-f32 h_out", self.q8w_f32_hidden)):
            if c is None:
                f.append(f"{name}: not measured")
            elif c.rel > F32_REL_TOL:
                f.append(f"{name}: max|diff|/max|ref| {c.rel:.3g} > {F32_REL_TOL:g}")
            elif c.argmax_same != c.positions:
                f.append(f"{name}: argmax differs at {c.positions - c.argmax_same} of {c.positions} positions")
        if self.q8_logits is None:
            f.append("q8_0 logits: not measured")
        elif not self.q8_logits.nmse <= Q8_NMSE_SANITY:
            f.append(f"q8_0 logits: NMSE {self.q8_logits.nmse:.3g} > sanity bound {Q8_NMSE_SANITY:g}")

    @property
    def ok(self) -> bool:
        return not self.failures


# ---- transformers side ---------------------------------------------------------------------------

def _torch():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f"the oracle needs torch and transformers ({e}); `nox -s oracle` installs them") from None
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # no notes about optional fast kernels
    hf_logging.disable_progress_bar()
    return torch


def build_hf_model(cfg: OracleConfig):
    """Qwen3_5ForCausalLM with random float32 weights (tiny-a's recipe, matrix std scaled by the
    input width so that activations keep tiny-a's scale at every size)."""
    torch = _torch()
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(cfg.seed * 1000 + cfg.index)
    hcfg = Qwen3_5TextConfig(**cfg.hf_kwargs())
    model = Qwen3_5ForCausalLM(hcfg).to(torch.float32)
    g = torch.Generator().manual_seed(cfg.seed * 1000 + cfg.index)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("linear_attn.norm.weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)  # gated RMSNorm, used directly
            elif name.endswith("norm.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)  # zero-centred: scale 1 + w
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 1.9 + 0.1))
            elif name.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif name.endswith("conv1d.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            elif p.ndim == 2:
                std = 0.2 if name.endswith("embed_tokens.weight") else 0.2 * (64.0 / p.shape[1]) ** 0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            else:
                raise RuntimeError(f"no initialisation rule for parameter {name} {tuple(p.shape)}")
    return model.eval()


def load_hf_model(hf_dir: Path):
    torch = _torch()
    from transformers import Qwen3_5ForCausalLM

    return Qwen3_5ForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager").eval()


def hf_forward(model, tokens: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(logits [P, V], final-norm hidden state [P, E]) as float32, one full causal pass."""
    torch = _torch()
    ids = torch.tensor([list(tokens)], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0]
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state[0]
    return logits.float().numpy().copy(), hidden.float().numpy().copy()


def dequantized_state(gguf_path: Path, cfg: OracleConfig) -> dict[str, np.ndarray]:
    """HF-named float32 tensors for every Q8_0/Q4_0 tensor of a converted GGUF, dequantised and
    mapped back to HF layout (value-head reorder undone). Tensors stored as float keep their HF values."""
    import gguf

    inv_global = {v: k for k, v in _GLOBAL.items()}
    inv_layer = {v: k for k, v in _LAYER.items()}
    hk, hv, dv = cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_head_dim
    inv = np.argsort(vhead_perm(hk, hv)) if hv != hk else None
    qk_rows = 2 * hk * dv
    out: dict[str, np.ndarray] = {}
    quantized = (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0)
    for t in gguf.GGUFReader(gguf_path).tensors:
        if t.tensor_type not in quantized:
            continue
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape(tuple(int(n) for n in reversed(t.shape)))  # ne reversed = HF shape
        if t.name in inv_global:
            hf_names = [inv_global[t.name]]
            if t.name == "token_embd.weight" and cfg.tie_word_embeddings:
                hf_names.append("lm_head.weight")
            suffix = ""
        else:
            _, i, rest = t.name.split(".", 2)
            suffix = inv_layer[rest]
            hf_names = [f"model.layers.{i}.{suffix}"]
        if inv is not None:
            if suffix == "linear_attn.in_proj_qkv.weight":
                x = np.concatenate([x[:qk_rows], _reorder(x[qk_rows:], inv, dv, 0)], axis=0)
            elif suffix == "linear_attn.in_proj_z.weight":
                x = _reorder(x, inv, dv, 0)
            elif suffix in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight"):
                x = _reorder(x, inv, 1, 0)
            elif suffix == "linear_attn.out_proj.weight":
                x = _reorder(x, inv, dv, 1)
        for n in hf_names:
            out[n] = np.ascontiguousarray(x)
    return out


def apply_state(model, state: dict[str, np.ndarray]) -> None:
    torch = _torch()
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, x in state.items():
            if name == "lm_head.weight" and name not in params:
                continue  # tied: the embedding tensor is the LM head
            p = params[name]
            if tuple(p.shape) != x.shape:
                raise RuntimeError(f"{name}: dequantised shape {x.shape} != parameter {tuple(p.shape)}")
            p.copy_(torch.from_numpy(x))


# ---- engine side ---------------------------------------------------------------------------------

def run_engine(kite: Path, gguf_path: Path, tokens: tuple[int, ...], dump: Path, threads: int = 1,
               timeout: float = 300) -> tuple[np.ndarray, np.ndarray]:
    """(logits [P, V], h_out [P, E]) from ``kite run --steps 0 --dump``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    argv = [str(kite), "run", "--model", str(gguf_path), "--prompt", ",".join(map(str, tokens)),
            "--steps", "0", "--threads", str(threads), "--dump", str(dump)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"kite run exited {res.returncode} on {gguf_path.name}: {res.stderr.strip()[-800:]}")
    meta = json.loads((dump / "meta.json").read_text())
    P, V = meta["shapes"]["logits"]
    _, E = meta["shapes"]["h_out"]
    logits = np.fromfile(dump / "logits.f32", dtype="<f4").reshape(P, V)
    hidden = np.fromfile(dump / "h_out.f32", dtype="<f4").reshape(P, E)
    return logits, hidden


# ---- one config ----------------------------------------------------------------------------------

def check_config(cfg: OracleConfig, kite: Path, work: Path, threads: int = 1) -> ConfigResult:
    """Everything for one config, in ``work`` (created). Errors are caught into ``result.error``."""
    res = ConfigResult(cfg)
    t0 = time.perf_counter()
    try:
        work.mkdir(parents=True, exist_ok=True)
        hf_dir = work / "hf"
        build_hf_model(cfg).save_pretrained(hf_dir)
        (work / "tokens.txt").write_text(",".join(map(str, cfg.tokens)) + "\n")
        model = load_hf_model(hf_dir)
        ref_logits, ref_hidden = hf_forward(model, cfg.tokens)

        f32 = convert(hf_dir, work / "f32.gguf", "f32")
        logits, hidden = run_engine(kite, f32, cfg.tokens, work / "run-f32", threads)
        res.f32_logits, res.f32_hidden = compare(logits, ref_logits), compare(hidden, ref_hidden)
        _, ref64 = reference_forward(f32, list(cfg.tokens))
        res.f32_vs_f64, res.hf_vs_f64 = compare(logits, ref64), compare(ref_logits, ref64)

        q8 = convert(hf_dir, work / "q8_0.gguf", "q8_0")
        logits_q8, _ = run_engine(kite, q8, cfg.tokens, work / "run-q8_0", threads)
        apply_state(model, dequantized_state(q8, cfg))
        q8w_logits, q8w_hidden = hf_forward(model, cfg.tokens)
        res.q8_logits = compare(logits_q8, ref_logits)
        res.q8_vs_q8w = compare(logits_q8, q8w_logits)
        res.q8w_vs_hf = compare(q8w_logits, ref_logits)

        q8w_dir = work / "hf-q8w"
        model.save_pretrained(q8w_dir)
        q8w_f32 = convert(q8w_dir, work / "q8w-f32.gguf", "f32")
        logits, hidden = run_engine(kite, q8w_f32, cfg.tokens, work / "run-q8w-f32", threads)
        res.q8w_f32_logits, res.q8w_f32_hidden = compare(logits, q8w_logits), compare(hidden, q8w_hidden)
    except Exception as e:  # noqa: BLE001 - one config's failure is a result, not a crash
        res.error = f"{type(e).__name__}: {e}"
    res.seconds = time.perf_counter() - t0
    res.judge()
    return res


def run_oracle(configs: list[OracleConfig], kite: Path, work: Path | None = None, threads: int = 1,
               progress: Callable[[str], None] | None = None) -> list[ConfigResult]:
    """Check every config; ``work`` keeps the files (HF checkpoints, GGUFs, dumps), else a temp folder."""
    torch = _torch()
    torch.set_num_threads(max(1, threads))
    say = progress or (lambda s: None)
    results = []
    with tempfile.TemporaryDirectory(prefix="kite-oracle-") as tmp:
        base = Path(work) if work is not None else Path(tmp)
        for cfg in configs:
            say(f"oracle {cfg.index}: {cfg.summary()}")
            r = check_config(cfg, kite, base / f"config-{cfg.seed}-{cfg.index}", threads)
            say(f"oracle {cfg.index}: {'ok' if r.ok else 'FAIL'} ({r.seconds:.1f} s)")
            results.append(r)
    return results


# ---- report --------------------------------------------------------------------------------------

def _rel(c: Compare | None) -> str:
    return "-" if c is None else f"{c.rel:.2e}"


def _am(c: Compare | None) -> str:
    return "-" if c is None else f"{c.argmax_same}/{c.positions}"


def _nmse(c: Compare | None) -> str:
    return "-" if c is None else f"{c.nmse:.2e}"


def table_rows(results: list[ConfigResult]) -> tuple[list[list[str]], list[str]]:
    headers = ["#", "config", "f32 logit rel", "argmax", "f32 h_out rel", "kite/f64 rel", "hf32/f64 rel",
               "q8w-f32 rel", "q8w-f32 h rel", "q8_0 NMSE", "q8_0 argmax", "q8_0 vs q8w NMSE",
               "q8w vs hf NMSE", "result"]
    rows = []
    for r in results:
        rows.append([str(r.config.index), r.config.summary(), _rel(r.f32_logits), _am(r.f32_logits),
                     _rel(r.f32_hidden), _rel(r.f32_vs_f64), _rel(r.hf_vs_f64), _rel(r.q8w_f32_logits), _rel(r.q8w_f32_hidden), _nmse(r.q8_logits),
                     _am(r.q8_logits), _nmse(r.q8_vs_q8w), _nmse(r.q8w_vs_hf),
                     "ok" if r.ok else "FAIL"])
    return rows, headers


def to_json(results: list[ConfigResult]) -> list[dict]:
    out = []
    for r in results:
        d = asdict(r)
        d["ok"] = r.ok
        d["config"]["summary"] = r.config.summary()
        out.append(d)
    return out
