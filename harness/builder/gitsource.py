"""An external source taken from a local git repository at one commit, instead of the pinned archive
(harness/builder/external.py): checked out into one persistent folder per source, so that a build
folder that follows it recompiles only what changed between two revisions.

Layout (under the external cache, harness/builder/external.py's cache_dir()):
  ext/<name>/git/    a bare clone of the repository sharing its objects (git clone --shared);
                     its HEAD is the commit checked out
  ext/<name>/src/    the work tree: the commit's files, with no .git inside, so that a build
                     stamps no commit into its binaries (llama.cpp's GGML_COMMIT, BUILD_COMMIT):
                     two revisions with the same files give the same binary
  ext/<name>/REPO    the repository the clone was made from (another repository: made again)
Folders named in `omit` are never checked out (a sparse checkout), e.g. test data the build does
not read. git only rewrites the files that differ, so the build tool sees new times on those
files only; a checkout is the commit's whole tree, so nothing of an older revision lingers."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from harness.errors import HarnessError
from harness.process import run_process

GIT_TIMEOUT = 600.0


class GitSourceError(HarnessError):
    pass


def _git(*args: str, cwd: Path | None = None) -> str:
    argv = ["git", *(["-C", str(cwd)] if cwd else []), *args]
    r = run_process(argv, timeout=GIT_TIMEOUT)
    if not r.ok:
        msg = (r.stderr.strip().splitlines() or [r.describe()])[-1]
        raise GitSourceError(f"git {' '.join(args[:3])}: {msg}")
    return r.stdout


def is_repository(repo: Path) -> bool:
    return (repo / ".git").exists() or (repo / "HEAD").is_file()


def tree(repo: Path, commit: str) -> str:
    """The git tree of `commit` (a full commit) in repo: the key of its files; or a clear error."""
    if not shutil.which("git"):
        raise GitSourceError("an external source from a git repository needs git on PATH")
    if not is_repository(repo):
        raise GitSourceError(f"{repo} is not a git repository")
    r = run_process(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                     commit + "^{tree}"], timeout=GIT_TIMEOUT)
    if not r.ok or not r.stdout.strip():
        raise GitSourceError(f"{commit} is not a commit of {repo}")
    return r.stdout.strip()


def folder(cache: Path, name: str) -> Path:
    return cache / "ext" / name


def lock(cache: Path, name: str) -> int:
    """An exclusive lock on the source's folder (its checkout and its build folders)."""
    d = folder(cache, name)
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def checkout(cache: Path, name: str, repo: Path, commit: str, omit: tuple[str, ...] = ()) -> Path:
    """The files of `commit` of `repo` in ext/<name>/src (call under lock())."""
    d = folder(cache, name)
    gitdir, src, marker = d / "git", d / "src", d / "REPO"
    key = f"{repo.resolve()}\nomit={','.join(sorted(omit))}\n"
    if not marker.is_file() or marker.read_text(encoding="utf-8") != key or not (gitdir / "HEAD").is_file():
        for x in (gitdir, src):
            if x.exists():
                shutil.rmtree(x)
        marker.unlink(missing_ok=True)
        _git("clone", "--quiet", "--bare", "--shared", str(repo.resolve()), str(gitdir))
        if omit:
            (gitdir / "info").mkdir(exist_ok=True)
            (gitdir / "info" / "sparse-checkout").write_text("/*\n" + "".join(f"!/{x}/\n" for x in omit))
            _git(f"--git-dir={gitdir}", "config", "core.sparseCheckout", "true")
        src.mkdir(parents=True)
        marker.write_text(key, encoding="utf-8")
    # a commit made after the clone: its objects are in the repository the clone shares
    _git(f"--git-dir={gitdir}", f"--work-tree={src}", "checkout", "--quiet", "--force", "--detach", commit)
    _git(f"--git-dir={gitdir}", f"--work-tree={src}", "clean", "--quiet", "-d", "--force", "-x")
    return src
