"""Reports that git keeps: every report.json (or NAME-report.json) that any commit touching a
path held, each file content once (`git log -- PATH`, then the blobs of each commit's tree)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError


def _git(repo: Path, *argv: str) -> str:
    try:
        r = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HarnessError(f"git {argv[0]}: {e}") from None
    if r.returncode != 0:
        raise HarnessError(f"{repo}: git {argv[0]} failed: {r.stderr.strip()[:300]}")
    return r.stdout


def kept_reports(repo: Path, path: str, rev: str = "HEAD") -> Iterator[tuple[str, str]]:
    """(source 'git:COMMIT:PATH', text) of each report kept under path in rev's history, oldest
    commit first; a file content met again at a later commit is read once."""
    if rev.startswith("-"):  # git would read it as an option (--output=FILE writes a file)
        raise HarnessError(f"history add-git --rev {rev!r}: not a revision (it starts with '-')")
    seen: set[str] = set()
    for commit in reversed(_git(repo, "log", "--format=%H", "--end-of-options", rev, "--", path).split()):
        for line in _git(repo, "ls-tree", "-r", commit, "--", path).splitlines():
            meta, _, name = line.partition("\t")
            parts = meta.split()
            if len(parts) != 3 or parts[1] != "blob" or not name.endswith("report.json") or parts[2] in seen:
                continue
            seen.add(parts[2])
            yield f"git:{commit[:10]}:{name}", _git(repo, "cat-file", "blob", parts[2])
