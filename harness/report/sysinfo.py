"""What the report records about the machine: OS, CPU, RAM, compilers, GPU/driver, git state."""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path
from typing import Any

from harness.builder.cmake import find_nvcc
from harness.process import run_process
from harness.contract import inputs


def _first_line(argv: list[str], timeout: float = 10.0, last: bool = False) -> str | None:
    if not shutil.which(argv[0]) and not os.path.isabs(argv[0]):
        return None
    r = run_process(argv, timeout=timeout)
    if r.error or r.timed_out:
        return None
    lines = [ln.strip() for ln in (r.stdout or r.stderr).splitlines() if ln.strip()]
    if not lines:
        return None
    return lines[-1] if last else lines[0]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") or line.startswith("Model"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gb() -> float | None:
    try:
        import psutil

        return round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:  # noqa: BLE001 - psutil absent: read /proc
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
        except OSError:
            pass
    return None


def _nvcc_version() -> str | None:
    nvcc = find_nvcc()
    if not nvcc:
        return None
    r = run_process([nvcc, "--version"], timeout=10)
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    rel = [ln for ln in lines if "release" in ln]
    return rel[0] if rel else (lines[0] if lines else None)


def compilers() -> dict[str, str | None]:
    """First line of `--version` of each tool (None when absent); probed in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    names = ("cc", "c++", "gcc", "clang", "x86_64-w64-mingw32-gcc", "cmake", "ninja", "nvcc", "wine")
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futs = {n: pool.submit(_nvcc_version) if n == "nvcc" else pool.submit(_first_line, [n, "--version"])
                for n in names}
        return {n: f.result() for n, f in futs.items()}


def nvidia_smi() -> dict[str, Any] | None:
    if not shutil.which("nvidia-smi"):
        return None
    r = run_process(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                    timeout=15)
    if not r.ok or not r.stdout.strip():
        return {"error": r.describe()}
    gpus = []
    for ln in r.stdout.strip().splitlines():
        parts = [p.strip() for p in ln.split(",")]
        gpus.append({"name": parts[0], "driver": parts[1] if len(parts) > 1 else None,
                     "memory": parts[2] if len(parts) > 2 else None})
    return {"gpus": gpus}


def engine_info(engine: Path, info_args: list[str], timeout: float = 30.0) -> dict[str, Any] | None:
    """`kite info --json`, or None when the engine is absent or says nothing usable."""
    if not engine.exists():
        return None
    r = run_process([str(engine), *info_args], timeout=timeout)
    if not r.ok:
        return {"error": r.describe()}
    try:
        doc = inputs.json_loads(r.stdout)
    except ValueError:
        return {"error": "info --json printed no JSON"}
    return doc if isinstance(doc, dict) else {"error": "info --json is not an object"}


def git_state(root: Path) -> dict[str, Any]:
    """Commit and dirty flag. A copy of the tree run with prebuilt binaries (e.g. shipped to a GPU
    machine) names the commit they were built from in KITE_GIT_COMMIT: that name wins over the
    copy's own .git, which may be stale, and the dirty flag is then unknown."""
    given = os.environ.get("KITE_GIT_COMMIT", "").strip()
    if given:
        return {"commit": given, "short": given[:8], "dirty": None, "source": "KITE_GIT_COMMIT"}
    if not shutil.which("git"):
        return {"commit": None, "short": None, "dirty": None, "source": None, "why": "git not found"}
    # the project may be a folder inside a checkout (examples/toy-engine): git finds the repository
    r = run_process(["git", "-C", str(root), "rev-parse", "HEAD"], timeout=10)
    commit = r.stdout.strip() if r.ok else None
    if commit is None:
        inside = run_process(["git", "-C", str(root), "rev-parse", "--git-dir"], timeout=10).ok
        why = "no commit yet" if inside else "not a git repository"
        return {"commit": None, "short": None, "dirty": None, "source": None, "why": why}
    d = run_process(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], timeout=10)
    return {"commit": commit, "short": commit[:8] if commit else None,
            "dirty": bool(d.stdout.strip()) if d.ok else None}


def system(root: Path) -> dict[str, Any]:
    u = platform.uname()
    return {
        "os": f"{u.system} {u.release}",
        "platform": platform.platform(),
        "machine": u.machine,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": ram_gb(),
        "python": platform.python_version(),
        "compilers": compilers(),
        "nvidia_smi": nvidia_smi(),
    }
