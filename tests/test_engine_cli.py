"""The engine's command line: info, usage errors, run outputs, selftest (docs/ENGINE.md)."""

from __future__ import annotations

import pytest

import json
import re

from engine_build import abi_version, kite_bin, qwen35_fixtures, run_kite, tokens_of  # noqa: F401

pytestmark = pytest.mark.native  # builds and runs the real engine


def test_info_text_and_json(kite_bin):
    res = run_kite(kite_bin, "info")
    assert res.returncode == 0, res.stderr
    assert "kite 0.1.0" in res.stdout
    res = run_kite(kite_bin, "info", "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["kite_version"] == "0.1.0"
    assert info["abi_version"] == abi_version()
    assert set(info["build"]) >= {"compiler", "kite_cuda", "simd", "os", "arch"}
    assert info["build"]["kite_cuda"] is False
    assert info["threads_default"] >= 1
    cuda = info["cuda"]
    assert cuda["compiled"] is False and cuda["available"] is False
    assert cuda["reason"] == "built without KITE_CUDA"
    assert cuda["device"] is None
    assert set(cuda["gates"]) == {"graph", "graph_m", "force_cpu", "flops_min"}


def test_info_reads_threads_and_gates(kite_bin):
    res = run_kite(
        kite_bin, "info", "--json", env={"KITE_THREADS": "3", "KITE_CUDA_GRAPH": "0", "KITE_CUDA_FORCE_CPU": "1"}
    )
    info = json.loads(res.stdout)
    assert info["threads_default"] == 3
    assert info["cuda"]["gates"]["graph"] is False
    assert info["cuda"]["gates"]["force_cpu"] is True


def test_usage_errors_exit_2(kite_bin, tmp_path):
    cases = [
        [],
        ["frobnicate"],
        ["info", "--bogus"],
        ["run", "--prompt", "1,2"],
        ["run", "--model", "x.gguf"],
        ["run", "--model", "x.gguf", "--prompt", "1,,2"],
        ["run", "--model", "x.gguf", "--prompt", "1,a"],
        ["run", "--model", "x.gguf", "--prompt", "1", "--mt", "0"],
        ["run", "--model", "x.gguf", "--prompt", "1", "--steps", "-1"],
        ["run", "--model", "x.gguf", "--prompt", "1", "--threads", "x"],
        ["run", "--model", "x.gguf", "--prompt", "1", "--wat", "1"],
        ["run", "--model", "x.gguf", "--prompt"],
        ["selftest", "--nope"],
    ]
    for args in cases:
        res = run_kite(kite_bin, *args)
        assert res.returncode == 2, (args, res.returncode, res.stderr)
        assert "usage" in res.stderr, args


def test_missing_model_exit_1(kite_bin, tmp_path):
    res = run_kite(kite_bin, "run", "--model", tmp_path / "absent.gguf", "--prompt", "1")
    assert res.returncode == 1
    assert res.stderr.startswith("kite: error:")


def test_selftest_all_green(kite_bin):
    res = run_kite(kite_bin, "selftest", timeout=300)
    lines = res.stdout.strip().splitlines()
    assert re.fullmatch(r"\d+ passed, 0 failed", lines[-1]), res.stdout
    assert res.returncode == 0
    assert not [ln for ln in lines if ln.startswith("FAIL")]
    assert int(lines[-1].split()[0]) >= 40


def test_selftest_with_model(kite_bin, qwen35_fixtures):
    res = run_kite(kite_bin, "selftest", "--model", qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf")
    assert res.returncode == 0, res.stdout
    assert "PASS model_file_rows_m4_vs_m1" in res.stdout


def test_run_json_and_dump(kite_bin, qwen35_fixtures, tmp_path):
    fx = qwen35_fixtures / "tiny-b"
    model = fx / "tiny-b-q8_0.gguf"
    dump = tmp_path / "out" / "d"
    res = run_kite(
        kite_bin,
        "run",
        "--model",
        model,
        "--prompt",
        "1,2,3",
        "--steps",
        "4",
        "--mt",
        "2",
        "--threads",
        "2",
        "--iters",
        "2",
        "--dump",
        dump,
        "--json",
    )
    assert res.returncode == 0, res.stderr
    meta = json.loads(res.stdout)
    assert meta == json.loads((dump / "meta.json").read_text())
    assert sorted(p.name for p in dump.iterdir()) == ["h_out.f32", "logits.f32", "meta.json"]
    assert meta["shapes"] == {"h_out": [7, 96], "logits": [7, 384]}
    assert (dump / "h_out.f32").stat().st_size == 7 * 96 * 4
    assert (dump / "logits.f32").stat().st_size == 7 * 384 * 4
    assert meta["model"]["arch"] == "qwen35"
    assert meta["model"]["sha256"] == "a4db4618d14a5644b12ba97b8e14ac05c5d48c8f6a1b8ca990b37888d3854fed"
    assert meta["model"]["types"] == {"f32": 31, "q8_0": 46}
    assert meta["request"] == {
        "prompt": [1, 2, 3],
        "prompt_len": 3,
        "steps": 4,
        "mt": 2,
        "threads": 2,
        "iters": 2,
        "step_delay_us": 0,
    }
    assert len(meta["tokens"]) == 4
    c = meta["counters"]
    # two iterations: 7 rows each on the CPU; M-row passes of the prompt: [2] (the last has 1 row)
    assert c["cpu_steps"] == 14 and c["gpu_steps"] == 0 and c["mrow_calls"] == 0
    assert c["cpu_mrow_calls"] == 2
    for key in ("offload_gpu", "offload_cpu", "graph_captures", "graph_replays", "mrow_graph_replays", "stream_steps"):
        assert key in c
    t = meta["timings"]
    assert len(t["request_ms"]) == 2 and len(t["prefill_ms"]) == 2 and len(t["decode_ms"]) == 2
    assert len(t["step_ms"]) == 7
    assert t["load_ms"] >= 0 and t["prepare_ms"] >= 0
    assert meta["backend"]["reason"] == "built without KITE_CUDA"
    # without --dump: no digest
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1", "--json")
    assert json.loads(res.stdout)["model"]["sha256"] is None


def test_step_delay_inside_window(kite_bin, qwen35_fixtures):
    model = qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf"
    res = run_kite(
        kite_bin,
        "run",
        "--model",
        model,
        "--prompt",
        "1,2,3,4",
        "--steps",
        "2",
        "--json",
        env={"KITE_DEBUG_STEP_DELAY_US": "20000"},
    )
    meta = json.loads(res.stdout)
    assert meta["timings"]["request_ms"][0] >= 6 * 20.0
    assert meta["timings"]["prefill_ms"][0] >= 4 * 20.0
    assert min(meta["timings"]["step_ms"]) >= 20.0


def test_runtime_errors_exit_1(kite_bin, qwen35_fixtures):
    model = qwen35_fixtures / "tiny-b" / "tiny-b-f32.gguf"
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1,384")
    assert res.returncode == 1 and res.stderr.startswith("kite: error:")
    assert "vocabulary" in res.stderr
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1,2,3", "--steps", "3", "--ctx", "5")
    assert res.returncode == 1 and "context length" in res.stderr
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1,2,3", "--steps", "2", "--ctx", "5")
    assert res.returncode == 0, res.stderr
