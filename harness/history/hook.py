"""What a finished report gets from the history: its A/B pictures beside report.md (linked from
their rows), and its place in the history store when one is configured ([tool.kite] history in
pyproject.toml, or KITE_HISTORY, which wins)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.history import commits, plots, words
from harness.history.plots import file_names
from harness.history.points import ab_detail, read_doc
from harness.history.store import Store
from harness.report.document import Report
from harness.contract.project import tool_setting

HISTORY_ENV = "KITE_HISTORY"
PLOTS_DIR = "plots"


def configured_store(root: Path) -> Path | None:
    """KITE_HISTORY, else [tool.kite] history (relative to the project), else None."""
    env = os.environ.get(HISTORY_ENV)
    if env:
        return Path(env)
    setting = tool_setting(root, "history")
    return root / setting if setting else None


def plot_report(doc: dict[str, Any], rdir: Path) -> dict[str, Any]:
    """Draw each A/B verdict's picture under rdir/plots/ (no link followed: a planted `plots` link is
    refused); what report.md links (`files`), or the note that plots need the extra."""
    ab = [r for r in doc.get("results", []) if r.get("kind") == "ab_timing" and (r.get("details") or {}).get("pairs")]
    if not ab:
        return {}
    if not plots.available():
        return {"note": plots.NEEDS}
    files = {}
    names = file_names([r["id"] for r in ab])
    for r in ab:
        rel = f"{PLOTS_DIR}/{names[r['id']]}.svg"
        d = ab_detail(r["details"])
        plots.write(rdir, rel, plots.ab_svg(f"{r['id']}: {r.get('title', '')}"[:110], d,
                                            words.label("ratio", d.get("pass_if"), d.get("ratio"))))
        files[r["id"]] = rel
    return {"files": files}


def add_report(store_path: Path, doc: dict[str, Any], source: str, repo: Path | None) -> bool:
    rd = read_doc(doc, source)
    rd.commit, when, _ = commits.commit_time(repo, rd.commit, rd.started)
    with Store(store_path) as st:
        return st.add(rd, when)


def after_report(root: Path, rep: Report, say: Callable[[str], None]) -> None:
    """verify's one call once its report is final. A picture or the store failing is said, never
    a reason to lose the verdicts."""
    try:
        drawn = plot_report(rep.doc, rep.dir)
        if drawn:
            rep.doc["plots"] = drawn
            rep.write()
    except Exception as e:  # noqa: BLE001 - matplotlib may fail in its own ways; the verdicts stand
        say(f"history: no pictures: {type(e).__name__}: {e}")
    try:
        store = configured_store(root)
        if store is not None and add_report(store, rep.doc, str(rep.dir / "report.json"), root):
            say(f"history: report added to {store}")
    except (OSError, HarnessError) as e:
        say(f"history: not added to the store: {e}")
