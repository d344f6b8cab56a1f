"""Calibration of the sequential compare: seeded simulations of whole compares (blocks, looks, stop
rule, budget, Holm with one workload) on recorded A/A noise (bench/data/aa_pairs.json, the noise
model of harness/tools/calibrate_ab.py) with a true ratio planted. Per cell it counts each verdict:
a false alarm is regressed or improved at a true ratio of 1; power is regressed at a true
slowdown; a wrong "equivalent" is equivalent at a true change of twice the margin.

    python -m harness.compare.calibrate [--runs 1000] [--seed 20261202]
    python -m harness.compare.calibrate --record NAME --reports DIR/report.json ... --note TEXT

Noise: the shapes of bench/data/aa_pairs.json (verify's A/A floors) and of
bench/data/compare_aa_pairs.json (A/A compares of a revision against itself, --record).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.compare.sequential import Sequence, final_verdict
from harness.report.document import _table
from harness.tools.calibrate_ab import DEFAULT_DATA, NoiseShape, draw, load_shapes, shape_from_runs

COMPARE_DATA = DEFAULT_DATA.with_name("compare_aa_pairs.json")
MARGIN = 0.02
BLOCK = 4
# budget (pairs) per noise shape: the GPU workloads' budget for the H200, the CPU ones' for the CPU
BUDGETS = {"h200": 400}
CPU_BUDGET = 200


@dataclass(frozen=True)
class Cell:
    shape: str
    effect: float
    budget: int
    runs: int
    verdicts: dict[str, int]
    median_pairs: float

    def rate(self, verdict: str) -> float:
        return self.verdicts.get(verdict, 0) / self.runs

    @property
    def false_alarm(self) -> float:
        return self.rate("regressed") + self.rate("improved")


def one_compare(ratios: np.ndarray, margin: float, alpha: float, block: int) -> tuple[str, int]:
    """The verdict and pairs used of one simulated compare over these pair ratios (its budget)."""
    seq = Sequence(margin, alpha)
    for start in range(0, ratios.size - block + 1, block):
        seq.add(list(ratios[start:start + block]))
        if seq.decided() is not None:
            break
    return final_verdict(seq, seq.p_value <= alpha), seq.pairs


def simulate(shape: NoiseShape, effect: float, budget: int, runs: int, seed: int, margin: float = MARGIN,
             alpha: float = 0.05, block: int = BLOCK) -> Cell:
    rng = np.random.default_rng([seed, int(round(effect * 10000)), budget])
    counts: Counter[str] = Counter()
    pairs = []
    for _ in range(runs):
        verdict, n = one_compare(draw(rng, shape, budget, effect), margin, alpha, block)
        counts[verdict] += 1
        pairs.append(n)
    return Cell(shape.name, effect, budget, runs, dict(counts), float(np.median(pairs)))


def calibrate(shapes: list[NoiseShape], runs: int, seed: int, margin: float = MARGIN) -> list[Cell]:
    effects = (1.0, 1.0 + margin, 1.0 + 2 * margin)
    return [simulate(s, e, BUDGETS.get(s.name, CPU_BUDGET), runs, seed, margin) for s in shapes for e in effects]


def table(cells: list[Cell]) -> tuple[list[list[str]], list[str]]:
    rows = []
    for c in cells:
        what = ("false alarm", c.false_alarm) if c.effect == 1.0 else \
            ("power (regressed)", c.rate("regressed")) if c.effect < 1.0 + 2 * MARGIN - 1e-9 else \
            ("wrong equivalent", c.rate("equivalent"))
        rows.append([c.shape, f"{c.effect:g}", str(c.budget), str(c.runs), what[0], f"{what[1] * 100:.1f} %",
                     " ".join(f"{k} {c.verdicts.get(k, 0)}" for k in ("regressed", "improved", "equivalent",
                                                                       "inconclusive")),
                     f"{c.median_pairs:g}"])
    return rows, ["noise", "true ratio", "budget", "runs", "measures", "rate", "verdicts", "median pairs"]


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
    p.add_argument("--record", metavar="NAME", help="store the pair ratios of compare --reports as noise NAME")
    p.add_argument("--reports", type=Path, nargs="+", default=[], metavar="REPORT_JSON")
    p.add_argument("--note", default="", help="with --record: where the pairs come from")
    args = p.parse_args(argv)
    if args.record:
        n = record(args.data[-1], args.record, args.reports, args.note)
        print(f"noise {args.record}: {n} A/A runs stored in {args.data[-1]}")
        return 0
    shapes = [s for path in args.data for s in load_shapes(path)]
    rows, headers = table(calibrate(shapes, args.runs, args.seed))
    print(_table(rows, headers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
