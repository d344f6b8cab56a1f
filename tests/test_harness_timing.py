"""Paired A/B statistics: few false alarms on A/A, a planted 10% difference is found."""

from __future__ import annotations

import numpy as np
import pytest

from harness.run import timing

THRESHOLD = ("ci_lower", ">=", 1.05)  # "B faster by at least 5%": CI lower bound of A/B >= 1.05
PAIRS = 10


def simulate(rng: np.random.Generator, effect: float, noise: float = 0.03, pairs: int = PAIRS) -> list[float]:
    """Per-pair ratios A/B from request times with multiplicative noise and a slow drift."""
    drift = 1.0 + 0.002 * np.arange(pairs)
    a = 10.0 * effect * drift * np.exp(rng.normal(0, noise, pairs))
    b = 10.0 * drift * np.exp(rng.normal(0, noise, pairs))
    return list(a / b)


def test_schedule():
    assert timing.schedule(4) == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]
    assert timing.schedule(3, "AB") == [("A", "B")] * 3


def test_reducers():
    xs = [5.0, 1.0, 3.0, 2.0]
    assert timing.reduce_values(xs, "median") == 2.5
    assert timing.reduce_values(xs, "first") == 5.0
    assert timing.reduce_values(xs, "rest_median") == 2.0
    assert timing.reduce_values(7, "median") == 7.0
    with pytest.raises(ValueError):
        timing.reduce_values([], "median")
    with pytest.raises(ValueError):
        timing.reduce_values([1.0], "rest_median")


def test_bootstrap_is_reproducible():
    r = simulate(np.random.default_rng(1), 1.1)
    assert timing.bootstrap_median_ci(r, seed=5) == timing.bootstrap_median_ci(r, seed=5)


@pytest.mark.parametrize("noise,pairs", [(0.03, 10), (0.05, 6), (0.01, 20)])
def test_aa_false_alarm_rate(noise, pairs):
    alarms = 0
    for seed in range(200):
        r = simulate(np.random.default_rng(seed), 1.0, noise, pairs)
        st = timing.bootstrap_median_ci(r, 0.95, 1000, seed)
        alarms += timing.passes(st, *THRESHOLD)
    assert alarms / 200 <= 0.05, alarms


def test_aa_interval_contains_one_mostly():
    cover = 0
    for seed in range(200):
        st = timing.bootstrap_median_ci(simulate(np.random.default_rng(seed), 1.0), 0.95, 1000, seed)
        cover += st.ci_lower <= 1.0 <= st.ci_upper
    assert cover / 200 >= 0.85


@pytest.mark.parametrize("noise,pairs", [(0.02, 10), (0.03, 20)])
def test_planted_ten_percent_detected(noise, pairs):
    detected = 0
    for seed in range(50):
        r = simulate(np.random.default_rng(1000 + seed), 1.10, noise, pairs)
        st = timing.bootstrap_median_ci(r, 0.95, 1000, seed)
        detected += timing.passes(st, *THRESHOLD)
    assert detected / 50 >= 0.9, detected


def test_pair_ratio():
    assert timing.pair_ratio(12.0, 10.0, "a/b") == pytest.approx(1.2)
    assert timing.pair_ratio(12.0, 10.0, "b/a") == pytest.approx(10 / 12)
    with pytest.raises(ValueError):
        timing.pair_ratio(1.0, 0.0, "a/b")
