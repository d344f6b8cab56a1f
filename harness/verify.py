"""`harness verify`: build what the criteria need, prepare the model, run every criterion,
write the report as each one finishes; `--resume` continues a killed run."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from harness.spec import depends, provenance, registry
from harness.report import document as report
from harness.report import github
from harness.report.lock import ReportLock
from harness.spec import schema
from harness.report import sysinfo
from harness.build.cmake import BuildResult, PartResult, build
from harness.spec.config import Config
from harness.spec.criteria import Criterion
from harness.errors import HarnessError, SchemaErrors
from harness.run.probes import Probes
from harness.run.runner import Context
from harness.run.suite import Judged, Models, judge


TRUST_ENV = "KITE_TRUST_OUTSIDE_CRITERIA"


@dataclass
class VerifyOptions:
    files: list[Path] = field(default_factory=list)
    only: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    exploratory: bool = False
    resume: Path | None = None  # a report folder to continue
    no_build: bool = False
    force_build: bool = False
    reports_dir: Path | None = None
    registry_path: Path | None = None
    argv: list[str] = field(default_factory=list)
    probe_overrides: dict[str, tuple[bool, str]] = field(default_factory=dict)
    trust_outside: bool = False  # run `wrapper`/`place` of criteria files outside the repository
    strict: bool = False  # every registration used must be in a commit (git checkout needed)


def default_files(cfg: Config) -> list[Path]:
    return sorted((cfg.root / "regressions").glob("*.yaml"))


def load_criteria(cfg: Config, files: list[Path]) -> list[Criterion]:
    return schema.load_many(files, cfg.root, list(cfg.builds), list(cfg.dumps), list(cfg.env_names))


def select(crits: list[Criterion], only: list[str], kinds: list[str]) -> list[Criterion]:
    if only:
        known = {c.id for c in crits}
        missing = [i for i in only if i not in known]
        if missing:
            raise HarnessError(f"--only: unknown id(s) {', '.join(missing)}; known: {', '.join(sorted(known)) or '-'}")
        crits = [c for c in crits if c.id in only]
    if kinds:
        crits = [c for c in crits if c.kind in kinds]
    return crits


def filter_text(opts: VerifyOptions) -> str:
    """How a run was narrowed (`--only A B`, `--kind K`), or '' for a full run."""
    parts = []
    if opts.only:
        parts.append("--only " + " ".join(opts.only))
    if opts.kinds:
        parts.append("--kind " + " ".join(opts.kinds))
    return " ".join(parts)


def reproduce_command(c: Criterion, exploratory: bool) -> str:
    """One line that runs this criterion alone (it builds and prepares what it needs)."""
    return f"python -m harness verify {c.file} --only {c.id}" + (" --exploratory" if exploratory else "")


def not_run(crits: list[Criterion], rep: report.Report) -> list[str]:
    """Ids of the criteria with no verdict in the report for their current text."""
    out = []
    for c in crits:
        r = rep.result_for(c.id)
        if not (r and r.get("digest") == c.digest and r.get("verdict") in ("PASS", "FAIL", "SKIP")):
            out.append(c.id)
    return out


class Session:
    """Per-run caches: builds, models, engine info. Passed around, never global."""

    def __init__(self, cfg: Config, opts: VerifyOptions, say: Callable[[str], None], report_dir: Path | None = None):
        self.report_dir = report_dir
        self.cfg = cfg
        self.opts = opts
        self.say = say
        self.builds: dict[str, BuildResult] = {}
        self.models = Models(cfg, say)
        self._info: dict[str, Any] | None | bool = False

    def ensure_build(self, name: str) -> BuildResult:
        if name not in self.builds:
            if self.opts.no_build:
                self.builds[name] = existing_build(self.cfg, name)
            else:
                self.builds[name] = build(self.cfg, name, force=self.opts.force_build, progress=self.say)
                self._keep_logs(self.builds[name])
        return self.builds[name]

    def _keep_logs(self, b: BuildResult) -> None:
        """Copy the build logs into the report (logs/build/<name>/)."""
        if self.report_dir is None:
            return
        parts = {"engine": b.engine, "module": b.module, **{Path(k).name: v for k, v in b.extras.items()}}
        for label, part in parts.items():
            if part.log and Path(part.log).exists():
                dest = self.report_dir / "logs" / "build" / b.name / f"{label}.log"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(part.log, dest)

    def model_path(self, spec: dict[str, Any] | None) -> Path:
        return self.models.path(spec)

    def engine_info(self) -> dict[str, Any] | None:
        if self._info is False:
            if self.cfg.gpu.build not in self.cfg.builds:
                self._info = None
            else:
                b = self.ensure_build(self.cfg.gpu.build)
                self._info = (sysinfo.engine_info(Path(b.engine_path), self.cfg.info_args, self.cfg.timeout("info", 30))
                              if b.engine_ok else None)
        return self._info  # type: ignore[return-value]


def _provenance(entries: list[registry.Entry], st: registry.Status, cid: str,
                commits: dict[int, str | None] | None) -> tuple[str, dict[str, Any]]:
    """How a registration is shown ("registered @ 1a2b3c4d5e", "registered (uncommitted)", ...)
    and its facts for the report: the line in force, its commit, the id's uncommitted lines."""
    lines = [e.line for e in (st.entry, registry.current_depends(entries).get(cid)) if e is not None]
    prov: dict[str, Any] = {"state": st.state, "line": st.entry.line if st.entry else None, "commit": None,
                            "uncommitted": []}
    shown = st.state
    if st.ok and registry.current_depends(entries).get(cid) is None:
        shown += ", dependencies not recorded"
    if commits is not None and st.entry is not None:
        prov["commit"] = commits.get(st.entry.line)
        prov["uncommitted"] = [n for n in lines if commits.get(n) is None]
        shown += f" @ {prov['commit'][:10]}" if prov["commit"] else " (uncommitted)"
    return shown, prov


def existing_build(cfg: Config, name: str) -> BuildResult:
    b = cfg.bin_dir(name)
    exe, mod = b / cfg.binary_for(name), b / cfg.module_for(name)
    done = "prebuilt" if cfg.builds[name].prebuilt else "up-to-date"
    return BuildResult(name, str(b), str(exe), str(mod),
                       PartResult(done if exe.exists() else "failed", "" if exe.exists()
                                  else f"{exe} not built (--no-build)"),
                       PartResult("up-to-date" if mod.exists() else "skipped", "" if mod.exists() else "not built"))


def verify(cfg: Config, opts: VerifyOptions, say: Callable[[str], None] | None = None) -> int:
    say = say or (lambda s: print(s, file=sys.stderr, flush=True))
    files = opts.files or default_files(cfg)
    every = load_criteria(cfg, files)
    crits = select(every, opts.only, opts.kinds)
    if opts.registry_path is not None and not opts.registry_path.exists():
        # the default registry may be absent (nothing registered yet); a named one is a typo
        raise HarnessError(f"--registry {opts.registry_path}: no such file")
    untrusted = [c for c in crits if not c.in_repository and c.runs_foreign_code()]
    if untrusted and not opts.trust_outside:
        raise SchemaErrors([f"{c.file}:{c.line}: {c.id}: `wrapper` runs a command and `place` copies files, and "
                            f"this criteria file is outside the repository ({cfg.root}); review it, then pass "
                            f"--trust-outside-criteria (or set {TRUST_ENV}=1)" for c in untrusted])
    if opts.exploratory:
        reg_path = opts.registry_path or cfg.root / "regressions" / "registry.lock"
        reused = registry.reused_ids(registry.load(reg_path), crits)
        if reused:
            raise SchemaErrors(reused)
    reports_dir = opts.reports_dir or cfg.root / cfg.reports_dir
    git = sysinfo.git_state(cfg.root)
    if opts.resume is not None:
        rdir = opts.resume
        if not (rdir / "report.json").is_file():
            raise HarnessError(f"--resume: {rdir} holds no report.json")
    else:
        rdir = report.new_report_dir(reports_dir, git.get("short"))
    lock = ReportLock(rdir).acquire(report.utc_now(), opts.argv)
    if lock.notice:
        say(lock.notice)
    with lock:
        return _verify_locked(cfg, opts, say, files, every, crits, reports_dir, rdir, git)


def _verify_locked(cfg: Config, opts: VerifyOptions, say: Callable[[str], None], files: list[Path],
                   every: list[Criterion], crits: list[Criterion], reports_dir: Path, rdir: Path,
                   git: dict[str, Any]) -> int:
    reg_path = opts.registry_path or cfg.root / "regressions" / "registry.lock"
    entries = registry.load(reg_path)
    suspect = registry.problems(entries)
    commits = provenance.registry_commits(cfg.root, reg_path)
    if opts.strict and commits is None:
        raise HarnessError(f"--strict: {cfg.root} is not a git checkout (or git is missing), so whether each "
                           "registration is committed cannot be checked")
    if opts.resume is not None:
        try:  # read under the lock: the last writer's results are all there
            rep = report.Report.load(rdir)
        except (OSError, ValueError) as e:
            raise HarnessError(f"--resume: cannot read {rdir}/report.json: {e}") from None
        say(f"resuming {rdir}")
    else:
        rep = report.Report(rdir)
    narrowed = filter_text(opts)
    rep.doc["argv"] = opts.argv
    rep.doc["git"] = git
    rep.doc["filter"] = narrowed
    rep.doc["criteria_files"] = {str(f): sorted(c.id for c in every if c.file.endswith(f.name)) for f in files}
    rep.doc["not_run"] = not_run(every, rep)
    rep.doc.setdefault("resumed", [])
    if opts.resume is not None:
        rep.doc["resumed"].append(report.utc_now())
    rep.write(status="running")
    if opts.resume is None and not narrowed:
        report.point_latest(reports_dir, rdir)  # as soon as there is a report: a killed run can resume
    rep.doc["system"] = sysinfo.system(cfg.root)
    rep.write()
    sess = Session(cfg, opts, say, rdir)
    probes = Probes(gpu_info=sess.engine_info, overrides=dict(opts.probe_overrides), gpu=cfg.gpu)
    ctx = Context(cfg=cfg, report_dir=rdir, probes=probes, ensure_build=sess.ensure_build,
                  model_path=sess.model_path, progress=say)
    how = Judged(entries, opts.exploratory, "run `harness register`, or use --exploratory",
                 notes=lambda c: [f"build {n}: module {b.module.status}: {b.module.reason}"
                                  for n, b in sess.builds.items() if n in c.builds() and b.module.status == "failed"],
                 fail_details=lambda c: {"build_errors": e} if (e := {n: b.errors() for n, b in sess.builds.items()
                                                                     if n in c.builds() and b.errors()}) else {},
                 reproduce=reproduce_command, models=lambda: sorted(sess.models.used),
                 refuse=lambda c, st, reg: (f"registration not committed: registry.lock line(s) "
                                            f"{', '.join(map(str, reg['uncommitted']))} are in no commit yet "
                                            "(--strict: commit the registration before taking results)")
                 if opts.strict and st.ok and reg.get("uncommitted") else None)
    if not crits:
        say("no criteria selected" + ("" if files else " (no criteria files under regressions/)"))
    if not opts.no_build and "default" in cfg.builds and crits:
        sess.ensure_build("default")
    try:
        if crits:
            rep.doc["engine_info"] = sess.engine_info()
        for i, c in enumerate(crits, 1):
            prev = rep.result_for(c.id)
            if prev and prev.get("digest") == c.digest and prev.get("verdict") in ("PASS", "FAIL", "SKIP"):
                say(f"[{i}/{len(crits)}] {c.id}: {prev['verdict']} (kept from the interrupted run)")
                continue
            deps = depends.dependency_digests(cfg, c)
            st = registry.status(entries, c, deps, suspect)
            shown, prov = _provenance(entries, st, c.id, commits)
            say(f"[{i}/{len(crits)}] {c.id} ({c.kind}, {shown}): {c.title}")
            res = _run_one(c, ctx, sess, how, st, shown, {**prov, "dependencies": deps})
            for n in c.builds():
                if n in sess.builds:
                    rep.doc["builds"][n] = sess.builds[n].to_json()
            rep.doc["not_run"] = [x for x in rep.doc["not_run"] if x != c.id]
            rep.add(res)
            say(f"    {res.verdict}{' (exploratory: not pre-registered)' if res.exploratory else ''}: {res.reason}")
            if res.verdict == "FAIL":
                for line in report.triage_lines(res.to_json(), rdir):
                    say(f"    {line}")
    except KeyboardInterrupt:
        rep.doc["not_run"] = not_run(every, rep)
        rep.write(final=True, status="interrupted")
        say(f"interrupted; report so far: {rdir} (continue with --resume)")
        return 130
    for n, b in sess.builds.items():
        rep.doc["builds"][n] = b.to_json()
    work = rdir / "work"
    if work.is_dir() and not any(work.iterdir()):
        work.rmdir()
    missing = not_run(every, rep)
    rep.doc["not_run"] = missing
    rep.write(final=True, status="partial" if missing else "complete")
    github.publish(rep.doc, rdir)
    s = rep.summarize()
    say(f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped -> {rdir / 'report.md'}"
        + (f"; partial{' (' + narrowed + ')' if narrowed else ''}: {len(missing)} not run: "
           f"{', '.join(missing)}" if missing else ""))
    selected = {c.id for c in crits}
    failed = any(r["verdict"] == "FAIL" for r in rep.results if r["id"] in selected)
    return 1 if failed else 0


def _run_one(c: Criterion, ctx: Context, sess: Session, how: Judged, st: registry.Status, shown: str,
             registration: dict[str, Any]) -> report.Result:
    sess.models.used.clear()
    return judge(ctx, c, how, st, shown, registration)
