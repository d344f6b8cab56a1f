"""`harness verify`: build what the criteria need, prepare the model, run every criterion,
write the report as each one finishes; `--resume` continues a killed run."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from harness import confined
from harness.contract import gate, provenance, registry
from harness.report import document as report
from harness.report import github
from harness.report import resume
from harness.report.lock import ReportLock, build_lock
from harness.contract import schema
from harness.report import sysinfo
from harness.builder.cmake import BuildResult, build
from harness.builder.outcome import build_failure, build_json, builds_needed, failed_builds, relative
from harness.contract.config import Config
from harness.contract.criteria import Criterion
from harness.contract.validate import rel_path
from harness.errors import HarnessError, SchemaErrors
from harness.history import hook as history
from harness.run.probes import Probes
from harness.run.runner import Context, RunStopped
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
    # hints name commands as the user ran the harness (`kite-harness`, `python3 -m harness`, with
    # `--root` when needed) and files relative to `here` (the working folder), when set
    command: str = "python -m harness"
    here: Path | None = None


def default_files(cfg: Config) -> list[Path]:
    return sorted((cfg.root / "regressions").glob("*.yaml"))


def load_criteria(cfg: Config, files: list[Path]) -> list[Criterion]:
    return schema.load_many(files, cfg.root, list(cfg.builds), list(cfg.dumps), list(cfg.env_names))


def select(crits: list[Criterion], only: list[str], kinds: list[str],
           registered: frozenset[str] = frozenset()) -> list[Criterion]:
    """The criteria that --only and --kind leave. An --only id that no file has is an error,
    unless it is registered (then the run reports it missing, as a full run would)."""
    if only:
        known = {c.id for c in crits}
        missing = [i for i in only if i not in known and i not in registered]
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


def shown_file(cfg: Config, opts: VerifyOptions, c: Criterion) -> str:
    """c's file as a command run in opts.here names it."""
    return shlex.quote(os.path.relpath(cfg.root / c.file, opts.here) if opts.here else c.file)


def reproduce_command(c: Criterion, exploratory: bool, command: str = "python -m harness", file: str = "") -> str:
    """One line that runs this criterion alone (it builds and prepares what it needs)."""
    return f"{command} verify {file or c.file} --only {c.id}" + (" --exploratory" if exploratory else "")


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
                self.builds[name] = existing_build(self.cfg, name, self.say)
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
                confined.copy_in(Path(part.log), self.report_dir, Path("logs", "build", b.name, f"{label}.log"))

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


def existing_build(cfg: Config, name: str, say: Callable[[str], None] | None = None) -> BuildResult:
    """--no-build: the build as it is, each part's stamp compared with its inputs now."""
    return build(cfg, name, check=True, progress=say)


def verify(cfg: Config, opts: VerifyOptions, say: Callable[[str], None] | None = None) -> int:
    say = say or (lambda s: print(s, file=sys.stderr, flush=True))
    files = opts.files or default_files(cfg)
    every = load_criteria(cfg, files)
    if opts.registry_path is not None and not opts.registry_path.exists():
        # the default registry may be absent (nothing registered yet); a named one is a typo
        raise HarnessError(f"--registry {opts.registry_path}: no such file")
    reg_path = opts.registry_path or cfg.root / "regressions" / "registry.lock"
    crits = select(every, opts.only, opts.kinds, _registered_absent(reg_path, cfg.root, opts.only, every))
    untrusted = [c for c in crits if not c.in_repository and c.runs_foreign_code()]
    if untrusted and not opts.trust_outside:
        raise SchemaErrors([f"{c.file}:{c.line}: {c.id}: `wrapper` runs a command and `place` copies files, and "
                            f"this criteria file is outside the repository ({cfg.root}); review it, then pass "
                            f"--trust-outside-criteria (or set {TRUST_ENV}=1)" for c in untrusted])
    if opts.exploratory:
        reused = registry.reused_ids(gate.load(cfg.root, reg_path), crits, cfg.root,
                                     lambda c: registry.register_hint(opts.command, shown_file(cfg, opts, c), c.id,
                                                                      "changed"))
        if reused:
            raise SchemaErrors(reused)
    reports_dir = opts.reports_dir or cfg.root / cfg.reports_dir
    git = sysinfo.git_state(cfg.root)
    if opts.resume is not None:
        rdir = resume.check(opts.resume)
    else:
        rdir = report.new_report_dir(reports_dir, git.get("short"))
    try:
        lock = ReportLock(rdir).acquire(report.utc_now(), opts.argv)
    except OSError as e:  # a full disk as the lock's holder is written: nothing has run yet
        again = f"continue with `verify --resume {rdir}`" if opts.resume is not None else "run verify again"
        raise HarnessError(f"cannot write the lock file of {rdir}: {e.strerror or e}; nothing was run ({again} "
                           "once there is room)") from None
    if lock.notice:
        say(lock.notice)
    with lock:
        # the clone's build folder: one command builds and runs there at a time, a second one waits
        with build_lock(cfg.root / cfg.build_dir).acquire(report.utc_now(), opts.argv, wait=say) as builds:
            if builds.notice:
                say(builds.notice)
            return _verify_locked(cfg, opts, say, files, every, crits, reports_dir, rdir, git)


def _verify_locked(cfg: Config, opts: VerifyOptions, say: Callable[[str], None], files: list[Path],
                   every: list[Criterion], crits: list[Criterion], reports_dir: Path, rdir: Path,
                   git: dict[str, Any]) -> int:
    reg_path = opts.registry_path or cfg.root / "regressions" / "registry.lock"
    checked = gate.open_gate(cfg.root, reg_path, cfg)
    entries = checked.entries
    commits = provenance.registry_commits(cfg.root, reg_path)
    if opts.strict and commits is None:
        raise HarnessError(f"--strict: {cfg.root} is not a git checkout (or git is missing), so whether each "
                           "registration is committed cannot be checked")
    # --strict: a withdrawal in no commit yet retires nothing; the id is still answered for
    uncommitted = {n for n, c in (commits or {}).items() if c is None} if opts.strict else set()
    gone = checked.withdrawn(uncommitted)
    if opts.resume is not None:
        rep = resume.load(rdir)  # read under the lock: the last writer's results are all there
        say(f"resuming {relative(cfg, rdir)}")
        resume.drop_stale(rep, git, {}, say)  # another commit's results never stand under this one's header
    else:
        rep = report.Report(rdir)
    narrowed = filter_text(opts)
    rep.doc["argv"] = opts.argv
    rep.doc["project"] = cfg.name
    rep.doc["git"] = git
    rep.doc["filter"] = narrowed
    # each file's criteria by its exact path, as the loader names it (not by a suffix of the name)
    rep.doc["criteria_files"] = {str(f): sorted(c.id for c in every if c.file == rel_path(f, cfg.root)) for f in files}
    rep.doc["not_run"] = resume.not_run(every, rep)
    rep.doc.setdefault("resumed", [])
    if opts.resume is not None:
        rep.doc["resumed"].append(report.utc_now())
    rep.write(status="running")
    sess = Session(cfg, opts, say, rdir)
    probes = Probes(gpu_info=sess.engine_info, overrides=dict(opts.probe_overrides), gpu=cfg.gpu)
    ctx = Context(cfg=cfg, report_dir=rdir, probes=probes, ensure_build=sess.ensure_build,
                  model_path=sess.model_path, progress=say)
    def refuse(c: Criterion, st: registry.Status, reg: dict[str, Any]) -> str | None:
        if opts.strict and st.ok and reg.get("uncommitted"):
            return (f"registration not committed: registry.lock line(s) {', '.join(map(str, reg['uncommitted']))} "
                    "are in no commit yet (--strict: commit the registration before taking results)")
        gpu = bool({"gpu", "no_gpu"} & set(c.requires))
        # a criterion whose requirements are not met SKIPs for them, whatever its builds did, unless
        # the build that answers the GPU probe failed (then the probe's answer means nothing)
        skips = probes.unmet(list(c.requires)) is not None
        for n in builds_needed(cfg, [c]):
            why = build_failure(n, sess.builds[n], gpu) if n in sess.builds else None
            if why and (not skips or n == cfg.gpu.build):
                return why
        return None

    how = Judged(checked, opts.exploratory,
                 lambda c, st: registry.register_hint(opts.command, shown_file(cfg, opts, c), c.id, st.state),
                 reproduce=lambda c, x: reproduce_command(c, x, opts.command, shown_file(cfg, opts, c)),
                 models=lambda: sorted(str(relative(cfg, m)) for m in sess.models.used), refuse=refuse)
    absent = [i for i in opts.only if i not in {c.id for c in every}]
    if not crits and not absent:
        say("no criteria selected" + ("" if files else " (no criteria files under regressions/)"))
    selected = {c.id for c in crits}
    vanished: list[report.Result] = []
    if not narrowed:  # the registry's ids are the contract: each is judged, missing, or withdrawn
        scope = {rel_path(f, cfg.root) for f in files}
        if not opts.files:  # a default run also answers for registered files that are gone
            scope |= {e.file for e in registry.current(entries).values()
                      if not (Path(e.file) if Path(e.file).is_absolute() else cfg.root / e.file).exists()}
        rep.doc["withdrawn"] = _withdrawn(gone, scope)
        vanished = _missing(entries, gone, scope, {c.id for c in every}, git, opts.command)
        # a resumed report: results of ids that are no criterion's now (withdrawn, or missing
        # before and judged again below) do not stand
        known = {c.id for c in every} | {m.id for m in vanished}
        rep.doc["results"] = [r for r in rep.results if r.get("id") in known and r.get("registration") != "missing"]
    elif absent:  # --only naming registered ids that no file has: missing, as in a full run
        everywhere = {e.file for e in registry.current(entries).values()}
        vanished = [m for m in _missing(entries, gone, everywhere, {c.id for c in every}, git, opts.command)
                   if m.id in absent]
    for res in vanished:
        say(f"{res.id}: FAIL: {res.reason}")
        rep.add(res)
        selected.add(res.id)
    if not narrowed or absent:
        rep.write()
    taken = {c.id for c in every}

    def sha(name: str) -> dict[str, Any]:
        return sess.ensure_build(name).to_json()["sha256"] if name in cfg.builds else {}

    try:
        rep.doc["system"] = sysinfo.system(cfg.root)
        rep.write()
        # builds first, once, and only those that the criteria left to run need: a failure is
        # reported here, with its first errors, and each criterion needing it FAILs pointing at it
        # (a resumed result is kept only on the same binaries, so its builds are needed too: a build
        # whose inputs did not change does not start CMake). The GPU probe's build comes first; a
        # criterion whose requirements are not met here SKIPs without its builds (a CUDA llama.cpp
        # on a machine without a GPU), unless the probe's own build failed, which fails the run.
        probe = [cfg.gpu.build] if cfg.gpu.build in cfg.builds and any(
            {"gpu", "no_gpu"} & set(c.requires) for c in crits) else []
        for n in probe:
            sess.ensure_build(n)
        runnable = [c for c in crits if probes.unmet(list(c.requires)) is None]
        needed = probe + [n for n in builds_needed(cfg, runnable) if n not in probe]
        for n in needed:
            sess.ensure_build(n)
        if cfg.gpu.build in needed:
            rep.doc["engine_info"] = sess.engine_info()
        for i, c in enumerate(crits, 1):
            deps = checked.deps(c)
            st = checked.status(c, taken, deps)
            shown, prov = _provenance(entries, st, c.id, commits)
            registration = {**prov, "dependencies": deps}
            prev = rep.result_for(c.id) if c in runnable else None  # one that SKIPs here is judged again
            if prev is not None:  # a resumed run: keep the result only if a fresh run would judge it alike
                refused = registry.refusal(st, opts.exploratory, how.hint(c, st)) or how.refuse(c, st, prov)
                why = "refused now" if refused else resume.why_not_kept(prev, c.digest, shown, not st.ok,
                                                                         registration, git, sha)
                if why is None:
                    say(f"[{i}/{len(crits)}] {c.id}: {prev['verdict']} (kept from the interrupted run)")
                    continue
                say(f"[{i}/{len(crits)}] {c.id}: not kept from the interrupted run: {why}")
            say(f"[{i}/{len(crits)}] {c.id} ({c.kind}, {shown}): {c.title}")
            res = _run_one(c, ctx, sess, how, st, shown, registration)
            res.details["ran_with"] = resume.ran_with(git, {n: b.to_json()["sha256"] for n, b in sess.builds.items()
                                                            if n in c.builds()})
            for n in c.builds():
                if n in sess.builds:
                    rep.doc["builds"][n] = build_json(cfg, sess.builds[n])
            rep.doc["not_run"] = [x for x in rep.doc["not_run"] if x != c.id]
            rep.add(res)
            where = f" at {c.file}:{c.line}" if res.verdict == "FAIL" else ""
            say(f"    {res.verdict}{' (exploratory: not pre-registered)' if res.exploratory else ''}{where}: "
                f"{res.reason}")
            if res.verdict == "FAIL":
                for line in report.triage_lines(res.to_json(), Path(relative(cfg, rdir) or rdir)):
                    say(f"    {line}")
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM, SIGHUP, the parent's death: the command tree is ended
        resume.drop_stale(rep, git, rep.doc["builds"], say)
        for n, b in sess.builds.items():
            rep.doc["builds"][n] = build_json(cfg, b)
        rep.doc["not_run"] = resume.not_run(every, rep)
        rep.doc["interrupted_by"] = str(e) or "SIGINT"
        rep.write(final=True, status="interrupted")
        s = rep.summarize()
        say(f"interrupted ({rep.doc['interrupted_by']}) after {s['total']} criteria ({s['passed']} passed, "
            f"{s['failed']} failed, {s['skipped']} skipped); report so far: {relative(cfg, rdir)} "
            f"(continue: {opts.command} verify --resume "
            f"{shlex.quote(os.path.relpath(rdir, opts.here) if opts.here else str(rdir))})")
        return 128 + getattr(e, "signum", 2)
    except RunStopped as e:  # a full disk: the criterion has no verdict, so a resume runs it again
        resume.drop_stale(rep, git, rep.doc["builds"], say)
        rep.doc["not_run"] = resume.not_run(every, rep)
        rep.write(final=True, status="interrupted")
        raise HarnessError(f"{e}; no verdict was recorded for it: free some space, then continue with "
                           f"`{opts.command} verify --resume "
                           f"{shlex.quote(os.path.relpath(rdir, opts.here) if opts.here else str(rdir))}`") from None
    for n, b in sess.builds.items():
        rep.doc["builds"][n] = build_json(cfg, b)
    confined.rmdir_if_empty(rdir, "work")
    resume.drop_stale(rep, git, rep.doc["builds"], say)
    missing = resume.not_run(every, rep)
    rep.doc["not_run"] = missing
    rep.write(final=True, status="partial" if missing else "complete")
    history.after_report(cfg.root, rep, say)  # A/B pictures; the history store when configured
    if not narrowed:  # reports/latest names the last finished full run, never one in progress
        report.point_latest(reports_dir, rdir)
    github.publish(rep.doc, rdir, root=cfg.root)
    s = rep.summarize()
    say(f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped -> {relative(cfg, rdir / 'report.md')}"
        + (f"; partial{' (' + narrowed + ')' if narrowed else ''}: {len(missing)} not run: "
           f"{', '.join(missing)}" if missing else ""))
    broken = failed_builds(sess.builds)
    if broken:  # a run with a failed build never passes, whatever its criteria said
        say(f"build{'s' if len(broken) > 1 else ''} {', '.join(broken)} failed: see the first errors above")
    failed = any(r["verdict"] == "FAIL" for r in rep.results if r["id"] in selected)
    return 1 if failed or broken else 0


def _registered_absent(reg_path: Path, root: Path, only: list[str], every: list[Criterion]) -> frozenset[str]:
    """The --only ids that no criteria file has but the registry holds (not withdrawn)."""
    absent = {i for i in only if i not in {c.id for c in every}}
    if not absent or not reg_path.exists():
        return frozenset()
    entries = gate.load(root, reg_path)
    return frozenset(absent & (set(registry.current(entries)) - set(registry.withdrawn(entries))))


def _missing(entries: list[registry.Entry], gone: dict[str, registry.Entry], scope: set[str], present: set[str],
             git: dict[str, Any], command: str) -> list[report.Result]:
    """A FAIL for each id registered to a file in scope, not withdrawn (gone), that no criteria file has."""
    out = []
    for e in registry.current(entries).values():
        if e.file in scope and e.id not in gone and e.id not in present:
            out.append(report.Result(
                id=e.id, title="(registered criterion not found)", kind="missing", file=e.file, digest=e.digest,
                verdict="FAIL", registration="missing",
                reason=(f"{e.id} is registered to {e.file} (registry.lock:{e.line}), but no criteria file of this run "
                        f"has it: restore it in {e.file}, or retire it: `{command} register --withdraw {e.id} "
                        "--reason TEXT`"),
                details={"ran_with": resume.ran_with(git, {})}, finished=report.utc_now()))
    return out


def _withdrawn(gone: dict[str, registry.Entry], scope: set[str]) -> list[dict[str, Any]]:
    """The withdrawn ids of files in scope, with their event (shown in the report)."""
    return [{"id": e.id, "file": e.file, "time": e.time, "reason": e.reason, "line": e.line}
            for e in gone.values() if e.file in scope]


def _run_one(c: Criterion, ctx: Context, sess: Session, how: Judged, st: registry.Status, shown: str,
             registration: dict[str, Any]) -> report.Result:
    sess.models.used.clear()
    return judge(ctx, c, how, st, shown, registration)
