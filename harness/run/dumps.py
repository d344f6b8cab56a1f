"""The one reader of engine dumps, shared by verify, compare and the build matrix: each dump found
inside its own folder (inputs: no link out, a regular file, exactly the size its meta.json shape
gives, never empty), under one set of caps, hashed and compared in bounded chunks. Identical,
finite dumps (the common PASS) are never held whole; a dump that differs, holds a NaN or infinity,
or is judged by a tolerance is read whole for the full account of compare_bytes."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.run.dumpdiff import DumpDiff, compare_bytes
from harness.contract import inputs
from harness.contract.config import DTYPES
from harness.contract.criteria import _MISSING, lookup

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()  # the digest a run recorded for an empty dump


class DumpRefused(Exception):
    """A dump that cannot be compared; the message says why in one line."""


@dataclass(frozen=True)
class Dump:
    folder: Path
    file: str
    size: int
    shown: str  # "dump h_out.f32"
    dtype: str = "f32"
    shape: list[int] | None = None  # its meta.json shape, checked against size by locate

    def read(self) -> bytearray:
        return inputs.read_inside(self.folder, self.file, max(self.size, 1), self.size, shown=self.shown)

    def chunks(self) -> Any:
        return inputs.chunks_inside(self.folder, self.file, self.size, self.shown)


def shape(doc: Any, dotted: str, where: str = "meta.json") -> list[int] | None:
    """A dump's shape at `dotted` in `doc` (meta.json, or what a report recorded of it): None when
    absent; anything but a list of non-negative integers is a DumpRefused."""
    v = lookup(doc, dotted)
    if v is _MISSING or v is None:
        return None
    if not (isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**53
                                        for x in v)):
        raise DumpRefused(f"{where} {dotted} = {str(v)[:60]} is not a list of non-negative integers")
    return v


def _empty(shown: str, shape: list[int] | None) -> DumpRefused:
    return DumpRefused(f"vacuous: {shown} is empty" + (f" (meta.json shape {shape})" if shape is not None else "")
                       + ": no element to compare")


def locate(folder: Path, file: str, dtype: str, shape: list[int] | None) -> Dump:
    """The dump `file` of `folder`, checked unread: with a shape, exactly its size (up to
    inputs.MAX_SHAPED_DUMP); without, up to inputs.MAX_DUMP; never empty (no element to compare
    is vacuous). FileNotFoundError passes through; every other problem is a DumpRefused."""
    shown = f"dump {file}"
    want = math.prod(shape) * DTYPES[dtype] if shape is not None else None
    why = f"meta.json shape {shape} of {dtype} needs {want} (truncated or stale dump)"
    cap = inputs.MAX_DUMP if want is None else inputs.MAX_SHAPED_DUMP
    try:
        fd, st = inputs.open_inside(folder, file, cap, want, why, shown)
    except inputs.FileRefused as e:
        raise DumpRefused(str(e)) from None
    os.close(fd)
    if not st.st_size:
        raise _empty(shown, shape)
    return Dump(folder, file, st.st_size, shown, dtype, shape)


def refusal(where: str, e: DumpRefused) -> str:
    """A refused dump's reason as a verdict says it: "vacuous: " first, then where it was."""
    why = str(e)
    return f"vacuous: {where}: {why.removeprefix('vacuous: ')}" if why.startswith("vacuous: ") else f"{where}: {why}"


def digest(d: Dump) -> str:
    """The SHA-256 of a located dump, read in chunks: a dump of any size in bounded memory."""
    h = hashlib.sha256()
    try:
        for piece in d.chunks():
            h.update(piece)
    except inputs.FileRefused as e:
        raise DumpRefused(str(e)) from None
    return h.hexdigest()


def check_recorded(info: dict[str, Any]) -> None:
    """The never-empty rule for a dump known only by what a run recorded of it ({file, bytes,
    sha256}): one recorded empty is a DumpRefused, as locate would have made it."""
    if info.get("bytes") == 0 or info.get("sha256") == EMPTY_SHA256:
        raise _empty(f"dump {info.get('file', '?')}", None)


def _streamed(a: Dump, b: Dump, dtype: str) -> tuple[bool, int]:
    """(identical, non-finite elements of a) with both read side by side in chunks."""
    width = DTYPES[dtype]
    nonfinite = 0
    carry = b""
    for pa, pb in zip(a.chunks(), b.chunks(), strict=True):
        if pa != pb:
            return False, nonfinite
        if dtype != "i32":
            piece = carry + pa
            whole = len(piece) - len(piece) % width
            bits = np.frombuffer(piece[:whole], dtype=f"<u{width}")
            vals = {"f32": lambda x: x.view("<f4"), "f16": lambda x: x.view("<f2"),
                    "bf16": lambda x: (x.astype(np.uint32) << 16).view(np.float32)}[dtype](bits)
            nonfinite += int(np.count_nonzero(~np.isfinite(vals)))
            carry = piece[whole:]
    return True, nonfinite


def compare(a: Dump, b: Dump, *, mode: str = "memcmp", **tolerance: Any) -> DumpDiff:
    """compare_bytes of the two located dumps (a's type; rows of a's last dimension); in memcmp
    mode, identical finite dumps of the same shape are found in chunks without reading either whole."""
    dtype, shape_a, shape_b = a.dtype, a.shape, b.shape
    row_len = shape_a[-1] if shape_a else 0
    same_shape = shape_a is None or shape_b is None or list(shape_a) == list(shape_b)
    if mode == "memcmp" and a.size == b.size and same_shape and a.size % DTYPES[dtype] == 0:
        try:
            identical, nonfinite = _streamed(a, b, dtype)
        except inputs.FileRefused as e:
            raise DumpRefused(str(e)) from None
        if identical and not nonfinite:
            n = a.size // DTYPES[dtype]
            return DumpDiff(True, True, "identical bytes", elements=n, row_len=row_len or n or 1)
    try:
        da, db = a.read(), b.read()
    except inputs.FileRefused as e:
        raise DumpRefused(str(e)) from None
    return compare_bytes(da, db, row_len, mode=mode, shape_a=shape_a, shape_b=shape_b, dtype=dtype, **tolerance)
