"""configs/engine.yaml: what the harness knows about the engine (its profile), read strictly:
unknown keys and values outside the allowed sets are errors naming FILE:LINE (SchemaErrors)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.contract import inputs
from harness.contract.validate import NAME_RE, Validator, parse, read_text

# dump element types: name -> bytes per element
DTYPES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4}
DOTTED_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
TIMEOUTS = ("build", "run", "info", "probe")

TOP_KEYS = {"engine": False, "builds": True, "build": False, "models": False, "timeouts": False, "reports": False,
            "external": False}
ENGINE_KEYS = {"name": False, "binary": False, "module": False, "hip_module": False, "testmods_dir": False,
               "env": False, "dumps": False,
               "meta_file": False, "dump_flag": False, "json_flag": False, "info_args": False,
               "ignore_exports": False, "gpu": False}
GPU_KEYS = {"build": False, "available": False, "reason": False, "device": False}
DUMP_KEYS = {"file": False, "dtype": False, "shape": False}
BUILD_KEYS = {"engine": False, "module": False, "prebuilt": False, "extras": False, "binary": False,
              "on_demand": False}
PROJECT_KEYS = {"source": True, "options": False, "inputs": False, "external": False}
EXTERNAL_KEYS = {"pip_sdist": True, "sha256": True, "subdir": True}
# a git repository and one of its commits instead of the archive (docs/COMPARE.md, external revisions)
EXTERNAL_REPO_KEYS = {"repo": False, "rev": False, "omit": False}
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
BUILD_DIR_KEYS = {"dir": False, "build_type": False, "generator": False, "jobs": False}
MODELS_KEYS = {"dir": False, "default": False}
PLATFORM_KEYS = {"posix": True, "windows": True}


@dataclass(frozen=True)
class DumpSpec:
    name: str
    file: str
    dtype: str  # one of DTYPES
    shape: str  # dotted path of the shape in meta.json

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class GpuProfile:
    """Which build's `info` output says whether a GPU is usable, and in which fields."""
    build: str = "default"
    available: str = "cuda.available"  # true when a GPU is usable
    reason: str = "cuda.reason"  # why not
    device: str = "cuda.device.name"


@dataclass(frozen=True)
class ProjectSpec:
    source: str  # relative to the repository root
    options: dict[str, str]
    inputs: tuple[str, ...] = ()  # further folders whose change means a rebuild (e.g. native/include)
    external: tuple[tuple[str, str], ...] = ()  # (CMake option, external source name): the option gets its folder


@dataclass(frozen=True)
class ExternalSource:
    """Source a build needs but the repository does not hold: a pinned source distribution."""

    name: str
    pip_sdist: str  # one pinned version, e.g. "llama_cpp_python==0.3.36"
    sha256: str  # of the archive
    subdir: str  # the folder inside the archive's top folder that the build uses
    repo: str = ""  # a local git repository of the same source (compare/bisect --external NAME)
    rev: str = ""  # a full commit of repo: when set, builds use repo at rev instead of the archive
    omit: tuple[str, ...] = ()  # top folders of repo the build does not need (never checked out)
    cache: str = ""  # where its checkout lives (compare --cache); default: the external sources' cache


@dataclass(frozen=True)
class BuildSpec:
    name: str
    engine: ProjectSpec | None = None
    module: ProjectSpec | None = None
    prebuilt: str | None = None  # a folder holding the engine (and module): no CMake at all
    extras: tuple[ProjectSpec, ...] = ()  # further host-compiler projects into bin/ (e.g. test modules)
    binary: str | None = None  # this build's executable when it is not the engine's (another engine)
    on_demand: bool = False  # built only for a criterion that uses it or when named, never by `build` alone

    @property
    def vendor(self) -> str:
        """The GPU module's vendor, CMake KITE_GPU of its projects: "cuda" (nvcc) or "hip" (hipcc)."""
        opts = [p.options for p in (self.engine, self.module) if p is not None]
        return "hip" if any(str(o.get("KITE_GPU", "")).lower() == "hip" for o in opts) else "cuda"


@dataclass(frozen=True)
class Config:
    root: Path
    path: Path
    binary: str
    module: str
    testmods_dir: str
    env_names: dict[str, str]
    dumps: dict[str, DumpSpec]
    meta_file: str
    dump_flag: str
    json_flag: str
    info_args: list[str]
    ignore_exports: list[str]
    builds: dict[str, BuildSpec]
    build_dir: str
    build_type: str
    generator: str
    jobs: int
    models_dir: str
    default_model: dict[str, Any]
    timeouts: dict[str, float]
    reports_dir: str
    gpu: GpuProfile = GpuProfile()
    hip_module: str = "libkite_hip.so"  # the module's file in a KITE_GPU=hip build
    external: dict[str, ExternalSource] = field(default_factory=dict)
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    name: str = ""  # the project's name in reports (engine.name; default: the project folder's name)

    def timeout(self, name: str, default: float = 120.0) -> float:
        return float(self.timeouts.get(name, default))

    def build_root(self, build: str) -> Path:
        return self.root / self.build_dir / build

    def module_for(self, build: str) -> str:
        """The module's file name in that build: the HIP one where the build says KITE_GPU=hip."""
        spec = self.builds.get(build)
        return self.hip_module if spec is not None and spec.vendor == "hip" else self.module

    def binary_for(self, build: str) -> str:
        spec = self.builds.get(build)
        return spec.binary if spec is not None and spec.binary else self.binary

    @property
    def recipe_dir(self) -> Path:
        """The project's own model recipes (NAME.yaml), ahead of the harness's built-in ones."""
        return self.path.parent / "models"

    def bin_dir(self, build: str) -> Path:
        spec = self.builds.get(build)
        if spec is not None and spec.prebuilt:
            return resolve_path(self.root, spec.prebuilt)
        return self.build_root(build) / "bin"


def resolve_path(root: Path, p: str) -> Path:
    q = Path(os.path.expanduser(p))
    return q if q.is_absolute() else root / q


# ---- reading ---------------------------------------------------------------------------------

def _platform_name(v: Validator, path: tuple, value: Any, default: str) -> str:
    """A file name, or {posix: ..., windows: ...}."""
    if isinstance(value, dict):
        if v.keys(path, value, PLATFORM_KEYS, "a per-platform name"):
            got = v.str_(path + ("windows" if os.name == "nt" else "posix",),
                         value.get("windows" if os.name == "nt" else "posix"))
            return got or default
        return default
    return v.str_(path, value) or default


def _project(v: Validator, path: tuple, m: Any) -> ProjectSpec | None:
    if not v.keys(path, m, PROJECT_KEYS, "a CMake project"):
        return None
    src = v.str_(path + ("source",), m["source"]) if "source" in m else None
    opts = v.scalar_map(path + ("options",), m["options"] or {}, "CMake OPTION: value") if "options" in m else {}
    folders = v.strlist(path + ("inputs",), m["inputs"], "list of folders") if "inputs" in m else []
    external = (v.scalar_map(path + ("external",), m["external"], "CMake OPTION: external source name")
                if "external" in m else {})
    if src is None or opts is None or folders is None or external is None:
        return None
    return ProjectSpec(src, opts, tuple(folders), tuple(external.items()))


def _build(v: Validator, name: str, m: Any) -> BuildSpec | None:
    path = ("builds", name)
    if not isinstance(name, str) or not NAME_RE.match(name):
        v.err(path, f"build name {name!r} must be letters, digits, '_', '.', '-' (it names build/<name>/)")
        return None
    if not v.keys(path, m, BUILD_KEYS, "a build"):
        return None
    n0 = v.count()
    engine = _project(v, path + ("engine",), m["engine"]) if m.get("engine") is not None else None
    module = _project(v, path + ("module",), m["module"]) if m.get("module") is not None else None
    prebuilt = v.str_(path + ("prebuilt",), m["prebuilt"]) if m.get("prebuilt") is not None else None
    binary = _platform_name(v, path + ("binary",), m["binary"], "") or None if "binary" in m else None
    on_demand = v.bool_(path + ("on_demand",), m["on_demand"]) if "on_demand" in m else False
    extras: list[ProjectSpec] = []
    if m.get("extras") is not None:
        if not isinstance(m["extras"], list):
            v.err(path + ("extras",), "must be a list of CMake projects")
        else:
            extras = [p for i, x in enumerate(m["extras"]) if (p := _project(v, path + ("extras", i), x))]
    if m.get("prebuilt") is None and m.get("engine") is None:
        v.err(path, "needs `engine` (a CMake project) or `prebuilt` (a folder holding the engine)")
    elif prebuilt is not None and (engine or module or extras):
        v.err(path + ("prebuilt",), "a prebuilt build is used as it is: no engine, module or extras to build")
    if v.count() > n0:
        return None
    return BuildSpec(name, engine, module, prebuilt, tuple(extras), binary, bool(on_demand))


def _external(v: Validator, m: Any, builds: dict[str, BuildSpec]) -> dict[str, ExternalSource]:
    out = {}
    for name, e in (v.mapping(("external",), m, "name -> pinned source") or {}).items():
        path = ("external", name)
        if not v.keys(path, e, {**EXTERNAL_KEYS, **EXTERNAL_REPO_KEYS}, "an external source"):
            continue
        got = {k: v.str_(path + (k,), e[k]) for k in (*EXTERNAL_KEYS, "repo", "rev") if k in e}
        omit = e.get("omit") or []
        if not isinstance(omit, list) or not all(isinstance(x, str) and NAME_RE.match(x) for x in omit):
            v.err(path + ("omit",), "must be a list of top folder names of the repository")
            omit = []
        if got.get("rev") and not COMMIT_RE.match(got["rev"]):
            v.err(path + ("rev",), "must be a full commit (40 lowercase hex digits): a pinned revision")
        if got.get("rev") and not got.get("repo"):
            v.err(path + ("rev",), "names a revision of no repository: add `repo`")
        if got.get("sha256") and not SHA256_RE.match(got["sha256"]):
            v.err(path + ("sha256",), "must be 64 lowercase hex digits")
        elif all(got.get(k) for k in EXTERNAL_KEYS):
            out[str(name)] = ExternalSource(str(name), got["pip_sdist"], got["sha256"], got["subdir"],
                                            got.get("repo") or "", got.get("rev") or "", tuple(omit))
    for b in builds.values():
        for part, proj in (("engine", b.engine), ("module", b.module), *(("extras", x) for x in b.extras)):
            for opt, src in proj.external if proj else ():
                if src not in out:
                    v.err(("builds", b.name, part, "external", opt),
                          f"names external source {src!r}, which `external` does not define")
    return out


def _dumps(v: Validator, m: Any) -> dict[str, DumpSpec]:
    out = {}
    for name, d in (v.mapping(("engine", "dumps"), m, "dump name -> {file, dtype, shape}") or {}).items():
        path = ("engine", "dumps", name)
        if not isinstance(name, str) or not NAME_RE.match(name):
            v.err(path, f"dump name {name!r} must be letters, digits, '_', '.', '-'")
            continue
        d = {} if d is None else d
        if not v.keys(path, d, DUMP_KEYS, "a dump"):
            continue
        file = v.str_(path + ("file",), d["file"]) if "file" in d else f"{name}.f32"
        dtype = v.enum(path + ("dtype",), d["dtype"], DTYPES) if "dtype" in d else "f32"
        shape = (v.str_(path + ("shape",), d["shape"], DOTTED_RE, "a dotted field of meta.json like shapes.logits")
                 if "shape" in d else f"shapes.{name}")
        if file and dtype and shape:
            out[name] = DumpSpec(name, file, dtype, shape)
    return out


def _gpu(v: Validator, m: Any, builds: dict[str, Any]) -> GpuProfile:
    path = ("engine", "gpu")
    base = GpuProfile()
    if m is None or not v.keys(path, m, GPU_KEYS, "the GPU profile"):
        return base
    build = v.str_(path + ("build",), m["build"]) if "build" in m else base.build
    if build and build not in builds:
        v.err(path + ("build",), f"unknown build {build!r}; builds: {', '.join(map(str, builds))}")
    fields = {k: (v.str_(path + (k,), m[k], DOTTED_RE, "a dotted field of the info JSON like cuda.available")
                  if k in m else getattr(base, k)) for k in ("available", "reason", "device")}
    return GpuProfile(build or base.build, **{k: x or getattr(base, k) for k, x in fields.items()})


def _model(v: Validator, m: Any) -> dict[str, Any]:
    path = ("models", "default")
    if isinstance(m, str) and m:
        return {"path": m} if m.endswith(".gguf") or "/" in m else {"recipe": m}
    if isinstance(m, dict) and "path" in m:
        if v.keys(path, m, {"path": True}, "the default model"):
            return {"path": v.str_(path + ("path",), m["path"]) or ""}
    elif isinstance(m, dict):
        if v.keys(path, m, {"recipe": True, "qtype": False}, "the default model"):
            out = {"recipe": v.str_(path + ("recipe",), m.get("recipe")) or "tiny"}
            if "qtype" in m:
                out["qtype"] = v.str_(path + ("qtype",), m["qtype"])
            return out
    else:
        v.err(path, "must be a recipe name, a .gguf path, {recipe: ..., qtype: ...} or {path: ...}")
    return {"recipe": "tiny"}


def load_config(root: Path, path: Path | None = None) -> Config:
    """configs/engine.yaml of root, or the file given (named in messages as given)."""
    rel = str(path) if path is not None else "configs/engine.yaml"
    path = path or root / "configs" / "engine.yaml"
    text = read_text(path, rel, "engine configuration not found", ConfigError, inputs.MAX_CONFIG)
    return parse_config(text, root, path, rel)


def parse_config(text: str, root: Path, path: Path, rel: str) -> Config:
    v = Validator(rel, parse(text, rel, ConfigError))
    raw = v.loc.value if isinstance(v.loc.value, dict) else {}
    v.keys((), v.loc.value, TOP_KEYS, "the engine configuration")
    eng = v.mapping(("engine",), raw.get("engine"), "engine facts") or {}
    v.keys(("engine",), eng, ENGINE_KEYS, "engine")
    builds: dict[str, BuildSpec] = {}
    raw_builds = v.mapping(("builds",), raw.get("builds"), "build name -> build") or {}
    for name, b in raw_builds.items():
        spec = _build(v, name, b)
        if spec is not None:
            builds[name] = spec
    if "builds" in raw and not raw_builds:
        v.err(("builds",), "defines no build")
    bld = v.mapping(("build",), raw.get("build"), "build settings") or {}
    v.keys(("build",), bld, BUILD_DIR_KEYS, "build")
    models = v.mapping(("models",), raw.get("models"), "model settings") or {}
    v.keys(("models",), models, MODELS_KEYS, "models")
    timeouts = {}
    for k, x in (v.mapping(("timeouts",), raw.get("timeouts"), "name -> seconds") or {}).items():
        if v.enum(("timeouts", k), k, TIMEOUTS) and (s := v.timeout(("timeouts", k), x)) is not None:
            timeouts[k] = s
    reports = v.mapping(("reports",), raw.get("reports"), "report settings") or {}
    v.keys(("reports",), reports, {"dir": False}, "reports")

    def string(path: tuple, m: dict[str, Any], key: str, default: str) -> str:
        return (v.str_(path + (key,), m[key]) or default) if key in m else default

    def strings(path: tuple, m: dict[str, Any], key: str, default: list[str]) -> list[str]:
        return (v.strlist(path + (key,), m[key]) or []) if key in m else list(default)

    env_names = v.scalar_map(("engine", "env"), eng["env"], "role -> variable name") if "env" in eng else {}
    generator = string(("build",), bld, "generator", "auto")
    jobs = v.int_(("build", "jobs"), bld["jobs"], 1) if "jobs" in bld else None
    cfg = Config(
        root=root, path=path,
        binary=_platform_name(v, ("engine", "binary"), eng.get("binary", {"posix": "kite", "windows": "kite.exe"}),
                              "kite"),
        module=_platform_name(v, ("engine", "module"),
                              eng.get("module", {"posix": "libkite_cuda.so", "windows": "kite_cuda.dll"}),
                              "libkite_cuda.so"),
        name=string(("engine",), eng, "name", root.name),
        hip_module=_platform_name(v, ("engine", "hip_module"),
                                  eng.get("hip_module", {"posix": "libkite_hip.so", "windows": "kite_hip.dll"}),
                                  "libkite_hip.so"),
        testmods_dir=string(("engine",), eng, "testmods_dir", "testmods"),
        env_names=env_names or {},
        dumps=_dumps(v, eng.get("dumps")),
        meta_file=string(("engine",), eng, "meta_file", "meta.json"),
        dump_flag=string(("engine",), eng, "dump_flag", "--dump"),
        json_flag=string(("engine",), eng, "json_flag", "--json"),
        info_args=strings(("engine",), eng, "info_args", ["info", "--json"]),
        ignore_exports=strings(("engine",), eng, "ignore_exports", []),
        builds=builds,
        build_dir=string(("build",), bld, "dir", "build"),
        build_type=string(("build",), bld, "build_type", "Release"),
        generator=generator,
        jobs=jobs or os.cpu_count() or 2,
        models_dir=string(("models",), models, "dir", "models"),
        default_model=_model(v, models["default"]) if "default" in models else {"recipe": "tiny"},
        timeouts=timeouts,
        reports_dir=string(("reports",), reports, "dir", "reports"),
        gpu=_gpu(v, eng.get("gpu"), raw_builds),
        external=_external(v, raw.get("external"), builds),
        raw=raw,
    )
    v.raise_errors(ConfigError)
    return cfg
