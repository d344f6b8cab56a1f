"""The benchmark scripts against the fake engine (the real one may not be built): bench/cpu_decode.py
end to end with a small bandwidth probe, and its clear refusal when the engine is missing;
bench/gpu_decode.py's ratio arithmetic and a whole run (--no-check: the fake engine has no device)
that alternates the configurations round by round."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
FAKE = REPO / "tests" / "fake_engine.py"


def _bench(name: str = "cpu_decode"):
    """A script of bench/ as a module; its folder on the path, as when it runs as a script (its
    sibling imports), and the module registered by name (its dataclasses need that)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_missing_engine_is_a_clear_error(tmp_path, capsys):
    assert _bench().main(["--kite", str(tmp_path / "no-kite")]) == 2
    assert "engine not found" in capsys.readouterr().err


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")),
                    reason="no host C compiler for the bandwidth probe")
@pytest.mark.skipif(not FAKE.is_file(), reason="fake engine not present")
def test_bench_table_with_fake_engine(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = _bench().main(["--kite", str(FAKE), "--models", "tiny:q8_0", "--models-dir", str(tmp_path),
                        "--steps", "4", "--iters", "2", "--membw-bytes", str(16 << 20), "--membw-reps", "1",
                        "--json", str(out)])
    assert rc == 0, capsys.readouterr().err
    res = json.loads(out.read_text())
    assert [r["threads"] for r in res["runs"]] == [1, 2]
    for r in res["runs"]:
        assert r["tok_s"] > 0 and r["membw_gbps"] > 0 and r["bytes_per_token"] > 200_000
        assert r["tokens_same_across_threads"] is True
    assert "tok/s" in capsys.readouterr().out


def test_round_ratios_are_taken_within_rounds():
    round_ratios = _bench("gpu_decode").round_ratios
    r = round_ratios([50.0, 48.0, 52.0], [20.0, 24.0, 20.0])
    assert r["rounds"] == [2.5, 2.0, 2.6]
    assert (r["median"], r["min"], r["max"]) == (2.5, 2.0, 2.6)
    with pytest.raises(ValueError):
        round_ratios([1.0, 2.0], [1.0])  # rounds must pair up
    assert math.isnan(round_ratios([], [])["median"])


@pytest.mark.skipif(not FAKE.is_file(), reason="fake engine not present")
def test_rounds_alternate_and_table_shows_ranges(tmp_path, monkeypatch):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"\0" * 4096)
    log = tmp_path / "argv.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_NOISE", "0.05")
    out, md = tmp_path / "b.json", tmp_path / "b.md"
    rc = _bench("gpu_decode").main(["--kite", str(FAKE), "--models", str(model), "--no-check", "--no-copy", "--rounds", "3",
                        "--iters", "2", "--steps", "4", "--prompt-len", "8", "--json", str(out), "--md", str(md)])
    assert rc == 0
    res = json.loads(out.read_text())["results"][0]
    assert res["rounds"] == 3
    for key in ("prefill_speedup_mt4", "prefill_speedup_mt4_graph_m", "graph_speedup"):
        r = res[key]
        assert len(r["rounds"]) == 3 and r["min"] <= r["median"] <= r["max"]
    assert len(res["prefill_mt4"]["ms_rounds"]) == 3 and len(res["graph"]["step_ms_all"]) == 3 * 2
    per_round = zip(res["prefill_mt1"]["ms_rounds"], res["prefill_mt4"]["ms_rounds"], strict=True)
    assert res["prefill_speedup_mt4"]["median"] == pytest.approx(statistics.median(a / b for a, b in per_round))
    # each round runs graph, stream, then the three prefills: (steps, --mt) in that order
    runs = [ln.split() for ln in log.read_text().splitlines() if " run " in f" {ln} "]
    seq = [(a[a.index("--steps") + 1], a[a.index("--mt") + 1]) for a in runs]
    assert seq == [("4", "1"), ("4", "1"), ("0", "1"), ("0", "4"), ("0", "4")] * 3
    table = md.read_text()
    assert "3 round(s)" in table and "x (" in table



@pytest.mark.skipif(not FAKE.is_file(), reason="fake engine not present")
def test_require_judges_claims_and_fails_what_it_cannot_measure(tmp_path, capsys):
    models = []
    for t in ("q8_0", "q4_0"):
        models.append(tmp_path / f"m-{t}.gguf")
        models[-1].write_bytes(b"\0" * 4096)
    common = ["--kite", str(FAKE), "--models", *map(str, models), "--no-check", "--no-copy", "--rounds", "2",
              "--iters", "1", "--steps", "4", "--decode-only"]
    gpu_decode = _bench("gpu_decode")
    assert gpu_decode.main(common + ["--require", "q4_over_q8>=0.5"]) == 0
    assert "PASS q4_over_q8: 1.000 >= 0.5" in capsys.readouterr().out  # the fake engine: same speed
    assert gpu_decode.main(common + ["--require", "q4_over_q8>=1.5"]) == 1
    assert "FAIL q4_over_q8: 1.000 < 1.5" in capsys.readouterr().out
    assert gpu_decode.main(common + ["--require", "copy_fraction>=0.5"]) == 1  # no copy bandwidth measured
    assert "FAIL copy_fraction: not measured" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        gpu_decode.main(common + ["--require", "speed>=2"])
