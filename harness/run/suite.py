"""One criterion from the registry through the runner into a Result: the loop body that `verify`
and the build matrix share, and the model files the criteria run on."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.models import ensure_model
from harness.run.result import Result, utc_now
from harness.run.runner import Context, CriterionFail, evaluate, stop_if_disk_full
from harness.contract import registry
from harness.contract.gate import Gate
from harness.contract.config import Config
from harness.contract.criteria import Criterion


@dataclass
class Judged:
    """How one criterion is judged: the registry gate it must pass, and how its Result is named."""
    gate: Gate
    exploratory: bool
    hint: str | Callable[[Criterion, registry.Status], str]  # what to do about an unregistered criterion
    id_prefix: str = ""  # "<entry>/" in the matrix
    title_prefix: str = ""
    report_root: Path | None = None  # log_dir is relative to it (default: the context's report folder)
    skip: str | None = None  # SKIP every criterion with this reason (e.g. the entry was skipped)
    notes: Callable[[Criterion], list[str]] = lambda c: []  # appended to a FAIL's reason
    fail_details: Callable[[Criterion], dict[str, Any]] = lambda c: {}  # added to a FAIL's details
    reproduce: Callable[[Criterion, bool], str] = lambda c, exploratory: ""  # a FAIL's one-line command
    models: Callable[[], list[str]] = lambda: []  # the model files the criterion ran with
    # a further reason to FAIL without running (e.g. verify --strict: registration not committed)
    refuse: Callable[[Criterion, registry.Status, dict[str, Any]], str | None] = lambda c, st, reg: None


def judge(ctx: Context, c: Criterion, how: Judged, st: registry.Status | None = None, shown: str | None = None,
          registration: dict[str, Any] | None = None) -> Result:
    """Registration status (st, or looked up), then, unless refused or skipped, the runner's
    verdict, as a Result. shown: the registration as reported (default: st.state); registration:
    its provenance, kept in the details."""
    st = st or how.gate.status(c)
    t0 = time.perf_counter()
    exploratory = False
    hint = how.hint(c, st) if callable(how.hint) else how.hint
    refused = registry.refusal(st, how.exploratory, hint) or how.refuse(c, st, registration or {})
    details: dict[str, Any] = {}
    if how.skip is not None:
        verdict, reason = "SKIP", how.skip
    elif refused:
        verdict, reason = "FAIL", refused
    else:
        exploratory = not st.ok
        out = evaluate(ctx, c)
        verdict, reason, details = out.verdict, out.reason, out.details
        if verdict == "FAIL":
            notes = how.notes(c)
            if notes:
                reason += " [" + "; ".join(notes) + "]"
            details.update(how.fail_details(c))
    failed = verdict == "FAIL"
    if registration is not None:
        details = {**details, "registration": registration}
    root = how.report_root or ctx.report_dir
    logs, kept = ctx.report_dir / "logs" / c.id, ctx.report_dir / "failed" / c.id
    models = how.models() if failed else []
    return Result(id=how.id_prefix + c.id, title=how.title_prefix + c.title, kind=c.kind, file=c.file, line=c.line,
                  digest=c.digest, verdict=verdict, reason=reason, registration=shown or st.state, exploratory=exploratory,
                  amendments=[{"time": a.time, "reason": a.reason, "digest": a.digest} for a in st.amendments],
                  details=details, duration_s=time.perf_counter() - t0,
                  log_dir=logs.relative_to(root).as_posix() if logs.exists() else None,
                  kept=kept.relative_to(root).as_posix() if failed and kept.exists() else None,
                  reproduce=how.reproduce(c, exploratory) if failed else "",
                  model=", ".join(models) if models else None, finished=utc_now())


@dataclass
class Models:
    """Model files by spec ({recipe, qtype} or {path}; None: engine.yaml's default), each recipe
    generated once per run. A failure is kept and raised for every criterion that needs it."""
    cfg: Config
    say: Callable[[str], None]
    default: dict[str, Any] | None = None  # overrides engine.yaml's default model
    made: dict[str, Path | CriterionFail] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # model files handed out (verify clears it per criterion)

    def path(self, spec: dict[str, Any] | None) -> Path:
        spec = spec or self.default or self.cfg.default_model
        if spec.get("path"):  # a fixed model file: no generator needed
            p = Path(spec["path"])
            p = p if p.is_absolute() else self.cfg.root / p
            if not p.is_file():
                raise CriterionFail(f"model {spec['path']} not found" + ("" if Path(spec["path"]).is_absolute()
                                                                        else " (under the project)"))
            self.used.add(str(p))
            return p
        key = f"{spec.get('recipe')}:{spec.get('qtype')}"
        if key not in self.made:
            self.say(f"model: {spec.get('recipe')}" + (f" ({spec.get('qtype')})" if spec.get("qtype") else ""))
            try:
                self.made[key] = Path(ensure_model(str(spec["recipe"]), self.cfg.root / self.cfg.models_dir,
                                                   spec.get("qtype"), search=[self.cfg.recipe_dir]))
            except Exception as e:  # noqa: BLE001 - any generator failure fails the criteria using it
                # but a full disk stops the run, with no verdict kept: `--resume` generates it again
                stop_if_disk_full(e, f"model {key}: cannot write it in {self.cfg.root / self.cfg.models_dir}",
                                  self.cfg.root / self.cfg.models_dir)
                self.made[key] = CriterionFail(f"model {key}: {type(e).__name__}: {e}")
        got = self.made[key]
        if isinstance(got, CriterionFail):
            raise got
        self.used.add(str(got))
        return got
