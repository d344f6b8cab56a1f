"""bench/cpu_decode.py end to end against the fake engine (the real one may not be built), with a
small bandwidth probe; and its clear refusal when the engine is missing."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fake_engine.py"


def _bench():
    spec = importlib.util.spec_from_file_location("cpu_decode", REPO / "bench" / "cpu_decode.py")
    mod = importlib.util.module_from_spec(spec)
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
