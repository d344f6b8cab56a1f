"""Equivalence of float32 dumps: memcmp, and a full account of any difference."""

from __future__ import annotations

import numpy as np
from harness.run.dumpdiff import compare_bytes


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
    a.reshape(-1)[33] = np.nan  # allow_nan: a NaN against a NaN is within tolerance
    d = compare_bytes(a.tobytes(), b.tobytes(), 16, mode="tolerance", max_abs=1e-3, allow_nan=True)
    assert d.ok and d.reason.startswith("NaN in A and B") and "identical" in d.reason


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
# ---- tolerance limits: each limit is applied, and each is inclusive ------------------------------

def _pair(a: list[float], b: list[float]) -> tuple[bytes, bytes]:
    return np.array(a, dtype="<f4").tobytes(), np.array(b, dtype="<f4").tobytes()


def test_tolerance_nmse_limit_is_applied():
    """A tolerance criterion with only `nmse:` fails when the error exceeds it."""
    a, b = _pair([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 5.0])
    d = compare_bytes(a, b, 4, mode="tolerance", nmse=0.01)
    assert d.nmse == 1.0 / 30.0
    assert not d.ok and "outside tolerance (NMSE 0.0333 > 0.01)" in d.reason
    assert compare_bytes(a, b, 4, mode="tolerance", nmse=0.04).ok


def test_tolerance_limits_are_inclusive():
    """A measured value equal to its limit is within tolerance; just above it is not."""
    a, b = _pair([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.5])
    d = compare_bytes(a, b, 4)
    assert (d.max_abs, d.max_ulp) == (0.5, 1 << 20)
    for key, at, below in (("max_abs", d.max_abs, np.nextafter(d.max_abs, 0.0)),
                           ("max_ulp", d.max_ulp, d.max_ulp - 1),
                           ("nmse", d.nmse, np.nextafter(d.nmse, 0.0))):
        assert compare_bytes(a, b, 4, mode="tolerance", **{key: at}).ok, key
        low = compare_bytes(a, b, 4, mode="tolerance", **{key: below})
        assert not low.ok and low.reason.startswith("outside tolerance"), key


def test_tolerance_reports_every_limit_exceeded():
    a, b = _pair([1.0, 2.0], [1.0, 3.0])
    d = compare_bytes(a, b, 2, mode="tolerance", max_abs=0.5, max_ulp=1, nmse=0.01)
    assert d.reason.startswith("outside tolerance (max abs 1 > 0.5; max ULP 4194304 > 1; NMSE 0.2 > 0.01): ")
    ok = compare_bytes(a, b, 2, mode="tolerance", max_abs=1.0, max_ulp=1 << 22, nmse=0.2)
    assert ok.ok and ok.reason.startswith("within tolerance: 1 of 2 elements differ")


def test_memcmp_ignores_limits():
    """Limits are for mode tolerance only: memcmp fails any difference."""
    a, b = _pair([1.0, 2.0], [1.0, 2.5])
    d = compare_bytes(a, b, 2, max_abs=10.0, max_ulp=1 << 30, nmse=10.0)
    assert not d.ok and not d.reason.startswith(("within", "outside"))


# ---- NMSE: its denominator and the non-finite elements ---------------------------------------------

def test_nmse_denominator_skips_infinities_in_a():
    """A holds +inf and -inf where B does too: NMSE over the finite elements, never 0 or NaN."""
    a, b = _pair([np.inf, 3.0, -np.inf, 4.0], [np.inf, 3.0, -np.inf, 4.5])
    d = compare_bytes(a, b, 4)
    assert d.nmse == 0.25 / 25.0
    assert not compare_bytes(a, b, 4, mode="tolerance", nmse=0.005).ok
    assert compare_bytes(a, b, 4, mode="tolerance", nmse=0.01).ok


def test_nmse_of_zero_reference():
    """All of A zero: NMSE is inf when B differs by a value, 0 when only the sign of zero differs."""
    a, b = _pair([0.0, 0.0], [0.0, 1.0])
    assert compare_bytes(a, b, 2).nmse == float("inf")
    assert not compare_bytes(a, b, 2, mode="tolerance", nmse=1e30).ok
    a, b = _pair([0.0, 0.0], [0.0, -0.0])
    d = compare_bytes(a, b, 2, mode="tolerance", nmse=0.0)
    assert d.nmse == 0.0 and d.ok


def test_infinity_differences_are_not_finite_errors():
    """An element that is inf on one side is left out of max abs and NMSE, but still differs."""
    a, b = _pair([1.0, np.inf, 2.0], [1.0, 5.0, 2.5])
    d = compare_bytes(a, b, 3)
    assert d.differing == 2 and d.first_index == 1 and d.first_values == (float("inf"), 5.0)
    assert d.max_abs == 0.5 and d.nmse == 0.25 / 5.0
    assert d.max_ulp == abs(0x7F800000 - int(np.array(5.0, "<f4").view("<u4")))
    only_inf = compare_bytes(*_pair([1.0, np.inf], [1.0, 5.0]), 2)
    assert (only_inf.max_abs, only_inf.nmse) == (0.0, 0.0)


def test_nan_elements_are_left_out_of_ulps():
    """A NaN against a number has no ULP distance; the other differing elements still count."""
    a, b = _pair([1.0, np.nan, 2.0], [1.0, 3.0, 2.0])
    d = compare_bytes(a, b, 3, allow_nan=True)
    assert d.differing == 1 and d.max_ulp == 0 and d.max_abs == 0.0 and d.ok is False
    a, b = _pair([1.0, np.nan, 2.0], [1.5, np.nan, 2.0])
    d = compare_bytes(a, b, 3, allow_nan=True, mode="tolerance", max_ulp=1 << 22)
    assert d.max_ulp == 1 << 22 and d.max_abs == 0.5 and d.ok


# ---- issue 35: allow_nan, NMSE range, shapes past int64 ------------------------------------------

def test_allow_nan_never_lets_a_nan_match_a_number():
    """allow_nan means a NaN against a NaN: a NaN on one side only is outside any tolerance."""
    for other in (3.0, 0.0, -1e30, np.inf):
        a, b = _pair([1.0, np.nan, 2.0], [1.0, other, 2.0])
        for kw in ({"max_abs": 1e30}, {"max_ulp": 1 << 30}, {"nmse": 1e30}):
            for x, y in ((a, b), (b, a)):
                d = compare_bytes(x, y, 3, allow_nan=True, mode="tolerance", **kw)
                assert not d.ok, (other, kw)
                assert "1 element NaN on one side only" in d.reason and "index 1" in d.reason, d.reason
    a, b = _pair([1.0, np.nan, 2.0], [1.0, np.nan, 2.5])  # NaN with NaN, and a difference within bounds
    assert compare_bytes(a, b, 3, allow_nan=True, mode="tolerance", max_abs=1.0).ok
    nan_bits = np.array([0x7FC00000, 0x7FC00001], dtype="<u4").view("<f4")  # two NaN payloads still match
    assert compare_bytes(nan_bits[:1].tobytes(), nan_bits[1:].tobytes(), 1, allow_nan=True, mode="tolerance",
                         max_abs=0.0).ok


def test_nmse_of_small_magnitude_dumps_is_finite():
    """float32 squares of 1e-23 underflow to 0: the NMSE came out infinite. It is scale-free."""
    a = np.array([1.0, 2.0, 3.0, 4.0], dtype="<f4")
    b = np.array([1.0, 2.0, 3.0, 4.1], dtype="<f4")
    want = compare_bytes(a.tobytes(), b.tobytes(), 4).nmse
    for scale in (1e-23, 1e-30, 1e-38, 1e20, 1e35):
        sa, sb = (a * np.float32(scale)).astype("<f4"), (b * np.float32(scale)).astype("<f4")
        d = compare_bytes(sa.tobytes(), sb.tobytes(), 4, mode="tolerance", nmse=1e-2)
        assert np.isfinite(d.nmse) and abs(d.nmse - want) <= 1e-3 * want, (scale, d.nmse, want)
        assert d.ok, (scale, d.reason)
    tiny = np.array([1, 3], dtype="<u4").view("<f4")  # subnormals: squares far below float32's range
    d = compare_bytes(tiny.tobytes(), tiny[::-1].copy().tobytes(), 2)
    assert d.nmse == 2 * 2.0**2 / (1 + 3**2)  # (1-3)^2 + (3-1)^2 over 1^2 + 3^2, in units of the subnormal


def test_shape_whose_element_count_overflows_int64_is_refused():
    """np.prod([2**32, 2**32]) wraps to 0: two empty dumps matched that shape and PASSed."""
    for shape in ([2**32, 2**32], [2**40, 2**30, 16], [2**62, 4]):
        d = compare_bytes(b"", b"", 1, shape_a=shape, shape_b=shape)
        assert not d.ok and "meta.json shape" in d.reason, (shape, d.reason)


# ---- the account of a difference -----------------------------------------------------------

def test_row_len_defaults_to_one_row():
    a, b = _pair([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    d = compare_bytes(a, b)
    assert (d.row_len, d.first_position, d.first_element) == (3, 0, 2)
    e = compare_bytes(b"", b"")
    assert e.identical and e.ok and e.row_len == 1 and e.elements == 0 and e.reason == "identical bytes"


def test_reason_and_json_of_a_difference():
    a, b = _pair([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.5])
    d = compare_bytes(a, b, 2)
    assert d.reason == ("1 of 4 elements differ; first at index 3 (position 1, element 1): 4.0 vs 4.5; "
                        "max abs 0.5, max ULP 1048576, NMSE 0.00833")
    j = d.to_json()
    assert j["first_values"] == [4.0, 4.5] and j["identical"] is False and j["elements"] == 4
    assert compare_bytes(a, a, 2).to_json()["first_values"] is None


def test_shape_checks_each_side():
    a, _ = _pair([1.0, 2.0, 3.0, 4.0], [0.0])
    d = compare_bytes(a, a, 2, shape_a=[2, 3], shape_b=[2, 2])
    assert not d.ok and d.reason == "A: 16 bytes but meta.json shape [2, 3] needs 24 (truncated or stale dump)"
    d = compare_bytes(a, a, 2, shape_a=[2, 2], shape_b=[4, 1])
    assert not d.ok and d.reason == "shape mismatch: A [2, 2] vs B [4, 1]"
    d = compare_bytes(a[:-1], a, 2)
    assert d.reason == "A: 15 bytes is not a whole number of float32 (truncated?)"
    assert compare_bytes(b"", b"", 0, shape_a=[], shape_b=[]).ok
    assert not compare_bytes(a, a, 2, shape_a=[], shape_b=[]).ok
    assert compare_bytes(a, a, 2, shape_a=[4], shape_b=None).ok


def test_nan_reason_names_the_side_and_place():
    a, b = _pair([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, np.nan, 5.0])
    d = compare_bytes(a, b, 2)
    assert (d.nan_a, d.nan_b, d.ok) == (0, 1, False)
    assert d.reason.startswith("NaN in B (0 in A, 1 in B), first at index 2 (position 1, element 0); 2 of 4")
    both = np.array([np.nan, 1.0], dtype="<f4").tobytes()
    d = compare_bytes(both, both, 1)
    assert d.reason == "NaN in A and B (1 in A, 1 in B), first at index 0 (position 0, element 0) of A; identical bytes"
    assert (d.nan_a, d.nan_b, d.identical, d.ok) == (1, 1, True, False)
    allowed = compare_bytes(a, b, 2, allow_nan=True)
    assert allowed.reason.startswith("NaN in B (0 in A, 1 in B), first at index 2 (position 1, element 0); 2 of 4 "
                                     "elements differ")


def test_refusals_are_neither_identical_nor_ok():
    """Every refusal (truncation, stale shape, shape or length mismatch) says identical False and
    ok False: False itself, since the report's JSON shows it."""
    a = np.arange(4, dtype="<f4").tobytes()
    for d in (compare_bytes(a[:-1], a), compare_bytes(a, a[:-1]), compare_bytes(a, a, shape_a=[3]),
              compare_bytes(a, a, shape_b=[5]), compare_bytes(a, a, shape_a=[4], shape_b=[2, 2]),
              compare_bytes(a, a[:8])):
        assert d.identical is False and d.ok is False, d.reason
        assert d.to_json()["identical"] is False and d.to_json()["ok"] is False


def test_nmse_with_a_reference_of_small_values():
    """sum(a^2) under 1 is still a denominator: NMSE 0.0625 / 0.5, not inf."""
    a, b = _pair([0.5, 0.5], [0.5, 0.75])
    assert compare_bytes(a, b, 2).nmse == 0.125


def test_nan_only_in_a_is_located_in_a():
    a, b = _pair([1.0, 2.0, np.nan, 4.0], [1.0, np.nan, 3.0, 4.0])
    d = compare_bytes(a, b, 2)
    assert d.reason.startswith("NaN in A and B (1 in A, 1 in B), first at index 2 (position 1, element 0) of A")
    a, b = _pair([1.0, np.nan], [1.0, 2.0])
    assert compare_bytes(a, b, 2).reason.startswith("NaN in A (1 in A, 0 in B), first at index 1 (position 0, "
                                                    "element 1); 1 of 2 elements differ")


def test_length_mismatch_message():
    a = np.arange(6, dtype="<f4").tobytes()
    assert compare_bytes(a, a[:16]).reason == "length mismatch: A has 6 elements, B has 4"


def test_int32_and_half_dumps():
    """i32 dumps compare as integers; f16 NMSE is computed in float64 over the dump's values."""
    a = np.array([1, 2, 3, 4], dtype="<i4").tobytes()
    b = np.array([1, 2, 3, 7], dtype="<i4").tobytes()
    d = compare_bytes(a, b, 4, dtype="i32")
    assert d.first_values == (4, 7) and d.max_abs == 3.0 and not d.ok
    h = np.array([1.0, 2.0, 3.0, 4.0], dtype="<f2").tobytes()
    g = np.array([1.0, 2.0, 3.0, 5.0], dtype="<f2").tobytes()
    assert compare_bytes(h, g, 4, dtype="f16").nmse == 1.0 / 30.0


def test_nan_and_inf_notes_together_and_plural_infinities():
    a, b = _pair([np.nan, 1.0, np.inf, 2.0], [np.nan, 1.0, 5.0, -np.inf])
    d = compare_bytes(a, b, 2, mode="tolerance", max_abs=1.0, allow_nan=True)
    assert d.reason.startswith("NaN in A and B (1 in A, 1 in B), first at index 0 (position 0, element 0) of A; "
                               "Inf in A and B (1 in A, 1 in B), first at index 2 (position 1, element 0) of A; "
                               "outside tolerance (2 differing elements with an infinity, first at index 2 "
                               "(position 1, element 0)): "), d.reason


def test_bfloat16_dumps_are_the_high_half_of_float32():
    """bf16 elements widen exactly to float32 (bits << 16); a ULP is one step of the bf16 pattern,
    also for negative values, and -0 is 0 ULPs from +0."""
    a = np.array([0x3F80, 0x3FC0, 0xC000, 0x0000], dtype="<u2").tobytes()  # 1.0, 1.5, -2.0, +0
    b = np.array([0x3F80, 0x3FC1, 0xC001, 0x8000], dtype="<u2").tobytes()  # 1.0, 1.5078125, -2.015625, -0
    d = compare_bytes(a, b, 2, dtype="bf16")
    assert (d.elements, d.differing, d.first_index) == (4, 3, 1)
    assert d.first_values == (1.5, 1.5078125)
    assert (d.max_abs, d.max_ulp) == (0.015625, 1)
    assert d.nmse == (0.0078125 ** 2 + 0.015625 ** 2) / (1.0 + 2.25 + 4.0)


def test_int32_dumps_differ_by_value_also_below_zero():
    """For i32 the 'ULP' distance is the difference of the values, negative ones included; the NMSE
    denominator is summed without int32 overflow."""
    a = np.array([-5, 100000, 7], dtype="<i4").tobytes()
    b = np.array([3, 100000, 7], dtype="<i4").tobytes()
    d = compare_bytes(a, b, 3, dtype="i32")
    assert (d.first_values, d.max_abs, d.max_ulp) == ((-5.0, 3.0), 8.0, 8)
    assert d.nmse == 64.0 / (25.0 + 100000.0 ** 2 + 49.0)


def test_finite_note_when_either_side_has_a_nan_or_an_infinity():
    """The summary says its figures cover the finite elements whenever a side holds a NaN or an
    infinity, whichever side and kind it is, and only then."""
    for a, b, note in (([np.nan, 1.0], [0.0, 2.0], True), ([0.0, 1.0], [np.nan, 2.0], True),
                       ([np.inf, 1.0], [0.0, 2.0], True), ([0.0, 1.0], [np.inf, 2.0], True),
                       ([0.0, 1.0], [0.0, 2.0], False)):
        reason = compare_bytes(*_pair(a, b), 2, allow_nan=True).reason
        assert reason.endswith("NMSE 1 (finite elements)" if note else "NMSE 1"), (a, b, reason)


def test_sum_of_squares_by_chunks_is_the_whole_sum():
    from harness.run.dumpdiff import _sum_squares

    x = np.array([1.0, np.nan, 2.0, np.inf, 3.0, -4.0, 1e-30, 5.0], dtype="<f4")
    want = float(np.sum(np.array([1.0, 2.0, 3.0, -4.0, np.float32(1e-30), 5.0], dtype=np.float64) ** 2))
    for chunk in (1, 3, 8, 1 << 20):
        assert _sum_squares(x, chunk) == want, chunk


def test_byte_diff_counts_sign_changes_apart_from_ulps():
    """A sign change makes the ULP distance huge and meaningless: counted apart, and the max ULP
    over the elements whose signs agree is kept beside it."""
    base = np.array([1.0, 2.0, -3.0, 0.5], np.float32)
    head = np.array([1.0, np.nextafter(np.float32(2.0), np.float32(3.0)), 3.0, 0.5], np.float32)
    d = compare_bytes(base.tobytes(), head.tobytes(), 4, dtype="f32")
    assert (d.differing, d.sign_flips, d.max_ulp_same_sign) == (2, 1, 1) and d.max_ulp > 2**30
    flip = compare_bytes(base.tobytes(), (-base).tobytes(), 4, dtype="f32")  # every sign changes
    assert (flip.differing, flip.sign_flips, flip.max_ulp_same_sign) == (4, 4, 0)
