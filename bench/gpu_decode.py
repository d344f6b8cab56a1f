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

--llama PATH (the llama.cpp adapter, native/llamacpp) also times llama.cpp's decode on the same
files at its own defaults (--kv-type f16 --flash-attn auto), each of its runs right after kite's
run of the same configuration (graphs on; off: GGML_CUDA_DISABLE_GRAPHS=1) with the same prompt
and steps, and adds a table: both engines' tok/s and % of copy bandwidth, and kite over llama.cpp
(llama.cpp's step time over kite's within each round). Its meta must show the GPU (gpu_layers and
gpu_devices above 0), graphs as asked and finite logits. --require judges kite alone.
Where the adapter's build has backend sampling (`kite-llama info --json`: backend_sampling), the
adapter runs each configuration a second time right after the first, with `--sampler backend`
(llama.cpp's greedy sampler in its own graph: no logits reach the host); its meta must say
outputs.sampler "backend" and nonfinite.logits null (bench/llama_ref.py's pick_problem), besides
the GPU and graphs as above. --no-backend-pick leaves that run out; where the build lacks backend
sampling, the table says so and has no backend-pick columns.
Right after the adapter's runs, llama-bench of the same build (--llama-bench, default: beside the
adapter) runs its decode test `-p 0 -n N -d P` and its `-pg P,N` test with the same environment
(bench/llama_ref.py), and a further table puts the adapter (host pick, and backend pick where it
ran), llama-bench and kite side by side. A round of a decode configuration thus runs kite, the
adapter, the adapter with --sampler backend, llama-bench's decode test, then its -pg test.

    python3 bench/gpu_decode.py --kite build/x/bin/kite --gen q8_0 q4_0 --md report.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from decode_report import (REQUIRE_RE, add_copy_fractions, claims, decode_summary, judge, markdown, median,
                           round_ratios)
from llama_ref import BACKEND_PICK, adapter_info, adapter_tok_s, bench_argv, bench_path, pick_problem, run_bench

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Engine:
    """An engine binary that speaks kite's `run` command line, and the options every run gets."""

    path: str
    extra: tuple[str, ...] = ()


def engine_argv(engine: Engine, model: Path, prompt: list[int], steps: int, mt: int, iters: int) -> list[str]:
    """The `run` command line of one measurement (its JSON meta on stdout)."""
    return [
        engine.path,
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
        *engine.extra,
    ]


def run_engine_captured(
    engine: Engine, model: Path, prompt: list[int], steps: int, mt: int, iters: int, env_extra: dict[str, str]
) -> tuple[dict, str]:
    """One measurement: its JSON meta, and what the engine (and its module) wrote on stderr."""
    env = dict(os.environ)
    env.update(env_extra)
    cmd = engine_argv(engine, model, prompt, steps, mt, iters)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout), out.stderr


def run_engine(
    engine: Engine, model: Path, prompt: list[int], steps: int, mt: int, iters: int, env_extra: dict[str, str]
) -> dict:
    return run_engine_captured(engine, model, prompt, steps, mt, iters, env_extra)[0]


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


# configurations of a round: label, prompt tokens (decode) / --mt, environment
DECODE = (("graph", 8, 1, {}), ("stream", 8, 1, {"KITE_CUDA_GRAPH": "0"}))
PREFILL = (("prefill_mt1", 1, {}), ("prefill_mt4", 4, {}), ("prefill_mt4_graph_m", 4, {"KITE_CUDA_GRAPH_M": "1"}))
# llama.cpp's run beside each decode configuration: its CUDA graphs off where kite's are
LLAMA_ENV = {"graph": {}, "stream": {"GGML_CUDA_DISABLE_GRAPHS": "1"}}
# llama.cpp's own defaults (the adapter's are kite's numerics), as its speed criteria run it
LLAMA_ARGS = ("--kv-type", "f16", "--flash-attn", "auto")
LLAMA_BENCH_NGL = 99  # llama-bench: every layer on the GPU, as the adapter's default


def checked_counters(label: str, mt: int, env: dict[str, str], c: dict) -> None:
    """A run's device counters must show the path its label claims (graph, stream, M-row passes)."""
    if label == "graph" and c.get("graph_replays", 0) <= 0:
        raise RuntimeError(f"graph run did not replay a graph: {c}")
    if label == "stream" and c.get("stream_steps", 0) <= 0:
        raise RuntimeError(f"stream run did not use the device: {c}")
    if mt > 1 and c.get("mrow_calls", 0) <= 0:
        raise RuntimeError(f"--mt {mt} did not run M-row passes on the device: {c}")
    if env.get("KITE_CUDA_GRAPH_M") == "1" and c.get("mrow_graph_replays", 0) <= 0:
        raise RuntimeError(f"KITE_CUDA_GRAPH_M=1 did not replay an M-row graph: {c}")


def _checked_llama(label: str, model: Path, meta: dict, sampler: str = "host") -> None:
    """llama.cpp's meta must show the path its figure claims: the GPU, CUDA graphs as asked, the
    token pick as asked (host: finite logits; backend: the backend sampler, no logits on the host)."""
    b = meta.get("backend", {})
    run = "llama.cpp" + (" --sampler backend" if sampler == "backend" else "")
    where = f"{run}, {model.name}, graphs {'off' if label == 'stream' else 'on'}"
    if b.get("engine") != "llama.cpp":
        raise RuntimeError(f"{where}: backend.engine is {b.get('engine')!r}: --llama takes the llama.cpp adapter")
    if b.get("gpu_layers", 0) <= 0 or b.get("gpu_devices", 0) <= 0:
        raise RuntimeError(f"{where}: did not run on the GPU (backend.gpu_layers {b.get('gpu_layers')}, "
                           f"backend.gpu_devices {b.get('gpu_devices')}; the CPU build, or no device)")
    if b.get("cuda_graphs_disabled") != (label == "stream"):
        raise RuntimeError(f"{where}: backend.cuda_graphs_disabled is {b.get('cuda_graphs_disabled')}")
    problem = pick_problem(meta, sampler)
    if problem:
        raise RuntimeError(f"{where}: {problem}")


def _checked_bench(label: str, model: Path, test: dict) -> None:
    """llama-bench's JSON must show the path its figure claims: CUDA, every layer on the GPU."""
    where = f"llama-bench, {model.name}, graphs {'off' if label == 'stream' else 'on'}"
    if "CUDA" not in str(test.get("backends")) or test.get("n_gpu_layers") != LLAMA_BENCH_NGL:
        raise RuntimeError(f"{where}: did not run on the GPU (backends {test.get('backends')!r}, "
                           f"n_gpu_layers {test.get('n_gpu_layers')}; the CPU build?)")


def _record_bench(lres: dict, label: str, bench: Path, model: Path, plen: int, steps: int, iters: int,
                  threads: int | None, adapter_meta: dict, check: bool) -> None:
    """llama-bench's decode and -pg tests beside the adapter run just made: both engines' figures
    of one round into lres["bench"][label]."""
    env = LLAMA_ENV[label]
    extra = ("-ngl", str(LLAMA_BENCH_NGL))
    decode = run_bench(bench_argv(bench, model, plen, steps, iters, "decode", threads, extra), env)
    request = run_bench(bench_argv(bench, model, plen, steps, iters, "request", threads, extra), env)
    if check:
        _checked_bench(label, model, decode)
    entry = lres.setdefault("bench", {}).setdefault(label, {})
    mine = adapter_tok_s(adapter_meta, plen, steps)
    for key, value in (("bench_step_ms", decode["ms"] / steps), ("bench_request_tok_s", request["tok_s"]),
                       ("adapter_request_tok_s", mine["request_tok_s"])):
        entry.setdefault(key + "_rounds", []).append(value)
    entry["argv"] = {"decode": bench_argv("llama-bench", Path(model.name), plen, steps, iters, "decode", threads,
                                          extra)[1:],
                     "request": bench_argv("llama-bench", Path(model.name), plen, steps, iters, "request", threads,
                                           extra)[1:]}


def _record_decode(entry: dict, rounds: list[float], meta: dict, steps: int) -> None:
    """One run of a decode configuration: its step times (ms) into the entry, their median into rounds,
    and the host's greedy pick a step (ms), where the engine reports its picks (timings.step_greedy_ms)."""
    dec = [d / steps for d in meta["timings"]["decode_ms"]]
    entry.setdefault("step_ms_all", []).extend(dec)
    if "step_greedy_ms" in meta["timings"]:
        greedy = meta["timings"]["step_greedy_ms"]
        entry.setdefault("greedy_ms_all", []).extend(g / steps for g in greedy)
        entry.setdefault("greedy_share_all", []).extend(g / d for g, d in zip(greedy, meta["timings"]["decode_ms"], strict=True))
        entry["greedy_ms"] = median(entry["greedy_ms_all"])
        entry["greedy_share"] = median(entry["greedy_share_all"])
    entry["counters"] = meta["counters"]
    rounds.append(median(dec))


def bench_prompt(n: int) -> list[int]:
    return [(i * 7919 + 13) % 500 + 1 for i in range(n)]


def bench_model(
    kite: Engine, model: Path, prompt_len: int, steps: int, iters: int, check: bool = True, rounds: int = 1,
    decode_only: bool = False, long_context: int = 0, llama: Engine | None = None, bench: Path | None = None,
    threads: int | None = None, backend_pick: bool = False, backend_note: str = ""
) -> dict:
    """One model's figures. With llama: the adapter after kite in each decode configuration, and with
    backend_pick the adapter again with --sampler backend right after (backend_note: why not, else)."""
    prompt = bench_prompt(prompt_len)
    res: dict = {"model": model.name, "rounds": rounds}
    per: dict[str, list[float]] = {}  # label -> the round medians (ms)
    llama_per: dict[str, list[float]] = {}  # the same for llama.cpp's decode configurations
    pick_per: dict[str, list[float]] = {}  # the same for the adapter's backend-pick runs
    picker = Engine(llama.path, llama.extra + BACKEND_PICK) if llama and backend_pick else None
    decode = DECODE[:1] if decode_only else DECODE
    contexts = ((64, "ctx64"), (long_context, "ctx_long")) if long_context else ()
    for _ in range(rounds):
        for plen, key in contexts:  # the decode step after a short and a long prompt (--mt 4 prefill)
            meta = run_engine(kite, model, bench_prompt(plen), steps, 4, iters, {})
            if check:
                checked_counters("graph", 1, {}, meta["counters"])
            per.setdefault(key, []).append(median([d / steps for d in meta["timings"]["decode_ms"]]))
        for label, plen, mt, env in decode:
            meta = run_engine(kite, model, prompt[:plen], steps, mt, iters, env)
            if check:
                checked_counters(label, mt, env, meta["counters"])
            _record_decode(res.setdefault(label, {}), per.setdefault(label, []), meta, steps)
            res["weight_bytes"] = meta["model"]["weight_bytes"]
            res["backend"] = meta["backend"]
            if llama:  # right after kite's run of the same configuration: A B A B within the round
                meta = run_engine(llama, model, prompt[:plen], steps, mt, iters, LLAMA_ENV[label])
                if check:
                    _checked_llama(label, model, meta)
                lres = res.setdefault("llama", {})
                _record_decode(lres.setdefault(label, {}), llama_per.setdefault(label, []), meta, steps)
                lres.update({"args": list(LLAMA_ARGS), "model_bytes": meta["model"]["bytes"],
                             "backend": meta["backend"], "options": meta.get("options", {})})
                if picker:  # right after the host pick: the same round, file, prompt, steps and environment
                    pmeta = run_engine(picker, model, prompt[:plen], steps, mt, iters, LLAMA_ENV[label])
                    if check:
                        _checked_llama(label, model, pmeta, "backend")
                    pres = lres.setdefault("backend_pick", {"args": list(BACKEND_PICK)})
                    _record_decode(pres.setdefault(label, {}), pick_per.setdefault(label, []), pmeta, steps)
                else:
                    lres["backend_pick"] = {"not_run": backend_note or "not asked"}
                if bench:  # llama-bench right after the adapter: the same round, file, prompt and steps
                    _record_bench(lres, label, bench, model, plen, steps, iters, threads, meta, check)
        for key, mt, env in () if decode_only else PREFILL:
            meta = run_engine(kite, model, prompt, 0, mt, iters, env)
            if check:
                checked_counters(key, mt, env, meta["counters"])
            res[key] = {"counters": meta["counters"]}
            per.setdefault(key, []).append(median(meta["timings"]["prefill_ms"]))
    wb = res["weight_bytes"]
    for label, *_ in decode:
        res[label].update(decode_summary(per[label], wb))
        if llama:  # kite's weight bytes: the bytes a step of either engine reads from the same file
            res["llama"][label].update(decode_summary(llama_per[label], wb))
            res["llama"].setdefault("kite_over_llama", {})[label] = round_ratios(llama_per[label], per[label])
            b = res["llama"].get("bench", {}).get(label)
            if b:  # per round: llama-bench's step time over the adapter's, and over kite's
                b.update(decode_summary(b["bench_step_ms_rounds"], wb))
                b["adapter_over_bench"] = round_ratios(b["bench_step_ms_rounds"], llama_per[label])
                b["kite_over_bench"] = round_ratios(b["bench_step_ms_rounds"], per[label])
                if picker:  # and over the adapter's backend-pick run
                    b["backend_pick_over_bench"] = round_ratios(b["bench_step_ms_rounds"], pick_per[label])
            if picker:
                res["llama"]["backend_pick"][label].update(decode_summary(pick_per[label], wb))
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
        "--no-check", action="store_true", help="do not require the device counters, nor llama.cpp's GPU (a CPU-only dry run of the script)"
    )
    ap.add_argument("--no-copy", action="store_true", help="skip the device-to-device copy bandwidth (torch)")
    ap.add_argument("--decode-only", action="store_true", help="only the graph decode configuration")
    ap.add_argument("--long-context", type=int, default=0, metavar="N",
                    help="also time the decode step after an N-token prompt against after 64 tokens")
    ap.add_argument("--require", action="append", default=[], metavar="NAME>=X",
                    help="judge a claim: q4_over_q8>=X, copy_fraction>=X or tok_s>=X (repeatable)")
    ap.add_argument("--llama", metavar="PATH",
                    help="also time llama.cpp's decode on the same files: the adapter of the llamacpp-cuda build "
                         "(build/llamacpp-cuda/bin/kite-llama), its runs alternating with kite's")
    ap.add_argument("--llama-bench", metavar="PATH",
                    help="llama-bench of the same build, run beside the adapter (default: beside --llama)")
    ap.add_argument("--no-llama-bench", action="store_true", help="with --llama: the adapter alone")
    ap.add_argument("--no-backend-pick", action="store_true",
                    help="with --llama: no second adapter run with --sampler backend (llama.cpp's backend sampler)")
    ap.add_argument("--md", type=Path, help="write the Markdown table here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    args = ap.parse_args(argv)

    threads = ("--threads", str(args.threads)) if args.threads else ()
    kite = Engine(args.kite, threads)
    llama = Engine(args.llama, threads + LLAMA_ARGS) if args.llama else None
    if llama and not Path(llama.path).is_file():
        ap.error(f"--llama {llama.path}: no such file (build it with `python3 -m harness build llamacpp-cuda`)")
    bench = None
    if llama and not args.no_llama_bench:
        bench = Path(args.llama_bench) if args.llama_bench else bench_path(llama.path)
        if not bench.is_file():
            ap.error(f"--llama-bench {bench}: no such file (the llamacpp-cuda build makes it beside the adapter; "
                     "--no-llama-bench: the adapter alone)")
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
    if args.rounds < 1 or args.iters < 1 or args.steps < 1:
        ap.error("--rounds, --iters and --steps must be at least 1")
    try:
        backend_pick, backend_note = False, "left out (--no-backend-pick)"
        if llama and not args.no_backend_pick:  # ask the build: a run it cannot make is left out, never faked
            said = adapter_info(llama.path).get("backend_sampling")
            backend_pick = said is True
            if not backend_pick:
                backend_note = ("the adapter's build has no backend sampling (`kite-llama info --json`: "
                                f"backend_sampling {json.dumps(said)})")
        results = [
            bench_model(kite, m, args.prompt_len, args.steps, args.iters, not args.no_check, args.rounds,
                        args.decode_only, args.long_context, llama, bench, args.threads, backend_pick, backend_note)
            for m in models
        ]
    except RuntimeError as e:  # a run failed or did not take the path its figure claims
        print(f"gpu_decode.py: error: {e}", file=sys.stderr)
        return 1
    add_copy_fractions(results, copy)
    md = markdown(results, copy, args)
    print(md)
    verdicts, failed = judge(args.require, claims(results, copy))
    for line in verdicts:
        print(line)
    if failed:  # the closing line on stderr: what a caller quotes when the exit status is 1
        print(f"gpu_decode.py: {len(failed)} of {len(verdicts)} claims not met: {'; '.join(failed)}", file=sys.stderr)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(md)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"copy": copy, "results": results, "verdicts": verdicts}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
