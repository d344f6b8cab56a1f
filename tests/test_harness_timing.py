"""Paired A/B statistics: few false alarms on A/A, a planted 10% difference is found."""

from __future__ import annotations

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as hst

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


def test_schedule_abba_alternates_for_any_length():
    for pairs in range(0, 7):
        s = timing.schedule(pairs, "ABBA")
        assert s == timing.schedule(pairs) and len(s) == pairs
        assert all(p == (("A", "B") if i % 2 == 0 else ("B", "A")) for i, p in enumerate(s))


# every reducer on one list whose answers all differ: median 3, mean 4, min 1, max 10, first 5,
# last 2, sum 20, rest_median (of 1, 10, 2) 2
XS = [5, 1, 10, 2, 2.0]
REDUCED = {"median": 2.0, "mean": 4.0, "min": 1.0, "max": 10.0, "first": 5.0, "last": 2.0, "sum": 20.0,
           "rest_median": 2.0}


@pytest.mark.parametrize("how", sorted(REDUCED))
def test_reducers(how):
    assert timing.reduce_values(XS, how) == REDUCED[how]
    assert type(timing.reduce_values(XS, how)) is float


def test_reducers_tell_their_inputs_apart():
    xs = [4.0, 1.0, 3.0, 6.0]
    got = {how: timing.reduce_values(xs, how) for how in REDUCED}
    assert got == {"median": 3.5, "mean": 3.5, "min": 1.0, "max": 6.0, "first": 4.0, "last": 6.0, "sum": 14.0,
                   "rest_median": 3.0}
    assert timing.reduce_values([1.0, 2.0, 9.0], "mean") == 4.0
    assert timing.reduce_values([7.0, 8.0], "rest_median") == 8.0


def test_reduce_a_single_number():
    for how in REDUCED:
        assert timing.reduce_values(7, how) == 7.0 and type(timing.reduce_values(7, how)) is float
    assert timing.reduce_values(2.5, "median") == 2.5


@pytest.mark.parametrize("bad,words", [
    (True, "^metric field is a boolean, not a time$"), ([], "^metric field must be a number or a non-empty list"),
    ([1.0, True], "non-empty list"), ("12", "must be a number"), ({"ms": 1}, "must be a number"),
    ([1.0, "2"], "non-empty list"), (None, "must be a number or a non-empty list of numbers, got None$")])
def test_reduce_refuses_what_is_not_a_time(bad, words):
    with pytest.raises(ValueError, match=words):
        timing.reduce_values(bad, "median")


def test_reduce_refuses_unknown_and_short():
    with pytest.raises(ValueError, match="^unknown reducer 'mode'$"):
        timing.reduce_values([1.0, 2.0], "mode")
    with pytest.raises(ValueError, match=r"^rest_median needs at least 2 values \(use --iters >= 2\)$"):
        timing.reduce_values([1.0], "rest_median")


def test_bootstrap_is_reproducible_and_seeded():
    """The same seed gives the same interval; another seed gives another one (the seed is used)."""
    r = simulate(np.random.default_rng(1), 1.1)
    st = timing.bootstrap_median_ci(r, seed=5)
    assert st == timing.bootstrap_median_ci(r, seed=5)
    assert (st.n, st.confidence, st.resamples, st.seed) == (PAIRS, 0.95, 2000, 5)
    assert st.median == float(np.median(r))
    r25 = simulate(np.random.default_rng(2), 1.1, pairs=25)
    one, other = (timing.bootstrap_median_ci(r25, 0.9, 101, seed) for seed in (5, 6))
    assert (other.ci_lower, other.ci_upper) != (one.ci_lower, one.ci_upper)
    assert timing.bootstrap_median_ci(r25, 0.9, 101, 5) == one  # where seeds differ, the same seed agrees


def test_bootstrap_is_the_percentile_interval():
    """Pinned against the definition: resample the pairs with default_rng(seed), take the
    (1-c)/2 and (1+c)/2 quantiles of the resampled medians."""
    r = np.array(simulate(np.random.default_rng(3), 1.05, pairs=9))
    for conf, resamples, seed in ((0.95, 2000, 12345), (0.8, 500, 4), (0.5, 301, 9)):
        rng = np.random.default_rng(seed)
        meds = np.median(r[rng.integers(0, r.size, size=(resamples, r.size))], axis=1)
        lo, hi = np.quantile(meds, [(1 - conf) / 2, (1 + conf) / 2])
        st = timing.bootstrap_median_ci(list(r), conf, resamples, seed)
        assert (st.ci_lower, st.ci_upper) == pytest.approx((lo, hi), rel=1e-12, abs=0)
        assert (st.confidence, st.resamples, st.seed) == (conf, resamples, seed)
    default = timing.bootstrap_median_ci(list(r))
    assert (default.confidence, default.resamples, default.seed) == (0.95, 2000, 12345)


def test_bootstrap_refuses_no_ratios():
    with pytest.raises(ValueError, match="^no ratios$"):
        timing.bootstrap_median_ci([])


def test_bootstrap_of_one_pair_and_of_equal_ratios():
    st = timing.bootstrap_median_ci([1.25])
    assert (st.n, st.median, st.ci_lower, st.ci_upper) == (1, 1.25, 1.25, 1.25)
    st = timing.bootstrap_median_ci([0.5, 0.5, 0.5, 0.5])
    assert (st.median, st.ci_lower, st.ci_upper) == (0.5, 0.5, 0.5)


@hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
@hypothesis.given(hst.lists(hst.floats(0.25, 4.0), min_size=1, max_size=25), hst.floats(0.5, 0.99),
                  hst.integers(0, 2**32 - 1))
def test_bootstrap_interval_holds_the_sample_median(ratios, confidence, seed):
    """Property: the interval is ordered and holds the sample median, at any confidence."""
    st = timing.bootstrap_median_ci(ratios, confidence, 400, seed)
    assert st.ci_lower <= st.median <= st.ci_upper
    assert st.median == float(np.median(ratios))
    assert min(ratios) <= st.ci_lower and st.ci_upper <= max(ratios)


@pytest.mark.parametrize("noise,pairs", [(0.03, 10), (0.05, 6), (0.01, 20)])
def test_aa_false_alarm_rate(noise, pairs):
    """Few alarms on A/A, and the same statistics flag a planted 25% difference: a verdict that
    never passes cannot satisfy both."""
    alarms = detected = 0
    for seed in range(200):
        r = simulate(np.random.default_rng(seed), 1.0, noise, pairs)
        st = timing.bootstrap_median_ci(r, 0.95, 1000, seed)
        alarms += timing.passes(st, *THRESHOLD)
        big = timing.bootstrap_median_ci(simulate(np.random.default_rng(seed), 1.25, noise, pairs), 0.95, 1000, seed)
        detected += timing.passes(big, *THRESHOLD)
    assert alarms / 200 <= 0.05, alarms
    assert detected / 200 >= 0.9, detected


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
    from harness.contract import criteria as C

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
    assert timing.pair_ratio(12.0, 10.0, "a/b") == 1.2
    assert timing.pair_ratio(12.0, 10.0, "b/a") == 10 / 12
    for a, b, ratio in ((1.0, 0.0, "a/b"), (1.0, -2.0, "a/b"), (0.0, 1.0, "b/a"), (-3.0, 1.0, "b/a")):
        with pytest.raises(ValueError, match="not positive"):
            timing.pair_ratio(a, b, ratio)
    assert timing.pair_ratio(0.0, 1.0, "a/b") == 0.0  # a zero numerator is a ratio, a zero denominator is not


@hypothesis.settings(max_examples=100, deadline=None, derandomize=True)
@hypothesis.given(hst.floats(1e-3, 1e6), hst.floats(1e-3, 1e6))
def test_pair_ratios_are_reciprocal(a, b):
    """Property: a/b and b/a of one pair multiply to 1, and a/b is a over b."""
    ab, ba = timing.pair_ratio(a, b, "a/b"), timing.pair_ratio(a, b, "b/a")
    assert ab == a / b and ba == b / a
    assert ab * ba == pytest.approx(1.0, rel=1e-12)


def _stats(median: float, lower: float, upper: float) -> timing.Stats:
    return timing.Stats(5, median, lower, upper, 0.95, 100, 1)


@pytest.mark.parametrize("op,at,above,below", [(">=", True, True, False), (">", False, True, False),
                                               ("<=", True, False, True), ("<", False, False, True)])
@pytest.mark.parametrize("stat", ["median", "ci_lower", "ci_upper"])
def test_passes_boundaries(stat, op, at, above, below):
    """Each operator at, just above and just below its value, on the statistic it names."""
    values = {"median": 2.0, "ci_lower": 1.0, "ci_upper": 3.0}
    st = _stats(values["median"], values["ci_lower"], values["ci_upper"])
    x = values[stat]
    assert timing.passes(st, stat, op, x) is at
    assert timing.passes(st, stat, op, float(np.nextafter(x, 0.0))) is above
    assert timing.passes(st, stat, op, float(np.nextafter(x, 10.0))) is below


def test_bca_interval_follows_efron():
    """BCa pinned against its definition on a skewed sample (so that the acceleration matters):
    z0 from the share of resampled medians under the sample median, a from the jackknife."""
    for sample in ([1.0, 1.01, 1.02, 1.03, 1.05, 1.1, 1.2, 1.4, 1.8, 2.6, 4.0],
                   [1, 1.1, 1.2, 1.3, 1.5, 2, 3, 5, 9, 17, 33, 65]):  # odd n: a > 0; even n: a == 0
        _check_bca(np.array(sample, dtype=float))


def _check_bca(r: np.ndarray, resamples: int = 997, seed: int = 3, conf: float = 0.9) -> None:
    from statistics import NormalDist

    rng = np.random.default_rng(seed)
    meds = np.median(r[rng.integers(0, r.size, size=(resamples, r.size))], axis=1)
    theta = float(np.median(r))
    nd = NormalDist()
    below = (np.sum(meds < theta) + 0.5 * np.sum(meds == theta)) / resamples
    # a share of 0 or 1 (every resampled median on one side) is held 1/(2 resamples) inside (0, 1)
    z0 = nd.inv_cdf(min(max(below, 0.5 / resamples), 1 - 0.5 / resamples))
    jack = np.array([np.median(np.delete(r, i)) for i in range(r.size)])
    dev = jack.mean() - jack
    ss = float(np.sum(dev ** 2))
    a = float(np.sum(dev ** 3)) / (6.0 * ss ** 1.5) if ss > 0 else 0.0
    tail = (1 - conf) / 2
    levels = [nd.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in (nd.inv_cdf(tail), nd.inv_cdf(1 - tail))]
    lo, hi = np.quantile(meds, levels)
    st = timing.bca_median_ci(list(r), conf, resamples, seed)
    assert (st.ci_lower, st.ci_upper) == pytest.approx((lo, hi), rel=1e-12, abs=0)
    assert st.median == theta


def test_bca_clamps_the_bias_when_every_resampled_median_is_on_one_side():
    """With 3 resamples, seed 34 draws three medians under the sample median and seed 66 three
    above it: z0 comes from 1/6 and 5/6, not from 0 and 1 (which have no normal quantile)."""
    r = np.array([1.0, 1.1, 1.3, 1.7, 2.5])
    for seed in (34, 66):
        _check_bca(r, resamples=3, seed=seed)


def test_bca_acceleration_on_a_large_skewed_sample_and_when_the_jackknife_is_flat():
    """101 skewed pairs and 41 resamples: the resampled medians are nearly all distinct, so the
    interval moves with any change of the acceleration. [1, 2, 2, 2, 3]: every jackknife median is
    2, so the acceleration is 0 although the resampled medians vary."""
    _check_bca(np.exp(np.linspace(0.0, 1.0, 101) ** 3), resamples=41, seed=5)
    _check_bca(np.array([1.0, 2.0, 2.0, 2.0, 3.0]), resamples=200, seed=2)


def test_bca_of_one_pair_computes_no_empty_median():
    """One pair: no jackknife (the median of an empty sample would warn and give NaN)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = timing.bca_median_ci([1.25], 0.9, 50, 1)
    assert (st.ci_lower, st.ci_upper) == (1.25, 1.25)


def test_stability_note_lists_every_reason():
    floor = timing.Stats(5, 1.0, 0.9, 1.1, 0.95, 100, 1)
    st = timing.stability([1.0, 2.0, 0.5, 1.5, 0.7], 1.05, floor)
    assert not st.stable and len(st.reasons) == 2
    assert st.note() == "unstable: " + st.reasons[0] + "; " + st.reasons[1]
    assert st.note().startswith("unstable: pair spread ") and "reaches the threshold 1.05" in st.note()
    assert timing.stability([1.0, 1.0, 1.0], 1.05).note() == ""


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 9, 10, 17, 30])
# 0.78125 and 0.796875 at n=6: the tail is exactly P(X <= 1) = 7/64, and 1/128 under it
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.5, 0.78125, 0.796875])
def test_order_interval_follows_the_binomial(n, confidence):
    """[x(k), x(n+1-k)] with the largest k whose two tails stay within 1 - confidence, computed
    here from the binomial probabilities; the whole range when no k qualifies."""
    from math import comb

    r = [1.0 + 0.01 * ((7 * i) % n) + 0.001 * i for i in range(n)]
    xs = sorted(r)
    k = 0
    while k + 1 <= n // 2 and sum(comb(n, j) for j in range(k + 1)) / 2 ** n <= (1 - confidence) / 2:
        k += 1
    want = (xs[k - 1], xs[n - k]) if k else (xs[0], xs[-1])
    st = timing.order_median_ci(r, confidence)
    assert (st.ci_lower, st.ci_upper) == want, (n, confidence, k)
    assert (st.n, st.median, st.confidence, st.resamples, st.seed, st.method) == \
        (n, float(np.median(r)), confidence, 0, 0, "order")


def test_bca_fields_defaults_and_one_pair():
    st = timing.bca_median_ci([1.0, 1.2, 1.1, 1.5, 0.9])
    assert (st.n, st.confidence, st.resamples, st.seed, st.method) == (5, 0.95, 2000, 12345, "bca")
    assert st == timing.bca_median_ci([1.0, 1.2, 1.1, 1.5, 0.9], 0.95, 2000, 12345)
    one = timing.bca_median_ci([1.25], 0.9, 200, 7)
    assert (one.n, one.median, one.ci_lower, one.ci_upper, one.confidence, one.resamples, one.seed) == \
        (1, 1.25, 1.25, 1.25, 0.9, 200, 7)
    two = timing.bca_median_ci([1.0, 2.0], 0.9, 200, 7)
    assert two.ci_lower == 1.0 and two.ci_upper == 2.0


def test_stability_noise_floor_bounds_are_inclusive():
    calm = [1.10, 1.11, 1.09, 1.10, 1.12, 1.08]
    for lo, hi, flagged in ((1.05, 1.2, True), (0.9, 1.05, True), (1.0500001, 1.2, False), (0.9, 1.0499999, False)):
        st = timing.stability(calm, 1.05, timing.Stats(6, 1.0, lo, hi, 0.95, 2000, 1))
        assert st.stable is not flagged, (lo, hi)
    st = timing.stability([1.0, 1.3, 0.8, 1.2, 0.9, 1.4], 1.05)
    assert st.reasons == ["pair spread 27.3% (> 10%)"]


# ---- issue 35: a NaN pair passed `interval: order` -----------------------------------------------

NAN_PAIR = [1.2, 1.3, 1.25, 1.22, 1.28, 1.3, 1.27, float("nan"), 1.26, 1.24]


@pytest.mark.parametrize("interval", sorted(timing.INTERVALS))
def test_no_interval_of_a_nan_or_infinite_ratio(interval):
    """Sorted, a NaN went last and the order interval [x(k), x(n+1-k)] passed `ci_lower >= 1.05`."""
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="not a finite number"):
            timing.INTERVALS[interval]([bad if x != x else x for x in NAN_PAIR], 0.95, 200, 1)
    with pytest.raises(ValueError, match="not a finite number"):
        timing.stability(NAN_PAIR, 1.05)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 10**400],
                         ids=["nan", "inf", "-inf", "int-of-401-digits"])
def test_a_time_is_a_finite_number(bad):
    for how in REDUCED:
        with pytest.raises(ValueError, match="not a finite number"):
            timing.reduce_values(bad, how)
        with pytest.raises(ValueError, match="not a finite number"):
            timing.reduce_values([1.0, bad, 2.0], how)
    with pytest.raises(ValueError, match="not a finite number"):
        timing.reduce_values([1e308, 1e308], "sum")  # finite times, an infinite sum


def test_pair_ratio_of_a_nan_or_an_overflow_is_refused():
    for a, b in ((float("nan"), 1.0), (1.0, float("nan")), (float("inf"), 1.0), (1.0, float("inf"))):
        for how in ("a/b", "b/a"):
            with pytest.raises(ValueError, match="not a finite number"):
                timing.pair_ratio(a, b, how)
    with pytest.raises(ValueError, match="overflows"):
        timing.pair_ratio(1e300, 1e-300, "a/b")


def test_a_nan_metric_fails_the_criterion():
    from harness.run import runner
    from harness.contract.criteria import Metric

    with pytest.raises(runner.CriterionFail, match="pair 1 A: metric t: metric value nan is not a finite number"):
        runner._metric({"t": [1.0, float("nan")]}, Metric(field="t", reduce="median"), "pair 1 A")
