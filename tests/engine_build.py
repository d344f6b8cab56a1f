"""Build the kite engine once per pytest session and hand out the binary.

The engine is built by the harness's own build code (``harness build NAME``: the builds of
``configs/engine.yaml``, into ``build/<name>/bin``), so tests and ``verify`` share one build.
Test modules import the fixtures from here::

    from engine_build import kite_bin, qwen35_fixtures, run_kite
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD_ROOT = REPO / "build"
# The conformance fixtures (tiny-a, tiny-b; see their PROVENANCE.md), kept in the repository
FIXTURES = REPO / "tests" / "data" / "qwen35"

_built: dict[str, Path] = {}


def build_engine(name: str) -> Path:
    """Build one of configs/engine.yaml's builds the way `harness build NAME` does (incremental,
    shared with verify) and return its bin/ folder's engine. `default`: KITE_CUDA=ON plus the
    module where nvcc exists; `stub`: KITE_CUDA=OFF; `asan`: stub under ASan + UBSan."""
    if name in _built:
        return _built[name]
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    from harness.builder import cmake as B
    from harness.contract.config import load_config

    cfg = load_config(REPO)
    res = B.build(cfg, name)
    if res.engine.status not in ("built", "up-to-date"):
        log = Path(res.engine.log).read_text(errors="replace")[-4000:] if res.engine.log else ""
        raise RuntimeError(f"engine build {name} {res.engine.status}: {res.engine.reason}\n{log}")
    exe = Path(res.engine_path)
    assert exe.exists(), f"the build did not produce {exe}"
    _built[name] = exe
    return exe


def build_test_variant(name: str, options: dict[str, str]) -> Path:
    """A test-only engine build with these CMake options (not one of configs/engine.yaml's
    builds, e.g. KITE_TEST_HOOKS=ON), incremental, into build/test-<name>/; returns the engine."""
    if name in _built:
        return _built[name]
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    folder = BUILD_ROOT / f"test-{name}"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = ["cmake", "-S", str(REPO / "native"), "-B", str(folder), *generator, "-DCMAKE_BUILD_TYPE=Release"]
    configure += [f"-D{key}={value}" for key, value in options.items()]
    for argv in (configure, ["cmake", "--build", str(folder), "--parallel", "2"]):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        if res.returncode != 0:
            raise RuntimeError(f"test build {name} failed: {' '.join(argv)}\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    exe = folder / "bin" / ("kite.exe" if sys.platform == "win32" else "kite")
    assert exe.exists(), f"the build did not produce {exe}"
    _built[name] = exe
    return exe


@pytest.fixture(scope="session")
def kite_bin() -> Path:
    """The engine, stub build (KITE_CUDA=OFF), Release."""
    return build_engine("stub")


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
    return build_engine("asan")


@pytest.fixture(scope="session")
def qwen35_fixtures() -> Path:
    """The qwen35 conformance fixtures (tiny-a, tiny-b), part of the repository: never skipped."""
    if not (FIXTURES / "tiny-a").is_dir():
        pytest.fail(f"conformance fixtures missing at {FIXTURES}: an incomplete checkout")
    return FIXTURES


def run_kite(exe: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the engine with a clean KITE_* environment plus env; returns CompletedProcess."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    full.update(env or {})
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=full)


def _abi_header() -> str:
    return (REPO / "native" / "include" / "kite_cuda.h").read_text()


def abi_version() -> int:
    """KCUDA_ABI_VERSION as native/include/kite_cuda.h defines it."""
    return int(re.search(r"#define KCUDA_ABI_VERSION (\d+)", _abi_header()).group(1))


def abi_names() -> list[str]:
    """The entry points of native/include/kite_cuda.h (KCUDA_ENTRY_POINTS), in table order."""
    text = _abi_header()
    body = text[text.index("#define KCUDA_ENTRY_POINTS(X)") : text.index("/* Semantics")]
    return re.findall(r"X\([^,]+,\s*(kcuda_\w+)", body)


def tokens_of(fixture: Path) -> str:
    return (fixture / "tokens.txt").read_text().strip()
