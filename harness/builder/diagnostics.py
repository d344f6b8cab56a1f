"""The first errors of a failed build, picked out of its log: gcc and clang (`file:line:col: error:`),
nvcc (`file(line): error:`), MSVC (`file(line): error C2065:`), the linker, and CMake itself."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FIRST_ERRORS = 5

_PATTERNS = [
    # gcc, clang: src/x.c:12:5: error: ... (also "fatal error:")
    re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)?\s+(?:fatal )?error:\s*(?P<msg>.+)$"),
    # MSVC, and nvcc's host pass on Windows: src\x.c(12): error C2065: ... / x.c(12,5): fatal error C1083: ...
    re.compile(r"^\s*(?P<file>[^\s(][^(]*?)\((?P<line>\d+)(?:,\d+)?\)\s*:\s+(?:fatal )?error\s+(?P<msg>[A-Z]+\d+:.+)$"),
    # nvcc: kernel.cu(12): error: identifier "x" is undefined
    re.compile(r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\):\s+error(?:\s*#\d+-D)?:\s*(?P<msg>.+)$"),
]
_CMAKE = re.compile(r"^CMake Error at (?P<file>[^:]+):(?P<line>\d+)")
_LINKER = re.compile(r"(undefined reference to|multiple definition of|cannot find -l|unresolved external symbol"
                     r"|ld returned \d+ exit status|error LNK\d+)")


@dataclass(frozen=True)
class Diagnostic:
    file: str  # as the compiler wrote it, or relative to the project root when under it
    line: int  # 0 when the message has no line (linker)
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: error: {self.message}" if self.file else self.message


def _relative(name: str, root: Path | None) -> str:
    if root is None or not Path(name).is_absolute():
        return name
    try:
        return Path(name).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return name


def first_errors(log: str, root: Path | None = None, limit: int = FIRST_ERRORS) -> list[Diagnostic]:
    """Up to `limit` errors in log order, each once."""
    out: list[Diagnostic] = []
    lines = log.splitlines()
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        d = None
        for pat in _PATTERNS:
            m = pat.match(line)
            if m:
                d = Diagnostic(_relative(m.group("file"), root), int(m.group("line")), m.group("msg").strip())
                break
        if d is None:
            m = _CMAKE.match(line)
            if m:
                text = next((x.strip() for x in lines[i + 1:i + 4] if x.strip()), "CMake error")
                d = Diagnostic(_relative(m.group("file"), root), int(m.group("line")), text)
            elif _LINKER.search(line):
                d = Diagnostic("", 0, line.strip())
        if d is not None and d not in out:
            out.append(d)
            if len(out) >= limit:
                break
    return out
