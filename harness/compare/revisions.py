"""Revisions of a compare: each git revision checked out once into a worktree in the cache (never in
the user's tree) and built there from its own engine.yaml. The working tree, uncommitted changes
included, is a revision too ("dirty"): its files are snapshotted into a git tree through a
temporary index, their objects written into the cache's own object folder (never the user's), and
checked out from there without a worktree. A build is trusted only with its completion stamp, written after it succeeded;
a killed checkout or build leaves no stamp and is redone. One lock per revision in the cache."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.builder.cmake import BuildResult, PartResult, build
from harness.errors import HarnessError
from harness.process import run_process
from harness.contract.config import Config, ProjectSpec, load_config

WORKTREE = "WORKTREE"  # the name of the working tree as a revision (HEAD's default)
CACHE_ENV = "KITE_COMPARE_CACHE"
GIT_TIMEOUT = 120.0
# a fixed author for the snapshot commit of a working tree: the same files give the same commit
_SNAPSHOT_ENV = {"GIT_AUTHOR_NAME": "kite compare", "GIT_AUTHOR_EMAIL": "compare@kite.invalid",
                 "GIT_COMMITTER_NAME": "kite compare", "GIT_COMMITTER_EMAIL": "compare@kite.invalid",
                 "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}


@dataclass(frozen=True)
class Revision:
    spec: str  # as the user wrote it (a git revision, or WORKTREE)
    commit: str  # the commit checked out (for the working tree: a snapshot commit on top of HEAD)
    tree: str  # the git tree of its files: the cache key (same files, same build)
    label: str  # short commit, "+dirty" for a working tree with uncommitted changes
    dirty: bool = False

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def default_cache(repo: Path) -> Path:
    """$KITE_COMPARE_CACHE (shared on purpose), else one folder per project: its checkouts are git
    worktrees of this clone, which another clone's compare must not use or prune."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    real = os.path.realpath(repo)
    key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(real).name)[:40] or "project"
    return Path(base) / "kite" / "compare" / f"{name}-{key}"


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """One git command (argv, never a shell); its stdout, or a HarnessError with git's message.
    Under the tree guard: should the harness be killed, git and its children (a checkout's
    writers) end with it."""
    r = run_process(["git", "-C", str(repo), *args], env, timeout=GIT_TIMEOUT, guard_group=True)
    if not r.ok:
        msg = (r.stderr.strip().splitlines() or [r.describe()])[-1]
        raise HarnessError(f"git {' '.join(args[:3])}: {msg}")
    return r.stdout


def repo_root(root: Path) -> Path:
    if not shutil.which("git"):
        raise HarnessError("compare needs git on PATH")
    return Path(git(root, "rev-parse", "--show-toplevel").strip())


def resolve(repo: Path, spec: str, objects: Path | None = None) -> Revision:
    """A git revision (anything `git rev-parse` takes), or WORKTREE: the files as they are now
    (their objects written into `objects`, the cache's, when given)."""
    if spec == WORKTREE:
        return snapshot(repo, objects)
    if spec.startswith("-"):
        raise HarnessError(f"{spec!r} is not a revision (it starts with '-')")
    r = run_process(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                     spec + "^{commit}"], timeout=GIT_TIMEOUT)
    if not r.ok or not r.stdout.strip():
        raise HarnessError(f"{spec!r} is not a commit of {repo}")
    commit = r.stdout.strip()
    tree = git(repo, "rev-parse", commit + "^{tree}").strip()
    return Revision(spec, commit, tree, commit[:10])


def object_env(repo: Path, objects: Path | None) -> dict[str, str]:
    """git's environment for writing a snapshot's objects into `objects` (the cache's own object
    folder), reading the repository's through it: the user's object database gets none of them.
    {} when objects is None."""
    if objects is None:
        return {}
    try:
        objects.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"compare cache {objects}: {e.strerror or e}") from None
    theirs = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "objects").strip())
    return {"GIT_OBJECT_DIRECTORY": str(objects.resolve()), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(theirs)}


def snapshot(repo: Path, objects: Path | None = None) -> Revision:
    """The working tree as a commit: HEAD's index plus every change and untracked file git does not
    ignore, written through a temporary index (the user's index is not touched) into `objects`."""
    head = git(repo, "rev-parse", "HEAD").strip()
    head_tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    store = object_env(repo, objects)
    with tempfile.TemporaryDirectory(prefix="kite-compare-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **store}
        git(repo, "read-tree", "HEAD", env=env)
        git(repo, "add", "--all", "--", ".", env=env)
        tree = git(repo, "write-tree", env=env).strip()
    if tree == head_tree:
        return Revision(WORKTREE, head, tree, head[:10])
    commit = git(repo, "commit-tree", tree, "-p", head, "-m", "kite compare: the working tree",
                 env={**_SNAPSHOT_ENV, **store}).strip()
    return Revision(WORKTREE, commit, tree, head[:10] + "+dirty", dirty=True)


def first_parent_path(repo: Path, good: str, bad: str) -> list[str]:
    """The commits after `good` up to `bad` along first parents, oldest first."""
    out = git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}", "--")
    return [ln for ln in out.split() if ln]


def parent(repo: Path, commit: str) -> str:
    return git(repo, "rev-parse", commit + "^").strip()


class Cache:
    """<dir>/<tree>/: `src/` (a git worktree of the revision; for a dirty working tree, its files),
    `checkout.done`, `build-<name>.json` (the stamp of a finished build); `<tree>.lock` serialises
    two compares on one revision; `<dir>/objects/`: the git objects of working-tree snapshots."""

    def __init__(self, directory: Path, repo: Path, say: Callable[[str], None]):
        self.dir = directory
        self.repo = repo
        self.say = say
        self.objects = directory / "objects"  # a dirty working tree's snapshot objects

    def _entry(self, rev: Revision) -> Path:
        d = self.dir / rev.tree
        if d.is_symlink():
            raise HarnessError(f"{d} is a symbolic link; the cache holds only its own folders")
        return d

    def _lock(self, rev: Revision) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / f"{rev.tree}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _forget(self, d: Path, src: Path) -> None:
        """Remove an unfinished or untrusted entry, and git's record of its worktree, even one left
        locked by a `worktree add` that was killed (prune alone keeps a locked one)."""
        run_process(["git", "-C", str(self.repo), "worktree", "remove", "--force", "--force", str(src)],
                    timeout=GIT_TIMEOUT, guard_group=True)  # fails harmlessly when git has no record
        if d.exists():
            shutil.rmtree(d)  # never follows a link inside d: a linked src goes, its target stays
        git(self.repo, "worktree", "prune")

    def checkout(self, rev: Revision) -> Path:
        """The revision's files in the cache (checked out once). An entry whose src or stamp is a
        link, or whose checkout did not finish, is removed and checked out again."""
        d = self._entry(rev)
        src = d / "src"
        done = d / "checkout.done"
        if not src.is_symlink() and not done.is_symlink() and done.is_file() and (rev.dirty or (src / ".git").is_file()):
            return src
        if d.exists() or src.is_symlink():  # nothing in an unfinished or linked entry is trusted
            self._forget(d, src)
        d.mkdir(parents=True)
        self.say(f"compare: checking out {rev.label} into {src}")
        if rev.dirty:  # the snapshot's objects are the cache's own: its files, written without a worktree
            with tempfile.TemporaryDirectory(prefix="kite-compare-index-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **object_env(self.repo, self.objects)}
                git(self.repo, "read-tree", rev.tree, env=env)
                git(self.repo, "checkout-index", "--all", "--force", f"--prefix={src}/", env=env)
        else:
            # twice --force: a path git still records as a locked worktree (a killed `add`) is taken
            git(self.repo, "worktree", "add", "--detach", "--force", "--force", str(src), rev.commit)
            if (src / ".gitmodules").is_file():  # the revision's submodules, as a checkout would have them
                git(src, "submodule", "update", "--init", "--recursive")
        done.write_text(rev.commit + "\n", encoding="utf-8")
        return src

    def build(self, rev: Revision, name: str) -> tuple[Config, BuildResult]:
        """Build `name` of the revision's own engine.yaml, once; later calls read the stamp. The
        cache's own files failing (a linked lock, a file where a folder goes, a full disk) is a
        HarnessError naming the file, not an internal error."""
        try:
            return self._build(rev, name)
        except OSError as e:
            raise HarnessError(f"compare cache {self.dir}: {e.filename or ''}: {e.strerror or e}") from None

    def _build(self, rev: Revision, name: str) -> tuple[Config, BuildResult]:
        fd = self._lock(rev)
        try:
            src = self.checkout(rev)
            try:
                cfg = load_config(src)
            except HarnessError as e:
                raise HarnessError(f"{rev.label}: {e}") from None
            if name not in cfg.builds:
                raise HarnessError(f"{rev.label}: its configs/engine.yaml has no build {name!r} "
                                   f"(builds: {', '.join(cfg.builds)})")
            for b in cfg.builds.values():  # a revision's prebuilt engine must be its own
                if b.prebuilt:
                    inside(cfg.bin_dir(b.name), src)
            cfg = reproducible(cfg, src)
            stamp = self._entry(rev) / f"build-{name}.json"
            if stamp.is_symlink() or stamp.exists():
                done = _trusted(stamp, cfg, name, src)
                if done is not None:
                    return cfg, done
                stamp.unlink()  # unreadable, or not what it names now: built again below
            broot = inside(cfg.build_root(name), src)
            if broot.exists():  # a build that did not finish
                shutil.rmtree(broot)
            res = build(cfg, name, progress=self.say)
            if res.engine_ok and res.module.status != "failed":
                tmp = stamp.with_suffix(".tmp")
                tmp.write_text(stamp_doc(res), encoding="utf-8")
                os.replace(tmp, stamp)
            return cfg, res
        finally:
            os.close(fd)


def inside(path: Path, root: Path) -> Path:
    """path, when it lies inside root with every link resolved; a revision that commits a link
    (build/ -> elsewhere) must not make the cache delete or build outside its checkout."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, base]) != base:
        raise HarnessError(f"{path} resolves to {real}, outside the checkout {root} (a link in the revision?)")
    return path


def reproducible(cfg: Config, src: Path) -> Config:
    """The revision's builds with the checkout's own path mapped away (-ffile-prefix-map), so that
    the same source gives the same binary in any cache folder."""
    flag = f"-ffile-prefix-map={src}=."

    def with_flag(p: ProjectSpec | None) -> ProjectSpec | None:
        if p is None:
            return None
        opts = dict(p.options)
        for key in ("CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS"):
            opts[key] = (opts[key] + " " + flag).strip() if key in opts else flag
        return dataclasses.replace(p, options=opts)

    builds = {n: dataclasses.replace(b, engine=with_flag(b.engine), extras=tuple(with_flag(x) for x in b.extras))
              for n, b in cfg.builds.items()}
    return dataclasses.replace(cfg, builds=builds)


def _trusted(stamp: Path, cfg: Config, name: str, src: Path) -> BuildResult | None:
    """The build a stamp of this cache records, when it still names what was built (trusted_stamp):
    inside the revision's own build folder or prebuilt folder. None: build again."""
    home = cfg.bin_dir(name).parent if not cfg.builds[name].prebuilt else cfg.bin_dir(name)
    return trusted_stamp(stamp, [home, src])


def trusted_stamp(stamp: Path, homes: list[Path]) -> BuildResult | None:
    """THE rule for a build's completion stamp, in every cache (a revision's, an external source's):
    a regular file (no link), the engine's and module's paths inside each of `homes`, and the engine
    and module with the sha256 they had when it was written. None: build again."""
    if stamp.is_symlink() or not stamp.is_file():
        return None
    try:
        doc = json.loads(stamp.read_text(encoding="utf-8"))
        done = _result_from(doc)
        for p in (done.engine_path, done.module_path):
            if p:
                for home in homes:
                    inside(Path(p), home)
        if not Path(done.engine_path).is_file() or done.to_json()["sha256"] != doc.get("sha256"):
            return None
    except (ValueError, KeyError, TypeError, AttributeError, HarnessError, OSError):
        return None
    return done


def stamp_doc(res: BuildResult) -> str:
    """What a completion stamp holds: the build, and the sha256 of what it built (trusted_stamp)."""
    return json.dumps({**dataclasses.asdict(res), "sha256": res.to_json()["sha256"]}, indent=1)


def _result_from(doc: dict[str, object]) -> BuildResult:
    parts = {k: PartResult(**doc[k]) for k in ("engine", "module")}  # type: ignore[arg-type]
    extras = {k: PartResult(**v) for k, v in (doc.get("extras") or {}).items()}  # type: ignore[union-attr]
    return BuildResult(str(doc["name"]), str(doc["bin_dir"]), str(doc["engine_path"]), str(doc["module_path"]),
                       parts["engine"], parts["module"], float(doc.get("seconds") or 0.0),  # type: ignore[arg-type]
                       dict(doc.get("options") or {}), extras)  # type: ignore[arg-type]
