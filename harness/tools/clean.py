"""`harness clean`: what the harness left in a project and can make again. Old report folders (the
newest --keep and the one `reports/latest` names stay), this project's compare cache (checkouts and
builds of revisions; git's worktree records are pruned after), and the models it generated (files
named `<recipe>-<type>-<digest>.gguf` in the models folder; a model put there by hand stays).

A dry run by default: it lists each thing and its size and removes nothing until `--yes`. A report
folder a running verify holds, or a cache entry a running compare holds, is left and said."""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.compare import revisions
from harness.errors import HarnessError
from harness.report.document import resolve_latest
from harness.report.lock import LOCK_NAME, ReportLock
from harness.contract.config import Config

HELP = "remove old reports, this project's compare cache and generated models (a dry run unless --yes)"
EXIT = "exit status: 0 listed (or removed with --yes), 2 usage error"
WHAT = ("reports", "compare-cache", "models")
REPORT = re.compile(r"^\d{8}T\d{6}Z-")  # <UTC time>-<commit or kind>[.N], as new_report_dir names them
MODEL = re.compile(r"^[A-Za-z0-9._]+-[A-Za-z0-9_]+-[0-9a-f]{12}\.gguf$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", nargs="*", metavar="WHAT",
                   help=f"any of {', '.join(WHAT)} (default: all three)")
    p.add_argument("--keep", type=int, default=5, metavar="N", help="report folders to keep, newest first (default 5)")
    p.add_argument("--yes", action="store_true", help="remove them (without it: only list what would go)")


@dataclass
class Item:
    kind: str
    path: Path
    size: int
    note: str = ""  # why it stays ('' = it goes)


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += (Path(dirpath) / f).lstat().st_size
            except OSError:
                pass
    return total


def reports(cfg: Config, keep: int) -> list[Item]:
    base = cfg.root / cfg.reports_dir
    if not base.is_dir():
        return []
    latest = resolve_latest(base)
    folders = sorted((d for d in base.iterdir() if d.is_dir() and not d.is_symlink() and REPORT.match(d.name)),
                     key=lambda d: d.name, reverse=True)
    out = []
    for i, d in enumerate(folders):
        note = ("one of the newest" if i < keep else "reports/latest" if latest and d.resolve() == latest.resolve()
                else "")
        if not note and (d / LOCK_NAME).exists():
            try:
                ReportLock(d).acquire("clean", ["clean"]).release()
            except HarnessError:
                note = "in use by a running verify"
        out.append(Item("report", d, _size(d), note))
    return out


def _busy(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def compare_cache(cfg: Config) -> list[Item]:
    try:
        cache = revisions.default_cache(revisions.repo_root(cfg.root))
    except HarnessError:
        return []
    if not cache.is_dir() or cache.is_symlink():
        return []
    out = []
    for d in sorted(cache.iterdir()):
        if d.is_dir() and not d.is_symlink():
            out.append(Item("compare cache", d, _size(d),
                            "in use by a running compare" if _busy(cache / f"{d.name}.lock") else ""))
    return out


def models(cfg: Config) -> list[Item]:
    base = cfg.root / cfg.models_dir
    if not base.is_dir():
        return []
    return [Item("model", f, _size(f)) for f in sorted(base.iterdir())
            if f.is_file() and not f.is_symlink() and MODEL.match(f.name)]


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def run_clean(args: argparse.Namespace, cfg: Config) -> int:
    if args.keep < 0:
        raise HarnessError(f"--keep must be 0 or more, not {args.keep}")
    what = args.what or list(WHAT)
    unknown = [w for w in what if w not in WHAT]
    if unknown:
        raise HarnessError(f"clean: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(WHAT)}")
    items = ((reports(cfg, args.keep) if "reports" in what else []) + (compare_cache(cfg) if "compare-cache" in what
             else []) + (models(cfg) if "models" in what else []))
    gone = [x for x in items if not x.note]
    for x in items:
        rel = x.path.relative_to(cfg.root) if x.path.is_relative_to(cfg.root) else x.path
        print(f"{'remove' if not x.note else 'keep  '} {x.kind:13} {_mib(x.size):>10}  {rel}"
              + (f"  ({x.note})" if x.note else ""))
    total = sum(x.size for x in gone)
    if not args.yes:
        print(f"clean: {len(gone)} to remove, {_mib(total)}; nothing removed (a dry run): add --yes to remove them",
              file=sys.stderr)
        return 0
    for x in gone:
        if x.path.is_dir():
            shutil.rmtree(x.path, ignore_errors=True)
        else:
            x.path.unlink(missing_ok=True)
    if any(x.kind == "compare cache" for x in gone):
        revisions.git(revisions.repo_root(cfg.root), "worktree", "prune")
    print(f"clean: removed {len(gone)}, {_mib(total)}", file=sys.stderr)
    return 0
