"""Canonical form of a criterion: independent of YAML whitespace, comments and key order."""

from __future__ import annotations

import hashlib
import json
import math
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
