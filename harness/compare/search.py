"""The search of a bisect over real history: each step's verdict is good, bad, or skip (the revision
did not build, did not load the model, crashed, or its speed stayed undecided after its
re-samples); a skipped revision is never called good or bad, and the search goes on around it, as
`git bisect skip` does. It ends with the first bad commit, or, when skipped revisions hide it, the
smallest range of commits that holds it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GOOD, BAD, SKIP, UNDECIDED = "good", "bad", "skip", "undecided"


def verdict(o: Any, bad: bool, what: str) -> str:
    """One step's verdict from its workload outcome `o` and the bisect's badness rule (`bad`):
    an error is a skip; bad is bad; changed bytes decide at once; a speed verdict that is neither
    bad nor decided (inconclusive) is undecided, never good."""
    if o.speed == "error":
        return SKIP
    if bad:
        return BAD
    if what == "bytes" or o.speed in ("equivalent", "improved", "regressed", "identical build"):
        return GOOD
    return UNDECIDED


@dataclass
class Found:
    culprit: int | None  # index of the first bad commit, when it is known
    first: int | None = None  # otherwise the commits first..last hold it (every one before last skipped)
    last: int | None = None
    skipped: list[int] = field(default_factory=list)


def search(n: int, judge: Callable[[int], str]) -> Found:
    """commits 0..n-1 after GOOD, the last one bad; judge(i) -> GOOD, BAD or SKIP. Each step takes the
    untried commit nearest the middle of the range still open."""
    lo, hi = -1, n - 1  # lo good (or GOOD itself), hi bad
    skipped: set[int] = set()
    while True:
        open_ = [i for i in range(lo + 1, hi) if i not in skipped]
        if not open_:
            break
        middle = (lo + hi) / 2
        mid = min(open_, key=lambda i: (abs(i - middle), i))
        v = judge(mid)
        if v == BAD:
            hi = mid
        elif v == GOOD:
            lo = mid
        elif v == SKIP:
            skipped.add(mid)
        else:
            raise ValueError(f"a step's verdict is good, bad or skip, not {v!r}")
    hidden = [i for i in range(lo + 1, hi) if i in skipped]
    if not hidden:
        return Found(hi, skipped=sorted(skipped))
    return Found(None, lo + 1, hi, sorted(skipped))
