"""One validator for every YAML file the user writes (criteria, configs/engine.yaml,
configs/matrix.yaml): typed readers that record `FILE:LINE: PATH: message` and carry on, so all
problems of a file are reported at once (SchemaErrors, exit status 2)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, SchemaErrors
from harness.contract import inputs
from harness.contract.criteria import regex_error
from harness.contract.yamlsrc import Located, YamlLimitError, YamlSyntaxError, load

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # builds, dumps, variants: one path component
ENTRY_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")  # build-matrix entries, also folder names of reports
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")
# The longest timeout a file may ask for (a week): longer ones, or .inf, would overflow the
# timer's clock and leave a run with no timeout at all.
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def type_name(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def rel_path(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, RuntimeError, OSError):  # outside root, or not resolvable (a loop of links)
        return str(path)


def read_text(path: Path, rel: str, missing: str = "cannot read: no such file",
              error: type[SchemaErrors] = SchemaErrors, max_bytes: int = inputs.MAX_CONFIG) -> str:
    """A user file as text (a regular file under its size cap, UTF-8); `error` naming the file
    when it is absent, refused (harness/contract/inputs.py) or unreadable."""
    try:
        return inputs.read_text(path, max_bytes, rel)
    except FileNotFoundError:
        raise error([f"{rel}: {missing}"]) from None
    except HarnessError as e:
        raise error([str(e)]) from None


def parse(text: str, rel: str, error: type[SchemaErrors] = SchemaErrors) -> Located:
    try:
        return load(text)
    except YamlLimitError as e:
        raise error([f"{rel}:{e.line}: YAML refused: {e.message}"]) from None
    except YamlSyntaxError as e:
        raise error([f"{rel}:{e.line}: not valid YAML: {e.message}"]) from None


class Validator:
    """Collects the errors of one file. Readers return the value, or None after an error."""

    def __init__(self, file: str, loc: Located):
        self.file = file
        self.loc = loc
        self.errors: list[tuple[int, str]] = []
        for dpath, line in loc.duplicates:
            self.errors.append((line, f"{file}:{line}: {self.fmt(dpath)}: duplicate key {dpath[-1]!r}"))

    def fmt(self, path: tuple) -> str:
        out = ""
        for p in path:
            out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
        return out or "(top level)"

    def err(self, path: tuple, msg: str) -> None:
        line = self.loc.line(path)
        self.errors.append((line, f"{self.file}:{line}: {self.fmt(path)}: {msg}"))

    def count(self) -> int:
        return len(self.errors)

    def raise_errors(self, error: type[SchemaErrors] = SchemaErrors) -> None:
        """`error` with every message in line order, when any was recorded."""
        if self.errors:
            msgs = [m for _, m in sorted(self.errors, key=lambda t: t[0])]
            raise error(list(dict.fromkeys(msgs)))

    # -- typed readers --
    def keys(self, path: tuple, m: Any, allowed: dict[str, bool], what: str) -> bool:
        """m is a mapping of known keys (required ones: True) or an error is recorded."""
        if not isinstance(m, dict):
            self.err(path, f"{what} must be a mapping, not {type_name(m)}")
            return False
        for k in m:
            if k not in allowed:
                self.err(path + (k,), f"unknown key {k!r} in {what}; allowed: {', '.join(allowed)}")
        for k, req in allowed.items():
            if req and k not in m:
                self.err(path, f"missing required key {k!r} in {what}")
        return True

    def mapping(self, path: tuple, m: Any, what: str) -> dict[Any, Any] | None:
        """A mapping with keys of the user's choosing (names); null reads as empty."""
        if m is None:
            return {}
        if not isinstance(m, dict):
            self.err(path, f"{what} must be a mapping, not {type_name(m)}")
            return None
        return m

    def str_(self, path: tuple, v: Any, pattern: re.Pattern[str] | None = None, hint: str = "") -> str | None:
        if not isinstance(v, str) or not v:
            self.err(path, f"must be a non-empty string, not {type_name(v) if v != '' else 'an empty one'}")
            return None
        if pattern and not pattern.match(v):
            self.err(path, f"{v!r} is not valid: {hint}")
            return None
        return v

    def title(self, path: tuple, v: Any) -> str | None:
        """A one-line text for people: no control characters, which would reach the terminal and
        the reports as they are (an escape sequence, a form feed)."""
        t = self.str_(path, v)
        if t is not None and (bad := _CONTROL_RE.search(t)):
            self.err(path, f"holds the control character {bad.group()!r}; a title is one line of text")
            return None
        return t

    def enum(self, path: tuple, v: Any, allowed: Iterable[str]) -> str | None:
        allowed = tuple(allowed)
        if not isinstance(v, str) or v not in allowed:
            self.err(path, f"{v!r} is not allowed; allowed: {', '.join(allowed)}")
            return None
        return v

    def int_(self, path: tuple, v: Any, lo: int | None = None, hi: int | None = None) -> int | None:
        if isinstance(v, bool) or not isinstance(v, int):
            self.err(path, f"must be an integer, not {type_name(v)}")
            return None
        if lo is not None and v < lo:
            self.err(path, f"must be >= {lo}, not {v}")
            return None
        if hi is not None and v > hi:
            self.err(path, f"must be <= {hi}, not {v}")
            return None
        return v

    def num(self, path: tuple, v: Any, lo: float | None = None, hi: float | None = None,
            open_lo: bool = False) -> float | None:
        """A finite number in [lo, hi] (lo excluded with open_lo): never NaN or infinite, whose
        comparisons would let any value through a tolerance or a timeout."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.err(path, f"must be a number, not {type_name(v)}")
            return None
        finite = math.isfinite(v) if isinstance(v, float) else abs(v) <= 1e300  # a huge int overflows a float
        if not finite:
            self.err(path, f"must be a finite number, not {v if isinstance(v, float) else f'an integer of {len(str(abs(v)))} digits'}")
            return None
        if lo is not None and (v < lo or (open_lo and v == lo)):
            self.err(path, f"must be {'>' if open_lo else '>='} {lo:g}, not {v}")
            return None
        if hi is not None and v > hi:
            self.err(path, f"must be <= {hi:g}, not {v}")
            return None
        return float(v)

    def timeout(self, path: tuple, v: Any) -> float | None:
        """Seconds, > 0 and at most MAX_TIMEOUT_S."""
        return self.num(path, v, 0, MAX_TIMEOUT_S, open_lo=True)

    def bool_(self, path: tuple, v: Any) -> bool | None:
        if not isinstance(v, bool):
            self.err(path, f"must be true or false, not {type_name(v)}")
            return None
        return v

    def strlist(self, path: tuple, v: Any, what: str = "list of strings") -> list[str] | None:
        if isinstance(v, str):
            self.err(path, f"must be a {what} (YAML list), not a single string")
            return None
        if not isinstance(v, list):
            self.err(path, f"must be a {what}, not {type_name(v)}")
            return None
        bad = False
        for i, x in enumerate(v):
            if isinstance(x, bool) or not isinstance(x, (str, int, float)):
                self.err(path + (i,), f"must be a string, not {type_name(x)}")
                bad = True
        return None if bad else [str(x) for x in v]

    def enumlist(self, path: tuple, v: Any, allowed: Iterable[str], what: str = "list") -> list[str] | None:
        """A list whose items each come from `allowed`, none twice."""
        items = self.strlist(path, v, what)
        if items is None:
            return None
        n0 = self.count()
        for i, x in enumerate(items):
            self.enum(path + (i,), x, allowed)
        if len(set(items)) != len(items):
            self.err(path, "an item is listed twice")
        return items if self.count() == n0 else None

    def patterned(self, path: tuple, v: Any, pattern: re.Pattern[str], hint: str, what: str) -> list[str] | None:
        """A list whose items each match `pattern`, none twice."""
        items = self.strlist(path, v, what)
        if items is None:
            return None
        n0 = self.count()
        for i, x in enumerate(items):
            self.str_(path + (i,), x, pattern, hint)
        if len(set(items)) != len(items):
            self.err(path, "an item is listed twice")
        return items if self.count() == n0 else None

    def regexes(self, path: tuple, v: Any) -> list[str] | None:
        pats = self.strlist(path, v, "list of regular expressions")
        if pats is None:
            return None
        for i, p in enumerate(pats):
            bad = regex_error(p)
            if bad:
                self.err(path + (i,), bad)
                return None
        return pats

    def scalar_map(self, path: tuple, v: Any, what: str, key_re: re.Pattern[str] = ENV_NAME_RE,
                   key_hint: str = "a valid environment variable name") -> dict[str, str] | None:
        """NAME: value (string, number, or true/false -> ON/OFF), e.g. environments and CMake options."""
        if not isinstance(v, dict):
            self.err(path, f"must be a mapping of {what}, not {type_name(v)}")
            return None
        out = {}
        for k, x in v.items():
            if not isinstance(k, str) or not key_re.match(k):
                self.err(path + (k,), f"{k!r} is not {key_hint}")
            elif x is None or not isinstance(x, (str, int, float)):
                self.err(path + (k,), f"value must be a string, number or true/false, not {type_name(x)}")
            else:
                out[k] = ("ON" if x else "OFF") if isinstance(x, bool) else str(x)
        return out
