"""Build the kite engine once per pytest session and hand out the binary.

The engine is configured and built with CMake and the host compiler into
``build/pytest-engine/`` (and ``build/pytest-engine-asan/`` for the sanitizer build).
Test modules import the fixtures from here::

    from engine_build import kite_bin, qwen35_fixtures, run_kite
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD_ROOT = REPO / "build"
# The shared fixtures live next to the repository: <repo>/../shared/fixtures/qwen35
FIXTURES = REPO.parent / "shared" / "fixtures" / "qwen35"
EXE = "kite.exe" if sys.platform == "win32" else "kite"

_built: dict[str, Path] = {}


def build_engine(name: str, *cmake_args: str) -> Path:
    """Configure + build the engine into build/<name>/; returns the kite binary."""
    if name in _built:
        return _built[name]
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    bdir = BUILD_ROOT / name
    gen = ["-G", "Ninja"] if shutil.which("ninja") and not (bdir / "CMakeCache.txt").exists() else []
    cfg = ["cmake", "-S", str(REPO / "native"), "-B", str(bdir), *gen, *cmake_args]
    res = subprocess.run(cfg, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"cmake configure failed:\n{res.stdout}\n{res.stderr}")
    res = subprocess.run(["cmake", "--build", str(bdir), "-j2"], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"engine build failed:\n{res.stdout}\n{res.stderr}")
    exe = bdir / "bin" / EXE
    assert exe.exists(), f"the build did not produce {exe}"
    _built[name] = exe
    return exe


@pytest.fixture(scope="session")
def kite_bin() -> Path:
    """The engine, stub build (KITE_CUDA=OFF), Release."""
    return build_engine("pytest-engine", "-DKITE_CUDA=OFF", "-DCMAKE_BUILD_TYPE=Release")


def _sanitizer_works() -> bool:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return False
    probe = subprocess.run(
        [cc, "-fsanitize=address,undefined", "-x", "c", "-", "-o", os.devnull],
        input="int main(void){return 0;}",
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0


@pytest.fixture(scope="session")
def kite_asan_bin() -> Path:
    """The engine built with KITE_SANITIZE=address,undefined."""
    if sys.platform == "win32" or not _sanitizer_works():
        pytest.skip("the C compiler cannot build with -fsanitize=address,undefined here")
    return build_engine(
        "pytest-engine-asan", "-DKITE_CUDA=OFF", "-DKITE_SANITIZE=address,undefined", "-DCMAKE_BUILD_TYPE=Debug"
    )


@pytest.fixture(scope="session")
def qwen35_fixtures() -> Path:
    """The shared qwen35 conformance fixtures (tiny-a, tiny-b)."""
    if not (FIXTURES / "tiny-a").is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES} (expected next to the repository)")
    return FIXTURES


def run_kite(exe: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the engine with a clean KITE_* environment plus env; returns CompletedProcess."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    full.update(env or {})
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=full)


def tokens_of(fixture: Path) -> str:
    return (fixture / "tokens.txt").read_text().strip()
