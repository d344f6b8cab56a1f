"""Cross-entry criteria (configs/matrix.yaml `cross:`): the `dump` check's files compared across
entries, byte for byte (memcmp where the files are at hand, through the reader verify uses, else
the SHA-256 each run recorded; an empty dump is vacuous either way).
A matrix run evaluates those whose entries it ran; `harness merge` evaluates them again over
reports made on different machines."""

from __future__ import annotations

import dataclasses
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.builder import toolchains
from harness.errors import HarnessError
from harness.matrix.spec import Cross, Matrix, RegisteredCross, load_matrix
from harness.report.document import Report
from harness.report.merge import merge
from harness.run import dumps
from harness.run.result import Result, utc_now
from harness.contract import gate, registry
from harness.contract.config import DumpSpec, load_config


@dataclass
class DumpSource:
    """Where one entry's variant dumps are: a folder with the files, and/or their SHA-256."""
    entry: str
    variant: str
    dir: Path | None
    files: dict[str, dict[str, Any]]  # dump name -> {file, bytes, sha256, shape}


def _memcmp(pa: Path, pb: Path, fa: dict[str, Any], fb: dict[str, Any], spec: DumpSpec) -> tuple[bool, dict[str, Any]]:
    """(ok, row facts) of two dump copies in report folders, found and compared by verify's reader:
    never empty, exactly their recorded shape's size, a NaN fails."""
    da = dumps.locate(pa.parent, pa.name, spec.dtype, dumps.shape(fa, "shape", "recorded"))
    db = dumps.locate(pb.parent, pb.name, spec.dtype, dumps.shape(fb, "shape", "recorded"))
    d = dumps.compare(da, db)
    return d.ok, dict(identical=d.identical, differing=d.differing, max_ulp=d.max_ulp, max_abs=d.max_abs,
                      reason=d.reason, how="memcmp")


def evaluate_cross(c: Cross, sources: dict[tuple[str, str], DumpSource], skipped: dict[str, str],
                   dump_specs: dict[str, DumpSpec]) -> tuple[str, str, dict[str, Any]]:
    """memcmp when both folders hold the files, else SHA-256 equality of the recorded digests
    (byte identity, as recorded by the entry's own run). First available entry = reference."""
    for r in c.requires:
        t = toolchains.probe(r)
        have = any(k[1] == "gpu" for k in sources) if r == "gpu" else t.found
        if not have:
            return "SKIP", t.skip_reason() if r != "gpu" else "no GPU dumps in this run", {}
    avail = [(e, v) for e, v in c.entries if (e, v) in sources]
    missing = {f"{e}:{v}": skipped.get(e, "entry not run") for e, v in c.entries if (e, v) not in sources}
    details: dict[str, Any] = {"entries": [f"{e}:{v}" for e, v in c.entries], "missing": missing, "comparisons": []}
    if len(avail) < c.min_entries:
        return "SKIP", (f"only {len(avail)} of {len(c.entries)} entries produced dumps (need {c.min_entries}); "
                        + "; ".join(f"{k}: {v}" for k, v in missing.items())), details
    ref = sources[avail[0]]
    bad = []
    for key in avail[1:]:
        s = sources[key]
        for dname in c.dumps:
            fa, fb = ref.files.get(dname), s.files.get(dname)
            row = {"case": "", "a": f"{ref.entry}:{ref.variant}", "b": f"{s.entry}:{s.variant}", "dump": dname}
            spec = dump_specs.get(dname) or DumpSpec(dname, f"{dname}.f32", "f32", f"shapes.{dname}")
            pa = ref.dir / spec.file if ref.dir else None
            pb = s.dir / spec.file if s.dir else None
            if pa is not None and pb is not None and pa.exists() and pb.exists():
                try:  # the copies in a report folder: regular files inside their folders only
                    ok, facts = _memcmp(pa, pb, fa or {}, fb or {}, spec)
                    row.update(facts)
                except (dumps.DumpRefused, FileNotFoundError) as e:
                    ok = False
                    row.update(identical=False, differing=-1, max_ulp=0, max_abs=0.0, how="none", reason=str(e))
            elif fa and fb:
                try:
                    dumps.check_recorded(fa)
                    dumps.check_recorded(fb)
                    ok = fa.get("sha256") == fb.get("sha256")
                    why = ("identical bytes (SHA-256)" if ok else
                           f"SHA-256 differs ({fa.get('sha256', '')[:12]} vs {fb.get('sha256', '')[:12]}); "
                           "files not at hand for an element-wise account")
                except dumps.DumpRefused as e:
                    ok, why = False, str(e)
                row.update(identical=ok, differing=0 if ok else -1, max_ulp=0, max_abs=0.0, how="sha256", reason=why)
            else:
                ok = False
                row.update(identical=False, differing=-1, max_ulp=0, max_abs=0.0, how="none",
                           reason=f"dump {dname} missing")
            details["comparisons"].append(row)
            if not ok:
                bad.append(f"{row['a']} vs {row['b']} {dname}: {row['reason']}")
    n = len(avail)
    if bad:
        return "FAIL", "; ".join(bad)[:2000], details
    note = f" ({len(missing)} skipped: {', '.join(missing)})" if missing else ""
    return "PASS", f"{', '.join(f'{e}:{v}' for e, v in avail)}: {len(c.dumps)} dumps identical across {n}{note}", details



def sources_from_doc(doc: dict[str, Any], report_dir: Path | None) -> tuple[dict[tuple[str, str], DumpSource], dict[str, str]]:
    """Dump sources and skip reasons recorded in one report.json's `matrix` section."""
    sources: dict[tuple[str, str], DumpSource] = {}
    skipped: dict[str, str] = {}
    for e in (doc.get("matrix") or {}).get("entries", []):
        if e.get("verdict") == "SKIP":
            skipped[e["entry"]] = e.get("reason", "")
        for var, info in (e.get("dumps") or {}).items():
            d = report_dir / info["dir"] if report_dir is not None and info.get("dir") else None
            sources[(e["entry"], var)] = DumpSource(e["entry"], var, d, info.get("files") or {})
    return sources, skipped


@dataclass(frozen=True)
class Hints:
    """How fix hints name the harness and files: as the user ran it (`kite-harness`, `python3 -m
    harness`, with --root when needed), files relative to the folder it ran in (here)."""
    command: str = "python -m harness"
    here: Path | None = None

    def file(self, path: Path) -> str:
        return shlex.quote(os.path.relpath(path, self.here) if self.here else str(path))


def add_cross_results(report: Report, matrix: Matrix, sources: dict[tuple[str, str], DumpSource],
                      skipped: dict[str, str], dump_specs: dict[str, DumpSpec],
                      checked: gate.Gate | None = None, exploratory: bool = False,
                      hints: Hints | None = None) -> None:
    """Evaluate the cross-entry criteria. With the registry's entries, one that is not (or not as)
    registered FAILs, or runs labelled exploratory with --exploratory, exactly like a criteria file's."""
    hints = hints or Hints()
    for c in matrix.cross.values():
        t0 = time.perf_counter()
        st = checked.status(RegisteredCross(c.id, "", c.digest(), c.line)) if checked is not None else None
        hint = registry.register_hint(hints.command, hints.file(matrix.path), c.id, st.state) if st else ""
        refused = registry.refusal(st, exploratory, hint) if st else None
        if refused:
            verdict, reason, details = "FAIL", refused, {}
        else:
            verdict, reason, details = evaluate_cross(c, sources, skipped, dump_specs)
        r = matrix_result(c.id, c.title, "equivalence", c.digest(), verdict, reason, time.perf_counter() - t0, details)
        if st is not None and not st.ok:
            r.exploratory = True
        report.add(r)




def matrix_result(rid: str, title: str, kind: str, digest: str, verdict: str, reason: str, seconds: float,
                  details: dict[str, Any], file: str = "configs/matrix.yaml") -> Result:
    """A Result of the matrix itself (an entry, one of its checks, a cross criterion)."""
    return Result(id=rid, title=title, kind=kind, file=file, digest=digest, verdict=verdict, reason=reason,
                  registration="matrix", details=details, duration_s=round(seconds, 3), finished=utc_now())


def recompute_cross(rep: Report, root: Path, matrix_path: Path | None, hints: Hints | None = None) -> None:
    """Evaluate the cross criteria again over a merged report's entries and dumps."""
    path = matrix_path or root / "configs" / "matrix.yaml"
    if "matrix" not in rep.doc or not path.exists():
        return
    mx = load_matrix(path, root)
    try:
        dump_specs = load_config(root).dumps
    except HarnessError:  # no engine configuration at hand: the engine's own dumps (f32)
        dump_specs = {}
    sources, skipped = sources_from_doc(rep.doc, rep.dir)
    present = {e["entry"] for e in rep.doc["matrix"]["entries"]}
    cross = {k: c for k, c in mx.cross.items() if {e for e, _ in c.entries} & present}
    # drop the sources' own evaluations (and their @source copies): merged data decides
    rep.doc["results"] = [r for r in rep.doc["results"] if r["id"].split("@")[0] not in cross]
    # the project's own cross criteria are pre-registered: check them against its registry
    checked = gate.open_gate(root) if matrix_path is None and gate.default_path(root).exists() else None
    add_cross_results(rep, dataclasses.replace(mx, cross=cross), sources, skipped, dump_specs, checked,
                      hints=hints)


def merge_reports(dirs: list[Path], out: Path, *, root: Path, matrix_path: Path | None = None,
                  say: Callable[[str], None] | None = None, hints: Hints | None = None) -> tuple[int, Report]:
    """`harness merge`: the reports joined (harness/report/merge.py), the cross criteria recomputed."""
    entries = gate.load(root) if gate.default_path(root).exists() else []
    registered = {i: e.file for i, e in registry.current(entries).items() if i not in registry.withdrawn(entries)}
    return merge(dirs, out, recompute=lambda rep: recompute_cross(rep, root, matrix_path, hints), say=say,
                 registered=registered)
