"""Validation of criteria files (regressions/*.yaml) into Criterion objects.

Every problem is reported as `FILE:LINE: PATH: message` naming the key and what is allowed;
all problems of a file are collected before giving up (SchemaErrors, exit status 2).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from harness.errors import SchemaErrors
from harness.contract import criteria as C
from harness.contract.digest import criterion_digest
from harness.contract import inputs
from harness.contract.validate import ENV_NAME_RE, NAME_RE, Validator, parse, read_text, rel_path, type_name
from harness.contract.yamlsrc import Located

ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
# Bounds far above any real A/B run (30 pairs, 2000 resamples), below what would run for days or
# exhaust memory: the bootstrap holds resamples x pairs indices and values at once.
MAX_PAIRS = 10_000
MAX_RESAMPLES = 1_000_000
MAX_BOOTSTRAP_CELLS = 20_000_000

TOP_KEYS = {"version": False, "description": False, "definitions": False, "criteria": True}
COMMON = {"id": True, "title": True, "kind": True, "requires": False, "description": False,
          "model": False, "timeout_s": False, "cases": False}
VARIANT_KEYS = {"name": False, "build": False, "layout": False, "place": False, "env": False,
                "args": False, "extra_args": False, "preconditions": False, "wrapper": False, "program": False}
PROGRAM_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")  # a file name in the build's bin/, nothing more
KIND_KEYS: dict[str, dict[str, bool]] = {
    "equivalence": {"build": False, "env": False, "args": False, "variants": True, "compare": True},
    "ab_timing": {"build": False, "env": False, "args": False, "a": True, "b": False, "same_run": False,
                  "pairs": True, "warmups": False, "order": False, "metric": False, "metric_a": False,
                  "metric_b": False, "ratio": False, "pass_if": True, "confidence": False,
                  "bootstrap": False, "noise_floor": False, "interval": False},
    "run": {"build": False, "env": False, "args": False, "runs": True},
    "artifact": {"build": False, "files": True},
    "compare": {"build": False, "env": False, "args": True, "dumps": False, "bytes": False, "metric": False,
                "margin": True, "budget": True, "block": False, "warmups": False, "noise_floor": False,
                "preconditions": False, "tail": False},
}
COMPARE_BUDGET_KEYS = {"pairs": True, "seconds": False}
EXPECT_KEYS = {"exit": False, "passes_min": False, "must_match": False, "must_not_match": False,
               "json": False}
COMPARE_KEYS = {"dumps": True, "mode": False, "max_abs": False, "max_ulp": False, "nmse": False,
                "allow_nan": False}
FILE_KEYS = {"path": True, "exists": False, "needed_match": False, "needed_not_match": False,
             "symbols_not_match": False, "undefined_not_match": False, "exports_exactly": False,
             "exports_match": False, "text_match": False, "text_not_match": False}


class _V(Validator):
    """A criteria file's validator: knows the builds, dumps and env names of configs/engine.yaml."""

    def __init__(self, file: str, loc: Located, builds: list[str], dumps: list[str],
                 env_names: list[str] | None = None):
        self.ids: dict[int, str] = {}
        super().__init__(file, loc)
        self.builds = builds
        self.dumps = dumps
        self.env_names = list(env_names or [])

    def fmt(self, path: tuple) -> str:
        out = ""
        for i, p in enumerate(path):
            if isinstance(p, int):
                out += f"[{p}]"
                if i == 1 and path[0] == "criteria" and p in self.ids:
                    out += f" ({self.ids[p]})"
            else:
                out += ("." if out else "") + str(p)
        return out or "(top level)"

    def argv(self, path: tuple, v: Any, names: set[str]) -> list[str] | None:
        if isinstance(v, str):
            self.err(path, "must be an argv list (YAML list of strings); a shell command string is not allowed")
            return None
        out = self.strlist(path, v, "list of argv strings")
        if out is not None:
            for i, a in enumerate(out):
                self.placeholders(path + (i,), a, names)
                self.inside_work(path + (i,), a)
        return out

    def inside_work(self, path: tuple, text: str) -> None:
        for seg in C.work_segments(text):
            if C.climbs_out_of_work(seg):
                self.err(path, f"{seg!r} climbs out of {{work}}: a path built from {{work}} must stay inside it")

    def placeholders(self, path: tuple, text: str, names: set[str]) -> None:
        for p in C.placeholders_in(text):
            if p not in names:
                allowed = ", ".join("{" + n + "}" for n in sorted(names))
                self.err(path, f"unknown placeholder {{{p}}}; allowed: {allowed}")

    def env(self, path: tuple, v: Any, names: set[str]) -> dict[str, str] | None:
        if not isinstance(v, dict):
            self.err(path, f"must be a mapping of variable -> value, not {type_name(v)}")
            return None
        out = {}
        for k, x in v.items():
            if isinstance(k, str) and C.ENV_KEY_RE.match(k):
                self.placeholders(path + (k,), k, names)
            elif not isinstance(k, str) or not ENV_NAME_RE.match(k):
                self.err(path + (k,), f"{k!r} is not a valid environment variable name")
                continue
            if isinstance(x, bool) or x is None or not isinstance(x, (str, int, float)):
                self.err(path + (k,), f"value must be a string or number (quote it: \"0\"), not {type_name(x)}")
                continue
            out[k] = str(x)
            self.placeholders(path + (k,), out[k], names)
            self.inside_work(path + (k,), out[k])
        return out

    def expectations(self, path: tuple, v: Any) -> dict[str, Any] | None:
        if not isinstance(v, dict):
            self.err(path, f"must be a mapping of dotted field -> expectation, not {type_name(v)}")
            return None
        ok = True
        for k, x in v.items():
            if not isinstance(k, str) or not re.match(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$", k):
                self.err(path + (k,), f"{k!r} is not a dotted field path like counters.graph_replays")
                ok = False
                continue
            msg = C.expectation_error(x)
            if msg:
                self.err(path + (k,), msg)
                ok = False
        return dict(v) if ok else None



# ---------------------------------------------------------------------------------------------

def load_file(path: Path, root: Path, builds: list[str], dumps: list[str],
              env_names: list[str] | None = None) -> list[C.Criterion]:
    """Parse and validate one criteria file; raises SchemaErrors."""
    rel = rel_path(path, root)
    return load_text(read_text(path, rel, "cannot read: no such file", max_bytes=inputs.MAX_CRITERIA), rel, builds,
                     dumps, env_names, in_repository=_inside(path, root))


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def load_text(text: str, rel: str, builds: list[str], dumps: list[str],
              env_names: list[str] | None = None, in_repository: bool = True) -> list[C.Criterion]:
    v = _V(rel, parse(text, rel), builds, dumps, env_names)
    doc = v.loc.value
    out: list[C.Criterion] = []
    if doc is None:
        v.err((), "empty file; expected a mapping with `criteria:`")
    elif v.keys((), doc, TOP_KEYS, "a criteria file"):
        if "version" in doc and doc["version"] != 1:
            v.err(("version",), f"{doc['version']!r} is not allowed; allowed: 1")
        crit = doc.get("criteria")
        if "criteria" in doc and not isinstance(crit, list):
            v.err(("criteria",), f"must be a list of criteria, not {type_name(crit)}")
        elif isinstance(crit, list):
            if not crit:
                v.err(("criteria",), "is empty; a criteria file holds at least one criterion")
            for i, c in enumerate(crit):
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    v.ids[i] = c["id"]
            seen: dict[str, int] = {}
            for i, c in enumerate(crit):
                obj = _criterion(v, ("criteria", i), c, rel)
                if obj is None:
                    continue
                if not in_repository:
                    obj = dataclasses.replace(obj, in_repository=False)
                if obj.id in seen:
                    v.err(("criteria", i, "id"), f"duplicate id {obj.id!r} (first at line {seen[obj.id]})")
                    continue
                seen[obj.id] = obj.line
                out.append(obj)
    v.raise_errors()
    return out


def _criterion(v: _V, path: tuple, c: Any, rel: str) -> C.Criterion | None:
    if not isinstance(c, dict):
        v.err(path, f"a criterion must be a mapping, not {type_name(c)}")
        return None
    n0 = len(v.errors)
    kind = c.get("kind")
    if "kind" not in c:
        v.err(path, f"missing required key 'kind'; allowed: {', '.join(C.KINDS)}")
        allowed = dict(COMMON)
    elif kind not in C.KINDS:
        v.enum(path + ("kind",), kind, C.KINDS)
        allowed = dict(COMMON)
        for kk in KIND_KEYS.values():
            allowed.update({k: False for k in kk})
    else:
        allowed = {**COMMON, **KIND_KEYS[kind]}
    v.keys(path, c, allowed, f"{'an' if kind in ('equivalence', 'ab_timing', 'artifact') else 'a'} {kind} "
           f"{'workload' if kind == 'compare' else 'criterion'}"
           if kind in C.KINDS else "a criterion")
    cid = v.str_(path + ("id",), c["id"], ID_RE, "use a letter then letters, digits, '_', '.', '-'") \
        if "id" in c else None
    title = v.title(path + ("title",), c["title"]) if "title" in c else None
    if "description" in c and not isinstance(c["description"], str):
        v.err(path + ("description",), f"must be a string, not {type_name(c['description'])}")
    requires: list[str] = []
    if "requires" in c:
        r = v.strlist(path + ("requires",), c["requires"])
        for i, x in enumerate(r or []):
            if v.enum(path + ("requires", i), x, C.REQUIREMENTS):
                requires.append(x)
    model = None
    if "model" in c:
        model = _model(v, path + ("model",), c["model"])
    timeout = v.timeout(path + ("timeout_s",), c["timeout_s"]) if "timeout_s" in c else None
    cases: list[dict[str, str]] = []
    case_keys: set[str] = set()
    if "cases" in c:
        if kind in ("ab_timing", "compare"):
            v.err(path + ("cases",), f"`cases` is not supported for {kind} (each case has its own threshold): "
                  "write one criterion per case")
        else:
            cases, case_keys = _cases(v, path + ("cases",), c["cases"])
    names = set(C.PLACEHOLDERS) | case_keys | {C.ENV_PREFIX + n for n in v.env_names}
    spec: C.Spec | None = None
    if kind in C.KINDS:
        spec = {"equivalence": _equivalence, "ab_timing": _ab, "run": _run, "artifact": _artifact,
                "compare": _compare_workload}[kind](
            v, path, c, names)
    if len(v.errors) > n0 or spec is None or cid is None or title is None:
        return None
    return C.Criterion(id=cid, title=title, kind=kind, file=rel, line=v.loc.line(path + ("id",)),
                       digest=criterion_digest(c), raw=c, spec=spec, requires=requires, model=model,
                       timeout_s=timeout, cases=cases, description=c.get("description", ""))


def _model(v: _V, path: tuple, m: Any) -> dict[str, Any] | None:
    """A recipe name (configs/models/<name>.yaml), a GGUF path (relative to the repository root),
    or {recipe, qtype} / {path}."""
    if isinstance(m, str) and m:
        if m == "default":
            return None
        if m.endswith(".gguf") or "/" in m:
            return {"path": m}
        return {"recipe": m, "qtype": None}
    if isinstance(m, dict) and "path" in m:
        if v.keys(path, m, {"path": True}, "model"):
            p = v.str_(path + ("path",), m["path"])
            return {"path": p} if p else None
        return None
    if isinstance(m, dict):
        if v.keys(path, m, {"recipe": True, "qtype": False}, "model"):
            r = v.str_(path + ("recipe",), m.get("recipe")) if "recipe" in m else None
            q = v.str_(path + ("qtype",), m["qtype"]) if "qtype" in m else None
            if r:
                return {"recipe": r, "qtype": q}
        return None
    v.err(path, f"must be a recipe name, a .gguf path, {{recipe: ..., qtype: ...}} or {{path: ...}}, "
                f"not {type_name(m)}")
    return None


def _cases(v: _V, path: tuple, cs: Any) -> tuple[list[dict[str, str]], set[str]]:
    if not isinstance(cs, list) or not cs:
        v.err(path, "must be a non-empty list of mappings (placeholder -> value)")
        return [], set()
    out: list[dict[str, str]] = []
    keys: set[str] | None = None
    for i, case in enumerate(cs):
        if not isinstance(case, dict) or not case:
            v.err(path + (i,), f"a case must be a non-empty mapping, not {type_name(case)}")
            continue
        for k, x in case.items():
            if not isinstance(k, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                v.err(path + (i, k), f"{k!r} is not a valid placeholder name")
            elif k in C.PLACEHOLDERS:
                v.err(path + (i, k), f"{k!r} is a built-in placeholder and cannot be a case key")
            if isinstance(x, bool) or not isinstance(x, (str, int, float)):
                v.err(path + (i, k), f"case value must be a string or number, not {type_name(x)}")
        if keys is None:
            keys = set(case)
        elif set(case) != keys:
            v.err(path + (i,), f"every case must have the same keys: {', '.join(sorted(map(str, keys)))}")
        out.append({str(k): str(x) for k, x in case.items()})
    return out, keys or set()


def _variant(v: _V, path: tuple, m: Any, crit: dict[str, Any], names: set[str], default_name: str | None,
             what: str = "a variant") -> C.Variant | None:
    if not isinstance(m, dict):
        v.err(path, f"{what} must be a mapping, not {type_name(m)}")
        return None
    n0 = len(v.errors)
    v.keys(path, m, {**VARIANT_KEYS, "name": default_name is None}, what)
    name = v.str_(path + ("name",), m["name"], NAME_RE, "letters, digits, '_', '.', '-'") \
        if "name" in m else default_name
    build = m.get("build", crit.get("build", "default"))
    bpath = path + ("build",) if "build" in m else path[:2] + ("build",)
    if not isinstance(build, str) or build not in v.builds:
        v.err(bpath, f"unknown build {build!r}; builds defined in configs/engine.yaml: {', '.join(v.builds)}")
    layout = v.enum(path + ("layout",), m["layout"], C.LAYOUTS) if "layout" in m else "normal"
    place: dict[str, str] = {}
    if "place" in m:
        if layout != "engine_only":
            v.err(path + ("place",), "`place` needs `layout: engine_only` (files are copied next to a copied engine)")
        elif isinstance(m["place"], dict):
            for k, src in m["place"].items():
                if not isinstance(k, str) or "/" in k or "\\" in k or k in ("", ".", ".."):
                    v.err(path + ("place", k), f"{k!r} must be a plain file name")
                elif not isinstance(src, str):
                    v.err(path + ("place", k), f"source must be a path string, not {type_name(src)}")
                else:
                    v.placeholders(path + ("place", k), src, names)
                    place[k] = src
        else:
            v.err(path + ("place",), f"must be a mapping of file name -> source path, not {type_name(m['place'])}")
    env = dict(v.env(path[:2] + ("env",), crit["env"], names) or {}) if "env" in crit else {}
    if "env" in m:
        env.update(v.env(path + ("env",), m["env"], names) or {})
    if "args" in m:
        args = v.argv(path + ("args",), m["args"], names) or []
    elif "args" in crit:
        args = list(v.argv(path[:2] + ("args",), crit["args"], names) or [])
    else:
        args = []
    if "extra_args" in m:
        args = args + (v.argv(path + ("extra_args",), m["extra_args"], names) or [])
    pre = v.expectations(path + ("preconditions",), m["preconditions"]) if "preconditions" in m else {}
    wrapper = (v.argv(path + ("wrapper",), m["wrapper"], names) or []) if "wrapper" in m else []
    program = ""
    if "program" in m:
        program = v.str_(path + ("program",), m["program"], PROGRAM_RE, "a file name in the build's bin folder") or ""
        if crit.get("kind") not in ("ab_timing", "run"):
            v.err(path + ("program",), "`program` is for `ab_timing` and `run` (it writes no dumps)")
        elif layout != "normal":
            v.err(path + ("program",), "`program` runs from the build's bin folder: it needs `layout: normal`")
    if len(v.errors) > n0 or name is None or layout is None:
        return None
    return C.Variant(name=name, build=build, layout=layout, place=place, env=env, args=args,
                     preconditions=pre or {}, wrapper=wrapper, program=program)


def _equivalence(v: _V, path: tuple, c: dict[str, Any], names: set[str]) -> C.EquivalenceSpec | None:
    vs = c.get("variants")
    variants: list[C.Variant] = []
    if "variants" in c:
        if not isinstance(vs, list) or len(vs) < 2:
            v.err(path + ("variants",), "must be a list of at least 2 variants (each compared with the first)")
        else:
            for i, m in enumerate(vs):
                x = _variant(v, path + ("variants", i), m, c, names, None)
                if x:
                    if any(y.name == x.name for y in variants):
                        v.err(path + ("variants", i, "name"), f"duplicate variant name {x.name!r}")
                    variants.append(x)
            for i, x in enumerate(variants):
                if not x.args:
                    v.err(path + ("variants", i), "no `args`: give the engine argv at the criterion or variant level")
                    break
    cmp_ = None
    if "compare" in c:
        cmp_ = _compare(v, path + ("compare",), c["compare"])
    if variants and cmp_ and len(variants) == len(vs):
        return C.EquivalenceSpec(variants, cmp_)
    return None


def _compare(v: _V, path: tuple, m: Any) -> C.Compare | None:
    if not v.keys(path, m, COMPARE_KEYS, "compare"):
        return None
    n0 = len(v.errors)
    dumps = v.strlist(path + ("dumps",), m["dumps"]) if "dumps" in m else None
    for i, d in enumerate(dumps or []):
        if d not in v.dumps:
            v.err(path + ("dumps", i),
                  f"unknown dump {d!r}; dumps defined in configs/engine.yaml: {', '.join(v.dumps)}")
    if dumps is not None and not dumps:
        v.err(path + ("dumps",), "names no dump")
    mode = v.enum(path + ("mode",), m["mode"], C.COMPARE_MODES) if "mode" in m else "memcmp"
    max_abs = v.num(path + ("max_abs",), m["max_abs"], 0) if "max_abs" in m else None
    max_ulp = v.int_(path + ("max_ulp",), m["max_ulp"], 0) if "max_ulp" in m else None
    nmse = v.num(path + ("nmse",), m["nmse"], 0) if "nmse" in m else None
    allow_nan = v.bool_(path + ("allow_nan",), m["allow_nan"]) if "allow_nan" in m else False
    tol_keys = [k for k in ("max_abs", "max_ulp", "nmse") if k in m]
    if mode == "memcmp" and tol_keys:
        v.err(path + (tol_keys[0],), f"{tol_keys[0]} is a tolerance; it needs `mode: tolerance` (memcmp is exact)")
    if mode == "tolerance" and not tol_keys:
        v.err(path + ("mode",), "tolerance mode needs at least one of max_abs, max_ulp, nmse")
    if len(v.errors) > n0 or dumps is None or mode is None:
        return None
    return C.Compare(dumps, mode, max_abs, max_ulp, nmse, bool(allow_nan))


def _metric(v: _V, path: tuple, m: Any) -> C.Metric | None:
    if isinstance(m, str):
        m = {"field": m}
    if not v.keys(path, m, {"field": True, "reduce": False, "scale": False}, "metric"):
        return None
    f = v.str_(path + ("field",), m.get("field"), re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"),
               "a dotted field of meta.json like timings.request_ms") if "field" in m else None
    r = v.enum(path + ("reduce",), m["reduce"], C.REDUCERS) if "reduce" in m else "median"
    scale = v.num(path + ("scale",), m["scale"], 0, None, open_lo=True) if "scale" in m else 1.0
    return C.Metric(f, r, float(scale)) if f and r and scale is not None else None


def _ab(v: _V, path: tuple, c: dict[str, Any], names: set[str]) -> C.ABSpec | None:
    n0 = len(v.errors)
    same_run = v.bool_(path + ("same_run",), c["same_run"]) if "same_run" in c else False
    a = _variant(v, path + ("a",), c["a"], c, names, "A", "variant a") if "a" in c else None
    b = None
    if same_run:
        if "b" in c:
            v.err(path + ("b",), "`same_run: true` reads A and B from one run of `a`; remove `b`")
        if "metric_a" not in c or "metric_b" not in c:
            v.err(path + ("same_run",), "`same_run: true` needs `metric_a` and `metric_b`")
    elif "b" not in c:
        v.err(path, "missing required key 'b' (or set `same_run: true`)")
    else:
        b = _variant(v, path + ("b",), c["b"], c, names, "B", "variant b")
    if a and b and a.name == b.name:
        v.err(path + ("b",), f"variants a and b have the same name {a.name!r}")
    for side, var in (("a", a), ("b", b)):
        if var is not None and not var.args:
            v.err(path + (side,), "no `args`: give the engine argv at the criterion or variant level")
    pairs = v.int_(path + ("pairs",), c["pairs"], 2, MAX_PAIRS) if "pairs" in c else None
    warmups = v.int_(path + ("warmups",), c["warmups"], 0, MAX_PAIRS) if "warmups" in c else 1
    order = v.enum(path + ("order",), c["order"], C.ORDERS) if "order" in c else "ABBA"
    metric = _metric(v, path + ("metric",), c["metric"]) if "metric" in c else C.Metric("timings.request_ms")
    ma = _metric(v, path + ("metric_a",), c["metric_a"]) if "metric_a" in c else metric
    mb = _metric(v, path + ("metric_b",), c["metric_b"]) if "metric_b" in c else metric
    ratio = v.enum(path + ("ratio",), c["ratio"], C.RATIOS) if "ratio" in c else "a/b"
    pm = None
    if "pass_if" in c:
        pi = c["pass_if"]
        pm = C.PASS_IF_RE.match(pi) if isinstance(pi, str) else None
        if not pm:
            v.err(path + ("pass_if",), f"{pi!r} is not allowed; write `<stat> <op> <number>` with stat one of "
                  f"{', '.join(C.PASS_STATS)} and op one of >=, <=, >, <, e.g. \"ci_lower >= 1.05\"")
    conf = v.num(path + ("confidence",), c["confidence"], 0.5, 0.999) if "confidence" in c else 0.95
    resamples, seed = 2000, 12345
    if "bootstrap" in c:
        bs = c["bootstrap"]
        if v.keys(path + ("bootstrap",), bs, {"resamples": False, "seed": False}, "bootstrap"):
            if "resamples" in bs:
                resamples = v.int_(path + ("bootstrap", "resamples"), bs["resamples"], 100, MAX_RESAMPLES) \
                    or resamples
            if "seed" in bs:
                seed = v.int_(path + ("bootstrap", "seed"), bs["seed"], 0, 2**63 - 1) or 0
    if pairs is not None and resamples * pairs > MAX_BOOTSTRAP_CELLS:
        v.err(path + ("bootstrap", "resamples"), f"resamples x pairs is {resamples * pairs}, more than "
              f"{MAX_BOOTSTRAP_CELLS} (the bootstrap holds them all in memory)")
    noise = v.bool_(path + ("noise_floor",), c["noise_floor"]) if "noise_floor" in c else False
    interval = v.enum(path + ("interval",), c["interval"], C.INTERVALS) if "interval" in c else "percentile"
    if len(v.errors) > n0 or interval is None or a is None or pairs is None or pm is None or None in (warmups, order, ma, mb, ratio,
                                                                                 conf):
        return None
    return C.ABSpec(a=a, b=b, same_run=bool(same_run), pairs=pairs, warmups=warmups, order=order, metric_a=ma,
                    metric_b=mb, ratio=ratio, pass_stat=pm.group(1), pass_op=pm.group(2),
                    pass_value=float(pm.group(3)), confidence=conf, resamples=resamples, seed=seed,
                    noise_floor=bool(noise), interval=interval)


def _compare_workload(v: _V, path: tuple, c: dict[str, Any], names: set[str]) -> C.CompareSpec | None:
    """`kind: compare`: a workload of `harness compare BASE HEAD` (docs/COMPARE.md)."""
    n0 = len(v.errors)
    var = _variant(v, path, {k: c[k] for k in ("preconditions",) if k in c}, c, names, "run", "a workload")
    dumps = v.strlist(path + ("dumps",), c["dumps"]) if "dumps" in c else []
    for i, d in enumerate(dumps or []):
        if d not in v.dumps:
            v.err(path + ("dumps", i), f"unknown dump {d!r}; dumps in configs/engine.yaml: {', '.join(v.dumps)}")
    if dumps is not None and len(set(dumps)) != len(dumps):
        v.err(path + ("dumps",), "names a dump twice")
    within: tuple[tuple[str, float], ...] = ()
    if isinstance(c.get("bytes"), dict):
        how, within = _within(v, path + ("bytes",), c["bytes"])
        if how and not dumps:
            v.err(path + ("bytes",), "`bytes: {within: ...}` needs `dumps` (the dumps it bounds)")
    else:
        how = v.enum(path + ("bytes",), c["bytes"], C.BYTES) if "bytes" in c else "same"
    if how == "same" and not dumps:
        v.err(path + ("bytes",), "`bytes: same` needs `dumps` (the dumps that must stay byte-identical)")
    metric = _metric(v, path + ("metric",), c["metric"]) if "metric" in c else C.Metric("timings.request_ms")
    margin = v.num(path + ("margin",), c["margin"], 0.001, 0.5) if "margin" in c else None
    pairs, seconds = None, None
    bud = c.get("budget")
    if "budget" in c and v.keys(path + ("budget",), bud, COMPARE_BUDGET_KEYS, "budget"):
        pairs = v.int_(path + ("budget", "pairs"), bud["pairs"], 4, MAX_PAIRS) if "pairs" in bud else None
        if "seconds" in bud:
            seconds = v.num(path + ("budget", "seconds"), bud["seconds"], 1.0, 86400.0)
    block = v.int_(path + ("block",), c["block"], 2, 64) if "block" in c else 4
    if block is not None and block % 2:
        v.err(path + ("block",), f"{block} is odd; a block holds whole ABBA rounds (an even number of pairs)")
    elif block is not None and pairs is not None and block > pairs:
        v.err(path + ("block",), f"{block} pairs a block is more than the budget of {pairs} pairs")
    warmups = v.int_(path + ("warmups",), c["warmups"], 0, 100) if "warmups" in c else 1
    floor = v.int_(path + ("noise_floor",), c["noise_floor"], 0, MAX_PAIRS) if "noise_floor" in c else 0
    tail = v.num(path + ("tail",), c["tail"], 0.5, 0.99) if "tail" in c else None
    if var is not None and not var.args:
        v.err(path + ("args",), "no `args`: give the engine argv")
    if (len(v.errors) > n0 or var is None or dumps is None or how is None or metric is None or margin is None
            or pairs is None or block is None or warmups is None or floor is None):
        return None
    if "tail" in c and tail is None:
        return None
    return C.CompareSpec(variant=var, dumps=list(dumps), bytes=how, metric=metric, margin=float(margin),
                         budget_pairs=pairs, budget_seconds=seconds, block=block, warmups=warmups, noise_floor=floor,
                         tail=float(tail) if tail is not None else None, within=within)


def _within(v: _V, path: tuple, m: dict[str, Any]) -> tuple[str | None, tuple[tuple[str, float], ...]]:
    """`{within: {nmse: 1e-10, max_ulp: 4, max_abs: 1e-6}}`: bytes may differ inside these bounds
    (at least one); ("within", the bounds), or (None, ()) after an error."""
    if not v.keys(path, m, {"within": True}, "bytes (same, may-change, or {within: {nmse, max_ulp, max_abs}})"):
        return None, ()
    w = m.get("within")
    if not v.keys(path + ("within",), w, C.WITHIN, "a tolerance"):
        return None, ()
    if not w:
        v.err(path + ("within",), "names no bound: give nmse, max_ulp or max_abs")
        return None, ()
    got = {"nmse": v.num(path + ("within", "nmse"), w["nmse"], 0.0, 1.0) if "nmse" in w else None,
           "max_ulp": v.int_(path + ("within", "max_ulp"), w["max_ulp"], 0) if "max_ulp" in w else None,
           "max_abs": v.num(path + ("within", "max_abs"), w["max_abs"], 0.0) if "max_abs" in w else None}
    if any(got[k] is None for k in C.WITHIN if k in w) or any(k not in C.WITHIN for k in w):
        return None, ()
    return "within", tuple((k, float(x)) for k, x in sorted(got.items()) if x is not None)


def _run(v: _V, path: tuple, c: dict[str, Any], names: set[str]) -> C.RunSpec | None:
    rs = c.get("runs")
    if "runs" not in c:
        return None
    if not isinstance(rs, list) or not rs:
        v.err(path + ("runs",), "must be a non-empty list of runs")
        return None
    steps: list[C.RunStep] = []
    n0 = len(v.errors)
    for i, m in enumerate(rs):
        p = path + ("runs", i)
        if not isinstance(m, dict):
            v.err(p, f"a run must be a mapping, not {type_name(m)}")
            continue
        vm = {k: x for k, x in m.items() if k != "expect"}
        var = _variant(v, p, vm, c, names, f"run{i + 1}", "a run")
        ex = _expect(v, p + ("expect",), m.get("expect", {}))
        if var is not None and not var.args:
            v.err(p, "no `args`: give the engine argv (e.g. [info, --json]) at the criterion or run level")
        if var and ex:
            if any(s.variant.name == var.name for s in steps):
                v.err(p + ("name",), f"duplicate run name {var.name!r}")
            steps.append(C.RunStep(var, ex))
    return C.RunSpec(steps) if len(v.errors) == n0 else None


def _expect(v: _V, path: tuple, m: Any) -> C.Expect | None:
    if not v.keys(path, m, EXPECT_KEYS, "expect"):
        return None
    n0 = len(v.errors)
    ex = m.get("exit", 0)
    if ex is not None and "exit" in m:
        ex = v.int_(path + ("exit",), ex)
    pm = v.int_(path + ("passes_min",), m["passes_min"], 0) if "passes_min" in m else None
    mm = v.regexes(path + ("must_match",), m["must_match"]) if "must_match" in m else []
    mn = v.regexes(path + ("must_not_match",), m["must_not_match"]) if "must_not_match" in m else []
    js = v.expectations(path + ("json",), m["json"]) if "json" in m else {}
    if len(v.errors) > n0:
        return None
    return C.Expect(exit=ex, passes_min=pm, must_match=mm or [], must_not_match=mn or [], json=js or {})


def _artifact(v: _V, path: tuple, c: dict[str, Any], names: set[str]) -> C.ArtifactSpec | None:
    build = c.get("build", "default")
    if not isinstance(build, str) or build not in v.builds:
        v.err(path + ("build",),
              f"unknown build {build!r}; builds defined in configs/engine.yaml: {', '.join(v.builds)}")
        return None
    fs = c.get("files")
    if "files" not in c:
        return None
    if not isinstance(fs, list) or not fs:
        v.err(path + ("files",), "must be a non-empty list of file checks")
        return None
    out: list[C.FileCheck] = []
    n0 = len(v.errors)
    for i, m in enumerate(fs):
        p = path + ("files", i)
        if not v.keys(p, m, FILE_KEYS, "a file check"):
            continue
        fpath = v.str_(p + ("path",), m.get("path")) if "path" in m else None
        if fpath:
            v.placeholders(p + ("path",), fpath, names)
        lists: dict[str, list[str]] = {}
        for k in ("needed_match", "needed_not_match", "symbols_not_match", "undefined_not_match", "text_match",
                  "text_not_match"):
            if k in m:
                lists[k] = v.regexes(p + (k,), m[k]) or []
        exact = v.strlist(p + ("exports_exactly",), m["exports_exactly"]) if "exports_exactly" in m else None
        em = None
        if "exports_match" in m:
            r = v.regexes(p + ("exports_match",), [m["exports_match"]] if isinstance(m["exports_match"], str)
                          else m["exports_match"])
            em = r[0] if r is not None and len(r) == 1 else None
            if r is not None and len(r) != 1:
                v.err(p + ("exports_match",), "must be one regular expression")
        exists = v.bool_(p + ("exists",), m["exists"]) if "exists" in m else True
        if fpath and exists is not None:
            out.append(C.FileCheck(path=fpath, exists=exists, exports_exactly=exact, exports_match=em, **lists))
    return C.ArtifactSpec(build, out) if len(v.errors) == n0 else None


def load_many(files: list[Path], root: Path, builds: list[str], dumps: list[str],
              env_names: list[str] | None = None) -> list[C.Criterion]:
    """Load several files; ids must be unique across all of them."""
    errors: list[str] = []
    out: list[C.Criterion] = []
    seen: dict[str, C.Criterion] = {}
    for f in files:
        try:
            crits = load_file(f, root, builds, dumps, env_names)
        except SchemaErrors as e:
            errors.extend(e.messages)
            continue
        for c in crits:
            if c.id in seen:
                o = seen[c.id]
                errors.append(f"{c.file}:{c.line}: id {c.id!r} is already used at {o.file}:{o.line}")
                continue
            seen[c.id] = c
            out.append(c)
    if errors:
        raise SchemaErrors(errors)
    return out

