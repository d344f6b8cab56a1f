"""A --model path that is not a regular file (FIFO, directory, device) is refused at once: exit 1
and one line naming the path and what it is. A FIFO must not block the engine waiting for a
writer, hence the short timeout."""

from __future__ import annotations

import os
import sys

import pytest

from engine_build import kite_bin, run_kite  # noqa: F401

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev are POSIX"),
]


def _refused(exe, path, kind: str) -> None:
    res = run_kite(exe, "run", "--model", path, "--prompt", "1", timeout=10)
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert res.stderr == f"kite: error: '{path}' is not a regular file ({kind})\n", res.stderr
    assert res.stdout == ""


def test_fifo_is_refused_without_blocking(kite_bin, tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    _refused(kite_bin, fifo, "a FIFO")


def test_directory_is_refused(kite_bin, tmp_path):
    folder = tmp_path / "model.gguf"
    folder.mkdir()
    _refused(kite_bin, folder, "a directory")


def test_character_device_is_refused(kite_bin):
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null here")
    _refused(kite_bin, "/dev/null", "a character device")


def test_selftest_model_fifo_fails_cleanly(kite_bin, tmp_path):
    fifo = tmp_path / "m.gguf"
    os.mkfifo(fifo)
    res = run_kite(kite_bin, "selftest", "--model", fifo, timeout=120)
    assert res.returncode == 1
    assert f"FAIL model_file_map: '{fifo}' is not a regular file (a FIFO)" in res.stdout
