#!/usr/bin/env python3
"""A stand-in for the kite engine, used only by the harness's own tests.

It speaks the command line of docs/KITE-ENGINE.md (info, run, selftest) with small, deterministic
outputs, and has knobs (environment variables) to misbehave:

  FAKE_CRASH=SIGSEGV       die by that signal (any command)
  FAKE_HANG=1              sleep forever (also FAKE_HANG_IF_MARK=1 with FAKE_SLEEP_MARK=1)
  FAKE_EXIT=N              exit with status N after printing an error
  FAKE_SAY=TEXT            with FAKE_EXIT: then this line (Python escapes such as \x1b decoded)
  FAKE_TRUNCATE=h_out      write only half of that dump
  FAKE_FLIP_ULP=logits:K   flip the lowest bit of element K of that dump
  FAKE_NAN=h_out:K         put a NaN at element K
  FAKE_NO_META=1           write no meta.json
  FAKE_META_AS=KIND        meta.json as a directory, fifo, binary data or deep (JSON nested 100000 deep)
  FAKE_NO_GPU_STEPS=1      counters claim no GPU step even with a device
  FAKE_REQUEST_MS=X        base request time (default 10), FAKE_NOISE=0.02 relative noise (seeded
                           by a run count kept in the file FAKE_NOISE_STATE)
  FAKE_GREEDY_SHARE=X      the greedy picks' share of each decode window (default 0.05)
  FAKE_SELFTEST_FAIL=N     N selftest checks fail (FAKE_SELFTEST_PAD=N: N bytes of lines before)
  FAKE_LOG=FILE            append one line per invocation (argv)
  FAKE_HANG_AT=N           with FAKE_LOG: sleep forever when this invocation writes line N of it
  FAKE_STUB=1              behave as a stub build (KITE_CUDA=OFF)

The module is simulated by a JSON file named like the real one ({"abi": 1, "device": true,
"missing": "kcuda_step_m"}), found in the real discovery order.
KITE_DEBUG_STEP_DELAY_US adds that much to each row's reported time (simulated, no waiting).
"""

import json
import math
import os
import random
import signal
import struct
import sys
import time

ABI = 1
E, V = 16, 32


def misbehave():
    if os.environ.get("FAKE_SPAWN_HELPER"):  # a helper in a session of its own that outlives the engine
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                          "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
                          "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\ntime.sleep(600)",
                          os.environ["FAKE_SPAWN_HELPER"]], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(os.environ["FAKE_SPAWN_HELPER"]):
            time.sleep(0.01)
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write(" ".join(sys.argv[1:]) + "\n")
        if os.environ.get("FAKE_HANG_AT"):
            with open(os.environ["FAKE_LOG"]) as f:
                if sum(1 for _ in f) == int(os.environ["FAKE_HANG_AT"]):
                    time.sleep(3600)
    sig = os.environ.get("FAKE_CRASH")
    if sig:
        sys.stdout.flush()
        os.kill(os.getpid(), getattr(signal, sig))
        time.sleep(5)
    if os.environ.get("FAKE_HANG") or (os.environ.get("FAKE_HANG_IF_MARK") and os.environ.get("FAKE_SLEEP_MARK")):
        time.sleep(3600)
    if os.environ.get("FAKE_EXIT"):
        print("kite: error: planted failure", file=sys.stderr)
        if os.environ.get("FAKE_SAY"):  # a last stderr line, Python escapes decoded (\x1b, \x00, \u202e)
            print(os.environ["FAKE_SAY"].encode().decode("unicode_escape"), file=sys.stderr)
        sys.exit(int(os.environ["FAKE_EXIT"]))


def noise_rng():
    """A generator seeded by how many runs came before, counted in the file FAKE_NOISE_STATE (the
    tests' conftest gives each test its own): the draws differ from run to run, and a test's
    sequence of runs gets the same draws in every session, so a verdict on noisy times cannot
    change by chance. Without FAKE_NOISE_STATE the draws are unseeded."""
    counter = os.environ.get("FAKE_NOISE_STATE")
    if not counter:
        return random.Random()
    with open(counter, "a+") as f:
        try:
            import fcntl

            fcntl.flock(f, fcntl.LOCK_EX)
        except ImportError:
            pass
        f.seek(0)
        n = int(f.read() or 0)
        f.seek(0)
        f.truncate()
        f.write(str(n + 1))
    return random.Random(n)


def module_info():
    stub = os.environ.get("FAKE_STUB") == "1"
    gates = {"graph": os.environ.get("KITE_CUDA_GRAPH", "1") != "0",
             "graph_m": os.environ.get("KITE_CUDA_GRAPH_M", "0") not in ("", "0"),
             "force_cpu": os.environ.get("KITE_CUDA_FORCE_CPU", "0") not in ("", "0"),
             "flops_min": 1000000}
    info = {"compiled": not stub, "search": [], "loaded_path": "", "bound": False, "engine_abi": ABI,
            "module_abi": -1, "available": False, "init_status": 0, "reason": "", "note": "", "device": None,
            "gates": gates}
    if stub:
        info["reason"] = "stub build (KITE_CUDA=OFF)"
        return info
    name = "libkite_cuda.so"
    exe_dir = os.path.dirname(os.path.abspath(sys.argv[0]))
    cands = [("KITE_CUDA_LIB", os.environ.get("KITE_CUDA_LIB", ""))]
    cands.append(("exe_dir", os.path.join(exe_dir, name)))
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d:
            cands.append(("system", os.path.join(d, name)))
    mod = None
    for how, path in cands:
        if mod is not None:
            break
        if how == "KITE_CUDA_LIB" and not path:
            info["search"].append({"how": how, "path": "", "result": "not set"})
            continue
        if not os.path.exists(path):
            info["search"].append({"how": how, "path": path, "result": "not found"})
            if how == "KITE_CUDA_LIB":
                break  # explicit path: one load attempt
            continue
        info["search"].append({"how": how, "path": path, "result": "loaded"})
        info["loaded_path"] = path
        try:
            mod = json.load(open(path))
        except ValueError:
            mod = {"abi": ABI, "device": False}
        break
    if mod is None:
        info["reason"] = "module not found"
        return info
    if mod.get("missing"):
        info["note"] = f"refused: missing symbol {mod['missing']}"
        info["reason"] = info["note"]
        info["loaded_path"] = ""
        return info
    info["module_abi"] = mod.get("abi", ABI)
    if info["module_abi"] != ABI:
        info["note"] = f"refused: module ABI {info['module_abi']} != engine ABI {ABI}"
        info["reason"] = info["note"]
        return info
    info["bound"] = True
    if mod.get("device"):
        info["available"] = True
        info["device"] = {"name": "Fake GPU", "cc": "9.0", "mem_total": 1 << 34, "driver_version": 13000,
                          "runtime_version": 13000}
    else:
        info["init_status"] = 35
        info["reason"] = "no driver: cudart error 35 (cudaErrorInsufficientDriver)"
    return info


def cmd_info(argv):
    info = {"kite_version": "0.1.0", "abi_version": ABI,
            "build": {"compiler": "fake", "kite_cuda": os.environ.get("FAKE_STUB") != "1", "simd": "none",
                      "os": "linux", "arch": "x86_64"},
            "threads_default": 2, "cuda": module_info()}
    if "--json" in argv:
        print(json.dumps(info))
    else:
        print(f"kite 0.1.0, module bound: {info['cuda']['bound']}, available: {info['cuda']['available']}")
    return 0


def opt(argv, name, default=None):
    if name in argv:
        i = argv.index(name)
        if i + 1 >= len(argv):
            print(f"kite: {name} needs a value", file=sys.stderr)
            sys.exit(2)
        return argv[i + 1]
    return default


def cmd_run(argv):
    model = opt(argv, "--model")
    if not model or not os.path.exists(model):
        print(f"kite: error: cannot open model {model!r}", file=sys.stderr)
        return 1
    prompt = [int(x) for x in opt(argv, "--prompt", "1").split(",")]
    steps = int(opt(argv, "--steps", "0"))
    mt = int(opt(argv, "--mt", "1"))
    iters = int(opt(argv, "--iters", "1"))
    dump = opt(argv, "--dump")
    info = module_info()
    gpu = info["available"] and not info["gates"]["force_cpu"] and not os.environ.get("FAKE_NO_GPU_STEPS")
    rows = len(prompt) + steps
    toks = list(prompt)
    for _ in range(steps):
        toks.append((toks[-1] * 7 + 3) % V)
    h = [math.sin(0.37 * p + 0.11 * j + toks[p]) for p in range(rows) for j in range(E)]
    lg = [math.cos(0.21 * p + 0.05 * j + toks[p]) for p in range(rows) for j in range(V)]
    base = float(os.environ.get("FAKE_REQUEST_MS", "10"))
    noise = float(os.environ.get("FAKE_NOISE", "0"))
    delay_ms = float(os.environ.get("KITE_DEBUG_STEP_DELAY_US", "0")) / 1000.0
    if gpu and info["gates"]["graph"]:
        base *= 0.8
    rng = noise_rng() if noise else random.Random(0)
    req = [(base + rows * delay_ms) * (1 + rng.gauss(0, noise)) for _ in range(iters)]
    counters = {"gpu_steps": rows * iters if gpu else 0, "cpu_steps": 0 if gpu else rows * iters,
                "mrow_calls": 0, "cpu_mrow_calls": 0, "offload_gpu": 0, "offload_cpu": 0,
                "graph_captures": iters if gpu and info["gates"]["graph"] else 0,
                "graph_replays": rows * iters if gpu and info["gates"]["graph"] else 0,
                "mrow_graph_replays": 0, "stream_steps": rows * iters if gpu and not info["gates"]["graph"] else 0}
    if mt > 1:
        key = "mrow_calls" if gpu else "cpu_mrow_calls"
        counters[key] = -(-len(prompt) // mt) * iters
        if gpu and info["gates"]["graph_m"]:
            counters["mrow_graph_replays"] = counters["mrow_calls"]
    meta = {"kite_version": "0.1.0",
            "model": {"path": model, "bytes": os.path.getsize(model), "weight_bytes": os.path.getsize(model),
                      "sha256": None, "arch": "qwen35"},
            "request": {"prompt": prompt, "prompt_len": len(prompt), "steps": steps, "mt": mt, "threads": 2,
                        "iters": iters},
            "tokens": toks[len(prompt):], "shapes": {"h_out": [rows, E], "logits": [rows, V]},
            "backend": info, "counters": counters,
            "timings": {"load_ms": 1.0, "prepare_ms": 0.5, "request_ms": req, "step_ms": [r / rows for r in req],
                        "prefill_ms": [r * len(prompt) / rows for r in req],
                        "decode_ms": [r * steps / rows for r in req],
                        "step_greedy_ms": [float(os.environ.get("FAKE_GREEDY_SHARE", "0.05")) * r * steps / rows
                                           for r in req]}}
    bufs = {"h_out": struct.pack(f"<{len(h)}f", *h), "logits": struct.pack(f"<{len(lg)}f", *lg)}
    for knob in ("FAKE_FLIP_ULP", "FAKE_NAN"):
        if os.environ.get(knob):
            name, k = os.environ[knob].split(":")
            b = bytearray(bufs[name])
            k = int(k)
            if knob == "FAKE_FLIP_ULP":
                b[4 * k] ^= 1
            else:
                b[4 * k:4 * k + 4] = struct.pack("<f", float("nan"))
            bufs[name] = bytes(b)
    if os.environ.get("FAKE_TRUNCATE"):
        name = os.environ["FAKE_TRUNCATE"]
        bufs[name] = bufs[name][: len(bufs[name]) // 2]
    if dump:
        os.makedirs(dump, exist_ok=True)
        files = {"h_out.f32": bufs["h_out"], "logits.f32": bufs["logits"]}
        if not os.environ.get("FAKE_NO_META"):
            files["meta.json"] = json.dumps(meta).encode()
        for fn, data in files.items():
            with open(os.path.join(dump, fn + ".tmp"), "wb") as f:
                f.write(data)
            os.replace(os.path.join(dump, fn + ".tmp"), os.path.join(dump, fn))
        odd = os.environ.get("FAKE_META_AS")
        if odd:
            meta_path = os.path.join(dump, "meta.json")
            os.remove(meta_path)
            if odd == "directory":
                os.mkdir(meta_path)
            elif odd == "fifo":
                os.mkfifo(meta_path)
            else:
                with open(meta_path, "wb") as f:
                    f.write(b"\0\1\2" if odd == "binary" else b"[" * 100_000 + b"]" * 100_000)
    if "--json" in argv:
        print(json.dumps(meta))
    return 0


def cmd_selftest(argv):
    fail = int(os.environ.get("FAKE_SELFTEST_FAIL", "0"))
    pad = int(os.environ.get("FAKE_SELFTEST_PAD", "0"))
    if pad:
        sys.stdout.write(("." * 79 + "\n") * (pad // 80))
    names = ["reader", "quant_q8_0", "quant_q4_0", "f16", "bf16", "math_expf", "gemm", "threads"]
    for i, n in enumerate(names):
        print(f"FAIL {n}: planted" if i < fail else f"PASS {n}")
    print(f"{len(names) - fail} passed, {fail} failed")
    return 1 if fail else 0


def main():
    misbehave()
    argv = sys.argv[1:]
    if not argv:
        print("usage: kite info|run|selftest", file=sys.stderr)
        return 2
    cmd = {"info": cmd_info, "run": cmd_run, "selftest": cmd_selftest}.get(argv[0])
    if cmd is None:
        print(f"kite: unknown command {argv[0]!r}\nusage: kite info|run|selftest", file=sys.stderr)
        return 2
    return cmd(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
