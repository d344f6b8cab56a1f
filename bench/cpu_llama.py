#!/usr/bin/env python3
"""The llama.cpp adapter against llama-bench on the CPU, and where the adapter's time goes.

Runs, in --rounds rounds on the same GGUF file, the adapter (`kite-llama run`, llama.cpp's defaults
`--kv-type f16 --flash-attn auto`, no --dump: the timed path) and llama-bench's decode test
(`-p 0 -n N -d P`, bench/llama_ref.py), and with --costs also the adapter with each cost of a dump
run turned back on, one at a time, and all together (the timed path of 690ea7b):

  timed            no embeddings, logits of the last prompt row and of each step, nothing copied
  +embeddings      --embeddings on         (h_out computed for every row)
  +keep_rows       --keep-rows on          (every row's logits copied out of llama.cpp)
  +prompt_logits   --prompt-logits all     (logits of every prompt row)
  -threadpool      --threadpool off        (ggml starts its threads for every graph)
  dump_path        all four, as 690ea7b's adapter ran every request
  backend_pick     --sampler backend       (llama.cpp's greedy sampler in its graph: no host pick,
                                            no logits copied back)

Within a round every configuration runs once, the order reversed every other round (A B B A ...);
each figure is the median over rounds of the run's median tok/s, each ratio the median (and range)
of the within-round ratios to llama-bench's decode tok/s. The adapter's per-step timers
(`timings.step_decode_ms`: llama_decode with its llama_synchronize, as llama-bench times a step;
`step_greedy_ms`: reading the logits and picking the next token; `step_copy_ms`) are printed per
step, and each run's
CPU time (user + system). The machine should be otherwise idle; the load average is printed.
It runs whatever build it is given: the adapter and llama-bench of `llamacpp-cuda` (with --ngl 99)
give the same table on a GPU.

    python3 bench/cpu_llama.py --adapter build/llamacpp/bin/kite-llama [--model M.gguf] [--costs]
                               [--prompt-len 4] [--steps 16] [--iters 3] [--rounds 5] [--threads T]
                               [--ngl L] [--json OUT.json]

Exit status: 0, 1 if a run failed or did not take the claimed path, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from llama_ref import BACKEND_PICK, adapter_tok_s, bench_argv, bench_path, pick_problem, run_bench

REPO = Path(__file__).resolve().parents[1]
LLAMA_DEFAULTS = ("--kv-type", "f16", "--flash-attn", "auto")
COSTS = {
    "timed": (),
    "+embeddings": ("--embeddings", "on"),
    "+keep_rows": ("--keep-rows", "on"),
    "+prompt_logits": ("--prompt-logits", "all"),
    "-threadpool": ("--threadpool", "off"),
    "dump_path": ("--embeddings", "on", "--keep-rows", "on", "--prompt-logits", "all", "--threadpool", "off"),
    "backend_pick": BACKEND_PICK,
}
BENCH = "llama-bench"


def cpu_seconds() -> float:
    """User + system time of this process's finished children: a run's work, which a loaded machine
    stretches less than its wall-clock time (with one thread; spinning threads add to both)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_adapter(adapter: str, model: Path, prompt_len: int, steps: int, iters: int, threads: int | None,
                extra: tuple[str, ...]) -> dict:
    argv = [adapter, "run", "--model", str(model), "--prompt", ",".join(str(i + 1) for i in range(prompt_len)),
            "--steps", str(steps), "--iters", str(iters), "--json", *LLAMA_DEFAULTS, *extra]
    if threads:
        argv += ["--threads", str(threads)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.strip()}")
    meta = json.loads(out.stdout)
    # the pick asked for: the backend sampler's run brings no logits to the host, the host's none non-finite
    problem = pick_problem(meta, extra[extra.index("--sampler") + 1] if "--sampler" in extra else "host")
    if problem:
        raise RuntimeError(f"{' '.join(argv)}: {problem}")
    return meta


def per_step(meta: dict, key: str, steps: int) -> float:
    return statistics.median(meta["timings"][key]) / steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", default=str(REPO / "build/llamacpp/bin/kite-llama"))
    ap.add_argument("--bench", help="llama-bench (default: beside the adapter)")
    ap.add_argument("--model", type=Path, help="GGUF file (default: qwen35-0.8b Q8_0 from the model cache)")
    ap.add_argument("--models-dir", type=Path, default=REPO / "models")
    ap.add_argument("--prompt-len", type=int, default=4)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--iters", type=int, default=3, help="requests per adapter run, repetitions per llama-bench run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--ngl", type=int, help="GPU layers for both (a CUDA build; default: each one's own)")
    ap.add_argument("--costs", action="store_true", help="also the adapter with each dump cost turned on")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    args = ap.parse_args(argv)
    if min(args.prompt_len, args.steps, args.iters, args.rounds) < 1:
        ap.error("--prompt-len, --steps, --iters and --rounds must be at least 1")
    bench = Path(args.bench) if args.bench else bench_path(args.adapter)
    for exe in (Path(args.adapter), bench):
        if not exe.is_file():
            ap.error(f"{exe}: no such file (build it with `python3 -m harness build llamacpp`)")
    model = args.model
    if model is None:
        sys.path.insert(0, str(REPO))
        from harness.models import ensure_model

        model = ensure_model("qwen35-0.8b", args.models_dir, "q8_0")
    ngl = ("-ngl", str(args.ngl)) if args.ngl is not None else ()
    adapter_ngl = ("--ngl", str(args.ngl)) if args.ngl is not None else ()
    configs = list(COSTS) if args.costs else ["timed"]
    order = configs + [BENCH]
    raw: dict[str, list[dict]] = {c: [] for c in order}
    load = os.getloadavg()
    try:
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                cpu0 = cpu_seconds()
                if name == BENCH:
                    raw[name].append(run_bench(bench_argv(bench, model, args.prompt_len, args.steps, args.iters,
                                                          "decode", args.threads, ngl)))
                    raw[name][-1]["cpu_s"] = cpu_seconds() - cpu0
                    continue
                meta = run_adapter(args.adapter, model, args.prompt_len, args.steps, args.iters, args.threads,
                                   COSTS[name] + adapter_ngl)
                raw[name].append({**adapter_tok_s(meta, args.prompt_len, args.steps), "cpu_s": cpu_seconds() - cpu0,
                                  "decode_ms_step": per_step(meta, "step_decode_ms", args.steps),
                                  "greedy_ms_step": per_step(meta, "step_greedy_ms", args.steps),
                                  "copy_ms_step": per_step(meta, "step_copy_ms", args.steps),
                                  "prefill_ms": statistics.median(meta["timings"]["prefill_ms"]),
                                  "prepare_ms": meta["timings"]["prepare_ms"], "outputs": meta["outputs"]})
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"cpu_llama.py: error: {e}", file=sys.stderr)
        return 1
    ref = [x["tok_s"] for x in raw[BENCH]]
    lines = [f"model {model.name}, P={args.prompt_len}, N={args.steps}, {args.iters} requests a run, "
             f"{args.rounds} rounds; load average {load[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end", "",
             "| configuration | decode tok/s | / llama-bench: median (range) | ms a step: decode + wait | pick | "
             "copies | prefill ms | CPU s a run |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    summary = {}
    for name in order:
        rows = raw[name]
        tok = [x.get("decode_tok_s", x.get("tok_s")) for x in rows]
        ratios = [a / b for a, b in zip(tok, ref, strict=True)]
        summary[name] = {"decode_tok_s": statistics.median(tok), "ratio_median": statistics.median(ratios),
                         "ratio_min": min(ratios), "ratio_max": max(ratios)}
        if name == BENCH:
            lines.append(f"| llama-bench `-n {args.steps} -d {args.prompt_len}` | {statistics.median(tok):.2f} | "
                         f"1 | | | | | {statistics.median(x['cpu_s'] for x in rows):.2f} |")
            continue
        med = {k: statistics.median(x[k] for x in rows) for k in ("decode_ms_step", "greedy_ms_step", "copy_ms_step",
                                                                   "prefill_ms", "cpu_s")}
        lines.append(f"| adapter {name} | {statistics.median(tok):.2f} | {summary[name]['ratio_median']:.3f} "
                     f"({min(ratios):.3f}-{max(ratios):.3f}) | {med['decode_ms_step']:.2f} | "
                     f"{med['greedy_ms_step']:.3f} | {med['copy_ms_step']:.3f} | {med['prefill_ms']:.1f} | "
                     f"{med['cpu_s']:.2f} |")
        summary[name].update(med)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"model": str(model), "args": vars(args) | {"json": str(args.json),
                                         "model": str(model)}, "load": load, "summary": summary, "raw": raw},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
