"""Digests: the canonical form of a criterion (independent of YAML whitespace, comments and key
order), and the sha256 of a file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def normalize(value: Any) -> Any:
    """The canonical form keeps each scalar's type: `1`, `1.0`, `-0.0`, `"1"` stay apart (the engine
    gets str(value): "1", "1.0", "-0.0", "1"), and a non-finite float is JSON's bare NaN/Infinity
    token, never the text "nan"/"inf". So one digest is one argv and one environment."""
    if isinstance(value, dict):
        return {_key(k): normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # dates and other YAML scalars: their text (the criteria loader refuses them)


def _key(key: Any) -> str:
    """A string key is itself; any other (`1`, `true`, `null`) is its canonical JSON after a NUL,
    so the key 1 and the key "1" digest apart (the criteria loader refuses non-string keys)."""
    return key if isinstance(key, str) else "\0" + json.dumps(normalize(key), sort_keys=True)


def canonical_json(mapping: dict[str, Any]) -> str:
    # allow_nan: NaN and Infinity are written as JSON's bare tokens, which no string can be
    return json.dumps(normalize(mapping), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=True)


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
