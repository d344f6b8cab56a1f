"""Cross-entry criteria (configs/matrix.yaml `cross:`) are pre-registered like criteria files."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.matrix import spec as M
from harness.contract import registry
from harness.cli import load_registrable, main
from harness.contract.config import load_config

REPO = Path(__file__).resolve().parent.parent


def copy_repo_configs(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "configs", root / "configs")
    (root / "regressions").mkdir()
    return root


def test_register_matrix_cross_criteria(tmp_path):
    root = copy_repo_configs(tmp_path)
    reg = root / "regressions" / "registry.lock"
    assert main(["--root", str(root), "register", str(root / "configs" / "matrix.yaml"), "--registry", str(reg)]) == 0
    ids = [e.id for e in registry.load(reg)]
    assert ids == ["X1", "X2"]
    # the project's own registry holds the same digests (registered before results)
    mine = registry.current(registry.load(REPO / "regressions" / "registry.lock"))
    for c in load_registrable(load_config(root), [root / "configs" / "matrix.yaml"]):
        assert mine[c.id].digest == c.digest and c.file == "configs/matrix.yaml"


def test_changed_cross_criterion_is_not_as_registered(tmp_path):
    root = copy_repo_configs(tmp_path)
    mx = root / "configs" / "matrix.yaml"
    reg = root / "regressions" / "registry.lock"
    assert main(["--root", str(root), "register", str(mx), "--registry", str(reg)]) == 0
    mx.write_text(mx.read_text().replace("min_entries: 2", "min_entries: 3", 1))
    assert main(["--root", str(root), "register", str(mx), "--registry", str(reg)]) == 2  # refused
    m = M.load_matrix(mx, root)
    st = registry.status(registry.load(reg), M.registrable(m, "configs/matrix.yaml")[0])
    assert not st.ok and st.state == "changed"
