"""KITE_CUDA=ON is configured only for x86-64 targets; any other target processor (aarch64 and
the rest) is refused at configure time with one message (docs/KITE-ENGINE.md, "Build layout"). The
target is set the way a cross build sets it: a toolchain file naming CMAKE_SYSTEM_PROCESSOR
(the host compiler stays; configuring compiles nothing that has to run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from engine_build import REPO

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed"),
]

MESSAGE = "KITE_CUDA=ON is supported only on x86-64 (this target's processor: '{}'); configure with -DKITE_CUDA=OFF"


def _configure(tmp_path: Path, processor: str, kite_cuda: str) -> subprocess.CompletedProcess:
    toolchain = tmp_path / f"toolchain-{processor}.cmake"
    toolchain.write_text(f"set(CMAKE_SYSTEM_NAME Linux)\nset(CMAKE_SYSTEM_PROCESSOR {processor})\n")
    build = tmp_path / f"build-{processor}-{kite_cuda}"
    return subprocess.run(
        [
            "cmake",
            "-S",
            str(REPO / "native"),
            "-B",
            str(build),
            f"-DCMAKE_TOOLCHAIN_FILE={toolchain}",
            f"-DKITE_CUDA={kite_cuda}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("processor", ["aarch64", "riscv64"])
def test_kite_cuda_on_refused_off_x86_64(tmp_path, processor):
    res = _configure(tmp_path, processor, "ON")
    assert res.returncode != 0
    assert "CMake Error" in res.stderr
    # CMake wraps the message; compare it with the whitespace folded
    assert MESSAGE.format(processor) in " ".join(res.stderr.split()), res.stderr


def test_kite_cuda_off_configures_for_aarch64(tmp_path):
    res = _configure(tmp_path, "aarch64", "OFF")
    assert res.returncode == 0, res.stderr


def test_kite_cuda_on_configures_for_x86_64(tmp_path):
    res = _configure(tmp_path, "x86_64", "ON")
    assert res.returncode == 0, res.stderr
