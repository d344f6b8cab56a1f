"""The sequential speed verdict (harness/compare/sequential.py) and its calibration: the fast,
seeded version of docs/COMPARE.md's table (the full one: python -m harness.compare.calibrate)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.compare import calibrate as cal
from harness.compare.sequential import Sequence, final_verdict, holm, interval, log_evidence_no_change
from harness.tools.calibrate_ab import DEFAULT_DATA, load_shapes

SHAPES = {s.name: s for path in (DEFAULT_DATA, cal.COMPARE_DATA) for s in load_shapes(path)}


def test_interval_is_between_order_statistics_and_shrinks():
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 0.05, 400)
    widths = []
    for t in (16, 64, 256):
        lo, hi = interval(x[:t], 0.05)
        assert lo in x[:t] and hi in x[:t] and lo < np.median(x[:t]) < hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]


def test_few_pairs_bound_nothing():
    assert interval(np.array([0.1, 0.2, 0.3]), 0.05) == (-math.inf, math.inf)


def test_time_uniform_coverage_on_continuous_noise():
    """The true median stays inside every look's interval in >= 95 % of 400 seeded sequences."""
    rng = np.random.default_rng(7)
    misses = 0
    for _ in range(400):
        x = rng.standard_t(3, 200) * 0.05 + 0.01  # heavy tails, median 0.01
        s = Sequence(0.02, 0.05)
        for b in range(0, 200, 4):
            s.add(list(np.exp(x[b:b + 4])))
            if not s.lo <= 0.01 <= s.hi:
                misses += 1
                break
    assert misses / 400 <= 0.05


def test_ties_at_one_are_no_evidence_and_an_exact_equivalence():
    s = Sequence(0.02, 0.05)
    for _ in range(8):
        s.add([1.0] * 4)
    assert s.p_value == 1.0 and s.ratio_interval() == (1.0, 1.0) and s.decided() == "equivalent"
    assert log_evidence_no_change(np.zeros(32)) < 0


def test_a_clear_slowdown_is_regressed_and_its_p_value_small():
    s = Sequence(0.02, 0.05)
    while s.decided() is None:
        s.add([1.12] * 4)
    assert s.decided() == "regressed" and s.p_value <= 0.05 and s.ratio_interval()[0] > 1.0
    assert final_verdict(s, True) == "regressed"


def test_holm_step_down():
    assert holm([0.01, 0.04, 0.03], 0.05) == [True, False, False]  # 0.03 > 0.05/2
    assert holm([0.01, 0.02, 0.04], 0.05) == [True, True, True]
    assert holm([0.2, 0.01], 0.05) == [False, True]
    assert holm([], 0.05) == []


def test_inconclusive_unless_holm_rejects():
    s = Sequence(0.02, 0.05)
    s.add([1.01, 0.99, 1.3, 0.8])
    assert final_verdict(s, False) == "inconclusive"
    assert final_verdict(s, True) == ("regressed" if s.ratio() > 1 else "improved")


@pytest.mark.parametrize("shape", ["h200", "cpu-tiny-compare"])
def test_calibration_fast_seeded(shape):
    """200 seeded compares per cell (the docs' table uses 1000): false alarm <= 5 %, wrong
    'equivalent' at twice the margin <= 5 %, and on the H200's noise power >= 80 % at +2 %."""
    s = SHAPES[shape]
    budget = cal.BUDGETS.get(shape, cal.CPU_BUDGET)
    null = cal.simulate(s, 1.0, budget, 200, seed=11)
    slow = cal.simulate(s, 1.02, budget, 200, seed=11)
    far = cal.simulate(s, 1.04, budget, 200, seed=11)
    assert null.false_alarm <= 0.05
    assert far.rate("equivalent") <= 0.05
    if shape == "h200":
        assert slow.rate("regressed") >= 0.80 and slow.median_pairs < budget


def test_calibration_is_deterministic():
    s = SHAPES["h200"]
    assert cal.simulate(s, 1.02, 400, 50, seed=3) == cal.simulate(s, 1.02, 400, 50, seed=3)
