"""Every criterion in a committed registry keeps its registered digest: a change to the canonical
form (harness/contract/digest.py) or to the loader that moved one would turn a registered claim into
"not as registered" without a recorded event."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import load_registrable
from harness.contract import depends, registry
from harness.contract.config import load_config

REPO = Path(__file__).resolve().parent.parent
PROJECTS = [REPO, REPO / "examples" / "toy-engine"]


@pytest.mark.parametrize("root", PROJECTS, ids=lambda p: p.name)
def test_every_registered_criterion_keeps_its_digest(root):
    cfg = load_config(root)
    current = {i: e for i, e in registry.current(registry.load(root / "regressions" / "registry.lock")).items()
               if e.event in ("register", "amend")}
    assert current
    files = sorted({e.file for e in current.values()})
    crits = {c.id: c for c in load_registrable(cfg, [root / f for f in files])}
    moved = {i: (e.digest, crits[i].digest) for i, e in current.items() if i in crits and crits[i].digest != e.digest}
    assert moved == {}
    # each registered id is still in its file (a vanished one is checked elsewhere; here: it is digested)
    assert sorted(i for i in current if i not in crits) == []


@pytest.mark.parametrize("root", PROJECTS, ids=lambda p: p.name)
def test_every_recorded_dependency_keeps_its_digest(root):
    """The canonical form also digests model recipes and build entries (`depends` lines)."""
    cfg = load_config(root)
    entries = registry.load(root / "regressions" / "registry.lock")
    rec = registry.current_depends(entries)
    files = sorted({e.file for e in registry.current(entries).values()})
    crits = {c.id: c for c in load_registrable(cfg, [root / f for f in files]) if c.id in rec}
    moved = {i: sorted(k for k, d in depends.dependency_digests(cfg, c).items()
                       if registry.depends_map(rec[i]).get(k) != d)
             for i, c in crits.items()
             if registry.dependency_digest(depends.dependency_digests(cfg, c)) != rec[i].digest}
    assert moved == {}
