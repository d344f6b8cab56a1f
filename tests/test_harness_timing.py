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


def test_interval_methods_match_the_schema():
    from harness.spec import criteria as C

    assert set(timing.INTERVALS) == set(C.INTERVALS)


def test_order_interval_is_the_binomial_one():
    """[x(k), x(n+1-k)]: n=10 -> x(2)..x(9) (coverage 97.9%), n=20 -> x(6)..x(15) (95.9%)."""
    for n, (lo, hi) in {10: (2, 9), 12: (3, 10), 16: (4, 13), 20: (6, 15), 6: (1, 6)}.items():
        st = timing.order_median_ci(list(range(n, 0, -1)))
        assert (st.ci_lower, st.ci_upper, st.method) == (lo, hi, "order"), n


def test_bca_agrees_with_scipy():
    """Our BCa against scipy.stats.bootstrap(method="BCa") on skewed samples (scipy is not a
    dependency: the check runs where it is installed)."""
    stats = pytest.importorskip("scipy.stats")
    for seed in range(4):
        r = np.exp(np.random.default_rng(seed).exponential(0.3, 12))
        ref = stats.bootstrap((r,), np.median, method="BCa", n_resamples=20000, confidence_level=0.95,
                              random_state=np.random.default_rng(1)).confidence_interval
        ours = timing.bca_median_ci(list(r), resamples=20000, seed=1)
        assert ours.method == "bca" and ours.ci_lower <= ours.median <= ours.ci_upper
        assert (ours.ci_lower, ours.ci_upper) == pytest.approx((ref.low, ref.high), rel=1e-3), seed


def test_stability_flags():
    calm = [1.10, 1.11, 1.09, 1.10, 1.12, 1.08]
    st = timing.stability(calm, 1.05)
    assert st.stable and st.spread < 0.02 and st.note() == ""
    wide = [1.0, 1.3, 0.8, 1.2, 0.9, 1.4]
    st = timing.stability(wide, 1.05)
    assert not st.stable and st.note().startswith("unstable: pair spread ") and "(> 10%)" in st.note()
    floor = timing.Stats(6, 1.0, 0.97, 1.11, 0.95, 2000, 1)  # the A/A CI reaches 1.05: noise alone could pass
    st = timing.stability(calm, 1.05, floor)
    assert not st.stable and st.reasons == ["A/A noise floor CI [0.9700, 1.1100] reaches the threshold 1.05"]
    assert timing.stability(calm, 1.2, floor).stable
