"""`harness history`: its options (added to the harness's one argparse tree by harness/cli.py) and
what it does with them: add, show, changes, plot, html."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from harness.errors import HarnessError
from harness.history import changes, commits, gitlog, hook, page, plots, words
from harness.history.points import Reading, Skipped, parse_report, read_reports
from harness.history.store import Store, by_machine
from harness.report.document import Report, _table
from harness.contract.project import NoProject, locate

DESCRIPTION = ("Keep every report's figures by commit and machine in a SQLite store, find change points "
               "in each series, draw them (docs/HISTORY.md). The store: --store, else KITE_HISTORY, else "
               "[tool.kite] history in pyproject.toml, else reports/history.sqlite in the project.")
EXIT = "exit status: 0 done, 1 `changes` found a change point, 2 usage error or unreadable input"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, metavar="FILE", help="the history store (SQLite file)")
    sub = p.add_subparsers(dest="history_cmd", metavar="ACTION", required=True, help="what to do")
    a = sub.add_parser("add", help="add verify, matrix, merge or compare reports (folders, report.json files, "
                                   "CI artifact folders or .zip files); a report kept before changes nothing")
    a.add_argument("paths", nargs="+", type=Path, metavar="REPORT_DIR",
                   help="report folders, report.json files, folders of CI artifacts, .zip files")
    a.add_argument("--git", type=Path, metavar="DIR", help="the repository that knows the reports' commits "
                                                           "(their times; default: the project)")
    g = sub.add_parser("add-git", help="add every report.json that git keeps under PATH, at each commit that "
                                       "touched it (`git log -- PATH`); one that cannot be read is named and skipped")
    g.add_argument("path", metavar="PATH", help="a path in the repository, e.g. docs/results")
    g.add_argument("--rev", default="HEAD", help="whose history (default HEAD)")
    g.add_argument("--git", type=Path, metavar="DIR", help="the repository (default: the project)")
    s = sub.add_parser("show", help="print one series (criterion or workload) by commit, and its change points")
    s.add_argument("series", metavar="ID", help="a criterion or workload id")
    s.add_argument("--metric", metavar="M", help="default: ratio for an A/B criterion, compare.ratio for a "
                                                  "compare workload, else duration_s")
    s.add_argument("--rate", type=float, metavar="N", help="show N * 1000 / value: a time in ms for N events "
                                                            "as events per second (e.g. decode steps as tok/s)")
    s.add_argument("--svg", type=Path, metavar="FILE", help="also draw the series, change points marked")
    s.add_argument("--ylabel", help="the picture's value axis (default: the metric)")
    c = sub.add_parser("changes", help="change points of every series (or those named), per machine")
    c.add_argument("series", nargs="*", metavar="ID", help="criteria or workloads (default: all)")
    c.add_argument("--metric", metavar="M", help="only this metric (default: every metric)")
    pl = sub.add_parser("plot", help="draw a report's A/B pictures beside its report.md and link them")
    pl.add_argument("report", type=Path, metavar="REPORT_DIR", help="a report folder (holding report.json)")
    h = sub.add_parser("html", help="write a static page per criterion (series, change points, verdicts)")
    h.add_argument("out", type=Path, metavar="OUT", help="the folder to write the pages in")
    h.add_argument("--only", nargs="+", metavar="ID", help="only these criteria")


def _project_root(args: argparse.Namespace) -> Path | None:
    try:
        return locate(Path(args.root) if getattr(args, "root", None) else None).root
    except NoProject:
        return None


def store_path(args: argparse.Namespace, root: Path | None) -> Path:
    if args.store:
        return args.store
    configured = hook.configured_store(root) if root is not None else None
    if configured:
        return configured
    if root is None:
        raise HarnessError("history: no project here to keep the store in; give --store FILE or set KITE_HISTORY")
    return root / "reports" / "history.sqlite"


def run(args: argparse.Namespace) -> int:
    root = _project_root(args)
    act = args.history_cmd
    if act == "plot":
        return cmd_plot(args.report)
    path = store_path(args, root)
    read = [rd for p in args.paths for rd in read_reports(p)] if act == "add" else []  # all before any is kept
    if act == "add" and not read:
        raise HarnessError(f"history add: no report.json in {', '.join(map(str, args.paths))}")
    with Store(path, create=act in ("add", "add-git")) as st:
        if act == "add":
            return cmd_add(st, read, args.git or root)
        if act == "add-git":
            repo = args.git or root
            if repo is None:
                raise HarnessError("history add-git: no project here; give --git DIR")
            return cmd_add_git(st, repo, args.path, args.rev)
        if act == "show":
            return cmd_show(st, args.series, args.metric, args.rate, args.svg, args.ylabel)
        if act == "changes":
            return cmd_changes(st, args.series, args.metric)
        return cmd_html(st, args.out, args.only)


def _keep(st: Store, rd: Reading, repo: Path | None) -> bool:
    rd.commit, when, how = commits.commit_time(repo, rd.commit, rd.started)
    new = st.add(rd, when)
    print(f"{'added' if new else 'kept before'}  {rd.source}  ({rd.kind}, {rd.commit} at {when}"
          f"{' (run start)' if how != 'git' else ''}, {rd.machine.gpu})")
    return new


def _summary(st: Store, added: int, kept: int, skipped: int = 0) -> None:
    c = st.counts()
    print(f"history {st.path}: {added} added, {kept} kept before" + (f", {skipped} skipped" if skipped else "")
          + f"; {c['reports']} reports, {c['points']} values")


def cmd_add(st: Store, read: list[Reading | Skipped], repo: Path | None) -> int:
    new = []
    for rd in read:
        if isinstance(rd, Skipped):
            print(f"skipped  {rd}")
        else:
            new.append(_keep(st, rd, repo))
    _summary(st, sum(new), len(new) - sum(new), len(read) - len(new))
    return 0


def cmd_add_git(st: Store, repo: Path, path: str, rev: str) -> int:
    added = kept = skipped = 0
    for source, text in gitlog.kept_reports(repo, path, rev):
        try:
            rd = parse_report(text, source)
        except HarnessError as e:
            print(f"skipped  {e}")
            skipped += 1
            continue
        new = _keep(st, rd, repo)
        added += new
        kept += not new
    _summary(st, added, kept, skipped)
    return 0


def _default_metric(st: Store, series: str) -> str:
    ms = st.metrics(series)
    if not ms:
        known = st.series_ids()
        raise HarnessError(f"history: no series {series!r} in the store; known: {', '.join(known[:40]) or 'none'}")
    return next((m for m in ("ratio", "compare.ratio", "duration_s") if m in ms), ms[0])


def cmd_show(st: Store, series: str, metric: str | None, rate: float | None = None, svg: Path | None = None,
             ylabel: str | None = None) -> int:
    metric = metric or _default_metric(st, series)
    if metric not in st.metrics(series):
        raise HarnessError(f"history: {series} has no metric {metric!r}; it has {', '.join(st.metrics(series))}")
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise HarnessError(f"history show --rate must be a positive number, not {rate:g}")
    if svg is not None and not plots.available():
        raise HarnessError(f"history show --svg: {plots.NEEDS}")
    shown = f"{rate:g} x 1000 / {metric}" if rate else metric
    lines = []
    for machine, pts in by_machine(st.series(series, metric)).items():
        # a rate of a value <= 0 is no rate: shown as such, left out of the series
        shown_values = [(rate * 1000 / p.value if p.value > 0 else None) if rate else p.value for p in pts]
        print(f"{series} {shown} on {machine.label()}:")
        print(_table([[p.revision[:10] + (" (dirty)" if p.dirty else ""), p.commit_time, p.started,
                       f"{v:.6g}" if v is not None else f"— (value {p.value:g})"]
                      for p, v in zip(pts, shown_values, strict=True)],
                     ["commit", "commit time", "run started", shown]))
        kept = [(p.revision, v) for p, v in zip(pts, shown_values, strict=True) if v is not None]
        revs, values = [r for r, _ in kept], [v for _, v in kept]
        found = _print_changes(series, metric, values, revs)
        lines.append((machine.gpu if machine.gpu != "no GPU" else machine.cpu, revs, values, found))
        print()
    if svg is not None:
        axis = ylabel or (words.rate_label(metric, rate) if rate else words.label(metric))
        plots.write(svg.parent, svg.name, plots.series_svg(f"{series}: {axis}", axis, lines))
        print(f"picture: {svg}")
    return 0


def _print_changes(series: str, metric: str, values: list[float], revs: list[str]) -> list[changes.Change]:
    if not changes.available():
        print(changes.NEEDS)
        return []
    found = changes.find(values, revs)
    for c in found:
        print(changes.describe(c, series, metric))
    if not found:
        print(f"no change point ({len(values)} values; E-divisive, p <= {changes.PVALUE})")
    return found


def cmd_changes(st: Store, only: list[str], metric: str | None) -> int:
    if not changes.available():
        raise HarnessError(changes.NEEDS)
    n = 0
    for series in only or st.series_ids():
        for m in [metric] if metric else st.metrics(series):
            for machine, pts in by_machine(st.series(series, m)).items():
                found = changes.find([p.value for p in pts], [p.revision for p in pts])
                for c in found:
                    print(f"{series} {m} on {machine.gpu}: {changes.describe(c, series, m)}")
                n += len(found)
    print(f"{n} change point{'s' if n != 1 else ''}")
    return 1 if n else 0


def cmd_plot(rdir: Path) -> int:
    try:
        rep = Report.load(rdir)
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read {rdir}/report.json: {e}") from None
    drawn = hook.plot_report(rep.doc, rdir)
    if not drawn:
        print(f"{rdir}: no A/B verdict to draw")
        return 0
    rep.doc["plots"] = drawn
    rep.write()
    for cid, rel in (drawn.get("files") or {}).items():
        print(f"{cid}: {rdir / rel}")
    if drawn.get("note"):
        print(drawn["note"])
    return 0


def cmd_html(st: Store, out: Path, only: list[str] | None) -> int:
    unknown = [s for s in only or [] if s not in st.series_ids()]
    if unknown:
        raise HarnessError(f"history html --only: {', '.join(unknown)} not in the store")
    w = page.write_site(st, out, only)
    print(f"{len(w.pages)} pages, {len(w.pictures)} pictures: {out / 'index.html'}")
    return 0
