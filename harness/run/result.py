"""The record one criterion ends in (PASS, FAIL or SKIP with the reason and what it measured):
made by the run stage, written by the report stage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any


@dataclass
class Result:
    id: str
    title: str
    kind: str
    file: str
    digest: str
    verdict: str  # PASS | FAIL | SKIP
    reason: str
    line: int = 0  # of the criterion's id in its file
    registration: str = "registered"  # registered | unregistered | changed
    exploratory: bool = False
    amendments: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    log_dir: str | None = None
    kept: str | None = None  # failed/<id>: the work folder (dumps) of a failed criterion
    reproduce: str = ""  # a command that runs the failed criterion alone
    model: str | None = None  # the model file a failed criterion ran with
    finished: str = ""

    @property
    def label(self) -> str:
        return "exploratory: not pre-registered" if self.exploratory else ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
