"""The pure half of bench/gpu_decode.py: statistics over rounds, the claims --require judges, and
the Markdown table. Data in (the benchmark's result dicts, the copy bandwidth), text out; nothing
here runs an engine."""

from __future__ import annotations

import argparse
import platform
import re
import statistics
import time

from llama_ref import bench_lines

REQUIRE_RE = re.compile(r"^(q4_over_q8|copy_fraction|tok_s)>=(\d+(?:\.\d+)?)$")


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def round_ratios(num_ms: list[float], den_ms: list[float]) -> dict:
    """Per-round ratios num / den (times of the same round), their median and range."""
    rs = [a / b for a, b in zip(num_ms, den_ms, strict=True)]
    return {"rounds": rs, "median": median(rs), "min": min(rs, default=float("nan")),
            "max": max(rs, default=float("nan"))}


def decode_summary(step_ms_rounds: list[float], weight_bytes: int) -> dict:
    """A decode configuration's figures from its per-round step times (ms): median step time,
    tokens/s, and the weight bandwidth that step reaches, per round and over the rounds."""
    ms = median(step_ms_rounds)
    return {"step_ms": ms, "step_ms_rounds": step_ms_rounds, "tokens_per_s": 1e3 / ms,
            "weight_gbps": weight_bytes / (ms / 1e3) / 1e9,
            "weight_gbps_rounds": [weight_bytes / (x / 1e3) / 1e9 for x in step_ms_rounds]}


def add_copy_fractions(results: list[dict], copy: dict | None) -> None:
    """Each decode configuration's weight bandwidth over the copy bandwidth (kite's and llama.cpp's,
    the adapter's backend-pick run too)."""
    if not copy:
        return
    for r in results:
        for entry in (r, r.get("llama", {}), r.get("llama", {}).get("backend_pick", {})):
            for label in ("graph", "stream"):
                c = entry.get(label)
                if c and "weight_gbps" in c:
                    c["copy_fraction"] = c["weight_gbps"] / copy["gbps_rw"]
                    c["copy_fraction_rounds"] = [g / copy["gbps_rw"] for g in c["weight_gbps_rounds"]]


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


def judge(requires: list[str], found: dict[str, dict]) -> tuple[list[str], list[str]]:
    """One PASS / FAIL line per requirement NAME>=X, and each failed claim in a few words (NAME:
    value < X); a claim this run could not measure fails."""
    lines, failed = [], []
    for spec in requires:
        m = REQUIRE_RE.match(spec.replace(" ", ""))
        name, thr = m.group(1), float(m.group(2))
        c = found.get(name)
        if c is None:
            failed.append(f"{name}: not measured in this run")
            lines.append(f"FAIL {failed[-1]} (needs a Q8_0 model, a Q4_0 one for q4_over_q8, "
                         "and the copy bandwidth for copy_fraction)")
            continue
        passed = c["value"] >= thr
        verdict = f"{name}: {c['value']:.3f} {'>=' if passed else '<'} {thr:g}"
        if not passed:
            failed.append(verdict)
        rounds = ", ".join(f"{x:.3f}" for x in c["rounds"])
        lines.append(f"{'PASS' if passed else 'FAIL'} {verdict} ({c['what']}; rounds: {rounds})")
    return lines, failed


def ratio_cell(r: dict) -> str:
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
            f"| {ratio_cell(r['graph_speedup'])} | {r['prefill_mt1']['rows_per_s']:.0f} "
            f"| {r['prefill_mt4']['rows_per_s']:.0f} | {ratio_cell(r['prefill_speedup_mt4'])} "
            f"| {ratio_cell(r['prefill_speedup_mt4_graph_m'])} |"
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
        pick = (f"; the host's greedy pick {g['greedy_ms']:.3f} ms a step, {100 * g['greedy_share']:.1f}% of its "
                "request's decode window (medians over every request)") if "greedy_ms" in g else ""
        lines.append(f"- {r['model']}: graph decode {g['tokens_per_s']:.0f} tok/s, {g['weight_gbps']:.0f} GB/s of "
                     f"weights{pct}{pick}.")
        lc = r.get("long_context")
        if lc:
            lines.append(f"  Decode after {lc['tokens']} prompt tokens over after 64: "
                         f"{ratio_cell(lc['slowdown'])} ({median(lc['ctx_long_ms_rounds']):.3f} against "
                         f"{median(lc['ctx64_ms_rounds']):.3f} ms/token).")
    q = claims(results, copy).get("q4_over_q8")
    if q:
        lines.append(f"- Q4_0 decode tok/s over Q8_0's: {q['value']:.2f}x (rounds: "
                     + ", ".join(f"{x:.2f}" for x in q["rounds"]) + ").")
    if any("llama" in r for r in results):
        lines += ["", *llama_lines(results, copy)]
    return "\n".join(lines) + "\n"


def _pct(entry: dict, copy: dict | None) -> str:
    return f"{100 * entry['weight_gbps'] / copy['gbps_rw']:.0f}%" if copy else "n/a"


def llama_lines(results: list[dict], copy: dict | None) -> list[str]:
    """kite's decode beside llama.cpp's on the same files: one row per model and graphs on / off."""
    first = next(r["llama"] for r in results if "llama" in r)
    backend = first["backend"]
    gpus = [d.get("description") or d.get("name") for d in backend.get("devices", []) if d.get("type") == "gpu"]
    where = (f"on {', '.join(gpus)}, every layer offloaded (the adapter's default)" if backend.get("gpu_layers", 0) > 0
             else "on the CPU (backend.gpu_layers 0: a dry run without the device checks)")
    lines = [
        "## kite and llama.cpp, same GGUF files",
        "",
        f"llama.cpp through its adapter (`kite-llama run ... {' '.join(first['args'])}`: llama.cpp's own "
        f"defaults), {where}; its run of "
        "each configuration follows kite's in every round, same prompt and steps. Graphs off: "
        "KITE_CUDA_GRAPH=0 for kite, GGML_CUDA_DISABLE_GRAPHS=1 for llama.cpp. % of copy: the model's "
        "weight bytes per step (kite's count, the same file for both) over the step time, over the copy "
        "bandwidth. kite / llama.cpp: llama.cpp's step time over kite's within each round, median (range).",
        "",
        "| model | CUDA graphs | kite tok/s | kite % of copy | llama.cpp tok/s | llama.cpp % of copy | kite / llama.cpp |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for label, graphs in (("graph", "on"), ("stream", "off")):
            if label not in r.get("llama", {}):
                continue
            k, ll = r[label], r["llama"][label]
            lines.append(f"| {r['model']} | {graphs} | {k['tokens_per_s']:.0f} | {_pct(k, copy)} "
                         f"| {ll['tokens_per_s']:.0f} | {_pct(ll, copy)} "
                         f"| {ratio_cell(r['llama']['kite_over_llama'][label])} |")
    return lines + bench_lines(results)

