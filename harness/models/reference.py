"""A slow, plain numpy forward pass of a qwen35 GGUF (float64 math, weights dequantized).

For checks only: that generated models behave (finite activations, well-spread logits) and that
the conventions are understood (on the conformance fixtures it reproduces the transformers
logits). It is not the engine's reference order of operations (see docs/NUMERICS.md).
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from .quant import dequantize


class _Weights:
    """Tensors dequantized on access (not cached), so large models fit in memory."""

    def __init__(self, r: gguf.GGUFReader, dtype: type):
        self.t = {t.name: t for t in r.tensors}
        self.dtype = dtype

    def __contains__(self, name: str) -> bool:
        return name in self.t

    def get(self, name: str, default: np.ndarray | None = None) -> np.ndarray | None:
        return self[name] if name in self.t else default

    def rows(self, name: str, idx: list[int]) -> np.ndarray:
        t = self.t[name]
        ne0 = int(t.shape[0])
        raw = np.asarray(t.data)
        return self._decode(t, raw.reshape(int(t.shape[1]), -1)[idx], ne0)

    def __getitem__(self, name: str) -> np.ndarray:
        t = self.t[name]
        ne = [int(x) for x in t.shape]
        return self._decode(t, np.asarray(t.data), ne[0]).reshape(tuple(reversed(ne)))

    def _decode(self, t, raw: np.ndarray, ne0: int) -> np.ndarray:
        if t.tensor_type == QT.F32:
            a = raw.view(np.float32) if raw.dtype != np.float32 else raw
        elif t.tensor_type == QT.F16:
            a = raw.view(np.float16)
        elif t.tensor_type in (QT.Q8_0, QT.Q4_0):
            a = dequantize(raw, t.tensor_type, ne0)
        else:
            raise ValueError(f"{t.name}: type {t.tensor_type.name} not supported here")
        return a.astype(self.dtype)


def _load(path: Path, dtype: type = np.float64) -> tuple[dict, _Weights]:
    r = gguf.GGUFReader(path)
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
    return kv, _Weights(r, dtype)


def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def forward(path: Path, tokens: list[int], dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """(hidden after the final norm [P, E], logits [P, V]) for one causal sequence. ``dtype``
    float32 halves the memory for large models."""
    kv, w = _load(path, dtype)
    a = kv["general.architecture"]
    L = int(kv[f"{a}.block_count"])
    eps = float(kv[f"{a}.attention.layer_norm_rms_epsilon"])
    H, Hkv = int(kv[f"{a}.attention.head_count"]), int(kv[f"{a}.attention.head_count_kv"])
    D = int(kv[f"{a}.attention.key_length"])
    n_rot = int(kv[f"{a}.rope.dimension_count"])
    base = float(kv[f"{a}.rope.freq_base"])
    K = int(kv[f"{a}.ssm.conv_kernel"])
    dk, Hk, Hv = int(kv[f"{a}.ssm.state_size"]), int(kv[f"{a}.ssm.group_count"]), int(kv[f"{a}.ssm.time_step_rank"])
    dv = int(kv[f"{a}.ssm.inner_size"]) // Hv
    rec = list(kv[f"{a}.attention.recurrent_layers"])
    P = len(tokens)

    x = w.rows("token_embd.weight", list(tokens))  # [P, E]
    pos = np.arange(P, dtype=np.float64)
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2 / n_rot)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(v: np.ndarray) -> np.ndarray:  # [P, heads, D]
        v = v.copy()
        x0, x1 = v[..., :half].copy(), v[..., half:n_rot].copy()
        c, s = cos[:, None, :], sin[:, None, :]
        v[..., :half] = x0 * c - x1 * s
        v[..., half:n_rot] = x0 * s + x1 * c
        return v

    for i in range(L):
        p = f"blk.{i}."
        h = _rms(x, w[p + "attn_norm.weight"], eps)
        if rec[i]:
            qkv = h @ w[p + "attn_qkv.weight"].T  # [P, C]
            z = h @ w[p + "attn_gate.weight"].T
            beta = 1 / (1 + np.exp(-(h @ w[p + "ssm_beta.weight"].T)))
            g = w[p + "ssm_a"] * _softplus(h @ w[p + "ssm_alpha.weight"].T + w[p + "ssm_dt.bias"])
            cw = w[p + "ssm_conv1d.weight"]  # [C, K]
            pad = np.concatenate([np.zeros((K - 1, qkv.shape[1]), dtype=qkv.dtype), qkv], axis=0)
            conv = sum(cw[:, j][None, :] * pad[j:j + P] for j in range(K))
            c = _silu(conv)
            q = c[:, :Hk * dk].reshape(P, Hk, dk)
            k = c[:, Hk * dk:2 * Hk * dk].reshape(P, Hk, dk)
            v = c[:, 2 * Hk * dk:].reshape(P, Hv, dv)
            q = q / np.sqrt(np.sum(q * q, -1, keepdims=True) + eps) / np.sqrt(dk)
            k = k / np.sqrt(np.sum(k * k, -1, keepdims=True) + eps)
            o = np.zeros((P, Hv, dv))
            for hv in range(Hv):
                hk = hv % Hk
                S = np.zeros((dk, dv))
                for t in range(P):
                    S = np.exp(g[t, hv]) * S
                    kt = k[t, hk]
                    S = S + np.outer(kt, beta[t, hv] * (v[t, hv] - S.T @ kt))
                    o[t, hv] = S.T @ q[t, hk]
            y = _rms(o, w[p + "ssm_norm.weight"], eps) * _silu(z.reshape(P, Hv, dv))
            x = x + y.reshape(P, Hv * dv) @ w[p + "ssm_out.weight"].T
        else:
            qg = (h @ w[p + "attn_q.weight"].T).reshape(P, H, 2 * D)
            q, gate = qg[..., :D], qg[..., D:]
            k = (h @ w[p + "attn_k.weight"].T).reshape(P, Hkv, D)
            v = (h @ w[p + "attn_v.weight"].T).reshape(P, Hkv, D)
            q = rope(_rms(q, w[p + "attn_q_norm.weight"], eps))
            k = rope(_rms(k, w[p + "attn_k_norm.weight"], eps))
            o = np.zeros((P, H, D))
            mask = np.triu(np.full((P, P), -np.inf), 1)
            for hh in range(H):
                kh = hh // (H // Hkv)
                s = q[:, hh] @ k[:, kh].T / np.sqrt(D) + mask
                s = np.exp(s - s.max(-1, keepdims=True))
                o[:, hh] = (s / s.sum(-1, keepdims=True)) @ v[:, kh]
            o = o * (1 / (1 + np.exp(-gate)))
            x = x + o.reshape(P, H * D) @ w[p + "attn_output.weight"].T
        h = _rms(x, w[p + "post_attention_norm.weight"], eps)
        m = _silu(h @ w[p + "ffn_gate.weight"].T) * (h @ w[p + "ffn_up.weight"].T)
        x = x + m @ w[p + "ffn_down.weight"].T
    hidden = _rms(x, w["output_norm.weight"], eps)
    head = w["output.weight" if "output.weight" in w else "token_embd.weight"]
    return hidden, hidden @ head.T
