"""The speed verdict of a compare: a confidence sequence for the median log ratio of ABBA blocks,
valid under repeated looks, and the one rule that turns an interval into a verdict.

Method (docs/COMPARE.md): the sign-based confidence sequence for a quantile (Howard & Ramdas 2022,
"Sequential estimation of quantiles with applications to A/B-testing and best-arm identification",
Bernoulli 28(3)) with a beta-binomial mixture boundary (Howard, Ramdas, McAuliffe & Sekhon 2021,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2)). It runs on
one summary per block of pairs (the median log ratio of an ABBA block), not on single pairs: pair
ratios on a shared machine are serially dependent (load comes and goes), and a sign sequence over
dependent pairs breaks Ville's bound (AR(1) rho 0.5: 23 % false alarms per pair, under 5 % per block;
`python -m harness.compare.calibrate`). For a candidate median m the count S(m) of block summaries
below m is Binomial(t, 1/2) when m is their true median and the blocks are independent; the mixture
martingale M_t = 2^t B(a + S, a + t - S) / B(a, a) then reaches 1/alpha with probability at most
alpha at any time (Ville's inequality). The sequence is every m not so rejected: an interval
between two order statistics, with no variance estimate. The mixture (scipy gives log B), its boundary
and the looks a change needs before it can exclude 1, are harness/contract/looks.py's: the rule
of whether a workload's budget can give a verdict at all is read from the same numbers.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from harness.contract.looks import PRIOR, bounds, log_mixture

VERDICTS = ("regressed", "improved", "equivalent", "inconclusive")


def interval(summaries: np.ndarray, alpha: float, prior: float = PRIOR) -> tuple[float, float]:
    """The (1 - alpha) confidence-sequence interval for the median of these summaries:
    [x(lo), x(hi)] over the order statistics; +-inf while too few to bound a side."""
    x = np.sort(np.asarray(summaries, dtype=np.float64))
    t = int(x.size)
    lo_k, hi_k = bounds(t, alpha, prior)
    lo = float(x[lo_k - 1]) if lo_k > 0 else -math.inf
    hi = float(x[hi_k]) if hi_k < t else math.inf
    return lo, hi


def log_evidence_no_change(summaries: list[float] | np.ndarray, prior: float = PRIOR) -> float:
    """log M_t for the hypothesis "median 0": summaries below 0 count 1, ties at 0 count half."""
    below = sum(1.0 if x < 0 else 0.5 if x == 0 else 0.0 for x in summaries)
    return float(log_mixture(below, len(summaries), prior))


def verdict(lo: float, hi: float, margin: float) -> str | None:
    """THE rule from an interval (log ratio, head/base) to a verdict, for compare and bisect alike.
    equivalent: the interval lies within +-margin (a change, if any, smaller than the margin is no
    regression, even where the interval excludes 1); regressed: it lies above 0 and not within the
    margin; improved: below 0, likewise; None: not yet clear. Only the interval's side gives the
    direction, so tied pairs (a median exactly 1) can never flip it."""
    w = math.log1p(margin)
    if -w < lo and hi < w:
        return "equivalent"
    if lo > 0:
        return "regressed"
    if hi < 0:
        return "improved"
    return None


def regressed(speed: str) -> bool:
    """A speed verdict that makes a compare fail and a bisect step bad."""
    return speed == "regressed"


@dataclass
class Sequence:
    """The running state of one workload's sequential comparison. Ratios are head/base: above 1
    means the head is slower. Each add() is one block and one look."""
    margin: float
    alpha: float  # the level of this workload's interval while sampling (alpha over the workloads)
    prior: float = PRIOR
    log_ratios: list[float] = field(default_factory=list)  # every pair
    summaries: list[float] = field(default_factory=list)  # one median log ratio per block
    lo: float = -math.inf  # running intersection of the intervals at alpha, in log ratio
    hi: float = math.inf
    max_log_evidence: float = 0.0  # the largest log M_t against "no change" seen so far

    def add(self, ratios: list[float]) -> None:
        """A block of pairs, then a look: the interval is intersected with every earlier one."""
        logs = [math.log(r) for r in ratios]
        self.log_ratios += logs
        self.summaries.append(statistics.median(logs))
        x = np.asarray(self.summaries)
        self.lo, self.hi = _intersect((self.lo, self.hi), interval(x, self.alpha, self.prior))
        self.max_log_evidence = max(self.max_log_evidence, log_evidence_no_change(self.summaries, self.prior))

    @property
    def pairs(self) -> int:
        return len(self.log_ratios)

    @property
    def looks(self) -> int:
        return len(self.summaries)

    @property
    def p_value(self) -> float:
        """Anytime-valid p-value of "no change": 1 / the largest mixture martingale so far."""
        return min(1.0, math.exp(-self.max_log_evidence))

    def interval_at(self, alpha: float) -> tuple[float, float]:
        """The running intersection of every look's interval at another level (Holm's, at the end)."""
        if alpha == self.alpha:
            return self.lo, self.hi
        lo, hi = -math.inf, math.inf
        for t in range(1, self.looks + 1):
            lo, hi = _intersect((lo, hi), interval(np.asarray(self.summaries[:t]), alpha, self.prior))
        return lo, hi

    def decided(self) -> str | None:
        """The verdict the interval gives now, or None to go on sampling."""
        return verdict(self.lo, self.hi, self.margin)

    def ratio(self) -> float:
        """The point estimate the interval is for: the median of the blocks' median ratios."""
        return math.exp(float(np.median(self.summaries))) if self.summaries else math.nan

    def ratio_interval(self, alpha: float | None = None) -> tuple[float, float]:
        lo, hi = self.interval_at(self.alpha if alpha is None else alpha)
        return math.exp(lo), math.exp(hi)

    def half_width(self, alpha: float | None = None) -> float:
        """Half the interval's width, relative. A true change of this size puts 1 at the edge of an
        interval this wide: it is told from none only about half the time, not surely."""
        lo, hi = self.interval_at(self.alpha if alpha is None else alpha)
        if not math.isfinite(lo) or not math.isfinite(hi):
            return math.inf
        return math.expm1((hi - lo) / 2.0)


@dataclass
class Tail:
    """The tail of a workload (its `tail: q`): does the head exceed the base's q-quantile more often
    than the base does? Each pair's threshold is the q-quantile of the base's earlier blocks (known
    before the pair ran), so that in a pair of two exchangeable runs either side exceeds it alike
    when nothing changed. Per block, the sign of (head exceedances - base exceedances) is a fair coin
    then (a tie counts half), and the mixture martingale of Sequence gives an anytime p-value. A
    slowdown that lengthens only the tail moves no median but makes the head exceed more often."""
    quantile: float
    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    signs: list[float] = field(default_factory=list)  # 1: the head exceeded more, 0: the base, 0.5: tie
    max_log_evidence: float = 0.0  # against "no change", on the head's side only

    def add(self, base: list[float], head: list[float]) -> None:
        if self.base:  # the first block only sets the threshold
            c = float(np.quantile(self.base, self.quantile))
            d = sum(h > c for h in head) - sum(b > c for b in base)
            self.signs.append(1.0 if d > 0 else 0.0 if d < 0 else 0.5)
            above = sum(self.signs)
            if above > len(self.signs) / 2:
                self.max_log_evidence = max(self.max_log_evidence, float(log_mixture(above, len(self.signs))))
        self.base += base
        self.head += head

    @property
    def p_value(self) -> float:
        """Anytime-valid p-value of "the head's tail is no longer than the base's"."""
        return min(1.0, math.exp(-self.max_log_evidence))

    def ratio(self) -> float:
        """The head's q-quantile over the base's, over every pair (descriptive)."""
        return float(np.quantile(self.head, self.quantile) / np.quantile(self.base, self.quantile))

    def to_json(self, verdict: str) -> dict[str, float | str]:
        c = float(np.quantile(self.base, self.quantile))
        return {"quantile": self.quantile, "verdict": verdict, "ratio": self.ratio(), "p_value": self.p_value,
                "head_above": sum(h > c for h in self.head) / len(self.head),
                "base_above": sum(b > c for b in self.base) / len(self.base), "blocks": len(self.signs)}


def stop(seq: Sequence, block: int, budget_pairs: int, tail: Tail | None = None) -> bool:
    """The stop rule after a look: a clear verdict, or no room for another block in the budget. A
    workload with a tail does not stop at "equivalent" (its tail may still be longer), only at a
    change of its median or of its tail."""
    if seq.pairs + block > budget_pairs:
        return True
    if tail is None:
        return seq.decided() is not None
    return seq.decided() in ("regressed", "improved") or tail.p_value <= seq.alpha


def _intersect(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else b  # disjoint only by chance (probability <= alpha): keep the latest


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


def holm_levels(p_values: list[float], alpha: float) -> list[float]:
    """The level at which Holm's step-down judges each hypothesis: alpha / (m - rank) for those it
    rejects, alpha / m for the rest (the level all were sampled at)."""
    m = len(p_values)
    if not m:
        return []
    rejected = holm(p_values, alpha)
    out = [alpha / m] * m
    for rank, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        if rejected[i]:
            out[i] = alpha / (m - rank)
    return out


def final_verdict(seq: Sequence, level: float) -> str:
    """The workload's verdict once sampling ended: equivalent if the interval at the sampling level
    says so; else the rule read from the interval at the workload's Holm level, which is the
    interval reported, so that a verdict never stands next to an interval that contains 1."""
    if seq.decided() == "equivalent":
        return "equivalent"
    lo, hi = seq.interval_at(level)
    return verdict(lo, hi, seq.margin) or "inconclusive"


def judge(seqs: list[Sequence], alpha: float, tails: list[Tail | None] | None = None) -> list[tuple[str, float, str]]:
    """Every timed workload's verdict, the level its interval is read at and its tail's verdict,
    Holm's step-down over the anytime-valid p-values (each median, and each tail asked for) keeping
    the family-wise error of regressed/improved at alpha. A longer tail makes the workload regressed."""
    tails = tails or [None] * len(seqs)
    asked = [t for t in tails if t is not None]
    levels = holm_levels([s.p_value for s in seqs] + [t.p_value for t in asked], alpha)
    rejected = dict(zip(map(id, asked), (t.p_value <= lv for t, lv in zip(asked, levels[len(seqs):], strict=True)),
                        strict=True))
    out = []
    for s, level, t in zip(seqs, levels[:len(seqs)], tails, strict=True):
        verdict = final_verdict(s, level)
        tail = "" if t is None else "tail regressed" if rejected[id(t)] else "tail not shown longer"
        out.append(("regressed" if tail == "tail regressed" else verdict, level, tail))
    return out
