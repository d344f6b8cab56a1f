"""Writes and removals inside a folder the harness owns (a report folder) that never follow a link
out of it. The root (the folder the user named) is taken as it is; below it every folder is opened
with O_NOFOLLOW|O_DIRECTORY, each file with O_NOFOLLOW and checked with fstat, and removals use
shutil.rmtree's link-safe walk. A symbolic link planted there (by hand, by an engine, before a
`verify --resume`) is refused with an error naming it, so nothing outside the folder is truncated,
written or removed through it."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

from harness.errors import HarnessError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# folders walked by descriptor (openat), so a link swapped in after a check is not followed either;
# elsewhere (Windows) each part is checked with lstat before the path is used
_BY_FD = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd


class LinkRefused(HarnessError):
    """A path inside the folder is a symbolic link (or not what it must be); nothing was done."""


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    parts = [p for p in PurePosixPath(Path(rel).as_posix()).parts if p not in ("", ".")]
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"{rel}: not a path inside the folder")
    return parts


def _refuse(root: Path, parts: list[str], what: str) -> LinkRefused:
    return LinkRefused(f"{root.joinpath(*parts)}: {what}; nothing in a report folder is followed out of it "
                       "(remove it, or use another folder)")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISREG(mode):
        return "is a file, not a folder"
    return "is not a regular file or folder (a FIFO, socket or device)"


def _lstat(name: str, fd: int | None) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=fd) if fd is not None else os.lstat(name)
    except FileNotFoundError:
        return None


@contextmanager
def _folder(root: Path, parts: list[str], create: bool) -> Iterator[tuple[int | None, Path]]:
    """(descriptor or None, path) of root/parts, each part a real folder (made when create);
    FileNotFoundError when one is missing and not create."""
    path = root
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC) if _BY_FD else None
    try:
        for i, p in enumerate(parts):
            here = p if fd is not None else str(path / p)
            st = _lstat(here, fd)
            if st is None:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path / p))
                try:
                    os.mkdir(here, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                st = _lstat(here, fd)
            if st is None or not stat.S_ISDIR(st.st_mode):
                raise _refuse(root, parts[: i + 1], "missing" if st is None else _kind(st.st_mode))
            if fd is not None:
                try:
                    nfd = os.open(p, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                except OSError as e:  # swapped for a link or a file since the lstat
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _refuse(root, parts[: i + 1], "is a symbolic link") from None
                    raise
                os.close(fd)
                fd = nfd
            path = path / p
        yield fd, path
    finally:
        if fd is not None:
            os.close(fd)


def makedirs(root: Path, rel: str | os.PathLike[str]) -> Path:
    """root/rel as a folder, made where missing; every part below root a real folder, no link."""
    parts = _parts(rel)
    with _folder(root, parts, create=True) as (_, path):
        return path


def open_file(root: Path, rel: str | os.PathLike[str], flags: int = os.O_WRONLY | os.O_CREAT,
              truncate: bool = False) -> int:
    """A descriptor of the regular file root/rel (its folders made), opened without following a
    link and without blocking on a FIFO; opened for writing, a file with other hard links is
    refused (writing it would change the other names too, perhaps outside the folder)."""
    parts = _parts(rel)
    with _folder(root, parts[:-1], create=True) as (dfd, path):
        name = parts[-1] if dfd is not None else str(path / parts[-1])
        if dfd is None:
            st = _lstat(name, None)
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise _refuse(root, parts, "is a symbolic link")
        try:
            fd = os.open(name, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC | getattr(os, "O_BINARY", 0), 0o666,
                         dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _refuse(root, parts, "is a symbolic link") from None
            if e.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing without blocking
                raise _refuse(root, parts, "is a FIFO (named pipe), not a regular file") from None
            raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(root, parts, _kind(st.st_mode))
        if flags & (os.O_WRONLY | os.O_RDWR) and st.st_nlink > 1:
            raise _refuse(root, parts, f"has {st.st_nlink - 1} other hard link(s)")
        if truncate:
            os.ftruncate(fd, 0)
        if _NONBLOCK and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_bytes(root: Path, rel: str | os.PathLike[str], data: bytes) -> Path:
    """Write (create or replace the content of) root/rel, following no link."""
    with os.fdopen(open_file(root, rel, os.O_WRONLY | os.O_CREAT, truncate=True), "wb") as f:
        f.write(data)
    return root / rel


def write_text(root: Path, rel: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(root, rel, text.encode("utf-8"))


def copy_in(src: Path, root: Path, rel: str | os.PathLike[str]) -> Path:
    """Copy the file src (anywhere) to root/rel, following no link on the way in."""
    with open(src, "rb") as fi, os.fdopen(open_file(root, rel, os.O_WRONLY | os.O_CREAT, truncate=True), "wb") as fo:
        shutil.copyfileobj(fi, fo)
    return root / rel


def rmtree(root: Path, rel: str | os.PathLike[str]) -> None:
    """Remove root/rel (a folder with all it holds, or a file) if present. Links inside it are
    removed, never followed; a link at rel itself, or on the way to it, is refused."""
    parts = _parts(rel)
    try:
        with _folder(root, parts[:-1], create=False) as (dfd, path):
            name = parts[-1] if dfd is not None else str(path / parts[-1])
            st = _lstat(name, dfd)
            if st is None:
                return
            if stat.S_ISLNK(st.st_mode):
                raise _refuse(root, parts, "is a symbolic link")
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=dfd)
            elif dfd is not None and sys.version_info >= (3, 11):
                shutil.rmtree(name, dir_fd=dfd)  # the fd-based walk: never follows a link inside
            else:
                shutil.rmtree(path / parts[-1])  # refuses a link root; never follows one inside where
                # shutil.rmtree.avoids_symlink_attacks (Linux, macOS)
    except FileNotFoundError:
        return  # a folder on the way is missing: nothing to remove


def move(root: Path, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename root/src to root/dst (dst's folders made; dst must not exist), following no link on
    the way to either; a link at src itself is refused (it would be carried, not its target)."""
    sparts, dparts = _parts(src), _parts(dst)
    with _folder(root, sparts[:-1], create=False) as (sfd, spath):
        sname = sparts[-1] if sfd is not None else str(spath / sparts[-1])
        st = _lstat(sname, sfd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise _refuse(root, sparts, "is a symbolic link")
        with _folder(root, dparts[:-1], create=True) as (dfd, dpath):
            dname = dparts[-1] if dfd is not None else str(dpath / dparts[-1])
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)


def rmdir_if_empty(root: Path, rel: str | os.PathLike[str]) -> None:
    """Remove the folder root/rel when it is a real, empty folder; anything else is left alone."""
    parts = _parts(rel)
    try:
        with _folder(root, parts[:-1], create=False) as (dfd, path):
            name = parts[-1] if dfd is not None else str(path / parts[-1])
            st = _lstat(name, dfd)
            if st is not None and stat.S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=dfd)
    except OSError:
        pass  # missing, not empty, or not removable: it stays


def open_text(root: Path, rel: str | os.PathLike[str], flags: int, mode: str) -> IO[str]:
    """open_file as a UTF-8 text stream (mode as for open(): "r+", "w")."""
    return os.fdopen(open_file(root, rel, flags), mode, encoding="utf-8")
