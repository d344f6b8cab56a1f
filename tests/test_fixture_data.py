"""The conformance fixtures under tests/data/qwen35 are the bytes their PROVENANCE.md records."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from engine_build import FIXTURES

ROW = re.compile(r"^\| (\S+) \| (\d+) \| .* \| ([0-9a-f]{64}) \|$")


def recorded(note: Path) -> dict[str, tuple[int, str]]:
    """file -> (bytes, sha256) from the table of a provenance note."""
    rows = {}
    for line in note.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), m.group(3))
    return rows


def test_every_fixture_file_has_its_recorded_sha256():
    rows = recorded(FIXTURES / "PROVENANCE.md")
    assert len(rows) == 31, f"expected the 31 rows of the table, read {len(rows)}"
    for name, (size, digest) in rows.items():
        data = (FIXTURES / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, digest), name


def test_no_unrecorded_file():
    own = {"PROVENANCE.md", ".gitattributes"}
    present = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*") if p.is_file()} - own
    assert present == set(recorded(FIXTURES / "PROVENANCE.md"))


def test_authors_notes_agree_with_the_table():
    """Each model's own PROVENANCE.md lists sha256 sums too: they must match ours."""
    ours = recorded(FIXTURES / "PROVENANCE.md")
    theirs = re.compile(r"^\| (\S+) \| .* \| (\d+) \| ([0-9a-f]{64}) \|$")
    for model in ("tiny-a", "tiny-b"):
        n = 0
        for line in (FIXTURES / model / "PROVENANCE.md").read_text(encoding="utf-8").splitlines():
            m = theirs.match(line)
            if m:
                n += 1
                assert ours[f"{model}/{m.group(1)}"] == (int(m.group(2)), m.group(3)), (model, m.group(1))
        assert n >= 13, f"{model}/PROVENANCE.md: read only {n} rows of its file table"
