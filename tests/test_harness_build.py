"""CMake builds: engine and module separately into build/<name>/{engine,cuda,bin}; nothing is
rebuilt (CMake not even run) when nothing changed."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from harness.builder import cmake as B
from harness.builder.cmake import _Ticker, status_line
from harness.contract.config import load_config

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and (shutil.which("cc") or shutil.which("gcc"))),
                                reason="needs cmake and a host C compiler")

ENGINE_CMAKE = """\
cmake_minimum_required(VERSION 3.16)
project(kite C)
option(KITE_CUDA "loader" OFF)
add_executable(kite main.c)
if(KITE_CUDA)
  target_compile_definitions(kite PRIVATE KITE_CUDA=1)
endif()
"""
MODULE_CMAKE = """\
cmake_minimum_required(VERSION 3.16)
project(kite_cuda C)
add_library(kite_cuda SHARED mod.c)
set_target_properties(kite_cuda PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${KITE_OUTPUT_DIR})
"""


@pytest.fixture
def cmake_repo(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "repo"
    (root / "native" / "cuda").mkdir(parents=True)
    (root / "native" / "include").mkdir()
    (root / "native" / "CMakeLists.txt").write_text(ENGINE_CMAKE)
    (root / "native" / "main.c").write_text("int main(void) { return 0; }\n")
    (root / "native" / "cuda" / "CMakeLists.txt").write_text(MODULE_CMAKE)
    (root / "native" / "cuda" / "mod.c").write_text("int kcuda_abi_version(void) { return 1; }\n")
    (root / "configs").mkdir()
    (root / "configs" / "engine.yaml").write_text("""\
engine: {binary: kite, module: libkite_cuda.so}
builds:
  default:
    engine: {source: native, options: {KITE_CUDA: "ON"}}
    module: {source: native/cuda, inputs: [native/include]}
  stub:
    engine: {source: native, options: {KITE_CUDA: false}}
build: {jobs: 2}
""")
    monkeypatch.setattr(B, "find_nvcc", lambda: "/bin/true")  # the test module is plain C
    return root


def test_build_and_incremental(cmake_repo, monkeypatch):
    cfg = load_config(cmake_repo)
    r = B.build(cfg, "default")
    assert r.engine.status == "built" and r.module.status == "built", (r.engine, r.module)
    bin_dir = cmake_repo / "build" / "default" / "bin"
    assert (bin_dir / "kite").exists() and (bin_dir / "libkite_cuda.so").exists()
    assert (cmake_repo / "build" / "default" / "engine" / "CMakeCache.txt").exists()
    assert (cmake_repo / "build" / "default" / "cuda" / "CMakeCache.txt").exists()
    cache = (cmake_repo / "build" / "default" / "engine" / "CMakeCache.txt").read_text()
    assert "KITE_CUDA:UNINITIALIZED=ON" in cache or "KITE_CUDA:BOOL=ON" in cache
    with monkeypatch.context() as m:  # nothing changed: CMake is not started at all
        m.setattr(B, "run_process", lambda *a, **k: pytest.fail(f"CMake started: {a[0]}"))
        r2 = B.build(cfg, "default")
    assert (r2.engine.status, r2.module.status) == ("up-to-date", "up-to-date")
    # a change to the module's sources rebuilds the module only; the shared header both
    time.sleep(0.01)
    (cmake_repo / "native" / "cuda" / "mod.c").write_text("int kcuda_abi_version(void) { return 2; }\n")
    r3 = B.build(cfg, "default")
    assert (r3.engine.status, r3.module.status) == ("up-to-date", "built")
    (cmake_repo / "native" / "include" / "kite_cuda.h").write_text("/* changed */\n")
    r4 = B.build(cfg, "default")
    assert (r4.engine.status, r4.module.status) == ("built", "built")


def test_stub_build_and_failure(cmake_repo):
    cfg = load_config(cmake_repo)
    r = B.build(cfg, "stub")
    assert r.engine.status == "built" and r.module.status == "skipped"
    cache = (cmake_repo / "build" / "stub" / "engine" / "CMakeCache.txt").read_text()
    assert "KITE_CUDA:UNINITIALIZED=OFF" in cache or "KITE_CUDA:BOOL=OFF" in cache
    (cmake_repo / "native" / "main.c").write_text("int main(void) { return syntax error }\n")
    r = B.build(cfg, "stub")
    assert r.engine.status == "failed" and r.engine.reason.startswith("cmake build: exit status")
    assert "syntax" in Path(r.engine.log).read_text()


def test_missing_project(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "engine.yaml").write_text("builds: {default: {engine: {source: native}}}\n")
    r = B.build(load_config(tmp_path), "default")
    assert r.engine.status == "failed" and r.engine.reason == "native/CMakeLists.txt not found"


def test_no_nvcc_skips_module(cmake_repo, monkeypatch):
    monkeypatch.setattr(B, "find_nvcc", lambda: None)
    r = B.build(load_config(cmake_repo), "default")
    assert r.engine.status == "built" and r.module.status == "skipped" and r.module.reason == "nvcc not found"
    assert os.access(r.engine_path, os.X_OK)


# ---- builds are never silent ---------------------------------------------------------------------

def test_status_line_relays_the_latest_ninja_line(tmp_path):
    log = tmp_path / "build.stdout"
    log.write_text("[1/4] Building C object a.o\n[2/4] Building C object b.o\nwarning: x\n")
    assert status_line("engine", log, 12.4) == "engine: 12 s [2/4] Building C object b.o"
    assert status_line("engine", tmp_path / "absent", 3.0) == "engine: 3 s"


def test_ticker_says_something_while_a_step_runs(tmp_path):
    log = tmp_path / "build.stdout"
    log.write_text("[3/9] Linking C executable kite\n")
    said: list[str] = []
    got = threading.Event()

    def say(s: str) -> None:
        said.append(s)
        got.set()

    with _Ticker("module", log, say, every=0.01):
        assert got.wait(10)
    assert said[0].startswith("module: ") and said[0].endswith("[3/9] Linking C executable kite")


def test_a_changed_source_with_an_older_time_is_rebuilt(cmake_repo):
    # sources copied with their times kept (a machine that keeps an earlier call's build folder)
    # can be older than the objects made from other contents: the build must still compile them
    cfg = load_config(cmake_repo)
    assert B.build(cfg, "default").module.status == "built"
    mod = cmake_repo / "native" / "cuda" / "mod.c"
    before = mod.stat().st_mtime_ns - 10**9
    mod.write_text("int kcuda_abi_version(void) { return syntax error }\n")
    os.utime(mod, ns=(before, before))
    r = B.build(cfg, "default")
    assert r.module.status == "failed" and "syntax" in Path(r.module.log).read_text(), r.module
    assert mod.stat().st_mtime_ns > before  # touched, so that the build tool saw it
    mod.write_text("int kcuda_abi_version(void) { return 3; }\n")
    os.utime(mod, ns=(before, before))
    assert B.build(cfg, "default").module.status == "built"
