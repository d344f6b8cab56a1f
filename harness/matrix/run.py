"""A matrix run: for each selected entry, its builds and checks (matrix/entry.py), then its
criteria through the loop `verify` uses (harness/run/suite.py) with the entry's build standing
in for the criteria's `default` build; then the cross-entry criteria (matrix/cross.py). One
report for the entries it ran; every entry's dumps are copied into it (dumps/<entry>/<variant>/)
with their SHA-256, so `harness merge` can evaluate the cross criteria over several reports."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness import confined
from harness.builder import toolchains
from harness.errors import HarnessError
from harness.matrix.cross import Hints, add_cross_results, matrix_result, sources_from_doc
from harness.matrix.entry import EntryRun, EntryRunner
from harness.matrix.spec import Entry, Matrix, load_matrix
from harness.report import sysinfo
from harness.report.document import Report, new_report_dir, point_latest
from harness.run.probes import Probes
from harness.run.result import Result
from harness.run.runner import Context, CriterionFail, RunStopped
from harness.run.suite import Judged, Models, judge
from harness.contract import gate, registry, schema
from harness.contract.config import Config, load_config
from harness.contract.criteria import Criterion
from harness.contract.validate import rel_path


def model_spec(spec: str, override: str | None) -> dict[str, str]:
    """The dump runs' model: --model FILE, else the matrix's recipe name or .gguf path."""
    if override:
        return {"path": str(Path(override).resolve())}
    return {"path": spec} if spec.endswith(".gguf") else {"recipe": spec}


def copy_dumps(report_dir: Path, run: EntryRun, dirs: dict[str, Path]) -> None:
    for var, d in dirs.items():
        if var not in run.dumps:
            continue
        dst = report_dir / "dumps" / run.entry / var
        rel = dst.relative_to(report_dir)
        confined.rmtree(report_dir, rel)  # no link followed in the report folder
        confined.makedirs(report_dir, rel.parent)
        # an engine's links are not copied: one could lead out of its folder (to /dev/zero ...)
        shutil.copytree(d, dst, ignore=lambda folder, names: [n for n in names
                                                              if os.path.islink(os.path.join(folder, n))])
        run.dumps[var]["dir"] = str(dst.relative_to(report_dir))


def criteria_refs(cfg: Config, ent: Entry) -> list[tuple[str, str, list[Criterion], str | None]]:
    """Each of the entry's `criteria:` references (`file.yaml`, `file.yaml#ID`) with its file, the
    criteria it names, and what is wrong with it (None when it names at least one)."""
    out = []
    for ref in ent.criteria:
        file, _, cid = ref.partition("#")
        path = Path(cfg.root) / file
        problem = None if path.exists() else f"{file} does not exist"
        crits: list[Criterion] = []
        if problem is None:
            crits = schema.load_file(path, Path(cfg.root), list(cfg.builds), list(cfg.dumps), list(cfg.env_names))
            crits = [c for c in crits if c.id == cid] if cid else crits
            problem = None if crits else f"{file} has no criterion {cid}"
        out.append((ref, file, crits, problem))
    return out


def hip_probes() -> dict[str, tuple[bool, str]]:
    """`requires:` answers for a HIP entry: module_cc is hipcc, and gpu means an AMD GPU (an NVIDIA
    one does not run this module), so device criteria SKIP with "no AMD GPU" where there is none."""
    cc, gpu = toolchains.probe("hipcc"), toolchains.probe("amd_gpu")
    return {"module_cc": (True, f"hipcc {cc.version}") if cc.found else (False, cc.skip_reason()),
            "gpu": (True, f"AMD GPU {gpu.version}") if gpu.found else (False, gpu.reason)}


def entry_criteria(cfg: Config, runner: EntryRunner, run: EntryRun, report_dir: Path,
                   reg: gate.Gate, exploratory: bool, models: Models,
                   hints: Hints = Hints()) -> list[Result]:
    """The entry's registered criteria (`criteria: [file.yaml, file.yaml#ID]`) on its builds."""
    ent = runner.ent
    ctx = Context(cfg=runner.cfg, report_dir=report_dir / "criteria" / ent.name,
                  probes=Probes(runner.gpu_info, gpu=cfg.gpu),
                  ensure_build=runner.ensure_build, model_path=models.path,
                  progress=runner.say, launcher=runner.launcher(), base_env=runner.base_env())
    if ent.runner == "wine":  # under wine the Linux facts of this host do not hold for the engine
        ctx.probes.overrides["linux"] = (False, "runs under wine")
    if ent.module.gpu == "hip":  # the same criteria on hipcc's module: its compiler, an AMD GPU
        ctx.probes.overrides.update(hip_probes())
    how = Judged(reg, exploratory,
                 lambda c, st: registry.register_hint(hints.command, hints.file(cfg.root / c.file), c.id, st.state),
                 id_prefix=f"{ent.name}/", title_prefix=f"{ent.name}: ", report_root=report_dir,
                 skip=run.reason if run.verdict == "SKIP" else None,
                 reproduce=lambda c, exploratory: f"{hints.command} matrix {ent.name}"
                 + (" --exploratory" if exploratory else ""))
    out = []
    for ref, file, crits, problem in criteria_refs(cfg, ent):
        if problem is not None:
            out.append(matrix_result(f"{ent.name}/{ref}", ref, "criteria", ent.digest(), "FAIL", problem, 0.0, {},
                                     file=file))
        for c in crits:
            runner.say(f"matrix {ent.name}: {c.id} ({c.kind}): {c.title}")
            out.append(judge(ctx, c, how))
    return out


def _record(rep: Report, ent: Entry, run: EntryRun, crit_results: list[Result], crit_s: float) -> None:
    total = run.seconds + crit_s
    run_doc = run.to_json()
    run_doc["criteria_seconds"] = round(crit_s, 3)
    run_doc["total_seconds"] = round(total, 3)
    rep.doc["matrix"]["entries"].append(run_doc)
    rep.add(matrix_result(ent.name, f"matrix entry {ent.name}: {ent.description}", "matrix-entry", ent.digest(),
                          run.verdict, f"{run.reason} (wall {total:.1f} s: build {run.build_seconds:.1f} s, checks "
                          f"{run.seconds - run.build_seconds:.1f} s, criteria {crit_s:.1f} s)",
                          total, {"build_seconds": round(run.build_seconds, 3), "checks_seconds":
                                  round(run.seconds - run.build_seconds, 3), "criteria_seconds": round(crit_s, 3),
                                  "builds": run.builds}))
    for c in run.checks:
        rep.add(matrix_result(f"{ent.name}/{c.name}", f"{ent.name}: {c.name}", "matrix", ent.digest(), c.verdict,
                              c.reason, c.seconds, c.details))
    for r in crit_results:
        rep.add(r)


def run_matrix(root: Path, names: list[str] | None, *, report_dir: Path | None = None, model: str | None = None,
               force: bool = False, matrix_path: Path | None = None, keep_going: bool = True,
               exploratory: bool = False, progress: Callable[[str], None] | None = None,
               hints: Hints | None = None) -> tuple[int, Path]:
    """Run entries (all when names is empty), then the cross criteria. Returns (exit status, report dir):
    0 = nothing failed (SKIPs allowed), 1 = something failed. hints: how fix hints name commands."""
    hints = hints or Hints()
    say = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    cfg = load_config(root)
    matrix: Matrix = load_matrix(matrix_path or root / "configs" / "matrix.yaml", root)
    entries = matrix.select(names)
    reports = root / cfg.reports_dir
    git = sysinfo.git_state(root)
    # read (and checked against git HEAD) before anything runs, as verify does
    reg = gate.open_gate(Path(cfg.root), cfg=cfg)
    full = report_dir is None and not names  # only a finished full run moves reports/latest
    if report_dir is None:
        report_dir = new_report_dir(reports, git.get("short"))
    elif (report_dir / "report.json").exists():
        shutil.rmtree(report_dir)  # a fixed folder (reports/matrix/<entry>/): the previous run goes
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"--report-dir {report_dir}: cannot make the folder: {e.strerror or e}") from None
    rep = Report(report_dir)
    rep.doc.update(argv=sys.argv, kind="matrix", git=git)
    try:
        rep.doc["system"] = sysinfo.system(root)
    except Exception:  # noqa: BLE001 - system facts are nice to have, never a reason to stop
        rep.doc["system"] = {}
    rep.doc["toolchains"] = {k: v.to_json() for k, v in toolchains.probe_all().items()}
    rep.doc["matrix"] = {"file": rel_path(matrix.path, root), "selected": [e.name for e in entries], "entries": []}
    models = Models(cfg, say, default=model_spec(matrix.dump.model, model))

    def dump_model() -> Path:
        try:
            return models.path(None)
        except CriterionFail as e:  # the entry's checks end with this reason
            raise HarnessError(e.reason) from None

    t_all = time.perf_counter()
    try:
        failed = False
        for ent in entries:
            runner = EntryRunner(cfg, matrix, ent, report_dir, dump_model, say, force)
            try:
                run = runner.execute()
            except RunStopped:
                raise
            except HarnessError as ex:
                run = EntryRun(ent.name, "FAIL", str(ex))
            copy_dumps(report_dir, run, runner.dump_dirs)
            t_crit = time.perf_counter()
            crit_results = entry_criteria(cfg, runner, run, report_dir, reg, exploratory, models, hints)
            crit_s = time.perf_counter() - t_crit
            _record(rep, ent, run, crit_results, crit_s)
            crit_failed = [r.id for r in crit_results if r.verdict == "FAIL"]
            say(f"matrix {ent.name}: {run.verdict} in {run.seconds + crit_s:.1f} s (build {run.build_seconds:.1f} s, "
                f"criteria {crit_s:.1f} s, {len(crit_failed)} failed): {run.reason[:200]}")
            failed |= run.verdict == "FAIL" or bool(crit_failed)
            rep.write()
            if failed and not keep_going:
                break
        # cross criteria: here when this run holds enough of their entries, else in `harness merge`
        sources, skipped = sources_from_doc(rep.doc, report_dir)
        selected = {e.name for e in entries}
        cross = {k: c for k, c in matrix.cross.items() if sum(e in selected for e, _ in c.entries) >= c.min_entries}
        add_cross_results(rep, dataclasses.replace(matrix, cross=cross), sources, skipped,
                          cfg.dumps, reg, exploratory, hints)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM, SIGHUP: the report says so, never "running"
        rep.doc["interrupted_by"] = str(e) or "SIGINT"
        rep.write(final=True, status="interrupted")
        raise
    except RunStopped as e:  # a full disk: what ran is kept, the report says it was cut short
        rep.doc["interrupted_by"] = f"a full disk ({e})"
        rep.write(final=True, status="interrupted")
        raise HarnessError(f"{e}; the matrix report {report_dir} is marked interrupted: free some space, "
                           "then run the matrix again") from None
    rep.doc["matrix"]["wall_s"] = round(time.perf_counter() - t_all, 3)
    summ = rep.summarize()
    rep.write(final=True, status="complete")
    if full:
        point_latest(reports, report_dir)
    say(f"matrix: {summ['passed']} passed, {summ['failed']} failed, {summ['skipped']} skipped "
        f"in {rep.doc['matrix']['wall_s']:.1f} s; report {report_dir}")
    return (1 if summ.get("failed", 0) > 0 else 0), report_dir
