"""The `compare` and `bisect` subcommands: their options, and the exit status of their verdicts.
A progress or output write that fails (a closed pipe) never changes the exit status: the CLI runs
under the console guard (harness/console.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.compare import bisect, external, report, revisions
from harness.compare.session import ALPHA, Options, run_compare
from harness.errors import HarnessError
from harness.report.document import atomic_write, new_report_dir
from harness.contract.config import Config
from harness.contract.looks import RESAMPLE

COMPARE_HELP = "head against base: what a change did to bytes and to speed (docs/COMPARE.md)"
COMPARE_EXIT = ("exit status: 0 nothing regressed and no bytes that must stay the same changed, 1 otherwise "
                "(or a workload failed to run), 2 usage or harness error")
BISECT_HELP = "the first commit whose workload bytes changed or whose speed regressed (docs/COMPARE.md)"
BISECT_EXIT = "exit status: 0 the first bad commit found and confirmed, 1 none found or not confirmed, 2 usage error"


def say(text: str) -> None:
    """Progress on stderr (the CLI runs under harness/console.py's guard: a closed pipe is dropped)."""
    print(text, file=sys.stderr, flush=True)


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", dest="files", action="append", default=[], metavar="FILE",
                   help="criteria file with the workloads (repeatable; default: regressions/*.yaml)")
    p.add_argument("--cache", type=Path, metavar="DIR", help=f"worktrees and builds of revisions (default: "
                   f"${revisions.CACHE_ENV}, else ~/.cache/kite/compare/<project>-<hash of its path>)")
    p.add_argument("--out", type=Path, metavar="DIR", help="report folder (default: reports/<time>-compare)")
    p.add_argument("--no-short-circuit", dest="short_circuit", action="store_false",
                   help="run the workloads even when both builds are identical (an A/A run)")
    p.add_argument("--exploratory", action="store_true", help="also run workloads not (or not as) registered")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"family-wise error over the workloads (default {ALPHA})")
    p.add_argument("--max-pairs", type=int, metavar="N", help="cap every workload's budget at N pairs")
    p.add_argument("--max-seconds", type=float, metavar="S", help="cap every workload's timing at S seconds")
    p.add_argument("--external", metavar="NAME=REPO", help="revisions are commits of REPO, a git repository of "
                   "the external source NAME of configs/engine.yaml (e.g. llama.cpp); kite's own tree stays the "
                   "working tree (docs/COMPARE.md)")


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", metavar="BASE", help="git revision of the base")
    p.add_argument("head", nargs="?", default=revisions.WORKTREE, metavar="HEAD",
                   help="git revision of the head (default: the working tree, uncommitted changes included)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these workloads")
    p.add_argument("--fail-on", choices=("any", "bytes"), default="any",
                   help="any: exit 1 on a regression or changed bytes (default); bytes: only changed bytes that "
                        "must stay the same fail (speed verdicts are reported, e.g. on a noisy shared CI machine)")
    add_common_arguments(p)


def add_bisect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("good", metavar="GOOD", help="a revision where the workload is good")
    p.add_argument("bad", metavar="BAD", help="a later revision where it is bad")
    p.add_argument("--workload", required=True, metavar="ID", help="the workload (kind: compare) to judge by")
    p.add_argument("--what", choices=bisect.WHAT, default="any",
                   help="what makes a commit bad: changed bytes, a speed regression, or either (default any)")
    p.add_argument("--resample", type=int, default=RESAMPLE, metavar="N",
                   help="sample an undecided speed step again up to N times, each with twice the budget "
                        f"(default {RESAMPLE}); "
                        "a step still undecided is skipped, never guessed")
    add_common_arguments(p)


def options_from(args: argparse.Namespace, cfg: Config, base: str, head: str) -> Options:
    if not 0 < args.alpha < 0.5:
        raise HarnessError(f"--alpha must be in (0, 0.5), not {args.alpha:g}")
    if args.max_pairs is not None and args.max_pairs < 4:
        raise HarnessError(f"--max-pairs must be at least 4, not {args.max_pairs}")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise HarnessError("--max-seconds must be more than 0")
    ext = external.parse(args.external, cfg) if args.external else None
    if ext is not None and head == revisions.WORKTREE:
        head = "HEAD"  # the external repository's HEAD: its uncommitted files are no revision
    return Options(base=base, head=head, files=[Path(f) for f in args.files], only=list(getattr(args, "only", None)
                   or []), cache=args.cache, short_circuit=args.short_circuit, exploratory=args.exploratory,
                   alpha=args.alpha, max_pairs=args.max_pairs, max_seconds=args.max_seconds, external=ext)


def _folder(args: argparse.Namespace, cfg: Config) -> Path:
    if args.out:
        if args.out.is_symlink() or (args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir()))):
            raise HarnessError(f"--out {args.out}: not an empty folder (a report is written into a new one)")
        args.out.mkdir(parents=True, exist_ok=True)
        return args.out
    return new_report_dir(cfg.root / cfg.reports_dir, "compare")


@contextmanager
def _refused_leaves_nothing(out: Path) -> Iterator[None]:
    """A compare or bisect refused (or stopped) before it wrote anything leaves no empty report
    folder behind, which a bare `verify --resume` would otherwise take for a run to continue."""
    try:
        yield
    except BaseException:
        try:
            out.rmdir()  # only when empty
        except OSError:
            pass
        raise


def run_compare_cmd(args: argparse.Namespace, cfg: Config) -> int:
    opts = options_from(args, cfg, args.base, args.head)
    out = _folder(args, cfg)
    with _refused_leaves_nothing(out):
        c = run_compare(cfg, opts, out, say)
    links = report.links_for(os.environ, out, cfg.root)
    report.write(c, out, args.fail_on, links)
    report.publish(c, out, args.fail_on, links=links)
    print(report.render_markdown(c, args.fail_on, links).split("\n## Details")[0].rstrip(), flush=True)
    say(f"compare: report in {out}")
    return 1 if c.failed(args.fail_on) else 0


def run_bisect_cmd(args: argparse.Namespace, cfg: Config) -> int:
    opts = options_from(args, cfg, args.good, args.bad)
    if not 0 <= args.resample <= 8:
        raise HarnessError(f"--resample must be 0 to 8, not {args.resample}")
    out = _folder(args, cfg)
    with _refused_leaves_nothing(out):
        b = bisect.run_bisect(cfg, args.good, args.bad, args.workload, args.what, opts, out, say, args.resample)
    atomic_write(out / "bisect.json", json.dumps(b.to_json(), indent=1) + "\n")
    atomic_write(out / "report.md", bisect.render_markdown(b))
    print(bisect.render_markdown(b).rstrip(), flush=True)
    say(f"bisect: report in {out}")
    return 0 if b.culprit and b.confirmed else 1
