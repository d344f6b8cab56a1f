"""Change points of a series: E-divisive means (Matteson and James 2014), as MongoDB's
`signal-processing-algorithms` implements it (the method behind Apache Otava, formerly Hunter).
Optional dependency: `pip install -e '.[plots]'`. Its permutation test draws from numpy's global
generator, so each call seeds it (and puts the caller's state back): the same series, the same
answer."""

from __future__ import annotations

import re
import shlex
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError

PVALUE = 0.01  # a change is kept when its permutation test gives p <= this
PERMUTATIONS = 199  # permutations per test: p can reach 1/200 = 0.005
SEED = 1
MIN_POINTS = 6  # fewer values than this: no test is worth running
NEEDS = "change points need signal-processing-algorithms: pip install -e '.[plots]'"
WORKLOAD = "compare."  # the metrics of a compare workload: `bisect --workload` judges by the same workload
_HASH = re.compile(r"[0-9a-fA-F]{4,64}")


@dataclass(frozen=True)
class Change:
    index: int  # the first value after the change
    before: str  # the commit of the last value before it
    after: str  # the commit of the first value after it
    median_before: float
    median_after: float
    pvalue: float  # permutation test of the two segments on either side

    @property
    def size(self) -> float:
        """Relative change of the median, after against before (0.05: 5 % up)."""
        return self.median_after / self.median_before - 1 if self.median_before else float("inf")

    def hint(self, series: str, metric: str) -> tuple[str, list[str]] | None:
        """What to run next, as (what it does, argv): for a compare workload's values, `bisect` by
        that workload pins the commit; a verify criterion is no workload bisect can take, so the
        commits between the two values are listed. None where a commit is no hash (a store kept
        before commits were checked): nothing from a report goes into a command unchecked."""
        if not (_HASH.fullmatch(self.before) and _HASH.fullmatch(self.after)):
            return None
        good, bad = self.before[:10], self.after[:10]
        if metric.startswith(WORKLOAD):
            workload = [f"--workload={series}"] if series.startswith("-") else ["--workload", series]
            return "pin it", ["kite-harness", "bisect", good, bad, *workload]
        return "the commits to check", ["git", "log", "--oneline", "--end-of-options", f"{good}..{bad}", "--"]

    def hint_text(self, series: str, metric: str) -> str:
        """The hint as one line a shell runs as printed (every word quoted where it must be)."""
        h = self.hint(series, metric)
        return f"{h[0]}: {shlex.join(h[1])}" if h else "no command (a commit is not a hash)"

    def commit_range(self) -> str:
        return f"{self.before[:10]}..{self.after[:10]}"


def _library():  # noqa: ANN202 - the module, imported only where change points are asked for
    try:
        from signal_processing_algorithms.energy_statistics import energy_statistics
    except ImportError:
        raise HarnessError(NEEDS) from None
    return energy_statistics


def available() -> bool:
    try:
        _library()
    except HarnessError:
        return False
    return True


def find(values: Sequence[float], commits: Sequence[str], pvalue: float = PVALUE,
         permutations: int = PERMUTATIONS, seed: int = SEED) -> list[Change]:
    """The significant changes of one series (one machine's values, in commit order)."""
    if len(values) != len(commits):
        raise ValueError("one commit per value")
    if len(values) < MIN_POINTS:
        return []
    es = _library()
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        cuts = sorted(es.e_divisive(list(values), pvalue=pvalue, permutations=permutations))
        bounds = [0, *cuts, len(values)]
        out = []
        for i, cut in enumerate(cuts):
            left, right = list(values[bounds[i]:cut]), list(values[cut:bounds[i + 2]])
            test = es.get_energy_statistics_and_probabilities(left, right, permutations=permutations)
            out.append(Change(cut, commits[cut - 1], commits[cut], statistics.median(left),
                              statistics.median(right), float(test.e_pvalue)))
    finally:
        np.random.set_state(state)
    return out


def pvalue_text(c: Change, permutations: int = PERMUTATIONS) -> str:
    """The test's p, or its floor when no permutation came as far (p cannot be 0)."""
    floor = 1 / (permutations + 1)
    return f"p < {floor:.3f}" if c.pvalue < floor else f"p = {c.pvalue:.3f}"


def describe(c: Change, series: str, metric: str) -> str:
    return (f"change at {c.after[:10]} (after {c.before[:10]}): median {c.median_before:.4g} -> "
            f"{c.median_after:.4g} ({c.size * 100:+.1f} %), {pvalue_text(c)}; commits {c.commit_range()}; "
            f"{c.hint_text(series, metric)}")
