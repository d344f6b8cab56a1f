"""The win64-msvc matrix entry runs criteria that can run on the Windows host it targets: E1 and
E2a require `linux` (ELF facts, LD_LIBRARY_PATH), W1 and W2 (regressions/windows.yaml) check the
same claims the Windows way and require `windows`."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from harness.matrix import spec as M
from harness.run.probes import Probes
from harness.contract import schema
from harness.contract.config import load_config

REPO = Path(__file__).resolve().parent.parent


def _criteria(ref: str):
    cfg = load_config(REPO)
    file, _, cid = ref.partition("#")
    crits = schema.load_file(REPO / file, REPO, list(cfg.builds), list(cfg.dumps))
    return [c for c in crits if not cid or c.id == cid]


def _entry_criteria():
    """The entry's criteria besides the per-entry ones every entry runs (regressions/matrix/)."""
    ent = M.load_matrix(REPO / "configs" / "matrix.yaml", REPO).entries["win64-msvc"]
    return [c for ref in ent.criteria if not ref.startswith("regressions/matrix/") for c in _criteria(ref)]


@pytest.mark.parametrize("system, runnable", [("Windows", True), ("Linux", False)])
def test_win64_msvc_criteria_run_on_windows_only(system, runnable, monkeypatch):
    monkeypatch.setattr(platform, "system", lambda: system)
    crits = _entry_criteria()
    assert {c.id for c in crits} == {"W1", "W2"}
    probes = Probes(gpu_info=lambda: None, overrides={"nvcc": (True, "nvcc"), "host_cc": (True, "cc")})
    for c in crits:
        unmet = probes.unmet(c.requires)
        assert (unmet is None) == runnable, (c.id, unmet)
        if not runnable:
            assert unmet == "not Windows (Linux)"


def test_the_linux_criteria_would_skip_on_windows(monkeypatch):
    """Why the entry does not name E1/E2a: on its own host they would never run."""
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    probes = Probes(gpu_info=lambda: None, overrides={"nvcc": (True, "nvcc"), "host_cc": (True, "cc")})
    for ref in ("regressions/suite.yaml#E1", "regressions/suite.yaml#E2a"):
        (c,) = _criteria(ref)
        assert probes.unmet(c.requires) == "not Linux (Windows)"


def test_windows_criteria_mirror_e1_and_e2a():
    (e1,) = _criteria("regressions/suite.yaml#E1")
    (e2a,) = _criteria("regressions/suite.yaml#E2a")
    w1, w2 = _criteria("regressions/windows.yaml")
    assert w1.spec.files[-1].exports_exactly == e1.spec.files[-1].exports_exactly
    assert [s.variant.name for s in w2.spec.steps] == [s.variant.name for s in e2a.spec.steps]
    assert [s.expect.json for s in w2.spec.steps] == [s.expect.json for s in e2a.spec.steps]
    assert w2.spec.steps[2].variant.env == {"KITE_CUDA_LIB": "", "PATH": "{bin}"}
