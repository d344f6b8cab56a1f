"""The console (stdout, stderr) as a side channel: a write that fails (the reader of a pipe went
away: `verify | head -1`, `report | true`; a full disk) never changes what a command does or its
exit status. From its first failed write on, a stream's descriptor points at /dev/null, so the
run goes on, writes its report, and exits with its verdict. Text written is made printable
(harness/text.py): an engine's escape sequence or bidi control never reaches the terminal; bytes
written to `.buffer` (`harness run` copying the engine's output) pass as they are."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any

from harness.text import printable


class _State:
    """One console descriptor's fate, shared by its text stream and its byte buffer."""

    def __init__(self, name: str, stream: Any):
        self.name = name
        self.dropped = False
        try:
            self.fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stream (tests): nothing to redirect
            self.fd = None

    def drop(self, error: OSError | ValueError) -> None:
        if self.dropped:
            return
        self.dropped = True
        if self.fd is not None:
            try:  # later writes and the buffer's pending bytes (flushed at exit) go nowhere, quietly
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self.fd)
                os.close(null)
            except OSError:
                pass
        if getattr(error, "errno", None) not in (errno.EPIPE, errno.ESHUTDOWN) and self.name == "stdout":
            # not a reader that left: say so once, where it can still be read
            try:
                sys.__stderr__.write(f"harness: warning: cannot write to stdout ({error}); the rest of the "
                                     "output is dropped\n")
                sys.__stderr__.flush()
            except (OSError, ValueError, AttributeError):
                pass


class Guarded:
    """A stream whose write and flush never raise OSError (nor ValueError of a closed file)."""

    def __init__(self, stream: Any, state: _State):
        self._stream = stream
        self._state = state

    def write(self, data: Any) -> int:
        if not self._state.dropped:
            try:
                self._stream.write(printable(data) if isinstance(data, str) else data)
                return len(data)
            except (OSError, ValueError) as e:
                self._state.drop(e)
        return len(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._state.dropped:
            try:
                self._stream.flush()
                return
            except (OSError, ValueError) as e:
                self._state.drop(e)
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()  # pending bytes now go to /dev/null: nothing fails at exit

    @property
    def buffer(self) -> Guarded:
        return Guarded(self._stream.buffer, self._state)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """sys.stdout and sys.stderr guarded for the duration (restored after; flushed, never raising)."""
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None and not isinstance(sys.stdout, Guarded):
        sys.stdout = Guarded(sys.stdout, _State("stdout", sys.stdout))  # type: ignore[assignment]
    if sys.stderr is not None and not isinstance(sys.stderr, Guarded):
        sys.stderr = Guarded(sys.stderr, _State("stderr", sys.stderr))  # type: ignore[assignment]
    try:
        yield
    finally:
        for s in (sys.stdout, sys.stderr):
            if isinstance(s, Guarded):
                s.flush()
        sys.stdout, sys.stderr = saved
