"""`harness compare BASE [HEAD]`: the revisions checked out and built in the cache, the identical-build
short-circuit, every workload's bytes and sequential speed verdict, Holm across the workloads."""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare import external, identity, revisions, sequential
from harness.compare.revisions import Cache, Revision
from harness.compare.workload import Outcome, Runner, Side, compare_dumps, finish_speed, settle
from harness.compare.workload import sequential as run_sequential
from harness.errors import HarnessError
from harness.report import sysinfo
from harness.report.sysinfo import engine_info
from harness.run.probes import NO_GPU, Probes, gpu_device
from harness.run.runner import CriterionFail
from harness.run.suite import Models
from harness.contract import criteria as C
from harness.contract import gate, registry, schema
from harness.contract.config import Config
from harness.contract.criteria import Criterion
from harness.contract.looks import ALPHA  # family-wise error of regressed/improved over one compare's workloads


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
    bisect_bad: str = ""  # the commit a failure's bisect ends at (default: head; a pull request: its head)
    bisect_fetch: bool = False  # the bisect command fetches its commits first (they are a CI clone's)
    time: bool = True  # False: bytes only, nothing timed (bisect --what bytes)
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
    same_commit: bool = False  # base and head are one source tree: nothing can differ
    machine: dict[str, Any] = field(default_factory=dict)  # where it ran (cpu, cores, ram_gb, os, runner)
    # the bisect a failure's next step names: GOOD and BAD commits; linear: GOOD is a first-parent
    # ancestor of BAD (else bisect from their merge base); fetch: fetch both first (a CI clone's names)
    bisect_good: str = ""
    bisect_bad: str = ""
    bisect_linear: bool = True
    bisect_fetch: bool = False
    bisect_external: str = ""  # NAME=REPO: the commits are an external source's (compare --external)

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
    """The workload with its budget capped by --max-pairs / --max-seconds (never raised). The pair
    cap bounds each kind of pair: warm-ups, the A/A floor, a block and the timed pairs; the
    seconds run from the first warm-up (workload.sequential)."""
    s = c.spec
    assert isinstance(s, C.CompareSpec)
    scale = opts.budget_scale  # a bisect step sampled again: every budget times this
    cap = int(opts.max_pairs * scale) if opts.max_pairs else None
    pairs = int(s.budget_pairs * scale)
    pairs = min(pairs, cap) if cap else pairs
    secs = s.budget_seconds * scale if s.budget_seconds is not None else None
    if opts.max_seconds is not None:
        secs = opts.max_seconds * scale if secs is None else min(secs, opts.max_seconds * scale)
    more = {"block": min(s.block, cap - cap % 2), "warmups": min(s.warmups, cap),
            "noise_floor": min(s.noise_floor, cap)} if cap else {}
    return dataclasses.replace(c, spec=dataclasses.replace(s, budget_pairs=pairs, budget_seconds=secs, **more))


def run_compare(cfg: Config, opts: Options, report_dir: Path, say: Callable[[str], None],
                progress: Callable[[Outcome], None] | None = None) -> Compare:
    t0 = time.monotonic()
    ws = workloads(cfg, opts)
    checked = gate.open_gate(cfg.root, cfg=cfg)
    if opts.external is not None:  # revisions of an external source, kite's tree as it is
        repo = opts.external.repo
        cache: Any = external.Builds(cfg, opts.external, say, opts.cache)
        base, head = cache.resolve(opts.base), cache.resolve(opts.head)
    else:
        repo = revisions.repo_root(cfg.root)
        cache = Cache(opts.cache or revisions.default_cache(repo), repo, say)
        base, head = (revisions.resolve(repo, x, cache.objects) for x in (opts.base, opts.head))
    say(f"compare: base {base.label} ({opts.base}), head {head.label} ({opts.head}); {len(ws)} workload(s)"
        + (f"; revisions of {opts.external.name} in {opts.external.repo}" if opts.external else ""))
    same = base.tree == head.tree
    if same:
        say(f"compare: base and head are the same source tree ({base.label}): nothing can differ"
            + ("; nothing is built or run (--no-short-circuit: an A/A run)" if opts.short_circuit else ""))
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
                    # name the revision once: an external source's reason already does
                    said = rev.label in part.reason
                    why = f"{'' if said else rev.label + ': '}build {name!r} failed: {part.reason}"
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

    # no GPU device at all: `requires: gpu` is unmet without building the GPU build to ask its engine
    device = gpu_device()
    overrides = {} if device else {"gpu": (False, NO_GPU), "no_gpu": (True, NO_GPU)}
    probes = Probes(gpu_info=gpu_info, gpu=cfg.gpu, overrides=overrides)
    outcomes: list[Outcome] = []
    to_time: list[tuple[Criterion, Outcome, Runner]] = []
    for c in ws:
        s = c.spec
        out = Outcome(c.id, c.title, c.file, c.line, s.bytes, margin=s.margin)  # type: ignore[union-attr]
        outcomes.append(out)
        st = checked.status(c)
        if not st.ok and not opts.exploratory:
            out.speed, out.reason = "error", registry.refusal(st, False, "run `python3 -m harness register FILE`") or st.state
            continue
        unmet = probes.unmet(c.requires)
        if unmet:
            out.speed, out.reason = "skipped", unmet
            continue
        if same and opts.short_circuit:
            out.speed, out.bytes = "identical build", "same"
            out.reason = f"base and head are the same source tree ({base.label}): nothing can differ"
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
        if not opts.time:
            out.speed, out.reason = "not timed", "bytes only (bisect --what bytes)"
            continue
        to_time.append((c, out, run))
    m = max(1, sum(1 + bool(c.spec.tail) for c, _, _ in to_time))  # type: ignore[union-attr]
    alpha_w = opts.alpha / m  # m hypotheses (each median, each tail): Holm's first step, a valid stop for all
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
        finish_speed(out, seq)
        if progress:
            progress(out)
    timed = [o for o in outcomes if o.seq is not None]
    judged = sequential.judge([o.seq for o in timed if o.seq is not None], opts.alpha, [o.tail for o in timed])
    for o, (verdict, level, tail) in zip(timed, judged, strict=True):
        settle(o, verdict, level, tail)
        o.reason = _speed_reason(o)
    bad = opts.bisect_bad or head.commit
    return Compare(base, head, outcomes, builds, opts.alpha, len(timed), time.monotonic() - t0, same_commit=same,
                   machine=machine(), bisect_good=base.commit, bisect_bad=bad,
                   bisect_linear=opts.bisect_fetch is False and _linear(repo, base.commit, bad),
                   bisect_fetch=opts.bisect_fetch,
                   bisect_external=f"{opts.external.name}={opts.external.repo}" if opts.external else "")


def machine() -> dict[str, Any]:
    u = platform.uname()
    return {"cpu": sysinfo.cpu_model(), "cores": os.cpu_count(), "ram_gb": sysinfo.ram_gb(),
            "os": f"{u.system} {u.release}", "runner": os.environ.get("RUNNER_NAME", "")}


def _linear(repo: Path, good: str, bad: str) -> bool:
    """GOOD is a first-parent ancestor of BAD (bisect walks first parents)."""
    try:
        return good in revisions.git(repo, "rev-list", "--first-parent", bad, "--").split()
    except HarnessError:
        return False


def _speed_reason(o: Outcome) -> str:
    lo, hi = o.interval
    tail = ""
    if o.tail and o.tail.base:
        t = o.tail.to_json(o.tail_verdict)
        tail = (f"; {o.tail_verdict}: p{t['quantile'] * 100:g} ratio {t['ratio']:.4f}, the head above the base's "
                f"p{t['quantile'] * 100:g} in {t['head_above'] * 100:.1f} % of runs against {t['base_above'] * 100:.1f} %, "
                f"p-value {t['p_value']:.3g}")
    return (f"{o.speed}: ratio {o.ratio:.4f}, {(1 - o.level) * 100:.4g} % anytime interval [{lo:.4f}, {hi:.4f}] "
            f"after {o.pairs} pairs (it holds the true median block ratio, at any look; half-width "
            f"{o.half_width * 100:.2f} %: a change that size is found about half the time), margin "
            f"{o.margin * 100:g} %" + tail)
