"""The command line: help, exit statuses, one-line errors, helper subcommands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.cli import main

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def test_help_lists_subcommands():
    out = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, env=ENV,
                         cwd=REPO)
    assert out.returncode == 0
    for sub in ("build", "verify", "run", "ab", "register", "report", "models", "matrix", "merge"):
        assert sub in out.stdout


def test_usage_error_exit_2(capsys):
    try:
        main(["verify", "--no-such-option"])
    except SystemExit as e:
        assert e.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_missing_config_one_line(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "verify"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error:") and "engine configuration not found" in err


def test_unexpected_exception_is_one_line(fake_repo, capsys, monkeypatch):
    from harness import cli

    def boom(*a, **k):
        raise RuntimeError("planted")

    monkeypatch.setattr(cli, "verify", boom)
    monkeypatch.delenv("HARNESS_DEBUG", raising=False)
    assert main(["--root", str(fake_repo.root), "verify"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("harness: error: internal error: RuntimeError: planted "
                           "(set HARNESS_DEBUG=1 for the traceback)")


def test_run_subcommand(fake_repo, capsys):
    rc = main(["--root", str(fake_repo.root), "run", "--", "run", "--model", "{model}", "--json"])
    cap = capsys.readouterr()
    assert rc == 0 and json.loads(cap.out)["shapes"]["h_out"] == [1, 16]
    assert "[harness] exit status 0; wall" in cap.err
    rc = main(["--root", str(fake_repo.root), "run", "--env", "FAKE_CRASH=SIGABRT", "--", "info"])
    assert rc == 1 and "killed by signal SIGABRT" in capsys.readouterr().err


def test_report_and_merge(fake_repo, capsys, tmp_path):
    p = fake_repo.criteria("""\
criteria:
  - {id: S, title: selftest, kind: run, runs: [{args: [selftest], expect: {passes_min: 1}}]}
""")
    fake_repo.register(p)
    assert fake_repo.verify() == 0
    first = (fake_repo.reports / "latest").resolve()
    assert main(["--root", str(fake_repo.root), "report"]) == 0
    assert "**1 passed, 0 failed, 0 skipped** of 1" in capsys.readouterr().out
    assert main(["--root", str(fake_repo.root), "report", "--format", "junit"]) == 0
    assert capsys.readouterr().out.startswith("<?xml")
    # exploratory: a new id (a registered one with other content is refused)
    p.write_text(p.read_text().replace("passes_min: 1", "passes_min: 100").replace("id: S,", "id: S2,"))
    assert fake_repo.verify("--exploratory") == 1
    second = (fake_repo.reports / "latest").resolve()
    assert first != second
    out = tmp_path / "merged"
    assert main(["merge", "-o", str(out), str(first), str(second)]) == 1
    doc = json.loads((out / "report.json").read_text())
    assert any(r["verdict"] == "FAIL" for r in doc["results"]) and len(doc["merged_from"]) == 2


def test_ab_needs_ab_id(fake_repo, capsys):
    fake_repo.criteria("""\
criteria:
  - {id: S, title: selftest, kind: run, runs: [{args: [selftest]}]}
""")
    assert main(["--root", str(fake_repo.root), "ab", "S"]) == 2
    assert "'S' is not an ab_timing criterion" in capsys.readouterr().err


def test_report_records_system(fake_repo):
    p = fake_repo.criteria("""\
criteria:
  - {id: S, title: selftest, kind: run, runs: [{args: [selftest]}]}
""")
    fake_repo.register(p)
    fake_repo.verify()
    doc = fake_repo.report()
    for k in ("os", "cpu", "cores", "ram_gb", "compilers"):
        assert k in doc["system"]
    assert doc["engine_info"]["cuda"]["bound"] is True
    assert doc["results"][0]["digest"].startswith("sha256:")
    assert "git" in doc and doc["status"] == "complete"


def _subparsers(p):
    import argparse

    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices
    return {}


def test_version_from_the_package(capsys):
    import harness

    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip() == f"kite-harness {harness.__version__}"


def test_one_tree_help_everywhere_and_exit_statuses_documented():
    """Every subcommand (the matrix, merge and fuzz ones included) is in the one parser, with a
    help line, exit statuses in its epilog, help on every option, and one program name."""
    from harness.cli import make_parser

    p = make_parser()
    subs = _subparsers(p)
    assert {"build", "verify", "run", "ab", "register", "report", "models", "oracle", "matrix", "merge",
            "fuzz"} <= set(subs)
    missing = []
    for name, sp in subs.items():
        assert sp.epilog and sp.epilog.startswith("exit status: 0 "), name
        assert sp.format_usage().startswith(f"usage: harness {name}"), sp.format_usage()
        for parser in [sp, *_subparsers(sp).values()]:
            for a in parser._actions:
                if a.help is None and a.dest not in ("help",):
                    missing.append(f"{parser.prog}: {a.dest}")
    assert not missing, missing
    for a in p._actions:
        assert a.help, a.dest


def test_matrix_options_are_in_the_tree(capsys):
    try:
        main(["matrix", "--help"])
    except SystemExit as e:
        assert e.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: harness matrix") and "--merge-into DIR" in out and "exit status: 0" in out
    assert main(["--root", str(REPO), "matrix", "--check"]) == 0
    try:
        main(["matrix", "--no-such-option"])
    except SystemExit as e:
        assert e.code == 2


def test_unknown_recipe_is_exit_2(capsys):
    assert main(["models", "gen", "nosuch"]) == 2
    assert "unknown recipe 'nosuch'" in capsys.readouterr().err


def test_bad_matrix_file_is_exit_2_with_file_line(tmp_path, capsys):
    bad = tmp_path / "matrix.yaml"
    bad.write_text("version: 1\nentries: {a: {toolchain: tcc, runner: native, requires: [gcc]}}\nbuidl: 1\n")
    assert main(["--root", str(REPO), "matrix", "--matrix", str(bad), "--check"]) == 2
    err = capsys.readouterr().err
    assert "matrix.yaml:2: entries.a.toolchain: 'tcc' is not allowed" in err
    assert "matrix.yaml:3: buidl: unknown key 'buidl'" in err
