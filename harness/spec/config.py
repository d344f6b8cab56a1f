"""configs/engine.yaml: what the harness knows about the engine."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.spec import inputs, yamlsrc


@dataclass(frozen=True)
class DumpSpec:
    name: str
    file: str
    dtype: str
    shape: str  # dotted path of the shape in meta.json


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


@dataclass(frozen=True)
class BuildSpec:
    name: str
    engine: ProjectSpec | None = None
    module: ProjectSpec | None = None
    prebuilt: str | None = None  # a folder holding the engine (and module): no CMake at all
    extras: tuple[ProjectSpec, ...] = ()  # further host-compiler projects into bin/ (e.g. test modules)
    binary: str | None = None  # this build's executable when it is not the engine's (another engine)
    on_demand: bool = False  # built only for a criterion that uses it or when named, never by `build` alone


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
    external: dict[str, ExternalSource] = field(default_factory=dict)
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    def timeout(self, name: str, default: float = 120.0) -> float:
        return float(self.timeouts.get(name, default))

    def build_root(self, build: str) -> Path:
        return self.root / self.build_dir / build

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


def _platform_name(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        key = "windows" if os.name == "nt" else "posix"
        if isinstance(value.get(key), str):
            return value[key]
    raise ConfigError(f"engine.yaml: {what} must be a string or {{posix: ..., windows: ...}}")


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"engine.yaml: {what} must be a mapping")
    return value


def _project(value: Any, what: str) -> ProjectSpec | None:
    if value is None:
        return None
    v = _mapping(value, what)
    unknown = set(v) - {"source", "options", "inputs", "external"}
    if unknown:
        raise ConfigError(f"engine.yaml: {what}: unknown key(s) {sorted(unknown)}; "
                          "allowed: source, options, inputs, external")
    if not isinstance(v.get("source"), str):
        raise ConfigError(f"engine.yaml: {what}.source must be a path string")
    opts = _mapping(v.get("options"), f"{what}.options")
    inputs = v.get("inputs") or []
    if not isinstance(inputs, list):
        raise ConfigError(f"engine.yaml: {what}.inputs must be a list of folders")
    external = _mapping(v.get("external"), f"{what}.external")
    return ProjectSpec(v["source"], {str(k): _opt(o) for k, o in opts.items()}, tuple(str(i) for i in inputs),
                       tuple((str(k), str(x)) for k, x in external.items()))


def _external(raw: Any) -> dict[str, ExternalSource]:
    out = {}
    for name, e in _mapping(raw, "external").items():
        e = _mapping(e, f"external.{name}")
        keys = {"pip_sdist", "sha256", "subdir"}
        if set(e) != keys or not all(isinstance(e[k], str) and e[k] for k in keys):
            raise ConfigError(f"engine.yaml: external.{name} needs exactly pip_sdist, sha256 and subdir (strings)")
        if len(e["sha256"]) != 64 or any(c not in "0123456789abcdef" for c in e["sha256"]):
            raise ConfigError(f"engine.yaml: external.{name}.sha256 must be 64 lowercase hex digits")
        out[str(name)] = ExternalSource(str(name), e["pip_sdist"], e["sha256"], e["subdir"])
    return out


def _opt(v: Any) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


def load_config(root: Path, path: Path | None = None) -> Config:
    path = path or root / "configs" / "engine.yaml"
    try:
        raw = yamlsrc.load(inputs.read_text(path, inputs.MAX_CONFIG)).value
    except FileNotFoundError:
        raise ConfigError(f"{path}: engine configuration not found") from None
    except HarnessError as e:
        raise ConfigError(str(e)) from None
    except yamlsrc.YamlSyntaxError as e:
        raise ConfigError(f"{path}:{e.line}: not valid YAML: {e.message}") from None
    raw = _mapping(raw, "top level")
    eng = _mapping(raw.get("engine"), "engine")
    dumps = {}
    for name, d in _mapping(eng.get("dumps"), "engine.dumps").items():
        d = _mapping(d, f"engine.dumps.{name}")
        dumps[name] = DumpSpec(name, str(d.get("file", f"{name}.f32")), str(d.get("dtype", "float32")),
                               str(d.get("shape", f"shapes.{name}")))
    builds = {}
    for name, b in _mapping(raw.get("builds"), "builds").items():
        b = _mapping(b, f"builds.{name}")
        unknown = set(b) - {"engine", "module", "prebuilt", "extras", "binary", "on_demand"}
        if unknown:
            raise ConfigError(f"engine.yaml: builds.{name}: unknown key(s) {sorted(unknown)}; "
                              "allowed: engine, module, prebuilt, extras, binary, on_demand")
        if not isinstance(b.get("on_demand", False), bool):
            raise ConfigError(f"engine.yaml: builds.{name}.on_demand must be true or false")
        extras = b.get("extras") or []
        if not isinstance(extras, list):
            raise ConfigError(f"engine.yaml: builds.{name}.extras must be a list of projects")
        if b.get("prebuilt") is None and b.get("engine") is None:
            raise ConfigError(f"engine.yaml: builds.{name} needs `engine` (CMake project) or `prebuilt` (folder)")
        builds[str(name)] = BuildSpec(str(name), _project(b.get("engine"), f"builds.{name}.engine"),
                                      _project(b.get("module"), f"builds.{name}.module"),
                                      str(b["prebuilt"]) if b.get("prebuilt") is not None else None,
                                      tuple(p for i, x in enumerate(extras)
                                            if (p := _project(x, f"builds.{name}.extras[{i}]")) is not None),
                                      _platform_name(b["binary"], f"builds.{name}.binary") if "binary" in b else None,
                                      b.get("on_demand", False))
    if not builds:
        raise ConfigError("engine.yaml: `builds` defines no build")
    external = _external(raw.get("external"))
    for b in builds.values():
        for proj in (b.engine, b.module, *b.extras):
            for opt, src in proj.external if proj else ():
                if src not in external:
                    raise ConfigError(f"engine.yaml: builds.{b.name}: {opt} names external source {src!r}, "
                                      f"which `external` does not define")
    bld = _mapping(raw.get("build"), "build")
    models = _mapping(raw.get("models"), "models")
    default_model = models.get("default", {"recipe": "tiny"})
    if isinstance(default_model, str):
        default_model = {"recipe": default_model}
    timeouts = {str(k): float(v) for k, v in _mapping(raw.get("timeouts"), "timeouts").items()}
    return Config(
        root=root,
        path=path,
        binary=_platform_name(eng.get("binary", {"posix": "kite", "windows": "kite.exe"}), "engine.binary"),
        module=_platform_name(eng.get("module", {"posix": "libkite_cuda.so", "windows": "kite_cuda.dll"}),
                              "engine.module"),
        testmods_dir=str(eng.get("testmods_dir", "testmods")),
        env_names={str(k): str(v) for k, v in _mapping(eng.get("env"), "engine.env").items()},
        dumps=dumps,
        meta_file=str(eng.get("meta_file", "meta.json")),
        dump_flag=str(eng.get("dump_flag", "--dump")),
        json_flag=str(eng.get("json_flag", "--json")),
        info_args=[str(a) for a in eng.get("info_args", ["info", "--json"])],
        ignore_exports=[str(a) for a in eng.get("ignore_exports", [])],
        builds=builds,
        build_dir=str(bld.get("dir", "build")),
        build_type=str(bld.get("build_type", "Release")),
        generator=str(bld.get("generator", "auto")),
        jobs=int(bld.get("jobs", os.cpu_count() or 2)),
        models_dir=str(models.get("dir", "models")),
        default_model=dict(default_model),
        timeouts=timeouts,
        reports_dir=str(_mapping(raw.get("reports"), "reports").get("dir", "reports")),
        external=external,
        raw=raw,
    )
