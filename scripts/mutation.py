#!/usr/bin/env python3
"""Mutation testing of the harness's core with mutmut (configured in pyproject.toml, [tool.mutmut]).

  python scripts/mutation.py                       every mutant of the core modules
  python scripts/mutation.py --module compare      one module's mutants (a name in MODULES)
  python scripts/mutation.py --sample 40 --seed 1  a fixed seeded sample (the CI subset)
  python scripts/mutation.py --resume              only the mutants a stopped run left unchecked
  python scripts/mutation.py --survivors           only the last run's survivors (after new tests)

mutmut copies the tree into mutants/ (git-ignored) and, for each mutant, runs the selected tests
that reach the mutated function. Afterwards this prints a table per module: mutants, killed,
survived (listed equivalents apart), score over the non-equivalent ones, and each survivor.
Equivalent mutants are listed, by function and mutated line, with their reason in
tests/mutation-equivalent.txt. Exit status 1
when the score is under --fail-under.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:  # mutmut's readers of its mutants/ modules (3.8.1); without them, `mutmut show` per mutant
    import libcst as cst
    from mutmut.mutation.diff_apply import read_mutant_function, read_original_function
except ImportError:
    cst = None

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tests" / "mutation-equivalent.txt"
MODULES = {"compare": "harness.run.dumpdiff", "dumps": "harness.run.dumps", "timing": "harness.run.timing",
           "digest": "harness.contract.digest", "registry": "harness.contract.registry",
           "runner": "harness.run.runner", "schema": "harness.contract.schema"}
KILLED = {"killed", "timeout", "segfault", "caught by type check"}
SURVIVED = {"survived", "no tests"}


@dataclass
class Tally:
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[str] = field(default_factory=list)
    unchecked: int = 0  # never run (a stopped run)
    other: list[str] = field(default_factory=list)  # suspicious, skipped...

    @property
    def score(self) -> float:
        judged = self.killed + len(self.survivors)
        return 100.0 * self.killed / judged if judged else 100.0


def mutmut(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=ROOT, capture_output=True, text=True)


def results() -> dict[str, str]:
    """Every mutant's name and status, from `mutmut results --all true`."""
    r = mutmut("results", "--all", "true")
    if r.returncode != 0:
        sys.exit(f"mutmut results failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return dict(re.findall(r"^\s*(\S+__mutmut_\d+): (.+?)\s*$", r.stdout, re.M))


def equivalents() -> dict[tuple[str, str], str]:
    """(function, mutated line) -> why that mutant is equivalent, from lines 'FUNCTION<TAB>LINE<TAB>WHY'
    (# comments). Keyed by content, not by mutmut's number, which shifts when a function changes."""
    out = {}
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            func, mutated, why = line.split("\t")
            out[(func.strip(), mutated.strip())] = why.strip()
    return out


def mutated_line(name: str, parsed: dict[Path, object]) -> str:
    """The first line the mutant adds, as `mutmut show NAME` prints it. Each mutants/ module is
    parsed once (mutmut's own readers; `mutmut show` would parse it again for every mutant)."""
    if cst is None:  # another mutmut layout: one `mutmut show` per mutant
        diff = mutmut("show", name).stdout.splitlines()
    else:
        path = ROOT / "mutants" / (MODULES[module_of(name)].replace(".", "/") + ".py")  # type: ignore[index]
        if path not in parsed:
            parsed[path] = cst.parse_module(path.read_text(encoding="utf-8"))
        codes = [cst.Module([f(parsed[path], name)]).code.strip().split("\n")
                 for f in (read_original_function, read_mutant_function)]
        diff = list(difflib.unified_diff(*codes, lineterm=""))
    added = [ln[1:].strip() for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    return added[0] if added else ""


def module_of(name: str) -> str | None:
    for short, dotted in MODULES.items():
        if name.startswith(dotted + "."):
            return short
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", action="append", choices=sorted(MODULES), help="only these modules (repeatable)")
    ap.add_argument("--sample", type=int, help="run a seeded sample of this many mutants")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-children", default="1", help="mutmut's parallel workers (default 1)")
    ap.add_argument("--fail-under", type=float, default=0.0, help="exit 1 under this score (percent)")
    ap.add_argument("--report-only", action="store_true", help="print the table of the last run, run nothing")
    ap.add_argument("--resume", action="store_true",
                    help="run only the selected mutants that have no result yet (after a stopped run)")
    ap.add_argument("--survivors", action="store_true",
                    help="run only the selected mutants that survived their last run (after adding tests)")
    args = ap.parse_args()

    modules = args.module or sorted(MODULES)
    if not args.report_only:
        # a pattern that matches no mutant: mutmut generates the mutants and its test statistics only
        gen = mutmut("run", "--max-children", args.max_children, "none.matches.this*")
        if "nothing matches" not in gen.stdout + gen.stderr:
            sys.exit(f"mutmut could not generate the mutants:\n{gen.stdout[-3000:]}{gen.stderr[-3000:]}")
    names = sorted(n for n in results() if module_of(n) in modules)
    if args.sample is not None and args.sample < len(names):
        names = sorted(random.Random(args.seed).sample(names, args.sample))
    # mutmut refuses a named mutant whose function no selected test reaches: such a mutant is a
    # survivor ("no tests") without running anything
    stats = ROOT / "mutants" / "mutmut-stats.json"
    covered = json.loads(stats.read_text())["tests_by_mangled_function_name"] if stats.exists() else None
    untested = {n for n in names if covered is not None and not covered.get(n.partition("__mutmut_")[0])}
    to_run = [n for n in names if n not in untested]
    if args.resume or args.survivors:
        before = results()
        wanted = ({"not checked"} if args.resume else set()) | (SURVIVED if args.survivors else set())
        to_run = [n for n in to_run if before.get(n) in wanted]
    if not args.report_only and to_run:
        run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", args.max_children, *to_run],
                             cwd=ROOT)
        if run.returncode != 0:
            sys.exit(f"mutmut run failed (exit status {run.returncode})")

    status, equiv, parsed = results(), equivalents(), {}
    tallies = {m: Tally() for m in modules}
    for n in names:
        t = tallies[module_of(n)]  # type: ignore[index]
        t.mutants += 1
        s = "no tests" if n in untested else status.get(n, "missing")
        if s == "not checked":
            t.unchecked += 1
        elif s in KILLED:
            t.killed += 1
        elif s in SURVIVED and (n.partition("__mutmut_")[0], mutated_line(n, parsed)) in equiv:
            t.equivalent += 1
        elif s in SURVIVED:
            t.survivors.append(n)
        else:
            t.other.append(f"{n}: {s}")
    total = Tally()
    print("| module | mutants | judged | killed | survived (equivalent) | survived (not equivalent) | score |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in modules:
        t = tallies[m]
        print(f"| {m} | {t.mutants} | {t.mutants - t.unchecked} | {t.killed} | {t.equivalent} | {len(t.survivors)} | "
              f"{t.score:.1f}% |")
        total.mutants += t.mutants
        total.unchecked += t.unchecked
        total.killed += t.killed
        total.equivalent += t.equivalent
        total.survivors += t.survivors
        total.other += t.other
    print(f"| all | {total.mutants} | {total.mutants - total.unchecked} | {total.killed} | {total.equivalent} | "
          f"{len(total.survivors)} | {total.score:.1f}% |")
    for n in total.survivors:
        print(f"survived: {n}  (mutmut show {n})")
    if total.unchecked:
        print(f"not judged: {total.unchecked} mutants never run (a stopped run: --resume runs them)")
    for line in total.other:
        print(f"not judged: {line}")
    if total.score < args.fail_under:
        print(f"score {total.score:.1f}% is under {args.fail_under:g}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
