"""Property test: any single changed element is located exactly (needs hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.run.dumpdiff import compare_bytes

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


from test_harness_compare import dump, flip  # noqa: E402  (one copy of the helpers)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 79), st.integers(1, 1000))
def test_any_single_change_is_located(index, ulps):
    a = np.abs(dump()) + 1.0
    b = flip(a, index, ulps)
    d = compare_bytes(a.tobytes(), b.tobytes(), 16)
    assert d.first_index == index and d.differing == 1 and d.max_ulp == ulps
    assert (d.first_position, d.first_element) == divmod(index, 16)
