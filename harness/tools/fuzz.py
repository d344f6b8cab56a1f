"""`python -m harness fuzz`: build the libFuzzer targets and run them for a given time.

Targets (native/fuzz/CMakeLists.txt, CMake option KITE_FUZZ, clang only):

  gguf   the GGUF reader alone (native/engine/fuzz_gguf.c)
  model  the model loader on top of the reader, plus a two-token forward pass for inputs that
         load and have a small state (native/fuzz/fuzz_model.c)

Steps: build into build/fuzz/ (clang, -fsanitize=fuzzer,address,undefined, KITE_CUDA=OFF);
gather the seeds (the default tiny model, the micro recipe native/fuzz/micro.yaml in four
tensor types, the conformance fixtures when present, and the kept regression inputs); replay every
regression input once (each must pass); then fuzz each target for --seconds (or --runs inputs),
one worker, with a corpus kept under build/fuzz/corpus/<target>/ between runs (--corpus elsewhere). Crash, leak, timeout and
out-of-memory inputs are copied into tests/data/fuzz_regressions/ as `<kind>-<target>-<sha1>`.

The summary (stdout, and build/fuzz/summary.json) gives per target: seconds, executions,
exec/s, the final `cov:` (edges) and `ft:` (features) of libFuzzer, corpus size, peak RSS and
the findings. Exit status: 0 no finding, 1 a finding (or a regression input failed), 2 usage
or tool problem (no clang, build failed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.builder import cmake as B
from harness.errors import HarnessError
from harness.models.gen import ensure_model, generate
from harness.models.recipes import load_recipe
from harness.contract.config import load_config

TARGETS = {"gguf": "fuzz_gguf", "model": "fuzz_model"}
FINDING_PREFIXES = ("crash-", "leak-", "timeout-", "oom-")
REGRESSIONS = Path("tests") / "data" / "fuzz_regressions"
MICRO_RECIPE = Path("native") / "fuzz" / "micro.yaml"
MICRO_TYPES = ("f32", "f16", "q8_0", "q4_0")

_STATUS_RE = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)(?:.*?exec/s: (\d+))?"
                        r"(?:.*?rss: (\d+)Mb)?")
_STAT_RE = re.compile(r"^stat::(\w+):\s+(\d+)")


@dataclass
class FuzzStats:
    """What one libFuzzer run reported (parsed from its stderr)."""

    executions: int = 0
    exec_per_s: int = 0
    cov: int = 0
    ft: int = 0
    corpus_units: int = 0
    corpus_size: str = ""
    peak_rss_mb: int = 0
    new_units: int = 0
    initial_cov: int | None = None
    initial_ft: int | None = None


@dataclass
class TargetResult:
    target: str
    seconds: float = 0.0
    rc: int | None = None
    stats: FuzzStats = field(default_factory=FuzzStats)
    findings: list[str] = field(default_factory=list)   # paths, relative to the repository
    summary: str = ""                                   # the sanitizer's SUMMARY line, if any
    log: str = ""


def parse_output(text: str) -> tuple[FuzzStats, str]:
    """libFuzzer's stderr -> (stats, the first sanitizer/libFuzzer SUMMARY line or '')."""
    st = FuzzStats()
    summary = ""
    for line in text.splitlines():
        m = _STATUS_RE.match(line)
        if m:
            st.executions = max(st.executions, int(m.group(1)))
            st.cov, st.ft = int(m.group(3)), int(m.group(4))
            st.corpus_units, st.corpus_size = int(m.group(5)), m.group(6)
            if m.group(7):
                st.exec_per_s = int(m.group(7))
            if m.group(8):
                st.peak_rss_mb = max(st.peak_rss_mb, int(m.group(8)))
            if m.group(2) == "INITED" and st.initial_cov is None:
                st.initial_cov, st.initial_ft = st.cov, st.ft
            continue
        m = _STAT_RE.match(line)
        if m:
            key, val = m.group(1), int(m.group(2))
            if key == "number_of_executed_units":
                st.executions = max(st.executions, val)
            elif key == "average_exec_per_sec":
                st.exec_per_s = val
            elif key == "new_units_added":
                st.new_units = val
            elif key == "peak_rss_mb":
                st.peak_rss_mb = max(st.peak_rss_mb, val)
            continue
        if not summary and line.startswith("SUMMARY: "):
            summary = line[len("SUMMARY: "):].strip()
    return st, summary


# ---- build ------------------------------------------------------------------------------------

def find_clang() -> str | None:
    for name in ("clang", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14"):
        p = shutil.which(name)
        if p:
            return p
    return None


def libfuzzer_works(clang: str, workdir: Path) -> tuple[bool, str]:
    """Compile and run an empty fuzz target: clang present but libFuzzer/compiler-rt missing
    is the usual way this fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "probe.c"
    exe = workdir / "probe"
    src.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                   "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
    try:
        r = subprocess.run([clang, "-fsanitize=fuzzer,address,undefined", str(src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return False, (r.stderr.strip().splitlines() or ["clang failed"])[-1]
        r = subprocess.run([str(exe), "-runs=1"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return False, f"the probe fuzz target exited {r.returncode}"
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return True, ""


def build(root: Path, build_dir: Path, clang: str, jobs: int, say) -> dict[str, Path]:
    """CMake configure + build of both targets; returns target name -> executable."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise HarnessError("cmake not found")
    cfg = [cmake, "-S", str(root / "native"), "-B", str(build_dir), f"-DCMAKE_C_COMPILER={clang}",
           "-DKITE_FUZZ=ON", "-DKITE_CUDA=OFF", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
    if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
        cfg += ["-G", "Ninja"]
    log = build_dir / "build.log"
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        for cmd in (cfg, [cmake, "--build", str(build_dir), "-j", str(jobs), "--target", *TARGETS.values()]):
            say(f"[fuzz] {' '.join(cmd)}")
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                raise HarnessError(f"building the fuzz targets failed (log: {log}):\n{tail}")
    exes = {}
    for name, tgt in TARGETS.items():
        exe = build_dir / "bin" / tgt
        if not exe.exists():
            raise HarnessError(f"{exe} missing after the build (log: {log})")
        exes[name] = exe
    return exes


# ---- seeds -------------------------------------------------------------------------------------

def fixture_models(root: Path) -> list[Path]:
    """The conformance fixtures' GGUFs (tests/data/qwen35, llama.cpp-converted)."""
    return sorted((root / "tests" / "data" / "qwen35").glob("*/*.gguf"))


def gather_seeds(root: Path, seed_dir: Path, say) -> list[Path]:
    """Seed files (copied or generated into seed_dir): the default model, the micro recipe in
    several types, the conformance fixtures when present, the kept regression inputs."""
    seed_dir.mkdir(parents=True, exist_ok=True)
    seeds: list[Path] = []
    try:
        seeds.append(Path(ensure_model("tiny", root / "models")))
        micro = load_recipe(str(root / MICRO_RECIPE))
        for t in MICRO_TYPES:
            out = seed_dir / f"micro-{t}.gguf"
            if not out.exists():
                generate(micro, out, t)
            seeds.append(out)
    except Exception as e:  # noqa: BLE001 - no generator (numpy missing...): fuzz from what there is
        say(f"[fuzz] note: could not generate model seeds ({type(e).__name__}: {e})")
    fx = fixture_models(root)
    if not fx:
        say("[fuzz] note: no conformance fixtures (tests/data/qwen35/*/*.gguf); skipped")
    seeds += fx
    seeds += regression_inputs(root)
    return seeds


def regression_inputs(root: Path, folder: Path | None = None) -> list[Path]:
    """The kept inputs (every file but dot files and notes) in folder (default: the repository's)."""
    d = folder if folder is not None else root / REGRESSIONS
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith(".")
                  and p.suffix not in (".md", ".txt")) if d.is_dir() else []


# ---- running ------------------------------------------------------------------------------------

def _sanitizer_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1:allocator_may_return_null=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    return env


def replay(exe: Path, inputs: list[Path], timeout: float = 300) -> tuple[bool, str]:
    """Run each input once (no fuzzing). (all passed, output tail)."""
    if not inputs:
        return True, ""
    r = subprocess.run([str(exe), "-runs=1", *map(str, inputs)], capture_output=True, text=True,
                       timeout=timeout, env=_sanitizer_env())
    return r.returncode == 0, "\n".join(r.stderr.splitlines()[-20:])


def keep_findings(artifact_dir: Path, dest: Path, target: str, root: Path) -> list[str]:
    """Copy libFuzzer's artifacts into the regression folder as <kind>-<target>-<sha1 12>."""
    kept = []
    dest.mkdir(parents=True, exist_ok=True)
    for p in sorted(artifact_dir.iterdir()) if artifact_dir.is_dir() else []:
        kind = next((k[:-1] for k in FINDING_PREFIXES if p.name.startswith(k)), None)
        if kind is None:
            continue
        data = p.read_bytes()
        out = dest / f"{kind}-{target}-{hashlib.sha1(data).hexdigest()[:12]}"
        if not out.exists():
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, out)
        try:
            kept.append(str(out.relative_to(root)))
        except ValueError:
            kept.append(str(out))
    return kept


def run_target(name: str, exe: Path, seconds: float, work: Path, seeds: list[Path], max_len: int,
               root: Path, dest: Path, say, runs: int | None = None, seed: int | None = None,
               corpus_root: Path | None = None) -> TargetResult:
    """Fuzz one target for `seconds`, or for `runs` inputs (then `seconds` + 120 only bounds a hang):
    with runs, the amount of fuzzing does not depend on how fast or loaded the machine is."""
    corpus = (corpus_root or work / "corpus") / name
    artifacts = work / "artifacts" / name
    seed_dir = work / "seedlinks" / name
    for d in (corpus, artifacts, seed_dir):
        d.mkdir(parents=True, exist_ok=True)
    for old in artifacts.iterdir():
        old.unlink()
    # libFuzzer reads seed folders, not files: one folder of links to the seed files
    for old in seed_dir.iterdir():
        old.unlink()
    for s in seeds:
        link = seed_dir / s.name
        if not link.exists():
            try:
                link.symlink_to(s.resolve())
            except OSError:
                shutil.copyfile(s, link)
    log = work / f"{name}.log"
    budget = [f"-runs={runs}"] if runs else [f"-max_total_time={int(seconds)}"]
    cmd = [str(exe), *budget, *([f"-seed={seed}"] if seed is not None else []), f"-max_len={max_len}",
           "-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/",
           str(corpus), str(seed_dir)]  # one process, one worker
    say(f"[fuzz] {name}: {' '.join(cmd)}  ({f'{runs} inputs' if runs else f'{int(seconds)} s'}, log {log})")
    t0 = time.monotonic()
    with open(log, "w") as f:
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 120, env=_sanitizer_env())
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = None
    res = TargetResult(target=name, seconds=round(time.monotonic() - t0, 1), rc=rc, log=str(log))
    res.stats, res.summary = parse_output(log.read_text(errors="replace"))
    res.findings = keep_findings(artifacts, dest, name, root)
    if rc not in (0, None) and not res.findings and not res.summary:
        res.summary = f"libFuzzer exited {rc} without an artifact (see {log})"
    if rc is None:
        res.summary = res.summary or f"libFuzzer did not stop within {int(seconds) + 120} s"
    return res


# ---- hostile model files and the sanitizer runs ---------------------------------------------------

def hostile_models(good: bytes, seed: int = 1) -> list[tuple[str, str, bytes]]:
    """Deterministic bad variants of a good GGUF: (kind, name, bytes). Kinds: truncated (cut
    inside the header, the metadata, the tensor table and the data), corrupted (header bytes
    changed: counts, lengths, types, dimensions, offsets), degenerate (empty, magic only,
    wrong version)."""
    import random

    rng = random.Random(seed)
    out: list[tuple[str, str, bytes]] = []
    n = len(good)
    for frac in (0.0005, 0.002, 0.01, 0.05, 0.2, 0.5, 0.9, 0.999):
        cut = max(1, int(n * frac))
        out.append(("truncated", f"truncated-{cut}", good[:cut]))
    head = min(n, 8192)  # metadata and tensor table of the small models live here
    for i in range(16):
        b = bytearray(good)
        pos = rng.randrange(4, head)
        how = i % 4
        if how == 0:
            b[pos] ^= 1 << rng.randrange(8)
        elif how == 1:
            b[pos:pos + 8] = b"\xff" * 8           # a huge u64 (count, length, dimension)
        elif how == 2:
            b[pos:pos + 4] = b"\x00" * 4           # zero (dimension, type, length)
        else:
            b[pos:pos + 4] = rng.randrange(1 << 32).to_bytes(4, "little")
        out.append(("corrupted", f"corrupted-{i}-{pos}", bytes(b)))
    out += [("degenerate", "empty", b""), ("degenerate", "magic-only", b"GGUF"),
            ("degenerate", "version-9", b"GGUF" + (9).to_bytes(4, "little") + good[8:64]),
            ("degenerate", "counts-huge", good[:8] + b"\xff" * 16 + good[24:4096])]
    return out


_SAN_PAT = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|==\d+== (Invalid|Conditional|"
                      r"Use of uninit|Mismatched|Syscall param|Source and destination)")


@dataclass
class SanRun:
    what: str
    kind: str
    ok: bool
    rc: int | None
    note: str = ""


def _run_engine(argv: list[str], timeout: float, env: dict[str, str]) -> tuple[int | None, str]:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        return r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out"


def _engine_build(root: Path, name: str, cc: str | None, say) -> Path:
    """One of configs/engine.yaml's builds (`asan`, `stub`), through the harness's build code."""
    old = os.environ.get("CC")
    if cc:
        os.environ["CC"] = cc
    try:
        res = B.build(load_config(root), name, progress=lambda m: say(f"[sanitize] {m}"))
    finally:
        if cc:
            if old is None:
                os.environ.pop("CC", None)
            else:
                os.environ["CC"] = old
    if res.engine.status not in ("built", "up-to-date"):
        raise HarnessError(f"the {name} build failed: {res.engine.reason} (log: {res.engine.log})")
    return Path(res.engine_path)


def sanitize(root: Path, work: Path, cc: str | None, use_valgrind: bool, say) -> dict:
    """The CPU suite under ASan+UBSan (KITE_SANITIZE=address,undefined) and the loader under
    valgrind memcheck. Good models must run (exit 0), bad ones must be refused (exit 1,
    `kite: error:`), and no sanitizer may report anything."""
    kite = _engine_build(root, "asan", cc, say)
    seeds = [p for p in gather_seeds(root, work / "seeds", say) if p.suffix == ".gguf"
             and not p.is_relative_to(root / REGRESSIONS)]
    bad_dir = work / "hostile"
    bad_dir.mkdir(parents=True, exist_ok=True)
    bad: list[tuple[str, Path]] = [("regression", p) for p in regression_inputs(root)]
    micro = work / "seeds" / "micro-q8_0.gguf"
    if micro.exists():
        for kind, name, data in hostile_models(micro.read_bytes()):
            p = bad_dir / f"{name}.gguf"
            p.write_bytes(data)
            bad.append((kind, p))
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1", "KITE_CUDA_LIB": ""}
    runs: list[SanRun] = []

    def check(what: str, kind: str, argv: list[str], want_rc: int | tuple[int, ...], timeout: float = 300) -> None:
        """want_rc: 0 (must run), 1 (must be refused with `kite: error:`) or (0, 1) (either:
        a corrupted byte may sit in a string or in weights, where the file is still valid)."""
        rc, err = _run_engine(argv, timeout, env)
        m = _SAN_PAT.search(err)
        wanted = want_rc if isinstance(want_rc, tuple) else (want_rc,)
        ok = rc in wanted and not m and (rc == 0 or "kite: error:" in err)
        note = "" if ok else (m.group(0) if m else f"exit {rc}, wanted {want_rc}: {err.strip()[-200:]}")
        runs.append(SanRun(what, kind, ok, rc, note))
        if not ok:
            say(f"[sanitize] FAIL {what}: {note}")

    check("selftest", "selftest", [str(kite), "selftest"], 0, 600)
    out_dir = work / "sanitize-dump"
    for m in seeds:
        for mt, threads in ((1, 1), (3, 2)):
            check(f"run {m.name} --mt {mt} --threads {threads}", "good model",
                  [str(kite), "run", "--model", str(m), "--prompt", "1,2,3,4,5", "--steps", "4", "--mt", str(mt),
                   "--threads", str(threads), "--dump", str(out_dir)], 0)
    for kind, p in bad:
        check(f"run {p.name}", kind, [str(kite), "run", "--model", str(p), "--prompt", "1", "--steps", "1"],
              (0, 1) if kind == "corrupted" else 1)
    asan_runs = len(runs)
    vg = shutil.which("valgrind") if use_valgrind else None
    if vg:
        kp = str(_engine_build(root, "stub", cc, say))
        vgargs = [vg, "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect"]
        for m in seeds[:3]:
            check(f"valgrind run {m.name}", "valgrind good model",
                  vgargs + [kp, "run", "--model", str(m), "--prompt", "1,2", "--steps", "1", "--threads", "1"], 0, 600)
        for kind, p in bad:
            check(f"valgrind run {p.name}", f"valgrind {kind}",
                  vgargs + [kp, "run", "--model", str(p), "--prompt", "1", "--threads", "1"],
                  (0, 1) if kind == "corrupted" else 1, 300)
    else:
        say("[sanitize] valgrind not found: the memcheck part is skipped")
    kinds: dict[str, dict[str, int]] = {}
    for r in runs:
        k = kinds.setdefault(r.kind, {"runs": 0, "failed": 0})
        k["runs"] += 1
        k["failed"] += 0 if r.ok else 1
    return {"asan_ubsan_runs": asan_runs, "valgrind_runs": len(runs) - asan_runs, "valgrind": bool(vg),
            "by_kind": kinds, "failures": [asdict(r) for r in runs if not r.ok]}


DESCRIPTION = ("Build the libFuzzer targets (clang) and fuzz the GGUF reader and model loader; findings go to "
               "tests/data/fuzz_regressions/.")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--seconds", type=float, default=60, help="fuzzing time per target (default 60)")
    ap.add_argument("--runs", type=int, metavar="N",
                    help="fuzz each target for N inputs instead of --seconds (--seconds + 120 then bounds a hang)")
    ap.add_argument("--seed", type=int, metavar="N",
                    help="libFuzzer's random seed (default: from the clock)")
    ap.add_argument("--corpus", type=Path, metavar="DIR",
                    help="corpus folder, one subfolder per target (default BUILD_DIR/corpus, kept between runs)")
    ap.add_argument("--target", choices=[*TARGETS, "all"], default="all", help="which target (default: all)")
    ap.add_argument("--max-len", type=int, default=131072, help="largest generated input in bytes (default 131072)")
    ap.add_argument("--build-dir", type=Path, help="CMake folder (default build/fuzz)")
    ap.add_argument("--regressions", type=Path, help=f"where findings are kept (default {REGRESSIONS})")
    ap.add_argument("--replay-only", action="store_true", help="only replay the kept regression inputs")
    ap.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--sanitizers", action="store_true",
                    help="instead of fuzzing: the CPU suite under ASan+UBSan and the loader under valgrind")
    ap.add_argument("--cc", help="with --sanitizers: C compiler for the sanitizer build (default: CMake's)")
    ap.add_argument("--no-valgrind", action="store_true", help="with --sanitizers: skip the valgrind part")


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness fuzz", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv), root)


def run(a: argparse.Namespace, root: Path | None = None) -> int:
    root = (root or Path(__file__).resolve().parents[2]).resolve()
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if a.seconds < 1:
        raise HarnessError("--seconds must be at least 1")
    if a.runs is not None and a.runs < 1:
        raise HarnessError("--runs must be at least 1")
    if a.seed is not None and not 0 <= a.seed < 2**32:
        raise HarnessError("--seed must be from 0 to 4294967295")
    if a.sanitizers:
        work = (a.build_dir or root / "build" / "sanitize").resolve()
        res = sanitize(root, work, a.cc, not a.no_valgrind, say)
        tmp = work / "summary.json.tmp"
        tmp.write_text(json.dumps(res, indent=2) + "\n")
        os.replace(tmp, work / "summary.json")
        for kind, k in res["by_kind"].items():
            say(f"[sanitize] {kind}: {k['runs']} run(s), {k['failed']} failed")
        if a.json:
            print(json.dumps(res, indent=2))
        else:
            print(f"sanitize: {res['asan_ubsan_runs']} ASan+UBSan runs, {res['valgrind_runs']} valgrind runs, "
                  f"{len(res['failures'])} failed; summary {work / 'summary.json'}")
        return 1 if res["failures"] else 0
    clang = find_clang()
    if not clang:
        raise HarnessError("clang not found: libFuzzer needs clang and compiler-rt "
                           "(Debian: apt-get install clang libclang-rt-dev, or .ci/install-toolchains.sh)")
    work = (a.build_dir or root / "build" / "fuzz").resolve()
    ok, why = libfuzzer_works(clang, work / "probe")
    if not ok:
        raise HarnessError(f"{clang} cannot build a libFuzzer target ({why}); install compiler-rt "
                           "(Debian: libclang-rt-<version>-dev)")
    dest = (a.regressions or root / REGRESSIONS).resolve()
    exes = build(root, work, clang, a.jobs, say)
    names = list(TARGETS) if a.target == "all" else [a.target]

    out: dict = {"clang": clang, "seconds_per_target": a.seconds, "runs_per_target": a.runs, "seed": a.seed,
                 "max_len": a.max_len, "targets": [],
                 "regressions": {}}
    rc = 0
    regs = sorted(set(regression_inputs(root)) | set(regression_inputs(root, dest)))
    for n in names:
        passed, tail = replay(exes[n], regs)
        out["regressions"][n] = {"inputs": len(regs), "passed": passed}
        say(f"[fuzz] {n}: replayed {len(regs)} regression input(s): {'ok' if passed else 'FAILED'}")
        if not passed:
            say(tail)
            rc = 1
    if not a.replay_only:
        seeds = gather_seeds(root, work / "seeds", say)
        for n in names:
            res = run_target(n, exes[n], a.seconds, work, seeds, a.max_len, root, dest, say, a.runs, a.seed,
                             a.corpus.resolve() if a.corpus else None)
            out["targets"].append(asdict(res))
            s = res.stats
            say(f"[fuzz] {n}: {res.seconds:.0f} s, {s.executions} executions ({s.exec_per_s}/s), cov {s.cov}, "
                f"ft {s.ft}, corpus {s.corpus_units} ({s.corpus_size}), peak RSS {s.peak_rss_mb} MB, "
                f"findings {len(res.findings)}{': ' + res.summary if res.summary else ''}")
            for p in res.findings:
                say(f"[fuzz]   kept {p}")
            if res.findings or res.summary:
                rc = 1
    tmp = work / "summary.json.tmp"
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    os.replace(tmp, work / "summary.json")
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"fuzz: {'no finding' if rc == 0 else 'FINDINGS (see above)'}; summary {work / 'summary.json'}")
    return rc


def _cli() -> int:
    """`python -m harness.tools.fuzz ...` (the same as `python -m harness fuzz ...`)."""
    try:
        return main(sys.argv[1:])
    except HarnessError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(_cli())
