"""One workload of a compare, run on the base and the head build: their dumps compared byte for byte,
then sequential paired timing (ABBA) until the interval is clear or the budget is spent."""

from __future__ import annotations

import math
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.builder.cmake import BuildResult
from harness.compare import tolerance
from harness.compare.sequential import Sequence, Tail, regressed, stop
from harness.process import KEEP_WHOLE, run_process
from harness.run import timing
from harness.run import dumps
from harness.run.probes import Probes
from harness.run.runner import Context, CriterionFail, Prepared, prepare
from harness.contract import criteria as C
from harness.contract import inputs, looks
from harness.contract.config import Config

SIDES = ("base", "head")


@dataclass
class Side:
    """One revision as a workload sees it: its configuration and its build."""
    label: str
    cfg: Config
    build: BuildResult


@dataclass
class Outcome:
    id: str
    title: str
    file: str
    line: int
    bytes_rule: str  # same | may-change | within (tolerance.py)
    bytes: str = "not compared"  # same | changed | within | beyond | not compared
    bytes_detail: list[dict[str, Any]] = field(default_factory=list)
    speed: str = "not run"  # a sequential verdict, "identical build", "skipped", "error"
    reason: str = ""
    ratio: float = math.nan
    interval: tuple[float, float] = (math.nan, math.nan)
    pairs: int = 0
    half_width: float = math.inf  # of the interval, relative: a change this size is found about half the time
    level: float = math.nan  # the interval's error level (alpha / workloads, or Holm's for a rejection)
    p_value: float = 1.0
    margin: float = 0.0
    seconds: float = 0.0
    stable: bool = True
    stability: str = ""
    noise_floor: dict[str, Any] | None = None
    pair_log: list[dict[str, Any]] = field(default_factory=list)
    seq: Sequence | None = None
    tail: Tail | None = None  # with the workload's `tail: q`
    tail_verdict: str = ""

    @property
    def bytes_failed(self) -> bool:
        return tolerance.failed(self.bytes_rule, self.bytes)

    def failed(self) -> bool:
        return self.bytes_failed or self.speed == "error" or regressed(self.speed)

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None
        return {"id": self.id, "title": self.title, "file": self.file, "line": self.line,
                "bytes_rule": self.bytes_rule, "bytes": self.bytes, "bytes_detail": self.bytes_detail,
                "speed": self.speed, "reason": self.reason, "ratio": num(self.ratio),
                "interval": [num(self.interval[0]), num(self.interval[1])], "pairs": self.pairs,
                "half_width": num(self.half_width), "level": num(self.level), "p_value": self.p_value, "margin": self.margin,
                "seconds": round(self.seconds, 3), "stable": self.stable, "stability": self.stability,
                "noise_floor": self.noise_floor, "pair_log": self.pair_log, "failed": self.failed(),
                "tail": self.tail.to_json(self.tail_verdict) if self.tail and self.tail.base else None}


class Runner:
    """Runs a workload's engine invocations on both sides. Logs go to <report>/logs/<id>/."""

    def __init__(self, crit: C.Criterion, sides: dict[str, Side], model: Callable[[dict[str, Any] | None], Path],
                 report_dir: Path, say: Callable[[str], None]):
        self.crit = crit
        self.spec: C.CompareSpec = crit.spec  # type: ignore[assignment]
        self.say = say
        self.report_dir = report_dir
        self.prepared: dict[str, Prepared] = {}
        self.cfgs = {k: s.cfg for k, s in sides.items()}
        self.runs = 0
        for key, side in sides.items():
            ctx = Context(cfg=side.cfg, report_dir=report_dir, probes=Probes(gpu_info=lambda: None),
                          ensure_build=lambda name, b=side.build: b, model_path=model, progress=say)
            self.prepared[key] = prepare(ctx, crit, self.spec.variant, report_dir / "work" / crit.id / key, {})

    def _run(self, key: str, extra: list[str], label: str, keep_log: bool = True) -> Any:
        """One engine run. Its log (<report>/logs/<id>/<label>.cmd/.stdout/.stderr) is kept for a
        dump run, and for a timed run only when it failed: a compare times hundreds of runs."""
        p = self.prepared[key]
        timeout = self.crit.timeout_s or self.cfgs[key].timeout("run", 180)
        self.runs += 1
        prefix = self.report_dir / "logs" / self.crit.id / f"{label}"
        r = run_process(p.argv + extra, p.env, timeout=timeout, log_prefix=prefix if keep_log else None)
        if not r.ok:
            if not keep_log:
                prefix.parent.mkdir(parents=True, exist_ok=True)
                cmd = "".join(f"{k}={v}\n" for k, v in (p.env or {}).items()) + shlex.join(p.argv + extra) + "\n"
                for ext, text in ((".cmd", cmd), (".stdout", r.stdout),
                                  (".stderr", r.stderr)):
                    Path(str(prefix) + ext).write_text(text, encoding="utf-8", errors="replace")
            raise CriterionFail(f"{label}: engine {r.describe()} (log: {prefix.relative_to(self.report_dir)}.*)")
        return r

    def _check(self, meta: Any, label: str) -> None:
        bad = [m for k, x in self.spec.variant.preconditions.items() if (m := C.check_expectation(meta, k, x))]
        if bad:
            raise CriterionFail(f"vacuous: {label}: precondition failed: " + "; ".join(bad))

    def dumps(self, key: str) -> tuple[dict[str, Any], dict[str, dumps.Dump]]:
        """One run with the dump flag: meta.json and the dump files, through verify's reader
        (inside the dump folder, no link out, exactly the size the shape gives, the same caps)."""
        cfg = self.cfgs[key]
        dump = self.prepared[key].work / "dump"
        if dump.exists():
            shutil.rmtree(dump)
        self._run(key, [cfg.dump_flag, str(dump)], f"{key}.dump")
        try:
            meta = inputs.json_loads(inputs.decode_text(inputs.read_inside(dump, cfg.meta_file, inputs.MAX_META),
                                                        cfg.meta_file))
        except (OSError, ValueError, inputs.FileRefused) as e:
            raise CriterionFail(f"{key}: {cfg.meta_file}: {e}") from None
        self._check(meta, f"{key} dump run")
        data = {}
        for name in self.spec.dumps:
            ds = cfg.dumps.get(name)
            if ds is None:
                raise CriterionFail(f"{key}: its configs/engine.yaml declares no dump {name!r}")
            try:
                data[name] = dumps.locate(dump, ds.file, ds.dtype, dumps.shape(meta, ds.shape, cfg.meta_file))
            except FileNotFoundError:
                raise CriterionFail(f"{key}: dump {ds.file} missing") from None
            except dumps.DumpRefused as e:
                raise CriterionFail(dumps.refusal(key, e)) from None
        return meta, data

    def timed(self, key: str, label: str) -> float:
        cfg = self.cfgs[key]
        extra = [] if cfg.json_flag in self.prepared[key].argv else [cfg.json_flag]
        r = self._run(key, extra, label, keep_log=False)
        if not r.stdout_whole:
            raise CriterionFail(f"{label}: stdout larger than {KEEP_WHOLE} bytes: not the JSON meta object")
        try:
            meta = inputs.json_loads(r.stdout)
        except ValueError:
            raise CriterionFail(f"{label}: stdout is not the JSON meta object ({cfg.json_flag})") from None
        self._check(meta, label)
        v = C.lookup(meta, self.spec.metric.field)
        if v is C._MISSING:
            raise CriterionFail(f"{label}: metric field {self.spec.metric.field} missing from the meta object")
        try:
            x = timing.reduce_values(v, self.spec.metric.reduce)
        except ValueError as e:
            raise CriterionFail(f"{label}: metric {self.spec.metric.field}: {e}") from None
        if not (x > 0 and math.isfinite(x)):
            raise CriterionFail(f"{label}: metric {self.spec.metric.field} is {x}: not a positive time")
        return x


def compare_dumps(run: Runner, out: Outcome) -> None:
    """memcmp of every dump, base against head; on a difference, where and by how much."""
    datas = {key: run.dumps(key)[1] for key in SIDES}
    diffs = []
    for name in run.spec.dumps:
        try:
            d = dumps.compare(datas["base"][name], datas["head"][name],
                              **({"mode": "tolerance", **tolerance.bounds(run.spec.within)} if run.spec.within else {}))
        except dumps.DumpRefused as e:
            raise CriterionFail(str(e)) from None
        diffs.append(d)
        out.bytes_detail.append({"dump": name, **d.to_json()})
    out.bytes = tolerance.verdict(run.spec.bytes, diffs)


def sequential(run: Runner, out: Outcome, alpha: float, say: Callable[[str], None],
               clock: Callable[[], float] = time.monotonic) -> Sequence:
    """Warm-ups, the A/A floor when asked, then ABBA blocks with a look after each one. The
    seconds budget runs from the first warm-up: warm-ups and the floor stop when it is spent (the
    floor keeps at least 2 pairs), and one block is always timed."""
    s = run.spec
    t0 = clock()

    def spent() -> bool:
        return s.budget_seconds is not None and clock() - t0 >= s.budget_seconds

    for i in range(s.warmups):
        if i and spent():
            break
        for key in SIDES:
            run.timed(key, f"warmup{i + 1}.{key}")
    if s.noise_floor:
        aa = []
        for i, order in enumerate(timing.schedule(s.noise_floor)):
            if i >= 2 and spent():
                break
            v = {side: run.timed("base", f"aa{i + 1}.{side}") for side in order}
            aa.append(v["B"] / v["A"])
        st = timing.order_median_ci(aa)
        out.noise_floor = {"pairs": len(aa), "median": st.median, "ci": [st.ci_lower, st.ci_upper],
                           "ratios": aa}
    seq = Sequence(s.margin, alpha)
    lk = looks.budget_looks(s.budget_pairs, s.block, alpha)
    if not lk.enough:  # say so before the minutes are spent, not after
        say(f"  [{run.crit.id}] {lk.problem()}")
    out.tail = Tail(s.tail) if s.tail else None
    n = 0
    while True:
        block, bases, heads = [], [], []
        for order in timing.schedule(s.block):
            n += 1
            v = {}
            for side in order:  # A: base, B: head; ABBA alternates who runs first
                key = "base" if side == "A" else "head"
                v[key] = run.timed(key, f"pair{n}.{key}")
            block.append(v["head"] / v["base"])
            bases.append(v["base"])
            heads.append(v["head"])
            out.pair_log.append({"pair": n, "order": "".join(order), "base": v["base"], "head": v["head"],
                                 "ratio": v["head"] / v["base"]})
        seq.add(block)
        if out.tail:
            out.tail.add(bases, heads)
        lo, hi = seq.ratio_interval()
        # the target, not a verdict: the verdict is decided at the end (Holm), and may be inconclusive
        say(f"  [{run.crit.id}] {seq.pairs} pairs: ratio {seq.ratio():.4f}, interval [{lo:.4f}, {hi:.4f}], "
            f"target [{1 / (1 + s.margin):.4f}, {1 + s.margin:.4f}]")
        if stop(seq, s.block, s.budget_pairs, out.tail) or spent():
            break
    return seq


def settle(out: Outcome, verdict: str, level: float, tail: str = "") -> None:
    """The verdict once the family is judged, with the interval at the level it was read at."""
    assert out.seq is not None
    out.speed, out.level, out.tail_verdict = verdict, level, tail
    out.interval = out.seq.ratio_interval(level)
    out.half_width = out.seq.half_width(level)


def finish_speed(out: Outcome, seq: Sequence) -> None:
    out.seq = seq
    out.ratio = seq.ratio()
    out.pairs = seq.pairs
    out.p_value = seq.p_value
    settle(out, seq.decided() or "inconclusive", seq.alpha)
    ratios = [math.exp(x) for x in seq.log_ratios]
    floor = None
    if out.noise_floor:
        lo, hi = out.noise_floor["ci"]
        floor = timing.Stats(out.noise_floor["pairs"], out.noise_floor["median"], lo, hi, 0.95, 0, 0, "order")
    st = timing.stability(ratios, 1 + out.margin, floor)
    out.stable, out.stability = st.stable, st.note()
