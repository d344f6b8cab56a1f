"""Text from an engine's output or a criterion's title reaches report.md, junit.xml, GitHub
annotations and the console with every control character (escape sequences, NUL, carriage return)
and bidirectional control escaped, and a `|` escaped in Markdown tables (issue 35, Low)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.report import github
from harness.report.document import _table, render_junit, render_markdown

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX fake engine")

# what a hostile engine prints: colour and cursor sequences, a NUL, a lone CR, bidi override and
# isolate, a pipe that would end a table cell
SAID = r"\x1b[31mred\x1b[0m\x1b]0;title\x07 nul\x00 \u202eevil\u2066x\u2069 a|b"
UNSAFE = ["\x1b", "\x00", "\r", "\x07", "\u202e", "\u2066", "\u2069"]


def _crit(title: str) -> str:
    return f"""criteria:
  - id: X1
    title: "{title}"
    kind: run
    runs:
      - name: one
        args: [info]
        env: {{FAKE_EXIT: "3", FAKE_SAY: '{SAID}'}}
"""


def test_printable_escapes_each_unsafe_character():
    from harness.report.document import cell
    from harness.text import printable

    assert printable("a\x1b[1mb\x00c\rd\u202ee\u200ff\ufeffg\x85h\x7fi\tj\nk") == \
        "a\\x1b[1mb\\x00c\\x0dd\\u202ee\\u200ff\\ufeffg\\x85h\\x7fi\tj\nk"
    assert printable("plain é ü 中 text") == "plain é ü 中 text"
    assert cell("a|b\nc") == "a\\|b c"


def test_a_pipe_in_a_cell_does_not_split_the_row():
    rows = _table([["x", "a|b|c", 1.5]], ["id", "reason", "s"]).splitlines()
    assert rows[2].replace("\\|", "").count("|") == 4, rows


def test_hostile_engine_text_is_escaped_in_every_report(fake_repo):
    f = fake_repo.criteria(_crit("bidi \u202etitle\u202c in the title"))
    fake_repo.register(f)
    r = subprocess.run([sys.executable, "-m", "harness", "--root", str(fake_repo.root), "verify"], cwd=REPO,
                       capture_output=True, timeout=300,
                       env={**os.environ, "GITHUB_ACTIONS": "true",
                            "GITHUB_STEP_SUMMARY": str(fake_repo.root / "summary.md")})
    assert r.returncode == 1, r.stderr
    doc = fake_repo.report()
    reason = doc["results"][0]["reason"]
    assert "\x1b[31m" in reason and "\u202e" in reason  # report.json keeps the data as it was
    d = fake_repo.reports / "latest"
    shown = {"report.md": (d / "report.md").read_text(), "junit.xml": (d / "junit.xml").read_text(),
             "console": r.stderr.decode(), "annotations": r.stdout.decode(),
             "step summary": (fake_repo.root / "summary.md").read_text(),
             "report --format md": subprocess.run([sys.executable, "-m", "harness", "report", str(d)], cwd=REPO,
                                                  capture_output=True, text=True, timeout=120).stdout}
    for where, text in shown.items():
        bad = [c for c in UNSAFE if c in text]
        assert bad == [], (where, bad)
        assert "\\x1b[31mred" in text and "\\u202eevil" in text, where
    ET.fromstring(shown["junit.xml"])  # well-formed
    row = next(ln for ln in shown["report.md"].splitlines() if ln.startswith("| X1"))
    assert row.replace("\\|", "").count("|") == 8, row  # 7 columns: the engine's `a|b` stays in its cell
    assert "::error file=regressions/suite.yaml" in shown["annotations"]


def test_writers_escape_a_document_given_to_them():
    """merge and `report` render documents they did not make: the writers escape, not the runner."""
    r = {"id": "A1", "title": "t\u202e", "kind": "run", "file": "f|.yaml", "line": 3, "digest": "sha256:" + "0" * 64,
         "verdict": "FAIL", "reason": "x\x1b[2Jy|z", "details": {}, "duration_s": 0.5}
    doc = {"results": [r], "summary": {"total": 1, "failed": 1}}
    for text in (render_markdown(doc), render_junit(doc), "\n".join(github.annotations(doc))):
        assert not [c for c in UNSAFE if c in text], text

