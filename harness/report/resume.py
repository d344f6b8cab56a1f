"""`verify --resume`, all of it: which report folder a bare `--resume` continues, which results
of it a resumed run keeps, and what is still to run. Each result records what it ran
with (`details.ran_with`: the commit, the dirty flag, and the sha256 of each build's engine and
module). A result is kept only when a fresh run now would judge it the same way (same digest,
registration, exploratory label, dependency digests; not refused, e.g. by --strict) and run it
on the same commit and binaries; anything else is run again, so a report never shows one
engine's results under another's commit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.report.document import Report, resolve_latest
from harness.contract import inputs
from harness.contract.criteria import Criterion

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


def target(reports: Path) -> Path | None:
    """What a bare `--resume` continues: the newest report folder when its run did not finish
    (interrupted, or killed while running), else reports/latest (the last finished full run)."""
    def order(d: Path) -> tuple[str, int]:  # 20261202T075151Z-1a2b3c4, then .2, .3 in one second
        base, _, n = d.name.partition(".")
        return base, int(n) if n.isdigit() else 1

    folders = sorted((d for d in reports.glob("2*") if d.is_dir() and not d.is_symlink()), key=order)
    for folder in reversed(folders):  # the newest verify report (a matrix report has a kind)
        try:
            doc = inputs.json_loads(inputs.read_text(folder / "report.json", inputs.MAX_REPORT))
        except (OSError, ValueError):
            continue  # no report of a run (a compare refused before writing one): not a verify run
        if not isinstance(doc, dict) or doc.get("kind"):
            continue
        if isinstance(doc, dict) and (doc.get("status") in ("running", "interrupted")
                                      or (doc.get("status") == "partial" and doc.get("resumed"))):
            return folder
        break
    return resolve_latest(reports)


def folder(given: str | None, reports: Path) -> Path | None:
    """The folder `--resume [DIR]` names: DIR, or for a bare `--resume` ("latest") target(reports)."""
    if given is None:
        return None
    if given != "latest":
        return Path(given)
    got = target(reports)
    if got is None:
        raise HarnessError("--resume: no previous report (reports/latest) to continue")
    return got


def not_run(crits: list[Criterion], rep: Report) -> list[str]:
    """Ids of the criteria with no verdict in the report for their current text."""
    out = []
    for c in crits:
        r = rep.result_for(c.id)
        if not (r and r.get("digest") == c.digest and r.get("verdict") in VERDICTS):
            out.append(c.id)
    return out


def drop_stale(rep: Report, git: dict[str, Any], builds: dict[str, Any], say: Callable[[str], None]) -> None:
    """Drop the results that did not run on this commit, or on the report's binaries (builds):
    they are run again, or listed as not run."""
    gone = [i for i in stale(rep.results, git, builds) if isinstance(i, str)]
    if gone:
        say(f"not kept from the interrupted run, as they ran on another commit or engine: {', '.join(gone)}")
        rep.doc["results"] = [r for r in rep.results if r.get("id") not in gone]


def check(rdir: Path) -> Path:
    """rdir, when it holds a report to continue (checked before its lock is taken)."""
    if not (rdir / "report.json").is_file():
        raise HarnessError(f"--resume: {rdir} holds no report.json")
    return rdir


def load(rdir: Path) -> Report:
    """The report to continue (read under its lock, so the last writer's results are all there)."""
    try:
        return Report.load(rdir)
    except (OSError, ValueError) as e:
        raise HarnessError(f"--resume: cannot read {rdir}/report.json: {e}") from None
