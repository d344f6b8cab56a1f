"""junit.xml, one writer for every command (verify, compare): a test suite of cases, each passed,
failed (a short message and a readable body) or skipped (its reason). Every text goes through
`printable`, which covers every character XML 1.0 cannot hold: the file stays well-formed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from harness.text import printable

BODY_LIMIT = 20000  # characters of a failure's body
MESSAGE = 200  # characters of a failure's message attribute (clip(text, MESSAGE))


@dataclass
class Case:
    classname: str
    name: str
    seconds: float
    failure: str | None = None  # the message (one line, clipped by the caller); None: not failed
    failure_type: str = ""
    body: str = ""  # the failure's readable account (labelled lines)
    skipped: str | None = None  # the reason; None: not skipped
    out: str = ""  # system-out


def clip(s: str, n: int = 120) -> str:
    """One line of at most n characters (… marks a cut)."""
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def render(name: str, cases: list[Case], timestamp: str | None = None) -> str:
    fails = sum(c.failure is not None for c in cases)
    skips = sum(c.failure is None and c.skipped is not None for c in cases)
    attrs = {"name": name, "tests": str(len(cases)), "failures": str(fails), "errors": "0", "skipped": str(skips),
             "time": f"{sum(c.seconds for c in cases):.3f}"}
    if timestamp is not None:
        attrs["timestamp"] = timestamp
    suite = ET.Element("testsuite", attrs)
    for c in cases:
        tc = ET.SubElement(suite, "testcase", {"classname": c.classname, "name": c.name, "time": f"{c.seconds:.3f}"})
        if c.failure is not None:
            f = ET.SubElement(tc, "failure", {"message": c.failure, "type": c.failure_type})
            f.text = c.body[:BODY_LIMIT]
        elif c.skipped is not None:
            ET.SubElement(tc, "skipped", {"message": c.skipped})
        ET.SubElement(tc, "system-out").text = c.out
    for el in suite.iter():
        el.text = printable(el.text) if el.text else el.text
        el.attrib.update({k: printable(v) for k, v in el.attrib.items()})
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
