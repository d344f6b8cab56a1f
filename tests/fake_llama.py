#!/usr/bin/env python3
"""A stand-in for the llama.cpp adapter (native/llamacpp/kite_llama.c), used only by the benchmark's
tests: `run ... --json` prints the meta object the adapter prints, with deterministic timings.

  FAKE_LLAMA_STEP_MS=X      each decode step's time with CUDA graphs (default 2.0); graphs off
                            (GGML_CUDA_DISABLE_GRAPHS set, not "0") take 1.5 times as long
  FAKE_LLAMA_GPU_DEVICES=N  GPU devices found (default 1; 0: a CPU-only machine or build)
  FAKE_LLAMA_NAN=N          N non-finite logits
  --sampler backend         the pick takes a tenth of the host's, and no logits reach the host: a step
                            of 1.82 ms where the host pick's is 2.0 (graphs on)
  FAKE_LLAMA_BACKEND_SAMPLING=0  a build without backend sampling: `info --json` says
                            backend_sampling false and `run --sampler backend` fails, as the adapter's
  FAKE_LLAMA_SAMPLER_IGNORED=1   `--sampler backend` is taken and ignored: the host picks (a broken build)
  FAKE_LOG=FILE             append one line per `run`: "llama.cpp graphs=on|off ARGV"

`info --json` prints the build's facts: engine, threads_default, backend_sampling, backend.
"""

import json
import os
import sys


def opt(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def backend_of(devices, gpu_layers, no_graphs):
    return {"engine": "llama.cpp", "system_info": "fake", "gpu_devices": devices, "available": devices > 0,
            "gpu_layers": gpu_layers, "cuda_graphs_disabled": no_graphs,
            "devices": [{"name": "CUDA0", "description": "Fake GPU", "type": "gpu"}] * devices
            + [{"name": "CPU", "description": "Fake CPU", "type": "cpu"}]}


def main():
    argv = sys.argv[1:]
    no_graphs = os.environ.get("GGML_CUDA_DISABLE_GRAPHS", "") not in ("", "0")
    devices = int(os.environ.get("FAKE_LLAMA_GPU_DEVICES", "1"))
    backend_sampling = os.environ.get("FAKE_LLAMA_BACKEND_SAMPLING", "1") != "0"
    if argv[:1] == ["info"]:
        info = {"engine": "llama.cpp", "threads_default": 2, "backend_sampling": backend_sampling,
                "backend": backend_of(devices, -1 if devices > 0 else 0, no_graphs)}
        print(json.dumps(info) if "--json" in argv else f"llama.cpp: {devices} GPU device(s); fake")
        return 0
    if not argv or argv[0] != "run":
        print("usage: kite-llama info|run", file=sys.stderr)
        return 2
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write(f"llama.cpp graphs={'off' if no_graphs else 'on'} " + " ".join(argv[1:]) + "\n")
    model = opt(argv, "--model", "")
    if not os.path.exists(model):
        print(f"kite-llama: error: {model}: llama.cpp could not load the model", file=sys.stderr)
        return 1
    prompt = [int(x) for x in opt(argv, "--prompt", "1").split(",")]
    steps, mt, iters = (int(opt(argv, k, d)) for k, d in (("--steps", "0"), ("--mt", "1"), ("--iters", "1")))
    ngl = int(opt(argv, "--ngl", "-1"))
    gpu_layers = (100000 if devices > 0 else 0) if ngl < 0 else ngl
    step_ms = float(os.environ.get("FAKE_LLAMA_STEP_MS", "2.0")) * (1.5 if no_graphs else 1.0)
    prefill_ms = 0.5 * len(prompt)
    backend_pick = opt(argv, "--sampler", "host") == "backend"
    if backend_pick and not backend_sampling:
        print("kite-llama: error: --sampler backend: this llama.cpp has no backend sampling "
              "(llama_get_sampled_token_ith)", file=sys.stderr)
        return 1
    backend_pick = backend_pick and os.environ.get("FAKE_LLAMA_SAMPLER_IGNORED", "0") == "0"
    pick_ms = step_ms * (0.01 if backend_pick else 0.1)  # a step: 0.9 of step_ms decoding, then the pick
    backend = backend_of(devices, gpu_layers, no_graphs)
    meta = {"engine": "llama.cpp",
            "model": {"path": model, "bytes": os.path.getsize(model) - 4096,  # tensors only, as llama_model_size
                      "n_embd": 16, "n_vocab": 32},
            "request": {"prompt": prompt, "prompt_len": len(prompt), "steps": steps, "mt": mt,
                        "threads": int(opt(argv, "--threads", "2")), "iters": iters},
            "tokens": [(7 * s + 3) % 32 for s in range(steps)],
            "shapes": {"h_out": [len(prompt) + steps, 16], "logits": [len(prompt) + steps, 32]},
            "backend": backend,
            "options": {"kv_type": opt(argv, "--kv-type", "f32"), "flash_attn": opt(argv, "--flash-attn", "off")},
            "counters": {"gpu_layers": gpu_layers, "gpu_devices": devices, "graph_reuses": 0},
            "nonfinite": {"h_out": 0, "logits": None if backend_pick else int(os.environ.get("FAKE_LLAMA_NAN", "0"))},
            "outputs": {"embeddings": "--dump" in argv or opt(argv, "--embeddings", "off") == "on",
                        "keep_rows": "--dump" in argv or opt(argv, "--keep-rows", "off") == "on",
                        "prompt_logits": opt(argv, "--prompt-logits", "all" if "--dump" in argv else "last"),
                        "threadpool": opt(argv, "--threadpool", "on") == "on",
                        "sampler": "backend" if backend_pick else "host", "logits_rows_checked": 0 if backend_pick else 1},
            "timings": {"load_ms": 1.0, "prepare_ms": 0.5,
                        "request_ms": [prefill_ms + steps * (step_ms * 0.9 + pick_ms)] * iters,
                        "prefill_ms": [prefill_ms] * iters, "decode_ms": [steps * (step_ms * 0.9 + pick_ms)] * iters,
                        "step_decode_ms": [steps * step_ms * 0.9] * iters, "step_greedy_ms": [steps * pick_ms] * iters,
                        "step_copy_ms": [0.0] * iters}}
    if "--json" in argv:
        print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
