"""The history store: one SQLite file (the standard library's sqlite3). A report is kept once,
keyed by the digest of its content; its values are keyed by commit, commit time, machine (CPU,
GPU, driver), series (criterion or workload) and metric. The schema's version is SQLite's
user_version: an older store is migrated in place, a newer or foreign one refused. A value or
verdict names the run that made it (`run`, its start): the same run's value read again from a
merged report is the same value, counted once."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.history.points import Machine, Reading

VERSION = 2
APPLICATION_ID = 0x6B697465  # "kite": tells a kite store from any other SQLite file

SCHEMA = """
CREATE TABLE machines (id INTEGER PRIMARY KEY, cpu TEXT NOT NULL, gpu TEXT NOT NULL, driver TEXT NOT NULL,
                       UNIQUE (cpu, gpu, driver));
CREATE TABLE reports (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, source TEXT NOT NULL,
                      kind TEXT NOT NULL, revision TEXT NOT NULL, commit_time TEXT NOT NULL,
                      dirty INTEGER NOT NULL, started TEXT NOT NULL,
                      machine INTEGER NOT NULL REFERENCES machines (id), added TEXT NOT NULL);
CREATE TABLE points (report INTEGER NOT NULL REFERENCES reports (id), series TEXT NOT NULL,
                     metric TEXT NOT NULL, value REAL NOT NULL, run TEXT NOT NULL DEFAULT '',
                     PRIMARY KEY (report, series, metric));
CREATE TABLE verdicts (report INTEGER NOT NULL REFERENCES reports (id), series TEXT NOT NULL,
                       kind TEXT NOT NULL, verdict TEXT NOT NULL, reason TEXT NOT NULL, detail TEXT,
                       run TEXT NOT NULL DEFAULT '', title TEXT NOT NULL DEFAULT '',
                       PRIMARY KEY (report, series));
CREATE INDEX points_series ON points (series, metric);
"""
TABLES = {"machines": ("id", "cpu", "gpu", "driver"),
          "reports": ("id", "digest", "source", "kind", "revision", "commit_time", "dirty", "started", "machine",
                      "added"),
          "points": ("report", "series", "metric", "value", "run"),
          "verdicts": ("report", "series", "kind", "verdict", "reason", "detail", "run", "title")}


def _v1_to_v2(db: sqlite3.Connection) -> None:
    """Each value and verdict names its run (the report's start, as version 1 knew it); verdicts keep
    the criterion's title."""
    for table in ("points", "verdicts"):
        db.execute(f"ALTER TABLE {table} ADD COLUMN run TEXT NOT NULL DEFAULT ''")
        db.execute(f"UPDATE {table} SET run = (SELECT started FROM reports WHERE reports.id = {table}.report)")
    db.execute("ALTER TABLE verdicts ADD COLUMN title TEXT NOT NULL DEFAULT ''")


# version N -> the SQL that makes a version-N store version N + 1
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}


@dataclass(frozen=True)
class Point:
    """One value of a series, with where it came from."""
    revision: str
    commit_time: str
    started: str
    machine: Machine
    value: float
    report: int
    dirty: bool = False  # the run's tree had uncommitted changes


class Store:
    def __init__(self, path: Path, create: bool = True):
        self.path = path
        if not path.exists() and not create:
            raise HarnessError(f"{path}: no history store (make one with `python3 -m harness history add --store {path} ...`)")
        if path.exists() and not path.is_file():
            raise HarnessError(f"{path}: not a file")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path))
            self._open()
        except sqlite3.OperationalError as e:  # no permission, no room, locked by another writer
            raise HarnessError(f"{path}: cannot open the history store: {e}") from None
        except sqlite3.DatabaseError as e:
            raise HarnessError(f"{path}: not a kite history store ({e})") from None
        except OSError as e:
            raise HarnessError(f"{path}: cannot open the history store: {e.strerror or e}") from None

    def _open(self) -> None:
        app = self.db.execute("PRAGMA application_id").fetchone()[0]
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app == 0 and version == 0 and tables == 0:  # a new, empty file
            with self.db:
                self.db.executescript(SCHEMA)
                self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.db.execute(f"PRAGMA user_version = {VERSION}")
            return
        if app != APPLICATION_ID:
            raise HarnessError(f"{self.path}: an SQLite file, but not a kite history store (application_id "
                               f"{app:#x}); name another file")
        if version > VERSION:
            raise HarnessError(f"{self.path}: history store version {version}, newer than this harness reads "
                               f"({VERSION}); update kite-harness, or name another file")
        while version < VERSION:
            step = MIGRATIONS.get(version)
            if step is None:
                raise HarnessError(f"{self.path}: history store version {version} cannot be migrated to "
                                   f"{VERSION}; rebuild it with `python3 -m harness history add` from the reports")
            with self.db:
                step(self.db)
                version += 1
                self.db.execute(f"PRAGMA user_version = {version}")
        missing = [f"{t}.{c}" for t, cols in TABLES.items() for c in cols if c not in self._columns(t)]
        if missing:
            raise HarnessError(f"{self.path}: a damaged history store (no {', '.join(missing[:6])}); rebuild it "
                               "with `python3 -m harness history add` from the reports, or name another file")

    def _columns(self, table: str) -> set[str]:
        return {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- writing ---------------------------------------------------------------------------

    def add(self, rd: Reading, commit_time: str) -> bool:
        """Keep one report; False (and nothing changed) when the same content is already kept."""
        if self.db.execute("SELECT 1 FROM reports WHERE digest = ?", (rd.digest,)).fetchone():
            return False
        try:
            self._insert(rd, commit_time)
        except sqlite3.Error as e:  # the transaction is rolled back: the store is as it was
            raise HarnessError(f"{self.path}: cannot write the history store: {e}") from None
        return True

    def _insert(self, rd: Reading, commit_time: str) -> None:
        m = rd.machine
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO machines (cpu, gpu, driver) VALUES (?, ?, ?)",
                            (m.cpu, m.gpu, m.driver))
            mid = self.db.execute("SELECT id FROM machines WHERE cpu = ? AND gpu = ? AND driver = ?",
                                  (m.cpu, m.gpu, m.driver)).fetchone()[0]
            cur = self.db.execute(
                "INSERT INTO reports (digest, source, kind, revision, commit_time, dirty, started, machine, added) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rd.digest, rd.source, rd.kind, rd.commit, commit_time, int(rd.dirty), rd.started, mid,
                 datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")))
            rid = cur.lastrowid
            self.db.executemany("INSERT OR REPLACE INTO points (report, series, metric, value, run) "
                                "VALUES (?, ?, ?, ?, ?)", [(rid, s, k, v, rd.run_of(s)) for s, k, v in rd.points])
            self.db.executemany("INSERT OR REPLACE INTO verdicts (report, series, kind, verdict, reason, detail, "
                                "run, title) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                [(rid, v["series"], v["kind"], v["verdict"], v["reason"],
                                  json.dumps(v["detail"]) if v["detail"] is not None else None,
                                  rd.run_of(v["series"]), v.get("title") or "")
                                 for v in rd.verdicts])

    # ---- reading ---------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {t: self.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("reports", "machines", "points", "verdicts")}

    def series_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT series FROM verdicts UNION "
                                              "SELECT DISTINCT series FROM points ORDER BY 1")]

    def metrics(self, series: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT metric FROM points WHERE series = ? ORDER BY 1",
                                              (series,))]

    # a run's value read from two reports (a verify report and a merge of it) is one value: the
    # first report kept of each (commit, machine, run) counts
    _ONCE = ("{t}.rowid IN (SELECT min(x.rowid) FROM {table} x JOIN reports y ON y.id = x.report "
             "WHERE x.series = ?{metric} GROUP BY y.revision, y.dirty, y.machine, x.run)")

    def series(self, series: str, metric: str) -> list[Point]:
        """The values of one series and metric, all machines, in commit-time order, each run once."""
        rows = self.db.execute(
            "SELECT r.revision, r.commit_time, p.run, m.cpu, m.gpu, m.driver, p.value, r.id, r.dirty "
            "FROM points p JOIN reports r ON r.id = p.report JOIN machines m ON m.id = r.machine "
            "WHERE p.series = ? AND p.metric = ? AND " + self._ONCE.format(t="p", table="points", metric=" AND x.metric = ?")
            + " ORDER BY r.commit_time, r.started, r.id", (series, metric, series, metric))
        return [Point(a, b, c, Machine(d, e, f), v, rid, bool(dirty)) for a, b, c, d, e, f, v, rid, dirty in rows]

    def verdicts(self, series: str) -> list[dict[str, Any]]:
        """The verdicts of one series, all machines, in commit-time order, each run once."""
        rows = self.db.execute(
            "SELECT r.revision, r.commit_time, v.run, m.gpu, v.kind, v.verdict, v.reason, v.detail, r.source, "
            "v.title, m.cpu, m.driver FROM verdicts v JOIN reports r ON r.id = v.report "
            "JOIN machines m ON m.id = r.machine WHERE v.series = ? AND " + self._ONCE.format(t="v", table="verdicts", metric="")
            + " ORDER BY r.commit_time, r.started, r.id", (series, series))
        return [{"revision": a, "commit_time": b, "started": c, "gpu": d, "kind": e, "verdict": f, "reason": g,
                 "detail": json.loads(h) if h else None, "source": s, "title": t, "machine": Machine(cpu, d, drv)}
                for a, b, c, d, e, f, g, h, s, t, cpu, drv in rows]


def by_machine(points: list[Point]) -> dict[Machine, list[Point]]:
    """A series split per machine (figures of different machines are not one series)."""
    out: dict[Machine, list[Point]] = {}
    for p in points:
        out.setdefault(p.machine, []).append(p)
    return out
