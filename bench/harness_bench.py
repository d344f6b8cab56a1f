#!/usr/bin/env python3
"""The harness's own costs (a table, not a timed test):

- `python -m harness --help` start-up time;
- evaluating 100 equivalence comparisons on 1 MB dumps (goal < 2 s);
- harness overhead per engine run beyond the engine itself (goal < 20 ms): the same tiny
  program run directly with os.posix_spawn + waitpid, and through the harness's run_process
  (environment overlay, log files, timeout timer, resource accounting).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def median_time(fn, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_help() -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return median_time(lambda: subprocess.run([sys.executable, "-m", "harness", "--help"], env=env, cwd=ROOT,
                                              stdout=subprocess.DEVNULL, check=True), 5)


def bench_python_bare() -> float:
    return median_time(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 5)


def bench_compare() -> tuple[float, float]:
    import numpy as np

    from harness.run.dumpdiff import compare_bytes

    rng = np.random.default_rng(0)
    a = rng.standard_normal(262144).astype("<f4")  # 1 MiB
    b = a.copy()
    b.view(np.uint32)[123457] += 1
    meta = json.dumps({"shapes": {"logits": [256, 1024]}, "counters": {"graph_replays": 5}})
    with tempfile.TemporaryDirectory() as d:
        for name, arr in (("a", a), ("b", b), ("c", a)):
            (Path(d) / name).mkdir()
            (Path(d) / name / "logits.f32").write_bytes(arr.tobytes())
            (Path(d) / name / "meta.json").write_text(meta)

        def criterion(x: str, y: str) -> None:
            """What one memcmp criterion does after the engine ran: read meta + dumps, check, compare."""
            ma = json.loads((Path(d) / x / "meta.json").read_text())
            mb = json.loads((Path(d) / y / "meta.json").read_text())
            assert ma["counters"]["graph_replays"] > 0 and mb["counters"]["graph_replays"] > 0
            compare_bytes((Path(d) / x / "logits.f32").read_bytes(), (Path(d) / y / "logits.f32").read_bytes(),
                          1024, shape_a=ma["shapes"]["logits"], shape_b=mb["shapes"]["logits"])

        t_same = median_time(lambda: [criterion("a", "c") for _ in range(100)], 3)
        t_diff = median_time(lambda: [criterion("a", "b") for _ in range(100)], 3)
    return t_same, t_diff


def bench_overhead(target: list[str]) -> tuple[float, float]:
    from harness.process import run_process

    def direct() -> None:
        pid = os.posix_spawn(target[0], target, dict(os.environ))
        os.waitpid(pid, 0)

    with tempfile.TemporaryDirectory() as d:
        def harness() -> None:
            run_process(target, {"KITE_THREADS": "1"}, timeout=30, log_prefix=Path(d) / "run")

        for _ in range(3):
            direct()
            harness()
        return median_time(direct, 30), median_time(harness, 30)


def main() -> int:
    from tabulate import tabulate

    rows = []
    t_help, t_py = bench_help(), bench_python_bare()
    rows.append(["python -m harness --help", f"{t_help * 1000:.0f} ms", f"(bare python start-up {t_py * 1000:.0f} ms)",
                 ""])
    t_same, t_diff = bench_compare()
    rows.append(["100 equivalence criteria, 1 MiB dumps, identical", f"{t_same * 1000:.0f} ms", "goal < 2 s",
                 "ok" if t_same < 2 else "SLOW"])
    rows.append(["100 equivalence criteria, 1 MiB dumps, 1 ULP differs", f"{t_diff * 1000:.0f} ms", "goal < 2 s",
                 "ok" if t_diff < 2 else "SLOW"])
    kite = ROOT / "build" / "default" / "bin" / "kite"
    target = [str(kite), "info"] if kite.exists() else ["/bin/true"]
    t_direct, t_h = bench_overhead(target)
    over = (t_h - t_direct) * 1000
    rows.append(["one engine run: " + " ".join([Path(target[0]).name, *target[1:]]),
                 f"{t_h * 1000:.1f} ms", f"direct spawn {t_direct * 1000:.1f} ms; overhead {over:.1f} ms (goal < 20)",
                 "ok" if over < 20 else "SLOW"])
    print(tabulate(rows, headers=["what", "median", "note", "verdict"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
