"""The one rule of whether a compare workload's budget can give a speed verdict at all: the looks
its budget allows (`budget: {pairs}` / `block`) against the looks the sign-based confidence
sequence needs before its interval can exclude 1 (docs/COMPARE.md). A budget of fewer looks can
only end equivalent or inconclusive, whatever the change: its speed claim could never fail.

compare warns with it before timing, `register` refuses a workload that fails it at a bisect
step's level, and the tests check every registered workload with it. The mixture boundary it is
read from lives here, below both: compare's sequence (harness/compare/sequential.py) draws its
interval from the same `bounds`, so the rule and the verdict cannot disagree. scipy gives log B.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betaln

from harness.contract.criteria import CompareSpec

# Beta(a, a) mixing prior over the blocks' sign probability: 10 keeps AR(1) rho 0.5 under alpha for a
# family of four at the power of 5 (python -m harness.compare.calibrate --tables design; docs/COMPARE.md)
PRIOR = 10.0
ALPHA = 0.05  # family-wise error of compare's regressed/improved verdicts (compare --alpha, its default)
RESAMPLE = 2  # bisect samples an undecided step again up to this many times (bisect --resample, its default)
BISECT_ALPHA = ALPHA / (RESAMPLE + 1)  # the level of each attempt of a bisect step: what `register` asks for
CANNOT = "regressed or improved cannot be shown"


def log_mixture(successes, t: int, prior: float = PRIOR):
    """log M_t of the beta-binomial mixture against p = 1/2 (a count may be fractional: a tie counts
    half, a factor 2 sqrt(theta (1 - theta)) <= 1, so M stays a supermartingale); an array of counts
    gives an array."""
    return t * math.log(2.0) + betaln(prior + successes, prior + t - successes) - betaln(prior, prior)


@functools.lru_cache(maxsize=4096)
def bounds(t: int, alpha: float, prior: float = PRIOR) -> tuple[int, int]:
    """The smallest and largest count S(m) of t block summaries below a median m that the
    beta-binomial mixture does not reject at alpha (sequential.py's interval reads its order
    statistics at these counts)."""
    log_m = log_mixture(np.arange(t + 1, dtype=np.float64), t, prior)
    ok = np.flatnonzero(log_m < math.log(1.0 / alpha))
    return int(ok[0]), int(ok[-1])  # never empty: S = t/2 has M <= 1


def looks_needed(alpha: float, prior: float = PRIOR, most: int = 10_000) -> int:
    """The fewest looks (blocks) at which an interval at alpha can exclude 1 at all: every block on
    one side. A budget of fewer looks can only end inconclusive or equivalent, whatever the change."""
    return next(t for t in range(1, most + 1) if bounds(t, alpha, prior)[0] > 0)


@dataclass(frozen=True)
class Looks:
    """A budget's looks against those a change needs at one level."""
    pairs: int
    block: int
    alpha: float
    allowed: int
    needed: int

    @property
    def enough(self) -> bool:
        return self.allowed >= self.needed

    def shortfall(self) -> str:
        return (f"its budget ({self.pairs} pairs, a look every {self.block}) allows {self.allowed} looks; "
                f"a change needs {self.needed} at alpha {self.alpha:.3g}")

    def problem(self) -> str:
        """What a budget short of looks means, in the words compare says it before timing."""
        return f"{self.shortfall()}: {CANNOT}"


def budget_looks(pairs: int, block: int, alpha: float) -> Looks:
    """THE rule: the looks a budget of `pairs`, a look every `block` pairs, allows, and those a
    change needs at alpha; `.enough` says whether it can give a speed verdict."""
    return Looks(pairs, block, alpha, pairs // block, looks_needed(alpha))


def unfit(crit: object, alpha: float = BISECT_ALPHA) -> str | None:
    """Why `register` refuses this criterion: a compare workload whose budget cannot reach the
    looks a change needs at alpha (by default a bisect step's). None for any other criterion, and
    for a budget that can. Every compare workload is timed (its `margin` and `budget` are
    required), so there is no bytes-only workload to let through."""
    spec = getattr(crit, "spec", None)
    if not isinstance(spec, CompareSpec):
        return None
    lk = budget_looks(spec.budget_pairs, spec.block, alpha)  # the pairs as written, before any cap
    if lk.enough:
        return None
    level = f" (a bisect step's: {ALPHA:g} / {RESAMPLE + 1})" if alpha == BISECT_ALPHA else ""
    return (f"{lk.shortfall()}{level}: {CANNOT}; register it with budget pairs of at least "
            f"{lk.needed * lk.block} at block {lk.block}, or a smaller block")
