"""CI's short fuzz run: build the libFuzzer targets, replay the kept regression inputs, fuzz the
GGUF reader and the model loader for a fixed number of inputs each (fixed seed, fresh corpus), so
that how much is fuzzed does not depend on how fast or loaded the machine is. Skipped (with the reason) where clang
or libFuzzer is missing. The long run is `python -m harness fuzz --seconds 600`
(docs/RELIABILITY.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tools import fuzz

REPO = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("KITE_FUZZ_SMOKE_RUNS", "20000"))  # per target: about 2 s and 6 s on 2 loaded cores


def _why_not() -> str | None:
    if os.name == "nt":
        return "libFuzzer runs are set up for POSIX hosts"
    if not shutil.which("cmake"):
        return "cmake not found"
    clang = fuzz.find_clang()
    if not clang:
        return "clang not found (libFuzzer): apt-get install clang libclang-rt-dev"
    ok, why = fuzz.libfuzzer_works(clang, REPO / "build" / "fuzz-smoke" / "probe")
    return None if ok else f"{clang} cannot build a libFuzzer target: {why}"


@pytest.fixture(scope="module")
def why_not():
    return _why_not()


def test_fuzz_smoke(why_not, tmp_path):
    if why_not:
        pytest.skip(why_not)
    found = tmp_path / "findings"
    r = subprocess.run([sys.executable, "-m", "harness.tools.fuzz", "--runs", str(RUNS), "--seed", "1", "--json",
                        "--corpus", str(tmp_path / "corpus"), "--build-dir", str(REPO / "build" / "fuzz-smoke"),
                        "--regressions", str(found)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    doc = json.loads(r.stdout)
    for name, reg in doc["regressions"].items():
        assert reg["passed"], f"{name}: a kept regression input fails again:\n{r.stderr[-2000:]}"
    for t in doc["targets"]:
        assert t["stats"]["executions"] >= RUNS, t
        assert t["stats"]["cov"] > 50, t
        assert not t["findings"] and not t["summary"], (
            f"{t['target']}: new finding {t['summary']}; inputs {[str(p) for p in found.iterdir()]} "
            f"(copy them into {fuzz.REGRESSIONS} after the fix)")


def test_parse_libfuzzer_output():
    text = ("INFO: Seed: 1\n#2\tINITED cov: 10 ft: 12 corp: 3/4Kb exec/s: 0 rss: 30Mb\n"
            "#100\tNEW    cov: 20 ft: 30 corp: 5/9Kb lim: 4 exec/s: 50 rss: 31Mb L: 3/4 MS: 1 ChangeBit-\n"
            "==1== ERROR: AddressSanitizer: heap-buffer-overflow\n"
            "SUMMARY: AddressSanitizer: heap-buffer-overflow gguf.c:10 in f\n"
            "stat::number_of_executed_units: 123\nstat::average_exec_per_sec:     61\n"
            "stat::new_units_added:          2\nstat::peak_rss_mb:              33\n")
    st, summary = fuzz.parse_output(text)
    assert (st.executions, st.exec_per_s, st.cov, st.ft, st.corpus_units, st.new_units, st.peak_rss_mb) == \
        (123, 61, 20, 30, 5, 2, 33)
    assert (st.initial_cov, st.initial_ft) == (10, 12)
    assert summary.startswith("AddressSanitizer: heap-buffer-overflow")


def test_keep_findings(tmp_path):
    art = tmp_path / "art"
    art.mkdir()
    (art / "crash-abc").write_bytes(b"GGUF\x03")
    (art / "slow-unit-1").write_bytes(b"x")
    (art / "oom-def").write_bytes(b"GGUF\x02")
    kept = fuzz.keep_findings(art, tmp_path / "keep", "gguf", tmp_path)
    names = sorted(Path(k).name for k in kept)
    assert [n.split("-")[0] for n in names] == ["crash", "oom"]
    assert all("-gguf-" in n for n in names)
    # idempotent: the same input is kept once
    assert fuzz.keep_findings(art, tmp_path / "keep", "gguf", tmp_path) == kept
    assert len(list((tmp_path / "keep").iterdir())) == 2


def test_hostile_models_are_deterministic():
    good = b"GGUF" + bytes(range(256)) * 40
    a = fuzz.hostile_models(good)
    assert a == fuzz.hostile_models(good)
    assert {k for k, _, _ in a} == {"truncated", "corrupted", "degenerate"}
    assert all(d != good for _, _, d in a)
