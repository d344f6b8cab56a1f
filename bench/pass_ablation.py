#!/usr/bin/env python3
"""What each group of ops costs in the GPU decode step, measured by leaving it out (probe P8).

A module built with KITE_CUDA_ABLATION=ON drops from every pass the ops of the groups that
KITE_CUDA_ABLATE names (native/cuda/ablation.cu); its outputs are then wrong, so nothing here is
judged on bytes. Its kernels are the shipped ones, unlike the timeline build's
(bench/pass_timeline.py), whose atomics at every block's start and every warp's end lengthen the
ops of many blocks. The step without a group, against the step with all of it in the same round,
is what the group costs as the pass runs: the most that any change to those ops could gain.

    cmake -S native/cuda -B build/ablation/cuda -G Ninja -DKITE_CUDA_ABLATION=ON \\
          -DKITE_OUTPUT_DIR=$PWD/build/ablation/bin && cmake --build build/ablation/cuda
    python3 bench/pass_ablation.py --kite build/default/bin/kite \\
        --module build/ablation/bin/libkite_cuda.so --model M.gguf --md ablation.md

Each round runs the shipped module (--base-module, default: the one beside --kite), the ablation
module with nothing left out ("all"), then each variant (a group, or groups joined by +), in an
order that reverses from one round to the next. A run is `kite run` with the CUDA graph on (M=1
decode steps); its step is the median over --iters of the decode window / steps, less the host's
greedy pick a step (timings.step_greedy_ms): a pass that computes wrong logits can change what the
pick costs, and the pick is not the device's. In each round a variant's saving is step(all) -
step(variant). The module's line on stderr gives the ops it left out and their weight bytes; with
the device copy's speed measured in the same run (torch, as bench/gpu_decode.py), the bytes' time
at that speed is the part of a saving that no change to the ops can remove, and the rest is the
saving beyond the bytes. The table gives the medians over the rounds and their range; "all" over
the shipped module says whether the ablation build runs as the shipped one does. A pass left with
non-finite values takes the slow paths of the module's IEEE division and square root (the SASS
calls them for such operands), so the last step's non-finite logits (the run's meta) are given
for each variant: its saving may be understated.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_decode import Engine, bench_prompt, checked_counters, copy_bandwidth, run_engine_captured  # noqa: E402

# the groups of native/cuda/ablation.cu, in the pass's order
GROUPS = ("embed", "norm", "dn_in", "dn_head", "dn_out", "att_qkv", "att_prep", "att_scores", "att_values",
          "att_out", "ffn_up", "ffn_down", "lm_head")
# what ablation.cu leaves out besides ops: the logits' copies back to the host (its "ops" are the
# pieces whose logits stay on the device)
COPY_BACK = "copy_back"
# everything but the matrix products: what the products alone take
NOT_PRODUCTS = "embed+norm+dn_head+att_prep+att_scores+att_values"
DEFAULT_VARIANTS = (*GROUPS, COPY_BACK, NOT_PRODUCTS)
# the ablation module with nothing left out may differ from the shipped one by this much (ratio of
# their steps, median over rounds) for the savings to count as the shipped module's
SAME_BUILD = 0.02
LEFT_OUT_RE = re.compile(r"^kite_cuda: ablation: the M=1 pass has (\d+) kernels; left out:((?: [a-z_]+ \d+ \d+)+)\s*$",
                         re.M)


def parse_variant(text: str) -> tuple[str, ...]:
    """A variant's groups ("norm+dn_head"), each one of GROUPS or COPY_BACK, none twice."""
    groups = tuple(text.split("+"))
    for g in groups:
        if g not in (*GROUPS, COPY_BACK):
            raise ValueError(f"variant {text!r}: {g!r} is not a group of ops (groups: {', '.join(GROUPS)}, "
                             f"{COPY_BACK})")
    if len(set(groups)) != len(groups):
        raise ValueError(f"variant {text!r} names a group twice")
    return groups


def left_out(stderr: str, groups: tuple[str, ...]) -> tuple[int, dict[str, int], dict[str, int]]:
    """The M=1 pass's kernels, and by group the ops the module says it left out of it and their
    weight bytes (the variant's groups, no other)."""
    m = LEFT_OUT_RE.search(stderr)
    if not m:
        raise RuntimeError("the module did not say what it left out (not built with KITE_CUDA_ABLATION=ON?)")
    words = m.group(2).split()
    counts = {words[i]: int(words[i + 1]) for i in range(0, len(words), 3)}
    nbytes = {words[i]: int(words[i + 2]) for i in range(0, len(words), 3)}
    if set(counts) != set(groups):
        raise RuntimeError(f"the module left out {sorted(counts)}, not the variant's {sorted(groups)}")
    return int(m.group(1)), counts, nbytes


@dataclass(frozen=True)
class Run:
    """One `kite run`: its step (ms, median over iters, the host's pick left out), the pick, and the
    ops it left out and their weight bytes by group."""

    step_ms: float
    left_out: dict[str, int]
    kernels: int = 0  # the M=1 pass's, as the module counts them (0: not said, nothing left out)
    pick_ms: float = 0.0
    weight_bytes: dict[str, int] | None = None
    nonfinite_logits: int = 0  # in the last pass of the run (its meta's nonfinite.logits)


def measure(kite: Engine, module: str, model: Path, groups: tuple[str, ...], steps: int, iters: int) -> Run:
    # an empty KITE_CUDA_ABLATE leaves nothing out, whatever the caller's environment says
    env = {"KITE_CUDA_LIB": module, "KITE_CUDA_ABLATE": ",".join(groups)}
    meta, stderr = run_engine_captured(kite, model, bench_prompt(8), steps, 1, iters, env)
    checked_counters("graph", 1, {}, meta["counters"])
    kernels, counts, nbytes = left_out(stderr, groups) if groups else (0, {}, {})
    t = meta["timings"]
    picks = t.get("step_greedy_ms", [0.0] * len(t["decode_ms"]))
    return Run(statistics.median((d - g) / steps for d, g in zip(t["decode_ms"], picks, strict=True)), counts, kernels,
               statistics.median(g / steps for g in picks), nbytes, int(meta.get("nonfinite", {}).get("logits") or 0))


def order(labels: list[str], round_index: int) -> list[str]:
    """The runs of a round: as listed in even rounds, reversed in odd ones (drift cancels)."""
    return labels if round_index % 2 == 0 else labels[::-1]


def summarize(rounds: list[dict[str, Run]], variants: list[str], copy_gbps: float | None = None) -> dict:
    """Per variant: the step (us) and the saving against "all" (us, per round, median, range), the
    ops left out, the saving an op, the host's pick, and with the copy's speed (GB/s) the time of
    the weight bytes left out at that speed and the saving beyond it; "all" over "shipped" as a
    ratio per round."""
    same = [r["all"].step_ms / r["shipped"].step_ms for r in rounds]
    out: dict = {
        "rounds": len(rounds),
        "shipped_us": statistics.median(r["shipped"].step_ms * 1e3 for r in rounds),
        "all_us": statistics.median(r["all"].step_ms * 1e3 for r in rounds),
        "all_over_shipped": {"rounds": same, "median": statistics.median(same)},
        "same_build": abs(statistics.median(same) - 1) <= SAME_BUILD,
        "kernels": max((r[v].kernels for r in rounds for v in variants), default=0),
        "copy_gbps": copy_gbps,
        "pick_us": statistics.median(r["all"].pick_ms * 1e3 for r in rounds),
        "variants": {},
    }
    for v in variants:
        savings = [(r["all"].step_ms - r[v].step_ms) * 1e3 for r in rounds]
        ops = sum(rounds[0][v].left_out.values())
        if any(sum(r[v].left_out.values()) != ops for r in rounds):
            raise RuntimeError(f"variant {v}: the ops left out differ between rounds")
        med = statistics.median(savings)
        nbytes = sum((rounds[0][v].weight_bytes or {}).values())
        bytes_us = nbytes / (copy_gbps * 1e3) if copy_gbps else None
        out["variants"][v] = {
            "ops": ops,
            "by_group": rounds[0][v].left_out,
            "step_us": statistics.median(r[v].step_ms * 1e3 for r in rounds),
            "saving_us_rounds": savings,
            "saving_us": med,
            "saving_us_min": min(savings),
            "saving_us_max": max(savings),
            "saving_us_an_op": med / ops if ops else None,
            "share": med / out["all_us"],
            "pick_us": statistics.median(r[v].pick_ms * 1e3 for r in rounds),
            "weight_bytes": nbytes,
            "bytes_us": bytes_us,
            "beyond_bytes_us": med - bytes_us if bytes_us is not None else None,
            "nonfinite_logits": max(r[v].nonfinite_logits for r in rounds),
        }
    # every kernel in one group: the single groups' ops add up to the pass's kernels
    singles = [v for v in variants if v in GROUPS]
    out["covered"] = sum(out["variants"][v]["ops"] for v in singles)
    out["every_group"] = set(singles) == set(GROUPS)
    return out


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(s: dict, model: str) -> str:
    same = s["all_over_shipped"]
    copy = (f"the device copy at {s['copy_gbps']:.0f} GB/s (read + write) in the same run" if s["copy_gbps"]
            else "no device copy measured: the bytes' time is not given")
    lines = [
        f"P8, each group of ops left out of the pass: {model}, {s['rounds']} rounds; step less the host's pick "
        f"(median over rounds) {s['shipped_us']:.1f} us shipped, {s['all_us']:.1f} us with the ablation module and "
        f"nothing left out (its step over the shipped one: {', '.join(f'{x:.3f}' for x in same['rounds'])}; "
        f"median {same['median']:.3f}, {'within' if s['same_build'] else 'NOT within'} {SAME_BUILD:.0%}"
        + ("" if s["same_build"] else ": the savings below are not the shipped module's")
        + f"); the host's pick, left out of every step here, {s['pick_us']:.1f} us a step with nothing left out.",
        "",
        f"The M=1 pass has {s['kernels']} kernels; the variants of one group left out {s['covered']} of them"
        + ("" if not s["every_group"] else " (every group run: " + (
            "each kernel is in a group)" if s["covered"] == s["kernels"] else "SOME KERNELS ARE IN NO GROUP)")) + ".",
        "",
        f"Weight bytes: those the ops left out read; their time at the copy's speed, {copy}, is what no change "
        "to those ops can remove.",
        "",
        *([f"{COPY_BACK}: the logits' copies back to the host left out (h_out's stays); its ops are the LM head's "
           "pieces.", ""] if COPY_BACK in s["variants"] else []),
        "| left out | ops | weight MB | step, us | saving a step, us (median) | range over rounds | saving an op, us "
        "| of the step | the bytes at the copy's speed, us | saving beyond the bytes, us | host pick, us "
        "| non-finite logits, last step |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for v, r in s["variants"].items():
        per_op = f"{r['saving_us_an_op']:.2f}" if r["saving_us_an_op"] is not None else "-"
        lines.append(f"| {v.replace('+', ' + ')} | {r['ops']} | {r['weight_bytes'] / 1e6:.1f} | {r['step_us']:.1f} | "
                     f"{r['saving_us']:.1f} | {r['saving_us_min']:.1f} .. {r['saving_us_max']:.1f} | {per_op} | "
                     f"{r['share']:.1%} | {_us(r['bytes_us'])} | {_us(r['beyond_bytes_us'])} | {r['pick_us']:.1f} | "
                     f"{r['nonfinite_logits']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kite", required=True, help="the engine binary")
    ap.add_argument("--module", required=True, help="the module built with KITE_CUDA_ABLATION=ON")
    ap.add_argument("--base-module", help="the shipped module (default: libkite_cuda.so beside --kite)")
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                    help="groups, or groups joined by + (default: each group, then all but the products)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--no-copy", action="store_true", help="no device copy (the bytes' time is not given)")
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    try:
        variants = {v: parse_variant(v) for v in a.variants}
    except ValueError as e:
        ap.error(str(e))
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    base = a.base_module or str(Path(a.kite).resolve().parent / "libkite_cuda.so")
    for path in (a.kite, a.module, base, a.model):
        if not Path(path).is_file():
            ap.error(f"{path}: no such file")
    kite = Engine(a.kite)
    copy = None if a.no_copy else copy_bandwidth()
    labels = ["shipped", "all", *variants]
    rounds: list[dict[str, Run]] = []
    for i in range(a.rounds):
        runs: dict[str, Run] = {}
        for label in order(labels, i):
            module = base if label == "shipped" else a.module
            runs[label] = measure(kite, module, a.model, variants.get(label, ()), a.steps, a.iters)
            print(f"round {i + 1} {label}: {runs[label].step_ms * 1e3:.1f} us a step", flush=True)
        rounds.append(runs)
    s = summarize(rounds, list(variants), copy["gbps_rw"] if copy else None)
    text = markdown(s, a.model.name)
    print(text)
    if a.md:
        a.md.write_text(text)
    if a.json:
        s["copy"] = copy
        s["runs"] = [{k: {"step_ms": r.step_ms, "pick_ms": r.pick_ms, "left_out": r.left_out,
                          "weight_bytes": r.weight_bytes, "nonfinite_logits": r.nonfinite_logits}
                      for k, r in runs.items()} for runs in rounds]
        a.json.write_text(json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
