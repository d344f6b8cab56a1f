"""CMake builds: the engine project (host compiler) and the module project (nvcc), separately,
into build/<name>/{engine,cuda,bin}. Incremental: when no input changed since the last good
build (same sources, options and tools) CMake is not even invoked."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable

from harness.builder.diagnostics import first_errors
from harness.builder.external import source_dir
from harness.errors import HarnessError
from harness.contract.config import BuildSpec, Config, ProjectSpec
from harness.contract.digest import file_sha256
from harness.process import run_process

_SKIP_DIRS = {".git", "__pycache__", ".cache", "build"}

Progress = Callable[[str], None]


# a part that can run: stale only under --no-build (built from other sources, options or tools)
USABLE = ("built", "up-to-date", "prebuilt", "stale", "not checked")


@dataclass
class PartResult:
    status: str  # built | up-to-date | stale | not checked | failed | skipped | prebuilt
    reason: str = ""
    log: str | None = None
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)  # the compiler's first errors, when it failed


@dataclass
class BuildResult:
    name: str
    bin_dir: str
    engine_path: str
    module_path: str
    engine: PartResult
    module: PartResult
    seconds: float = 0.0
    options: dict[str, dict[str, str]] = field(default_factory=dict)
    extras: dict[str, PartResult] = field(default_factory=dict)  # source -> result

    @property
    def engine_ok(self) -> bool:
        return self.engine.status in USABLE

    @property
    def module_ok(self) -> bool:
        return self.module.status in USABLE

    def errors(self) -> list[str]:
        """The first compiler errors of every failed part."""
        parts = [self.engine, self.module, *self.extras.values()]
        return [e for part in parts if part.status == "failed" for e in part.errors]

    def to_json(self) -> dict[str, object]:
        """The result, with the sha256 of the engine and module files as they are now (which
        binaries a report's results came from)."""
        doc = asdict(self)
        doc["sha256"] = {"engine": file_sha256(self.engine_path), "module": file_sha256(self.module_path)}
        return doc


def find_hipcc() -> str | None:
    cand = shutil.which("hipcc") or ("/opt/rocm/bin/hipcc" if os.path.isfile("/opt/rocm/bin/hipcc") else None)
    return cand


def module_compiler(vendor: str) -> tuple[str | None, dict[str, str]]:
    """The module project's compiler for a vendor and the CMake definitions naming it; without
    the compiler, (None, {"reason": why})."""
    if vendor == "hip":
        hipcc = find_hipcc()
        return (hipcc, {"KITE_GPU": "hip", "CMAKE_CXX_COMPILER": hipcc}) if hipcc else (None, {"reason": "hipcc not found"})
    nvcc = find_nvcc()
    return (nvcc, {"CMAKE_CUDA_COMPILER": nvcc}) if nvcc else (None, {"reason": "nvcc not found"})


def find_nvcc() -> str | None:
    cand = os.environ.get("CUDACXX") or shutil.which("nvcc")
    if cand:
        return cand
    for p in ("/usr/local/cuda/bin/nvcc", "/opt/cuda/bin/nvcc"):
        if os.access(p, os.X_OK):
            return p
    return None


def source_files(dirs: list[Path], exclude: list[Path]) -> list[tuple[str, int, int] | str]:
    """Every file under dirs (build folders and `exclude` left out), in a fixed order, as
    (path, size, mtime in ns); a missing folder as its "missing:" marker."""
    out: list[tuple[str, int, int] | str] = []
    ex = {p.resolve() for p in exclude}
    for d in dirs:
        if not d.exists():
            out.append(f"missing:{d}")
            continue
        for base, subdirs, files in os.walk(d):
            bp = Path(base)
            subdirs[:] = sorted(s for s in subdirs if s not in _SKIP_DIRS and (bp / s).resolve() not in ex)
            for f in sorted(files):
                try:
                    st = (bp / f).stat()
                except OSError:
                    continue
                out.append(((bp / f).as_posix(), st.st_size, st.st_mtime_ns))
    return out


def fingerprint(dirs: list[Path], exclude: list[Path], extra: dict[str, object]) -> str:
    """Digest of every file's relative path, size and mtime under dirs, plus `extra`."""
    return _digest(source_files(dirs, exclude), extra)


def _digest(files: list[tuple[str, int, int] | str], extra: dict[str, object]) -> str:
    h = hashlib.sha256(json.dumps(extra, sort_keys=True).encode())
    for entry in files:
        if isinstance(entry, str):
            h.update(entry.encode())
        else:
            h.update(f"{entry[0]}\0{entry[1]}\0{entry[2]}\n".encode())
    return h.hexdigest()


def _sources_seen(bdir: Path) -> Path:
    return bdir / ".kite-sources.json"


def _record_sources(bdir: Path, files: list[tuple[str, int, int] | str]) -> None:
    """What a successful build of bdir was made from: its time is the build's."""
    seen = {e[0]: [e[1], e[2]] for e in files if not isinstance(e, str)}
    _sources_seen(bdir).write_text(json.dumps(seen, sort_keys=True))


def _touch_sources_behind_build(bdir: Path, files: list[tuple[str, int, int] | str]) -> list[str]:
    """The files that changed since bdir's last successful build yet carry a time before it (copied
    with their times kept, unpacked, restored): their times set to now, so that the build tool,
    which compares times, rebuilds what they feed instead of keeping objects made from other
    contents. Returns their paths; none when bdir holds no record of its sources."""
    seen_file = _sources_seen(bdir)
    try:
        seen = json.loads(seen_file.read_text())
        built_ns = seen_file.stat().st_mtime_ns
    except (OSError, ValueError):
        return []
    touched = []
    for e in files:
        if isinstance(e, str) or seen.get(e[0]) == [e[1], e[2]] or e[2] > built_ns:
            continue
        os.utime(e[0])
        touched.append(e[0])
    return touched


def _generator(cfg: Config) -> list[str]:
    if cfg.generator == "auto":
        return ["-G", "Ninja"] if shutil.which("ninja") else []
    if cfg.generator in ("", "default", "none"):
        return []
    return ["-G", cfg.generator]


_PROGRESS_RE = re.compile(rb"^\[\s*\d+\s*/\s*\d+\s*\].*$|^\[\s*\d+%\].*$", re.M)  # ninja, make


def status_line(label: str, log: Path, elapsed: float) -> str:
    """`label: 12 s [3/7] Building C object ...`: the elapsed time and the build tool's latest
    progress line in its log (ninja's [N/M], make's [ P%]), when it has printed one."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            tail = f.read()
    except OSError:
        tail = b""
    hits = _PROGRESS_RE.findall(tail)
    last = hits[-1].decode("utf-8", "replace").strip()[:120] if hits else ""
    return f"{label}: {elapsed:.0f} s" + (f" {last}" if last else "")


class _Ticker(threading.Thread):
    """While a build step runs, a status line every `every` seconds (builds are never silent)."""

    def __init__(self, label: str, log: Path, say: Progress, every: float):
        super().__init__(daemon=True)
        self.label, self.log, self.say, self.every = label, log, say, every
        self.stop = threading.Event()
        self.t0 = time.perf_counter()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.say(status_line(self.label, self.log, time.perf_counter() - self.t0))

    def __enter__(self) -> _Ticker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()


def cmake_project(cfg: Config, proj: ProjectSpec, bdir: Path, extra_defs: dict[str, str], log: Path,
                  excludes: list[Path], tools: dict[str, object], force: bool,
                  env: dict[str, str] | None = None, progress: Progress | None = None,
                  every: float = 5.0, check: bool = False) -> PartResult:
    """Configure and build one CMake project into bdir, skipped when its fingerprint (sources,
    definitions, generator, tools) is unchanged. env: an overlay for CMake and the compilers it
    starts (e.g. the MSVC environment that nvcc needs on Windows). progress: gets a status line
    every `every` seconds while CMake runs. check (--no-build): CMake is never run; the part is
    up-to-date when its stamp matches the inputs now, else stale (or failed: never built)."""
    t0 = time.perf_counter()
    src = cfg.root / proj.source
    if not (src / "CMakeLists.txt").exists():
        return PartResult("failed", f"{proj.source}/CMakeLists.txt not found", None, 0.0)
    cmake = shutil.which("cmake")
    if not cmake:
        return PartResult("failed", "cmake not found on PATH")
    defs = {"CMAKE_BUILD_TYPE": cfg.build_type, **proj.options, **extra_defs}
    if check and proj.external:  # --no-build fetches nothing, so the stamp cannot be recomputed
        built = (bdir / ".kite-stamp").exists()
        return PartResult("not checked" if built else "failed", "--no-build: its external source is not fetched, so "
                          "its stamp is not compared" if built else "not built (--no-build)", None, 0.0)
    trees = {}  # an archive pinned by hash enters the fingerprint by its folder's name; a revision by its tree
    for option, name in proj.external:
        try:
            folder, trees[name] = source_dir(cfg.external[name], cfg.root, progress or (lambda s: None))
            defs[option] = str(folder)
        except HarnessError as e:
            return PartResult("failed", str(e), None, time.perf_counter() - t0)
    gen = _generator(cfg)
    dirs = [src] + [cfg.root / i for i in proj.inputs]
    extra = {"defs": defs, "gen": gen, "tools": tools, "env": env or {},
             **({"external": trees} if any(trees.values()) else {})}
    files = source_files(dirs, excludes)
    fp = _digest(files, extra)
    stamp = bdir / ".kite-stamp"
    if not force and stamp.exists() and stamp.read_text() == fp and (bdir / "CMakeCache.txt").exists():
        return PartResult("up-to-date", "", str(log) if log.exists() else None, time.perf_counter() - t0)
    if check:
        if not stamp.exists():
            return PartResult("failed", "not built (--no-build)", None, time.perf_counter() - t0)
        return PartResult("stale", "its sources, options or tools changed since it was built (--no-build: "
                          "not rebuilt)", str(log) if log.exists() else None, time.perf_counter() - t0)
    if _touch_sources_behind_build(bdir, files):
        files = source_files(dirs, excludes)
        fp = _digest(files, extra)
    bdir.mkdir(parents=True, exist_ok=True)
    cache = bdir / "CMakeCache.txt"
    if cache.exists() and gen and f"CMAKE_GENERATOR:INTERNAL={gen[1]}" not in cache.read_text(errors="replace"):
        shutil.rmtree(bdir)  # generator changed: CMake refuses to reuse the folder
        bdir.mkdir(parents=True)
    logs = []
    conf = [cmake, "-S", str(src), "-B", str(bdir), *gen, *[f"-D{k}={v}" for k, v in defs.items()]]
    say = progress or (lambda s: None)
    with _Ticker(f"  {proj.source}: configure", bdir / "configure.stdout", say, every):
        r = run_process(conf, env, timeout=cfg.timeout("build", 1200), log_prefix=bdir / "configure",
                        guard_group=True)
    logs.append(r)
    if r.ok:
        with _Ticker(f"  {proj.source}: build", bdir / "build.stdout", say, every):
            r = run_process([cmake, "--build", str(bdir), "--parallel", str(cfg.jobs)], env,
                            timeout=cfg.timeout("build", 1200), log_prefix=bdir / "build", guard_group=True)
        logs.append(r)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as f:
        for x in logs:
            f.write("$ " + " ".join(x.argv) + "\n" + x.stdout + x.stderr + f"[{x.describe()}]\n\n")
    if not r.ok:
        stamp.unlink(missing_ok=True)
        step = "configure" if len(logs) == 1 else "build"
        errors = [str(d) for d in first_errors(r.stdout + "\n" + r.stderr, cfg.root)]
        first = f": {errors[0]}" + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "") if errors else ""
        return PartResult("failed", f"cmake {step}: {r.describe()}{first}", str(log), time.perf_counter() - t0,
                          errors)
    stamp.write_text(fp)
    _record_sources(bdir, files)
    return PartResult("built", "", str(log), time.perf_counter() - t0)


def _differs(a: Path, b: Path) -> bool:
    sa, sb = a.stat(), b.stat()
    return sa.st_size != sb.st_size or sa.st_mtime_ns != sb.st_mtime_ns


def _say_errors(say: Progress, part: PartResult, root: Path) -> None:
    if part.status == "failed" and part.errors:
        log = Path(part.log) if part.log else None
        if log is not None and log.is_relative_to(root):
            log = log.relative_to(root)
        say(f"  first errors (full log: {log}):")
        for e in part.errors:
            say(f"    {e}")


def _shown(part: PartResult) -> str:
    """` (reason)` for a status line; a first compiler error is left to _say_errors (said once)."""
    reason = part.reason.split(f": {part.errors[0]}", 1)[0] if part.errors else part.reason
    return f" ({reason})" if reason else ""


def build(cfg: Config, name: str, *, force: bool = False, progress: Progress | None = None,
          check: bool = False) -> BuildResult:
    """Build `name` (incrementally), or with check (--no-build) only compare each part's stamp
    with its inputs now: up-to-date, stale or failed (not built), nothing started."""
    spec: BuildSpec = cfg.builds[name]
    say = progress or (lambda s: None)
    t0 = time.perf_counter()
    bin_dir = cfg.bin_dir(name)
    binary = cfg.binary_for(name)
    module = cfg.module_for(name)
    res = BuildResult(name, str(bin_dir), str(bin_dir / binary), str(bin_dir / module),
                      PartResult("skipped"), PartResult("skipped", "no module project in this build"))
    if spec.prebuilt:
        ok = (bin_dir / binary).exists()
        res.engine = PartResult("prebuilt" if ok else "failed", "" if ok else f"{bin_dir / binary} not found")
        res.module = PartResult("prebuilt" if (bin_dir / module).exists() else "skipped",
                                "" if (bin_dir / module).exists() else "no module in the prebuilt folder")
        if not ok:
            say(f"build {name}: engine failed ({res.engine.reason})")
        return res
    root = cfg.build_root(name)
    bin_dir.mkdir(parents=True, exist_ok=True)
    excludes = ([cfg.root / spec.module.source] if spec.module else []) + [cfg.root / x.source for x in spec.extras]
    tools = {"CC": os.environ.get("CC", ""), "CXX": os.environ.get("CXX", "")}
    if spec.engine:
        say(f"build {name}: engine ({spec.engine.source}, "
            + " ".join(f"{k}={v}" for k, v in spec.engine.options.items()) + ")")
        res.options["engine"] = dict(spec.engine.options)
        res.engine = cmake_project(cfg, spec.engine, root / "engine",
                                    {"CMAKE_RUNTIME_OUTPUT_DIRECTORY": str(bin_dir)}, root / "logs" / "engine.log",
                                    excludes, tools, force, progress=say, check=check)
        if res.engine.status in ("built", "up-to-date", "stale", "not checked"):
            exe = bin_dir / binary
            # the project may place the executable in its own binary folder: bring it into bin/
            for cand in (root / "engine" / "bin" / binary, root / "engine" / binary):
                if cand.exists():
                    if not exe.exists() or _differs(cand, exe):
                        shutil.copy2(cand, exe)
                    break
            if not exe.exists():
                res.engine = PartResult("failed", f"build succeeded but {binary} not found in "
                                                  f"{bin_dir} or {root / 'engine'}", res.engine.log)
        say(f"build {name}: engine {res.engine.status}{_shown(res.engine)} [{res.engine.seconds:.1f} s]")
        _say_errors(say, res.engine, cfg.root)
    if spec.engine and not res.engine_ok:
        # nothing can run without the engine: its other parts are not started (minutes of nvcc saved)
        why = f"not started: the engine of build {name} failed"
        res.extras = {proj.source: PartResult("skipped", why) for proj in spec.extras}
        if spec.module:
            res.module = PartResult("skipped", why)
        res.seconds = time.perf_counter() - t0
        return res
    for proj in spec.extras:
        label = Path(proj.source).name
        say(f"build {name}: {label} ({proj.source})")
        res.extras[proj.source] = cmake_project(cfg, proj, root / label, {"KITE_OUTPUT_DIR": str(bin_dir)},
                                                 root / "logs" / f"{label}.log", [], tools, force, progress=say,
                                                 check=check)
        say(f"build {name}: {label} {res.extras[proj.source].status}{_shown(res.extras[proj.source])}")
        _say_errors(say, res.extras[proj.source], cfg.root)
    if spec.module:
        res.options["module"] = dict(spec.module.options)
        compiler, defs = module_compiler(spec.vendor)
        if not compiler:
            res.module = PartResult("skipped", defs["reason"])
        else:
            say(f"build {name}: module ({spec.module.source}, {Path(compiler).name})")
            res.module = cmake_project(cfg, spec.module, root / "cuda", {"KITE_OUTPUT_DIR": str(bin_dir), **defs},
                                        root / "logs" / "module.log", [], {Path(compiler).name: compiler}, force,
                                        progress=say, check=check)
            if res.module.status in ("built", "up-to-date", "stale") and not (bin_dir / module).exists():
                res.module = PartResult("failed", f"build succeeded but {module} not found in {bin_dir}",
                                        res.module.log)
        say(f"build {name}: module {res.module.status}{_shown(res.module)}")
        _say_errors(say, res.module, cfg.root)
    res.seconds = time.perf_counter() - t0
    return res
