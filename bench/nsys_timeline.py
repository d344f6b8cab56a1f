#!/usr/bin/env python3
"""Where a GPU decode step's time goes, op by op, from an Nsight Systems trace of the shipped module.

The timeline build (bench/pass_timeline.py) adds atomics to every kernel and is compiled apart;
this reads the shipped build as CUPTI records it, with nothing added to the kernels (probe P12 of
docs/PERFORMANCE.md; scripts/gpu-nsys.sh runs it):

    nsys profile --cuda-graph-trace=node -t cuda -o p12 build/default/bin/kite run --model M.gguf \\
        --prompt 1,...,64 --steps 64
    nsys stats --report cuda_gpu_trace --format csv --output p12 p12.nsys-rep
    python3 bench/nsys_timeline.py p12_cuda_gpu_trace.csv [--skip 4] [--ops] [--layers]

Each kernel row becomes one op of pass_timeline's table (its kind from the kernel's name, its
blocks from the grid, a gemv's <MT, RPW> from its template arguments), with no wait release (the
trace has none). A pass starts at each `k_embed`; the M=1 decode steps are the passes whose kernel
sequence is the most common one (the prompt's M-row passes differ). The report is
pass_timeline's, with one line more: the step's span against the sum of its layers and the ops
outside them, which the probe's reading asks to agree within 5 % before a choice leans on it.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

from pass_timeline import NO_WAIT, OpTimes, by_step, kept_steps, layers, report, shares, table_arguments

# kernel name -> the timeline build's op kind (native/cuda/timeline.cu's op_name)
KINDS = {
    "k_embed": "embed",
    "k_act": "act",
    "k_actq": "actq",
    "k_gemv": "gemv",
    "k_gemv_wide": "gemv",
    "k_gemv_glu": "gemv_glu",
    "k_gemv_glu_early": "gemv_glu",
    "k_lm_head": "lm_head",
    "k_deltanet": "deltanet",
    "k_deltanet_head": "deltanet_head",
    "k_qkprep": "qkprep",
    "k_attn_scores": "scores",
    "k_attn_values": "values",
}
# gemv kernels whose <MT, RPW> is fixed, not in their name (native/cuda/matvec.cu)
FIXED_INSTANCE = {"k_gemv_wide": (1, 8)}
AGREE = 0.05  # the probe's reading: layer sums within 5 % of the step's span


def _column(header: list[str], prefix: str) -> int:
    for i, h in enumerate(header):
        if h.strip().startswith(prefix):
            return i
    raise ValueError(f"no column starting {prefix!r} in the header: {', '.join(header)}")


def kernel_kind(name: str) -> tuple[str, int, int]:
    """(kind, MT, RPW) of a kernel as nsys names it ("void k_gemv<1, 4, false>(GemvArgs)", or
    "k_gemv<(int)1, (int)4, (bool)0>"); ValueError for a kernel the pass does not launch."""
    m = re.match(r"\s*(?:void\s+)?(\w+)", name)
    base = m.group(1) if m else ""
    if base not in KINDS:
        raise ValueError(f"kernel {name!r} is not an op of the pass")
    mt, rpw = FIXED_INSTANCE.get(base, (0, 0))
    if base == "k_gemv":
        t = re.match(r"\s*(?:void\s+)?k_gemv<[^0-9,>]*(\d+)[^0-9,>]*,[^0-9,>]*(\d+)", name)
        if not t:
            raise ValueError(f"kernel {name!r}: no <MT, RPW> in its name")
        mt, rpw = int(t.group(1)), int(t.group(2))
    return KINDS[base], mt, rpw


def parse(text: str) -> list[OpTimes]:
    """The kernels of the trace (memory copies and sets left out) as ops, numbered by pass."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith('"Start') or line.startswith("Start")), None)
    if at is None:
        raise ValueError("no cuda_gpu_trace header (a line starting with Start) in the file")
    rows = list(csv.reader(io.StringIO("\n".join(lines[at:]))))
    header, body = rows[0], rows[1:]
    c_start, c_dur = _column(header, "Start"), _column(header, "Duration")
    c_gx, c_gy, c_gz = _column(header, "GrdX"), _column(header, "GrdY"), _column(header, "GrdZ")
    c_bx, c_name = _column(header, "BlkX"), _column(header, "Name")
    kernels = []
    for n, r in enumerate(body, at + 2):
        if len(r) <= c_name:
            continue
        if not r[c_gx].strip():  # a memory copy or set
            continue
        try:
            start, dur = int(float(r[c_start])), int(float(r[c_dur]))
            blocks = int(r[c_gx]) * int(r[c_gy]) * int(r[c_gz])
            threads = int(r[c_bx])
            kind, mt, rpw = kernel_kind(r[c_name])
        except ValueError as e:
            raise ValueError(f"line {n}: {e}") from None
        kernels.append((start, start + dur, kind, blocks, threads, mt, rpw))
    kernels.sort()
    ops, step, index = [], -1, 0
    for start, end, kind, blocks, threads, mt, rpw in kernels:
        if kind == "embed":
            step, index = step + 1, 0
        if step < 0:
            continue  # kernels before the first pass (none in kite's run)
        ops.append(OpTimes(step, index, kind, blocks, threads, mt, rpw, start, NO_WAIT, end))
        index += 1
    return ops


def decode_steps(ops: list[OpTimes]) -> list[OpTimes]:
    """The ops of the passes whose kernel sequence is the most common one, renumbered from 0."""
    steps = by_step(ops)
    seqs = {s: tuple(o.group for o in v) for s, v in steps.items()}
    if not seqs:
        raise ValueError("no pass (no k_embed kernel) in the trace")
    common, _ = Counter(seqs.values()).most_common(1)[0]
    kept = [s for s in steps if seqs[s] == common]
    out = []
    for n, s in enumerate(kept):
        out += [OpTimes(n, o.index, o.kind, o.blocks, o.threads, o.mt, o.rpw, o.start, o.wait, o.end) for o in steps[s]]
    return out


def agreement(ops: list[OpTimes], skip: int) -> str:
    """The probe's check: the layers' sums and the ops outside them against the step's span."""
    kept, _ = kept_steps(ops, skip)
    op_shares = shares(kept)
    in_layers = sum(sum(o.share for o in layer) for ls in layers(op_shares).values() for layer in ls)
    layer_ops = {o.index for ls in layers(op_shares).values() for layer in ls for o in layer}
    outside = sum(o.share for o in op_shares if o.index not in layer_ops)
    first = statistics.median(v[0].end - v[0].start for v in kept.values()) / 1000
    span = statistics.median((max(o.end for o in v) - v[0].start) / 1000 for v in kept.values())
    total = in_layers + outside + first
    off = abs(total - span) / span
    verdict = "agree" if off <= AGREE else "do not agree"
    return (f"Layers {in_layers:.1f} us + ops outside them {outside:.1f} us + the first op {first:.1f} us = "
            f"{total:.1f} us against the step's span {span:.1f} us: {100 * off:.1f} % apart, they {verdict} "
            f"within {100 * AGREE:.0f} %.\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path, help="the CSV of nsys stats --report cuda_gpu_trace --format csv")
    table_arguments(ap)  # --skip counts decode steps here
    args = ap.parse_args(argv)
    try:
        ops = decode_steps(parse(args.file.read_text(encoding="utf-8")))
        sys.stdout.write(report(ops, args.skip, args.ops, args.layers))
        sys.stdout.write("\n" + agreement(ops, args.skip))
    except (OSError, ValueError) as e:
        print(f"nsys_timeline: {args.file}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
