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

from harness.compare import report, revisions, search, sequential, tolerance
from harness.compare.session import Compare, Options, run_compare
from harness.errors import HarnessError
from harness.report.document import _table
from harness.contract.config import Config
from harness.contract.looks import RESAMPLE

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
    verdict: str = ""  # good, bad, skip (search.py)
    why: str = ""  # a skip's first error, or what stayed undecided


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
    skipped: list[dict[str, str]] = field(default_factory=list)  # {commit, why}: never called good or bad
    range: list[str] = field(default_factory=list)  # when skips hide the culprit: the commits that hold it
    resample: int = 0  # an undecided speed step is sampled again up to this many times
    external: dict[str, str] | None = None  # --external: the revisions are commits of this source

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in dataclasses.asdict(self).items() if k != "steps"},
                "steps": [dataclasses.asdict(s) for s in self.steps]}


def is_bad(o: Any, what: str) -> bool:
    """Changed bytes (beyond a registered tolerance), or a speed verdict that fails compare
    (sequential.regressed: one rule, whose margin makes a change shown smaller than it equivalent,
    not bad)."""
    bytes_bad = o.bytes in tolerance.BAD
    speed_bad = sequential.regressed(o.speed)
    return {"any": bytes_bad or speed_bad, "bytes": bytes_bad, "speed": speed_bad}[what]


def run_bisect(cfg: Config, good: str, bad: str, workload: str, what: str, opts: Options, out: Path,
               say: Callable[[str], None], resample: int = RESAMPLE) -> Bisect:
    """resample: an undecided step is timed again up to this many times, each with twice the budget
    before; every attempt of a step is judged at alpha / (resample + 1), so a step's error stays
    within alpha. A step still undecided is skipped: no step is guessed."""
    ext = opts.external
    repo = ext.repo if ext is not None else revisions.repo_root(cfg.root)
    g, b = revisions.resolve(repo, good), revisions.resolve(repo, bad)
    commits = revisions.first_parent_path(repo, g.commit, b.commit)
    if not commits:
        raise HarnessError(f"{bad} is not a descendant of {good} along first parents: nothing to bisect")
    res = Bisect(g.commit, b.commit, workload, what, commits, resample=resample,
                 external=ext.to_json() if ext is not None else None)
    attempts = resample + 1

    def judge(role: str, base: str, head: str) -> str:
        for k in range(attempts):
            n = len(res.steps) + 1
            folder = out / "steps" / f"{n:02d}-{role}-{head[:10]}"
            say(f"bisect: step {n} ({role}{f', sampled again ({k + 1} of {resample})' if k else ''}): "
                f"{base[:10]} against {head[:10]}")
            step_opts = dataclasses.replace(opts, base=base, head=head, only=[workload], time=what != "bytes",
                                            alpha=opts.alpha / attempts,
                                            budget_scale=opts.budget_scale * 2 ** k)
            c: Compare = run_compare(cfg, step_opts, folder, say)
            report.write(c, folder)
            o = c.outcomes[0]
            v = search.verdict(o, is_bad(o, what), what)
            why = o.reason if v in (search.SKIP, search.UNDECIDED) else ""
            res.steps.append(Step(role, base, head, o.bytes, o.speed, o.to_json()["ratio"], o.to_json()["interval"],
                                  o.pairs, v == search.BAD, folder.relative_to(out).as_posix(), v, why))
            say(f"bisect: step {n}: bytes {o.bytes}, speed {o.speed} -> {v}" + (f" ({why})" if why else ""))
            if v != search.UNDECIDED:
                return v
        res.steps[-1].verdict = search.SKIP
        res.steps[-1].why = f"undecided after {attempts} samplings: {res.steps[-1].why}"
        return search.SKIP

    checked = judge("check", g.commit, b.commit)
    if checked != search.BAD:  # a check that cannot be judged is reported, not raised (nothing else to write)
        res.note = (f"{bad} cannot be judged against {good}: {res.steps[-1].why}" if checked == search.SKIP
                    else f"{bad} is not shown bad against {good} ({what}): nothing to find")
        return res

    def midpoint(i: int) -> str:
        v = judge("midpoint", g.commit, commits[i])
        if v == search.SKIP:
            res.skipped.append({"commit": commits[i], "why": res.steps[-1].why})
        return v

    found = search.search(len(commits), midpoint)
    if found.culprit is None:
        assert found.first is not None and found.last is not None
        res.range = commits[found.first:found.last + 1]
        res.note = (f"the first bad commit is one of the {len(res.range)} commits {res.range[0][:10]}..{res.range[-1][:10]}"
                    f": every one before {res.range[-1][:10]} was skipped")
        return res
    res.culprit = commits[found.culprit]
    res.confirmed = judge("confirm", revisions.parent(repo, res.culprit), res.culprit) == search.BAD
    res.note = ("first bad commit " + res.culprit[:10] + (", confirmed against its parent" if res.confirmed else
                ", NOT confirmed against its parent (the change may build up over several commits)"))
    if res.skipped:
        res.note += (f"; {len(res.skipped)} revision(s) skipped, not judged: "
                     + "; ".join(f"{x['commit'][:10]} ({x['why']})" for x in res.skipped))
    return res


def render_markdown(b: Bisect) -> str:
    rows = [[str(i + 1), s.role, s.base[:10], s.head[:10], s.bytes, s.speed,
             f"{s.ratio:.4f}" if s.ratio is not None else "—", str(s.pairs or "—"), "bad" if s.bad else (s.verdict or "good"),
             s.folder] for i, s in enumerate(b.steps)]
    head = f"# bisect {b.good[:10]}..{b.bad[:10]}, workload {b.workload} ({b.what})"
    found = f"**{b.culprit}**" if b.culprit else "none"
    return (f"{head}\n\nfirst bad commit: {found}{' (confirmed)' if b.confirmed else ''}. {b.note}\n\n"
            + _table(rows, ["step", "role", "base", "head", "bytes", "speed", "ratio", "pairs", "judged",
                                   "report"])
            + f"\n\n{len(b.commits)} commits after GOOD; each step is a full compare (its folder).\n"
            + search_notes(b))


def search_notes(b: Bisect) -> str:
    """The revisions of an external source, the skipped revisions with their first error, the range
    that holds the culprit when skips hide it, and the re-sampling budget."""
    out = []
    if b.external:
        out.append(f"Revisions of {b.external['name']} ({b.external['repo']}); kite's tree: the working tree.")
    out.append(f"An undecided speed step is sampled again up to {b.resample} time(s), each with twice the budget "
               f"before, every attempt at alpha / {b.resample + 1}; one still undecided is skipped.")
    for x in b.skipped:
        out.append(f"- skipped {x['commit'][:10]}: {x['why']}")
    if b.range:
        out.append(f"The first bad commit is one of: {', '.join(c[:10] for c in b.range)}.")
    return "\n" + "\n".join(out) + "\n"
