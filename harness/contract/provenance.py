"""What git says about registry.lock (argv only): which commit added each line (`git blame
--porcelain`), its text in HEAD, and its versions over the whole history. A registration is only
as trustworthy as the review of the commit that added it."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
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


@dataclass
class FileHistory:
    """A file's committed versions: (commit, parent, parent's blob, commit's blob or "") for each
    commit whose blob differs from a parent's that has the file, and each blob's text."""
    edges: list[tuple[str, str, str, str]]
    texts: dict[str, str]

    def text(self, blob: str) -> str:
        return self.texts.get(blob, "")


def file_history(root: Path, path: Path) -> FileHistory | None:
    """path's versions over the whole history of HEAD (every commit, merges with each parent),
    read with three git commands whatever the number of commits; None outside a git checkout, with
    git missing, or with no commit yet."""
    try:
        top = _toplevel(root)
        if top is None:
            return None
        rel = path.resolve().relative_to(top.resolve()).as_posix()
        revs = subprocess.run(["git", "-C", str(root), "rev-list", "--parents", "HEAD"], capture_output=True,
                              text=True, timeout=120)
        if revs.returncode != 0:
            return None
        graph = [line.split() for line in revs.stdout.split("\n") if line.strip()]
        ask = "".join(f"{g[0]}:{rel}\n" for g in graph)
        found = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-check"], input=ask,
                               capture_output=True, text=True, timeout=120)
        blob: dict[str, str] = {}
        for g, line in zip(graph, found.stdout.split("\n"), strict=False):
            f = line.split()
            blob[g[0]] = f[0] if len(f) == 3 and f[1] == "blob" else ""
        edges = [(g[0], p, blob[p], blob[g[0]]) for g in graph for p in g[1:]
                 if blob.get(p) and blob[p] != blob[g[0]]]
        wanted = sorted({b for e in edges for b in e[2:] if b})
        raw = subprocess.run(["git", "-C", str(root), "cat-file", "--batch"], input="".join(b + "\n" for b in wanted).encode(),
                             capture_output=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    texts: dict[str, str] = {}
    at = 0
    while at < len(raw):  # "<blob> blob <size>\n<bytes>\n" per object
        nl = raw.index(b"\n", at)
        head = raw[at:nl].split()
        size = int(head[2]) if len(head) == 3 else 0
        texts[head[0].decode()] = raw[nl + 1:nl + 1 + size].decode("utf-8", errors="replace")
        at = nl + 1 + size + 1
    return FileHistory(edges, texts)
