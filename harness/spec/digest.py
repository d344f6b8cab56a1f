"""Digests: the canonical form of a criterion (independent of YAML whitespace, comments and key
order), and the sha256 of a file."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any


def normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
            return int(value)
        return repr(value) if not math.isfinite(value) else value
    return str(value)  # dates and other YAML scalars: their text


def canonical_json(mapping: dict[str, Any]) -> str:
    return json.dumps(normalize(mapping), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def criterion_digest(mapping: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(mapping).encode("utf-8")).hexdigest()


def file_sha256(path: str | Path) -> str | None:
    """Hex sha256 of a file's bytes, None when there is no such file."""
    p = Path(path) if path else None
    if p is None or not p.is_file():
        return None
    h = hashlib.sha256()
    with p.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
