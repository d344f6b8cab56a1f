"""Paired A/B timing statistics: schedule, per-run metric, bootstrap confidence interval, verdict."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

import numpy as np


def schedule(pairs: int, order: str = "ABBA") -> list[tuple[str, str]]:
    """ABBA: AB, BA, AB, BA ... (cancels drift); AB: always A first."""
    if order == "AB":
        return [("A", "B")] * pairs
    return [("A", "B") if i % 2 == 0 else ("B", "A") for i in range(pairs)]


def reduce_values(values: Any, how: str) -> float:
    """One number per run from a meta.json field (a number or a list of per-iteration numbers)."""
    if isinstance(values, bool):
        raise ValueError("metric field is a boolean, not a time")
    if isinstance(values, (int, float)):
        return float(values)
    if not isinstance(values, list) or not values or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
        raise ValueError(f"metric field must be a number or a non-empty list of numbers, got {values!r:.60}")
    xs = [float(x) for x in values]
    if how == "median":
        return float(statistics.median(xs))
    if how == "mean":
        return float(statistics.fmean(xs))
    if how == "min":
        return min(xs)
    if how == "max":
        return max(xs)
    if how == "first":
        return xs[0]
    if how == "last":
        return xs[-1]
    if how == "sum":
        return float(sum(xs))
    if how == "rest_median":
        if len(xs) < 2:
            raise ValueError("rest_median needs at least 2 values (use --iters >= 2)")
        return float(statistics.median(xs[1:]))
    raise ValueError(f"unknown reducer {how!r}")


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    ci_lower: float
    ci_upper: float
    confidence: float
    resamples: int
    seed: int

    def get(self, name: str) -> float:
        return {"median": self.median, "ci_lower": self.ci_lower, "ci_upper": self.ci_upper}[name]


def bootstrap_median_ci(ratios: Sequence[float], confidence: float = 0.95, resamples: int = 2000,
                        seed: int = 12345) -> Stats:
    """Percentile bootstrap of the median of per-pair ratios, with a fixed seed (reproducible)."""
    r = np.asarray(ratios, dtype=np.float64)
    if r.size == 0:
        raise ValueError("no ratios")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, r.size, size=(resamples, r.size))
    meds = np.median(r[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(meds, [alpha, 1.0 - alpha])
    return Stats(int(r.size), float(np.median(r)), float(lo), float(hi), confidence, resamples, seed)


def passes(stats: Stats, stat: str, op: str, value: float) -> bool:
    x = stats.get(stat)
    return {">=": x >= value, "<=": x <= value, ">": x > value, "<": x < value}[op]


def pair_ratio(a: float, b: float, ratio: str) -> float:
    num, den = (a, b) if ratio == "a/b" else (b, a)
    if den <= 0:
        raise ValueError(f"metric is {den} (not positive): cannot form a ratio")
    return num / den
