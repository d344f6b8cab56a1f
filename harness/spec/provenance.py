"""Which commit added each line of registry.lock (`git blame --porcelain`, argv only): a
registration is only as trustworthy as the review of the commit that added it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_HEADER_RE = re.compile(r"^([0-9a-f]{40}) \d+ (\d+)(?: \d+)?$")
_NOT_COMMITTED = "0" * 40


def _toplevel(root: Path) -> Path | None:
    """The top folder of the git checkout holding root; None outside one. OSError when git is
    missing, SubprocessError when it does not answer."""
    top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                         text=True, timeout=60)
    return Path(top.stdout.strip()) if top.returncode == 0 else None


def registry_commits(root: Path, path: Path) -> dict[int, str | None] | None:
    """line number -> the commit that added it, None for a line in no commit yet (also every line
    of a file git does not track). None when root is not a git checkout or git is missing."""
    try:
        if _toplevel(root) is None:
            return None
        r = subprocess.run(["git", "-C", str(root), "blame", "--porcelain", "--", str(path.resolve())],
                           capture_output=True, text=True, timeout=120, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:  # untracked, or outside the checkout: nothing of it is committed
        try:
            n = len(path.read_text(encoding="utf-8", errors="replace").split("\n"))
        except OSError:
            n = 0
        return {i: None for i in range(1, n + 1)}
    out: dict[int, str | None] = {}
    for line in r.stdout.split("\n"):
        m = _HEADER_RE.match(line)
        if m:
            out[int(m.group(2))] = None if m.group(1) == _NOT_COMMITTED else m.group(1)
    return out


def committed_text(root: Path, path: Path) -> str | None:
    """The file's text in git HEAD, or None: not a git checkout, git missing, no commit yet, or
    the file is not in HEAD (never committed, or outside the checkout)."""
    try:
        top = _toplevel(root)
        if top is None:
            return None
        rel = path.resolve().relative_to(top.resolve()).as_posix()
        r = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{rel}"], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return r.stdout.decode("utf-8", errors="replace") if r.returncode == 0 else None
