"""The A/B interval's calibration (harness.tools.calibrate_ab): a fast, seeded version of the simulation
whose full run is in docs/CRITERIA.md ("How far to trust a timing verdict"). Noise shaped like the
recorded H200 and CPU A/A pairs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.tools import calibrate_ab as K

RUNS = 300
SEED = 20261201


@pytest.fixture(scope="module")
def shapes():
    return {s.name: s for s in K.load_shapes(K.DEFAULT_DATA)}


def test_recorded_shapes_are_there(shapes):
    assert set(shapes) == {"h200", "cpu"}
    assert shapes["h200"].runs >= 50 and shapes["cpu"].runs >= 3
    # mirrored residuals: A/A log ratios are symmetric by construction
    assert np.median(shapes["h200"].residuals) == 0.0


def test_simulation_is_reproducible(shapes):
    a = K.simulate(shapes["cpu"], 10, 1.0, "percentile", 50, SEED)
    b = K.simulate(shapes["cpu"], 10, 1.0, "percentile", 50, SEED)
    assert a == b


@pytest.mark.parametrize("pairs", [10, 20])
@pytest.mark.parametrize("noise", ["h200", "cpu"])
def test_false_pass_rate_of_the_default_interval(shapes, noise, pairs):
    """What a `ci_lower >= T` criterion risks: with the true ratio at T, the percentile interval's
    lower bound lands above it in at most 5% of runs."""
    c = K.simulate(shapes[noise], pairs, 1.0, "percentile", RUNS, SEED)
    assert c.above / c.runs <= 0.05, c


@pytest.mark.parametrize("pairs", [10, 20])
@pytest.mark.parametrize("noise", ["h200", "cpu"])
def test_order_interval_false_alarm_rate(shapes, noise, pairs):
    """The order-statistic interval excludes the true ratio (either side) in at most 5% of A/A runs."""
    c = K.simulate(shapes[noise], pairs, 1.0, "order", RUNS, SEED)
    assert c.excludes_one <= 0.05 and c.coverage >= 0.95, c


def test_power_grows_with_the_effect(shapes):
    h = shapes["h200"]
    p1 = K.simulate(h, 20, 1.01, "percentile", 200, SEED).power
    p3 = K.simulate(h, 20, 1.03, "percentile", 200, SEED).power
    p10 = K.simulate(h, 20, 1.10, "percentile", 200, SEED).power
    assert p1 < p3 < p10 and p10 >= 0.9


def test_record_from_reports(tmp_path):
    rep = {"results": [
        {"kind": "ab_timing", "details": {"pairs": [{"ratio": 2.0}] * 4,
                                          "noise_floor": {"pairs": [{"ratio": x} for x in (1.0, 1.1, 0.9, 1.05)]}}},
        {"kind": "ab_timing", "details": {"pairs": [{"ratio": x} for x in (1.0, 1.2, 0.8, 1.1)]}},
        {"kind": "run", "details": {}}]}
    (tmp_path / "r.json").write_text(json.dumps(rep))
    data = tmp_path / "pairs.json"
    assert K.record(data, "x", [tmp_path / "r.json"], False, "note") == 1
    assert K.record(data, "y", [tmp_path / "r.json"], True, "note") == 2
    doc = json.loads(data.read_text())
    assert doc["shapes"]["x"]["runs"] == [[1.0, 1.1, 0.9, 1.05]] and len(doc["shapes"]["y"]["runs"]) == 2
    with pytest.raises(ValueError):
        K.shape_from_runs("flat", [[1.0] * 6])
