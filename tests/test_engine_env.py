"""The engine's environment variables: one parser (native/engine/env_options.c) for the stub
build and the run-time loader build alike. A value that does not parse is refused with one
warning line naming the variable, and the default is used (docs/ENGINE.md, "Environment")."""

from __future__ import annotations

import json
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
]


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
    assert lines[0].startswith(f"kite: warning: {name}='{value}' is not "), err
    assert "using the default" in lines[0], err


def test_bad_step_delay_warns_and_runs_without_delay(kite_bin, qwen35_fixtures):
    model = qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf"
    res = run_kite(
        kite_bin, "run", "--model", model, "--prompt", "1,2", "--json", env={"KITE_DEBUG_STEP_DELAY_US": "-1"}
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith("kite: warning: KITE_DEBUG_STEP_DELAY_US='-1' is not a whole number"), res.stderr
    assert json.loads(res.stdout)["request"]["step_delay_us"] == 0
