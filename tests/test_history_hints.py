"""Every command the history prints (`history changes`, `show` and the HTML pages) runs as printed:
each is read back from the output, split as a shell splits it, and run in a planted repository
(tests/compare_repo.py) whose compare workload and commits the history names. A criterion id or
commit from a report never runs as shell code when the command is pasted."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from tests.compare_repo import make_repo
from tests.conftest import REPO
from tests.history_reports import compare_doc, timed

pytest.importorskip("signal_processing_algorithms")  # change points: the plots extra; .[dev] and CI install it

DEAD401 = REPO / "tests" / "data" / "history" / "h200-dead401" / "report.json"
HINT = re.compile(r"(pin it|the commits to check): (.+)$")


def verify_doc(commit: str, i: int, ratio: float, cid: str = "E8b") -> dict:
    """A verify report of `commit` (run i) whose A/B criterion cid has this median ratio."""
    doc = json.loads(DEAD401.read_text())
    r = next(r for r in doc["results"] if r["id"] == "E8b")
    r = {**r, "id": cid, "details": {**r["details"], "stats": {**r["details"]["stats"], "median": ratio}}}
    return {**doc, "git": {"commit": commit}, "started": f"2026-12-01T{i:02d}:00:00Z", "results": [r]}


def stepped(n: int, at: int, low: float, high: float) -> list[float]:
    """n values: low up to `at`, high from it, each a little apart (a series, not a constant)."""
    return [(low if i < at else high) * (1 + 0.002 * (i % 3)) for i in range(n)]


def planted_store(tmp_path: Path, commits: list[str], workload: str = "W1", criterion: str = "E8b") -> Path:
    """A store with a step in a compare workload's ratio and in a verify criterion's, both at commits[3]."""
    reports = tmp_path / "reports"
    values = stepped(2 * len(commits), 6, 1.0, 1.12)
    for i, v in enumerate(values):
        commit = commits[i // 2]  # two runs of each commit
        d = reports / f"r{i:02d}"
        d.mkdir(parents=True)
        (d / "report.json").write_text(json.dumps(verify_doc(commit, i, v, criterion)))
        c = reports / f"c{i:02d}"
        c.mkdir()
        (c / "report.json").write_text(json.dumps(compare_doc(commit, [timed(workload, [v] * 8)])))
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(reports), "--git", str(tmp_path / "none")]) == 0
    return store


def printed_hints(store: Path, tmp_path: Path, capsys) -> list[str]:
    """Every command the history prints: `changes`, `show` of each series, and the HTML pages."""
    capsys.readouterr()
    assert main(["history", "--store", str(store), "changes"]) == 1
    out = capsys.readouterr().out
    for series in ("W1", "E8b"):
        main(["history", "--store", str(store), "show", series])
        out += capsys.readouterr().out
    site = tmp_path / "site"
    assert main(["history", "--store", str(store), "html", str(site)]) == 0
    lines = out.splitlines()
    for page in site.glob("*.html"):
        lines += [html.unescape(c) for c in re.findall(r"<code>([^<]*)</code>", page.read_text())]
    return [m.group(2) for line in lines if (m := HINT.search(line))]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    if not (shutil.which("cmake") and shutil.which("cc") and shutil.which("git")):
        pytest.skip("needs cmake, a C compiler and git")
    root = tmp_path_factory.mktemp("hints")
    commits = make_repo(root / "repo")
    assert main(["--root", str(root / "repo"), "register", str(root / "repo" / "regressions" / "work.yaml")]) == 0
    return root / "repo", commits, root / "cache"


def test_every_printed_hint_runs_as_printed(planted, tmp_path, capsys):
    repo, commits, cache = planted
    store = planted_store(tmp_path, commits)
    hints = printed_hints(store, tmp_path, capsys)
    kinds = {shlex.split(h)[0] for h in hints}
    assert kinds == {"kite-harness", "git"}, hints  # the workload's and the criterion's
    # the harness importable from the planted repository, installed or not (nox's test environment)
    env = {**os.environ, "KITE_COMPARE_CACHE": str(cache), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    for hint in sorted(set(hints)):
        argv = shlex.split(hint)
        if argv[0] == "kite-harness":  # the installed script, as `python3 -m harness` here
            argv = [sys.executable, "-m", "harness", *argv[1:]]
        r = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode in (0, 1), (hint, r.stderr[-2000:])  # 2: not accepted (usage, unknown workload)
        if argv[0] == "git":
            assert r.stdout.strip() and "c3 planted slowdown" in r.stdout, (hint, r.stdout)
        else:
            assert r.returncode == 0 and "first bad commit" in r.stdout, (hint, r.stdout[-2000:])
            assert commits[3] in r.stdout  # c3 is the planted slowdown: bisect pins it


CRAFTED = "W1;touch {m};$(touch {m})`touch {m}`"


def test_a_crafted_id_in_a_report_runs_no_code_when_its_hint_is_pasted(tmp_path, capsys):
    """Reports (a CI artifact) naming a criterion and a workload with shell in their ids: every
    printed command, pasted into a shell with the harness and git stubbed out, runs nothing else (N04)."""
    marker = tmp_path / "ran"
    crafted = CRAFTED.format(m=marker)
    commits = [f"{i:02d}c0ffee{i:02d}" for i in range(9)]
    store = planted_store(tmp_path, commits, workload=crafted, criterion=crafted)
    hints = printed_hints(store, tmp_path, capsys)
    assert len(hints) >= 2
    for hint in hints:
        argv = shlex.split(hint)
        assert crafted in argv or argv[0] == "git"  # the id is one word of the command
        subprocess.run(["sh", "-c", "kite_harness() { :; }; git() { :; }; " + hint.replace("kite-harness",
                        "kite_harness", 1)], check=True)
    assert not marker.exists()
