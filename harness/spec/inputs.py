"""Reading the harness's input files (criteria, registry, configs, reports, meta.json) so that any
path fails cleanly: a directory, a FIFO or a device is refused without blocking on it, a file over
its size cap is refused before it is read, and text that is binary or not UTF-8 is named as such."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

KIB = 1024
MIB = 1024 * KIB

# size caps per kind of file: far above any real one, far below what would hurt the harness
MAX_CRITERIA = 4 * MIB
MAX_REGISTRY = 16 * MIB
MAX_CONFIG = 4 * MIB
MAX_REPORT = 256 * MIB
MAX_META = 64 * MIB


class FileRefused(HarnessError):
    """The file cannot be used; the message names it and says why in one line."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _cap(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n} bytes"


def resolve(path: Path, shown: str | None = None) -> Path:
    """path.resolve(), with a loop of symbolic links or a NUL byte in the name as a FileRefused
    naming the path (resolve() raises RuntimeError for a loop on Python 3.11 and 3.12)."""
    try:
        return path.resolve()
    except RuntimeError:
        raise FileRefused(f"{shown or path}: cannot resolve it: a loop of symbolic links") from None
    except (OSError, ValueError) as e:
        raise FileRefused(f"{shown or path}: cannot resolve it: {getattr(e, 'strerror', None) or e}") from None


def read_bytes(path: Path, max_bytes: int, shown: str | None = None) -> bytes:
    """The bytes of a regular file of at most max_bytes. FileNotFoundError passes through (callers
    decide whether a missing file is an error); every other problem is a FileRefused."""
    name = shown or str(path)
    try:
        st = os.stat(path)  # the type before any open(): opening a FIFO for reading would block
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FileRefused(f"{name}: cannot read: {e.strerror or e}") from None
    except ValueError:  # a NUL byte in the name
        raise FileRefused(f"{name!r}: cannot read: the name holds a NUL byte") from None
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"{name}: is {_kind(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise FileRefused(f"{name}: {st.st_size} bytes, over the {_cap(max_bytes)} allowed for this file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO swapped in after the stat does not block either
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FileRefused(f"{name}: cannot read: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{name}: is {_kind(st.st_mode)}, not a regular file")
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise FileRefused(f"{name}: cannot read: {e.strerror or e}") from None
    if len(data) > max_bytes:  # grew after the stat
        raise FileRefused(f"{name}: over the {_cap(max_bytes)} allowed for this file")
    return data


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text without NUL bytes (a NUL means binary data), else FileRefused."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise FileRefused(f"{name}: UTF-16 text (byte order mark); save it as UTF-8")
    nul = data.find(b"\0")
    if nul >= 0:
        raise FileRefused(f"{name}: binary data (NUL byte at offset {nul}), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileRefused(f"{name}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def read_text(path: Path, max_bytes: int, shown: str | None = None) -> str:
    """read_bytes + decode_text."""
    return decode_text(read_bytes(path, max_bytes, shown), shown or str(path))


def json_loads(text: str | bytes) -> Any:
    """json.loads, with nesting too deep for the parser (RecursionError) as a ValueError like any
    other malformed JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
