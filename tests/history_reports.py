"""Compare reports for the history's tests, written by compare's own writer
(`harness.compare.report.to_json`) from real outcomes and sequential timing state, so that the tests
follow the writer wherever it goes: a timed workload, an identical build, a skip, a byte change."""

from __future__ import annotations

from typing import Any

from harness.compare import report, sequential
from harness.compare.revisions import Revision
from harness.compare.session import Compare
from harness.compare.workload import Outcome, finish_speed


def timed(wid: str, ratios: list[float], margin: float = 0.02, alpha: float = 0.05) -> Outcome:
    """A workload timed over these pair ratios (head/base), its verdict as compare gives it."""
    o = Outcome(wid, f"{wid}: decode of 64 steps", "regressions/compare.yaml", 9, "same", bytes="same", margin=margin)
    seq = sequential.Sequence(margin, alpha)
    for i in range(0, len(ratios), 4):  # ABBA blocks of 4, one look each, as compare times them
        seq.add(ratios[i:i + 4])
    o.pair_log = [{"pair": i + 1, "order": "AB", "base": 10.0, "head": 10.0 * r, "ratio": r}
                  for i, r in enumerate(ratios)]
    finish_speed(o, seq)
    o.speed = sequential.judge([seq], alpha)[0][0]
    o.reason = f"{o.speed}: ratio {o.ratio:.4f}"
    return o


def skipped(wid: str) -> Outcome:
    return Outcome(wid, f"{wid}: a GPU workload", "regressions/compare.yaml", 30, "same", speed="skipped",
                   reason="no GPU: no driver", seconds=1.5)


def identical(wid: str) -> Outcome:
    return Outcome(wid, f"{wid}: prefill", "regressions/compare.yaml", 20, "same", bytes="same",
                   speed="identical build", reason="identical build: no change")


def bytes_changed(wid: str) -> Outcome:
    o = Outcome(wid, f"{wid}: decode bytes", "regressions/compare.yaml", 40, "same", bytes="changed",
                speed="identical build")
    o.bytes_detail = [{"dump": "logits", "identical": False, "reason": "first difference at element 3"}]
    return o


def compare_doc(head: str, outcomes: list[Outcome], base: str = "0123456789", dirty: bool = False) -> dict[str, Any]:
    """The report.json compare writes for head against base (head a commit hash)."""
    h = Revision(head, head if not dirty else "f" * 40, "t" * 40, head[:10] + ("+dirty" if dirty else ""), dirty)
    c = Compare(Revision(base, base, "b" * 40, base[:10]), h, outcomes, {}, 0.05,
                sum(o.seq is not None for o in outcomes), 12.5)
    return report.to_json(c)
