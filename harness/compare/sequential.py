"""The speed verdict of a compare: a confidence sequence for the median per-pair log ratio, valid
under repeated looks, and the four verdicts it gives.

Method (docs/COMPARE.md): the sign-based confidence sequence for a quantile (Howard & Ramdas 2022,
"Sequential estimation of quantiles with applications to A/B-testing and best-arm identification",
Bernoulli 28(3)) with a beta-binomial mixture boundary (Howard, Ramdas, McAuliffe & Sekhon 2021,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2)). For a
candidate median m the count S(m) of pairs whose log ratio lies below m is Binomial(t, 1/2) when m
is the true median; the mixture martingale M_t = 2^t B(a + S, a + t - S) / B(a, a) is then >= 1/alpha
at any time with probability at most alpha (Ville's inequality). The sequence is every m not so
rejected: an interval between two order statistics, exact for any continuous noise, no variance
estimate, robust to the heavy-tailed pair ratios of a shared machine. scipy gives log B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betaln

PRIOR = 10.0  # Beta(a, a) mixing prior: tightest near the pair counts a 2 % change needs at 5-10 % noise
VERDICTS = ("regressed", "improved", "equivalent", "inconclusive")


def log_mixture(successes: float, t: int, prior: float = PRIOR) -> float:
    """log M_t of the beta-binomial mixture against p = 1/2 (a count may be fractional: ties count half)."""
    return t * math.log(2.0) + float(betaln(prior + successes, prior + t - successes) - betaln(prior, prior))


def interval(log_ratios: np.ndarray, alpha: float, prior: float = PRIOR) -> tuple[float, float]:
    """The (1 - alpha) confidence-sequence interval for the median log ratio after these pairs:
    [x(lo), x(hi)] over the order statistics; +-inf while too few pairs to bound a side."""
    x = np.sort(np.asarray(log_ratios, dtype=np.float64))
    t = int(x.size)
    counts = np.arange(t + 1, dtype=np.float64)
    log_m = t * math.log(2.0) + betaln(prior + counts, prior + t - counts) - betaln(prior, prior)
    ok = np.flatnonzero(log_m < math.log(1.0 / alpha))  # counts S(m) a median m may have
    lo_k, hi_k = int(ok[0]), int(ok[-1])  # never empty: S = t/2 has M <= 1
    lo = float(x[lo_k - 1]) if lo_k > 0 else -math.inf
    hi = float(x[hi_k]) if hi_k < t else math.inf
    return lo, hi


def log_evidence_no_change(log_ratios: np.ndarray, prior: float = PRIOR) -> float:
    """log M_t for the hypothesis "median ratio 1": pairs below 0 count 1, ties at 0 count half."""
    x = np.asarray(log_ratios, dtype=np.float64)
    below = float(np.count_nonzero(x < 0)) + 0.5 * float(np.count_nonzero(x == 0))
    return log_mixture(below, int(x.size), prior)


@dataclass
class Sequence:
    """The running state of one workload's sequential comparison. Ratios are head/base: above 1
    means the head is slower."""
    margin: float
    alpha: float  # the level of this workload's interval (the compare's alpha over its workloads)
    log_ratios: list[float] = field(default_factory=list)
    lo: float = -math.inf  # running intersection of the intervals, in log ratio
    hi: float = math.inf
    max_log_evidence: float = 0.0  # the largest log M_t against "no change" seen so far
    looks: int = 0

    def add(self, ratios: list[float]) -> None:
        """A block of pairs, then a look: the interval is intersected with every earlier one."""
        self.log_ratios += [math.log(r) for r in ratios]
        x = np.asarray(self.log_ratios)
        lo, hi = interval(x, self.alpha)
        self.lo, self.hi = max(self.lo, lo), min(self.hi, hi)
        if self.lo > self.hi:  # only by chance (a probability <= alpha event): keep the latest
            self.lo, self.hi = lo, hi
        self.max_log_evidence = max(self.max_log_evidence, log_evidence_no_change(x))
        self.looks += 1

    @property
    def pairs(self) -> int:
        return len(self.log_ratios)

    @property
    def p_value(self) -> float:
        """Anytime-valid p-value of "no change": 1 / the largest mixture martingale so far."""
        return min(1.0, math.exp(-self.max_log_evidence))

    def band(self) -> tuple[float, float]:
        """The equivalence band, in log ratio: [-log(1+margin), log(1+margin)]."""
        w = math.log1p(self.margin)
        return -w, w

    def decided(self) -> str | None:
        """The verdict the interval gives now, or None to go on sampling."""
        lo, hi = self.band()
        if lo < self.lo and self.hi < hi:
            return "equivalent"
        if self.lo > 0:
            return "regressed"
        if self.hi < 0:
            return "improved"
        return None

    def ratio(self) -> float:
        return math.exp(float(np.median(self.log_ratios))) if self.log_ratios else math.nan

    def ratio_interval(self) -> tuple[float, float]:
        return math.exp(self.lo), math.exp(self.hi)

    def detectable(self) -> float:
        """The smallest relative change this run could have told from none: the interval's half-width."""
        if not math.isfinite(self.lo) or not math.isfinite(self.hi):
            return math.inf
        return math.expm1((self.hi - self.lo) / 2.0)


def holm(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with the family-wise error at most alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out = [False] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        out[i] = True
    return out


def final_verdict(seq: Sequence, rejected: bool) -> str:
    """The workload's verdict once sampling ended: Holm's rejection of "no change" makes it
    regressed or improved (by the side of its median), unless the interval already lies within
    the margin (a change smaller than the margin is not one)."""
    now = seq.decided()
    if now == "equivalent":
        return now
    if rejected:
        return "regressed" if seq.ratio() > 1.0 else "improved"
    return "inconclusive"
