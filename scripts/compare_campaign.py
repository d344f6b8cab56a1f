#!/usr/bin/env python3
"""A compare campaign on a shared machine: A/A compares (a revision against itself, short-circuit
off) and compares against planted slowdowns, all under a bounded synthetic background load, with
the false alarms and the found rate counted (docs/COMPARE.md, "Campaign").

    python3 scripts/compare_campaign.py --out docs/results/DATE-cpu-compare-campaign [--aa 40]
        [--planted 0.02 0.05] [--per-planted 6] [--max-pairs 80] [--max-seconds 15] [--minutes 28]

The planted slowdown is a commit (made here with git plumbing, on no branch) whose
KITE_DEBUG_STEP_DELAY_US default is the share asked of the median decode step of the A/A runs.
The load: one process that spins in bursts of 0.5-3 s for the share --load of the time, and stops
itself at the deadline. Each compare's folder is kept under --work; OUT gets campaign.md and
campaign.json (every compare's verdict, ratio, interval, pairs; the A/A pair ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DELAY_FILE = "native/engine/env_options.c"
DELAY_RE = re.compile(r'(read_number\("KITE_DEBUG_STEP_DELAY_US", 0, KT_STEP_DELAY_US_MAX, )(\d+)(\))')


def load(seconds: float, share: float, seed: int) -> None:
    """Bursts of spinning for `share` of the time, until `seconds` have passed."""
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        burst = rng.uniform(0.5, 3.0)
        stop = min(end, time.monotonic() + burst)
        while time.monotonic() < stop:
            pass
        time.sleep(min(max(0.0, end - time.monotonic()), burst * (1.0 - share) / share))


def git(*args: str, env: dict[str, str] | None = None, data: bytes | None = None) -> str:
    r = subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, input=data,
                       env={**os.environ, **(env or {})})
    return r.stdout.decode().strip()


def planted_commit(base: str, delay_us: int) -> str:
    """A commit on no branch: `base` with the step delay's default raised to delay_us."""
    text = git("show", f"{base}:{DELAY_FILE}")
    new, n = DELAY_RE.subn(lambda m: f"{m.group(1)}{delay_us}{m.group(3)}", text)
    if n != 1:
        raise SystemExit(f"{DELAY_FILE}: the step delay's default was not found once")
    blob = git("hash-object", "-w", "--stdin", data=(new + "\n").encode())
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git("read-tree", base, env=env)
        git("update-index", "--cacheinfo", f"100644,{blob},{DELAY_FILE}", env=env)
        tree = git("write-tree", env=env)
    return git("commit-tree", tree, "-p", base, "-m", f"planted: step delay {delay_us} us", "--no-gpg-sign",
               env={"GIT_AUTHOR_NAME": "campaign", "GIT_AUTHOR_EMAIL": "campaign@kite",
                    "GIT_COMMITTER_NAME": "campaign", "GIT_COMMITTER_EMAIL": "campaign@kite"})


def compare(base: str, head: str, folder: Path, args: argparse.Namespace) -> dict:
    argv = [sys.executable, "-m", "harness", "compare", base, head, "--only", *args.only, "--no-short-circuit",
            "--max-pairs", str(args.max_pairs), "--max-seconds", str(args.max_seconds), "--cache", str(args.cache),
            "--out", str(folder)]
    t0 = time.monotonic()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    rep = json.loads((folder / "report.json").read_text()) if (folder / "report.json").exists() else {}
    ws = rep.get("workloads") or [{"speed": "error", "reason": r.stderr[-500:]}]
    return {"base": base, "head": head, "exit": r.returncode, "seconds": round(time.monotonic() - t0, 1),
            "workloads": [{k: w.get(k) for k in ("id", "speed", "ratio", "interval", "pairs", "level", "p_value",
                                                 "seconds")} | {"ratios": [round(p["ratio"], 5) for p in w.get("pair_log", [])],
                                                                "base_ms": [p["base"] for p in w.get("pair_log", [])]}
                          for w in ws]}


def summary(rows: list[dict], what: str) -> dict:
    ws = [w for r in rows for w in r["workloads"]]
    verdicts = {v: sum(w["speed"] == v for w in ws) for v in sorted({w["speed"] for w in ws})}
    pairs = [w["pairs"] for w in ws if w.get("pairs")]
    return {"what": what, "compares": len(rows), "workloads": len(ws), "verdicts": verdicts,
            "alarms": sum(w["speed"] in ("regressed", "improved") for w in ws),
            "found": sum(w["speed"] == "regressed" for w in ws),
            "median_pairs": statistics.median(pairs) if pairs else None,
            "median_ratio": statistics.median([w["ratio"] for w in ws if w.get("ratio")]) if ws else None,
            "median_seconds": statistics.median([r["seconds"] for r in rows]) if rows else None}


def markdown(doc: dict) -> str:
    out = [f"# compare on a shared 2-core machine: {doc['aa']['compares']} A/A compares, planted slowdowns", "",
           f"- command: `{doc['command']}`",
           f"- harness and engine: `{doc['revision']}`; workloads {', '.join(doc['only'])}; budget "
           f"{doc['max_pairs']} pairs or {doc['max_seconds']} s of timing a compare",
           f"- machine: {doc['machine']}; load average {doc['loadavg_before']} before, {doc['loadavg_after']} after",
           f"- synthetic background load: one process spinning {doc['load'] * 100:g} % of the time in bursts of "
           f"0.5-3 s (seed {doc['seed']}), stopped at the deadline; other engineers' work shared the machine too",
           f"- decode step {doc['step_ms']:.4f} ms ({'given' if doc['step_given'] else 'the median of the A/A base runs'}"
           f"): the planted delays are that share of a step",
           f"- wall time {doc['wall_minutes']:.1f} min{'; stopped at the deadline' if doc['stopped_early'] else ''}",
           "", "| compares | what | verdicts | false alarms / found | median pairs | median ratio | median s |",
           "| ---: | --- | --- | --- | ---: | ---: | ---: |"]
    for s in [doc["aa"], *doc["planted"]] if doc["aa"]["compares"] else doc["planted"]:
        hit = (f"{s['alarms']} of {s['workloads']} false alarms" if s["what"] == "A/A" else
               f"found {s['found']} of {s['workloads']} ({100 * s['found'] / max(1, s['workloads']):.0f} %)")
        v = ", ".join(f"{k} {n}" for k, n in s["verdicts"].items())
        out.append(f"| {s['compares']} | {s['what']} | {v} | {hit} | {s['median_pairs']} | "
                   f"{s['median_ratio']:.4f} | {s['median_seconds']:.1f} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for campaign.md and campaign.json")
    p.add_argument("--work", type=Path, help="compare report folders (default: a temporary folder, removed)")
    p.add_argument("--cache", type=Path, help="compare cache (default: a temporary folder, removed)")
    p.add_argument("--only", nargs="+", default=["CMP1"], help="workloads (default CMP1)")
    p.add_argument("--aa", type=int, default=40, help="A/A compares (default 40)")
    p.add_argument("--planted", type=float, nargs="*", default=[0.02, 0.05], help="planted slowdowns (shares)")
    p.add_argument("--per-planted", type=int, default=6, help="compares per planted slowdown (default 6)")
    p.add_argument("--max-pairs", type=int, default=80)
    p.add_argument("--max-seconds", type=float, default=15.0)
    p.add_argument("--load", type=float, default=0.5, help="share of the time the load spins (default 0.5)")
    p.add_argument("--minutes", type=float, default=28.0, help="deadline: no compare starts after it")
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--step-ms", type=float, help="the decode step the planted shares are of (default: the A/A "
                   "runs' median)")
    p.add_argument("--record", metavar="NAME", help="store the A/A pair ratios as calibration noise NAME "
                   "(bench/data/compare_aa_pairs.json)")
    p.add_argument("--load-child", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.load_child is not None:
        load(args.load_child, args.load, args.seed)
        return 0
    if not 0 < args.load < 1:
        p.error("--load must be in (0, 1)")
    t0 = time.monotonic()
    deadline = t0 + 60 * args.minutes
    tmp = Path(tempfile.mkdtemp(prefix="kite-campaign-"))
    args.work = args.work or tmp / "work"
    args.cache = args.cache or tmp / "cache"
    rev = git("rev-parse", "HEAD")
    command = "python3 scripts/compare_campaign.py " + " ".join(argv if argv is not None else sys.argv[1:])
    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    loader = subprocess.Popen([sys.executable, __file__, "--out", str(args.out), "--load", str(args.load),
                               "--seed", str(args.seed), "--load-child", str(60 * args.minutes)])
    def series(label: str, head: str, n: int, name: str) -> list[dict]:
        """Up to n compares of rev against head, none started after the deadline."""
        rows: list[dict] = []
        for i in range(n):
            if time.monotonic() > deadline:
                break
            rows.append(compare(rev, head, args.work / f"{name}-{i + 1:02d}", args))
            w = rows[-1]["workloads"][0]
            print(f"{label} {i + 1}: {w['speed']} {w.get('ratio')} {w.get('pairs')} pairs, {rows[-1]['seconds']} s",
                  flush=True)
        return rows

    aa: list[dict] = []
    planted: list[tuple[float, int, list[dict]]] = []
    try:
        aa = series("A/A", rev, args.aa, "aa")
        base_ms = [x for r in aa for w in r["workloads"] for x in w["base_ms"]]
        step_ms = args.step_ms or (statistics.median(base_ms) / 64 if base_ms else 0.0)
        if args.planted and not step_ms:
            raise SystemExit("no A/A run to take the decode step from: give --step-ms")
        for share in args.planted:
            delay = max(1, round(share * step_ms * 1000))
            rows = series(f"planted {share:g} ({delay} us)", planted_commit(rev, delay), args.per_planted,
                          f"planted-{share:g}")
            planted.append((share, delay, rows))
    finally:
        loader.terminate()
        loader.wait()
    if args.record and aa:
        sys.path.insert(0, str(ROOT))
        from harness.compare.calibrate import COMPARE_DATA, record  # noqa: PLC0415 - only with --record
        n = record(COMPARE_DATA, args.record, sorted(args.work.glob("aa-*/report.json")),
                   f"{len(aa)} A/A compares of {', '.join(args.only)} on a shared 2-core machine under a synthetic "
                   f"load ({args.load * 100:g} % of the time): {command} at {rev[:10]}")
        print(f"calibration noise {args.record}: {n} runs")
    for r in aa:
        for w in r["workloads"]:
            w.pop("base_ms")
    doc = {"command": command, "revision": rev, "only": args.only, "max_pairs": args.max_pairs,
           "max_seconds": args.max_seconds, "load": args.load, "seed": args.seed,
           "machine": f"{os.cpu_count()} CPUs", "loadavg_before": before,
           "loadavg_after": " ".join(f"{x:.2f}" for x in os.getloadavg()), "step_ms": step_ms,
           "step_given": bool(args.step_ms),
           "wall_minutes": (time.monotonic() - t0) / 60,
           "stopped_early": len(aa) < args.aa or any(len(r) < args.per_planted for _, _, r in planted),
           "aa": summary(aa, "A/A"),
           "planted": [summary(rows, f"planted +{share * 100:g} % ({delay} µs a step)")
                       for share, delay, rows in planted],
           "runs": {"aa": aa, "planted": {f"{share:g}": rows for share, _, rows in planted}}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "campaign.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "campaign.md").write_text(markdown(doc))
    print(markdown(doc))
    for path in re.findall(r"^worktree (.+)$", git("worktree", "list", "--porcelain"), re.M):
        if Path(path).is_relative_to(args.cache):  # the cache's checkouts are worktrees of this repository
            git("worktree", "remove", "--force", path)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
