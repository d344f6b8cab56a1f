"""`harness bisect GOOD BAD --workload ID`: the first commit (along first parents) whose workload
bytes changed, or whose speed regressed beyond the margin, against GOOD. Each midpoint is judged by
the sequential compare (its build cached, so built once); the culprit is then confirmed against
its own parent. Every step is kept, with its own compare report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare import report, revisions, sequential
from harness.compare.session import Compare, Options, run_compare
from harness.errors import HarnessError
from harness.report.document import _table
from harness.spec.config import Config

WHAT = ("any", "bytes", "speed")


@dataclass
class Step:
    role: str  # check (BAD against GOOD), midpoint, confirm (culprit against its parent)
    base: str
    head: str
    bytes: str
    speed: str
    ratio: float | None
    interval: list[float | None]
    pairs: int
    bad: bool
    folder: str


@dataclass
class Bisect:
    good: str
    bad: str
    workload: str
    what: str
    commits: list[str]
    steps: list[Step] = field(default_factory=list)
    culprit: str | None = None
    confirmed: bool = False
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in dataclasses.asdict(self).items() if k != "steps"},
                "steps": [dataclasses.asdict(s) for s in self.steps]}


def is_bad(o: Any, what: str) -> bool:
    """Changed bytes, or a speed verdict that fails compare (sequential.regressed: one rule, whose
    margin makes a change shown smaller than it equivalent, not bad)."""
    bytes_bad = o.bytes == "changed"
    speed_bad = sequential.regressed(o.speed)
    return {"any": bytes_bad or speed_bad, "bytes": bytes_bad, "speed": speed_bad}[what]


def run_bisect(cfg: Config, good: str, bad: str, workload: str, what: str, opts: Options, out: Path,
               say: Callable[[str], None]) -> Bisect:
    repo = revisions.repo_root(cfg.root)
    g, b = revisions.resolve(repo, good), revisions.resolve(repo, bad)
    commits = revisions.first_parent_path(repo, g.commit, b.commit)
    if not commits:
        raise HarnessError(f"{bad} is not a descendant of {good} along first parents: nothing to bisect")
    res = Bisect(g.commit, b.commit, workload, what, commits)

    untested: dict[str, str] = {}  # commit -> why it could not be judged (its engine crashed, ...)

    def judge(role: str, base: str, head: str) -> bool | None:
        """Bad, good, or None: the compare could not judge it (kept as a step, its reason noted)."""
        n = len(res.steps) + 1
        folder = out / "steps" / f"{n:02d}-{role}-{head[:10]}"
        say(f"bisect: step {n} ({role}): {base[:10]} against {head[:10]}")
        step = dataclasses.replace(opts, base=base, head=head, only=[workload], time=what != "bytes")
        c: Compare = run_compare(cfg, step, folder, say)
        report.write(c, folder)
        o = c.outcomes[0]
        verdict = None if o.speed == "error" else is_bad(o, what)
        res.steps.append(Step(role, base, head, o.bytes, o.speed, o.to_json()["ratio"],
                              o.to_json()["interval"], o.pairs, bool(verdict), folder.relative_to(out).as_posix()))
        if verdict is None:
            untested[head] = o.reason
            say(f"bisect: step {n}: {head[:10]} cannot be judged: {o.reason}")
        else:
            say(f"bisect: step {n}: bytes {o.bytes}, speed {o.speed} -> {'bad' if verdict else 'good'}")
        return verdict

    checked = judge("check", g.commit, b.commit)
    if not checked:
        res.note = (f"{bad} cannot be judged against {good}: {untested[b.commit]}" if checked is None
                    else f"{bad} is not bad against {good} ({what}): nothing to find")
        return res
    lo, hi = -1, len(commits) - 1  # commits[lo] good (or GOOD itself), commits[hi] bad
    skipped: set[int] = set()  # midpoints that could not be judged: as `git bisect skip`, try a neighbour
    while hi - lo > 1:
        left = [i for i in range(lo + 1, hi) if i not in skipped]
        if not left:
            between = commits[lo + 1:hi + 1]
            res.note = (f"the first bad commit is one of {', '.join(x[:10] for x in between)}: "
                        + "; ".join(f"{x[:10]} cannot be judged ({untested[x]})" for x in between if x in untested))
            return res
        mid = min(left, key=lambda i: abs(i - (lo + hi) // 2))
        verdict = judge("midpoint", g.commit, commits[mid])
        if verdict is None:
            skipped.add(mid)
        elif verdict:
            hi = mid
        else:
            lo = mid
    res.culprit = commits[hi]
    res.confirmed = bool(judge("confirm", revisions.parent(repo, res.culprit), res.culprit))
    res.note = ("first bad commit " + res.culprit[:10] + (", confirmed against its parent" if res.confirmed else
                ", NOT confirmed against its parent (the change may build up over several commits)"))
    if untested:
        res.note += "; not judged: " + "; ".join(f"{x[:10]} ({why})" for x, why in untested.items())
    return res


def render_markdown(b: Bisect) -> str:
    rows = [[str(i + 1), s.role, s.base[:10], s.head[:10], s.bytes, s.speed,
             f"{s.ratio:.4f}" if s.ratio is not None else "—", str(s.pairs or "—"), "bad" if s.bad else "good",
             s.folder] for i, s in enumerate(b.steps)]
    head = f"# bisect {b.good[:10]}..{b.bad[:10]}, workload {b.workload} ({b.what})"
    found = f"**{b.culprit}**" if b.culprit else "none"
    return (f"{head}\n\nfirst bad commit: {found}{' (confirmed)' if b.confirmed else ''}. {b.note}\n\n"
            + _table(rows, ["step", "role", "base", "head", "bytes", "speed", "ratio", "pairs", "judged",
                                   "report"])
            + f"\n\n{len(b.commits)} commits after GOOD; each step is a full compare (its folder).\n")
