"""A commit's time, asked of git: reports name their commit but not when it was made. Where git
does not know the commit (another clone, a copied tree), the run's start time stands in."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path


def utc(text: str) -> str:
    """An ISO time as UTC `YYYY-MM-DDTHH:MM:SSZ` (sorts as text); text that is no time stays as it is."""
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return text
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def commit_time(repo: Path | None, commit: str, fallback: str) -> tuple[str, str, str]:
    """(full hash, ISO time, 'git') of a commit git knows, else (commit as given, fallback, 'run start'):
    reports name commits by hashes of any length, a series needs one name per commit."""
    if repo is not None and commit and all(c in "0123456789abcdefABCDEF" for c in commit):
        try:
            r = subprocess.run(["git", "-C", str(repo), "show", "-s", "--format=%H %cI", f"{commit}^{{commit}}", "--"],
                               capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            r = None
        words = r.stdout.split() if r is not None and r.returncode == 0 else []
        if len(words) >= 2:
            return words[0], utc(words[1]), "git"
    return commit, utc(fallback), "run start"
