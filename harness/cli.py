"""Command line: `python -m harness SUBCOMMAND ...`. Exit status 0 all passed (skips allowed),
1 some failed, 2 usage or configuration error. Never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, SchemaErrors

def _err(msg: str) -> None:
    print(f"harness: error: {msg}", file=sys.stderr)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _project(args: argparse.Namespace):  # -> Project: --root, else the nearest above the working directory
    from harness.spec.project import locate

    return locate(Path(args.root) if args.root else None)


def _config(args: argparse.Namespace):  # -> Config (lazy import keeps --help fast)
    from harness.spec.config import load_config

    project = _project(args)
    return load_config(project.root, Path(args.config).resolve() if args.config else project.config)


# ---- subcommands ----------------------------------------------------------------------------

def cmd_build(args: argparse.Namespace) -> int:
    from harness.build.cmake import build

    cfg = _config(args)
    names = args.names or [n for n, b in cfg.builds.items() if not b.on_demand]
    for n in names:
        if n not in cfg.builds:
            raise HarnessError(f"unknown build {n!r}; builds in {cfg.path.name}: {', '.join(cfg.builds)}")
    rc = 0
    rows = []
    for n in names:
        r = build(cfg, n, force=args.force, progress=_say)
        rows.append([n, r.engine.status, r.module.status, r.engine.reason or r.module.reason, f"{r.seconds:.1f}"])
        if not r.engine_ok or r.module.status == "failed":
            rc = 1
    _print_table(rows, ["build", "engine", "module", "note", "s"])
    return rc


def _verify_opts(args: argparse.Namespace, cfg: Any, kinds: list[str] | None = None):
    from harness.report.document import resolve_latest
    from harness.verify import TRUST_ENV, VerifyOptions

    resume = None
    if getattr(args, "resume", None) is not None:
        if args.resume == "latest":
            resume = resolve_latest(Path(args.reports) if args.reports else cfg.root / cfg.reports_dir)
            if resume is None:
                raise HarnessError("--resume: no previous report (reports/latest) to continue")
        else:
            resume = Path(args.resume)
    return VerifyOptions(files=[Path(f) for f in args.files], only=list(args.only or []), kinds=kinds or [],
                         exploratory=args.exploratory, resume=resume, no_build=args.no_build,
                         force_build=getattr(args, "force_build", False),
                         reports_dir=Path(args.reports) if args.reports else None,
                         registry_path=Path(args.registry) if args.registry else None, argv=sys.argv[1:],
                         trust_outside=getattr(args, "trust_outside_criteria", False)
                         or os.environ.get(TRUST_ENV) == "1", strict=getattr(args, "strict", False))


def cmd_verify(args: argparse.Namespace) -> int:
    from harness.verify import verify

    cfg = _config(args)
    return verify(cfg, _verify_opts(args, cfg), _say)


def cmd_ab(args: argparse.Namespace) -> int:
    from harness.verify import load_criteria, default_files, verify

    cfg = _config(args)
    crits = load_criteria(cfg, [Path(f) for f in args.files] or default_files(cfg))
    ab = [c.id for c in crits if c.kind == "ab_timing"]
    if not args.only:
        raise HarnessError(f"name the A/B criterion: harness ab ID (A/B criteria: {', '.join(ab) or 'none'})")
    for i in args.only:
        if i not in ab:
            raise HarnessError(f"{i!r} is not an ab_timing criterion; A/B criteria: {', '.join(ab) or 'none'}")
    args.resume = None
    return verify(cfg, _verify_opts(args, cfg), _say)


def load_registrable(cfg, files: list[Path]) -> list:
    """Criteria of criteria files, and the cross-entry criteria of a build-matrix file
    (a YAML mapping with `entries:` and `cross:`)."""
    import yaml

    from harness.spec import inputs
    from harness.verify import load_criteria

    out: list = []
    plain = []
    for f in files:
        try:
            doc = yaml.safe_load(inputs.read_text(f, inputs.MAX_CRITERIA))
        except (OSError, HarnessError, yaml.YAMLError):
            doc = None  # load_criteria reports it with file and line
        if isinstance(doc, dict) and "entries" in doc and "cross" in doc and "criteria" not in doc:
            from harness.matrix import matrix

            root = Path(cfg.root).resolve()
            mx = matrix.load_matrix(f.resolve(), root)
            rel = str(f.resolve().relative_to(root)) if f.resolve().is_relative_to(root) else str(f)
            out += matrix.registrable(mx, rel)
        else:
            plain.append(f)
    if plain:
        out = load_criteria(cfg, plain) + out
    return out


def cmd_register(args: argparse.Namespace) -> int:
    from harness.spec import registry
    from harness.spec.criteria import Criterion
    from harness.spec.depends import dependency_digests

    cfg = _config(args)
    reg_path = Path(args.registry) if args.registry else cfg.root / "regressions" / "registry.lock"
    crits = load_registrable(cfg, [Path(f) for f in args.files])
    if args.only:
        crits = [c for c in crits if c.id in args.only]
    amend = list(args.amend or [])
    unknown = [a for a in amend if a not in {c.id for c in crits}]
    if unknown:
        raise HarnessError(f"--amend: {', '.join(unknown)} not in the given file(s)")
    if amend and not args.reason:
        raise HarnessError("--amend needs --reason TEXT (the reason is kept in the registry and shown in reports)")
    entries = registry.load(reg_path)
    deps = {c.id: dependency_digests(cfg, c) for c in crits if isinstance(c, Criterion)}
    plan = registry.plan(entries, crits, amend, args.reason, deps)
    for c, why in plan.refused:
        _err(f"{c.file}:{c.line}: {c.id}: refused: {why}")
    if plan.refused:
        _err("nothing registered")
        return 2
    events = [(c, "register", args.reason or "") for c in plan.new] + [(c, "amend", args.reason) for c in plan.amended]
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
    from harness.report.document import Report, render_junit, render_markdown, resolve_latest

    d = Path(args.dir) if args.dir else None
    if d is None:
        cfg = _config(args)
        d = resolve_latest(Path(args.reports) if args.reports else cfg.root / cfg.reports_dir)
        if d is None:
            raise HarnessError("no report yet (reports/latest missing); run `harness verify`")
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
    import shutil
    import tempfile

    from harness.spec import criteria as C
    from harness.run.probes import Probes
    from harness.run.runner import Context, CriterionFail, prepare
    from harness.verify import Session, VerifyOptions
    from harness.process import run_process

    cfg = _config(args)
    if args.build not in cfg.builds:
        raise HarnessError(f"unknown build {args.build!r}; builds: {', '.join(cfg.builds)}")
    env = {}
    for kv in args.env or []:
        if "=" not in kv:
            raise HarnessError(f"--env wants NAME=VALUE, not {kv!r}")
        k, v = kv.split("=", 1)
        env[k] = v
    argv = list(args.engine_args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise HarnessError("give the engine arguments after --, e.g. harness run -- info --json")
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
        r = run_process(p.argv, p.env, timeout=args.timeout or cfg.timeout("run", 180), log_prefix=Path(tmp) / "out")
        for stream, path in ((sys.stdout, r.stdout_path), (sys.stderr, r.stderr_path)):
            stream.flush()  # the whole output, copied from its file: never all of it in memory
            with open(str(path), "rb") as f:
                shutil.copyfileobj(f, stream.buffer)
            stream.buffer.flush()
    rss = f"{r.peak_rss_mb:.1f} MiB" if r.peak_rss_mb else "n/a (too short to sample)"
    _say(f"[harness] {r.describe()}; wall {r.wall_s * 1000:.1f} ms, cpu {(r.cpu_s or 0) * 1000:.1f} ms, peak RSS {rss}")
    return 0 if r.ok else 1


def cmd_models(args: argparse.Namespace) -> int:
    try:
        from harness.models import cli as models_cli
    except ImportError as e:
        raise HarnessError(f"the model generator (harness.models) is not available: {e}") from None
    if not hasattr(models_cli, "run") or hasattr(args, "rest") and not hasattr(models_cli, "add_arguments"):
        raise HarnessError("harness.models.cli lacks add_arguments/run")
    return int(models_cli.run(args) or 0)


def cmd_oracle(args: argparse.Namespace) -> int:
    """The engine against transformers on random Qwen3.5 configs (needs torch and transformers)."""
    try:
        from harness.tools import oracle
    except ImportError as e:
        raise HarnessError(f"the oracle is not available: {e}") from None
    for mod in ("torch", "transformers"):
        try:
            __import__(mod)
        except ImportError:
            raise HarnessError(f"the oracle needs {mod} (optional dependency): use `nox -s oracle`, "
                               "which installs torch (CPU) and transformers") from None
    if args.kite:
        kite = Path(args.kite)
    else:
        from harness.build.cmake import build

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


def cmd_matrix(args: argparse.Namespace) -> int:
    """The build matrix (configs/matrix.yaml); harness/matrix/matrix.py parses its own arguments."""
    from harness.matrix import matrix

    return int(matrix.main(list(args.rest), _project(args).root))


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge report folders (e.g. one per matrix entry or machine) into one report."""
    from harness.report import merge

    return int(merge.main(list(args.rest)))


def cmd_fuzz(args: argparse.Namespace) -> int:
    """libFuzzer over the GGUF reader and the model loader; --sanitizers for the ASan/valgrind runs."""
    from harness.tools import fuzz

    return int(fuzz.main(list(args.rest), _project(args).root))


def _print_table(rows: list[list[Any]], headers: list[str]) -> None:
    from harness.report.document import _table

    print(_table(rows, headers))


def _add_verify_args(p: argparse.ArgumentParser, resume: bool = True) -> None:
    p.add_argument("files", nargs="*", help="criteria files (default: regressions/*.yaml)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these criteria")
    p.add_argument("--exploratory", action="store_true",
                   help="also run criteria that are not (or not as) registered; labelled 'not pre-registered'")
    if resume:
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


def make_parser(with_models: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description="kite harness: build, verify pre-registered criteria, "
                                                             "report.")
    p.add_argument("--root", help="project folder (default: the nearest folder at or above the working "
                                  "directory with configs/engine.yaml or a [tool.kite] table in pyproject.toml)")
    p.add_argument("--config", help="engine configuration (default: [tool.kite] config, else configs/engine.yaml)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    b = sub.add_parser("build", help="build the engine (host cc) and the CUDA module (nvcc), separately")
    b.add_argument("names", nargs="*", help="builds from configs/engine.yaml (default: all but those marked on_demand)")
    b.add_argument("--force", action="store_true", help="re-run CMake even when nothing changed")
    b.set_defaults(fn=cmd_build)

    v = sub.add_parser("verify", help="run criteria (default: every file under regressions/) and write a report")
    _add_verify_args(v)
    v.set_defaults(fn=cmd_verify)

    r = sub.add_parser("run", help="run the engine once through the harness: harness run [opts] -- ARGS")
    r.add_argument("--build", default="default")
    r.add_argument("--layout", default="normal", choices=["normal", "engine_only"])
    r.add_argument("--env", action="append", metavar="NAME=VALUE")
    r.add_argument("--model", help="model recipe for {model} (default: the configured default)")
    r.add_argument("--qtype")
    r.add_argument("--timeout", type=float)
    r.add_argument("--no-build", action="store_true")
    r.add_argument("engine_args", nargs=argparse.REMAINDER, help="-- then the engine's arguments ({model} etc. ok)")
    r.set_defaults(fn=cmd_run)

    a = sub.add_parser("ab", help="run A/B timing criteria by id: harness ab ID [FILE...]")
    a.add_argument("only", nargs="*", metavar="ID")
    a.add_argument("--file", dest="files", action="append", default=[], help="criteria file (default: all)")
    a.add_argument("--exploratory", action="store_true")
    a.add_argument("--no-build", action="store_true")
    a.add_argument("--reports", metavar="DIR")
    a.add_argument("--registry", metavar="FILE")
    a.set_defaults(fn=cmd_ab)

    g = sub.add_parser("register", help="record criteria digests in regressions/registry.lock (append-only)")
    g.add_argument("files", nargs="+")
    g.add_argument("--only", nargs="+", metavar="ID", help="register only these ids")
    g.add_argument("--amend", action="append", metavar="ID", help="accept a changed criterion (needs --reason)")
    g.add_argument("--reason", help="why (kept in the registry, shown in reports)")
    g.add_argument("--registry", metavar="FILE")
    g.set_defaults(fn=cmd_register)

    rp = sub.add_parser("report", help="print a report (default: reports/latest) as Markdown, JSON or JUnit")
    rp.add_argument("dir", nargs="?")
    rp.add_argument("--format", choices=["md", "json", "junit"], default="md")
    rp.add_argument("--reports", metavar="DIR")
    rp.set_defaults(fn=cmd_report)

    m = sub.add_parser("models", help="generate or convert GGUF models (harness.models)")
    added = False
    if with_models:  # imported only when the subcommand is `models`: keeps start-up fast
        try:
            from harness.models import cli as models_cli

            models_cli.add_arguments(m)
            added = True
        except Exception:  # noqa: BLE001 - absent or broken generator: cmd_models says why
            pass
    if not added:
        m.add_argument("rest", nargs=argparse.REMAINDER)
    m.set_defaults(fn=cmd_models)

    o = sub.add_parser("oracle", help="the engine against transformers on random Qwen3.5 configs "
                                      "(needs torch and transformers: nox -s oracle)")
    o.add_argument("--configs", type=int, default=5, metavar="N", help="number of random configs (default 5)")
    o.add_argument("--seed", type=int, default=0, help="seed of the configs and weights (default 0)")
    o.add_argument("--kite", metavar="PATH", help="engine binary (default: build --build and use it)")
    o.add_argument("--build", default="stub", help="build from configs/engine.yaml when --kite is not given "
                                                   "(default: stub)")
    o.add_argument("--threads", type=int, default=1, help="engine and torch threads (default 1)")
    o.add_argument("--keep", metavar="DIR", help="keep checkpoints, GGUFs and dumps here")
    o.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    o.set_defaults(fn=cmd_oracle)

    mx = sub.add_parser("matrix", help="build matrix (configs/matrix.yaml); `harness matrix --help` for more",
                        add_help=False)
    mx.add_argument("rest", nargs=argparse.REMAINDER)
    mx.set_defaults(fn=cmd_matrix)

    mg = sub.add_parser("merge", help="merge report folders into one; `harness merge --help` for more",
                        add_help=False)
    mg.add_argument("rest", nargs=argparse.REMAINDER)
    mg.set_defaults(fn=cmd_merge)

    fz = sub.add_parser("fuzz", help="fuzz the GGUF reader and loader (libFuzzer, clang); "
                                     "`harness fuzz --help` for more", add_help=False)
    fz.add_argument("rest", nargs=argparse.REMAINDER)
    fz.set_defaults(fn=cmd_fuzz)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser(with_models="models" in argv)
    i = 0
    while i < len(argv) and argv[i] in ("--root", "--config"):
        i += 2
    if i < len(argv) and argv[i] in ("matrix", "merge", "fuzz"):  # their own parsers take every argument after
        args = parser.parse_args(argv[: i + 1])
        args.rest = argv[i + 1:]
    else:
        args = parser.parse_args(argv)
    try:
        return int(args.fn(args))
    except SchemaErrors as e:
        for m in e.messages:
            print(m, file=sys.stderr)
        _err(f"{len(e.messages)} problem{'s' if len(e.messages) != 1 else ''} in the criteria")
        return 2
    except HarnessError as e:
        _err(str(e))
        return 2
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # noqa: BLE001 - never a traceback at the top level
        if os.environ.get("HARNESS_DEBUG"):
            raise
        _err(f"internal error: {type(e).__name__}: {e} (set HARNESS_DEBUG=1 for the traceback)")
        return 2
