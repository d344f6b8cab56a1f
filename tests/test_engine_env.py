"""The engine's environment variables: one parser (native/engine/env_options.c) for the stub
build and the run-time loader build alike. A value that does not parse is refused with one
warning line naming the variable, and the default is used (docs/KITE-ENGINE.md, "Environment")."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from engine_build import build_engine, kite_bin, qwen35_fixtures, run_kite  # noqa: F401

pytestmark = pytest.mark.native  # builds and runs the real engine


@pytest.fixture(scope="module", params=["stub", "default"])
def engine(request, kite_bin):
    if request.param == "stub":
        return kite_bin
    if sys.platform == "win32":
        pytest.skip("the loader build is tested on POSIX here")
    return build_engine("default")


def _info(exe, env):
    res = run_kite(exe, "info", "--json", env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


# (variable, value, where the value shows in info --json, what is read)
GOOD = [
    ("KITE_CUDA_FLOPS_MIN", "0", "flops_min", 0),
    ("KITE_CUDA_FLOPS_MIN", "12345", "flops_min", 12345),
    ("KITE_CUDA_GRAPH", "0", "graph", False),
    ("KITE_CUDA_GRAPH_M", "1", "graph_m", True),
    ("KITE_CUDA_FORCE_CPU", "1", "force_cpu", True),
    ("KITE_CUDA_FORCE_CPU", "", "force_cpu", False),  # empty = unset
    ("KITE_THREADS", "3", "threads_default", 3),
]
BAD = [
    ("KITE_CUDA_FLOPS_MIN", "abc", "flops_min", 1000000),
    ("KITE_CUDA_FLOPS_MIN", "-5", "flops_min", 1000000),
    ("KITE_CUDA_FLOPS_MIN", "12x", "flops_min", 1000000),
    ("KITE_CUDA_FLOPS_MIN", "99999999999999999999", "flops_min", 1000000),
    ("KITE_CUDA_GRAPH", "off", "graph", True),
    ("KITE_CUDA_GRAPH", "2", "graph", True),
    ("KITE_CUDA_GRAPH_M", "yes", "graph_m", False),
    ("KITE_CUDA_FORCE_CPU", "abc", "force_cpu", False),
    ("KITE_THREADS", "abc", "threads_default", None),
    ("KITE_THREADS", "-5", "threads_default", None),
    ("KITE_THREADS", "0", "threads_default", None),
    ("KITE_THREADS", "1025", "threads_default", None),
    # strtoll alone took a leading blank or sign: digits only
    ("KITE_THREADS", " 3", "threads_default", None),
    ("KITE_THREADS", "+3", "threads_default", None),
    ("KITE_THREADS", "\t3", "threads_default", None),
    ("KITE_CUDA_FLOPS_MIN", " 5", "flops_min", 1000000),
    ("KITE_CUDA_FLOPS_MIN", "+5", "flops_min", 1000000),
    ("KITE_CUDA_FLOPS_MIN", "-0", "flops_min", 1000000),
    # a newline in the value must not split the one warning line
    ("KITE_THREADS", "3\n4", "threads_default", None),
    ("KITE_CUDA_GRAPH", "1\n", "graph", True),
    ("KITE_CUDA_GRAPH", " ", "graph", True),
]


def _shown(value: str) -> str:
    """The value as the warning prints it: control characters as \\xNN."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in value)


def _value(info: dict, key: str):
    return info["threads_default"] if key == "threads_default" else info["cuda"]["gates"][key]


@pytest.mark.parametrize("name,value,key,want", GOOD)
def test_good_values_are_read_silently(engine, name, value, key, want):
    info, err = _info(engine, {name: value})
    assert _value(info, key) == want
    assert "warning" not in err, err


@pytest.mark.parametrize("name,value,key,want", BAD)
def test_bad_values_warn_once_and_use_the_default(engine, name, value, key, want):
    default, _ = _info(engine, {})
    info, err = _info(engine, {name: value})
    assert _value(info, key) == (_value(default, key) if want is None else want)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"kite: warning: {name}='{_shown(value)}' is not "), err
    assert "using the default" in lines[0], err


@pytest.mark.parametrize("value", ["-1", " 5", "+5", "5x", "1073741825"])
def test_bad_step_delay_warns_and_runs_without_delay(kite_bin, qwen35_fixtures, value):
    model = qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf"
    res = run_kite(
        kite_bin, "run", "--model", model, "--prompt", "1,2", "--json", env={"KITE_DEBUG_STEP_DELAY_US": value}
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith(f"kite: warning: KITE_DEBUG_STEP_DELAY_US='{value}' is not a whole number"), res.stderr
    assert json.loads(res.stdout)["request"]["step_delay_us"] == 0


# ---- KITE_CUDA_LIB (the loader build) ---------------------------------------------------------


@pytest.fixture(scope="module")
def loader():
    if sys.platform == "win32":
        pytest.skip("the loader build is tested on POSIX here")
    return build_engine("default")


def _first_step(exe, lib: str, timeout: float = 20):
    res = run_kite(exe, "info", "--json", env={"KITE_CUDA_LIB": lib}, timeout=timeout)
    assert res.returncode == 0, res.stderr
    cuda = json.loads(res.stdout)["cuda"]
    return cuda["search"][0], cuda


def test_a_fifo_as_module_is_refused_without_blocking(loader, tmp_path):
    """dlopen opens a FIFO and waits for a writer: every command hung, `run` included."""
    fifo = tmp_path / "libkite_cuda.so"
    os.mkfifo(fifo)
    step, cuda = _first_step(loader, str(fifo))
    assert step["result"] == "load failed: not a regular file", step
    assert cuda["loaded_path"] != str(fifo)


@pytest.mark.parametrize("which", ["folder", "/dev/null"])
def test_a_module_path_that_is_no_file_falls_through(loader, tmp_path, which):
    path = str(tmp_path) if which == "folder" else which
    step, cuda = _first_step(loader, path)
    assert step == {"how": "KITE_CUDA_LIB", "path": path, "result": "load failed: not a regular file"}
    assert cuda["loaded_path"] != path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's libc.so.6")
def test_a_bare_module_name_is_the_file_in_the_working_folder(loader, tmp_path, monkeypatch):
    """KITE_CUDA_LIB=libc.so.6 with a text file of that name here: the check saw that file, but
    dlopen searched the system path and 'loaded' the C library instead."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libc.so.6").write_text("not a library\n")
    step, cuda = _first_step(loader, "libc.so.6")
    assert step["result"].startswith("load failed: ./libc.so.6: "), step
    assert cuda["loaded_path"] != "libc.so.6"
    shutil.copyfile(loader.parent / "testmods" / "libkite_cuda_fake.so", tmp_path / "fake.so")
    step, cuda = _first_step(loader, "fake.so")
    assert step["result"] == "loaded" and cuda["loaded_path"] == "fake.so" and cuda["bound"], step


def test_a_module_path_too_long_to_report_is_not_loaded(loader, tmp_path):
    """loaded_path holds 1023 bytes: a longer path loaded and was reported cut."""
    folder = tmp_path / "/".join(["d" * 200] * 5)
    folder.mkdir(parents=True)
    lib = folder / "libkite_cuda_fake.so"
    shutil.copyfile(loader.parent / "testmods" / "libkite_cuda_fake.so", lib)
    assert len(str(lib)) > 1023
    step, cuda = _first_step(loader, str(lib))
    assert step["result"] == "load failed: path longer than 1023 bytes", step
    assert cuda["loaded_path"] is None or not str(lib).startswith(cuda["loaded_path"])
