"""llama.cpp's own benchmark, llama-bench, as the reference for the adapter's timings.

The `llamacpp` and `llamacpp-cuda` builds put `llama-bench` (llama.cpp's tools/llama-bench, from the
same pinned source and the same libllama) beside the adapter `kite-llama`. This module builds its
argv, runs it and reads its JSON; bench/cpu_llama.py and bench/gpu_decode.py --llama use it, and its
one rule for whether an adapter run's meta shows the token pick it was asked for (pick_problem).

Two llama-bench tests match an adapter run of P prompt tokens and N greedy steps:
  * decode:  `-p 0 -n N -d P`   N one-token steps after a P-token context, timed alone (the
    context is processed before the timer starts): the adapter's `timings.decode_ms`;
  * request: `-p 0 -n 0 -pg P,N` the P-token prompt and the N steps in one timed window, reported
    as (P + N) / time: the adapter's (P + N) / `timings.request_ms`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path


def bench_path(adapter: str | Path) -> Path:
    """llama-bench of the same build: the adapter's sibling."""
    a = Path(adapter)
    return a.with_name("llama-bench" + (".exe" if a.name.endswith(".exe") else ""))


def bench_argv(bench: str | Path, model: Path, prompt_len: int, steps: int, reps: int, test: str,
               threads: int | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    """The argv of one llama-bench test ("decode" or "request") at llama.cpp's defaults
    (KV cache f16, flash attention auto, all layers on a GPU when there is one), JSON on stdout."""
    if test == "decode":
        shape = ["-p", "0", "-n", str(steps), "-d", str(prompt_len)]
    elif test == "request":
        shape = ["-p", "0", "-n", "0", "-pg", f"{prompt_len},{steps}"]
    else:
        raise ValueError(f"unknown llama-bench test {test!r}")
    argv = [str(bench), "-m", str(model), *shape, "-r", str(reps), "-o", "json"]
    if threads:
        argv += ["-t", str(threads)]
    return argv + list(extra)


def run_bench(argv: list[str], env_extra: dict[str, str] | None = None, timeout: float = 900) -> dict:
    """Run llama-bench; its one test's figures: tok/s per repetition and their median."""
    env = {**os.environ, **(env_extra or {})}
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{' '.join(argv)}: {e}") from None
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}): {' | '.join(tail)}")
    try:
        tests = json.loads(out.stdout)
    except ValueError:
        raise RuntimeError(f"{' '.join(argv)}: stdout is not llama-bench's JSON (-o json)") from None
    if not isinstance(tests, list) or len(tests) != 1 or not isinstance(tests[0], dict):
        raise RuntimeError(f"{' '.join(argv)}: expected one test in llama-bench's JSON")
    t = tests[0]
    if not t.get("samples_ts") or not t.get("samples_ns"):
        raise RuntimeError(f"{' '.join(argv)}: llama-bench's JSON has no samples")
    return {"tok_s": statistics.median(t["samples_ts"]), "samples_ts": t["samples_ts"],
            "ms": statistics.median(t["samples_ns"]) / 1e6, "n_prompt": t["n_prompt"], "n_gen": t["n_gen"],
            "n_depth": t.get("n_depth", 0), "backends": t.get("backends", ""), "n_gpu_layers": t.get("n_gpu_layers"),
            "type_k": t.get("type_k"), "flash_attn": t.get("flash_attn"), "n_threads": t.get("n_threads"),
            "build_commit": t.get("build_commit", "")}


def adapter_info(adapter: str | Path, timeout: float = 120) -> dict:
    """The adapter's `info --json`: what its build can do (`backend_sampling`: whether `--sampler
    backend` can run)."""
    argv = [str(adapter), "info", "--json"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{' '.join(argv)}: {e}") from None
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.strip()}")
    try:
        info = json.loads(out.stdout)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise RuntimeError(f"{' '.join(argv)}: stdout is not a JSON object")
    return info


# the adapter's argv for llama.cpp's backend greedy sampler: the token picked in its graph, no logits
# to the host
BACKEND_PICK = ("--sampler", "backend")


def pick_problem(meta: dict, sampler: str = "host") -> str | None:
    """What keeps an adapter run's meta from showing the token pick it was asked for (`--sampler
    host`, the default, or `backend`); None if nothing. A host pick reads every step's logits on the
    host: its meta says `outputs.sampler` "host" (or nothing: an adapter older than --sampler) and
    `nonfinite.logits` 0. A backend pick (llama.cpp's greedy sampler in its own graph) brings no
    logits to the host: its meta says "backend" and `nonfinite.logits` null, the one case where null
    passes."""
    said = meta.get("outputs", {}).get("sampler", "host")
    if said != sampler:
        return f"outputs.sampler is {said!r}, not {sampler!r}"
    logits = meta.get("nonfinite", {}).get("logits", "missing")
    if sampler == "backend":
        return None if logits is None else f"nonfinite.logits is {logits!r}, not null: logits reached the host"
    if logits is None or logits == "missing":
        return f"nonfinite.logits is {'null' if logits is None else 'missing'}: no logits were checked"
    return None if logits == 0 else f"{logits} non-finite logits"


def adapter_tok_s(meta: dict, prompt_len: int, steps: int) -> dict:
    """The adapter's figures in llama-bench's units: decode N / decode window, request (P + N) /
    request window; the median over the run's iterations."""
    t = meta["timings"]
    return {"decode_tok_s": statistics.median(steps * 1e3 / d for d in t["decode_ms"]),
            "request_tok_s": statistics.median((prompt_len + steps) * 1e3 / r for r in t["request_ms"])}


def _ratio(r: dict) -> str:
    return f"{r['median']:.2f}x" + (f" ({r['min']:.2f}-{r['max']:.2f})" if len(r["rounds"]) > 1 else "")


def bench_lines(results: list[dict]) -> list[str]:
    """The adapter beside llama-bench (and kite beside both): one row per model and graphs on / off;
    empty when no llama-bench ran. The adapter's backend-pick run (`llama.backend_pick`) adds two
    columns where it ran; where it did not, the text says why."""
    shown = [(r, label, graphs) for r in results for label, graphs in (("graph", "on"), ("stream", "off"))
             if r.get("llama", {}).get("bench", {}).get(label)]
    if not shown:
        return []
    with_pick = any("backend_pick_over_bench" in r["llama"]["bench"][label] for r, label, _ in shown)
    rows = []
    for r, label, graphs in shown:
        b, med = r["llama"]["bench"][label], statistics.median
        pick = ""
        if with_pick:
            bp = r["llama"].get("backend_pick", {}).get(label)
            pick = (f"| {bp['tokens_per_s']:.0f} | {_ratio(b['backend_pick_over_bench'])} "
                    if bp and "backend_pick_over_bench" in b else "| n/a | n/a ")
        rows.append(f"| {r['model']} | {graphs} | {r['llama'][label]['tokens_per_s']:.0f} | {b['tokens_per_s']:.0f} "
                    f"| {_ratio(b['adapter_over_bench'])} {pick}| {_ratio(b['kite_over_bench'])} "
                    f"| {med(b['adapter_request_tok_s_rounds']):.0f} | {med(b['bench_request_tok_s_rounds']):.0f} |")
    argv = shown[0][0]["llama"]["bench"][shown[0][1]]["argv"]
    if with_pick:
        pick_text = (" The adapter's own columns are its default host pick: each step's logits copied to the host "
                     "and their argmax taken there, a cost llama-bench does not have. Backend pick: the adapter "
                     "again, right after that run (before llama-bench), with `--sampler backend`: llama.cpp's "
                     "backend greedy sampler takes the argmax in llama.cpp's own graph on the GPU and only the "
                     "token comes back, no logits: llama.cpp at its best.")
    else:
        why = next((r["llama"].get("backend_pick", {}).get("not_run") for r, *_ in shown
                    if r["llama"].get("backend_pick", {}).get("not_run")), "not run")
        pick_text = f" The adapter with llama.cpp's backend sampler (`--sampler backend`) is not in this table: {why}."
    head = "| model | CUDA graphs | adapter tok/s | llama-bench tok/s | adapter / llama-bench "
    if with_pick:
        head += "| adapter, backend pick tok/s | backend pick / llama-bench "
    head += "| kite / llama-bench | adapter -pg tok/s | llama-bench -pg tok/s |"
    return ["", "## llama.cpp: the adapter beside llama-bench",
            "",
            f"llama-bench of the same build (same source, same libllama), right after the adapter's runs in every round "
            f"with the same environment: `llama-bench {' '.join(argv['decode'])}` (its decode test: the steps "
            f"after a context of the prompt's length, timed alone, as the adapter's decode window) and "
            f"`llama-bench {' '.join(argv['request'])}` (prompt and steps in one window, tokens / time, beside the "
            "adapter's (P + N) / request time; llama-bench's prompt in one micro-batch, its default, the "
            "adapter's in micro-batches of the run's --mt rows). Ratios: llama-bench's step time over the adapter's, "
            "and over kite's, within each round, median (range)." + pick_text,
            "",
            head,
            "|---|---|" + "---:|" * (head.count("|") - 3), *rows]
