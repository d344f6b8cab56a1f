"""Running processes: exit status, signal, timeout, not found; resources measured."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness.process import closing_counts, run_process

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent


def test_ok_and_resources(tmp_path):
    r = run_process([PY, "-c", "x = bytearray(30 * 2**20); print('hi')"], log_prefix=tmp_path / "a")
    assert r.ok and r.stdout == "hi\n" and r.returncode == 0
    assert r.peak_rss_mb is not None
    assert r.cpu_s is not None and r.cpu_s >= 0
    assert (tmp_path / "a.cmd").read_text().strip().endswith("'x = bytearray(30 * 2**20); print('\"'\"'hi'\"'\"')'")


def test_peak_rss_is_the_kernels_figure(tmp_path):
    """From a small harness process, wait4's ru_maxrss is above the harness's own peak, so the
    figure is the kernel's exact peak, never a sample that a busy machine may have missed. (Inside
    pytest, whose own peak is larger, the sampler's figure is used.)"""
    call = ("import sys; from harness.process import run_process; "
            "r = run_process([sys.executable, '-c', 'x = bytearray(30 * 2**20)'], timeout=60); "
            "print(r.peak_rss_mb)")
    out = subprocess.run([PY, "-c", call], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) > 30


def test_env_overlay(tmp_path):
    r = run_process([PY, "-c", "import os; print(os.environ['KITE_X'])"], {"KITE_X": "42"}, log_prefix=tmp_path / "e")
    assert r.stdout.strip() == "42" and r.env_overlay == {"KITE_X": "42"}


def test_nonzero_exit(tmp_path):
    r = run_process([PY, "-c", "import sys; print('kite: error: bad', file=sys.stderr); sys.exit(3)"],
                    log_prefix=tmp_path / "x")
    assert not r.ok and r.returncode == 3 and r.describe() == "exit status 3: kite: error: bad"


def test_signal(tmp_path):
    r = run_process([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], log_prefix=tmp_path / "s")
    assert not r.ok and r.signal == "SIGSEGV" and r.describe() == "killed by signal SIGSEGV"


def test_timeout_kills_group(tmp_path):
    t0 = time.perf_counter()
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
           "time.sleep(60)"
    r = run_process([PY, "-c", code], timeout=1.0, log_prefix=tmp_path / "t")
    assert r.timed_out and not r.ok and "timed out after" in r.describe()
    assert time.perf_counter() - t0 < 10


def test_not_found(tmp_path):
    r = run_process([str(tmp_path / "no-such-kite"), "info"])
    assert not r.ok and r.returncode is None and r.describe().startswith("not found:")


def test_in_memory_capture():
    r = run_process([PY, "-c", "print('x')"])
    assert r.ok and r.stdout.strip() == "x"


def test_closing_counts():
    assert closing_counts("PASS a\nFAIL b: why\n7 passed, 1 failed\n") == (7, 1)
    assert closing_counts("nothing") is None
