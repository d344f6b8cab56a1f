"""regressions/registry.lock: append-only record of each criterion's registered digest.

One line per event, tab-separated: id, file, digest, UTC time, event, reason (JSON string).
Events: `register` (once per id), `amend` (a change after registration, with its reason),
`depends` (the digests of what the criterion depends on beyond its own text: the model recipe
it uses and the build entries it runs; the reason holds them as JSON, the digest is theirs
combined) and `withdraw` (the id is retired, with its reason; ids are never reused). The current
digest of an id is its last register/amend line, its dependencies its last depends line.

The file is the two header lines, then entry lines, each ending in LF: parse() refuses anything
else (a comment or blank line, a CR, a byte-order mark, a last line without its line end), since
the tool never writes it. problems() names every line that breaks the event rules (a second
register, a back-dated or future-dated line, an amendment that moves an id to another file, a
depends line that re-baselines without an amendment). Lines are appended under a lock, by
writing a new file and renaming it over the old one, so a killed `register` never leaves half
a line.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from harness.contract.criteria import Criterion
from harness.contract.digest import canonical_json, criterion_digest
from harness.errors import HarnessError
from harness.contract import inputs, looks

HEADER = ("# kite criteria registry: append-only; one line per registration or amendment.\n"
          "# id\tfile\tdigest\ttime (UTC)\tevent\treason\n")


EVENTS = ("register", "amend", "depends", "withdraw")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
TIME_SHOWN = "YYYY-MM-DDTHH:MM:SSZ"  # TIME_FORMAT as messages name it


@dataclass(frozen=True)
class Entry:
    id: str
    file: str
    digest: str
    time: str
    event: str  # register | amend | depends | withdraw
    reason: str
    line: int = 0  # in registry.lock (1-based; 0: not read from a file)


@dataclass(frozen=True)
class Status:
    # registered | unregistered | changed | suspect (the registry breaks its own rules) |
    # withdrawn (the id was retired) | elsewhere (the id is registered to another file)
    state: str
    registered_digest: str | None
    amendments: list[Entry]
    why: str = ""  # what changed, which line breaks which rule, or where the id belongs / when withdrawn
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
        if self.state in ("withdrawn", "elsewhere"):
            return self.why
        return "registered"


def refusal(st: Status, exploratory: bool, hint: str) -> str | None:
    """Why a criterion must FAIL without running: it is not (or not as) registered and the run is
    not exploratory, or it is exploratory but reuses a registered id, or its registry lines break
    the registry's rules. None: run it (labelled exploratory when st is not ok)."""
    if st.ok:
        return None
    if st.state in ("suspect", "withdrawn", "elsewhere"):  # no run mode makes these a result of this id
        return st.reason()
    if exploratory and st.state == "changed":
        return reused(hint)
    if exploratory:
        return None
    return f"{st.reason()} ({hint})"


def register_hint(command: str, file: str, cid: str, state: str) -> str:
    """The command that registers criterion cid of file as it is now, as printed for the user: an
    amendment when another text is registered (state "changed")."""
    if state == "changed":
        return (f"if the change is intended, amend its registration: `{command} register {file} --amend {cid} "
                f"--reason 'what changed and why'`")
    return f"register it: `{command} register {file}`, or run with --exploratory"


def reused(hint: str) -> str:
    """Why an exploratory run refuses a criterion under an id registered with another digest."""
    return f"exploratory criteria need an id of their own: this id is registered with another digest (rename it, or {hint})"


def reused_ids(entries: list[Entry], crits: list[Criterion], root: Path | None,
               hint: Callable[[Criterion], str]) -> list[str]:
    """One line per criterion that reuses a registered id with other content, or an id registered
    to another file or withdrawn (file:line first): an exploratory run must not report a result
    under a registered criterion's name. hint(c): the command that amends c's registration."""
    cur = current(entries)
    taken = {e.id for e in entries} | {c.id for c in crits}
    out = []
    for c in crits:
        if c.id not in cur:
            continue
        st = status(entries, c, suspect={}, root=root, taken=taken)
        if st.state in ("withdrawn", "elsewhere"):
            out.append(f"{c.file}:{c.line}: {c.id}: {st.why}")
        elif cur[c.id].digest != c.digest:
            out.append(f"{c.file}:{c.line}: {c.id}: {reused(hint(c))}; registered from {cur[c.id].file}")
    return out


RESTORE = "restore the committed file (git checkout HEAD -- regressions/registry.lock) and register again"


def parse(text: str) -> list[Entry]:
    """The entries of registry.lock's text: the header lines, then entry lines, each ending in
    LF. Anything the tool never writes is refused with its line: a byte-order mark, a CR, a
    comment or blank line after the header, a last line without its line end (a torn write)."""
    if text.startswith("\ufeff"):
        raise HarnessError("registry.lock:1: starts with a UTF-8 byte-order mark (U+FEFF), which kite never writes; "
                           "save the file as UTF-8 without a byte-order mark")
    rows = text.split("\n")  # "\n" only: json.dumps leaves U+0085, U+2028 ... unescaped in a reason
    header = HEADER.split("\n")
    out: list[Entry] = []
    for n, line in enumerate(rows, 1):
        if n == len(rows) and not line:
            break
        if "\r" in line:
            raise HarnessError(f"registry.lock:{n}: a carriage return (CR): the registry's lines end in LF only, and a "
                               "CR or CRLF line end can hide lines from a reader; " + RESTORE + " (a checkout "
                               "writes CRLF under core.autocrlf=true unless the commit's .gitattributes says eol=lf)")
        if n == len(rows):
            raise HarnessError(f"registry.lock:{n}: the last line has no line end: a `register` was cut off while "
                               "writing it, or the file was edited by hand; " + RESTORE)
        if n <= 2 and not out and line == header[n - 1]:
            continue
        if line.startswith("#"):
            raise HarnessError(f"registry.lock:{n}: a comment line outside the header: kite never writes one, so a "
                               "line was edited by hand (a registration turned into a comment?); " + RESTORE)
        if not line.strip():
            raise HarnessError(f"registry.lock:{n}: an empty line: kite never writes one; " + RESTORE)
        parts = line.split("\t")
        if len(parts) != 6:
            raise HarnessError(f"registry.lock:{n}: expected 6 tab-separated fields, found {len(parts)}")
        try:
            reason = inputs.json_loads(parts[5])
        except ValueError:
            raise HarnessError(f"registry.lock:{n}: reason is not a JSON string") from None
        out.append(Entry(parts[0], parts[1], parts[2], parts[3], parts[4], str(reason), n))
    return out


def prefix_problem(committed: str, working: str) -> str | None:
    """Why the working registry is not its committed version plus appended lines (None: it is)."""
    if working.startswith(committed):
        return None
    a, b = committed.split("\n"), working.split("\n")
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)) - 1) + 1
    return (f"registry.lock:{n}: differs from the committed registry (git HEAD) at this line: the registry is "
            "append-only, so its committed lines never change and every new line is written by "
            "`register`; restore them (git checkout HEAD -- regressions/registry.lock), then register again")


def _is_time(text: str) -> bool:
    try:
        datetime.strptime(text, TIME_FORMAT)
    except ValueError:
        return False
    return True


def _now() -> str:
    return datetime.now(timezone.utc).strftime(TIME_FORMAT)


def problems(entries: list[Entry], now: str | None = None) -> dict[str, str]:
    """id -> the first rule its lines break: an unknown event, a time not in the format, a time
    later than now (a wrong clock or a hand edit; such a line is not the one later lines are held
    against, so it blocks nothing else), a time earlier than the line before (back-dated or
    moved), a second `register`, any line before its id's register or after its withdraw, an
    amend, depends or withdraw naming another file than the register (a registration never
    moves), an amend or withdraw without a reason, a depends line whose digest is not that of its
    own mapping, and a depends line that changes recorded dependencies without a register or
    amend of the same id written with it (re-baselining needs `register --amend ID --reason`)."""
    now = now or _now()
    out: dict[str, str] = {}
    registered: dict[str, Entry] = {}
    event: dict[str, Entry] = {}  # id -> its last register or amend
    depends: dict[str, Entry] = {}  # id -> its last depends line
    gone: dict[str, Entry] = {}  # id -> its withdraw line
    last: Entry | None = None
    for e in entries:
        where = f"registry.lock:{e.line}"
        dated = _is_time(e.time)
        why = None if dated else f"{where}: time {e.time!r} is not in the format {TIME_SHOWN}"
        first = registered.get(e.id)
        if why is None and e.event not in EVENTS:
            why = f"{where}: unknown event {e.event!r}; events: {', '.join(EVENTS)}"
        elif why is None and e.time > now:
            why = (f"{where}: dated {e.time}, later than now ({now}): written with a wrong clock, or by hand")
        elif why is None and last is not None and e.time < last.time:
            why = (f"{where}: time {e.time} is earlier than line {last.line}'s ({last.time}); lines are only ever "
                   "appended, so this one was back-dated or moved")
        elif why is None and e.id in gone:
            why = f"{where}: `{e.event}` for {e.id} after its withdrawal (line {gone[e.id].line}); ids are never reused"
        elif why is None and e.event == "register" and first is not None:
            why = (f"{where}: a second `register` for {e.id} (first at line {first.line}); a change "
                   "after registration is an `amend` with a reason")
        elif why is None and e.event != "register" and first is None:
            why = f"{where}: `{e.event}` for {e.id}, which is not registered before it"
        elif why is None and first is not None and e.file != first.file:
            why = (f"{where}: `{e.event}` names {e.file}, but {e.id} is registered to {first.file} (line "
                   f"{first.line}); a registration never moves between files")
        elif why is None and e.event in ("amend", "withdraw") and not e.reason.strip():
            why = f"{where}: {'an amendment' if e.event == 'amend' else 'a withdrawal'} of {e.id} without a reason"
        elif why is None and e.event == "depends":
            why = _depends_problem(e, event.get(e.id), depends.get(e.id))
        if why and e.id not in out:
            out[e.id] = why
        if e.event == "register":
            registered.setdefault(e.id, e)
        if e.event in ("register", "amend"):
            event[e.id] = e
        elif e.event == "depends":
            depends[e.id] = e
        elif e.event == "withdraw":
            gone.setdefault(e.id, e)
        if dated and e.time <= now:  # an undated or future line cannot be the one later lines are held against
            last = e
    return out


def _depends_problem(e: Entry, event: Entry | None, before: Entry | None) -> str | None:
    """What is wrong with depends line e (None: nothing), given its id's last register/amend and
    its previous depends line. `register` writes a depends line with each register or amend (same
    time, after it), or once for a criterion registered before dependencies were recorded."""
    where = f"registry.lock:{e.line}"
    try:
        mapping = inputs.json_loads(e.reason)
    except ValueError:
        mapping = None
    if not isinstance(mapping, dict) or e.digest != dependency_digest({str(k): str(v) for k, v in mapping.items()}):
        return f"{where}: the depends line's digest is not the digest of the dependencies it lists (edited by hand)"
    if before is not None and not (event is not None and event.line > before.line and event.time == e.time):
        return (f"{where}: re-records {e.id}'s dependencies (recorded at line {before.line}) without a register or "
                "amend written with it; a changed dependency is accepted only by `register --amend ID --reason TEXT`")
    return None


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


def withdrawn(entries: list[Entry]) -> dict[str, Entry]:
    """id -> its withdraw line."""
    return {e.id: e for e in entries if e.event == "withdraw"}


_ID_LINE = re.compile(r"^\s*(?:-\s*)?id\s*:\s*['\"]?([^'\"#\s]+)['\"]?\s*(?:#.*)?$")


def id_line(root: Path | None, file: str, cid: str) -> int | None:
    """The line of `id: CID` in file (relative to root), else of a mapping key CID (the build
    matrix's cross criteria), or None (no such line, or unreadable). A text scan: the file may be
    any registered kind."""
    if root is None:
        return None
    path = Path(file) if Path(file).is_absolute() else root / file
    try:
        text = inputs.read_text(path, inputs.MAX_CRITERIA, file)
    except (OSError, HarnessError):
        return None
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        m = _ID_LINE.match(line)
        if m and m.group(1) == cid:
            return n
    key = re.compile(rf"^\s*['\"]?{re.escape(cid)}['\"]?\s*:\s*(?:#.*)?$")  # a mapping key (the matrix's cross:)
    return next((n for n, line in enumerate(lines, 1) if key.match(line)), None)


def where(root: Path | None, file: str, cid: str) -> str:
    """file:line of cid, or file alone (with why) when the line is not found."""
    n = id_line(root, file, cid)
    if n is not None:
        return f"{file}:{n}"
    gone = root is not None and not (Path(file) if Path(file).is_absolute() else root / file).exists()
    return f"{file} (now {'gone' if gone else 'without it'})" if root is not None else file


def free_id(cid: str, taken: set[str]) -> str:
    """An id like cid that is in no registry line and no given criterion: X1 -> X3 when X1, X2 are taken."""
    m = re.match(r"^(.*?)(\d+)[A-Za-z]*$", cid)
    stem, n = (m.group(1), 1) if m and m.group(1) else (cid, 2)
    while f"{stem}{n}" in taken:
        n += 1
    return f"{stem}{n}"


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
           suspect: dict[str, str] | None = None, root: Path | None = None, taken: set[str] | None = None) -> Status:
    """How c stands against the registry. deps: its dependency digests now (None: not checked);
    suspect: problems(entries), when the caller has them; root: the project, to name the line of
    an id registered to another file; taken: ids in use besides the registry's (for a free id)."""
    cur = current(entries).get(c.id)
    amends = [e for e in entries if e.id == c.id and e.event == "amend"]
    bad = (suspect if suspect is not None else problems(entries)).get(c.id)
    if bad:
        return Status("suspect", cur.digest if cur else None, amends, bad, cur)
    if cur is None:
        return Status("unregistered", None, amends)
    gone = withdrawn(entries).get(c.id)
    free = free_id(c.id, {e.id for e in entries} | (taken or set()))
    if gone is not None:
        return Status("withdrawn", cur.digest, amends,
                      f"id {c.id} was withdrawn (registry.lock:{gone.line}, {gone.time}: {gone.reason}); ids are "
                      f"never reused: remove this criterion, or give it a free id (e.g. {free}) and register it", cur)
    if c.file and cur.file != c.file:
        return Status("elsewhere", cur.digest, amends,
                      f"id {c.id} belongs to {where(root, cur.file, c.id)} (registry.lock:{cur.line}); ids are "
                      f"unique across the project: give this criterion a free id (e.g. {free})", cur)
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
    unfit: list[tuple[Criterion, str]] = field(default_factory=list)  # new or amended, refused: looks.unfit


def plan(entries: list[Entry], crits: list[Criterion], amend: list[str], reason: str | None,
         deps: dict[str, dict[str, str]] | None = None, root: Path | None = None) -> Plan:
    """What `register` does with each criterion. deps: id -> dependency digests now (ids absent:
    no dependencies recorded). A criterion whose recorded dependencies changed needs --amend like
    one whose text changed; one registered before dependencies were recorded gets them recorded.
    A new or amended criterion that could never give its verdict (looks.unfit: a compare budget too
    small for a speed verdict) is unfit, not registered; one registered before stays as it is."""
    deps = deps or {}
    cur = current(entries)
    rec = current_depends(entries)
    bad = problems(entries)
    taken = {e.id for e in entries} | {c.id for c in crits}
    new, same, amended, refused, depends = [], [], [], [], []
    for c in crits:
        e = cur.get(c.id)
        d = deps.get(c.id)
        deps_changed = d is not None and c.id in rec and rec[c.id].digest != dependency_digest(d)
        st = status(entries, c, suspect=bad, root=root, taken=taken) if e is not None else None
        if c.id in bad:
            refused.append((c, bad[c.id]))
        elif st is not None and st.state in ("withdrawn", "elsewhere"):
            refused.append((c, st.why))  # never amended away: an amendment never moves an id
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
    unfit = [(c, why) for c in new + amended if (why := looks.unfit(c))]
    bad_ids = {c.id for c, _ in unfit}
    new, amended = [c for c in new if c.id not in bad_ids], [c for c in amended if c.id not in bad_ids]
    depends += [c for c in new + amended if c.id in deps]
    return Plan(new, same, amended, refused, depends, unfit)


class Registrable(Protocol):
    """What a registry line names: a criterion, a cross criterion of the matrix, or an Entry."""
    id: str
    file: str
    digest: str


def withdrawal(entries: list[Entry], ids: list[str], reason: str | None) -> list[tuple[Entry, str, str]]:
    """The (entry in force, "withdraw", reason) lines that retire ids, or a HarnessError naming
    each id that cannot be withdrawn (unknown, already withdrawn, its lines break a rule)."""
    if not reason or not reason.strip():
        raise HarnessError("--withdraw needs --reason TEXT (the reason is kept in the registry and shown in reports)")
    cur, gone, bad = current(entries), withdrawn(entries), problems(entries)
    errors = []
    for cid in ids:
        if cid not in cur:
            errors.append(f"--withdraw {cid}: not registered")
        elif cid in gone:
            errors.append(f"--withdraw {cid}: already withdrawn at registry.lock:{gone[cid].line}")
        elif cid in bad:
            errors.append(f"--withdraw {cid}: {bad[cid]}")
    if errors:
        raise HarnessError("; ".join(errors))
    return [(cur[cid], "withdraw", reason) for cid in dict.fromkeys(ids)]


WRITER_WAIT_S = 120.0  # how long `register` waits for another `register` to finish


def _writer_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.writer")


if os.name == "nt":
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False


@contextmanager
def writing(path: Path, wait_s: float | None = None) -> Iterator[None]:
    """Held around `register`'s read, check and append: one writer of path at a time (an OS lock
    on a file beside it, dropped when the holder dies), so two runs cannot both append a line."""
    wait_s = WRITER_WAIT_S if wait_s is None else wait_s
    lock = _writer_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise HarnessError(f"cannot open the registry's lock {lock}: {e.strerror or e}") from None
    try:
        deadline = time.monotonic() + wait_s
        while not _try_lock(fd):
            if time.monotonic() > deadline:
                raise HarnessError(f"{path.name} is being written by another `register` (lock {lock}) for over "
                                   f"{wait_s:g} s; try again when it has finished")
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # drops the lock


def append(path: Path, crits_events: list[tuple[Registrable, str, str]], now: datetime | None = None,
           deps: list[tuple[Registrable, dict[str, str]]] | None = None) -> None:
    """Append (criterion, event, reason) lines, then a depends line for each (criterion, its
    dependency digests); creates the file with its header. Refuses a registry that does not
    parse (a torn or hand-edited line) and one whose last line has no valid time. The new file is
    written beside the old one and renamed over it: a kill leaves the old file or the new one,
    never half a line. Call it inside writing(path), with the checks that led to it."""
    t = (now or datetime.now(timezone.utc)).strftime(TIME_FORMAT)
    try:
        old = inputs.read_text(path, inputs.MAX_REGISTRY, "registry.lock")
    except FileNotFoundError:
        old = ""
    have = parse(old)
    if have and not _is_time(have[-1].time):
        raise HarnessError(f"registry.lock: line {have[-1].line}: time {have[-1].time!r} is not in the format "
                           f"{TIME_SHOWN}; nothing appended")
    # a line dated later than now is a problem of its own id (problems()), never a block for others
    rows = [(c.id, c.file, c.digest, event, json.dumps(reason, ensure_ascii=False)) for c, event, reason in crits_events]
    for c, d in deps or []:
        rows.append((c.id, c.file, dependency_digest(d), "depends", json.dumps(canonical_json(d), ensure_ascii=False)))
    lines = []
    for cid, file, digest, event, reason in rows:
        if any(ch in cid or ch in file for ch in "\t\n\r"):
            raise HarnessError(f"cannot register {cid!r}: tab or newline in id/file")
        lines.append("\t".join([cid, file, digest, t, event, reason]) + "\n")
    text = (old or HEADER) + "".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if os.name != "nt":  # the rename itself, on disk
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
