"""Command line: `python -m harness SUBCOMMAND ...`. Exit status 0 all passed (skips allowed),
1 some failed, 2 usage or configuration error. Never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from harness import __version__, console
from harness.builder.cmake import build
from harness.compare import cli as compare_cli
from harness.compare import pr as compare_pr
from harness.errors import HarnessError, SchemaErrors
from harness.history import cli as history_cli
from harness.matrix import cli as matrix_cli
from harness.matrix.cross import Hints, merge_reports
from harness.matrix.spec import load_matrix, registrable
from harness.models import cli as models_cli
from harness.process import interrupts, run_process
from harness.report import resume as resume_
from harness.report.document import Report, render_junit, render_markdown, resolve_latest
from harness.report.document import _table as table
from harness.report.lock import build_lock
from harness.run.result import utc_now
from harness.run.probes import Probes
from harness.run.runner import Context, CriterionFail, prepare
from harness.contract import criteria as C
from harness.contract import gate, inputs, registry
from harness.contract.config import Config, load_config
from harness.contract.criteria import Criterion
from harness.contract.depends import dependency_digests
from harness.contract.project import Project, locate
from harness.contract.validate import MAX_TIMEOUT_S
from harness.tools import clean, fuzz, oracle
from harness.verify import TRUST_ENV, Session, VerifyOptions, default_files, load_criteria, verify

PROG = "harness"  # one name in usage and error lines (`python -m harness`, `kite-harness`)


_COLOURS = {"PASS": "32", "FAIL": "31", "SKIP": "33", "error:": "31"}  # green, red, yellow
_VERDICT = re.compile(r"^(\s*)(PASS|FAIL|SKIP)\b")


def colour_on(stream: Any = None) -> bool:
    """Colour on a terminal, unless NO_COLOR is set to anything (no-color.org)."""
    stream = stream or sys.stderr
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


def paint(msg: str, on: bool) -> str:
    """A console line with its leading verdict (PASS, FAIL, SKIP) in colour when on."""
    if not on:
        return msg
    return _VERDICT.sub(lambda m: f"{m.group(1)}\033[{_COLOURS[m.group(2)]}m{m.group(2)}\033[0m", msg, count=1)


def _err(msg: str) -> None:
    tag = "\033[31merror:\033[0m" if colour_on() else "error:"
    print(f"{PROG}: {tag} {msg}", file=sys.stderr)


def _say(msg: str) -> None:
    print(paint(msg, colour_on()), file=sys.stderr, flush=True)


def _project(args: argparse.Namespace) -> Project:
    """--root, else the nearest project at or above the working directory (as pytest finds its rootdir)."""
    return locate(Path(args.root) if args.root else None)


def _root(args: argparse.Namespace) -> Path:
    return _project(args).root


def _config(args: argparse.Namespace) -> Config:
    project = _project(args)
    return load_config(project.root, inputs.resolve(Path(args.config), "--config") if args.config else project.config)


# ---- subcommands ----------------------------------------------------------------------------

def cmd_build(args: argparse.Namespace) -> int:
    cfg = _config(args)
    names = args.names or [n for n, b in cfg.builds.items() if not b.on_demand]
    for n in names:
        if n not in cfg.builds:
            raise HarnessError(f"unknown build {n!r}; builds in {cfg.path.name}: {', '.join(cfg.builds)}")
    rc = 0
    rows = []
    with build_lock(cfg.root / cfg.build_dir).acquire(utc_now(), sys.argv, wait=_say):
        results = [(n, build(cfg, n, force=args.force, progress=_say)) for n in names]
    for n, r in results:
        rows.append([n, r.engine.status, r.module.status, r.engine.reason or r.module.reason, f"{r.seconds:.1f}"])
        if not r.engine_ok or r.module.status == "failed":
            rc = 1
    _print_table(rows, ["build", "engine", "module", "note", "s"])
    return rc


def _verify_opts(args: argparse.Namespace, cfg: Config, kinds: list[str] | None = None) -> VerifyOptions:
    resume = resume_.folder(getattr(args, "resume", None), Path(args.reports) if args.reports else
                            cfg.root / cfg.reports_dir)
    return VerifyOptions(files=[Path(f) for f in args.files], only=list(args.only or []), kinds=kinds or [],
                         exploratory=args.exploratory, resume=resume, no_build=args.no_build,
                         force_build=getattr(args, "force_build", False),
                         reports_dir=Path(args.reports) if args.reports else None,
                         registry_path=Path(args.registry) if args.registry else None, argv=sys.argv[1:],
                         trust_outside=getattr(args, "trust_outside_criteria", False)
                         or os.environ.get(TRUST_ENV) == "1", strict=getattr(args, "strict", False))


def invocation() -> str:
    """The harness as the user ran it, as a command that runs as printed here: `kite-harness`, or
    `python3 -m harness` (the interpreter by name when that name finds it on PATH, else by path)."""
    def runnable(path: str) -> str:
        found = shutil.which(Path(path).name)
        if found and os.path.abspath(found) == os.path.abspath(path):
            return Path(path).name
        rel = os.path.relpath(path)
        return shlex.quote(rel if not rel.startswith("..") and os.sep in rel else os.path.abspath(path))

    if Path(sys.argv[0]).name.startswith("kite-harness"):
        return runnable(sys.argv[0])
    return f"{runnable(sys.executable)} -m harness"


def _hints(root: Path) -> Hints:
    """Hints in the form the user ran the harness, from the folder they ran it in."""
    here = Path.cwd()
    command = invocation()
    if here.resolve() != root.resolve():
        command += f" --root {shlex.quote(os.path.relpath(root, here))}"
    return Hints(command, here)


def _hint_opts(opts: VerifyOptions, cfg: Config) -> VerifyOptions:
    """Hints in the form the user ran the harness, from the folder they ran it in."""
    hints = _hints(cfg.root)
    opts.command, opts.here = hints.command, hints.here
    return opts


def cmd_verify(args: argparse.Namespace) -> int:
    cfg = _config(args)
    return verify(cfg, _hint_opts(_verify_opts(args, cfg), cfg), _say)


def cmd_ab(args: argparse.Namespace) -> int:
    cfg = _config(args)
    crits = load_criteria(cfg, [Path(f) for f in args.files] or default_files(cfg))
    ab = [c.id for c in crits if c.kind == "ab_timing"]
    if not args.only:
        raise HarnessError(f"name the A/B criterion: {_hint_opts(VerifyOptions(), cfg).command} ab ID "
                           f"(A/B criteria: {', '.join(ab) or 'none'})")
    for i in args.only:
        if i not in ab:
            raise HarnessError(f"{i!r} is not an ab_timing criterion; A/B criteria: {', '.join(ab) or 'none'}")
    args.resume = None
    return verify(cfg, _hint_opts(_verify_opts(args, cfg), cfg), _say)


def load_registrable(cfg: Config, files: list[Path]) -> list[Any]:
    """Criteria of criteria files, and the cross-entry criteria of a build-matrix file
    (a YAML mapping with `entries:` and `cross:`)."""
    out: list[Any] = []
    plain = []
    for f in files:
        try:
            doc = yaml.safe_load(inputs.read_text(f, inputs.MAX_CRITERIA))
        except (OSError, HarnessError, yaml.YAMLError):
            doc = None  # load_criteria reports it with file and line
        if isinstance(doc, dict) and "entries" in doc and "cross" in doc and "criteria" not in doc:
            root = Path(cfg.root).resolve()
            mx = load_matrix(f.resolve(), root)
            rel = str(f.resolve().relative_to(root)) if f.resolve().is_relative_to(root) else str(f)
            out += registrable(mx, rel)
        else:
            plain.append(f)
    if plain:
        out = load_criteria(cfg, plain) + out
    return out


def cmd_register(args: argparse.Namespace) -> int:
    cfg = _config(args)
    reg_path = Path(args.registry) if args.registry else cfg.root / "regressions" / "registry.lock"
    if args.withdraw:
        if args.files or args.only or args.amend:
            raise HarnessError("--withdraw ID --reason TEXT takes no criteria files, --only or --amend")
        with registry.writing(reg_path):  # read, check and append with no other `register` in between
            lines = registry.withdrawal(gate.load(cfg.root, reg_path), args.withdraw, args.reason)
            registry.append(reg_path, lines)
        for e, _, reason in lines:
            print(f"withdrew   {e.id}  ({e.file}; {reason})")
        return 0
    if not args.files:
        raise HarnessError("name the criteria file(s) to register (or --withdraw ID --reason TEXT)")
    crits = load_registrable(cfg, [Path(f) for f in args.files])
    if args.only:
        missing = [i for i in args.only if i not in {c.id for c in crits}]
        if missing:
            raise HarnessError(f"--only: {', '.join(missing)} not in the given file(s)")
        crits = [c for c in crits if c.id in args.only]
    amend = list(args.amend or [])
    unknown = [a for a in amend if a not in {c.id for c in crits}]
    if unknown:
        raise HarnessError(f"--amend: {', '.join(unknown)} not in the given file(s)")
    if amend and not args.reason:
        raise HarnessError("--amend needs --reason TEXT (the reason is kept in the registry and shown in reports)")
    deps = {c.id: dependency_digests(cfg, c) for c in crits if isinstance(c, Criterion)}
    with registry.writing(reg_path):  # read, check and append with no other `register` in between
        entries = gate.load(cfg.root, reg_path)
        plan = registry.plan(entries, crits, amend, args.reason, deps, root=cfg.root)
        for c, why in plan.refused + plan.unfit:
            _err(f"{c.file}:{c.line}: {c.id}: refused: {why}")
        if plan.refused:
            files = " ".join(shlex.quote(f) for f in args.files)
            ids = " ".join(c.id for c, _ in plan.refused)
            _err(f"nothing registered; if the changes are intended: {_hint_opts(VerifyOptions(), cfg).command} "
                 f"register {files} --amend {ids} "
                 "--reason 'what changed and why'")
            return 2
        if plan.unfit:
            _err("nothing registered: a workload whose budget cannot show a change could never fail its speed "
                 "claim (docs/COMPARE.md)")
            return 2
        events = ([(c, "register", args.reason or "") for c in plan.new]
                  + [(c, "amend", args.reason) for c in plan.amended])
        if events or plan.depends:
            registry.append(reg_path, events, deps=[(c, deps[c.id]) for c in plan.depends])
    for c in plan.new:
        print(f"registered {c.id}  {c.digest}")
    for c in plan.amended:
        print(f"amended    {c.id}  {c.digest}  ({args.reason})")
    for c in plan.unchanged:
        print(f"unchanged  {c.id}" + ("  (dependencies recorded)" if c in plan.depends else ""))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    d = Path(args.dir) if args.dir else None
    if d is None:
        cfg = _config(args)
        d = resolve_latest(Path(args.reports) if args.reports else cfg.root / cfg.reports_dir)
        if d is None:
            raise HarnessError(f"no report yet (reports/latest missing); run `{_hint_opts(VerifyOptions(), cfg).command} "
                               "verify`")
    try:
        rep = Report.load(d)
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read {d}/report.json: {e}") from None
    if args.format == "json":
        print(json.dumps(rep.doc, indent=2))
    elif args.format == "junit":
        print(render_junit(rep.doc), end="")
    else:
        print(render_markdown(rep.doc), end="")
    return 1 if rep.summarize()["failed"] else 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run the engine once through the harness (placeholders, env, layout) and show how it ended."""
    cfg = _config(args)
    if args.build not in cfg.builds:
        raise HarnessError(f"unknown build {args.build!r}; builds: {', '.join(cfg.builds)}")
    env = {}
    for kv in args.env or []:
        if "=" not in kv:
            raise HarnessError(f"--env wants NAME=VALUE, not {kv!r}")
        k, v = kv.split("=", 1)
        env[k] = v
    if args.timeout is not None and not 0 < args.timeout <= MAX_TIMEOUT_S:
        raise HarnessError(f"--timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} s, not {args.timeout:g}")
    argv = list(args.engine_args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise HarnessError("give the engine arguments after --, e.g. harness run -- info --json")
    known = set(C.PLACEHOLDERS) | {C.ENV_PREFIX + role for role in cfg.env_names}
    unknown = [name for text in [*argv, *env.values()] for name in C.placeholders_in(text) if name not in known]
    if unknown:
        raise HarnessError(f"unknown placeholder {{{unknown[0]}}}; known: {', '.join(sorted(known))} "
                           "(write {{ and }} for literal braces)")
    sess = Session(cfg, VerifyOptions(no_build=args.no_build), _say)
    with tempfile.TemporaryDirectory(prefix="kite-run-") as tmp:
        ctx = Context(cfg=cfg, report_dir=Path(tmp), probes=Probes(gpu_info=lambda: None),
                      ensure_build=sess.ensure_build, model_path=sess.model_path, progress=_say)
        var = C.Variant(name="run", build=args.build, layout=args.layout, env=env, args=argv)
        crit = C.Criterion(id="run", title="run", kind="run", file="-", line=0, digest="", raw={},
                           spec=C.RunSpec([]),
                           model={"recipe": args.model, "qtype": args.qtype} if args.model else None)
        try:
            p = prepare(ctx, crit, var, Path(tmp) / "work", {})
        except CriterionFail as e:
            raise HarnessError(e.reason) from None
        timeout = cfg.timeout("run", 180) if args.timeout is None else args.timeout
        r = run_process(p.argv, p.env, timeout=timeout, log_prefix=Path(tmp) / "out")
        for stream, path in ((sys.stdout, r.stdout_path), (sys.stderr, r.stderr_path)):
            stream.flush()  # the whole output, copied from its file: never all of it in memory
            with open(str(path), "rb") as f:
                shutil.copyfileobj(f, stream.buffer)
            stream.buffer.flush()
    rss = f"{r.peak_rss_mb:.1f} MiB" if r.peak_rss_mb else "n/a (too short to sample)"
    _say(f"[harness] {r.describe()}; wall {r.wall_s * 1000:.1f} ms, cpu {(r.cpu_s or 0) * 1000:.1f} ms, peak RSS {rss}")
    return 0 if r.ok else 1


def cmd_models(args: argparse.Namespace) -> int:
    return int(models_cli.run(args) or 0)


def cmd_oracle(args: argparse.Namespace) -> int:
    """The engine against transformers on random Qwen3.5 configs (needs torch and transformers)."""
    for mod in ("torch", "transformers"):
        try:
            __import__(mod)  # lazy: optional heavy dependencies, present only in `nox -s oracle`
        except ImportError:
            raise HarnessError(f"the oracle needs {mod} (optional dependency): use `nox -s oracle`, "
                               "which installs torch (CPU) and transformers") from None
    if args.kite:
        kite = Path(args.kite)
    else:
        r = build(_config(args), args.build, progress=_say)
        if not r.engine_ok:
            raise HarnessError(f"engine build {args.build!r} failed: {r.engine.reason}")
        kite = Path(r.engine_path)
    if not kite.is_file():
        raise HarnessError(f"no engine at {kite}")
    configs = oracle.random_configs(args.configs, args.seed)
    results = oracle.run_oracle(configs, kite, Path(args.keep) if args.keep else None, args.threads, _say)
    rows, headers = oracle.table_rows(results)
    _print_table(rows, headers)
    for r in results:
        for f in r.failures:
            print(f"config {r.config.index}: FAIL {f}")
    if args.json:
        Path(args.json).write_text(json.dumps(oracle.to_json(results), indent=1) + "\n")
    bad = sum(not r.ok for r in results)
    print(f"oracle: {len(results) - bad} of {len(results)} configs within the bars (seed {args.seed})")
    return 1 if bad else 0


def _print_table(rows: list[list[Any]], headers: list[str]) -> None:
    print(table(rows, headers))


def cmd_matrix(args: argparse.Namespace) -> int:
    root = _root(args)
    return matrix_cli.run(args, root, _hints(root))


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge report folders (e.g. one per matrix entry or machine) into one report."""
    root = _root(args)
    out = args.out or root / "reports" / ("merged-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    rc, _ = merge_reports(args.dirs, out, root=root, matrix_path=args.matrix, say=_say, hints=_hints(root))
    if args.format != "none":
        fname = {"md": "report.md", "json": "report.json", "junit": "junit.xml"}[args.format]
        print((out / fname).read_text(encoding="utf-8"), end="")
    return rc


def cmd_history(args: argparse.Namespace) -> int:
    return history_cli.run(args)


def cmd_compare(args: argparse.Namespace) -> int:
    return compare_cli.run_compare_cmd(args, _config(args))


def cmd_bisect(args: argparse.Namespace) -> int:
    return compare_cli.run_bisect_cmd(args, _config(args))


def cmd_clean(args: argparse.Namespace) -> int:
    return clean.run_clean(args, _config(args))


def cmd_pr(args: argparse.Namespace) -> int:
    if args.pr_cmd == "comment":
        return compare_pr.run_pr_comment(args)
    return compare_pr.run_pr_compare(args, _config(args))


def cmd_fuzz(args: argparse.Namespace) -> int:
    """libFuzzer over the GGUF reader and the model loader; --sanitizers for the ASan/valgrind runs."""
    return int(fuzz.run(args, _root(args)))


EXIT_VERDICTS = "exit status: 0 every criterion passed (skips allowed), 1 a criterion failed, 2 usage or harness error"


def _add_verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE", help="criteria files (default: regressions/*.yaml)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these criteria")
    p.add_argument("--exploratory", action="store_true",
                   help="also run criteria that are not (or not as) registered; labelled 'not pre-registered'")
    p.add_argument("--resume", nargs="?", const="latest", metavar="DIR",
                   help="continue an interrupted report (default: reports/latest)")
    p.add_argument("--no-build", action="store_true", help="use what is already built; never run CMake")
    p.add_argument("--force-build", action="store_true", help="re-run CMake even when nothing changed")
    p.add_argument("--reports", metavar="DIR", help="reports folder (default: reports/)")
    p.add_argument("--registry", metavar="FILE", help="registry (default: regressions/registry.lock)")
    p.add_argument("--strict", action="store_true",
                   help="FAIL criteria whose registration is not committed yet (needs a git checkout)")
    p.add_argument("--trust-outside-criteria", action="store_true",
                   help="run `wrapper` and `place` of criteria files outside the repository (review them first; "
                        "or set KITE_TRUST_OUTSIDE_CRITERIA=1)")


def _sub(sub: Any, name: str, help: str, epilog: str, fn: Any, description: str | None = None
         ) -> argparse.ArgumentParser:
    """One subcommand: its help line, its description, and its exit statuses in the epilog."""
    p = sub.add_parser(name, help=help, description=description or help[:1].upper() + help[1:] + ".",
                       epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(fn=fn)
    return p


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="kite harness: build the engine and its CUDA module, run "
                                "pre-registered criteria, report.",
                                epilog="exit status: 0 passed (skips allowed), 1 a verdict failed or a report "
                                       "fails, 2 usage or harness error; `%(prog)s COMMAND --help` for each command")
    p.add_argument("--version", action="version", version=f"kite-harness {__version__}",
                   help="print the version and exit")
    p.add_argument("--root", metavar="DIR", help="project folder (default: the nearest folder at or above the "
                   "working directory with configs/engine.yaml or a [tool.kite] table in pyproject.toml)")
    p.add_argument("--config", metavar="FILE",
                   help="engine configuration (default: [tool.kite] config, else configs/engine.yaml)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", help="one of:")
    sub.required = True

    b = _sub(sub, "build", "build the engine (host cc) and the CUDA module (nvcc), separately",
             "exit status: 0 built or up to date, 1 a build failed, 2 usage or harness error", cmd_build)
    b.add_argument("names", nargs="*", metavar="BUILD", help="builds from configs/engine.yaml (default: all but those marked on_demand)")
    b.add_argument("--force", action="store_true", help="re-run CMake even when nothing changed")

    v = _sub(sub, "verify", "run criteria (default: every file under regressions/) and write a report",
             EXIT_VERDICTS + " (130: interrupted; continue with --resume)", cmd_verify)
    _add_verify_args(v)

    r = _sub(sub, "run", "run the engine once through the harness: run [opts] -- ARGS",
             "exit status: 0 the engine exited 0, 1 it did not, 2 usage or harness error", cmd_run)
    r.add_argument("--build", default="default", help="build from configs/engine.yaml (default: default)")
    r.add_argument("--layout", default="normal", choices=["normal", "engine_only"],
                   help="engine_only: the engine copied alone into a folder (default: normal)")
    r.add_argument("--env", action="append", metavar="NAME=VALUE", help="environment for the engine (repeatable)")
    r.add_argument("--model", metavar="RECIPE", help="model recipe for {model} (default: the configured default)")
    r.add_argument("--qtype", metavar="TYPE", help="tensor type of the --model recipe (default: the recipe's)")
    r.add_argument("--timeout", type=float, metavar="S", help="seconds (default: timeouts.run of engine.yaml)")
    r.add_argument("--no-build", action="store_true", help="use what is already built; never run CMake")
    r.add_argument("engine_args", nargs=argparse.REMAINDER, help="-- then the engine's arguments ({model} etc. ok)")

    a = _sub(sub, "ab", "run A/B timing criteria by id: ab ID [--file FILE]", EXIT_VERDICTS, cmd_ab)
    a.add_argument("only", nargs="*", metavar="ID", help="the ab_timing criteria to run")
    a.add_argument("--file", dest="files", action="append", default=[], metavar="FILE",
                   help="criteria file (repeatable; default: regressions/*.yaml)")
    a.add_argument("--exploratory", action="store_true", help="also run criteria that are not (or not as) registered")
    a.add_argument("--no-build", action="store_true", help="use what is already built; never run CMake")
    a.add_argument("--reports", metavar="DIR", help="reports folder (default: reports/)")
    a.add_argument("--registry", metavar="FILE", help="registry (default: regressions/registry.lock)")

    g = _sub(sub, "register", "record criteria digests in regressions/registry.lock (append-only)",
             "exit status: 0 registered (or unchanged), 2 refused (a changed criterion needs --amend; a compare "
             "workload's budget allows too few looks for a speed verdict) or "
             "usage error", cmd_register)
    g.add_argument("files", nargs="*", metavar="FILE", help="criteria files, or configs/matrix.yaml (its cross:)")
    g.add_argument("--only", nargs="+", metavar="ID", help="register only these ids")
    g.add_argument("--amend", action="extend", nargs="+", metavar="ID", help="accept changed criteria (needs --reason)")
    g.add_argument("--withdraw", action="append", metavar="ID",
                   help="retire a registered id, with --reason (kept in the registry, shown in reports; "
                        "ids are never reused)")
    g.add_argument("--reason", help="why (kept in the registry, shown in reports)")
    g.add_argument("--registry", metavar="FILE", help="registry (default: regressions/registry.lock)")

    rp = _sub(sub, "report", "print a report (default: reports/latest) as Markdown, JSON or JUnit",
              "exit status: 0 the report has no failure, 1 it has one, 2 no or unreadable report", cmd_report)
    rp.add_argument("dir", nargs="?", metavar="DIR", help="report folder (default: reports/latest)")
    rp.add_argument("--format", choices=["md", "json", "junit"], default="md", help="output format (default md)")
    rp.add_argument("--reports", metavar="DIR", help="reports folder (default: reports/)")

    m = _sub(sub, "models", "generate or convert GGUF models", "exit status: 0 done, 2 usage error or bad input "
             "(unknown recipe, unreadable checkpoint)", cmd_models, models_cli.DESCRIPTION)
    models_cli.add_arguments(m)

    o = _sub(sub, "oracle", "the engine against transformers on random Qwen3.5 configs "
             "(needs torch and transformers: nox -s oracle)",
             "exit status: 0 every config within the bars, 1 one is not, 2 usage or harness error", cmd_oracle)
    o.add_argument("--configs", type=int, default=5, metavar="N", help="number of random configs (default 5)")
    o.add_argument("--seed", type=int, default=0, help="seed of the configs and weights (default 0)")
    o.add_argument("--kite", metavar="PATH", help="engine binary (default: build --build and use it)")
    o.add_argument("--build", default="stub", help="build from configs/engine.yaml when --kite is not given "
                                                   "(default: stub)")
    o.add_argument("--threads", type=int, default=1, help="engine and torch threads (default 1)")
    o.add_argument("--keep", metavar="DIR", help="keep checkpoints, GGUFs and dumps here")
    o.add_argument("--json", metavar="FILE", help="also write the results as JSON")

    mx = _sub(sub, "matrix", "build matrix: toolchains, runners, module builds (configs/matrix.yaml)",
              matrix_cli.EXIT, cmd_matrix, matrix_cli.DESCRIPTION)
    matrix_cli.add_arguments(mx)

    mg = _sub(sub, "merge", "merge report folders (one per matrix entry or machine) into one report",
              "exit status: 0 the merged report is complete with no failure, 1 it has a failure or is partial (a part "
              "interrupted, narrowed or missing registered ids), 2 unreadable input or reports of different commits", cmd_merge)
    mg.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="report folders or report.json files")
    mg.add_argument("-o", "--out", type=Path, metavar="DIR", help="output folder (default reports/merged-<time>)")
    mg.add_argument("--matrix", type=Path, metavar="FILE",
                    help="matrix file for the cross criteria (default configs/matrix.yaml)")
    mg.add_argument("--format", choices=("none", "md", "json", "junit"), default="none",
                    help="also print the merged report in this format (default none)")

    fz = _sub(sub, "fuzz", "fuzz the GGUF reader and loader (libFuzzer, clang), or --sanitizers",
              "exit status: 0 no finding, 1 a finding or a failed sanitizer run, 2 usage or harness error",
              cmd_fuzz, fuzz.DESCRIPTION)
    fuzz.add_arguments(fz)

    hi = _sub(sub, "history", "keep reports by commit; change points, pictures, a static page",
              history_cli.EXIT, cmd_history, history_cli.DESCRIPTION)
    history_cli.add_arguments(hi)
    compare_cli.add_compare_arguments(_sub(sub, "compare", compare_cli.COMPARE_HELP, compare_cli.COMPARE_EXIT,
                                           cmd_compare))
    compare_cli.add_bisect_arguments(_sub(sub, "bisect", compare_cli.BISECT_HELP, compare_cli.BISECT_EXIT, cmd_bisect))
    compare_pr.add_arguments(_sub(sub, "pr", compare_pr.HELP, compare_pr.EXIT, cmd_pr))
    clean.add_arguments(_sub(sub, "clean", clean.HELP, clean.EXIT, cmd_clean, clean.__doc__))
    return p


def main(argv: list[str] | None = None) -> int:
    with console.guarded():  # a closed pipe or full disk on the console never changes the exit status
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = make_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        with interrupts():
            return int(args.fn(args))
    except SchemaErrors as e:
        criteria = type(e) is SchemaErrors  # ConfigError, MatrixError: a configuration file
        if len(e.messages) == 1 and not criteria:
            _err(e.messages[0])
        else:
            for m in e.messages:
                print(m, file=sys.stderr)
            n = len(e.messages)
            _err(f"{n} problem{'s' if n != 1 else ''} in the {'criteria' if criteria else 'configuration'}")
        return 2
    except HarnessError as e:
        _err(str(e))
        return 2
    except KeyboardInterrupt as e:
        _err("interrupted")
        return 128 + getattr(e, "signum", 2)
    except Exception as e:  # noqa: BLE001 - never a traceback at the top level
        if os.environ.get("HARNESS_DEBUG"):
            raise
        _err(f"internal error: {type(e).__name__}: {e} (set HARNESS_DEBUG=1 for the traceback)")
        return 2
