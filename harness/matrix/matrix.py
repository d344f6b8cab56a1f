"""The build matrix (configs/matrix.yaml): loading and validation, and running entries.

An entry is one host toolchain + CMake options + an optional CUDA module build + a runner
(native, or wine for the MinGW build) + built-in checks + registered criteria. Running an entry:

1. `requires` probed (harness/build/toolchains.py): unmet -> the entry is SKIP with the install hint;
2. builds through harness/build/cmake.py into build/<entry>/{engine,cuda,bin} (the toolchain and the
   module's host compiler are CMake options: CMAKE_C_COMPILER, CMAKE_TOOLCHAIN_FILE,
   CMAKE_CUDA_HOST_COMPILER), the fake loader-test module into build/<entry>/bin/testmods/;
3. checks (info, selftest, dump, stub-equal, loader-fake, embedded-code, msvc-discovery);
4. the entry's registered criteria through harness/run/runner.py, with the entry's build standing in
   for the criteria's `default` build (and build/<entry>/stub for `stub`).

Cross-entry criteria (`cross:`) compare the `dump` check's files across entries with memcmp
(harness/run/compare.py). Every entry's dumps are copied into its report (dumps/<entry>/<variant>/)
with their SHA-256, so `python -m harness merge` can evaluate the cross criteria over reports
made on different machines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from harness.build import toolchains
from harness.spec import inputs
from harness.spec.digest import file_sha256
from harness.spec.config import ProjectSpec
from harness.errors import HarnessError

# ---------------------------------------------------------------------------------------------
# Schema

TOOLCHAINS = ("gcc", "clang", "mingw")
RUNNERS = ("native", "wine")
HOST_COMPILERS = ("gcc", "clang", "msvc")
CHECKS = ("info", "selftest", "dump", "stub-equal", "loader-fake", "embedded-code", "msvc-discovery")
REQUIRES = toolchains.KNOWN
COMPARES = ("memcmp",)
ENTRY_KEYS = ("description", "toolchain", "cmake", "engine", "module", "testmod", "runner", "checks", "criteria",
              "requires", "env", "timeout")
MODULE_KEYS = ("build", "archs", "host_compiler", "fallback_host_compiler", "expect_elf", "expect_ptx")
TOP_KEYS = ("version", "defaults", "entries", "cross")
DUMP_KEYS = ("model", "prompt", "steps", "threads", "variants")
VARIANT_KEYS = ("env", "requires")
CROSS_KEYS = ("title", "entries", "dumps", "compare", "requires", "min_entries")
ENTRY_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
ARCH_RE = re.compile(r"^(\d{2,3}[a-z]?)(-real|-virtual)?$|^(all|all-major|native)$")
SM_RE = re.compile(r"^sm_\d{2,3}[a-z]?$")
CMAKE_OPT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CHECKS_NEED_ENGINE = {"info", "selftest", "dump", "stub-equal", "loader-fake"}

MINGW_TOOLCHAIN_FILE = "native/cmake/toolchain-mingw-w64-x86_64.cmake"
TESTMOD_SOURCE = "native/testmod"


class MatrixError(HarnessError):
    """configs/matrix.yaml does not validate; each message names file:line, entry, key, allowed."""

    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__("\n".join(messages))


def _digest(obj: Any) -> str:
    """sha256 of a config dataclass's fields (its line number aside): what registration pins."""
    d = dataclasses.asdict(obj)
    d.pop("line")
    return "sha256:" + hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Module:
    build: bool = False
    archs: tuple[str, ...] = ()
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


def registrable(matrix: Matrix, rel_file: str) -> list[RegisteredCross]:
    return [RegisteredCross(c.id, rel_file, c.digest(), c.line) for c in matrix.cross.values()]


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


def _opt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


class _Errors:
    def __init__(self, rel: str, loc: Any):
        self.rel = rel
        self.loc = loc
        self.messages: list[str] = []

    def add(self, path: tuple, msg: str, allowed: tuple[str, ...] | list[str] | str | None = None) -> None:
        line = self.loc.line(path) if self.loc is not None else 1
        where = ""
        if len(path) >= 2 and path[0] == "entries":
            where = f"entry {path[1]!r}" + (": key " + ".".join(str(p) for p in path[2:]) if len(path) > 2 else "")
        elif len(path) >= 2 and path[0] == "cross":
            where = f"cross criterion {path[1]!r}" + (
                ": key " + ".".join(str(p) for p in path[2:]) if len(path) > 2 else "")
        elif path:
            where = "key " + ".".join(str(p) for p in path)
        text = f"{self.rel}:{line}: " + (f"{where}: " if where else "") + msg
        if allowed:
            text += "; allowed: " + (allowed if isinstance(allowed, str) else ", ".join(allowed))
        self.messages.append(text)


def _str_list(e: _Errors, path: tuple, v: Any, allowed: tuple[str, ...] | None = None,
              pattern: re.Pattern[str] | None = None, what: str = "value") -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        e.add(path, f"must be a list of strings, not {type(v).__name__}", allowed)
        return ()
    out = []
    for i, x in enumerate(v):
        if not isinstance(x, (str, int)) or isinstance(x, bool):
            e.add(path + (i,), f"{what} must be a string, not {type(x).__name__}", allowed)
            continue
        x = str(x)
        if allowed is not None and x not in allowed:
            e.add(path + (i,), f"unknown {what} {x!r}", allowed)
            continue
        if pattern is not None and not pattern.match(x):
            e.add(path + (i,), f"bad {what} {x!r}")
            continue
        out.append(x)
    if len(set(out)) != len(out):
        e.add(path, f"a {what} is listed twice")
    return tuple(out)


def _env(e: _Errors, path: tuple, v: Any) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        e.add(path, f"must be a mapping NAME: value, not {type(v).__name__}")
        return {}
    out = {}
    for k, x in v.items():
        if not isinstance(k, str) or not CMAKE_OPT_RE.match(k):
            e.add(path + (k,), f"bad variable name {k!r}")
        elif isinstance(x, (dict, list)) or x is None:
            e.add(path + (k,), "value must be a string or number")
        else:
            out[k] = _opt_value(x)
    return out


def _bool(e: _Errors, path: tuple, v: Any, default: bool) -> bool:
    if v is None:
        return default
    if not isinstance(v, bool):
        e.add(path, f"must be true or false, not {v!r}", ("true", "false"))
        return default
    return v


def _unknown_keys(e: _Errors, path: tuple, m: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for k in m:
        if k not in allowed:
            e.add(path + (k,), f"unknown key {k!r}", allowed)


def _module(e: _Errors, path: tuple, v: Any) -> Module:
    if v is None:
        return Module()
    if isinstance(v, bool):
        return Module(build=v, archs=("90-real", "90-virtual") if v else ())
    if not isinstance(v, dict):
        e.add(path, f"must be a mapping or true/false, not {type(v).__name__}", MODULE_KEYS)
        return Module()
    _unknown_keys(e, path, v, MODULE_KEYS)
    build = _bool(e, path + ("build",), v.get("build"), True)
    archs = _str_list(e, path + ("archs",), v.get("archs"), pattern=ARCH_RE, what="CUDA architecture")
    hc = v.get("host_compiler", "gcc")
    if hc not in HOST_COMPILERS:
        e.add(path + ("host_compiler",), f"unknown host compiler {hc!r}", HOST_COMPILERS)
        hc = "gcc"
    fb = v.get("fallback_host_compiler")
    if fb is not None and fb not in HOST_COMPILERS:
        e.add(path + ("fallback_host_compiler",), f"unknown host compiler {fb!r}", HOST_COMPILERS)
        fb = None
    elf = v.get("expect_elf")
    ptx = v.get("expect_ptx")
    elf_t = _str_list(e, path + ("expect_elf",), elf, pattern=SM_RE, what="sm_XX name") if elf is not None else None
    ptx_t = _str_list(e, path + ("expect_ptx",), ptx, pattern=SM_RE, what="sm_XX name") if ptx is not None else None
    if build and not archs:
        e.add(path + ("archs",), "a module build needs at least one architecture (e.g. 90-real)")
    return Module(build, archs, hc, fb, elf_t, ptx_t)


def _entry(e: _Errors, name: Any, v: Any, loc: Any) -> Entry | None:
    path = ("entries", name)
    if not isinstance(name, str) or not ENTRY_NAME_RE.match(name):
        e.add(path, "entry name must be lower-case letters, digits, '-', '_', '.' (it names build/<entry>/)")
        return None
    if not isinstance(v, dict):
        e.add(path, f"must be a mapping, not {type(v).__name__}", ENTRY_KEYS)
        return None
    n0 = len(e.messages)
    _unknown_keys(e, path, v, ENTRY_KEYS)
    for req in ("toolchain", "runner", "requires"):
        if req not in v:
            e.add(path, f"missing required key {req!r}")
    tc = v.get("toolchain", "gcc")
    if tc not in TOOLCHAINS and "toolchain" in v:
        e.add(path + ("toolchain",), f"unknown toolchain {tc!r}", TOOLCHAINS)
    runner = v.get("runner", "native")
    if runner not in RUNNERS and "runner" in v:
        e.add(path + ("runner",), f"unknown runner {runner!r}", RUNNERS)
    cmake = v.get("cmake") or {}
    if not isinstance(cmake, dict):
        e.add(path + ("cmake",), f"must be a mapping OPTION: value, not {type(cmake).__name__}")
        cmake = {}
    opts = {}
    for k, x in cmake.items():
        if not isinstance(k, str) or not CMAKE_OPT_RE.match(k):
            e.add(path + ("cmake", k), f"bad CMake option name {k!r}")
        elif isinstance(x, (dict, list)) or x is None:
            e.add(path + ("cmake", k), "value must be a string, number or true/false")
        else:
            opts[k] = _opt_value(x)
    engine = _bool(e, path + ("engine",), v.get("engine"), True)
    module = _module(e, path + ("module",), v.get("module"))
    testmod = _bool(e, path + ("testmod",), v.get("testmod"), False)
    checks = _str_list(e, path + ("checks",), v.get("checks"), allowed=CHECKS, what="check")
    criteria = _str_list(e, path + ("criteria",), v.get("criteria"), pattern=re.compile(r"^[^#\s]+\.ya?ml(#[\w.-]+)?$|^[A-Z][\w.-]*$"),
                         what="criterion (file.yaml, file.yaml#ID or ID)")
    requires = _str_list(e, path + ("requires",), v.get("requires"), allowed=REQUIRES, what="requirement")
    env = _env(e, path + ("env",), v.get("env"))
    timeout = v.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        e.add(path + ("timeout",), f"must be a positive number of seconds, not {timeout!r}")
        timeout = None
    desc = v.get("description", "")
    if not isinstance(desc, str):
        e.add(path + ("description",), "must be a string")
        desc = str(desc)
    # consistency between keys
    if runner == "wine" and tc != "mingw":
        e.add(path + ("runner",), f"runner 'wine' runs Windows programs: toolchain must be 'mingw', not {tc!r}")
    if tc == "mingw" and runner == "native" and "msvc" not in requires and "x86_64" not in requires:
        pass  # native Windows host (win64-msvc): allowed
    if not engine:
        for c in checks:
            if c in CHECKS_NEED_ENGINE:
                e.add(path + ("checks",), f"check {c!r} needs the engine, but `engine: false`")
        if not module.build:
            e.add(path + ("engine",), "an entry that builds neither the engine nor a module does nothing")
    if "embedded-code" in checks and (not module.build or module.expect_elf is None or module.expect_ptx is None):
        e.add(path + ("checks",), "check 'embedded-code' needs module.build and both module.expect_elf and "
                                  "module.expect_ptx")
    if "loader-fake" in checks and not testmod:
        e.add(path + ("checks",), "check 'loader-fake' needs `testmod: true` (the fake module)")
    if module.build and module.host_compiler == "msvc" and "msvc" not in requires:
        e.add(path + ("requires",), "a module built with host_compiler 'msvc' must require 'msvc'")
    if module.build and module.host_compiler == "clang" and "clang" not in requires and tc != "clang":
        e.add(path + ("requires",), "module host compiler 'clang' must be required ('clang')")
    if runner == "wine" and "wine" not in requires:
        e.add(path + ("requires",), "runner 'wine' must require 'wine'")
    if tc in ("clang", "mingw") and tc not in requires:
        e.add(path + ("requires",), f"toolchain {tc!r} must be listed in requires")
    if opts.get("KITE_CUDA", "OFF").upper() in ("OFF", "0", "FALSE", "NO") and "loader-fake" in checks:
        e.add(path + ("checks",), "check 'loader-fake' needs the loader (cmake KITE_CUDA: ON)")
    if len(e.messages) > n0:
        return None
    return Entry(name, desc, tc, opts, engine, module, testmod, runner, checks, criteria, requires, env,
                 float(timeout) if timeout is not None else None, loc.line(path) if loc else 0)


def _dump_defaults(e: _Errors, v: Any) -> DumpDefaults:
    path = ("defaults", "dump")
    if v is None:
        return DumpDefaults()
    if not isinstance(v, dict):
        e.add(path, "must be a mapping", DUMP_KEYS)
        return DumpDefaults()
    _unknown_keys(e, path, v, DUMP_KEYS)
    model = v.get("model", "tiny")
    if not isinstance(model, str) or not model:
        e.add(path + ("model",), "must be a recipe name or a .gguf path")
        model = "tiny"
    prompt = v.get("prompt", [1, 2, 3, 4, 5, 6, 7, 8])
    if (not isinstance(prompt, list) or not prompt
            or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt)):
        e.add(path + ("prompt",), "must be a non-empty list of token ids (integers >= 0)")
        prompt = [1]
    steps = v.get("steps", 8)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        e.add(path + ("steps",), f"must be an integer >= 0, not {steps!r}")
        steps = 0
    threads = v.get("threads", 2)
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        e.add(path + ("threads",), f"must be an integer >= 1 or null, not {threads!r}")
        threads = None
    variants = []
    raw = v.get("variants", {"cpu": {}})
    if not isinstance(raw, dict) or not raw:
        e.add(path + ("variants",), "must be a non-empty mapping name: {env, requires}")
        raw = {}
    for name, spec in raw.items():
        vp = path + ("variants", name)
        spec = spec or {}
        if not isinstance(spec, dict):
            e.add(vp, "must be a mapping", VARIANT_KEYS)
            continue
        _unknown_keys(e, vp, spec, VARIANT_KEYS)
        variants.append(DumpVariant(str(name), _env(e, vp + ("env",), spec.get("env")),
                                    _str_list(e, vp + ("requires",), spec.get("requires"), REQUIRES, what="requirement")))
    return DumpDefaults(model, tuple(prompt), steps, threads, tuple(variants) or (DumpVariant("cpu", {}, ()),))


def _cross(e: _Errors, cid: Any, v: Any, entries: dict[str, Any], dump: DumpDefaults, loc: Any) -> Cross | None:
    path = ("cross", cid)
    if not isinstance(v, dict):
        e.add(path, "must be a mapping", CROSS_KEYS)
        return None
    n0 = len(e.messages)
    _unknown_keys(e, path, v, CROSS_KEYS)
    pairs = []
    raw = v.get("entries")
    if not isinstance(raw, list) or len(raw) < 2:
        e.add(path + ("entries",), "must list at least two `entry:variant` items")
        raw = []
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            e.add(path + ("entries", i), "must be a string `entry:variant`")
            continue
        ename, _, var = item.partition(":")
        var = var or dump.variants[0].name
        if ename not in entries:
            e.add(path + ("entries", i), f"no entry {ename!r}", list(entries))
            continue
        ent = entries[ename]
        if isinstance(ent, dict) and "dump" not in (ent.get("checks") or []):
            e.add(path + ("entries", i), f"entry {ename!r} has no 'dump' check, so it writes no dumps")
        if dump.variant(var) is None:
            e.add(path + ("entries", i), f"no dump variant {var!r}", [x.name for x in dump.variants])
            continue
        pairs.append((ename, var))
    dumps = _str_list(e, path + ("dumps",), v.get("dumps", ["h_out", "logits"]), ("h_out", "logits"), what="dump")
    cmp_ = v.get("compare", "memcmp")
    if cmp_ not in COMPARES:
        e.add(path + ("compare",), f"unknown comparison {cmp_!r}", COMPARES)
    req = _str_list(e, path + ("requires",), v.get("requires"), REQUIRES, what="requirement")
    mn = v.get("min_entries", 2)
    if not isinstance(mn, int) or isinstance(mn, bool) or mn < 2:
        e.add(path + ("min_entries",), f"must be an integer >= 2, not {mn!r}")
        mn = 2
    title = v.get("title", "")
    if not isinstance(title, str) or not title:
        e.add(path + ("title",), "a cross criterion needs a title")
    if len(e.messages) > n0:
        return None
    return Cross(str(cid), title, tuple(pairs), dumps, cmp_, req, mn, loc.line(path) if loc else 0)


def parse_matrix(text: str, path: Path | str = "configs/matrix.yaml", rel: str | None = None) -> Matrix:
    """Parse and validate the matrix text; MatrixError lists every problem found."""
    from harness.spec import yamlsrc

    rel = rel or str(path)
    try:
        loc = yamlsrc.load(text)
    except yamlsrc.YamlSyntaxError as ex:
        raise MatrixError([f"{rel}:{ex.line}: not valid YAML: {ex.message}"]) from None
    e = _Errors(rel, loc)
    for p, line in loc.duplicates:
        e.messages.append(f"{rel}:{line}: key {'.'.join(str(x) for x in p)} is given twice")
    doc = loc.value
    if not isinstance(doc, dict):
        raise MatrixError([f"{rel}:1: the matrix must be a mapping with keys " + ", ".join(TOP_KEYS)])
    _unknown_keys(e, (), doc, TOP_KEYS)
    version = doc.get("version", 1)
    if version != 1:
        e.add(("version",), f"unsupported version {version!r}", ("1",))
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        e.add(("defaults",), "must be a mapping", ("dump",))
        defaults = {}
    _unknown_keys(e, ("defaults",), defaults, ("dump",))
    dump = _dump_defaults(e, defaults.get("dump"))
    raw_entries = doc.get("entries")
    if not isinstance(raw_entries, dict) or not raw_entries:
        e.add(("entries",), "must be a non-empty mapping of entry name -> entry")
        raw_entries = {}
    entries: dict[str, Entry] = {}
    for name, v in raw_entries.items():
        ent = _entry(e, name, v, loc)
        if ent is not None:
            entries[name] = ent
    cross: dict[str, Cross] = {}
    raw_cross = doc.get("cross") or {}
    if not isinstance(raw_cross, dict):
        e.add(("cross",), "must be a mapping of id -> cross criterion")
        raw_cross = {}
    for cid, v in raw_cross.items():
        if not isinstance(cid, str) or not re.match(r"^[A-Z][A-Za-z0-9_.-]*$", cid):
            e.add(("cross", cid), "id must start with a capital letter (e.g. X1)")
            continue
        c = _cross(e, cid, v, raw_entries, dump, loc)
        if c is not None:
            cross[cid] = c
    if e.messages:
        raise MatrixError(e.messages)
    return Matrix(Path(path), int(version), dump, entries, cross)


def load_matrix(path: Path, root: Path | None = None) -> Matrix:
    try:
        text = inputs.read_text(path, inputs.MAX_CONFIG)
    except FileNotFoundError:
        raise MatrixError([f"{path}: build matrix not found"]) from None
    except HarnessError as e:
        raise MatrixError([str(e)]) from None
    rel = str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)
    return parse_matrix(text, path, rel)


# ---------------------------------------------------------------------------------------------
# Listing (for `nox -l --json` / CI fan-out)

def entry_summary(ent: Entry) -> dict[str, Any]:
    return {"name": ent.name, "description": ent.description, "toolchain": ent.toolchain, "runner": ent.runner,
            "cmake": ent.cmake, "engine": ent.engine,
            "module": dataclasses.asdict(ent.module), "testmod": ent.testmod, "checks": list(ent.checks),
            "criteria": list(ent.criteria), "requires": list(ent.requires)}


def availability(ent: Entry) -> tuple[bool, str]:
    """Every `requires` tool present? (False, skip reason with install hint) otherwise."""
    for r in ent.requires:
        t = toolchains.probe(r)
        if not t.found:
            return False, t.skip_reason()
    return True, ""


# ---------------------------------------------------------------------------------------------
# Running entries

@dataclass
class CheckResult:
    name: str
    verdict: str  # PASS | FAIL | SKIP
    reason: str
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class EntryRun:
    entry: str
    verdict: str
    reason: str
    seconds: float = 0.0
    build_seconds: float = 0.0
    checks: list[CheckResult] = field(default_factory=list)
    builds: dict[str, Any] = field(default_factory=dict)
    dumps: dict[str, dict[str, Any]] = field(default_factory=dict)  # variant -> {dir, files: {name: sha}}

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _win_path(p: Path | str) -> str:
    """A Linux absolute path as wine's Z: drive sees it."""
    return "Z:" + str(Path(p).resolve()).replace("/", "\\")


class EntryRunner:
    """Runs one entry: builds, checks, criteria. Everything lands under build/<entry>/ and the
    report directory (logs/<entry>/...)."""

    def __init__(self, cfg: Any, matrix: Matrix, ent: Entry, report_dir: Path,
                 model: Callable[[], Path], progress: Callable[[str], None] | None = None, force: bool = False):
        self.cfg0 = cfg
        self.matrix = matrix
        self.ent = ent
        self.report_dir = report_dir
        self.model = model
        self.say = progress or (lambda s: print(s, file=sys.stderr, flush=True))
        self.force = force
        self.root = Path(cfg.root)
        self.broot = self.root / cfg.build_dir / ent.name
        binary = "kite.exe" if ent.windows else "kite"
        module = "kite_cuda.dll" if ent.windows else "libkite_cuda.so"
        self.cfg = dataclasses.replace(cfg, binary=binary, module=module)
        self.logs = report_dir / "logs" / ent.name
        self.builds: dict[str, Any] = {}
        self.dump_dirs: dict[str, Path] = {}
        self.module_host: str | None = None
        self.module_note = ""

    # -- environment and argv --------------------------------------------------------------

    def timeout(self) -> float:
        return self.ent.timeout or self.cfg.timeout("run", 180)

    def base_env(self) -> dict[str, str]:
        env = dict(self.ent.env)
        if self.ent.runner == "wine":
            prefix = self.root / self.cfg.build_dir / ".wineprefix"
            env.setdefault("WINEPREFIX", str(prefix))
            env.setdefault("WINEDEBUG", "-all")
            env.setdefault("WINEDLLOVERRIDES", "mscoree,mshtml=")
            env.setdefault("WINEARCH", "win64")
        return env

    def path_arg(self, p: Path | str) -> str:
        return _win_path(p) if self.ent.runner == "wine" else str(p)

    def argv(self, exe: Path, args: list[str]) -> list[str]:
        if self.ent.runner == "wine":
            return [toolchains.probe("wine").path or "wine", str(exe), *args]
        return [str(exe), *args]

    def run(self, exe: Path, args: list[str], env: dict[str, str] | None, log: str):
        from harness.process import run_process

        overlay = {**self.base_env(), **(env or {})}
        if self.ent.runner == "wine":
            # module paths handed to the Windows engine: Z:\... form
            for k in list(overlay):
                if k == self.cfg.env_names.get("module_path", "KITE_CUDA_LIB") and overlay[k].startswith("/"):
                    overlay[k] = _win_path(overlay[k])
        return run_process(self.argv(exe, args), overlay, timeout=self.timeout(), log_prefix=self.logs / log)

    # -- builds ----------------------------------------------------------------------------

    def _compiler_defs(self) -> dict[str, str]:
        tc = self.ent.toolchain
        if tc == "mingw":
            return {"CMAKE_TOOLCHAIN_FILE": str(self.root / MINGW_TOOLCHAIN_FILE)}
        path = toolchains.probe(tc).path or tc
        return {"CMAKE_C_COMPILER": path}

    def _module_defs(self) -> tuple[dict[str, str] | None, str]:
        m = self.ent.module
        defs = {"KITE_CUDA_ARCHS": ";".join(m.archs)}
        if m.host_compiler == "msvc":
            return defs, "msvc (vcvars environment)"
        for hc in [m.host_compiler] + ([m.fallback_host_compiler] if m.fallback_host_compiler else []):
            ok, why = toolchains.nvcc_accepts_host(hc)
            if ok:
                defs["CMAKE_CUDA_HOST_COMPILER"] = toolchains.probe(hc).path or hc
                note = f"module host compiler: {hc} ({why})"
                if hc != m.host_compiler:
                    note = f"module host compiler: {hc}, because {m.host_compiler} was refused"
                return defs, note
            last = why
        return None, last

    def _project(self, source: str, options: dict[str, str]) -> ProjectSpec:
        return ProjectSpec(source, options, ("native/include",))

    def build_engine(self, name: str, options: dict[str, str], with_module: bool) -> Any:
        from harness.build import cmake as B
        from harness.spec.config import BuildSpec

        opts = {**self._compiler_defs(), **options}
        mod = None
        if with_module:
            mdefs, note = self._module_defs()
            self.module_note = note
            if mdefs is not None:
                mod = self._project("native/cuda", mdefs)
        msvc = mod is not None and self.ent.module.host_compiler == "msvc"
        # MSVC: nvcc needs the vcvarsall environment: the module is built after the engine, with
        # that environment as an overlay (self.cmake -> build.cmake_project)
        spec = BuildSpec(name, self._project("native", opts) if self.ent.engine else None, None if msvc else mod)
        if msvc and spec.engine is not None:
            cfg = dataclasses.replace(self.cfg, builds={**self.cfg.builds, name: spec})
            res = B.build(cfg, name, force=self.force, progress=self.say)
            tool = toolchains.probe_msvc()
            if not tool.found:
                res.module = B.PartResult("skipped", tool.skip_reason())
            else:
                nvcc = B.find_nvcc() or toolchains.probe("nvcc").path
                res.module = self.cmake(mod.source, self.cfg.build_root(name) / "cuda",
                                        {**mod.options, "KITE_OUTPUT_DIR": res.bin_dir, "CMAKE_CUDA_COMPILER": nvcc},
                                        "module", env=tool.details.get("env") or {})
            self.builds[name] = res
            return res
        if spec.engine is None:
            # module only: build it through a placeholder-free path (no engine needed)
            return self._module_only(name, mod)
        cfg = dataclasses.replace(self.cfg, builds={**self.cfg.builds, name: spec})
        res = B.build(cfg, name, force=self.force, progress=self.say)
        if with_module and mod is None:
            res.module = B.PartResult("skipped", self.module_note)
        self.builds[name] = res
        return res

    def _module_only(self, name: str, mod: Any) -> Any:
        from harness.build import cmake as B

        t0 = time.perf_counter()
        bin_dir = self.cfg.build_root(name) / "bin"
        res = B.BuildResult(name, str(bin_dir), "", str(bin_dir / self.cfg.module), B.PartResult("skipped", "engine: false"),
                            B.PartResult("skipped", self.module_note))
        if mod is not None:
            nvcc = B.find_nvcc() or toolchains.probe("nvcc").path
            # module-only entries check the embedded code list: the loader test modules add nothing
            res.module = self.cmake(mod.source, self.cfg.build_root(name) / "cuda",
                                    {**mod.options, "KITE_OUTPUT_DIR": str(bin_dir), "CMAKE_CUDA_COMPILER": nvcc,
                                     "KITE_CUDA_TEST_MODULES": "OFF"},
                                    "module")
            if res.module.status in ("built", "up-to-date") and not (bin_dir / self.cfg.module).exists():
                res.module = B.PartResult("failed", f"build succeeded but {self.cfg.module} not in {bin_dir}",
                                          res.module.log)
        res.seconds = time.perf_counter() - t0
        self.builds[name] = res
        return res

    def cmake(self, source: str, bdir: Path, defs: dict[str, str], label: str,
              env: dict[str, str] | None = None) -> Any:
        """One CMake project (the test module, a module-only or MSVC module build) through the
        harness's own build code: same generator handling and up-to-date check as `harness build`."""
        from harness.build import cmake as B

        proj = ProjectSpec(source, {k: str(v) for k, v in defs.items()}, ("native/include",))
        tools = {"CC": os.environ.get("CC", ""), "CXX": os.environ.get("CXX", "")}
        return B.cmake_project(self.cfg, proj, bdir, {}, self.logs / f"{label}.log", [], tools, self.force, env)

    def build_testmod(self, bin_dir: Path) -> Any:
        defs = {"KITE_OUTPUT_DIR": str(bin_dir), **self._compiler_defs()}
        return self.cmake(TESTMOD_SOURCE, self.broot / "testmod", defs, "testmod")

    def fake_paths(self, bin_dir: Path) -> dict[str, Path]:
        t = bin_dir / self.cfg.testmods_dir
        if self.ent.windows:
            return {"fake": t / "fake" / "kite_cuda.dll", "noexport": t / "kite_cuda_fake_noexport.dll",
                    "badabi": t / "kite_cuda_fake_badabi.dll"}
        return {"fake": t / "libkite_cuda_fake.so", "noexport": t / "libkite_cuda_fake_noexport.so",
                "badabi": t / "libkite_cuda_fake_badabi.so"}

    def layout(self, name: str, exe: Path, extra: dict[str, Path] | None = None) -> Path:
        """A folder holding a copy of the engine (and `extra` files under given names)."""
        d = self.broot / "layouts" / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        shutil.copy2(exe, d / exe.name)
        for n, src in (extra or {}).items():
            shutil.copy2(src, d / n)
        return d / exe.name

    # -- checks ----------------------------------------------------------------------------

    def info(self, exe: Path, env: dict[str, str] | None, log: str) -> dict[str, Any]:
        r = self.run(exe, ["info", "--json"], env, log)
        if not r.ok:
            raise CheckFail(f"`info --json` failed: {r.describe()}")
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError as ex:
            raise CheckFail(f"`info --json` printed no JSON: {ex}") from None

    def check_info(self, exe: Path) -> CheckResult:
        doc = self.info(exe, None, "info")
        want = self.ent.cmake.get("KITE_CUDA", "OFF").upper() in ("ON", "1", "TRUE", "YES")
        got = (doc.get("build") or {}).get("kite_cuda")
        cuda = doc.get("cuda") or {}
        facts = {"build": doc.get("build"), "available": cuda.get("available"), "reason": cuda.get("reason"),
                 "loaded_path": cuda.get("loaded_path")}
        if got is not want:
            return CheckResult("info", "FAIL", f"build.kite_cuda is {got!r}, CMake option says {want}", details=facts)
        if not want and cuda.get("compiled"):
            return CheckResult("info", "FAIL", "stub build reports cuda.compiled true", details=facts)
        b = doc.get("build") or {}
        return CheckResult("info", "PASS", f"{b.get('compiler')}, {b.get('os')}/{b.get('arch')}, kite_cuda {got}, "
                           f"available {cuda.get('available')}", details=facts)

    def check_selftest(self, exe: Path) -> CheckResult:
        from harness.process import closing_counts

        r = self.run(exe, ["selftest"], None, "selftest")
        counts = closing_counts(r.stdout)
        if counts is None:
            return CheckResult("selftest", "FAIL", f"no closing `N passed, M failed` line ({r.describe()})")
        n, m = counts
        if m or not r.ok or n == 0:
            fails = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")][:5]
            return CheckResult("selftest", "FAIL", f"{n} passed, {m} failed ({r.describe()})", details={"fails": fails})
        return CheckResult("selftest", "PASS", f"{n} passed, 0 failed", details={"passed": n})

    def dump_run(self, exe: Path, out: Path, env: dict[str, str] | None, log: str) -> dict[str, Any]:
        d = self.matrix.dump
        if out.exists():
            shutil.rmtree(out)
        args = ["run", "--model", self.path_arg(self.model()), "--prompt", ",".join(str(t) for t in d.prompt),
                "--steps", str(d.steps), "--dump", self.path_arg(out)]
        if d.threads:
            args += ["--threads", str(d.threads)]
        r = self.run(exe, args, env, log)
        if not r.ok:
            raise CheckFail(f"`kite run` ({log}) failed: {r.describe()}")
        files = {}
        for name, spec in self.cfg.dumps.items():
            f = out / spec.file
            if not f.exists():
                raise CheckFail(f"`kite run --dump` wrote no {spec.file}")
            files[name] = {"file": spec.file, "bytes": f.stat().st_size,
                           "sha256": file_sha256(f)}
        meta = {}
        mp = out / self.cfg.meta_file
        if mp.exists():
            try:
                meta = json.loads(mp.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raise CheckFail(f"{mp.name} is not JSON") from None
        return {"dir": str(out), "files": files, "meta": meta, "wall_s": r.wall_s}

    def check_dump(self, exe: Path, run: EntryRun) -> CheckResult:
        parts = []
        details: dict[str, Any] = {}
        for v in self.matrix.dump.variants:
            unmet = next((toolchains.probe(x).skip_reason() for x in v.requires if not toolchains.probe(x).found), None)
            if unmet:
                details[v.name] = {"skipped": unmet}
                parts.append(f"{v.name}: SKIP")
                continue
            out = self.broot / "dumps" / v.name
            res = self.dump_run(exe, out, v.env, f"dump-{v.name}")
            counters = (res["meta"].get("counters") or {})
            if "gpu" in v.requires and not (counters.get("gpu_steps") or counters.get("mrow_calls")):
                raise CheckFail(f"variant {v.name}: requires a GPU but meta.json counts no GPU step (vacuous)")
            self.dump_dirs[v.name] = out
            run.dumps[v.name] = {"files": res["files"], "shapes": res["meta"].get("shapes"),
                                 "backend_available": (res["meta"].get("backend") or {}).get("available"),
                                 "counters": counters, "wall_s": round(res["wall_s"], 3)}
            details[v.name] = {k: res[k] for k in ("files", "wall_s")}
            parts.append(f"{v.name}: {res['files'].get('logits', {}).get('sha256', '?')[:12]}")
        return CheckResult("dump", "PASS", "; ".join(parts), details=details)

    def compare_dirs(self, a: Path, b: Path, label_a: str, label_b: str) -> list[dict[str, Any]]:
        from harness.run.compare import compare_bytes

        rows = []
        for name, spec in self.cfg.dumps.items():
            d = compare_bytes((a / spec.file).read_bytes(), (b / spec.file).read_bytes())
            rows.append({"case": "", "a": label_a, "b": label_b, "dump": name, "identical": d.identical,
                         "differing": d.differing, "max_ulp": d.max_ulp, "max_abs": d.max_abs, "reason": d.reason})
        return rows

    def absent_dump(self, exe: Path) -> Path:
        """Dumps with the module absent (the engine alone in a folder), made once."""
        out = self.broot / "dumps" / "module-absent"
        if "module-absent" not in self.dump_dirs:
            lone = self.layout("engine-only", exe)
            self.dump_run(lone, out, None, "dump-module-absent")
            self.dump_dirs["module-absent"] = out
        return out

    def check_stub_equal(self, exe: Path) -> CheckResult:
        name = f"{self.ent.name}/stub"
        opts = {**self.ent.cmake, "KITE_CUDA": "OFF"}
        b = self.build_engine(name, opts, with_module=False)
        if not b.engine_ok:
            return CheckResult("stub-equal", "FAIL", f"stub build failed: {b.engine.reason}")
        stub_exe = Path(b.bin_dir) / self.cfg.binary
        sdir = self.broot / "dumps" / "stub"
        self.dump_run(stub_exe, sdir, None, "dump-stub")
        adir = self.absent_dump(exe)
        rows = self.compare_dirs(sdir, adir, "stub", "module-absent")
        bad = [r for r in rows if not r["identical"]]
        if bad:
            return CheckResult("stub-equal", "FAIL", "; ".join(f"{r['dump']}: {r['reason']}" for r in bad),
                               details={"comparisons": rows})
        return CheckResult("stub-equal", "PASS", "stub == module absent: " + ", ".join(r["dump"] for r in rows)
                           + " identical bytes", details={"comparisons": rows})

    def check_loader_fake(self, exe: Path, bin_dir: Path) -> CheckResult:
        fakes = self.fake_paths(bin_dir)
        missing = [str(p) for p in fakes.values() if not p.exists()]
        if missing:
            return CheckResult("loader-fake", "FAIL", f"test module(s) not built: {', '.join(missing)}")
        var = self.cfg.env_names.get("module_path", "KITE_CUDA_LIB")
        lone = self.layout("engine-only", exe)
        problems: list[str] = []
        facts: dict[str, Any] = {}
        # (a) explicit path
        doc = self.info(lone, {var: str(fakes["fake"])}, "info-fake-explicit")
        c = doc.get("cuda") or {}
        facts["explicit"] = {k: c.get(k) for k in ("loaded_path", "bound", "module_abi", "available", "init_status",
                                                    "reason")}
        if not c.get("bound"):
            problems.append(f"{var}: fake module not bound ({c.get('note') or c.get('reason')})")
        if c.get("available"):
            problems.append(f"{var}: fake module reported available")
        if c.get("module_abi") != c.get("engine_abi"):
            problems.append(f"{var}: module_abi {c.get('module_abi')} != engine_abi {c.get('engine_abi')}")
        # (b) exe_dir: the fake copied next to the engine under the module's file name
        beside = self.layout("exe-dir-fake", exe, {self.cfg.module: fakes["fake"]})
        doc = self.info(beside, None, "info-fake-exe-dir")
        c = doc.get("cuda") or {}
        steps = {s.get("how"): s.get("result") for s in c.get("search") or []}
        facts["exe_dir"] = {"search": c.get("search"), "bound": c.get("bound")}
        if not c.get("bound") or "loaded" not in str(steps.get("exe_dir", "")):
            problems.append(f"exe_dir: fake not found/bound beside the engine (search: {steps})")
        # (c) refusals: one export missing, other ABI version
        for kind, needle in (("noexport", "kcuda_step_m"), ("badabi", "abi")):
            doc = self.info(lone, {var: str(fakes[kind])}, f"info-{kind}")
            c = doc.get("cuda") or {}
            facts[kind] = {k: c.get(k) for k in ("bound", "module_abi", "available", "note", "reason")}
            text = f"{c.get('note', '')} {c.get('reason', '')}".lower()
            if c.get("bound"):
                problems.append(f"{kind}: module bound, must be refused whole")
            elif needle not in text:
                problems.append(f"{kind}: refused, but the note does not name {needle!r}: {text.strip()[:160]}")
        # (d) output with the fake bound == module absent
        if "dump" in self.ent.checks:
            fdir = self.broot / "dumps" / "fake-bound"
            self.dump_run(beside, fdir, None, "dump-fake-bound")
            rows = self.compare_dirs(self.absent_dump(exe), fdir, "module-absent", "fake-bound")
            facts["comparisons"] = rows
            for r in rows:
                if not r["identical"]:
                    problems.append(f"fake bound vs module absent, {r['dump']}: {r['reason']}")
        if problems:
            return CheckResult("loader-fake", "FAIL", "; ".join(problems), details=facts)
        return CheckResult("loader-fake", "PASS", "fake module bound via KITE_CUDA_LIB and exe_dir (no device); "
                           "noexport and badabi refused by name; output unchanged", details=facts)

    def check_embedded(self, module_path: Path) -> CheckResult:
        cuobj = toolchains.probe("cuobjdump")
        if cuobj.found:
            got = embedded_code(cuobj.path, module_path, self.logs)
            how = f"cuobjdump {cuobj.version}".strip()
        else:  # the fat binary read directly (same lists; cuobjdump is not in the pip nvcc)
            got = scan_fatbin(module_path.read_bytes())
            how = "fatbin headers read directly (" + cuobj.skip_reason() + ")"
        want = {"elf": sorted(self.ent.module.expect_elf or ()), "ptx": sorted(self.ent.module.expect_ptx or ())}
        details = {"got": got, "want": want, "module": str(module_path), "how": how}
        if got != want:
            return CheckResult("embedded-code", "FAIL", f"{how.split(' (')[0]}: SASS {got['elf']} / PTX {got['ptx']}, "
                               f"expected SASS {want['elf']} / PTX {want['ptx']}", details=details)
        return CheckResult("embedded-code", "PASS", f"SASS {got['elf']}, PTX {got['ptx']} as expected "
                           f"[{how.split(' (')[0]}]", details=details)

    def check_msvc(self) -> CheckResult:
        t = toolchains.probe_msvc()
        if not t.found:
            return CheckResult("msvc-discovery", "SKIP", t.skip_reason())
        nv = toolchains.probe("nvcc")
        ok, why = toolchains.msvc_supported_by_nvcc(t.details.get("tools_version", ""), nv.version)
        if not ok:
            return CheckResult("msvc-discovery", "FAIL", why, details=t.details)
        return CheckResult("msvc-discovery", "PASS", f"cl {t.version} at {t.path}", details={"path": t.path})

    # -- the whole entry -------------------------------------------------------------------

    def execute(self) -> EntryRun:
        t0 = time.perf_counter()
        ent = self.ent
        run = EntryRun(ent.name, "PASS", "")
        ok, why = availability(ent)
        if not ok:
            run.verdict, run.reason = "SKIP", why
            run.checks = [CheckResult(c, "SKIP", why) for c in ent.checks]
            run.seconds = time.perf_counter() - t0
            return run
        self.logs.mkdir(parents=True, exist_ok=True)
        self.say(f"matrix {ent.name}: build")
        tb = time.perf_counter()
        b = self.build_engine(ent.name, ent.cmake, with_module=ent.module.build)
        bin_dir = Path(b.bin_dir)
        exe = bin_dir / self.cfg.binary
        tm = None
        if ent.testmod:
            tm = self.build_testmod(bin_dir)
        run.build_seconds = time.perf_counter() - tb
        run.builds = {k: (v.to_json() if hasattr(v, "to_json") else v) for k, v in self.builds.items()}
        if tm is not None:
            run.builds["testmod"] = dataclasses.asdict(tm)
        if self.module_note:
            run.builds["module_note"] = self.module_note
        problems = []
        if ent.engine and not b.engine_ok:
            problems.append(f"engine build failed: {b.engine.reason}")
        if ent.module.build and b.module.status == "failed":
            problems.append(f"module build failed: {b.module.reason}")
        if tm is not None and tm.status == "failed":
            problems.append(f"test module build failed: {tm.reason}")
        for c in ent.checks:
            self.say(f"matrix {ent.name}: {c}")
            tc0 = time.perf_counter()
            try:
                if c in CHECKS_NEED_ENGINE and not b.engine_ok:
                    res = CheckResult(c, "FAIL", f"no engine: {b.engine.reason}")
                elif c == "info":
                    res = self.check_info(exe)
                elif c == "selftest":
                    res = self.check_selftest(exe)
                elif c == "dump":
                    res = self.check_dump(exe, run)
                elif c == "stub-equal":
                    res = self.check_stub_equal(exe)
                elif c == "loader-fake":
                    res = (self.check_loader_fake(exe, bin_dir) if tm is not None and tm.status in ("built", "up-to-date")
                           else CheckResult(c, "FAIL", "test module not built"))
                elif c == "embedded-code":
                    if b.module.status in ("built", "up-to-date"):
                        res = self.check_embedded(Path(b.module_path))
                    elif b.module.status == "skipped":
                        res = CheckResult(c, "SKIP", b.module.reason or "module not built")
                    else:
                        res = CheckResult(c, "FAIL", f"module build failed: {b.module.reason}")
                elif c == "msvc-discovery":
                    res = self.check_msvc()
                else:  # validated away
                    res = CheckResult(c, "FAIL", f"unknown check {c!r}")
            except (CheckFail, HarnessError) as ex:
                res = CheckResult(c, "FAIL", str(ex))
            except Exception as ex:  # noqa: BLE001 - one check's bug must not end the matrix
                res = CheckResult(c, "FAIL", f"internal error: {type(ex).__name__}: {ex}")
            res.seconds = time.perf_counter() - tc0
            run.checks.append(res)
            self.say(f"matrix {ent.name}: {c} {res.verdict} ({res.reason[:140]}) [{res.seconds:.1f} s]")
        fails = [c for c in run.checks if c.verdict == "FAIL"]
        if problems or fails:
            run.verdict = "FAIL"
            run.reason = "; ".join(problems + [f"{c.name}: {c.reason[:160]}" for c in fails])
        else:
            passed = sum(c.verdict == "PASS" for c in run.checks)
            skipped = sum(c.verdict == "SKIP" for c in run.checks)
            run.reason = f"{passed} checks passed" + (f", {skipped} skipped" if skipped else "")
            if self.module_note:
                run.reason += f"; {self.module_note}"
        run.seconds = time.perf_counter() - t0
        return run


class CheckFail(Exception):
    pass


def parse_cuobjdump_list(text: str) -> list[str]:
    """`ELF file    1: kite_cuda.1.sm_90.cubin` / `PTX file    1: x.1.sm_90.ptx` -> sorted sm_XX set."""
    found = set(re.findall(r"^(?:ELF|PTX) file\s+\d+:\s+\S*?\b(sm_\d+[a-z]?)\.(?:cubin|ptx)\s*$", text, re.M))
    return sorted(found, key=lambda s: int(re.sub(r"\D", "", s) or 0))


FATBIN_MAGIC = 0xBA55ED50


def scan_fatbin(data: bytes) -> dict[str, list[str]]:
    """SASS (ELF) and PTX architectures of every CUDA fat binary embedded in a shared object or
    DLL: the fatbin container header (magic 0xBA55ED50, version 1, header size 16, payload size)
    followed by entries {kind u16 (1 PTX, 2 ELF), version u16, header size u32, payload size u64,
    ..., arch u32 at offset 28}. The same sets as `cuobjdump --list-elf / --list-ptx`."""
    import struct

    found: dict[str, set[str]] = {"elf": set(), "ptx": set()}
    magic = struct.pack("<I", FATBIN_MAGIC)
    i = data.find(magic)
    while i >= 0:
        try:
            _, ver, hsize, fsize = struct.unpack_from("<IHHQ", data, i)
        except struct.error:
            break
        if ver == 1 and hsize == 16 and 0 < fsize <= len(data) - i - 16:
            p, end = i + hsize, i + hsize + fsize
            while p + 32 <= end:
                kind, _, ehs, size = struct.unpack_from("<HHIQ", data, p)
                arch, = struct.unpack_from("<I", data, p + 28)
                if ehs < 32 or kind not in (1, 2):
                    break
                found["ptx" if kind == 1 else "elf"].add(f"sm_{arch}")
                p += ehs + size
        i = data.find(magic, i + 4)
    return {k: sorted(v, key=lambda s: int(re.sub(r"\D", "", s) or 0)) for k, v in found.items()}


def embedded_code(cuobjdump: str, module: Path, logs: Path | None = None) -> dict[str, list[str]]:
    from harness.process import run_process

    out = {}
    for kind in ("elf", "ptx"):
        r = run_process([cuobjdump, f"--list-{kind}", str(module)], timeout=120,
                        log_prefix=(logs / f"cuobjdump-{kind}") if logs else None)
        text = r.stdout + r.stderr
        if not r.ok and "does not contain" not in text:
            raise CheckFail(f"cuobjdump --list-{kind} failed: {r.describe()}")
        out[kind] = parse_cuobjdump_list(r.stdout)
    return out


# ---------------------------------------------------------------------------------------------
# Cross-entry criteria

@dataclass
class DumpSource:
    """Where one entry's variant dumps are: a folder with the files, and/or their SHA-256."""
    entry: str
    variant: str
    dir: Path | None
    files: dict[str, dict[str, Any]]  # dump name -> {file, bytes, sha256}


def evaluate_cross(c: Cross, sources: dict[tuple[str, str], DumpSource], skipped: dict[str, str],
                   dump_files: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    """memcmp when both folders hold the files, else SHA-256 equality of the recorded digests
    (byte identity, as recorded by the entry's own run). First available entry = reference."""
    from harness.run.compare import compare_bytes

    for r in c.requires:
        t = toolchains.probe(r)
        have = any(k[1] == "gpu" for k in sources) if r == "gpu" else t.found
        if not have:
            return "SKIP", t.skip_reason() if r != "gpu" else "no GPU dumps in this run", {}
    avail = [(e, v) for e, v in c.entries if (e, v) in sources]
    missing = {f"{e}:{v}": skipped.get(e, "entry not run") for e, v in c.entries if (e, v) not in sources}
    details: dict[str, Any] = {"entries": [f"{e}:{v}" for e, v in c.entries], "missing": missing, "comparisons": []}
    if len(avail) < c.min_entries:
        return "SKIP", (f"only {len(avail)} of {len(c.entries)} entries produced dumps (need {c.min_entries}); "
                        + "; ".join(f"{k}: {v}" for k, v in missing.items())), details
    ref = sources[avail[0]]
    bad = []
    for key in avail[1:]:
        s = sources[key]
        for dname in c.dumps:
            fa, fb = ref.files.get(dname), s.files.get(dname)
            row = {"case": "", "a": f"{ref.entry}:{ref.variant}", "b": f"{s.entry}:{s.variant}", "dump": dname}
            fname = dump_files.get(dname, f"{dname}.f32")
            pa = ref.dir / fname if ref.dir else None
            pb = s.dir / fname if s.dir else None
            if pa is not None and pb is not None and pa.exists() and pb.exists():
                d = compare_bytes(pa.read_bytes(), pb.read_bytes())
                row.update(identical=d.identical, differing=d.differing, max_ulp=d.max_ulp, max_abs=d.max_abs,
                           reason=d.reason, how="memcmp")
            elif fa and fb:
                same = fa.get("sha256") == fb.get("sha256")
                row.update(identical=same, differing=0 if same else -1, max_ulp=0, max_abs=0.0, how="sha256",
                           reason="identical bytes (SHA-256)" if same else
                           f"SHA-256 differs ({fa.get('sha256', '')[:12]} vs {fb.get('sha256', '')[:12]}); "
                           "files not at hand for an element-wise account")
            else:
                row.update(identical=False, differing=-1, max_ulp=0, max_abs=0.0, how="none",
                           reason=f"dump {dname} missing")
            details["comparisons"].append(row)
            if not row["identical"]:
                bad.append(f"{row['a']} vs {row['b']} {dname}: {row['reason']}")
    n = len(avail)
    if bad:
        return "FAIL", "; ".join(bad)[:2000], details
    note = f" ({len(missing)} skipped: {', '.join(missing)})" if missing else ""
    return "PASS", f"{', '.join(f'{e}:{v}' for e, v in avail)}: {len(c.dumps)} dumps identical across {n}{note}", details


# ---------------------------------------------------------------------------------------------
# The matrix run: one report for the entries it ran, plus the cross criteria

def _result(rid: str, title: str, kind: str, digest: str, verdict: str, reason: str, seconds: float,
            details: dict[str, Any], file: str = "configs/matrix.yaml") -> Any:
    from harness.report.document import Result, utc_now

    return Result(id=rid, title=title, kind=kind, file=file, digest=digest, verdict=verdict, reason=reason,
                  registration="matrix", details=details, duration_s=round(seconds, 3), finished=utc_now())


def copy_dumps(report_dir: Path, run: EntryRun, dirs: dict[str, Path]) -> None:
    for var, d in dirs.items():
        if var not in run.dumps:
            continue
        dst = report_dir / "dumps" / run.entry / var
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(d, dst)
        run.dumps[var]["dir"] = str(dst.relative_to(report_dir))


def sources_from_doc(doc: dict[str, Any], report_dir: Path | None) -> tuple[dict[tuple[str, str], DumpSource], dict[str, str]]:
    """Dump sources and skip reasons recorded in one report.json's `matrix` section."""
    sources: dict[tuple[str, str], DumpSource] = {}
    skipped: dict[str, str] = {}
    for e in (doc.get("matrix") or {}).get("entries", []):
        if e.get("verdict") == "SKIP":
            skipped[e["entry"]] = e.get("reason", "")
        for var, info in (e.get("dumps") or {}).items():
            d = report_dir / info["dir"] if report_dir is not None and info.get("dir") else None
            sources[(e["entry"], var)] = DumpSource(e["entry"], var, d, info.get("files") or {})
    return sources, skipped


def add_cross_results(report: Any, matrix: Matrix, sources: dict[tuple[str, str], DumpSource],
                      skipped: dict[str, str], dump_files: dict[str, str], registry_path: Path | None = None,
                      exploratory: bool = False) -> None:
    """Evaluate the cross-entry criteria. With a registry, one that is not (or not as) registered
    FAILs, or runs labelled exploratory with --exploratory, exactly like a criteria file's."""
    from harness.spec import registry as REG

    entries = REG.load(registry_path) if registry_path is not None else None
    for c in matrix.cross.values():
        t0 = time.perf_counter()
        st = REG.status(entries, RegisteredCross(c.id, "", c.digest(), c.line)) if entries is not None else None
        refused = REG.refusal(st, exploratory, "run `harness register configs/matrix.yaml`") if st else None
        if refused:
            verdict, reason, details = "FAIL", refused, {}
        else:
            verdict, reason, details = evaluate_cross(c, sources, skipped, dump_files)
        r = _result(c.id, c.title, "equivalence", c.digest(), verdict, reason, time.perf_counter() - t0, details)
        if st is not None and not st.ok:
            r.exploratory = True
        report.add(r)


def resolve_model(cfg: Any, spec: str, override: str | None = None) -> Path:
    """The model file for the dump runs: an explicit path, else the recipe built by the model tools."""
    if override:
        p = Path(override)
        if not p.exists():
            raise HarnessError(f"model {p} not found")
        return p.resolve()
    if spec.endswith(".gguf"):
        p = Path(spec) if Path(spec).is_absolute() else Path(cfg.root) / spec
        if not p.exists():
            raise HarnessError(f"model {p} not found")
        return p
    # the model tools build the recipe once (models/<file>.gguf), as verify does
    try:
        from harness.models import ensure_model
    except ImportError as e:
        raise HarnessError(f"model generator not available (harness.models: {e}); pass --model FILE.gguf") from None
    try:
        return Path(ensure_model(spec, Path(cfg.root) / cfg.models_dir, None))
    except Exception as e:  # noqa: BLE001 - any generator failure fails the dump runs with its reason
        raise HarnessError(f"model {spec}: {type(e).__name__}: {e}") from None


def run_matrix(root: Path, names: list[str] | None, *, report_dir: Path | None = None, model: str | None = None,
               force: bool = False, matrix_path: Path | None = None, keep_going: bool = True,
               exploratory: bool = False, progress: Callable[[str], None] | None = None) -> tuple[int, Path]:
    """Run entries (all when names is empty), then the cross criteria. Returns (exit status, report dir):
    0 = nothing failed (SKIPs allowed), 1 = something failed."""
    from harness.spec.config import load_config
    from harness.report.document import Report, new_report_dir, point_latest

    say = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    cfg = load_config(root)
    matrix = load_matrix(matrix_path or root / "configs" / "matrix.yaml", root)
    entries = matrix.select(names)
    reports = root / cfg.reports_dir
    from harness.report import sysinfo

    git = sysinfo.git_state(root)
    if report_dir is None:
        report_dir = new_report_dir(reports, git.get("short"))
        point_latest(reports, report_dir)
    elif (report_dir / "report.json").exists():
        shutil.rmtree(report_dir)  # a fixed folder (reports/matrix/<entry>/): the previous run goes
    report_dir.mkdir(parents=True, exist_ok=True)
    rep = Report(report_dir)
    rep.doc["argv"] = sys.argv
    rep.doc["kind"] = "matrix"
    rep.doc["git"] = git
    try:
        rep.doc["system"] = sysinfo.system(root)
    except Exception:  # noqa: BLE001 - system facts are nice to have, never a reason to stop
        rep.doc["system"] = {}
    rep.doc["toolchains"] = {k: v.to_json() for k, v in toolchains.probe_all().items()}
    rep.doc["matrix"] = {"file": str(matrix.path.relative_to(root)) if matrix.path.is_relative_to(root) else str(matrix.path),
                         "selected": [e.name for e in entries], "entries": []}
    model_cache: dict[str, Path] = {}

    def model_path() -> Path:
        if "m" not in model_cache:
            model_cache["m"] = resolve_model(cfg, matrix.dump.model, model)
        return model_cache["m"]

    t_all = time.perf_counter()
    failed = False
    for ent in entries:
        runner = EntryRunner(cfg, matrix, ent, report_dir, model_path, say, force)
        try:
            run = runner.execute()
        except HarnessError as ex:
            run = EntryRun(ent.name, "FAIL", str(ex))
        copy_dumps(report_dir, run, runner.dump_dirs)
        t_crit = time.perf_counter()
        crit_results = []
        for crit in ent.criteria:
            if run.verdict == "SKIP":
                crit_results.append(_result(f"{ent.name}/{crit}", f"{ent.name}: {crit}", "criteria", ent.digest(),
                                            "SKIP", run.reason, 0.0, {}))
                continue
            crit_results += run_criteria(cfg, runner, crit, report_dir, exploratory)
        crit_s = time.perf_counter() - t_crit
        total = run.seconds + crit_s
        run_doc = run.to_json()
        run_doc["criteria_seconds"] = round(crit_s, 3)
        run_doc["total_seconds"] = round(total, 3)
        rep.doc["matrix"]["entries"].append(run_doc)
        rep.add(_result(ent.name, f"matrix entry {ent.name}: {ent.description}", "matrix-entry", ent.digest(),
                        run.verdict, f"{run.reason} (wall {total:.1f} s: build {run.build_seconds:.1f} s, checks "
                        f"{run.seconds - run.build_seconds:.1f} s, criteria {crit_s:.1f} s)",
                        total, {"build_seconds": round(run.build_seconds, 3), "checks_seconds":
                                round(run.seconds - run.build_seconds, 3), "criteria_seconds": round(crit_s, 3),
                                "builds": run.builds}))
        for c in run.checks:
            rep.add(_result(f"{ent.name}/{c.name}", f"{ent.name}: {c.name}", "matrix", ent.digest(), c.verdict,
                            c.reason, c.seconds, c.details))
        for r in crit_results:
            rep.add(r)
        say(f"matrix {ent.name}: {run.verdict} in {total:.1f} s (build {run.build_seconds:.1f} s, criteria "
            f"{crit_s:.1f} s): {run.reason[:200]}")
        failed |= run.verdict == "FAIL"
        rep.write()
        if failed and not keep_going:
            break
    # cross criteria: here when this run holds enough of their entries, else in `harness merge`
    sources, skipped = sources_from_doc(rep.doc, report_dir)
    selected = {e.name for e in entries}
    cross = {k: c for k, c in matrix.cross.items() if sum(e in selected for e, _ in c.entries) >= c.min_entries}
    add_cross_results(rep, dataclasses.replace(matrix, cross=cross), sources, skipped,
                      {n: s.file for n, s in cfg.dumps.items()},
                      Path(cfg.root) / "regressions" / "registry.lock", exploratory)
    rep.doc["matrix"]["wall_s"] = round(time.perf_counter() - t_all, 3)
    summ = rep.summarize()
    rep.write(final=True, status="complete")
    failed = summ.get("failed", 0) > 0
    say(f"matrix: {summ['passed']} passed, {summ['failed']} failed, {summ['skipped']} skipped "
        f"in {rep.doc['matrix']['wall_s']:.1f} s; report {report_dir}")
    return (1 if failed else 0), report_dir


def run_criteria(cfg: Any, runner: EntryRunner, crit_ref: str, report_dir: Path, exploratory: bool = False) -> list[Any]:
    """Registered criteria against this entry's build, through harness/run/runner.py: the criteria's
    `default` build is the entry's, `stub` is build/<entry>/stub."""
    file, _, cid = crit_ref.partition("#")
    ent = runner.ent
    from harness.spec import registry
    from harness.run import runner as R
    from harness.spec import schema
    from harness.run.probes import Probes

    path = Path(cfg.root) / file
    if not path.exists():
        return [_result(f"{ent.name}/{crit_ref}", crit_ref, "criteria", ent.digest(), "FAIL",
                        f"{file} does not exist", 0.0, {})]
    builds = {"default": ent.name, "stub": f"{ent.name}/stub"}
    crits = schema.load_file(path, Path(cfg.root), list(cfg.builds), list(cfg.dumps))
    if cid:
        crits = [c for c in crits if c.id == cid]
        if not crits:
            return [_result(f"{ent.name}/{crit_ref}", crit_ref, "criteria", ent.digest(), "FAIL",
                            f"{file} has no criterion {cid}", 0.0, {})]

    def ensure(name: str) -> Any:
        if name not in builds:  # another build of configs/engine.yaml: as verify builds it
            from harness.build.cmake import build

            if name not in runner.builds:
                runner.builds[name] = build(runner.cfg0, name, progress=runner.say)
            return runner.builds[name]
        target = builds[name]
        if target in runner.builds:
            return runner.builds[target]
        if name == "stub":
            return runner.build_engine(target, {**ent.cmake, "KITE_CUDA": "OFF"}, with_module=False)
        return runner.build_engine(target, ent.cmake, with_module=ent.module.build)

    def model_path(spec: Any) -> Path:
        return runner.model()

    def gpu_info() -> dict[str, Any] | None:
        b = runner.builds.get(ent.name)
        if b is None or not b.engine_ok:
            return None
        try:
            return runner.info(Path(b.bin_dir) / runner.cfg.binary, None, "info-probe")
        except CheckFail as ex:
            return {"error": str(ex)}

    probes = Probes(gpu_info)
    if ent.runner == "wine":
        probes.overrides["linux"] = (False, "runs under wine")
    ctx = R.Context(cfg=runner.cfg, report_dir=report_dir / "criteria" / ent.name, probes=probes,
                    ensure_build=ensure, model_path=model_path)
    reg = registry.load(Path(cfg.root) / "regressions" / "registry.lock")
    out = []
    for c in crits:
        t0 = time.perf_counter()
        st = registry.status(reg, c)
        if ent.runner == "wine":
            o = R.Outcome("SKIP", "registered criteria run natively; under wine only the matrix checks run")
        elif refused := registry.refusal(st, exploratory, "run `harness register`, or `matrix --exploratory`"):
            o = R.Outcome("FAIL", refused)
        else:
            o = R.evaluate(ctx, c)
        r = _result(f"{ent.name}/{c.id}", f"{ent.name}: {c.title}", c.kind, getattr(c, "digest", ""),
                    o.verdict, o.reason, time.perf_counter() - t0, o.details, file=file)
        r.registration = st.state
        r.exploratory = not st.ok
        out.append(r)
    return out


# ---------------------------------------------------------------------------------------------
# Command line: python -m harness matrix [--list [--json]] [ENTRY...]

def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m harness matrix",
                                 description="Build and check the entries of configs/matrix.yaml.")
    ap.add_argument("entries", nargs="*", help="entries to run (default: all)")
    ap.add_argument("--list", action="store_true", help="list the entries and whether this host can run them")
    ap.add_argument("--json", action="store_true", help="with --list: JSON")
    ap.add_argument("--check", action="store_true", help="validate configs/matrix.yaml and exit")
    ap.add_argument("--matrix", type=Path, help="another matrix file")
    ap.add_argument("--model", help="model file for the dump runs (default: the matrix's recipe)")
    ap.add_argument("--report-dir", type=Path, help="write the report here (default reports/<time>-<sha>/)")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    ap.add_argument("--stop", action="store_true", help="stop after the first failed entry")
    ap.add_argument("--merge-into", type=Path,
                    help="then merge every report beside --report-dir (one per entry) into this folder")
    ap.add_argument("--exploratory", action="store_true",
                    help="run criteria that are not (or not as) registered, labelled exploratory")
    a = ap.parse_args(argv)
    root = root or Path(__file__).resolve().parents[2]
    try:
        matrix = load_matrix(a.matrix or root / "configs" / "matrix.yaml", root)
        if a.check:
            print(f"{matrix.path}: {len(matrix.entries)} entries, {len(matrix.cross)} cross criteria: valid")
            return 0
        if a.list:
            rows = []
            for ent in matrix.select(a.entries or None):
                ok, why = availability(ent)
                rows.append({**entry_summary(ent), "runnable": ok, "skip_reason": why})
            if a.json:
                print(json.dumps(rows, indent=2))
            else:
                for r in rows:
                    print(f"{r['name']:18} {'ok  ' if r['runnable'] else 'SKIP'} {r['description']}"
                          + ("" if r["runnable"] else f"\n{'':23}{r['skip_reason']}"))
            return 0
        if a.merge_into and not a.report_dir:
            raise HarnessError("--merge-into needs --report-dir (e.g. reports/matrix/<entry>)")
        rc, rdir = run_matrix(root, a.entries or None, report_dir=a.report_dir, model=a.model, force=a.force,
                              matrix_path=a.matrix, keep_going=not a.stop, exploratory=a.exploratory)
        if a.merge_into:
            # every report beside this one (reports/matrix/<entry>/: the latest run of each entry)
            from harness.report.merge import merge

            dirs = sorted(p.parent for p in rdir.parent.glob("*/report.json") if p.parent != a.merge_into.resolve())
            mrc, _ = merge(dirs, a.merge_into, root=root, matrix_path=a.matrix,
                           say=lambda s: print(s, file=sys.stderr, flush=True))
            rc = max(rc, mrc)
        return rc
    except HarnessError as ex:
        print(f"kite matrix: {ex}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
