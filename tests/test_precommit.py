"""The pre-commit configuration pins ruff's hooks to a release and keeps ruff-format manual."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def test_ruff_hooks_are_pinned():
    doc = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    (ruff,) = [r for r in doc["repos"] if r["repo"] == "https://github.com/astral-sh/ruff-pre-commit"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", ruff["rev"]), ruff["rev"]
    hooks = {h["id"]: h for h in ruff["hooks"]}
    assert set(hooks) == {"ruff-check", "ruff-format"}
    assert hooks["ruff-format"]["stages"] == ["manual"]  # until the tree is formatted in one commit
