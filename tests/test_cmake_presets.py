"""CMakePresets.json files agree with configs/engine.yaml's builds, so `cmake --preset NAME`
(run in the project's source folder) configures what `harness build NAME` configures."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.builder.cmake import _generator
from harness.contract.config import load_config

REPO = Path(__file__).resolve().parent.parent
CFG = load_config(REPO)


def expected_presets() -> dict[str, dict[str, dict]]:
    """source folder -> build name -> the configure preset the harness's build amounts to."""
    out: dict[str, dict[str, dict]] = {}
    for name, b in CFG.builds.items():
        parts = [(b.engine, "engine", "CMAKE_RUNTIME_OUTPUT_DIRECTORY")] if b.engine else []
        parts += [(x, Path(x.source).name, "KITE_OUTPUT_DIR") for x in b.extras]
        parts += [(b.module, "cuda", "KITE_OUTPUT_DIR")] if b.module else []
        for proj, part, out_var in parts:
            up = "/".join([".."] * len(Path(proj.source).parts))
            out.setdefault(proj.source, {})[name] = {
                "binaryDir": f"${{sourceDir}}/{up}/{CFG.build_dir}/{name}/{part}",
                "cacheVariables": {"CMAKE_BUILD_TYPE": CFG.build_type, **proj.options,
                                   # fetched source (llama.cpp): its folder comes from the environment
                                   **{option: f"$env{{{option}}}" for option, _ in proj.external},
                                   out_var: f"${{sourceDir}}/{up}/{CFG.build_dir}/{name}/bin"}}
    return out


def test_presets_match_the_builds():
    want = expected_presets()
    assert set(want) == {"native", "native/cuda", "native/testmod", "native/llamacpp"}
    for source, builds in want.items():
        doc = json.loads((REPO / source / "CMakePresets.json").read_text())
        got = {p["name"]: {"binaryDir": p["binaryDir"], "cacheVariables": p["cacheVariables"]}
               for p in doc["configurePresets"]}
        assert got == builds, source
        assert {p["generator"] for p in doc["configurePresets"]} == {"Ninja"}  # what `generator: auto` picks
        assert [(b["name"], b["configurePreset"]) for b in doc["buildPresets"]] == [(n, n) for n in builds]


def _cache(build_dir: Path) -> dict[str, str]:
    text = (build_dir / "CMakeCache.txt").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*):[A-Z]+=(.*)$", text, re.M)}


def test_cmake_preset_stub_configures_like_the_harness(tmp_path):
    if not shutil.which("cmake") or not shutil.which("ninja"):
        pytest.skip("needs cmake and ninja (the presets' generator)")
    r = subprocess.run(["cmake", "--preset", "stub", "-B", str(tmp_path)], cwd=REPO / "native",
                       capture_output=True, text=True, timeout=300)
    if "--preset" in r.stderr and "Unknown argument" in r.stderr:
        pytest.skip("cmake < 3.21 has no presets")
    assert r.returncode == 0, r.stdout + r.stderr
    cache = _cache(tmp_path)
    spec = CFG.builds["stub"].engine
    for key, value in {"CMAKE_BUILD_TYPE": CFG.build_type, **spec.options}.items():
        assert cache[key] == value, key
    assert ["-G", cache["CMAKE_GENERATOR"]] == _generator(CFG)
    assert Path(cache["CMAKE_RUNTIME_OUTPUT_DIRECTORY"]).resolve() == CFG.bin_dir("stub").resolve()
