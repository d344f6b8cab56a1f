"""Paired A/B timing statistics: schedule, per-run metric, bootstrap confidence interval, verdict."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

import numpy as np


def schedule(pairs: int, order: str = "ABBA") -> list[tuple[str, str]]:
    """ABBA: AB, BA, AB, BA ... (cancels drift); AB: always A first."""
    if order == "AB":
        return [("A", "B")] * pairs
    return [("A", "B") if i % 2 == 0 else ("B", "A") for i in range(pairs)]


def reduce_values(values: Any, how: str) -> float:
    """One number per run from a meta.json field (a number or a list of per-iteration numbers),
    finite (a NaN or infinite time, or a sum that overflows, is refused)."""
    if isinstance(values, bool):
        raise ValueError("metric field is a boolean, not a time")
    if isinstance(values, (int, float)):
        return _finite(values)
    if not isinstance(values, list) or not values or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
        raise ValueError(f"metric field must be a number or a non-empty list of numbers, got {values!r:.60}")
    xs = [_finite(x) for x in values]
    return _finite(_reduce(xs, how))


def _reduce(xs: list[float], how: str) -> float:
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


def _finite(x: float) -> float:
    """A time as a float: NaN or an infinity is no time (sorted, it would move an order-statistic
    interval past it; a huge integer overflows)."""
    try:
        f = float(x)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise ValueError(f"metric value {x if isinstance(x, float) else 'of ' + str(len(str(x))) + ' digits'} "
                         "is not a finite number")
    return f


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    ci_lower: float
    ci_upper: float
    confidence: float
    resamples: int
    seed: int
    method: str = "percentile"

    def get(self, name: str) -> float:
        return {"median": self.median, "ci_lower": self.ci_lower, "ci_upper": self.ci_upper}[name]


def _resampled_medians(r: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, r.size, size=(resamples, r.size))
    return np.median(r[idx], axis=1)


def _ratios(ratios: Sequence[float]) -> np.ndarray:
    r = np.asarray(ratios, dtype=np.float64)
    if r.size == 0:
        raise ValueError("no ratios")
    if not np.isfinite(r).all():  # pair_ratio never makes one; an interval of a NaN is no interval
        raise ValueError(f"ratio {r[~np.isfinite(r)][0]} is not a finite number")
    return r


def bootstrap_median_ci(ratios: Sequence[float], confidence: float = 0.95, resamples: int = 2000,
                        seed: int = 12345) -> Stats:
    """Percentile bootstrap of the median of per-pair ratios, with a fixed seed (reproducible)."""
    r = _ratios(ratios)
    meds = _resampled_medians(r, resamples, seed)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(meds, [alpha, 1.0 - alpha])
    return Stats(int(r.size), float(np.median(r)), float(lo), float(hi), confidence, resamples, seed)


def bca_median_ci(ratios: Sequence[float], confidence: float = 0.95, resamples: int = 2000,
                  seed: int = 12345) -> Stats:
    """Bias-corrected and accelerated (BCa) bootstrap of the median (Efron 1987): the percentile
    levels are moved by the bootstrap's median bias (z0) and the jackknife skewness (a)."""
    r = _ratios(ratios)
    meds = _resampled_medians(r, resamples, seed)
    theta = float(np.median(r))
    nd = statistics.NormalDist()
    below = (np.count_nonzero(meds < theta) + 0.5 * np.count_nonzero(meds == theta)) / resamples
    edge = 0.5 / resamples
    z0 = nd.inv_cdf(min(max(below, edge), 1.0 - edge))
    jack = np.array([np.median(np.delete(r, i)) for i in range(r.size)]) if r.size > 1 else np.zeros(1)
    dev = jack.mean() - jack
    den = 6.0 * float(dev @ dev) ** 1.5
    accel = float(np.sum(dev ** 3)) / den if den > 0 else 0.0
    alpha = (1.0 - confidence) / 2.0
    levels = []
    for z in (nd.inv_cdf(alpha), nd.inv_cdf(1.0 - alpha)):
        shifted = z0 + (z0 + z) / (1.0 - accel * (z0 + z))
        levels.append(nd.cdf(shifted) if math.isfinite(shifted) else (0.0 if shifted < 0 else 1.0))
    lo, hi = np.quantile(meds, levels)
    return Stats(int(r.size), theta, float(lo), float(hi), confidence, resamples, seed, "bca")


def order_median_ci(ratios: Sequence[float], confidence: float = 0.95, resamples: int = 0, seed: int = 0) -> Stats:
    """Distribution-free interval of the median from order statistics: [x(k), x(n+1-k)] with the
    largest k whose binomial coverage is still at least `confidence` (no resampling; below 6 pairs at
    95% no such k exists and the interval is the whole sample range)."""
    r = np.sort(_ratios(ratios))
    n = int(r.size)
    tail = (1.0 - confidence) / 2.0
    k, below = 0, 0.0  # below: P(Binomial(n, 1/2) <= k - 1), the chance the median lies under x(k)
    while k < n // 2 and below + math.comb(n, k) / 2.0 ** n <= tail:
        below += math.comb(n, k) / 2.0 ** n
        k += 1
    lo, hi = (r[k - 1], r[n - k]) if k else (r[0], r[-1])
    return Stats(n, float(np.median(r)), float(lo), float(hi), confidence, 0, 0, "order")


INTERVALS = {"percentile": bootstrap_median_ci, "bca": bca_median_ci, "order": order_median_ci}


def passes(stats: Stats, stat: str, op: str, value: float) -> bool:
    x = stats.get(stat)
    return {">=": x >= value, "<=": x <= value, ">": x > value, "<": x < value}[op]


def pair_ratio(a: float, b: float, ratio: str) -> float:
    num, den = (a, b) if ratio == "a/b" else (b, a)
    for x in (num, den):
        if not math.isfinite(x):
            raise ValueError(f"metric is {x} (not a finite number): cannot form a ratio")
    if den <= 0:
        raise ValueError(f"metric is {den} (not positive): cannot form a ratio")
    q = num / den
    if not math.isfinite(q):  # 1e300 / 1e-300
        raise ValueError(f"ratio {num:g} / {den:g} overflows")
    return q


# A verdict is flagged unstable (as pyperf warns when a benchmark's spread exceeds 10% of its mean)
# when the robust spread of its pair ratios exceeds this, or when the A/A noise floor reaches the
# threshold (timing noise alone could then make the verdict).
SPREAD_LIMIT = 0.10


@dataclass(frozen=True)
class Stability:
    stable: bool
    spread: float  # robust relative spread of the pair ratios: 1.4826 * MAD of their logarithms
    reasons: list[str] = field(default_factory=list)

    def note(self) -> str:
        return "" if self.stable else "unstable: " + "; ".join(self.reasons)


def stability(ratios: Sequence[float], threshold: float, noise_floor: Stats | None = None) -> Stability:
    lr = np.log(_ratios(ratios))
    spread = float(1.4826 * np.median(np.abs(lr - np.median(lr))))
    reasons = []
    if spread > SPREAD_LIMIT:
        reasons.append(f"pair spread {spread * 100:.1f}% (> {SPREAD_LIMIT * 100:g}%)")
    if noise_floor is not None and noise_floor.ci_lower <= threshold <= noise_floor.ci_upper:
        reasons.append(f"A/A noise floor CI [{noise_floor.ci_lower:.4f}, {noise_floor.ci_upper:.4f}] reaches the "
                       f"threshold {threshold:g}")
    return Stability(not reasons, spread, reasons)
