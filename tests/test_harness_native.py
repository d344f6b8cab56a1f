"""The harness against the real engine, when it is built (skipped otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.process import closing_counts, run_process

pytestmark = pytest.mark.native

REPO = Path(__file__).resolve().parent.parent
BUILT = [b for b in ("default", "stub") if (REPO / "build" / b / "bin" / "kite").exists()]


@pytest.mark.skipif(not BUILT, reason="the engine is not built (python -m harness build)")
@pytest.mark.parametrize("build", BUILT)
def test_info_json_matches_contract(build):
    r = run_process([str(REPO / "build" / build / "bin" / "kite"), "info", "--json"], timeout=30)
    assert r.ok, r.describe()
    info = json.loads(r.stdout)
    for key in ("kite_version", "abi_version", "build", "cuda"):
        assert key in info
    for key in ("compiled", "search", "bound", "available", "reason", "gates"):
        assert key in info["cuda"]
    assert info["cuda"]["compiled"] is (build == "default")


@pytest.mark.skipif(not BUILT, reason="the engine is not built (python -m harness build)")
def test_selftest_closing_line():
    r = run_process([str(REPO / "build" / BUILT[0] / "bin" / "kite"), "selftest"], timeout=60)
    assert not r.timed_out and r.signal is None, r.describe()
    assert closing_counts(r.stdout) is not None, r.stdout[-500:]
