"""Under GitHub Actions: report.md into the job's step summary, and one `::error` annotation per failed
criterion at its line in the criteria file (and per compiler error of a failed build)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TextIO

from harness.report.document import render_markdown
from harness.text import printable


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(file: str, line: int, title: str, message: str) -> str:
    """One workflow command line: `::error file=F,line=L,title=T::message`."""
    props = [f"file={_prop(printable(file))}"] + ([f"line={line}"] if line else []) + [f"title={_prop(printable(title))}"]
    return f"::error {','.join(props)}::{_data(printable(message))}"


def annotations(doc: dict[str, Any]) -> list[str]:
    out = []
    for r in doc.get("results", []):
        if r.get("verdict") == "FAIL":
            repro = f" (reproduce: {r['reproduce']})" if r.get("reproduce") else ""
            out.append(annotation(r["file"], int(r.get("line") or 0), f"{r['id']}: {r['title']}",
                                  r.get("reason", "") + repro))
    for name, b in (doc.get("builds") or {}).items():
        for part in ("engine", "module"):
            p = b.get(part) or {}
            for e in p.get("errors") or [] if p.get("status") == "failed" else []:
                file, _, rest = e.partition(":")
                line, _, msg = rest.partition(":")
                if line.isdigit():
                    out.append(annotation(file, int(line), f"build {name} ({part})", msg.strip()))
    return out


def publish(doc: dict[str, Any], rdir: Path, env: dict[str, str] | None = None,
            stream: TextIO | None = None) -> None:
    """Nothing outside GitHub Actions. The step summary is appended to (several steps may share it)."""
    env = os.environ if env is None else env
    stream = stream or sys.stdout
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(render_markdown(doc) + f"\n(report folder: `{rdir}`)\n\n")
        except OSError as e:
            print(f"harness: warning: cannot write the step summary {summary}: {e.strerror or e}", file=sys.stderr)
    if env.get("GITHUB_ACTIONS") == "true":
        for line in annotations(doc):
            print(line, file=stream, flush=True)
