"""Pictures (SVG, matplotlib, optional: `pip install -e '.[plots]'`): an A/B verdict's pair ratios
with its interval, bar and A/A floor; a history series with its change points marked. Without
matplotlib, `available()` is False and NEEDS says what to install; nothing else changes."""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import confined
from harness.history.changes import Change

NEEDS = "plots need matplotlib: pip install -e '.[plots]'"
_BAR = re.compile(r"^\s*(ci_lower|ci_upper|median)\s*(>=|<=|>|<)\s*([0-9.eE+-]+)\s*$")


def file_name(series: str) -> str:
    """A criterion id as a file name (ids are letters, digits, - and _; anything else becomes _)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", series).lstrip(".") or "_"


def file_names(ids: Sequence[str], taken: Sequence[str] = ()) -> dict[str, str]:
    """A file name per id, no two alike even where the file system ignores case, none of `taken`
    (e.g. "index"): ids that read alike as names ("A/B", "A_B", "a_b") get -2, -3, ... in id order."""
    used = {t.casefold() for t in taken}
    out = {}
    for i in sorted(set(ids)):
        base = name = file_name(i)
        n = 1
        while name.casefold() in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name.casefold())
        out[i] = name
    return out


def _pyplot():  # noqa: ANN202 - matplotlib.pyplot, set up for files only
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    # text.parse_math off: every label is shown as written ("$x$" in an id is no formula to parse)
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "kite", "font.size": 9,
                                "text.parse_math": False})
    import matplotlib.pyplot as plt

    return plt


def available() -> bool:
    return _pyplot() is not None


def threshold(pass_if: Any) -> tuple[str, float] | None:
    """('ci_lower', 1.05) from 'ci_lower >= 1.05'; None when the bar is not one comparison."""
    m = _BAR.match(pass_if) if isinstance(pass_if, str) else None
    try:
        return (m.group(1), float(m.group(3))) if m else None
    except ValueError:
        return None


def _axis(label: str, width: int) -> str:
    """A label in lines no longer than the axis it stands beside."""
    return "\n".join(textwrap.wrap(label, width)) or label


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return buf.getvalue()


def ab_svg(title: str, d: dict[str, Any], ylabel: str = "") -> str:
    """One A/B verdict: each pair's ratio (dots), the median and its interval (band), the bar
    (dashed) or a compare's margin (dotted), and the A/A floor's pair ratios and interval (grey),
    on one ratio axis."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    try:
        ratios = [r for r in d.get("ratios") or [] if r is not None]
        ax.plot(range(1, len(ratios) + 1), ratios, "o", color="#1f77b4", label="pair ratio")
        if d.get("ci_lower") is not None and d.get("ci_upper") is not None:
            ax.axhspan(d["ci_lower"], d["ci_upper"], color="#1f77b4", alpha=0.15,
                       label=f"{(d.get('confidence') or 0.95) * 100:g}% CI [{d['ci_lower']:.4g}, {d['ci_upper']:.4g}]")
        if d.get("median") is not None:
            ax.axhline(d["median"], color="#1f77b4", lw=1, label=f"median {d['median']:.4g}")
        aa = d.get("aa") or {}
        aa_ratios = [r for r in aa.get("ratios") or [] if r is not None]
        if aa_ratios:
            ax.plot(range(1, len(aa_ratios) + 1), aa_ratios, "x", color="grey", label="A/A pair ratio")
        if aa.get("ci_lower") is not None and aa.get("ci_upper") is not None:
            ax.axhspan(aa["ci_lower"], aa["ci_upper"], color="grey", alpha=0.15,
                       label=f"A/A floor [{aa['ci_lower']:.4g}, {aa['ci_upper']:.4g}]")
        bar = threshold(d.get("pass_if"))
        if bar:
            ax.axhline(bar[1], color="#d62728", ls="--", lw=1, label=f"pass if {d['pass_if']}")
        band = d.get("band")
        if isinstance(band, list) and len(band) == 2:
            for i, edge in enumerate(band):
                ax.axhline(edge, color="#2ca02c", ls=":", lw=1,
                           label=f"equivalent within [{band[0]:.4g}, {band[1]:.4g}]" if i == 0 else None)
        ax.set_xlabel("pair (in the order run)")
        ax.set_ylabel(_axis(ylabel or f"ratio {d.get('ratio') or ''}".strip(), 30))
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        return _svg(fig)
    finally:
        plt.close(fig)


def series_svg(title: str, ylabel: str, lines: Sequence[tuple[str, Sequence[str], Sequence[float], Sequence[Change]]],
               ) -> str:
    """A series by commit, one line per machine (label, commits, values, changes), each change
    marked by a vertical line between its two commits and its size."""
    plt = _pyplot()
    n = max((len(c) for _, c, _, _ in lines), default=0)
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.4, 0.32 * n + 2)), 3.2))
    try:
        order: dict[str, int] = {}  # one x position per commit, in order of appearance
        for _, commits, _, _ in lines:
            for c in commits:
                order.setdefault(c, len(order))
        for label, commits, values, found in lines:
            xs = [order[c] for c in commits]
            ax.plot(xs, values, "o-", ms=3, lw=1, label=label)
            for ch in found:
                x = (order[ch.before] + order[ch.after]) / 2
                ax.axvline(x, color="#d62728", ls="--", lw=1)
                ax.annotate(f"{ch.size * 100:+.1f}%", (x, max(values)), fontsize=7, color="#d62728",
                            ha="left", va="top", rotation=90)
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels([c[:7] for c in order], rotation=90, fontsize=6)
        ax.set_xlabel("commit (in commit-time order)")
        ax.set_ylabel(_axis(ylabel, 36))
        ax.set_title(title, fontsize=9)
        if len(lines) > 1:
            ax.legend(fontsize=7)
        return _svg(fig)
    finally:
        plt.close(fig)


def write(root: Path, rel: str, svg: str) -> Path:
    """root/rel, written without following a link on the way (a planted `plots` link in a report
    folder is refused, not followed out of it)."""
    root.mkdir(parents=True, exist_ok=True)
    return confined.write_text(root, rel, svg)
