"""Evaluating one criterion of each kind. Everything a criterion needs comes through Context."""

from __future__ import annotations

import errno
import re
import shutil
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from harness import confined
from harness.errors import HarnessError
from harness.contract import criteria as C
from harness.contract import inputs
from harness.run import timing
from harness.builder.binfmt import BinaryFormatError, read_binary
from harness.builder.cmake import BuildResult
from harness.run import dumps
from harness.contract.config import Config, DumpSpec
from harness.process import KEEP_WHOLE, ProcResult, closing_counts, run_process
from harness.run.probes import Probes


class CriterionFail(Exception):
    """Ends the criterion with FAIL and this reason."""

    def __init__(self, reason: str, details: dict[str, Any] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.details = details or {}


# a full disk (or quota): no verdict on the engine, and one that a later `--resume` must not keep
DISK_FULL = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)


class RunStopped(HarnessError):
    """The run cannot go on (the disk is full): the criterion gets no verdict, so that `verify
    --resume` runs it again once there is room; raised through evaluate() to the caller."""


FULL_BELOW = 1024 * 1024  # free bytes under which a write error without an errno is a full disk


def stop_if_disk_full(e: BaseException, what: str, folder: Path | None = None) -> None:
    """Raise RunStopped for an OSError of a full disk, naming what could not be written: ENOSPC or
    EDQUOT, or a write error with no errno at all (numpy's "N requested and 0 written") while the
    folder it wrote in has less than FULL_BELOW bytes free."""
    if not isinstance(e, OSError):
        return
    full = e.errno in DISK_FULL
    if not full and e.errno is None and folder is not None:
        try:
            full = shutil.disk_usage(folder).free < FULL_BELOW
        except OSError:
            full = False
    if full:
        where = f" ({e.filename})" if e.filename else ""
        raise RunStopped(f"{what}: {e.strerror or e}{where}") from None


@dataclass
class Outcome:
    verdict: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Launcher:
    """How the engine is started when it is not a native program (e.g. a Windows build under
    wine): an argv prefix, and how a path on this machine looks to the engine."""
    prefix: list[str]
    path: Callable[[str], str]


NATIVE = Launcher([], str)


@dataclass
class Context:
    cfg: Config
    report_dir: Path
    probes: Probes
    ensure_build: Callable[[str], BuildResult]
    model_path: Callable[[dict[str, Any] | None], Path]
    progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)
    launcher: Launcher = NATIVE
    base_env: dict[str, str] = field(default_factory=dict)  # under every variant's own env


# ---- preparing one engine invocation -----------------------------------------------------------

@dataclass
class Prepared:
    argv: list[str]
    env: dict[str, str]
    work: Path
    engine: Path


def pattern_problems(text: str, must: list[str], must_not: list[str], what: str) -> list[str]:
    """Regexes (multi-line) that must / must not occur in text, as one problem line each."""
    out = [f"{what} lacks /{pat}/" for pat in must if not re.search(pat, text, re.M)]
    for pat in must_not:
        m = re.search(pat, text, re.M)
        if m:
            # the whole line that matched: `^FAIL ` alone would hide which claim failed and by how much
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start:end if end >= 0 else len(text)].strip()
            out.append(f"{what} has /{pat}/: {line[:160]!r}")
    return out


def _values(ctx: Context, crit: C.Criterion, var: C.Variant, work: Path, case: dict[str, str],
            need_model: bool) -> dict[str, str]:
    b = ctx.ensure_build(var.build)
    if not b.engine_ok:
        raise CriterionFail(f"build {var.build!r} failed: {b.engine.reason}"
                            + (f" (log: {b.engine.log})" if b.engine.log else ""))
    bin_dir = Path(b.bin_dir)
    # {build}: the folder the build was made in (bin/'s parent), whatever name the criterion gives it
    build_dir = ctx.cfg.build_root(var.build) if b.engine.status == "prebuilt" else bin_dir.parent
    vals = {"bin": str(bin_dir), "module": str(bin_dir / ctx.cfg.module_for(var.build)),
            "testmods": str(bin_dir / ctx.cfg.testmods_dir), "build": str(build_dir),
            "root": str(ctx.cfg.root), "work": str(work), "nonexistent": str(work / "nonexistent" / "no-such-file"),
            "engine": str(bin_dir / ctx.cfg.binary_for(var.build)), "engine_dir": str(bin_dir), **env_values(ctx.cfg),
            **case}
    if need_model:
        vals["model"] = str(ctx.model_path(crit.model))
    return vals


def env_values(cfg: Config) -> dict[str, str]:
    """`{env.graph}` -> the engine's own variable name, from engine.yaml's `engine.env`."""
    return {f"env.{k}": v for k, v in cfg.env_names.items()}


def _uses(var: C.Variant, name: str) -> bool:
    texts = list(var.args) + list(var.env.values()) + list(var.place.values()) + list(var.wrapper)
    return any(name in C.placeholders_in(t) for t in texts)


def _inside(ctx: Context, path: Path) -> tuple[Path, Path]:
    """(root, path relative to it) for confined's link-refusing writes and removals: the report
    folder, or for a path outside it (`harness run`'s own folder) the path's parent."""
    try:
        return ctx.report_dir, path.relative_to(ctx.report_dir)
    except ValueError:
        return path.parent, Path(path.name)


def prepare(ctx: Context, crit: C.Criterion, var: C.Variant, work: Path, case: dict[str, str]) -> Prepared:
    confined.makedirs(*_inside(ctx, work))
    vals = _values(ctx, crit, var, work, case, _uses(var, "model"))
    engine = Path(vals["engine"])
    if var.program:  # another program of the same build (llama-bench beside the llama.cpp adapter)
        suffix = ".exe" if engine.name.endswith(".exe") else ""
        engine = Path(vals["bin"]) / (var.program + suffix)
        if not engine.is_file():
            raise CriterionFail(f"variant {var.name}: program {engine} not found (build {var.build!r} makes it?)")
    if var.layout == "engine_only":
        edir = work / "engine"
        confined.rmtree(*_inside(ctx, edir))
        confined.makedirs(*_inside(ctx, edir))  # fresh and link-free: the copies below land in it
        if not engine.exists():
            raise CriterionFail(f"variant {var.name}: engine {engine} not found")
        shutil.copy2(engine, edir / engine.name)
        for name, src in var.place.items():
            s = Path(C.substitute(src, vals))
            if not s.exists():
                raise CriterionFail(f"variant {var.name}: `place` source {s} not found")
            shutil.copy2(s, edir / name)
        engine = edir / engine.name
        vals["engine"], vals["engine_dir"] = str(engine), str(edir)
    for text in var.wrapper + var.args + list(var.env.values()):
        out = C.outside_work(text, vals)
        if out is not None:
            raise CriterionFail(f"variant {var.name}: {text!r} resolves to {out}, outside its work folder "
                                f"{vals['work']}: a path built from {{work}} must stay inside it")
    # what the engine reads (argv, env) names paths as the engine sees them
    seen = {k: ctx.launcher.path(v) if k in C.PATH_PLACEHOLDERS else v for k, v in vals.items()}
    argv = ([C.substitute(a, seen) for a in var.wrapper] + ctx.launcher.prefix + [str(engine)]
            + [C.substitute(a, seen) for a in var.args])
    env = {**ctx.base_env, **{C.substitute(k, seen): C.substitute(v, seen) for k, v in var.env.items()}}
    return Prepared(argv, env, work, engine)


def _run(ctx: Context, crit: C.Criterion, p: Prepared, extra: list[str], log_name: str) -> ProcResult:
    timeout = crit.timeout_s or ctx.cfg.timeout("run", 180)
    return run_process(p.argv + extra, p.env, timeout=timeout, log_prefix=ctx.report_dir / "logs" / crit.id / log_name)


def _precond_failures(doc: Any, pre: dict[str, Any]) -> list[str]:
    return [m for k, x in pre.items() if (m := C.check_expectation(doc, k, x))]


# ---- equivalence ----------------------------------------------------------------------------

def _shape(meta: Any, dotted: str, variant: str, runs: list[dict[str, Any]]) -> list[int] | None:
    """A dump's shape from meta.json (the shared reader's rule): None when absent; a malformed one
    ends the criterion."""
    try:
        return dumps.shape(meta, dotted)
    except dumps.DumpRefused as e:
        raise CriterionFail(f"variant {variant}: {e}", {"runs": runs}) from None


def _dump(folder: Path, ds: DumpSpec, shape: list[int] | None, where: str, runs: list[dict[str, Any]]) -> dumps.Dump:
    """One dump, found and checked unread by the shared reader (harness/run/dumps.py)."""
    try:
        return dumps.locate(folder, ds.file, ds.dtype, shape)
    except FileNotFoundError:
        raise CriterionFail(f"{where}: dump {ds.file} missing", {"runs": runs}) from None
    except dumps.DumpRefused as e:
        raise CriterionFail(dumps.refusal(where, e), {"runs": runs}) from None


def run_equivalence(ctx: Context, crit: C.Criterion, work: Path) -> Outcome:
    spec: C.EquivalenceSpec = crit.spec  # type: ignore[assignment]
    cmp_ = spec.compare
    comparisons: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    cases = crit.cases or [{}]
    failures: list[str] = []
    for ci, case in enumerate(cases):
        tag = ",".join(f"{k}={v}" for k, v in case.items())
        loaded: list[tuple[C.Variant, dict[str, dumps.Dump]]] = []
        for var in spec.variants:
            vdir = work / (f"case{ci}" if crit.cases else "") / var.name
            p = prepare(ctx, crit, var, vdir, case)
            dump = vdir / "dump"
            confined.rmtree(*_inside(ctx, dump))
            name = f"{var.name}" + (f".case{ci}" if crit.cases else "")
            r = _run(ctx, crit, p, [ctx.cfg.dump_flag, ctx.launcher.path(str(dump))], name)
            runs.append({"variant": var.name, "case": tag, **r.to_json()})
            where = f"variant {var.name}" + (f" [{tag}]" if tag else "")
            if not r.ok:
                raise CriterionFail(f"{where}: engine {r.describe()}", {"runs": runs})
            try:
                meta = inputs.json_loads(inputs.decode_text(
                    inputs.read_inside(dump, ctx.cfg.meta_file, inputs.MAX_META), ctx.cfg.meta_file))
            except FileNotFoundError:
                raise CriterionFail(f"{where}: {ctx.cfg.meta_file} missing from the dump folder",
                                    {"runs": runs}) from None
            except inputs.FileRefused as e:
                raise CriterionFail(f"{where}: {e}", {"runs": runs}) from None
            except ValueError as e:  # not JSON, or not UTF-8
                raise CriterionFail(f"{where}: {ctx.cfg.meta_file} is not valid JSON ({e})", {"runs": runs}) from None
            bad = _precond_failures(meta, var.preconditions)
            if bad:
                raise CriterionFail(f"vacuous: {where}: precondition failed: " + "; ".join(bad), {"runs": runs})
            data = {}
            for dname in cmp_.dumps:
                ds = ctx.cfg.dumps[dname]
                data[dname] = _dump(dump, ds, _shape(meta, ds.shape, var.name, runs), where, runs)
            loaded.append((var, data))
        base_var, base_data = loaded[0]
        for var, data in loaded[1:]:
            for dname in cmp_.dumps:
                try:
                    d = dumps.compare(base_data[dname], data[dname], mode=cmp_.mode, max_abs=cmp_.max_abs,
                                      max_ulp=cmp_.max_ulp, nmse=cmp_.nmse, allow_nan=cmp_.allow_nan)
                except dumps.DumpRefused as e:
                    raise CriterionFail(f"{var.name}: {e}", {"runs": runs}) from None
                comparisons.append({"case": tag, "a": base_var.name, "b": var.name, "dump": dname, **d.to_json()})
                if not d.ok:
                    failures.append(f"{var.name} vs {base_var.name}" + (f" [{tag}]" if tag else "")
                                    + f", {dname}: {d.reason}")
    details = {"comparisons": comparisons, "runs": runs}
    if failures:
        return Outcome("FAIL", failures[0] + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""), details)
    n = len(comparisons)
    what = "identical bytes" if cmp_.mode == "memcmp" else "within tolerance"
    return Outcome("PASS", f"{n} comparison{'s' if n != 1 else ''}: {what}", details)


# ---- A/B timing -----------------------------------------------------------------------------

def _timed_run(ctx: Context, crit: C.Criterion, p: Prepared, var: C.Variant, label: str) -> tuple[dict[str, Any],
                                                                                                   ProcResult]:
    # the engine's JSON flag; a `program` is asked for JSON by its own args
    extra = [] if var.program or ctx.cfg.json_flag in p.argv else [ctx.cfg.json_flag]
    r = _run(ctx, crit, p, extra, label)
    if not r.ok:
        raise CriterionFail(f"{label}: engine {r.describe()}")
    if not r.stdout_whole:
        raise CriterionFail(f"{label}: stdout is {r.stdout_bytes} bytes, too large to be the JSON meta object "
                            f"(at most {KEEP_WHOLE} bytes are read; the whole output is in the log)")
    try:
        meta = inputs.json_loads(r.stdout)
    except ValueError:
        raise CriterionFail(f"{label}: stdout is not the JSON meta object ({ctx.cfg.json_flag})") from None
    bad = _precond_failures(meta, var.preconditions)
    if bad:
        raise CriterionFail(f"vacuous: {label} (variant {var.name}): precondition failed: " + "; ".join(bad))
    return meta, r


def _metric(meta: dict[str, Any], m: C.Metric, label: str) -> float:
    v = C.lookup(meta, m.field)
    if v is C._MISSING:
        raise CriterionFail(f"{label}: metric field {m.field} missing from meta.json")
    try:
        return timing.reduce_values(v, m.reduce) * m.scale
    except ValueError as e:
        raise CriterionFail(f"{label}: metric {m.field}: {e}") from None


def _metric_json(m: C.Metric) -> dict[str, Any]:
    """field and reduce; the scale only where one is set."""
    return {"field": m.field, "reduce": m.reduce, **({"scale": m.scale} if m.scale != 1.0 else {})}


def _pairs(ctx: Context, crit: C.Criterion, s: C.ABSpec, pa: Prepared, pb: Prepared, vb: C.Variant, mb: C.Metric,
           tag: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """s.pairs pairs of runs in s.order: A (pa, s.a, metric_a) against B (pb, vb, mb)."""
    out = []
    preps = {"A": (pa, s.a), "B": (pb, vb)}
    for i, order in enumerate(timing.schedule(s.pairs, s.order)):
        vals = {}
        for side in order:
            p, var = preps[side]
            meta, r = _timed_run(ctx, crit, p, var, f"{tag}pair{i + 1}.{side}")
            vals[side] = _metric(meta, s.metric_a if side == "A" else mb, f"pair {i + 1} {side}")
            runs.append({"pair": i + 1, "side": side, "metric": vals[side], "wall_s": r.wall_s, "cpu_s": r.cpu_s,
                         "peak_rss_mb": r.peak_rss_mb})
        try:
            ratio = timing.pair_ratio(vals["A"], vals["B"], s.ratio)
        except ValueError as e:
            raise CriterionFail(f"pair {i + 1}: {e}") from None
        out.append({"pair": i + 1, "order": "".join(order), "a": vals["A"], "b": vals["B"], "ratio": ratio})
        ctx.progress(f"  [{crit.id}] {tag}pair {i + 1}/{s.pairs} ({''.join(order)}): A {vals['A']:.4g}  "
                     f"B {vals['B']:.4g}  ratio {ratio:.4f}")
    return out


def run_ab(ctx: Context, crit: C.Criterion, work: Path) -> Outcome:
    s: C.ABSpec = crit.spec  # type: ignore[assignment]
    case: dict[str, str] = {}  # the schema refuses `cases` here
    pa = prepare(ctx, crit, s.a, work / s.a.name, case)
    runs: list[dict[str, Any]] = []
    floor: timing.Stats | None = None
    details: dict[str, Any] = {"pass_if": s.pass_if, "ratio": s.ratio, "order": s.order, "runs": runs,
                               "metric_a": _metric_json(s.metric_a), "metric_b": _metric_json(s.metric_b)}
    try:
        if s.same_run:
            for w in range(s.warmups):
                _timed_run(ctx, crit, pa, s.a, f"warmup{w + 1}")
            pairs = []
            for i in range(s.pairs):
                meta, r = _timed_run(ctx, crit, pa, s.a, f"run{i + 1}")
                a = _metric(meta, s.metric_a, f"run {i + 1} A")
                b = _metric(meta, s.metric_b, f"run {i + 1} B")
                try:
                    ratio = timing.pair_ratio(a, b, s.ratio)
                except ValueError as e:
                    raise CriterionFail(f"run {i + 1}: {e}") from None
                runs.append({"pair": i + 1, "side": "AB", "wall_s": r.wall_s, "cpu_s": r.cpu_s,
                             "peak_rss_mb": r.peak_rss_mb})
                pairs.append({"pair": i + 1, "order": "same run", "a": a, "b": b, "ratio": ratio})
                ctx.progress(f"  [{crit.id}] run {i + 1}/{s.pairs}: A {a:.4g}  B {b:.4g}  ratio {ratio:.4f}")
        else:
            assert s.b is not None
            pb = prepare(ctx, crit, s.b, work / s.b.name, case)
            for w in range(s.warmups):
                _timed_run(ctx, crit, pa, s.a, f"warmup{w + 1}.A")
                _timed_run(ctx, crit, pb, s.b, f"warmup{w + 1}.B")
            pairs = _pairs(ctx, crit, s, pa, pb, s.b, s.metric_b, "", runs)
            if s.noise_floor:
                ctx.progress(f"  [{crit.id}] A/A noise floor")
                # A against itself: both sides read A's metric (metric_b names a field of B's output)
                aa = _pairs(ctx, crit, s, pa, pa, s.a, s.metric_a, "aa.", runs)
                floor = timing.INTERVALS[s.interval]([p["ratio"] for p in aa], s.confidence, s.resamples, s.seed)
                details["noise_floor"] = {**vars(floor), "pairs": aa}
    except CriterionFail as e:
        e.details = {**details, **e.details}
        raise
    ratios = [p["ratio"] for p in pairs]
    st = timing.INTERVALS[s.interval](ratios, s.confidence, s.resamples, s.seed)
    details["pairs"] = pairs
    details["stats"] = vars(st)
    stab = timing.stability(ratios, s.pass_value, floor)
    details["stability"] = vars(stab)
    ok = timing.passes(st, s.pass_stat, s.pass_op, s.pass_value)
    msg = (f"median {s.ratio} {st.median:.4f}, {s.confidence * 100:g}% CI [{st.ci_lower:.4f}, {st.ci_upper:.4f}] "
           f"over {st.n} pairs; pass if {s.pass_if}" + (f"; {stab.note()}" if not stab.stable else ""))
    return Outcome("PASS" if ok else "FAIL", msg if ok else "threshold not met: " + msg, details)


# ---- run ------------------------------------------------------------------------------------

def check_run(r: ProcResult, ex: C.Expect, pre: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if r.error or r.timed_out or r.signal:
        return [r.describe()]
    if ex.exit is not None and r.returncode != ex.exit:
        problems.append(f"{r.describe()} (expected {ex.exit})")
    if ex.passes_min is not None:
        cc = closing_counts(r.stdout + "\n" + r.stderr)
        if cc is None:
            problems.append("no closing line 'N passed, M failed'")
        else:
            n, m = cc
            if m:
                fails = re.findall(r"^FAIL .*$", r.stdout, re.M)[:5]
                problems.append(f"{m} failed" + (": " + " | ".join(fails) if fails else ""))
            if n < ex.passes_min:
                problems.append(f"only {n} passed (at least {ex.passes_min} expected)")
    patterns = pattern_problems(r.stdout + "\n" + r.stderr, ex.must_match, ex.must_not_match, "output")
    if patterns and not (r.stdout_whole and r.stderr_whole):
        patterns[-1] += (f" (output of {r.stdout_bytes + r.stderr_bytes} bytes: matched against the first and "
                         "last megabytes of each stream kept in memory)")
    problems += patterns
    checks = {**pre, **ex.json}
    if checks and not r.stdout_whole:
        problems.append(f"stdout is {r.stdout_bytes} bytes, too large to read as JSON (at most {KEEP_WHOLE})")
    elif checks:
        try:
            doc = inputs.json_loads(r.stdout)
        except ValueError:
            problems.append("stdout is not JSON (needed by `json` / `preconditions`)")
        else:
            problems += _precond_failures(doc, checks)
    return problems


def run_run(ctx: Context, crit: C.Criterion, work: Path) -> Outcome:
    spec: C.RunSpec = crit.spec  # type: ignore[assignment]
    out = []
    failures = []
    for ci, case in enumerate(crit.cases or [{}]):
        for st in spec.steps:
            var = st.variant
            name = var.name + (f".case{ci}" if crit.cases else "")
            p = prepare(ctx, crit, var, work / name, case)
            r = _run(ctx, crit, p, [], name)
            problems = check_run(r, st.expect, var.preconditions)
            ended = r.describe().split(":", 1)[0]
            out.append({"name": name, "ended": ended, "ok": not problems, "reason": "; ".join(problems),
                        **r.to_json()})
            if problems:
                failures.append(f"{name}: " + "; ".join(problems))
    details = {"runs": out}
    if failures:
        return Outcome("FAIL", failures[0] + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""), details)
    return Outcome("PASS", f"{len(out)} run{'s' if len(out) != 1 else ''} as expected", details)


# ---- artifact -------------------------------------------------------------------------------

def check_file(fc: C.FileCheck, path: Path, ignore_exports: list[str]) -> tuple[list[str], list[str]]:
    """(problems, facts) for one built file."""
    problems: list[str] = []
    facts: list[str] = []
    if not path.exists():
        return ([] if not fc.exists else [f"{path} does not exist"]), ["absent"]
    if not fc.exists:
        return [f"{path} exists but must not"], ["present"]
    try:  # a FIFO, a folder, a device or a huge file is named, never opened (a FIFO would block)
        inputs.check_regular(path, inputs.MAX_BUILT, path.name)
    except (inputs.FileRefused, FileNotFoundError) as e:
        return [str(e) if isinstance(e, inputs.FileRefused) else f"{path} does not exist"], []
    binary_checks = (fc.needed_match or fc.needed_not_match or fc.symbols_not_match or fc.undefined_not_match
                     or fc.exports_exactly is not None or fc.exports_match)
    if binary_checks:
        try:
            info = read_binary(path)
        except (BinaryFormatError, OSError) as e:
            return [f"{path.name}: cannot read as a binary: {e}"], []
        facts.append(f"{info.format}; needed: {', '.join(info.needed) or '-'}")
        for pat in fc.needed_match:
            if not any(re.search(pat, n) for n in info.needed):
                problems.append(f"no dependency matches /{pat}/")
        for pat in fc.needed_not_match:
            hits = [n for n in info.needed if re.search(pat, n)]
            if hits:
                problems.append(f"depends on {', '.join(hits)} (must not match /{pat}/)")
        names = sorted({s.name for s in info.symbols if s.name})
        for pat in fc.symbols_not_match:
            hits = [n for n in names if re.search(pat, n)]
            if hits:
                problems.append(f"dynamic symbol(s) {', '.join(hits[:5])} match /{pat}/")
        und = info.undefined()
        for pat in fc.undefined_not_match:
            hits = [n for n in und if re.search(pat, n)]
            if hits:
                problems.append(f"undefined symbol(s) {', '.join(hits[:5])} match /{pat}/")
        exports = info.exports(ignore_exports)
        facts.append(f"{len(exports)} exports")
        if fc.exports_exactly is not None:
            want = set(fc.exports_exactly)
            extra = sorted(set(exports) - want)
            missing = sorted(want - set(exports))
            if extra:
                problems.append(f"unexpected exports: {', '.join(extra[:10])}")
            if missing:
                problems.append(f"missing exports: {', '.join(missing)}")
        if fc.exports_match:
            bad = [e for e in exports if not re.search(fc.exports_match, e)]
            if bad:
                problems.append(f"exports not matching /{fc.exports_match}/: {', '.join(bad[:10])}")
    if fc.text_match or fc.text_not_match:
        try:
            text = inputs.read_bytes(path, inputs.MAX_BUILT, path.name).decode("utf-8", errors="replace")
        except (inputs.FileRefused, FileNotFoundError) as e:
            return problems + [str(e) if isinstance(e, inputs.FileRefused) else f"{path} does not exist"], facts
        problems += pattern_problems(text, fc.text_match, fc.text_not_match, "text")
    return problems, facts


def run_artifact(ctx: Context, crit: C.Criterion, work: Path) -> Outcome:
    spec: C.ArtifactSpec = crit.spec  # type: ignore[assignment]
    var = C.Variant(name="artifact", build=spec.build)
    files = []
    failures = []
    for case in crit.cases or [{}]:
        vals = _values(ctx, crit, var, work, case, need_model=False)
        for fc in spec.files:
            path = Path(C.substitute(fc.path, vals))
            problems, facts = check_file(fc, path, ctx.cfg.ignore_exports)
            files.append({"path": str(path), "ok": not problems, "problems": problems, "facts": facts})
            failures += [f"{path.name}: {p}" for p in problems]
    details = {"files": files}
    if failures:
        return Outcome("FAIL", failures[0] + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""), details)
    return Outcome("PASS", f"{len(files)} file check{'s' if len(files) != 1 else ''} hold", details)


def run_compare_workload(ctx: Context, crit: C.Criterion, work: Path) -> Outcome:
    """A `kind: compare` workload runs two revisions: `harness compare BASE HEAD` does it, not verify."""
    return Outcome("SKIP", "a compare workload: run by `python3 -m harness compare BASE [HEAD]` (docs/COMPARE.md)")


RUNNERS: dict[str, Callable[[Context, C.Criterion, Path], Outcome]] = {
    "equivalence": run_equivalence, "ab_timing": run_ab, "run": run_run, "artifact": run_artifact,
    "compare": run_compare_workload}


def evaluate(ctx: Context, crit: C.Criterion) -> Outcome:
    """Run one criterion; every failure, including unexpected exceptions, becomes FAIL with a reason."""
    unmet = ctx.probes.unmet(crit.requires)
    if unmet:
        return Outcome("SKIP", unmet)
    work = ctx.report_dir / "work" / crit.id
    logs = Path("logs") / crit.id
    t0 = time.perf_counter()
    try:
        # an earlier attempt's logs go (a resumed run), and with them any link planted among them
        # (a link at logs/ or logs/<id> is refused): run_process then writes into a fresh folder
        confined.rmtree(ctx.report_dir, logs)
        out = RUNNERS[crit.kind](ctx, crit, work)
    except CriterionFail as e:
        out = Outcome("FAIL", e.reason, e.details)
    except confined.LinkRefused as e:
        out = Outcome("FAIL", f"report folder: {e}")
    except RunStopped:
        raise
    except Exception as e:  # noqa: BLE001 - one criterion's bug must not end the run
        stop_if_disk_full(e, crit.id)
        log = logs / "internal-error.txt"
        try:
            confined.write_text(ctx.report_dir, log, traceback.format_exc())
        except (OSError, confined.LinkRefused):  # a link there, or no room: the reason below says enough
            pass
        out = Outcome("FAIL", f"internal error: {type(e).__name__}: {e} (see {log.name})")
    out.details.setdefault("seconds", time.perf_counter() - t0)
    try:
        _keep_or_clear(ctx, crit, work, out)
    except confined.LinkRefused as e:  # a FAIL keeps its own reason; a PASS cannot stand beside a planted link
        out = (Outcome("FAIL", f"{out.reason} [evidence not kept: {e}]", out.details) if out.verdict == "FAIL"
               else Outcome("FAIL", f"report folder: {e}", out.details))
    return out


def _keep_or_clear(ctx: Context, crit: C.Criterion, work: Path, out: Outcome) -> None:
    """A failed criterion's work folder moves to failed/<id> (the evidence) when it holds a file; any
    other goes."""
    if not work.exists():
        return
    rel = work.relative_to(ctx.report_dir)
    if out.verdict == "FAIL" and any(f.is_file() and not f.is_symlink() for f in work.rglob("*")):
        failed = Path("failed") / crit.id
        confined.rmtree(ctx.report_dir, failed)
        confined.move(ctx.report_dir, rel, failed)
        out.details["kept"] = failed.as_posix()
    else:
        try:
            confined.rmtree(ctx.report_dir, rel)
        except OSError:
            pass  # what cannot be removed stays; the verdict stands
