"""Failing well (issue: a broken build, an interrupt, each reported once, where the user looks):
set-ups with a real compile error planted in a copy of the engine's source."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

needs_cc = pytest.mark.skipif(not (shutil.which("cmake") and (shutil.which("cc") or shutil.which("gcc"))),
                              reason="needs cmake and a host C compiler")


def project_copy(tmp_path: Path) -> Path:
    """The project's engine source, configuration and criteria, copied (no build, no models)."""
    root = tmp_path / "kite"
    shutil.copytree(REPO / "native", root / "native", ignore=shutil.ignore_patterns("build", "llamacpp", "fuzz"))
    shutil.copytree(REPO / "configs", root / "configs")
    shutil.copytree(REPO / "regressions", root / "regressions")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def plant_compile_error(root: Path) -> None:
    f = root / "native" / "engine" / "vec_math.c"
    f.write_text(f.read_text() + "\nint kite_planted_error(void) { return undeclared_planted_name; }\n")


def harness(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(root), *args], cwd=root,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@needs_cc
def test_broken_engine_fails_only_run_once_and_stops_builds(tmp_path):
    """`verify --only D4 E8a` with the engine not compiling: exit 1 (was: SKIP "no GPU", exit 0);
    the compiler error is printed once; D4 and E8a FAIL with one line pointing at the build; the
    module and test module are not started."""
    root = project_copy(tmp_path)
    plant_compile_error(root)
    r = harness(root, "verify", "--only", "D4", "E8a")
    assert r.returncode == 1, r.stderr[-3000:]
    err = r.stderr
    # D4 needs the builds stub and default, E8a default: each build's first error once, then one
    # line per FAIL
    lines = err.splitlines()
    first = [ln for ln in lines if ln.startswith("    native/engine/vec_math.c:")]
    assert len(first) == 2 and "undeclared_planted_name" in first[0], err
    assert err.count("undeclared_planted_name") == 2 + 2, err
    assert "builds stub, default failed" in err
    import json

    [rdir] = [d for d in (root / "reports").iterdir() if d.name != "latest"]
    doc = json.loads((rdir / "report.json").read_text())
    for cid in ("D4", "E8a"):
        res = next(x for x in doc["results"] if x["id"] == cid)
        assert res["verdict"] == "FAIL"
        assert re.match(r"build (stub|default) failed \(engine\): native/engine/vec_math.c:\d+: ", res["reason"]), res
        assert "build_errors" not in res["details"] and res["kept"] is None
    b = doc["builds"]["default"]
    assert b["engine"]["status"] == "failed"
    assert b["module"]["status"] == "skipped" and "not started" in b["module"]["reason"]
    assert not (root / "build" / "default" / "testmod").exists() and not (root / "build" / "default" / "cuda").exists()
    assert "kept dumps" not in err
