"""Reading every file the harness opens (criteria, registry, configs, reports, and what an engine
wrote: meta.json, dumps) so that any path fails cleanly: a directory, a FIFO or a device is refused
without blocking on it, a file over its size cap is refused before it is read, a read ends within a
time limit, and text that is binary or not UTF-8 is named as such. An engine's files are read only
inside their folder: no link out of it, and of the exact size their shape gives (read_inside)."""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# size caps per kind of file: far above any real one, far below what would hurt the harness
MAX_CRITERIA = 4 * MIB
MAX_REGISTRY = 16 * MIB
MAX_CONFIG = 4 * MIB
MAX_REPORT = 256 * MIB
MAX_META = 64 * MIB
# one engine dump whose size nothing states (no shape in meta.json): far above a real one (logits
# of 100 positions of a 248k vocabulary: 100 MB), far below what two of them in memory would cost
MAX_DUMP = 2 * GIB
# a dump with a shape is read only when exactly its size, up to this: F5's logits after 3000
# tokens of a 248k vocabulary are 3 GB (the 2 GiB cap above, applied to them, failed F5)
MAX_SHAPED_DUMP = 16 * GIB
MAX_BUILT = 1 * GIB  # a built file an artifact criterion reads (a CUDA module with its fat binary)

READ_SECONDS = 300.0  # one file's read: a stalled file system ends in an error, not a hang
CHUNK = 4 * MIB
clock = time.monotonic  # the read deadline's clock (tests plant one)


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


def _refused_os(name: str, e: OSError) -> FileRefused:
    return FileRefused(f"{name}: cannot read: {e.strerror or e}")


def _open_regular(path: Path | str, name: str, nofollow: bool = False) -> tuple[int, os.stat_result]:
    """(descriptor, fstat) of a regular file opened non-blocking (a FIFO swapped in after a check
    does not block either); with nofollow a link at the last part is refused. FileNotFoundError
    passes through."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        if nofollow and e.errno == errno.ELOOP:
            raise FileRefused(f"{name}: is a symbolic link") from None
        if e.errno == errno.ENXIO:  # a socket
            raise FileRefused(f"{name}: is a socket, not a regular file") from None
        raise _refused_os(name, e) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{name}: is {_kind(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read_fd(fd: int, name: str, size: int, max_bytes: int, seconds: float, exact: bool = False) -> bytearray:
    """At most max_bytes of the open regular file fd (fstat said size), in chunks, within seconds
    (a stalled file system gives an error, not a hang); closes fd. exact: a file that grew since
    the fstat is refused (else what is there, up to max_bytes, is read)."""
    buf = bytearray(min(size, max_bytes) + 1)  # one more: a file that grew since the fstat shows it
    got = 0
    deadline = clock() + seconds

    def read(f: Any, into: memoryview) -> int:
        if clock() > deadline:
            raise FileRefused(f"{name}: not read within {seconds:g} s ({got} of {size} bytes): a stalled file system?")
        try:
            return f.readinto(into) or 0
        except OSError as e:
            raise _refused_os(name, e) from None

    with os.fdopen(fd, "rb", buffering=0) as f:
        with memoryview(buf) as view:
            while got < len(buf):
                with view[got:got + CHUNK] as chunk:
                    n = read(f, chunk)
                if not n:
                    break
                got += n
        del buf[got:]
        if got > size and exact:
            raise FileRefused(f"{name}: grew while it was read ({size} bytes, then more)")
        while got > size and got <= max_bytes:  # grew: the rest, up to the cap
            more = bytearray(CHUNK)
            with memoryview(more) as view:
                n = read(f, view)
            if not n:
                break
            buf += more[:n]
            got += n
    if got > max_bytes:
        raise FileRefused(f"{name}: over the {_cap(max_bytes)} allowed for this file")
    return buf


def check_regular(path: Path, max_bytes: int, shown: str | None = None) -> os.stat_result:
    """stat of path (links followed), a regular file of at most max_bytes, else FileRefused;
    FileNotFoundError passes through. Nothing is opened: a FIFO cannot block it."""
    name = shown or str(path)
    try:
        st = os.stat(path)  # the type before any open(): opening a FIFO for reading would block
    except FileNotFoundError:
        raise
    except OSError as e:
        raise _refused_os(name, e) from None
    except ValueError:  # a NUL byte in the name
        raise FileRefused(f"{name!r}: cannot read: the name holds a NUL byte") from None
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"{name}: is {_kind(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise FileRefused(f"{name}: {st.st_size} bytes, over the {_cap(max_bytes)} allowed for this file")
    return st


def read_bytes(path: Path, max_bytes: int, shown: str | None = None) -> bytes:
    """The bytes of a regular file of at most max_bytes. FileNotFoundError passes through (callers
    decide whether a missing file is an error); every other problem is a FileRefused."""
    name = shown or str(path)
    check_regular(path, max_bytes, shown)  # the type before any open(): opening a FIFO for reading would block
    fd, st = _open_regular(path, name)
    if st.st_size > max_bytes:  # swapped for a larger file since
        os.close(fd)
        raise FileRefused(f"{name}: {st.st_size} bytes, over the {_cap(max_bytes)} allowed for this file")
    return bytes(_read_fd(fd, name, st.st_size, max_bytes, READ_SECONDS))


def read_inside(folder: Path, name: str, max_bytes: int, size: int | None = None, size_why: str = "",
                shown: str | None = None) -> bytearray:
    """The bytes of the file `name` of `folder`, a folder another program wrote (an engine's dump
    folder), read so that nothing in it can turn the read into another file's: the folder is no
    link, the file resolves inside it and is a regular file (opened O_NOFOLLOW|O_NONBLOCK, checked
    by fstat), of at most max_bytes, and of exactly `size` bytes when given (else refused unread:
    "N bytes but {size_why}"), read within READ_SECONDS. FileNotFoundError passes through."""
    shown = shown or name
    fd, st = open_inside(folder, name, max_bytes, size, size_why, shown)
    return _read_fd(fd, shown, st.st_size, max_bytes, READ_SECONDS, exact=True)


def chunks_inside(folder: Path, name: str, size: int, shown: str | None = None) -> Iterator[bytes]:
    """The file as read_inside checks it (exactly size bytes), in pieces of at most CHUNK bytes,
    within READ_SECONDS in all: a file of any size is read in bounded memory."""
    shown = shown or name
    fd, _ = open_inside(folder, name, size, size, f"{size} expected", shown)
    deadline, got = clock() + READ_SECONDS, 0
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            if clock() > deadline:
                raise FileRefused(f"{shown}: not read within {READ_SECONDS:g} s ({got} of {size} bytes): "
                                  "a stalled file system?")
            try:
                piece = f.read(CHUNK)
                while piece and len(piece) < CHUNK and (more := f.read(CHUNK - len(piece))):
                    piece += more  # whole pieces: two files of one size give pieces at the same offsets
            except OSError as e:
                raise _refused_os(shown, e) from None
            if not piece:
                break
            got += len(piece)
            if got > size:
                raise FileRefused(f"{shown}: grew while it was read ({size} bytes, then more)")
            yield piece
    if got != size:
        raise FileRefused(f"{shown}: shrank while it was read ({got} of {size} bytes)")


def open_inside(folder: Path, name: str, max_bytes: int, size: int | None = None, size_why: str = "",
                shown: str | None = None) -> tuple[int, os.stat_result]:
    """(descriptor, fstat) of the file read_inside reads, after all of its checks; the caller
    closes it."""
    shown = shown or name
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise FileRefused(f"{shown}: cannot read its folder {folder}: {getattr(e, 'strerror', None) or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise FileRefused(f"{shown}: its folder {folder.name} is a symbolic link (to {os.readlink(folder)})")
    if not stat.S_ISDIR(st.st_mode):
        raise FileRefused(f"{shown}: its folder {folder.name} is {_kind(st.st_mode)}, not a folder")
    base, real = resolve(folder, shown), resolve(folder / name, shown)
    if base not in real.parents:
        raise FileRefused(f"{shown}: a link out of its folder (to {real}); it must be a file the engine wrote there")
    fd, st = _open_regular(real, shown, nofollow=True)
    if size is not None and st.st_size != size:
        os.close(fd)
        raise FileRefused(f"{shown}: {st.st_size} bytes but {size_why or f'{size} expected'}")
    if st.st_size > max_bytes:
        os.close(fd)
        raise FileRefused(f"{shown}: {st.st_size} bytes, over the {_cap(max_bytes)} allowed for this file")
    return fd, st


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
