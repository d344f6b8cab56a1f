#!/usr/bin/env python3
"""A stand-in for llama-bench (llama.cpp's tools/llama-bench), used only by the benchmarks' tests:
`-m M -p P -n N [-d D] [-pg P,N] -r R -o json` prints llama-bench's JSON for its one test, with
deterministic times: FAKE_LLAMA_BENCH_STEP_MS a generated token (default 1.5; 1.5 times that with
GGML_CUDA_DISABLE_GRAPHS set, not "0"), 0.25 ms a prompt token; FAKE_LLAMA_BENCH_BACKENDS its
`backends` (default CUDA).
FAKE_BENCH_LOG=FILE appends one line per invocation: "graphs=on|off ARGV"."""

import json
import os
import sys


def main():
    argv = sys.argv[1:]
    opts = {argv[i]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    no_graphs = os.environ.get("GGML_CUDA_DISABLE_GRAPHS", "") not in ("", "0")
    if os.environ.get("FAKE_BENCH_LOG"):
        with open(os.environ["FAKE_BENCH_LOG"], "a") as f:
            f.write(f"graphs={'off' if no_graphs else 'on'} " + " ".join(argv) + "\n")
    if opts.get("-o") != "json" or not os.path.exists(opts.get("-m", "")):
        print("llama-bench: error: failed to load model", file=sys.stderr)
        return 1
    n_prompt, n_gen = int(opts.get("-p", "512")), int(opts.get("-n", "128"))
    if "-pg" in opts:
        n_prompt, n_gen = (int(x) for x in opts["-pg"].split(","))
    step_ms = float(os.environ.get("FAKE_LLAMA_BENCH_STEP_MS", "1.5")) * (1.5 if no_graphs else 1.0)
    ns = int((0.25 * n_prompt + step_ms * n_gen) * 1e6)
    reps = int(opts.get("-r", "5"))
    test = {"backends": os.environ.get("FAKE_LLAMA_BENCH_BACKENDS", "CUDA"), "n_gpu_layers": int(opts.get("-ngl", "-1")), "n_prompt": n_prompt, "n_gen": n_gen,
            "n_depth": int(opts.get("-d", "0")), "n_ubatch": int(opts.get("-ub", "512")), "type_k": "f16",
            "samples_ns": [ns] * reps, "samples_ts": [(n_prompt + n_gen) / (ns / 1e9)] * reps}
    print(json.dumps([test], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
