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


def test_models_absent_message(fake_repo, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_models(name, *a, **k):
        if name.startswith("harness.models"):
            raise ImportError("No module named 'harness.models'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_models)
    assert main(["--root", str(fake_repo.root), "models", "list"]) == 2
    assert "model generator (harness.models) is not available" in capsys.readouterr().err


def test_unexpected_exception_is_one_line(fake_repo, capsys, monkeypatch):
    from harness import verify

    def boom(*a, **k):
        raise RuntimeError("planted")

    monkeypatch.setattr(verify, "verify", boom)
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
