"""Pictures: each A/B verdict of a real report drawn beside its report.md and linked from its row;
a history series with its change points; without matplotlib, a note and nothing else."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from harness.history import plots
from harness.history.changes import Change
from harness.report.document import render_markdown

pytest.importorskip("matplotlib")  # the plots extra; .[dev] and CI install it

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "history" / "h200-dead401"  # a real H200 report, kept as test data
SVG = "{http://www.w3.org/2000/svg}svg"


def check_svg(path: Path, low: int = 4_000, high: int = 200_000) -> ET.Element:
    """A well-formed SVG document of a sensible size (not empty, not a runaway)."""
    assert low < path.stat().st_size < high, path.stat().st_size
    root = ET.parse(path).getroot()
    assert root.tag == SVG
    return root


def real_report(tmp_path: Path) -> Path:
    d = tmp_path / "report"
    d.mkdir()
    shutil.copy(REAL / "report.json", d / "report.json")
    return d


def ab_ids(doc: dict) -> list[str]:
    return [r["id"] for r in doc["results"] if r["kind"] == "ab_timing" and r["details"].get("pairs")]


def test_a_real_reports_ab_verdicts_are_drawn_and_linked(tmp_path, capsys):
    d = real_report(tmp_path)
    ids = ab_ids(json.loads((d / "report.json").read_text()))
    assert len(ids) == 7
    assert main(["history", "plot", str(d)]) == 0
    for cid in ids:
        root = check_svg(d / "plots" / f"{cid}.svg")
        text = ET.tostring(root, encoding="unicode")
        assert "pair ratio" in text and "pass if" in text  # the legend: pairs and the bar
    e8b = ET.tostring(ET.parse(d / "plots" / "E8b.svg").getroot(), encoding="unicode")
    assert "A/A floor" in e8b and "A/A pair ratio" in e8b and "95% CI [1.235, 1.417]" in e8b
    md = (d / "report.md").read_text()
    for cid in ids:
        assert f"([plot](plots/{cid}.svg))" in md
    assert md.count("[plot](") == len(ids)


def test_without_matplotlib_the_report_says_so_and_nothing_else_changes(tmp_path, monkeypatch, capsys):
    d = real_report(tmp_path)
    before = render_markdown(json.loads((d / "report.json").read_text()))
    monkeypatch.setattr(plots, "_pyplot", lambda: None)
    assert main(["history", "plot", str(d)]) == 0
    assert plots.NEEDS in capsys.readouterr().out
    after = (d / "report.md").read_text()
    assert not (d / "plots").exists()
    note = f"*{plots.NEEDS}*\n\n"
    assert note in after and after.replace(note, "", 1) == before


def test_verify_draws_its_ab_pictures(fake_repo, monkeypatch):
    from tests.test_history_store import AB

    monkeypatch.delenv("KITE_HISTORY", raising=False)
    fake_repo.register(fake_repo.criteria(AB))
    assert fake_repo.verify() == 0
    rdir = fake_repo.reports / "latest"
    check_svg(rdir / "plots" / "AB.svg")
    assert "([plot](plots/AB.svg))" in (rdir / "report.md").read_text()


def test_a_series_picture_marks_its_change_points(tmp_path):
    commits = [f"{i:02d}bbbbbbb" for i in range(12)]
    values = [10.0] * 6 + [11.0] * 6
    ch = Change(6, commits[5], commits[6], 10.0, 11.0, 0.005)
    p = plots.write(tmp_path, "s.svg", plots.series_svg("E8b: ratio", "ratio", [("H200", commits, values, [ch])]))
    text = ET.tostring(check_svg(p), encoding="unicode")
    assert "+10.0%" in text and "00bbbbb" in text


@pytest.mark.parametrize("bar, want", [("ci_lower >= 1.05", ("ci_lower", 1.05)), ("ci_upper <= 1.3", ("ci_upper", 1.3)),
                                       ("ci_lower >= 1 and x", None), (None, None), ("median > 1e400x", None)])
def test_threshold_of_a_bar(bar, want):
    assert plots.threshold(bar) == want


def test_the_docs_picture_is_a_small_valid_svg():
    p = REPO / "docs" / "history-decode.svg"
    root = check_svg(p, high=60_000)
    assert "decode tok/s" in ET.tostring(root, encoding="unicode")
    assert "history-decode.svg" in (REPO / "docs" / "PERFORMANCE.md").read_text()


def test_show_draws_a_rate_series_with_its_change_points(tmp_path, capsys):
    """A store of 12 synthetic reports: decode ms 50 at six commits, then 45 (a planted speed-up)."""
    pytest.importorskip("signal_processing_algorithms")
    doc = json.loads((REAL / "report.json").read_text())
    e8b = next(r for r in doc["results"] if r["id"] == "E8b")
    folder = tmp_path / "reports"
    for i in range(12):
        ms = (50.0 if i < 6 else 45.0) + 0.1 * (i % 3)
        pairs = [{**p, "b": ms} for p in e8b["details"]["pairs"]]
        r = {**e8b, "details": {**e8b["details"], "pairs": pairs}}
        d = folder / f"r{i:02d}"
        d.mkdir(parents=True)
        (d / "report.json").write_text(json.dumps({**doc, "git": {"commit": f"{i:02d}c0ffee"},
                                                   "started": f"2026-12-0{1 + i // 10}T0{i % 10}:00:00Z",
                                                   "results": [r]}))
    store, svg = tmp_path / "h.sqlite", tmp_path / "decode.svg"
    assert main(["history", "--store", str(store), "add", str(folder)]) == 0
    capsys.readouterr()
    assert main(["history", "--store", str(store), "show", "E8b", "--metric", "b.timings.decode_ms",
                 "--rate", "64", "--svg", str(svg), "--ylabel", "decode tok/s"]) == 0
    out = capsys.readouterr().out
    assert "| 00c0ffee " in out and "1280" in out  # 64 x 1000 / 50 ms
    assert "change at 06c0ffee (after 05c0ffee)" in out
    assert "the commits to check: git log --oneline --end-of-options 05c0ffee..06c0ffee --" in out
    text = ET.tostring(check_svg(svg), encoding="unicode")
    assert "decode tok/s" in text and "+11." in text  # the change point's size, marked
    unlabelled = tmp_path / "unlabelled.svg"  # the default label: a time as a rate, higher is better
    assert main(["history", "--store", str(store), "show", "E8b", "--metric", "b.timings.decode_ms",
                 "--rate", "64", "--svg", str(unlabelled)]) == 0
    assert "64 x 1000 / b.timings.decode_ms; higher is better" in unlabelled.read_text()
    assert main(["history", "--store", str(store), "show", "E8b", "--rate", "0"]) == 2
    assert main(["history", "--store", str(store), "changes", "E8b", "--metric", "b.timings.decode_ms"]) == 1


def test_a_report_drawn_after_it_was_added_is_still_the_same_report(tmp_path, capsys):
    d = real_report(tmp_path)
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(d)]) == 0
    assert main(["history", "plot", str(d)]) == 0
    assert "plots" in json.loads((d / "report.json").read_text())
    capsys.readouterr()
    assert main(["history", "--store", str(store), "add", str(d)]) == 0
    assert "0 added, 1 kept before" in capsys.readouterr().out


def test_a_picture_that_fails_costs_verify_nothing(fake_repo, monkeypatch):
    from tests.test_history_store import AB

    def broken(*a, **k):
        raise RuntimeError("planted: the renderer failed")

    monkeypatch.delenv("KITE_HISTORY", raising=False)
    monkeypatch.setattr(plots, "ab_svg", broken)
    fake_repo.register(fake_repo.criteria(AB))
    messages: list[str] = []
    assert fake_repo.verify(messages=messages) == 0
    assert "history: no pictures: RuntimeError: planted: the renderer failed" in messages
    assert fake_repo.report()["status"] == "complete" and "plots" not in fake_repo.report()


def test_show_rate_over_a_zero_says_so(tmp_path, capsys):
    doc = json.loads((REAL / "report.json").read_text())
    e8b = next(r for r in doc["results"] if r["id"] == "E8b")
    r = {**e8b, "details": {**e8b["details"], "pairs": [{**p, "b": 0.0} for p in e8b["details"]["pairs"]]}}
    d = tmp_path / "r"
    d.mkdir()
    (d / "report.json").write_text(json.dumps({**doc, "started": "2026-12-01T23:00:00Z", "results": [r]}))
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(d), str(REAL)]) == 0
    capsys.readouterr()
    assert main(["history", "--store", str(store), "show", "E8b", "--metric", "b.timings.decode_ms",
                 "--rate", "64"]) == 0
    out = capsys.readouterr().out
    assert "— (value 0)" in out and "1414.9" in out  # 64 x 1000 / 45.2328 ms beside it


def test_a_label_matplotlib_would_read_as_mathtext_is_drawn_as_written(tmp_path):
    """"$" starts a formula for matplotlib, and a bad one stopped every picture (N13)."""
    commits = [f"{i:02d}bbbbbbb" for i in range(3)]
    text = r"$\notacommand{x}$"
    svg = plots.series_svg(f"{text}: ratio", text, [(text, commits, [1.0, 2.0, 3.0], [])])
    assert text in svg.replace("&#36;", "$")
    d = {"ratios": [1.0, 1.1], "median": 1.05, "ci_lower": 1.0, "ci_upper": 1.1, "pass_if": "ci_lower >= 1"}
    assert "notacommand" in plots.ab_svg(text, d, text)


def test_a_planted_plots_link_is_not_followed_out_of_the_report(tmp_path, capsys):
    d = real_report(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (d / "plots").symlink_to(outside)
    assert main(["history", "plot", str(d)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert list(outside.iterdir()) == []


def test_ids_that_read_alike_as_file_names_get_their_own_files():
    names = plots.file_names(["A/B", "A_B", "a_b", "index", "E8b"], taken=["index"])
    assert len({n.casefold() for n in names.values()}) == 5 and "index" not in {n.casefold() for n in names.values()}
    assert names["E8b"] == "E8b"


def test_a_compare_verdict_is_drawn_with_its_margin(tmp_path):
    from harness.history.points import read_doc
    from tests.history_reports import compare_doc, timed

    doc = compare_doc("abc1234def", [timed("CMP1", [1.0, 1.01, 0.99, 1.0] * 10)])
    d = read_doc(doc, "x").verdicts[0]["detail"]
    text = ET.tostring(check_svg(plots.write(tmp_path, "c.svg", plots.ab_svg("CMP1", d))), encoding="unicode")
    assert "equivalent within [0.9804, 1.02]" in text and "pair ratio" in text and "pass if" not in text
