"""Checked reads of a Hugging Face checkpoint's JSON (config.json, safetensors headers, the shard
index, tokenizer.json).

A checkpoint folder is untrusted input: every value is checked for its type (and sizes for a range)
before use, and a bad one raises `ConvertError` naming the file and the field, e.g.
``config.json: layer_types: expected a list of strings, got 5``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.contract import inputs


class ConvertError(ValueError):
    """A checkpoint that cannot be converted; the message names the file (and the field)."""


def show(v: Any, limit: int = 60) -> str:
    """``repr(v)``, shortened: hostile values can be megabytes long."""
    s = repr(v)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def fail(where: str, expected: str, v: Any) -> ConvertError:
    return ConvertError(f"{where}: expected {expected}, got {show(v)}")


def load_json(data: bytes | str, where: str) -> Any:
    """Parse JSON text (bytes may be any UTF encoding); `where` names the file in the error."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ConvertError(f"{where}: not valid JSON: nested too deeply") from None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise ConvertError(f"{where}: not valid JSON: {e}") from None


# A checkpoint's JSON files (config.json, the shard index, tokenizer.json: about 11 MB for a
# 250k-token vocabulary) are far below this.
MAX_JSON = 256 * inputs.MIB


def read_json(path: Path) -> Any:
    """A JSON file of the checkpoint, read like every other input: a FIFO or a directory is named
    as such (and never opened), an oversized file refused before it is read."""
    try:
        data = inputs.read_bytes(Path(path), MAX_JSON)
    except inputs.FileRefused as e:
        raise ConvertError(str(e)) from None
    return load_json(data, str(path))


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def expect_object(v: Any, where: str) -> dict:
    if not isinstance(v, dict):
        raise fail(where, "a JSON object", v)
    return v


def expect_int(v: Any, where: str, lo: int, hi: int) -> int:
    if not is_int(v) or not lo <= v <= hi:
        raise fail(where, f"an integer in [{lo}, {hi}]", v)
    return v


def expect_number(v: Any, where: str) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            f = float(v)
        except OverflowError:  # an integer beyond float range
            pass
        else:
            if math.isfinite(f):
                return f
    raise fail(where, "a finite number", v)


def expect_bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise fail(where, "true or false", v)
    return v


def expect_str_list(v: Any, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise fail(where, "a list of strings", v)
    return v


def expect_int_list(v: Any, where: str, lo: int, hi: int, max_len: int) -> list[int]:
    if not isinstance(v, list) or len(v) > max_len or not all(is_int(x) and lo <= x <= hi for x in v):
        raise fail(where, f"a list of at most {max_len} integers in [{lo}, {hi}]", v)
    return v
