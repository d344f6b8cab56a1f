#!/usr/bin/env python3
"""GPU decode benchmark for kite (runs on the GPU machine with plain python3, no nox).

For each model it measures, through the engine's command line only:
  * the M=1 decode step time with the CUDA graph on (default) and off (KITE_CUDA_GRAPH=0),
  * the achieved weight bandwidth (weight bytes read per token / step time),
  * prefill throughput with --mt 4 against --mt 1 (default gates, and with KITE_CUDA_GRAPH_M=1),
in --rounds rounds that alternate the configurations (a ratio is taken within each round, then
the median and range over the rounds are reported), and, in the same run, a device-to-device
copy bandwidth (torch if importable, else skipped); then prints a Markdown table and optionally
writes it (and the raw numbers as JSON).

Models are GGUF files (e.g. from `python3 -m harness models gen qwen35-0.8b --type q8_0`);
--gen TYPE... generates them into --models-dir first.

    python3 bench/gpu_decode.py --kite build/x/bin/kite --gen q8_0 q4_0 --md report.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


THREADS: list[str] = []


def run_engine(
    kite: str, model: Path, prompt: list[int], steps: int, mt: int, iters: int, env_extra: dict[str, str]
) -> dict:
    env = dict(os.environ)
    env.update(env_extra)
    cmd = [
        kite,
        "run",
        "--model",
        str(model),
        "--prompt",
        ",".join(map(str, prompt)),
        "--steps",
        str(steps),
        "--mt",
        str(mt),
        "--iters",
        str(iters),
        "--json",
    ] + THREADS
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def copy_bandwidth(nbytes: int = 1 << 30, reps: int = 20) -> dict | None:
    """Device-to-device copy: (bytes read + bytes written) / time, best of reps."""
    try:
        import torch
    except Exception:
        return None
    if not torch.cuda.is_available():
        return None
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / 1e3)
    name = torch.cuda.get_device_name(0)
    del a, b
    torch.cuda.empty_cache()
    return {"bytes": nbytes, "seconds": best, "gbps_rw": 2 * nbytes / best / 1e9, "device": name}


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def round_ratios(num_ms: list[float], den_ms: list[float]) -> dict:
    """Per-round ratios num / den (times of the same round), their median and range."""
    rs = [a / b for a, b in zip(num_ms, den_ms, strict=True)]
    return {"rounds": rs, "median": median(rs), "min": min(rs, default=float("nan")),
            "max": max(rs, default=float("nan"))}


# configurations of a round: label, prompt tokens (decode) / --mt, environment
DECODE = (("graph", 8, 1, {}), ("stream", 8, 1, {"KITE_CUDA_GRAPH": "0"}))
PREFILL = (("prefill_mt1", 1, {}), ("prefill_mt4", 4, {}), ("prefill_mt4_graph_m", 4, {"KITE_CUDA_GRAPH_M": "1"}))


def _checked(label: str, mt: int, env: dict[str, str], c: dict) -> None:
    if label == "graph" and c.get("graph_replays", 0) <= 0:
        raise RuntimeError(f"graph run did not replay a graph: {c}")
    if label == "stream" and c.get("stream_steps", 0) <= 0:
        raise RuntimeError(f"stream run did not use the device: {c}")
    if mt > 1 and c.get("mrow_calls", 0) <= 0:
        raise RuntimeError(f"--mt {mt} did not run M-row passes on the device: {c}")
    if env.get("KITE_CUDA_GRAPH_M") == "1" and c.get("mrow_graph_replays", 0) <= 0:
        raise RuntimeError(f"KITE_CUDA_GRAPH_M=1 did not replay an M-row graph: {c}")


def bench_model(
    kite: str, model: Path, prompt_len: int, steps: int, iters: int, check: bool = True, rounds: int = 1
) -> dict:
    prompt = [(i * 7919 + 13) % 500 + 1 for i in range(prompt_len)]
    res: dict = {"model": model.name, "rounds": rounds}
    per: dict[str, list[float]] = {}  # label -> the round medians (ms)
    for _ in range(rounds):
        for label, plen, mt, env in DECODE:
            meta = run_engine(kite, model, prompt[:plen], steps, mt, iters, env)
            if check:
                _checked(label, mt, env, meta["counters"])
            dec = [d / steps for d in meta["timings"]["decode_ms"]]
            r = res.setdefault(label, {"step_ms_all": []})
            r["step_ms_all"] += dec
            r["counters"] = meta["counters"]
            per.setdefault(label, []).append(median(dec))
            res["weight_bytes"] = meta["model"]["weight_bytes"]
            res["backend"] = meta["backend"]
        for key, mt, env in PREFILL:
            meta = run_engine(kite, model, prompt, 0, mt, iters, env)
            if check:
                _checked(key, mt, env, meta["counters"])
            res[key] = {"counters": meta["counters"]}
            per.setdefault(key, []).append(median(meta["timings"]["prefill_ms"]))
    wb = res["weight_bytes"]
    for label, *_ in DECODE:
        ms = median(per[label])
        res[label].update({"step_ms": ms, "step_ms_rounds": per[label], "tokens_per_s": 1e3 / ms,
                           "weight_gbps": wb / (ms / 1e3) / 1e9})
    for key, *_ in PREFILL:
        ms = median(per[key])
        res[key].update({"ms": ms, "ms_rounds": per[key], "rows_per_s": prompt_len / (ms / 1e3)})
    res["graph_speedup"] = round_ratios(per["stream"], per["graph"])
    res["prefill_speedup_mt4"] = round_ratios(per["prefill_mt1"], per["prefill_mt4"])
    res["prefill_speedup_mt4_graph_m"] = round_ratios(per["prefill_mt1"], per["prefill_mt4_graph_m"])
    return res


def _ratio_cell(r: dict) -> str:
    if len(r["rounds"]) > 1:
        return f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"
    return f"{r['median']:.2f}x"


def markdown(results: list[dict], copy: dict | None, args: argparse.Namespace) -> str:
    dev = results[0]["backend"].get("device") if results else None
    lines = [f"# kite GPU decode benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
    if dev:
        lines.append(
            f"Device: {dev.get('name')} (cc {dev.get('cc')}), driver {dev.get('driver_version')}, "
            f"runtime {dev.get('runtime_version')}; host {platform.node() or 'n/a'}."
        )
    if copy:
        lines.append(
            f"Device-to-device copy bandwidth (same run, torch, {copy['bytes'] >> 20} MiB, "
            f"read + write bytes / time): **{copy['gbps_rw']:.0f} GB/s**."
        )
    else:
        lines.append("Device-to-device copy bandwidth: not measured (torch with CUDA not importable).")
    lines += [
        "",
        f"Decode: prompt 8 tokens, {args.steps} greedy steps; prefill: {args.prompt_len} prompt tokens. "
        f"Each figure: the median over {args.rounds} round(s) that alternate the configurations, of the "
        f"median of {args.iters} requests; a ratio is taken within each round (median, and range in "
        "parentheses).",
        "",
        "| model | weight MB | graph ms/tok | graph tok/s | GB/s | % of copy | stream ms/tok | stream tok/s "
        "| graph speed-up | prefill M=1 rows/s | prefill M=4 rows/s | M=4 / M=1 | M=4 / M=1, per-M graphs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        g, s = r["graph"], r["stream"]
        pct = f"{100 * g['weight_gbps'] / copy['gbps_rw']:.0f}%" if copy else "n/a"
        lines.append(
            f"| {r['model']} | {r['weight_bytes'] / 1e6:.1f} | {g['step_ms']:.3f} | {g['tokens_per_s']:.0f} "
            f"| {g['weight_gbps']:.0f} | {pct} | {s['step_ms']:.3f} | {s['tokens_per_s']:.0f} "
            f"| {_ratio_cell(r['graph_speedup'])} | {r['prefill_mt1']['rows_per_s']:.0f} "
            f"| {r['prefill_mt4']['rows_per_s']:.0f} | {_ratio_cell(r['prefill_speedup_mt4'])} "
            f"| {_ratio_cell(r['prefill_speedup_mt4_graph_m'])} |"
        )
    lines += [
        "",
        "Step time = the engine's decode window / steps (host-side, including the per-step copy of "
        "h_out and logits back to the host). M=4 / M=1: prefill rows/s under the default gates "
        "(the M-row passes in stream mode); per-M graphs: the same M=4 prefill with KITE_CUDA_GRAPH_M=1.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kite", required=True, help="the engine binary (its folder holds the CUDA module)")
    ap.add_argument("--models", nargs="*", type=Path, default=[], help="GGUF files to benchmark")
    ap.add_argument(
        "--gen",
        nargs="*",
        default=[],
        metavar="TYPE",
        help="generate qwen35-0.8b of these types (q8_0, q4_0) with the harness first",
    )
    ap.add_argument("--recipe", default="qwen35-0.8b")
    ap.add_argument("--models-dir", type=Path, default=Path("models"))
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--iters", type=int, default=5, help="requests per engine run (the run's median is used)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds that alternate the configurations")
    ap.add_argument("--threads", type=int, help="pass --threads to the engine")
    ap.add_argument(
        "--no-check", action="store_true", help="do not require the device counters (a CPU-only dry run of the script)"
    )
    ap.add_argument("--no-copy", action="store_true", help="skip the device-to-device copy bandwidth (torch)")
    ap.add_argument("--md", type=Path, help="write the Markdown table here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    args = ap.parse_args(argv)

    if args.threads:
        THREADS[:] = ["--threads", str(args.threads)]
    models = list(args.models)
    for t in args.gen:
        out = args.models_dir / f"{args.recipe}-{t}.gguf"
        if not out.exists():
            args.models_dir.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            subprocess.run(
                [sys.executable, "-m", "harness", "models", "gen", args.recipe, "--type", t, "--out", str(out)],
                check=True,
            )
            print(f"generated {out} in {time.time() - t0:.1f} s", file=sys.stderr)
        models.append(out)
    if not models:
        ap.error("no models (--models or --gen)")
    copy = None if args.no_copy else copy_bandwidth()
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be at least 1")
    results = [
        bench_model(args.kite, m, args.prompt_len, args.steps, args.iters, not args.no_check, args.rounds)
        for m in models
    ]
    md = markdown(results, copy, args)
    print(md)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(md)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"copy": copy, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
