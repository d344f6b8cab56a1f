"""`harness matrix`: its options (added to the harness's one argparse tree by harness/cli.py)
and what it does with them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.errors import HarnessError
from harness.matrix.cross import Hints, merge_reports
from harness.matrix.run import criteria_refs, run_matrix
from harness.matrix.spec import MatrixError, availability, entry_summary, load_matrix
from harness.contract.config import load_config

DESCRIPTION = "Build and check the entries of configs/matrix.yaml, then its cross-entry criteria."
EXIT = ("exit status: 0 nothing failed (entries whose tools are missing SKIP), 1 an entry, check or "
        "criterion failed, 2 usage error or invalid matrix file")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("entries", nargs="*", metavar="ENTRY", help="entries to run (default: all)")
    p.add_argument("--list", action="store_true", help="list the entries and whether this host can run them")
    p.add_argument("--json", action="store_true", help="with --list: print JSON")
    p.add_argument("--check", action="store_true", help="validate configs/matrix.yaml and exit")
    p.add_argument("--matrix", type=Path, metavar="FILE", help="another matrix file (default configs/matrix.yaml)")
    p.add_argument("--model", metavar="FILE", help="model file for the dump runs (default: the matrix's recipe)")
    p.add_argument("--report-dir", type=Path, metavar="DIR",
                   help="write the report here (default reports/<time>-<sha>/)")
    p.add_argument("--force", action="store_true", help="rebuild even when up to date")
    p.add_argument("--stop", action="store_true", help="stop after the first failed entry")
    p.add_argument("--merge-into", type=Path, metavar="DIR",
                   help="then merge every report beside --report-dir (one per entry) into this folder")
    p.add_argument("--exploratory", action="store_true",
                   help="run criteria that are not (or not as) registered, labelled exploratory")


def run(a: argparse.Namespace, root: Path, hints: Hints | None = None) -> int:
    matrix = load_matrix(a.matrix or root / "configs" / "matrix.yaml", root)
    if a.check:
        entries = matrix.select(a.entries or None)
        cfg = load_config(root)
        problems = [f"{matrix.path}: entry {ent.name}: criteria: {ref}: {why}"
                    for ent in entries for ref, _, _, why in criteria_refs(cfg, ent) if why is not None]
        if problems:
            raise MatrixError(problems)
        print(f"{matrix.path}: {len(matrix.entries)} entries, {len(matrix.cross)} cross criteria: valid"
              + (f" (checked: {', '.join(e.name for e in entries)})" if a.entries else ""))
        return 0
    if a.list:
        rows = []
        for ent in matrix.select(a.entries or None):
            ok, why = availability(ent)
            rows.append({**entry_summary(ent), "runnable": ok, "skip_reason": why})
        if a.json:
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                print(f"{r['name']:18} {'ok  ' if r['runnable'] else 'SKIP'} {r['description']}"
                      + ("" if r["runnable"] else f"\n{'':23}{r['skip_reason']}"))
        return 0
    if a.merge_into and not a.report_dir:
        raise HarnessError("--merge-into needs --report-dir (e.g. reports/matrix/<entry>)")
    rc, rdir = run_matrix(root, a.entries or None, report_dir=a.report_dir, model=a.model, force=a.force,
                          matrix_path=a.matrix, keep_going=not a.stop, exploratory=a.exploratory, hints=hints)
    if a.merge_into:
        # every report beside this one (reports/matrix/<entry>/: the latest run of each entry)
        dirs = sorted(p.parent for p in rdir.parent.glob("*/report.json") if p.parent != a.merge_into.resolve())
        mrc, _ = merge_reports(dirs, a.merge_into, root=root, matrix_path=a.matrix,
                               say=lambda s: print(s, file=sys.stderr, flush=True), hints=hints)
        rc = max(rc, mrc)
    return rc
