"""Tensor types and quantizers, byte-identical to ggml's reference quantizers.

- Q8_0 (``quantize_row_q8_0_ref``): blocks of 32 along ne[0]; ``amax = max|x|``, ``d = amax / 127``,
  ``id = d ? 1/d : 0``, ``q = roundf(x * id)`` (half away from zero); stored as f16 d, then 32 int8.
- Q4_0 (``quantize_row_q4_0_ref``): ``max`` = the first element of largest magnitude (signed),
  ``d = max / -8``, ``id = d ? 1/d : 0``, ``q = min(15, (int)(x * id + 8.5))``; stored as f16 d, then
  16 bytes: byte j holds element j in the low nibble and element j + 16 in the high nibble.

All arithmetic is float32, as in C; f32 -> f16 rounds to nearest even (numpy and F16C agree).
Vectorized numpy, processed in chunks of blocks so that large tensors do not multiply memory use.

Type choice (llama.cpp's converter): 1-D tensors and ``ssm_conv1d.weight`` stay F32 unless the output
type is f32; other matrices take the output type, falling back to F16 when ``ne[0] % 32 != 0``.
"""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import LlamaFileType

QK = 32
_CHUNK_BLOCKS = 1 << 12  # 128 Ki values per chunk: cache-sized temporaries are fastest

GGML_TYPES = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0}
FILE_TYPES = {
    "f32": LlamaFileType.ALL_F32,
    "f16": LlamaFileType.MOSTLY_F16,
    "q8_0": LlamaFileType.MOSTLY_Q8_0,
    "q4_0": LlamaFileType.MOSTLY_Q4_0,
}
BLOCK_BYTES = {QT.Q8_0: 34, QT.Q4_0: 18}


def tensor_type(name: str, ne: tuple[int, ...], outtype: str) -> QT:
    """The ggml type a tensor gets in a file of output type ``outtype``."""
    if outtype not in GGML_TYPES:
        raise ValueError(f"unknown tensor type {outtype!r}; use one of {', '.join(GGML_TYPES)}")
    if outtype == "f32" or len(ne) <= 1 or name.endswith("ssm_conv1d.weight") or name.endswith("_norm.weight"):
        return QT.F32
    want = GGML_TYPES[outtype]
    if want in BLOCK_BYTES and ne[0] % QK != 0:
        return QT.F16
    return want


def nbytes(ne: tuple[int, ...], qt: QT) -> int:
    n = int(np.prod(ne, dtype=np.int64))
    if qt == QT.F32:
        return 4 * n
    if qt in (QT.F16, QT.BF16):
        return 2 * n
    return n // QK * BLOCK_BYTES[qt]


def _roundf(x: np.ndarray) -> np.ndarray:
    """C roundf (half away from zero) for float32, exactly: |x| = f + frac, f = floor(|x|)."""
    a = np.abs(x)
    f = np.floor(a)
    a -= f  # exact
    a *= np.float32(2)  # exact
    np.floor(a, out=a)  # 1 iff frac >= 0.5
    f += a
    return np.copysign(f, x, out=f)


def _q8_0_blocks(b: np.ndarray) -> np.ndarray:
    n = b.shape[0]
    amax = np.abs(b).max(axis=1)
    d = amax / np.float32(127)
    inv = np.zeros_like(d)
    np.divide(np.float32(1), d, out=inv, where=d != 0)
    q = _roundf(b * inv[:, None]).astype(np.int8)
    out = np.empty((n, 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(n, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def _q4_0_blocks(b: np.ndarray) -> np.ndarray:
    n = b.shape[0]
    imax = np.abs(b).argmax(axis=1)  # first index of the largest magnitude, as the C loop
    mx = b[np.arange(n), imax]
    d = mx / np.float32(-8)
    inv = np.zeros_like(d)
    np.divide(np.float32(1), d, out=inv, where=d != 0)
    v = b * inv[:, None]
    v += np.float32(8.5)
    q = np.minimum(np.trunc(v), np.float32(15)).astype(np.uint8)  # v >= 0 here: trunc == (int) cast
    out = np.empty((n, 18), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(n, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << np.uint8(4))
    return out


def quantize(x: np.ndarray, qt: QT) -> np.ndarray:
    """Quantize float32 data of numpy shape (..., ne0) to ``qt``; returns uint8 (..., ne0/32*bytes)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % QK:
        raise ValueError(f"ne[0] = {x.shape[-1]} is not a multiple of {QK}")
    fn = {QT.Q8_0: _q8_0_blocks, QT.Q4_0: _q4_0_blocks}[qt]
    blocks = x.reshape(-1, QK)
    nb = blocks.shape[0]
    out = np.empty((nb, BLOCK_BYTES[qt]), dtype=np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        for s in range(0, nb, _CHUNK_BLOCKS):
            out[s:s + _CHUNK_BLOCKS] = fn(blocks[s:s + _CHUNK_BLOCKS])
    return out.reshape(*x.shape[:-1], x.shape[-1] // QK * BLOCK_BYTES[qt])


def dequantize(data: np.ndarray, qt: QT, ne0: int) -> np.ndarray:
    """Inverse of `quantize` (d * q as float32), for checks."""
    b = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1, BLOCK_BYTES[qt])
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    if qt == QT.Q8_0:
        q = b[:, 2:].view(np.int8).astype(np.float32)
    else:
        qs = b[:, 2:]
        q = np.concatenate([(qs & 15), (qs >> 4)], axis=1).astype(np.float32) - 8
    return (d * q).reshape(-1, ne0)


def encode(x: np.ndarray, qt: QT) -> np.ndarray:
    """float32 data (numpy shape = reversed ne) as stored for ggml type ``qt``."""
    if qt == QT.F32:
        return np.ascontiguousarray(x, dtype=np.float32)
    if qt == QT.F16:
        return np.ascontiguousarray(x, dtype=np.float32).astype(np.float16)
    return quantize(x, qt)
