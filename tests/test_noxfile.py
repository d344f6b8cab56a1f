"""noxfile.py loads with nox alone: its matrix sessions come from a stdlib reader of
configs/matrix.yaml (checked here against the real loader) and its dependencies from pyproject.toml."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.matrix.spec import load_matrix

REPO = Path(__file__).resolve().parent.parent

# Runs nox in a fresh interpreter where the project's third-party packages (and the harness
# itself) cannot be imported: what a venv holding only nox sees.
BLOCKED_NOX = textwrap.dedent("""\
    import runpy, sys
    BLOCKED = {"yaml", "numpy", "gguf", "tabulate", "psutil", "harness"}
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"blocked: {name}", name=name)
    sys.meta_path.insert(0, Blocker())
    sys.argv = ["nox", *sys.argv[1:]]
    runpy.run_module("nox", run_name="__main__", alter_sys=True)
""")


@pytest.fixture(scope="module")
def noxfile():
    pytest.importorskip("nox", reason="nox is in the test extra: pip install -e '.[test]'")
    spec = importlib.util.spec_from_file_location("kite_noxfile", REPO / "noxfile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def nox_without_deps(*args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("nox", reason="nox is in the test extra: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-c", BLOCKED_NOX, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def real_entries() -> list[str]:
    return list(load_matrix(REPO / "configs" / "matrix.yaml", REPO).entries)


def test_reader_agrees_with_the_loader_on_the_real_matrix(noxfile):
    names = noxfile.matrix_entry_names((REPO / "configs" / "matrix.yaml").read_text("utf-8"))
    assert names == real_entries() and len(names) >= 2


@pytest.mark.parametrize("text", [
    "entries:\n  a: {x: 1}\n  b:\n    y: 2\n",
    "# c\nversion: 1\nentries:   # the entries\n\n  # comment\n  'q-1':\n    d: |\n      z:\n  \"q2\": {}\ncross:\n  X1: {}\n",
    "defaults:\n  a: 1\nentries:\n    deep-indent:\n        k: v\n    other: {}\n",
    "entries: {}\n",
    "cross:\n  a: {}\n",
])
def test_reader_agrees_with_yaml(noxfile, text):
    assert noxfile.matrix_entry_names(text) == list(yaml.safe_load(text).get("entries") or {})


def test_dependencies_come_from_pyproject(noxfile):
    project = noxfile.nox.project.load_toml(REPO / "pyproject.toml")["project"]
    assert "pyyaml>=6" in project["dependencies"]
    assert noxfile.RUNTIME == project["dependencies"]
    assert noxfile.TESTS == project["dependencies"] + project["optional-dependencies"]["test"]


def test_nox_lists_matrix_sessions_without_yaml():
    sessions = [f"matrix({e})" for e in real_entries()]
    r = nox_without_deps("-l", "--json", "-t", "matrix")
    assert r.returncode == 0, r.stderr
    assert [s["session"] for s in json.loads(r.stdout)] == sessions
    r = nox_without_deps("-l", "--json", "-s", "matrix(linux-clang)")
    assert r.returncode == 0, r.stderr
    assert [(s["session"], s["call_spec"]) for s in json.loads(r.stdout)] == [
        ("matrix(linux-clang)", {"entry": "linux-clang"})]
    r = nox_without_deps("-l")
    assert r.returncode == 0, r.stderr
    assert all(s in r.stdout for s in sessions)


def test_the_blocker_blocks():
    """The check above is only worth something if yaml is really out of reach in that interpreter."""
    r = subprocess.run([sys.executable, "-c", BLOCKED_NOX.replace('runpy.run_module("nox", run_name="__main__", '
                                                                  'alter_sys=True)', "import yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "blocked: yaml" in r.stderr
