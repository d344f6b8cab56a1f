"""The harness against the real engine (built on first use, as the other native tests build it)."""

from __future__ import annotations

import json

import pytest

from harness.process import closing_counts, run_process

from engine_build import build_engine, kite_bin  # noqa: F401

pytestmark = pytest.mark.native


@pytest.mark.parametrize("build", ["default", "stub"])
def test_info_json_matches_contract(build):
    r = run_process([str(build_engine(build)), "info", "--json"], timeout=30)
    assert r.ok, r.describe()
    info = json.loads(r.stdout)
    for key in ("kite_version", "abi_version", "build", "cuda"):
        assert key in info
    for key in ("compiled", "search", "bound", "available", "reason", "gates"):
        assert key in info["cuda"]
    assert info["cuda"]["compiled"] is (build == "default")


def test_selftest_closing_line(kite_bin):
    r = run_process([str(kite_bin), "selftest"], timeout=60)
    assert not r.timed_out and r.signal is None, r.describe()
    assert closing_counts(r.stdout) is not None, r.stdout[-500:]
