"""A compare's report: report.md (opening with the verdict table), report.json, junit.xml, comment.md
for a pull request, and under GitHub Actions the step summary and one annotation per failure."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, TextIO
from xml.sax.saxutils import escape, quoteattr

from harness.compare.session import Compare
from harness.compare.workload import Outcome
from harness.report.document import _table, atomic_write
from harness.report.github import annotation

SCHEMA = "kite-compare/1"
METHOD = ("sign-based confidence sequence for the median pair ratio (Howard & Ramdas 2022, beta-binomial "
          "mixture), valid under a look after every block")


def _ratio(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else "—"


def _interval(o: Outcome) -> str:
    lo, hi = o.interval
    if math.isnan(lo):
        return "—"
    return f"[{_ratio(lo) if math.isfinite(lo) else '0'}, {_ratio(hi) if math.isfinite(hi) else '∞'}]"


def _bytes(o: Outcome) -> str:
    if o.bytes == "changed":
        return "CHANGED (must stay same)" if o.bytes_rule == "same" else "changed (may change)"
    if o.bytes in ("within", "beyond"):  # a registered tolerance (tolerance.py): where and by how much
        return ("BEYOND" if o.bytes == "beyond" else "within") + " tolerance (" + "; ".join(
            f"{d['dump']}: {d['reason'].removeprefix('within tolerance: ')}" for d in o.bytes_detail
            if not d.get("identical")) + ")"
    return o.bytes


def _cell(s: str) -> str:
    """A table cell from engine or file text: one line, no pipe, no control character."""
    s = "".join(ch if ch.isprintable() else " " for ch in str(s))
    return " ".join(s.split()).replace("|", "\\|")


def verdict_rows(c: Compare) -> list[list[str]]:
    return [[_cell(o.id), _bytes(o), o.speed, _ratio(o.ratio), _interval(o), str(o.pairs) if o.pairs else "—"]
            for o in c.outcomes]


HEADERS = ["workload", "bytes", "speed", "ratio (head/base)", "interval", "pairs"]


def overall(c: Compare, fail_on: str) -> str:
    return "FAIL" if c.failed(fail_on) else "PASS"


def render_markdown(c: Compare, fail_on: str = "any") -> str:
    out = [f"# compare {c.base.label} → {c.head.label}: {overall(c, fail_on)}", "",
           _table(verdict_rows(c), HEADERS), ""]
    if c.tested:
        out.append(f"Speed: {METHOD}. Intervals are at level {c.alpha:g}/{c.tested} each; regressed/improved are "
                   f"decided by Holm's step-down over the {c.tested} timed workload(s)' anytime-valid p-values "
                   f"(family-wise error ≤ {c.alpha:g}). Equivalent: the interval lies within ±margin.")
    else:
        out.append("Speed: no workload was timed (identical builds, skips or errors).")
    out[-1] += " A workload with `bytes: same` fails when its bytes change, whatever its speed."
    out.append("")
    out.append(f"- base: `{c.base.commit}` ({c.base.spec}){' with uncommitted changes' if c.base.dirty else ''}")
    out.append(f"- head: `{c.head.commit}` ({c.head.spec}){' (working tree with uncommitted changes: dirty)' if c.head.dirty else ''}")
    out.append(f"- seconds: {c.seconds:.1f}")
    for name, b in c.builds.items():
        ch = b["changes"]
        out.append(f"- build `{name}`: " + ("identical (engine, module, kernels)" if not ch else
                                            f"{len(ch)} change(s): " + "; ".join(_cell(x) for x in ch[:20])
                                            + (" …" if len(ch) > 20 else "")))
    out += ["", "## Details", ""]
    for o in c.outcomes:
        out.append(f"### {_cell(o.id)}: {_cell(o.title)}")
        out.append(f"- where: `{o.file}:{o.line}`; margin ±{o.margin * 100:g} %")
        # the reason starts with its verdict ("regressed: ratio ..."); say the verdict once
        said = o.reason.startswith(f"{o.speed}:") if o.reason else False
        out.append(f"- speed: {_cell(o.reason)}" if said else f"- speed: {o.speed}" + (f": {_cell(o.reason)}" if o.reason else ""))
        if o.pairs:
            out.append(f"- pairs {o.pairs}, {o.seconds:.1f} s; p-value of no change {o.p_value:.3g}; smallest "
                       f"detectable change {o.detectable * 100:.2f} %")
            out.append(f"- stability: {'stable' if o.stable else _cell(o.stability)}")
        if o.noise_floor:
            lo, hi = o.noise_floor["ci"]
            out.append(f"- A/A floor: {o.noise_floor['pairs']} pairs, median {o.noise_floor['median']:.4f}, "
                       f"[{lo:.4f}, {hi:.4f}]")
        for d in o.bytes_detail:
            out.append(f"- bytes `{_cell(d['dump'])}`: {_cell(d['reason'])}")
        out.append("")
    return "\n".join(out) + "\n"


def to_json(c: Compare, fail_on: str = "any") -> dict[str, Any]:
    return {"schema": SCHEMA, "verdict": overall(c, fail_on), "fail_on": fail_on, "method": METHOD,
            "alpha": c.alpha, "tested": c.tested, "seconds": round(c.seconds, 3), "base": c.base.to_json(),
            "head": c.head.to_json(), "builds": c.builds, "workloads": [o.to_json() for o in c.outcomes]}


def _failure(o: Outcome) -> str:
    if o.bytes_failed:
        return "bytes changed: " + "; ".join(d["reason"] for d in o.bytes_detail if not d["identical"])
    return o.reason


def render_junit(c: Compare, fail_on: str = "any") -> str:
    fails = sum(o.failed() for o in c.outcomes)
    skips = sum(o.speed == "skipped" for o in c.outcomes)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuite name={quoteattr(f"compare {c.base.label} {c.head.label}")} tests="{len(c.outcomes)}" '
           f'failures="{fails}" skipped="{skips}" time="{c.seconds:.3f}">']
    for o in c.outcomes:
        out.append(f'  <testcase classname="compare" name={quoteattr(o.id)} time="{o.seconds:.3f}">')
        if o.failed():
            out.append(f"    <failure message={quoteattr(_cell(_failure(o))[:500])}>{escape(_failure(o))}</failure>")
        elif o.speed == "skipped":
            out.append(f"    <skipped message={quoteattr(_cell(o.reason))}/>")
        out.append(f"    <system-out>{escape(o.reason)}</system-out>")
        out.append("  </testcase>")
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


def render_comment(c: Compare, fail_on: str = "any") -> str:
    """A pull request comment: the verdict table and one line of method."""
    return (f"**kite compare** `{c.base.label}` → `{c.head.label}`: **{overall(c, fail_on)}**\n\n"
            + _table(verdict_rows(c), HEADERS)
            + f"\n\n<sub>{METHOD}; Holm over {c.tested} workload(s), α = {c.alpha:g}.</sub>\n")


def write(c: Compare, out: Path, fail_on: str = "any") -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "report.md", render_markdown(c, fail_on))
    atomic_write(out / "report.json", json.dumps(to_json(c, fail_on), indent=1) + "\n")
    atomic_write(out / "junit.xml", render_junit(c, fail_on))
    atomic_write(out / "comment.md", render_comment(c, fail_on))


def annotations(c: Compare) -> list[str]:
    return [annotation(o.file, o.line, f"compare {o.id}", _failure(o)) for o in c.outcomes if o.failed()]


def publish(c: Compare, out: Path, fail_on: str = "any", env: dict[str, str] | None = None,
            stream: TextIO | None = None) -> None:
    """Under GitHub Actions: report.md appended to the step summary, an annotation per failure."""
    env = dict(os.environ) if env is None else env
    stream = stream or sys.stdout
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(render_markdown(c, fail_on) + f"\n(report folder: `{out}`)\n\n")
        except OSError as e:
            print(f"harness: warning: cannot write the step summary {summary}: {e.strerror or e}", file=sys.stderr)
    if env.get("GITHUB_ACTIONS") == "true":
        for line in annotations(c):
            try:
                print(line, file=stream, flush=True)
            except BrokenPipeError:  # a closed pipe never changes the verdict's exit status
                break
