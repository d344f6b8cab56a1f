"""Which results of an interrupted report a resumed run keeps. Each result records what it ran
with (`details.ran_with`: the commit, the dirty flag, and the sha256 of each build's engine and
module). A result is kept only when a fresh run now would judge it the same way (same digest,
registration, exploratory label, dependency digests; not refused, e.g. by --strict) and run it
on the same commit and binaries; anything else is run again, so a report never shows one
engine's results under another's commit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

VERDICTS = ("PASS", "FAIL", "SKIP")


def ran_with(git: dict[str, Any], builds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What a result ran with: git's commit and dirty flag; build name -> {engine, module} sha256."""
    return {"commit": git.get("commit"), "dirty": git.get("dirty"),
            "builds": {n: {"engine": (s or {}).get("engine"), "module": (s or {}).get("module")}
                       for n, s in sorted(builds.items())}}


def why_not_kept(prev: dict[str, Any] | None, digest: str, shown: str, exploratory: bool,
                 registration: dict[str, Any], git: dict[str, Any],
                 sha: Callable[[str], dict[str, Any]]) -> str | None:
    """Why prev (the report's result for a criterion) must be run again, or None to keep it.
    shown, exploratory, registration: how a fresh run labels it now; git: the commit now;
    sha(build): that build's {engine, module} sha256 now (it is built, if need be)."""
    if not prev or prev.get("verdict") not in VERDICTS:
        return "no verdict"
    details = prev.get("details") if isinstance(prev.get("details"), dict) else {}
    was = details.get("ran_with")
    if prev.get("digest") != digest:
        return "the criterion changed"
    if not isinstance(was, dict) or not isinstance(was.get("builds"), dict):
        return "the result does not record what it ran with"
    now = ran_with(git, {n: sha(n) for n in was["builds"]})
    if was.get("commit") != now["commit"] or was.get("dirty") != now["dirty"]:
        return f"it ran on commit {str(was.get('commit'))[:10]}, now {str(now['commit'])[:10]}"
    if was.get("builds") != now["builds"]:
        return "the engine or module binaries changed"
    if (prev.get("registration"), bool(prev.get("exploratory")), details.get("registration")) != \
            (shown, exploratory, registration):
        return "its registration, run mode or dependencies changed"
    return None


def stale(results: list[dict[str, Any]], git: dict[str, Any], builds: dict[str, Any]) -> list[str]:
    """Ids of results that did not run on this commit, or whose binaries are not the report's
    builds now (build name -> BuildResult.to_json()): they may not stand under this report's header."""
    out = []
    for r in results:
        was = (r.get("details") or {}).get("ran_with") if isinstance(r.get("details"), dict) else None
        if not isinstance(was, dict) or was.get("commit") != git.get("commit") or was.get("dirty") != git.get("dirty"):
            out.append(r.get("id"))
            continue
        for n, sha in (was.get("builds") or {}).items():
            b = builds.get(n)
            if isinstance(b, dict) and isinstance(b.get("sha256"), dict) and \
                    {k: b["sha256"].get(k) for k in ("engine", "module")} != sha:
                out.append(r.get("id"))
                break
    return out
