"""Reliability against the real engine, when it is built (skipped otherwise): the kept fuzz
regression inputs and generated hostile model files are refused with a message (never a
crash), the engine killed mid-run or hanging gives the right verdict and leaves no half-written
dump, and (opt-in, slow) the sanitizer runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.tools import fuzz
from harness.process import run_process

from engine_build import build_engine

pytestmark = [pytest.mark.native, pytest.mark.skipif(os.name == "nt", reason="POSIX signals")]

REPO = Path(__file__).resolve().parent.parent
DUMP_FILES = ("h_out.f32", "logits.f32", "meta.json")


def _good_model(tmp_path_factory) -> Path:
    found = sorted((REPO / "models").glob("tiny-q8_0-*.gguf"))
    if found:
        return found[0]
    try:
        from harness.models.gen import generate
        from harness.models.recipes import load_recipe
    except ImportError as e:
        pytest.skip(f"no default model and no generator: {e}")
    out = tmp_path_factory.mktemp("model") / "micro.gguf"
    return generate(load_recipe(str(REPO / fuzz.MICRO_RECIPE)), out, "q8_0")


@pytest.fixture(scope="module")
def good_model(tmp_path_factory) -> Path:
    return _good_model(tmp_path_factory)


@pytest.fixture(scope="module")
def kite() -> Path:
    """The CPU engine (stub build), built on first use like the other native tests' engine."""
    return build_engine("stub")


def _refused(r: subprocess.CompletedProcess, what: str) -> None:
    assert r.returncode == 1, f"{what}: exit {r.returncode} (negative = signal)\n{r.stderr[-500:]}"
    assert r.stderr.startswith("kite: error:") or "\nkite: error:" in r.stderr, r.stderr[-500:]


@pytest.mark.parametrize("path", fuzz.regression_inputs(REPO), ids=lambda p: p.name)
def test_regression_input_refused(kite, path):
    r = subprocess.run([str(kite), "run", "--model", str(path), "--prompt", "1", "--steps", "1"],
                       capture_output=True, text=True, timeout=60)
    _refused(r, path.name)


def test_hostile_models_never_crash(kite, good_model, tmp_path):
    """Truncated, corrupted and degenerate variants of a good model: exit 0 (a corrupted byte in
    a string or weight leaves a valid file) or 1 with a message; never a signal or a hang."""
    counts: dict[str, int] = {}
    for kind, name, data in fuzz.hostile_models(good_model.read_bytes()):
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(data)
        r = subprocess.run([str(kite), "run", "--model", str(p), "--prompt", "1,2", "--steps", "1"],
                           capture_output=True, text=True, timeout=60)
        if kind == "corrupted" and r.returncode == 0:
            continue
        _refused(r, name)
        counts[kind] = counts.get(kind, 0) + 1
    assert counts.get("truncated", 0) >= 8 and counts.get("degenerate", 0) == 4, counts


def _slow_run(kite: Path, model: Path, dump: Path) -> list[str]:
    return [str(kite), "run", "--model", str(model), "--prompt", "1,2,3", "--steps", "60", "--dump", str(dump)]


def _find_pid(marker: str, timeout: float = 20) -> int | None:
    end = time.time() + timeout
    while time.time() < end:
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if marker.encode() in (d / "cmdline").read_bytes():
                        return int(d.name)
                except OSError:
                    pass
        time.sleep(0.02)
    return None


def test_real_engine_killed_mid_run(kite, good_model, tmp_path):
    """SIGKILL from outside while the engine decodes: the harness reports the signal, and the
    dump folder holds no half-written file (the engine writes each to a temporary name, then
    renames)."""
    dump = tmp_path / "dump-killed"
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(r=run_process(
        _slow_run(kite, good_model, dump), {"KITE_DEBUG_STEP_DELAY_US": "1000000"}, timeout=120)))
    t.start()
    pid = _find_pid(str(dump))
    assert pid, "the engine never started"
    time.sleep(0.5)  # each of the 63 steps lasts 1 s: the kill comes mid-run unless this thread stalls a minute
    os.kill(pid, signal.SIGKILL)
    t.join(60)
    r = out["r"]
    assert r.signal == "SIGKILL" and not r.ok, r.describe()
    assert "killed by signal SIGKILL" in r.describe()
    present = [f for f in DUMP_FILES if (dump / f).exists()]
    assert present == [] or present == list(DUMP_FILES), present


def test_real_engine_hang_times_out(kite, good_model, tmp_path):
    dump = tmp_path / "dump-hang"
    t0 = time.time()
    r = run_process(_slow_run(kite, good_model, dump), {"KITE_DEBUG_STEP_DELAY_US": "1000000"}, timeout=1.5)
    assert r.timed_out and "timed out" in r.describe()
    assert time.time() - t0 < 15
    time.sleep(0.2)
    assert _find_pid(str(dump), timeout=0.5) is None, "the engine outlived its timeout"
    assert not any((dump / f).exists() for f in DUMP_FILES)


@pytest.mark.skipif(not os.environ.get("KITE_SANITIZER_TESTS"),
                    reason="slow (two builds, ~2 min): set KITE_SANITIZER_TESTS=1, or run "
                           "`python -m harness fuzz --sanitizers`")
def test_sanitizers():
    r = subprocess.run([sys.executable, "-m", "harness.tools.fuzz", "--sanitizers", "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
