"""regressions/registry.lock: append-only record of each criterion's registered digest.

One line per event, tab-separated: id, file, digest, UTC time, event (register | amend), reason
(JSON string). The current digest of an id is its last line. Lines are only ever appended.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.spec.criteria import Criterion
from harness.errors import HarnessError
from harness.spec import inputs

HEADER = ("# kite criteria registry: append-only; one line per registration or amendment.\n"
          "# id\tfile\tdigest\ttime (UTC)\tevent\treason\n")


@dataclass(frozen=True)
class Entry:
    id: str
    file: str
    digest: str
    time: str
    event: str  # register | amend
    reason: str


@dataclass(frozen=True)
class Status:
    state: str  # registered | unregistered | changed
    registered_digest: str | None
    amendments: list[Entry]

    @property
    def ok(self) -> bool:
        return self.state == "registered"

    def reason(self) -> str:
        if self.state == "unregistered":
            return "not pre-registered (no entry in the registry)"
        if self.state == "changed":
            return f"not as registered: digest differs from the registered {self.registered_digest}"
        return "registered"


def refusal(st: Status, exploratory: bool, hint: str) -> str | None:
    """Why a criterion must FAIL without running: it is not (or not as) registered and the run is
    not exploratory, or it is exploratory but reuses a registered id. None: run it (labelled
    exploratory when st is not ok)."""
    if st.ok:
        return None
    if exploratory and st.state == "changed":
        return REUSED
    if exploratory:
        return None
    return f"{st.reason()} ({hint})"


REUSED = ("exploratory criteria need an id of their own: this id is registered with another digest "
          "(rename it, or amend the registered one: harness register --amend ID --reason TEXT)")


def reused_ids(entries: list[Entry], crits: list[Criterion]) -> list[str]:
    """One line per criterion that reuses a registered id with other content (file:line first):
    an exploratory run must not report a result under a registered criterion's name."""
    cur = current(entries)
    return [f"{c.file}:{c.line}: {c.id}: {REUSED}; registered from {cur[c.id].file}"
            for c in crits if c.id in cur and cur[c.id].digest != c.digest]


def parse(text: str) -> list[Entry]:
    out = []
    # split on "\n" only: str.splitlines() also splits on U+0085, U+2028 ..., which json.dumps
    # leaves unescaped inside a reason
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 6:
            raise HarnessError(f"registry.lock:{n}: expected 6 tab-separated fields, found {len(parts)}")
        try:
            reason = json.loads(parts[5])
        except json.JSONDecodeError:
            raise HarnessError(f"registry.lock:{n}: reason is not a JSON string") from None
        out.append(Entry(parts[0], parts[1], parts[2], parts[3], parts[4], str(reason)))
    return out


def load(path: Path) -> list[Entry]:
    try:
        text = inputs.read_text(path, inputs.MAX_REGISTRY, "registry.lock")
    except FileNotFoundError:
        return []
    return parse(text)


def current(entries: list[Entry]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for e in entries:
        out[e.id] = e
    return out


def status(entries: list[Entry], c: Criterion) -> Status:
    cur = current(entries).get(c.id)
    amends = [e for e in entries if e.id == c.id and e.event == "amend"]
    if cur is None:
        return Status("unregistered", None, amends)
    if cur.digest != c.digest:
        return Status("changed", cur.digest, amends)
    return Status("registered", cur.digest, amends)


@dataclass(frozen=True)
class Plan:
    new: list[Criterion]
    unchanged: list[Criterion]
    amended: list[Criterion]
    refused: list[tuple[Criterion, str]]


def plan(entries: list[Entry], crits: list[Criterion], amend: list[str], reason: str | None) -> Plan:
    cur = current(entries)
    new, same, amended, refused = [], [], [], []
    for c in crits:
        e = cur.get(c.id)
        if e is None:
            new.append(c)
        elif e.digest == c.digest:
            same.append(c)
        elif c.id in amend:
            if not reason:
                refused.append((c, "an amendment needs --reason TEXT"))
            else:
                amended.append(c)
        else:
            refused.append((c, f"changed since registration ({e.time}); re-registering needs "
                               f"--amend {c.id} --reason TEXT"))
    return Plan(new, same, amended, refused)


def append(path: Path, crits_events: list[tuple[Criterion, str, str]], now: datetime | None = None) -> None:
    """Append (criterion, event, reason) lines; creates the file with its header."""
    t = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = []
    for c, event, reason in crits_events:
        if "\t" in c.id or "\n" in c.file:
            raise HarnessError(f"cannot register {c.id!r}: tab or newline in id/file")
        lines.append("\t".join([c.id, c.file, c.digest, t, event, json.dumps(reason, ensure_ascii=False)]) + "\n")
    new_file = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="\n") as f:
        if new_file:
            f.write(HEADER)
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
