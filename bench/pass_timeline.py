#!/usr/bin/env python3
"""Where a GPU decode step's time goes, op by op, from the timeline the CUDA module writes.

Build the module with the diagnostic on, run M=1 steps with the file named, then read it:

    cmake -S native/cuda -B build/timeline/cuda -G Ninja -DKITE_CUDA_TIMELINE=ON \\
          -DKITE_OUTPUT_DIR=$PWD/build/timeline/bin && cmake --build build/timeline/cuda
    cp build/default/bin/kite build/timeline/bin/
    KITE_CUDA_TIMELINE=steps.txt build/timeline/bin/kite run --model M.gguf --prompt 1,2,3 --steps 64
    python3 bench/pass_timeline.py steps.txt [--skip 4] [--ops]

Each line of the file is one op of one step (native/cuda/timeline.cu): step, op index, kind,
blocks x y z, threads, MT and RPW (gemvs), then the earliest block start, the earliest release of
a PDL wait (all ones: no thread 0 waited) and the latest warp end, in ns of %globaltimer.

An op's share of the step runs from the previous op's last warp to its own last warp, so the
shares add up to the step. For each op the median over the steps (the first --skip left out) is
taken, then the ops are summed by kind and blocks. Printed as Markdown: the step's span, a row a
group (ops, us of the step, us an op, first block start -> previous end: how long before the op
before it ended the op had a block running, its lookahead; previous end -> wait released, wait
released -> end), with --ops a row per op, and with --layers each layer kind's chain: the ops of
a layer, from its norm to its down product (the op after gate/up), each op's median share over
the layers of that kind, and the layer's total.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

NO_WAIT = 2**64 - 1


@dataclass(frozen=True)
class OpTimes:
    step: int
    index: int
    kind: str
    blocks: int
    threads: int
    mt: int
    rpw: int
    start: int
    wait: int  # NO_WAIT: no thread 0 of the op waited
    end: int

    @property
    def group(self) -> str:
        instance = f" <{self.mt}, {self.rpw}>" if self.kind == "gemv" else ""
        return f"{self.kind}{instance} ({self.blocks} blocks)"


@dataclass(frozen=True)
class OpShare:
    """One op's medians over the steps, in us."""

    index: int
    group: str
    share: float  # previous op's end -> this op's end
    ahead: float  # this op's first block start -> the previous op's end (> 0: it started before)
    to_wait: float | None  # previous op's end -> this op's first wait release
    after_wait: float | None  # first wait release -> this op's end


def parse(lines: list[str]) -> list[OpTimes]:
    ops = []
    for n, line in enumerate(lines, 1):
        f = line.split()
        if not f:
            continue
        if len(f) != 12:
            raise ValueError(f"line {n}: {len(f)} fields, 12 expected")
        try:
            step, index = int(f[0]), int(f[1])
            x, y, z, threads, mt, rpw = (int(v) for v in f[3:9])
            start, wait, end = (int(v) for v in f[9:12])
        except ValueError as e:
            raise ValueError(f"line {n}: {e}") from None
        ops.append(OpTimes(step, index, f[2], x * y * z, threads, mt, rpw, start, wait, end))
    return ops


def by_step(ops: list[OpTimes]) -> dict[int, list[OpTimes]]:
    steps: dict[int, list[OpTimes]] = {}
    for o in ops:
        steps.setdefault(o.step, []).append(o)
    return {s: sorted(v, key=lambda o: o.index) for s, v in sorted(steps.items())}


def spans(steps: dict[int, list[OpTimes]]) -> list[float]:
    """Each step's first block start to its last warp end, us."""
    return [(max(o.end for o in v) - v[0].start) / 1000 for v in steps.values()]


def shares(steps: dict[int, list[OpTimes]]) -> list[OpShare]:
    """Per op (the first op of a step has no previous end and is left out): median over steps."""
    per: dict[int, list[tuple[float, float, float | None, float | None]]] = {}
    group: dict[int, str] = {}
    for v in steps.values():
        for prev, o in zip(v, v[1:], strict=False):
            waited = o.wait != NO_WAIT
            per.setdefault(o.index, []).append(
                (
                    (o.end - prev.end) / 1000,
                    (prev.end - o.start) / 1000,
                    (o.wait - prev.end) / 1000 if waited else None,
                    (o.end - o.wait) / 1000 if waited else None,
                )
            )
            group[o.index] = o.group
    out = []
    for i, rows in sorted(per.items()):
        waits = [r[2] for r in rows if r[2] is not None]
        afters = [r[3] for r in rows if r[3] is not None]
        out.append(
            OpShare(
                i,
                group[i],
                statistics.median(r[0] for r in rows),
                statistics.median(r[1] for r in rows),
                statistics.median(waits) if waits else None,
                statistics.median(afters) if afters else None,
            )
        )
    return out


@dataclass(frozen=True)
class GroupRow:
    group: str
    ops: int
    total: float
    ahead: float  # mean over the group's ops
    to_wait: float | None  # mean over the group's ops
    after_wait: float | None


def groups(op_shares: list[OpShare]) -> list[GroupRow]:
    """Ops summed by group, largest share of the step first."""
    rows: dict[str, list[OpShare]] = {}
    for s in op_shares:
        rows.setdefault(s.group, []).append(s)

    def mean(vals: list[float | None]) -> float | None:
        got = [v for v in vals if v is not None]
        return sum(got) / len(got) if got else None

    out = [
        GroupRow(g, len(v), sum(s.share for s in v), sum(s.ahead for s in v) / len(v), mean([s.to_wait for s in v]),
                 mean([s.after_wait for s in v]))
        for g, v in rows.items()
    ]
    return sorted(out, key=lambda r: -r.total)


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def layers(op_shares: list[OpShare]) -> dict[str, list[list[OpShare]]]:
    """The ops of each layer by kind (deltanet or attention): a layer ends with the op after its
    gate/up product (the down product); the LM head's ops belong to no layer."""
    out: dict[str, list[list[OpShare]]] = {}
    cur: list[OpShare] = []
    for prev, s in zip([None, *op_shares], op_shares, strict=False):
        cur.append(s)
        if prev is not None and prev.group.startswith("gemv_glu"):
            kind = "deltanet" if any(o.group.startswith("deltanet") for o in cur) else "attention"
            out.setdefault(kind, []).append(cur)
            cur = []
    return out


def layer_lines(op_shares: list[OpShare]) -> list[str]:
    lines = []
    for kind, ls in layers(op_shares).items():
        n = min(len(x) for x in ls)
        lines += ["", f"A {kind} layer ({len(ls)} layers; medians over them, us): "
                  f"{statistics.median(sum(o.share for o in x) for x in ls):.2f}", "",
                  "| op | us | first block start -> previous end | previous end -> wait released | wait released -> end |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for i in range(n):
            col = [x[i] for x in ls]
            waits = [o.to_wait for o in col if o.to_wait is not None]
            afters = [o.after_wait for o in col if o.after_wait is not None]
            lines.append(f"| {col[0].group} | {statistics.median(o.share for o in col):.2f} | "
                         f"{statistics.median(o.ahead for o in col):.2f} | "
                         f"{_us(statistics.median(waits) if waits else None)} | "
                         f"{_us(statistics.median(afters) if afters else None)} |")
    return lines


def kept_steps(ops: list[OpTimes], skip: int) -> tuple[dict[int, list[OpTimes]], int]:
    """The steps after the first `skip` (warm-up), and how many steps there were in all."""
    steps = by_step(ops)
    kept = {s: v for n, (s, v) in enumerate(steps.items()) if n >= skip}
    if not kept:
        raise ValueError(f"{len(steps)} steps in the file, all left out by --skip {skip}")
    return kept, len(steps)


def report(ops: list[OpTimes], skip: int, per_op: bool, per_layer: bool = False) -> str:
    kept, total = kept_steps(ops, skip)
    op_shares = shares(kept)
    rows = groups(op_shares)
    lines = [
        f"Steps: {len(kept)} (first {skip} of {total} left out); span of a step, median: "
        f"{statistics.median(spans(kept)):.1f} us; the shares below add up to "
        f"{sum(r.total for r in rows):.1f} us.",
        "",
        "| op | ops | us of the step | us an op | first block start -> previous end | previous end -> wait "
        "released | wait released -> end |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.group} | {r.ops} | {r.total:.1f} | {r.total / r.ops:.2f} | {r.ahead:.2f} | {_us(r.to_wait)} | "
            f"{_us(r.after_wait)} |"
        )
    if per_op:
        lines += [
            "",
            "| op | group | us | first block start -> previous end | previous end -> wait released | wait released "
            "-> end |",
            "| ---: | --- | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {s.index} | {s.group} | {s.share:.2f} | {s.ahead:.2f} | {_us(s.to_wait)} | {_us(s.after_wait)} |"
            for s in op_shares
        ]
    if per_layer:
        lines += layer_lines(op_shares)
    return "\n".join(lines) + "\n"


def table_arguments(ap: argparse.ArgumentParser) -> None:
    """The report's options (--skip, --ops, --layers), shared with bench/nsys_timeline.py."""
    ap.add_argument("--skip", type=int, default=4, help="steps left out at the start (warm-up)")
    ap.add_argument("--ops", action="store_true", help="also a row per op")
    ap.add_argument("--layers", action="store_true", help="also each layer kind's chain, op by op")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path, help="the file KITE_CUDA_TIMELINE named")
    table_arguments(ap)
    args = ap.parse_args(argv)
    try:
        text = args.file.read_text(encoding="utf-8")
        sys.stdout.write(report(parse(text.splitlines()), args.skip, args.ops, args.layers))
    except (OSError, ValueError) as e:
        print(f"pass_timeline: {args.file}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
