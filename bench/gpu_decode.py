#!/usr/bin/env python3
"""GPU decode benchmark for kite (runs on the GPU machine with plain python3, no nox).

For each model it measures, through the engine's command line only:
  * the M=1 decode step time with the CUDA graph on (default) and off (KITE_CUDA_GRAPH=0),
  * the achieved weight bandwidth (weight bytes read per token / step time),
  * prefill throughput with --mt 4 against --mt 1 (default gates, and with KITE_CUDA_GRAPH_M=1),
  * with --long-context N: the decode step after an N-token prompt against after a 64-token one,
in --rounds rounds that alternate the configurations (a ratio is taken within each round, then
the median and range over the rounds are reported), and, in the same run, a device-to-device
copy bandwidth (torch if importable, else skipped); then prints a Markdown table (with the % of
copy bandwidth per model and, given a Q8_0 and a Q4_0 model, Q4_0's decode speed over Q8_0's)
and optionally writes it (and the raw numbers as JSON).

Models are GGUF files (e.g. from `python3 -m harness models gen qwen35-0.8b --type q8_0`);
--gen TYPE... takes them from the harness's model cache in --models-dir (generating them first).

--require NAME>=X judges a registered claim from this run (regressions/fused-pass.yaml): it prints
`PASS NAME ...` or `FAIL NAME ...` and the exit status is 1 if any fails. Names: q4_over_q8 (median
over rounds of Q8_0's graph step time over Q4_0's), copy_fraction (the Q8_0 model's weight bytes
per graph step time over the copy bandwidth, median over rounds), tok_s (the Q8_0 model's graph
tokens/s). --decode-only skips the stream and prefill configurations.

    python3 bench/gpu_decode.py --kite build/x/bin/kite --gen q8_0 q4_0 --md report.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
THREADS: list[str] = []
REQUIRE_RE = re.compile(r"^(q4_over_q8|copy_fraction|tok_s)>=(\d+(?:\.\d+)?)$")


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


def bench_prompt(n: int) -> list[int]:
    return [(i * 7919 + 13) % 500 + 1 for i in range(n)]


def bench_model(
    kite: str, model: Path, prompt_len: int, steps: int, iters: int, check: bool = True, rounds: int = 1,
    decode_only: bool = False, long_context: int = 0
) -> dict:
    prompt = bench_prompt(prompt_len)
    res: dict = {"model": model.name, "rounds": rounds}
    per: dict[str, list[float]] = {}  # label -> the round medians (ms)
    contexts = ((64, "ctx64"), (long_context, "ctx_long")) if long_context else ()
    for _ in range(rounds):
        for plen, key in contexts:  # the decode step after a short and a long prompt (--mt 4 prefill)
            meta = run_engine(kite, model, bench_prompt(plen), steps, 4, iters, {})
            if check:
                _checked("graph", 1, {}, meta["counters"])
            per.setdefault(key, []).append(median([d / steps for d in meta["timings"]["decode_ms"]]))
        for label, plen, mt, env in DECODE[:1] if decode_only else DECODE:
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
        for key, mt, env in () if decode_only else PREFILL:
            meta = run_engine(kite, model, prompt, 0, mt, iters, env)
            if check:
                _checked(key, mt, env, meta["counters"])
            res[key] = {"counters": meta["counters"]}
            per.setdefault(key, []).append(median(meta["timings"]["prefill_ms"]))
    wb = res["weight_bytes"]
    for label, *_ in DECODE[:1] if decode_only else DECODE:
        ms = median(per[label])
        res[label].update({"step_ms": ms, "step_ms_rounds": per[label], "tokens_per_s": 1e3 / ms,
                           "weight_gbps": wb / (ms / 1e3) / 1e9,
                           "weight_gbps_rounds": [wb / (x / 1e3) / 1e9 for x in per[label]]})
    if long_context:
        res["long_context"] = {"tokens": long_context, "ctx64_ms_rounds": per["ctx64"],
                               "ctx_long_ms_rounds": per["ctx_long"],
                               "slowdown": round_ratios(per["ctx_long"], per["ctx64"])}
    if decode_only:
        return res
    for key, *_ in PREFILL:
        ms = median(per[key])
        res[key].update({"ms": ms, "ms_rounds": per[key], "rows_per_s": prompt_len / (ms / 1e3)})
    res["graph_speedup"] = round_ratios(per["stream"], per["graph"])
    res["prefill_speedup_mt4"] = round_ratios(per["prefill_mt1"], per["prefill_mt4"])
    res["prefill_speedup_mt4_graph_m"] = round_ratios(per["prefill_mt1"], per["prefill_mt4_graph_m"])
    return res


def model_type(name: str) -> str | None:
    """The weight type in a model file's name (q8_0, q4_0, ...), None if it names none."""
    m = re.search(r"(?:^|[-_.])(q8_0|q4_0|f16|bf16|f32)(?:[-_.]|$)", name.lower())
    return m.group(1) if m else None


def claims(results: list[dict], copy: dict | None) -> dict[str, dict]:
    """The registered claims this run can judge: name -> value, per-round values, what it is."""
    by_type = {model_type(r["model"]): r for r in results}
    out: dict[str, dict] = {}
    q8, q4 = by_type.get("q8_0"), by_type.get("q4_0")
    if q8 and q4:
        r = round_ratios(q8["graph"]["step_ms_rounds"], q4["graph"]["step_ms_rounds"])
        out["q4_over_q8"] = {"value": r["median"], "rounds": r["rounds"],
                             "what": "Q4_0 graph decode tok/s over Q8_0's (median over rounds)"}
    if q8:
        out["tok_s"] = {"value": q8["graph"]["tokens_per_s"], "rounds": [1e3 / x for x in q8["graph"]["step_ms_rounds"]],
                        "what": "Q8_0 graph decode tok/s (median over rounds)"}
        if copy:
            fr = [g / copy["gbps_rw"] for g in q8["graph"]["weight_gbps_rounds"]]
            out["copy_fraction"] = {"value": median(fr), "rounds": fr,
                                    "what": f"Q8_0 weight GB/s over the copy bandwidth {copy['gbps_rw']:.0f} GB/s"}
    return out


def judge(requires: list[str], found: dict[str, dict]) -> tuple[list[str], bool]:
    """One PASS / FAIL line per requirement NAME>=X; a claim this run could not measure fails."""
    lines, ok = [], True
    for spec in requires:
        m = REQUIRE_RE.match(spec.replace(" ", ""))
        name, thr = m.group(1), float(m.group(2))
        c = found.get(name)
        if c is None:
            lines.append(f"FAIL {name}: not measured in this run (needs a Q8_0 model, a Q4_0 one for q4_over_q8, "
                         "and the copy bandwidth for copy_fraction)")
            ok = False
            continue
        passed = c["value"] >= thr
        ok = ok and passed
        rounds = ", ".join(f"{x:.3f}" for x in c["rounds"])
        lines.append(f"{'PASS' if passed else 'FAIL'} {name}: {c['value']:.3f} {'>=' if passed else '<'} {thr:g} "
                     f"({c['what']}; rounds: {rounds})")
    return lines, ok


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
        if "stream" not in r:  # --decode-only
            continue
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
        "",
    ]
    for r in results:
        g = r["graph"]
        pct = f", {100 * g['weight_gbps'] / copy['gbps_rw']:.0f}% of copy" if copy else ""
        lines.append(f"- {r['model']}: graph decode {g['tokens_per_s']:.0f} tok/s, {g['weight_gbps']:.0f} GB/s of "
                     f"weights{pct}.")
        lc = r.get("long_context")
        if lc:
            lines.append(f"  Decode after {lc['tokens']} prompt tokens over after 64: "
                         f"{_ratio_cell(lc['slowdown'])} ({median(lc['ctx_long_ms_rounds']):.3f} against "
                         f"{median(lc['ctx64_ms_rounds']):.3f} ms/token).")
    q = claims(results, copy).get("q4_over_q8")
    if q:
        lines.append(f"- Q4_0 decode tok/s over Q8_0's: {q['value']:.2f}x (rounds: "
                     + ", ".join(f"{x:.2f}" for x in q["rounds"]) + ").")
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
    ap.add_argument("--models-dir", type=Path, default=REPO / "models")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--iters", type=int, default=5, help="requests per engine run (the run's median is used)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds that alternate the configurations")
    ap.add_argument("--threads", type=int, help="pass --threads to the engine")
    ap.add_argument(
        "--no-check", action="store_true", help="do not require the device counters (a CPU-only dry run of the script)"
    )
    ap.add_argument("--no-copy", action="store_true", help="skip the device-to-device copy bandwidth (torch)")
    ap.add_argument("--decode-only", action="store_true", help="only the graph decode configuration")
    ap.add_argument("--long-context", type=int, default=0, metavar="N",
                    help="also time the decode step after an N-token prompt against after 64 tokens")
    ap.add_argument("--require", action="append", default=[], metavar="NAME>=X",
                    help="judge a claim: q4_over_q8>=X, copy_fraction>=X or tok_s>=X (repeatable)")
    ap.add_argument("--md", type=Path, help="write the Markdown table here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    args = ap.parse_args(argv)

    if args.threads:
        THREADS[:] = ["--threads", str(args.threads)]
    for spec in args.require:
        if not REQUIRE_RE.match(spec.replace(" ", "")):
            ap.error(f"--require {spec!r}: write NAME>=X with NAME one of q4_over_q8, copy_fraction, tok_s")
    models = list(args.models)
    if args.gen:
        sys.path.insert(0, str(REPO))
        from harness.models import ensure_model  # the harness's model cache: the files verify uses

        for t in args.gen:
            t0 = time.time()
            models.append(ensure_model(args.recipe, args.models_dir, t))
            print(f"model {models[-1]} ({time.time() - t0:.1f} s)", file=sys.stderr)
    if not models:
        ap.error("no models (--models or --gen)")
    copy = None if args.no_copy else copy_bandwidth()
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be at least 1")
    results = [
        bench_model(args.kite, m, args.prompt_len, args.steps, args.iters, not args.no_check, args.rounds,
                    args.decode_only, args.long_context)
        for m in models
    ]
    md = markdown(results, copy, args)
    print(md)
    verdicts, ok = judge(args.require, claims(results, copy))
    for line in verdicts:
        print(line)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(md)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"copy": copy, "results": results, "verdicts": verdicts}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
