"""Comparison of raw dumps (f32, f16, bf16 or i32, little-endian): identical bytes, or a full
account of the differences in the dump's own type (a bf16 ULP is a bf16 ULP).
NaNs and infinities are located (index, position, element) in every mode; a NaN fails unless
allowed (allow_nan: a NaN against a NaN, never against a number), and in tolerance mode so does a
differing element that is infinite on a side."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class DumpDiff:
    identical: bool
    ok: bool  # identical, or within tolerance (NaN and shape problems are never ok)
    reason: str  # one line
    elements: int = 0
    row_len: int = 0
    differing: int = 0
    first_index: int | None = None
    first_position: int | None = None  # row (token position)
    first_element: int | None = None  # column within the row
    first_values: tuple[float, float] | None = None
    max_abs: float = 0.0
    max_ulp: int = 0
    sign_flips: int = 0  # differing elements whose sign changed (no NaN): no ULP distance means much there
    max_ulp_same_sign: int = 0  # max ULP over the differing elements whose signs agree
    nmse: float = 0.0
    nan_a: int = 0
    nan_b: int = 0
    inf_a: int = 0
    inf_b: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["first_values"] = list(self.first_values) if self.first_values else None
        return d


# dtype -> (bit pattern type, signed type of the same width, bytes per element)
_TYPES = {"f32": ("<u4", np.int32, 4), "f16": ("<u2", np.int16, 2), "bf16": ("<u2", np.int16, 2),
          "i32": ("<u4", np.int32, 4)}
_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32"}


def _values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The elements of a dump from their bit patterns: floats of the dump's type (bf16 widened
    exactly to float32), or int32."""
    if dtype == "f32":
        return bits.view("<f4")
    if dtype == "f16":
        return bits.view("<f2")
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view("<i4")


def _ordered(bits: np.ndarray, dtype: str = "f32") -> np.ndarray:
    """Bit patterns -> integers whose difference is the distance in ULPs of the dump's type
    (for i32, the difference of the values)."""
    signed = _TYPES[dtype][1]
    i = bits.view(signed).astype(np.int64)
    if dtype == "i32":
        return i
    return np.where(i < 0, -(i & np.iinfo(signed).max), i)


def compare_bytes(a: bytes, b: bytes, row_len: int = 0, *, mode: str = "memcmp", max_abs: float | None = None,
                  max_ulp: int | None = None, nmse: float | None = None, allow_nan: bool = False,
                  shape_a: list[int] | None = None, shape_b: list[int] | None = None, dtype: str = "f32") -> DumpDiff:
    """Compare two little-endian dumps of `dtype` (f32, f16, bf16, i32). row_len: elements per row."""
    bits_t, _, size = _TYPES[dtype]
    for label, buf, shape in (("A", a, shape_a), ("B", b, shape_b)):
        if len(buf) % size:
            return DumpDiff(False, False, f"{label}: {len(buf)} bytes is not a whole number of {_NAMES[dtype]} "
                                          "(truncated?)")
        if shape is not None:
            want = math.prod(shape) * size if shape else 0  # exact: np.prod wraps past int64 (2^32 x 2^32 -> 0)
            if want != len(buf):
                return DumpDiff(False, False, f"{label}: {len(buf)} bytes but meta.json shape {shape} needs {want} "
                                              "(truncated or stale dump)")
    if shape_a is not None and shape_b is not None and list(shape_a) != list(shape_b):
        return DumpDiff(False, False, f"shape mismatch: A {list(shape_a)} vs B {list(shape_b)}")
    if len(a) != len(b):
        return DumpDiff(False, False, f"length mismatch: A has {len(a) // size} elements, B has {len(b) // size}")
    n = len(a) // size
    row_len = row_len or n or 1
    identical = a == b  # memcmp
    ua = np.frombuffer(a, dtype=bits_t)
    ub = np.frombuffer(b, dtype=bits_t)
    fa = _values(ua, dtype)
    fb = _values(ub, dtype)
    nan_a = int(np.count_nonzero(np.isnan(fa)))
    nan_b = int(np.count_nonzero(np.isnan(fb)))
    inf_a = int(np.count_nonzero(np.isinf(fa)))
    inf_b = int(np.count_nonzero(np.isinf(fb)))
    d = DumpDiff(identical, identical, "identical bytes", elements=n, row_len=row_len, nan_a=nan_a, nan_b=nan_b,
                 inf_a=inf_a, inf_b=inf_b)
    nonfinite = _nonfinite_note(fa, fb, nan_a, nan_b, inf_a, inf_b, row_len)
    nan_fail = bool(nan_a or nan_b) and not allow_nan
    if not identical:
        idx = np.flatnonzero(ua != ub)
        d.differing = int(idx.size)
        k = int(idx[0])
        d.first_index = k
        d.first_position, d.first_element = divmod(k, row_len)
        d.first_values = (float(fa[k]), float(fb[k]))
        sa = fa[idx].astype(np.float64)
        sb = fb[idx].astype(np.float64)
        fin = np.isfinite(sa) & np.isfinite(sb)
        if fin.any():
            d.max_abs = float(np.max(np.abs(sa[fin] - sb[fin])))
        both = ~np.isnan(sa) & ~np.isnan(sb)
        if both.any():
            ulp = np.abs(_ordered(ua[idx][both], dtype) - _ordered(ub[idx][both], dtype))
            d.max_ulp = int(np.max(ulp))
            same = np.signbit(sa[both]) == np.signbit(sb[both])
            d.sign_flips = int(np.count_nonzero(~same))
            d.max_ulp_same_sign = int(np.max(ulp[same])) if same.any() else 0
        # an element that differs and is infinite on a side: no finite distance covers it
        inf_diff = np.flatnonzero(both & ~fin)
        # a NaN against a number: allow_nan lets a NaN match a NaN, never a number
        one_nan = np.flatnonzero(np.isnan(sa) != np.isnan(sb))
        # NMSE = sum((a-b)^2) / sum(a^2) over the finite elements (the error is zero outside the
        # differing ones), in float64: a square of any f32/f16/bf16/i32 value neither overflows nor
        # underflows there (float32 squares of 1e-23 were 0, and the NMSE infinite)
        err = (sa[fin] - sb[fin]) if fin.any() else np.zeros(0)
        num = float(np.dot(err, err))
        den = _sum_squares(fa)
        d.nmse = num / den if den > 0 else (0.0 if num == 0 else float("inf"))
        finite_note = " (finite elements)" if (nan_a or nan_b or inf_a or inf_b) else ""
        d.reason = (f"{d.differing} of {n} elements differ; first at index {k} (position {d.first_position}, "
                    f"element {d.first_element}): {d.first_values[0]!r} vs {d.first_values[1]!r}; "
                    f"max abs {d.max_abs:.3g}, max ULP {d.max_ulp}, NMSE {d.nmse:.3g}{finite_note}")
        if mode == "tolerance":
            fails = []
            if nan_fail:
                fails.append("NaN")
            elif one_nan.size:
                j = int(idx[one_nan[0]])
                fails.append(f"{one_nan.size} element{'s' if one_nan.size != 1 else ''} NaN on one side only "
                             f"(allow_nan matches a NaN with a NaN), first at {_where(j, row_len)}")
            if inf_diff.size:
                j = int(idx[inf_diff[0]])
                fails.append(f"{inf_diff.size} differing element{'s' if inf_diff.size != 1 else ''} with an "
                             f"infinity, first at {_where(j, row_len)}")
            if max_abs is not None and d.max_abs > max_abs:
                fails.append(f"max abs {d.max_abs:.3g} > {max_abs:g}")
            if max_ulp is not None and d.max_ulp > max_ulp:
                fails.append(f"max ULP {d.max_ulp} > {max_ulp}")
            if nmse is not None and d.nmse > nmse:
                fails.append(f"NMSE {d.nmse:.3g} > {nmse:g}")
            d.ok = not fails
            d.reason = ("within tolerance: " if d.ok else "outside tolerance (" + "; ".join(fails) + "): ") + d.reason
    if nonfinite:
        d.reason = nonfinite + "; " + d.reason
    if nan_fail:
        d.ok = False
    return d


def _sum_squares(values: np.ndarray, chunk: int = 1 << 20) -> float:
    """Sum of the squares of the finite elements, in float64, a chunk at a time (memory stays
    bounded on a large dump)."""
    total = 0.0
    for i in range(0, values.size, chunk):
        part = values[i:i + chunk]
        part = part[np.isfinite(part)].astype(np.float64)
        total += float(np.dot(part, part))
    return total


def _where(index: int, row_len: int) -> str:
    pos, el = divmod(index, row_len)
    return f"index {index} (position {pos}, element {el})"


def _nonfinite_note(fa: np.ndarray, fb: np.ndarray, nan_a: int, nan_b: int, inf_a: int, inf_b: int,
                    row_len: int) -> str:
    """Where the NaNs and infinities are (first on the side that has them), or '' when there are none."""
    parts = []
    for what, na, nb, test in (("NaN", nan_a, nan_b, np.isnan), ("Inf", inf_a, inf_b, np.isinf)):
        if not (na or nb):
            continue
        side, arr = ("A", fa) if na else ("B", fb)
        first = int(np.flatnonzero(test(arr))[0])
        label = "A and B" if na and nb else side
        parts.append(f"{what} in {label} ({na} in A, {nb} in B), first at {_where(first, row_len)}"
                     + (f" of {side}" if na and nb else ""))
    return "; ".join(parts)
