"""configs/matrix.yaml as dataclasses: entries (one toolchain + CMake options + an optional CUDA
module build + a runner + checks + criteria), the dump run's defaults, and the cross-entry
criteria. Validated by the same validator as criteria files (harness/contract/validate.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.builder import toolchains
from harness.errors import SchemaErrors
from harness.contract.validate import ENTRY_NAME_RE, Validator, parse, read_text, rel_path

TOOLCHAINS = ("gcc", "clang", "mingw")
RUNNERS = ("native", "wine")
HOST_COMPILERS = ("gcc", "clang", "msvc")
# built-in checks: what no criterion can say (the dump run the cross criteria read, the loader's
# fake module, the fat binary's code list, the MSVC discovery). The rest are criteria.
CHECKS = ("dump", "loader-fake", "embedded-code", "msvc-discovery")
CHECKS_NEED_ENGINE = {"dump", "loader-fake"}
REQUIRES = toolchains.KNOWN
COMPARES = ("memcmp",)
DUMPS = ("h_out", "logits")
TOP_KEYS = {"version": False, "defaults": False, "entries": True, "cross": False}
ENTRY_KEYS = {"description": False, "toolchain": True, "cmake": False, "engine": False, "module": False,
              "testmod": False, "runner": True, "checks": False, "criteria": False, "requires": True,
              "env": False, "timeout": False}
MODULE_KEYS = {"build": False, "gpu": False, "archs": False, "host_compiler": False, "fallback_host_compiler": False,
               "expect_elf": False, "expect_ptx": False}
GPUS = ("cuda", "hip")  # the module's vendor: nvcc, or hipcc (CMake KITE_GPU)
DUMP_KEYS = {"model": False, "prompt": False, "steps": False, "threads": False, "variants": False}
VARIANT_KEYS = {"env": False, "requires": False}
CROSS_KEYS = {"title": True, "entries": True, "dumps": False, "compare": False, "requires": False,
              "min_entries": False}
CROSS_ID_RE = re.compile(r"^[A-Z][A-Za-z0-9_.-]*$")
ARCH_RE = re.compile(r"^(\d{2,3}[a-z]?)(-real|-virtual)?$|^(all|all-major|native)$")
GFX_RE = re.compile(r"^gfx[0-9a-f]{3,4}$")  # an AMD target (hipcc --offload-arch)
SM_RE = re.compile(r"^sm_\d{2,3}[a-z]?$")
CMAKE_OPT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CRITERION_REF_RE = re.compile(r"^[^#\s]+\.ya?ml(#[\w.-]+)?$")

MINGW_TOOLCHAIN_FILE = "native/cmake/toolchain-mingw-w64-x86_64.cmake"
TESTMOD_SOURCE = "native/testmod"


class MatrixError(SchemaErrors):
    """configs/matrix.yaml does not validate, or names no such entry."""


def _digest(obj: Any) -> str:
    """sha256 of a config dataclass's fields (its line number aside): what registration pins."""
    d = dataclasses.asdict(obj)
    d.pop("line")
    if isinstance(d.get("module"), dict) and d["module"].get("gpu") == "cuda":
        d["module"].pop("gpu")  # the default: digests of entries from before the key stay as they were
    return "sha256:" + hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Module:
    build: bool = False
    archs: tuple[str, ...] = ()
    gpu: str = "cuda"
    host_compiler: str = "gcc"
    fallback_host_compiler: str | None = None
    expect_elf: tuple[str, ...] | None = None
    expect_ptx: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Entry:
    name: str
    description: str
    toolchain: str
    cmake: dict[str, str]
    engine: bool
    module: Module
    testmod: bool
    runner: str
    checks: tuple[str, ...]
    criteria: tuple[str, ...]
    requires: tuple[str, ...]
    env: dict[str, str]
    timeout: float | None
    line: int = 0

    def digest(self) -> str:
        return _digest(self)

    @property
    def windows(self) -> bool:
        return self.toolchain == "mingw"


@dataclass(frozen=True)
class DumpVariant:
    name: str
    env: dict[str, str]
    requires: tuple[str, ...]


@dataclass(frozen=True)
class DumpDefaults:
    model: str = "tiny"
    prompt: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    steps: int = 8
    threads: int | None = 2
    variants: tuple[DumpVariant, ...] = (DumpVariant("cpu", {}, ()),)

    def variant(self, name: str) -> DumpVariant | None:
        return next((v for v in self.variants if v.name == name), None)


@dataclass(frozen=True)
class Cross:
    id: str
    title: str
    entries: tuple[tuple[str, str], ...]  # (entry, dump variant)
    dumps: tuple[str, ...]
    compare: str = "memcmp"
    requires: tuple[str, ...] = ()
    min_entries: int = 2
    line: int = 0

    def digest(self) -> str:
        return _digest(self)


@dataclass(frozen=True)
class RegisteredCross:
    """A cross-entry criterion as the registry sees it (id, file, digest, line), so that
    `harness register configs/matrix.yaml` pre-registers X1/X2 like any criteria file."""
    id: str
    file: str
    digest: str
    line: int


@dataclass(frozen=True)
class Matrix:
    path: Path
    version: int
    dump: DumpDefaults
    entries: dict[str, Entry]
    cross: dict[str, Cross]

    def select(self, names: list[str] | None) -> list[Entry]:
        if not names:
            return list(self.entries.values())
        unknown = [n for n in names if n not in self.entries]
        if unknown:
            raise MatrixError([f"{self.path}: no entry {', '.join(repr(u) for u in unknown)}; entries: "
                               + ", ".join(self.entries)])
        return [self.entries[n] for n in names]


def registrable(matrix: Matrix, rel_file: str) -> list[RegisteredCross]:
    return [RegisteredCross(c.id, rel_file, c.digest(), c.line) for c in matrix.cross.values()]


# ---- parsing ---------------------------------------------------------------------------------

def _module(v: Validator, path: tuple, m: Any) -> Module | None:
    if m is None:
        return Module()
    if isinstance(m, bool):
        return Module(build=m, archs=("90-real", "90-virtual") if m else ())
    if not isinstance(m, dict):
        v.err(path, f"must be a mapping ({', '.join(MODULE_KEYS)}) or true/false")
        return None
    n0 = v.count()
    v.keys(path, m, MODULE_KEYS, "a module")
    build = v.bool_(path + ("build",), m["build"]) if "build" in m else True
    gpu = v.enum(path + ("gpu",), m["gpu"], GPUS) if "gpu" in m else "cuda"
    if gpu == "hip":
        archs = v.patterned(path + ("archs",), m["archs"], GFX_RE, "an AMD target like gfx1030",
                            "list of AMD targets") if "archs" in m else []
    else:
        archs = v.patterned(path + ("archs",), m["archs"], ARCH_RE, "a CUDA architecture like 90-real",
                            "list of CUDA architectures") if "archs" in m else []
    hc = v.enum(path + ("host_compiler",), m["host_compiler"], HOST_COMPILERS) if "host_compiler" in m else "gcc"
    fb = (v.enum(path + ("fallback_host_compiler",), m["fallback_host_compiler"], HOST_COMPILERS)
          if "fallback_host_compiler" in m else None)
    expect = {}
    for k in ("expect_elf", "expect_ptx"):
        expect[k] = (tuple(v.patterned(path + (k,), m[k], SM_RE, "an sm_XX name", "list of sm_XX names") or ())
                     if k in m else None)
    if build and not archs and "archs" not in m:
        v.err(path + ("archs",), "a module build needs at least one architecture (e.g. 90-real)")
    if v.count() > n0:
        return None
    if gpu == "hip" and (expect["expect_elf"] is not None or expect["expect_ptx"] is not None):
        v.err(path, "expect_elf / expect_ptx list NVIDIA code: not for a `gpu: hip` module")
    if v.count() > n0:
        return None
    return Module(bool(build), tuple(archs or ()), gpu or "cuda", hc or "gcc", fb, expect["expect_elf"],
                  expect["expect_ptx"])


def _entry(v: Validator, name: Any, m: Any) -> Entry | None:
    path = ("entries", name)
    if not isinstance(name, str) or not ENTRY_NAME_RE.match(name):
        v.err(path, f"entry name {name!r} must be lower-case letters, digits, '-', '_', '.' "
                    "(it names build/<entry>/)")
        return None
    n0 = v.count()
    if not v.keys(path, m, ENTRY_KEYS, "an entry"):
        return None
    tc = v.enum(path + ("toolchain",), m["toolchain"], TOOLCHAINS) if "toolchain" in m else None
    runner = v.enum(path + ("runner",), m["runner"], RUNNERS) if "runner" in m else None
    opts = v.scalar_map(path + ("cmake",), m["cmake"], "CMake OPTION: value", CMAKE_OPT_RE,
                        "a CMake option name") if "cmake" in m else {}
    engine = v.bool_(path + ("engine",), m["engine"]) if "engine" in m else True
    module = _module(v, path + ("module",), m.get("module"))
    testmod = v.bool_(path + ("testmod",), m["testmod"]) if "testmod" in m else False
    checks = v.enumlist(path + ("checks",), m["checks"], CHECKS, "list of checks") if "checks" in m else []
    criteria = (v.patterned(path + ("criteria",), m["criteria"], CRITERION_REF_RE,
                            "a criteria file (regressions/suite.yaml) or one of its criteria "
                            "(regressions/suite.yaml#E3)", "list of criteria") if "criteria" in m else [])
    requires = v.enumlist(path + ("requires",), m["requires"], REQUIRES, "list of requirements") \
        if "requires" in m else None
    env = v.scalar_map(path + ("env",), m["env"], "NAME: value") if "env" in m else {}
    timeout = v.timeout(path + ("timeout",), m["timeout"]) if "timeout" in m else None
    desc = v.str_(path + ("description",), m["description"]) if "description" in m else ""
    if v.count() > n0 or None in (tc, runner, opts, engine, module, testmod, checks, criteria, requires, env, desc):
        return None
    assert tc and runner and opts is not None and module is not None and requires is not None
    _consistent(v, path, tc, runner, opts, bool(engine), module, bool(testmod), checks, requires)
    if v.count() > n0:
        return None
    return Entry(name, desc or "", tc, opts, bool(engine), module, bool(testmod), runner, tuple(checks),
                 tuple(criteria or ()), tuple(requires), env or {}, timeout, v.loc.line(path))


def _consistent(v: Validator, path: tuple, tc: str, runner: str, opts: dict[str, str], engine: bool,
                module: Module, testmod: bool, checks: list[str], requires: list[str]) -> None:
    """Rules between the keys of one entry."""
    if runner == "wine" and tc != "mingw":
        v.err(path + ("runner",), f"runner 'wine' runs Windows programs: toolchain must be 'mingw', not {tc!r}")
    if not engine:
        for c in checks:
            if c in CHECKS_NEED_ENGINE:
                v.err(path + ("checks",), f"check {c!r} needs the engine, but `engine: false`")
        if not module.build:
            v.err(path + ("engine",), "an entry that builds neither the engine nor a module does nothing")
    if "embedded-code" in checks and (not module.build or module.expect_elf is None or module.expect_ptx is None):
        v.err(path + ("checks",), "check 'embedded-code' needs module.build and both module.expect_elf and "
                                  "module.expect_ptx")
    if "loader-fake" in checks and not testmod:
        v.err(path + ("checks",), "check 'loader-fake' needs `testmod: true` (the fake module)")
    if module.build and module.gpu == "hip":
        if "hipcc" not in requires:
            v.err(path + ("requires",), "a `gpu: hip` module must require 'hipcc'")
        if opts.get("KITE_GPU", "").lower() != "hip" and engine:
            v.err(path + ("cmake",), "a `gpu: hip` module needs the engine to look for it (cmake KITE_GPU: hip)")
    if module.build and module.host_compiler == "msvc" and "msvc" not in requires:
        v.err(path + ("requires",), "a module built with host_compiler 'msvc' must require 'msvc'")
    if module.build and module.host_compiler == "clang" and "clang" not in requires and tc != "clang":
        v.err(path + ("requires",), "module host compiler 'clang' must be required ('clang')")
    if runner == "wine" and "wine" not in requires:
        v.err(path + ("requires",), "runner 'wine' must require 'wine'")
    if tc in ("clang", "mingw") and tc not in requires:
        v.err(path + ("requires",), f"toolchain {tc!r} must be listed in requires")
    if opts.get("KITE_CUDA", "OFF").upper() in ("OFF", "0", "FALSE", "NO") and "loader-fake" in checks:
        v.err(path + ("checks",), "check 'loader-fake' needs the loader (cmake KITE_CUDA: ON)")


def _dump_defaults(v: Validator, m: Any) -> DumpDefaults:
    path = ("defaults", "dump")
    base = DumpDefaults()
    if m is None or not v.keys(path, m, DUMP_KEYS, "the dump defaults"):
        return base
    model = v.str_(path + ("model",), m["model"]) if "model" in m else base.model
    prompt = base.prompt
    if "prompt" in m:
        p = m["prompt"]
        if (not isinstance(p, list) or not p
                or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in p)):
            v.err(path + ("prompt",), "must be a non-empty list of token ids (integers >= 0)")
        else:
            prompt = tuple(p)
    steps = v.int_(path + ("steps",), m["steps"], 0) if "steps" in m else base.steps
    threads = v.int_(path + ("threads",), m["threads"], 1) if m.get("threads") is not None else (
        None if "threads" in m else base.threads)
    variants: list[DumpVariant] = []
    raw = v.mapping(path + ("variants",), m.get("variants"), "dump variants (name: {env, requires})")
    if raw is not None and "variants" in m and not raw:
        v.err(path + ("variants",), "names no variant")
    for name, spec in (raw or {}).items():
        vp = path + ("variants", name)
        if not isinstance(name, str) or not ENTRY_NAME_RE.fullmatch(name):
            # a variant's name is a folder of the report (dumps/<entry>/<variant>), as merge expects
            v.err(vp, f"{name!r} is not a variant name: lowercase letters, digits, '_', '.', '-'")
            continue
        spec = {} if spec is None else spec
        if not v.keys(vp, spec, VARIANT_KEYS, "a dump variant"):
            continue
        env = v.scalar_map(vp + ("env",), spec["env"], "NAME: value") if "env" in spec else {}
        req = v.enumlist(vp + ("requires",), spec["requires"], REQUIRES, "list of requirements") \
            if "requires" in spec else []
        variants.append(DumpVariant(str(name), env or {}, tuple(req or ())))
    return DumpDefaults(model or base.model, prompt, base.steps if steps is None else steps, threads,
                        tuple(variants) or base.variants)


def _cross(v: Validator, cid: str, m: Any, raw_entries: dict[str, Any], dump: DumpDefaults) -> Cross | None:
    path = ("cross", cid)
    n0 = v.count()
    if not v.keys(path, m, CROSS_KEYS, "a cross criterion"):
        return None
    pairs = []
    items = v.strlist(path + ("entries",), m["entries"], "list of `entry:variant`") if "entries" in m else None
    if items is not None and len(items) < 2:
        v.err(path + ("entries",), "must list at least two `entry:variant` items")
    for i, item in enumerate(items or []):
        ename, _, var = item.partition(":")
        var = var or dump.variants[0].name
        ent = raw_entries.get(ename)
        checks = ent.get("checks") if isinstance(ent, dict) else None
        if ename not in raw_entries:
            v.err(path + ("entries", i), f"no entry {ename!r}; allowed: {', '.join(map(str, raw_entries))}")
        elif not isinstance(ent, dict):
            continue  # the entry itself is reported where it is defined
        elif not isinstance(checks, list) or "dump" not in checks:
            v.err(path + ("entries", i), f"entry {ename!r} has no 'dump' check, so it writes no dumps")
        elif dump.variant(var) is None:
            v.err(path + ("entries", i), f"no dump variant {var!r}; allowed: "
                                         + ", ".join(x.name for x in dump.variants))
        else:
            pairs.append((ename, var))
    dumps = v.enumlist(path + ("dumps",), m["dumps"], DUMPS, "list of dumps") if "dumps" in m else list(DUMPS)
    cmp_ = v.enum(path + ("compare",), m["compare"], COMPARES) if "compare" in m else "memcmp"
    req = v.enumlist(path + ("requires",), m["requires"], REQUIRES, "list of requirements") \
        if "requires" in m else []
    mn = v.int_(path + ("min_entries",), m["min_entries"], 2) if "min_entries" in m else 2
    title = v.title(path + ("title",), m["title"]) if "title" in m else None
    if v.count() > n0 or None in (dumps, cmp_, req, mn, title):
        return None
    return Cross(cid, title or "", tuple(pairs), tuple(dumps or ()), cmp_ or "memcmp", tuple(req or ()), mn or 2,
                 v.loc.line(path))


def parse_matrix(text: str, path: Path | str = "configs/matrix.yaml", rel: str | None = None) -> Matrix:
    """Parse and validate the matrix text; MatrixError lists every problem found."""
    rel = rel or str(path)
    v = Validator(rel, parse(text, rel, MatrixError))
    doc = v.loc.value
    dump, entries, cross, version = DumpDefaults(), {}, {}, 1
    if v.keys((), doc, TOP_KEYS, "the build matrix"):
        if doc.get("version", 1) != 1:
            v.err(("version",), f"{doc['version']!r} is not allowed; allowed: 1")
        defaults = v.mapping(("defaults",), doc.get("defaults"), "defaults")
        if defaults is not None and v.keys(("defaults",), defaults, {"dump": False}, "defaults"):
            dump = _dump_defaults(v, defaults.get("dump"))
        raw_entries = v.mapping(("entries",), doc.get("entries"), "entry name -> entry") or {}
        if "entries" in doc and not raw_entries:
            v.err(("entries",), "names no entry")
        for name, m in raw_entries.items():
            ent = _entry(v, name, m)
            if ent is not None:
                entries[name] = ent
        for cid, m in (v.mapping(("cross",), doc.get("cross"), "id -> cross criterion") or {}).items():
            if not isinstance(cid, str) or not CROSS_ID_RE.match(cid):
                v.err(("cross", cid), f"id {cid!r} must start with a capital letter (e.g. X1)")
                continue
            c = _cross(v, cid, m, raw_entries, dump)
            if c is not None:
                cross[cid] = c
    v.raise_errors(MatrixError)
    return Matrix(Path(path), version, dump, entries, cross)


def load_matrix(path: Path, root: Path | None = None) -> Matrix:
    rel = rel_path(path, root) if root is not None else str(path)
    return parse_matrix(read_text(path, rel, "build matrix not found", MatrixError), path, rel)


def entry_summary(ent: Entry) -> dict[str, Any]:
    """An entry as JSON (for `matrix --list --json` and CI fan-out)."""
    return {"name": ent.name, "description": ent.description, "toolchain": ent.toolchain, "runner": ent.runner,
            "cmake": ent.cmake, "engine": ent.engine, "module": dataclasses.asdict(ent.module),
            "testmod": ent.testmod, "checks": list(ent.checks), "criteria": list(ent.criteria),
            "requires": list(ent.requires)}


def availability(ent: Entry) -> tuple[bool, str]:
    """Every `requires` tool present? (False, skip reason with install hint) otherwise."""
    for r in ent.requires:
        t = toolchains.probe(r)
        if not t.found:
            return False, t.skip_reason()
    return True, ""
