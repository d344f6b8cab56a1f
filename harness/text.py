"""Text from engines, criteria files and builds, made safe to show: every control character
(an escape sequence, NUL, a carriage return), bidirectional control (which reorders what a reader
sees) and character XML cannot hold becomes a visible escape (\\x1b, \\u202e). The report
writers (report.md, junit.xml, GitHub annotations) and the console (harness/console.py) pass
every text through `printable`; report.json keeps the data as it was."""

from __future__ import annotations

import re

# C0 (but tab and newline) and C1 controls, DEL; bidi marks, embeddings, overrides and isolates;
# line/paragraph separators; BOM; surrogates and the non-characters XML refuses
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                     "\ud800-\udfff\ufeff\ufffe\uffff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str) -> str:
    """text with each unsafe character written as its escape; tabs and newlines kept."""
    return _UNSAFE.sub(_escape, text)

