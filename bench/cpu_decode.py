#!/usr/bin/env python3
"""CPU decode benchmark: engine decode speed against the machine's read bandwidth, in one run.

For each model (the ``tiny`` recipe and the 0.8B-shaped ``qwen35-0.8b``, in Q8_0 and Q4_0, generated
or reused from the model cache) and each thread count (1 and 2), runs

    kite run --model M --prompt P --steps N --threads T --iters K --json

and reads ``timings.decode_ms`` (one entry per iteration: the time of the N generated steps, see
docs/KITE-ENGINE.md). It prints decode tokens/s (median over iterations), the weight bytes one decode
step reads (every layer tensor, the final norm and the LM head, plus one embedding row), the
achieved GB/s of weights, and the read-only memory bandwidth measured in the same run by
``bench/membw.c`` (compiled on the fly with the host cc; best of a few passes over a 1 GiB buffer
with the same thread count, measured before and after the engine runs, the better of the two kept),
and the ratio. It also checks that the generated tokens do not depend
on the thread count.

It builds nothing: pass the engine with ``--kite`` (default ``build/default/bin/kite``).

    python bench/cpu_decode.py [--kite PATH] [--steps 32] [--iters 3] [--threads 1,2]
                               [--models tiny:q8_0,tiny:q4_0,qwen35-0.8b:q8_0,qwen35-0.8b:q4_0]
                               [--json OUT.json] [--membw-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = "tiny:q8_0,tiny:q4_0,qwen35-0.8b:q8_0,qwen35-0.8b:q4_0"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure_membw(threads: list[int], nbytes: int, reps: int, cc: str | None) -> dict[int, dict]:
    src = REPO / "bench" / "membw.c"
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RuntimeError("no C compiler found (set CC or pass --cc) for the bandwidth probe")
    with tempfile.TemporaryDirectory(prefix="kite-membw-") as d:
        exe = Path(d) / "membw"
        errors = []
        for flags in (["-O3", "-march=native"], ["-O3"]):
            r = subprocess.run([cc, *flags, "-pthread", "-std=c11", "-o", str(exe), str(src)],
                               capture_output=True, text=True)
            if r.returncode == 0:
                break
            errors.append(r.stderr.strip())
        else:
            raise RuntimeError(f"cannot compile {src.name} with {cc}:\n" + "\n".join(errors))
        r = subprocess.run([str(exe), str(nbytes), str(reps), *map(str, threads)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"membw failed ({r.returncode}): {r.stderr.strip()}")
        data = json.loads(r.stdout)
    return {int(x["threads"]): x for x in data["results"]}


def run_engine(kite: Path, model: Path, prompt: str, steps: int, threads: int, iters: int,
               timeout: float) -> dict:
    cmd = [str(kite), "run", "--model", str(model), "--prompt", prompt, "--steps", str(steps),
           "--threads", str(threads), "--iters", str(iters), "--json"]
    env = dict(os.environ, KITE_THREADS=str(threads))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
    try:
        meta = json.loads(r.stdout)
    except ValueError as e:
        raise RuntimeError(f"output is not one JSON document ({e}): {r.stdout[:200]!r}") from None
    dec = (meta.get("timings") or {}).get("decode_ms")
    if not isinstance(dec, list) or not dec or not all(isinstance(x, (int, float)) and x > 0 for x in dec):
        raise RuntimeError(f"no usable timings.decode_ms in the engine's JSON: {dec!r}")
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kite", type=Path, default=REPO / "build" / "default" / "bin" / "kite")
    ap.add_argument("--models", default=DEFAULT_MODELS, help="RECIPE:TYPE,... (default: %(default)s)")
    ap.add_argument("--models-dir", type=Path, default=REPO / "models")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--steps", type=int, default=32, help="generated tokens per request")
    ap.add_argument("--iters", type=int, default=3, help="requests per run (median decode time)")
    ap.add_argument("--membw-bytes", type=int, default=1 << 30)
    ap.add_argument("--membw-reps", type=int, default=5)
    ap.add_argument("--cc", default=None, help="C compiler for the bandwidth probe (default: $CC or cc)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--membw-only", action="store_true", help="only measure the read bandwidth")
    a = ap.parse_args(argv)

    threads = [int(t) for t in a.threads.split(",") if t.strip()]
    models = []
    for item in a.models.split(","):
        recipe, _, qtype = item.strip().partition(":")
        models.append((recipe, qtype or None))

    kite = a.kite if a.kite.is_absolute() else (Path.cwd() / a.kite)
    if not a.membw_only and not (kite.is_file() and os.access(kite, os.X_OK)):
        log(f"cpu_decode: engine not found or not executable: {kite}\n"
            f"  build it first (e.g. `nox -s build`, or `python -m harness build`) or pass --kite PATH;\n"
            f"  --membw-only measures the memory bandwidth alone.")
        return 2

    load0 = os.getloadavg() if hasattr(os, "getloadavg") else None
    log(f"bandwidth probe: {a.membw_bytes / 2**30:.2f} GiB, best of {a.membw_reps}, threads {threads}")
    bw = measure_membw(threads, a.membw_bytes, a.membw_reps, a.cc)
    for t in threads:
        log(f"  {t} thread(s): best {bw[t]['best_gbps']:.2f} GB/s, median {bw[t]['median_gbps']:.2f} GB/s")
    result: dict = {"host": {"machine": platform.machine(), "system": platform.system(),
                             "cpus": os.cpu_count(), "loadavg_start": load0},
                    "membw": {str(t): bw[t] for t in threads}, "runs": []}
    if a.membw_only:
        print(json.dumps(result["membw"], indent=1))
        return 0

    sys.path.insert(0, str(REPO))
    from harness.models import ensure_model
    from harness.models.cli import gguf_summary

    rows = []
    failures = 0
    for recipe, qtype in models:
        t0 = time.perf_counter()
        path = ensure_model(recipe, a.models_dir, qtype)
        log(f"model {recipe} {qtype or ''}: {path.name} ({time.perf_counter() - t0:.1f} s)")
        summ = gguf_summary(path)
        bpt = summ["bytes_per_token"]
        tokens_by_t = {}
        for t in threads:
            row = {"model": recipe, "type": qtype or "-", "threads": t, "bytes_per_token": bpt,
                   "file": path.name, "membw_gbps": bw[t]["best_gbps"]}
            try:
                meta = run_engine(kite, path, a.prompt, a.steps, t, a.iters, a.timeout)
                dec = meta["timings"]["decode_ms"]
                ms = statistics.median(dec)
                tps = a.steps / (ms / 1e3)
                gbps = bpt * tps / 1e9
                row.update(decode_ms=dec, tok_s=tps, gbps=gbps, pct=100 * gbps / bw[t]["best_gbps"],
                           tok_s_best=a.steps / (min(dec) / 1e3))
                tokens_by_t[t] = meta.get("tokens")
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                failures += 1
                row["error"] = str(e)
                log(f"  {recipe} {qtype} T={t}: {e}")
            rows.append(row)
        toks = [v for v in tokens_by_t.values() if v is not None]
        same = (all(v == toks[0] for v in toks) if len(toks) > 1 else None)
        for row in rows[-len(threads):]:
            row["tokens_same_across_threads"] = same
        if same is False:
            failures += 1
    # measure again after the engine runs; the better of the two (per thread count) is the reference,
    # so that a burst of other load during one probe does not flatter the engine's percentage
    log("bandwidth probe, again after the runs")
    bw2 = measure_membw(threads, a.membw_bytes, a.membw_reps, a.cc)
    for t in threads:
        log(f"  {t} thread(s): best {bw2[t]['best_gbps']:.2f} GB/s, median {bw2[t]['median_gbps']:.2f} GB/s")
        best = max(bw[t]["best_gbps"], bw2[t]["best_gbps"])
        for r in rows:
            if r["threads"] == t:
                r["membw_gbps"] = best
                if "gbps" in r:
                    r["pct"] = 100 * r["gbps"] / best
    result["membw_after"] = {str(t): bw2[t] for t in threads}
    result["runs"] = rows
    result["host"]["loadavg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    result["request"] = {"prompt": a.prompt, "steps": a.steps, "iters": a.iters}

    hdr = (f"{'model':<12} {'type':<5} {'T':>2} {'tok/s':>8} {'MB/token':>9} {'GB/s':>7} "
           f"{'membw GB/s':>10} {'% bw':>6}  same tokens")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        same = {True: "yes", False: "NO", None: "-"}[r.get("tokens_same_across_threads")]
        if "error" in r:
            print(f"{r['model']:<12} {r['type']:<5} {r['threads']:>2} {'error':>8} "
                  f"{r['bytes_per_token'] / 1e6:>9.2f} {'':>7} {r['membw_gbps']:>10.2f} {'':>6}  {same}")
            continue
        print(f"{r['model']:<12} {r['type']:<5} {r['threads']:>2} {r['tok_s']:>8.1f} "
              f"{r['bytes_per_token'] / 1e6:>9.2f} {r['gbps']:>7.2f} {r['membw_gbps']:>10.2f} "
              f"{r['pct']:>5.0f}%  {same}")
    load1 = result["host"]["loadavg_end"]
    print(f"(decode: median of {a.iters} requests of {a.steps} tokens; membw: best of {a.membw_reps} "
          f"reads of {a.membw_bytes / 2**30:.2f} GiB, before and after the runs; load average "
          f"{load0[0] if load0 else float('nan'):.2f} at start, {load1[0] if load1 else float('nan'):.2f} at end)")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
