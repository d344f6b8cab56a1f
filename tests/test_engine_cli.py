"""The engine's command line: info, usage errors, run outputs, selftest (docs/KITE-ENGINE.md)."""

from __future__ import annotations

import pytest

import json
import os
import re
import shutil
import subprocess
import sys

from engine_build import abi_version, kite_asan_bin, kite_bin, qwen35_fixtures, run_kite, tokens_of  # noqa: F401

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
    # the greedy picks are a part of the decode window
    assert len(t["step_greedy_ms"]) == 2 and all(0 <= g <= d for g, d in zip(t["step_greedy_ms"], t["decode_ms"], strict=True))
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
    # the delay is in the window but not in the picks: picks + 2 delays fit in the decode window
    assert meta["timings"]["step_greedy_ms"][0] + 2 * 20.0 <= meta["timings"]["decode_ms"][0]


def test_runtime_errors_exit_1(kite_bin, qwen35_fixtures):
    model = qwen35_fixtures / "tiny-b" / "tiny-b-f32.gguf"
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1,384")
    assert res.returncode == 1 and res.stderr.startswith("kite: error:")
    assert "vocabulary" in res.stderr
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1,2,3", "--steps", "3", "--ctx", "5")
    assert res.returncode == 1 and "context length" in res.stderr
    res = run_kite(kite_bin, "run", "--model", model, "--prompt", "1,2,3", "--steps", "2", "--ctx", "5")
    assert res.returncode == 0, res.stderr


# ---- hostile command lines (docs/KITE-ENGINE.md: exit 2 = usage error, 1 = runtime failure) -------

SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


@pytest.fixture(params=["stub", "asan"])
def any_kite(request):
    """The stub build, then the same engine under ASan + UBSan (leaks checked)."""
    return request.getfixturevalue("kite_bin" if request.param == "stub" else "kite_asan_bin")


def _tiny_model(fixtures):
    return fixtures / "tiny-b" / "tiny-b-q8_0.gguf"


def _assert_usage_error(res, args):
    assert res.returncode == 2, (args, res.returncode, res.stderr)
    assert res.stdout == "", args
    first = res.stderr.splitlines()[0]
    assert first.startswith("kite: error: "), (args, res.stderr)
    assert "usage:" in res.stderr, args
    assert not any(mark in res.stderr for mark in SANITIZER_MARKS), res.stderr


# run arguments after `--model TINY --prompt 1`: each is malformed, repeated or unknown, so the
# run must not start (strtol alone took " 5" and "+5"; a repeated option silently took the last)
HOSTILE_RUN_ARGS = [
    ["--steps", " 5"],
    ["--steps", "+5"],
    ["--steps", "5 "],
    ["--steps", "-0"],
    ["--steps", "1e3"],
    ["--steps", ""],
    ["--steps", "99999999999999999999"],
    ["--threads", " 2"],
    ["--threads", "0"],
    ["--threads", "100000"],
    ["--mt", "+1"],
    ["--mt", "-5"],
    ["--iters", "\t1"],
    ["--ctx", " 8"],
    ["--steps", "1", "--steps", "2"],
    ["--threads", "1", "--threads", "1"],
    ["--json", "--json"],
    ["--prompt", "2"],
    ["--dump", "{tmp}/a", "--dump", "{tmp}/b"],
    ["--bogus"],
    ["--bogus", "1"],
    ["--steps"],
    [""],
]


@pytest.mark.parametrize("extra", HOSTILE_RUN_ARGS, ids=repr)
def test_hostile_run_options_are_usage_errors(any_kite, qwen35_fixtures, tmp_path, extra):
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    args = ["run", "--model", _tiny_model(qwen35_fixtures), "--prompt", "1", *extra]
    res = run_kite(any_kite, *args, env={"ASAN_OPTIONS": "detect_leaks=1"}, timeout=60)
    _assert_usage_error(res, args)
    assert not list(tmp_path.iterdir()), "a refused run wrote its dumps"


@pytest.mark.parametrize("prompt", [" 1", "1, 2", "+1", "1,+2", "1 ", "-1", "1,,2", "1,", ",1", "", ",", "0x1",
                                    "2147483648", "1;2", "1\n2", "a"], ids=repr)
def test_hostile_prompts_are_usage_errors(any_kite, qwen35_fixtures, prompt):
    args = ["run", "--model", _tiny_model(qwen35_fixtures), "--prompt", prompt]
    res = run_kite(any_kite, *args, env={"ASAN_OPTIONS": "detect_leaks=1"}, timeout=60)
    _assert_usage_error(res, args)


@pytest.mark.parametrize(
    "args",
    [
        ["info", "--json", "--json"],
        ["--help", "extra"],
        ["-h", "--json"],
        ["selftest", "--model", "a.gguf", "--model", "b.gguf"],
        ["selftest", "--model"],
    ],
    ids=repr,
)
def test_hostile_commands_are_usage_errors(kite_bin, args):
    _assert_usage_error(run_kite(kite_bin, *args, timeout=60), args)


def test_option_messages_say_what_is_wrong(kite_bin, qwen35_fixtures):
    base = ["run", "--model", _tiny_model(qwen35_fixtures), "--prompt", "1"]
    res = run_kite(kite_bin, *base, "--bogus")
    assert res.stderr.startswith("kite: error: run: unknown option '--bogus'\n"), res.stderr
    res = run_kite(kite_bin, *base, "--steps")
    assert res.stderr.startswith("kite: error: run: '--steps' needs a value\n"), res.stderr
    res = run_kite(kite_bin, *base, "--mt", "2", "--mt", "2")
    assert res.stderr.startswith("kite: error: run: '--mt' given twice\n"), res.stderr
    res = run_kite(kite_bin, "selftest", "--model")
    assert res.stderr.startswith("kite: error: selftest: '--model' needs a value\n"), res.stderr


@pytest.mark.parametrize("path", ["a\nb.gguf", "a\rb\x1b[2J.gguf"], ids=repr)
def test_control_characters_in_a_path_keep_the_error_on_one_line(any_kite, path):
    res = run_kite(any_kite, "run", "--model", path, "--prompt", "1", env={"ASAN_OPTIONS": "detect_leaks=1"})
    assert res.returncode == 1, res.stderr
    escaped = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 else c for c in path)
    assert res.stderr == f"kite: error: cannot open '{escaped}': No such file or directory\n", res.stderr


def _raw_run(exe, *args, stdout=subprocess.PIPE):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    return subprocess.run([os.fsencode(str(exe)), *map(os.fsencode, map(str, args))], stdout=stdout,
                          stderr=subprocess.PIPE, timeout=60, env=env)


@pytest.mark.skipif(sys.platform != "linux", reason="file names of any bytes: Linux")
def test_a_non_utf8_model_path_keeps_the_json_utf8(kite_bin, qwen35_fixtures, tmp_path):
    """JSON is UTF-8: a byte that is not becomes U+DC80 + byte (surrogateescape), so json.loads
    reads the document and os.fsencode gives the path back."""
    name = os.fsdecode(b"caf\xc3\xa9 \xff\xfe \xed\xa0\x80 \xc0\xaf.gguf")  # valid, invalid, surrogate, overlong
    model = tmp_path / name
    shutil.copyfile(_tiny_model(qwen35_fixtures), model)
    dump = tmp_path / "dump"
    res = _raw_run(kite_bin, "run", "--model", model, "--prompt", "1", "--json", "--dump", dump)
    assert res.returncode == 0, res.stderr
    for text in (res.stdout, (dump / "meta.json").read_bytes()):
        meta = json.loads(text.decode("utf-8"))  # strict: raw 0xff bytes made this fail
        assert os.fsencode(meta["model"]["path"]) == os.fsencode(str(model))
        assert "café" in meta["model"]["path"]


@pytest.mark.skipif(sys.platform != "linux", reason="PATH_MAX 4096 and /dev/full: Linux")
def test_a_dump_path_too_long_for_its_file_names_is_refused(kite_bin, qwen35_fixtures, tmp_path):
    """dump + '/logits.f32' longer than 4095 bytes: the names were cut ('logits.f') and the run
    exited 0; now nothing is written and the run fails."""
    dump = str(tmp_path)
    while len(dump) + 201 < 4087:
        dump += "/" + "a" * 200
    dump += "/" + "b" * (4087 - len(dump) - 1)
    assert len(dump) == 4087
    os.makedirs(dump)
    res = run_kite(kite_bin, "run", "--model", _tiny_model(qwen35_fixtures), "--prompt", "1", "--dump", dump)
    assert res.returncode == 1, res.stderr
    assert res.stderr.startswith("kite: error: cannot write the dumps into '")
    assert res.stderr.endswith("': File name too long\n"), res.stderr[-200:]
    assert os.listdir(dump) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
@pytest.mark.parametrize("target,why", [("file", "Not a directory"), ("", "No such file or directory"),
                                         ("file/sub", "Not a directory")])
def test_a_dump_folder_that_cannot_be_made_says_why(kite_bin, qwen35_fixtures, tmp_path, target, why):
    (tmp_path / "file").write_text("x")
    dump = str(tmp_path / target) if target else ""
    res = run_kite(kite_bin, "run", "--model", _tiny_model(qwen35_fixtures), "--prompt", "1", "--dump", dump)
    assert res.returncode == 1, res.stderr
    assert res.stderr == f"kite: error: cannot create the dump folder '{dump}': {why}\n", res.stderr


def test_the_dump_folder_is_made_before_the_model_is_read(kite_bin, tmp_path):
    """A folder that cannot be made is reported before any work (the model, then the requests),
    so a long run does not fail at its end: here the model does not exist either, and the folder
    is what is named."""
    (tmp_path / "file").write_text("x")
    res = run_kite(kite_bin, "run", "--model", str(tmp_path / "absent.gguf"), "--prompt", "1",
                   "--dump", str(tmp_path / "file" / "sub"))
    assert res.returncode == 1 and "cannot create the dump folder" in res.stderr, res.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["info"], ["info", "--json"], ["run", "--prompt", "1", "--json"]], ids=repr)
def test_output_lost_on_a_full_disk_is_a_failure(kite_bin, qwen35_fixtures, args):
    if args[0] == "run":
        args = [*args, "--model", _tiny_model(qwen35_fixtures)]
    with open("/dev/full", "wb") as full:
        res = _raw_run(kite_bin, *args, stdout=full)
    assert res.returncode == 1, res.stderr
    assert res.stderr.decode() == "kite: error: cannot write the standard output: No space left on device\n"
