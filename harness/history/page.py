"""`history html OUT`: a static page per criterion (its series, change points and verdicts) and
an index, with the pictures as SVG files beside them. No script or style from elsewhere: the
folder works offline and as a CI artifact. A small inline script reports a picture that did not
load (console error) and counts those shown (body's data-plots-shown), for people and for tests."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import confined
from harness.history import changes, plots, words
from harness.history.points import Machine
from harness.history.plots import file_name, file_names
from harness.history.store import Store, by_machine

CHECK = """<script>
window.addEventListener("load", function () {
  var shown = 0;
  for (var i = 0; i < document.images.length; i++) {
    var img = document.images[i];
    if (img.complete && img.naturalWidth > 0) { shown++; } else { console.error("plot not shown: " + img.src); }
  }
  document.body.setAttribute("data-plots-shown", String(shown));
});
</script>"""

STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:75em}table{border-collapse:collapse;font-size:90%}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}img{max-width:100%}"
         ".FAIL,.regressed,.bytes-changed,.error{color:#b00}.PASS,.improved,.equivalent,.identical{color:#070}"
         ".note{color:#555}")


@dataclass
class Written:
    pages: list[Path] = field(default_factory=list)
    pictures: list[Path] = field(default_factory=list)


def _doc(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + f"\n{CHECK}\n</body></html>\n")


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page_metrics(st: Store, series: str) -> list[str]:
    """The metrics drawn on a criterion's page: an A/B verdict's ratio and each side's figure,
    else the duration."""
    ms = st.metrics(series)
    chosen = [m for m in ms if m in ("ratio", "compare.ratio") or m.startswith(("a.", "b."))]
    return chosen or [m for m in ms if m == "duration_s"]


def last_per_machine(verdicts: list[dict[str, Any]]) -> dict[Machine, dict[str, Any]]:
    """Each machine's last verdict (verdicts in commit-time order)."""
    return {v["machine"]: v for v in verdicts}


def _verdict(v: dict[str, Any]) -> str:
    return f"<span class=\"{html.escape(v['verdict'])}\">{html.escape(v['verdict'])}</span>"


def criterion_page(st: Store, series: str, name: str, out: Path, drawn: Written) -> str:
    esc = html.escape
    verdicts = st.verdicts(series)
    title = next((v["title"] for v in reversed(verdicts) if v["title"]), "")
    last_ab = next((v for v in reversed(verdicts) if v["detail"]), None)
    pass_if, ratio = (last_ab["detail"].get("pass_if"), last_ab["detail"].get("ratio")) if last_ab else (None, None)
    body = [f"<p><a href=\"index.html\">all criteria</a></p><h1>{esc(series)}</h1>"
            + (f"<p class=\"title\">{esc(title)}</p>" if title else "")]
    if verdicts:
        body.append(_table(["machine", "last verdict", "at", "reason"],
                           [[esc(m.label()), _verdict(v), esc(v["revision"][:10]), esc(v["reason"])]
                            for m, v in last_per_machine(verdicts).items()]))
    can_plot, can_find = plots.available(), changes.available()
    if not can_plot:
        body.append(f"<p class=\"note\">{esc(plots.NEEDS)}</p>")
    for metric in page_metrics(st, series):
        axis = words.label(metric, pass_if, ratio)
        body.append(f"<h2>{esc(axis)}</h2><p class=\"note\">metric <code>{esc(metric)}</code></p>")
        lines, rows, found_rows = [], [], []
        for machine, pts in by_machine(st.series(series, metric)).items():
            revs, vals = [p.revision for p in pts], [p.value for p in pts]
            found = changes.find(vals, revs) if can_find else []
            lines.append((machine.gpu if machine.gpu != "no GPU" else machine.cpu, revs, vals, found))
            rows += [[esc(p.revision[:10]) + (" (dirty)" if p.dirty else ""), esc(p.commit_time),
                      esc(machine.label()), f"{p.value:.6g}"] for p in pts]
            found_rows += [[esc(machine.label()), esc(c.commit_range()), f"{c.median_before:.4g}",
                            f"{c.median_after:.4g}", f"{c.size * 100:+.1f} %", esc(changes.pvalue_text(c)),
                            f"<code>{esc(c.hint_text(series, metric))}</code>"] for c in found]
        if can_plot:
            rel = f"plots/{name}/series-{file_name(metric)}.svg"
            drawn.pictures.append(plots.write(out, rel, plots.series_svg(f"{series}: {axis}", axis, lines)))
            body.append(f"<img src=\"{esc(rel)}\" alt=\"{esc(series)} {esc(metric)} by commit\">")
        if not can_find:
            body.append(f"<p class=\"note\">{esc(changes.NEEDS)}</p>")
        elif found_rows:
            body.append(_table(["machine", "commits", "median before", "after", "size", "p", "next step"],
                               found_rows))
        else:
            body.append("<p>no change point</p>")
        body.append(f"<details><summary>{len(rows)} values</summary>"
                    + _table(["commit", "commit time", "machine", "value"], rows) + "</details>")
    if verdicts:
        body.append("<h2>Verdicts</h2>")
        if last_ab and can_plot:
            rel = f"plots/{name}/verdict.svg"
            drawn.pictures.append(plots.write(out, rel, plots.ab_svg(
                f"{series} at {last_ab['revision'][:10]} ({last_ab['gpu']})", last_ab["detail"],
                words.label("compare.ratio" if last_ab["kind"] == "compare" else "ratio", pass_if, ratio))))
            body.append(f"<p>The last timed verdict, at {esc(last_ab['revision'][:10])}:</p>"
                        f"<img src=\"{esc(rel)}\" alt=\"{esc(series)} pair ratios\">")
        body.append(_table(["commit", "commit time", "machine", "verdict", "reason"],
                           [[esc(v["revision"][:10]), esc(v["commit_time"]), esc(v["machine"].label()), _verdict(v),
                             esc(v["reason"])] for v in reversed(verdicts)]))
    return _doc(f"kite history: {series}" + (f": {title}" if title else ""), body)


def write_site(st: Store, out: Path, only: list[str] | None = None) -> Written:
    """index.html and one page per criterion (all, or those named) under out; no two criteria share
    a page or a picture, whatever their ids (plots.file_names)."""
    drawn = Written()
    out.mkdir(parents=True, exist_ok=True)
    ids = [s for s in st.series_ids() if not only or s in only]
    names = file_names(ids, taken=["index", "plots"])
    rows = []
    for series in ids:
        page = confined.write_text(out, f"{names[series]}.html", criterion_page(st, series, names[series], out, drawn))
        drawn.pages.append(page)
        v = st.verdicts(series)
        last = last_per_machine(v)
        title = next((x["title"] for x in reversed(v) if x["title"]), "")
        rows.append([f"<a href=\"{html.escape(page.name)}\">{html.escape(series)}</a>", html.escape(title),
                     "<br>".join(f"{_verdict(x)} at {html.escape(x['revision'][:10])} on {html.escape(m.label())}"
                                 for m, x in last.items()), str(len(v))])
    c = st.counts()
    index = _doc("kite history", ["<h1>kite history</h1>",
                                  f"<p>{c['reports']} reports, {c['machines']} machines, {c['points']} values.</p>",
                                  _table(["criterion", "title", "last verdict per machine", "verdicts"], rows)])
    drawn.pages.insert(0, confined.write_text(out, "index.html", index))
    return drawn
