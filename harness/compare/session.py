"""`harness compare BASE [HEAD]`: the revisions checked out and built in the cache, the identical-build
short-circuit, every workload's bytes and sequential speed verdict, Holm across the workloads."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare import external, identity, revisions, sequential
from harness.compare.revisions import Cache, Revision
from harness.compare.workload import Outcome, Runner, Side, compare_dumps, finish_speed
from harness.compare.workload import sequential as run_sequential
from harness.errors import HarnessError
from harness.report.sysinfo import engine_info
from harness.run.probes import Probes
from harness.run.runner import CriterionFail
from harness.run.suite import Models
from harness.spec import registry, schema
from harness.spec.config import Config
from harness.spec.criteria import Criterion

ALPHA = 0.05  # family-wise error of the regressed/improved verdicts over one compare's workloads


@dataclass
class Options:
    base: str
    head: str = revisions.WORKTREE
    files: list[Path] = field(default_factory=list)
    only: list[str] = field(default_factory=list)
    cache: Path | None = None
    short_circuit: bool = True
    exploratory: bool = False  # run workloads that are not (or not as) registered
    alpha: float = ALPHA
    max_pairs: int | None = None  # caps every workload's budget (e.g. a bounded CI run)
    max_seconds: float | None = None
    external: Any = None  # compare/bisect --external: an external.External (revisions of that source)
    budget_scale: float = 1.0  # a bisect step sampled again: every workload's budget times this


@dataclass
class Compare:
    base: Revision
    head: Revision
    outcomes: list[Outcome]
    builds: dict[str, dict[str, Any]]  # build name -> {base, head, changes}
    alpha: float
    tested: int  # workloads whose speed was judged (Holm's m)
    seconds: float = 0.0

    def failed(self, fail_on: str = "any") -> bool:
        if fail_on == "bytes":
            return any(o.bytes_failed or o.speed == "error" for o in self.outcomes)
        return any(o.failed() for o in self.outcomes)


def default_files(cfg: Config) -> list[Path]:
    return sorted((cfg.root / "regressions").glob("*.yaml"))


def workloads(cfg: Config, opts: Options) -> list[Criterion]:
    crits = schema.load_many(opts.files or default_files(cfg), cfg.root, list(cfg.builds), list(cfg.dumps),
                             list(cfg.env_names))
    ws = [c for c in crits if c.kind == "compare"]
    if opts.only:
        known = {c.id for c in ws}
        missing = [i for i in opts.only if i not in known]
        if missing:
            raise HarnessError(f"unknown workload {', '.join(missing)}; workloads (kind: compare): "
                               f"{', '.join(sorted(known)) or 'none'}")
        ws = [c for c in ws if c.id in opts.only]
    if not ws:
        raise HarnessError("no workload (a criterion of `kind: compare`) in the criteria files")
    return ws


def _capped(c: Criterion, opts: Options) -> Criterion:
    """The workload with its budget capped by --max-pairs / --max-seconds (never raised)."""
    s = c.spec
    scale = opts.budget_scale
    pairs = int(s.budget_pairs * scale)  # type: ignore[union-attr]
    pairs = min(pairs, int(opts.max_pairs * scale)) if opts.max_pairs else pairs
    secs = s.budget_seconds * scale if s.budget_seconds is not None else None  # type: ignore[union-attr]
    if opts.max_seconds is not None:
        secs = opts.max_seconds * scale if secs is None else min(secs, opts.max_seconds * scale)
    return dataclasses.replace(c, spec=dataclasses.replace(s, budget_pairs=pairs, budget_seconds=secs))


def run_compare(cfg: Config, opts: Options, report_dir: Path, say: Callable[[str], None],
                progress: Callable[[Outcome], None] | None = None) -> Compare:
    t0 = time.monotonic()
    ws = workloads(cfg, opts)
    entries = registry.load(cfg.root / "regressions" / "registry.lock")
    if opts.external is not None:  # revisions of an external source, kite's tree as it is
        cache: Any = external.Builds(cfg, opts.external, say, opts.cache)
        base, head = cache.resolve(opts.base), cache.resolve(opts.head)
    else:
        repo = revisions.repo_root(cfg.root)
        base, head = revisions.resolve(repo, opts.base), revisions.resolve(repo, opts.head)
        cache = Cache(opts.cache or revisions.default_cache(), repo, say)
    say(f"compare: base {base.label} ({opts.base}), head {head.label} ({opts.head}); {len(ws)} workload(s)"
        + (f"; revisions of {opts.external.name} in {opts.external.repo}" if opts.external else ""))
    models = Models(cfg, say)
    sides_by_build: dict[str, dict[str, Side] | str] = {}
    builds: dict[str, dict[str, Any]] = {}

    def sides(name: str) -> dict[str, Side] | str:
        """Both revisions' build `name`, or why not."""
        if name not in sides_by_build:
            got: dict[str, Side] = {}
            why = ""
            for key, rev in (("base", base), ("head", head)):
                try:
                    rcfg, res = cache.build(rev, name)
                except HarnessError as e:
                    why = str(e)
                    break
                if not res.engine_ok or res.module.status == "failed":
                    part = res.engine if not res.engine_ok else res.module
                    why = f"{rev.label}: build {name!r} failed: {part.reason}"
                    break
                got[key] = Side(rev.label, rcfg, res)
            if why:
                sides_by_build[name] = why
            else:
                fb = {k: identity.facts(Path(s.build.engine_path),
                                        Path(s.build.module_path) if s.build.module_ok else None)
                      for k, s in got.items()}
                builds[name] = {"base": fb["base"].to_json(), "head": fb["head"].to_json(),
                                "changes": identity.changes(fb["base"], fb["head"])}
                sides_by_build[name] = got
        return sides_by_build[name]

    def gpu_info() -> dict[str, Any] | None:
        got = sides(cfg.gpu.build) if cfg.gpu.build in cfg.builds else "no GPU build"
        if isinstance(got, str):
            return None
        b = got["head"].build
        return engine_info(Path(b.engine_path), got["head"].cfg.info_args, cfg.timeout("info", 30))

    probes = Probes(gpu_info=gpu_info, gpu=cfg.gpu)
    outcomes: list[Outcome] = []
    to_time: list[tuple[Criterion, Outcome, Runner]] = []
    for c in ws:
        s = c.spec
        out = Outcome(c.id, c.title, c.file, c.line, s.bytes, margin=s.margin)  # type: ignore[union-attr]
        outcomes.append(out)
        st = registry.status(entries, c)
        if not st.ok and not opts.exploratory:
            out.speed, out.reason = "error", registry.refusal(st, False, "run `python3 -m harness register FILE`") or st.state
            continue
        unmet = probes.unmet(c.requires)
        if unmet:
            out.speed, out.reason = "skipped", unmet
            continue
        got = sides(s.variant.build)  # type: ignore[union-attr]
        if isinstance(got, str):
            out.speed, out.reason = "error", got
            continue
        changes = builds[s.variant.build]["changes"]  # type: ignore[union-attr]
        if not changes and opts.short_circuit:
            out.speed, out.bytes = "identical build", "same"
            out.reason = "identical build: no change (engine, module and every kernel hash equal)"
            continue
        try:
            run = Runner(_capped(c, opts), got, models.path, report_dir, say)
            if s.dumps:  # type: ignore[union-attr]
                compare_dumps(run, out)
        except CriterionFail as e:
            out.speed, out.reason = "error", e.reason
            continue
        to_time.append((c, out, run))
    m = max(1, len(to_time))
    alpha_w = opts.alpha / m  # each interval at alpha/m: Holm's first step, and a valid stop for all
    for c, out, run in to_time:
        say(f"compare: {c.id}: timing, base {base.label} against head {head.label}")
        t1 = time.monotonic()
        try:
            seq = run_sequential(run, out, alpha_w, say)
        except CriterionFail as e:
            out.speed, out.reason = "error", e.reason
            continue
        finally:
            out.seconds = time.monotonic() - t1
        finish_speed(out, seq, seq.decided() or "inconclusive")
        if progress:
            progress(out)
    timed = [o for o in outcomes if o.seq is not None]
    rejected = sequential.holm([o.p_value for o in timed], opts.alpha)
    for o, rej in zip(timed, rejected, strict=True):
        assert o.seq is not None
        o.speed = sequential.final_verdict(o.seq, rej)
        o.reason = _speed_reason(o)
    return Compare(base, head, outcomes, builds, opts.alpha, len(timed), time.monotonic() - t0)


def _speed_reason(o: Outcome) -> str:
    lo, hi = o.interval
    return (f"{o.speed}: ratio {o.ratio:.4f}, interval [{lo:.4f}, {hi:.4f}] after {o.pairs} pairs; "
            f"smallest detectable change {o.detectable * 100:.2f} %, margin {o.margin * 100:g} %")
