"""The vendor switch (docs/DESIGN.md): the GPU module's sources built by hipcc through one
portability header (native/cuda/kc_gpu.cuh), and the engine built with KITE_GPU=hip looking for
libkite_hip.so through the same loader code. No AMD GPU is needed: the module is compiled,
linked, inspected and loaded; its kernels never run here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine_build import REPO, abi_names, build_engine, run_kite
from module_sources import kernel_definitions

CUDA_DIR = REPO / "native" / "cuda"
HEADER = "kc_gpu.cuh"
needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None or sys.platform != "linux",
                                 reason="hipcc is not installed (apt-get install hipcc libamdhip64-dev "
                                        "rocm-device-libs)")


def _sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(CUDA_DIR.iterdir()) if p.suffix in (".cu", ".cuh")}


def test_one_header_names_the_runtime():
    """Only the portability header includes a vendor's runtime headers: every other file of the
    module reaches CUDA or HIP through it, so the two compilers read the same sources."""
    found = {name: re.findall(r"#include\s*[<\"]((?:cuda|hip)[^>\"]*)[>\"]", text) for name, text in _sources().items()}
    assert found.get(HEADER), f"{HEADER} includes no runtime header"
    others = {n: inc for n, inc in found.items() if inc and n != HEADER}
    assert not others, f"runtime headers included outside {HEADER}: {others}"


def test_every_kernel_has_one_body():
    """No second copy of any kernel: each __global__ name is defined once in native/cuda."""
    names = [name for text in _sources().values() for name, _ in kernel_definitions(text)]
    assert {"k_gemv", "k_deltanet", "k_act", "k_attn_scores"} <= set(names), names
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"kernels defined more than once: {dup}"


def test_ptx_only_behind_the_header():
    """Inline PTX (which hipcc cannot assemble) appears in a kernel file only where the header's
    named fallback keeps it from HIP builds: the L2 prefetch goes through KC_PREFETCH_L2."""
    for name, text in _sources().items():
        assert "prefetch.global.L2" not in text or name == HEADER, f"{name}: spell the prefetch KC_PREFETCH_L2(p)"


@needs_hipcc
def test_wave64_target_is_refused(tmp_path):
    """The lane count is one asserted constant: a 64-lane target (gfx90a) does not compile."""
    src = tmp_path / "w.cu"
    src.write_text(f'#include "{CUDA_DIR / HEADER}"\n__global__ void k(float *x) {{ x[0] = KC_WARP; }}\n')
    env = {"HIP_PLATFORM": "amd", "PATH": "/usr/bin:/bin"}
    bad = subprocess.run(["hipcc", "--offload-arch=gfx90a", "-c", str(src), "-o", str(tmp_path / "w.o")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode != 0 and "32-lane wavefronts" in bad.stderr, bad.stderr[-2000:]
    ok = subprocess.run(["hipcc", "--offload-arch=gfx1030", "-c", str(src), "-o", str(tmp_path / "w.o")],
                        capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]


@pytest.fixture(scope="module")
def hip_kite() -> Path:
    """configs/engine.yaml's `hip` build: the engine with KITE_GPU=hip and libkite_hip.so by hipcc."""
    exe = build_engine("hip")
    if not (exe.parent / "libkite_hip.so").exists():
        pytest.fail("the hip build produced no libkite_hip.so")
    return exe


def _needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


@needs_hipcc
def test_hip_module_exports_exactly_the_abi(hip_kite):
    out = subprocess.run(["nm", "-D", "--defined-only", str(hip_kite.parent / "libkite_hip.so")],
                         capture_output=True, text=True, check=True).stdout
    names = sorted({ln.split()[-1] for ln in out.splitlines() if ln.split() and ln.split()[1] in "TtWw"})
    assert names == sorted(abi_names())


@needs_hipcc
def test_only_the_module_links_the_hip_runtime(hip_kite):
    assert any(n.startswith("libamdhip64") for n in _needed(hip_kite.parent / "libkite_hip.so"))
    assert not [n for n in _needed(hip_kite) if re.match(r"lib(amdhip64|hsa-runtime|cudart|cuda\.)", n)]


@needs_hipcc
def test_hip_engine_finds_binds_and_reports_no_device(hip_kite):
    """Same discovery and bind as the CUDA build, under the HIP names: the executable's folder
    holds libkite_hip.so, it binds at the engine's ABI, and without an AMD GPU init reports the
    runtime's own 'no device' (hipErrorNoDevice), tagged [HIP]."""
    res = run_kite(hip_kite, "info", "--json", env={"KITE_CUDA_LIB": "", "HIP_VISIBLE_DEVICES": ""})
    assert res.returncode == 0, res.stderr
    c = json.loads(res.stdout)["cuda"]
    assert c["search"][1]["path"].endswith("/libkite_hip.so") and c["search"][1]["result"] == "loaded"
    assert c["bound"] and c["module_abi"] == c["engine_abi"] and not c["available"]
    assert re.match(r"no device: hip error \d+ \(hipError\w+\)", c["reason"]), c["reason"]
    assert c["note"].startswith("[HIP] ")
