"""`history html OUT`: pages that work offline, checked in a real headless browser (Chromium from
Debian's packages; .ci/run installs it): each page loads with no console message and shows all
its pictures. SKIPs only where no chromium is installed."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main

pytest.importorskip("matplotlib")  # the plots extra; .[dev] and CI install it

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "docs" / "results"
IDS = ["E8b", "F1", "D1", "TC1"]  # an A/B criterion that passed, one that failed, an equivalence, a compare workload
TOY_COMPARE = REPO / "tests" / "data" / "history" / "toy-compare"  # a real compare report


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium here (Debian: apt-get install chromium; .ci/run installs it)")
    return exe


def load(exe: str, page: Path, tmp: Path) -> tuple[str, list[str]]:
    """The page's DOM after its load event, and the console lines Chromium logged for it."""
    r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, [line for line in r.stderr.splitlines() if "CONSOLE" in line]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("history-site")
    store = tmp / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(RESULTS), str(TOY_COMPARE)]) == 0
    assert main(["history", "--store", str(store), "html", str(tmp / "site"), "--only", *IDS]) == 0
    return tmp / "site"


def test_the_pages_stand_alone(site):
    pages = sorted(site.glob("*.html"))
    assert [p.name for p in pages] == sorted(["index.html", *(f"{i}.html" for i in IDS)])
    for p in pages:
        text = p.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), p  # nothing fetched from elsewhere
        for src in re.findall(r'<img src="([^"]+)"', text):
            assert (site / src).is_file(), src
    e8b = (site / "E8b.html").read_text()
    assert "plots/E8b/series-ratio.svg" in e8b and "plots/E8b/verdict.svg" in e8b  # the series and the last verdict
    assert "FAIL" in (site / "F1.html").read_text()
    index = (site / "index.html").read_text()
    assert 'href="E8b.html"' in index
    tc1 = (site / "TC1.html").read_text()
    assert "head/base time ratio (median of the pairs); lower is better" in tc1 and "plots/TC1/verdict.svg" in tc1


def test_a_page_names_its_criterion_says_which_way_is_better_and_each_machines_last_verdict(site):
    doc = json.loads(next(RESULTS.glob("*/report.json")).read_text())
    e8b = next(r for r in doc["results"] if r["id"] == "E8b")
    page = (site / "E8b.html").read_text()
    assert html.escape(e8b["title"]) in page and html.escape(e8b["title"]) in (site / "index.html").read_text()
    assert "A/B ratio a/b (median of the pairs); higher is better" in page  # its bar: ci_lower >= X
    assert "side b: timings.decode_ms (median of the pairs); lower is better" in page
    svg = (site / "plots" / "E8b" / "series-ratio.svg").read_text()
    assert "higher is better" in svg
    assert "<th>last verdict</th>" in page and f"<span class=\"{e8b['verdict']}\">" in page
    assert doc["system"]["nvidia_smi"]["gpus"][0]["name"] in page  # the kept run's machine


def test_each_page_loads_in_chromium_with_no_console_error_and_shows_its_plots(site, tmp_path):
    exe = chromium()
    for name in ["index.html", *(f"{i}.html" for i in IDS)]:
        page = site / name
        dom, console = load(exe, page, tmp_path)
        want = len(re.findall(r"<img ", page.read_text()))
        assert console == [], console
        assert f'data-plots-shown="{want}"' in dom, (name, re.findall(r"data-plots-shown=\S+", dom))
        if name != "index.html":
            assert want >= 1, name


def test_a_missing_picture_is_caught(site, tmp_path):
    exe = chromium()
    broken = tmp_path / "broken"
    shutil.copytree(site, broken)
    (broken / "plots" / "E8b" / "series-ratio.svg").unlink()
    dom, console = load(exe, broken / "E8b.html", tmp_path)
    assert any("plot not shown" in line and "series-ratio.svg" in line for line in console), console
    want = len(re.findall(r"<img ", (broken / "E8b.html").read_text()))
    assert f'data-plots-shown="{want - 1}"' in dom


def test_criteria_whose_ids_read_alike_as_file_names_get_a_page_each(tmp_path):
    """"A/B" and "A_B" made one file name, so one criterion's page replaced the other's (N20)."""
    doc = json.loads((REPO / "tests" / "data" / "history" / "h200-dead401" / "report.json").read_text())
    e8b = next(r for r in doc["results"] if r["id"] == "E8b")
    ids = ["A/B", "A_B", "a_b", "index"]
    d = tmp_path / "r"
    d.mkdir()
    (d / "report.json").write_text(json.dumps({**doc, "results": [{**e8b, "id": i} for i in ids]}))
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(d)]) == 0
    assert main(["history", "--store", str(store), "html", str(tmp_path / "site")]) == 0
    pages = [p for p in (tmp_path / "site").glob("*.html") if p.name != "index.html"]
    assert len({p.name.casefold() for p in pages}) == len(ids)
    assert sorted(html.unescape(re.search(r"<h1>([^<]*)</h1>", p.read_text()).group(1)) for p in pages) == sorted(ids)
    index = (tmp_path / "site" / "index.html").read_text()
    assert index.startswith("<!DOCTYPE html>") and "kite history</h1>" in index
    pictures = [re.findall(r"<img src=\"([^\"]+)\"", p.read_text()) for p in pages]
    assert len({src for page in pictures for src in page}) == sum(map(len, pictures))  # none shared
