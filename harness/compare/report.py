"""A compare's report: report.md (opening with the verdict table), report.json, junit.xml, comment.md
for a pull request, and under GitHub Actions the step summary and one annotation per failure. The
writers are the shared ones (harness/report/: the Markdown table and its escaper, JUnit, GitHub).

What a reviewer needs is in the comment and at the top of report.md: each verdict word linked to
the glossary, the change in percent, which dump changed and how (base and head values), why a
workload was skipped, the machine, the command that finds the commit, and where the report is."""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness.compare.session import Compare
from harness.compare.workload import Outcome
from harness.report import github, junit
from harness.report.document import _table, atomic_write, cell

SCHEMA = "kite-compare/2"  # 2: `detectable` renamed `half_width`, with the block-median design
METHOD = ("sign-based confidence sequence for the median ratio of ABBA blocks, one median a block (Howard & "
          "Ramdas 2022, beta-binomial mixture), valid under a look after every block")
GLOSSARY_ENV = "KITE_GLOSSARY_URL"  # where the glossary is (the GitHub action sets it to its own copy)
GLOSSARY = "docs/GLOSSARY.md"
# the glossary's anchors (docs/GLOSSARY.md): a verdict word links to its own
ANCHORS = {"identical build": "identical", "bytes changed": "bytes-changed", "regressed": "regressed",
           "improved": "improved", "equivalent": "equivalent", "inconclusive": "inconclusive",
           "skipped": "skipped"}
FOOTNOTE = ("How to read this: base and head ran alternately on the same machine, many times. The change is "
            "head's time against base's (+5 % = head takes 5 % longer). The interval is where the true change "
            "lies, with {conf} % confidence for all workloads together. **regressed**: head is slower (the "
            "whole interval is above 0 %); **improved**: faster; **equivalent**: within ±{margin} either way; "
            "**inconclusive**: the runs were too noisy to tell within the time allowed, so no claim is made. "
            "A workload whose bytes must stay the same fails when they change, whatever its speed.")


@dataclass
class Links:
    """Where the reader goes next: the glossary, this run's page, the report's artifact."""
    glossary: str = ""  # URL or path of the glossary file; '' = verdict words unlinked
    run: str = ""
    artifact: str = ""


def links_for(env: Mapping[str, str], report_dir: Path, root: Path | None = None) -> Links:
    """The glossary: $KITE_GLOSSARY_URL, else this project's docs/GLOSSARY.md (on GitHub: at the
    commit; locally: relative to the report folder); the run page under GitHub Actions."""
    glossary = env.get(GLOSSARY_ENV, "")
    if not glossary and root is not None and (root / GLOSSARY).is_file():
        server, repo, sha = (env.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA"))
        glossary = (f"{server}/{repo}/blob/{sha}/{GLOSSARY}" if server and repo and sha
                    else os.path.relpath(root / GLOSSARY, report_dir.resolve()))
    return Links(glossary=glossary, run=github.run_url(env))


def word(verdict: str, links: Links) -> str:
    """A verdict word, linked to its glossary entry where there is one."""
    anchor = ANCHORS.get(verdict)
    return f"[{verdict}]({links.glossary}#{anchor})" if anchor and links.glossary else verdict


def _ratio(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else "—"


def _pct(x: float) -> str:
    """A ratio as a change in percent: 1.12 -> +12.0 %, 0.97 -> −3.0 %."""
    return f"{(x - 1) * 100:+.1f} %".replace("-", "−") if math.isfinite(x) else "—"


def _interval(o: Outcome) -> str:
    lo, hi = o.interval
    if math.isnan(lo):
        return "—"
    return f"[{_ratio(lo) if math.isfinite(lo) else '0'}, {_ratio(hi) if math.isfinite(hi) else '∞'}]"


def _interval_pct(o: Outcome) -> str:
    lo, hi = o.interval
    if math.isnan(lo):
        return "—"
    return f"[{_pct(lo) if math.isfinite(lo) and lo > 0 else '−100 %'}, {_pct(hi) if math.isfinite(hi) else '∞'}]"


def change(o: Outcome) -> str:
    """The change in percent, head against base, in words."""
    if not math.isfinite(o.ratio):
        return "—"
    side = "slower" if o.ratio > 1 else "faster" if o.ratio < 1 else "same time"
    return f"{_pct(o.ratio)} ({side})" if side != "same time" else "±0.0 %"


def _bytes(o: Outcome, links: Links) -> str:
    if o.bytes == "changed":
        return (word("bytes changed", links)
                + (" (must stay the same)" if o.bytes_rule == "same" else " (may change)"))
    if o.bytes in ("within", "beyond"):  # a registered tolerance (tolerance.py): where and by how much
        return ("BEYOND" if o.bytes == "beyond" else "within") + " tolerance (" + "; ".join(
            f"{d['dump']}: {d['reason'].removeprefix('within tolerance: ')}" for d in o.bytes_detail
            if not d.get("identical")) + ")"
    return o.bytes


def _speed(o: Outcome, links: Links) -> str:
    return word(o.speed, links)


def byte_line(d: dict[str, Any]) -> str:
    """One dump's difference in base/head terms: how many elements, the first one with its base and
    head values, the max ULP where the signs agree (across a sign change ULPs mean nothing), NMSE."""
    if d.get("identical"):
        return f"`{d['dump']}`: identical"
    if d.get("first_index") is None:  # a size or shape difference: the comparison's own words
        return f"`{d['dump']}`: {d.get('reason', '')}"
    vb, vh = d.get("first_values") or (None, None)
    where = f"index {d['first_index']}"
    if d.get("row_len") and d.get("elements", 0) > d["row_len"]:  # a matrix: its row and column too
        where += f" (row {d['first_position']}, element {d['first_element']})"
    ulp = ""
    flips = d.get("sign_flips", 0)
    if flips < d["differing"]:
        ulp = f"; max ULP {d.get('max_ulp_same_sign', d.get('max_ulp'))} where the signs agree"
    if flips:
        ulp += f"; {flips} element(s) change sign"
    return (f"`{d['dump']}`: {d['differing']} of {d['elements']} elements differ; first at {where}: "
            f"base {vb!r}, head {vh!r}{ulp}; max abs {d.get('max_abs', 0):.3g}; NMSE {d.get('nmse', 0):.3g}")


def what_bad(o: Outcome) -> str | None:
    """bisect's --what for this workload's failure, or None when bisect cannot help."""
    speed_bad = o.speed == "regressed"
    if o.bytes_failed and speed_bad:
        return "any"
    return "bytes" if o.bytes_failed else "speed" if speed_bad else None


def bisect_command(c: Compare, o: Outcome) -> str | None:
    """The command that finds the commit, to run as printed in a clone of the project (a shell)."""
    what = what_bad(o)
    if what is None:
        return None
    if c.head.dirty or not c.bisect_bad:
        return None
    good, bad = shlex.quote(c.bisect_good), shlex.quote(c.bisect_bad)
    cmd = f"python3 -m harness bisect {good} {bad} --workload {shlex.quote(o.id)} --what {what}"
    if Path(o.file).parent.as_posix() != "regressions":  # not among the files bisect reads by default
        cmd += f" --file {shlex.quote(o.file)}"
    git = "git"
    if c.bisect_external:  # the commits are an external source's: its repository, kite's tree as it is
        cmd += f" --external {shlex.quote(c.bisect_external)}"
        git = f"git -C {shlex.quote(c.bisect_external.split('=', 1)[1])}"
    if not c.bisect_linear:  # base is no first-parent ancestor of head: bisect from where they forked
        cmd = cmd.replace(f"bisect {good} ", f'bisect "$({git} merge-base {good} {bad})" ', 1)
    if c.bisect_fetch:
        cmd = f"git fetch origin {good} {bad} && " + cmd
    return cmd


def machine(c: Compare) -> str:
    m = c.machine or {}
    parts = [m.get("cpu") or "?", f"{m.get('cores')} cores" if m.get("cores") else "",
             f"{m.get('ram_gb')} GiB" if m.get("ram_gb") else "", m.get("os") or "",
             f"runner {m['runner']}" if m.get("runner") else ""]
    return ", ".join(p for p in parts if p)


def verdict_rows(c: Compare, links: Links) -> list[list[str]]:
    return [[cell(o.id), _bytes(o, links), _speed(o, links), change(o), _interval_pct(o),
             str(o.pairs) if o.pairs else "—"] for o in c.outcomes]


HEADERS = ["workload", "bytes", "speed", "change (head vs base)", "interval", "pairs"]


def overall(c: Compare, fail_on: str) -> str:
    return "FAIL" if c.failed(fail_on) else "PASS"


def headline(c: Compare, fail_on: str) -> str:
    """The verdict, and why a regression did not fail it (--fail-on bytes)."""
    quiet = fail_on == "bytes" and not c.failed(fail_on) and c.failed("any")
    return overall(c, fail_on) + (" (speed is reported, not failed: --fail-on bytes)" if quiet else "")


def _skips(c: Compare) -> list[str]:
    """Skipped workloads grouped by reason: 'CMP3, CMP4: no GPU (...)'."""
    by: dict[str, list[str]] = {}
    for o in c.outcomes:
        if o.speed == "skipped":
            by.setdefault(o.reason, []).append(o.id)
    return [f"{', '.join(ids)}: {cell(reason)}" for reason, ids in by.items()]


def findings(c: Compare, links: Links) -> list[str]:
    """The lines a reviewer acts on: the revisions, the machine, skips, each change, next steps, links."""
    out = [f"- base `{c.base.commit[:10]}` → head `{c.head.label}`"
           + (" (the same commit: nothing can differ)" if c.same_commit else "")
           + (" (working tree with uncommitted changes)" if c.head.dirty else ""),
           f"- machine: {cell(machine(c))}"]
    skips = _skips(c)
    if skips:
        out.append(f"- {word('skipped', links)} (not run on this machine): " + "; ".join(skips))
    for o in c.outcomes:
        if o.bytes == "changed":
            for d in o.bytes_detail:
                if not d.get("identical"):
                    out.append(f"- **{cell(o.id)}** bytes: {cell(byte_line(d))}")
        if o.speed in ("regressed", "improved"):
            out.append(f"- **{cell(o.id)}** speed: {word(o.speed, links)}, {change(o)}, interval "
                       f"{_interval_pct(o)} after {o.pairs} pairs")
        if o.speed == "error":
            out.append(f"- **{cell(o.id)}** could not run: {cell(o.reason)}")
    cmds = [(o.id, cmd) for o in c.outcomes if (cmd := bisect_command(c, o))]
    if cmds:
        out.append("- next step, find the commit (in a clone of the project):")
        out += [f"\n  ```sh\n  {cmd}\n  ```" for _, cmd in cmds]
    elif c.head.dirty and any(what_bad(o) for o in c.outcomes):
        out.append("- next step: commit the change, then `python3 -m harness bisect BASE COMMIT --workload ID`")
    report = [f"[run]({links.run})" if links.run else "", f"[report artifact]({links.artifact})" if links.artifact
              else ""]
    if any(report):
        out.append("- report: " + " · ".join(r for r in report if r))
    return out


def render_markdown(c: Compare, fail_on: str = "any", links: Links | None = None) -> str:
    links = links or Links()
    out = [f"# compare {c.base.label} → {c.head.label}: {overall(c, fail_on)}", "",
           _table(verdict_rows(c, links), HEADERS), "", *findings(c, links), ""]
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
                                            f"{len(ch)} change(s): " + "; ".join(cell(x) for x in ch[:20])
                                            + (" …" if len(ch) > 20 else "")))
    out += ["", "## Details", ""]
    for o in c.outcomes:
        out.append(f"### {cell(o.id)}: {cell(o.title)}")
        out.append(f"- where: `{o.file}:{o.line}`; margin ±{o.margin * 100:g} %")
        # the reason starts with its verdict ("regressed: ratio ..."); say the verdict once
        said = o.reason.startswith(f"{o.speed}:") if o.reason else False
        out.append(f"- speed: {cell(o.reason)}" if said else f"- speed: {o.speed}" + (f": {cell(o.reason)}" if o.reason else ""))
        if o.pairs:
            out.append(f"- ratio (head/base) {_ratio(o.ratio)}, interval {_interval(o)}; pairs {o.pairs}, "
                       f"{o.seconds:.1f} s; p-value of no change {o.p_value:.3g}; interval half-width "
                       f"{o.half_width * 100:.2f} % (a change that size is found about half the time)")
            out.append(f"- stability: {'stable' if o.stable else cell(o.stability)}")
        if o.noise_floor:
            lo, hi = o.noise_floor["ci"]
            out.append(f"- A/A floor: {o.noise_floor['pairs']} pairs, median {o.noise_floor['median']:.4f}, "
                       f"[{lo:.4f}, {hi:.4f}]")
        for d in o.bytes_detail:
            out.append(f"- bytes {cell(byte_line(d))}")
        out.append("")
    return "\n".join(out) + "\n"


def to_json(c: Compare, fail_on: str = "any") -> dict[str, Any]:
    return {"schema": SCHEMA, "verdict": overall(c, fail_on), "fail_on": fail_on, "method": METHOD,
            "alpha": c.alpha, "tested": c.tested, "seconds": round(c.seconds, 3), "base": c.base.to_json(),
            "head": c.head.to_json(), "same_commit": c.same_commit, "machine": c.machine, "builds": c.builds,
            "workloads": [o.to_json() for o in c.outcomes]}


def failure_lines(c: Compare, o: Outcome) -> list[str]:
    """A failed workload's account, one labelled line each (JUnit's body, the annotation)."""
    lines = []
    if o.bytes_failed:
        lines += [f"bytes changed (must stay the same): {byte_line(d)}" for d in o.bytes_detail
                  if not d.get("identical")]
    if o.speed in ("regressed", "error"):
        lines.append(f"speed: regressed, {change(o)}, interval {_interval_pct(o)} after {o.pairs} pairs"
                     if o.speed == "regressed" else f"could not run: {o.reason}")
    lines.append(f"where: {o.file}:{o.line}")
    cmd = bisect_command(c, o)
    if cmd:
        lines.append(f"next step: {cmd}")
    return lines


def render_junit(c: Compare, fail_on: str = "any") -> str:
    cases = []
    for o in c.outcomes:
        failed = o.failed()
        lines = failure_lines(c, o) if failed else []
        cases.append(junit.Case("compare", o.id, o.seconds, failure=junit.clip(lines[0], junit.MESSAGE) if failed
                                else None, failure_type="bytes" if o.bytes_failed else o.speed,
                                body="\n".join(lines), skipped=o.reason if o.speed == "skipped" else None,
                                out=o.reason))
    return junit.render(f"compare {c.base.label} {c.head.label}", cases)


def render_comment(c: Compare, fail_on: str = "any", links: Links | None = None) -> str:
    """A pull request comment: the verdict, the table, what changed and what to do next, a footnote."""
    links = links or Links()
    margins = sorted({o.margin for o in c.outcomes if o.pairs})
    margin = " / ".join(f"{m * 100:g} %" for m in margins) or "the margin"
    note = FOOTNOTE.format(conf=f"{(1 - c.alpha) * 100:g}", margin=margin)
    return (f"**kite compare** `{c.base.label}` → `{c.head.label}`: **{headline(c, fail_on)}**\n\n"
            + _table(verdict_rows(c, links), HEADERS) + "\n\n" + "\n".join(findings(c, links))
            + f"\n\n<sub>{note}</sub>\n")


def write(c: Compare, out: Path, fail_on: str = "any", links: Links | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "report.md", render_markdown(c, fail_on, links))
    atomic_write(out / "report.json", json.dumps(to_json(c, fail_on), indent=1) + "\n")
    atomic_write(out / "junit.xml", render_junit(c, fail_on))
    atomic_write(out / "comment.md", render_comment(c, fail_on, links))


def annotations(c: Compare) -> list[str]:
    return [github.annotation(o.file, o.line, f"compare {o.id}", "\n".join(failure_lines(c, o)))
            for o in c.outcomes if o.failed()]


def publish(c: Compare, out: Path, fail_on: str = "any", env: Mapping[str, str] | None = None,
            stream: TextIO | None = None, links: Links | None = None) -> None:
    """Under GitHub Actions: report.md appended to the step summary, an annotation per failure."""
    env = os.environ if env is None else env
    github.append_summary(env, render_markdown(c, fail_on, links) + f"\n(report folder: `{out}`)\n\n")
    github.emit(env, annotations(c), stream)
