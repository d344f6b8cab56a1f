"""The real CUDA module (native/cuda, built with nvcc) and the engine's run-time loader.

These run on a machine with nvcc; a GPU is not needed (without a driver the module binds and
reports cudart error 35). What they check:
  * the module exports exactly the ABI (KCUDA_ENTRY_POINTS), needs no libcudart.so, and the
    engine needs no CUDA library and has no CUDA symbol;
  * discovery: KITE_CUDA_LIB, the executable's folder, the system search path, module absent;
  * the loader test modules (one export missing, another ABI version) are refused whole, with
    the path and the reason in the note, and without falling back to another module;
  * the environment gates are read as documented;
  * the output is byte-identical for: stub build, module absent, module without device,
    refused modules, and KITE_CUDA_FORCE_CPU;
  * the engine exits clean under valgrind with the module loaded and with a refused one;
  * no kernel takes an activation or state pointer as `const __restrict__` (PDL ordering);
  * no kernel keeps an array in local memory (ptxas -v, sm_90), beyond a listed exception.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine_build import REPO, abi_names, abi_version, build_engine, kite_bin, qwen35_fixtures, run_kite, tokens_of  # noqa: F401
from module_sources import kernel_definitions

sys.path.insert(0, str(REPO / "bench"))
import kernel_fit  # noqa: E402  (bench/kernel_fit.py: the demangler)

MODULE = "libkite_cuda.so"
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the nvcc module tests run on Linux")


@pytest.fixture(scope="session")
def loader_kite() -> Path:
    """The engine with the run-time loader (KITE_CUDA=ON): the `default` build."""
    return build_engine("default")


@pytest.fixture(scope="session")
def cuda_module_dir(loader_kite) -> Path:
    """The `default` build's bin/ folder: the module built by nvcc next to the engine, and testmods/."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the CUDA module cannot be built here")
    out = loader_kite.parent
    for f in (MODULE, "testmods/libkite_cuda_noexport.so", "testmods/libkite_cuda_badabi.so"):
        assert (out / f).exists(), f"the module build did not produce {f}"
    return out


@pytest.fixture(scope="session")
def layout(tmp_path_factory, loader_kite, cuda_module_dir) -> dict[str, Path]:
    """with/kite + libkite_cuda.so + testmods/ ; alone/kite (no module next to it) ; lib/ (module only)."""
    root = tmp_path_factory.mktemp("cuda-layout")
    w, a, lib = root / "with", root / "alone", root / "lib"
    for d in (w, a, lib):
        d.mkdir()
    shutil.copy2(loader_kite, w / "kite")
    shutil.copy2(loader_kite, a / "kite")
    shutil.copy2(cuda_module_dir / MODULE, w / MODULE)
    shutil.copy2(cuda_module_dir / MODULE, lib / MODULE)
    shutil.copytree(cuda_module_dir / "testmods", w / "testmods")
    return {
        "with": w / "kite",
        "alone": a / "kite",
        "lib": lib,
        "module": w / MODULE,
        "noexport": w / "testmods" / "libkite_cuda_noexport.so",
        "badabi": w / "testmods" / "libkite_cuda_badabi.so",
    }


def _info(exe: Path, env: dict[str, str] | None = None) -> dict:
    res = run_kite(exe, "info", "--json", env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["cuda"]


def _search(cuda: dict) -> dict[str, dict]:
    return {s["how"]: s for s in cuda["search"]}


def _no_gpu(cuda: dict) -> None:
    if cuda.get("available"):
        pytest.skip("a CUDA device is present: these checks are for a machine without a driver")


# ---- artifacts -----------------------------------------------------------------------------------


def _dynsyms(path: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def _needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


# Arguments that a kernel may take as `const T *__restrict__`: immutable during a forward pass
# (weights, norm and conv weights, RoPE tables, the pass's position/tokens). Anything else is
# written by an earlier kernel of the pass, and a restrict-const load of it may be issued before
# griddepcontrol.wait (an invariant load in the compiler's eyes): wrong rows at --mt >= 2 were
# seen on the H200 with such an argument (docs/results/2026-11-30-h200-latency.md).
IMMUTABLE_ARGS = {"w", "cw", "ssm_a", "dt_bias", "qn", "kn", "cos_tab", "sin_tab", "in"}


MODULE_SOURCES = sorted((REPO / "native" / "cuda").glob("*.cu"))


def test_kernels_read_activations_through_plain_pointers():
    text = "\n".join(cu.read_text() for cu in MODULE_SOURCES)
    kernels = kernel_definitions(text)
    assert len(kernels) >= 8, "kernel signatures not found"
    restricted = {
        (name, arg)
        for name, params in kernels
        for arg in re.findall(r"const\s+\w+\s*\*\s*__restrict__\s+(\w+)", params)
    }
    assert {arg for _, arg in restricted} <= IMMUTABLE_ARGS, sorted(
        (k, a) for k, a in restricted if a not in IMMUTABLE_ARGS
    )


# Kernels that may keep something in local memory (bytes at most), with why. Everything else must
# not: arrays the compiler could not keep in registers (loops over `n >>= 1` it left rolled) put the
# M=4 gemv's 16 sums and the old one-block attention's 32 partials in local memory, and cost 10% of the M=4 prefill
# (docs/results/2026-11-30-h200-latency.md, section 6).
# None today: k_gemv<8, 2> (--mt 8 only) kept 16 bytes of its sums and weights there until its
# weight loads stayed ahead of the PDL wait, and 8 bytes again once the activation scale was
# rounded to f16, until it asked for one block per SM (ptxas had stopped at 128 registers);
# k_gemv<8, 4, false> kept 8 bytes once the prologue had its own instances, until it asked the same.
LOCAL_MEMORY_ALLOWED: dict[str, int] = {}


def _ptxas_frames(cu: Path, flags: list[str]) -> dict[str, int]:
    """{kernel: stack frame bytes} from ptxas -v for sm_90, with the module's numeric flags."""
    proc = subprocess.run(
        ["nvcc", "-O3", "-std=c++17", "-cubin", "-arch=sm_90", "-DKCUDA_BUILD", *flags,
         f"-I{REPO / 'native' / 'include'}", "-Xptxas", "-v", str(cu), "-o", os.devnull],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    frames: dict[str, int] = {}
    name = None
    for line in proc.stderr.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame", line)
        if m and name:
            frames[name] = int(m.group(1))
            name = None
    return frames


def _demangle_kernel(sym: str) -> str:
    # _Z6k_gemvILi4ELi4ELb0EEv... -> k_gemv<4, 4, false>; _Z6k_attnPKf... -> k_attn
    return kernel_fit.demangle(sym)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kernels_keep_no_local_memory():
    cmake = (REPO / "native" / "cuda" / "CMakeLists.txt").read_text()
    flags = re.search(r"set\(KITE_CUDA_FLAGS ([^)]*)\)", cmake).group(1).split()
    assert "-fmad=false" in flags
    raw: dict[str, int] = {}
    for cu in MODULE_SOURCES:
        raw.update(_ptxas_frames(cu, flags))
    frames = {_demangle_kernel(k): v for k, v in raw.items()}
    kernels = [k for k in frames if k.startswith("k_")]
    # with the M=1 step's folded ops (issue 37): a kernel argument chosen at run time (gate or up)
    # put 128 bytes of k_gemv_glu in local memory until it was copied field by field
    expected = {"k_gemv<4, 4, false>", "k_gemv<4, 4, true>", "k_attn_scores", "k_attn_values", "k_gemv_glu",
                "k_deltanet_head"}
    assert expected <= set(kernels) and len(kernels) >= 12, sorted(frames)
    used = {k: v for k, v in frames.items() if v > LOCAL_MEMORY_ALLOWED.get(k, 0)}
    assert not used, f"kernels with a local-memory stack frame (bytes): {used}"


def _kernel_signatures(module: Path) -> set[str]:
    """The host stubs of the module's kernels, demangled: `k_actq(ActArgs)` and the like."""
    out = subprocess.run(["nm", "-C", str(module)], capture_output=True, text=True, check=True).stdout
    return {m.group(1) for m in re.finditer(r" [tT] (?:void )?(k_\w+(?:<[^>]*>)?\([^)]*\))$", out, re.M)}


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("cmake") is None, reason="binutils or cmake missing")
def test_timeline_build_records_and_the_default_module_does_not(cuda_module_dir):
    """The per-op timeline (CMake option KITE_CUDA_TIMELINE, timeline.cuh) builds with the same ABI,
    and every kernel of a pass takes the timeline's buffer and op; no kernel of the default module does."""
    folder = REPO / "build" / "test-cuda-timeline"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = ["cmake", "-S", str(REPO / "native" / "cuda"), "-B", str(folder), *generator,
                 "-DCMAKE_BUILD_TYPE=Release", "-DKITE_CUDA_TIMELINE=ON", "-DKITE_CUDA_TEST_MODULES=OFF",
                 "-DKITE_CUDA_PROBE=OFF", f"-DKITE_OUTPUT_DIR={folder / 'bin'}"]
    for argv in (configure, ["cmake", "--build", str(folder), "--parallel", "2"]):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        assert res.returncode == 0, f"{' '.join(argv)}\n{res.stdout[-3000:]}{res.stderr[-3000:]}"
    timeline = folder / "bin" / MODULE
    assert _dynsyms(timeline) == set(abi_names())
    # the kernels of a pass (k_repack_* run once, at upload, outside any pass)
    with_times = {k for k in _kernel_signatures(timeline) if not k.startswith("k_repack")}
    plain = {k for k in _kernel_signatures(cuda_module_dir / MODULE) if not k.startswith("k_repack")}
    assert len(with_times) >= 12 and len(with_times) == len(plain), (sorted(with_times), sorted(plain))
    assert all(k.endswith(", unsigned long long*, int)") for k in with_times), sorted(with_times)
    assert not [k for k in plain if "unsigned long long*" in k], sorted(plain)


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("readelf") is None, reason="binutils missing")
def test_module_exports_exactly_the_abi(cuda_module_dir):
    names = set(abi_names())
    assert len(names) == 16 and "kcuda_prompt" in names
    assert _dynsyms(cuda_module_dir / MODULE) == names
    assert _dynsyms(cuda_module_dir / "testmods" / "libkite_cuda_noexport.so") == names - {"kcuda_step_m"}
    assert _dynsyms(cuda_module_dir / "testmods" / "libkite_cuda_badabi.so") == names


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils missing")
def test_no_dynamic_cuda_dependencies(cuda_module_dir, loader_kite):
    mod = _needed(cuda_module_dir / MODULE)
    assert not [n for n in mod if "cudart" in n or "cuda" in n.lower()], mod
    eng = _needed(loader_kite)
    assert not [n for n in eng if "cuda" in n.lower()], eng
    undef = subprocess.run(
        ["nm", "-D", "--undefined-only", str(loader_kite)], capture_output=True, text=True, check=True
    ).stdout
    assert "cuda" not in undef.replace("kite", ""), undef


# ---- discovery -------------------------------------------------------------------------------------


def test_found_in_exe_dir_bound_no_driver(layout):
    cuda = _info(layout["with"])
    assert cuda["compiled"] is True
    s = _search(cuda)
    assert s["KITE_CUDA_LIB"]["result"] == "not set"
    assert s["exe_dir"]["result"] == "loaded"
    assert Path(cuda["loaded_path"]).resolve() == layout["module"].resolve()
    assert cuda["bound"] is True and cuda["module_abi"] == cuda["engine_abi"] == abi_version()
    _no_gpu(cuda)
    assert cuda["available"] is False
    assert cuda["init_status"] == 35
    assert "cudart error 35" in cuda["reason"] and cuda["reason"].startswith("no driver")


def test_found_by_env(layout):
    cuda = _info(layout["alone"], env={"KITE_CUDA_LIB": str(layout["lib"] / MODULE)})
    s = _search(cuda)
    assert s["KITE_CUDA_LIB"]["result"] == "loaded"
    assert "exe_dir" not in s  # first hit wins
    assert cuda["bound"] is True


def test_found_on_system_path(layout):
    env = {"LD_LIBRARY_PATH": str(layout["lib"])}
    cuda = _info(layout["alone"], env=env)
    s = _search(cuda)
    assert s["exe_dir"]["result"] == "not found"
    assert s["system"]["result"] == "loaded"
    assert cuda["loaded_path"] == MODULE and cuda["bound"] is True


def test_module_absent_is_normal(layout):
    cuda = _info(layout["alone"], env={"LD_LIBRARY_PATH": "/nonexistent"})
    assert cuda["bound"] is False and cuda["available"] is False
    assert not cuda["loaded_path"]
    assert cuda["reason"] == "module not found"
    assert [s["how"] for s in cuda["search"]] == ["KITE_CUDA_LIB", "exe_dir", "system"]


@pytest.mark.parametrize(
    "which,needle",
    [
        ("noexport", "missing symbol kcuda_step_m"),
        ("badabi", f"ABI version {abi_version() + 1}, engine expects {abi_version()}"),
    ],
)
def test_refused_whole_with_note(layout, which, needle):
    cuda = _info(layout["with"], env={"KITE_CUDA_LIB": str(layout[which])})
    assert cuda["bound"] is False and cuda["available"] is False
    assert Path(cuda["loaded_path"]).resolve() == layout[which].resolve()  # no fallback to exe_dir
    assert "exe_dir" not in _search(cuda)
    assert str(layout[which]) in cuda["note"] and needle in cuda["note"]
    assert needle in cuda["reason"]
    if which == "badabi":
        assert cuda["module_abi"] == abi_version() + 1
    else:
        assert cuda["module_abi"] == -1


@pytest.mark.parametrize(
    "env,key,want",
    [
        ({}, "graph", True),
        ({"KITE_CUDA_GRAPH": "0"}, "graph", False),
        ({"KITE_CUDA_GRAPH": "off"}, "graph", True),
        ({}, "graph_m", False),
        ({"KITE_CUDA_GRAPH_M": "1"}, "graph_m", True),
        ({"KITE_CUDA_GRAPH_M": "0"}, "graph_m", False),
        ({}, "force_cpu", False),
        ({"KITE_CUDA_FORCE_CPU": "0"}, "force_cpu", False),
        ({"KITE_CUDA_FORCE_CPU": ""}, "force_cpu", False),
        ({"KITE_CUDA_FORCE_CPU": "1"}, "force_cpu", True),
        ({"KITE_CUDA_FLOPS_MIN": "12345"}, "flops_min", 12345),
        ({}, "flops_min", 1000000),
    ],
)
def test_gates_from_environment(layout, env, key, want):
    assert _info(layout["with"], env=env)["gates"][key] == want


# ---- output identity --------------------------------------------------------------------------------


def _dump(exe: Path, model: Path, prompt: str, out: Path, env=None, *extra: str) -> tuple[bytes, bytes, dict]:
    res = run_kite(exe, "run", "--model", model, "--prompt", prompt, "--steps", "6", "--dump", out, *extra, env=env)
    assert res.returncode == 0, res.stderr
    return (
        (out / "h_out.f32").read_bytes(),
        (out / "logits.f32").read_bytes(),
        json.loads((out / "meta.json").read_text()),
    )


@pytest.mark.parametrize("name", ["tiny-a-q8_0", "tiny-b-q8_0"])
def test_output_identical_without_device(layout, kite_bin, qwen35_fixtures, tmp_path, name):
    fx = qwen35_fixtures / name.rsplit("-", 1)[0]
    model, prompt = fx / f"{name}.gguf", tokens_of(fx)
    ref_h, ref_l, _ = _dump(kite_bin, model, prompt, tmp_path / "stub")
    cases = {
        "absent": (layout["alone"], {"LD_LIBRARY_PATH": "/nonexistent"}),
        "no_device": (layout["with"], {}),
        "force_cpu": (layout["with"], {"KITE_CUDA_FORCE_CPU": "1"}),
        "noexport": (layout["with"], {"KITE_CUDA_LIB": str(layout["noexport"])}),
        "badabi": (layout["with"], {"KITE_CUDA_LIB": str(layout["badabi"])}),
    }
    for label, (exe, env) in cases.items():
        h, lg, meta = _dump(exe, model, prompt, tmp_path / label, env)
        assert h == ref_h, f"{label}: h_out differs from the stub build"
        assert lg == ref_l, f"{label}: logits differ from the stub build"
        if not meta["backend"].get("available"):
            assert meta["counters"]["gpu_steps"] == 0 and meta["counters"]["mrow_calls"] == 0
        h4, l4, _ = _dump(exe, model, prompt, tmp_path / f"{label}-mt4", env, "--mt", "4")
        assert h4 == ref_h and l4 == ref_l, f"{label} --mt 4 differs"


# ---- clean unload ---------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
@pytest.mark.parametrize("which", ["module", "badabi", "noexport"])
def test_valgrind_clean_unload(layout, qwen35_fixtures, which):
    fx = qwen35_fixtures / "tiny-a"
    env = {} if which == "module" else {"KITE_CUDA_LIB": str(layout[which])}
    full = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    full.update(env)
    cmd = [
        "valgrind",
        "--error-exitcode=99",
        "--errors-for-leak-kinds=none",
        "-q",
        str(layout["with"]),
        "run",
        "--model",
        str(fx / "tiny-a-q8_0.gguf"),
        "--prompt",
        "1,2,3",
        "--steps",
        "2",
        "--threads",
        "1",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=full)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "Invalid read" not in res.stderr and "Jump to the invalid address" not in res.stderr


# ---- with a device (skipped without one) ------------------------------------------------------------


@pytest.fixture(scope="session")
def gpu_kite(layout) -> Path:
    cuda = _info(layout["with"])
    if not cuda.get("available"):
        pytest.skip(f"no usable CUDA device: {cuda.get('reason')}")
    return layout["with"]


@pytest.mark.parametrize("name", ["tiny-a-q8_0", "tiny-a-f16", "tiny-a-f32", "tiny-b-q8_0", "tiny-b-f32"])
def test_gpu_bitwise(gpu_kite, layout, qwen35_fixtures, tmp_path, name):
    fx = qwen35_fixtures / name.rsplit("-", 1)[0]
    model, prompt = fx / f"{name}.gguf", tokens_of(fx)
    cpu_h, cpu_l, _ = _dump(layout["alone"], model, prompt, tmp_path / "cpu", {"LD_LIBRARY_PATH": "/nonexistent"})
    runs = {
        "graph": ({}, ()),
        "stream": ({"KITE_CUDA_GRAPH": "0"}, ()),
        "mt4": ({}, ("--mt", "4")),
        "mt4_graph_m": ({"KITE_CUDA_GRAPH_M": "1"}, ("--mt", "4")),
        "force_cpu": ({"KITE_CUDA_FORCE_CPU": "1"}, ()),
    }
    for label, (env, extra) in runs.items():
        h, lg, meta = _dump(gpu_kite, model, prompt, tmp_path / label, env, *extra)
        c = meta["counters"]
        if label == "graph":
            assert c["graph_replays"] > 0 and c["stream_steps"] == 0, c
        elif label == "stream":
            assert c["stream_steps"] > 0 and c["graph_replays"] == 0, c
        elif label.startswith("mt4"):
            assert c["mrow_calls"] > 0, c  # the M-row entry is not refused under the M=1 gate
            if label == "mt4_graph_m":
                assert c["mrow_graph_replays"] > 0, c
        else:
            assert c["gpu_steps"] == 0 and c["mrow_calls"] == 0, c
        assert h == cpu_h, f"{label}: h_out differs from the CPU"
        assert lg == cpu_l, f"{label}: logits differ from the CPU"
