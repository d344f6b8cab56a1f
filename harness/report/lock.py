"""One writer per report folder: `.lock` in the folder, held with an OS file lock for the whole run
and naming its holder (pid, start time, command). The OS drops the lock when the holder dies, so a
lock file left by a killed run is stale and is taken over; a live holder makes a second run stop.
On POSIX the folder itself is locked too (flock on the folder): deleting `.lock` during a run
cannot let a second run in, as a new `.lock` file would be a new, unlocked file."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness import confined
from harness.errors import HarnessError
from harness.contract import inputs

LOCK_NAME = ".lock"

if os.name == "nt":
    import msvcrt

    def _try_lock(f: IO[str]) -> bool:
        try:
            f.seek(0)
            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(f: IO[str]) -> None:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _try_lock(f: IO[str]) -> bool:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(f: IO[str]) -> None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _lock_folder(directory: Path) -> int | None:
    """An fd of the folder, flock-ed (POSIX), -1 where folders cannot be locked (Windows), None
    when another process holds it."""
    if os.name == "nt":
        return -1
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


HOLDER_KEYS = ("pid", "host", "started", "argv")


def _parse_holder(text: str) -> Any:
    """The lock file's content: its JSON value, None when empty, the text itself when not JSON."""
    if not text.strip():
        return None
    try:
        return inputs.json_loads(text)  # nesting too deep is a ValueError there too
    except ValueError:
        return text


def _shown(value: Any, limit: int = 120) -> str:
    """One field of the lock file as text: a string or number (clipped), '?' for anything else."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "?"
    s = " ".join(str(value).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _holder_text(info: Any) -> str:
    """Who holds (or held) the lock, from whatever the lock file holds: any JSON value, or not JSON
    (a hand-edited or foreign file); never fails on its shape."""
    if not info:
        return "a process that left no details"
    if not isinstance(info, dict) or not any(k in info for k in HOLDER_KEYS):
        return "unknown: the lock file's content is not understood"
    host = info.get("host")
    where = f" on {_shown(host)}" if isinstance(host, str) and host and host != socket.gethostname() else ""
    argv = info.get("argv")
    ok_argv = isinstance(argv, list) and bool(argv) and all(isinstance(a, str) for a in argv)
    cmd = f", `{_shown(' '.join(argv), 300)}`" if ok_argv else ""
    return f"pid {_shown(info.get('pid'))}{where}, started {_shown(info.get('started'))}{cmd}"


@dataclass
class ReportLock:
    """Held from acquire() to release(); `notice` says when a stale lock was taken over. `what` and
    `advice` word the refusal (a report folder, or a clone's build folder: build_lock)."""

    directory: Path
    handle: IO[str] | None = None
    notice: str = ""
    folder_fd: int = -1  # the locked folder (POSIX), or -1
    what: str = "is being written by another verify run"
    advice: str = "wait for it to end, or resume into another copy"

    @property
    def path(self) -> Path:
        return self.directory / LOCK_NAME

    def _holder(self, f: IO[str]) -> Any:
        f.seek(0)
        try:
            return _parse_holder(f.read(1 << 16))
        except (OSError, ValueError):  # unreadable, or not UTF-8: as good as not understood
            return "?"

    def acquire(self, started: str, argv: list[str], wait: Callable[[str], None] | None = None,
                poll: float = 0.5) -> ReportLock:
        """The lock; held by a live process: a HarnessError naming it, or, with `wait`, said once
        through `wait` and waited for."""
        try:  # a link planted as .lock is refused, never followed (its target would be truncated)
            f = confined.open_text(self.directory, LOCK_NAME, os.O_RDWR | os.O_CREAT, "r+")
        except OSError as e:
            raise HarnessError(f"cannot open the lock {self.path}: {e.strerror or e}") from None
        said = False
        while True:
            try:
                folder = _lock_folder(self.directory)
            except OSError as e:
                f.close()
                raise HarnessError(f"cannot lock the folder {self.directory}: {e.strerror or e}") from None
            if folder is not None and _try_lock(f):
                break
            if folder is not None and folder >= 0:
                os.close(folder)
            busy = f"{self.directory} {self.what} ({_holder_text(self._holder(f))})"
            if wait is None:
                f.close()
                raise HarnessError(f"{busy}; {self.advice}")
            if not said:
                wait(f"waiting: {busy}")
                said = True
            time.sleep(poll)
        previous = self._holder(f)  # a holder that left its name without releasing: it died
        if previous:
            self.notice = (f"took over a stale lock of {self.directory.name}: its holder "
                           f"({_holder_text(previous)}) is gone")
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started,
                            "argv": argv}) + "\n")
        f.flush()
        self.handle = f
        self.folder_fd = folder
        return self

    def release(self) -> None:
        """Empty the file, then drop the lock: an empty lock file is not stale."""
        if self.handle is None:
            return
        try:
            self.handle.seek(0)
            self.handle.truncate()
            self.handle.flush()
            _unlock(self.handle)
        except OSError:
            pass  # the OS drops the lock when the file is closed anyway
        self.handle.close()
        self.handle = None
        if self.folder_fd >= 0:
            os.close(self.folder_fd)  # drops the folder's lock
            self.folder_fd = -1

    def __enter__(self) -> ReportLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def build_lock(build_dir: Path) -> ReportLock:
    """The lock of a clone's build folder, held by a command for as long as it builds or runs what is
    built there: a second verify in the same clone waits instead of rebuilding an engine the first
    one is running (which ended as 'Text file busy')."""
    build_dir.mkdir(parents=True, exist_ok=True)
    return ReportLock(build_dir, what="is in use by another command of this clone",
                      advice="wait for it to end, or work in another clone")
