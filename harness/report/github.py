"""Under GitHub Actions: `::error` annotations by priority, and a short step summary.

GitHub shows 10 error annotations a step, so they come in this order, at most MAX_ERRORS of them:
the compiler's and linker's errors at their source file:line (the cause, once however many builds
hit it), then one per failed criterion at its line in the criteria file, merged where criteria
share a cause (the same reason, e.g. the same failed build). The step summary gives the counts,
the builds' first errors and the failures, and names the full report rather than copying it."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from harness.text import printable

MAX_ERRORS = 10
SUMMARY_ROWS = 30  # failed criteria listed in the step summary


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(file: str, line: int, title: str, message: str) -> str:
    """One workflow command line: `::error file=F,line=L,title=T::message` (no file: no location)."""
    props = ([f"file={_prop(printable(file))}"] if file else []) + ([f"line={line}"] if file and line else [])
    props.append(f"title={_prop(printable(title))}")
    return f"::error {','.join(props)}::{_data(printable(message))}"


def _build_errors(doc: dict[str, Any]) -> list[tuple[str, int, str, list[str]]]:
    """(file, line, message, [build (part), ...]) of every first error of a failed build part,
    each distinct error once, in build order."""
    found: dict[tuple[str, int, str], list[str]] = {}
    for name, b in (doc.get("builds") or {}).items():
        parts = {"engine": b.get("engine"), "module": b.get("module"),
                 **{Path(k).name: v for k, v in (b.get("extras") or {}).items()}}
        for part, p in parts.items():
            if not isinstance(p, dict) or p.get("status") != "failed":
                continue
            for e in p.get("errors") or []:
                file, _, rest = e.partition(":")
                line, _, msg = rest.partition(":")
                key = (file, int(line), msg.strip()) if line.isdigit() else ("", 0, e)
                found.setdefault(key, []).append(f"{name} ({part})")
    return [(f, ln, m, who) for (f, ln, m), who in found.items()]


# a criterion that FAILed because a build failed (build.outcome.build_failure): the cause is its error
_BUILD_FAILED = re.compile(r"^build \S+ failed \([^)]*\): (?P<cause>.*?)(?: \(\+\d+ more\))? \[reported once")


def _failed_groups(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Failed criteria grouped by cause (the same reason, or the same first error of whichever
    build they needed), in report order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in doc.get("results", []):
        if r.get("verdict") == "FAIL":
            reason = r.get("reason", "")
            m = _BUILD_FAILED.match(reason)
            groups.setdefault(m.group("cause") if m else reason, []).append(r)
    return list(groups.values())


def annotations(doc: dict[str, Any], limit: int = MAX_ERRORS) -> list[str]:
    out = [annotation(f, ln, "build " + ", ".join(who), m) for f, ln, m, who in _build_errors(doc)]
    for group in _failed_groups(doc):
        r = group[0]
        ids = ", ".join(x["id"] for x in group)
        others = "".join(f"; also {x['id']} at {x['file']}:{x.get('line') or 0}" for x in group[1:])
        repro = f" (reproduce: {r['reproduce']})" if r.get("reproduce") and len(group) == 1 else ""
        title = f"{r['id']}: {r['title']}" if len(group) == 1 else f"{ids}: {len(group)} criteria, one cause"
        out.append(annotation(r["file"], int(r.get("line") or 0), title, r.get("reason", "") + repro + others))
    if len(out) > limit:
        rest = len(out) - (limit - 1)
        out = out[:limit - 1] + [annotation("", 0, f"{rest} more errors",
                                            f"{rest} more build errors or failed criteria: see the step summary")]
    return out


def _cell(text: Any, n: int = 160) -> str:
    s = printable(" ".join(str(text).split())).replace("|", "\\|")
    return s if len(s) <= n else s[: n - 1] + "…"


def summary_markdown(doc: dict[str, Any], report_md: str) -> str:
    """The step summary: counts, the builds' first errors, the failed criteria (at most
    SUMMARY_ROWS), and where the full report is."""
    s = doc.get("summary") or {}
    lines = [f"### kite verify: {s.get('failed', 0)} failed, {s.get('passed', 0)} passed, "
             f"{s.get('skipped', 0)} skipped of {s.get('total', 0)} (status {doc.get('status')})", ""]
    errors = _build_errors(doc)
    if errors:
        lines += ["**Build errors**", "", "```"]
        lines += [printable(f"{f}:{ln}: {m}" if f else m) + f"   [{', '.join(who)}]" for f, ln, m, who in errors]
        lines += ["```", ""]
    groups = _failed_groups(doc)
    if groups:  # criteria that failed for the same reason share a row
        lines += ["| failed | where | reason |", "|---|---|---|"]
        for g in groups[:SUMMARY_ROWS]:
            ids = ", ".join(x["id"] for x in g)
            what = _cell(f"{g[0]['id']}: {g[0].get('title', '')}", 80) if len(g) == 1 else _cell(ids, 200)
            where = f"`{g[0]['file']}:{g[0].get('line') or 0}`" + (f" (+{len(g) - 1})" if len(g) > 1 else "")
            lines.append(f"| {what} | {where} | {_cell(g[0].get('reason', ''))} |")
        if len(groups) > SUMMARY_ROWS:
            lines.append(f"\n{len(groups) - SUMMARY_ROWS} more failure reasons: see the full report.")
        lines.append("")
    lines += [f"Full report: `{report_md}`", ""]
    return "\n".join(lines) + "\n"


def append_summary(env: Mapping[str, str], text: str) -> None:
    """Append to the step summary (several steps may share it); nothing outside GitHub Actions. A
    summary that cannot be written is a warning, never a change of the verdict."""
    summary = env.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return
    try:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"harness: warning: cannot write the step summary {summary}: {e.strerror or e}", file=sys.stderr)


def emit(env: Mapping[str, str], lines: list[str], stream: TextIO | None = None) -> None:
    """Workflow command lines (annotations) on stdout, under GitHub Actions only."""
    if env.get("GITHUB_ACTIONS") == "true":
        for line in lines:
            print(line, file=stream or sys.stdout, flush=True)


def run_url(env: Mapping[str, str]) -> str:
    """This workflow run's page, '' outside GitHub Actions."""
    parts = [env.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else ""


def publish(doc: dict[str, Any], rdir: Path, env: Mapping[str, str] | None = None,
            stream: TextIO | None = None, root: Path | None = None) -> None:
    """Nothing outside GitHub Actions. The step summary is appended to (several steps may share it)."""
    env = os.environ if env is None else env
    report_md = rdir / "report.md"
    if root is not None and report_md.is_relative_to(root):
        report_md = report_md.relative_to(root)
    append_summary(env, summary_markdown(doc, report_md.as_posix()))
    emit(env, annotations(doc), stream)
