"""What verify makes of its builds: which builds the criteria left to run need, the one line
that points a criterion at its failed build, and a build's record for the report (paths relative
to the project)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.builder.cmake import BuildResult
from harness.contract.config import Config
from harness.contract.criteria import Criterion


def builds_needed(cfg: Config, crits: list[Criterion]) -> list[str]:
    """The builds these criteria need, in order of first use: their variants' builds and, for
    `requires: gpu` / `no_gpu`, the build whose `info` answers the GPU probe."""
    out: list[str] = []
    for c in crits:
        names = list(c.builds())
        if {"gpu", "no_gpu"} & set(c.requires) and cfg.gpu.build in cfg.builds:
            names.append(cfg.gpu.build)
        out += [n for n in names if n not in out]
    return out


def build_failure(name: str, b: BuildResult, needs_gpu: bool) -> str | None:
    """One line that points a criterion at its failed build (the errors themselves are reported
    once, with the build), or None when what the criterion needs was built."""
    parts = [("engine", b.engine), *((Path(k).name, v) for k, v in b.extras.items())]
    if needs_gpu:
        parts.append(("module", b.module))
    for label, part in parts:
        if part.status == "failed":
            first = part.errors[0] if part.errors else part.reason
            more = f" (+{len(part.errors) - 1} more)" if len(part.errors) > 1 else ""
            log = f"; log: logs/build/{name}/{label}.log" if part.log else ""
            return f"build {name} failed ({label}): {first}{more} [reported once, with the build{log}]"
    return None


def failed_builds(builds: dict[str, BuildResult]) -> list[str]:
    """Names of the builds with a part that failed to build."""
    return [n for n, b in builds.items()
            if any(p.status == "failed" for p in (b.engine, b.module, *b.extras.values()))]


def relative(cfg: Config, path: str | Path | None) -> str | None:
    """path relative to the project's root when it lies under it (reports name project paths so)."""
    if path is None:
        return None
    p = Path(path)
    try:
        return p.relative_to(cfg.root).as_posix() if p.is_absolute() else str(p)
    except ValueError:
        return str(p)


def build_json(cfg: Config, b: BuildResult) -> dict[str, Any]:
    """A build's record for the report, its paths relative to the project."""
    doc = b.to_json()
    for key in ("bin_dir", "engine_path", "module_path"):
        doc[key] = relative(cfg, doc[key])
    for part in [doc["engine"], doc["module"], *doc["extras"].values()]:
        part["log"] = relative(cfg, part.get("log"))
    return doc
