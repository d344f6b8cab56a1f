"""The harness as installed (not the checkout): `kite-harness` verifies the project it is run in,
from a subfolder of this repository and from the example project, with recipes shipped as
package data. The package is built and installed offline: pip --target --no-deps
--no-build-isolation from a copy of the sources."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "toy-engine"


def _can_build_wheels() -> bool:
    try:
        from setuptools.command import bdist_wheel  # noqa: F401 - setuptools >= 70.1
    except ImportError:
        try:
            import wheel  # noqa: F401
        except ImportError:
            return False
    return True


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    """kite-harness installed into a fresh folder from a copy of pyproject.toml, README.md and harness/."""
    if not _can_build_wheels():
        pytest.skip("building the wheel offline needs setuptools >= 70.1 (in the test extra: "
                    "pip install -e '.[test]')")
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    src.mkdir()
    shutil.copytree(REPO / "harness", src / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    site = tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("HARNESS_DEBUG", None)
    return {"site": site, "exe": site / "bin" / "kite-harness", "env": env}


def _run(installed, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(installed["exe"]), *args], cwd=cwd, env=installed["env"], capture_output=True,
                          text=True, timeout=timeout)


def test_the_installed_package_is_the_one_run(installed, tmp_path):
    r = subprocess.run([sys.executable, "-c", "import harness; print(harness.__file__)"], cwd=tmp_path,
                       env=installed["env"], capture_output=True, text=True, timeout=60)
    assert Path(r.stdout.strip()).is_relative_to(installed["site"]), r.stdout + r.stderr


def test_recipes_ship_as_package_data(installed, tmp_path):
    r = _run(installed, "models", "list", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {line.split()[0] for line in r.stdout.splitlines()[1:]} >= {"tiny", "qwen35-0.8b"}


def test_version(installed, tmp_path):
    from harness import __version__

    r = _run(installed, "--version", cwd=tmp_path)
    assert r.returncode == 0 and __version__ in r.stdout + r.stderr, r.stdout + r.stderr


def _report(folder: Path) -> dict:
    """The one report a run wrote into folder (`latest` is a link to it, when there is one)."""
    (doc,) = [json.loads(p.read_text()) for p in folder.glob("*/report.json") if not p.parent.is_symlink()]
    return doc


def test_verify_the_example_project_from_its_subfolders(installed, tmp_path):
    project = tmp_path / "toy-engine"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "reports"))
    for where in (project / "src", project):
        reports = tmp_path / f"reports-{where.name}"
        r = _run(installed, "verify", "--reports", str(reports), cwd=where)
        assert r.returncode == 0, r.stdout + r.stderr
        rows = {c["id"]: c for c in _report(reports)["results"]}
        assert sorted(rows) == ["T1", "T2", "T3", "TC1"]
        checks = [c for i, c in rows.items() if i != "TC1"]
        assert all(c["verdict"] == "PASS" and not c.get("exploratory") for c in checks), rows
        assert rows["TC1"]["verdict"] == "SKIP" and "harness compare" in rows["TC1"]["reason"]  # a compare workload
    assert (project / "build" / "default" / "bin").is_dir()  # built inside the found project


def test_verify_this_repository_from_a_subfolder(installed, tmp_path):
    """D3 (stub build, the generated default model) through the installed harness, run in docs/."""
    r = _run(installed, "verify", "--only", "D3", "--reports", str(tmp_path), cwd=REPO / "docs")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = _report(tmp_path)["results"]
    assert [(c["id"], c["verdict"]) for c in rows] == [("D3", "PASS")], rows
