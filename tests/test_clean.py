"""`harness clean`: a dry run by default; with --yes, old reports, this project's compare cache and
the generated models go, while the newest reports, reports/latest, a model put there by hand, and
what a running verify or compare holds stay."""

from __future__ import annotations

import fcntl
import os
import subprocess

from harness.cli import main
from harness.compare.revisions import CACHE_ENV, default_cache


def project(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "engine.yaml").write_text("engine:\n  binary: {posix: eng, windows: eng.exe}\nbuilds:\n  default:\n"
                                                  "    engine: {source: src}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    reports = root / "reports"
    names = [f"2026120{d}T000000Z-abc{d}" for d in range(1, 8)]
    for n in names:
        (reports / n).mkdir(parents=True)
        (reports / n / "report.json").write_text("{}" + " " * 1000)
    (reports / "latest").symlink_to(names[0], target_is_directory=True)  # the oldest is the latest full run
    (reports / "pytest-junit.xml").write_text("<x/>")  # not a report folder: never touched
    models = root / "models"
    models.mkdir()
    (models / "tiny-q8_0-0123456789ab.gguf").write_bytes(b"GGUF" * 100)
    (models / "mine.gguf").write_bytes(b"GGUF")
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = default_cache(root)
    for tree in ("t1", "t2"):
        (cache / tree / "src").mkdir(parents=True)
        (cache / f"{tree}.lock").write_text("")
    return root, names, cache


def test_clean_is_a_dry_run_until_yes(tmp_path, monkeypatch, capsys):
    root, names, cache = project(tmp_path, monkeypatch)
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert main(["--root", str(root), "clean", "--keep", "2"]) == 0
    out, err = capsys.readouterr()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before  # nothing removed
    assert "nothing removed (a dry run): add --yes" in err
    assert "remove report" in out and "(reports/latest)" in out and "(one of the newest)" in out


def test_clean_yes_removes_what_can_be_made_again(tmp_path, monkeypatch, capsys):
    root, names, cache = project(tmp_path, monkeypatch)
    fd = os.open(cache / "t2.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a compare is working on t2
    try:
        assert main(["--root", str(root), "clean", "--keep", "2", "--yes"]) == 0
    finally:
        os.close(fd)
    left = sorted(p.name for p in (root / "reports").iterdir())
    assert left == sorted([names[0], names[5], names[6], "latest", "pytest-junit.xml"])
    assert sorted(p.name for p in (root / "models").iterdir()) == ["mine.gguf"]
    assert not (cache / "t1").exists() and (cache / "t2" / "src").is_dir()
    assert "in use by a running compare" in capsys.readouterr().out


def test_clean_names_what_it_knows(tmp_path, monkeypatch, capsys):
    root, _, _ = project(tmp_path, monkeypatch)
    assert main(["--root", str(root), "clean", "everything"]) == 2
    assert "unknown 'everything'; choose from reports, compare-cache, models" in capsys.readouterr().err
