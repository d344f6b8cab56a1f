"""regressions/registry.lock: append-only record of each criterion's registered digest.

One line per event, tab-separated: id, file, digest, UTC time, event, reason (JSON string).
Events: `register` (once per id), `amend` (a change after registration, with its reason) and
`depends` (the digests of what the criterion depends on beyond its own text: the model recipe
it uses and the build entries it runs; the reason holds them as JSON, the digest is theirs
combined). The current digest of an id is its last register/amend line, its dependencies its
last depends line. Lines are only ever appended, so times never go backwards; problems() names
every line that breaks these rules (a second register, a back-dated line).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.spec.criteria import Criterion
from harness.spec.digest import canonical_json, criterion_digest
from harness.errors import HarnessError
from harness.spec import inputs

HEADER = ("# kite criteria registry: append-only; one line per registration or amendment.\n"
          "# id\tfile\tdigest\ttime (UTC)\tevent\treason\n")


EVENTS = ("register", "amend", "depends")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
TIME_SHOWN = "YYYY-MM-DDTHH:MM:SSZ"  # TIME_FORMAT as messages name it


@dataclass(frozen=True)
class Entry:
    id: str
    file: str
    digest: str
    time: str
    event: str  # register | amend | depends
    reason: str
    line: int = 0  # in registry.lock (1-based; 0: not read from a file)


@dataclass(frozen=True)
class Status:
    state: str  # registered | unregistered | changed | suspect (the registry breaks its own rules)
    registered_digest: str | None
    amendments: list[Entry]
    why: str = ""  # for changed (what changed) and suspect (which line, what rule)
    entry: Entry | None = None  # the line in force (register or last amend)

    @property
    def ok(self) -> bool:
        return self.state == "registered"

    def reason(self) -> str:
        if self.state == "unregistered":
            return "not pre-registered (no entry in the registry)"
        if self.state == "changed":
            return f"not as registered: {self.why or 'digest differs from the registered ' + str(self.registered_digest)}"
        if self.state == "suspect":
            return f"registration not trusted: {self.why}"
        return "registered"


def refusal(st: Status, exploratory: bool, hint: str) -> str | None:
    """Why a criterion must FAIL without running: it is not (or not as) registered and the run is
    not exploratory, or it is exploratory but reuses a registered id, or its registry lines break
    the registry's rules. None: run it (labelled exploratory when st is not ok)."""
    if st.ok:
        return None
    if st.state == "suspect":
        return st.reason()
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
            reason = inputs.json_loads(parts[5])
        except ValueError:
            raise HarnessError(f"registry.lock:{n}: reason is not a JSON string") from None
        out.append(Entry(parts[0], parts[1], parts[2], parts[3], parts[4], str(reason), n))
    return out


def _is_time(text: str) -> bool:
    try:
        datetime.strptime(text, TIME_FORMAT)
    except ValueError:
        return False
    return True


def problems(entries: list[Entry]) -> dict[str, str]:
    """id -> the first rule its lines break: an unknown event, a time not in the format, a time
    earlier than the line before (lines are only appended, so it was back-dated or moved), a
    second `register` (a change after registration is an `amend`, with a reason), an amend or
    depends line before any register."""
    out: dict[str, str] = {}
    registered: dict[str, Entry] = {}
    last: Entry | None = None
    for e in entries:
        where = f"registry.lock:{e.line}"
        dated = _is_time(e.time)
        why = None if dated else f"{where}: time {e.time!r} is not in the format {TIME_SHOWN}"
        if why is None and e.event not in EVENTS:
            why = f"{where}: unknown event {e.event!r}; events: {', '.join(EVENTS)}"
        elif why is None and last is not None and e.time < last.time:
            why = (f"{where}: time {e.time} is earlier than line {last.line}'s ({last.time}); lines are only ever "
                   "appended, so this one was back-dated or moved")
        elif why is None and e.event == "register" and e.id in registered:
            why = (f"{where}: a second `register` for {e.id} (first at line {registered[e.id].line}); a change "
                   "after registration is an `amend` with a reason")
        elif why is None and e.event != "register" and e.id not in registered:
            why = f"{where}: `{e.event}` for {e.id}, which is not registered before it"
        elif why is None and e.event == "amend" and not e.reason.strip():
            why = f"{where}: an amendment of {e.id} without a reason"
        if why and e.id not in out:
            out[e.id] = why
        if e.event == "register":
            registered.setdefault(e.id, e)
        if dated:  # an undated line cannot be the one later lines are held against
            last = e
    return out


def load(path: Path) -> list[Entry]:
    try:
        text = inputs.read_text(path, inputs.MAX_REGISTRY, "registry.lock")
    except FileNotFoundError:
        return []
    return parse(text)


def current(entries: list[Entry]) -> dict[str, Entry]:
    """id -> its line in force: the last register or amend."""
    out: dict[str, Entry] = {}
    for e in entries:
        if e.event != "depends":
            out[e.id] = e
    return out


def current_depends(entries: list[Entry]) -> dict[str, Entry]:
    """id -> its last depends line."""
    return {e.id: e for e in entries if e.event == "depends"}


def depends_map(e: Entry) -> dict[str, str]:
    """The dependency digests a depends line records ({} when its reason is not such a mapping)."""
    try:
        m = inputs.json_loads(e.reason)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in m.items()} if isinstance(m, dict) else {}


def status(entries: list[Entry], c: Criterion, deps: dict[str, str] | None = None,
           suspect: dict[str, str] | None = None) -> Status:
    """How c stands against the registry. deps: its dependency digests now (None: not checked);
    suspect: problems(entries), when the caller has them."""
    cur = current(entries).get(c.id)
    amends = [e for e in entries if e.id == c.id and e.event == "amend"]
    bad = (suspect if suspect is not None else problems(entries)).get(c.id)
    if bad:
        return Status("suspect", cur.digest if cur else None, amends, bad, cur)
    if cur is None:
        return Status("unregistered", None, amends)
    if cur.digest != c.digest:
        return Status("changed", cur.digest, amends, f"digest differs from the registered {cur.digest}", cur)
    rec = current_depends(entries).get(c.id)
    if deps is not None and rec is not None and rec.digest != dependency_digest(deps):
        was = depends_map(rec)
        changed = sorted(k for k in set(was) | set(deps) if was.get(k) != deps.get(k))
        return Status("changed", cur.digest, amends, f"what it depends on changed since registration: "
                      f"{', '.join(changed) or 'the recorded digests'} (registry.lock:{rec.line})", cur)
    return Status("registered", cur.digest, amends, entry=cur)


def dependency_digest(deps: dict[str, str]) -> str:
    """The digest of a depends line: its mapping, canonical."""
    return criterion_digest(deps)


@dataclass(frozen=True)
class Plan:
    new: list[Criterion]
    unchanged: list[Criterion]
    amended: list[Criterion]
    refused: list[tuple[Criterion, str]]
    depends: list[Criterion] = field(default_factory=list)  # need a (new) depends line


def plan(entries: list[Entry], crits: list[Criterion], amend: list[str], reason: str | None,
         deps: dict[str, dict[str, str]] | None = None) -> Plan:
    """What `register` does with each criterion. deps: id -> dependency digests now (ids absent:
    no dependencies recorded). A criterion whose recorded dependencies changed needs --amend like
    one whose text changed; one registered before dependencies were recorded gets them recorded."""
    deps = deps or {}
    cur = current(entries)
    rec = current_depends(entries)
    bad = problems(entries)
    new, same, amended, refused, depends = [], [], [], [], []
    for c in crits:
        e = cur.get(c.id)
        d = deps.get(c.id)
        deps_changed = d is not None and c.id in rec and rec[c.id].digest != dependency_digest(d)
        if c.id in bad:
            refused.append((c, bad[c.id]))
        elif e is None:
            new.append(c)
        elif e.digest == c.digest and not deps_changed:
            same.append(c)
            if d is not None and c.id not in rec:
                depends.append(c)
        elif c.id in amend:
            if not reason:
                refused.append((c, "an amendment needs --reason TEXT"))
            else:
                amended.append(c)
        else:
            what = "what it depends on (model recipe, build entry) changed" if e.digest == c.digest else "changed"
            refused.append((c, f"{what} since registration ({e.time}); re-registering needs "
                               f"--amend {c.id} --reason TEXT"))
    depends += [c for c in new + amended if c.id in deps]
    return Plan(new, same, amended, refused, depends)


def _lacks_final_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def append(path: Path, crits_events: list[tuple[Criterion, str, str]], now: datetime | None = None,
           deps: list[tuple[Criterion, dict[str, str]]] | None = None) -> None:
    """Append (criterion, event, reason) lines, then a depends line for each (criterion, its
    dependency digests); creates the file with its header. Refuses to write a time earlier than
    the file's last line."""
    t = (now or datetime.now(timezone.utc)).strftime(TIME_FORMAT)
    have = load(path)
    if have and not _is_time(have[-1].time):
        raise HarnessError(f"registry.lock: line {have[-1].line}: time {have[-1].time!r} is not in the format "
                           f"{TIME_SHOWN}; nothing appended")
    if have and have[-1].time > t:
        raise HarnessError(f"registry.lock: its last line (line {have[-1].line}) is dated {have[-1].time}, later "
                           f"than now ({t}); times never go backwards: check the clock")
    rows = [(c.id, c.file, c.digest, event, json.dumps(reason, ensure_ascii=False)) for c, event, reason in crits_events]
    for c, d in deps or []:
        rows.append((c.id, c.file, dependency_digest(d), "depends", json.dumps(canonical_json(d), ensure_ascii=False)))
    lines = []
    for cid, file, digest, event, reason in rows:
        if "\t" in cid or "\n" in cid or "\t" in file or "\n" in file:
            raise HarnessError(f"cannot register {cid!r}: tab or newline in id/file")
        lines.append("\t".join([cid, file, digest, t, event, reason]) + "\n")
    new_file = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="\n") as f:
        if new_file:
            f.write(HEADER)
        elif _lacks_final_newline(path):
            f.write("\n")  # an edited file may end without one: never glue a new line onto the last
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
