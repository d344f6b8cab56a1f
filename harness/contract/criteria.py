"""Criteria as dataclasses, plus the two small languages they use: placeholders in argv/env
(`{bin}`, `{model}`, ...) and value expectations on JSON fields (`">0"`, `true`, `"~regex"`)."""

from __future__ import annotations

import math
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

KINDS = ("equivalence", "ab_timing", "run", "artifact", "compare")
BYTES = ("same", "may-change")  # a compare workload's dumps: must stay identical, or may change
WITHIN = {"nmse": False, "max_ulp": False, "max_abs": False}  # or `bytes: {within: {...}}`: a tolerance
REQUIREMENTS = ("gpu", "no_gpu", "nvcc", "module_cc", "host_cc", "host_cxx", "cmake", "clang", "mingw", "wine", "valgrind",
                "linux", "windows", "x86_64")
LAYOUTS = ("normal", "engine_only")
COMPARE_MODES = ("memcmp", "tolerance")
ORDERS = ("ABBA", "AB")
REDUCERS = ("median", "mean", "min", "max", "first", "last", "sum", "rest_median")
RATIOS = ("a/b", "b/a")
PASS_STATS = ("ci_lower", "ci_upper", "median")
# A/B confidence interval of the median ratio: percentile bootstrap (the default), BCa bootstrap, or
# the distribution-free order-statistic interval (docs/CRITERIA.md, "How far to trust a timing
# verdict", gives their measured coverage)
INTERVALS = ("percentile", "bca", "order")
# Placeholders the harness resolves (case keys add their own).
PLACEHOLDERS = ("bin", "module", "testmods", "model", "nonexistent", "engine", "engine_dir", "work",
                "build", "root")
PATH_PLACEHOLDERS = frozenset(PLACEHOLDERS)  # every built-in names a path; case values do not
ENV_PREFIX = "env."  # `{env.graph}`: the engine's variable of that role, named in engine.yaml

_PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{((?:env\.)?[A-Za-z_][A-Za-z0-9_]*)\}")
ENV_KEY_RE = re.compile(r"^\{env\.[A-Za-z_][A-Za-z0-9_]*\}$")  # an env key that is a role
_CMP_RE = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
PASS_IF_RE = re.compile(r"^\s*(ci_lower|ci_upper|median)\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class Variant:
    name: str
    build: str = "default"
    layout: str = "normal"
    place: dict[str, str] = field(default_factory=dict)  # name in the engine folder -> source path
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    preconditions: dict[str, Any] = field(default_factory=dict)
    wrapper: list[str] = field(default_factory=list)  # argv prefix, e.g. [valgrind, --error-exitcode=99]
    program: str = ""  # a program of the build's bin/ run instead of the engine (e.g. llama-bench)


@dataclass(frozen=True)
class Expect:
    exit: int | None = 0
    passes_min: int | None = None  # closing "N passed, M failed": M == 0 and N >= passes_min
    must_match: list[str] = field(default_factory=list)
    must_not_match: list[str] = field(default_factory=list)
    json: dict[str, Any] = field(default_factory=dict)  # stdout JSON: dotted path -> expectation


@dataclass(frozen=True)
class RunStep:
    variant: Variant
    expect: Expect


@dataclass(frozen=True)
class Compare:
    dumps: list[str]
    mode: str = "memcmp"
    max_abs: float | None = None
    max_ulp: int | None = None
    nmse: float | None = None
    allow_nan: bool = False


@dataclass(frozen=True)
class Metric:
    field: str
    reduce: str = "median"
    scale: float = 1.0  # the reduced value times this: another program's unit into the engine's (ns -> ms)


@dataclass(frozen=True)
class EquivalenceSpec:
    variants: list[Variant]
    compare: Compare


@dataclass(frozen=True)
class ABSpec:
    a: Variant
    b: Variant | None  # None when same_run
    same_run: bool
    pairs: int
    warmups: int
    order: str
    metric_a: Metric
    metric_b: Metric
    ratio: str
    pass_stat: str
    pass_op: str
    pass_value: float
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 12345
    noise_floor: bool = False
    interval: str = "percentile"

    @property
    def pass_if(self) -> str:
        return f"{self.pass_stat} {self.pass_op} {self.pass_value:g}"


@dataclass(frozen=True)
class RunSpec:
    steps: list[RunStep]


@dataclass(frozen=True)
class FileCheck:
    path: str
    exists: bool = True
    needed_match: list[str] = field(default_factory=list)
    needed_not_match: list[str] = field(default_factory=list)
    symbols_not_match: list[str] = field(default_factory=list)
    undefined_not_match: list[str] = field(default_factory=list)
    exports_exactly: list[str] | None = None
    exports_match: str | None = None
    text_match: list[str] = field(default_factory=list)
    text_not_match: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ArtifactSpec:
    build: str
    files: list[FileCheck]


@dataclass(frozen=True)
class CompareSpec:
    """A workload of `harness compare`: one engine invocation run on a base and a head build."""
    variant: Variant
    dumps: list[str]
    bytes: str  # same | may-change | within (a registered tolerance)
    metric: Metric
    margin: float  # relative: 0.02 = 2 %
    budget_pairs: int
    budget_seconds: float | None
    block: int  # pairs between two looks at the interval
    warmups: int
    noise_floor: int  # A/A pairs of the base against itself (0: none)
    tail: float | None = None  # a quantile (0.9: p90) whose tail is judged too (sequential.Tail)
    within: tuple[tuple[str, float], ...] = ()  # bytes "within": the tolerance (nmse, max_ulp, max_abs)


Spec = EquivalenceSpec | ABSpec | RunSpec | ArtifactSpec | CompareSpec


@dataclass(frozen=True)
class Criterion:
    id: str
    title: str
    kind: str
    file: str  # relative to the repository root
    line: int
    digest: str
    raw: dict[str, Any]
    spec: Spec
    requires: list[str] = field(default_factory=list)
    model: dict[str, Any] | None = None  # {"recipe": ..., "qtype": ...}; None: the default model
    timeout_s: float | None = None
    cases: list[dict[str, str]] = field(default_factory=list)
    description: str = ""
    in_repository: bool = True  # False: its file lies outside the repository (see trusted_code)

    def variants(self) -> list[Variant]:
        """Every engine invocation's variant (none for artifact criteria)."""
        s = self.spec
        if isinstance(s, EquivalenceSpec):
            return list(s.variants)
        if isinstance(s, ABSpec):
            return [s.a] + ([s.b] if s.b else [])
        if isinstance(s, RunSpec):
            return [st.variant for st in s.steps]
        if isinstance(s, CompareSpec):
            return [s.variant]
        return []

    def runs_foreign_code(self) -> bool:
        """`wrapper` runs any command and `place` copies any readable file next to the engine."""
        return any(v.wrapper or v.place for v in self.variants())

    def builds(self) -> list[str]:
        s = self.spec
        if isinstance(s, EquivalenceSpec):
            names = [v.build for v in s.variants]
        elif isinstance(s, ABSpec):
            names = [s.a.build] + ([s.b.build] if s.b else [])
        elif isinstance(s, RunSpec):
            names = [st.variant.build for st in s.steps]
        elif isinstance(s, CompareSpec):
            names = [s.variant.build]
        else:
            names = [s.build]
        return list(dict.fromkeys(names))


# ---- placeholders -------------------------------------------------------------------------

def placeholders_in(text: str) -> list[str]:
    return [m.group(1) for m in _PLACEHOLDER_RE.finditer(text) if m.group(1)]


def substitute(text: str, values: dict[str, str]) -> str:
    """Replace {name}; `{{` and `}}` give literal braces. Unknown names raise KeyError."""

    def rep(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        return str(values[m.group(1)])

    return _PLACEHOLDER_RE.sub(rep, text)


# A path built from {work} runs from the placeholder up to one of these (or the end of the text).
_PATH_END_RE = re.compile(r"[\s,;=]|:(?![\\/])")


def work_segments(text: str) -> list[str]:
    """The parts of an argument (or environment value) that are paths built from {work}."""
    out = []
    for m in _PLACEHOLDER_RE.finditer(text):
        if m.group(1) == "work":
            end = _PATH_END_RE.search(text, m.end())
            out.append(text[m.start():end.start() if end else len(text)])
    return out


def climbs_out_of_work(segment: str) -> bool:
    """Statically: does the template `{work}/..` leave {work} (other placeholders as plain names)?"""
    text = _PLACEHOLDER_RE.sub(lambda m: "/W" if m.group(1) == "work" else "p", segment).replace("\\", "/")
    norm = posixpath.normpath(text)
    return not (norm == "/W" or norm.startswith("/W/"))


def outside_work(text: str, values: dict[str, str]) -> str | None:
    """After substitution: the first path built from {work} that resolves outside it (symbolic
    links followed), or None."""
    work = os.path.realpath(values["work"])
    for seg in work_segments(text):
        path = os.path.realpath(substitute(seg, values))
        if os.path.commonpath([work, path]) != work:
            return path
    return None


# ---- dotted paths and expectations --------------------------------------------------------

_MISSING = object()


def lookup(doc: Any, dotted: str) -> Any:
    """`counters.graph_replays`, `backend.search.0.result`; returns _MISSING when absent."""
    cur = doc
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and re.fullmatch(r"-?\d+", part) and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def regex_error(pattern: str) -> str | None:
    """Why a regular expression does not compile (re.error, or a repetition count too large for
    the engine: OverflowError), or None."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        return f"bad regular expression {pattern!r}: {e}"
    return None


def expectation_error(expected: Any) -> str | None:
    """Validate one expectation; returns a message or None."""
    if isinstance(expected, str):
        if expected.startswith("~"):
            bad = regex_error(expected[1:])
            if bad:
                return bad
        elif expected.strip()[:1] in ("<", ">", "=", "!") and not _CMP_RE.match(expected):
            return (f"bad comparison {expected!r}; write an operator (==, !=, >=, <=, >, <) and a number, "
                    "e.g. \">0\"")
        return None
    if expected is None or isinstance(expected, (bool, int, float)):
        return None
    return f"expectation must be a scalar (true, 3, \">0\", \"~regex\", \"text\"), not {type(expected).__name__}"


def check_expectation(doc: Any, dotted: str, expected: Any) -> str | None:
    """None when the field meets the expectation, else a one-line reason."""
    actual = lookup(doc, dotted)
    if actual is _MISSING:
        return f"{dotted}: field missing"
    if isinstance(expected, str):
        if expected.startswith("~"):
            if re.search(expected[1:], "" if actual is None else str(actual)):
                return None
            return f"{dotted} = {_short(actual)} does not match /{expected[1:]}/"
        m = _CMP_RE.match(expected)
        if m:
            op, num = m.group(1), float(m.group(2))
            if isinstance(actual, bool) or not isinstance(actual, (int, float)):
                return f"{dotted} = {_short(actual)} is not a number (wanted {expected.strip()})"
            ok = {"==": actual == num, "!=": actual != num, ">=": actual >= num, "<=": actual <= num,
                  ">": actual > num, "<": actual < num}[op]
            return None if ok else f"{dotted} = {_short(actual)}, wanted {expected.strip()}"
    if isinstance(expected, bool) or expected is None:
        ok = actual is expected
    elif isinstance(expected, (int, float)) and not isinstance(actual, bool) and isinstance(actual, (int, float)):
        ok = actual == expected or (math.isnan(expected) and math.isnan(actual))
    else:
        ok = actual == expected
    return None if ok else f"{dotted} = {_short(actual)}, wanted {_short(expected)}"


def _short(v: Any) -> str:
    import json

    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 80 else s[:77] + "..."
