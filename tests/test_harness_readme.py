"""The criteria examples in README.md stay valid."""

from __future__ import annotations

import re
from pathlib import Path

from harness.spec import schema

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_yaml_example_validates():
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S)
    assert blocks
    text = blocks[0].replace(", ...]", "]")
    crits = schema.load_text(text, "README.md", ["default", "stub"], ["h_out", "logits"])
    assert {c.kind for c in crits} == {"equivalence", "ab_timing", "run", "artifact"}
