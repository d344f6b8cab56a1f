"""`requires:` probes. Each answers (met, reason); results are cached per verify run."""

from __future__ import annotations

import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from harness.builder.cmake import find_nvcc
from harness.process import run_process
from harness.contract.config import GpuProfile
from harness.contract.criteria import _MISSING, lookup


def nvidia_smi_gpus(timeout: float = 15.0) -> list[str]:
    """GPU lines of `nvidia-smi -L` (empty when there is no nvidia-smi or it fails)."""
    if not shutil.which("nvidia-smi"):
        return []
    r = run_process(["nvidia-smi", "-L"], timeout=timeout)
    return [ln.strip() for ln in r.stdout.splitlines() if ln.startswith("GPU ")] if r.ok else []


NO_GPU = "no GPU: no /dev/nvidia*, no /dev/kfd, and nvidia-smi lists none"


def gpu_device() -> bool:
    """Is there a GPU device at all (an NVIDIA or AMD device node, or a GPU nvidia-smi lists)?
    False lets a command skip `requires: gpu` without building the engine that would say so."""
    dev = Path("/dev")
    if any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists():
        return True
    return bool(nvidia_smi_gpus())


# What to install when a tool is missing (Debian and Ubuntu package names, README's Install).
PACKAGES = {"nvcc": "cuda-nvcc-13-0 (NVIDIA's CUDA repository)", "host_cc": "gcc", "host_cxx": "g++",
            "cmake": "cmake", "clang": "clang", "mingw": "gcc-mingw-w64-x86-64", "wine": "wine wine64",
            "valgrind": "valgrind"}


def missing(req: str, what: str) -> tuple[bool, str]:
    """The unmet answer for a missing tool: what is missing, and the package that brings it."""
    return False, f"{what} not found (install: apt-get install -y {PACKAGES[req]})"


@dataclass
class Probes:
    """Answers `requires:` entries. gpu_info: a callable giving the `info` JSON of the build that
    engine.yaml's GPU profile names; the profile says which of its fields answer.

    `gpu` is met when the engine reports a usable device, or when nvidia-smi lists a GPU even though
    the engine does not (a broken build or module must then FAIL the GPU criteria, not skip them)."""

    gpu_info: Callable[[], dict[str, Any] | None]
    cache: dict[str, tuple[bool, str]] = field(default_factory=dict)
    overrides: dict[str, tuple[bool, str]] = field(default_factory=dict)
    smi: Callable[[], list[str]] = nvidia_smi_gpus
    gpu: GpuProfile = GpuProfile()

    def check(self, req: str) -> tuple[bool, str]:
        if req in self.overrides:
            return self.overrides[req]
        if req not in self.cache:
            self.cache[req] = self._probe(req)
        return self.cache[req]

    def unmet(self, reqs: list[str]) -> str | None:
        for r in reqs:
            ok, why = self.check(r)
            if not ok:
                return why
        return None

    def _probe(self, req: str) -> tuple[bool, str]:
        if req == "gpu":
            info = self.gpu_info()
            if info is None:
                why = "the engine is not built, so `info --json` cannot tell"
            elif "error" in info and lookup(info, self.gpu.available) is _MISSING:
                why = f"`info --json` failed: {info['error']}"
            else:
                if lookup(info, self.gpu.available) is True:
                    dev = lookup(info, self.gpu.device)
                    return True, f"GPU {'?' if dev is _MISSING else dev}"
                reason = lookup(info, self.gpu.reason)
                why = (reason if reason not in (_MISSING, None, "") else None) or f"{self.gpu.available} is not true"
            gpus = self.smi()
            if gpus:
                return True, f"{gpus[0]} (nvidia-smi), although the engine says: {why}"
            return False, f"no GPU: {why}"
        if req == "no_gpu":
            # for checks of the no-device path itself (e.g. the driver reason in `info`)
            has_gpu, why = self.check("gpu")
            return (False, f"a GPU is present ({why})") if has_gpu else (True, why)
        if req in ("nvcc", "module_cc"):
            # module_cc: the compiler of the build's GPU module; nvcc unless a HIP matrix entry says hipcc
            p = find_nvcc()
            return (True, p) if p else missing(req, "nvcc")
        if req == "host_cc":
            for cc in ("cc", "gcc", "clang"):
                if shutil.which(cc):
                    return True, cc
            return missing(req, "no host C compiler (cc, gcc, clang)")
        if req == "host_cxx":
            for cxx in ("c++", "g++", "clang++"):
                if shutil.which(cxx):
                    return True, cxx
            return missing(req, "no host C++ compiler (c++, g++, clang++)")
        if req == "cmake":
            return (True, "cmake") if shutil.which("cmake") else missing(req, "cmake")
        if req == "clang":
            return (True, "clang") if shutil.which("clang") else missing(req, "clang")
        if req == "mingw":
            return ((True, "mingw") if shutil.which("x86_64-w64-mingw32-gcc")
                    else missing(req, "MinGW (x86_64-w64-mingw32-gcc)"))
        if req == "wine":
            return (True, "wine") if shutil.which("wine") else missing(req, "wine")
        if req == "valgrind":
            return (True, "valgrind") if shutil.which("valgrind") else missing(req, "valgrind")
        if req == "linux":
            return (platform.system() == "Linux", f"not Linux ({platform.system()})")
        if req == "windows":
            return (platform.system() == "Windows", f"not Windows ({platform.system()})")
        if req == "x86_64":
            m = platform.machine().lower()
            return (m in ("x86_64", "amd64"), f"not x86_64 ({m})")
        return False, f"unknown requirement {req!r}"


def default_engine(cfg_bin: Path, binary: str) -> Path:
    return cfg_bin / binary
