"""Calibration of the sequential compare, built to be able to fail: seeded simulations of whole
compares (blocks, looks, the stop rule, the budget, Holm over the family of timed workloads) on
noise that breaks the method's assumptions (serially dependent pairs, drift, bursts of background
load, heavy tails, skew, outliers) and on recorded noise, with a true ratio planted. A false alarm
is regressed or improved at a true ratio of 1; power is regressed at a true slowdown; a wrong
"equivalent" is equivalent at a true change of twice the margin.

    python -m harness.compare.calibrate [--runs 1000] [--seed 20261202] [--tables validity design power]
    python -m harness.compare.calibrate --record NAME --reports DIR/report.json ... --note TEXT

Recorded noise: bench/data/aa_pairs.json (verify's A/A floors: h200, cpu) drawn pair by pair as
harness/tools/calibrate_ab.py does (independent, mirrored), and bench/data/compare_aa_pairs.json (A/A
compares of a revision against itself, --record) also drawn in order, as recorded: a random
stretch of one recorded run, its serial dependence and skew kept, not mirrored.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.signal import lfilter

from harness.compare.sequential import PRIOR, Sequence, Tail, judge, stop
from harness.report.document import _table
from harness.tools.calibrate_ab import DEFAULT_DATA, NoiseShape, draw, load_shapes, shape_from_runs

COMPARE_DATA = DEFAULT_DATA.with_name("compare_aa_pairs.json")
MARGIN = 0.02
BLOCK = 4
WORKLOADS = Path(__file__).resolve().parents[2] / "regressions" / "compare.yaml"
GPU_BUDGET, CPU_BUDGET = 400, 200  # pairs: the budgets of one registered GPU and CPU workload


def family(gpu: bool, path: Path = WORKLOADS) -> tuple[tuple[float, int], ...]:
    """The family as it runs: (margin, budget in pairs) of each registered workload of the GPU's
    (requires: [gpu]) or the CPU's, in the file's order."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple((float(c["margin"]), int(c["budget"]["pairs"])) for c in doc["criteria"]
                 if c.get("kind") == "compare" and ("gpu" in c.get("requires", [])) == gpu)


GPU_FAMILY, CPU_FAMILY = family(True), family(False)
MIN_IN_ORDER = 100  # recorded runs this long are also drawn in order (their serial dependence kept)

Draw = Callable[[np.random.Generator, int, float], np.ndarray]


@dataclass(frozen=True)
class Noise:
    """A noise model: pair ratios (head/base) of one workload's run with a true median ratio."""
    name: str
    draw: Draw


def recorded(shape: NoiseShape) -> Noise:
    return Noise(shape.name, lambda rng, n, effect: draw(rng, shape, n, effect))


def in_order(name: str, runs: list[list[float]]) -> Noise | None:
    """Stretches of the recorded runs as they came (wrapping round), each run centred on its
    median: the A/A runs' serial dependence, skew and outliers kept. Runs shorter than
    MIN_IN_ORDER pairs (a campaign's, back to back on one machine) are chained in recorded order."""
    centred = [np.log(np.asarray(r)) - np.median(np.log(r)) for r in runs if len(r) >= 4]
    logs = [x for x in centred if x.size >= MIN_IN_ORDER]
    if not logs and sum(x.size for x in centred) >= MIN_IN_ORDER:
        logs = [np.concatenate(centred)]
    if not logs:
        return None

    def go(rng: np.random.Generator, n: int, effect: float) -> np.ndarray:
        x = logs[rng.integers(len(logs))]
        start = int(rng.integers(x.size))
        return effect * np.exp(np.take(x, np.arange(start, start + n), mode="wrap"))
    return Noise(f"{name} in order", go)


def ar1(rho: float, sd: float) -> Noise:
    """Pair log ratios an AR(1) series (Gaussian, stationary sd): load that comes and goes."""
    def go(rng: np.random.Generator, n: int, effect: float) -> np.ndarray:
        e = rng.normal(0.0, sd * math.sqrt(1 - rho * rho), n)
        e[0] = rng.normal(0.0, sd)  # the stationary start
        return effect * np.exp(lfilter([1.0], [1.0, -rho], e))
    return Noise(f"AR(1) rho {rho:g}", go)


def _abba(run_log_times: np.ndarray, effect: float) -> np.ndarray:
    """Pair ratios from 2n run times in ABBA order (pair i: base then head when i is even)."""
    r = run_log_times.reshape(-1, 2)
    even = np.arange(r.shape[0]) % 2 == 0
    base = np.where(even, r[:, 0], r[:, 1])
    head = np.where(even, r[:, 1], r[:, 0])
    return effect * np.exp(head - base)


def drift(total: float, sd: float) -> Noise:
    """The machine slows steadily by `total` (log) over the run; each run's own noise sd/sqrt 2."""
    def go(rng: np.random.Generator, n: int, effect: float) -> np.ndarray:
        t = total * np.arange(2 * n) / (2 * n) + rng.normal(0.0, sd / math.sqrt(2), 2 * n)
        return _abba(t, effect)
    return Noise(f"drift {total * 100:g} %", go)


def bursts(slow: float, on: float, length: float, sd: float) -> Noise:
    """Background load that comes in bursts: a two-state chain over runs, loaded a fraction `on`
    of the time, bursts `length` runs long on average; a loaded run is `slow` (log) slower."""
    leave = 1.0 / length
    enter = leave * on / (1.0 - on)

    def go(rng: np.random.Generator, n: int, effect: float) -> np.ndarray:
        u = rng.random(2 * n)
        state = np.empty(2 * n, dtype=bool)
        state[0] = rng.random() < on
        for i in range(1, 2 * n):
            state[i] = (u[i] >= leave) if state[i - 1] else (u[i] < enter)
        return _abba(slow * state + rng.normal(0.0, sd / math.sqrt(2), 2 * n), effect)
    return Noise(f"bursts +{slow * 100:g} % {on * 100:g} % of runs", go)


def heavy(sd: float) -> Noise:
    return Noise("heavy tails t(3)", lambda rng, n, effect: effect * np.exp(sd * rng.standard_t(3, n)))


def skew(sd: float) -> Noise:
    """Skewed pair log ratios of median 0 (exponential minus its median)."""
    return Noise("skew", lambda rng, n, effect: effect * np.exp(sd * (rng.exponential(1.0, n) - math.log(2.0))))


def outliers(sd: float, share: float = 0.05, size: float = 0.5) -> Noise:
    """Gaussian pairs with a share of them `size` (log) off, either way."""
    def go(rng: np.random.Generator, n: int, effect: float) -> np.ndarray:
        x = rng.normal(0.0, sd, n)
        hit = rng.random(n) < share
        x[hit] += size * rng.choice([-1.0, 1.0], int(hit.sum()))
        return effect * np.exp(x)
    return Noise(f"outliers {share * 100:g} % ±{size * 100:g} %", go)


def hard_models(sd: float) -> list[Noise]:
    """The noise models that break independence or symmetry, at the H200's recorded spread."""
    return [*(ar1(r, sd) for r in (0.0, 0.2, 0.3, 0.5)), drift(0.2, sd), bursts(0.3, 0.3, 6.0, sd),
            heavy(sd), skew(sd), outliers(sd)]


@dataclass(frozen=True)
class Cell:
    noise: str
    effect: float
    workloads_: tuple[tuple[float, int], ...]  # (margin, budget) of each workload of the family
    runs: int
    verdicts: dict[str, int]  # over every workload of every run
    any_alarm: int  # runs where some workload was called regressed or improved
    median_pairs: float  # per workload
    median_family_pairs: float  # all workloads of one run
    by_workload: tuple[dict[str, int], ...] = ()  # verdict counts of each workload of the family

    @property
    def workloads(self) -> int:
        return self.runs * len(self.workloads_)

    def rate(self, verdict: str) -> float:
        return self.verdicts.get(verdict, 0) / self.workloads

    @property
    def false_alarm(self) -> float:
        """A compare's: the share of runs where any workload of the family was called changed."""
        return self.any_alarm / self.runs


def one_workload(ratios: np.ndarray, margin: float, alpha: float, block: int = BLOCK,
                 prior: float = PRIOR, runs: tuple[np.ndarray, np.ndarray] | None = None,
                 tail: Tail | None = None) -> Sequence:
    """One workload's sampling over these pair ratios (its budget), as workload.sequential runs it;
    with a tail, `runs` holds the base and head times the ratios came from."""
    seq = Sequence(margin, alpha, prior=prior)
    for start in range(0, ratios.size - block + 1, block):
        seq.add(list(ratios[start:start + block]))
        if tail is not None and runs is not None:
            tail.add(list(runs[0][start:start + block]), list(runs[1][start:start + block]))
        if stop(seq, block, ratios.size, tail):
            break
    return seq


def tail_only(sd: float, share: float = 0.1, slow: float = 0.25) -> Callable[[np.random.Generator, int],
                                                                              tuple[np.ndarray, np.ndarray]]:
    """Base and head times where only the head's tail is longer: `share` of its runs `slow` slower
    (a mean slowdown of share * slow), each run's own noise sd / sqrt 2."""
    def go(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        base = np.exp(rng.normal(0.0, sd / math.sqrt(2), n))
        head = np.exp(rng.normal(0.0, sd / math.sqrt(2), n) + slow * (rng.random(n) < share))
        return base, head
    return go


def tail_cells(sd: float, runs: int, seed: int, quantile: float = 0.9) -> list[list[str]]:
    """A slowdown of the tail only, judged without and with a tail (`tail: 0.9`); and A/A."""
    rows = []
    for share in (0.0, 0.1):
        gen = tail_only(sd, share)
        for with_tail in (False, True):
            rng = np.random.default_rng([seed, int(share * 100), with_tail])
            counts: Counter[str] = Counter()
            pairs = []
            for _ in range(runs):
                base, head = gen(rng, GPU_BUDGET)
                tail = Tail(quantile) if with_tail else None
                m = 1 + with_tail
                seq = one_workload(head / base, MARGIN, 0.05 / m, runs=(base, head), tail=tail)
                counts[judge([seq], 0.05, [tail])[0][0]] += 1
                pairs.append(seq.pairs)
            rows.append([f"head +25 % in {share * 100:g} % of runs" if share else "A/A",
                         f"p{quantile * 100:g} tail" if with_tail else "median only",
                         f"{counts['regressed'] / runs * 100:.1f} %", f"{counts['equivalent'] / runs * 100:.1f} %",
                         f"{float(np.median(pairs)):g}"])
    return rows


TAIL_HEADERS = ["noise (sd of the H200)", "judged by", "regressed", "equivalent", "median pairs"]


def simulate(noise: Noise, effect: float, runs: int, seed: int,
             workloads: tuple[tuple[float, int], ...] = ((MARGIN, GPU_BUDGET),), alpha: float = 0.05,
             block: int = BLOCK, prior: float = PRIOR) -> Cell:
    """`runs` simulated compares, each of its workloads (margin, budget) timed in turn, every one
    with the same true ratio, each interval at alpha/m and Holm at the end (as session.run_compare)."""
    rng = np.random.default_rng([seed, int(round(effect * 10000)), *(b for _, b in workloads), len(workloads)])
    counts: Counter[str] = Counter()
    each: list[Counter[str]] = [Counter() for _ in workloads]
    pairs, total, alarms = [], [], 0
    m = len(workloads)
    for _ in range(runs):
        seqs = [one_workload(noise.draw(rng, b, effect), mg, alpha / m, block, prior) for mg, b in workloads]
        got = [v for v, _, _ in judge(seqs, alpha)]
        counts.update(got)
        for e, v in zip(each, got, strict=True):
            e[v] += 1
        alarms += any(v in ("regressed", "improved") for v in got)
        pairs += [s.pairs for s in seqs]
        total.append(sum(s.pairs for s in seqs))
    return Cell(noise.name, effect, tuple(workloads), runs, dict(counts), alarms, float(np.median(pairs)),
                float(np.median(total)), tuple(dict(e) for e in each))


def _verdicts(c: Cell) -> str:
    return " ".join(f"{k[:3]} {c.verdicts.get(k, 0)}" for k in ("regressed", "improved", "equivalent", "inconclusive"))


def validity(noises: list[Noise], runs: int, seed: int) -> list[list[str]]:
    """False alarms of one compare (one workload) and of the GPU family at a true ratio of 1, and a
    wrong equivalent at twice the margin, on every noise model."""
    rows = []
    for nz in noises:
        one = simulate(nz, 1.0, runs, seed)
        fam = simulate(nz, 1.0, runs, seed, GPU_FAMILY)
        far = simulate(nz, 1.0 + 2 * MARGIN, runs, seed)
        rows.append([nz.name, f"{one.false_alarm * 100:.1f} %", f"{fam.false_alarm * 100:.1f} %",
                     f"{far.rate('equivalent') * 100:.1f} %", f"{one.median_pairs:g}", _verdicts(one)])
    return rows


VALIDITY_HEADERS = ["noise", "false alarm, one compare", f"false alarm, family of {len(GPU_FAMILY)}",
                    "wrong equivalent at +4 %", "median pairs (A/A)", "verdicts, one compare (A/A)"]

DESIGNS = (("one sign per pair, prior 10 (before)", 1, 10.0), ("median of each ABBA block, prior 10 (chosen)", 4, 10.0),
           ("median of each ABBA block, prior 5", 4, 5.0), ("median of 2 ABBA blocks, prior 5", 8, 5.0))


def design(sd: float, runs: int, seed: int) -> list[list[str]]:
    """The candidate designs at independent and at AR(1) rho 0.5 pairs: false alarms of one compare
    and of the GPU family, power at +2 % (one workload) and its median pairs."""
    rows = []
    for name, block, prior in DESIGNS:
        row = [name]
        for rho in (0.0, 0.5):
            nz = ar1(rho, sd)
            null = simulate(nz, 1.0, runs, seed, block=block, prior=prior)
            fam = simulate(nz, 1.0, runs, seed, GPU_FAMILY, block=block, prior=prior)
            slow = simulate(nz, 1.0 + MARGIN, runs, seed, block=block, prior=prior)
            row += [f"{null.false_alarm * 100:.1f} / {fam.false_alarm * 100:.1f} %",
                    f"{slow.rate('regressed') * 100:.1f} %", f"{slow.median_pairs:g}"]
        rows.append(row)
    return rows


DESIGN_HEADERS = ["design", "rho 0: false alarm, one / family", "power +2 %", "pairs",
                  "rho 0.5: false alarm, one / family", "power +2 %", "pairs"]


def power(noises: list[Noise], families: dict[str, tuple[tuple[float, int], ...]], runs: int,
          seed: int) -> list[list[str]]:
    """Power of the family as it runs: every workload slowed by the same true ratio; found and
    called equivalent for the workloads of each margin, pairs of the whole family."""
    rows = []
    for nz in noises:
        fam = families[nz.name]
        for effect in (1.01, 1.02, 1.03):
            c = simulate(nz, effect, runs, seed, fam)
            for mg in sorted({m for m, _ in fam}, reverse=True):
                idx = [i for i, (m, _) in enumerate(fam) if m == mg]
                n = runs * len(idx)
                found = sum(c.by_workload[i].get("regressed", 0) for i in idx) / n
                equiv = sum(c.by_workload[i].get("equivalent", 0) for i in idx) / n
                rows.append([nz.name, ", ".join(f"±{m * 100:g} % ({b})" for m, b in fam), f"{effect:g}",
                             f"±{mg * 100:g} % (×{len(idx)})", f"{found * 100:.1f} %", f"{equiv * 100:.1f} %",
                             f"{c.median_family_pairs:g}"])
    return rows


POWER_HEADERS = ["noise", "family: margin (budget pairs)", "true ratio", "workloads", "found (regressed)",
                 "called equivalent", "median pairs, family"]


def compare_runs(report: dict) -> list[list[float]]:
    """The pair ratios of each timed workload of a compare report.json (an A/A run: HEAD HEAD)."""
    return [[p["ratio"] for p in w["pair_log"]] for w in report.get("workloads", []) if w.get("pair_log")]


def record(data: Path, name: str, reports: list[Path], note: str) -> int:
    doc = json.loads(data.read_text(encoding="utf-8")) if data.exists() else {"shapes": {}}
    runs = [r for p in reports for r in compare_runs(json.loads(p.read_text(encoding="utf-8")))]
    shape_from_runs(name, runs)  # refuses an empty or degenerate shape
    doc["shapes"][name] = {"note": note, "runs": runs}
    data.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return len(runs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.compare.calibrate", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, nargs="+", default=[DEFAULT_DATA, COMPARE_DATA],
                   help="recorded A/A pairs (JSON files; --record writes the last)")
    p.add_argument("--runs", type=int, default=1000, help="simulated compares per cell (default 1000)")
    p.add_argument("--seed", type=int, default=20261202, help="simulation seed (default 20261202)")
    p.add_argument("--tables", nargs="+", choices=("validity", "design", "power", "tail"),
                   default=["validity", "design", "power", "tail"])
    p.add_argument("--record", metavar="NAME", help="store the pair ratios of compare --reports as noise NAME")
    p.add_argument("--reports", type=Path, nargs="+", default=[], metavar="REPORT_JSON")
    p.add_argument("--note", default="", help="with --record: where the pairs come from")
    args = p.parse_args(argv)
    if args.record:
        n = record(args.data[-1], args.record, args.reports, args.note)
        print(f"noise {args.record}: {n} A/A runs stored in {args.data[-1]}")
        return 0
    docs = {path: json.loads(path.read_text(encoding="utf-8"))["shapes"] for path in args.data}
    shapes = {s.name: s for path in args.data for s in load_shapes(path)}
    sd = float(np.median(shapes["h200"].scales))  # the H200's recorded pair spread sets the models' scale
    # compare runs (every file but verify's floors) also drawn in order: their pairs ran back to back
    ordered = [nz for path, d in docs.items() if path != DEFAULT_DATA for name, s in d.items()
               if (nz := in_order(name, s["runs"]))]
    recorded_noise = [recorded(s) for s in shapes.values()] + ordered
    print(f"seed {args.seed}, {args.runs} simulated compares a cell; models at the H200's recorded pair spread "
          f"(robust sd of the log ratio {sd:.4f}); budget {GPU_BUDGET} pairs (GPU) / {CPU_BUDGET} (CPU)\n")
    if "validity" in args.tables:
        print(_table(validity(hard_models(sd) + recorded_noise, args.runs, args.seed), VALIDITY_HEADERS) + "\n")
    if "design" in args.tables:
        print(_table(design(sd, args.runs, args.seed), DESIGN_HEADERS) + "\n")
    if "power" in args.tables:
        fam = {nz.name: GPU_FAMILY if nz.name == "h200" else CPU_FAMILY for nz in recorded_noise}
        print(_table(power(recorded_noise, fam, args.runs, args.seed), POWER_HEADERS) + "\n")
    if "tail" in args.tables:
        print(_table(tail_cells(sd, args.runs, args.seed), TAIL_HEADERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
