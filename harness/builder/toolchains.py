"""Probing the host toolchains the build matrix needs.

Each probe answers a `Tool`: found or not, path, version, and, when absent, the reason and an
install hint (Debian package names where Debian has the tool). Every parser works on captured
text, so it is unit-tested without the tool being installed:

- `--version` banners of gcc, clang, MinGW gcc, wine, nvcc, cmake, ninja, cuobjdump;
- MSVC discovery on Windows: `vswhere -format json` (installations), then the environment that
  `vcvarsall.bat x64` sets (`cmd /c "call vcvarsall.bat x64 >nul && set"`), from which the
  compiler, its version, INCLUDE / LIB and the Windows SDK are read.

Nothing here installs anything; `.ci/install-toolchains.sh` does that on Debian.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path, PureWindowsPath
from typing import Any
from collections.abc import Callable

# Install hints per tool. Debian 12 package names; the script installs the Debian ones.
INSTALL_HINTS: dict[str, str] = {
    "gcc": "apt-get install gcc",
    "clang": "apt-get install clang lld libclang-rt-14-dev (or run .ci/install-toolchains.sh)",
    "mingw": "apt-get install gcc-mingw-w64-x86-64 (or run .ci/install-toolchains.sh)",
    "wine": "apt-get install wine wine64 (or run .ci/install-toolchains.sh)",
    "nvcc": "install the CUDA toolkit 13 (NVIDIA's apt repository: cuda-toolkit-13-0; or pip install "
            "nvidia-cuda-nvcc) and put nvcc on PATH or set CUDACXX / CUDA_HOME",
    "cuobjdump": "pip install nvidia-cuda-cuobjdump (or the CUDA toolkit's cuda-cuobjdump package)",
    "cmake": "apt-get install cmake (3.18 or newer; or pip install cmake)",
    "ninja": "apt-get install ninja-build (or pip install ninja)",
    "sanitizers": "apt-get install gcc (libasan8, libubsan1 come with libgcc-12-dev)",
    "msvc": "a Windows host with Visual Studio 2022 or its Build Tools, workload \"Desktop development "
            "with C++\" (component Microsoft.VisualStudio.Component.VC.Tools.x86.x64); vswhere.exe "
            "comes with the Visual Studio Installer",
    "gpu": "an NVIDIA GPU with its driver (nvidia-smi -L lists it)",
    "hipcc": "apt-get install hipcc libamdhip64-dev rocm-device-libs (Debian 12: ROCm 5.2.3; or run "
             ".ci/install-toolchains.sh --hip)",
    "amd_gpu": "an AMD GPU with 32-lane wavefronts (RDNA, e.g. gfx1030) and the amdgpu driver (/dev/kfd)",
    "cmake_cuda": "CMake 3.18 or newer with CUDA language support",
}

KNOWN = ("gcc", "clang", "mingw", "wine", "nvcc", "cuobjdump", "cmake", "ninja", "sanitizers", "msvc",
         "gpu", "linux", "x86_64", "hipcc", "amd_gpu")
# hipcc hands its files to nvcc when it finds one, unless told the platform
HIPCC_ENV = {"HIP_PLATFORM": "amd"}
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


@dataclass
class Tool:
    name: str
    found: bool
    path: str = ""
    version: str = ""
    reason: str = ""  # why not found (or why unusable)
    hint: str = ""  # how to install it
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def skip_reason(self) -> str:
        """One line for a SKIP: what is missing, why, and how to install it."""
        s = f"{self.name} not available: {self.reason or 'not found'}"
        return s + (f" (install: {self.hint})" if self.hint else "")


# ---------------------------------------------------------------------------------------------
# Version banners (pure functions on captured text)

_VER = r"(\d+\.\d+(?:\.\d+)?)"


def parse_gcc_version(text: str) -> str:
    """`gcc (Debian 12.2.0-14+deb12u1) 12.2.0` -> 12.2.0; also MinGW's
    `x86_64-w64-mingw32-gcc (GCC) 12-win32` -> 12 (Debian's MinGW prints no dotted version)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = re.search(r"\)\s+" + _VER + r"\b", first)
    if m:
        return m.group(1)
    m = re.search(r"\)\s+(\d+)(?:-(win32|posix))?(?:\s|$)", first)
    if m:
        return m.group(1) + (f"-{m.group(2)}" if m.group(2) else "")
    m = re.search(_VER, first)
    return m.group(1) if m else ""


def parse_clang_version(text: str) -> str:
    """`Debian clang version 14.0.6` / `clang version 18.1.8 (...)` -> 14.0.6."""
    m = re.search(r"clang version " + _VER, text)
    return m.group(1) if m else ""


def parse_nvcc_version(text: str) -> str:
    """`Cuda compilation tools, release 13.0, V13.0.88` -> 13.0.88."""
    m = re.search(r"release \d+\.\d+, V" + _VER, text)
    if m:
        return m.group(1)
    m = re.search(r"release " + _VER, text)
    return m.group(1) if m else ""


def parse_wine_version(text: str) -> str:
    """`wine-8.0 (Debian 8.0~repack-4)` -> 8.0."""
    m = re.search(r"wine-" + _VER, text)
    return m.group(1) if m else ""


def parse_cmake_version(text: str) -> str:
    m = re.search(r"cmake version " + _VER, text)
    return m.group(1) if m else ""


def parse_plain_version(text: str) -> str:
    m = re.search(_VER, text)
    return m.group(1) if m else ""


def parse_cl_banner(text: str) -> str:
    """`Microsoft (R) C/C++ Optimizing Compiler Version 19.40.33811 for x64` -> 19.40.33811."""
    m = re.search(r"Compiler Version (\d+\.\d+\.\d+(?:\.\d+)?) for (\w+)", text)
    return m.group(1) if m else ""


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:4])


# ---------------------------------------------------------------------------------------------
# MSVC discovery: vswhere JSON and vcvarsall environment text (pure functions)

VC_TOOLS_COMPONENT = "Microsoft.VisualStudio.Component.VC.Tools.x86.x64"


@dataclass
class VsInstall:
    path: str
    version: str
    name: str
    product: str
    prerelease: bool
    complete: bool
    vcvarsall: str  # <path>\VC\Auxiliary\Build\vcvarsall.bat


def parse_vswhere(text: str) -> list[VsInstall]:
    """Installations from `vswhere -products * -requires <VC tools> -format json`, best first:
    complete, not prerelease, newest version. Raises ValueError on text that is not vswhere's."""
    text = text.strip().lstrip("\ufeff")
    if not text:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"vswhere output is not JSON: {e}") from None
    if not isinstance(data, list):
        raise ValueError("vswhere output is not a JSON list of installations")
    out = []
    for item in data:
        if not isinstance(item, dict) or "installationPath" not in item:
            continue
        path = str(item["installationPath"])
        out.append(VsInstall(
            path=path,
            version=str(item.get("installationVersion", "")),
            name=str(item.get("displayName", item.get("instanceId", ""))),
            product=str(item.get("productId", "")),
            prerelease=bool(item.get("isPrerelease", False)),
            complete=bool(item.get("isComplete", True)) and bool(item.get("isLaunchable", True)),
            vcvarsall=str(PureWindowsPath(path, "VC", "Auxiliary", "Build", "vcvarsall.bat")),
        ))
    out.sort(key=lambda i: (not i.complete, i.prerelease, tuple(-x for x in version_tuple(i.version))))
    return out


def parse_set_output(text: str) -> dict[str, str]:
    """`set` output of cmd.exe (NAME=value per line) -> dict. Names are case-insensitive on
    Windows: keys are kept as written, lookups go through `env_get`. Lines without `=` (banners
    such as `** Visual Studio 2022 Developer Command Prompt`) are ignored; so are cmd's
    per-drive `=C:=C:\\...` entries."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.rstrip("\r")
        if not line or line.startswith("=") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_().{}\-]*", name):
            continue
        env[name] = value
    return env


def env_get(env: dict[str, str], name: str, default: str = "") -> str:
    low = name.lower()
    for k, v in env.items():
        if k.lower() == low:
            return v
    return default


@dataclass
class MsvcEnv:
    cl: str  # full path of cl.exe (from PATH entries, Hostx64\x64 preferred)
    tools_version: str  # VCToolsVersion, e.g. 14.40.33807
    tools_dir: str  # VCToolsInstallDir
    target_arch: str  # VSCMD_ARG_TGT_ARCH, e.g. x64
    host_arch: str
    vs_version: str  # VisualStudioVersion / VSCMD_VER
    sdk_version: str  # WindowsSDKVersion (no trailing backslash)
    sdk_dir: str
    include: list[str]
    lib: list[str]
    path_added: list[str]  # PATH entries vcvars added (relative to a baseline, when given)
    env: dict[str, str]  # the variables to set for nvcc / cmake (INCLUDE, LIB, LIBPATH, PATH...)


def parse_vcvars_env(text: str, baseline: dict[str, str] | None = None) -> MsvcEnv:
    """The environment after `vcvarsall.bat x64` (captured `set` output) -> MsvcEnv.

    Raises ValueError with what is missing when the text is not a vcvars environment (e.g.
    vcvarsall printed an error and `set` ran in a bare shell)."""
    env = parse_set_output(text)
    missing = [n for n in ("VCToolsInstallDir", "INCLUDE", "LIB", "PATH") if not env_get(env, n)]
    if missing:
        err = re.search(r"\[ERROR:[^\]]*\][^\r\n]*", text)
        raise ValueError("not a vcvarsall environment: missing " + ", ".join(missing)
                         + (f" ({err.group(0).strip()})" if err else ""))
    path_entries = [p for p in env_get(env, "PATH").split(";") if p]
    base_entries = {p.lower() for p in env_get(baseline or {}, "PATH").split(";") if p}
    added = [p for p in path_entries if p.lower() not in base_entries] if baseline else []
    tools_dir = env_get(env, "VCToolsInstallDir")
    host = env_get(env, "VSCMD_ARG_HOST_ARCH", "x64")
    tgt = env_get(env, "VSCMD_ARG_TGT_ARCH", "x64")
    cl = ""
    want = f"\\bin\\host{host}\\{tgt}".lower()
    for p in path_entries:
        if p.rstrip("\\").lower().endswith(want):
            cl = str(PureWindowsPath(p, "cl.exe"))
            break
    if not cl:
        cl = str(PureWindowsPath(tools_dir, "bin", f"Host{host}", tgt, "cl.exe"))
    keep = ("PATH", "INCLUDE", "LIB", "LIBPATH", "VCToolsInstallDir", "VCToolsVersion", "VCINSTALLDIR",
            "VSINSTALLDIR", "WindowsSdkDir", "WindowsSDKVersion", "WindowsSdkBinPath", "UCRTVersion",
            "UniversalCRTSdkDir", "VSCMD_ARG_TGT_ARCH", "VSCMD_ARG_HOST_ARCH", "VisualStudioVersion",
            "Platform")
    sel = {}
    for k in keep:
        v = env_get(env, k)
        if v:
            sel[k] = v
    return MsvcEnv(
        cl=cl,
        tools_version=env_get(env, "VCToolsVersion"),
        tools_dir=tools_dir,
        target_arch=tgt,
        host_arch=host,
        vs_version=env_get(env, "VSCMD_VER") or env_get(env, "VisualStudioVersion"),
        sdk_version=env_get(env, "WindowsSDKVersion").rstrip("\\"),
        sdk_dir=env_get(env, "WindowsSdkDir"),
        include=[p for p in env_get(env, "INCLUDE").split(";") if p],
        lib=[p for p in env_get(env, "LIB").split(";") if p],
        path_added=added,
        env=sel,
    )


def msvc_supported_by_nvcc(tools_version: str, nvcc_version: str) -> tuple[bool, str]:
    """nvcc 12.4+ / 13.x accept MSVC toolsets 14.2x-14.4x (VS 2019 16.x and VS 2022 17.x);
    older toolsets are refused. Returns (ok, reason)."""
    tv = version_tuple(tools_version)
    nv = version_tuple(nvcc_version)
    if len(tv) < 2:
        return False, f"unknown MSVC toolset version {tools_version!r}"
    if nv and nv[0] >= 13 and tv < (14, 29):
        return False, f"nvcc {nvcc_version} needs MSVC 14.29 (VS 2019 16.11) or newer, found {tools_version}"
    if tv < (14, 20):
        return False, f"MSVC toolset {tools_version} is older than VS 2019"
    return True, ""


# ---------------------------------------------------------------------------------------------
# Probes (run the tools; each result cached for the process)

Runner = Callable[[list[str], float], "tuple[int, str]"]


def _run(argv: list[str], timeout: float = 20.0, env: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, env=env)
    except FileNotFoundError:
        return 127, f"not found: {argv[0]}"
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:g} s: {' '.join(argv)}"
    except OSError as e:
        return 126, f"cannot run {argv[0]}: {e}"
    return p.returncode, p.stdout.decode("utf-8", "replace")


def _which(*names: str, extra_dirs: list[str] | None = None) -> str:
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    for d in extra_dirs or []:
        for n in names:
            for suffix in ("", ".exe"):
                cand = Path(d) / (n + suffix)
                if cand.is_file() and os.access(cand, os.X_OK):
                    return str(cand)
    return ""


def _absent(name: str, reason: str) -> Tool:
    return Tool(name, False, reason=reason, hint=INSTALL_HINTS.get(name, ""))


def _simple(name: str, exe_names: tuple[str, ...], parse: Callable[[str], str], args: tuple[str, ...] = ("--version",),
            extra_dirs: list[str] | None = None) -> Tool:
    path = _which(*exe_names, extra_dirs=extra_dirs)
    if not path:
        return _absent(name, f"{' / '.join(exe_names)} not on PATH")
    rc, out = _run([path, *args])
    if rc != 0:
        return Tool(name, False, path=path, reason=f"`{Path(path).name} {' '.join(args)}` failed (status {rc}): "
                    f"{out.strip().splitlines()[-1][:160] if out.strip() else ''}", hint=INSTALL_HINTS.get(name, ""))
    return Tool(name, True, path=path, version=parse(out), details={"banner": out.strip().splitlines()[0][:200]})


def cuda_dirs() -> list[str]:
    """Folders that may hold nvcc / cuobjdump besides PATH."""
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        v = os.environ.get(var)
        if v:
            dirs.append(str(Path(v) / "bin"))
    cudacxx = os.environ.get("CUDACXX")
    if cudacxx:
        dirs.append(str(Path(cudacxx).parent))
    dirs += ["/usr/local/cuda/bin"] + sorted((str(p / "bin") for p in Path("/usr/local").glob("cuda-*")),
                                             reverse=True)
    # pip wheels (nvidia-cuda-nvcc, nvidia-cuda-cuobjdump): site-packages/nvidia/cu13/bin
    for sp in sys.path:
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin", "nvidia/cuda_cuobjdump/bin"):
            p = Path(sp) / sub
            if p.is_dir():
                dirs.append(str(p))
    return dirs


@cache
def probe(name: str) -> Tool:
    """Probe one tool by its matrix name (see KNOWN)."""
    if name == "gcc":
        return _simple("gcc", ("gcc",), parse_gcc_version)
    if name == "clang":
        return _simple("clang", ("clang",), parse_clang_version)
    if name == "mingw":
        return _simple("mingw", ("x86_64-w64-mingw32-gcc", "x86_64-w64-mingw32-gcc-posix",
                                 "x86_64-w64-mingw32-gcc-win32"), parse_gcc_version)
    if name == "wine":
        return probe_wine()
    if name == "nvcc":
        return _simple("nvcc", ("nvcc",), parse_nvcc_version, extra_dirs=cuda_dirs())
    if name == "cuobjdump":
        return _simple("cuobjdump", ("cuobjdump",), parse_plain_version, extra_dirs=cuda_dirs())
    if name == "cmake":
        return _simple("cmake", ("cmake",), parse_cmake_version)
    if name == "ninja":
        return _simple("ninja", ("ninja", "ninja-build"), parse_plain_version)
    if name == "sanitizers":
        return probe_sanitizers("gcc")
    if name == "msvc":
        return probe_msvc()
    if name == "gpu":
        return probe_gpu()
    if name == "hipcc":
        return probe_hipcc()
    if name == "amd_gpu":
        return probe_amd_gpu()
    if name == "linux":
        return Tool("linux", sys.platform.startswith("linux"), version=sys.platform,
                    reason="" if sys.platform.startswith("linux") else f"host is {sys.platform}")
    if name == "x86_64":
        import platform

        m = platform.machine().lower()
        ok = m in ("x86_64", "amd64")
        return Tool("x86_64", ok, version=m, reason="" if ok else f"host is {m}")
    return _absent(name, f"unknown tool {name!r}; known: {', '.join(KNOWN)}")


def probe_wine() -> Tool:
    t = _simple("wine", ("wine", "wine64"), parse_wine_version)
    if not t.found:
        return t
    if sys.platform.startswith("linux") and not os.access("/dev/shm", os.W_OK):
        return Tool("wine", False, path=t.path, version=t.version, reason="/dev/shm not writable (wineserver needs it)",
                    hint=INSTALL_HINTS["wine"])
    return t


def probe_sanitizers(cc: str = "gcc", flags: str = "-fsanitize=address,undefined") -> Tool:
    """Compile and run a one-line program with the sanitizers (catches a missing libasan)."""
    ccp = _which(cc)
    name = "sanitizers"
    if not ccp:
        return _absent(name, f"{cc} not on PATH")
    with tempfile.TemporaryDirectory(prefix="kite-san-") as d:
        src = Path(d) / "t.c"
        src.write_text("int main(void){return 0;}\n")
        exe = Path(d) / "t"
        rc, out = _run([ccp, *flags.split(), str(src), "-o", str(exe)], 60)
        if rc != 0:
            return _absent(name, f"{cc} {flags} does not link: {out.strip().splitlines()[-1][:160] if out.strip() else rc}")
        rc, out = _run([str(exe)], 20)
        if rc != 0:
            return _absent(name, f"a {flags} program does not run here (status {rc}): {out.strip()[:160]}")
    return Tool(name, True, path=ccp, version=flags)


def probe_gpu() -> Tool:
    smi = _which("nvidia-smi")
    if not smi:
        return _absent("gpu", "nvidia-smi not found (no NVIDIA driver)")
    rc, out = _run([smi, "-L"], 20)
    gpus = [ln for ln in out.splitlines() if ln.startswith("GPU ")]
    if rc != 0 or not gpus:
        return _absent("gpu", f"nvidia-smi -L lists no GPU (status {rc})")
    return Tool("gpu", True, path=smi, version=gpus[0][:120], details={"gpus": gpus})


def parse_hipcc_version(text: str) -> str:
    m = re.search(r"HIP version:\s*(\S+)", text)
    return m.group(1) if m else ""


def probe_hipcc() -> Tool:
    """hipcc for AMD targets: its `--version` under HIP_PLATFORM=amd names the HIP version."""
    path = _which("hipcc", extra_dirs=["/opt/rocm/bin"])
    if not path:
        return _absent("hipcc", "hipcc not on PATH")
    rc, out = _run([path, "--version"], env={**os.environ, **HIPCC_ENV})
    version = parse_hipcc_version(out)
    if rc != 0 or not version:
        return Tool("hipcc", False, path=path, reason=f"`hipcc --version` (HIP_PLATFORM=amd) failed (status {rc})",
                    hint=INSTALL_HINTS["hipcc"])
    return Tool("hipcc", True, path=path, version=version)


def amd_gpu_targets(nodes: Path = KFD_NODES) -> list[str]:
    """gfx targets of the GPU nodes the amdgpu driver lists (empty: no AMD GPU or no driver)."""
    out = []
    for props in sorted(nodes.glob("*/properties")) if nodes.is_dir() else []:
        m = re.search(r"^gfx_target_version\s+(\d+)", props.read_text(errors="replace"), re.M)
        if m and int(m.group(1)):
            v = int(m.group(1))
            out.append(f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}")
    return out


def probe_amd_gpu(nodes: Path = KFD_NODES, kfd: Path = Path("/dev/kfd")) -> Tool:
    if not kfd.exists():
        return _absent("amd_gpu", f"no AMD GPU ({kfd} absent: no amdgpu driver)")
    gpus = amd_gpu_targets(nodes)
    if not gpus:
        return _absent("amd_gpu", f"no AMD GPU ({nodes} lists none)")
    return Tool("amd_gpu", True, path=str(kfd), version=gpus[0], details={"gpus": gpus})


def vswhere_path(env: dict[str, str] | None = None) -> str:
    env = dict(os.environ) if env is None else env
    found = shutil.which("vswhere") or shutil.which("vswhere.exe")
    if found:
        return found
    for var in ("ProgramFiles(x86)", "ProgramFiles"):
        base = env_get(env, var)
        if base:
            cand = Path(base) / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
            if cand.is_file():
                return str(cand)
    return ""


@cache
def probe_msvc() -> Tool:
    """MSVC through vswhere and vcvarsall (Windows only). On any other host: not found, with
    the reason. Details hold the vcvars environment to hand to nvcc / CMake."""
    if os.name != "nt":
        return _absent("msvc", f"MSVC runs on Windows only (host: {sys.platform}); vswhere.exe / "
                               "vcvarsall.bat cannot be found here")
    vsw = vswhere_path()
    if not vsw:
        return _absent("msvc", "vswhere.exe not found (no Visual Studio Installer)")
    rc, out = _run([vsw, "-products", "*", "-requires", VC_TOOLS_COMPONENT, "-format", "json", "-utf8"], 60)
    if rc != 0:
        return _absent("msvc", f"vswhere failed (status {rc})")
    try:
        installs = parse_vswhere(out)
    except ValueError as e:
        return _absent("msvc", str(e))
    if not installs:
        return _absent("msvc", f"vswhere lists no installation with {VC_TOOLS_COMPONENT}")
    best = installs[0]
    if not Path(best.vcvarsall).is_file():
        return _absent("msvc", f"{best.vcvarsall} not found")
    rc, text = _run(["cmd.exe", "/d", "/c", f'call "{best.vcvarsall}" x64 >nul && set'], 120)
    try:
        menv = parse_vcvars_env(text, baseline=dict(os.environ))
    except ValueError as e:
        return _absent("msvc", str(e))
    rc, banner = _run([menv.cl], 30, env={**os.environ, **menv.env})
    return Tool("msvc", True, path=menv.cl, version=parse_cl_banner(banner) or menv.tools_version,
                details={"install": asdict(best), "tools_version": menv.tools_version, "env": menv.env})


@cache
def nvcc_accepts_host(ccbin: str) -> tuple[bool, str]:
    """Does nvcc compile host code with `-ccbin <ccbin>`? (compiles a tiny .cu; no GPU needed)."""
    nv = probe("nvcc")
    if not nv.found:
        return False, nv.skip_reason()
    cc = _which(ccbin) or ccbin
    with tempfile.TemporaryDirectory(prefix="kite-ccbin-") as d:
        src = Path(d) / "t.cu"
        src.write_text('#include <cuda_runtime.h>\nextern "C" __global__ void k(float *x) { x[0] = 1.0f; }\n'
                       "int main(void) { k<<<1, 1>>>(0); return (int)cudaGetLastError() < 0; }\n")
        rc, out = _run([nv.path, "-ccbin", cc, "-c", str(src), "-o", str(Path(d) / "t.o")], 180)
    if rc != 0:
        last = [ln for ln in out.strip().splitlines() if ln.strip()]
        return False, f"nvcc {nv.version} refuses -ccbin {ccbin}: {last[-1][:200] if last else rc}"
    return True, f"nvcc {nv.version} accepts -ccbin {ccbin}"


def probe_all(names: list[str] | tuple[str, ...] = KNOWN) -> dict[str, Tool]:
    return {n: probe(n) for n in names}


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.builder.toolchains [--json] [NAME...]`: what this host has."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m harness.builder.toolchains")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    tools = probe_all(a.names or KNOWN)
    if a.json:
        print(json.dumps({k: v.to_json() for k, v in tools.items()}, indent=2))
        return 0
    for t in tools.values():
        if t.found:
            print(f"{t.name:11} {t.version:14} {t.path}")
        else:
            print(f"{t.name:11} MISSING        {t.reason}" + (f"; install: {t.hint}" if t.hint else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
