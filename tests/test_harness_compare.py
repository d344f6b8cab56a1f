"""Equivalence of float32 dumps: memcmp, and a full account of any difference."""

from __future__ import annotations

import numpy as np
from harness.run.compare import compare_bytes


def dump(rows=5, cols=16, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype("<f4")


def flip(a: np.ndarray, index: int, ulps: int = 1) -> np.ndarray:
    b = a.copy().reshape(-1)
    b.view(np.uint32)[index] += ulps
    return b.reshape(a.shape)


def test_identical():
    a = dump()
    d = compare_bytes(a.tobytes(), a.tobytes(), 16, shape_a=[5, 16], shape_b=[5, 16])
    assert d.identical and d.ok and d.differing == 0


def test_one_ulp_found_at_right_index():
    a = dump()
    b = flip(a, 37)
    d = compare_bytes(a.tobytes(), b.tobytes(), 16, shape_a=[5, 16], shape_b=[5, 16])
    assert not d.ok and not d.identical
    assert d.first_index == 37 and d.first_position == 2 and d.first_element == 5
    assert d.differing == 1 and d.max_ulp == 1
    assert d.max_abs == abs(float(a.reshape(-1)[37]) - float(b.reshape(-1)[37]))
    assert 0 < d.nmse < 1e-12
    assert "index 37 (position 2, element 5)" in d.reason and "max ULP 1" in d.reason


def test_counts_and_max_ulp():
    a = dump()
    b = flip(flip(flip(a, 3, 2), 40, 7), 79, 1)
    d = compare_bytes(a.tobytes(), b.tobytes(), 16)
    assert (d.differing, d.first_index, d.max_ulp) == (3, 3, 7)


def test_ulp_across_zero():
    a = np.array([0.0, 1.0], dtype="<f4")
    b = np.array([-0.0, 1.0], dtype="<f4")
    d = compare_bytes(a.tobytes(), b.tobytes(), 2)
    assert not d.ok and d.differing == 1 and d.max_ulp == 0 and d.max_abs == 0.0
    tiny = np.array([np.float32(1e-45), 1.0], dtype="<f4")  # smallest denormal vs -smallest: 2 ULPs
    neg = np.array([np.float32(-1e-45), 1.0], dtype="<f4")
    assert compare_bytes(tiny.tobytes(), neg.tobytes(), 2).max_ulp == 2


def test_nan_is_failure_even_if_identical():
    a = dump()
    a.reshape(-1)[20] = np.nan
    d = compare_bytes(a.tobytes(), a.tobytes(), 16)
    assert d.identical and not d.ok
    assert "NaN in A" in d.reason and "index 20 (position 1, element 4)" in d.reason
    assert compare_bytes(a.tobytes(), a.tobytes(), 16, allow_nan=True).ok


def test_nan_on_one_side():
    a = dump()
    b = a.copy()
    b.reshape(-1)[9] = np.nan
    d = compare_bytes(a.tobytes(), b.tobytes(), 16)
    assert not d.ok and d.nan_b == 1 and "NaN in B" in d.reason


def test_length_mismatch():
    a = dump(5)
    b = dump(4)
    d = compare_bytes(a.tobytes(), b.tobytes(), 16)
    assert not d.ok and "length mismatch: A has 80 elements, B has 64" in d.reason


def test_shape_mismatch_and_truncation():
    a = dump(4, 16)
    d = compare_bytes(a.tobytes(), a.tobytes(), 16, shape_a=[4, 16], shape_b=[8, 8])
    assert not d.ok and "shape mismatch" in d.reason
    d = compare_bytes(a.tobytes(), a.tobytes()[:100], 16, shape_a=[4, 16], shape_b=[4, 16])
    assert not d.ok and "B: 100 bytes but meta.json shape [4, 16] needs 256" in d.reason
    d = compare_bytes(a.tobytes(), a.tobytes()[:-2], 16)
    assert not d.ok and "not a whole number of float32" in d.reason


def test_tolerance_mode():
    a = dump()
    b = flip(a, 10, 3)
    assert compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", max_ulp=3).ok
    d = compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", max_ulp=2)
    assert not d.ok and "max ULP 3 > 2" in d.reason
    assert compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", nmse=1e-9).ok
    assert not compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", max_abs=0.0).ok


def test_tolerance_never_within_when_nan_fails():
    """A NaN on one side: the only difference, so max abs is 0 over the finite elements; the text
    must not call that 'within tolerance'."""
    a = dump()
    b = a.copy()
    b.reshape(-1)[33] = np.nan
    for limits in ({"max_abs": 1e-3}, {"max_ulp": 4}, {"nmse": 1e-6}):
        d = compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", **limits)
        assert not d.ok, limits
        assert "within tolerance" not in d.reason and "outside tolerance (NaN" in d.reason, d.reason
        assert "NaN in B (0 in A, 1 in B), first at index 33 (position 2, element 1)" in d.reason
    d = compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", max_abs=1e-3, allow_nan=True)
    assert d.ok and d.reason.startswith("NaN in B") and "within tolerance" in d.reason


def test_nan_and_inf_positions_named_in_every_mode():
    a = dump()
    a.reshape(-1)[5] = np.inf
    a.reshape(-1)[70] = -np.inf
    b = a.copy()
    b.reshape(-1)[18] = np.nan
    for kw in ({}, {"mode": "tolerance", "max_abs": 1.0}, {"mode": "tolerance", "max_ulp": 1},
               {"mode": "tolerance", "nmse": 1.0}):
        d = compare_bytes(a.tobytes(), b.tobytes(), 16, **kw)
        assert not d.ok and (d.inf_a, d.inf_b, d.nan_a, d.nan_b) == (2, 2, 0, 1), kw
        assert "Inf in A and B (2 in A, 2 in B), first at index 5 (position 0, element 5) of A" in d.reason, kw
        assert "NaN in B (0 in A, 1 in B), first at index 18 (position 1, element 2)" in d.reason, kw
    d = compare_bytes(a.tobytes(), a.tobytes(), 16)  # identical infinities pass, and are still named
    assert d.ok and d.reason == "Inf in A and B (2 in A, 2 in B), first at index 5 (position 0, element 5) of A; " \
                                "identical bytes"


def test_tolerance_inf_against_finite_fails():
    """Infinite on one side only: no finite max abs covers it (max abs ignores it)."""
    a = dump()
    b = a.copy()
    b.reshape(-1)[40] = np.inf
    d = compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", max_abs=10.0)
    assert not d.ok and d.max_abs == 0.0
    assert "outside tolerance (1 differing element with an infinity, first at index 40 (position 2, element 8))" \
        in d.reason
    assert d.reason.startswith("Inf in B (0 in A, 1 in B), first at index 40")
