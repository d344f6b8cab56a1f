"""Calibration of the A/B timing interval: a seeded simulation of A/A runs and of runs with a small
true effect, their pair noise shaped like recorded A/A pairs. Per interval method it counts how
often the 95% CI excludes 1 (a false alarm on A/A, the power with an effect) and how often it covers
the true ratio.

Noise model: a simulated run takes the spread of one recorded run (the robust scale of its log
ratios, drawn at random) times residuals drawn from all recorded runs' standardised log-ratio
residuals, pooled and mirrored (in A/A, A and B are interchangeable, so log ratios are symmetric).

    python -m harness.tools.calibrate_ab [--runs 1000] [--pairs 10 20] [--seed 20261201]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence

import numpy as np

from harness.report.document import _table
from harness.run import timing

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "aa_pairs.json"
MAD_TO_SD = 1.4826  # MAD of a normal sample times this estimates its standard deviation


@dataclass(frozen=True)
class NoiseShape:
    name: str
    scales: np.ndarray  # robust scale of the log ratios, one per recorded run
    residuals: np.ndarray  # standardised log-ratio residuals of all runs, mirrored
    runs: int
    pairs: int


def robust_scale(log_ratios: np.ndarray) -> float:
    return float(MAD_TO_SD * np.median(np.abs(log_ratios - np.median(log_ratios))))


def shape_from_runs(name: str, runs: Sequence[Sequence[float]]) -> NoiseShape:
    """A noise shape from recorded A/A runs (each a list of per-pair ratios)."""
    scales, residuals = [], []
    for ratios in runs:
        lr = np.log(np.asarray(ratios, dtype=np.float64))
        s = robust_scale(lr)
        if lr.size < 4 or s <= 0:
            continue  # too few pairs, or all identical: no spread to learn from
        scales.append(s)
        residuals.append((lr - np.median(lr)) / s)
    if not scales:
        raise ValueError(f"noise shape {name!r}: no recorded run with 4 or more distinct pairs")
    res = np.concatenate(residuals)
    return NoiseShape(name, np.asarray(scales), np.concatenate([res, -res]), len(scales), int(res.size))


def load_shapes(path: Path) -> list[NoiseShape]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [shape_from_runs(name, s["runs"]) for name, s in doc["shapes"].items()]


def aa_runs(report: dict, whole_ab: bool = False) -> list[list[float]]:
    """The A/A pair ratios of a report.json: each A/B result's noise floor, or (whole_ab) the pairs of
    A/B results whose two sides are the same command (an A/A criterion)."""
    out = []
    for r in report.get("results", []):
        d = r.get("details") or {}
        if r.get("kind") != "ab_timing":
            continue
        if (d.get("noise_floor") or {}).get("pairs"):
            out.append([p["ratio"] for p in d["noise_floor"]["pairs"]])
        elif whole_ab and d.get("pairs"):
            out.append([p["ratio"] for p in d["pairs"]])
    return out


def record(data: Path, name: str, reports: list[Path], whole_ab: bool, note: str) -> int:
    """Add (or replace) a noise shape in the data file from the A/A pairs of report.json files."""
    doc = json.loads(data.read_text(encoding="utf-8")) if data.exists() else {"shapes": {}}
    runs = []
    for rp in reports:
        runs += aa_runs(json.loads(rp.read_text(encoding="utf-8")), whole_ab)
    shape_from_runs(name, runs)  # refuses an empty or degenerate shape
    doc["shapes"][name] = {"note": note, "runs": runs}
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return len(runs)


def draw(rng: np.random.Generator, shape: NoiseShape, pairs: int, effect: float) -> np.ndarray:
    """Per-pair ratios of one simulated run whose true median ratio is `effect`."""
    scale = shape.scales[rng.integers(shape.scales.size)]
    z = shape.residuals[rng.integers(shape.residuals.size, size=pairs)]
    return effect * np.exp(scale * z)


@dataclass(frozen=True)
class Cell:
    shape: str
    pairs: int
    effect: float
    method: str
    runs: int
    above: int  # CI lower bound above 1: "A slower than B" declared
    below: int  # CI upper bound below 1
    covered: int  # CI holds the true ratio

    @property
    def excludes_one(self) -> float:
        return (self.above + self.below) / self.runs

    @property
    def coverage(self) -> float:
        return self.covered / self.runs

    @property
    def power(self) -> float:
        return self.above / self.runs


def simulate(shape: NoiseShape, pairs: int, effect: float, method: str, runs: int, seed: int,
             confidence: float = 0.95, resamples: int = 2000) -> Cell:
    """`runs` simulated runs; the same seed gives the same data to every method."""
    interval = timing.INTERVALS[method]
    rng = np.random.default_rng([seed, pairs, int(round(effect * 10000))])
    above = below = covered = 0
    for i in range(runs):
        st = interval(draw(rng, shape, pairs, effect), confidence, resamples, i)
        above += st.ci_lower > 1.0
        below += st.ci_upper < 1.0
        covered += st.ci_lower <= effect <= st.ci_upper
    return Cell(shape.name, pairs, effect, method, runs, above, below, covered)


def calibrate(shapes: list[NoiseShape], pairs: Sequence[int], effects: Sequence[float], methods: Sequence[str],
              runs: int, seed: int, resamples: int = 2000) -> list[Cell]:
    return [simulate(s, n, e, m, runs, seed, resamples=resamples)
            for s in shapes for n in pairs for e in effects for m in methods]


def table(cells: list[Cell]) -> tuple[list[list[str]], list[str]]:
    rows = []
    for c in cells:
        what = "false alarm" if c.effect == 1.0 else "power"
        rate = c.excludes_one if c.effect == 1.0 else c.power
        rows.append([c.shape, str(c.pairs), f"{c.effect:g}", c.method, str(c.runs), what, f"{rate * 100:.1f}%",
                     f"{c.above}/{c.below}", f"{c.coverage * 100:.1f}%"])
    return rows, ["noise", "pairs", "true ratio", "interval", "runs", "measures", "rate", "CI>1 / CI<1",
                  "coverage"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.tools.calibrate_ab", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="recorded A/A pairs (JSON)")
    p.add_argument("--runs", type=int, default=1000, help="simulated runs per cell (default 1000)")
    p.add_argument("--pairs", type=int, nargs="+", default=[10, 20], help="pairs per run (default 10 20)")
    p.add_argument("--effects", type=float, nargs="+", default=[1.0, 1.01, 1.03],
                   help="true ratios (default 1 1.01 1.03)")
    p.add_argument("--methods", nargs="+", default=list(timing.INTERVALS), choices=list(timing.INTERVALS))
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=20261201, help="simulation seed (default 20261201)")
    p.add_argument("--record", metavar="NAME", help="instead of simulating, store the A/A pairs of --reports "
                   "in --data as noise shape NAME")
    p.add_argument("--reports", type=Path, nargs="+", default=[], metavar="REPORT_JSON")
    p.add_argument("--whole-ab", action="store_true", help="with --record: A/B results whose sides are the same "
                   "command count as A/A runs")
    p.add_argument("--note", default="", help="with --record: where the pairs come from")
    args = p.parse_args(argv)
    if args.record:
        n = record(args.data, args.record, args.reports, args.whole_ab, args.note)
        print(f"noise {args.record}: {n} A/A runs stored in {args.data}")
        return 0
    shapes = load_shapes(args.data)
    for s in shapes:
        print(f"noise {s.name}: {s.runs} recorded runs, {s.pairs} pairs; log-ratio scale per run "
              f"median {np.median(s.scales):.3f} (min {s.scales.min():.3f}, max {s.scales.max():.3f})")
    cells = calibrate(shapes, args.pairs, args.effects, args.methods, args.runs, args.seed, args.resamples)
    rows, headers = table(cells)
    print(_table(rows, headers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
